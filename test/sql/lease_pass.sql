-- cosid.lease_pass (issue 26): a keeper's renewals and releases of one pass in one store
-- transaction.  Each lease is checked as cosid.renew/cosid.release check it: a lease whose
-- fence moved answers no row (lost) while the others of the pass are renewed; the privilege
-- rules are renew's and release's (cosid_keeper only, and only the store role that acquired
-- a lease renews or releases it); anything refused changes nothing.
SELECT cosid_namespace_create('batch', slot_bits => 3);
CREATE ROLE pass_one LOGIN IN ROLE cosid_keeper;
CREATE ROLE pass_two LOGIN IN ROLE cosid_keeper;
CREATE ROLE pass_app;
SET SESSION AUTHORIZATION pass_one;
SELECT slot AS s1, fence AS f1 FROM cosid.acquire('batch', 'one', '00000000-0000-0000-0000-0000000000b1', 60000) \gset
SELECT slot AS s2, fence AS f2 FROM cosid.acquire('batch', 'one', '00000000-0000-0000-0000-0000000000b1', 60000) \gset
SELECT slot AS s3, fence AS f3 FROM cosid.acquire('batch', 'one', '00000000-0000-0000-0000-0000000000b1', 60000) \gset
RESET SESSION AUTHORIZATION;
-- (the rows of batch, which a refused call names, and which a raise would change too: the
-- keeper's own leases of other namespaces renew meanwhile)
SELECT md5(string_agg(l::text, ',' ORDER BY slot)) AS before FROM cosid.lease l WHERE namespace = 'batch' \gset

-- not for ordinary roles, nor for another keeper role
SET ROLE pass_app;
SELECT expect_error(format($$SELECT * FROM cosid.lease_pass('00000000-0000-0000-0000-0000000000b1', 60000,
    '{f}', '{batch}', '{%s}', '{%s}', '{0}')$$, :s1, :f1));
RESET ROLE;
SET SESSION AUTHORIZATION pass_two;
SELECT expect_error(format($$SELECT * FROM cosid.lease_pass('00000000-0000-0000-0000-0000000000b1', 60000,
    '{f,t}', '{batch,batch}', '{%s,%s}', '{%s,%s}', '{0,0}')$$, :s1, :s2, :f1, :f2));
-- arrays of different lengths
SELECT expect_error($$SELECT * FROM cosid.lease_pass('00000000-0000-0000-0000-0000000000b1', 60000,
    '{f}', '{batch,batch}', '{0}', '{1}', '{0}')$$);
RESET SESSION AUTHORIZATION;
SELECT md5(string_agg(l::text, ',' ORDER BY slot)) = :'before' AS nothing_changed FROM cosid.lease l WHERE namespace = 'batch';

-- The owner: lease 1 renewed, lease 2 with a stale fence (lost: no row), lease 3 released.
SET SESSION AUTHORIZATION pass_one;
SELECT ord, slot = CASE ord WHEN 1 THEN :s1 ELSE :s3 END AS its_slot,
       fence - CASE ord WHEN 1 THEN :f1 ELSE :f3 END AS fence_moved,
       expires_at IS NOT NULL AS renewed, ceiling >= expires_at AS ceiling_covers_expiry
  FROM cosid.lease_pass('00000000-0000-0000-0000-0000000000b1', 60000, '{f,f,t}', '{batch,batch,batch}',
                        ARRAY[:s1, :s2, :s3], ARRAY[:f1, :f2 + 7, :f3], '{0,0,0}')
 ORDER BY ord;
-- an empty pass answers nothing
SELECT count(*) AS empty_pass FROM cosid.lease_pass('00000000-0000-0000-0000-0000000000b1', 60000, '{}', '{}', '{}', '{}', '{}');
RESET SESSION AUTHORIZATION;
SELECT slot = :s1 AS s1, incarnation IS NOT NULL AS held, fence - :f1 AS fence_moved FROM cosid.lease
 WHERE namespace = 'batch' AND slot = :s1;
SELECT incarnation IS NOT NULL AS s2_still_held, fence = :f2 AS s2_fence_unchanged FROM cosid.lease
 WHERE namespace = 'batch' AND slot = :s2;
SELECT incarnation IS NULL AS s3_released, fence = :f3 + 1 AS s3_fence_moved FROM cosid.lease
 WHERE namespace = 'batch' AND slot = :s3;
SELECT pg_catalog.has_function_privilege('public', 'cosid.lease_pass(uuid, bigint, boolean[], text[], int[], bigint[], bigint[])', 'EXECUTE') AS public_may_call,
       pg_catalog.has_function_privilege('cosid_keeper', 'cosid.lease_pass(uuid, bigint, boolean[], text[], int[], bigint[], bigint[])', 'EXECUTE') AS keeper_may_call;

-- A renewal rewrites its lease row on the row's own page (a heap-only update, no index entry):
-- the lease table keeps room on each page for one more version of every row (fillfactor 50).
-- Packed full, nearly no renewal was (0 to 10 of 5,000).
SELECT reloptions AS lease_table_options FROM pg_class WHERE oid = 'cosid.lease'::regclass;
SELECT cosid_namespace_create('hot', slot_bits => 7);
CREATE TEMP TABLE hot_leases AS
SELECT g, a.slot, a.fence
  FROM generate_series(1, 100) g,
       cosid.acquire('hot', 'hot' || g, ('00000000-0000-0000-0000-' || lpad(g::text, 12, '0'))::uuid, 60000) a;
-- (in one transaction, nothing flushes the session's counts meanwhile: the difference is the
-- renewals')
BEGIN;
SELECT n_tup_upd AS upd0, n_tup_hot_upd AS hot0 FROM pg_stat_xact_user_tables WHERE relid = 'cosid.lease'::regclass \gset
SELECT count(*) AS renewed
  FROM hot_leases h, cosid.renew('hot', h.slot, ('00000000-0000-0000-0000-' || lpad(h.g::text, 12, '0'))::uuid, h.fence, 60000) r;
SELECT n_tup_upd - :upd0 AS updates, n_tup_hot_upd - :hot0 >= 90 AS heap_only
  FROM pg_stat_xact_user_tables WHERE relid = 'cosid.lease'::regclass;
COMMIT;
SELECT count(*) AS hot_revoked FROM hot_leases h, cosid.revoke('hot', h.slot) r;

-- A pass of renewals only is one UPDATE and answers as cosid.renew lease by
-- lease: every lease renewed at one store now, with the granted ttl and the namespace's
-- tolerance; a lease named twice answers twice; an expired lease is revived; a lost one answers
-- nothing while the others renew; a missing namespace, a bad ttl and another role's lease are
-- refused with renew's errors, and a refused pass changes nothing.
SELECT cosid_namespace_create('pass_set', slot_bits => 3);
SELECT tolerance_ms AS tol FROM cosid.namespace WHERE name = 'pass_set' \gset
SELECT least(20000, max_ttl_ms) AS granted FROM cosid.store_state \gset
SET SESSION AUTHORIZATION pass_one;
SELECT slot AS t1, fence AS g1 FROM cosid.acquire('pass_set', 'one', '00000000-0000-0000-0000-0000000000b2', 20000) \gset
SELECT slot AS t2, fence AS g2 FROM cosid.acquire('pass_set', 'one', '00000000-0000-0000-0000-0000000000b2', 20000) \gset
SELECT slot AS t3, fence AS g3 FROM cosid.acquire('pass_set', 'one', '00000000-0000-0000-0000-0000000000b2', 20000) \gset
SELECT ord, slot = (ARRAY[:t1, :t2, :t3])[ord] AS its_slot, fence = (ARRAY[:g1, :g2, :g3])[ord] AS its_fence,
       expires_at = store_now + :granted AS ttl_granted, ceiling = greatest(floor, store_now + :granted + :tol) AS ceiling_rule,
       next_floor = ceiling AS next_floor_is_ceiling, min(store_now) OVER () = max(store_now) OVER () AS one_store_now
  FROM cosid.lease_pass('00000000-0000-0000-0000-0000000000b2', 20000, '{f,f,f}', '{pass_set,pass_set,pass_set}',
                        ARRAY[:t1, :t2, :t3], ARRAY[:g1, :g2, :g3], '{0,0,0}')
 ORDER BY ord;
SELECT ord, slot = :t1 AS its_slot, expires_at IS NOT NULL AS renewed
  FROM cosid.lease_pass('00000000-0000-0000-0000-0000000000b2', 20000, '{f,f}', '{pass_set,pass_set}',
                        ARRAY[:t1, :t1], ARRAY[:g1, :g1], '{0,0}')
 ORDER BY ord;
SELECT ord, slot = (ARRAY[:t1, :t2, :t3])[ord] AS its_slot
  FROM cosid.lease_pass('00000000-0000-0000-0000-0000000000b2', 20000, '{f,f,f}', '{pass_set,pass_set,pass_set}',
                        ARRAY[:t1, :t2, :t3], ARRAY[:g1, :g2 + 7, :g3], '{0,0,0}')
 ORDER BY ord;
-- arrays that do not start at 1 are indexed as the loop indexes them, element k of each
-- (here the slot array's element 1 is its second: one lease, renewed as ord 1)
SELECT ord, slot = :t2 AS indexed_from_1
  FROM cosid.lease_pass('00000000-0000-0000-0000-0000000000b2', 20000, '{f,f}', '{pass_set,pass_set}',
                        ('[0:1]={' || :t1 || ',' || :t2 || '}')::int[], ARRAY[:g2, :g2], '{0,0}')
 ORDER BY ord;
RESET SESSION AUTHORIZATION;
SELECT md5(string_agg(l::text, ',' ORDER BY slot)) AS before_set FROM cosid.lease l WHERE namespace = 'pass_set' \gset
SET SESSION AUTHORIZATION pass_one;
SELECT expect_error(format($$SELECT * FROM cosid.lease_pass('00000000-0000-0000-0000-0000000000b2', 20000,
    '{f,f}', '{pass_set,pass_nope}', '{%s,%s}', '{%s,%s}', '{0,0}')$$, :t1, :t2, :g1, :g2));
SELECT expect_error(format($$SELECT * FROM cosid.lease_pass('00000000-0000-0000-0000-0000000000b2', 20000,
    '{f,f}', '{pass_nope,pass_set}', '{%s,%s}', '{%s,%s}', '{0,0}')$$, :t1, :t2, :g1, :g2));
SELECT expect_error(format($$SELECT * FROM cosid.lease_pass('00000000-0000-0000-0000-0000000000b2', 20000,
    '{f,f}', ARRAY[NULL, 'pass_set'], '{%s,%s}', '{%s,%s}', '{0,0}')$$, :t1, :t2, :g1, :g2));
SELECT expect_error(format($$SELECT * FROM cosid.lease_pass('00000000-0000-0000-0000-0000000000b2', 0,
    '{f,f}', '{pass_set,pass_set}', '{%s,%s}', '{%s,%s}', '{0,0}')$$, :t1, :t2, :g1, :g2));
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION pass_two;
SELECT expect_error(format($$SELECT * FROM cosid.lease_pass('00000000-0000-0000-0000-0000000000b2', 20000,
    '{f,f}', '{pass_set,pass_set}', '{%s,%s}', '{%s,%s}', '{0,0}')$$, :t1, :t2, :g1, :g2));
RESET SESSION AUTHORIZATION;
SELECT md5(string_agg(l::text, ',' ORDER BY slot)) = :'before_set' AS refused_changed_nothing
  FROM cosid.lease l WHERE namespace = 'pass_set';
-- past every lease's expiry (the store's clock moved on): lease 2 renewed alone first, then a
-- pass of lease 1 (expired: revived) and lease 2 (live)
SET cosid.store_clock_offset = 25000;
SET SESSION AUTHORIZATION pass_one;
SELECT count(*) AS renewed_alone FROM cosid.renew('pass_set', :t2, '00000000-0000-0000-0000-0000000000b2', :g2, 20000);
SELECT ord, expires_at = store_now + :granted AS revived_or_renewed
  FROM cosid.lease_pass('00000000-0000-0000-0000-0000000000b2', 20000, '{f,f}', '{pass_set,pass_set}',
                        ARRAY[:t1, :t2], ARRAY[:g1, :g2], '{0,0}')
 ORDER BY ord;
RESET SESSION AUTHORIZATION;
RESET cosid.store_clock_offset;
-- A pass of an expired lease to revive at the role's cap and a live one no store role holds
-- yet (acquired before 1.4): answered lease by lease in order, as cosid.renew answers it.  The
-- revival counts the role's live leases before the other one is renewed (and given the role):
-- both renewed.
SELECT count(*) AS pass_set_cleared FROM generate_series(0, 7) s, cosid.revoke('pass_set', s) r;
SET SESSION AUTHORIZATION pass_one;
SELECT slot AS c1, fence AS h1 FROM cosid.acquire('pass_set', 'one', '00000000-0000-0000-0000-0000000000b3', 60000) \gset
SELECT slot AS c2, fence AS h2 FROM cosid.acquire('pass_set', 'one', '00000000-0000-0000-0000-0000000000b3', 1000) \gset
RESET SESSION AUTHORIZATION;
UPDATE cosid.lease SET owner_role = NULL WHERE namespace = 'pass_set' AND slot = :c1;
SELECT role_name, max_leases FROM cosid_lease_cap(1, role => 'pass_one');
SET cosid.store_clock_offset = 10000;
SET SESSION AUTHORIZATION pass_one;
SELECT ord, slot = (ARRAY[:c2, :c1])[ord] AS its_slot, expires_at >= store_now + :granted AS renewed
  FROM cosid.lease_pass('00000000-0000-0000-0000-0000000000b3', 20000, '{f,f}', '{pass_set,pass_set}',
                        ARRAY[:c2, :c1], ARRAY[:h2, :h1], '{0,0}')
 ORDER BY ord;
RESET SESSION AUTHORIZATION;
RESET cosid.store_clock_offset;
SELECT role_name, max_leases FROM cosid_lease_cap(NULL, role => 'pass_one');
SELECT count(*) AS pass_set_revoked FROM generate_series(0, 7) s, cosid.revoke('pass_set', s) r;

SELECT count(*) AS revoked FROM generate_series(0, 7) s, cosid.revoke('batch', s) r;

-- cosid.acquire_many: acquires in several namespaces in one transaction, each cosid.acquire's
-- answer with its place; an error in one (an unknown namespace) rolls back all of them; bad
-- arrays are refused; not for ordinary roles.
SELECT cosid_namespace_create('many_a', slot_bits => 3), cosid_namespace_create('many_b', slot_bits => 3);
SET SESSION AUTHORIZATION pass_one;
SELECT ord, namespace, slot IS NOT NULL AS granted, fence > 0 AS fenced, duplicate_key
  FROM cosid.acquire_many('{many_b,many_a,many_b}', 'many', '00000000-0000-0000-0000-0000000000c1', 60000)
 ORDER BY ord;
SELECT expect_error($$SELECT * FROM cosid.acquire_many('{many_a,no_such_namespace}', 'many',
    '00000000-0000-0000-0000-0000000000c2', 60000)$$);
SELECT expect_error($$SELECT * FROM cosid.acquire_many(array_fill('many_a'::text, ARRAY[65]), 'many',
    '00000000-0000-0000-0000-0000000000c2', 60000)$$);
SELECT expect_error($$SELECT * FROM cosid.acquire_many('{{many_a},{many_b}}', 'many',
    '00000000-0000-0000-0000-0000000000c2', 60000)$$);
SELECT count(*) AS nothing_asked FROM cosid.acquire_many('{}', 'many', '00000000-0000-0000-0000-0000000000c2', 60000);
RESET SESSION AUTHORIZATION;
SELECT namespace, count(*) AS held FROM cosid.lease
 WHERE namespace LIKE 'many__' AND incarnation IS NOT NULL GROUP BY namespace ORDER BY namespace;
SET ROLE pass_app;
SELECT expect_error($$SELECT * FROM cosid.acquire_many('{many_a}', 'many', '00000000-0000-0000-0000-0000000000c3', 60000)$$);
RESET ROLE;
SELECT count(*) AS many_revoked
  FROM generate_series(0, 7) s, unnest('{many_a,many_b}'::text[]) n, cosid.revoke(n, s) r;
DROP ROLE pass_one;
DROP ROLE pass_two;
DROP ROLE pass_app;

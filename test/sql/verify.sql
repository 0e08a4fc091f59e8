-- The store's history of the windows it granted: cosid_verify() finds two windows of a slot
-- that overlap, cosid_issuer() names the window and server that issued an id.
-- (the store's clock 4 hours ahead: above the floors earlier tests' raises left ahead of it)
SET cosid.store_clock_offset = 14400000;
SELECT cosid_namespace_create('vf', slot_bits => 2, tolerance => '0');
-- A holds slot 0, renews (no history row for a renewal), and its lease expires
SELECT slot, fence AS fa FROM cosid.acquire('vf', 'server-a', '00000000-0000-0000-0000-00000000a001', 1000, 0) \gset
SELECT count(*) AS renewed FROM cosid.renew('vf', 0, '00000000-0000-0000-0000-00000000a001', :fa, 1000);
SELECT count(*) AS rows_for_a, bool_and(ended_at IS NULL) AS live, bool_and(granted_at IS NOT NULL) AS granted_at_known
  FROM cosid.window_history WHERE namespace = 'vf';
SELECT count(*) AS overlaps FROM cosid_verify();
-- B takes the expired slot over (the store's clock moved past A's ceiling)
SET cosid.store_clock_offset = 14405000;
SELECT slot, fence AS fb FROM cosid.acquire('vf', 'server-b', '00000000-0000-0000-0000-00000000b001', 1000, 0) \gset
SELECT owner_key, fence, ended_how, ended_at IS NOT NULL AS ended FROM cosid.window_history WHERE namespace = 'vf' ORDER BY fence;
-- B releases in order after issuing at its floor + 10 ms: its window ends there
SELECT floor + 10 AS b_last FROM cosid.lease WHERE namespace = 'vf' AND slot = 0 \gset
SELECT count(*) AS released FROM cosid.release('vf', 0, '00000000-0000-0000-0000-00000000b001', :fb, :b_last);
SELECT ended_how, ceiling = :b_last AS ends_at_last_issued FROM cosid.window_history WHERE namespace = 'vf' AND fence = :fb;
-- C gets the slot at once, above B's last id; an administrator revokes it
SELECT slot, fence AS fc FROM cosid.acquire('vf', 'server-c', '00000000-0000-0000-0000-00000000c001', 1000, 0) \gset
SELECT floor = :b_last AS starts_at_b_last FROM cosid.lease WHERE namespace = 'vf' AND slot = 0;
SELECT count(*) AS revoked FROM cosid.revoke('vf', 0);
SET cosid.store_clock_offset = 14407000;  -- (past C's ceiling, where D's window starts)
SELECT slot, fence AS fd FROM cosid.acquire('vf', 'server-d', '00000000-0000-0000-0000-00000000d001', 1000, 0) \gset
SELECT owner_key, ended_how FROM cosid.window_history WHERE namespace = 'vf' ORDER BY fence;
SELECT count(*) AS overlaps FROM cosid_verify();

-- cosid_issuer: an id of D's live window, and one of A's ended window
SELECT floor AS a_floor, ceiling AS a_ceiling FROM cosid.window_history WHERE namespace = 'vf' AND owner_key = 'server-a' \gset
SELECT floor AS d_floor, ceiling AS d_ceiling FROM cosid.lease WHERE namespace = 'vf' AND slot = 0 \gset
SELECT cosid_min_id(to_timestamp((:d_floor + :d_ceiling) / 2 / 1000.0), 'vf') AS d_id,
       cosid_min_id(to_timestamp((:a_floor + :a_ceiling) / 2 / 1000.0), 'vf') AS a_id \gset
SELECT slot, sequence, source, owner_key, incarnation, fence = :fd AS its_fence, ended_how FROM cosid_issuer(:d_id, 'vf');
SELECT slot, source, split_part(holder, ',', 1) AS holder, owner_key, fence = :fa AS its_fence, ended_how
  FROM cosid_issuer(:a_id, 'vf');
-- an id of a slot nobody held then
SELECT source, holder FROM cosid_issuer(cosid_min_id(to_timestamp((:a_floor + :a_ceiling) / 2 / 1000.0), 'vf') + (1 << 12), 'vf');
-- older than the history's retention
SELECT split_part(source, ':', 2) AS source FROM cosid_issuer(cosid_min_id(now() - interval '40 days', 'vf'), 'vf');

-- The check has teeth: a window injected over A's (as a superuser, by hand) is reported,
-- and the id then has two issuers.
BEGIN;
INSERT INTO cosid.window_history (namespace, slot, kind, fence, floor, ceiling, owner_key, ended_at, ended_how)
VALUES ('vf', 0, 'lease', 999, :a_floor + 1, :a_ceiling, 'intruder', now(), 'injected');
SELECT namespace, slot, split_part(first_holder, ',', 1) AS first_holder, first_fence = :fa AS first_is_a,
       second_holder, second_fence
  FROM cosid_verify();
SELECT count(*) AS issuers, string_agg(owner_key, ', ' ORDER BY owner_key) AS owners FROM cosid_issuer(:a_id, 'vf');
ROLLBACK;
-- a static slot's recorded ceiling is a window too: another cluster's static slot 0 over D's
-- live lease is reported; this cluster's static slot 3, below its later lease, is not
BEGIN;
INSERT INTO cosid.static_ceiling (namespace, slot, system_identifier, ceiling_ms) VALUES ('vf', 0, 42, :d_ceiling);
SELECT count(*) > 0 AS reported, bool_and(first_holder = 'static slot of cluster 42') AS static_first,
       bool_or(second_holder LIKE 'server-d,%') AS over_d
  FROM cosid_verify();
ROLLBACK;
INSERT INTO cosid.static_ceiling (namespace, slot, system_identifier, ceiling_ms)
SELECT 'vf', 3, system_identifier, cosid.store_now() - 1000 FROM pg_control_system();
SELECT slot AS s3, fence AS f3 FROM cosid.acquire('vf', 'server-e', '00000000-0000-0000-0000-00000000e001', 1000, 3) \gset
SELECT kind, ended_how,
       CASE kind WHEN 'lease' THEN floor = c.ceiling_ms ELSE ceiling = c.ceiling_ms AND floor < ceiling END AS lease_above_static
  FROM cosid.window_history h, (SELECT ceiling_ms FROM cosid.static_ceiling WHERE namespace = 'vf' AND slot = 3) c
 WHERE h.namespace = 'vf' AND h.slot = 3 ORDER BY kind;
SELECT count(*) AS overlaps FROM cosid_verify();
SELECT source, holder LIKE 'static slot of cluster % (this server)' AS this_server
  FROM cosid_issuer(cosid_min_id(to_timestamp((cosid.store_now() - 3000) / 1000.0), 'vf') + 3 * (1 << 12), 'vf');

-- Seconds: a tick t is issued when floor < t x 1000 <= ceiling, so windows meet only on a
-- whole second in both.
SELECT cosid._windows_meet('ms', 1200, 1900, 1100, 1800) AS ms_meet,
       cosid._windows_meet('s', 1200, 1900, 1100, 1800) AS s_meet,
       cosid._windows_meet('s', 900, 1500, 800, 1200) AS s_meet_at_1000,
       cosid._windows_meet('s', 1000, 2000, 0, 1000) AS s_adjacent;

-- Retention: at least a minute; shortening it purges ended windows older than it at once,
-- and one new window in 32 purges a few (the next one here)
SELECT expect_error($$SELECT cosid_history_settings(retention => '10 seconds')$$);
SELECT retention_now FROM cosid_history_settings();
INSERT INTO cosid.window_history (namespace, slot, kind, fence, floor, ceiling, owner_key, ended_at, ended_how)
VALUES ('vf', 1, 'lease', 7, 1000, 2000, 'ancient', now(), 'old');
SELECT retention_now, windows > 0 AS has_windows FROM cosid_history_settings(retention => '1 hour');
SELECT count(*) AS ancient_left FROM cosid.window_history WHERE owner_key = 'ancient';
INSERT INTO cosid.window_history (namespace, slot, kind, fence, floor, ceiling, owner_key, ended_at, ended_how)
VALUES ('vf', 1, 'lease', 7, 1000, 2000, 'ancient', now(), 'old');
-- (in a transaction that holds the lease table: a keeper's acquire in this database, which
-- counts on the same tick, cannot take the 32nd between the setval and this acquire)
BEGIN;
LOCK TABLE cosid.lease IN EXCLUSIVE MODE;
SELECT setval('cosid.window_history_purge_tick', 31) AS purge_tick;
SELECT count(slot) AS granted FROM cosid.acquire('vf', 'server-f', '00000000-0000-0000-0000-00000000f001', 1000, 1);
COMMIT;
SELECT count(*) AS ancient_left FROM cosid.window_history WHERE owner_key = 'ancient';
SELECT retention_now FROM cosid_history_settings(retention => '30 days');

-- The history is evidence: no window changes or goes within the retention, whoever asks
SELECT expect_error($$UPDATE cosid.window_history SET floor = floor + 1 WHERE namespace = 'vf'$$);
SELECT expect_error($$UPDATE cosid.window_history SET ceiling = ceiling + 1 WHERE namespace = 'vf' AND ended_at IS NOT NULL$$);
SELECT regexp_replace(split_part(expect_error($$DELETE FROM cosid.window_history WHERE namespace = 'vf'$$), ' (', 1), 'slot \d+', 'slot S') AS delete_refused;
SELECT expect_error($$TRUNCATE cosid.window_history$$);
BEGIN;
SET LOCAL session_replication_role = replica;
SELECT regexp_replace(split_part(expect_error($$DELETE FROM cosid.window_history WHERE namespace = 'vf'$$), ' (', 1), 'slot \d+', 'slot S') AS delete_refused;
ROLLBACK;
-- a keeper's login reads the history (no incarnations) and writes nothing; neither it nor an
-- application role asks the audit functions, which a monitoring role may
CREATE ROLE vf_keeper LOGIN IN ROLE cosid_keeper;
CREATE ROLE vf_watcher LOGIN IN ROLE pg_monitor;
SET SESSION AUTHORIZATION vf_keeper;
SELECT expect_error($$INSERT INTO cosid.window_history (namespace, slot, kind, fence, floor, ceiling) VALUES ('vf', 2, 'lease', 1, 0, 1)$$);
SELECT expect_error($$UPDATE cosid.window_history SET ended_how = 'x'$$);
SELECT expect_error($$SELECT incarnation FROM cosid.window_history$$);
SELECT expect_error($$SELECT count(*) FROM cosid_verify()$$);
SELECT expect_error(format($$SELECT * FROM cosid_issuer(%s, 'vf')$$, :d_id));
SELECT expect_error($$SELECT cosid_history_settings(retention => '1 day')$$);
SELECT count(*) > 0 AS reads_history FROM cosid.window_history;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION vf_watcher;
SELECT count(*) AS overlaps FROM cosid_verify();
SELECT source, owner_key, incarnation IS NULL AS incarnation_hidden FROM cosid_issuer(:d_id, 'vf');
RESET SESSION AUTHORIZATION;
DROP ROLE vf_keeper;
DROP ROLE vf_watcher;

-- Bad input
SELECT expect_error($$SELECT * FROM cosid_issuer(1, 'nope')$$);
SELECT expect_error($$SELECT * FROM cosid_issuer(NULL, 'vf')$$);
SELECT expect_error($$SELECT * FROM cosid_issuer(-5, 'vf')$$);
SELECT cosid_namespace_create('vf53', slot_bits => 4, total_bits => 53);
SELECT expect_error($$SELECT * FROM cosid_issuer(1::bigint << 60, 'vf53')$$);
RESET cosid.store_clock_offset;

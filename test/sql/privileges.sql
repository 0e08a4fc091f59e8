-- Ordinary roles may call cosid_next() but never write the store; administrators
-- (superuser or cosid_admin) may create namespaces and release slots.
CREATE ROLE cosid_app;
CREATE TABLE app_rows (id bigint PRIMARY KEY DEFAULT cosid_next(), v int);
GRANT INSERT, SELECT ON app_rows TO cosid_app;
SET ROLE cosid_app;
INSERT INTO app_rows(v) SELECT g FROM generate_series(1, 100) g;
SELECT count(DISTINCT id) AS app_ids FROM app_rows;
SELECT count(*) > 0 AS can_read_leases FROM cosid_leases();
SELECT expect_error($$INSERT INTO cosid.lease(namespace, slot) VALUES ('default', 5000)$$);
SELECT expect_error($$UPDATE cosid.lease SET fence = fence + 1$$);
SELECT expect_error($$DELETE FROM cosid.namespace$$);
SELECT expect_error($$SELECT * FROM cosid.acquire('default', 'me', gen_random_uuid(), 1000)$$);
SELECT expect_error($$SELECT * FROM cosid.renew('default', 0, gen_random_uuid(), 1, 1000)$$);
SELECT expect_error($$SELECT * FROM cosid.release('default', 0, gen_random_uuid(), 1, 0)$$);
SELECT expect_error($$SELECT * FROM cosid.revoke('default', 0)$$);
SELECT expect_error($$SELECT cosid_release('default', 0)$$);
SELECT expect_error($$SELECT cosid_namespace_create('mine')$$);
SELECT expect_error($$SET cosid.clock_offset = 5000$$);
SELECT expect_error($$SET cosid.store_clock_offset = 5000$$);
SELECT expect_error($$SET cosid.ttl = '1s'$$);
SELECT expect_error($$SELECT cosid_release()$$);
RESET ROLE;

GRANT cosid_admin TO cosid_app;
SET ROLE cosid_app;
SELECT cosid_namespace_create('by_admin', slot_bits => 1);
RESET ROLE;
-- another instance holds slot 0
SELECT slot FROM cosid.acquire('by_admin', 'elsewhere', '00000000-0000-0000-0000-0000000000ee', 60000);
SET ROLE cosid_app;
SELECT cosid_release('by_admin', 0) AS other_owner;
SELECT cosid_release('by_admin', 0) AS again;
SELECT owner_key, previous_owner_key, next_floor = ceiling AS next_floor_is_ceiling FROM cosid.lease WHERE namespace = 'by_admin' AND slot = 0;
SELECT expect_error($$SELECT cosid_release('by_admin', 7)$$);
SELECT expect_error($$SELECT cosid_release(NULL, 0)$$);
-- a row of cosid_pool() without a slot (a request): nothing to release
SELECT cosid_release('by_admin', NULL) IS NULL AS nothing_to_release;
SELECT expect_error($$SELECT cosid_release('nope', 0)$$);
RESET ROLE;
REVOKE cosid_admin FROM cosid_app;
DROP TABLE app_rows;
DROP ROLE cosid_app;

-- A remote keeper's role: a member of cosid_keeper may run acquire, renew and release
-- (they run as the extension's owner) and nothing else.
CREATE ROLE cosid_remote_keeper IN ROLE cosid_keeper;
SET ROLE cosid_remote_keeper;
SELECT slot AS ks, fence AS kf FROM cosid.acquire('by_admin', 'remote', '00000000-0000-0000-0000-0000000000cc', 60000) \gset
SELECT fence = :kf AS renewed FROM cosid.renew('by_admin', :ks, '00000000-0000-0000-0000-0000000000cc', :kf, 60000);
SELECT fence = :kf + 1 AS released FROM cosid.release('by_admin', :ks, '00000000-0000-0000-0000-0000000000cc', :kf, 0);
SELECT expect_error($$UPDATE cosid.lease SET fence = fence + 1$$);
SELECT expect_error($$SELECT * FROM cosid.revoke('by_admin', 0)$$);
SELECT expect_error($$SELECT cosid_namespace_create('by_keeper')$$);
RESET ROLE;
DROP ROLE cosid_remote_keeper;

-- Leases belong to the store role that acquired them (issue 23): a second keeper role, one
-- per server as on a shared store, knowing another's incarnation (an administrator's view),
-- can neither renew, release, nor read it, and its probes change nothing.
CREATE ROLE keeper_one LOGIN IN ROLE cosid_keeper;
CREATE ROLE keeper_two LOGIN IN ROLE cosid_keeper;
SET SESSION AUTHORIZATION keeper_one;
SELECT slot AS k1s, fence AS k1f FROM cosid.acquire('by_admin', 'server-one', '00000000-0000-0000-0000-0000000000a1', 60000) \gset
RESET SESSION AUTHORIZATION;
SELECT owner_role FROM cosid.lease WHERE namespace = 'by_admin' AND slot = :k1s;
SELECT md5(string_agg(l::text, ',' ORDER BY namespace, slot)) AS before FROM cosid.lease l \gset
SET SESSION AUTHORIZATION keeper_two;
SELECT expect_error($$SELECT incarnation FROM cosid.lease$$);
SELECT count(*) FILTER (WHERE incarnation IS NOT NULL) AS incarnations_shown, count(*) FILTER (WHERE owner_key = 'server-one') AS its_lease_listed
FROM cosid_leases('by_admin');
SELECT count(*) AS own_leases_of_another FROM cosid.own_leases('00000000-0000-0000-0000-0000000000a1', '', -1);
SELECT expect_error(format($$SELECT * FROM cosid.renew('by_admin', %s, '00000000-0000-0000-0000-0000000000a1', %s, 60000)$$, :k1s, :k1f));
SELECT error_detail(format($$SELECT * FROM cosid.release('by_admin', %s, '00000000-0000-0000-0000-0000000000a1', %s, 0)$$, :k1s, :k1f)) AS detail;
SELECT expect_error(format($$SELECT * FROM cosid.release('by_admin', %s, '00000000-0000-0000-0000-0000000000a1', %s, 0)$$, :k1s, :k1f));
SELECT expect_error($$SELECT * FROM cosid.revoke('by_admin', 0)$$);
RESET SESSION AUTHORIZATION;
SELECT md5(string_agg(l::text, ',' ORDER BY namespace, slot)) = :'before' AS nothing_changed FROM cosid.lease l;
-- the owning role renews and releases it, and finds it among its own
SET SESSION AUTHORIZATION keeper_one;
SELECT count(*) AS own_leases FROM cosid.own_leases('00000000-0000-0000-0000-0000000000a1', '', -1);
SELECT fence = :k1f AS renewed FROM cosid.renew('by_admin', :k1s, '00000000-0000-0000-0000-0000000000a1', :k1f, 60000);
SELECT fence = :k1f + 1 AS released FROM cosid.release('by_admin', :k1s, '00000000-0000-0000-0000-0000000000a1', :k1f, 0);
RESET SESSION AUTHORIZATION;
-- monitoring: a pg_monitor member reads the leases (without incarnations) and the owners
CREATE ROLE watcher LOGIN IN ROLE pg_monitor;
SET SESSION AUTHORIZATION watcher;
SELECT count(*) > 0 AS leases_listed, count(incarnation) AS incarnations_shown FROM cosid_leases();
SELECT count(*) >= 0 AS owners_listed FROM cosid_owners;
RESET SESSION AUTHORIZATION;
SELECT count(incarnation) > 0 AS admin_sees_incarnations FROM cosid_leases();
DROP ROLE watcher;
DROP ROLE keeper_one;
DROP ROLE keeper_two;
-- A store role holds at most its cap of live leases per namespace (cosid_lease_cap; superusers
-- and cosid_admin are not capped), and an administrator revokes every lease of a role at once.
CREATE ROLE keeper_cap LOGIN IN ROLE cosid_keeper;
SELECT role_name, max_leases FROM cosid_lease_cap(1, role => 'keeper_cap');
SET SESSION AUTHORIZATION keeper_cap;
SELECT slot IS NOT NULL AS granted FROM cosid.acquire('by_admin', 'capped-1', '00000000-0000-0000-0000-0000000000d1', 60000);
SELECT expect_error($$SELECT slot FROM cosid.acquire('by_admin', 'capped-2', '00000000-0000-0000-0000-0000000000d2', 60000)$$);
SELECT expect_error($$SELECT * FROM cosid_lease_cap(4)$$);
SELECT expect_error($$SELECT cosid_revoke_role('keeper_cap')$$);
RESET SESSION AUTHORIZATION;
SELECT expect_error($$SELECT * FROM cosid_lease_cap(-1)$$);
SELECT expect_error($$SELECT * FROM cosid_lease_cap(1, role => 'no_such_role')$$);
SELECT expect_error($$SELECT cosid_revoke_role(NULL)$$);
SELECT expect_error($$SELECT cosid_revoke_role('keeper_cap', 'no_such_namespace')$$);
SELECT cosid_revoke_role('keeper_cap', 'by_admin') AS revoked;
SELECT count(*) FILTER (WHERE incarnation IS NOT NULL) AS still_held,
       count(*) FILTER (WHERE previous_owner_key = 'capped-1' AND next_floor >= ceiling) AS freed_above_ceiling
  FROM cosid.lease WHERE namespace = 'by_admin' AND owner_role IS NULL;
SELECT role_name, max_leases FROM cosid_lease_cap(NULL, role => 'keeper_cap');
DROP ROLE keeper_cap;

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

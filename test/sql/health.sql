-- cosid_health(): one row per check, each planted here and seen to change (the checks that
-- need another server, a restart or other settings are in test/e2e/health.sh).
CREATE FUNCTION health_of(p_check text) RETURNS text LANGUAGE sql AS $$
    SELECT status FROM cosid_health() WHERE name = p_check
$$;
-- Waits (up to 20 s) until the check shows `want`; returns what it shows then.
CREATE FUNCTION health_wait(p_check text, p_want text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v text;
BEGIN
    FOR i IN 1..200 LOOP
        v := health_of(p_check);
        EXIT WHEN v = p_want;
        PERFORM pg_sleep(0.1);
    END LOOP;
    RETURN v;
END $$;

-- Waits (up to 20 s) until the keeper counts `n` renewals; true if it did.
CREATE FUNCTION renewals_wait(n bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..200 LOOP
        IF (SELECT renewals FROM cosid_stats()) >= n THEN RETURN true; END IF;
        PERFORM pg_sleep(0.1);
    END LOOP;
    RETURN false;
END $$;

-- until_true(cond): waits up to 20 s for the SQL expression cond to be true.
CREATE FUNCTION until_true(cond text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE v boolean;
BEGIN
    FOR i IN 1..200 LOOP
        EXECUTE 'SELECT ' || cond INTO v;
        IF v THEN RETURN true; END IF;
        PERFORM pg_sleep(0.1);
    END LOOP;
    RETURN false;
END $$;

-- A healthy server: every check, none warning or critical (the keeper may still be
-- connecting: wait for it first), with store limits that fit this suite's cosid.ttl of 3 s
-- (floor_raise, below, shows a max_ttl far above it).
SELECT max_ttl_ms, max_tolerance_ms FROM cosid_store_settings(max_ttl => '3 s', max_tolerance => '1 s');
SELECT cosid_next() > 0 AS issued;
SELECT health_wait('keeper', 'ok') AS keeper, health_wait('store', 'ok') AS store;
SELECT name, status FROM cosid_health();
SELECT count(*) FILTER (WHERE status NOT IN ('ok', 'warning', 'critical')) AS bad_status,
       count(*) FILTER (WHERE detail IS NULL) AS no_detail,
       count(*) FILTER (WHERE status <> 'ok' AND hint NOT LIKE '%docs/monitoring.md#' || name) AS hint_without_anchor
FROM cosid_health();
SELECT detail ~ 'this server''s windows cover [0-9]+ ms \(ttl 3000 ms \+ tolerance [0-9]+ ms\): no pause of ids$'
       AS floor_raise_no_pause FROM cosid_health() WHERE name = 'floor_raise';
SELECT max_ttl_ms, max_tolerance_ms FROM cosid_store_settings(max_ttl => '30 s', max_tolerance => '5 s');

-- Who may run it: pg_monitor, cosid_admin, superusers; not everyone.
CREATE ROLE health_watcher LOGIN;
CREATE ROLE health_nobody LOGIN;
GRANT pg_monitor TO health_watcher;
SET ROLE health_watcher;
SELECT count(*) AS checks FROM cosid_health();
SET ROLE health_nobody;
SELECT expect_error('SELECT * FROM cosid_health()');
SELECT expect_error('SELECT * FROM cosid._health_state()');
RESET ROLE;

-- namespace_slots: 7 of 8 slots in use is a warning, 8 of 8 critical.
SELECT cosid_namespace_create('h_full', slot_bits => 3);
SELECT count(*) AS acquired FROM generate_series(1, 7) g,
       cosid.acquire('h_full', 'health-' || g, gen_random_uuid(), 50000) a WHERE a.slot IS NOT NULL;
SELECT status, detail FROM cosid_health() WHERE name = 'namespace_slots';
SELECT count(*) AS acquired FROM cosid.acquire('h_full', 'health-8', gen_random_uuid(), 50000) a WHERE a.slot IS NOT NULL;
SELECT status, detail, hint FROM cosid_health() WHERE name = 'namespace_slots';
SELECT count(*) AS revoked FROM generate_series(0, 7) s, cosid.revoke('h_full', s);
SELECT health_of('namespace_slots') AS namespace_slots;

-- owner_key: two live incarnations with one owner key.
SELECT count(*) AS acquired FROM cosid.acquire('h_full', 'health-twice', gen_random_uuid(), 50000) a
 WHERE a.slot IS NOT NULL;
SELECT health_of('owner_key') AS one_incarnation;
SELECT count(*) AS acquired FROM cosid.acquire('h_full', 'health-twice', gen_random_uuid(), 50000) a
 WHERE a.slot IS NOT NULL;
SELECT status, detail FROM cosid_health() WHERE name = 'owner_key';
SELECT count(*) AS revoked FROM generate_series(0, 7) s, cosid.revoke('h_full', s);
SELECT health_of('owner_key') AS owner_key;
-- ... and this server's own key, which its keeper checks every ttl/3: a warning while the
-- other incarnation could be this server's own before a crash restart (its leases live at
-- most max_ttl + max_tolerance), critical once the keeper has run longer than that.
SELECT count(*) AS acquired FROM cosid_stats() s, cosid.acquire('h_full', s.owner_key, gen_random_uuid(), 50000) a
 WHERE a.slot IS NOT NULL;
SELECT health_wait('owner_key', 'warning') AS owner_key;
SELECT (cosid_store_settings(max_ttl => '3 s')).max_ttl_ms;
SELECT health_wait('owner_key', 'critical') AS owner_key;
SELECT detail ~ '^another live server holds leases with this owner key' AS says_so FROM cosid_health()
 WHERE name = 'owner_key';
SELECT (cosid_store_settings(max_ttl => '60 s')).max_ttl_ms;
SELECT count(*) AS revoked FROM generate_series(0, 7) s, cosid.revoke('h_full', s);
SELECT health_wait('owner_key', 'ok') AS owner_key;

-- layout_years: a layout with less than 5 years left is a warning, with less than 1 critical
-- (39 bits of ms last 17.4 years).
SELECT cosid_namespace_create('h_short', slot_bits => 4, sequence_bits => 8, total_bits => 51,
                              epoch => now() - interval '14 years');
SELECT status, detail ~ '^layouts ending soon: h_short [0-9.]+ years$' AS names_it FROM cosid_health()
 WHERE name = 'layout_years';
-- (cosid_namespace_create refuses a layout ending within a year: one made before that rule)
INSERT INTO cosid.namespace (name, slot_bits, sequence_bits, timestamp_bits, epoch_ms, unit, tolerance_ms)
SELECT 'h_ending', 4, 8, 39, (extract(epoch FROM now() - interval '17 years') * 1000)::bigint, 'ms', 1000;
SELECT status, detail ~ '^layouts ending soon: h_ending 0\.[0-9] years, h_short' AS worst_first FROM cosid_health()
 WHERE name = 'layout_years';
DELETE FROM cosid.lease WHERE namespace IN ('h_short', 'h_ending');
DELETE FROM cosid.namespace WHERE name IN ('h_short', 'h_ending');
SELECT health_of('layout_years') AS layout_years;

-- floor_raise: switched off on a store without a standby.
SELECT (cosid_store_settings(raise_floors_on_new_timeline => false)).raise_floors_on_new_timeline;
SELECT status, detail FROM cosid_health() WHERE name = 'floor_raise';
SELECT (cosid_store_settings(raise_floors_on_new_timeline => true)).raise_floors_on_new_timeline;
-- On, with max_ttl 60 s (set above) against this suite's cosid.ttl of 3 s: a failover's raise
-- reaches 60 s + 2 x 5 s, the windows held here about 4 s: ids would pause for about a minute,
-- a warning that says so and what to change.
SELECT status, detail ~ 'max_ttl 60000 ms \+ 2 x max_tolerance 5000 ms; this server''s windows cover [0-9]+ ms'
                        ' \(ttl 3000 ms \+ tolerance [0-9]+ ms\): ids here pause for up to 6[0-9] s after a failover'
       AS says_the_pause, hint
  FROM cosid_health() WHERE name = 'floor_raise';

-- citus_store: a Citus worker (group <> 0) without cosid.store_dsn; the coordinator is fine.
-- (Citus's catalog table stands in for the extension.)
SET allow_system_table_mods = on;
CREATE TABLE pg_catalog.pg_dist_local_group (groupid int);
INSERT INTO pg_catalog.pg_dist_local_group VALUES (2);
SELECT status, detail FROM cosid_health() WHERE name = 'citus_store';
UPDATE pg_catalog.pg_dist_local_group SET groupid = 0;
SELECT status, detail FROM cosid_health() WHERE name = 'citus_store';
DROP TABLE pg_catalog.pg_dist_local_group;
RESET allow_system_table_mods;
SELECT health_of('citus_store') AS citus_store;

-- store_max_ttl: a store max_ttl below this keeper's ttl (3 s) grants shorter leases, which
-- the keeper renews every third of what it got: a warning, and the renewals go on.
SELECT cosid_namespace_create('h_live');
SELECT cosid_next('h_live') > 0 AS issued;
SELECT (cosid_store_settings(max_ttl => '2 s')).max_ttl_ms;
SELECT status, detail FROM cosid_health() WHERE name = 'store_max_ttl';
SELECT renewals AS r0, renewal_failures AS rf0 FROM cosid_stats() \gset
-- (a renewal every 667 ms: three of them within 20 s, and none failed)
SELECT renewals_wait(:r0 + 3) AS renewed_three_times;
SELECT renewal_failures - :rf0 AS renewals_failed FROM cosid_stats();
SELECT cosid_next('h_live') > 0 AS still_issued;
SELECT health_of('renewals') AS renewals;
-- (the lease h_live got before the change renews at most 2 s ahead: the renewals counted
-- above may have been other namespaces')
SELECT until_true($$(SELECT bool_and(l.expires_at - cosid.store_now() <= 2000) FROM cosid.lease l, cosid_pool() p
                     WHERE l.namespace = 'h_live' AND p.namespace = 'h_live' AND l.slot = p.slot)$$)
       AS granted_at_most_max_ttl;
SELECT (cosid_store_settings(max_ttl => '60 s')).max_ttl_ms;
SELECT health_of('store_max_ttl') AS store_max_ttl;

-- leases_lost: a revoked lease of this instance is found lost at its next renewal.
SELECT health_of('leases_lost') AS before;
SELECT cosid_next('h_live') > 0 AS issued;
SELECT count(*) AS revoked FROM cosid_pool() p, cosid.revoke(p.namespace, p.slot) WHERE p.namespace = 'h_live';
SELECT health_wait('leases_lost', 'warning') AS leases_lost;
SELECT expect_error($$SELECT cosid_next('h_live')$$) LIKE 'ZC001%' AS lost_once;

-- cosid_leases(): a slot with no floor yet (0, as namespaces made before 1.3 have them)
-- shows NULL, not 1970-01-01.
INSERT INTO cosid.namespace (name, slot_bits, sequence_bits, timestamp_bits, epoch_ms, unit, tolerance_ms)
VALUES ('h_legacy', 1, 12, 41, 1704067200000, 'ms', 1000);
INSERT INTO cosid.lease (namespace, slot) VALUES ('h_legacy', 0), ('h_legacy', 1);
SELECT slot, floor, floor_at, ceiling_at, next_floor_at, state FROM cosid_leases('h_legacy');
DELETE FROM cosid.lease WHERE namespace = 'h_legacy';
DELETE FROM cosid.namespace WHERE name = 'h_legacy';

-- leave no namespace of this test behind (its leases released first)
SELECT cosid_release() >= 0 AS released;
-- (other owners' windows are still ahead: past them on this session's store clock, the
-- rows may go, as cosid._lease_forget_guard allows)
SET cosid.store_clock_offset = 3600000;
DELETE FROM cosid.lease WHERE namespace IN ('h_full', 'h_live');
DELETE FROM cosid.namespace WHERE name IN ('h_full', 'h_live');
RESET cosid.store_clock_offset;
DROP ROLE health_watcher;
DROP ROLE health_nobody;

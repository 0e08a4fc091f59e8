-- A copy of a store whose own server issues ids from it (a promoted standby, a recovered
-- backup, a restored dump, a copy declared by a cosid.fork file or by restored => true) grants
-- nothing until cosid_fork_acknowledge(): the origin may go on issuing on any slot.  The
-- states are set by hand, as a copy would find them, each in one transaction with its checks
-- (the keeper's own store calls must not see them half made).
SELECT cosid_namespace_create('fk', slot_bits => 2, tolerance => '200 ms');
-- The keeper records itself before each acquire from its own store (the end-to-end tests show
-- it); the tests before cleared it, so it is set here as that keeper leaves it.
UPDATE cosid.store_state SET issuer_incarnation = '00000000-0000-0000-0000-0000000000e0';

-- 1. The same cluster on another timeline while its server was issuing: a fork.
BEGIN;
UPDATE cosid.store_state SET timeline = 0;
SELECT cosid._fork_reason() LIKE 'The store''s server was issuing ids on timeline 0%' AS recognised;
SELECT expect_error($$SELECT * FROM cosid.acquire('fk', 'copy', '00000000-0000-0000-0000-0000000000e1', 20000)$$);
SELECT expect_error($$SELECT * FROM cosid.renew('fk', 0, '00000000-0000-0000-0000-0000000000e1', 1, 20000)$$);
SELECT status, detail LIKE 'the store grants no window: %' AS says_why FROM cosid_health() WHERE name = 'fork';
SELECT timeline = 0 AS nothing_changed FROM cosid.store_state;
ROLLBACK;

-- 1b. Another cluster's one record while its server was issuing, and pg_upgrade did not make
-- this cluster (no cosid.upgraded file here): a copy of that server's data, a fork.  With
-- the file (pg_upgrade's new cluster) the floors stay: pg_upgrade.sh.
BEGIN;
UPDATE cosid.store_state SET system_identifier = 4242;
SELECT cosid._upgraded_here() AS upgraded_here;
SELECT cosid._fork_reason() LIKE 'The store''s record comes from another cluster (system identifier 4242)%' AS recognised;
SELECT expect_error($$SELECT * FROM cosid.acquire('fk', 'copy', '00000000-0000-0000-0000-0000000000e1', 20000)$$);
ROLLBACK;

-- 1c. pg_upgrade read this server (its note of the cluster and timeline) and the server went
-- on here (an upgrade given up): the next store call clears the note, raises nothing and
-- grants.
BEGIN;
UPDATE cosid.store_state s SET upgrade_origin_system = c.system_identifier, upgrade_origin_timeline = s.timeline
  FROM pg_control_system() c;
SELECT failovers AS f_before, raised_at_ms AS r_before FROM cosid.store_state \gset
SELECT slot IS NOT NULL AS grants FROM cosid.acquire('fk', 'given-up', '00000000-0000-0000-0000-0000000000e3', 20000);
SELECT upgrade_origin_system IS NULL AND upgrade_origin_timeline IS NULL AS note_cleared,
       failovers = :f_before AND raised_at_ms = :r_before AS not_raised
  FROM cosid.store_state;
ROLLBACK;

-- 2. Without an issuer it is a failover of a store (failover.sql): grants go on.
BEGIN;
UPDATE cosid.store_state SET timeline = 0, issuer_incarnation = NULL;
SELECT cosid._fork_reason() IS NULL AS not_a_fork;
ROLLBACK;

-- 3. A restored dump taken while the server issued (the origin's record beside this one's).
BEGIN;
INSERT INTO cosid.store_state (system_identifier, timeline) SELECT system_identifier, timeline FROM cosid.store_state;
SELECT cosid._fork_reason() LIKE 'The dump restored here was taken while%' AS recognised_dump;
SELECT expect_error($$SELECT * FROM cosid.acquire('fk', 'copy', '00000000-0000-0000-0000-0000000000e1', 20000)$$);
ROLLBACK;

-- 4. Only an administrator acknowledges; a time in the future is refused.
CREATE ROLE fk_app;
SET ROLE fk_app;
SELECT expect_error($$SELECT cosid_fork_acknowledge()$$);
RESET ROLE;
DROP ROLE fk_app;
SELECT expect_error($$SELECT cosid_fork_acknowledge(now() + interval '1 hour')$$);
SELECT cosid_fork_acknowledge() AS nothing_pending;

-- 5. A declared copy (cosid_store_follow_timeline(restored => true) on an issuer's store):
-- pending until acknowledged; the acknowledgement raises from the given stop and grants.
SELECT issuer_incarnation IS NOT NULL AS issuer_recorded FROM cosid.store_state;
SELECT failovers AS f0 FROM cosid.store_state \gset
SELECT cosid_store_follow_timeline(restored => true) = :f0 AS marked_not_raised;
SELECT fork_pending LIKE 'Declared a copy%' AS pending FROM cosid.store_state;
SELECT expect_error($$SELECT * FROM cosid.acquire('fk', 'copy', '00000000-0000-0000-0000-0000000000e1', 20000)$$);
SELECT status FROM cosid_health() WHERE name = 'fork';
SELECT cosid.store_now() AS ack_ms \gset
SELECT cosid_fork_acknowledge(now() - interval '10 seconds') LIKE 'fork acknowledged (Declared a copy%' AS acknowledged;
SELECT fork_pending IS NULL AS cleared, failovers = :f0 + 1 AS counted FROM cosid.store_state;
-- every slot freed, next floors at the stop + max_ttl + 2 x max_tolerance, or above
SELECT count(*) FILTER (WHERE incarnation IS NOT NULL) AS held,
       bool_and(next_floor >= :ack_ms - 10000 + s.max_ttl_ms + 2 * s.max_tolerance_ms) AS raised
FROM cosid.lease, cosid.store_state s WHERE namespace = 'fk';
SELECT slot IS NOT NULL AS grants_again
FROM cosid.acquire('fk', 'copy', '00000000-0000-0000-0000-0000000000e2', 20000);
SELECT status FROM cosid_health() WHERE name = 'fork';

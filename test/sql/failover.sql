-- A store on a new WAL timeline (a promoted standby, a point-in-time recovery) may have lost
-- the last lease changes of the old one.  The first mutation that finds the store on
-- another timeline frees every lease and raises every slot's next_floor above anything an
-- old holder could still issue.  Here the recorded timeline is set by hand, as a restore
-- would leave it, for a store nobody issued from on its own server (issuer_incarnation NULL:
-- with it, the copy is a fork, fork.sql).  Runs last: the raise frees every lease of the
-- store, the keeper's too.
-- The store's own reading of where this server writes (shared memory) is what
-- pg_walfile_name() and pg_control_system() say.
SELECT cosid._timeline() = ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int AS timeline_of_wal,
       cosid._system_identifier() = (SELECT system_identifier FROM pg_control_system()) AS system_of_control;
SELECT cosid_namespace_create('fo', slot_bits => 2, tolerance => '1 second');
SELECT slot AS s0, fence AS f0, ceiling AS c0
FROM cosid.acquire('fo', 'old', '00000000-0000-0000-0000-0000000000f0', 20000) \gset
SELECT slot AS s1, fence AS f1 FROM cosid.acquire('fo', 'old', '00000000-0000-0000-0000-0000000000f0', 20000) \gset
SELECT failovers AS failovers0 FROM cosid.store_state \gset
-- the store grants no lease longer than its limit (60 s, as health.sql left it): the raise covers it
SELECT max_ttl_ms FROM cosid.store_state;
BEGIN;
SELECT expires_at - store_now AS granted_ms FROM cosid.acquire('fo', 'old', '00000000-0000-0000-0000-0000000000f0', 60001);
ROLLBACK;
-- (each change of store_state in one transaction with the call that reads it: the keeper,
-- asking at once for the successor of a lease a raise freed, calls the store in between)
BEGIN;
UPDATE cosid.store_state SET timeline = 0, issuer_incarnation = NULL;
-- the old holder's renewal is the first call on the "new" timeline: its lease is gone
SELECT count(*) AS renewed FROM cosid.renew('fo', :s0, '00000000-0000-0000-0000-0000000000f0', :f0, 20000);
COMMIT;
SELECT failovers = :failovers0 + 1 AS counted, timeline = cosid._timeline() AS follows FROM cosid.store_state;
-- (cosid_leases shows where each slot's next window starts: a free slot the raise left alone
-- takes it when next acquired)
SELECT count(*) FILTER (WHERE incarnation IS NOT NULL) AS held,
       bool_and(next_floor >= cosid.store_now() + 60000 + 2 * 1000 - 5000) AS raised,
       bool_and(next_floor >= ceiling) AS above_ceilings
FROM cosid_leases('fo');
SELECT fence > :f1 + 1000000 AS fence_moved_far FROM cosid.lease WHERE namespace = 'fo' AND slot = :s1;
-- The raise wrote only the rows that were held (the lazy raise): the two free ones are as they
-- were, marked as not brought up to it.
SELECT count(*) FILTER (WHERE l.raise_seen = s.raise_count) AS brought_up,
       count(*) FILTER (WHERE l.raise_seen < s.raise_count AND l.next_floor < s.raised_at_ms) AS left_alone
FROM cosid.lease l, cosid.store_state s WHERE l.namespace = 'fo';
-- such a slot's next window starts at the raised floor: it holds off a DELETE meanwhile
SELECT left(expect_error($$DELETE FROM cosid.lease WHERE namespace = 'fo' AND slot = 3$$), 5) AS refused;
-- a new window starts at the raised floor, well above the old ceiling
SELECT floor > :c0 AS above_old_ceiling, floor - cosid.store_now() > 55000 AS waits_for_the_clock
FROM cosid.acquire('fo', 'new', '00000000-0000-0000-0000-0000000000f1', 20000);
-- A free slot the raise left alone is brought up when acquired: its window starts above the
-- raised floor, and its fence moves on by 2^32 besides the grant's step.
BEGIN;
SELECT fence AS f2 FROM cosid.lease WHERE namespace = 'fo' AND slot = 2 \gset
SELECT slot FROM cosid.acquire('fo', 'new2', '00000000-0000-0000-0000-0000000000f2', 20000);
SELECT slot, fence - :f2 > 4294967296 AS fence_moved_far, floor >= (SELECT raised_floor FROM cosid._raise_mark()) AS above_the_raise
FROM cosid.acquire('fo', 'new2', '00000000-0000-0000-0000-0000000000f2', 20000);
SELECT l.raise_seen = s.raise_count AS brought_up FROM cosid.lease l, cosid.store_state s WHERE l.namespace = 'fo' AND l.slot = 2;
ROLLBACK;
-- a second call on the same timeline raises nothing more
SELECT next_floor AS nf FROM cosid.lease WHERE namespace = 'fo' AND slot = 3 \gset
SELECT count(*) AS renewed FROM cosid.renew('fo', 3, '00000000-0000-0000-0000-0000000000f1', 99, 20000);
SELECT next_floor = :nf AS unchanged FROM cosid.lease WHERE namespace = 'fo' AND slot = 3;

-- With synchronous replication the raise may be turned off: a new timeline is then only
-- counted.  Only superusers and cosid_admin may change it.
SELECT raise_floors_on_new_timeline FROM cosid_store_settings(raise_floors_on_new_timeline => false);
BEGIN;
UPDATE cosid.store_state SET timeline = 0, issuer_incarnation = NULL;
SELECT md5(string_agg(l::text, ',' ORDER BY slot)) AS before FROM cosid.lease l WHERE namespace = 'fo' \gset
SELECT count(*) AS renewed FROM cosid.renew('fo', 3, '00000000-0000-0000-0000-0000000000f1', 99, 20000);
COMMIT;
SELECT md5(string_agg(l::text, ',' ORDER BY slot)) = :'before' AS floors_left_alone FROM cosid.lease l WHERE namespace = 'fo';
SELECT failovers = :failovers0 + 2 AS counted FROM cosid.store_state;
SELECT raise_floors_on_new_timeline FROM cosid_store_settings();
SELECT raise_floors_on_new_timeline FROM cosid_store_settings(true);
-- a namespace made after a raise starts above it too
SELECT count(*) AS slots_above_the_raise FROM cosid.lease l, cosid.store_state s
WHERE l.namespace = 'fo2' AND l.next_floor >= s.raised_at_ms + s.max_ttl_ms;
SELECT cosid_namespace_create('fo2', slot_bits => 1);
SELECT count(*) AS slots_above_the_raise FROM cosid.lease l, cosid.store_state s
WHERE l.namespace = 'fo2' AND l.next_floor >= s.raised_at_ms + s.max_ttl_ms + 2000;
-- max_ttl + 2 x max_tolerance within the reach cap (120 s): a copy raises by the cap only
SELECT expect_error($$SELECT cosid_store_settings(max_ttl => '2 minutes')$$);
SELECT max_ttl_ms FROM cosid_store_settings(max_ttl => '110 s');
SELECT expect_error($$SELECT cosid_store_settings(max_tolerance => '6 s')$$);
SELECT expect_error($$SELECT cosid_store_settings(max_ttl => '1 ms')$$);
SELECT max_ttl_ms FROM cosid_store_settings(max_ttl => '1 minute');
-- another cluster (a restore elsewhere) counts as a new timeline too
BEGIN;
UPDATE cosid.store_state SET system_identifier = 1, issuer_incarnation = NULL;
SELECT cosid_store_follow_timeline() = :failovers0 + 3 AS followed_by_hand;
COMMIT;
CREATE ROLE fo_app;
SET ROLE fo_app;
SELECT expect_error($$SELECT cosid_store_settings(false)$$);
SELECT expect_error($$UPDATE cosid.store_state SET timeline = 0$$);
RESET ROLE;
DROP ROLE fo_app;
-- A lease row that arrives after the raise (a parallel restore loads cosid.lease after the
-- store's record, whose first call raised) is raised as it arrives: freed, its fence moved
-- far, its next floor above the raise.  Also under session_replication_role = replica (a
-- loader that "turns triggers off" that way).
CREATE FUNCTION arrival(p_replica boolean) RETURNS TABLE (freed boolean, fenced boolean, above_the_raise boolean)
LANGUAGE plpgsql AS $$
BEGIN
    IF p_replica THEN SET LOCAL session_replication_role = replica; END IF;
    INSERT INTO cosid.lease (namespace, slot, owner_key, incarnation, fence, expires_at, floor, ceiling, next_floor)
    SELECT 'fo_arrives', 0, 'origin', '00000000-0000-0000-0000-0000000000f9', 7, n - 1000, n - 5000, n + 1000, n + 1000
      FROM cosid.store_now() n;
    SET LOCAL session_replication_role = origin;
    RETURN QUERY SELECT l.incarnation IS NULL, l.fence > 4294967296,
                        l.next_floor >= s.raised_at_ms + s.max_ttl_ms + 2 * s.max_tolerance_ms
                   FROM cosid.lease l, cosid.store_state s WHERE l.namespace = 'fo_arrives';
    RAISE EXCEPTION USING ERRCODE = 'P0004';  -- nothing stays
EXCEPTION WHEN assert_failure THEN RETURN;
END $$;
SELECT s.raised_at_ms > 0 AS raised_before FROM cosid.store_state s;
SELECT * FROM arrival(false);
SELECT * FROM arrival(true);
SELECT count(*) AS rows_left FROM cosid.lease WHERE namespace = 'fo_arrives';
DROP FUNCTION arrival(boolean);
-- A free row arriving after the raise, whatever mark it brings (another store's history may
-- bring any), is brought up to the raise as it arrives: fence moved on, next floor above it.
BEGIN;
INSERT INTO cosid.lease (namespace, slot, fence, floor, ceiling, next_floor, raise_seen)
SELECT 'fo_arrives', 1, 7, n - 5000, n - 4000, n - 4000, 1000000 FROM cosid.store_now() n;
SELECT l.incarnation IS NULL AS free, l.fence > 4294967296 AS fenced, l.raise_seen = s.raise_count AS brought_up,
       l.next_floor >= s.raised_at_ms + s.max_ttl_ms + 2 * s.max_tolerance_ms AS above_the_raise
  FROM cosid.lease l, cosid.store_state s WHERE l.namespace = 'fo_arrives';
ROLLBACK;

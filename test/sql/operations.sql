-- The operations around the store never let a window start below one handed out before
-- (issue 22): a store restored from a dump raises its floors by itself, every grant respects
-- max_ttl (also the call that raises), the raise's margin comes from the store's limits, a
-- namespace's layout never changes, and no slot outside the layout is granted.  Runs after
-- failover.sql: its raises free every lease of the store, the keeper's too.

-- 1. A dump carries cosid.store_state (an extension configuration table); a restore's CREATE
-- EXTENSION writes a row of its own beside it.  Two rows: the store lost what its origin did
-- after the dump, and the next call raises, whatever raise_floors_on_new_timeline says.
SELECT count(*) AS dumped FROM pg_extension e, unnest(e.extconfig) c WHERE e.extname = 'cosid' AND c = 'cosid.store_state'::regclass;
SELECT cosid_namespace_create('op', slot_bits => 2, tolerance => '200 ms');
SELECT slot AS s0, fence AS f0, ceiling AS c0
FROM cosid.acquire('op', 'origin', '00000000-0000-0000-0000-0000000000d0', 20000) \gset
SELECT raise_floors_on_new_timeline FROM cosid_store_settings(raise_floors_on_new_timeline => false);
SELECT failovers AS failovers0 FROM cosid.store_state \gset
-- (in one transaction: the keeper, acquiring the successor of a lease a raise freed, records
-- its server as the store's issuer again)
BEGIN;
UPDATE cosid.store_state SET issuer_incarnation = NULL;  -- a dump of a store nobody issued from on its server (else: fork.sql)
INSERT INTO cosid.store_state (system_identifier, timeline)  -- what pg_restore's COPY adds (here the newest record: as the restore's own, its defaults are not taken)
SELECT system_identifier, timeline FROM cosid.store_state;
SELECT count(*) AS renewed FROM cosid.renew('op', :s0, '00000000-0000-0000-0000-0000000000d0', :f0, 20000);
COMMIT;
SELECT count(*) AS state_rows, bool_and(failovers = :failovers0 + 1) AS counted,
       bool_and(raised_at_ms > 0) AS raised, bool_and(NOT raise_floors_on_new_timeline) AS setting_kept
FROM cosid.store_state;
SELECT count(*) FILTER (WHERE incarnation IS NOT NULL) AS held,
       bool_and(next_floor >= cosid.store_now() + 60000 + 2 * 5000 - 5000) AS raised_by_the_store_limits
FROM cosid.lease WHERE namespace = 'op';
SELECT raise_floors_on_new_timeline FROM cosid_store_settings(raise_floors_on_new_timeline => true);

-- A copy of the data directory started as it is keeps cluster and timeline: raised by hand.
SELECT next_floor AS nf FROM cosid_leases('op') WHERE slot = 3 \gset
BEGIN;
UPDATE cosid.store_state SET issuer_incarnation = NULL;  -- (with it: a fork, fork.sql)
SELECT cosid_store_follow_timeline(restored => true) = :failovers0 + 2 AS raised_by_hand;
COMMIT;
SELECT next_floor > :nf AS raised_again, (SELECT count(*) FROM cosid.store_state) AS state_rows
FROM cosid_leases('op') WHERE slot = 3;

-- 4. The call that raises grants no lease longer than max_ttl: a 1 h lease asked for on a
-- "new timeline" is granted for 60 s, after the raise (a keeper whose cosid.ttl was reloaded
-- above the limit keeps its lease and renews sooner).  A renewal raises as well.
-- (In one transaction: the keeper's own store calls must not see the timeline at 0 and raise
-- first, as a loaded machine once let them.)
BEGIN;
UPDATE cosid.store_state SET timeline = 0, issuer_incarnation = NULL;
SELECT expires_at - store_now AS granted_ms, floor >= store_now + 60000 AS above_the_raise
FROM cosid.acquire('op', 'long', '00000000-0000-0000-0000-0000000000d1', 3600000);
SELECT count(*) AS long_windows FROM cosid.lease WHERE ceiling > cosid.store_now() + 60000 + 5000 + 70000;
ROLLBACK;
BEGIN;
UPDATE cosid.store_state SET timeline = 0, issuer_incarnation = NULL;
SELECT count(*) AS renewed FROM cosid.renew('op', 0, '00000000-0000-0000-0000-0000000000d1', 1, 20000);
SELECT timeline = cosid._timeline() AS raised_by_the_next_call FROM cosid.store_state;
COMMIT;

-- 5. A namespace made after a raise starts above it by the store's max_tolerance, not by its
-- own (smaller) tolerance: the one lost with the failover's tail may have had a larger one.
SELECT cosid_namespace_create('op_small', slot_bits => 1, tolerance => '0');
SELECT count(*) AS slots_above_the_raise FROM cosid.lease l, cosid.store_state s
WHERE l.namespace = 'op_small' AND l.next_floor >= s.raised_at_ms + s.max_ttl_ms + 2 * s.max_tolerance_ms;
-- every namespace's tolerance is within the store's max_tolerance
SELECT expect_error($$SELECT cosid_namespace_create('op_wide', tolerance => '6 seconds')$$);
SELECT expect_error($$SELECT cosid_store_settings(max_tolerance => '100 ms')$$);
SELECT expect_error($$SELECT cosid_store_settings(max_tolerance => '2 hours')$$);
SELECT max_tolerance_ms FROM cosid_store_settings(max_tolerance => '6 seconds');
SELECT cosid_namespace_create('op_wide', slot_bits => 1, tolerance => '6 seconds');
SELECT expect_error($$SELECT cosid_store_settings(max_tolerance => '5 seconds')$$);

-- 7. A namespace's layout and tolerance never change, its not-before only grows.
SELECT slot AS s1, fence AS f1 FROM cosid.acquire('op', 'holder', '00000000-0000-0000-0000-0000000000d2', 20000) \gset
SELECT expect_error($$UPDATE cosid.namespace SET slot_bits = 1, sequence_bits = 13 WHERE name = 'op'$$);
SELECT expect_error($$UPDATE cosid.namespace SET epoch_ms = epoch_ms + 1000 WHERE name = 'op'$$);
SELECT expect_error($$UPDATE cosid.namespace SET unit = 's' WHERE name = 'op'$$);
SELECT expect_error($$UPDATE cosid.namespace SET tolerance_ms = 0 WHERE name = 'op'$$);
SELECT expect_error($$UPDATE cosid.namespace SET name = 'op2' WHERE name = 'op'$$);
SELECT error_detail($$UPDATE cosid.namespace SET slot_bits = 1, sequence_bits = 13 WHERE name = 'op'$$) AS detail;
UPDATE cosid.namespace SET not_before_ms = 1000 WHERE name = 'op';
SELECT expect_error($$UPDATE cosid.namespace SET not_before_ms = 999 WHERE name = 'op'$$);
SELECT slot_bits, sequence_bits, not_before_ms FROM cosid.namespace WHERE name = 'op';

-- A lease row past the layout's slots (a hand-made row) is never granted: once slots 0-3 are
-- held (one by 'holder' above, three now), none is left; slot 4 would put its ids into the
-- timestamp bits.
INSERT INTO cosid.lease (namespace, slot) VALUES ('op', 4);
SELECT count(*) AS granted FROM (
    SELECT (cosid.acquire('op', 'filler' || g, ('00000000-0000-0000-0000-0000000000e' || g)::uuid, 20000)).slot
    FROM generate_series(1, 4) g) a WHERE slot IS NOT NULL;
SELECT slot IS NULL AS exhausted FROM cosid.acquire('op', 'more', '00000000-0000-0000-0000-0000000000f9', 20000);
SELECT incarnation IS NULL AS slot_4_never_granted FROM cosid.lease WHERE namespace = 'op' AND slot = 4;

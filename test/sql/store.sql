-- The SQL store's compare-and-set rules, called directly (as the keeper does), on a
-- namespace of 4 slots.  Times are shown relative to the store_now each call returns, and
-- cosid.store_clock_offset moves the store clock to make leases expire.
SELECT cosid.store_now() AS created \gset
SELECT cosid_namespace_create('st', slot_bits => 2, tolerance => '1 second');

-- acquire: lowest free slot, fence 1, floor = the store's now when the namespace was made
-- (a store made again never starts below one it replaces), ceiling = expires_at + tolerance.
SELECT slot, fence, floor BETWEEN :created AND store_now AS floor_is_creation, expires_at - store_now AS ttl, ceiling - expires_at AS tolerance,
       next_floor = ceiling AS next_floor_is_ceiling, duplicate_key, earliest_expiry
FROM cosid.acquire('st', 'hostA', '00000000-0000-0000-0000-00000000000a', 10000);
-- same owner again: a live lease is never handed back, not even to its own incarnation (the
-- store cannot know what it issued there): another slot.
SELECT slot, fence FROM cosid.acquire('st', 'hostA', '00000000-0000-0000-0000-00000000000a', 10000);
-- same key, other incarnation: a live lease is never taken over; duplicate key reported
SELECT slot, duplicate_key FROM cosid.acquire('st', 'hostA', '00000000-0000-0000-0000-0000000000a2', 10000);
-- preferred slot
SELECT slot FROM cosid.acquire('st', 'hostB', '00000000-0000-0000-0000-00000000000b', 10000, 3);
-- exhausted: no slot, the earliest expiry
-- (the held leases' expiry, read in the same statement: a loaded machine's second between
-- the statements above and this one must not count)
SELECT slot IS NULL AS exhausted, earliest_expiry > store_now AND earliest_expiry =
       (SELECT min(expires_at) FROM cosid.lease WHERE namespace = 'st' AND incarnation IS NOT NULL) AS earliest_expiry_in_ttl
FROM cosid.acquire('st', 'hostC', '00000000-0000-0000-0000-00000000000c', 10000);

-- renew: needs incarnation and fence; fence unchanged; never shrinks.
SELECT slot, fence, expires_at - store_now AS ttl FROM cosid.renew('st', 0, '00000000-0000-0000-0000-00000000000a', 1, 20000);
SELECT expires_at AS expires_before FROM cosid.lease WHERE namespace = 'st' AND slot = 0 \gset
SELECT slot, fence, expires_at >= :expires_before AS ttl_not_shrunk FROM cosid.renew('st', 0, '00000000-0000-0000-0000-00000000000a', 1, 1000) ;
SELECT count(*) AS wrong_fence FROM cosid.renew('st', 0, '00000000-0000-0000-0000-00000000000a', 2, 1000);
SELECT count(*) AS wrong_incarnation FROM cosid.renew('st', 0, '00000000-0000-0000-0000-00000000000b', 1, 1000);

-- release: exact last timestamp becomes next_floor, clamped into [floor, ceiling]; fence+1.
SELECT ceiling AS c1 FROM cosid.lease WHERE namespace = 'st' AND slot = 1 \gset
SELECT slot, fence, next_floor = :c1 - 500 AS next_floor_is_last FROM cosid.release('st', 1, '00000000-0000-0000-0000-00000000000a', 1, :c1 - 500);
SELECT count(*) AS release_again FROM cosid.release('st', 1, '00000000-0000-0000-0000-00000000000a', 1, 0);
-- sticky: hostA comes back as a new incarnation and gets slot 1 (previous owner hostA)
SELECT slot, fence, floor = :c1 - 500 AS floor_is_released_timestamp
FROM cosid.acquire('st', 'hostA', '00000000-0000-0000-0000-0000000000a3', 10000);
SELECT expect_error($$SELECT * FROM cosid.release('st', 1, '00000000-0000-0000-0000-0000000000a3', 2, NULL)$$);

-- revoke (administrator): next holder starts at the ceiling.
SELECT ceiling AS c3 FROM cosid.lease WHERE namespace = 'st' AND slot = 3 \gset
SELECT slot, fence, next_floor = :c3 AS next_floor_is_ceiling, previous_owner_key FROM cosid.revoke('st', 3);
SELECT count(*) AS revoke_free_slot FROM cosid.revoke('st', 3);
SELECT expect_error($$SELECT * FROM cosid.revoke('st', 4)$$);
SELECT slot, floor = :c3 AS floor_is_old_ceiling FROM cosid.acquire('st', 'hostC', '00000000-0000-0000-0000-00000000000c', 10000);

-- expiry: when the store clock passes expires_at, the slot can be taken; floor = old ceiling.
SELECT ceiling AS c0 FROM cosid.lease WHERE namespace = 'st' AND slot = 0 \gset
SET cosid.store_clock_offset = 60000;
SELECT state FROM cosid_leases('st') WHERE slot = 0;
SELECT slot, fence, floor = :c0 AS floor_is_old_ceiling
FROM cosid.acquire('st', 'hostD', '00000000-0000-0000-0000-00000000000d', 10000);
SELECT owner_key, previous_owner_key FROM cosid.lease WHERE namespace = 'st' AND slot = 0;
SELECT count(*) AS old_holder_cannot_renew FROM cosid.renew('st', 0, '00000000-0000-0000-0000-00000000000a', 1, 1000);
-- store clock jumps back: the ceiling never drops below floor
SET cosid.store_clock_offset = -3600000;
SELECT * FROM cosid.revoke('st', 0) \gset
SELECT slot, ceiling = floor AS ceiling_held_at_floor, ceiling >= :c0 AS never_decreases
FROM cosid.acquire('st', 'hostE', '00000000-0000-0000-0000-00000000000e', 10000);
RESET cosid.store_clock_offset;

-- bad input changes nothing
SELECT md5(string_agg(l::text, ',' ORDER BY slot)) AS before FROM cosid.lease l WHERE namespace = 'st' \gset
SELECT expect_error($$SELECT * FROM cosid.acquire('nope', 'h', gen_random_uuid(), 1000)$$);
SELECT expect_error($$SELECT * FROM cosid.acquire('st', NULL, gen_random_uuid(), 1000)$$);
SELECT expect_error($$SELECT * FROM cosid.acquire('st', 'h', gen_random_uuid(), -5)$$);
SELECT expect_error($$SELECT * FROM cosid.renew('st', 0, gen_random_uuid(), 1, 0)$$);
SELECT md5(string_agg(l::text, ',' ORDER BY slot)) = :'before' AS unchanged FROM cosid.lease l WHERE namespace = 'st';

-- The lease rules hold whoever writes the table (cosid._lease_guard): each change below is
-- refused with 23000 and changes nothing.  Slot 2 is held by hostA's second incarnation.
SELECT md5(string_agg(l::text, ',' ORDER BY slot)) AS before FROM cosid.lease l WHERE namespace = 'st' \gset
SELECT expect_error($$UPDATE cosid.lease SET floor = floor - 1 WHERE namespace = 'st' AND slot = 2$$);
SELECT expect_error($$UPDATE cosid.lease SET next_floor = floor WHERE namespace = 'st' AND slot = 2$$);
SELECT expect_error($$UPDATE cosid.lease SET ceiling = ceiling - 1, next_floor = next_floor - 1 WHERE namespace = 'st' AND slot = 2$$);
SELECT expect_error($$UPDATE cosid.lease SET fence = fence + 1, owner_key = 'x', incarnation = gen_random_uuid() WHERE namespace = 'st' AND slot = 2$$);
SELECT expect_error($$UPDATE cosid.lease SET owner_key = 'x', incarnation = gen_random_uuid() WHERE namespace = 'st' AND slot = 2$$);
SELECT expect_error($$UPDATE cosid.lease SET fence = fence - 1 WHERE namespace = 'st' AND slot = 2$$);
SELECT error_detail($$UPDATE cosid.lease SET floor = -1 WHERE namespace = 'st' AND slot = 2$$) ~ '^Before: fence \d+, floor \d+, ceiling \d+, next_floor \d+; after: fence \d+, floor -1, ' AS detail_names_both;
SELECT md5(string_agg(l::text, ',' ORDER BY slot)) = :'before' AS unchanged FROM cosid.lease l WHERE namespace = 'st';
-- An orderly release may hand back the unused end of a window: next_floor goes down to the
-- last issued timestamp, never below the window's floor (clamped, see above).
SELECT fence AS f0, floor AS fl0 FROM cosid.lease WHERE namespace = 'st' AND slot = 2 \gset
SELECT next_floor = :fl0 AS released_down_to_floor FROM cosid.release('st', 2, '00000000-0000-0000-0000-0000000000a2', :f0, 0);
-- Raising a free slot's next_floor is allowed; lowering it again is not (only a release may).
UPDATE cosid.lease SET next_floor = next_floor + 5 WHERE namespace = 'st' AND slot = 2;
SELECT expect_error($$UPDATE cosid.lease SET next_floor = next_floor - 1 WHERE namespace = 'st' AND slot = 2$$);
-- Every store write is durable: cosid._durable() raises a weaker synchronous_commit to "on"
-- for its transaction only, and keeps a stronger one.
SET synchronous_commit = off;
BEGIN;
SELECT FROM cosid._durable();
SELECT current_setting('synchronous_commit') AS in_the_transaction;
COMMIT;
SELECT current_setting('synchronous_commit') AS after_it;
SET synchronous_commit = remote_apply;
SELECT current_setting('synchronous_commit') AS stronger_kept FROM cosid._durable() d;
RESET synchronous_commit;
-- The store's lock order (cosid._store_state_lock): a transaction that holds lease rows and
-- finds the state unsettled fails to serialize at once, unless it holds the state's lock.
-- cosid._lock_held reads this backend's own locks: a mode or any stronger one.
BEGIN;
SELECT cosid._lock_held('cosid.lease', 'RowShareLock') AS before_any;
SELECT 1 AS locked FROM cosid.lease WHERE namespace = 'st' AND slot = 2 FOR UPDATE;
SELECT cosid._lock_held('cosid.lease', 'RowShareLock') AS row_share,
       cosid._lock_held('cosid.lease', 'RowExclusiveLock') AS not_row_exclusive;
SELECT expect_error($$SELECT cosid._store_state_lock()$$);
ROLLBACK;
BEGIN;
LOCK TABLE cosid.store_state IN EXCLUSIVE MODE;
SELECT 1 AS locked FROM cosid.lease WHERE namespace = 'st' AND slot = 2 FOR UPDATE;
SELECT cosid._lock_held('cosid.store_state', 'ShareRowExclusiveLock') AS stronger_held;
SELECT FROM cosid._store_state_lock();
ROLLBACK;
SELECT expect_error($$SELECT cosid._lock_held('cosid.lease', 'RowShare')$$);

-- The steps of the update from 1.7 to 1.8 that are not function definitions: ALTER, DROP and
-- data.  The build appends every function's current definition (sql/functions/) after them.

-- The lazy raise (cosid._follow_timeline): a raise after lost history frees and raises the held
-- lease rows at once, and counts itself in cosid.store_state.raise_count; a free row takes the
-- raise (its floor and a fence step) when it is next written, and says up to which raise it has
-- been brought in cosid.lease.raise_seen (cosid.acquire, cosid._raise_mark).  Before 1.8 every
-- raise rewrote every row at once: a store of 1.7 is brought up to date everywhere, so both
-- start at 0 (count 0: no raise a row could still miss).
ALTER TABLE cosid.store_state ADD COLUMN raise_count bigint NOT NULL DEFAULT 0;
ALTER TABLE cosid.lease ADD COLUMN raise_seen bigint NOT NULL DEFAULT 0;
GRANT SELECT (raise_seen) ON cosid.lease TO PUBLIC;

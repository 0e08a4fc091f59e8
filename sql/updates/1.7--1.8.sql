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

-- Room on each page of the lease table for one more version of every row: a renewal then
-- rewrites its row on its own page (a heap-only update: no entry in any of the table's five
-- indexes), where packed full (fillfactor 100) every renewal moved its row to another page
-- and wrote an entry in each index, 4.5 times the WAL (docs/capacity.md).  Pages packed
-- before get the room as their rows move.
ALTER TABLE cosid.lease SET (fillfactor = 50);

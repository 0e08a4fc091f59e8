-- A DELETE or TRUNCATE of lease rows forgets their windows, as DROP EXTENSION does: refused
-- while a window (or a free slot's next floor) reaches past the store's clock.  (The errors'
-- hints name a time; only their SQLSTATE and message are shown.)
CREATE FUNCTION error_without_hint(stmt text) RETURNS text LANGUAGE sql AS
$$ SELECT split_part(expect_error(stmt), ' HINT:', 1) $$;
SELECT cosid_namespace_create('fg', slot_bits => 2, tolerance => '1 second');
SELECT slot FROM cosid.acquire('fg', 'fgA', '00000000-0000-0000-0000-0000000000fa', 10000);
SELECT error_without_hint($$DELETE FROM cosid.lease WHERE namespace = 'fg' AND slot = 0$$);
-- (any of its slots: a free one's next floor reaches past the clock too after a recent raise)
SELECT regexp_replace(error_without_hint($$DELETE FROM cosid.lease WHERE namespace = 'fg'$$), 'slot \d+ of', 'slot S of') AS error_without_hint;
-- (a TRUNCATE names the row that ends last, which may be another test's)
SELECT regexp_replace(error_without_hint($$TRUNCATE cosid.lease$$), 'slot \d+ of namespace "[^"]*"', 'slot S of namespace N');
-- cosid.namespace goes only after the lease rows (no foreign key: a parallel restore loads
-- the two tables in any order)
SELECT error_without_hint($$TRUNCATE cosid.namespace CASCADE$$);
SELECT error_without_hint($$DELETE FROM cosid.namespace WHERE name = 'fg'$$);
-- also under session_replication_role = replica, the usual way to "turn triggers off" for a
-- cleanup (each in a transaction rolled back: a statement let through would stay done)
BEGIN;
SET LOCAL session_replication_role = replica;
SELECT error_without_hint($$DELETE FROM cosid.lease WHERE namespace = 'fg' AND slot = 0$$);
SELECT regexp_replace(error_without_hint($$TRUNCATE cosid.lease$$), 'slot \d+ of namespace "[^"]*"', 'slot S of namespace N');
ROLLBACK;
-- a TRUNCATE runs only at READ COMMITTED: at REPEATABLE READ its look would read a snapshot
-- older than its lock (test/specs/forget_race.spec)
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT error_without_hint($$TRUNCATE cosid.lease$$);
ROLLBACK;
SELECT count(*) AS rows_kept FROM cosid.lease WHERE namespace = 'fg';
-- the DETAIL says until when
SELECT error_detail($$DELETE FROM cosid.lease WHERE namespace = 'fg' AND slot = 0$$)
       LIKE 'It ends at % UTC. The lease table is the only record of that window: %' AS detail_says_until;
-- revoked: free, its next floor the ceiling, ahead of the clock: still held
SELECT slot FROM cosid.revoke('fg', 0);
SELECT error_without_hint($$DELETE FROM cosid.lease WHERE namespace = 'fg' AND slot = 0$$);
-- once the store's clock has passed every window and next floor (also a floor the earlier
-- raise of failover.sql put ahead), the rows and the namespace go
SET cosid.store_clock_offset = 3600000;
DELETE FROM cosid.lease WHERE namespace = 'fg';
DELETE FROM cosid.namespace WHERE name = 'fg';
RESET cosid.store_clock_offset;
SELECT count(*) AS fg_rows_left FROM cosid.lease WHERE namespace = 'fg';
DROP FUNCTION error_without_hint(text);

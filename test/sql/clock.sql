-- The generator's clock against its window (DESIGN.md section 1), with cosid.clock_offset.
SET cosid.acquire_timeout = '2s';  -- room for a loaded machine's first acquire; the clock below stays 5 s behind
SELECT cosid_namespace_create('clk', slot_bits => 4);
SELECT cosid_next('clk') AS a \gset

-- Clock behind the last timestamp: go on with the last one; ids still increase.
SET cosid.clock_offset = -5000;
SELECT cosid_next('clk') AS b \gset
SELECT :b > :a AS increasing,
       (cosid_parse(:b, 'clk')).ts - (cosid_parse(:a, 'clk')).ts < interval '5 ms' AS stays_on_last_timestamp;

-- A new window starts after the released timestamp; a clock 5 s behind it issues from the
-- floor at once, ahead of itself (cosid.max_borrow -1, the default): never below the floor.
RESET cosid.clock_offset;
SELECT cosid_release();
SET cosid.clock_offset = -5000;
SELECT cosid_next('clk') AS c \gset
SELECT :c > :b AS above_the_floor,
       (cosid_parse(:c, 'clk')).ts > clock_timestamp() - interval '4 s' AS ahead_of_its_clock;
RESET cosid.clock_offset;
SELECT cosid_next('clk') > :b AS recovers_when_clock_is_back;

-- Clock ahead of the store by more than ttl + tolerance: the generator reaches its
-- ceiling at once, waits for a renewal that cannot cover it, and fails.
SET cosid.clock_offset = 60000;
SELECT expect_error($$SELECT cosid_next('clk')$$);
SELECT waits_at_ceiling > 0 AS counted_wait FROM cosid_stats();
RESET cosid.clock_offset;
SELECT cosid_next('clk') > :b AS recovers_when_clock_is_right;

-- Exhausted namespace: all 4 slots of 'small' held by other owners.
SELECT count(*) AS taken FROM generate_series(1, 4) g,
       cosid.acquire('small', 'other' || g, gen_random_uuid(), 60000) a WHERE a.slot IS NOT NULL;
SELECT expect_error($$SELECT cosid_next('small')$$);
SELECT error_detail($$SELECT cosid_next('small')$$) LIKE 'Every slot is held; the earliest lease expires at %' AS names_earliest_expiry;
-- The keeper may be inside its last try for the caller when the caller gives up; it frees
-- the request when that try returns (a try is bounded by ttl/6 = 500 ms; waiting up to
-- 1.9 s, under the 2 s after which abandoned requests are dropped anyway, still cannot
-- hide a request left behind, and leaves room for a loaded machine).
DO $$ BEGIN
    FOR i IN 1..38 LOOP
        EXIT WHEN NOT EXISTS (SELECT 1 FROM cosid_pool() WHERE namespace = 'small');
        PERFORM pg_sleep(0.05);
    END LOOP;
END $$;
SELECT count(*) AS pool_requests_left FROM cosid_pool() WHERE namespace = 'small';
-- A caller cancelled while it waits leaves its request behind; the keeper drops it once
-- nobody has been waiting on it for 2 s, instead of acquiring for it forever.
SET statement_timeout = '300ms';
SELECT cosid_next('small');
RESET statement_timeout;
SELECT count(*) AS abandoned_request FROM cosid_pool() WHERE namespace = 'small';
-- (waited for with a deadline: dropped 2 s after, at the keeper's next pass)
DO $$ BEGIN
    FOR i IN 1..200 LOOP
        EXIT WHEN NOT EXISTS (SELECT 1 FROM cosid_pool() WHERE namespace = 'small');
        PERFORM pg_sleep(0.05);
    END LOOP;
END $$;
SELECT count(*) AS abandoned_request_dropped FROM cosid_pool() WHERE namespace = 'small';

-- Bad settings are refused and change nothing.
SELECT expect_error($$SET cosid.clock_offset = 'soon'$$);
SELECT expect_error($$SET cosid.acquire_timeout = -5$$);
SELECT expect_error($$SET cosid.ttl = '10s'$$);
SELECT expect_error($$SET cosid.database = 'other'$$);
SHOW cosid.acquire_timeout;

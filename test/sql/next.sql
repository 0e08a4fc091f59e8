-- cosid_next() as a column default, the pool, parse round trip and errors.
CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT cosid_next(), note text);
INSERT INTO orders(note) SELECT 'x' FROM generate_series(1, 20000);
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_ids FROM orders;

-- Ids increase in insertion order within one backend (time-ordered).
SELECT bool_and(id > prev) AS increasing
FROM (SELECT id, lag(id) OVER (ORDER BY ctid) AS prev FROM orders) s WHERE prev IS NOT NULL;

-- The instance holds one lease of 'default', shared by its backends: every id parses to its
-- slot, inside its window, and the pool shows the last id issued on it.
SELECT count(DISTINCT p.slot) AS slots_used,
       bool_and(p.slot = b.slot) AS on_the_lease_slot,
       bool_and(extract(epoch FROM p.ts) * 1000 > b.floor
                AND extract(epoch FROM p.ts) * 1000 <= b.ceiling) AS inside_window,
       -- the last id claimed: a statement may leave the end of its last block unused
       max(o.id) BETWEEN min(b.last_id) - 3 AND min(b.last_id) AS pool_shows_last_id,
       (extract(epoch FROM max(p.ts)) * 1000)::bigint = min(b.last_issued) AS pool_shows_last_timestamp
FROM orders o, cosid_parse(o.id) p,
     (SELECT slot, floor, ceiling, last_id, last_issued FROM cosid_pool() WHERE namespace = 'default') b;

SELECT namespace, state, backends FROM cosid_pool() WHERE namespace = 'default';
-- The store shows the same slot held by this instance's owner key and incarnation.
SELECT l.state, l.owner_key = s.owner_key AS same_key, l.incarnation = s.incarnation AS same_incarnation,
       l.fence = p.fence AS same_fence, l.ceiling >= p.ceiling AS store_ceiling_covers_pool
FROM cosid_pool() p JOIN cosid_leases('default') l USING (slot), cosid_stats() s
WHERE p.namespace = 'default';

-- parse round trip on a fresh id: the timestamp is now (the clock), the sequence fits.
SELECT abs(extract(epoch FROM p.ts - clock_timestamp())) < 5 AS ts_is_now, p.sequence BETWEEN 0 AND 4095 AS seq_ok
FROM cosid_parse(cosid_next()) p;

-- Ids are never handed back by a rollback (like nextval).
BEGIN;
SELECT cosid_next() AS rolled_back_id \gset
ROLLBACK;
SELECT cosid_next() > :rolled_back_id AS after_rollback_still_increasing;

-- Other namespaces: each has its own lease; unknown and invalid names fail clearly.
SELECT (cosid_parse(cosid_next('seconds'), 'seconds')).slot >= 0 AS seconds_ns_works;
SELECT abs(extract(epoch FROM (cosid_parse(cosid_next('seconds'), 'seconds')).ts - now())) < 5 AS seconds_ts_ok;
SELECT namespace, state, backends FROM cosid_pool() WHERE state <> 'ended' ORDER BY namespace;
SELECT expect_error($$SELECT cosid_next('no_such_namespace')$$);
SELECT expect_error($$SELECT cosid_next('bad name!')$$);
SELECT expect_error($$SELECT cosid_next(NULL)$$);
SET cosid.namespace = 'few_slots';
SELECT (cosid_parse(cosid_next(), 'few_slots')).slot BETWEEN 0 AND 7 AS few_slots_default_works;
RESET cosid.namespace;
SET cosid.namespace = 'not valid!';
SHOW cosid.namespace;

-- Counters moved.
SELECT acquires >= 3 AS acquired, ids_issued >= 20000 AS counted_ids, leases_lost = 0 AS none_lost FROM cosid_stats();

-- cosid_release(): the instance's leases this backend issues on are released in order, each
-- with the exact last timestamp of its issue word.
SELECT cosid_next() AS last_id \gset
SELECT slot AS last_slot FROM cosid_parse(:last_id) \gset
SELECT cosid_release() AS released;
SELECT count(*) AS still_leased FROM cosid_pool() WHERE state = 'active';
SELECT l.state, l.next_floor = (extract(epoch FROM p.ts) * 1000)::bigint AS next_floor_is_last_issued
FROM cosid_leases('default') l, cosid_parse(:last_id) p WHERE l.slot = :last_slot;
-- The next call gets a new lease, and starts after the released timestamp.
SELECT cosid_next() > :last_id AS new_lease_after_release;
SELECT namespace, state, backends FROM cosid_pool() WHERE state <> 'ended' ORDER BY namespace;

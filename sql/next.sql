-- cosid_next() as a column default, the pool, parse round trip and errors.
CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT cosid_next(), note text);
INSERT INTO orders(note) SELECT 'x' FROM generate_series(1, 20000);
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_ids FROM orders;

-- Ids increase in insertion order within one backend (time-ordered).
SELECT bool_and(id > prev) AS increasing
FROM (SELECT id, lag(id) OVER (ORDER BY ctid) AS prev FROM orders) s WHERE prev IS NOT NULL;

-- Every id parses to the slot this backend is bound to, inside that slot's window.
SELECT count(DISTINCT p.slot) AS slots_used,
       bool_and(p.slot = b.slot) AS on_bound_slot,
       bool_and(extract(epoch FROM p.ts) * 1000 > b.floor
                AND extract(epoch FROM p.ts) * 1000 <= b.ceiling) AS inside_window
FROM orders o, cosid_parse(o.id) p,
     (SELECT slot, floor, ceiling FROM cosid_pool() WHERE bound_pid = pg_backend_pid()) b;

SELECT namespace, state, bound_pid = pg_backend_pid() AS mine FROM cosid_pool() WHERE bound_pid = pg_backend_pid();
-- The store shows the same slot held by this instance's owner key and incarnation.
SELECT l.state, l.owner_key = s.owner_key AS same_key, l.incarnation = s.incarnation AS same_incarnation,
       l.fence = p.fence AS same_fence, l.ceiling >= p.ceiling AS store_ceiling_covers_pool
FROM cosid_pool() p JOIN cosid_leases('default') l USING (slot), cosid_stats() s
WHERE p.bound_pid = pg_backend_pid();

-- parse round trip on a fresh id: the timestamp is now (the clock), the sequence fits.
SELECT abs(extract(epoch FROM p.ts - clock_timestamp())) < 5 AS ts_is_now, p.sequence BETWEEN 0 AND 4095 AS seq_ok
FROM cosid_parse(cosid_next()) p;

-- Ids are never handed back by a rollback (like nextval).
BEGIN;
SELECT cosid_next() AS rolled_back_id \gset
ROLLBACK;
SELECT cosid_next() > :rolled_back_id AS after_rollback_still_increasing;

-- Other namespaces: each binds its own slot; unknown and invalid names fail clearly.
SELECT (cosid_parse(cosid_next('seconds'), 'seconds')).slot >= 0 AS seconds_ns_works;
SELECT abs(extract(epoch FROM (cosid_parse(cosid_next('seconds'), 'seconds')).ts - now())) < 5 AS seconds_ts_ok;
SELECT namespace, state FROM cosid_pool() WHERE bound_pid = pg_backend_pid() ORDER BY namespace;
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

-- cosid_release(): closes the generators and hands the exact last timestamp to the store.
SELECT cosid_next() AS last_id \gset
SELECT slot AS last_slot FROM cosid_parse(:last_id) \gset
SELECT cosid_release() AS released;
SELECT count(*) AS still_bound FROM cosid_pool() WHERE bound_pid = pg_backend_pid();
SELECT l.state, l.next_floor = (extract(epoch FROM p.ts) * 1000)::bigint AS next_floor_is_last_issued
FROM cosid_leases('default') l, cosid_parse(:last_id) p WHERE l.slot = :last_slot;
-- The next call binds again, and starts after the released timestamp.
SELECT cosid_next() > :last_id AS rebinds_after_release;

-- Time ranges on the id column: a primary-key range scan, and range partitions by month
-- whose bounds are cosid_min_id() of each month's first instant, with partition pruning.
SET timezone = 'UTC';
CREATE TABLE events (id bigint NOT NULL, note text) PARTITION BY RANGE (id);
CREATE TABLE events_2027_01 PARTITION OF events
    FOR VALUES FROM (cosid_min_id('2027-01-01')) TO (cosid_min_id('2027-02-01'));
CREATE TABLE events_2027_02 PARTITION OF events
    FOR VALUES FROM (cosid_min_id('2027-02-01')) TO (cosid_min_id('2027-03-01'));
CREATE TABLE events_2027_03 PARTITION OF events
    FOR VALUES FROM (cosid_min_id('2027-03-01')) TO (cosid_min_id('2027-04-01'));
ALTER TABLE events ADD PRIMARY KEY (id);
-- the bounds are plain numbers, computed once when each partition was made
SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound
FROM pg_class c WHERE c.relispartition AND c.relname LIKE 'events_%' ORDER BY 1;
-- rows spread over the three months, every slot and sequence, the first and last id of each
-- month included (ids made by hand: only the timestamp decides the partition)
INSERT INTO events
SELECT cosid_min_id(t) + (s::bigint << 12) + q, to_char(t, 'YYYY-MM-DD HH24:MI:SS.MS')
FROM generate_series(timestamptz '2027-01-01', '2027-03-31 23:00', '7 hours 13 minutes') t,
     (VALUES (0, 0), (1023, 4095), (5, 17)) v(s, q);
INSERT INTO events VALUES (cosid_max_id('2027-01-31 23:59:59.999'), 'last of january'),
                          (cosid_min_id('2027-02-01'), 'first of february'),
                          (cosid_max_id('2027-03-31 23:59:59.999'), 'last of march');
SELECT tableoid::regclass AS partition, count(*) AS rows,
       bool_and(date_trunc('month', cosid_timestamp(id)) =
                to_date(substr(tableoid::regclass::text, 8), 'YYYY_MM')) AS rows_of_its_month
FROM events GROUP BY 1 ORDER BY 1;
SELECT note FROM events WHERE id = cosid_min_id('2027-02-01');
-- outside every partition: refused like any other value
SELECT expect_error($$INSERT INTO events VALUES (cosid_min_id('2027-04-01'), 'april')$$);
ANALYZE events;
-- (plain index scans in the plans below, whatever the costs on this machine)
SET enable_seqscan = off;
SET enable_bitmapscan = off;
-- a time range in February: one partition scanned (the bounds are evaluated when the
-- executor starts, so the others are removed then: "Subplans Removed")
EXPLAIN (COSTS OFF)
SELECT * FROM events WHERE id BETWEEN cosid_min_id('2027-02-10') AND cosid_max_id('2027-02-11');
SELECT count(*) AS rows_10_to_11_feb,
       bool_and(cosid_timestamp(id) >= '2027-02-10' AND cosid_timestamp(id) < '2027-02-11 00:00:00.001')
           AS all_in_range
FROM events WHERE id BETWEEN cosid_min_id('2027-02-10') AND cosid_max_id('2027-02-11');
-- with constants (as an application would send them), pruned at plan time
SELECT cosid_min_id('2027-03-05') AS lo, cosid_max_id('2027-03-06') AS hi \gset
EXPLAIN (COSTS OFF) SELECT * FROM events WHERE id BETWEEN :lo AND :hi;
-- a plain table: the time range is a range scan of the primary key
CREATE TABLE orders_by_time (id bigint PRIMARY KEY, note text);
INSERT INTO orders_by_time SELECT id, note FROM events;
ANALYZE orders_by_time;
EXPLAIN (COSTS OFF)
SELECT * FROM orders_by_time WHERE id BETWEEN cosid_min_id('2027-02-10') AND cosid_max_id('2027-02-11');
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT (SELECT count(*) FROM orders_by_time
        WHERE id BETWEEN cosid_min_id('2027-02-10') AND cosid_max_id('2027-02-11')) =
       (SELECT count(*) FROM orders_by_time
        WHERE cosid_timestamp(id) >= '2027-02-10' AND cosid_timestamp(id) < '2027-02-11 00:00:00.001') AS same_rows;

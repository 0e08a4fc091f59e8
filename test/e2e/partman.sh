#!/usr/bin/env bash
# Daily partitions of a cosid column managed by pg_partman 4.7 (Debian's postgresql-15-partman):
# id-based partitioning whose interval is one day of ids (86,400,000 ms << slot + sequence
# bits).  The default epoch is a UTC midnight, so every partition is exactly one UTC day.
# Checks: the partitions pg_partman makes start at cosid_min_id() of a midnight and hold
# one day; rows from cosid_next() (several clients at once) and hand-made ids of other days
# land in the partition of their day; run_maintenance() premakes the days ahead of the
# newest row; a time range on the id scans only its day's partition.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
dir="${1:-/tmp/cosid-e2e}/partman"; port=55479
if [ ! -f "$("$PG_BIN/pg_config" --sharedir)/extension/pg_partman.control" ]; then
    echo "not ok - pg_partman is not installed (postgresql-15-partman; scripts/test.sh installs it)"; exit 1
fi
node_up main "$dir" "$port"
trap 'node_stop_all immediate' EXIT

day_of_ids=$(q -c "SELECT 86400000::bigint << 22")  # the default layout: 10 slot + 12 sequence bits
q -c "CREATE EXTENSION cosid" -c "CREATE SCHEMA partman" -c "CREATE EXTENSION pg_partman SCHEMA partman" \
  -c "CREATE TABLE events (id bigint NOT NULL DEFAULT cosid_next(), client int, PRIMARY KEY (id)) PARTITION BY RANGE (id)" \
  >/dev/null
# Start two days back (rows of those days can arrive late), premake 3 days ahead.
q -c "SELECT partman.create_parent('public.events', 'id', 'native', '$day_of_ids', p_premake => 3,
        p_start_partition => cosid_min_id(date_trunc('day', now(), 'UTC') - interval '2 days')::text)" >/dev/null
days=$(q -c "SELECT count(*) FROM partman.show_partitions('public.events')")
echo "# partitions made by create_parent: $days"
[ "$days" -ge 4 ] && echo "ok - pg_partman made the daily partitions" || { echo "not ok - $days partitions"; FAIL=1; }
# every partition: from cosid_min_id(a UTC midnight) to cosid_min_id(the next midnight)
bounds() {
    q -c "SELECT count(*) FILTER (WHERE lo IS NULL OR hi IS NULL OR NOT (
                   cosid_min_id(date_trunc('day', cosid_timestamp(lo), 'UTC')) = lo
                   AND hi = cosid_min_id(date_trunc('day', cosid_timestamp(lo), 'UTC') + interval '1 day')))
          FROM (SELECT m[1]::bigint AS lo, m[2]::bigint AS hi
                FROM partman.show_partitions('public.events') s
                JOIN pg_class c ON c.relname = s.partition_tablename,
                     regexp_match(pg_get_expr(c.relpartbound, c.oid), \$re\$FROM \('(\d+)'\) TO \('(\d+)'\)\$re\$) m) b"
}
check "every partition is one UTC day: cosid_min_id(midnight) to cosid_min_id(next midnight)" 0 "$(bounds)"

# Several clients insert with cosid_next() at once.
cat > "$dir/insert.sql" <<'SQL'
INSERT INTO events(client) SELECT :client_id FROM generate_series(1, 50);
SQL
chown "$PG_USER" "$dir/insert.sql"
as_pg pgbench -n -h "$dir" -p "$port" -c 4 -j 2 -t 100 -f "$dir/insert.sql" postgres > "$dir/pgbench.log" 2>&1 \
    || { echo "not ok - pgbench failed"; sed 's/^/#   /' "$dir/pgbench.log"; FAIL=1; }
# Rows of yesterday and of the day before, made by hand (a late import): every slot and sequence.
q -c "INSERT INTO events(id, client)
      SELECT cosid_min_id(date_trunc('day', now(), 'UTC') - d * interval '1 day' + interval '1 hour') + (s::bigint << 12) + n, -1
      FROM generate_series(1, 2) d, (VALUES (0, 0), (1023, 4095), (7, 99)) v(s, n)" >/dev/null
check "20,006 rows, no duplicate" "20006 20006" "$(q -c "SELECT count(*) || ' ' || count(DISTINCT id) FROM events")"
check "every row is in the partition of its UTC day" 0 "$(q -c "
    SELECT count(*) FROM events e
    WHERE e.tableoid <> (SELECT c.oid FROM pg_class c
                         WHERE c.relname = (partman.show_partition_name('public.events', e.id::text)).partition_table)
       OR (SELECT min_id FROM (SELECT cosid_min_id(date_trunc('day', cosid_timestamp(e.id), 'UTC')) AS min_id) m)
          <> (partman.show_partition_name('public.events', e.id::text)).suffix_id::bigint")"
check "nothing in the default partition" 0 "$(q -c "SELECT count(*) FROM ONLY events_default")"
echo "# rows per partition: $(q -c "SELECT string_agg(tableoid::regclass || '=' || n, ' ' ORDER BY 1) FROM (SELECT tableoid, count(*) n FROM events GROUP BY 1) x")"

# A row of tomorrow: run_maintenance() premakes 3 days past the newest row's day.
before=$(q -c "SELECT count(*) FROM partman.show_partitions('public.events')")
q -c "INSERT INTO events(id, client) VALUES (cosid_min_id(date_trunc('day', now(), 'UTC') + interval '1 day 2 hours'), -2)" >/dev/null
q -c "SELECT partman.run_maintenance('public.events')" >/dev/null
after=$(q -c "SELECT count(*) FROM partman.show_partitions('public.events')")
echo "# partitions before and after run_maintenance: $before, $after"
check_true "run_maintenance premade the days after tomorrow" "$(q -c "
    SELECT max((partman.show_partition_info(partition_schemaname || '.' || partition_tablename)).child_end_id::bigint)
           >= cosid_min_id(date_trunc('day', now(), 'UTC') + interval '4 days')
    FROM partman.show_partitions('public.events')")"
check "the new partitions are UTC days too" 0 "$(bounds)"

# A time range on the id: only that day's partition is scanned.
q -c "ANALYZE events" >/dev/null
plan=$(q -c "SET enable_seqscan = off" -c "EXPLAIN (COSTS OFF) SELECT count(*) FROM events
              WHERE id BETWEEN cosid_min_id(date_trunc('day', now(), 'UTC') - interval '1 day')
                           AND cosid_max_id(date_trunc('day', now(), 'UTC') - interval '1 day' + interval '3 hours')")
echo "$plan" | sed 's/^/#   /'
yesterday=$(q -c "SELECT (partman.show_partition_name('public.events',
                     cosid_min_id(date_trunc('day', now(), 'UTC') - interval '1 day')::text)).partition_table")
scanned=$(echo "$plan" | grep -oE 'on events_p[0-9]+' | sort -u | tr '\n' ' ')
check "the plan scans only yesterday's partition ($yesterday)" "on $yesterday " "$scanned"
check "and finds yesterday's rows" 3 "$(q -c "SELECT count(*) FROM events
              WHERE id BETWEEN cosid_min_id(date_trunc('day', now(), 'UTC') - interval '1 day')
                           AND cosid_max_id(date_trunc('day', now(), 'UTC') - interval '1 day' + interval '3 hours')")"
assert_store_verified "$dir" "$port" postgres
exit $FAIL

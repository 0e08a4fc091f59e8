#!/usr/bin/env bash
# Many real clients at once: 10 pgbench clients insert rows with DEFAULT cosid_next() for
# a while, half of them opening a new connection per transaction.  Then: zero duplicate
# ids, no failed transaction, every id inside a window this instance held on its slot,
# and, once the pool has gone idle, every slot released with next_floor = the last
# timestamp issued on it.  The same clients also insert into a table of a 53-bit namespace
# (JavaScript-safe ids): zero duplicates, every id below 2^53 and inside a held window.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
dir="${1:-/tmp/cosid-e2e}/concurrency"; port=55441
node_up main "$dir" "$port" "cosid.ttl = '2s'" "cosid.pool_idle_timeout = '2s'"
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT

q -c "CREATE EXTENSION cosid" -c "CREATE TABLE t (id bigint DEFAULT cosid_next(), client int, at timestamptz DEFAULT clock_timestamp())" \
  -c "SELECT cosid_namespace_create('web', slot_bits => 4, sequence_bits => 8, total_bits => 53)" \
  -c "CREATE TABLE w (id bigint DEFAULT cosid_next('web'), client int)" \
  -c "CREATE TABLE observed (namespace text, slot int, fence bigint, incarnation uuid, floor bigint, ceiling bigint)" >/dev/null
cat > "$dir/insert.sql" <<'SQL'
INSERT INTO t(client) SELECT :client_id FROM generate_series(1, 20);
INSERT INTO w(client) SELECT :client_id FROM generate_series(1, 5);
SQL
chown "$PG_USER" "$dir/insert.sql"

# Sample the store's view of this instance's leases while the clients run.
sampler() {
    while [ ! -e "$dir/stop" ]; do
        q -c "INSERT INTO observed SELECT l.namespace, l.slot, l.fence, l.incarnation, l.floor, l.ceiling
              FROM cosid.lease l WHERE l.namespace IN ('default', 'web') AND l.incarnation IS NOT NULL" >/dev/null 2>&1 || true
        sleep 0.1
    done
}
rm -f "$dir/stop"
sampler &
sampler_pid=$!
seconds=8
as_pg pgbench -n -h "$dir" -p "$port" -c 5 -j 2 -T "$seconds" -f "$dir/insert.sql" postgres > "$dir/persistent.log" 2>&1 &
p1=$!
# a fixed number of connections (5 x 25), not a time: a loaded machine opened only 74 in 8 s
churn_connections=125
as_pg pgbench -n -C -h "$dir" -p "$port" -c 5 -j 2 -t $((churn_connections / 5)) -f "$dir/insert.sql" postgres > "$dir/churn.log" 2>&1 &
p2=$!
wait $p1 || FAIL=1
wait $p2 || FAIL=1
# one last sample while the slots are still pooled (held) with their final ceilings
q -c "INSERT INTO observed SELECT l.namespace, l.slot, l.fence, l.incarnation, l.floor, l.ceiling
      FROM cosid.lease l WHERE l.namespace IN ('default', 'web') AND l.incarnation IS NOT NULL" >/dev/null
touch "$dir/stop"; wait $sampler_pid || true

grep -E "number of transactions actually processed|number of failed" "$dir/persistent.log" "$dir/churn.log" | sed 's/^/# /'
rows=$(q -c "SELECT count(*) FROM t")
echo "# rows inserted: $rows by 10 clients (5 reconnecting per transaction)"
[ "$rows" -gt 10000 ] && echo "ok - a real load ran" || { echo "not ok - too few rows: $rows"; FAIL=1; }
check "zero duplicate ids" 0 "$(q -c "SELECT count(*) - count(DISTINCT id) FROM t")"
check "no NULL ids" 0 "$(q -c "SELECT count(*) FROM t WHERE id IS NULL")"
check "no failed pgbench transaction" 0 "$(cat "$dir"/persistent.log "$dir"/churn.log | grep -c 'aborted\|error' || true)"
me=$(q -c "SELECT incarnation FROM cosid_stats()")
# every id decoded once (cosid_parse in the select list would run once per output column)
q -c "CREATE TABLE parsed AS SELECT p.slot, (extract(epoch FROM p.ts) * 1000)::bigint AS ts FROM t, cosid_parse(t.id) p" >/dev/null
check "every id lies in a window this instance held on its slot" 0 "$(q -c "
    WITH w AS (SELECT slot, fence, min(floor) AS floor, max(ceiling) AS ceiling FROM observed
               WHERE incarnation = '$me' AND namespace = 'default' GROUP BY slot, fence),
         p AS (SELECT * FROM parsed)
    SELECT count(*) FROM p
    WHERE NOT EXISTS (SELECT 1 FROM w WHERE w.slot = p.slot AND p.ts > w.floor AND p.ts <= w.ceiling)")"
echo "# slots used: $(q -c "SELECT count(DISTINCT slot) FROM parsed")"

# The 53-bit namespace, issued beside 'default' by the same backends.
web_rows=$(q -c "SELECT count(*) FROM w")
echo "# rows in the 53-bit namespace 'web': $web_rows"
[ "$web_rows" -gt 2000 ] && echo "ok - a real load ran on the 53-bit namespace" || { echo "not ok - too few rows in w: $web_rows"; FAIL=1; }
check "53-bit namespace: zero duplicate ids" 0 "$(q -c "SELECT count(*) - count(DISTINCT id) FROM w")"
check "53-bit namespace: every id below 2^53 and exact as a JSON number" 0 \
    "$(q -c "SELECT count(*) FROM w WHERE id IS NULL OR id < 0 OR id >= 9007199254740992 OR id::float8::bigint <> id")"
q -c "CREATE TABLE parsed_w AS SELECT p.slot, (extract(epoch FROM p.ts) * 1000)::bigint AS ts FROM w, cosid_parse(w.id, 'web') p" >/dev/null
check "53-bit namespace: every id lies in a window this instance held on its slot" 0 "$(q -c "
    WITH win AS (SELECT slot, fence, min(floor) AS floor, max(ceiling) AS ceiling FROM observed
                 WHERE incarnation = '$me' AND namespace = 'web' GROUP BY slot, fence)
    SELECT count(*) FROM parsed_w p
    WHERE NOT EXISTS (SELECT 1 FROM win WHERE win.slot = p.slot AND p.ts > win.floor AND p.ts <= win.ceiling)")"

# All clients are gone; after pool_idle_timeout the keeper releases every slot in order.
for _ in $(seq 1 60); do
    held=$(q -c "SELECT count(*) FROM cosid.lease WHERE namespace IN ('default', 'web') AND incarnation IS NOT NULL")
    [ "$held" = 0 ] && break
    sleep 0.2
done
check "every pooled slot released after the idle timeout" 0 "$held"
check "released slots hand on the exact last issued timestamp" 0 "$(q -c "
    WITH last AS (SELECT slot, max(ts) AS ts FROM parsed GROUP BY 1)
    SELECT count(*) FROM last JOIN cosid.lease l ON l.namespace = 'default' AND l.slot = last.slot
    WHERE l.next_floor <> last.ts")"
q -c "SELECT 'stats: ' || row_to_json(s)::text FROM cosid_stats() s" | sed 's/^/# /'
check "no lease lost, no renewal failed" "0 0" "$(q -c "SELECT leases_lost || ' ' || renewal_failures FROM cosid_stats()")"
# Connection churn costs the store nothing: new backends bind pooled slots.
connections=$(awk '/actually processed/ {split($NF, n, "/"); print n[1]}' "$dir/churn.log")  # "125/125" with -t
acquires=$(q -c "SELECT acquires FROM cosid_stats()")
echo "# $connections connections opened by the churning clients; $acquires acquires in all"
[ "$acquires" -le 20 ] && [ "$connections" = "$churn_connections" ] && echo "ok - no acquire per connection: the pool serves reconnecting clients" \
    || { echo "not ok - $acquires acquires for $connections connections"; FAIL=1; }
check "a sample of 300 ids of both namespaces: each has one issuer in the store's history, this server's lease" 0 "$(q -c "
    SELECT count(*) FROM (SELECT * FROM (SELECT id, 'default' AS ns FROM t ORDER BY random() LIMIT 200) a
                          UNION ALL SELECT * FROM (SELECT id, 'web' FROM w ORDER BY random() LIMIT 100) b) s
    WHERE (SELECT count(*) FILTER (WHERE i.owner_key = (SELECT owner_key FROM cosid_stats())) || '/' || count(*)
             FROM cosid_issuer(s.id, s.ns) i) <> '1/1'")"
assert_store_verified "$dir" "$port" postgres
exit $FAIL

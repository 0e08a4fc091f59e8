#!/usr/bin/env bash
# cosid's benchmarks, each against baselines measured in the same run on the same server:
# tight loop, bulk insert, connection churn, first-call latency, store load.  Prints a
# compact table and writes the same figures to bench/results/latest.{csv,json}.
# Not part of the tests: timings on a shared machine are noisy, so nothing here asserts.
#   bash bench/run.sh            (as root; installs and builds like the other scripts; draws
#                                 docs/img/bench-*.svg with bench/charts.sh)
#   QUICK=1 bash bench/run.sh    (smaller sizes, for a smoke run)
#   FLEET=1 bash bench/run.sh    (adds section 8: one store under simulated fleets of 100 to 20,000
#                                 instances, directly and through PgBouncer; about 12 minutes;
#                                 FLEET=only runs section 8 alone; bench/fleet/fleet.sh)
#   GAPS=1 bash bench/run.sh     (adds section 9: the gap in ids each operation costs (a restart,
#                                 pg_upgrade, a remote store's restart, outage and failover, a clock
#                                 step) beside bigserial's; about 5 minutes; GAPS=only runs it alone;
#                                 bench/gaps.sh, figures in bench/results/gaps.csv)
#   COSID_PG_MAJOR=18 bash bench/run.sh   (another major from ../shared/pg, unpacked into
#                                          /opt/pg/18; on 18 and later PostgreSQL's own
#                                          uuidv7() is one more baseline)
major="${COSID_PG_MAJOR:-15}"
if [ "$major" != 15 ]; then
    export COSID_PG_BIN="/opt/pg/$major/bin"
    if [ ! -x "$COSID_PG_BIN/pg_config" ]; then
        mkdir -p /opt/pg
        tar -C /opt/pg -xzf "$(dirname "${BASH_SOURCE[0]}")/../../shared/pg/pg-$major-bookworm-x86_64.tar.gz"
    fi
fi
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
install_prerequisites
if [ "$major" = 15 ]; then
    build_and_install
else  # in a copy of the tree: its objects are built for that major
    b="/tmp/cosid-bench-build-$major"; rm -rf "$b"; mkdir -p "$b"
    cp -r "$COSID_ROOT"/{Makefile,cosid.control,sql,src} "$b/"; find "$b" -name '*.o' -delete
    make -C "$b" -s -j2 PG_CONFIG="$PG_BIN/pg_config" install >/dev/null
fi

if [ "${GAPS:-0}" = only ]; then
    bash "$COSID_ROOT/bench/gaps.sh"
    exit 0
fi
if [ "${FLEET:-0}" = only ]; then
    out="$COSID_ROOT/bench/results"; mkdir -p "$out"; csv="$out/fleet.csv"; echo "section,case,metric,value,unit" > "$csv"
    echo; echo "cosid fleet benchmark on $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/^Mem/ {print $2}') GiB"
    source "$COSID_ROOT/bench/fleet/fleet.sh"
    echo; echo "figures written to bench/results/fleet.csv"
    exit 0
fi
dir=/tmp/cosid-bench; port=55470
start_server "$dir" "$port" "shared_buffers = '256MB'" "max_connections = 200" "synchronous_commit = off" \
    "max_wal_size = '2GB'" "checkpoint_timeout = '30min'"
trap 'stop_server "$dir" immediate' EXIT
q() { psql_at "$dir" "$port" postgres -At "$@"; }
out="$COSID_ROOT/bench/results"; mkdir -p "$out"
csv="$out/latest.csv"; echo "section,case,metric,value,unit" > "$csv"
rec() { echo "$1,$2,$3,$4,$5" >> "$csv"; }
drain_pool() {  # release every idle pool slot, so that each run starts from an empty pool
    q -c "ALTER SYSTEM SET cosid.pool_idle_timeout = 0" -c "SELECT pg_reload_conf()" >/dev/null
    for _ in $(seq 1 50); do [ "$(q -c "SELECT count(*) FROM cosid_pool()")" = 0 ] && break; sleep 0.2; done
    q -c "ALTER SYSTEM RESET cosid.pool_idle_timeout" -c "SELECT pg_reload_conf()" >/dev/null
}
quick=${QUICK:-0}
N=$([ "$quick" = 1 ] && echo 300000 || echo 2000000)
ROWS_TX=1000; TX=$([ "$quick" = 1 ] && echo 100 || echo 1000)
SECS=$([ "$quick" = 1 ] && echo 3 || echo 8)

q -c "CREATE EXTENSION cosid" -c "CREATE SEQUENCE s1 CACHE 1" -c "CREATE SEQUENCE s32 CACHE 32" \
  -c "SELECT cosid_namespace_create('wide', slot_bits => 1, sequence_bits => 21)" >/dev/null
# seconds for: SELECT count(EXPR) FROM generate_series(1, n), best of 3 runs
q -c "CREATE FUNCTION bench(expr text, n int) RETURNS float8 LANGUAGE plpgsql AS \$\$
DECLARE t0 timestamptz; best float8 := 1e9; d float8;
BEGIN
  FOR i IN 1..3 LOOP
    t0 := clock_timestamp();
    EXECUTE format('SELECT count(%s) FROM generate_series(1, %s) g', expr, n);
    d := extract(epoch FROM clock_timestamp() - t0);
    best := least(best, d);
  END LOOP;
  RETURN best;
END \$\$" >/dev/null

echo
echo "cosid benchmarks on $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), PostgreSQL $(q -c 'SHOW server_version')"
echo
echo "1. tight loop, one backend: SELECT count(f()) FROM generate_series(1, $N)"
printf '   %-20s %12s %14s %12s %12s\n' "function" "calls/s" "ns/call" "vs nextval" "ns net"
t_empty=$(q -c "SELECT bench('g', $N)")
echo "   (the loop alone, count(g): $(awk -v t="$t_empty" -v n="$N" 'BEGIN { printf "%.0f", t * 1e9 / n }') ns per row; 'ns net' subtracts it)"
declare -A ns
# 'wide' has 21 sequence bits (2M ids per ms): there the 4096-per-ms cap of the default
# layout never binds, so its row shows what one call costs.
has_uuidv7=$(q -c "SELECT current_setting('server_version_num')::int >= 180000")  # PostgreSQL 18's own
functions=("nextval('s1')" "nextval('s32')" "gen_random_uuid()")
[ "$has_uuidv7" = t ] && functions+=("uuidv7()")
functions+=("cosid_next()" "cosid_next() [wide]")
for f in "${functions[@]}"; do
    setns=$([ "$f" = "cosid_next() [wide]" ] && echo "SET cosid.namespace = 'wide';" || true)
    t=$(q -c "$setns SELECT cosid_next()" -c "SELECT bench(\$x\$${f% \[wide\]}\$x\$, $N)" | tail -1)
    ns[$f]=$(awk -v t="$t" -v n="$N" 'BEGIN { printf "%.1f", t * 1e9 / n }')
    net=$(awk -v t="$t" -v e="$t_empty" -v n="$N" 'BEGIN { d = (t - e) * 1e9 / n; printf "%.1f", d < 0 ? 0 : d }')
    rate=$(awk -v t="$t" -v n="$N" 'BEGIN { printf "%.0f", n / t }')
    ratio=$(awk -v a="${ns[$f]}" -v b="${ns[nextval(\'s1\')]:-${ns[$f]}}" 'BEGIN { printf "%.2f", b / a }')
    printf '   %-20s %12s %14s %12s %12s\n' "$f" "$rate" "${ns[$f]}" "${ratio}x" "$net"
    rec tight "$f" ns_per_call "${ns[$f]}" ns; rec tight "$f" calls_per_s "$rate" 1/s; rec tight "$f" ns_net "$net" ns
done
# ids per millisecond they span, against the layout's 4096
limit=$(q -c "SELECT round(100.0 * count(*) / ((max(id >> 22) - min(id >> 22) + 1) * 4096), 1)
              FROM (SELECT cosid_next() AS id FROM generate_series(1, $N)) s")
echo "   cosid_next() in the default layout fills ${limit}% of each millisecond it spans (4096 ids per ms per slot;"
echo "   past that it borrows the next millisecond, cosid.max_borrow); the [wide] row is the cost of a call"
rec tight "cosid_next()" percent_of_limit "$limit" %
# Two backends in tight loops at once, against one alone: both claim from the instance's one
# lease (one compare-and-swap per id); past 4096 ids per ms the word borrows ahead.
two_loops() {  # two_loops K: wall seconds for K backends, each SELECT count(cosid_next()) of N rows
    local t0 t1
    t0=$(date +%s%N)
    for _ in $(seq 1 "$1"); do q -c "SELECT count(cosid_next()) FROM generate_series(1, $N)" >/dev/null & done
    wait
    t1=$(date +%s%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'
}
best_of() { local best=999 t; for _ in 1 2 3; do t=$(two_loops "$1"); best=$(awk -v a="$best" -v b="$t" 'BEGIN { print (b < a) ? b : a }'); done; echo "$best"; }
one=$(best_of 1); two=$(best_of 2)
echo "   two backends in tight loops at once: ${two} s against ${one} s for one alone ($(awk -v a="$two" -v b="$one" 'BEGIN { printf "%.2fx", a / b }')); slots held: $(q -c "SELECT count(*) FROM cosid.lease WHERE namespace = 'default' AND incarnation IS NOT NULL")"
rec tight "two loops" seconds "$two" s; rec tight "one loop" seconds "$one" s
# Decoding: the C functions against to_timestamp() on the same rows (issue 13: at most 2x).
t_ts=$(q -c "SELECT bench('to_timestamp(g)', $N)")
for f in "cosid_timestamp(g::bigint << 22)" "cosid_parse(g::bigint << 22)" "cosid_format(g::bigint << 22)"; do
    t=$(q -c "SELECT bench(\$x\$$f\$x\$, $N)")
    r=$(awk -v a="$t" -v b="$t_ts" 'BEGIN { printf "%.2f", a / b }')
    echo "   decoding $N ids with ${f%%(*}(): ${r}x the time of to_timestamp() on the same rows"
    rec decode "${f%%(*}" ratio_to_timestamp "$r" x
done

echo
echo "2. bulk insert: INSERT ... SELECT $ROWS_TX rows per transaction (pgbench), id as primary key"
q -c "CREATE TABLE b_cosid (id bigint PRIMARY KEY DEFAULT cosid_next(), v int)" \
  -c "CREATE TABLE b_serial (id bigserial PRIMARY KEY, v int)" \
  -c "CREATE TABLE b_uuid (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), v int)" >/dev/null
tables=(b_serial b_cosid b_uuid)
if [ "$has_uuidv7" = t ]; then
    q -c "CREATE TABLE b_uuidv7 (id uuid PRIMARY KEY DEFAULT uuidv7(), v int)" >/dev/null; tables+=(b_uuidv7)
fi
printf '   %-10s %8s %12s %10s %14s %14s\n' "table" "clients" "rows/s" "vs serial" "pk bytes/row" "vs serial"
# (ratios are rows/s and index bytes per row against bigserial's in the same run)
for clients in 1 4 16; do
    declare -A rps bpr
    for tbl in "${tables[@]}"; do
        q -c "TRUNCATE $tbl" -c "CHECKPOINT" >/dev/null
        echo "INSERT INTO $tbl(v) SELECT g FROM generate_series(1, $ROWS_TX) g;" > "$dir/ins_$tbl.sql"
        chmod a+r "$dir/ins_$tbl.sql"
        tps=$(as_pg pgbench -n -h "$dir" -p "$port" -c "$clients" -j "$(( clients < 2 ? 1 : 2 ))" \
              -t $(( TX / clients )) -f "$dir/ins_$tbl.sql" postgres 2>/dev/null | awk '/^tps/ {print $3}')
        rps[$tbl]=$(awk -v t="$tps" -v r="$ROWS_TX" 'BEGIN { printf "%.0f", t * r }')
        bpr[$tbl]=$(q -c "SELECT round(pg_relation_size('${tbl}_pkey')::numeric / greatest(count(*), 1), 1) FROM $tbl")
        ratio=$(awk -v a="${rps[$tbl]}" -v b="${rps[b_serial]}" 'BEGIN { printf "%.2f", a / b }')
        bratio=$(awk -v a="${bpr[$tbl]}" -v b="${bpr[b_serial]}" 'BEGIN { printf "%.2f", a / b }')
        printf '   %-10s %8s %12s %10s %14s %14s\n' "$tbl" "$clients" "${rps[$tbl]}" "${ratio}x" "${bpr[$tbl]}" "${bratio}x"
        rec bulk "$tbl c=$clients" rows_per_s "${rps[$tbl]}" 1/s; rec bulk "$tbl c=$clients" pk_bytes_per_row "${bpr[$tbl]}" B
    done
done
echo "   (index sizes after loading $(( TX * ROWS_TX )) rows)"

echo
echo "3. connection churn: pgbench -C (a new connection per transaction), 4 clients, ${SECS}s, best of 3"
echo "SELECT cosid_next();" > "$dir/churn_cosid.sql"; echo "SELECT nextval('s1');" > "$dir/churn_seq.sql"
chmod a+r "$dir"/churn_*.sql
declare -A ctps ctxs cst
# connection setup dominates and the machine is noisy: 3 rounds in alternating order, best of each
q -c "VACUUM ANALYZE" -c "CHECKPOINT" >/dev/null   # no autovacuum of the bulk tables during the rounds
for round in 1 2 3; do
    order=$([ "$round" = 2 ] && echo "cosid seq" || echo "seq cosid")
    for s in $order; do
        st0=$(q -c "SELECT store_transactions FROM cosid_stats()")
        res=$(as_pg pgbench -n -C -h "$dir" -p "$port" -c 4 -j 2 -T "$SECS" -f "$dir/churn_$s.sql" postgres 2>&1 || true)
        st1=$(q -c "SELECT store_transactions FROM cosid_stats()")
        tps=$(awk '/^tps/ {printf "%.0f", $3}' <<<"$res")
        if [ -z "$tps" ] || ! grep -q 'actually processed' <<<"$res"; then
            echo "   (round $round of $s failed: $(grep -m1 -iE 'error|fatal' <<<"$res"))"; continue
        fi
        if [ "$tps" -gt "${ctps[$s]:-0}" ]; then ctps[$s]=$tps; fi
        ctxs[$s]=$(( ${ctxs[$s]:-0} + $(awk '/actually processed/ {print $NF}' <<<"$res") ))
        cst[$s]=$(( ${cst[$s]:-0} + st1 - st0 ))
    done
done
for s in seq cosid; do
    per=$(awk -v a="${cst[$s]}" -v n="${ctxs[$s]}" 'BEGIN { printf "%.4f", a / n }')
    printf '   %-14s %8s tps %8s vs nextval   store transactions per connection: %s\n' "$s" "${ctps[$s]}" \
        "$(awk -v a="${ctps[$s]}" -v b="${ctps[seq]}" 'BEGIN { printf "%.2fx", a / b }')" "$([ $s = cosid ] && echo "$per" || echo -)"
    rec churn "$s" tps "${ctps[$s]}" 1/s
    [ $s = cosid ] && rec churn cosid store_tx_per_connection "$per" 1
done
echo
echo "4. first cosid_next() in a new backend (server-side µs; the backend's catalog caches warmed first)"
first_call() {  # first_call N RELEASE [NAMESPACE]: prints one latency per line
    local after=("-c" "SELECT 1")
    [ "$2" = 1 ] && after=("-c" "SELECT cosid_release()")   # leave the pool empty for the next one
    for _ in $(seq 1 "$1"); do
        # cosid_next(NULL) fails before binding: it only loads the function and the catalog
        psql_at "$dir" "$port" postgres -At -c "DO \$\$ DECLARE t0 timestamptz; t1 timestamptz; BEGIN
            BEGIN PERFORM cosid_next(NULL::text); EXCEPTION WHEN OTHERS THEN NULL; END;
            PERFORM length('x'::text);  -- a backend's first PERFORM pays for setting up SPI
            t0 := clock_timestamp();
            PERFORM cosid_next('${3:-default}');
            t1 := clock_timestamp();    -- includes one PERFORM's overhead (about 14 µs here)
            RAISE NOTICE 'us=%', round(extract(epoch FROM t1 - t0) * 1e6); END \$\$" \
            "${after[@]}" 2>&1 | grep -o 'us=[0-9]*' | cut -c4-
    done
}
pct() { sort -n | awk -v p="$1" '{a[NR]=$1} END {i=int(NR*p/100+0.999); if (i<1) i=1; print a[i]}'; }
first_call 5 0 >/dev/null
warm=$(first_call "$([ "$quick" = 1 ] && echo 20 || echo 100)" 0); [ -n "${DEBUG:-}" ] && echo "warm samples:" $warm
drain_pool   # each cold call then releases its own slot (cosid_release()), so the pool stays empty
# shellcheck disable=SC2034  # read through ${!kind} below
cold=$(first_call "$([ "$quick" = 1 ] && echo 10 || echo 50)" 1)
# the same in a namespace of 2^16 slots: the store's acquire reads slots through an index
q -c "SELECT cosid_namespace_create('big', slot_bits => 16, sequence_bits => 6)" >/dev/null
# shellcheck disable=SC2034  # read through ${!kind} below
cold_big=$(first_call "$([ "$quick" = 1 ] && echo 10 || echo 50)" 1 big)
for kind in warm cold cold_big; do
    vals=${!kind}
    med=$(pct 50 <<<"$vals"); p99=$(pct 99 <<<"$vals")
    printf '   %-44s median %6s µs   p99 %6s µs\n' \
        "$(case $kind in warm) echo 'the instance holds a lease:';; cold) echo 'keeper must acquire a slot from the store:';;
           *) echo 'the same, namespace of 65536 slots:';; esac)" "$med" "$p99"
    rec first_call "$kind" median_us "$med" us; rec first_call "$kind" p99_us "$p99" us
done

echo
echo "5. store load: store transactions per minute with N backends generating ids (ttl 30 s): one lease for all"
printf '   %-24s %14s %16s\n' "backends" "ids/min" "store tx/min"
echo "SELECT count(cosid_next()) FROM generate_series(1, 100);" > "$dir/load.sql"; chmod a+r "$dir/load.sql"
for spec in "1" "10" "150" "10 --rate=20"; do
    c=${spec%% *}
    # shellcheck disable=SC2178  # extra: a string here (fleet.sh's array of that name is another use)
    extra=$([ "$spec" != "$c" ] && echo "${spec#* }" || true)
    drain_pool
    s0=$(q -c "SELECT store_transactions || ' ' || ids_issued FROM cosid_stats()")
    # shellcheck disable=SC2128,SC2086  # extra: a string here, split on purpose (none or one option)
    as_pg pgbench -n -h "$dir" -p "$port" -c "$c" -j 2 -T $(( SECS * 2 )) $extra -f "$dir/load.sql" postgres >/dev/null 2>&1
    s1=$(q -c "SELECT store_transactions || ' ' || ids_issued FROM cosid_stats()")
    read -r st ids <<<"$(awk -v a="$s0" -v b="$s1" -v s=$(( SECS * 2 )) 'BEGIN { split(a, x, " "); split(b, y, " ");
        printf "%.0f %.0f", (y[1] - x[1]) * 60 / s, (y[2] - x[2]) * 60 / s }')"
    # shellcheck disable=SC2128  # extra: a string here (fleet.sh's array of that name is another use)
    printf '   %-24s %14s %16s\n' "$c$([ -n "$extra" ] && echo " (20 tx/s in all)")" "$ids" "$st"
    rec store_load "$c$extra" ids_per_min "$ids" 1/min; rec store_load "$c$extra" store_tx_per_min "$st" 1/min
done

echo
echo "6. slots held by 150 connections that each called cosid_next() once and stay open"
slots_held() {
    for _ in $(seq 1 150); do q -c "SELECT cosid_next()" -c "SELECT pg_sleep(4)" >/dev/null 2>&1 & done
    sleep 3
    q -c "SELECT count(*) FROM cosid.lease WHERE namespace = 'default' AND incarnation IS NOT NULL"
    wait
}
held=$(slots_held)
echo "   slots held: $held (bigserial and uuid: none needed; a per-connection design: 150)"
rec slots "150 connections" held "$held" slots
# after a crash restart the old incarnation's lease lives on until it expires
pm=$(head -1 "$dir/data/postmaster.pid"); kill -9 "$(pgrep -P "$pm" -f 'cosid keeper' | head -1)"
for _ in $(seq 1 100); do q -c "SELECT 1" >/dev/null 2>&1 && break; sleep 0.2; done
held=$(slots_held)
echo "   after a crash restart, before the old lease expires: $held"
rec slots "150 connections after crash" held "$held" slots

echo
# 7. Citus, where its build is present (../shared/citus): a coordinator holding the store and
# two workers leasing from it.  Distributed by tenant, written by pgbench through the
# coordinator and through both workers; bigserial is the baseline of the same path.
source "$COSID_ROOT/test/lib/citus.sh"
if citus_install; then
    echo "7. Citus: coordinator + 2 workers, INSERT of 200 rows per transaction, ${SECS}s per case"
    cb=/tmp/cosid-bench-citus; cpc=26050; cp1=26051; cp2=26052
    cdsn="host=127.0.0.1 port=$cpc dbname=postgres user=postgres"
    fast=("synchronous_commit = off" "shared_buffers = '128MB'")
    citus_node "$cb/c" $cpc "${fast[@]}"
    citus_node "$cb/w1" $cp1 "${fast[@]}" "cosid.store_dsn = '$cdsn'"
    citus_node "$cb/w2" $cp2 "${fast[@]}" "cosid.store_dsn = '$cdsn'"
    # shellcheck disable=SC2154  # d: the for loop's variable inside the trap string
    trap 'for d in "$cb/w2" "$cb/w1" "$cb/c"; do stop_server "$d" immediate; done; stop_server "$dir" immediate' EXIT
    cq() { psql_at "$cb/c" $cpc postgres -At "$@"; }
    cq -c "SELECT citus_set_coordinator_host('127.0.0.1', $cpc)" -c "SELECT citus_add_node('127.0.0.1', $cp1)" \
       -c "SELECT citus_add_node('127.0.0.1', $cp2)" -c "CREATE EXTENSION cosid" >/dev/null
    for tbl in c_serial c_cosid; do
        idcol=$([ $tbl = c_serial ] && echo "id bigserial" || echo "id bigint DEFAULT cosid_next()")
        cq -c "CREATE TABLE $tbl (tenant int, $idcol, at timestamptz DEFAULT clock_timestamp(), v int)" \
           -c "SELECT create_distributed_table('$tbl', 'tenant', shard_count => 8)" >/dev/null
        echo "INSERT INTO $tbl(tenant, v) SELECT g % 64, g FROM generate_series(1, 200) g;" > "$cb/ins_$tbl.sql"
        chmod a+r "$cb/ins_$tbl.sql"
    done
    for p in $cpc $cp1 $cp2; do  # every node has its lease before the clock starts
        psql_at "$cb/$([ $p = $cpc ] && echo c || echo w$((p - cpc)))" $p postgres -At -c "SELECT cosid_next()" >/dev/null
    done
    printf '   %-10s %-22s %12s %10s %22s\n' "table" "through" "rows/s" "vs serial" "rows out of time order"
    declare -A crps
    for via in coordinator workers; do
        for tbl in c_serial c_cosid; do
            cq -c "TRUNCATE $tbl" >/dev/null
            if [ $via = coordinator ]; then
                tps=$(as_pg pgbench -n -h "$cb/c" -p $cpc -c 4 -j 2 -T "$SECS" -f "$cb/ins_$tbl.sql" postgres 2>/dev/null \
                      | awk '/^tps/ {print $3}')
            else  # two clients on each worker at once
                for w in 1 2; do
                    as_pg pgbench -n -h "$cb/w$w" -p $((cpc + w)) -c 2 -j 1 -T "$SECS" -f "$cb/ins_$tbl.sql" postgres \
                        2>/dev/null | awk '/^tps/ {print $3}' > "$cb/tps.$w" &
                done
                wait
                tps=$(cat "$cb"/tps.1 "$cb"/tps.2 | awk '{s += $1} END {print s}')
            fi
            crps[$tbl]=$(awk -v t="${tps:-0}" 'BEGIN { printf "%.0f", t * 200 }')
            # A row is out of time order when a row with a smaller id was made more than 1 s
            # after it (by clock_timestamp() of its default).  Not 1 ms: Citus may evaluate
            # that default apart from the id's, up to a statement's duration later (seen: 0.6 s
            # for 200 rows on a loaded machine).
            late=$(cq -c "WITH r AS MATERIALIZED (SELECT id, at FROM $tbl)
                SELECT round(100.0 * count(*) FILTER (WHERE at < before - interval '1 s') / greatest(count(*), 1), 1)
                FROM (SELECT at, max(at) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
                      FROM r) x")
            ratio=$(awk -v a="${crps[$tbl]}" -v b="${crps[c_serial]}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
            printf '   %-10s %-22s %12s %10s %21s%%\n' "$tbl" "$via" "${crps[$tbl]}" "${ratio}x" "$late"
            rec citus "$tbl via $via" rows_per_s "${crps[$tbl]}" 1/s; rec citus "$tbl via $via" percent_out_of_order "$late" %
        done
    done
    echo "   (bigserial on workers: Citus gives each node group its own range, group << 48)"
fi

if [ "${FLEET:-0}" = 1 ]; then  # its own store (max_connections 1100, fsync on) and PgBouncers
    stop_server "$dir" immediate
    source "$COSID_ROOT/bench/fleet/fleet.sh"
fi
if [ "${GAPS:-0}" = 1 ]; then  # its own servers
    stop_server "$dir" immediate
    bash "$COSID_ROOT/bench/gaps.sh"
fi

# the same figures as JSON
awk -F, 'NR > 1 { printf "%s  {\"section\": \"%s\", \"case\": \"%s\", \"metric\": \"%s\", \"value\": %s, \"unit\": \"%s\"}", (NR > 2 ? ",\n" : "[\n"), $1, $2, $3, $4, $5 }
         END { print "\n]" }' "$csv" > "$out/latest.json"
echo
echo "figures written to bench/results/latest.csv and bench/results/latest.json"
# and as charts for docs/benchmarks.md (SVG under docs/img, drawn with gnuplot)
bash "$COSID_ROOT/bench/charts.sh" "$csv" "$COSID_ROOT/docs/img" || echo "charts not drawn (bench/charts.sh)"

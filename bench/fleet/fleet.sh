#!/usr/bin/env bash
# Section 8 of bench/run.sh (FLEET=1): one lease store under a simulated fleet (fleet.cpp),
# N instances each with its own store connection: directly, and through PgBouncer in
# transaction pooling mode.  Prints a table; appends to $csv when run.sh set it.
#   FLEET_SECONDS=60  measured seconds per case (after every instance holds a lease)
#   FLEET_CASES="direct:100 direct:1000 pooled:1000 pooled:10000 pooled:20000"
#   FLEET_FSYNC=on    the store's fsync (off: the commit's flush is not measured, as in sections 1-6)
# Run alone (cosid installed for COSID_PG_BIN):  bash bench/fleet/fleet.sh
# This machine's container caps open files at 20,000 per process: a pooled case of more
# than 10,000 instances runs several simulator processes and as many PgBouncers (10,000
# clients each, every one with its own pool to the store), as one would scale PgBouncer.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
apt_install_missing pgbouncer libpq-dev g++ make
fdir="$COSID_ROOT/bench/fleet"
make -C "$fdir" -s fleet PG_INCLUDE="$(pg_config --includedir 2>/dev/null || echo /usr/include/postgresql)" >/dev/null
fleet_secs=${FLEET_SECONDS:-60}
cases=${FLEET_CASES:-"direct:100 direct:1000 pooled:1000 pooled:10000 pooled:20000"}
sdir=/tmp/cosid-fleet; sport=${FLEET_PORT:-55620}; per_bouncer=10000
ulimit -n "$(ulimit -Hn)"  # the simulator and PgBouncer hold one socket per instance
# The store as a shared store is run: commits flushed (fsync on), room for 1,000 direct keepers.
fsync=${FLEET_FSYNC:-on}
start_server "$sdir" "$sport" "max_connections = 1100" "fsync = $fsync" "shared_buffers = '256MB'" \
    "max_wal_size = '2GB'" "checkpoint_timeout = '30min'" "superuser_reserved_connections = 5"
fleet_cleanup() {
    for p in "$sdir"/bouncer*/pgbouncer.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null; done
    stop_server "$sdir" immediate
}
trap fleet_cleanup EXIT
sq() { psql_at "$sdir" "$sport" postgres -At "$@"; }
# One login role for the whole fleet (a pool is per role; the owner_role rule holds within it).
sq -c "CREATE EXTENSION cosid" -c "CREATE ROLE cosid_fleet LOGIN IN ROLE cosid_keeper" >/dev/null

start_bouncer() {  # start_bouncer K: PgBouncer number K on port sport+1+K, in transaction mode
    local b="$sdir/bouncer$1"; mkdir -p "$b"; chown "$PG_USER" "$b"
    cat > "$b/pgbouncer.ini" <<INI
[databases]
postgres = host=$sdir port=$sport dbname=postgres user=cosid_fleet

[pgbouncer]
listen_addr =
listen_port = $(( sport + 1 + $1 ))
unix_socket_dir = $b
auth_type = any
pool_mode = transaction
default_pool_size = 20
max_client_conn = $(( per_bouncer + 100 ))
listen_backlog = 4096
pidfile = $b/pgbouncer.pid
logfile = $b/pgbouncer.log
INI
    chown "$PG_USER" "$b/pgbouncer.ini"
    # runuser sets the soft limit of open files back to 1024: raised again for PgBouncer
    as_pg bash -c "ulimit -n $(ulimit -Hn) && exec pgbouncer -d '$b/pgbouncer.ini'"
    for _ in $(seq 1 100); do
        as_pg psql -X -At -h "$b" -p $(( sport + 1 + $1 )) -d postgres -c "SELECT 1" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "PgBouncer $1 did not start: $(tail -3 "$b/pgbouncer.log")" >&2; return 1
}
echo
echo "8. fleet: one lease store, N simulated instances each with its own store connection (bench/fleet),"
echo "   ttl 30 s (renewed every 10 s), ${fleet_secs} s measured per case after every instance holds a lease,"
echo "   0.2% of renewals replaced by a release or a crash (the lease left to expire); store fsync $fsync"
printf '   %-18s %9s %9s %9s %10s %9s %12s %9s %6s\n' "instances" "renew/s" "p50 ms" "p99 ms" "store CPU" \
    "backends" "WAL kB/s" "bouncer" "lost"
largest=0; largest_direct=0
for c in $cases; do
    mode=${c%%:*}; n=${c##*:}
    ns="fleet_${mode}_$n"
    sq -c "SELECT cosid_namespace_create('$ns', slot_bits => 16, sequence_bits => 6)" >/dev/null
    procs=1; conns=("host=$sdir port=$sport dbname=postgres user=cosid_fleet")
    if [ "$mode" = pooled ]; then
        procs=$(( (n + per_bouncer - 1) / per_bouncer )); conns=()
        for k in $(seq 0 $(( procs - 1 ))); do
            start_bouncer "$k"
            conns+=("host=$sdir/bouncer$k port=$(( sport + 1 + k )) dbname=postgres")
        done
    fi
    rm -f "$sdir"/run.*
    pm=$(head -1 "$sdir/data/postmaster.pid"); pids=(); offset=0
    for k in $(seq 0 $(( procs - 1 ))); do
        share=$(( n / procs + (k < n % procs ? 1 : 0) ))
        # the first process samples the store's and the PgBouncers' CPU, WAL and backends
        # over its measured period (the others' periods start within seconds of it)
        extra=()
        # shellcheck disable=SC2046  # the pids split into words, joined by commas
        [ "$k" = 0 ] && extra=(--admin-conninfo "host=$sdir port=$sport dbname=postgres user=postgres"
                                         --watch-pids "$(echo "$pm" $(cat "$sdir"/bouncer*/pgbouncer.pid 2>/dev/null) | tr ' ' ',')")
        "$fdir/fleet" --conninfo "${conns[$k]}" --n "$share" --seconds "$fleet_secs" --namespace "$ns" \
            --pooled "$([ "$mode" = pooled ] && echo 1 || echo 0)" --latency-file "$sdir/run.lat$k" "${extra[@]}" \
            --id-offset "$offset" > "$sdir/run.out$k" 2>&1 &
        pids+=($!); offset=$(( offset + share ))  # each process its own owner keys and preferred slots
    done
    for p in "${pids[@]}"; do wait "$p" || true; done
    if [ "$(cat "$sdir"/run.out* | grep -c '^ok=1')" != "$procs" ]; then
        printf '   %-18s did not reach a lease each: %s\n' "$n $mode" "$(grep -h '^ok=0' "$sdir"/run.out* | head -c 300)"
        for p in "$sdir"/bouncer*/pgbouncer.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null; done
        rm -rf "$sdir"/bouncer*; continue
    fi
    field() { grep -o " $1=[^ ]*" "$sdir/run.out${2:-0}" | cut -d= -f2; }
    sum() { cat "$sdir"/run.out* | grep -o " $1=[0-9.]*" | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }'; }
    secs=$(field seconds)
    cpus=$(field cpu); cpu=$(cut -d, -f1 <<<"$cpus")
    bcpu=$([ "$mode" = pooled ] && tr ',' '\n' <<<"$cpus" | tail -n +2 | awk '{ s += $1 } END { printf "%.2f", s }' || echo -)
    wal=$(awk -v b="$(field wal_bytes_per_s)" 'BEGIN { printf "%.0f", b / 1024 }')
    backends=$(field backends)
    rps=$(sum renewals_per_s); lost=$(( $(sum lost_no_row) + $(sum lost_late) )); errs=$(sum errors)
    pct_of() { cat "$sdir"/run.lat* | sort -n | awk -v p="$1" '{ a[NR] = $1 } END { i = int(NR * p + 0.999); if (i < 1) i = 1; printf "%.2f", a[i] / 1000 }'; }
    p50=$(pct_of 0.50); p99=$(pct_of 0.99)
    printf '   %-18s %9s %9s %9s %10s %9s %12s %9s %6s\n' "$n $mode" "$rps" "$p50" "$p99" "$(printf %.2f "$cpu") cores" \
        "$backends" "$wal" "$bcpu" "$lost"
    [ "$errs" != 0 ] && echo "      errors: $errs ($(grep -o 'first_error="[^"]*"' "$sdir"/run.out* | head -1))"
    if awk -v p="$p99" 'BEGIN { exit !(p < 50) }' && [ "$lost" = 0 ]; then
        [ "$n" -gt "$largest" ] && largest=$n
        [ "$mode" = direct ] && [ "$n" -gt "$largest_direct" ] && largest_direct=$n
    fi
    per=$(awk -v c="$cpu" -v r="$rps" 'BEGIN { if (r > 0) printf "%.0f", c * 1e6 / r; else print 0 }')
    echo "      ($(sum acquires) acquires (p99 $(field acquire_p99_ms) ms), $(sum releases) releases, $(sum crashes) crashes; store CPU per renewal ${per} µs; ramp $(field ramp_s) s; ${secs} s measured)"
    if [ -n "${csv:-}" ]; then
        for m in "renewals_per_s $rps 1/s" "renew_p50 $p50 ms" "renew_p99 $p99 ms" "store_cpu $cpu cores" \
                 "backends $backends 1" "wal_kb_per_s $wal kB/s" "lost $lost 1" "store_cpu_per_renewal $per us"; do
            set -- $m; echo "fleet,$n $mode,$1,$2,$3" >> "$csv"
        done
    fi
    for p in "$sdir"/bouncer*/pgbouncer.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null; done
    for _ in $(seq 1 50); do compgen -G "$sdir/bouncer*/pgbouncer.pid" >/dev/null || break; sleep 0.1; done
    rm -rf "$sdir"/bouncer*
done
echo "   largest fleet carried with p99 < 50 ms and no lease lost: $largest instances (direct: $largest_direct)"
[ -n "${csv:-}" ] && echo "fleet,largest,instances,$largest,1" >> "$csv"
true

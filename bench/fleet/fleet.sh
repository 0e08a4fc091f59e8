#!/usr/bin/env bash
# Section 8 of bench/run.sh (FLEET=1): one lease store under a simulated fleet (fleet.cpp),
# N instances each with its own store connection: directly, and through PgBouncer in
# transaction pooling mode.  Prints a table; appends to $csv when run.sh set it.
#   FLEET_SECONDS=60  measured seconds per case (after every instance holds its leases)
#   FLEET_CASES="direct:100 direct:1000 pooled:1000 pooled:10000 pooled:20000"
#   FLEET_NAMESPACES="1"  leases per instance, one per namespace; a list runs each case at each
#                     (e.g. "1 5": the store's cost per lease when a keeper renews 5 in a pass)
#   FLEET_BATCH=1     a pass's renewals in one cosid.lease_pass, and the leases an instance misses
#                     (a switchover's successors, its start) in one cosid.acquire_many on a store
#                     that has it (1.8 on), as the keeper does (0: one store transaction per lease,
#                     as a keeper with a store older than 1.5)
#   FLEET_SWITCHOVER=0  1: a streaming standby beside the store, promoted a third into each
#                     case's measured period (the store stopped fast first, PgBouncer pointed at
#                     the standby); counts the leases lost across it.  The raise (every slot row
#                     rewritten) is left to the keepers' first calls, within their ttl/6 bound;
#                     follow: run by hand at once, cosid_store_follow_timeline() (docs/failover.md)
#   FLEET_RAMP_SECONDS  the spread of the instances' first acquires (default: ttl/3, 10 s, as
#                     when a whole fleet starts at once; a fleet of 100,000 leases starts over
#                     minutes on a store that carries its renewals but not 100,000 acquires at once)
#   FLEET_SLOT_BITS=16  each namespace's slot bits (65,536 slots: room for the 20,000 case; a
#                     switchover's raise rewrites every slot row, so it costs with the slots)
#   FLEET_IDLE_SECONDS=5  the store's CPU sampled this long before each case, with no fleet: its own
#                     work (checkpointer, autovacuum...), taken off the CPU per lease and per acquire
#   FLEET_FSYNC=on    the store's fsync (off: the commit's flush is not measured, as in sections 1-6)
#   FLEET_DIR=/tmp/cosid-fleet FLEET_PORT=55620  where the store and its PgBouncers run
#   FLEET_BASELINES="9d89105 57ad8a3"  then the same cases against cosid built from each commit
#                     (into a copy of COSID_PG_BIN's PostgreSQL each, $FLEET_DIR-base-COMMIT), and
#                     the ratios of the store's CPU per lease renewed, per acquire and WAL per lease
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
sdir=${FLEET_DIR:-/tmp/cosid-fleet}; sport=${FLEET_PORT:-55620}; per_bouncer=10000
switchover=${FLEET_SWITCHOVER:-0}; batch=${FLEET_BATCH:-1}
ulimit -n "$(ulimit -Hn)"  # the simulator and PgBouncer hold one socket per instance
fsync=${FLEET_FSYNC:-on}
# The store as a shared store is run: commits flushed (fsync on), room for 1,000 direct keepers,
# serving only others (store_only: its promoted standby is a new timeline, not a fork).  With
# FLEET_SWITCHOVER the store and its standby trade places at each switchover, and each case
# has a store of its own: a switchover's raise rewrites every slot row of every namespace
# (65,536 each), the earlier cases' too.
fresh_store() {
    store_dir=$sdir; store_port=$sport; standby_dir=$sdir-b; standby_port=$(( sport + 50 ))  # (as at first)
    start_server "$sdir" "$sport" "max_connections = 1100" "fsync = $fsync" "shared_buffers = '256MB'" \
        "max_wal_size = '2GB'" "checkpoint_timeout = '30min'" "superuser_reserved_connections = 5" \
        "cosid.store_only = on"
    # One login role for the whole fleet (a pool is per role; the owner_role rule holds within it).
    sq -c "CREATE EXTENSION cosid" -c "CREATE ROLE cosid_fleet LOGIN IN ROLE cosid_keeper" >/dev/null
}
sq() { psql_at "$store_dir" "$store_port" postgres -At "$@"; }
store_dir=$sdir; store_port=$sport; standby_dir=$sdir-b; standby_port=$(( sport + 50 ))
fleet_stop_bouncers() {
    for p in "$sdir"/bouncer*/pgbouncer.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null; done
    for _ in $(seq 1 50); do compgen -G "$sdir/bouncer*/pgbouncer.pid" >/dev/null || break; sleep 0.1; done
    rm -rf "$sdir"/bouncer*
}
fleet_cleanup() {
    fleet_stop_bouncers
    stop_server "$store_dir" immediate
    [ -d "$standby_dir/data" ] && stop_server "$standby_dir" immediate
    true
}
trap fleet_cleanup EXIT
fresh_store

bouncer_db() {  # the [databases] line: the store PgBouncer serves now
    echo "postgres = host=$1 port=$2 dbname=postgres user=cosid_fleet"
}
start_bouncer() {  # start_bouncer K: PgBouncer number K on port sport+1+K, in transaction mode
    local b="$sdir/bouncer$1"; mkdir -p "$b"; chown "$PG_USER" "$b"
    # server_login_retry 1 s: after a switchover it logs in to the new store within a second
    # (the default 15 s would hold every keeper up that long, whatever the store does)
    cat > "$b/pgbouncer.ini" <<INI
[databases]
$(bouncer_db "$store_dir" "$store_port")

[pgbouncer]
listen_addr =
listen_port = $(( sport + 1 + $1 ))
unix_socket_dir = $b
auth_type = any
pool_mode = transaction
default_pool_size = 20
max_client_conn = $(( per_bouncer + 100 ))
listen_backlog = 4096
server_login_retry = 1
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

# A streaming standby of the store, as a store's failover target is kept (pg_basebackup -R).
make_standby() {
    rm -rf "$standby_dir"; mkdir -p "$standby_dir"; chown "$PG_USER" "$standby_dir"
    as_pg "$PG_BIN/pg_basebackup" -D "$standby_dir/data" -h "$store_dir" -p "$store_port" -U postgres -R -X stream -c fast
    # (the last of a setting's lines wins: the copy's own port and socket)
    printf "port = %s\nunix_socket_directories = '%s'\n" "$standby_port" "$standby_dir" >> "$standby_dir/data/postgresql.conf"
    as_pg "$PG_BIN/pg_ctl" -D "$standby_dir/data" -l "$standby_dir/server.log" -w start >/dev/null
}

# Run in the background during a case: a third into the measured period the store stops
# (fast, as for a planned switchover), the standby is promoted and every PgBouncer is pointed
# at it (a reload).  Direct instances find it through their multi-host conninfo.  Writes the
# time from the old store's stop to PgBouncer's reload, in ms, to $sdir/run.switch.
switch_over() {
    for _ in $(seq 1 3000); do [ -f "$sdir/run.ready" ] && break; sleep 0.1; done
    sleep $(( fleet_secs / 3 ))
    local t0 t1
    t0=$(date +%s%N)
    stop_server "$store_dir" fast
    as_pg "$PG_BIN/pg_ctl" -D "$standby_dir/data" -w promote >/dev/null
    if [ "$switchover" = follow ]; then  # the raise without the keepers' bound, timed
        psql_at "$standby_dir" "$standby_port" postgres -Atq -c "SELECT cosid_store_follow_timeline()" >/dev/null
        echo $(( ($(date +%s%N) - t0) / 1000000 )) > "$sdir/run.follow"
    fi
    for b in "$sdir"/bouncer*; do
        [ -f "$b/pgbouncer.pid" ] || continue
        sed -i "s|^postgres = .*|$(bouncer_db "$standby_dir" "$standby_port")|" "$b/pgbouncer.ini"
        kill -HUP "$(cat "$b/pgbouncer.pid")"
    done
    t1=$(date +%s%N)
    echo $(( (t1 - t0) / 1000000 )) > "$sdir/run.switch"
}

# After a switchover: the promoted standby is the store, and the old store's data goes.
swap_store() {
    local d=$store_dir p=$store_port
    store_dir=$standby_dir; store_port=$standby_port
    standby_dir=$d; standby_port=$p
    rm -rf "${standby_dir:?}/data"
}

# The store connection strings: the first process's admin one, and the fleet's direct one
# (with a standby: both servers, libpq taking the one that accepts writes).
store_conninfo() {  # store_conninfo USER
    if [ "$switchover" != 0 ]; then
        echo "host=$store_dir,$standby_dir port=$store_port,$standby_port target_session_attrs=read-write dbname=postgres user=$1"
    else
        echo "host=$store_dir port=$store_port dbname=postgres user=$1"
    fi
}

# run_case MODE N K: N instances, K leases each (namespaces NS_0 .. NS_K-1), in $procs
# simulator processes; their key=value lines in $sdir/run.out*.
run_case() {
    local mode=$1 n=$2 k=$3 ns="fleet_${1}_${2}_k${3}" names="" j p
    for j in $(seq 0 $(( k - 1 ))); do
        sq -c "SELECT cosid_namespace_create('${ns}_$j', slot_bits => ${FLEET_SLOT_BITS:-16}, sequence_bits => 6)" >/dev/null
        names+="${names:+,}${ns}_$j"
    done
    # as a store that has run a while: its statistics and visibility map up to date (on a new
    # store autovacuum comes a minute later, during the case, with the planner still blind)
    sq -c "VACUUM ANALYZE" >/dev/null
    procs=1; conns=("$(store_conninfo cosid_fleet)")
    if [ "$mode" = pooled ]; then
        procs=$(( (n + per_bouncer - 1) / per_bouncer )); conns=()
        for j in $(seq 0 $(( procs - 1 ))); do
            start_bouncer "$j"
            conns+=("host=$sdir/bouncer$j port=$(( sport + 1 + j )) dbname=postgres")
        done
    fi
    rm -f "$sdir"/run.*
    local pm pids=() offset=0 share extra many=0
    # a store of 1.8 on: the leases an instance misses asked for in one call, as its keeper does
    [ "$batch" = 1 ] && [ "$(sq -c "SELECT to_regprocedure('cosid.acquire_many(text[],text,uuid,bigint,integer)') IS NOT NULL")" = t ] && many=1
    pm=$(head -1 "$store_dir/data/postmaster.pid")
    local switcher=""
    if [ "$switchover" != 0 ]; then switch_over & switcher=$!; fi
    for j in $(seq 0 $(( procs - 1 ))); do
        share=$(( n / procs + (j < n % procs ? 1 : 0) ))
        # the first process samples the store's and the PgBouncers' CPU, WAL and backends
        # over its measured period (the others' periods start within seconds of it)
        extra=()
        # shellcheck disable=SC2046  # the pids split into words, joined by commas
        [ "$j" = 0 ] && extra=(--admin-conninfo "$(store_conninfo postgres)" --ready-file "$sdir/run.ready"
                               --watch-pids "$(echo "$pm" $(cat "$sdir"/bouncer*/pgbouncer.pid 2>/dev/null) | tr ' ' ',')")
        "$fdir/fleet" --conninfo "${conns[$j]}" --n "$share" --seconds "$fleet_secs" \
            --namespace "$names" --batch "$batch" --acquire-many "$many" --pooled "$([ "$mode" = pooled ] && echo 1 || echo 0)" \
            --latency-file "$sdir/run.lat$j" "${extra[@]}" --id-offset "$offset" \
            --idle-seconds "${FLEET_IDLE_SECONDS:-5}" ${FLEET_RAMP_SECONDS:+--ramp-seconds "$FLEET_RAMP_SECONDS"} \
            > "$sdir/run.out$j" 2>&1 &
        pids+=($!); offset=$(( offset + share ))  # each process its own owner keys and preferred slots
    done
    for p in "${pids[@]}"; do wait "$p" || true; done
    # the switchover waited for the measured period: none if the ramp failed
    if [ -n "$switcher" ]; then
        [ -f "$sdir/run.ready" ] || kill "$switcher" 2>/dev/null
        wait "$switcher" || true
    fi
}

field() { grep -o " $1=[^ ]*" "$sdir/run.out${2:-0}" | cut -d= -f2; }
sum() { cat "$sdir"/run.out* | grep -o " $1=[0-9.]*" | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }'; }
pct_of() { cat "$sdir"/run.lat* | sort -n | awk -v p="$1" '{ a[NR] = $1 } END { i = int(NR * p + 0.999); if (i < 1) i = 1; printf "%.2f", a[i] / 1000 }'; }
calc() { awk "BEGIN { $1 }"; }  # calc 'awk statements': a figure from the case's

# report_case MODE N K: one line of the table, one of detail, and the csv rows.
report_case() {
    local mode=$1 n=$2 k=$3 secs cpus cpu idle net bcpu rps p50 p99 lost errs per per_acq per_core wal_b wal_kbs backends
    secs=$(field seconds); cpus=$(field cpu); cpu=$(cut -d, -f1 <<<"$cpus"); idle=$(field idle_cpu | cut -d, -f1)
    bcpu=$([ "$mode" = pooled ] && tr ',' '\n' <<<"$cpus" | tail -n +2 | awk '{ s += $1 } END { printf "%.2f", s }' || echo -)
    backends=$(field backends)
    rps=$(sum renewals_per_s); lost=$(( $(sum lost_late) + $(sum successor_late) + $(sum overdue) )); errs=$(sum errors)
    p50=$(pct_of 0.50); p99=$(pct_of 0.99)
    # per lease renewed: the store's CPU over the measured period less its own idle work
    # (churn's acquires and releases included, 0.2% of passes), and its WAL
    per=-; per_core=-; per_acq=-; wal_b=-; wal_kbs=-; net=-
    if [ "$cpu" != - ] && [ "$idle" != - ]; then
        net=$(calc "printf \"%.3f\", $cpu - $idle")
        # (a small fleet's CPU can be within the idle sample's noise: no figure then)
        per=$(calc "if ($rps > 0 && $net > 0) printf \"%.0f\", $net * 1e6 / $rps; else print \"-\"")
        per_core=$(calc "if ($net > 0) printf \"%.0f\", $n * $k / $net; else print \"-\"")
        # per acquire: the ramp's acquires, less the store's idle work and the renewals that
        # fell in the ramp at $per each (one simulator process only: several ramp out of step)
        [ "$procs" = 1 ] && [ "$per" != - ] && per_acq=$(calc "a = $(field acq_phase_acquires); c = $(cut -d, -f1 <<<"$(field acq_phase_cpu)");
            c -= $idle * $(field acq_phase_s) + $(field acq_phase_renewed) * $per / 1e6;
            if (a > 0) printf \"%.0f\", c * 1e6 / a; else print \"-\"")
    fi
    if [ "$switchover" = 0 ]; then  # (the raise's rewrite of every slot row, and the promotion's checkpoint)
        wal_b=$(calc "r = $(sum renewed); if (r > 0) printf \"%.0f\", $(field wal_bytes) / r; else print 0")
        wal_kbs=$(calc "printf \"%.0f\", $(field wal_bytes) / $secs / 1024")
    fi
    printf '   %-15s %6s %9s %8s %8s %9s %8s %9s %8s %9s %6s\n' "$n $mode" "$k" "$rps" "$p50" "$p99" \
        "$([ "$cpu" = - ] && echo - || printf %.2f "$cpu")" "$per" "$per_acq" "$(field acquire_p99_ms)" "$per_core" "$lost"
    echo "      ($(sum passes) passes for $(sum renewed) leases renewed; WAL $wal_b B per lease renewed, $wal_kbs kB/s;" \
         "store CPU $net cores net of its idle $idle; $backends backends, PgBouncer CPU $bcpu; $(sum acquires) acquires, $(sum releases) releases, $(sum crashes) crashes" \
         "in the measured period; $(field acq_phase_acquires) acquires in $(field acq_phase_s) s of ramp; ${secs} s measured)"
    [ "$errs" != 0 ] && echo "      errors: $errs; commonest over the whole run: $(grep -oh 'error_kinds="[^"]*"' "$sdir"/run.out* | head -1)"
    if [ "$switchover" != 0 ]; then
        echo "      switchover: no store for $(cat "$sdir/run.switch" 2>/dev/null || echo '?') ms$([ -f "$sdir/run.follow" ] &&
             echo " (the raise by hand done $(cat "$sdir/run.follow") ms after the stop)"); $(sum freed) leases freed" \
             "by the raise, $(sum successor_late) of them lost (their window ended before the successor's grant)," \
             "$(sum lost_late) renewals too late, $(sum overdue) leases run out at the end; successors' windows started up to $(field jump_max_ms) ms above the freed ceilings"
    elif [ "$(sum freed)" != 0 ]; then
        echo "      $(sum freed) leases the store answered with no row"
    fi
    if awk -v p="$p99" 'BEGIN { exit !(p < 50) }' && [ "$lost" = 0 ]; then
        [ $(( n * k )) -gt "$largest_leases" ] && { largest_leases=$(( n * k )); largest_shape="$n $mode x $k"; }
        if [ "$k" = 1 ]; then
            [ "$n" -gt "$largest" ] && largest=$n
            [ "$mode" = direct ] && [ "$n" -gt "$largest_direct" ] && largest_direct=$n
        fi
    fi
    # (FLEET_BASELINES: the figures the ratios compare, one line per case and run)
    [ -n "${FLEET_RESULTS:-}" ] && echo "${FLEET_LABEL:-this tree}|$n $mode|$k|$per|$per_acq|$wal_b" >> "$FLEET_RESULTS"
    if [ -n "${csv:-}" ]; then
        local m c="$n $mode"
        [ "$k" = 1 ] || c+=" k=$k"
        for m in "renewals_per_s $rps 1/s" "renew_p50 $p50 ms" "renew_p99 $p99 ms" "store_cpu $cpu cores" \
                 "backends $backends 1" "wal_kb_per_s $wal_kbs kB/s" "lost $lost 1" "store_cpu_per_renewal $per us" \
                 "store_cpu_per_acquire $per_acq us" "acquire_p99 $(field acquire_p99_ms) ms" \
                 "leases_per_store_core $per_core 1" "wal_per_renewal $wal_b B" "errors $errs 1"; do
            # shellcheck disable=SC2086  # split on purpose: metric, value, unit
            set -- $m; echo "fleet,$c,$1,$2,$3" >> "$csv"
        done
    fi
}

# baseline_prefix COMMIT: a copy of this PostgreSQL with cosid built from COMMIT installed
# (once: kept for the next run), printed.
baseline_prefix() {
    local d="$sdir-base-$1"
    if [ ! -f "$d/installed" ]; then
        rm -rf "$d"; mkdir -p "$d/src"
        git -C "$COSID_ROOT" archive "$1" | tar -x -C "$d/src"
        cp -a "$PG_BIN/.." "$d/pg"  # (PostgreSQL finds its files relative to its binaries)
        make -C "$d/src" -s -j2 PG_CONFIG="$d/pg/bin/pg_config" install >"$d/build.log" 2>&1 || return 1
        touch "$d/installed"
    fi
    echo "$d/pg"
}

# The same cases against each baseline, each in a fleet.sh of its own (its own store and
# PgBouncers, on ports of its own), after this one's store has stopped.
run_baselines() {
    local c i=0 prefix
    fleet_cleanup
    for c in $FLEET_BASELINES; do
        i=$(( i + 1 ))
        prefix=$(baseline_prefix "$c") || { echo "   $c: did not build (see $sdir-base-$c/build.log)"; continue; }
        echo; echo "   the same cases with cosid of $c ($(git -C "$COSID_ROOT" show -s --format=%cs "$c"), cosid $(sed -n "s/^default_version = '\(.*\)'/\1/p" "$prefix"/share/postgresql/extension/cosid.control)):"
        FLEET_BASELINES="" FLEET_LABEL=$c FLEET_DIR="$sdir-$c" FLEET_PORT=$(( sport + 100 * i )) COSID_PG_BIN="$prefix/bin" \
            bash "$fdir/fleet.sh" | sed '/^$/d' || echo "   $c: its run failed"
    done
}

# This tree's figures over each baseline's, case by case (x: this tree / the baseline's).
print_ratios() {
    echo; echo "   ratios, this tree over each baseline (store CPU per lease renewed, per acquire, WAL per lease renewed):"
    awk -F'|' '$1 == "this tree" { t[$2 "|" $3] = $0; next } { b[NR] = $0 }
        function r(x, y) { return (x + 0 > 0 && y + 0 > 0) ? sprintf("%.2fx", x / y) : "-" }
        END { for (i in b) { split(b[i], f, "|"); if (!((f[2] "|" f[3]) in t)) continue; split(t[f[2] "|" f[3]], m, "|")
              printf "   %-15s k=%-3s vs %-9s %8s %8s %8s   (%s / %s us, %s / %s us, %s / %s B)\n", f[2], f[3], f[1],
                  r(m[4], f[4]), r(m[5], f[5]), r(m[6], f[6]), m[4], f[4], m[5], f[5], m[6], f[6] } }' "$FLEET_RESULTS"
}

echo
echo "8. fleet: one lease store, N simulated instances each with its own store connection (bench/fleet),"
echo "   each holding k leases (one per namespace$([ "$batch" = 1 ] && echo ", a pass's renewals in one cosid.lease_pass")),"
echo "   ttl 30 s (renewed every 10 s), ${fleet_secs} s measured per case after every instance holds its leases,"
echo "   0.2% of renewal rounds replaced by a release or a crash (the leases left to expire); store fsync $fsync"
[ -n "${FLEET_RAMP_SECONDS:-}" ] && echo "   the instances' first acquires spread over ${FLEET_RAMP_SECONDS} s"
[ "$switchover" != 0 ] && echo "   with a switchover to a streaming standby a third into each measured period"
echo "   (renew p50/p99: per pass; CPU µs: the store's, per lease renewed and per acquire; lost: leases renewed too late"
echo "   or whose successor came after their window ended)"
printf '   %-15s %6s %9s %8s %8s %9s %8s %9s %8s %9s %6s\n' "instances" "k" "leases/s" "p50 ms" "p99 ms" "CPU cores" \
    "µs/lease" "µs/acq" "acq p99" "lease/core" "lost"
largest=0; largest_direct=0; largest_leases=0; largest_shape=none
if [ -n "${FLEET_BASELINES:-}" ]; then export FLEET_RESULTS="$sdir.results"; : > "$FLEET_RESULTS"; fi
for c in $cases; do
    for k in ${FLEET_NAMESPACES:-1}; do
        mode=${c%%:*}; n=${c##*:}
        if [ "$switchover" != 0 ]; then
            [ -f "$sdir/run.switch" ] && { fleet_cleanup; fresh_store; }
            make_standby
        fi
        run_case "$mode" "$n" "$k"
        [ -f "$sdir/run.switch" ] && swap_store
        if [ "$(cat "$sdir"/run.out* | grep -c '^ok=1')" != "$procs" ]; then
            printf '   %-15s did not reach its leases: %s\n' "$n $mode" "$(grep -h '^ok=0' "$sdir"/run.out* | head -c 300)"
        else
            report_case "$mode" "$n" "$k"
        fi
        fleet_stop_bouncers
    done
done
echo "   most leases carried with p99 < 50 ms and no lease lost: $largest_leases ($largest_shape)"
case " ${FLEET_NAMESPACES:-1} " in *" 1 "*)
    echo "   largest fleet carried (k = 1) with p99 < 50 ms and no lease lost: $largest instances (direct: $largest_direct)";;
esac
[ -n "${csv:-}" ] && echo "fleet,largest,instances,$largest,1" >> "$csv"
if [ -n "${FLEET_BASELINES:-}" ]; then
    run_baselines
    print_ratios
fi
true

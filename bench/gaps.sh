#!/usr/bin/env bash
# Section 9 of bench/run.sh (GAPS=1; GAPS=only runs it alone): what each operation a DBA
# performs costs in ids, beside bigserial in the same run.  For each operation, writers INSERT
# one row every 10 ms (two into a table with `id bigint DEFAULT cosid_next()`, two into one with
# `id bigserial`, on the same server) and log the client's time of every success and failure;
# then the operation is performed.  Reported for each table: the longest gap between two
# successful INSERTs of one writer, the failed INSERTs, the time from the end of the operation
# (the server ready again) until every writer inserted again, and ids issued twice (0).
# Nothing asserts: it prints a table and writes bench/results/gaps.csv.  About 5 minutes.
#   1. the instance restarted (pg_ctl restart -m fast), its store its own
#   2. pg_upgrade --link of the instance holding its own store (the same major by default)
#   3. a remote store (cosid.store_dsn) restarted; stopped for 20 s and started again, once
#      right after the instance renewed its lease and once as a renewal was due
#   4. the remote store's asynchronous failover: its primary stopped (-m immediate), its
#      streaming standby promoted; with the defaults, and with ttl = max_ttl 10 s, max_tolerance 1 s
#   5. the instance's clock stepped 1 h ahead for 5 s and back, by reload: the generator's
#      (cosid.clock_offset, as with a store elsewhere), then the store's too (cosid.store_clock_offset)
# The same client's clock times every attempt and the operation, so the figures include what
# the client sees (connecting again, a server's start), the same for both tables.
# Alone (cosid installed into that PostgreSQL):  COSID_PG_BIN=/path/to/bin bash bench/gaps.sh
#   GAPS_UPGRADE_BIN=/path/to/bin  the new cluster's binaries for pg_upgrade (cosid installed
#                                  there too; default: COSID_PG_BIN's, an upgrade to the same major)
#   GAPS_PORT=55800                the first of 8 ports;  GAPS_DIR=/tmp/cosid-gaps  the servers' files
#   GAPS_CASES="restart upgrade store failover clock"  a subset (its figures go to GAPS_DIR/gaps.csv)
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
apt_install_missing libpq-dev g++
W="${GAPS_DIR:-/tmp/cosid-gaps}"; P0="${GAPS_PORT:-55800}"
OBIN="$PG_BIN"; NBIN="${GAPS_UPGRADE_BIN:-$PG_BIN}"
PERIOD=10   # ms between two INSERTs of one writer
started_at=$SECONDS

SERVERS=()   # "BIN|DATA" of every server started here: stopped at exit
WRITERS=()
gaps_cleanup() {
    local s
    for s in "${WRITERS[@]}"; do kill "$s" 2>/dev/null || true; done
    for s in "${SERVERS[@]}"; do as_pg "${s%%|*}/pg_ctl" -D "${s#*|}" -m immediate -w stop >/dev/null 2>&1 || true; done
}
trap gaps_cleanup EXIT
rm -rf "$W"; mkdir -p "$W"; chown "$PG_USER" "$W"
g++ -std=c++17 -O2 -Wall -Wextra -I"$(pg_config --includedir 2>/dev/null || echo /usr/include/postgresql)" \
    -o "$W/writer" "$COSID_ROOT/bench/gaps_writer.cpp" -lpq

now_ms() { date +%s%3N; }
# server DIR PORT [postgresql.conf lines...]: a fresh cluster with cosid preloaded (scripts/lib.sh)
server() { start_server "$@"; SERVERS+=("$PG_BIN|$1/data"); }
q() { psql_at "$1" "$2" postgres -At "${@:3}"; }
tables() {  # tables DIR PORT: the extension, the two tables, and a first id (the lease taken)
    q "$1" "$2" -c "CREATE EXTENSION IF NOT EXISTS cosid" \
        -c "CREATE TABLE t_cosid (id bigint DEFAULT cosid_next())" -c "CREATE TABLE t_serial (id bigserial)" \
        -c "SELECT cosid_next()" >/dev/null
}

# writers TAG DIR PORT: two writers per table, logging to $W/logs/TAG/{cosid,serial}.N.log
writers() {
    local tag=$1 t n; mkdir -p "$W/logs/$tag"; chown "$PG_USER" "$W/logs"; rm -f "$W/logs/$tag/stop"
    WRITERS=()
    for t in cosid serial; do
        for n in 1 2; do
            "$W/writer" "host=$2 port=$3 dbname=postgres user=postgres" "t_$t" "$PERIOD" \
                "$W/logs/$tag/$t.$n.log" "$W/logs/$tag/stop" 300 &
            WRITERS+=($!)
        done
    done
    wait_all_back "$tag" 0 20 || echo "   ($tag: the writers did not all insert within 20 s)"
    sleep 1   # a second of steady inserts before the operation
}
all_back() {  # all_back TAG T: every writer had a success after T (unix ms)
    local f
    for f in "$W/logs/$1"/*.log; do
        awk -v t="$2" '$2 == "S" && $1 > t { ok = 1; exit } END { exit !ok }' "$f" 2>/dev/null || return 1
    done
}
wait_all_back() {  # wait_all_back TAG T SECONDS
    local deadline=$(( $(now_ms) + $3 * 1000 ))
    until all_back "$1" "$2"; do [ "$(now_ms)" -lt "$deadline" ] || return 1; sleep 0.1; done
}
# observe TAG T1 MIN MAX [EVENT...]: after the operation ended at T1 (and after the command
# EVENT first succeeded, when given: the instance reached its store again), until every writer
# inserted again and 2 s more, at least MIN and at most MAX seconds after T1; then the writers
# stop.
observe() {
    local tag=$1 t1=$2 min=$3 max=$4 te until_ms=0 deadline; shift 4
    te=$t1; deadline=$(( t1 + max * 1000 ))
    if [ $# -gt 0 ]; then
        until "$@"; do [ "$(now_ms)" -lt "$deadline" ] || break; sleep 0.1; done
        te=$(now_ms)
    fi
    OBS_TE=$te
    if wait_all_back "$tag" "$te" $(( (deadline - $(now_ms)) / 1000 + 1 )); then until_ms=$(( $(now_ms) + 2000 )); fi
    [ $(( t1 + min * 1000 )) -gt "$until_ms" ] && until_ms=$(( t1 + min * 1000 ))
    while [ "$(now_ms)" -lt "$until_ms" ]; do sleep 0.2; done
    touch "$W/logs/$tag/stop"
    local w; for w in "${WRITERS[@]}"; do wait "$w" || true; done
    WRITERS=()
}

out="$COSID_ROOT/bench/results"; mkdir -p "$out"; gcsv="$out/gaps.csv"
[ -n "${GAPS_CASES:-}" ] && gcsv="$W/gaps.csv"   # a subset leaves the full run's figures alone
echo "section,case,metric,value,unit" > "$gcsv"
ROWS=()
# measure TAG LABEL T0 T1 DIR PORT [NOTE]: the figures of both tables; DIR PORT reach the
# instance (for ids stored twice) or are empty when it is gone.
measure() {
    local tag=$1 label=$2 t0=$3 t1=$4 dir=$5 port=$6 note=${7:-} t r
    declare -A fig
    for t in cosid serial; do
        # per writer: the longest gap between two successes (or from the last one to the
        # writer's last attempt, when it never inserted again: then marked open), the first
        # success after t1; over the table: failed INSERTs, attempts without a connection,
        # their SQLSTATEs, ids returned twice
        r=$(awk -v t1="$t1" '
            function fin() { if (last && lastany - last > wgap) { wgap = lastany - last; wopen = 1 }
                             if (wgap > gap) { gap = wgap; open = wopen }
                             if (wgap >= 500 && wend > t1 && wend > fa) fa = wend   # its longest gap (over 0.5 s) ended after t1
                             if (!fa || wopen) back = -1; else if (back >= 0 && fa - t1 > back) back = fa - t1 }
            FNR == 1 { if (NR > 1) fin(); last = 0; wgap = 0; wopen = 0; wend = 0; fa = 0 }
            { lastany = $1 }
            $2 == "S" { if (last && $1 - last > wgap) { wgap = $1 - last; wend = $1; wopen = 0 }
                        last = $1; if (!fa && $1 > t1) fa = $1; if (seen[$3]++) dup++ }
            $2 == "E" { err++; st[$3]++ }
            $2 == "C" { conn++ }
            END { fin(); s = ""; for (k in st) s = s (s == "" ? "" : " ") k "x" st[k]
                  printf "%d %d %d %d %d %d %s\n", gap, open, err, conn, back, dup, (s == "" ? "-" : s) }' \
            "$W/logs/$tag/$t".*.log)
        read -r "fig[$t.gap]" "fig[$t.open]" "fig[$t.err]" "fig[$t.conn]" "fig[$t.back]" "fig[$t.dup]" "fig[$t.states]" <<<"$r"
        if [ -n "$dir" ]; then  # ids stored twice in the table
            fig[$t.dup]=$(( ${fig[$t.dup]} + $(q "$dir" "$port" -c "SELECT count(*) - count(DISTINCT id) FROM t_$t") ))
        fi
        echo "$tag,$t,longest_gap,${fig[$t.gap]},ms" >> "$gcsv"
        echo "$tag,$t,gap_open_at_end,${fig[$t.open]},bool" >> "$gcsv"
        echo "$tag,$t,failed_inserts,${fig[$t.err]},1" >> "$gcsv"
        echo "$tag,$t,attempts_without_connection,${fig[$t.conn]},1" >> "$gcsv"
        echo "$tag,$t,back_after_ready,${fig[$t.back]},ms" >> "$gcsv"
        echo "$tag,$t,duplicates,${fig[$t.dup]},1" >> "$gcsv"
    done
    echo "$tag,operation,duration,$(( t1 - t0 )),ms" >> "$gcsv"
    secs() { awk -v m="$1" -v o="${2:-0}" 'BEGIN { if (m < 0) print "never"; else printf "%s%.2f s", (o ? ">" : ""), m / 1000 }'; }
    ROWS+=("$(printf '%-50s %10s %10s %8s %8s %10s %10s %5s' "$label" "$(secs "${fig[cosid.gap]}" "${fig[cosid.open]}")" \
        "$(secs "${fig[serial.gap]}" "${fig[serial.open]}")" "${fig[cosid.err]}" "${fig[serial.err]}" \
        "$(secs "${fig[cosid.back]}")" "$(secs "${fig[serial.back]}")" "$(( ${fig[cosid.dup]} + ${fig[serial.dup]} ))")")
    printf '   %-50s done in %ss: cosid gap %s, bigserial gap %s; errors %s (%s) and %s (%s)%s\n' "$label" \
        "$(( SECONDS - started_at ))" "$(secs "${fig[cosid.gap]}" "${fig[cosid.open]}")" \
        "$(secs "${fig[serial.gap]}" "${fig[serial.open]}")" "${fig[cosid.err]}" "${fig[cosid.states]}" \
        "${fig[serial.err]}" "${fig[serial.states]}" "${note:+; $note}"
}

echo
echo "9. the gap in ids each operation costs, beside bigserial: PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $NF}'),"
echo "   2 writers per table, one INSERT every ${PERIOD} ms each; cosid's defaults unless said"

CASES=" ${GAPS_CASES:-restart upgrade store failover clock} "   # a subset, for trying one out
want() { [[ "$CASES" == *" $1 "* ]]; }

# 1. The instance restarted: both tables stop while it is down.
if want restart; then
    L="$W/restart"; server "$L" "$P0"; tables "$L" "$P0"
    writers restart "$L" "$P0"
    t0=$(now_ms)
    as_pg "$PG_BIN/pg_ctl" -D "$L/data" -l "$L/server.log" -m fast -w restart >/dev/null
    t1=$(now_ms)
    observe restart "$t1" 3 30
    measure restart "instance restarted (pg_ctl restart -m fast)" "$t0" "$t1" "$L" "$P0"
    stop_server "$L" immediate
fi

# 2. pg_upgrade --link of the instance holding its own store: old and new cluster alike (the
# new one made by its own initdb: another system identifier), at the same address, so that
# the writers reach the new cluster when it starts; pg_upgrade's own servers listen elsewhere.
if want upgrade; then
    U="$W/upgrade"; rm -rf "$U"; mkdir -p "$U/old" "$U/new" "$U/sock"; chown -R "$PG_USER" "$U"
    as_pg "$OBIN/initdb" -D "$U/old/data" -A trust -U postgres -E UTF8 --locale=C -k >/dev/null & i1=$!
    as_pg "$NBIN/initdb" -D "$U/new/data" -A trust -U postgres -E UTF8 --locale=C -k >/dev/null & i2=$!
    wait "$i1"; wait "$i2"
    for d in old new; do
        printf '%s\n' "port = $(( P0 + 1 ))" "listen_addresses = ''" "unix_socket_directories = '$U'" \
            "shared_preload_libraries = 'cosid'" "max_connections = 30" "fsync = off" >> "$U/$d/data/postgresql.conf"
    done
    as_pg "$OBIN/pg_ctl" -D "$U/old/data" -l "$U/old/server.log" -w start >/dev/null; SERVERS+=("$OBIN|$U/old/data")
    tables "$U" $(( P0 + 1 ))
    writers upgrade "$U" $(( P0 + 1 ))
    t0=$(now_ms)
    as_pg "$OBIN/pg_ctl" -D "$U/old/data" -m fast -w stop >/dev/null
    if (cd "$U" && as_pg "$NBIN/pg_upgrade" -b "$OBIN" -B "$NBIN" -d "$U/old/data" -D "$U/new/data" \
            -p $(( P0 + 2 )) -P $(( P0 + 3 )) -s "$U/sock" -U postgres --link --no-sync) > "$U/pg_upgrade.out" 2>&1; then
        t_up=$(now_ms)
        as_pg "$NBIN/pg_ctl" -D "$U/new/data" -l "$U/new/server.log" -w start >/dev/null; SERVERS+=("$NBIN|$U/new/data")
        t1=$(now_ms)
        observe upgrade "$t1" 3 60
        major() { "$1/postgres" --version | awk '{print $NF}' | cut -d. -f1; }
        floors=$(grep -q 'floors left alone' "$U/new/server.log" && echo "the store kept its floors" ||
                 { grep -q 'next_floor raised' "$U/new/server.log" && echo "the store raised its floors" || echo "no store call logged"; })
        measure upgrade "pg_upgrade --link, its own store ($(major "$OBIN") -> $(major "$NBIN"))" \
            "$t0" "$t1" "$U" $(( P0 + 1 )) "pg_upgrade took $(( (t_up - t0) / 1000 )) s, in both gaps; $floors"
        as_pg "$NBIN/pg_ctl" -D "$U/new/data" -m immediate -w stop >/dev/null
    else
        touch "$W/logs/upgrade/stop"; observe upgrade "$(now_ms)" 0 0
        echo "   pg_upgrade failed, row skipped: $(tail -3 "$U/pg_upgrade.out" | tr '\n' ' ')"
    fi
fi

# 3 and 4. A remote store: primary S with an asynchronous streaming standby SB, the instance
# I reaching both through a multi-host DSN (target_session_attrs=read-write).
PS=$(( P0 + 4 )); PSB=$(( P0 + 5 )); PI=$(( P0 + 6 ))
# remote_setup NAME TTL MAX_TTL MAX_TOLERANCE: fresh servers under $W/NAME; empty arguments
# keep the defaults
remote_setup() {
    local d
    for d in "${I:-}" "${S:-}" "${SB:-}"; do [ -n "$d" ] && stop_server "$d" immediate; done
    S="$W/$1/store"; SB="$W/$1/standby"; I="$W/$1/instance"; mkdir -p "$W/$1"; chown "$PG_USER" "$W/$1"
    server "$S" "$PS" "wal_level = replica" "max_wal_senders = 4" "wal_keep_size = '64MB'" "cosid.store_only = on"
    q "$S" "$PS" -c "SELECT pg_create_physical_replication_slot('sb')" -c "CREATE EXTENSION cosid" >/dev/null
    if [ -n "$3" ]; then q "$S" "$PS" -c "SELECT cosid_store_settings(max_ttl => '$3', max_tolerance => '$4')" >/dev/null; fi
    rm -rf "$SB"; mkdir -p "$SB"; chown "$PG_USER" "$SB"
    as_pg "$PG_BIN/pg_basebackup" -h "$S" -p "$PS" -D "$SB/data" -R -X stream -S sb -c fast >/dev/null
    sed -i -e "s/^port = .*/port = $PSB/" -e "s|^unix_socket_directories = .*|unix_socket_directories = '$SB'|" \
        "$SB/data/postgresql.conf"
    # a promotion waits for the startup process's sleep between WAL retries (5 s by default)
    echo "wal_retrieve_retry_interval = '100ms'" >> "$SB/data/postgresql.conf"
    as_pg "$PG_BIN/pg_ctl" -D "$SB/data" -l "$SB/server.log" -w start >/dev/null; SERVERS+=("$PG_BIN|$SB/data")
    server "$I" "$PI" "cosid.store_dsn = 'host=$S,$SB port=$PS,$PSB dbname=postgres user=postgres target_session_attrs=read-write'" \
        ${2:+"cosid.ttl = '$2'"}
    tables "$I" "$PI"
}
streaming() {  # the standby streams and has replayed everything the primary wrote
    local deadline=$(( $(now_ms) + 20000 ))
    until [ "$(q "$S" "$PS" -c "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'
                                  AND replay_lsn = pg_current_wal_lsn()" 2>/dev/null)" = 1 ]; do
        [ "$(now_ms)" -lt "$deadline" ] || { echo "   (the standby does not stream)"; return 1; }
        sleep 0.1
    done
}
headroom() {  # seconds from now until the instance's lease expires (its window ends a tolerance later)
    q "$I" "$PI" -c "SELECT round(extract(epoch FROM min(expires_at) - now())::numeric, 1) FROM cosid_pool() WHERE state = 'active'" ||
        echo "?"
}
calls() { q "$I" "$PI" -c "SELECT renewals + acquires FROM cosid_stats()" 2>/dev/null || echo -1; }
CALLS=0
reached() { [ "$(calls)" -gt "$CALLS" ]; }   # a renewal or an acquire succeeded since CALLS was read

if want store; then
    remote_setup remote "" "" ""
    writers store_restart "$I" "$PI"
    t0=$(now_ms)
    as_pg "$PG_BIN/pg_ctl" -D "$S/data" -l "$S/server.log" -m fast -w restart >/dev/null
    t1=$(now_ms); CALLS=$(calls)
    observe store_restart "$t1" 2 40 reached   # until the instance renewed again (every ttl/3)
    measure store_restart "remote store restarted (-m fast)" "$t0" "$t1" "$I" "$PI" \
        "renewed again $(( (OBS_TE - t1) / 100 ))00 ms after"

    # The store stopped for 20 s (shorter than the ttl, 30 s) right after a renewal, and just
    # before one was due (renewals every ttl/3: the lease has ttl - ttl/3 = 20 s to run)
    for phase in after before; do
        writers "store_stop_$phase" "$I" "$PI"
        deadline=$(( $(now_ms) + 15000 ))
        until h=$(headroom); [ "$(now_ms)" -ge "$deadline" ] ||
              awk -v h="$h" -v p="$phase" 'BEGIN { exit !(p == "after" ? h >= 29.6 : h <= 20.4) }'; do sleep 0.05; done
        t0=$(now_ms)
        as_pg "$PG_BIN/pg_ctl" -D "$S/data" -m fast -w stop >/dev/null
        sleep 20
        as_pg "$PG_BIN/pg_ctl" -D "$S/data" -l "$S/server.log" -w start >/dev/null
        t1=$(now_ms); CALLS=$(calls)
        observe "store_stop_$phase" "$t1" 2 40 reached
        measure "store_stop_$phase" "remote store stopped 20 s, $([ $phase = after ] && echo "just renewed" || echo "renewal due")" \
            "$t0" "$t1" "$I" "$PI" "the lease had ${h} s to run at the stop; renewed again $(( (OBS_TE - t1) / 100 ))00 ms after the start"
    done
fi

# async_failover TAG LABEL: the store's primary stopped at once, its standby promoted (end of
# the operation); the instance's keeper reaches the new primary at its next renewal, whose
# first call on the new timeline raises every floor there
async_failover() {
    streaming || true
    writers "$1" "$I" "$PI"
    local h raise; h=$(headroom)
    t0=$(now_ms)
    as_pg "$PG_BIN/pg_ctl" -D "$S/data" -m immediate -w stop >/dev/null
    as_pg "$PG_BIN/pg_ctl" -D "$SB/data" -w promote >/dev/null
    t1=$(now_ms); CALLS=$(calls)
    observe "$1" "$t1" 2 100 reached
    raise=$(grep -ho 'next_floor raised to at least now + [0-9]* ms + 2 x [0-9]* ms' "$SB/server.log" | head -1 |
            sed 's/next_floor raised/floors raised/' || true)
    measure "$1" "$2" "$t0" "$t1" "$I" "$PI" "the lease had ${h} s to run at the stop; a new lease $(( (OBS_TE - t1) / 100 ))00 ms after the promotion; ${raise:-no raise logged}"
}
if want failover; then
    remote_setup failover "" "" ""
    async_failover store_failover "remote store: async failover (defaults)"
    remote_setup failover_short 10s 10s 1s
    async_failover store_failover_short "  the same, ttl = max_ttl 10 s, max_tolerance 1 s"
fi
for d in "${I:-}" "${S:-}" "${SB:-}"; do [ -n "$d" ] && stop_server "$d" immediate; done

# 5. The instance's clock stepped 1 h ahead for 5 s, then back, by reload: cosid.clock_offset
# (the generator's clock); then with cosid.store_clock_offset too (the store's clock, here in
# the same server), as a step of the host's clock moves both.  A reload reaches a backend only
# between statements: one waiting inside an INSERT keeps the clock ahead until it returns.
clock_step() {  # clock_step TAG LABEL SETTING...
    local tag=$1 label=$2 set=() reset=() g; shift 2
    for g in "$@"; do set+=(-c "ALTER SYSTEM SET $g = 3600000"); reset+=(-c "ALTER SYSTEM RESET $g"); done
    C="$W/$tag"; PC=$(( P0 + 7 )); server "$C" "$PC"; tables "$C" "$PC"
    writers "$tag" "$C" "$PC"
    t0=$(now_ms)
    q "$C" "$PC" "${set[@]}" -c "SELECT pg_reload_conf()" >/dev/null
    sleep 5
    q "$C" "$PC" "${reset[@]}" -c "SELECT pg_reload_conf()" >/dev/null
    t1=$(now_ms)
    observe "$tag" "$t1" 45 90   # past the window granted before the step back, and a renewal
    measure "$tag" "$label" "$t0" "$t1" "$C" "$PC"
    stop_server "$C" immediate
}
if want clock; then
    clock_step clock "clock +1 h for 5 s, then back (not the store's)" cosid.clock_offset
    clock_step clock_store "  the same, the store's clock too (its own store)" cosid.clock_offset cosid.store_clock_offset
fi

echo
printf '   %-50s %10s %10s %8s %8s %10s %10s %5s\n' "operation" "cosid" "bigserial" "cosid" "serial" "cosid" "bigserial" "dup" \
    "" "gap" "gap" "errors" "errors" "back" "back" "ids"
for r in "${ROWS[@]}"; do echo "   $r"; done
echo "   gap: the longest time one writer went without a successful INSERT (>: still open at the end);"
echo "   back: from the end of the operation (the server ready again) until every writer inserted again"
echo "   after it and after its longest gap (never: a writer that did not)"
echo "   ($(( SECONDS - started_at )) s; figures written to ${gcsv#"$COSID_ROOT"/})"

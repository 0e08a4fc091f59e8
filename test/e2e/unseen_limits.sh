#!/usr/bin/env bash
# What a copy cannot see.  A copy (a promoted standby, a copied data directory, a restored
# dump) cannot see a limit its original raised after the copy was made, nor a fork it was told
# of in another database.  Each section repeats one way that used to issue ids twice, and
# counts the ids both sides issued (zero); sections 1 and 2 also run a second copy whose raise
# covers only the limits it sees (cosid.test_reach_cap at 1 ms, as before cosid 1.7), which
# must issue some of the original's ids again: the hazard is real in this very run.
#   1. a fork acknowledged after the original raised max_ttl and cosid.ttl;
#   2. a static copy acknowledged after the original raised cosid.static_ahead;
#   3. a store restored from a dump taken before max_ttl was raised;
#   4. a fork recorded in one local database, then the copy switched back to another (and a
#      cosid.fork file removed): every store of the copy refuses until acknowledged there;
#   5. restored => true: acknowledged once for its store, refused by another database's.
# The sections run side by side: each waits out the reach cap after its raise.  The cap is 35 s
# here, not cosid's 120 s (cosid.test_reach_cap on the servers of sections 1 to 3, UNSEEN_CAP),
# and the limits raised after the copy stay within it as cosid keeps them within 120 s: max_ttl
# and cosid.ttl raised to 20 s (a window up to 22 s past the clock, with max_tolerance 1 s), the
# ids 15 s ahead, three times what the copy sees (3 s + 2 x 1 s); static_ahead raised to 30 s
# (32 s), the ids 25 s ahead, twice the 10 s + 2 x 1 s the copy sees.  What is tested is that
# the raise covers the cap and not the limits the copy sees; with the cap at 120 s each section
# waited 2 minutes for it.
CAP="${UNSEEN_CAP:-35s}"; RAISED=20s; AHEAD=15; RAISED_STATIC=30s; AHEAD_STATIC=25
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/unseen_limits"
ALL=("$base"/p1 "$base"/s1 "$base"/o1 "$base"/r2 "$base"/c2 "$base"/o2 "$base"/x3b "$base"/a3 "$base"/b3 "$base"/p4 "$base"/c4 "$base"/p5)
# shellcheck disable=SC2046  # one argument per pid
cleanup() { touch "$base/stop" 2>/dev/null; kill $(jobs -p) 2>/dev/null || true; for d in "${ALL[@]}"; do stop_server "$d" immediate; done; }
trap cleanup EXIT
rm -rf "$base"; mkdir -p "$base"; chown "$PG_USER" "$base"
qd() { local d=$1 p=$2; shift 2; psql_at "$d" "$p" postgres -At "$@"; }
now_utc() { date -u '+%Y-%m-%d %H:%M:%S.%3N+00'; }
# copy_of DIR PORT NEWDIR NEWPORT MODE [conf lines...]: a base backup of DIR, not started:
# MODE standby (streams, -R) or copy (a copied data directory).
copy_of() {
    local d=$1 p=$2 n=$3 np=$4 mode=$5; shift 5
    rm -rf "$n"; mkdir -p "$n"; chown "$PG_USER" "$n"
    # shellcheck disable=SC2046  # none or one option
    as_pg "$PG_BIN/pg_basebackup" -h "$d" -p "$p" -D "$n/data" -X stream -c fast $([ "$mode" = standby ] && echo -R) >/dev/null
    sed -i -e "s/^port = .*/port = $np/" -e "s|^unix_socket_directories = .*|unix_socket_directories = '$n'|" \
        "$n/data/postgresql.conf"
    for line in "$@"; do echo "$line" >> "$n/data/postgresql.conf"; done
}
start_at() { as_pg "$PG_BIN/pg_ctl" -D "$1/data" -l "$1/server.log" -w start >/dev/null; }
# insert_all DIR PORT TABLE N [DB]: N rows in one statement (waits for windows up to 200 s)
insert_all() {
    psql_at "$1" "$2" "${5:-postgres}" -At -v VERBOSITY=sqlstate -c "SET cosid.acquire_timeout = '200s'" \
        -c "INSERT INTO $3(v) SELECT g FROM generate_series(1, $4) g" 2>&1 | grep -oE 'ERROR:  [0-9A-Z]{5}' | head -1 | cut -c9- || true
}
# ahead_by DIR PORT SECONDS: rows until the server's last id is SECONDS ahead of its clock (at
# most 120 s of trying); prints how far ahead it got, in seconds.  Each statement takes 10 s of
# ticks (160 ids), far more than a loaded machine's clock moves meanwhile.
ahead_by() {
    local deadline=$(( $(date +%s) + 120 )) a=0
    while [ "$a" -lt "$3" ] && [ "$(date +%s)" -lt "$deadline" ]; do
        insert_all "$1" "$2" t 160 >/dev/null
        a=$(qd "$1" "$2" -c "SELECT coalesce(floor(extract(epoch FROM max(cosid_timestamp(id, 'f')) - clock_timestamp())), 0)::int FROM t")
    done
    echo "$a"
}
sqlstate_in() { local out; out=$(psql_at "$1" "$2" "${4:-postgres}" -At -v VERBOSITY=verbose -c "$3" 2>&1 || true); sqlstate_of "$out"; }
# twice DIR PORT FILE: how many ids of FILE (another server's) the server at DIR issued itself
# (its table t holds the rows it had when it was copied, too: those came from the other)
twice() {
    qd "$1" "$2" -c "DROP TABLE IF EXISTS other" -c "CREATE TABLE other (id bigint)" >/dev/null
    qd "$1" "$2" -c "COPY other FROM STDIN" < "$3"
    qd "$1" "$2" -c "SELECT count(*) FROM other JOIN t USING (id) WHERE t.src = $2"
}
LAYOUT="cosid_namespace_create('f', slot_bits => 1, sequence_bits => 4, unit => 's', total_bits => 40, tolerance => '300 ms')"

section_1() {  # a fork acknowledged after the original raised its limits
    local P="$base/p1" S="$base/s1" O="$base/o1"
    start_server "$P" 56301 "wal_level = replica" "max_wal_senders = 4" "cosid.ttl = '3s'" "cosid.preferred_slot = 0" \
        "cosid.test_reach_cap = '$CAP'"
    qd "$P" 56301 -c "CREATE EXTENSION cosid" -c "SELECT * FROM cosid_store_settings(max_ttl => '3s', max_tolerance => '1s')" \
        -c "SELECT $LAYOUT" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), v int, src int DEFAULT current_setting('port')::int)" >/dev/null
    check "1: P issues" "" "$(insert_all "$P" 56301 t 32)"
    copy_of "$P" 56301 "$S" 56302 standby
    copy_of "$P" 56301 "$O" 56303 standby "cosid.test_reach_cap = '1ms'"
    start_at "$S"; start_at "$O"
    check_true "1: both standbys replayed P's store" "$(wait_until 60 qd "$O" 56303 -c "SELECT count(*) = 32 FROM t")"
    as_pg "$PG_BIN/pg_ctl" -D "$S/data" -w promote >/dev/null; as_pg "$PG_BIN/pg_ctl" -D "$O/data" -w promote >/dev/null
    check "1: the promoted copy refuses (ZC009)" ZC009 "$(insert_all "$S" 56302 t 1)"
    # On P, as docs/failover.md allows: the limits raised, with no standby left to replay it.
    qd "$P" 56301 -c "SELECT * FROM cosid_store_settings(max_ttl => '$RAISED')" -c "ALTER SYSTEM SET cosid.ttl = '$RAISED'" \
        -c "SELECT pg_reload_conf()" >/dev/null
    local a; a=$(ahead_by "$P" 56301 $AHEAD)
    check_true "1: P's ids run ahead of its clock under the raised limits ($a s)" "$( [ "$a" -ge $AHEAD ] && echo t || echo f)"
    qd "$P" 56301 -c "COPY (SELECT id FROM t) TO STDOUT" > "$base/p1_ids"; chmod a+r "$base/p1_ids"
    stop_server "$P" fast; local stopped; stopped=$(now_utc)
    # (the copy that sees only its limits first: the other waits out the cap)
    qd "$O" 56303 -c "SELECT cosid_fork_acknowledge('$stopped')" >/dev/null
    qd "$S" 56302 -c "SELECT cosid_fork_acknowledge('$stopped')" >/dev/null
    check "1: the copy whose raise covers only the limits it saw issues 600 ids" "" "$(insert_all "$O" 56303 t 600)"
    local n; n=$(twice "$O" 56303 "$base/p1_ids")
    check_true "1: ... and $n of them the original had issued (so the cap is what keeps them apart)" \
        "$( [ "$n" -gt 0 ] && echo t || echo f)"
    check "1: the copy issues 600 ids after its acknowledgment" "" "$(insert_all "$S" 56302 t 600)"
    check "1: ... none of them issued by the original too" 0 "$(twice "$S" 56302 "$base/p1_ids")"
}

section_2() {  # a static copy acknowledged after the original raised cosid.static_ahead
    local R="$base/r2" C="$base/c2" O="$base/o2"
    start_server "$R" 56311 "cosid.static_slots = 'f:1'" "cosid.state_file = '$base/r2/cosid.state'" \
        "cosid.static_ahead = '10s'" "cosid.test_reach_cap = '$CAP'"
    qd "$R" 56311 -c "CREATE EXTENSION cosid" -c "SELECT * FROM cosid_store_settings(max_tolerance => '1s')" -c "SELECT $LAYOUT" \
        -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), v int, src int DEFAULT current_setting('port')::int)" >/dev/null
    check "2: R issues on its static slot" "" "$(insert_all "$R" 56311 t 16)"
    copy_of "$R" 56311 "$C" 56312 copy "cosid.state_file = '$C/cosid.state'"
    copy_of "$R" 56311 "$O" 56313 copy "cosid.state_file = '$O/cosid.state'" "cosid.test_reach_cap = '1ms'"
    cp "$R/cosid.state" "$C/cosid.state"; cp "$R/cosid.state" "$O/cosid.state"; chown "$PG_USER" "$C/cosid.state" "$O/cosid.state"
    echo "a disk snapshot of R" | as_pg tee "$C/data/cosid.fork" "$O/data/cosid.fork" >/dev/null
    # R raises static_ahead (to the most it takes) after the copy, and issues ahead of its clock.
    qd "$R" 56311 -c "ALTER SYSTEM SET cosid.static_ahead = '$RAISED_STATIC'" -c "SELECT pg_reload_conf()" >/dev/null
    sleep 1  # (the reload reaches the keeper; the checks below do not depend on when)
    local a; a=$(ahead_by "$R" 56311 $AHEAD_STATIC)
    check_true "2: R's ids run more than its first static_ahead ahead of its clock ($a s)" "$( [ "$a" -ge $AHEAD_STATIC ] && echo t || echo f)"
    qd "$R" 56311 -c "COPY (SELECT id FROM t) TO STDOUT" > "$base/r2_ids"; chmod a+r "$base/r2_ids"
    stop_server "$R" fast; local stopped; stopped=$(now_utc)
    start_at "$C"; start_at "$O"
    check "2: the copy opens no static window (ZC009)" ZC009 "$(insert_all "$C" 56312 t 1)"
    qd "$O" 56313 -c "SELECT cosid_fork_acknowledge('$stopped')" >/dev/null
    qd "$C" 56312 -c "SELECT cosid_fork_acknowledge('$stopped')" >/dev/null
    check "2: the copy whose raise covers only what it saw issues 600 ids" "" "$(insert_all "$O" 56313 t 600)"
    local n; n=$(twice "$O" 56313 "$base/r2_ids")
    check_true "2: ... and $n of them the original had issued" "$( [ "$n" -gt 0 ] && echo t || echo f)"
    check "2: the copy issues 600 ids after its acknowledgment" "" "$(insert_all "$C" 56312 t 600)"
    check "2: ... none of them issued by the original too" 0 "$(twice "$C" 56312 "$base/r2_ids")"
}

section_3() {  # a store restored from a dump taken before max_ttl was raised
    local X="$base/x3" X2="$base/x3b" A="$base/a3" B="$base/b3"
    local dsn="host=$X port=56321 dbname=postgres user=postgres"
    start_server "$X" 56321 "cosid.store_only = on" "cosid.test_reach_cap = '$CAP'"
    qd "$X" 56321 -c "CREATE EXTENSION cosid" -c "SELECT * FROM cosid_store_settings(max_ttl => '3s', max_tolerance => '1s')" \
        -c "SELECT $LAYOUT" >/dev/null
    local i p; for i in a b; do
        p=56322; [ $i = b ] && p=56323
        start_server "$base/${i}3" $p "cosid.store_dsn = '$dsn'" "cosid.ttl = '3s'" "cosid.preferred_slot = 0" \
            "cosid.owner_key = '${i}3'"
        qd "$base/${i}3" $p -c "CREATE EXTENSION cosid" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), v int, src int DEFAULT current_setting('port')::int)" >/dev/null
    done
    stop_server "$B"  # B starts only after the restore
    as_pg "$PG_BIN/pg_dump" -h "$X" -p 56321 -Fc -f "$base/x3.dump" postgres
    qd "$X" 56321 -c "SELECT * FROM cosid_store_settings(max_ttl => '$RAISED')" >/dev/null
    qd "$A" 56322 -c "ALTER SYSTEM SET cosid.ttl = '$RAISED'" -c "SELECT pg_reload_conf()" >/dev/null
    local a; a=$(ahead_by "$A" 56322 $AHEAD)
    check_true "3: A's ids run ahead of its clock under the raised max_ttl ($a s)" "$( [ "$a" -ge $AHEAD ] && echo t || echo f)"
    qd "$A" 56322 -c "COPY (SELECT id FROM t) TO STDOUT" > "$base/a3_ids"; chmod a+r "$base/a3_ids"
    # A stops (its keeper would take its slot back first), the store is lost, and its dump is
    # restored into a new server at its address.
    stop_server "$A" fast
    stop_server "$X" immediate
    mkdir -p "$X2"; fresh_cluster "$X2/data"; chown -R "$PG_USER" "$X2"
    { echo "port = 56321"; echo "listen_addresses = ''"; echo "unix_socket_directories = '$X'";
      echo "shared_preload_libraries = 'cosid'"; echo "cosid.store_only = on"; echo "fsync = off";
      # (UNSEEN_RESTORE_CAP=1ms: what cosid 1.6 raised by, the store's own limits: B issues A's ids)
      echo "cosid.test_reach_cap = '${UNSEEN_RESTORE_CAP:-$CAP}'"; } >> "$X2/data/postgresql.conf"
    start_at "$X2"
    as_pg "$PG_BIN/pg_restore" -h "$X" -p 56321 -d postgres "$base/x3.dump" 2>"$base/x3.restore.err" || true
    check "3: pg_restore reports no error" 0 "$(grep -c 'error' "$base/x3.restore.err" || true)"
    start_at "$B"
    check "3: B issues 480 ids from the restored store" "" "$(insert_all "$B" 56323 t 480)"
    check "3: ... none of them issued by A too" 0 "$(twice "$B" 56323 "$base/a3_ids")"
}

section_4() {  # a fork recorded in one local database, the copy switched back to another
    local P="$base/p4" C="$base/c4"
    start_server "$P" 56331 "wal_level = replica" "max_wal_senders = 4" "cosid.ttl = '3s'"
    qd "$P" 56331 -c "CREATE EXTENSION cosid" -c "SELECT * FROM cosid_store_settings(max_ttl => '3s', max_tolerance => '1s')" \
        -c "SELECT $LAYOUT" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), v int, src int DEFAULT current_setting('port')::int)" -c "CREATE DATABASE app" >/dev/null
    psql_at "$P" 56331 app -q -c "CREATE EXTENSION cosid" -c "SELECT $LAYOUT" >/dev/null 2>&1
    check "4: P issues" "" "$(insert_all "$P" 56331 t 32)"
    copy_of "$P" 56331 "$C" 56332 copy "cosid.database = 'app'"
    echo "a base backup of P" | as_pg tee "$C/data/cosid.fork" >/dev/null
    start_at "$C"
    check "4: the copy, on database app, refuses (ZC009)" ZC009 "$(sqlstate_in "$C" 56332 "SELECT cosid_next('f')" app)"
    check_true "4: its keeper took the cosid.fork file" "$(wait_until 20 bash -c "[ -e '$C/data/cosid.fork' ] && echo f || echo t")"
    rm -f "$base/stop"
    ( trap - EXIT; while [ ! -e "$base/stop" ]; do insert_all "$P" 56331 t 32 >/dev/null; done ) &
    local pid=$!
    # switched back to database postgres: a store that never heard of the fork
    qd "$C" 56332 -c "ALTER SYSTEM SET cosid.database = 'postgres'" >/dev/null
    stop_server "$C" fast; start_at "$C"
    check "4: switched to database postgres, the copy refuses there too (ZC009)" ZC009 "$(insert_all "$C" 56332 t 1)"
    check_true "4: ... and cosid_health() says why" \
        "$(qd "$C" 56332 -c "SELECT status = 'critical' AND detail LIKE '%cosid.fork%' FROM cosid_health() WHERE name = 'fork'")"
    check "4: a restart does not escape it (ZC009)" ZC009 \
        "$(stop_server "$C" fast; start_at "$C"; insert_all "$C" 56332 t 1)"
    touch "$base/stop"; wait "$pid"
    qd "$P" 56331 -c "COPY (SELECT id FROM t) TO STDOUT" > "$base/p4_ids"; chmod a+r "$base/p4_ids"
    stop_server "$P" fast; local stopped; stopped=$(now_utc)
    qd "$C" 56332 -c "SELECT cosid_fork_acknowledge('$stopped')" >/dev/null
    check "4: acknowledged in database postgres, the copy issues there" "" "$(insert_all "$C" 56332 t 200)"
    check "4: ... none of the original's ids" 0 "$(twice "$C" 56332 "$base/p4_ids")"
    # back to app: acknowledged in postgres only, app still refuses until acknowledged there
    qd "$C" 56332 -c "ALTER SYSTEM SET cosid.database = 'app'" >/dev/null
    stop_server "$C" fast; start_at "$C"
    check "4: back on database app, not acknowledged there (ZC009)" ZC009 "$(sqlstate_in "$C" 56332 "SELECT cosid_next('f')" app)"
    psql_at "$C" 56332 app -At -c "SELECT cosid_fork_acknowledge('$stopped')" >/dev/null
    check "4: acknowledged in app too, it issues there" "" "$(psql_at "$C" 56332 app -At -v VERBOSITY=sqlstate \
        -c "SET cosid.acquire_timeout = '200s'" -c "SELECT cosid_next('f')" 2>&1 | grep -oE 'ERROR:  [0-9A-Z]{5}' | cut -c9- || true)"
}

section_5() {  # restored => true: a declaration that belongs to the data directory too
    local P="$base/p5"
    start_server "$P" 56341 "cosid.ttl = '3s'"  # (the suite's lower cap: the cap is not what is tested here)
    qd "$P" 56341 -c "CREATE EXTENSION cosid" -c "SELECT * FROM cosid_store_settings(max_ttl => '3s', max_tolerance => '1s')" \
        -c "SELECT $LAYOUT" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), v int, src int)" \
        -c "CREATE DATABASE app" >/dev/null
    psql_at "$P" 56341 app -q -c "CREATE EXTENSION cosid" -c "SELECT $LAYOUT" >/dev/null 2>&1
    check "5: P issues" "" "$(insert_all "$P" 56341 t 32)"
    qd "$P" 56341 -c "SELECT cosid_store_follow_timeline(restored => true)" >/dev/null 2>&1
    check_true "5: restored => true is kept in the data directory (cosid.history), through a cosid.fork file" \
        "$(wait_until 20 bash -c "grep -q '^fork file-.*restored => true' '$P/data/cosid.history' && echo t || echo f")"
    qd "$P" 56341 -c "SELECT cosid_release('f', slot) FROM cosid_pool() WHERE namespace = 'f'" >/dev/null
    check "5: the store opens no new window (ZC009)" ZC009 "$(sqlstate_in "$P" 56341 "SELECT cosid_next('f')")"
    qd "$P" 56341 -c "SELECT cosid_fork_acknowledge()" >/dev/null
    check "5: acknowledged, it issues" "" "$(insert_all "$P" 56341 t 32)"
    stop_server "$P" fast; start_at "$P"
    check "5: after a restart it still issues: the acknowledgment covered the file's fork" "" "$(insert_all "$P" 56341 t 32)"
    qd "$P" 56341 -c "ALTER SYSTEM SET cosid.database = 'app'" >/dev/null
    stop_server "$P" fast; start_at "$P"
    check "5: switched to database app, refused there (ZC009)" ZC009 "$(sqlstate_in "$P" 56341 "SELECT cosid_next('f')" app)"
}

SECTIONS="${UNSEEN_SECTIONS:-1 2 3 4 5}"  # (one section alone: UNSEEN_SECTIONS=3)
for s in $SECTIONS; do
    ( trap - EXIT; FAIL=0; "section_$s"; exit $FAIL ) > "$base/section$s.log" 2>&1 &
    eval "pid$s=\$!"
done
for s in $SECTIONS; do
    eval "wait \$pid$s" || FAIL=1
    cat "$base/section$s.log"
done
exit $FAIL

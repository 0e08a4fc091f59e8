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
# Every node, named after its directory, made here: the sections run in subshells of their own,
# and cleanup stops them all.  (x3b is the restored store, started at x3's socket and port.)
for n in p1:56301 s1:56302 o1:56303 r2:56311 c2:56312 o2:56313 x3:56321 x3b:56321 a3:56322 b3:56323 p4:56331 c4:56332 p5:56341; do
    node_register "${n%:*}" "$base/${n%:*}" "${n#*:}"
done
# shellcheck disable=SC2046  # one argument per pid
cleanup() { touch "$base/stop" 2>/dev/null; kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate; }
trap cleanup EXIT
rm -rf "$base"; mkdir -p "$base"; chown "$PG_USER" "$base"
now_utc() { date -u '+%Y-%m-%d %H:%M:%S.%3N+00'; }
# copy_of FROM NODE MODE [conf lines...]: a base backup of node FROM as NODE, not started:
# MODE standby (streams, -R) or copy (a copied data directory).
copy_of() {
    local from=$1 node=$2 mode=$3 n; shift 3; n=$(node_dir "$node")
    rm -rf "$n"; mkdir -p "$n"; chown "$PG_USER" "$n"
    # shellcheck disable=SC2046  # none or one option
    as_pg "$PG_BIN/pg_basebackup" -h "$(node_dir "$from")" -p "$(node_port "$from")" -D "$n/data" -X stream -c fast \
        $([ "$mode" = standby ] && echo -R) >/dev/null
    node_attach "$node" "$n" "$(node_port "$node")" "$@"
}
# insert_all NODE TABLE N [DB]: N rows in one statement (waits for windows up to 200 s)
insert_all() {
    node_sql_db "$1" "${4:-postgres}" -v VERBOSITY=sqlstate -c "SET cosid.acquire_timeout = '200s'" \
        -c "INSERT INTO $2(v) SELECT g FROM generate_series(1, $3) g" 2>&1 | grep -oE 'ERROR:  [0-9A-Z]{5}' | head -1 | cut -c9- || true
}
# ahead_by NODE SECONDS: rows until the server's last id is SECONDS ahead of its clock (at
# most 120 s of trying); prints how far ahead it got, in seconds.  Each statement takes 10 s of
# ticks (160 ids), far more than a loaded machine's clock moves meanwhile.
ahead_by() {
    local deadline=$(( $(date +%s) + 120 )) a=0
    while [ "$a" -lt "$2" ] && [ "$(date +%s)" -lt "$deadline" ]; do
        insert_all "$1" t 160 >/dev/null
        a=$(node_sql "$1" -c "SELECT coalesce(floor(extract(epoch FROM max(cosid_timestamp(id, 'f')) - clock_timestamp())), 0)::int FROM t")
    done
    echo "$a"
}
sqlstate_in() { local out; out=$(node_sql_db "$1" "${3:-postgres}" -v VERBOSITY=verbose -c "$2" 2>&1 || true); sqlstate_of "$out"; }
# twice NODE FILE: how many ids of FILE (another server's) the server of NODE issued itself
# (its table t holds the rows it had when it was copied, too: those came from the other)
twice() {
    node_sql "$1" -c "DROP TABLE IF EXISTS other" -c "CREATE TABLE other (id bigint)" >/dev/null
    node_sql "$1" -c "COPY other FROM STDIN" < "$2"
    node_sql "$1" -c "SELECT count(*) FROM other JOIN t USING (id) WHERE t.src = $(node_port "$1")"
}
# acknowledged_pair SECTION ORIG ONLY FULL: ORIG's ids are kept and ORIG stops; both copies
# acknowledge the fork at that moment, ONLY first (its raise covers only the limits it saw: the
# other waits out the cap); each issues 600 ids, and the ids ORIG issued too are counted: some
# for ONLY (the hazard is real in this run), none for FULL.
acknowledged_pair() {
    local s=$1 orig=$2 only=$3 full=$4 ids="$base/$2_ids" stopped n
    node_sql "$orig" -c "COPY (SELECT id FROM t) TO STDOUT" > "$ids"; chmod a+r "$ids"
    node_stop "$orig" fast; stopped=$(now_utc)
    node_sql "$only" -c "SELECT cosid_fork_acknowledge('$stopped')" >/dev/null
    node_sql "$full" -c "SELECT cosid_fork_acknowledge('$stopped')" >/dev/null
    check "$s: the copy whose raise covers only the limits it saw issues 600 ids" "" "$(insert_all "$only" t 600)"
    n=$(twice "$only" "$ids")
    check_true "$s: ... and $n of them the original had issued (so the cap is what keeps them apart)" \
        "$( [ "$n" -gt 0 ] && echo t || echo f)"
    check "$s: the copy issues 600 ids after its acknowledgment" "" "$(insert_all "$full" t 600)"
    check "$s: ... none of them issued by the original too" 0 "$(twice "$full" "$ids")"
}
LAYOUT="cosid_namespace_create('f', slot_bits => 1, sequence_bits => 4, unit => 's', total_bits => 40, tolerance => '300 ms')"

section_1() {  # a fork acknowledged after the original raised its limits
    local P="$base/p1"
    node_up p1 "$P" 56301 "wal_level = replica" "max_wal_senders = 4" "cosid.ttl = '3s'" "cosid.preferred_slot = 0" \
        "cosid.test_reach_cap = '$CAP'"
    qp1 -c "CREATE EXTENSION cosid" -c "SELECT * FROM cosid_store_settings(max_ttl => '3s', max_tolerance => '1s')" \
        -c "SELECT $LAYOUT" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), v int, src int DEFAULT current_setting('port')::int)" >/dev/null
    check "1: P issues" "" "$(insert_all p1 t 32)"
    copy_of p1 s1 standby
    copy_of p1 o1 standby "cosid.test_reach_cap = '1ms'"
    node_start s1; node_start o1
    check_true "1: both standbys replayed P's store" "$(wait_until 60 qo1 -c "SELECT count(*) = 32 FROM t")"
    node_promote s1; node_promote o1
    check "1: the promoted copy refuses (ZC009)" ZC009 "$(insert_all s1 t 1)"
    # On P, as docs/failover.md allows: the limits raised, with no standby left to replay it.
    qp1 -c "SELECT * FROM cosid_store_settings(max_ttl => '$RAISED')" -c "ALTER SYSTEM SET cosid.ttl = '$RAISED'" \
        -c "SELECT pg_reload_conf()" >/dev/null
    local a; a=$(ahead_by p1 $AHEAD)
    check_true "1: P's ids run ahead of its clock under the raised limits ($a s)" "$( [ "$a" -ge $AHEAD ] && echo t || echo f)"
    acknowledged_pair 1 p1 o1 s1
}

section_2() {  # a static copy acknowledged after the original raised cosid.static_ahead
    local R="$base/r2" C="$base/c2" O="$base/o2"
    node_up r2 "$R" 56311 "cosid.static_slots = 'f:1'" "cosid.state_file = '$base/r2/cosid.state'" \
        "cosid.static_ahead = '10s'" "cosid.test_reach_cap = '$CAP'"
    qr2 -c "CREATE EXTENSION cosid" -c "SELECT * FROM cosid_store_settings(max_tolerance => '1s')" -c "SELECT $LAYOUT" \
        -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), v int, src int DEFAULT current_setting('port')::int)" >/dev/null
    check "2: R issues on its static slot" "" "$(insert_all r2 t 16)"
    copy_of r2 c2 copy "cosid.state_file = '$C/cosid.state'"
    copy_of r2 o2 copy "cosid.state_file = '$O/cosid.state'" "cosid.test_reach_cap = '1ms'"
    cp "$R/cosid.state" "$C/cosid.state"; cp "$R/cosid.state" "$O/cosid.state"; chown "$PG_USER" "$C/cosid.state" "$O/cosid.state"
    echo "a disk snapshot of R" | as_pg tee "$C/data/cosid.fork" "$O/data/cosid.fork" >/dev/null
    # The copies start now, beside R, so that O issues right after R stops: R's ids run 25 s
    # past its stop, O's raise covers 12 s of them, and on a loaded machine the two starts
    # after R's stop took the rest (O's ids then began past R's and none was R's).
    node_start c2; node_start o2
    check "2: the copy opens no static window (ZC009)" ZC009 "$(insert_all c2 t 1)"
    # R raises static_ahead (to the most it takes) after the copy, and issues ahead of its clock.
    qr2 -c "ALTER SYSTEM SET cosid.static_ahead = '$RAISED_STATIC'" -c "SELECT pg_reload_conf()" >/dev/null
    sleep 1  # (the reload reaches the keeper; the checks below do not depend on when)
    local a; a=$(ahead_by r2 $AHEAD_STATIC)
    check_true "2: R's ids run more than its first static_ahead ahead of its clock ($a s)" "$( [ "$a" -ge $AHEAD_STATIC ] && echo t || echo f)"
    acknowledged_pair 2 r2 o2 c2
}

section_3() {  # a store restored from a dump taken before max_ttl was raised
    local X="$base/x3" X2="$base/x3b"
    local dsn="host=$X port=56321 dbname=postgres user=postgres"
    node_up x3 "$X" 56321 "cosid.store_only = on" "cosid.test_reach_cap = '$CAP'"
    qx3 -c "CREATE EXTENSION cosid" -c "SELECT * FROM cosid_store_settings(max_ttl => '3s', max_tolerance => '1s')" \
        -c "SELECT $LAYOUT" >/dev/null
    local i p; for i in a b; do
        p=56322; [ $i = b ] && p=56323
        node_up "${i}3" "$base/${i}3" $p "cosid.store_dsn = '$dsn'" "cosid.ttl = '3s'" "cosid.preferred_slot = 0" \
            "cosid.owner_key = '${i}3'"
        node_sql "${i}3" -c "CREATE EXTENSION cosid" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), v int, src int DEFAULT current_setting('port')::int)" >/dev/null
    done
    node_stop b3  # B starts only after the restore
    as_pg "$PG_BIN/pg_dump" -h "$X" -p 56321 -Fc -f "$base/x3.dump" postgres
    qx3 -c "SELECT * FROM cosid_store_settings(max_ttl => '$RAISED')" >/dev/null
    qa3 -c "ALTER SYSTEM SET cosid.ttl = '$RAISED'" -c "SELECT pg_reload_conf()" >/dev/null
    local a; a=$(ahead_by a3 $AHEAD)
    check_true "3: A's ids run ahead of its clock under the raised max_ttl ($a s)" "$( [ "$a" -ge $AHEAD ] && echo t || echo f)"
    qa3 -c "COPY (SELECT id FROM t) TO STDOUT" > "$base/a3_ids"; chmod a+r "$base/a3_ids"
    # A stops (its keeper would take its slot back first), the store is lost, and its dump is
    # restored into a new server at its address.
    node_stop a3 fast
    node_stop x3 immediate
    # (node x3b, its socket at X: node x3 reaches it)
    # (UNSEEN_RESTORE_CAP=1ms: what cosid 1.6 raised by, the store's own limits: B issues A's ids)
    mkdir -p "$X2"; fresh_cluster "$X2/data"
    node_attach x3b "$X2" 56321 "listen_addresses = ''" "unix_socket_directories = '$X'" \
        "shared_preload_libraries = 'cosid'" "cosid.store_only = on" "fsync = off" \
        "cosid.test_reach_cap = '${UNSEEN_RESTORE_CAP:-$CAP}'"
    node_start x3b
    as_pg "$PG_BIN/pg_restore" -h "$X" -p 56321 -d postgres "$base/x3.dump" 2>"$base/x3.restore.err" || true
    check "3: pg_restore reports no error" 0 "$(grep -c 'error' "$base/x3.restore.err" || true)"
    node_start b3
    check "3: B issues 480 ids from the restored store" "" "$(insert_all b3 t 480)"
    check "3: ... none of them issued by A too" 0 "$(twice b3 "$base/a3_ids")"
}

section_4() {  # a fork recorded in one local database, the copy switched back to another
    local P="$base/p4" C="$base/c4"
    node_up p4 "$P" 56331 "wal_level = replica" "max_wal_senders = 4" "cosid.ttl = '3s'"
    qp4 -c "CREATE EXTENSION cosid" -c "SELECT * FROM cosid_store_settings(max_ttl => '3s', max_tolerance => '1s')" \
        -c "SELECT $LAYOUT" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), v int, src int DEFAULT current_setting('port')::int)" -c "CREATE DATABASE app" >/dev/null
    node_sql_db p4 app -c "CREATE EXTENSION cosid" -c "SELECT $LAYOUT" >/dev/null 2>&1
    check "4: P issues" "" "$(insert_all p4 t 32)"
    copy_of p4 c4 copy "cosid.database = 'app'"
    echo "a base backup of P" | as_pg tee "$C/data/cosid.fork" >/dev/null
    node_start c4
    check "4: the copy, on database app, refuses (ZC009)" ZC009 "$(sqlstate_in c4 "SELECT cosid_next('f')" app)"
    check_true "4: its keeper took the cosid.fork file" "$(wait_until 20 bash -c "[ -e '$C/data/cosid.fork' ] && echo f || echo t")"
    rm -f "$base/stop"
    ( trap - EXIT; while [ ! -e "$base/stop" ]; do insert_all p4 t 32 >/dev/null; done ) &
    local pid=$!
    # switched back to database postgres: a store that never heard of the fork
    qc4 -c "ALTER SYSTEM SET cosid.database = 'postgres'" >/dev/null
    node_stop c4 fast; node_start c4
    check "4: switched to database postgres, the copy refuses there too (ZC009)" ZC009 "$(insert_all c4 t 1)"
    check_true "4: ... and cosid_health() says why" \
        "$(qc4 -c "SELECT status = 'critical' AND detail LIKE '%cosid.fork%' FROM cosid_health() WHERE name = 'fork'")"
    check "4: a restart does not escape it (ZC009)" ZC009 \
        "$(node_stop c4 fast; node_start c4; insert_all c4 t 1)"
    touch "$base/stop"; wait "$pid"
    qp4 -c "COPY (SELECT id FROM t) TO STDOUT" > "$base/p4_ids"; chmod a+r "$base/p4_ids"
    node_stop p4 fast; local stopped; stopped=$(now_utc)
    qc4 -c "SELECT cosid_fork_acknowledge('$stopped')" >/dev/null
    check "4: acknowledged in database postgres, the copy issues there" "" "$(insert_all c4 t 200)"
    check "4: ... none of the original's ids" 0 "$(twice c4 "$base/p4_ids")"
    # back to app: acknowledged in postgres only, app still refuses until acknowledged there
    qc4 -c "ALTER SYSTEM SET cosid.database = 'app'" >/dev/null
    node_stop c4 fast; node_start c4
    check "4: back on database app, not acknowledged there (ZC009)" ZC009 "$(sqlstate_in c4 "SELECT cosid_next('f')" app)"
    node_sql_db c4 app -c "SELECT cosid_fork_acknowledge('$stopped')" >/dev/null
    check "4: acknowledged in app too, it issues there" "" "$(node_sql_db c4 app -v VERBOSITY=sqlstate \
        -c "SET cosid.acquire_timeout = '200s'" -c "SELECT cosid_next('f')" 2>&1 | grep -oE 'ERROR:  [0-9A-Z]{5}' | cut -c9- || true)"
}

section_5() {  # restored => true: a declaration that belongs to the data directory too
    local P="$base/p5"
    node_up p5 "$P" 56341 "cosid.ttl = '3s'"  # (the suite's lower cap: the cap is not what is tested here)
    qp5 -c "CREATE EXTENSION cosid" -c "SELECT * FROM cosid_store_settings(max_ttl => '3s', max_tolerance => '1s')" \
        -c "SELECT $LAYOUT" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), v int, src int)" \
        -c "CREATE DATABASE app" >/dev/null
    node_sql_db p5 app -c "CREATE EXTENSION cosid" -c "SELECT $LAYOUT" >/dev/null 2>&1
    check "5: P issues" "" "$(insert_all p5 t 32)"
    qp5 -c "SELECT cosid_store_follow_timeline(restored => true)" >/dev/null 2>&1
    check_true "5: restored => true is kept in the data directory (cosid.history), through a cosid.fork file" \
        "$(wait_until 20 bash -c "grep -q '^fork file-.*restored => true' '$P/data/cosid.history' && echo t || echo f")"
    qp5 -c "SELECT cosid_release('f', slot) FROM cosid_pool() WHERE namespace = 'f'" >/dev/null
    check "5: the store opens no new window (ZC009)" ZC009 "$(sqlstate_in p5 "SELECT cosid_next('f')")"
    qp5 -c "SELECT cosid_fork_acknowledge()" >/dev/null
    check "5: acknowledged, it issues" "" "$(insert_all p5 t 32)"
    node_stop p5 fast; node_start p5
    check "5: after a restart it still issues: the acknowledgment covered the file's fork" "" "$(insert_all p5 t 32)"
    qp5 -c "ALTER SYSTEM SET cosid.database = 'app'" >/dev/null
    node_stop p5 fast; node_start p5
    check "5: switched to database app, refused there (ZC009)" ZC009 "$(sqlstate_in p5 "SELECT cosid_next('f')" app)"
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

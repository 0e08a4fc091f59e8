#!/usr/bin/env bash
# pg_upgrade of a cluster that preloads cosid and holds its lease store, to another major:
# PostgreSQL 15 -> 17 and 16 -> 17 (copying), 16 -> 18 (--link), side by side; 15 -> 17 becomes
# 15 -> 15 where the pair cannot be upgraded at all (attver_gap below).  Before the upgrade: two namespaces
# ('default' and 'orders'), ids in tables with primary keys, a forced release and a clean
# shutdown (lease history: fences and next_floor).  Checks: pg_upgrade succeeds (the keeper
# must not start in the binary-upgrade servers: it held a connection to `postgres` and
# pg_restore's DROP DATABASE failed), the store comes over unchanged, the new cluster (another
# system identifier) issues ids strictly above every id issued before in each namespace,
# with no duplicate, after waiting for the raised floors (max_ttl 3 s + 2 x tolerance), and
# ALTER EXTENSION cosid UPDATE works on the upgraded catalog.  Beside them static_case: static
# slots, whose state file stays in the old data directory, across a 15 -> 15 --link upgrade.
#
#   bash test/e2e/pg_upgrade.sh WORKDIR
#
# Needs cosid installed into each major it uses (scripts/majors.sh installs it into 16 to 19,
# scripts/test.sh into 15).  Bin directories: COSID_PG_BIN (15, as in scripts/lib.sh) and
# COSID_PG16_BIN, COSID_PG17_BIN, COSID_PG18_BIN (default /opt/pg/VER/bin).  Without the builds
# of other majors (../shared/pg) it says so and upgrades 15 -> 15, which pg_upgrade also does.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
ROOT="${1:-/tmp/cosid-e2e}/pg_upgrade"
SHARED_PG="${COSID_SHARED_PG:-$COSID_ROOT/../shared/pg}"
CURRENT=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$COSID_ROOT/cosid.control")
bin_of() {  # bin_of MAJOR
    case "$1" in
        15) echo "$PG_BIN" ;;
        *) local var="COSID_PG$1_BIN"; echo "${!var:-/opt/pg/$1/bin}" ;;
    esac
}
has_cosid() {  # has_cosid BIN: a server and this tree's cosid installed into it
    [ -x "$1/postgres" ] && [ -f "$("$1/pg_config" --pkglibdir)/cosid.so" ] &&
        grep -q "^default_version = '$CURRENT'" "$("$1/pg_config" --sharedir)/extension/cosid.control"
}

# A case's servers are nodes (test/lib/node.sh) of its own subshell: o the old cluster (qo),
# n the new one (qn), b a standby (qb), each of its major's bin directory; stopped at exit
# whatever happened.
cleanup() { node_stop_all immediate; }
trap cleanup EXIT

# Debian's 15.20 stamps every new column with an attribute option of its own, pg_attver,
# which the builds of 16.4 to 19beta1 do not know: pg_restore into them fails on the first
# table ('unrecognized parameter "pg_attver"'), whatever the table, cosid or not.
# attver_gap: prints the new major's error when the pair (nodes o and n) has that gap.
attver_gap() {
    local opt err
    node_start o -o "-c shared_preload_libraries=''"
    opt=$(qo -c "BEGIN" -c "CREATE TABLE probe (a int)" \
              -c "SELECT array_to_string(attoptions, ', ') FROM pg_attribute WHERE attrelid = 'probe'::regclass AND attnum = 1" \
              -c "ROLLBACK")
    node_stop o
    case "$opt" in *pg_attver*) ;; *) return 1 ;; esac
    node_start n -o "-c shared_preload_libraries=''"
    err=$(qn -c "BEGIN" \
              -c "CREATE TABLE probe (a int)" -c "ALTER TABLE probe ALTER COLUMN a SET ($opt)" -c "ROLLBACK" 2>&1 >/dev/null || true)
    node_stop n
    [ -n "$err" ] && echo "$err"
}

# init_pair OBIN NBIN D SETTING...: the old and the new cluster under D, alike (same locale,
# encoding and data checksums, which pg_upgrade requires; 18 turns checksums on by default),
# the new one with the old one's settings, as an operator copies postgresql.conf: nodes o and
# n (each with its socket in its own directory; pg_upgrade's servers have theirs in D).
init_pair() {
    local obin=$1 nbin=$2 D=$3 i1 i2; shift 3
    rm -rf "$D"; mkdir -p "$D/old" "$D/new"; chown -R "$PG_USER" "$D"
    as_pg "$obin/initdb" -D "$D/old/data" -A trust -U postgres -E UTF8 --locale=C -k >/dev/null & i1=$!
    as_pg "$nbin/initdb" -D "$D/new/data" -A trust -U postgres -E UTF8 --locale=C -k >/dev/null & i2=$!
    wait "$i1"; wait "$i2"
    local conf=("listen_addresses = ''" "shared_preload_libraries = 'cosid'"
                "max_connections = 30" "fsync = off" "cosid.test_reach_cap = '1ms'" "$@")
    PG_BIN=$obin node_attach o "$D/old" "$OPORT" "${conf[@]}"
    PG_BIN=$nbin node_attach n "$D/new" "$NPORT" "${conf[@]}"
}

# refused_as_fork WHAT TABLE REASON: an INSERT into TABLE on the new cluster (node n) fails
# with ZC009, and the store's fork_pending starts with REASON.
refused_as_fork() {
    local out
    out=$(qn -v VERBOSITY=verbose -c "INSERT INTO $2(phase) VALUES ('refused')" 2>&1 || true)
    check "$name: $1" "ZC009|t" \
        "$(sqlstate_of "$out")|$(qn \
              -c "SELECT fork_pending LIKE '$3%' FROM cosid.store_state")"
}

# upgrade_case OLD NEW MODE FROM: a cluster of major OLD at extension version FROM,
# upgraded with pg_upgrade (MODE copy or link) to major NEW.
upgrade_case() {
    local old=$1 new=$2 mode=$3 from=$4
    local obin nbin D
    obin=$(bin_of "$old"); nbin=$(bin_of "$new")
    D="$ROOT/$old-$new"
    local name="$old -> $new (${mode}, cosid $from)"
    echo "# pg_upgrade $name"
    # acquire_timeout above max_ttl + 2 x tolerance: the first acquires after the upgrade wait that long
    init_pair "$obin" "$nbin" "$D" "cosid.ttl = '2s'" "cosid.acquire_timeout = '15s'"

    local gap
    if [ "$old" != "$new" ] && gap=$(attver_gap); then
        echo "# skipped $name: $old stamps every new column with the attribute option pg_attver, which $new refuses ($gap): pg_upgrade fails on the first table, with or without cosid"
        return 3
    fi

    node_start o
    # 'default' keeps CREATE EXTENSION's tolerance (1 s), 'orders' has 200 ms: the waits after
    # the upgrade differ by their 2 x tolerance.
    qo -c "CREATE EXTENSION cosid VERSION '$from'" \
       -c "SELECT cosid_store_settings(max_ttl => '3s')" \
       -c "SELECT cosid_namespace_create('orders', slot_bits => 4, tolerance => '200 ms')" \
       -c "CREATE TABLE t_default (id bigint PRIMARY KEY DEFAULT cosid_next(), phase text)" \
       -c "CREATE TABLE t_orders (id bigint PRIMARY KEY DEFAULT cosid_next('orders'), phase text)" >/dev/null
    insert_rows() {  # insert_rows PSQLFUNC PHASE: 3 backends at once, 1000 rows per table each
        local pids=() c rc=0
        for c in 1 2 3; do
            "$1" -c "INSERT INTO t_default(phase) SELECT '$2' FROM generate_series(1, 1000)" \
                 -c "INSERT INTO t_orders(phase) SELECT '$2' FROM generate_series(1, 1000)" > /dev/null &
            pids+=($!)
        done
        for c in "${pids[@]}"; do wait "$c" || rc=1; done
        return $rc
    }
    insert_rows qo before
    # Lease history: a forced release hands each slot's last timestamp on (next_floor) and
    # the next acquire raises its fence; the clean stop releases the leases again.
    qo -c "SELECT cosid_release(namespace, slot) FROM cosid_pool() WHERE state = 'active'" >/dev/null
    insert_rows qo before
    node_stop o
    # The store as the shutdown left it, read without the library (no keeper: nothing writes).
    node_start o -o "-c shared_preload_libraries=''"
    local store_before ids_before history failovers_before
    # A lease the old server still held at its stop (its store unreachable then): taken here
    # in its name, it must be freed by the new cluster's first store call.
    [ "$from" = "$CURRENT" ] && qo -c "SELECT slot FROM cosid.acquire('orders', 'the old server', (SELECT issuer_incarnation FROM cosid.store_state), 2000)" >/dev/null
    store_before=$(qo -c "SELECT n::text FROM cosid.namespace n ORDER BY name" \
                      -c "SELECT l::text FROM cosid.lease l ORDER BY namespace, slot")
    failovers_before=$(qo -c "SELECT max(failovers) FROM cosid.store_state")
    ids_before=$(qo -c "SELECT 'default:' || count(*) || ':' || max(id) FROM t_default" \
                    -c "SELECT 'orders:' || count(*) || ':' || max(id) FROM t_orders")
    history=$(qo -c "SELECT string_agg(namespace || ':' || slot || ':' || fence || ':' || next_floor, ',')
                     FROM cosid.lease WHERE fence > 0")
    node_stop o
    check "$name: before the upgrade, 6000 ids per namespace and slots with a lease history" "2|t" \
        "$(grep -c ':6000:' <<<"$ids_before" || true)|$([ -n "$history" ] && echo t)"

    # pg_upgrade, as postgres, from a directory it can write; logs kept (--retain) to be read.
    local started=$SECONDS link=()
    [ "$mode" = link ] && link=(--link)
    if ! (cd "$D" && as_pg "$nbin/pg_upgrade" -b "$obin" -B "$nbin" -d "$D/old/data" -D "$D/new/data" \
              -p "$OPORT" -P "$NPORT" -s "$D" -U postgres --retain --no-sync "${link[@]}") > "$D/pg_upgrade.out" 2>&1; then
        echo "not ok - $name: pg_upgrade failed:"
        tail -12 "$D/pg_upgrade.out" | sed 's/^/#   /'
        grep -h 'ERROR' "$D"/new/data/pg_upgrade_output.d/*/log/*.log 2>/dev/null | head -5 | sed 's/^/#   /'
        FAIL=1; return
    fi
    echo "ok - $name: pg_upgrade succeeded in $((SECONDS - started)) s"
    local slog
    slog=$(cat "$D"/new/data/pg_upgrade_output.d/*/log/pg_upgrade_server.log 2>/dev/null || true)
    local starts
    starts=$(grep -c 'database system is ready to accept connections' <<<"$slog" || true)
    check "$name: no keeper in pg_upgrade's $starts server starts (binary-upgrade mode), each of which said so" "0|$starts" \
        "$(grep -c 'cosid keeper started' <<<"$slog" || true)|$(grep -c 'cosid: binary-upgrade mode' <<<"$slog" || true)"

    # The store came over as it was: namespaces and every lease row, read without the library.
    node_start n -o "-c shared_preload_libraries=''"
    check "$name: namespaces and every lease row (fence, floor, ceiling, next_floor) unchanged by pg_upgrade" "" \
        "$(diff <(echo "$store_before") <(qn -c "SELECT n::text FROM cosid.namespace n ORDER BY name" \
                                             -c "SELECT l::text FROM cosid.lease l ORDER BY namespace, slot") | head -5)"
    node_stop n

    # The new cluster as an operator starts it: another system identifier, so the first store
    # call frees every lease and raises the floors; the first ids wait for them.  (From 1.6 on
    # its binary-upgrade server names it in a cosid.upgraded file: the old cluster's record of
    # a server issuing from its store is then not taken for a copy of that server, a fork.)
    node_start n
    local t0 first_orders first_default
    t0=$(now_ms)
    [ "$from" = "$CURRENT" ] &&
        check_true "$name: pg_upgrade's binary-upgrade server left a cosid.upgraded file naming the new cluster" \
            "$(qn -c "SELECT pg_read_file('cosid.upgraded') LIKE 'system_identifier ' || system_identifier || E'\n%' FROM pg_control_system()")"
    check_true "$name: the first id in 'orders' after the upgrade" "$(wait_until 30 qn -c \
        "WITH i AS (INSERT INTO t_orders(phase) VALUES ('after') RETURNING 1) SELECT count(*) = 1 FROM i")"
    first_orders=$(( $(now_ms) - t0 ))
    check_true "$name: the first id in 'default' after the upgrade" "$(wait_until 30 qn -c \
        "WITH i AS (INSERT INTO t_default(phase) VALUES ('after') RETURNING 1) SELECT count(*) = 1 FROM i")"
    first_default=$(( $(now_ms) - t0 ))
    echo "# first id after the upgrade: 'orders' (tolerance 200 ms) after $first_orders ms, 'default' (1 s) after $first_default ms"
    if [ "$from" = "$CURRENT" ]; then
        # pg_upgrade read the old cluster on the timeline its store last wrote on: nothing was
        # lost, the floors stay and the first ids need no wait for a raise.
        check "$name: the store kept its floors (pg_upgrade read the old cluster on its store's timeline)" "1|0" \
            "$(grep -c "pg_upgrade's new cluster .*nothing lost.*floors left alone, 1 leases of the old server freed" "$D/new/server.log" || true)|$(grep -c 'next_floor raised' "$D/new/server.log" || true)"
    else
        # Raises committed, from the store's own count: the log also shows an attempt a loaded
        # machine's statement timeout rolled back, which the next store call makes again.
        echo "#   $name: raises in the new server's log (committed or rolled back): $(grep -c 'next_floor raised' "$D/new/server.log" || true)"
        check "$name: a catalog older than $CURRENT: the store raised its floors once" "$((failovers_before + 1))" \
            "$(qn -c "SELECT max(failovers) FROM cosid.store_state")"
    fi
    insert_rows qn after && echo "ok - $name: 3 backends insert 1000 rows per namespace each" ||
        { echo "not ok - $name: inserts after the upgrade failed"; FAIL=1; }
    # The catalog pg_upgrade carried is still the old version's: the update works on it.
    qn -c "ALTER EXTENSION cosid UPDATE" >/dev/null 2>"$D/update.err" || true
    check "$name: ALTER EXTENSION cosid UPDATE from $from to $CURRENT" "$CURRENT|" \
        "$(qn -c "SELECT extversion FROM pg_extension WHERE extname = 'cosid'")|$(grep -v NOTICE "$D/update.err" || true)"
    insert_rows qn updated && echo "ok - $name: inserts after the update" ||
        { echo "not ok - $name: inserts after the update failed"; FAIL=1; }

    local ns t max_before
    for ns in default orders; do
        t="t_$ns"
        max_before=$(grep "^$ns:" <<<"$ids_before" | cut -d: -f3)
        check_true "$name, $ns: every id issued after the upgrade is above every id before it (max before $max_before)" \
            "$(qn -c "SELECT min(id) FILTER (WHERE phase <> 'before') > $max_before
                             AND max(id) FILTER (WHERE phase = 'before') = $max_before FROM $t")"
        check "$name, $ns: rows before, after, after the update; no duplicate" "6000|3001|3000|0" \
            "$(qn -c "SELECT count(*) FILTER (WHERE phase = 'before') || '|' || count(*) FILTER (WHERE phase = 'after')
                             || '|' || count(*) FILTER (WHERE phase = 'updated') || '|' || count(*) - count(DISTINCT id) FROM $t")"
    done
    check_true "$name: the lease history kept: every slot's fence and next_floor at or above its value before" \
        "$(qn -c "WITH b AS (SELECT split_part(x, ':', 1) AS ns, split_part(x, ':', 2)::int AS slot,
                                    split_part(x, ':', 3)::bigint AS fence, split_part(x, ':', 4)::bigint AS next_floor
                             FROM unnest(string_to_array('$history', ',')) x)
                  SELECT count(*) > 0 AND bool_and(l.fence >= b.fence AND l.next_floor >= b.next_floor)
                  FROM b JOIN cosid.lease l ON l.namespace = b.ns AND l.slot = b.slot")"
    check "$name: namespaces after the upgrade" "default,orders" \
        "$(qn -c "SELECT string_agg(name, ',' ORDER BY name) FROM cosid.namespace")"
    assert_store_verified "$D/new" "$NPORT" postgres "$name: the upgraded store"
    node_stop n

    # The same old data directory (copy mode) upgraded a second time, into another new cluster,
    # after the first one issued: a second history from the same store.  pg_upgrade's read
    # finds its own mark of the first run and declares a fork: ZC009 until acknowledged.
    # (Before, the second new cluster kept the floors below the first one's windows.)
    if [ "$mode" = copy ] && [ "$from" = "$CURRENT" ]; then
        as_pg "$nbin/initdb" -D "$D/new2/data" -A trust -U postgres -E UTF8 --locale=C -k >/dev/null
        cp "$D/new/data/postgresql.conf" "$D/new2/data/postgresql.conf"; chown "$PG_USER" "$D/new2/data/postgresql.conf"
        if upgrade_from "$D/old/data" "$OPORT" "$D/new2/data"; then
            PG_BIN=$nbin node_attach n "$D/new2" "$NPORT"  # node n: now this second new cluster
            node_start n
            refused_as_fork "the old directory upgraded again grants nothing (ZC009): the first new cluster issued" \
                t_orders "A cosid.fork file in the data directory pg_upgrade read: pg_upgrade copied"
            node_stop n
        fi
    fi
    # The rollback pg_upgrade's docs describe for copy mode: the old cluster started again,
    # after the new one issued from the same store history.  pg_dump's read of it in
    # binary-upgrade mode left a cosid.fork file: it grants nothing until acknowledged.
    [ "$mode" = copy ] || return 0
    check_true "$name: pg_upgrade's read of the old cluster left a cosid.fork file in it" \
        "$([ -f "$D/old/data/cosid.fork" ] && echo t || echo f)"
    node_start o
    local out
    out=$(qo -v VERBOSITY=verbose -c "INSERT INTO t_orders(phase) VALUES ('rollback')" 2>&1 || true)
    check "$name: the old cluster started again grants nothing (ZC009) while the new one may issue" ZC009 \
        "$(sqlstate_of "$out")"
    node_stop o
}

# static_case MAJOR: static slots across pg_upgrade (MAJOR -> MAJOR, --link).  Their state
# file stays in the old data directory; the keeper also records each window's ceiling in
# cosid.static_ceiling (cosid 1.5), which pg_upgrade carries with the data.  The old cluster
# issues 2000 ids on static slot 5; the new one starts with its clock put 5 s before the
# largest of them (cosid.clock_offset), as a clock that moved back, or an old cluster that
# borrowed ahead of its clock, leaves it.  Before cosid 1.5 the new keeper started the slot
# at that clock, and its ids repeated the old ones; now it starts above the recorded ceiling.
static_case() {
    local bin D name="$1 -> $1 (link, static slots)"
    bin=$(bin_of "$1"); D="$ROOT/static-$1"
    echo "# pg_upgrade $name"
    init_pair "$bin" "$bin" "$D" "cosid.static_slots = 'st:5'" "cosid.acquire_timeout = '30s'"
    node_start o
    qo -c "CREATE EXTENSION cosid" \
       -c "SELECT cosid_namespace_create('st', slot_bits => 4, sequence_bits => 8, unit => 's', total_bits => 55)" \
       -c "CREATE TABLE t_static (id bigint PRIMARY KEY DEFAULT cosid_next('st'), phase text)" >/dev/null
    local c pids=()
    for c in 1 2 3 4; do qo -c "INSERT INTO t_static(phase) SELECT 'before' FROM generate_series(1, 500)" >/dev/null & pids+=($!); done
    for c in "${pids[@]}"; do wait "$c"; done
    local before
    before=$(qo -c "SELECT count(*) || '|' || max(id) || '|' || (extract(epoch FROM cosid_timestamp(max(id), 'st')) * 1000)::bigint
                        || '|' || (SELECT count(*) FROM cosid.static_ceiling WHERE namespace = 'st' AND slot = 5
                                      AND ceiling_ms >= extract(epoch FROM cosid_timestamp(max(id), 'st')) * 1000)
                    FROM t_static")
    node_stop o
    check "$name: 2000 static ids before, their ceiling recorded in cosid.static_ceiling" "2000|1" \
        "$(cut -d'|' -f1,4 <<<"$before")"
    local max_id max_ms
    max_id=$(cut -d'|' -f2 <<<"$before"); max_ms=$(cut -d'|' -f3 <<<"$before")
    if ! (cd "$D" && as_pg "$bin/pg_upgrade" -b "$bin" -B "$bin" -d "$D/old/data" -D "$D/new/data" \
              -p "$OPORT" -P "$NPORT" -s "$D" -U postgres --no-sync --link) > "$D/pg_upgrade.out" 2>&1; then
        echo "not ok - $name: pg_upgrade failed:"; tail -12 "$D/pg_upgrade.out" | sed 's/^/#   /'
        FAIL=1; return
    fi
    check "$name: no state file in the new data directory" "absent" \
        "$([ -e "$D/new/data/cosid.state" ] && echo present || echo absent)"
    echo "cosid.clock_offset = $(( max_ms - 5000 - $(now_ms) ))" >> "$D/new/data/postgresql.conf"
    node_start n
    pids=()
    for c in 1 2 3 4; do
        qn -c "INSERT INTO t_static(phase) SELECT 'after' FROM generate_series(1, 500)" >/dev/null 2>>"$D/after.err" & pids+=($!)
    done
    for c in "${pids[@]}"; do wait "$c" || true; done
    check "$name: 2000 more ids, every one above every id before the upgrade (max $max_id), none refused" "2000|true|" \
        "$(qn -c "SELECT count(*) || '|' || coalesce(min(id) > $max_id, false) FROM t_static WHERE phase = 'after'")|$(head -2 "$D/after.err" | tr '\n' ' ')"
    check "$name: the new server's log says where slot 5 started" "1" \
        "$(grep -c 'starting above .*, recorded by another cluster in cosid.static_ceiling' "$D/new/server.log" || true)"
    check_true "$name: the new cluster recorded a row of its own, above every id, beside the old one's" \
        "$(qn -c "SELECT count(*) = 2 AND bool_or(c.system_identifier = s.system_identifier
                         AND c.ceiling_ms >= (SELECT max(extract(epoch FROM cosid_timestamp(id, 'st')) * 1000) FROM t_static))
                  FROM cosid.static_ceiling c, pg_control_system() s WHERE c.namespace = 'st' AND c.slot = 5")"
    assert_store_verified "$D/new" "$NPORT" postgres "$name: the upgraded store (static windows of both clusters)"
    node_stop n
}

# fault_case_setup KIND OLD NEW SETTING...: for the fault cases below: obin, nbin, D and the
# pair under D (the old cluster not started), qo/qn for them; returns 3 on the pg_attver gap.
fault_case_setup() {
    local kind=$1 old=$2 new=$3; shift 3
    obin=$(bin_of "$old"); nbin=$(bin_of "$new")
    D="$ROOT/$kind-$old-$new"
    echo "# pg_upgrade $name"
    init_pair "$obin" "$nbin" "$D" "$@"
    local gap
    if [ "$old" != "$new" ] && gap=$(attver_gap); then
        echo "# skipped $name: the pg_attver gap ($gap)"; return 3
    fi
}
# upgrade_from OLDDATA OLDPORT [NEWDATA]: pg_upgrade (copy mode) of OLDDATA into NEWDATA
# ($D/new/data); on failure its last lines and "not ok".
upgrade_from() {
    local target="${3:-$D/new/data}" out
    out="$D/pg_upgrade-$(basename "$(dirname "$target")").out"
    if ! (cd "$D" && as_pg "$nbin/pg_upgrade" -b "$obin" -B "$nbin" -d "$1" -D "$target" \
              -p "$2" -P "$NPORT" -s "$D" -U postgres --no-sync) > "$out" 2>&1; then
        echo "not ok - $name: pg_upgrade into $target failed:"; tail -12 "$out" | sed 's/^/#   /'
        FAIL=1; return 1
    fi
}

# lost_tail_case OLD NEW: pg_upgrade of a store that lost a tail.  A standby of the issuing
# server is promoted without cosid loaded (no store call on its new timeline), the original
# goes on issuing (the standby never sees those leases), the standby stops cleanly and is
# upgraded.  Its store last wrote on the old timeline, pg_upgrade reads it on the new one: a
# copy of a server that issued from its store, so a fork (ZC009) until acknowledged, which
# then raises the floors above everything the original granted.  (Keeping the floors here
# gave every new window a floor below the original's last ceilings, and its ids repeated the
# original's.  A store server of its own, nobody issuing from it, raises at once: the model
# checker's upgrade-note tooth.)
lost_tail_case() {
    local obin nbin D name="$1 -> $2 (copy, a promoted standby that lost a tail)" BPORT=$((OPORT + 100))
    fault_case_setup lost-tail "$1" "$2" "cosid.ttl = '2s'" "cosid.acquire_timeout = '15s'" || return
    node_start o
    qo -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_ttl => '3s')" \
       -c "SELECT cosid_namespace_create('orders', slot_bits => 4, tolerance => '200 ms')" \
       -c "CREATE TABLE t_orders (id bigint PRIMARY KEY DEFAULT cosid_next('orders'), phase text)" \
       -c "INSERT INTO t_orders(phase) SELECT 'before' FROM generate_series(1, 1000)" >/dev/null
    as_pg "$obin/pg_basebackup" -h "$D/old" -p "$OPORT" -U postgres -D "$D/standby/data" -R -X stream >/dev/null
    PG_BIN=$obin node_attach b "$D/standby" "$BPORT"
    node_start b -o "-c shared_preload_libraries=''"
    qo -c "INSERT INTO t_orders(phase) SELECT 'seen' FROM generate_series(1, 1000)" >/dev/null
    check_true "$name: the standby replayed the original's first rows" \
        "$(wait_until 30 qb -c "SELECT count(*) = 2000 FROM t_orders")"
    node_promote b
    # The tail the standby never sees: the original goes on, its keeper renewing and
    # acquiring, windows past anything the standby's store knows.
    local i
    for i in 1 2 3 4 5 6; do
        qo -c "INSERT INTO t_orders(phase) SELECT 'tail' FROM generate_series(1, 500)" >/dev/null
        sleep 0.5
    done
    local tail_ceilings
    tail_ceilings=$(qo -c "SELECT string_agg(slot || ':' || greatest(ceiling, next_floor), ',') FROM cosid.lease WHERE namespace = 'orders'")
    qo -c "SELECT id FROM t_orders WHERE phase = 'tail'" > "$D/tail.ids"
    node_stop o
    node_stop b
    check "$name: the standby's store last wrote on timeline 1, its server is on timeline 2" "1|2" \
        "$(node_start b -o "-c shared_preload_libraries=''"
           qb -c "SELECT (SELECT timeline FROM cosid.store_state) || '|' || cosid._timeline()"
           node_stop b)"
    upgrade_from "$D/standby/data" "$BPORT" || return
    node_start n
    # The standby was a copy of a server issuing from its own store: pg_upgrade's read of it
    # declared the fork, and the new cluster grants nothing until the origin is known to have
    # stopped, as the promoted standby itself would.
    refused_as_fork "the new cluster grants nothing while the original may issue (ZC009), and says why" t_orders \
        "pg_upgrade read a copy of a server that was issuing ids from this store on timeline 1; the copy ran on timeline 2"
    qn -c "SELECT cosid_fork_acknowledge()" >/dev/null
    check_true "$name: the first id after the acknowledgement" "$(wait_until 30 qn -c \
        "WITH i AS (INSERT INTO t_orders(phase) VALUES ('after') RETURNING 1) SELECT count(*) = 1 FROM i")"
    local c pids=()
    for c in 1 2 3; do qn -c "INSERT INTO t_orders(phase) SELECT 'after' FROM generate_series(1, 1000)" >/dev/null & pids+=($!); done
    for c in "${pids[@]}"; do wait "$c" || FAIL=1; done
    check "$name: the acknowledgement raised the store's floors" "1" \
        "$(grep -c 'a fork acknowledged: its origin stopped issuing: .*next_floor raised' "$D/new/server.log" || true)"
    check "$name: every window granted after the upgrade starts above the original's last ceiling on its slot" "0" \
        "$(qn -c "WITH t AS (SELECT split_part(x, ':', 1)::int AS slot, split_part(x, ':', 2)::bigint AS ceiling
                             FROM unnest(string_to_array('$tail_ceilings', ',')) x)
                  SELECT count(*) FROM cosid.lease l JOIN t USING (slot)
                   WHERE l.namespace = 'orders' AND l.owner_key IS NOT NULL AND l.floor < t.ceiling")"
    check "$name: no id after the upgrade repeats one of the original's tail ($(wc -l < "$D/tail.ids") ids)" "3001|0" \
        "$(qn -c "CREATE TEMP TABLE tail (id bigint)" -c "\\copy tail FROM '$D/tail.ids'" \
              -c "SELECT count(*) || '|' || count(*) FILTER (WHERE id IN (SELECT id FROM tail)) FROM t_orders WHERE phase = 'after'")"
    # (its history lacks the original's tail: no overlap among what it has)
    assert_store_verified "$D/new" "$NPORT" postgres "$name: the upgraded store"
    node_stop n
}

# marked_copy_case OLD NEW: a copy of an issuing server's data directory, marked with a
# cosid.fork file as the docs say, upgraded before its keeper ever ran there (so the store
# never recorded the mark) while the original issues again.  pg_upgrade's read declares the
# mark in the store: the new cluster grants nothing (ZC009).  (Before, it kept the floors
# below the original's newer windows: 6,894 ids twice in a review.)
marked_copy_case() {
    local obin nbin D name="$1 -> $2 (copy, a cosid.fork-marked copy of an issuing server)" CPORT=$((OPORT + 100))
    fault_case_setup marked-copy "$1" "$2" "cosid.ttl = '2s'" "cosid.acquire_timeout = '5s'" || return
    node_start o
    qo -c "CREATE EXTENSION cosid" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), phase text)" \
       -c "INSERT INTO t(phase) SELECT 'before' FROM generate_series(1, 500)" >/dev/null
    node_stop o
    cp -a "$D/old/data" "$D/copy"; mkdir -p "$D/copydir"; mv "$D/copy" "$D/copydir/data"; chown -R "$PG_USER" "$D/copydir"
    echo "a copy of the issuing server's data directory, made while it was stopped" > "$D/copydir/data/cosid.fork"
    # made before pg_upgrade starts the copy: a mark counts only when older than the server's
    # start, to the second, and on an idle machine the start can come within the same second
    touch -d "@$(( $(date +%s) - 2 ))" "$D/copydir/data/cosid.fork"
    chown "$PG_USER" "$D/copydir/data/cosid.fork"
    node_start o
    qo -c "INSERT INTO t(phase) SELECT 'original' FROM generate_series(1, 500)" >/dev/null
    node_stop o
    upgrade_from "$D/copydir/data" "$CPORT" || return
    node_start n
    refused_as_fork "the new cluster grants nothing (ZC009): the copy's mark was declared by pg_upgrade's read" t \
        "A cosid.fork file in the data directory pg_upgrade read: a copy of the issuing server"
    assert_store_verified "$D/new" "$NPORT" postgres "$name: the upgraded store (the original's windows until the copy)"
    node_stop n
}

# stale_note_case OLD NEW: the store carries a note of pg_upgrade's read from another run (one
# that failed, replayed by a standby that was promoted afterwards), and the run that upgrades
# it reads a server without cosid loaded: no note of its own.  The new cluster must raise.
stale_note_case() {
    local obin nbin D name="$1 -> $2 (copy, a note from another run, cosid not loaded in the old cluster)"
    fault_case_setup stale-note "$1" "$2" "cosid.ttl = '2s'" "cosid.acquire_timeout = '20s'" || return
    node_start o
    qo -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_ttl => '3s')" \
       -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), phase text)" \
       -c "INSERT INTO t(phase) SELECT 'before' FROM generate_series(1, 500)" >/dev/null
    node_stop o
    node_start o -o "-c shared_preload_libraries=''"
    qo -c "UPDATE cosid.store_state s SET upgrade_origin_system = c.system_identifier, upgrade_origin_timeline = s.timeline,
                  upgrade_read_id = repeat('a', 32) FROM pg_control_system() c" >/dev/null
    node_stop o
    echo "shared_preload_libraries = ''" >> "$D/old/data/postgresql.conf"
    upgrade_from "$D/old/data" "$OPORT" || return
    node_start n
    check_true "$name: the first id after the upgrade" "$(wait_until 30 qn -c \
        "WITH i AS (INSERT INTO t(phase) VALUES ('after') RETURNING 1) SELECT count(*) = 1 FROM i")"
    check "$name: the store raised its floors: the note was not of this run" "1|1" \
        "$(grep -c 'next_floor raised' "$D/new/server.log" || true)|$(grep -c 'with no note of its own' "$D/new/server.log" || true)"
    assert_store_verified "$D/new" "$NPORT" postgres "$name: the upgraded store"
    node_stop n
}

# spawn N OLD NEW MODE FROM: the case in the background, with ports of its own and its output
# in a file (the cases mostly wait: for servers, pg_upgrade's steps and the raised floors).
# A 15 -> NEW that the pg_attver gap rules out becomes 15 -> 15.
PIDS=(); LOGS=()
spawn() {
    local n=$1; shift
    (
        trap cleanup EXIT
        OPORT=$((55490 + 2 * n)); NPORT=$((OPORT + 1))
        rc=0
        if [ "$2" = static ]; then static_case "$1"; exit "$FAIL"; fi
        if [ "$3" = marked-copy ] || [ "$3" = stale-note ]; then
            f="${3//-/_}_case"
            "$f" "$1" "$2" || rc=$?
            [ "$rc" = 3 ] && "$f" 15 15
            exit "$FAIL"
        fi
        if [ "$3" = lost-tail ]; then
            lost_tail_case "$1" "$2" || rc=$?
            [ "$rc" = 3 ] && lost_tail_case 15 15
            exit "$FAIL"
        fi
        upgrade_case "$@" || rc=$?
        if [ "$rc" = 3 ] && [ "$1" = 15 ]; then
            echo "# so 15 -> 15 instead: Debian's binaries on both sides, the same binary-upgrade servers and another cluster"
            upgrade_case 15 15 "$3" "$4"
        fi
        exit "$FAIL"
    ) > "$ROOT/case$n.log" 2>&1 &
    PIDS+=($!); LOGS+=("$ROOT/case$n.log")
}
cases=("15 17 copy 1.2" "16 17 copy 1.0" "16 18 link 1.1" "17 18 copy $CURRENT" "17 19 link $CURRENT" "15 static"
       "17 18 lost-tail" "17 18 marked-copy" "17 18 stale-note")
if [ ! -d "$SHARED_PG" ]; then
    echo "# no builds of other PostgreSQL majors in $SHARED_PG: pg_upgrade 15 -> 15 only"
    cases=("15 15 copy 1.2" "15 15 link $CURRENT" "15 static" "15 15 lost-tail" "15 15 marked-copy" "15 15 stale-note")
fi
started=$SECONDS
mkdir -p "$ROOT"
n=0
for c in "${cases[@]}"; do
    set -- $c
    if [ "$2" = static ] || { [ ! -d "$SHARED_PG" ] && [ "$1" = "$2" ]; }; then :
    elif [ ! -e "$SHARED_PG/pg-$2-bookworm-x86_64.tar.gz" ] ||
         { [ "$1" != 15 ] && [ ! -e "$SHARED_PG/pg-$1-bookworm-x86_64.tar.gz" ]; }; then
        echo "# skipped $1 -> $2: no build of it in $SHARED_PG"; continue
    fi
    if ! has_cosid "$(bin_of "$1")" || { [ "$2" != static ] && ! has_cosid "$(bin_of "$2")"; }; then
        echo "not ok - $1 -> $2: cosid $CURRENT is not installed in $(bin_of "$1") and $(bin_of "$2") (scripts/majors.sh installs it)"
        FAIL=1; continue
    fi
    spawn "$n" "$@"; n=$((n + 1))
done
for i in "${!PIDS[@]}"; do
    wait "${PIDS[$i]}" || FAIL=1
    cat "${LOGS[$i]}"
done
echo "# pg_upgrade.sh took $((SECONDS - started)) s"
exit $FAIL

#!/usr/bin/env bash
# A raise of the store's max_ttl that a failover loses, with floors ahead of the store's clock.
#
# The raise after a lost history (max_ttl + 2 x max_tolerance ahead, by the limits the promoted
# store has) covers a lost grant only if that grant reached no further than its store time +
# max_ttl + max_tolerance BY THOSE LIMITS.  Since window_ceiling caps a window at now + the
# store's CURRENT max_ttl + max_tolerance, a window whose floor lies ahead of the clock (after
# a raise, a release at a last id ahead, an adopted floor) reaches floor + ttl + tolerance as
# soon as max_ttl is raised, before the standbys replayed the raise: docs/failover.md's own
# procedure ("raise it with cosid_store_settings(max_ttl => ...), let the standbys replay it,
# and only then raise the keepers' cosid.ttl") is unsafe at its first step.
#
#   store P (async standby SB), max_ttl 6 s, max_tolerance 1 s; keepers A and B, cosid.ttl 6 s,
#   namespace tolerance 1 s, 2 slots, 8 sequence bits (so that a tick issued by both servers
#   likely holds a duplicate id).
#   1. P raises every floor (cosid_store_follow_timeline(restored => true): a restore, an
#      earlier failover): floors at R + 8 s; SB replays it.
#   2. SB stops receiving.  On P: cosid_store_settings(max_ttl => '60 s').
#   3. A's first ids: acquire on P, slot 0, window (R+8, R+15] (with the old limits it would
#      be empty until R+1, then reach at most its store time + 7 s).  A issues from R+8 at once.
#   4. P dies (kill -9), SB is promoted: it lost steps 2 and 3, and raises by its limits
#      (max_ttl 6 s): floors at R2 + 8 s, R2 a few seconds after R.
#   5. A's renewal finds its lease freed by that raise: raised_out, A goes on up to R+15.
#      B's first ids: slot 0 (the lowest; no slot can start now), from R2+8 at once.
#   A and B both walk slot 0's ticks in (R2+8, R+15]: duplicate ids.
# The same with max_tolerance raised to 10 s instead (the cap is now + max_ttl + max_tolerance).
# The control drill runs the same steps without step 2's raise of a limit: zero duplicates.  A
# last drill (held): A's window granted under max_ttl 60 s, then max_ttl lowered to 1 s, both
# replayed, then the failover: the promoted store's raise keeps above A's recorded ceiling.
# Ports 57401-57404.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/limit_raise_lost"
P="$base/p"; SB="$base/sb"; A="$base/a"; B="$base/b"
PP=57401; PSB=57402; PA=57403; PB=57404
stopped=""
trap '[ -n "$stopped" ] && kill -CONT $stopped 2>/dev/null; kill $(jobs -p) 2>/dev/null || true
      node_stop_all immediate' EXIT
DSN="host=$P,$SB port=$PP,$PSB dbname=postgres user=postgres target_session_attrs=read-write"
# (the standby registered here: setup makes it inside a command substitution, a subshell)
node_register sb "$SB" "$PSB"

setup() {
    node_stop_all immediate
    node_up p "$P" "$PP" "wal_level = replica" "max_wal_senders = 4" "wal_keep_size = '64MB'" \
        "cosid.store_only = on"
    qp -q -c "SELECT pg_create_physical_replication_slot('sb')" -c "CREATE EXTENSION cosid" \
        -c "SELECT cosid_store_settings(max_ttl => '6s', max_tolerance => '1s')" \
        -c "SELECT cosid_namespace_create('lr', slot_bits => 1, sequence_bits => 8, tolerance => '1s', total_bits => 60)" >/dev/null
    node_standby sb "$SB" "$PSB" p sb
    check_true "[$1] the standby streams from the primary" "$(node_streams p sb)"
    for n in a b; do
        d=$([ $n = a ] && echo "$A" || echo "$B"); p=$([ $n = a ] && echo $PA || echo $PB)
        node_up $n "$d" "$p" "cosid.store_dsn = '$DSN'" "cosid.ttl = '6s'" "cosid.namespace = 'lr'" \
            "cosid.acquire_timeout = '20s'"
        node_sql $n -c "CREATE EXTENSION cosid" \
            -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('lr'), at timestamptz DEFAULT clock_timestamp())" \
            -c "CREATE TABLE other (id bigint)" >/dev/null
    done
    echo "INSERT INTO t(id) SELECT cosid_next('lr') FROM generate_series(1, 20);" > "$base/ins.sql"
    chmod a+r "$base/ins.sql"
}

LOADS=()
load() {  # load NODE SECONDS
    as_pg pgbench -n -h "$(node_dir "$1")" -p "$(node_port "$1")" -c 1 -T "$2" -f "$base/ins.sql" postgres > "$(node_dir "$1")/p.log" 2>&1 &
    LOADS+=($!)
}

# drill NAME keep|max_ttl|max_tolerance|lowered: steps 1-5 above, without (keep) or with a lost
# raise of that limit, or with max_ttl lowered under A's live window (lowered).
drill() {
    local name="$1" limit="$2" wal raised sb_floor t0 b_secs
    echo "# drill $name"
    setup "$name"
    # 1. floors ahead of the store's clock, replayed by the standby
    raised=$(now_ms)
    qp -c "SELECT cosid_store_follow_timeline(restored => true)" >/dev/null
    wal=$(qp -c "SELECT pg_current_wal_lsn()")
    check_true "[$name] the standby replayed the raise" "$(wait_until 20 qsb -c "SELECT pg_last_wal_replay_lsn() >= '$wal'")"
    if [ "$limit" = lowered ]; then
        # (held) max_ttl raised and replayed, A's window granted under it and replayed, then
        # max_ttl lowered to 1 s and replayed: only what follows is lost
        qp -c "SELECT cosid_store_settings(max_ttl => '60s')" >/dev/null
        load a $(( 17 - ($(now_ms) - raised) / 1000 ))
        check_true "[$name] A issues" "$(wait_until 20 qa -c "SELECT count(*) > 0 FROM t")"
        qp -c "SELECT cosid_store_settings(max_ttl => '1s')" >/dev/null
        wal=$(qp -c "SELECT pg_current_wal_lsn()")
        check_true "[$name] the standby replayed A's window and the lowering" \
            "$(wait_until 20 qsb -c "SELECT pg_last_wal_replay_lsn() >= '$wal'")"
    fi
    # 2. the standby stops receiving; the primary's max_ttl is raised there only
    stopped=$(qp -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walsender'")
    kill -STOP $stopped
    [ "$limit" = max_ttl ] && qp -c "SELECT cosid_store_settings(max_ttl => '60s')" >/dev/null
    [ "$limit" = max_tolerance ] && qp -c "SELECT cosid_store_settings(max_tolerance => '10s')" >/dev/null
    # 3. A's first ids: a window on the raised floor, granted by P alone
    if [ "$limit" != lowered ]; then
        load a $(( 17 - ($(now_ms) - raised) / 1000 ))  # until R+17: past A's window on P
        check_true "[$name] A issues" "$(wait_until 20 qa -c "SELECT count(*) > 0 FROM t")"
    else
        sleep 1  # A's renewals under the lowered limit, lost with P
    fi
    echo "# [$name] A's window on P: $(qp -c "SELECT format('slot %s (%s, %s], %s ms after the raise', slot,
        floor - $raised, ceiling - $raised, store_now - $raised) FROM cosid.lease, cosid.store_now() store_now
        WHERE namespace = 'lr' AND incarnation IS NOT NULL")"
    # 4. P dies with what SB did not receive; SB is promoted and raises by its own limits
    t0=$(now_ms)
    pm=$(node_pid p)
    kill -9 $pm $(pgrep -P "$pm")
    kill -CONT $stopped 2>/dev/null || true; stopped=""
    node_promote sb
    # 5. B's first ids on the promoted store
    # (until R+17, and at least 12 s: on a loaded machine A's window came 15 s after the raise,
    # the promotion later still, and B's raised floor 9 s after it)
    b_secs=$(( 17 - ($(now_ms) - raised) / 1000 )); [ "$b_secs" -ge 12 ] || b_secs=12
    load b "$b_secs"
    check_true "[$name] B issues" "$(wait_until 25 qb -c "SELECT count(*) > 0 FROM t")"
    sb_floor=$(qsb -c "SELECT min(floor) - $raised FROM cosid.lease WHERE namespace = 'lr' AND incarnation IS NOT NULL")
    echo "# [$name] promoted $(( $(now_ms) - t0 )) ms after the kill; B's window floor on SB: R + ${sb_floor} ms"
    wait "${LOADS[@]}" 2>/dev/null || true; LOADS=()
    echo "# [$name] A's keeper: $(grep -c "freed by the store's raise" "$A/server.log") lease(s) freed by a raise"
    qb -c "COPY t(id) TO STDOUT" | qa -c "TRUNCATE other" -c "COPY other FROM STDIN"
    local rows dups ticks
    rows=$(qa -c "SELECT (SELECT count(*) FROM t) || ' + ' || (SELECT count(*) FROM other)")
    dups=$(qa -c "SELECT count(*) FROM t JOIN other USING (id)")
    ticks=$(qa -c "SELECT count(*) FROM (SELECT DISTINCT p.slot, p.ts FROM t, cosid_parse(t.id, 'lr') p
                   INTERSECT SELECT DISTINCT p.slot, p.ts FROM other, cosid_parse(other.id, 'lr') p) x")
    echo "# [$name] rows (A + B): $rows; duplicate ids: $dups; (slot, timestamp) pairs issued by both: $ticks"
    echo "# [$name] per slot, first and last id times relative to R (ms): $(qa -c "
        SELECT string_agg(format('slot %s %s %s..%s', slot, who, f, l), '; ' ORDER BY slot, who)
        FROM (SELECT p.slot, 'A' AS who, min((extract(epoch FROM p.ts) * 1000)::bigint) - $raised AS f,
                     max((extract(epoch FROM p.ts) * 1000)::bigint) - $raised AS l FROM t, cosid_parse(t.id, 'lr') p GROUP BY 1
              UNION ALL SELECT p.slot, 'B', min((extract(epoch FROM p.ts) * 1000)::bigint) - $raised,
                     max((extract(epoch FROM p.ts) * 1000)::bigint) - $raised FROM other, cosid_parse(other.id, 'lr') p GROUP BY 1) x")"
    check "[$name] zero duplicate ids across A and B" 0 "$dups"
    check "[$name] no (slot, timestamp) issued by both A and B" 0 "$ticks"
}

# The test command runs the max_ttl drill (about 30 s); COSID_LIMIT_DRILLS="keep max_ttl
# max_tolerance lowered" runs all four (about 2 minutes).
for d in ${COSID_LIMIT_DRILLS:-max_ttl}; do
    case $d in
        keep) drill "limits kept" keep ;;
        max_ttl) drill "max_ttl raised on the primary, lost in the failover" max_ttl ;;
        max_tolerance) drill "max_tolerance raised on the primary, lost in the failover" max_tolerance ;;
        lowered) drill "max_ttl lowered under a live window, replayed" lowered ;;
    esac
done
exit $FAIL

#!/usr/bin/env bash
# What one acquire costs the store, counted, not timed, at 100 and at 10,000 held leases of a
# namespace of 16 slot bits, beside cosid 1.5 and 1.6 in the same server:
#   bash test/e2e/acquire_cost.sh WORKDIR
# In 1.6 an acquire took 40 to 80 ms instead of about 1: the window history's trigger plans
# with enable_seqscan off, which priced the scans of cosid.store_state and
# cosid.history_settings at 10^10, past jit_above_cost, so LLVM compiled those statements in
# every acquire; and every acquire also ran the history's purge.
# One database per version (CREATE EXTENSION cosid VERSION '1.5' and '1.6': their own SQL,
# this library), the current one in a third.  Each is filled to 100 held leases, then 64
# acquires of new owners are counted (each its own transaction, pg_stat_statements with
# track = all: every statement the functions run); then filled to 10,000 and counted again.
# Checks, on the current version, at both fills:
#   - no statement compiled by JIT (1.6: 8 per acquire);
#   - at most 1.25 statements per acquire that read or write the history (the new window's
#     row, and one purge of ended windows per 32 windows; 1.6: 3);
#   - as many statements per acquire at 10,000 leases as at 100 (within 0.5);
#   - buffers per acquire at most 1.5's + 10% at the same fill (the history's row, its page
#     and index, is 4);
#   - flat: the buffers besides the search for a free slot at 10,000 leases at most those at
#     100 + 10 (an index level more for each index written; 44 and 49 when written); and the
#     search itself at 10,000 at most as at 100 + 5: it reads the index of free slots, not the
#     held slots below the first free one (1.5 and 1.6 read those in slot order, about a page
#     each, since the renewals scatter the rows);
#   - the slot search's statements are planned at their first calls only: at most M/4 plans
#     in M acquires (a dynamic EXECUTE was planned two or three times an acquire);
#   - the purge runs for one window in 32: twice in each 64 acquires; with 300 windows older
#     than the retention added, 64 acquires more leave none;
#   - cosid_verify() finds no overlap, cosid_issuer() names the window of a new lease;
#   - the store's raise mark, read twice in every acquire, is inlined into the plans;
#   - with statistics taken while every slot was free, the check for a live lease of the owner
#     key reads that key's rows, not every held lease.
# ACQUIRE_COST_ASSERT=1.6 makes the checks on 1.6's database instead (they fail there).  1.6 is
# filled and counted only then, or with ACQUIRE_COST_V16=1 (its 20,000 acquires and renewals
# were a third of the script's CPU, for lines the checks do not read).
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/acquire_cost"; PORT=${PORT:-28480}; M=64
node_stop main immediate
node_up main "$DIR" "$PORT" "shared_preload_libraries = 'cosid,pg_stat_statements'" \
    "pg_stat_statements.track = 'all'" "pg_stat_statements.track_planning = on" "jit = on"
trap 'node_stop main immediate' EXIT
qd() { local db=$1; shift; node_sql_db main "$db" "$@"; }
# new_store DB VERSION NAMESPACE_ARGS: database DB, a store of cosid VERSION ("": the current
# one) with pg_stat_statements, max_ttl 100 s, and namespace n made with NAMESPACE_ARGS
new_store() {
    q -c "CREATE DATABASE $1" >/dev/null
    qd "$1" -c "CREATE EXTENSION cosid ${2:+VERSION '$2'}" -c "CREATE EXTENSION pg_stat_statements" \
        -c "SELECT cosid_store_settings(max_ttl => '100 s')" -c "SELECT cosid_namespace_create('n', $3)" >/dev/null 2>&1
}
DBS=(v15 cur)
[ "${ACQUIRE_COST_ASSERT:-}${ACQUIRE_COST_V16:-}" = "" ] || DBS=(v15 v16 cur)
for db in "${DBS[@]}"; do
    case $db in v15) v=1.5 ;; v16) v=1.6 ;; *) v="" ;; esac
    new_store "$db" "$v" "slot_bits => 16, sequence_bits => 6"
done
# fill DB N: acquires of new owners until N leases are held (jit off: 1.6's acquires take a
# millisecond then too), then every lease renewed (none expires before it is counted), in an
# order that is not the slots' (as a fleet's renewals come): the row versions are scattered
# The old versions' large fill is written by hand, as their acquire writes a lease (the lowest
# free slots, in slot order as it takes them; the lease guard checks each row): their acquire
# reads every held slot below the first free one, and 10,000 of them one after the other cost
# 46 s of CPU, for a state the counted acquires then read the same way.
fill() {
    local grant="DO \$\$ BEGIN PERFORM cosid.acquire('n', 'fill' || i, gen_random_uuid(), 100000)
        FROM generate_series((SELECT count(*) FROM cosid.lease WHERE incarnation IS NOT NULL) + 1, $2) i; END \$\$"
    [ "$1" = cur ] || [ "$2" -le 1000 ] || grant="UPDATE cosid.lease l
        SET previous_owner_key = coalesce(l.owner_key, l.previous_owner_key), owner_key = 'fill' || l.slot,
            incarnation = gen_random_uuid(), owner_role = session_user, fence = l.fence + 1,
            floor = greatest(l.next_floor, x.not_before_ms), expires_at = cosid.store_now() + 100000,
            ceiling = greatest(cosid.store_now() + 100000 + x.tolerance_ms, l.next_floor, x.not_before_ms),
            next_floor = greatest(cosid.store_now() + 100000 + x.tolerance_ms, l.next_floor, x.not_before_ms)
        FROM cosid.namespace x, (SELECT slot FROM cosid.lease WHERE namespace = 'n' AND incarnation IS NULL ORDER BY slot
                                  LIMIT $2 - (SELECT count(*) FROM cosid.lease WHERE incarnation IS NOT NULL)) f
        WHERE x.name = 'n' AND l.namespace = 'n' AND l.slot = f.slot"
    qd "$1" -c "SET jit = off" -c "$grant" \
        -c "DO \$\$ BEGIN PERFORM cosid.renew(l.namespace, l.slot, l.incarnation, l.fence, 100000)
                FROM (SELECT * FROM cosid.lease WHERE incarnation IS NOT NULL ORDER BY hashint4(slot)) l; END \$\$" \
        -c "VACUUM ANALYZE" >/dev/null
}
# count DB FILL: M acquires of new owners in one session, each its own transaction; sets
# C[DB/FILL] to "buffers statements jit history purges ms search plans", each per acquire
# (purges: in all; search: the buffers of the slot search, the statements that read the
# namespace's free slots and expired leases in slot order; plans: how often those statements
# were planned, in all)
SEARCH='^SELECT l\.slot FROM cosid\.lease l\s+WHERE l\.namespace = (\$1|p_namespace) AND l\.slot > (\$5|p_after)\s+AND (l\.slot < \$7 AND )?(l\.incarnation IS NULL|l\.expires_at <= (\$4|p_now) AND l\.incarnation <> (\$6|p_incarnation))'
declare -A C H
count() {  # count DB FILL [OWNER]: the owners OWNER1 to OWNERM (default: new ones, w$FILL.N)
    local db=$1 fill=$2 i
    local warm=("warm$fill.1" "warm$fill.2") own="w$fill."
    [ -z "${3:-}" ] || { own=$3; warm=("$3$((M + 1))" "$3$((M + 2))"); }
    # (two acquires first: the session's plans and caches are made before the count)
    { for i in "${warm[@]}"; do echo "SELECT slot FROM cosid.acquire('n', '$i', gen_random_uuid(), 100000);"; done
      echo "SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0);"
      for i in $(seq 1 $M); do echo "SELECT slot FROM cosid.acquire('n', '$own$i', gen_random_uuid(), 100000);"; done
    } | qd "$db" >/dev/null
    C[$db/$fill]=$(qd "$db" -F ' ' -c "
        WITH s AS (SELECT * FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                     AND query NOT LIKE '%pg_stat_statements%'),
             top AS (SELECT * FROM s WHERE query LIKE 'SELECT slot FROM cosid.acquire%'),
             search AS (SELECT '$SEARCH'::text AS re)
        SELECT round((SELECT sum(shared_blks_hit + shared_blks_read) FROM top) / $M::numeric, 1),
               round((SELECT sum(calls) FROM s WHERE queryid NOT IN (SELECT queryid FROM top)) / $M::numeric, 2),
               round((SELECT sum(jit_functions) FROM s) / $M::numeric, 2),
               round((SELECT coalesce(sum(calls), 0) FROM s WHERE query ~ 'window_history|history_settings') / $M::numeric, 2),
               (SELECT coalesce(sum(calls), 0) FROM s WHERE query LIKE '%cosid._history_purge(%'),
               round((SELECT sum(total_exec_time) FROM top)::numeric / $M, 2),
               round((SELECT coalesce(sum(shared_blks_hit + shared_blks_read), 0) FROM s, search WHERE query ~ search.re) / $M::numeric, 1),
               (SELECT coalesce(sum(plans), 0) FROM s, search WHERE query ~ search.re)")
}
# ancient DB: 300 ended windows of 1970, older than any retention, for the purge to find
ancient() {
    qd "$1" -c "INSERT INTO cosid.window_history (namespace, slot, kind, fence, floor, ceiling, owner_key, ended_at, ended_how)
                SELECT 'n', 65535, 'lease', i, 10 * i, 10 * i + 5, 'ancient', now(), 'old' FROM generate_series(1, 300) i" >/dev/null
}
for db in "${DBS[@]}"; do
    for fill in 100 10000; do
        fill $db $fill
        count $db $fill
        H[$db/$fill]=$(qd $db -c "SELECT count(*) FROM cosid.lease WHERE incarnation IS NOT NULL AND expires_at > cosid.store_now()")
    done
done
echo "# per acquire: buffers (of which the slot search), statements run, statements JIT-compiled, statements on the history, purges (of $M), ms; plans of the slot search (of $M acquires)"
for fill in 100 10000; do
    for db in "${DBS[@]}"; do
        read -r b s j h p ms sb pl <<<"${C[$db/$fill]}"
        printf '# %-4s %5s held: %7s buffers (%7s) %6s statements %5s JIT %5s history %3s purges %7s ms %4s search plans\n' \
            "$db" "$fill" "$b" "$sb" "$s" "$j" "$h" "$p" "$ms" "$pl"
    done
done

on=cur; [ "${ACQUIRE_COST_ASSERT:-}" = 1.6 ] && on=v16
le() { awk -v a="$1" -v b="$2" 'BEGIN { print (a <= b) ? "t" : "f" }'; }  # le A B: t if A <= B
for fill in 100 10000; do
    read -r b s j h p _ _ pl <<<"${C[$on/$fill]}"
    # shellcheck disable=SC2034  # s15: a field read to skip it
    read -r b15 s15 _ <<<"${C[v15/$fill]}"
    check_true "$fill held: statements JIT-compiled per acquire ($j) none" "$(le "$j" 0)"
    check_true "$fill held: statements on the history per acquire ($h) at most 1.25" "$(le "$h" 1.25)"
    check_true "$fill held: buffers per acquire ($b) at most 1.5's ($b15) + 10%" "$(le "$b" "$(awk -v a="$b15" 'BEGIN{print a * 1.1}')")"
    check "$fill held: purges in $M acquires" 2 "$p"
    # The slot search's statements keep their plans for the session: planned at its first
    # calls only, not at every acquire (a dynamic EXECUTE was, two or three times an acquire,
    # a quarter of its time).
    check_true "$fill held: the slot search planned $pl times in $M acquires, at most $((M / 4))" "$(le "$pl" $((M / 4)))"
    check "$fill held: leases held when counted" $((fill + 2 + M)) "${H[$on/$fill]}"
done
read -r b100 s100 _ _ _ _ sb100 _ <<<"${C[$on/100]}"; read -r b10k s10k _ _ _ _ sb10k _ <<<"${C[$on/10000]}"
# The store's raise mark is read in every acquire, twice: a SQL function PostgreSQL inlines
# into its callers' plans, which last the session (one that returns a single record is not
# inlined, and its query was planned again at every call: a third of an acquire's time).
check "the raise mark (cosid._raise_mark) is inlined into its callers' plans" "0" \
    "$(qd cur -c "EXPLAIN SELECT * FROM cosid._raise_mark()" | grep -c 'Function Scan' || true)"
check_true "statements per acquire at 10,000 held ($s10k) as at 100 ($s100)" "$(le "$s10k" "$(awk -v a="$s100" 'BEGIN{print a + 0.5}')")"
check_true "the slot search was counted ($sb100 buffers per acquire at 100 held)" "$(le 0.5 "$sb100")"
rest100=$(awk -v a="$b100" -v b="$sb100" 'BEGIN{print a - b}'); rest10k=$(awk -v a="$b10k" -v b="$sb10k" 'BEGIN{print a - b}')
check_true "buffers per acquire besides the slot search at 10,000 held ($rest10k) as at 100 ($rest100) + 10" \
    "$(le "$rest10k" "$(awk -v a="$rest100" 'BEGIN{print a + 10}')")"
check_true "the slot search at 10,000 held ($sb10k buffers) reads at most what it reads at 100 ($sb100) + 5" \
    "$(le "$sb10k" "$(awk -v a="$sb100" 'BEGIN{print a + 5}')")"
# 300 windows older than the retention, then M acquires more: two of them purge (200 each)
ancient $on; count $on purge
read -r _ _ _ _ p _ <<<"${C[$on/purge]}"
check "the purge ran in $M acquires, with 300 windows to purge" 2 "$p"
check "windows older than the retention purged" 0 "$(qd $on -c "SELECT count(*) FROM cosid.window_history WHERE owner_key = 'ancient'")"
# Statistics taken before the leases were held (a new store, analyzed by autovacuum while its
# slots were all free, until its next analyze): every slot free in them, the partial index of
# held leases looks empty to the planner.  The acquire's check for a live lease of the same
# owner key must still read that key's rows (lease_owner), not every held lease of the
# namespace through that index (1,000 rows, 0.3 ms: a fleet's start grew with the square of
# its size).
new_store fresh "" "slot_bits => 12, sequence_bits => 6"
qd fresh -c "ANALYZE cosid.lease" >/dev/null
qd fresh -c "DO \$\$ BEGIN PERFORM cosid.acquire('n', 'fill' || i, gen_random_uuid(), 100000)
                 FROM generate_series(1, 1000) i; END \$\$" >/dev/null
count fresh 1000
dup=$(qd fresh -c "SELECT round(coalesce(sum(shared_blks_hit + shared_blks_read), 0) / $M::numeric, 1) FROM pg_stat_statements
                    WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query LIKE 'v_dup := EXISTS%'")
check_true "statistics of free slots only, 1,000 held: the check for a live lease of the owner key reads at most 6 buffers an acquire ($dup)" \
    "$(le "${dup:-99}" 6)"
# A regional store (slot_range [0,512) of 16 slot bits) with every slot of its range held: an
# acquire finds none, and must not read the namespace's 65,024 slots above the range on the
# way (the search for expired leases has no index to stop it: its bound keeps it in the range).
new_store regional "" "'[0,512)', slot_bits => 16, sequence_bits => 6"
qd regional -c "DO \$\$ BEGIN PERFORM cosid.acquire('n', 'fill' || i, gen_random_uuid(), 100000)
                 FROM generate_series(1, 512) i; END \$\$" -c "ANALYZE cosid.lease" >/dev/null
count regional full
read -r breg _ <<<"${C[regional/full]}"
check "a regional store's range full: no slot granted past it" "512 0" "$(qd regional -F ' ' -c "
    SELECT count(*) FILTER (WHERE slot < 512), count(*) FILTER (WHERE slot >= 512) FROM cosid.lease WHERE incarnation IS NOT NULL")"
check_true "a regional store's range full: an acquire reads at most 3,000 buffers ($breg), not the slots above the range" \
    "$(le "$breg" 3000)"
assert_store_verified "$DIR" "$PORT" $on "the store ($on)"
check "cosid_issuer() names the window of a new lease" "1 w10000.$M live" "$(qd $on -F ' ' -c "
    SELECT count(*), min(i.owner_key), min(CASE WHEN i.source = 'held lease' THEN 'live' ELSE i.source END)
      FROM cosid.lease l, cosid_issuer(cosid_min_id(to_timestamp((l.floor + l.ceiling) / 2000.0), 'n') + (l.slot << 6), 'n') i
     WHERE l.owner_key = 'w10000.$M'")"
# After a raise (a switchover, a restore: every lease freed, every next window above the raised
# floor, ahead of the clock) no slot can start now.  M + 2 of the fill's owners ask again, as a
# fleet does after a switchover: each takes back its own slot, and the search reads what it
# reads at 10,000 held (before: every acquire read all the namespace's free slots and expired
# leases looking for one that could start now, then took the lowest free slot, the one every
# other asker raced for).
qd $on -c "SELECT cosid_store_follow_timeline(restored => true)" >/dev/null
check "after a raise: no lease held" 0 "$(qd $on -c "SELECT count(*) FROM cosid.lease WHERE incarnation IS NOT NULL")"
count $on raised fill
read -r braised _ _ _ _ _ sbraised _ <<<"${C[$on/raised]}"
echo "# after a raise: $braised buffers per acquire, $sbraised of them the slot search"
check_true "after a raise: the slot search ($sbraised buffers per acquire) reads at most what it reads at 10,000 held ($sb10k) + 5" \
    "$(le "$sbraised" "$(awk -v a="$sb10k" 'BEGIN{print a + 5}')")"
check_true "after a raise: buffers per acquire ($braised) at most at 10,000 held ($b10k) + 10" \
    "$(le "$braised" "$(awk -v a="$b10k" 'BEGIN{print a + 10}')")"
check "after a raise: each of $((M + 2)) owners took back its own slot" $((M + 2)) "$(qd $on -c "
    SELECT count(*) FROM cosid.lease WHERE owner_key LIKE 'fill%' AND owner_key = previous_owner_key")"
assert_store_verified "$DIR" "$PORT" $on "the store ($on) after the raise"
exit $FAIL

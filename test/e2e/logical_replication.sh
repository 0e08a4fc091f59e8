#!/usr/bin/env bash
# Logical replication between cosid servers (issue 22, item 6).  A publication FOR ALL
# TABLES (or FOR TABLES IN SCHEMA cosid) publishes the store's tables cosid.lease,
# cosid.namespace and cosid.store_state too.  A subscriber that is itself a cosid server
# must not apply another store's history onto its own: its store stays its own, its
# subscription goes on with the user's tables, and no instance using its store is granted a
# window below what it issued.
#   A  publisher, its own store; publications FOR ALL TABLES and FOR TABLES IN SCHEMA cosid
#   B  its own store, subscribes to A (FOR ALL TABLES, copy_data = false)
#   C  keeps its leases in B's store (cosid.store_dsn), cosid.preferred_slot = 0
#   E  its own store, subscribes to A (FOR ALL TABLES, copy_data = true)
#   F  its own store, subscribes to A (FOR TABLES IN SCHEMA cosid, copy_data = true)
#   D  keeps its leases in A's store and subscribes to A (FOR ALL TABLES): its keeper copies
#      namespaces from the store into its own cosid.namespace, where replication brings them too
# Last, A truncates its store: a trigger cannot skip a replicated TRUNCATE, so B refuses it
# (its subscription stops with an error that says how to skip the transaction) instead of
# emptying its own store under its live leases.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/logical_replication"
A="$base/a"; B="$base/b"; C="$base/c"; D="$base/d"; E="$base/e"; F="$base/f"
PA=55481; PB=55482; PC=55483; PD=55484; PE=55485; PF=55486
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT
# Nodes a to f (qa to qf), registered here: most are made by a node_up in the background (a
# subshell), and node_stop_all stops them in reverse: C, D, E, F, B, A.
for s in A B F E D C; do p=P$s; node_register "${s,,}" "${!s}" "${!p}"; done

rm -rf "$base"; mkdir -p "$base"
logical=("wal_level = logical" "max_replication_slots = 12" "max_wal_senders = 12"
         "max_logical_replication_workers = 6" "max_worker_processes = 16"
         "wal_retrieve_retry_interval = '500ms'")
# A's and B's leases outlive the scenario below: their keepers renew every 20 s.  So A's
# first change of its store that B's subscription carries is its release, and B goes on
# issuing on the window it was granted (on the build before the fix, after its row was
# overwritten by A's release, until that renewal finds the lease gone).
# No keeper hands a lease back for being idle (cosid.pool_idle_timeout, 60 s by default):
# B issues last in step 2, and on a loaded machine step 6 came more than 60 s later, when B's
# own idle release had freed its slot (and C's), so "B's slot still held by B" read a free row.
# The store rows this script compares (B's slot, the fingerprints of B's and E's stores) change
# then only by what replication brings.
keep=("cosid.pool_idle_timeout = '1h'")
node_up a "$A" "$PA" "${logical[@]}" "${keep[@]}" "cosid.ttl = '60s'"   # first: it makes the initdb template if missing
node_up b "$B" "$PB" "${logical[@]}" "${keep[@]}" "cosid.ttl = '60s'" &
node_up e "$E" "$PE" "${logical[@]}" "${keep[@]}" &
node_up f "$F" "$PF" "${logical[@]}" "${keep[@]}" &
node_up c "$C" "$PC" "${keep[@]}" "cosid.store_dsn = '$(node_dsn b)'" "cosid.preferred_slot = 0" &
node_up d "$D" "$PD" "${logical[@]}" "${keep[@]}" "cosid.store_dsn = '$(node_dsn a)'" &
wait
user_tables="CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), src text);
             CREATE TABLE mark (n int PRIMARY KEY)"
for s in A B D E; do node_sql "${s,,}" -c "CREATE EXTENSION cosid" -c "$user_tables" >/dev/null; done
qf -c "CREATE EXTENSION cosid" >/dev/null
# d: the ids B, C, E issue for themselves (not on A, so not published)
for s in B C E; do
    [ $s = C ] && qc -c "CREATE EXTENSION cosid" >/dev/null
    node_sql "${s,,}" -c "CREATE TABLE d (id bigint NOT NULL DEFAULT cosid_next(), src text)" >/dev/null
done

# What a server's store holds, without what its own keeper's renewals change (expires_at,
# ceiling, next_floor): owners, incarnations, fences, floors, namespaces, store state.
fingerprint() {
    node_sql "${1,,}" -c "SELECT md5(coalesce((SELECT string_agg(format('%s/%s/%s/%s/%s/%s/%s', namespace, slot, owner_key,
                        incarnation, fence, floor, previous_owner_key), ',' ORDER BY namespace, slot) FROM cosid.lease), '')
                   || coalesce((SELECT string_agg(n::text, ',' ORDER BY name) FROM cosid.namespace n), '')
                   || coalesce((SELECT string_agg(s::text, ',' ORDER BY s::text) FROM cosid.store_state s), ''))"
}
# sub_ok SERVER SUB: the apply worker runs and no worker of the subscription ever failed
sub_ok() {
    node_sql "${1,,}" -c "SELECT (SELECT pid IS NOT NULL FROM pg_stat_subscription WHERE subname = '$2' AND relid IS NULL)
                  AND (SELECT apply_error_count + sync_error_count = 0 FROM pg_stat_subscription_stats WHERE subname = '$2')"
}
errors_in_log() {  # errors_in_log SERVER: ERROR lines of the server's log (printed), counted
    local d=${!1} n
    n=$(grep -c 'ERROR:' "$d/server.log" || true)
    grep 'ERROR:' "$d/server.log" | sort | uniq -c | sort -rn | head -3 | cut -c1-300 | sed "s/^/#   $1: /" >&2 || true
    echo "$n"
}
# marked SERVER N: has mark N arrived from A (every earlier change of A is applied, or skipped)
marked() { node_sql "${1,,}" -c "SELECT count(*) = 1 FROM mark WHERE n = $2"; }
mark=0
sync_mark() {  # sync_mark SERVER...: a new mark on A, waited for on each server
    mark=$((mark + 1)); qa -c "INSERT INTO mark VALUES ($mark)"
    local s; for s in "$@"; do
        [ "$(wait_until 20 marked "$s" "$mark")" = t ] || echo "# mark $mark did not reach $s within 20 s"
    done
}
not_foreign() {  # not_foreign SERVER KEYS: rows of the server's store owned by one of KEYS ('k1','k2')
    node_sql "${1,,}" -c "SELECT count(*) FROM cosid.lease WHERE owner_key IN ($2) OR previous_owner_key IN ($2)"
}

echo "# [$SECONDS s] 1. A publishes FOR ALL TABLES, B subscribes (copy_data = false); both keep their own store"
# B first, then A: A's window on slot 0 starts above B's, so the build before the fix took
# A's release onto B's live row without its guard noticing.
qb -c "INSERT INTO t(src) SELECT 'b' FROM generate_series(1, 100)" -c "INSERT INTO d(src) VALUES ('b')" >/dev/null
qa -c "INSERT INTO t(src) SELECT 'a' FROM generate_series(1, 100)" >/dev/null
qa -c "CREATE PUBLICATION pub_all FOR ALL TABLES" -c "CREATE PUBLICATION pub_schema FOR TABLES IN SCHEMA cosid" >/dev/null
qb -c "CREATE SUBSCRIPTION sub_b CONNECTION '$(node_dsn a)' PUBLICATION pub_all WITH (copy_data = false)" 2>&1 | grep -v NOTICE || true
check_true "B's subscription runs" "$(wait_until 20 sub_ok B sub_b)"
ka=$(qa -c "SELECT owner_key FROM cosid_stats()"); ia=$(qa -c "SELECT incarnation FROM cosid_stats()")
kb=$(qb -c "SELECT owner_key FROM cosid_stats()"); ib=$(qb -c "SELECT incarnation FROM cosid_stats()")
echo "# A $ka ($ia), slot $(qa -c "SELECT slot FROM cosid_pool() WHERE namespace = 'default'")"
echo "# B $kb ($ib), slot $(qb -c "SELECT slot FROM cosid_pool() WHERE namespace = 'default'")"
b_slot=$(qb -c "SELECT slot FROM cosid_pool() WHERE namespace = 'default'")
check_true "B holds a lease in namespace default (slot [$b_slot])" "$([[ "$b_slot" =~ ^[0-9]+$ ]] && echo t || echo f)"
# b_row: "OWNER INCARNATION FENCE" of B's slot in B's store; a free row, no row, or psql's error
# says so (a free row printed nothing before: owner_key || ... is NULL)
b_row() {
    qb -c "SELECT coalesce((SELECT coalesce(owner_key || ' ' || incarnation || ' ' || fence,
                                             'free: fence ' || fence || ', last held by ' || coalesce(previous_owner_key, 'nobody'))
                             FROM cosid.lease WHERE namespace = 'default' AND slot = $b_slot), 'no row')" 2>&1 | tr '\n' ' ' | sed 's/ $//'
}
b_own="$kb $ib $(qb -c "SELECT fence FROM cosid_pool() WHERE namespace = 'default'")"
check "B's store holds B's slot for B" "$b_own" "$(b_row)"
sync_mark B
fp_b=$(fingerprint B)

echo "# A hands its slot back (cosid_release)"
qa -c "INSERT INTO t(src) SELECT 'a' FROM generate_series(1, 100)" -c "SELECT cosid_release()" >/dev/null
echo "#   A's store: $(qa -c "SELECT slot || ' fence ' || fence || ' next_floor ' || next_floor || coalesce(' held by ' || owner_key, ' free')
                          FROM cosid.lease WHERE namespace = 'default' AND slot = 0")"
sync_mark B
echo "#   B's store: $(qb -c "SELECT slot || ' fence ' || fence || ' next_floor ' || next_floor || coalesce(' held by ' || owner_key, ' free')
                          FROM cosid.lease WHERE namespace = 'default' AND slot = $b_slot")"
check "B's store rows unchanged by A's release (owners, fences, floors, namespaces, state)" "$fp_b" "$(fingerprint B)"
check "B's slot still held by B in B's store, same incarnation and fence" "$b_own" "$(b_row)"
check "no row of B's store names A's owner key" 0 "$(not_foreign B "'$ka'")"
check_true "B's subscription still runs" "$(sub_ok B sub_b)"

echo "# [$SECONDS s] 2. C, on B's store and preferring slot $b_slot, asks for a slot while B issues on it"
qc -c "INSERT INTO d(src) VALUES ('c')" >/dev/null
c_slot=$(qc -c "SELECT slot FROM cosid_pool() WHERE namespace = 'default'")
echo "#   C was granted slot $c_slot (B holds slot $b_slot)"
# 2 clients on each of B and C at once, 100 transactions of 100 rows each: 20,000 ids each
echo "INSERT INTO d(src) SELECT 'load' FROM generate_series(1, 100);" > "$base/ins.sql"; chmod a+r "$base/ins.sql"
for s in B C; do
    dir=${!s}; port=P$s
    as_pg "$PG_BIN/pgbench" -n -h "$dir" -p "${!port}" -c 2 -t 100 -f "$base/ins.sql" postgres > "$dir/pgbench.log" 2>&1 &
done
wait
check "both loads ran without a failed transaction" 0 "$(cat "$B/pgbench.log" "$C/pgbench.log" | grep -c 'aborted\|ERROR' || true)"
qb -c "SELECT id FROM d" | sort > "$base/b.ids"; qc -c "SELECT id FROM d" | sort > "$base/c.ids"
echo "#   B issued $(wc -l < "$base/b.ids") ids, C $(wc -l < "$base/c.ids")"
for s in B C; do
    echo "#   $s on slot $b_slot: $(node_sql "${s,,}" -c "SELECT count(*) || ' ids' || coalesce(', ' || min((cosid_parse(id)).ts) || ' to ' || max((cosid_parse(id)).ts) || ', ' || count(DISTINCT (cosid_parse(id)).ts) || ' ms', '') FROM d WHERE (cosid_parse(id)).slot = $b_slot")"
done
check "zero ids issued by both B and C" 0 "$(comm -12 "$base/b.ids" "$base/c.ids" | wc -l)"
# (slot, tick) pairs: two holders of one slot must never share a millisecond
ticks() { node_sql "${1,,}" -c "SELECT DISTINCT (cosid_parse(id)).slot || ' ' || (cosid_parse(id)).ts FROM d" | sort; }
check "no (slot, millisecond) issued by both B and C" 0 "$(comm -12 <(ticks B) <(ticks C) | wc -l)"
overlap=$(qc -c "SELECT min(id) FILTER (WHERE (cosid_parse(id)).slot = $b_slot) FROM d")
b_max=$(qb -c "SELECT max(id) FROM d WHERE (cosid_parse(id)).slot = $b_slot")
check_true "C's ids on B's slot (if any) all lie above every id B issued on it" \
    "$([ -z "$overlap" ] || [ "$overlap" -gt "$b_max" ] && echo t || echo f)"

echo "# A acquires again and issues"
qa -c "INSERT INTO t(src) SELECT 'a' FROM generate_series(1, 100)" >/dev/null
echo "#   A on slot $(qa -c "SELECT slot FROM cosid_pool() WHERE namespace = 'default'"), fence $(qa -c "SELECT fence FROM cosid_pool() WHERE namespace = 'default'")"
sync_mark B
check "B's slot still held by B after A's new acquire" "$b_own" "$(b_row)"
check "no row of B's store names A's owner key" 0 "$(not_foreign B "'$ka'")"
check "B's store holds only B's namespaces" "default" "$(qb -c "SELECT string_agg(name, ',' ORDER BY name) FROM cosid.namespace")"
check "A's 200 rows since the subscription arrived in B's t" 200 "$(qb -c "SELECT count(*) FROM t WHERE src = 'a'")"
check_true "B's subscription still runs, no worker failed" "$(sub_ok B sub_b)"

echo "# [$SECONDS s] 3. E (its own store, holding a slot) subscribes with copy_data = true"
qe -c "INSERT INTO d(src) SELECT 'e' FROM generate_series(1, 100)" >/dev/null
fp_e=$(fingerprint E)
qe -c "CREATE SUBSCRIPTION sub_e CONNECTION '$(node_dsn a)' PUBLICATION pub_all" 2>&1 | grep -v NOTICE || true
synced() { node_sql "${1,,}" -c "SELECT count(*) > 0 AND bool_and(srsubstate IN ('r', 's')) FROM pg_subscription_rel"; }
check_true "E's initial sync finished for every table within 20 s" "$(wait_until 20 synced E)"
qe -c "SELECT srrelid::regclass::text || ':' || srsubstate::text FROM pg_subscription_rel ORDER BY 1" | tr '\n' ' ' | sed 's/^/#   E: /'; echo
check "A's 300 rows copied into E's t" 300 "$(qe -c "SELECT count(*) FROM t WHERE src = 'a'")"
check "E's store unchanged by the copy (no row of A's store)" "$fp_e" "$(fingerprint E)"
check_true "E's subscription runs, no worker failed" "$(sub_ok E sub_e)"

echo "# [$SECONDS s] 4. F subscribes to A's publication FOR TABLES IN SCHEMA cosid"
fp_f=$(fingerprint F)
qf -c "CREATE SUBSCRIPTION sub_f CONNECTION '$(node_dsn a)' PUBLICATION pub_schema" 2>&1 | grep -v NOTICE || true
check_true "F's initial sync finished for every table within 20 s" "$(wait_until 20 synced F)"
qa -c "SELECT cosid_release()" -c "INSERT INTO t(src) VALUES ('a2')" -c "SELECT cosid_namespace_create('pub', slot_bits => 3)" >/dev/null
qa -c "SELECT cosid_next('pub')" >/dev/null
# F has no table mark: A's changes of the store are there once A's store shows them on F's
# subscription's slot (confirmed_flush past A's current WAL position)
lsn=$(qa -c "SELECT pg_current_wal_lsn()")
f_caught_up() { qa -c "SELECT confirmed_flush_lsn >= '$lsn' FROM pg_replication_slots WHERE slot_name = 'sub_f'"; }
check_true "F's subscription confirmed A's changes" "$(wait_until 20 f_caught_up)"
check "F's store unchanged (no row of A's store)" "$fp_f" "$(fingerprint F)"
check_true "F's subscription runs, no worker failed" "$(sub_ok F sub_f)"

echo "# [$SECONDS s] 5. D keeps its leases in A's store and subscribes to A's FOR ALL TABLES"
qd -c "CREATE SUBSCRIPTION sub_d CONNECTION '$(node_dsn a)' PUBLICATION pub_all WITH (copy_data = false)" 2>&1 | grep -v NOTICE || true
check_true "D's subscription runs" "$(wait_until 20 sub_ok D sub_d)"
qa -c "SELECT cosid_namespace_create('ns1', slot_bits => 3)" >/dev/null
check_true "D issues in a namespace just created on A" "$(qd -c "SELECT cosid_next('ns1') > 0")"
# The same while D's subscription lags (disabled here): D's keeper copies the namespace
# from the store before replication brings A's row of it.
qd -c "ALTER SUBSCRIPTION sub_d DISABLE" >/dev/null
qa -c "SELECT cosid_namespace_create('ns2', slot_bits => 3)" >/dev/null
check_true "D issues in a namespace its subscription has not brought yet" "$(qd -c "SELECT cosid_next('ns2') > 0")"
qd -c "ALTER SUBSCRIPTION sub_d ENABLE" >/dev/null
sync_mark D B E
check_true "D's subscription runs, no worker failed" "$(sub_ok D sub_d)"
check "D's namespaces: its keeper's copies" "default,ns1,ns2" "$(qd -c "SELECT string_agg(name, ',' ORDER BY name) FROM cosid.namespace")"

echo "# [$SECONDS s] At the end"
kd=$(qd -c "SELECT owner_key FROM cosid_stats()")
for s in B E F; do
    check "no row of $s's store names A's or D's owner key" 0 "$(not_foreign $s "'$ka', '$kd'")"
    check "$s's store holds only its own namespaces" "default" "$(node_sql "${s,,}" -c "SELECT string_agg(name, ',' ORDER BY name) FROM cosid.namespace")"
done
check "A's rows since B subscribed are in B's t" "$(qa -c "SELECT count(*) - 100 FROM t")" "$(qb -c "SELECT count(*) FROM t WHERE src LIKE 'a%'")"
check "A's rows in E's t" "$(qa -c "SELECT count(*) FROM t")" "$(qe -c "SELECT count(*) FROM t")"
for s in B:sub_b E:sub_e F:sub_f D:sub_d; do
    check_true "${s%%:*}'s subscription runs, no worker ever failed" "$(sub_ok ${s%%:*} ${s#*:})"
    check "no ERROR in ${s%%:*}'s log" 0 "$(errors_in_log ${s%%:*})"
done

# each store's history: A's (its own windows and D's), B's (its own and C's), E's
for s in A B E; do p=P$s; assert_store_verified "${!s}" "${!p}" postgres "$s's store"; done
echo "# [$SECONDS s] 6. A truncates its store (cosid.lease and cosid.namespace in one transaction), then inserts a mark"
fp_b=$(fingerprint B)
# (A's own windows are ahead of its clock, and cosid._lease_forget_guard holds a TRUNCATE of
# them: this session's store clock is moved past them, as an operator who means it would.)
# Both tables are locked first, namespaces before leases as the keepers' statements take them:
# on a loaded machine a TRUNCATE of cosid.lease, then of cosid.namespace, met a renewal of A's
# or D's keeper holding the one and waiting for the other.  Tried until it commits (a deadline).
truncated() {  # (once emptied, never again: B must see one TRUNCATE to skip)
    [ "$(qa -c "SELECT count(*) = 0 FROM cosid.lease")" = t ] && { echo t; return; }
    qa -c "SET cosid.store_clock_offset = 3600000" -c "SET lock_timeout = '5s'" -c "BEGIN" \
        -c "LOCK TABLE cosid.namespace, cosid.lease IN ACCESS EXCLUSIVE MODE" \
        -c "TRUNCATE cosid.lease" -c "TRUNCATE cosid.namespace" -c "COMMIT" 2>&1 | grep -v NOTICE >> "$base/truncate.log"
    qa -c "SELECT count(*) = 0 FROM cosid.lease"
}
check_true "A's store emptied" "$(wait_until 60 truncated)"
sed 's/^/#   tried: /' "$base/truncate.log" 2>/dev/null || true
mark=$((mark + 1)); qa -c "INSERT INTO mark VALUES ($mark)"
refused() { grep -q 'ERROR:  cosid: a replicated TRUNCATE of cosid\.' "$B/server.log" && echo t; }
check_true "B refuses the replicated TRUNCATE of the store's tables" "$(wait_until 20 refused)"
check "B's store untouched by it" "$fp_b" "$(fingerprint B)"
check "B's slot still held by B" "$b_own" "$(b_row)"
lsn=$(grep -A5 'ERROR:  cosid: a replicated TRUNCATE' "$B/server.log" | grep -o 'finished at [0-9A-F]*/[0-9A-F]*' | head -1 | cut -d' ' -f3)
echo "#   skipping the transaction that finished at ${lsn:-(none found in the log)}"
[ -n "$lsn" ] && qb -c "ALTER SUBSCRIPTION sub_b SKIP (lsn = '$lsn')" >/dev/null
check_true "with the TRUNCATE skipped, B's subscription goes on (A's next mark arrives)" "$(wait_until 20 marked B "$mark")"
check "B's store still untouched" "$fp_b" "$(fingerprint B)"
exit $FAIL

#!/usr/bin/env bash
# A shared store is a service with tenants: no login may stop another server's new windows.
# Store S serves only others (cosid.store_only); server B takes its leases there through its own
# keeper role.  Each phase makes B open new windows (a first id, cosid_release(), again):
#  (a) a login with no grants holds all it can: the advisory key every acquire once took
#      (pg_advisory_lock), and an open transaction that read every table it may read;
#  (b) a member of cosid_keeper hoards slots of a 16-slot namespace: 16 acquires, one more
#      held uncommitted in an open transaction, its leases renewed every second.  It is capped
#      (half the slots by default, 53400 with DETAIL and HINT), and B gets its slots;
#  (c) an administrator revokes every lease of the hoarder in one call: each slot freed above
#      its ceiling with a new fence, and the hoarder's renewals find nothing from then on;
#  (d) B's failed calls: none; its ids: none twice; the store's history: no two windows overlap.
# Before the store's tenant rules, (a) failed every one of B's calls in the namespaces the login
# held the key of (ZC006: lock timeout), and (b) took all 16 slots (B: ZC003).
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
base="${1:-/tmp/cosid-e2e}/tenants"
DIR="$base/s"; PORT=${PORT:-28480}; B="$base/b"; PB=28481
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT
as_role() { local r=$1; shift; q -U "$r" "$@"; }
mkdir -p "$base"; chown "$PG_USER" "$base"; rm -f "$base"/stop "$base"/renewals "$base"/hoard "$base"/refused

node_up main "$DIR" "$PORT" "cosid.store_only = on"
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('f', slot_bits => 4, tolerance => '300 ms')" \
  -c "SELECT cosid_namespace_create('a' || i, slot_bits => 4, tolerance => '300 ms') FROM generate_series(1, 3) i" \
  -c "CREATE ROLE keeper_b LOGIN IN ROLE cosid_keeper" -c "CREATE ROLE hoarder LOGIN IN ROLE cosid_keeper" \
  -c "CREATE ROLE rogue LOGIN" >/dev/null
# B's store calls are bounded by ttl/6 (500 ms); its callers wait up to 3 s.
node_up b "$B" "$PB" "cosid.store_dsn = 'host=$DIR port=$PORT dbname=postgres user=keeper_b'" "cosid.ttl = '3s'"
qb -c "CREATE EXTENSION cosid" -c "CREATE TABLE ids (ns text, id bigint, err text)" >/dev/null

# new_windows NS N: N times in one session of B: 20 ids of NS (a new window each time), then
# cosid_release(); an error is a row with err.
new_windows() {
    qb -c "SET cosid.acquire_timeout = '3s'" -c "DO \$\$ BEGIN
        FOR k IN 1..$2 LOOP
            BEGIN
                INSERT INTO ids (ns, id) SELECT '$1', cosid_next('$1') FROM generate_series(1, 20);
            EXCEPTION WHEN others OR query_canceled THEN
                INSERT INTO ids (ns, err) VALUES ('$1', SQLSTATE || ' ' || SQLERRM);
            END;
            PERFORM cosid_release();
            COMMIT;
        END LOOP;
    END \$\$" >/dev/null
}
failed() { qb -c "SELECT count(*) FROM ids WHERE err IS NOT NULL"; }
new_windows f 1
check "B issues through the store as keeper_b" 0 "$(failed)"

# (a) What a login with no grants can lock, it holds; what it cannot, it is refused.
for s in "SELECT 1 FROM cosid.namespace FOR KEY SHARE" "SELECT 1 FROM cosid.lease FOR KEY SHARE" \
         "SELECT 1 FROM cosid.store_state FOR KEY SHARE"; do
    for r in rogue hoarder; do
        check "$r may not: $s" 42501 "$(sqlstate_of "$(as_role $r -v VERBOSITY=verbose -c "$s" 2>&1 || true)")"
    done
done
check "the login may not LOCK the namespace table beyond ACCESS SHARE" 42501 "$(sqlstate_of "$(as_role rogue -v VERBOSITY=verbose \
    -c "BEGIN" -c "LOCK TABLE cosid.namespace IN ROW SHARE MODE" 2>&1 || true)")"
{ echo "SELECT pg_advisory_lock(1668248937, hashtext(n)) FROM (VALUES ('f'), ('a1'), ('a2'), ('a3')) v(n);"
  echo "BEGIN;"
  for t in cosid.namespace cosid.store_state cosid.history_settings; do echo "SELECT count(*) FROM $t;"; done
  echo "SELECT count(namespace) FROM cosid.lease;"
  echo "SELECT count(namespace) FROM cosid.window_history;"
  echo "SELECT pg_sleep(60);"; } | as_role rogue >/dev/null 2>&1 &
rogue=$!
check_true "the login holds the advisory keys and, idle in its transaction, every table it reads" \
    "$(wait_for 20 "the rogue's locks" q -c "SELECT count(*) FILTER (WHERE l.locktype = 'advisory') = 4
        AND count(*) FILTER (WHERE l.locktype = 'relation' AND l.relation::regclass::text LIKE 'cosid.%') >= 5
        FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE a.usename = 'rogue' AND l.granted")"
t0=$(now_ms)
for ns in a1 a2 a3; do new_windows $ns 2; done
echo "# (a) B opened 6 windows beside the login's locks in $(( $(now_ms) - t0 )) ms"
check "(a) B's failed calls while a login with no grants holds what it can" 0 "$(failed)"
qb -c "SELECT ns, err FROM ids WHERE err IS NOT NULL LIMIT 2" | sed 's/^/#   /'
kill "$rogue" 2>/dev/null; wait "$rogue" 2>/dev/null || true
q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'rogue'" >/dev/null

# (b) The hoarder: one acquire held open (its row locked), then 16 more, renewed every second.
# (held until the barrier opens at (c), whatever the machine's load: not a fixed sleep)
barrier_close 4242
as_role hoarder -c "BEGIN" -c "SELECT slot FROM cosid.acquire('f', 'evil', gen_random_uuid(), 30000)" \
    -c "SELECT pg_advisory_lock_shared(4242)" -c "COMMIT" >/dev/null 2>&1 &
opened=$!
check_true "the hoarder's open acquire holds its slot" "$(wait_for 30 "the open acquire at the barrier" barrier_waiters 1)"
: > "$base/hoard"; : > "$base/refused"
# shellcheck disable=SC2034  # i: sixteen rounds, the counter unused
for i in $(seq 1 16); do
    u=$(cat /proc/sys/kernel/random/uuid)
    out=$(as_role hoarder -v VERBOSITY=verbose -c "SELECT slot || ' ' || fence || ' $u' FROM cosid.acquire('f', 'evil', '$u', 30000)" 2>&1) \
        && { [ -n "$out" ] && echo "$out" >> "$base/hoard"; } || echo "$out" >> "$base/refused"
done
granted=$(wc -l < "$base/hoard")
echo "# (b) the hoarder got $granted of 16 acquires (one more held open); refused: $(grep -c '^ERROR' "$base/refused" || true)"
check "(b) the hoarder is capped at half the namespace's slots by default" 8 "$granted"
check "(b) the refusals are 53400" "8 8 8" "$(grep -c 'ERROR:  53400' "$base/refused") $(grep -c '^DETAIL:' "$base/refused") $(grep -c '^HINT:' "$base/refused")"
renewals() {  # the hoarder renews each of its leases every second, one line per call: when it began, 1 if renewed
    while [ ! -e "$base/stop" ]; do
        while read -r slot fence u; do
            t=$(now_ms)
            echo "$t $(as_role hoarder -c "SELECT count(*) FROM cosid.renew('f', $slot, '$u', $fence, 30000)" 2>/dev/null || echo 0)" >> "$base/renewals"
        done < "$base/hoard"
        sleep 1
    done
}
renewals &
renewer=$!
t0=$(now_ms)
new_windows f 3
echo "# (b) B opened 3 windows of f beside the hoarder in $(( $(now_ms) - t0 )) ms"
check "(b) B's failed calls while a keeper role hoards slots" 0 "$(failed)"
# An administrator's cap for every role: the hoarder, above it, gets nothing more; B, below it, does.
q -c "SELECT * FROM cosid_lease_cap(2)" >/dev/null || { echo "not ok - cosid_lease_cap(2)"; FAIL=1; }
check "a cap of 2 for every role refuses the hoarder's next acquire" 53400 \
    "$(sqlstate_of "$(as_role hoarder -v VERBOSITY=verbose -c "SELECT slot FROM cosid.acquire('f', 'evil', gen_random_uuid(), 30000)" 2>&1 || true)")"
new_windows f 1
check "(b) B's failed calls under a cap of 2" 0 "$(failed)"
q -c "SELECT * FROM cosid_lease_cap(NULL)" >/dev/null || true
# A server whose role is at its cap: the keeper retries, and its callers read the store's reason.
q -c "SELECT * FROM cosid_lease_cap(0, role => 'keeper_b')" >/dev/null || true
capped=$(qb -v VERBOSITY=verbose -c "SET cosid.acquire_timeout = '1s'" -c "SELECT cosid_next('a1')" 2>&1 || true)
echo "$capped" | sed -n "1,3s/^/#   /p"
check "a role at its cap: its server's callers get ZC006 quoting the store's refusal" "ZC006 1" \
    "$(sqlstate_of "$capped") $(grep -c 'holds its cap of live leases' <<<"$capped")"
q -c "SELECT * FROM cosid_lease_cap(NULL, role => 'keeper_b')" >/dev/null || true

# (c) Revoked in one call, once the open acquire committed: 9 leases.
barrier_open
wait "$opened" || true
held() { q -c "SELECT count(*) FROM cosid.lease WHERE owner_role = 'hoarder' AND incarnation IS NOT NULL"; }
check "the hoarder holds its 8 leases and the one it held open" 9 "$(held)"
q -c "CREATE TABLE before AS SELECT slot, fence, ceiling FROM cosid.lease WHERE owner_role = 'hoarder' AND incarnation IS NOT NULL" >/dev/null
check "(c) cosid_revoke_role may not be run by a keeper role" 42501 \
    "$(sqlstate_of "$(as_role hoarder -v VERBOSITY=verbose -c "SELECT cosid_revoke_role('keeper_b')" 2>&1 || true)")"
check_true "the hoarder renewed its 8 leases" \
    "$(wait_for 30 "the hoarder's renewals" bash -c "awk '\$2 == 1 { n++ } END { print ((n >= 8) ? \"t\" : \"f\") }' '$base/renewals'")"
check "(c) cosid_revoke_role revokes every lease of the role" 9 "$(q -c "SELECT cosid_revoke_role('hoarder')" 2>&1)"
revoked_at=$(now_ms)
check "(c) the hoarder holds no lease" 0 "$(held)"
check "(c) each revoked slot: free, a new fence, its next floor at least the ceiling" 9 "$(q -c "SELECT count(*) FROM before b
    JOIN cosid.lease l ON l.namespace = 'f' AND l.slot = b.slot
    WHERE l.incarnation IS NULL AND l.fence = b.fence + 1 AND l.next_floor >= b.ceiling")"
check "(c) no window of B's was revoked" 0 "$(q -c "SELECT count(*) FROM cosid.window_history WHERE owner_role = 'keeper_b' AND ended_how = 'revoked'")"
wait_for 60 "8 of the hoarder's renewals after the revoke" bash -c \
    "awk -v t=$revoked_at '\$1 > t { n++ } END { print ((n >= 8) ? \"t\" : \"f\") }' '$base/renewals'" >/dev/null
touch "$base/stop"; wait "$renewer"
after=$(awk -v t="$revoked_at" '$1 > t { n++; s += $2 } END { print n + 0, s + 0 }' "$base/renewals")
echo "# the hoarder's renewals begun after the revoke, and how many renewed: $after"
check "(c) the hoarder's renewals after the revoke renew nothing" 0 "${after#* }"
new_windows f 2

# (d)
check "(d) B's failed calls in all" 0 "$(failed)"
check "(d) B's ids: none twice" "0 $(( 20 * (1 + 6 + 3 + 1 + 2) ))" "$(qb -c "SELECT count(*) - count(DISTINCT (ns, id)) || ' ' || count(*) FROM ids WHERE id IS NOT NULL")"
assert_store_verified "$DIR" "$PORT" postgres "S"
exit $FAIL

#!/usr/bin/env bash
# The store's lock order (cosid.store_state, then cosid.fork_declared, then cosid.lease: see
# cosid._store_state_lock) under the two races where an administrator's call and the keeper's
# took them in opposite orders, each stopped at the exact point by a barrier in a trigger:
#   bash test/e2e/lock_order.sh WORKDIR
# 1. cosid_store_follow_timeline(restored => true) has declared the fork and written the
#    cosid.fork file, and not yet recorded the file's fork: the keeper finds the file then and
#    declares it too.
# 2. A pass lease by lease (a release and a renewal, cosid.lease_pass) has written its first
#    lease row when a fork is declared and cosid_fork_acknowledge() takes the store's state and
#    waits for the lease rows; the pass then looks at the state again for its renewal.
# 3. The same pass while cosid.revoke waits for its row, and a restore's record of the state
#    arrives: the pass's renewal would raise, and the raise wait for the revoke.
# Before the order was kept, each ended in "deadlock detected" (the administrator's call the
# victim: after 1, the store refused every grant until a second acknowledgment).
# Checks: the administrator's calls succeed; the keeper's side waits (1) or, holding lease rows,
# fails to serialize (40001) at once; no deadlock in the server's log; ids go on;
# cosid_verify().
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
DIR="${1:-/tmp/cosid-e2e}/lock_order"; PORT=${PORT:-28470}
node_up main "$DIR" "$PORT" "cosid.ttl = '12s'" "deadlock_timeout = '200ms'"
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('a', slot_bits => 4)" \
  -c "SELECT cosid_namespace_create('p', slot_bits => 4)" >/dev/null
# The keeper issues from this store (its record names it): a declared copy is then a fork.
wait_for 20 "a first id" q -c "SELECT cosid_next('a') > 0" >/dev/null
wait_for 20 "the store's record of its issuer" \
    q -c "SELECT bool_or(issuer_incarnation IS NOT NULL) FROM cosid.store_state" >/dev/null
# A session named NAME (its application_name) stops in this trigger until the barrier opens.
q -c "CREATE FUNCTION public.stop_at_barrier() RETURNS trigger LANGUAGE plpgsql AS \$\$
      BEGIN
          IF current_setting('application_name') = TG_ARGV[0] THEN
              PERFORM pg_advisory_lock_shared(TG_ARGV[1]::bigint);
              PERFORM pg_advisory_unlock_shared(TG_ARGV[1]::bigint);
          END IF;
          RETURN NEW;
      END \$\$" >/dev/null
deadlocks() { grep -c "deadlock detected" "$(node_log main)" || true; }
# waiting NAME: "t" once the session named NAME (or the keeper) waits for a heavyweight lock
waiting() { q -c "SELECT count(*) > 0 FROM pg_stat_activity WHERE (application_name = '$1' OR backend_type = '$1')
                     AND wait_event_type = 'Lock'"; }

echo "# 1. a copy declared (restored => true) while the keeper finds its cosid.fork file"
q -c "CREATE TRIGGER stop_declare BEFORE INSERT ON cosid.fork_declared FOR EACH ROW
      EXECUTE FUNCTION public.stop_at_barrier('declare', '4201')" >/dev/null
barrier_close 4201
q -c "SET application_name = 'declare'" -c "SELECT cosid_store_follow_timeline(restored => true)" \
    > "$DIR/declare.out" 2>&1 &
declare_pid=$!
wait_for 30 "the declaration at the barrier (the file written, its fork not yet recorded)" barrier_waiters 1 >/dev/null
# The keeper looks for the file every pass: it finds it, and waits for the declaration.
keeper_waited=$(wait_for 30 "the keeper waiting on the declaration" waiting "cosid keeper")
barrier_open
declare_rc=0; wait "$declare_pid" || declare_rc=$?
check_true "the keeper found the file while the declaration was open, and waited" "$keeper_waited"
check "cosid_store_follow_timeline(restored => true) succeeded" "0" "$declare_rc"
sed 's/^/#   /' "$DIR/declare.out" | grep -v NOTICE | head -3
# The keeper's declaration then finds the fork recorded, and the store refuses until acknowledged.
wait_for 30 "the keeper's word on the data directory" q -c "SELECT count(*) >= 1 FROM cosid.fork_declared" >/dev/null
q -c "DROP TRIGGER stop_declare ON cosid.fork_declared" >/dev/null
ack=$(q -c "SELECT cosid_fork_acknowledge()" 2>&1)
check "cosid_fork_acknowledge() after it: acknowledged" "fork acknowledged" "$(grep -o "fork acknowledged" <<<"$ack")"
check "no deadlock in race 1" 0 "$(deadlocks)"
check_true "ids again after the acknowledgment" \
    "$(wait_for 30 "an id after the acknowledgment" q -c "SELECT cosid_next('a') > 0")"

echo "# 2. a fork acknowledged while a pass lease by lease holds its first lease row"
# (the acknowledgment freed the keeper's lease and cleared the store's issuer: its next acquire
# records it again, and a copy declared then is a fork again)
wait_for 30 "the keeper recorded as the store's issuer again" \
    q -c "SELECT bool_or(issuer_incarnation IS NOT NULL) FROM cosid.store_state" >/dev/null
q -c "CREATE TRIGGER stop_pass BEFORE UPDATE ON cosid.lease FOR EACH ROW
      EXECUTE FUNCTION public.stop_at_barrier('pass', '4202')" >/dev/null
inc=00000000-0000-0000-0000-0000000000c1
# pass_at_barrier OWNER1 OWNER2: two leases of one incarnation held by hand, as a keeper holds
# them, then its pass (a release first: lease by lease, cosid.lease_pass) in the background,
# stopped at the barrier on its release's row (locked: a BEFORE trigger runs on the locked row);
# sets pass_pid and s1, the released slot
pass_at_barrier() {
    local f1 fl1 s2 f2
    IFS='|' read -r s1 f1 fl1 < <(q -c "SELECT slot, fence, floor FROM cosid.acquire('p', '$1', '$inc', 60000)")
    IFS='|' read -r s2 f2 _ < <(q -c "SELECT slot, fence, floor FROM cosid.acquire('p', '$2', '$inc', 60000)")
    barrier_close 4202
    q -c "SET application_name = 'pass'" -c "SELECT ord, fence FROM cosid.lease_pass('$inc', 60000,
            ARRAY[true, false], ARRAY['p', 'p'], ARRAY[$s1, $s2], ARRAY[$f1, $f2]::bigint[], ARRAY[$fl1, 0]::bigint[])" \
        > "$DIR/pass.out" 2>&1 &
    pass_pid=$!
    wait_for 30 "the pass at the barrier (its release's row)" barrier_waiters 1 >/dev/null
}
# pass_refused: the pass's renewal found the state unsettled after its release's row: it failed
# to serialize at once (40001), and waited for nothing
pass_refused() {
    local rc=0
    wait "$pass_pid" || rc=$?
    echo "# the pass: rc $rc; $(grep -m1 ERROR "$DIR/pass.out")"
    check "the pass: refused at once, to be asked again (40001)" "1 1" \
        "$rc $(grep -c "state changed while this transaction held lease rows" "$DIR/pass.out")"
}
pass_at_barrier o1 o2
# A copy declared and committed meanwhile (its keeper then declares the file), then acknowledged:
# the acknowledgment takes the store's state and waits for the pass's lease rows.
check "a copy declared while the pass holds its row" "0" \
    "$(q -c "SET statement_timeout = '30s'" -c "SELECT cosid_store_follow_timeline(restored => true)" >/dev/null 2>&1; echo $?)"
q -c "SET application_name = 'ack'" -c "SET statement_timeout = '60s'" -c "SELECT cosid_fork_acknowledge()" \
    > "$DIR/ack.out" 2>&1 &
ack_pid=$!
ack_waited=$(wait_for 40 "the acknowledgment waiting for the pass's lease rows" waiting ack)
barrier_open
pass_refused
ack_rc=0; wait "$ack_pid" || ack_rc=$?
check_true "the acknowledgment waited for the pass" "$ack_waited"
check "cosid_fork_acknowledge() succeeded" "0 fork acknowledged" "$ack_rc $(grep -o "fork acknowledged" "$DIR/ack.out")"
sed 's/^/#   /' "$DIR/ack.out" | head -3
check "no deadlock in race 2" 0 "$(deadlocks)"

echo "# 3. a restore's record of the store's state loaded while a pass holds its first lease row and a revoke waits for it"
pass_at_barrier o3 o4
# The revoke looks at the state (settled) and waits for the pass's row.
q -c "SET application_name = 'revoke'" -c "SET statement_timeout = '60s'" -c "SELECT slot FROM cosid.revoke('p', $s1)" \
    > "$DIR/revoke.out" 2>&1 &
revoke_pid=$!
revoke_waited=$(wait_for 30 "the revoke waiting for the pass's row" waiting revoke)
# a second record of the state, as the dump of a store no server issued from brings (a shared
# store's; cosid_store_follow_timeline(restored => true) writes the same): the next store
# call must raise
q -c "UPDATE cosid.store_state SET issuer_incarnation = NULL" -c "INSERT INTO cosid.store_state (system_identifier, timeline, raise_floors_on_new_timeline, max_ttl_ms,
                                     max_tolerance_ms, failovers, raised_at_ms, raise_count)
      SELECT 0, 0, true, s.max_ttl_ms, s.max_tolerance_ms, s.failovers, s.raised_at_ms, s.raise_count
        FROM cosid.store_state s" >/dev/null
barrier_open
pass_refused
revoke_rc=0; wait "$revoke_pid" || revoke_rc=$?
check_true "the revoke waited for the pass's row" "$revoke_waited"
check "the revoke succeeded" "0" "$revoke_rc"
sed 's/^/#   /' "$DIR/revoke.out" | grep -m2 ERROR || true
check "no deadlock in race 3" 0 "$(deadlocks)"
q -c "DROP TRIGGER stop_pass ON cosid.lease" >/dev/null
check_true "the next store call raised: one record of the state" \
    "$(wait_for 30 "the raise" q -c "SELECT count(*) = 1 FROM cosid.store_state")"
check_true "ids again after it" "$(wait_for 30 "an id after the acknowledgment" q -c "SELECT cosid_next('a') > 0")"
assert_store_verified "$DIR" "$PORT" postgres
exit $FAIL

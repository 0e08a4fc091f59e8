#!/usr/bin/env bash
# A transient error of the keeper's own statement (a lock on the store's tables, its
# statement timeout on a loaded machine) is tried again until the caller's
# cosid.acquire_timeout, and its SQLSTATE never reaches the caller:
#   bash test/e2e/keeper_transient.sh WORKDIR
# For a static slot's first window (cosid.static_ceiling locked) and a lease's first window
# (cosid.lease locked):
#   a) a lock shorter than cosid.acquire_timeout: the call waits and gets its id;
#   b) a lock longer than it: the call fails with ZC006 naming what was tried, never 57014
#      (query_canceled: it reads as a cancel of the caller's own statement, and PL/pgSQL's
#      WHEN OTHERS does not catch it).
#   c) every write of one namespace's leases slower than the store bound (200 ms against
#      ttl / 6 = 166 ms, as a loaded disk makes each commit): the first call gets its id, and
#      4 s of calls (a dozen renewals) all get theirs, because a statement that ran out of its
#      bound gets ttl / 3 at its next try for that namespace.  (cosid.acquire_timeout 3 s: on
#      a loaded machine a try of 200 ms of sleep can run out of 333 ms too; before the fix
#      every try ran out, whatever the timeout.)
#   d) every write of namespace k stuck (60 s): k's calls fail with ZC006 within their
#      timeout, while namespace j, renewed by the same keeper, issues for 4 s without a failure
#      (a stuck kind of call goes back to the base bound after one longer try).
# Before the fix (main at c16ef0e) a static slot's first call failed at once with 57014 when
# the keeper's write of cosid.static_ceiling ran past the store bound (ttl / 6): under load,
# clock_jump.sh's clients died that way.  Before the second (main at bd2fc31) c) failed with
# ZC006: every try of the acquire ran out of the same bound (clock_jump.sh's leased clients
# failed for 10 s on a loaded CI machine).
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/keeper_transient"; PORT=55493
node_up main "$DIR" "$PORT" "cosid.ttl = '1s'" "cosid.static_slots = 's:3'" "cosid.state_file = 'cosid.state'"
trap 'kill $(jobs -p) 2>/dev/null || true; barrier_open 2>/dev/null || true; node_stop_all immediate' EXIT
q -c "CREATE EXTENSION cosid" \
  -c "SELECT cosid_namespace_create('s', slot_bits => 4)" \
  -c "SELECT cosid_namespace_create('j', slot_bits => 4)" \
  -c "SELECT cosid_namespace_create('k', slot_bits => 4)" >/dev/null

# call_while_locked TABLE NS TIMEOUT OUT: TABLE locked (ACCESS EXCLUSIVE) until the call of
# cosid_next(NS) with cosid.acquire_timeout TIMEOUT has waited 1.5 s or ended; its output
# (VERBOSITY verbose) in OUT.  Prints how long the call took, in ms.
call_running() {  # call_running PID: t once the call of PID runs cosid_next, or has ended
    if ! kill -0 "$1" 2>/dev/null; then echo t; return; fi
    q -c "SELECT count(*) > 0 FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'SELECT cosid_next(%'"
}
call_waited() {  # call_waited PID SINCE_MS: t once the call of PID has ended or 1.5 s have passed since SINCE_MS
    if ! kill -0 "$1" 2>/dev/null || [ $(( $(now_ms) - $2 )) -ge 1500 ]; then echo t; fi
}
call_while_locked() {
    local table=$1 ns=$2 timeout=$3 out=$4 pid t0
    barrier_close 71
    q -c "BEGIN" -c "LOCK TABLE $table" -c "SELECT 'go' FROM pg_advisory_lock_shared(71)" -c "COMMIT" >/dev/null 2>&1 &
    wait_for 20 "the lock on $table" barrier_waiters 1 >/dev/null
    t0=$(now_ms)
    q -v VERBOSITY=verbose -c "SET cosid.acquire_timeout = '$timeout'" -c "SELECT cosid_next('$ns') > 0" >"$out" 2>&1 &
    pid=$!
    # 1.5 s from when the call runs, not from when its psql was started: on a loaded machine
    # psql and its backend can take longer than that to start, and the lock was then gone
    # before the call began (it got its id: the scenario did not happen)
    wait_for 20 "the call running, or ended" call_running "$pid" >/dev/null
    local t1; t1=$(now_ms)
    wait_for 20 "the call waiting 1.5 s, or ended" call_waited "$pid" "$t1" >/dev/null
    barrier_open
    wait "$pid" 2>/dev/null || true
    echo $(( $(now_ms) - t0 ))
}

# calls_for_4s NS: cosid_next(NS) every 20 ms for 4 s in one session (cosid.acquire_timeout
# 3 s); prints "failed calls: N" (or, when the session itself failed, what psql said).
calls_for_4s() {
    local out
    out=$(q 2>&1 <<SQL || true
SET cosid.acquire_timeout = '3s';
DO \$\$
DECLARE
    until timestamptz := clock_timestamp() + interval '4 s';
    failed int := 0;
BEGIN
    WHILE clock_timestamp() < until LOOP
        BEGIN
            PERFORM cosid_next('$1');
        EXCEPTION WHEN others THEN
            failed := failed + 1;
            RAISE NOTICE 'failed: % %', SQLSTATE, SQLERRM;
        END;
        PERFORM pg_sleep(0.02);
    END LOOP;
    RAISE NOTICE 'failed calls: %', failed;
END \$\$;
SQL
)
    grep -o 'failed calls: [0-9]*' <<<"$out" || echo "$out"
}

echo "# a) locks shorter than cosid.acquire_timeout (10 s): waited out"
took_s=$(call_while_locked cosid.static_ceiling s 10s "$DIR/a_static.out")
check "a) a static slot's first id while cosid.static_ceiling was locked ($took_s ms)" "t" "$(cat "$DIR/a_static.out")"
check_true "a) the keeper met the lock: its write timed out, and was tried again" \
    "$(grep -q "cosid could not .*static_ceiling.*statement timeout" "$DIR/server.log" && echo t || echo f)"
took=$(call_while_locked cosid.lease j 10s "$DIR/a_lease.out")
check "a) a leased namespace's first id while cosid.lease was locked ($took ms)" "t" "$(cat "$DIR/a_lease.out")"
check_true "a) both calls waited for the lock (more than 1 s)" "$([ "$took_s" -ge 1000 ] && [ "$took" -ge 1000 ] && echo t || echo f)"

echo "# b) locks longer than cosid.acquire_timeout (1 s): ZC006, not 57014"
q -c "SELECT cosid_release('s', 3)" -c "SELECT cosid_release('j', slot) FROM cosid_leases('j') WHERE state = 'held'" >/dev/null
wait_for 20 "no window held" q -c "SELECT count(*) = 0 FROM cosid_pool()" >/dev/null
call_while_locked cosid.static_ceiling s 1s "$DIR/b_static.out" >/dev/null
check "b) a static slot: SQLSTATE" "ZC006" "$(sqlstate_of "$(cat "$DIR/b_static.out")")"
check_true "b) a static slot: the error names the slot and what was tried" \
    "$(grep -q 'could not open a window on static slot 3 of namespace "s"' "$DIR/b_static.out" \
       && grep -q 'DETAIL:  Tried [0-9]* time' "$DIR/b_static.out" && echo t || echo f)"
call_while_locked cosid.lease j 1s "$DIR/b_lease.out" >/dev/null
check "b) a leased namespace: SQLSTATE" "ZC006" "$(sqlstate_of "$(cat "$DIR/b_lease.out")")"
check "after the locks: both namespaces issue" "t|t" "$(q -c "SELECT cosid_next('s') > 0" -c "SELECT cosid_next('j') > 0" | paste -sd'|')"

echo "# c) each transaction writing a lease of namespace k takes 200 ms (the store bound is 166 ms)"
q <<'SQL' >/dev/null
CREATE FUNCTION slow_k() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.namespace = 'k' AND current_setting('test.slept', true) IS DISTINCT FROM txid_current()::text THEN
        PERFORM set_config('test.slept', txid_current()::text, true);
        PERFORM pg_sleep(0.2);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER slow_k BEFORE INSERT OR UPDATE ON cosid.lease FOR EACH ROW EXECUTE FUNCTION slow_k();
SQL
out=$(q -v VERBOSITY=verbose -c "SET cosid.acquire_timeout = '3s'" -c "SELECT cosid_next('k') > 0" 2>&1 || true)
check "c) the first id of k" "t" "$out"
check "c) 4 s of calls in k while every lease write is slow (renewals included)" "failed calls: 0" "$(calls_for_4s k)"
check_true "c) the keeper met the bound: a write of k's lease ran out of 166 ms and was tried again" \
    "$(grep -q 'cosid: acquire in namespace "k" failed: canceling statement due to statement timeout' "$DIR/server.log" && echo t || echo f)"

echo "# d) every write of namespace k stuck (60 s), while j issues"
q -c "CREATE OR REPLACE FUNCTION slow_k() RETURNS trigger LANGUAGE plpgsql AS \$\$
      BEGIN IF NEW.namespace = 'k' THEN PERFORM pg_sleep(60); END IF; RETURN NEW; END \$\$" >/dev/null
q -c "SELECT cosid_next('j') > 0" >/dev/null
# k's lease: renewals now stuck; new calls of k wait for it, then fail
( q -v VERBOSITY=verbose -c "SET cosid.acquire_timeout = '3s'" -c "SELECT cosid_release('k', slot) FROM cosid_pool() WHERE namespace = 'k'" \
    -c "SELECT cosid_next('k')" >"$DIR/d_k.out" 2>&1 ) &
kpid=$!
out=$(calls_for_4s j)
wait "$kpid" 2>/dev/null || true
check "d) 4 s of calls in j while k's writes are stuck" "failed calls: 0" "$out"
check "d) a call of k meanwhile fails, with ZC006" "ZC006" "$(sqlstate_of "$(cat "$DIR/d_k.out")")"
q -c "DROP TRIGGER slow_k ON cosid.lease" >/dev/null
assert_store_verified "$DIR" "$PORT" postgres "the store"
exit $FAIL

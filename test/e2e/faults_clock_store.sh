#!/usr/bin/env bash
# Faults of clocks and of the store while clients insert (docs/faults.md): the rows of
# DESIGN.md section 1 with cosid.clock_offset / cosid.store_clock_offset, the store's
# rows locked for longer than a window, and bad input through every function and setting.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
fault_server "${1:-/tmp/cosid-e2e}/faults_clock_store" 55451
trap 'touch "$DIR/stop"; kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT
only_errors() {  # only_errors PHASE CODES...: every client error of the phase is one of CODES
    local bad
    bad=$(cat "$DIR"/clients/"$1".*.log | awk '$2 != "ok" {print $2}' | sort -u | grep -vxF -f <(printf '%s\n' "${@:2}") || true)
    check "phase $1: only expected errors (${*:2})" "" "$bad"
}

ok_in() {  # ok_in PHASE [AFTER_MS]: "t" once a client of the phase inserted (at or after AFTER_MS)
    [ -n "$(cat "$DIR"/clients/"$1".*.log 2>/dev/null | awk -v t="${2:-0}" '$2 == "ok" && $1 >= t' | head -1)" ] && echo t || true
}
# under_setting NAME VALUE PHASE CLIENTS SECONDS [COMMAND...]: clients insert while the
# setting holds: SECONDS, and then (when given) until COMMAND prints "t" (deadline 60 s).
under_setting() {
    set_conf "$1" "$2"
    PHASE=$3; start_clients "$4"; sleep "$5"
    [ $# -gt 5 ] && wait_for 60 "phase $3: $*" "${@:6}" >/dev/null
    stop_clients
    reset_conf "$1"
    echo "# $(oks_of "$3") inserts ok; errors: $(errors_of "$3")"
}

PHASE=warmup; start_clients 4; sleep 1.5; stop_clients

echo "# 4a. host clock ahead of the store by more than the tolerance (+2000 ms, tolerance 300 ms)"
waits0=$(stat_of waits_at_ceiling); skew0=$(stat_of clock_skew_events)
ahead_seen() { [ "$(stat_of "waits_at_ceiling > $waits0 AND clock_skew_events > $skew0")" = t ] && ok_in clock_ahead; }
under_setting cosid.clock_offset 2000 clock_ahead 4 4 ahead_seen
check_true "generators reached the ceiling early and waited for renewals" "$(stat_of "waits_at_ceiling > $waits0")"
check_true "the keeper counted clock-skew events" "$(stat_of "clock_skew_events > $skew0")"
check_true "ids kept coming" "$([ "$(oks_of clock_ahead)" -gt 0 ] && echo t)"
only_errors clock_ahead ZC002

echo "# 4b. host clock behind the store (-1500 ms): a new holder waits to pass its floor"
under_setting cosid.clock_offset -1500 clock_behind 4 4 ok_in clock_behind
check_true "ids kept coming (after waiting for the floor)" "$([ "$(oks_of clock_behind)" -gt 0 ] && echo t)"
only_errors clock_behind ZC004

echo "# 4c. host clock far behind (-10 s): callers wait, then fail clearly; back to normal after"
under_setting cosid.clock_offset -10000 clock_far_behind 3 3
only_errors clock_far_behind ZC004
t0=$(now_ms); PHASE=clock_fixed; start_clients 3; sleep 2
wait_for 60 "an insert once the clock was fixed" ok_in clock_fixed "$t0" >/dev/null; stop_clients
rec=$(first_ok_after clock_fixed "$t0"); echo "# first insert after the clock was fixed: $(( ${rec:-0} - t0 )) ms"
check_true "service back once the clock is right" "$([ -n "$rec" ] && echo t)"

echo "# 4d. store clock jumps forward (+3 s) and back (0): leases expire later/earlier, windows only grow"
PHASE=store_jump; start_clients 4; sleep 1
set_conf cosid.store_clock_offset 3000; sleep 2
set_conf cosid.store_clock_offset -2000; sleep 2
reset_conf cosid.store_clock_offset; sleep 1
stop_clients
echo "# $(oks_of store_jump) inserts ok; errors: $(errors_of store_jump)"
check "no window's ceiling ever went down" 0 "$(q -c "
    SELECT count(*) FROM (SELECT ceiling, lag(ceiling) OVER (PARTITION BY namespace, slot, fence, incarnation ORDER BY at) AS prev
                          FROM observed) s WHERE ceiling < prev")"
only_errors store_jump ZC002

echo "# 5. the store unreachable for the keeper for longer than a window: lease rows locked for 6 s"
fail0=$(stat_of renewal_failures)
logged0=$(grep -c 'LOG:  cosid: renewal of slot' "$DIR/server.log" || true)
back0=$(grep -c 'LOG:  cosid: renewals succeed again' "$DIR/server.log" || true)
# The lease must be held when the rows are locked: on a loaded machine the clients (a
# connection per statement) left it idle for the 1 s of the fault server, it was released, and
# the locked rows then stopped an acquire instead of a renewal (0 renewal failures in 67 s).
set_conf cosid.pool_idle_timeout 10s
# shellcheck disable=SC2034  # PHASE: read by the clients of test/lib/faults.sh
PHASE=store_locked; start_clients 4
wait_for 60 "the clients' lease of 'f'" q -c "SELECT count(*) > 0 FROM cosid_pool() WHERE namespace = 'f' AND state = 'active'" >/dev/null
# The locker holds the rows at a barrier: for 6 s, and then until the renewals have failed
# and a caller got its error (the windows ran out), however slow the machine.
barrier_close 22005
# (It prints the server's time just before its COMMIT: the rows are free a moment later.  A
# time taken after the COMMIT came after the keeper's renewal that had waited for the rows:
# its row in observed, stamped as it ran, was then before it, and the next one ttl/3 later
# not always there yet.)
q -c "BEGIN" \
    -c "SELECT slot FROM cosid.lease WHERE namespace = 'f' FOR UPDATE" \
    -c "SELECT 'go' FROM pg_advisory_lock_shared(22005)" \
    -c "SELECT 'unlocked ' || to_char(clock_timestamp(), 'YYYY-MM-DD HH24:MI:SS.US')" -c "COMMIT" > "$DIR/locker.out" &
locker=$!
wait_for 60 "the locker holding the lease rows" barrier_waiters 1 >/dev/null
t_lock=$(now_ms)
sleep 6
err_after() { [ -n "$(cat "$DIR"/clients/store_locked.*.log | awk -v t="$t_lock" '$2 != "ok" && $1 >= t' | head -1)" ] && echo t || true; }
wait_for 60 "renewals to fail while locked" stat_of "renewal_failures > $fail0" >/dev/null
wait_for 60 "a caller's error while the store is locked" err_after >/dev/null
barrier_open
wait $locker
t_unlock=$(now_ms)
wait_for 60 "an insert after the unlock" ok_in store_locked "$t_unlock" >/dev/null
wait_for 30 "the log saying renewals succeed again" \
    bash -c "[ \$(grep -c 'LOG:  cosid: renewals succeed again' '$DIR/server.log') -gt $back0 ] && echo t" >/dev/null
stop_clients
reset_conf cosid.pool_idle_timeout
first_err=$(cat "$DIR"/clients/store_locked.*.log | awk -v t="$t_lock" '$2 != "ok" && $1 >= t {print $1}' | sort -n | awk 'NR == 1')
first_ok=$(first_ok_after store_locked "$t_unlock")
echo "# locked $(( t_unlock - t_lock )) ms; first error $(( ${first_err:-t_lock} - t_lock )) ms after the lock (window left + acquire_timeout); first insert $(( ${first_ok:-0} - t_unlock )) ms after the unlock"
echo "# errors: $(errors_of store_locked)"
check_true "renewals failed while locked" "$(stat_of "renewal_failures > $fail0")"
during=$(cat "$DIR"/clients/store_locked.*.log | awk -v a=$(( t_lock + 200 )) -v b="$t_unlock" '$2 == "ok" && $1 > a && $1 < b' | wc -l)
echo "# inserts that succeeded while the store was locked: $during"
check_true "generators went on inside their windows while the store was locked" "$([ "$during" -gt 0 ] && echo t)"
check_true "callers then got a clear error" "$([ -n "$first_err" ] && echo t)"
# The keeper's own answer, in the server's clock (the trigger's row of its first renewal or
# acquire after the COMMIT): a client's first insert also counts its connection and psql, which
# a loaded machine made longer than the keeper's whole recovery.
unlocked_at=$(sed -n 's/^unlocked //p' "$DIR/locker.out")
resumed_ms=$(q -c "SELECT (extract(epoch FROM min(at) - '$unlocked_at'::timestamptz) * 1000)::bigint
                   FROM observed WHERE namespace = 'f' AND incarnation IS NOT NULL AND at >= '$unlocked_at'::timestamptz")
echo "# the keeper's first renewal or acquire ${resumed_ms:-(none)} ms after the rows were free"
# (5 s: the keeper's backoff between tries is at most a second; 0.3 to 1.5 s on a quiet
# machine, 2.5 s on one loaded far past its cores; a keeper that backs off toward the ttl or
# beyond took 13 to 20 s)
check_true "the keeper served again within 5 s of the store coming back" "$([ -n "$resumed_ms" ] && [ "$resumed_ms" -le 5000 ] && echo t)"
# ZC003 too: a caller whose lease ran out while every lease row was locked waits for an acquire,
# and the store's acquire passes over locked rows (SKIP LOCKED), so it answers that no slot is
# free; the caller's error then says the namespace is exhausted.
only_errors store_locked ZC002 ZC003 ZC006
logged=$(( $(grep -c 'LOG:  cosid: renewal of slot' "$DIR/server.log" || true) - logged0 ))
echo "# $(stat_of "renewal_failures - $fail0") renewal failures, $logged of them in the log at LOG level"
check_true "the outage is logged once or twice, not once per failure" "$([ "$logged" -ge 1 ] && [ "$logged" -le 2 ] && echo t)"
check_true "the log says when renewals succeed again" \
    "$([ "$(grep -c 'LOG:  cosid: renewals succeed again' "$DIR/server.log" || true)" -gt "$back0" ] && echo t)"

store_md5() {
    q -c "SELECT (SELECT md5(string_agg(n::text, ',' ORDER BY n.name)) FROM cosid.namespace n)
               || (SELECT md5(string_agg(l::text, ',' ORDER BY l.namespace, l.slot)) FROM cosid.lease l)"
}
echo "# 9. bad input through every function and setting: clear errors, nothing changed"
q -c "CREATE ROLE app LOGIN" >/dev/null
# let the pool go idle and be released, so that no renewal changes the store meanwhile
for _ in $(seq 1 50); do
    [ "$(q -c "SELECT count(*) FROM cosid.lease WHERE incarnation IS NOT NULL")" = 0 ] && break; sleep 0.2
done
before=$(store_md5)
auto_before=$(md5sum < "$DIR/data/postgresql.auto.conf")
bad=(
  "SELECT cosid_next('')" "SELECT cosid_next(repeat('x', 100))" "SELECT cosid_next('f; DROP TABLE t')"
  "SELECT cosid_next(NULL::text)" "SELECT cosid_parse(-5)" "SELECT cosid_parse(NULL)" "SELECT cosid_parse(1, NULL)"
  "SELECT cosid_parse(1, 'nope')" "SELECT cosid_release('f', -1)" "SELECT cosid_release('f', 2147483647)"
  "SELECT cosid_release(NULL, NULL)" "SELECT cosid_release('nope', 0)"
  "SELECT cosid_namespace_create('x', 2147483647)" "SELECT cosid_namespace_create('x', -2147483648)"
  "SELECT cosid_namespace_create('x', tolerance => 'garbage')" "SELECT cosid_namespace_create('x', tolerance => '-1 ms')"
  "SELECT cosid_namespace_create('x', tolerance => '100 years')" "SELECT cosid_namespace_create('x', epoch => 'infinity')"
  "SELECT cosid_namespace_create('x', epoch => '2300-01-01', slot_bits => 16, sequence_bits => 16)"
  "SELECT cosid_namespace_create('f', slot_bits => 7)" "SELECT cosid_namespace_create(repeat('y', 64))"
  "SELECT cosid_namespace_create('x', unit => NULL)" "SELECT * FROM cosid_leases('')"
  "SELECT * FROM cosid.acquire('f', 'k', NULL, 1000)" "SELECT * FROM cosid.acquire('f', 'k', gen_random_uuid(), 9223372036854775807)"
  "SELECT * FROM cosid.renew('f', 0, gen_random_uuid(), -1, -1)" "SELECT * FROM cosid.release('f', 0, gen_random_uuid(), 1, NULL)"
  "SELECT * FROM cosid.revoke('f', NULL)" "SELECT * FROM cosid.revoke('f', 99999)"
  "SELECT cosid.layout_check(41, 10, 12, 0, NULL)" "SELECT cosid.unpack(1, 99, 10, 12, 0, 'ms')"
  "ALTER SYSTEM SET cosid.ttl = 'abc'" "ALTER SYSTEM SET cosid.ttl = '0'" "ALTER SYSTEM SET cosid.ttl = '100d'"
  "ALTER SYSTEM SET cosid.preferred_slot = 70000" "ALTER SYSTEM SET cosid.pool_idle_timeout = -1"
  "ALTER SYSTEM SET cosid.namespace = ''" "ALTER SYSTEM SET cosid.acquire_timeout = '1 fortnight'"
  "ALTER SYSTEM SET cosid.clock_offset = 999999999" "ALTER SYSTEM SET cosid.owner_key = '$(printf 'k%.0s' $(seq 1 201))'"
  "SET cosid.namespace = 'a b'" "SET cosid.acquire_timeout = -2"
)
unclear=0
for stmt in "${bad[@]}"; do
    out=$(q -v VERBOSITY=verbose -c "$stmt" 2>&1 || true)
    if ! grep -qE 'ERROR:  [0-9A-Z]{5}: ' <<<"$out"; then echo "#   no clear error for: $stmt => $out"; unclear=$((unclear + 1)); fi
done
app_bad=("SELECT cosid_release('f', 0)" "SELECT cosid_namespace_create('z')" "UPDATE cosid.lease SET fence = 0"
         "SELECT * FROM cosid.revoke('f', 0)" "SET cosid.clock_offset = 1" "SET cosid.store_clock_offset = 1"
         "SELECT * FROM cosid.acquire('f', 'k', gen_random_uuid(), 1000)")
for stmt in "${app_bad[@]}"; do
    out=$(q -U app -v VERBOSITY=verbose -c "$stmt" 2>&1 || true)
    grep -q 'ERROR:  42501' <<<"$out" || { echo "#   no 42501 for role app: $stmt => $out"; unclear=$((unclear + 1)); }
done
check "every bad call ($(( ${#bad[@]} + ${#app_bad[@]} ))) failed with a clear SQLSTATE" 0 "$unclear"
after=$(store_md5)
check "the store is unchanged" "$before" "$after"
check "postgresql.auto.conf is unchanged" "$auto_before" "$(md5sum < "$DIR/data/postgresql.auto.conf")"
check "no namespace x was created" 0 "$(q -c "SELECT count(*) FROM cosid.namespace WHERE name <> 'default' AND name <> 'f'")"

final_checks
exit $FAIL

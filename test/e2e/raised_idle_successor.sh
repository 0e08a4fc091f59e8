#!/usr/bin/env bash
# A short cosid.pool_idle_timeout does not hand back a lease whose window is still empty
# while its backends wait for it to open:
#   bash test/e2e/raised_idle_successor.sh WORKDIR
# The store's raise frees the held lease A; its successor B is asked for at once and granted
# above the raised floor, 10 s ahead (max_ttl 8 s + 2 x 1 s): empty, nothing can be claimed
# on it, until the store's clock is within ttl + tolerance (2.3 s) of that floor.  A goes on
# to its ceiling, 2 s or so; then every backend waits on B.  A lease on which nothing was
# claimed for the idle timeout (here 1 s; 2 s for a fresh one) goes back to the store, but B
# holds no tick: released, its backends need another lease, granted on the same floor, with
# a shorter wait allowed for that floor (measured from the later grant), and the callers
# failed with ZC004 before the window opened.
# Checks: no error in 4 clients (50 ids per statement, a connection each) through the raise
# and the wait; no lease granted after the successor, not one every few seconds;
# zero duplicates, every id inside a window the store handed to its slot, cosid_verify().
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/raised_idle_successor"; PORT=${PORT:-27048}
node_stop main immediate  # a run killed before its trap
fault_server "$DIR" "$PORT"   # ttl 2 s, cosid.pool_idle_timeout 1 s, namespace f (tolerance 300 ms)
trap 'touch "$DIR/stop"; kill $(jobs -p) 2>/dev/null || true; node_stop main immediate' EXIT
q -c "SELECT cosid_store_settings(max_ttl => '8s', max_tolerance => '1s')" >/dev/null
# shellcheck disable=SC2034  # PHASE: read by the clients of test/lib/faults.sh
PHASE=raise; start_clients 4
wait_for 20 "the clients' first rows" q -c "SELECT count(*) >= 500 FROM t" >/dev/null
raised_floor=$(( $(now_ms) + 10000 ))
raise_store_floors
wait_for 20 "the keeper to find its lease freed" q -c "SELECT count(*) > 0 FROM cosid_pool() WHERE state = 'freed'" >/dev/null
# Counted from the successor's grant on: before the raise, clients a loaded machine held up
# for the idle timeout rightly handed a lease back and took another.
check_true "the successor is granted beside the freed lease" \
    "$(wait_for 20 "the successor" q -c "SELECT count(*) > 0 FROM cosid_pool() WHERE state = 'active'")"
acquires=$(q -c "SELECT acquires FROM cosid_stats()")
wait_for 30 "ids above the raised floor" \
    q -c "SELECT count(*) >= 500 FROM t, cosid_parse(t.id, 'f') p WHERE p.ts > to_timestamp($raised_floor / 1000.0)" >/dev/null
stop_clients
check "no error in any client through the raise and the wait for the raised floor" "" "$(errors_of raise)"
{ grep -E "ERROR" "$DIR/server.log" || true; } | head -3 | sed "s/^/#   /"
check "no lease granted after the successor while it waited for its window (it was not handed back)" 0 \
    "$(( $(q -c "SELECT acquires FROM cosid_stats()") - acquires ))"
echo "# $(oks_of raise) statements of 50 ids"
final_checks
exit $FAIL

#!/usr/bin/env bash
# Through a raise of the store's floors, every id of an instance stays larger than every id
# any of its connections committed before the id's statement began (docs/concepts.md):
#   bash test/e2e/raised_order.sh WORKDIR
# The raise frees the held lease A; its backends go on to its ceiling.  Its successor B,
# asked for at once, opens above the raised floor while A still serves.  A connection that
# has issued on A since before the raise (one session, one id every 20 ms) and new
# connections (one id each, every 50 ms) then issue side by side: the new ones must not take
# B while A serves the old one, or the old one's next id is below ids committed before it.
# ttl 6 s = max_ttl, tolerances 1 s: B opens about 1 s after the raise, A ends up to 7 s
# after it.
# Checks: no id below one committed (50 ms margin) before its statement began; ids unique;
# no error; cosid_verify().
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/raised_order"; PORT=${PORT:-27049}
raised_server 6s 6s
lost=$(q -c "SELECT leases_freed FROM cosid_stats()")
raise_store_floors
wait_for 20 "the keeper to find its lease freed" q -c "SELECT leases_freed > $lost FROM cosid_stats()" >/dev/null
# new connections, one id each, for 4 s (the successor opens about 1 s after the raise)
new_ids_for w 4000
# shellcheck disable=SC2154  # client: set by raised_server (test/lib/faults.sh)
stop_id_clients "$client"; status=$CLIENT_STATUS

check "no error (old connection, new connections)" "0 0 0" \
    "$status $(q -c "SELECT count(*) FROM ids WHERE err IS NOT NULL") $(grep -c ERROR "$DIR/new.log" || true)"
check "zero duplicate ids" 0 "$(q -c "SELECT count(id) - count(DISTINCT id) FROM ids")"
echo "# $(q -c "SELECT count(*) FILTER (WHERE who = 'old') || ' ids of the old connection, ' || count(*) FILTER (WHERE who = 'new') || ' of new ones' FROM ids")"
check_order_kept
assert_store_verified "$DIR" "$PORT" postgres "the store"
exit $FAIL

#!/usr/bin/env bash
# cosid_release(namespace, slot) releases every lease of this instance on the slot, also
# when two raises of the store's floors left three there:
#   bash test/e2e/raised_release_all.sh WORKDIR
# The first raise frees the held lease A; its successor B, granted on the same slot, opens
# above the raised floor.  The second raise frees B while A still serves; B's successor C is
# granted on the same slot again.  cosid_release(ns, slot) must hand back C too, or it says
# "released" while C stays held in the store.
# ttl 6 s = max_ttl, tolerances 1 s; a client issues every 20 ms throughout.
# Checks: three leases on the slot before; "released"; none of them held in the store after,
# nor in the pool; ids unique; cosid_verify().
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/raised_release_all"; PORT=${PORT:-27050}
stop_server "$DIR" immediate  # a run killed before its trap
start_server "$DIR" "$PORT" "cosid.ttl = '6s'" "cosid.acquire_timeout = '20s'"
trap 'kill $(jobs -p) 2>/dev/null || true; stop_server "$DIR" immediate' EXIT
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_ttl => '6s', max_tolerance => '1s')" \
  -c "SELECT cosid_namespace_create('w', tolerance => '1s')" >/dev/null
ids_table
id_client w
client=$ID_CLIENT
wait_for 20 "the client's first 50 ids" q -c "SELECT count(*) >= 50 FROM ids" >/dev/null
# the first raise just after a renewal: A then serves longest after it
expires=$(q -c "SELECT expires_at FROM cosid_pool() WHERE namespace = 'w'")
wait_for 10 "a renewal" q -c "SELECT expires_at <> '$expires' FROM cosid_pool() WHERE namespace = 'w'" >/dev/null
raise_store_floors
wait_for 20 "the keeper to find A freed" q -c "SELECT count(*) > 0 FROM cosid_pool() WHERE state = 'freed'" >/dev/null
wait_for 10 "B open" q -c "SELECT count(*) > 0 FROM cosid_pool() WHERE state = 'active' AND ceiling > floor" >/dev/null
raise_store_floors
wait_for 10 "A, B freed and C granted" \
    q -c "SELECT count(*) FILTER (WHERE state = 'freed') = 2 AND count(*) FILTER (WHERE state = 'active') = 1 FROM cosid_pool()" >/dev/null
slot=$(q -c "SELECT slot FROM cosid_pool() WHERE state = 'active'")
fences=$(q -c "SELECT string_agg(fence::text, ',') FROM cosid_pool() WHERE namespace = 'w' AND slot = $slot")
check "three leases of this instance on slot $slot" 3 "$(tr ',' '\n' <<<"$fences" | wc -l)"
check "cosid_release('w', $slot)" released "$(q -c "SELECT cosid_release('w', $slot)")"
check "none of them held in the store" 0 \
    "$(q -c "SELECT count(*) FROM cosid.lease WHERE namespace = 'w' AND slot = $slot AND incarnation IS NOT NULL AND fence IN ($fences)")"
check "none of them in the pool" 0 "$(q -c "SELECT count(*) FROM cosid_pool() WHERE fence IN ($fences) AND state <> 'ended'")"
q -c "INSERT INTO stop DEFAULT VALUES" >/dev/null
status=0; wait "$client" || status=$?
check "no error in the client" "0 0" "$status $(q -c "SELECT count(*) FROM ids WHERE err IS NOT NULL")"
check "zero duplicate ids" 0 "$(q -c "SELECT count(id) - count(DISTINCT id) FROM ids")"
assert_store_verified "$DIR" "$PORT" postgres "the store"
exit $FAIL

#!/usr/bin/env bash
# cosid_release(namespace, slot) releases every lease of this instance on the slot, also
# when two raises of the store's floors left three there:
#   bash test/e2e/raised_release_all.sh WORKDIR
# The first raise frees the held lease A; its successor B, granted on the same slot, opens
# above the raised floor.  The second raise frees B while A still serves; B's successor C is
# granted on the same slot again.  cosid_release(ns, slot) must hand back C too, or it says
# "released" while C stays held in the store.  It is called once per row of cosid_pool(),
# as an operator releasing everything would: the calls after the first, for the same slot in
# the same transaction, must answer "released" too, not revoke the slot from whoever took it
# since (or answer "not held").
# ttl 12 s = max_ttl, tolerances 1 s (A serves 13 s after the first raise: with 6 s, a loaded
# machine's steps outlasted it and C came after A had ended); a client issues every 20 ms.
# Checks: three leases on the slot before; "released"; none of them held in the store after,
# nor in the pool; ids unique; cosid_verify().
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/raised_release_all"; PORT=${PORT:-27050}
raised_server 12s 12s
# the first raise just after a renewal: A then serves longest after it
after_renewal w
raise_store_floors
wait_for 20 "the keeper to find A freed" q -c "SELECT count(*) > 0 FROM cosid_pool() WHERE state = 'freed'" >/dev/null
wait_for 20 "B open" q -c "SELECT count(*) > 0 FROM cosid_pool() WHERE state = 'active' AND ceiling > floor" >/dev/null
raise_store_floors
wait_for 20 "A, B freed and C granted" \
    q -c "SELECT count(*) FILTER (WHERE state = 'freed') = 2 AND count(*) FILTER (WHERE state = 'active') = 1 FROM cosid_pool()" >/dev/null
slot=$(q -c "SELECT slot FROM cosid_pool() WHERE state = 'active'")
fences=$(q -c "SELECT string_agg(fence::text, ',') FROM cosid_pool() WHERE namespace = 'w' AND slot = $slot")
check "three leases of this instance on slot $slot" 3 "$(tr ',' '\n' <<<"$fences" | wc -l)"
check "cosid_release(namespace, slot) over the three rows of cosid_pool() on slot $slot" "released,released,released" \
    "$(q -c "SELECT string_agg(r, ',') FROM (SELECT cosid_release(namespace, slot) AS r FROM cosid_pool()
                                            WHERE namespace = 'w' AND slot = $slot) x")"
check "none of them held in the store" 0 \
    "$(q -c "SELECT count(*) FROM cosid.lease WHERE namespace = 'w' AND slot = $slot AND incarnation IS NOT NULL AND fence IN ($fences)")"
check "none of them in the pool" 0 "$(q -c "SELECT count(*) FROM cosid_pool() WHERE fence IN ($fences) AND state <> 'ended'")"
# shellcheck disable=SC2154  # client: set by raised_server (test/lib/faults.sh)
stop_id_clients "$client"; status=$CLIENT_STATUS
check "no error in the client" "0 0" "$status $(q -c "SELECT count(*) FROM ids WHERE err IS NOT NULL")"
check "zero duplicate ids" 0 "$(q -c "SELECT count(id) - count(DISTINCT id) FROM ids")"
assert_store_verified "$DIR" "$PORT" postgres "the store"
exit $FAIL

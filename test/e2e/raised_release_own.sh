#!/usr/bin/env bash
# cosid_release() (no arguments) releases the instance's leases of the namespaces its backend
# issued in (docs/reference.md), also when a raise of the store's floors left two of one
# namespace: the freed lease A, still serving, and its successor B, held in the store:
#   bash test/e2e/raised_release_own.sh WORKDIR
# ttl 6 s = max_ttl, tolerances 1 s; a client issues every 20 ms until just before the call.
# A backend issues one id (on A: a freed lease with room comes first), then calls
# cosid_release().  B must not stay held in the store after it.
# Checks: A freed and B granted before; B not held in the store, nor in the pool, after;
# ids unique; cosid_verify().
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/raised_release_own"; PORT=${PORT:-28440}
raised_server 6s 6s
# the raise just after a renewal: A then serves longest after it
after_renewal w
raise_store_floors
wait_for 20 "A freed and B granted" \
    q -c "SELECT count(*) FILTER (WHERE state = 'freed') = 1 AND count(*) FILTER (WHERE state = 'active') = 1 FROM cosid_pool()" >/dev/null
# shellcheck disable=SC2154  # client: set by raised_server (test/lib/faults.sh)
stop_id_clients "$client"; status=$CLIENT_STATUS
b=$(q -c "SELECT slot || ':' || fence FROM cosid_pool() WHERE namespace = 'w' AND state = 'active'")
out=$(q -c "INSERT INTO ids (id) VALUES (cosid_next('w'))" -c "SELECT cosid_release()")
echo "# B is slot:fence $b; cosid_release() answered $out; pool after: $(q -c "SELECT string_agg(slot || ':' || fence || ':' || state, ' ') FROM cosid_pool() WHERE namespace = 'w'")"
check_true "A freed and B granted before the call" "$([ -n "$b" ] && echo t || echo f)"
check "B not held in the store after cosid_release()" 0 \
    "$(q -c "SELECT count(*) FROM cosid.lease WHERE namespace = 'w' AND slot || ':' || fence = '$b' AND incarnation IS NOT NULL")"
check "B not in the pool after cosid_release()" 0 \
    "$(q -c "SELECT count(*) FROM cosid_pool() WHERE namespace = 'w' AND slot || ':' || fence = '$b' AND state NOT IN ('ended', 'releasing')")"
check "no error in the client" "0 0" "$status $(q -c "SELECT count(*) FROM ids WHERE err IS NOT NULL")"
check "zero duplicate ids" 0 "$(q -c "SELECT count(id) - count(DISTINCT id) FROM ids")"
assert_store_verified "$DIR" "$PORT" postgres "the store"
exit $FAIL

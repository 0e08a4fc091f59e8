#!/usr/bin/env bash
# Review 26: one keeper pass is one store transaction (cosid.lease_pass).  A lock on ONE lease
# row (an administrator's open transaction, a slow acquire commit) makes the pass hit
# lock_timeout (55P03, transient), which fails every lease in it; the locked lease's retries
# (backoff capped at ttl/6) always join the next pass of the others, so no lease of the
# instance is renewed while the lock is held, and every namespace stops at its ceiling.
# Before lease_pass each lease had its own transaction: only the locked one failed.
# Asserts: namespace "b" keeps issuing (and keeps renewing) while a row of namespace "a" is locked.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/pass_row_lock"
S="$base/s"; PS=55491
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT

node_up main "$S" "$PS" "cosid.ttl = '3s'" "cosid.pool_idle_timeout = '60s'"
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('a', slot_bits => 4)" \
  -c "SELECT cosid_namespace_create('b', slot_bits => 4)" >/dev/null
# Both leased within ttl/6 of each other: their renewals share passes.
q -c "SELECT cosid_next('a'), cosid_next('b')" >/dev/null
renewals() { q -c "SELECT renewals FROM cosid_stats()"; }
r0=$(renewals)
# An administrator's transaction holds slot a's row (as a revoke left open would).
q -c "BEGIN" \
    -c "SELECT 1 FROM cosid.lease WHERE namespace = 'a' AND incarnation IS NOT NULL FOR UPDATE" \
    -c "SELECT pg_sleep(12)" -c "COMMIT" >/dev/null &
sleep 0.5
# cosid_next('b') every 200 ms for 9 s (3 x ttl): it must never fail.
fails=0; ok=0
end=$(( $(date +%s) + 9 ))
while [ "$(date +%s)" -lt "$end" ]; do
    if out=$(q -c "SELECT cosid_next('b')" 2>&1); then ok=$((ok+1)); else fails=$((fails+1)); last="$out"; fi
    sleep 0.2
done
r1=$(renewals)
echo "b: $ok ids, $fails failures${last:+ (last: $last)}; renewals during the lock: $((r1 - r0))"
grep -E "renewal of slot|lost|lock timeout|canceling" "$S/server.log" | head -5
wait
check "cosid_next('b') failures while a's row is locked" 0 "$fails"
assert_store_verified "$S" "$PS" postgres
exit $FAIL

#!/usr/bin/env bash
# A raise of the store's floors while the instance issues in a leased namespace (w) and a
# static slot's one (s), with cosid_release(w, slot) called right after the raise, before the
# keeper's renewal finds the lease freed (the release finds it gone), and pg_terminate_backend
# of a busy client mid-way:
#   bash test/e2e/raised_mixed_release.sh WORKDIR
# ttl 6 s = max_ttl, tolerances 1 s.  Per namespace one old connection (an id every 20 ms)
# and new connections (one id each, every 50 ms).
# Checks: no error but the terminated client's; no id below one committed (50 ms margin)
# before its statement began, per namespace; ids unique; cosid_verify().
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/raised_mixed_release"; PORT=${PORT:-28450}
node_up main "$DIR" "$PORT" "cosid.ttl = '6s'" "cosid.acquire_timeout = '20s'" "cosid.static_slots = 's:9'" \
    "cosid.state_file = 'cosid.state'"
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_ttl => '6s', max_tolerance => '1s')" \
  -c "SELECT cosid_namespace_create('w', tolerance => '1s')" \
  -c "SELECT cosid_namespace_create('s', tolerance => '1s')" >/dev/null
ids_table
for who in w:old s:old w:victim; do id_client "${who%:*}" "${who#*:}" 3; done
wait_for 20 "the old connections' first ids" q -c "SELECT count(*) >= 300 FROM ids" >/dev/null
: > "$DIR/new.log"
slot=$(q -c "SELECT slot FROM cosid_pool() WHERE namespace = 'w' AND state = 'active'")
raise_store_floors
echo "# cosid_release('w', $slot) right after the raise: $(q -c "SELECT cosid_release('w', $slot)" 2>&1)"
until_ms=$(( $(now_ms) + 14000 )); terminated=no; raised2=no
while [ "$(now_ms)" -lt "$until_ms" ]; do
    for ns in w s; do
        new_id "$ns"
    done
    # a second raise once w's new lease is open: its freed lease then serves beside a successor
    if [ $raised2 = no ] && [ "$(q -c "SELECT count(*) FROM cosid_pool() WHERE namespace = 'w' AND state = 'active' AND ceiling > floor")" -gt 0 ]; then
        raise_store_floors; raised2=yes
    fi
    if [ $terminated = no ] && [ "$(q -c "SELECT count(*) FROM cosid_pool() WHERE namespace = 'w' AND state = 'freed'")" -gt 0 ]; then
        q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'w:victim'" >/dev/null
        terminated=yes
        slot=$(q -c "SELECT slot FROM cosid_pool() WHERE namespace = 'w' AND state = 'freed' LIMIT 1")
        echo "# victim terminated; pool: $(q -c "SELECT string_agg(namespace || ':' || slot || ':' || state, ' ') FROM cosid_pool()"); cosid_release() in a session that issued in w: $(q -c "SELECT cosid_next('w')" -c "SELECT cosid_release()" | tail -1)"
    fi
    sleep 0.05
done
q -c "INSERT INTO stop DEFAULT VALUES" >/dev/null
wait || true
echo "# pool at the end: $(q -c "SELECT string_agg(namespace || ':' || slot || ':' || state, ' ') FROM cosid_pool()")"
echo "# victim terminated: $terminated (while w had a freed lease)"
check "no error (old connections, new connections)" "0 0" \
    "$(q -c "SELECT count(*) FROM ids WHERE err IS NOT NULL") $(grep -c ERROR "$DIR/new.log" || true)"
q -c "SELECT ns, err FROM ids WHERE err IS NOT NULL LIMIT 3" | sed 's/^/#   /'; { grep ERROR "$DIR/new.log" || true; } | head -3 | sed "s/^/#   /"
check "zero duplicate ids" 0 "$(q -c "SELECT count(id) - count(DISTINCT id) FROM ids")"
check_order_kept
assert_store_verified "$DIR" "$PORT" postgres "the store"
exit $FAIL

#!/usr/bin/env bash
# A raise of the store's floors with two namespaces in use, then the keeper stopped (SIGTERM,
# shared memory kept) while each namespace has its freed lease and its successor:
#   bash test/e2e/raised_keeper_restart.sh WORKDIR
# or (COSID_KEEPER_HOW=exit, raised_keeper_exit.sh) the keeper exiting right after the store
# granted w's successor (its answer lost: the successor's acquire an orphan; shared memory
# kept, the freed leases and v's successor request in it).
# ttl 6 s = max_ttl, tolerances 1 s.  Per namespace one old connection (an id every 20 ms,
# each in its own transaction) and new connections (one id each, every 50 ms).
# Checks: no error; no pause of 2 s; no id below one committed (50 ms margin) before its
# statement began, per namespace; ids unique; cosid_verify().
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
how=${COSID_KEEPER_HOW:-term}
if [ "$how" = exit ]; then DIR="${1:-/tmp/cosid-e2e}/raised_keeper_exit"; PORT=${PORT:-28430}
else DIR="${1:-/tmp/cosid-e2e}/raised_keeper_restart"; PORT=${PORT:-28420}; fi
node_up main "$DIR" "$PORT" "cosid.ttl = '6s'" "cosid.acquire_timeout = '20s'" "cosid.max_namespaces = 2"
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_ttl => '6s', max_tolerance => '1s')" \
  -c "SELECT cosid_namespace_create('w', tolerance => '1s')" \
  -c "SELECT cosid_namespace_create('v', tolerance => '1s', unit => 's', total_bits => 50, sequence_bits => 8)" >/dev/null
ids_table
for ns in w v; do id_client "$ns"; done
wait_for 20 "the old connections' first 50 ids" q -c "SELECT count(*) >= 100 FROM ids" >/dev/null
: > "$DIR/new.log"; : > "$DIR/pool.log"; : > "$DIR/health.log"
[ "$how" = exit ] && set_conf cosid.test_keeper_exit_after_acquire w
raise_store_floors
kpid=$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'cosid keeper'")
killed=no
until_ms=$(( $(now_ms) + 9000 ))
while [ "$(now_ms)" -lt "$until_ms" ]; do
    for ns in w v; do
        new_id "$ns"
    done
    pool=$(q -c "SELECT string_agg(namespace || ':' || slot || ':' || state, ' ' ORDER BY namespace, state) FROM cosid_pool()")
    echo "$(now_ms) $pool" >> "$DIR/pool.log"
    q -c "SELECT name || ' ' || status || ' ' || detail FROM cosid_health() WHERE status <> 'ok'" >> "$DIR/health.log" 2>&1 || true
    if [ "$how" = exit ]; then
        k2=$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'cosid keeper'")
        if [ $killed = no ] && [ "$k2" != "$kpid" ]; then echo "# keeper $kpid exited; pool: $pool"; killed=yes; fi
    # the keeper stopped once both namespaces have a freed lease and an active successor
    elif [ $killed = no ] && [ "$(grep -o 'freed' <<<"$pool" | wc -l)" -ge 2 ] && [ "$(grep -o 'active' <<<"$pool" | wc -l)" -ge 2 ]; then
        echo "# keeper $kpid stopped with: $pool"
        q -c "SELECT pg_terminate_backend($kpid)" >/dev/null; killed=yes
    fi
    sleep 0.05
done
q -c "INSERT INTO stop DEFAULT VALUES" >/dev/null
wait
echo "# pool samples (first of each change):"; awk '{ $1=""; if ($0 != last) print "#  " $0; last=$0 }' "$DIR/pool.log" | head -20
echo "# cosid_health() non-ok rows seen:"; sort "$DIR/health.log" | cut -c1-160 | uniq -c | sed 's/^/#  /' | head -10
if [ "$how" = exit ]; then
    check "the keeper exited after the successor's acquire" yes "$killed"
    grep -i "orphan\|exits after\|freed by" "$DIR/server.log" | cut -c1-200 | head -8 | sed 's/^/#   /' || true
else
    check "the keeper was stopped with freed leases and successors in both namespaces" yes "$killed"
fi
check "no error (old connections, new connections)" "0 0" \
    "$(q -c "SELECT count(*) FROM ids WHERE err IS NOT NULL") $(grep -c ERROR "$DIR/new.log" || true)"
q -c "SELECT ns, err FROM ids WHERE err IS NOT NULL LIMIT 3" | sed 's/^/#   /'; { grep ERROR "$DIR/new.log" || true; } | head -3 | sed "s/^/#   /"
check "zero duplicate ids" 0 "$(q -c "SELECT count(id) - count(DISTINCT id) FROM ids")"
echo "# longest pause of an old connection: $(q -c "SELECT max(d) FROM (SELECT ns, (extract(epoch FROM start - lag(done) OVER (PARTITION BY ns ORDER BY n)) * 1000)::int AS d FROM ids WHERE who = 'old') x") ms"
check_order_kept
assert_store_verified "$DIR" "$PORT" postgres "the store"
exit $FAIL

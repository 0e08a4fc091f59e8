#!/usr/bin/env bash
# After a release in order of a lease whose ids ran ahead of the clock, the instance's next
# lease (another slot: the released one's next window starts at its last id, ahead of the
# clock) must still issue ids larger than every id committed before (docs/concepts.md):
#   bash test/e2e/release_order_other_slot.sh WORKDIR
# A namespace of seconds with 2 sequence bits gives 2 ids a tick: 16 ids in one statement run
# ~8 s ahead of the clock (cosid.max_borrow -1 borrows up to the window's ceiling).  Then
# cosid_release(ns, slot), cosid_release() or the idle timeout ends the lease, and the next
# id is taken at once.
# Checks: every later id above every earlier one; no duplicate; cosid_verify() empty.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/release_order_other_slot"; PORT=${PORT:-28410}
stop_server "$DIR" immediate
start_server "$DIR" "$PORT" "cosid.ttl = '12s'" "cosid.pool_idle_timeout = '1s'"
trap 'stop_server "$DIR" immediate' EXIT
q -c "CREATE EXTENSION cosid" \
  -c "SELECT cosid_namespace_create('o', unit => 's', slot_bits => 4, sequence_bits => 2, total_bits => 40, tolerance => '1s')" \
  -c "CREATE TABLE ids (n serial PRIMARY KEY, round int, id bigint)" >/dev/null
round=0
for how in "SELECT cosid_release('o', (SELECT slot FROM cosid_pool() WHERE namespace = 'o' AND state = 'active' LIMIT 1))" \
           "SELECT cosid_release()" "idle"; do
    round=$((round + 1))
    # each round starts once the clock passed every earlier id: its rounds count on their own
    wait_for 30 "the clock past every id" q -c "SELECT coalesce(max(extract(epoch FROM p.ts)), 0) < extract(epoch FROM clock_timestamp())
                                                FROM ids, cosid_parse(id, 'o') p" >/dev/null
    # (cosid_release() releases the namespaces its own backend issued in: the same session)
    q -c "INSERT INTO ids (round, id) SELECT $round, cosid_next('o') FROM generate_series(1, 16)" \
      -c "$([ "$how" = "SELECT cosid_release()" ] && echo "$how" || echo "SELECT 1")" >/dev/null
    ahead=$(q -c "SELECT round(max(extract(epoch FROM p.ts)) - extract(epoch FROM clock_timestamp())) FROM ids, cosid_parse(id, 'o') p WHERE round = $round")
    before=$(q -c "SELECT string_agg(slot || ':' || state, ',') FROM cosid_pool() WHERE namespace = 'o'")
    if [ "$how" = "SELECT cosid_release()" ]; then
        :
    elif [ "$how" = idle ]; then
        wait_for 20 "the idle lease released" q -c "SELECT NOT EXISTS (SELECT FROM cosid_pool() WHERE namespace = 'o' AND state = 'active')" >/dev/null
    else
        q -c "$how" >/dev/null
    fi
    q -c "INSERT INTO ids (round, id) VALUES ($round, cosid_next('o'))" >/dev/null
    after=$(q -c "SELECT string_agg(slot || ':' || state, ',') FROM cosid_pool() WHERE namespace = 'o'")
    below=$(q -c "SELECT count(*) FROM ids b WHERE b.round = $round AND EXISTS (SELECT FROM ids a WHERE a.n < b.n AND a.id > b.id)")
    echo "# round $round ($how): 16 ids up to ${ahead} s ahead of the clock; pool before: $before, after: $after"
    check "round $round: no id below one committed before it" 0 "$below"
done
check "zero duplicate ids" 0 "$(q -c "SELECT count(id) - count(DISTINCT id) FROM ids")"
assert_store_verified "$DIR" "$PORT" postgres "the store"
exit $FAIL

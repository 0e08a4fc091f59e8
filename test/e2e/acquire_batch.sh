#!/usr/bin/env bash
# A keeper's acquires due together go to the store in one transaction (cosid.acquire_many),
# and a batch the store refuses is asked again one acquire at a time:
#   bash test/e2e/acquire_batch.sh WORKDIR
# One server, its own store, five namespaces with an id client each.  The store's floors are
# raised (every lease freed at once), with one namespace's floor set by hand beyond what any
# window reaches: that acquire fails, the batch rolls back, and the keeper asks one at a time:
# the four others get their successors, the fifth's callers get no slot (ZC006), the log says why.  Once its
# floor is lowered again it is served, and the next raise's five successors come together.
# Checks: the windows granted per store transaction (the history's rows by xmin): one each
# after the refused batch, the five successors in one after the second raise; the fifth's
# error, and its store calls at most 12 a second while its client calls every 20 ms; no error
# on the others; ids unique in each namespace; cosid_verify().
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/acquire_batch"; PORT=${PORT:-27130}
node_up main "$DIR" "$PORT" "cosid.ttl = '12s'" "cosid.acquire_timeout = '30s'"
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_ttl => '12s', max_tolerance => '1s')" \
  -c "SELECT cosid_namespace_create('b' || i, tolerance => '1s') FROM generate_series(1, 5) i" >/dev/null
ids_table
# most_per_xact [AFTER]: the most windows of namespaces b1-b5 granted in one store transaction
# (the history's rows by xmin: none of them has ended yet when this is asked), among those
# granted after AFTER (default: all)
most_per_xact() {
    q -c "SELECT coalesce(max(c), 0) FROM (SELECT count(*) c FROM cosid.window_history
            WHERE namespace LIKE 'b_' AND kind = 'lease' AND granted_at > '${1:-1970-01-01}' GROUP BY xmin::text) x"
}
# in_step: the five leases renewed in one pass (one expires_at): the raise's store error then
# reaches the five in one pass, and their successors are asked for together
in_step() {
    wait_for 40 "the five leases renewed in one pass" \
        q -c "SELECT count(*) = 5 AND count(DISTINCT expires_at) = 1 FROM cosid.lease WHERE namespace LIKE 'b_' AND incarnation IS NOT NULL" >/dev/null
}

# Five id clients, one on each namespace.
clients=""
for i in 1 2 3 4 5; do id_client "b$i"; clients="$clients $ID_CLIENT"; done
wait_for 20 "ids from the five clients" q -c "SELECT count(DISTINCT ns) = 5 FROM ids WHERE who = 'old'" >/dev/null
in_step
before=$(q -c "SELECT clock_timestamp()")
q -c "UPDATE cosid.namespace SET not_before_ms = cosid.store_now() + 86400000 WHERE name = 'b5'" >/dev/null
raise_store_floors
wait_for 30 "four successors held" q -c "SELECT count(*) = 4 FROM cosid.lease l JOIN cosid.window_history h
    ON h.namespace = l.namespace AND h.slot = l.slot AND h.fence = l.fence
    WHERE l.namespace IN ('b1', 'b2', 'b3', 'b4') AND l.incarnation IS NOT NULL AND h.granted_at > '$before'" >/dev/null
check "the refused batch asked again one by one: the four successors each in a transaction of its own" 1 "$(most_per_xact "$before")"
# (b5's callers issue from its freed window up to its ceiling, ttl + tolerance after the raise)
wait_for 40 "b5's callers refused" q -c "SELECT count(*) > 0 FROM ids WHERE ns = 'b5' AND err IS NOT NULL" >/dev/null
check "b5's callers: no slot (ZC006)" 'ZC006 cosid could not acquire a slot in namespace "b5"' \
    "$(q -c "SELECT min(err) FROM ids WHERE ns = 'b5' AND err IS NOT NULL")"
check "the keeper's log: b5's acquire refused for its floor" 1 \
    "$(grep -c -m1 'acquire in namespace "b5" failed: cosid namespace "b5" grants no window before' "$DIR/server.log" || true)"
# b5's client calls every 20 ms and is refused each time: the keeper asks the store again at
# most every 100 ms for it, not once per call (each a store call of its own, about 40 a second)
refused() { grep -c 'acquire in namespace "b5" failed' "$DIR/server.log" || true; }
errs() { q -c "SELECT count(*) FROM ids WHERE ns = 'b5' AND err IS NOT NULL"; }
# (measured once b5's calls have been refused for 10 s: the request for its successor, which
# the keeper keeps for ttl + 2 s from its next renewal after the raise, up to ttl/3 later, has
# ended by then (the calls fail from the freed window's ceiling on, at least 9 s after the
# raise); before, every call posted a request of its own)
wait_for 40 "b5's calls refused for 10 s" \
    q -c "SELECT max(start) - min(start) > interval '10 s' FROM ids WHERE ns = 'b5' AND err IS NOT NULL" >/dev/null
l0=$(refused); e0=$(errs); t0=$(now_ms)
wait_for 30 "15 more of b5's calls refused" q -c "SELECT count(*) >= $((e0 + 15)) FROM ids WHERE ns = 'b5' AND err IS NOT NULL" >/dev/null
l1=$(refused); t1=$(now_ms)
check_true "b5 refused: $((l1 - l0)) store calls in $((t1 - t0)) ms for $(($(errs) - e0)) calls, at most 12 a second" \
    "$(awk -v n=$((l1 - l0)) -v ms=$((t1 - t0)) 'BEGIN { print (ms > 0 && n * 1000 / ms <= 12) ? "t" : "f" }')"
check "b1-b4: no error" 0 "$(q -c "SELECT count(err) FROM ids WHERE ns <> 'b5'")"
q -c "DELETE FROM ids WHERE ns = 'b5' AND err IS NOT NULL" >/dev/null
# b5's floor lowered: its next request is served, and the next raise frees five leases whose
# successors come in one transaction
# (to the raised next floor of its slots: none may go below it)
q -c "SELECT cosid_namespace_lower_floor('b5', to_timestamp((max(next_floor) + 1) / 1000.0)) FROM cosid.lease WHERE namespace = 'b5'" >/dev/null
wait_for 30 "b5 served again" q -c "SELECT count(*) > 0 FROM cosid.lease WHERE namespace = 'b5' AND incarnation IS NOT NULL" >/dev/null
in_step
before=$(q -c "SELECT clock_timestamp()")
raise_store_floors
wait_for 30 "five successors held" q -c "SELECT count(DISTINCT l.namespace) = 5 FROM cosid.lease l JOIN cosid.window_history h
    ON h.namespace = l.namespace AND h.slot = l.slot AND h.fence = l.fence
    WHERE l.namespace LIKE 'b_' AND l.incarnation IS NOT NULL AND h.granted_at > '$before'" >/dev/null
check "after the raise: the five successors in one store transaction" 5 "$(most_per_xact "$before")"
# shellcheck disable=SC2086  # the clients' pids, one word each
stop_id_clients $clients
check "zero duplicate ids in each namespace" 0 "$(q -c "SELECT count(id) - count(DISTINCT (ns, id)) FILTER (WHERE id IS NOT NULL) FROM ids")"
assert_store_verified "$DIR" "$PORT" postgres "the store"
exit $FAIL

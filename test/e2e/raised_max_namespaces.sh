#!/usr/bin/env bash
# Raises of the store's floors do not give a namespace in use away to another one past
# cosid.max_namespaces:
#   bash test/e2e/raised_max_namespaces.sh WORKDIR
# cosid.max_namespaces = 2; namespaces f and g each issue every 20 ms.  The first raise frees
# both leases (A); their successors (B) are asked for at once and open.  The second raise
# frees the successors too while the A still serve: f and g each hold two freed leases and
# need a third, a successor (C).  A freed lease counts for no namespace (its successor does):
# without a pool entry for each C, f and g held no place, a third namespace h took one, and
# the callers of g failed with 53000 once their freed leases ended.
# ttl 6 s = max_ttl, tolerances 1 s.
# Checks: no error for f and g; h refused with 53000 only; no id twice within a namespace;
# cosid_verify().
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/raised_max_namespaces"; PORT=${PORT:-27051}
node_up main "$DIR" "$PORT" "cosid.ttl = '6s'" "cosid.acquire_timeout = '3s'" "cosid.max_namespaces = 2"
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_ttl => '6s', max_tolerance => '1s')" \
  -c "SELECT cosid_namespace_create(n, tolerance => '1s') FROM unnest(ARRAY['f', 'g', 'h']) n" >/dev/null
ids_table
client() { id_client "$1"; }  # one id of NS every 20 ms until `stop` has a row
client f; client g
wait_for 20 "ids of f and g" q -c "SELECT count(DISTINCT ns) = 2 FROM ids WHERE id IS NOT NULL" >/dev/null
raise_store_floors
wait_for 20 "both leases freed, both successors open" \
    q -c "SELECT count(*) FILTER (WHERE state = 'freed') = 2 AND count(*) FILTER (WHERE state = 'active' AND ceiling > floor) = 2 FROM cosid_pool()" >/dev/null
raise_store_floors
wait_for 20 "both successors freed" q -c "SELECT count(*) = 4 FROM cosid_pool() WHERE state = 'freed'" >/dev/null
echo "# pool: $(q -F ' ' -c "SELECT namespace, fence, state FROM cosid_pool() ORDER BY namespace, fence" | tr '\n' ';')"
started=$(q -c "SELECT max(n) FROM ids")
client h
# until the freed leases of f and g are used up, and a while after
wait_for 20 "the freed leases used up" q -c "SELECT count(*) = 0 FROM cosid_pool() WHERE state = 'freed'" >/dev/null
wait_for 20 "50 ids each of f and g since" \
    q -c "SELECT count(*) FILTER (WHERE ns = 'f') >= 50 AND count(*) FILTER (WHERE ns = 'g') >= 50 FROM ids WHERE n > $started + 200" >/dev/null
q -c "INSERT INTO stop DEFAULT VALUES" >/dev/null
wait
q -F ' | ' -c "SELECT ns, count(id) AS ids, count(err) AS errors, string_agg(DISTINCT left(err, 50), '; ') FROM ids GROUP BY ns ORDER BY ns" | sed 's/^/#   /'
check "no error for f and g, in use before h" 0 "$(q -c "SELECT count(err) FROM ids WHERE ns IN ('f', 'g')")"
check "h refused with 53000 only (the instance issues in 2 namespaces at most)" 0 \
    "$(q -c "SELECT count(*) FROM ids WHERE ns = 'h' AND (id IS NOT NULL OR err NOT LIKE '53000%')")"
check "no id twice within a namespace" 0 "$(q -c "SELECT count(id) - count(DISTINCT (ns, id)) FILTER (WHERE id IS NOT NULL) FROM ids")"
assert_store_verified "$DIR" "$PORT" postgres "the store"
exit $FAIL

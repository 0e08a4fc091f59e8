#!/usr/bin/env bash
# pg_dump / pg_restore of a database using cosid: the namespaces users created and their
# slots' windows come back (next_floor kept), 'default' is made again by CREATE EXTENSION,
# and the restore reports no error.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
dir="${1:-/tmp/cosid-e2e}/dump_restore"; port=55443
node_up main "$dir" "$port" "cosid.database = 'src'"
trap 'node_stop_all immediate' EXIT
q -c "CREATE DATABASE src" -c "CREATE DATABASE dst" >/dev/null
node_sql_db main src -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('orders', slot_bits => 3)" \
      -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('orders'), v int)" \
      -c "INSERT INTO t(v) SELECT g FROM generate_series(1, 1000) g" -c "SELECT cosid_release()" >/dev/null
before=$(node_sql_db main src -c "SELECT string_agg(slot || ':' || next_floor, ',' ORDER BY slot) FROM cosid.lease WHERE namespace = 'orders'")
as_pg pg_dump -h "$dir" -p "$port" -Fc -f "$dir/src.dump" src
restore_errors=$(as_pg pg_restore -h "$dir" -p "$port" -d dst "$dir/src.dump" 2>&1 | grep -c 'error' || true)
check "pg_restore reports no error" 0 "$restore_errors"
check "namespaces restored" "default,orders" "$(node_sql_db main dst -c "SELECT string_agg(name, ',' ORDER BY name) FROM cosid.namespace")"
check "the windows of 'orders' kept their next_floor" "$before" \
      "$(node_sql_db main dst -c "SELECT string_agg(slot || ':' || next_floor, ',' ORDER BY slot) FROM cosid.lease WHERE namespace = 'orders'")"
check "rows restored" 1000 "$(node_sql_db main dst -c "SELECT count(*) FROM t")"
check "'default' recreated with its 1024 slots" 1024 "$(node_sql_db main dst -c "SELECT count(*) FROM cosid.lease WHERE namespace = 'default'")"
assert_store_verified "$dir" "$port" src "the store (database src)"
assert_store_verified "$dir" "$port" dst "the restored store (database dst: the history of src's windows)"
exit $FAIL

#!/usr/bin/env bash
# The SQL store against the C++ lease model: the same random operation sequences, the
# same answers, line for line (see test/model/model_compare.cpp).
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
dir="${1:-/tmp/cosid-e2e}/model"; port=55442
trap 'node_stop_all immediate' EXIT
node_up main "$dir" "$port"
make -C "$COSID_ROOT" -s test/model/model_compare >/dev/null
for seed in 1 2 3 4 5; do
    t0=$(( $(date +%s) / 100 * 100000 ))
    # A fresh store per seed: a database of its own (the SQL functions need no keeper).
    # The store's clock stands still at the model's time of each statement: every store
    # function reads it through cosid.store_now(), replaced here in this database only.  An
    # offset from the real clock let a loaded machine's delays count (CI: a first call
    # compiling its PL/pgSQL took 150 ms before the namespace read its clock, floor 200 for 0).
    q -c "CREATE DATABASE model_$seed" >/dev/null
    node_sql_db main "model_$seed" -c "CREATE EXTENSION cosid" \
        -c "SELECT cosid_store_settings(max_ttl => '4500 ms', max_tolerance => '1 s')" \
        -c "CREATE OR REPLACE FUNCTION cosid_r100(v bigint) RETURNS text LANGUAGE sql IMMUTABLE AS
            \$\$ SELECT ((v - '$t0' + 50) / 100 * 100 - CASE WHEN v - '$t0' + 50 < 0 THEN 100 ELSE 0 END)::text \$\$" \
        -c "CREATE FUNCTION cosid_model_at(now_ms bigint) RETURNS text LANGUAGE sql VOLATILE AS
            \$\$ SELECT set_config('cosid_model.now', now_ms::text, false); SELECT 'model'::text \$\$" \
        -c "CREATE OR REPLACE FUNCTION cosid.store_now() RETURNS bigint LANGUAGE sql VOLATILE AS
            \$\$ SELECT current_setting('cosid_model.now')::bigint \$\$" >/dev/null
    "$COSID_ROOT/test/model/model_compare" "$seed" 200 "$dir/ops.sql" "$dir/expected.txt" "$t0"
    chmod a+r "$dir/ops.sql"
    node_sql_db main "model_$seed" -f "$dir/ops.sql" > "$dir/actual.txt"
    if diff -u "$dir/expected.txt" "$dir/actual.txt" > "$dir/diff.txt"; then
        echo "ok - seed $seed: $(wc -l < "$dir/expected.txt") operations, SQL store equals model"
    else
        echo "not ok - seed $seed: SQL store differs from model"; head -30 "$dir/diff.txt"; FAIL=1
    fi
    # the model's store, as any other: no two windows of one slot overlap in its history
    assert_store_verified "$dir" "$port" "model_$seed" "seed $seed: the SQL store"
done
exit $FAIL

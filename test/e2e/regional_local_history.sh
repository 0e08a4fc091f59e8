#!/usr/bin/env bash
# An instance that once issued from its own (local) store, then pointed at a regional store
# (cosid.store_dsn, a namespace with a slot_range): its keeper records the store's range in its
# local copy of the namespace, whose lease rows hold its own past grants (namespace_range_guard
# refused that record, and cosid_next() failed with a layout mismatch; found by a review); a
# 42883 raised inside the function that keeps that record is not taken for "this database's
# cosid is older than 1.5" (which let a store stating no range through); and
# cosid._namespace_range_forget(), ZC008's way out, clears it.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/regional_local_history"
S="$base/s"; A="$base/a"; T="$base/t"; PS=55493; PA=55494; PT=55480
trap 'node_stop_all immediate' EXIT

node_up s "$S" "$PS"
qs -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('default', slot_range => '[4,8)')" >/dev/null
node_up a "$A" "$PA"
qa -c "CREATE EXTENSION cosid" -c "SELECT cosid_next()" >/dev/null   # issued from its own store
node_stop a
echo "cosid.store_dsn = 'host=$S port=$PS dbname=postgres'" >> "$A/data/postgresql.conf"
node_start a
out=$(qa -c "SELECT cosid_next()" 2>&1) && rc=0 || rc=$?
echo "cosid_next() through the regional store: rc=$rc $out"
check "cosid_next() through the regional store succeeds" 0 "$rc"
check "the instance recorded the store's range" "[4,8)" "$(qa -c "SELECT slot_range FROM cosid.namespace WHERE name = 'default'")"

# A second store that states no range for 'default' (every slot).  In A, the function that
# keeps the range fails with 42883 from inside (a helper it calls is gone): before, the keeper
# read that SQLSTATE as "cosid here is older than 1.5, nothing kept", and took every slot of
# the new store although A had seen [4,8).
node_up t "$T" "$PT"
qt -c "CREATE EXTENSION cosid" >/dev/null
original=$(qa -c "SELECT pg_get_functiondef('cosid._namespace_range_seen(text,int4range)'::regprocedure)")
qa -c "CREATE OR REPLACE FUNCTION cosid._namespace_range_seen(p_name text, p_range int4range) RETURNS int4range
       LANGUAGE plpgsql AS \$\$ BEGIN PERFORM cosid._a_helper_that_is_gone(); RETURN NULL; END \$\$" >/dev/null
node_stop a
sed -i "s|^cosid.store_dsn = .*|cosid.store_dsn = 'host=$T port=$PT dbname=postgres'|" "$A/data/postgresql.conf"
node_start a
out=$(qa -c "SET cosid.acquire_timeout = '10s'" -c "SELECT cosid_next()" 2>&1) && rc=0 || rc=$?
echo "# cosid_next() through a store without a range, the range function broken: rc=$rc $(echo "$out" | head -2 | tr '\n' ' ')"
check "a 42883 from inside the range function refuses the store, naming what is missing" "1 1" \
    "$rc $(echo "$out" | grep -q '_a_helper_that_is_gone' && echo 1 || echo 0)"
printf '%s\n' "$original" | qa >/dev/null
out=$(qa -c "SET cosid.acquire_timeout = '10s'" -c "SELECT cosid_next()" 2>&1) && rc=0 || rc=$?
check "with the function back: the store's range (every slot) differs from the [4,8) A saw, refused (ZC008)" "1 1" \
    "$rc $(echo "$out" | grep -c 'ZC008\|slots 0-\|this instance had \[4,8)')"
qa -c "SELECT cosid._namespace_range_forget('default')" >/dev/null
check "cosid._namespace_range_forget() clears it on the instance" t \
    "$(qa -c "SELECT slot_range IS NULL FROM cosid.namespace WHERE name = 'default'")"
assert_store_verified "$S" "$PS" postgres "S, the regional store"
assert_store_verified "$A" "$PA" postgres "A's own store (before it moved)"
exit $FAIL

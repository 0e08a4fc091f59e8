#!/usr/bin/env bash
# An instance that once issued from its own (local) store, then pointed at a regional store
# (cosid.store_dsn, a namespace with a slot_range): its keeper records the store's range in its
# local copy of the namespace, whose lease rows hold its own past grants (namespace_range_guard
# refused that record, and cosid_next() failed with a layout mismatch; found by a review); and
# cosid._namespace_range_forget(), ZC008's way out, clears it.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/regional_local_history"
S="$base/s"; A="$base/a"; PS=55493; PA=55494
trap 'stop_server "$A" immediate; stop_server "$S" immediate' EXIT
qs() { psql_at "$S" "$PS" postgres -At "$@"; }
qa() { psql_at "$A" "$PA" postgres -At "$@"; }

start_server "$S" "$PS"
qs -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('default', slot_range => '[4,8)')" >/dev/null
start_server "$A" "$PA"
qa -c "CREATE EXTENSION cosid" -c "SELECT cosid_next()" >/dev/null   # issued from its own store
stop_server "$A"
echo "cosid.store_dsn = 'host=$S port=$PS dbname=postgres'" >> "$A/data/postgresql.conf"
as_pg "$PG_BIN/pg_ctl" -D "$A/data" -l "$A/server.log" -w start >/dev/null
out=$(qa -c "SELECT cosid_next()" 2>&1) && rc=0 || rc=$?
echo "cosid_next() through the regional store: rc=$rc $out"
check "cosid_next() through the regional store succeeds" 0 "$rc"
check "the instance recorded the store's range" "[4,8)" "$(qa -c "SELECT slot_range FROM cosid.namespace WHERE name = 'default'")"
qa -c "SELECT cosid._namespace_range_forget('default')" >/dev/null
check "cosid._namespace_range_forget() clears it on the instance" t \
    "$(qa -c "SELECT slot_range IS NULL FROM cosid.namespace WHERE name = 'default'")"
exit $FAIL

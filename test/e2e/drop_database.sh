#!/usr/bin/env bash
# DROP DATABASE (WITH (FORCE) too) and ALTER DATABASE ... RENAME TO of a database that holds a
# lease store, and DROP EXTENSION cosid in a store that is not this server's keeper's database
# (a remote instance's, named by its cosid.store_dsn).  Each is refused (55006) while a window
# or next floor of that store reaches past its clock, as DROP EXTENSION in the keeper's database
# is: a database made again under the name, with CREATE EXTENSION cosid, would start its slots at
# its now, below what the old store's holders may still issue.  Once everything lies behind the
# clock, each goes through; a database without cosid, or with an empty store, is not held up.
# Before: DROP DATABASE ... WITH (FORCE) took the keeper's database and a remote instance's
# store with live leases, and DROP EXTENSION in the remote instance's store went through.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/drop_database"
S="$base/store"; A="$base/a"; PS=55720; PA=55721
akeeper=""
trap '[ -n "$akeeper" ] && kill -CONT "$akeeper" 2>/dev/null; node_stop_all immediate' EXIT
# err DB SQL: the error of SQL run in DB on S (verbose: SQLSTATE, DETAIL, HINT)
# shellcheck disable=SC2069  # stderr to the caller, stdout discarded
err() { node_sql_db s "$1" -v VERBOSITY=verbose -c "$2" 2>&1 >/dev/null || true; }
has_db() { qs -c "SELECT count(*) FROM pg_database WHERE datname = '$1'"; }

# S: cosid preloaded, its keeper's store in postgres; a second store in database fleet, which
# only A (another server) leases from.
node_up s "$S" "$PS" "cosid.ttl = '3s'"
qs -c "CREATE EXTENSION cosid" -c "CREATE DATABASE fleet" -c "CREATE DATABASE scratch" \
    -c "CREATE DATABASE plain" >/dev/null
node_sql_db s fleet -c "SET client_min_messages = error" -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('f', slot_bits => 2, tolerance => '1 s')" >/dev/null
node_sql_db s scratch -c "SET client_min_messages = error" -c "CREATE EXTENSION cosid" >/dev/null
# (A has no background worker slot to spare: its keeper and the logical replication launcher
# take both.)
node_up a "$A" "$PA" "cosid.store_dsn = 'host=$S port=$PS dbname=fleet user=$PG_USER'" "cosid.ttl = '20s'" \
    "cosid.namespace = 'f'" "max_worker_processes = 2"
qa -c "CREATE EXTENSION cosid" -c "CREATE TABLE ids (id bigint PRIMARY KEY DEFAULT cosid_next())" \
   -c "SET cosid.acquire_timeout = '30s'" -c "INSERT INTO ids SELECT FROM generate_series(1, 1000)" >/dev/null
check "A issues from the store in S's database fleet" 1000 "$(qa -c "SELECT count(*) FROM ids")"
qs -c "SELECT count(cosid_next()) FROM generate_series(1, 100)" >/dev/null
check "S issues from its own store (database postgres)" 1 "$(qs -c "SELECT count(*) FROM cosid_leases() WHERE state = 'held'")"

echo "# S's keeper's own database"
out=$(err template1 "DROP DATABASE postgres WITH (FORCE)")
{ grep -E 'ERROR|DETAIL|HINT' <<<"$out" || true; } | sed 's/^/#   /'
check "DROP DATABASE of the keeper's database WITH (FORCE): 55006, the database still there" "55006 1" \
    "$(sqlstate_of "$out") $(has_db postgres)"
check_true "the error names the slot and until when" \
    "$(grep -q 'DETAIL:  The last of them ends at .* UTC (slot 0 of namespace "default", leased by' <<<"$out" && echo t)"
check "S still issues" t "$(qs -c "SELECT cosid_next() > 0")"

echo "# a remote instance's store (not S's keeper's database)"
out=$(err fleet "DROP EXTENSION cosid")
check "DROP EXTENSION in A's store: 55006, the extension still there" "55006 1" \
    "$(sqlstate_of "$out") $(node_sql_db s fleet -c "SELECT count(*) FROM pg_extension WHERE extname = 'cosid'")"
out=$(err postgres "DROP DATABASE fleet WITH (FORCE)")
{ grep -E 'ERROR|DETAIL' <<<"$out" || true; } | sed 's/^/#   /'
check "DROP DATABASE of A's store WITH (FORCE): 55006, the database still there" "55006 1" "$(sqlstate_of "$out") $(has_db fleet)"
check_true "... and the error says why (slots of its lease store, A's owner key)" \
    "$(grep -q 'cannot drop database "fleet" while 1 slots of its lease store' <<<"$out" && grep -q 'leased by' <<<"$out" && echo t)"
# RENAME needs the database without sessions: A's keeper is stopped, and its session on S ended.
akeeper=$(qa -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'cosid keeper'")
kill -STOP "$akeeper"
qs -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'fleet'" >/dev/null
wait_for 30 "no session in fleet" qs -c "SELECT count(*) = 0 FROM pg_stat_activity WHERE datname = 'fleet'" >/dev/null
out=$(err postgres "ALTER DATABASE fleet RENAME TO fleet_old")
check "ALTER DATABASE ... RENAME TO of A's store: refused by cosid (55006), the name kept" "55006 1" "$(sqlstate_of "$out") $(has_db fleet)"
check_true "... by the lease check, not by a session in it" \
    "$(grep -q 'cannot rename database "fleet" while 1 slots of its lease store' <<<"$out" && echo t)"
kill -CONT "$akeeper"; akeeper=""
check "A issues again" t "$(qa -c "SET cosid.acquire_timeout = '30s'" -c "SELECT cosid_next() > 0" | tail -1)"

# A session idle in a transaction that holds the lease table: the look gives up after 10 s
# and the drop is refused, instead of waiting for good (WITH (FORCE) ends sessions only after it).
node_sql_db s fleet -c "BEGIN" -c "LOCK TABLE cosid.lease IN ROW EXCLUSIVE MODE" \
    -c "SELECT pg_sleep(300)" >/dev/null 2>&1 &
locker=$!
wait_for 30 "the lease table locked" qs -c "SELECT count(*) = 1 FROM pg_locks l JOIN pg_database d ON d.oid = l.database
    WHERE d.datname = 'fleet' AND l.mode = 'RowExclusiveLock' AND l.granted AND l.locktype = 'relation'
      AND l.pid IN (SELECT pid FROM pg_stat_activity WHERE datname = 'fleet' AND query LIKE '%pg_sleep%')" >/dev/null
out=$(err postgres "DROP DATABASE fleet WITH (FORCE)")
{ grep -E 'ERROR|DETAIL' <<<"$out" || true; } | sed 's/^/#   /'
check "the lease table held by another session: refused (55000, the look did not finish), the database kept" "55000 1" \
    "$(sqlstate_of "$out") $(has_db fleet)"
qs -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'fleet' AND query LIKE '%pg_sleep%'" >/dev/null
wait "$locker" 2>/dev/null || true

echo "# databases that hold no live store"
check "DROP DATABASE of a database without cosid goes through" "0" \
    "$(qs -c "DROP DATABASE plain" >/dev/null; has_db plain)"
check "DROP DATABASE WITH (FORCE) of a store nobody leases from goes through" "0" \
    "$(qs -c "DROP DATABASE scratch WITH (FORCE)" >/dev/null; has_db scratch)"

out=$(qa -v VERBOSITY=verbose -c "CREATE DATABASE spare" \
      -c "DROP DATABASE spare" 2>&1 >/dev/null || true)
{ grep -E 'ERROR|DETAIL' <<<"$out" || true; } | sed 's/^/#   /'
check "no background worker slot for the check: 53000, the database kept" "53000 1" \
    "$(sqlstate_of "$out") $(qa -c "SELECT count(*) FROM pg_database WHERE datname = 'spare'")"

assert_store_verified "$S" "$PS" fleet "A's store (S's database fleet)"
assert_store_verified "$S" "$PS" postgres "S's own store"
echo "# once A has stopped (its slots released, their next floors behind the clock)"
node_stop a
drop_fleet() {
    qs -q -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS fleet WITH (FORCE)" \
        -c "SELECT count(*) = 0 FROM pg_database WHERE datname = 'fleet'" 2>/dev/null
}
check_true "DROP DATABASE fleet WITH (FORCE) goes through" "$(wait_for 60 "the drop of fleet" drop_fleet)"
exit $FAIL

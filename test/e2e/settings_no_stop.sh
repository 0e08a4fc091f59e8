#!/usr/bin/env bash
# Settings that used to stop ids where nothing required it:
#   1. cosid.ttl reloaded above the store's max_ttl: every renewal was refused (22023) and the
#      INSERTs failed with ZC002 once the lease ran out.  Now the store grants max_ttl, the
#      keeper renews every third of that and says so once (WARNING): no INSERT fails.
#   2. row_security = off for the server (postgresql.conf) or a database: CREATE EXTENSION was
#      taken for a restore, and cosid_next() failed for good ("being restored").  Only a
#      session's own SET (pg_dump's output, pg_restore) counts as a restore now.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/settings_no_stop"
A="$base/a"; PA=55750; R="$base/r"; PR=55751
trap 'node_stop_all immediate' EXIT

# inserts_for SECONDS: one session inserting every 20 ms; prints "ok failed first-error"
inserts_for() {
    qa -c "DO \$\$
DECLARE ok int := 0; bad int := 0; e text; t0 timestamptz := clock_timestamp();
BEGIN
    WHILE clock_timestamp() < t0 + interval '$1 s' LOOP
        BEGIN
            INSERT INTO t DEFAULT VALUES; ok := ok + 1;
        EXCEPTION WHEN OTHERS THEN
            bad := bad + 1; e := coalesce(e, SQLSTATE || ' ' || SQLERRM);
        END;
        COMMIT;  -- each row by itself, as an application's
        PERFORM pg_sleep(0.02);
    END LOOP;
    RAISE NOTICE 'result % % %', ok, bad, coalesce(e, '-');
END \$\$" 2>&1 | sed -n 's/.*result //p'
}

echo "# 1. cosid.ttl reloaded above the store's max_ttl"
node_up a "$A" "$PA" "cosid.ttl = '1500ms'" "cosid.acquire_timeout = '5s'"
qa -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_ttl => '2s')" \
   -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next())" -c "INSERT INTO t DEFAULT VALUES" >/dev/null
qa -c "ALTER SYSTEM SET cosid.ttl = '6s'" -c "SELECT pg_reload_conf()" >/dev/null
check_true "the keeper took the new ttl" \
    "$(wait_until 20 qa -c "SELECT count(*) > 0 FROM cosid_health() WHERE name = 'store_max_ttl' AND status = 'warning'")"
r=$(inserts_for 8)
echo "# inserts over 8 s with cosid.ttl 6 s against max_ttl 2 s: ${r:-none}"
set -- $r
check_true "INSERTs went on (${1:-0} of them)" "$([ "${1:-0}" -gt 100 ] && echo t || echo f)"
check "no INSERT failed" 0 "${2:-x}"
check_true "the store granted leases of at most max_ttl" \
    "$(qa -c "SELECT bool_and(expires_at - cosid.store_now() <= 2000) FROM cosid.lease WHERE incarnation IS NOT NULL")"
check "renewals never failed" 0 "$(qa -c "SELECT renewal_failures FROM cosid_stats()")"
check "the keeper said it once in the log (WARNING)" 1 \
    "$(grep -c 'WARNING:  cosid: cosid.ttl is 6000 ms, but the lease store grants leases of 2000 ms' "$A/server.log")"
check "zero duplicate ids" 0 "$(qa -c "SELECT count(*) - count(DISTINCT id) FROM t")"
assert_store_verified "$A" "$PA" postgres "A's store"
node_stop a

echo "# 2. row_security off for the server, for a database, and in a session"
node_up r "$R" "$PR" "row_security = off" "cosid.acquire_timeout = '5s'"
qr -c "CREATE EXTENSION cosid" >/dev/null
check "postgresql.conf's row_security = off: CREATE EXTENSION makes a store, not a restore's mark" \
    t "$(qr -c "SELECT bool_and(system_identifier <> 0) FROM cosid.store_state")"
out=$(qr -v VERBOSITY=verbose -c "SELECT cosid_next() > 0" 2>&1 || true)
check "cosid_next() issues there" t "$out"
qr -c "CREATE DATABASE d2" -c "ALTER DATABASE d2 SET row_security = on" -c "CREATE DATABASE d3" >/dev/null
qr -c "ALTER DATABASE d3 SET row_security = off" >/dev/null
node_sql_db r d3 -c "CREATE EXTENSION cosid" >/dev/null 2>&1
check "a database's row_security = off: a store too" t "$(node_sql_db r d3 -c "SELECT bool_and(system_identifier <> 0) FROM cosid.store_state")"
node_sql_db r d2 -c "SET row_security = off" -c "CREATE EXTENSION cosid" >/dev/null 2>&1
check "a session's SET row_security = off (a dump run through psql): the restore's mark" \
    0 "$(node_sql_db r d2 -c "SELECT max(system_identifier) FROM cosid.store_state")"
out=$(node_sql_db r d2 -v VERBOSITY=verbose -c "SELECT * FROM cosid.acquire('default', 'k', gen_random_uuid(), 1000)" 2>&1 || true)
check "... whose store grants nothing until the origin's record comes (55000)" 55000 "$(sqlstate_of "$out")"
assert_store_verified "$R" "$PR" postgres "R's store (row_security off)"
exit $FAIL

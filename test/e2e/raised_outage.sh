#!/usr/bin/env bash
# A raise of the store's floors, then an outage of the store within a ttl of it (a failover
# soon after a switchover), stops no caller:
#   bash test/e2e/raised_outage.sh WORKDIR
# The raise frees the held lease; its window goes on to its ceiling, which nothing renews.
# Its successor is asked for at once, opens above the raised floor and is renewed while the
# freed one still issues, so that an outage that begins before the freed window ends, and
# lasts past it, is ridden out by the successor's window as by any renewed lease.
# The store is local; the outage is cosid.lease locked (every renewal and acquire times out).
# ttl 6 s = max_ttl, tolerances 1 s.  A client issues every 20 ms throughout.  The lock
# begins 1 s before the freed window's ceiling and ends 2 s after it.
# Checks: no error; no pause of a second between two ids; every id unique and increasing;
# the successor was asked for and open while the freed lease still served; no two windows
# of the store's history overlap.
# Before the fix (main at c16ef0e) the successor was asked for only once the freed window
# was used up, inside the outage: the ids stopped at its ceiling until the lock ended.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/raised_outage"; PORT=27046
stop_server "$DIR" immediate  # a run killed before its trap
start_server "$DIR" "$PORT" "cosid.ttl = '6s'" "cosid.acquire_timeout = '20s'"
trap 'kill $(jobs -p) 2>/dev/null || true; stop_server "$DIR" immediate' EXIT
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_ttl => '6s', max_tolerance => '1s')" \
  -c "SELECT cosid_namespace_create('w', tolerance => '1s')" \
  -c "CREATE TABLE ids (n serial PRIMARY KEY, at timestamptz NOT NULL, id bigint, err text)" \
  -c "CREATE TABLE stop ()" >/dev/null
# the client: one id every 20 ms, each in its own transaction, until `stop` has a row
q -c "DO \$\$ BEGIN
        WHILE NOT EXISTS (SELECT FROM stop) LOOP
            BEGIN
                INSERT INTO ids (at, id) VALUES (clock_timestamp(), cosid_next('w'));
            EXCEPTION WHEN others OR query_canceled THEN
                INSERT INTO ids (at, err) VALUES (clock_timestamp(), SQLSTATE || ' ' || SQLERRM);
            END;
            COMMIT;
            PERFORM pg_sleep(0.02);
        END LOOP;
      END \$\$" > "$DIR/client.log" 2>&1 &
client=$!
wait_for 20 "the client's first 50 ids" q -c "SELECT count(*) >= 50 FROM ids" >/dev/null
raise_store_floors
wait_for 20 "the keeper to find its lease freed" q -c "SELECT count(*) > 0 FROM cosid_pool() WHERE state = 'freed'" >/dev/null
freed_ceiling=$(q -c "SELECT ceiling FROM cosid_pool() WHERE state = 'freed'")
echo "# the freed window ends $(( freed_ceiling - $(now_ms) )) ms from now; the store is locked from 1 s before it to 2 s after it"
successor_open() {
    q -c "SELECT count(*) > 0 FROM cosid_pool() s WHERE s.namespace = 'w' AND s.state = 'active' AND s.ceiling > s.floor
             AND EXISTS (SELECT FROM cosid_pool() f WHERE f.state = 'freed')"
}
successor=f
until [ "$(now_ms)" -ge $(( freed_ceiling - 1000 )) ]; do
    [ "$successor" = t ] || successor=$(successor_open)
    sleep 0.05
done
lock_ms=$(( freed_ceiling + 2000 - $(now_ms) ))
q -c "BEGIN" -c "LOCK TABLE cosid.lease" -c "SELECT pg_sleep($lock_ms / 1000.0)" -c "COMMIT" >/dev/null
lock_end=$(now_ms)
wait_for 30 "ids after the outage" q -c "SELECT count(*) >= 10 FROM ids WHERE at > to_timestamp($lock_end / 1000.0)" >/dev/null
q -c "INSERT INTO stop DEFAULT VALUES" >/dev/null
status=0; wait "$client" || status=$?
[ "$status" = 0 ] || sed 's/^/#   /' "$DIR/client.log" | head -5

check_true "the successor was asked for and opened while the freed lease still served" "$successor"
check "the client ran through the raise and the outage without an error" "0 0" \
    "$status $(q -c "SELECT count(*) FROM ids WHERE err IS NOT NULL")"
q -c "SELECT DISTINCT err FROM ids WHERE err IS NOT NULL LIMIT 3" | sed 's/^/#   /'
gap=$(q -c "SELECT round(max(d)) FROM (SELECT extract(epoch FROM at - lag(at) OVER (ORDER BY n)) * 1000 AS d FROM ids) x")
echo "# $(q -c "SELECT count(*) FROM ids") ids; longest pause between two: $gap ms (the client sleeps 20 ms between calls)"
check_true "no pause of a second between two ids" "$(q -c "SELECT $gap < 1000")"
check_true "every id unique and larger than the one before" \
    "$(q -c "SELECT count(DISTINCT id) = count(id) AND bool_and(d) FROM (SELECT id, id > lag(id, 1, 0::bigint) OVER (ORDER BY n) AS d FROM ids WHERE id IS NOT NULL) x")"
assert_store_verified "$DIR" "$PORT" postgres "the store"
exit $FAIL

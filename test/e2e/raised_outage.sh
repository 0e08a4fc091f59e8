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
# Checks: no error; no call waiting a second for its id; every id unique and increasing;
# the successor was asked for and open while the freed lease still served; no two windows
# of the store's history overlap.
# Before the fix (main at c16ef0e) the successor was asked for only once the freed window
# was used up, inside the outage: the ids stopped at its ceiling until the lock ended.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/raised_outage"; PORT=27046
raised_server 6s 6s
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
store_outage_until $(( freed_ceiling + 2000 ))
# shellcheck disable=SC2154  # client: set by raised_server (test/lib/faults.sh)
stop_id_clients "$client"; status=$CLIENT_STATUS

check_true "the successor was asked for and opened while the freed lease still served" "$successor"
check_client_through "the raise and the outage" "$status"
assert_store_verified "$DIR" "$PORT" postgres "the store"
exit $FAIL

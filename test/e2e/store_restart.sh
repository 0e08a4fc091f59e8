#!/usr/bin/env bash
# A remote store restarted between two renewals (pg_ctl restart -m fast): the keeper's kept
# connection meets the old session's farewell at its next call.  It must make that call again
# at once on a new connection: no renewal fails, and no INSERT waits or fails.  (Before, the
# call failed, the store counted as down for ttl/6, and the renewal came about 6 s late with
# the default ttl: a 20 s outage starting then cost a 5 s gap in ids.)
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/store_restart"
S="$base/store"; A="$base/a"; PS=55458; PA=55459
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT

node_up s "$S" "$PS" "cosid.store_only = on"
qs -c "CREATE EXTENSION cosid" >/dev/null
# The default ttl (30 s): a renewal every 10 s, each call bounded by ttl/6 (5 s).
node_up a "$A" "$PA" "cosid.store_dsn = 'host=$S port=$PS dbname=postgres user=postgres'"
qa -c "CREATE EXTENSION cosid" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), n int)" >/dev/null
check_true "the instance issues ids through the store" "$(wait_until 20 qa -c "INSERT INTO t(n) VALUES (0) RETURNING id > 0")"
# Writers all along, their errors kept: one keeps its session and inserts a row every 20 ms,
# the other connects for each row, every 0.1 s (a psql and a backend each time: at every
# 20 ms, with a date process for each clock read, the two writers were most of the script's CPU).
( end=$((SECONDS + 28)); while [ "$SECONDS" -lt "$end" ]; do echo "INSERT INTO t(n) VALUES (1);"; sleep 0.02; done |
      qa -v ON_ERROR_STOP=0 >/dev/null 2>>"$base/writer1.err" ) &
( end=$((SECONDS + 28)); while [ "$SECONDS" -lt "$end" ]; do
      qa -c "INSERT INTO t(n) VALUES (2)" >/dev/null 2>>"$base/writer2.err" || true; sleep "$CLIENT_PACE"; done ) &
# Just after a renewal, the store restarts (about a second); the next renewal is due 10 s
# after the last, on a store long back.
r0=$(qa -c "SELECT renewals FROM cosid_stats()")
check_true "a renewal before the restart" "$(wait_until 12 qa -c "SELECT renewals > $r0 FROM cosid_stats()")"
f0=$(qa -c "SELECT renewal_failures FROM cosid_stats()")
r1=$(qa -c "SELECT renewals FROM cosid_stats()")
went=$(now_ms)
node_restart s fast
back=$(now_ms)
# The restart may have met a call of the keeper's pass: then it is tried again soon after the
# store is back.  Without one, the renewal comes when due (10 s after the last).
check_true "the keeper renews on the restarted store" "$(wait_until 14 qa -c "SELECT renewals > $r1 FROM cosid_stats()")"
failed=$(( $(qa -c "SELECT renewal_failures FROM cosid_stats()") - f0 ))
echo "# the store was down $((back - went)) ms; renewal failures meanwhile: $failed"
if [ "$failed" -gt 0 ]; then
    # the keeper's line when renewals succeed again: how long the failures lasted
    lasted=$(grep -oE 'renewals succeed again after [0-9]+ failed ones in [0-9]+ ms' "$A/server.log" | tail -1 | grep -oE '[0-9]+ ms' | grep -oE '[0-9]+')
    check_true "failed renewals succeed again within 2 s of the store being back ($((back - went)) ms down, ${lasted:-?} ms of failures), not a bound (5 s) later" \
        "$([ -n "$lasted" ] && [ "$lasted" -le $((back - went + 2000)) ] && echo t || echo f)"
fi
wait
check "no INSERT failed across the restart" "0" "$(cat "$base"/writer*.err 2>/dev/null | grep -c ERROR || true)"
check "no id twice" "0" "$(qa -c "SELECT count(*) - count(DISTINCT id) FROM t")"
assert_store_verified "$S" "$PS" postgres "S, restarted between renewals"
exit $FAIL

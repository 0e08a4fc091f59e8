#!/usr/bin/env bash
# A caller waits out a floor the store raised (after a failover or a restore: up to max_ttl
# + 2 x max_tolerance ahead of the store's clock) instead of failing with ZC004 when that
# wait is longer than cosid.acquire_timeout (issue 24: with the defaults, an asynchronous
# failover of the store raised the floors 70 s ahead while callers gave up after 30 s).
# A clock really behind the store's still fails with ZC004, after the raise's wait plus the
# timeout.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
base="${1:-/tmp/cosid-e2e}/raised_floor_wait"
trap 'stop_server "$DIR" immediate' EXIT
DIR="$base"; PORT=27040
start_server "$DIR" "$PORT" "cosid.ttl = '2s'" "cosid.acquire_timeout = '1s'"
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_ttl => '2s', max_tolerance => '1s')" \
  -c "SELECT cosid_namespace_create('w', tolerance => '1s')" >/dev/null
check_true "an id before the raise" "$(q -c "SELECT cosid_next('w') > 0")"

# raise_floors: the store raises every floor by max_ttl + 2 x max_tolerance (4 s), as on a
# new timeline; prints the raised floor; waits until the keeper found its lease gone.
raise_floors() {
    local lost; lost=$(q -c "SELECT leases_lost FROM cosid_stats()")
    q -c "SELECT cosid_store_follow_timeline(restored => true)" -c "SELECT cosid_fork_acknowledge()" >/dev/null  # a copy of the store, its original gone
    wait_for 20 "the keeper to find its lease lost" q -c "SELECT leases_lost > $lost FROM cosid_stats()" >/dev/null
    q -c "SELECT max(next_floor) FROM cosid.lease WHERE namespace = 'w'"
}
floor=$(raise_floors)
t0=$(now_ms)
out=$(q -v VERBOSITY=verbose -c "SELECT cosid_next('w')" 2>&1 || true)
took=$(( $(now_ms) - t0 ))
echo "# first call after the raise: ${took} ms ($(head -1 <<<"$out" | cut -c1-120))"
check_true "the first call after the raise waits it out (4 s) and gets an id, where acquire_timeout is 1 s" \
    "$([[ "$out" =~ ^[0-9]+$ ]] && echo t || echo f)"
check_true "that id is above the raised floor" "$(q -c "SELECT (extract(epoch FROM ts) * 1000)::bigint > $floor FROM cosid_parse($out, 'w')" 2>/dev/null || echo f)"

# A clock 6 s behind the store's (cosid.clock_offset): after a raise it waits the raise's
# wait (what is left of it) plus acquire_timeout's 1 s, then ZC004 (not forever).
floor=$(raise_floors)
t0=$(now_ms)
out=$(q -v VERBOSITY=verbose -c "SET cosid.clock_offset = -6000" -c "SELECT cosid_next('w')" 2>&1 || true)
took=$(( $(now_ms) - t0 ))
echo "# a clock 6 s behind: ${took} ms, $(grep -oE 'ERROR: +[0-9A-Z]{5}' <<<"$out" | head -1)"
check_true "a clock behind the store's still fails with ZC004" "$(grep -q 'ZC004' <<<"$out" && echo t || echo f)"
rest=$(( floor - t0 ))  # the raise's wait left when the call began (the store's clock is this host's)
check_true "after the raise's wait left ($rest ms) and the timeout (1 s), not before, nor much later" \
    "$([ "$took" -ge $(( rest + 800 )) ] && [ "$took" -lt $(( rest + 5000 )) ] && echo t || echo f)"

# The lease a raise freed: its backends moved on without an error (the first call above got
# an id).  A lease lost otherwise (revoked) after that raise still fails its next call once
# (ZC001): the keeper tells them apart by the lease row's fence (a raise adds 2^32).
q -c "SELECT cosid_next('w')" >/dev/null 2>&1 || true   # a lease granted after the raises
check "the keeper logged the leases the raises freed, without an error" 2 \
    "$(grep -c "was freed by the store's raise" "$DIR/server.log")"
out=$(q -v VERBOSITY=verbose -c "SELECT cosid_next('w')" \
        -c "SELECT count(*) FROM cosid_pool() p, cosid.revoke(p.namespace, p.slot) WHERE p.namespace = 'w'" \
        -c "DO \$\$
            DECLARE st text;
            BEGIN
                FOR i IN 1..100 LOOP  -- until the keeper's renewal found it (10 s at most)
                    BEGIN
                        PERFORM cosid_next('w');
                    EXCEPTION WHEN OTHERS THEN
                        st := SQLSTATE; EXIT;
                    END;
                    PERFORM pg_sleep(0.1);
                END LOOP;
                RAISE NOTICE 'sqlstate %', coalesce(st, 'none');
            END \$\$" 2>&1 || true)
check "a lease revoked after a raise still fails its backend's next call once (ZC001)" ZC001 \
    "$(sed -n 's/.*sqlstate \([0-9A-Z]*\).*/\1/p' <<<"$out" | head -1)"
exit $FAIL

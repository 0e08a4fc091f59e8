#!/usr/bin/env bash
# A floor the store raised (after a failover or a restore: max_ttl + 2 x max_tolerance ahead of
# the store's clock) stops no caller.
#  - With the defaults (cosid.max_borrow -1) ids go on through the raise: the held window is
#    used up to its ceiling (the raise put every next window above it), then the next window
#    is issued from its floor at once, ahead of the clock.  A client issuing every 20 ms
#    through a raise: no error, no gap of a second, every id unique and increasing, the later
#    ones above the raised floor.
#  - With cosid.max_borrow = 0 a caller waits the raise out instead of failing with ZC004
#    when that wait is longer than cosid.acquire_timeout; a clock really behind the store's
#    still fails with ZC004, after the raise's wait plus the timeout.
#  - A lease revoked after a raise still fails its backend's next call once (ZC001).
# shellcheck source=SCRIPTDIR/../lib/faults.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
base="${1:-/tmp/cosid-e2e}/raised_floor_wait"
trap 'node_stop main immediate' EXIT
DIR="$base"; PORT=27040
node_up main "$DIR" "$PORT" "cosid.ttl = '2s'" "cosid.acquire_timeout = '1s'"
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_ttl => '2s', max_tolerance => '1s')" \
  -c "SELECT cosid_namespace_create('w', tolerance => '1s')" >/dev/null
# (the first acquire of a new server, on a loaded machine, may take longer than the 1 s
# timeout the checks below rely on)
check_true "an id before the raise" "$(q -c "SET cosid.acquire_timeout = '20s'" -c "SELECT cosid_next('w') > 0")"

# raised_floor: the floor the store's last raise put every slot of w at (ms).  A slot granted
# or renewed since holds that window's ceiling as its next_floor: above the raised floor once
# the store's clock came within ttl + tolerance of it, which on a loaded machine the keeper's
# grant of the freed lease's successor often did before a check read it (max(next_floor) then
# was that ceiling, seconds above the raised floor, and ids rightly issued between the two
# failed the checks).  The slots nobody took since hold the raised floor exactly (as
# cosid_leases shows them: a slot free at the raise takes it when next written, the lazy raise).
raised_floor() { q -c "SELECT min(next_floor) FROM cosid_leases('w')"; }
# raise_floors: the store raises every floor by max_ttl + 2 x max_tolerance (4 s), as on a
# new timeline, after this instance took a fresh lease; prints the raised floor; waits until
# the keeper found its lease freed.
release_w() { q -c "SELECT cosid_release(namespace, slot) FROM cosid_pool() WHERE namespace = 'w' AND slot IS NOT NULL" >/dev/null; }
raise_floors() {
    local lost
    release_w
    q -c "SELECT cosid_next('w')" >/dev/null
    lost=$(q -c "SELECT leases_freed FROM cosid_stats()")
    # shellcheck disable=SC2119  # (raise_store_floors' arguments are optional psql arguments)
    raise_store_floors
    wait_for 20 "the keeper to find its lease freed" q -c "SELECT leases_freed > $lost FROM cosid_stats()" >/dev/null
    raised_floor
}

# 1. Defaults: a client issues every 20 ms until it is told to stop (at most 3000 ids); the
# raise comes after its first 100 ids, and it is stopped once 50 of its ids came from above
# the raised floor, the held window used up.  (Told to stop, not stopped after a fixed count:
# on a loaded machine the raise came late in a run of 400 ids, which ended before the held
# window was used up, and no id came from above the raised floor.)
q -c "CREATE TABLE ids (n serial PRIMARY KEY, at timestamptz NOT NULL, id bigint NOT NULL, done timestamptz NOT NULL)" \
  -c "CREATE TABLE client_stop ()" >/dev/null
q -c "DO \$\$ BEGIN
        FOR i IN 1..3000 LOOP
            EXIT WHEN EXISTS (SELECT FROM client_stop);
            INSERT INTO ids (at, id, done) VALUES (clock_timestamp(), cosid_next('w'), clock_timestamp());
            COMMIT;
            PERFORM pg_sleep(0.02);
        END LOOP;
      END \$\$" > "$DIR/client.log" 2>&1 &
client=$!
wait_for 20 "the client's first 100 ids" q -c "SELECT count(*) >= 100 FROM ids" >/dev/null
freed=$(q -c "SELECT leases_freed FROM cosid_stats()")
lost=$(q -c "SELECT leases_lost FROM cosid_stats()")
# shellcheck disable=SC2119  # (raise_store_floors' arguments are optional psql arguments)
raise_store_floors
floor=$(raised_floor)
wait_for 60 "50 of the client's ids from above the raised floor" \
    q -c "SELECT count(*) >= 50 FROM ids, cosid_parse(ids.id, 'w') p WHERE (extract(epoch FROM p.ts) * 1000)::bigint > $floor" >/dev/null
q -c "INSERT INTO client_stop DEFAULT VALUES" >/dev/null
status=0; wait "$client" || status=$?
check "the client issued its ids through the raise (100 before it, 50 above the raised floor), without an error" \
    "0 t" "$status $(q -c "SELECT count(*) >= 150 FROM ids")"
[ "$status" = 0 ] || sed 's/^/#   /' "$DIR/client.log" | head -5
# (what the raise may make a caller wait is the call itself; the time between two calls also
# holds the client's commit and sleep, which a loaded machine stretches: shown, not judged)
gap=$(q -c "SELECT max(d) FROM (SELECT extract(epoch FROM at - lag(at) OVER (ORDER BY n)) * 1000 AS d FROM ids) x")
wait=$(q -c "SELECT max(extract(epoch FROM done - at) * 1000) FROM ids")
echo "# longest call: ${wait%.*} ms; longest time between two calls' starts: ${gap%.*} ms (the client sleeps 20 ms between calls)"
check_true "no call waited a second for its id" "$(q -c "SELECT $wait < 1000")"
check_true "every id unique and larger than the one before" \
    "$(q -c "SELECT count(DISTINCT id) = count(*) AND bool_and(d) FROM (SELECT id, id > lag(id, 1, 0::bigint) OVER (ORDER BY n) AS d FROM ids) x")"
check_true "the keeper found its lease freed by the raise (cosid_stats().leases_freed)" "$(q -c "SELECT leases_freed > $freed FROM cosid_stats()")"
check "a freed lease is not a lost one: leases_lost unchanged, its health check ok" "$lost|ok" \
    "$(q -c "SELECT leases_lost FROM cosid_stats()")|$(q -c "SELECT status FROM cosid_health() WHERE name = 'leases_lost'")"
check_true "the last ids come from a window above the raised floor" \
    "$(q -c "SELECT (extract(epoch FROM p.ts) * 1000)::bigint > $floor FROM ids, cosid_parse(ids.id, 'w') p ORDER BY n DESC LIMIT 1")"
check_true "ids below the raised floor all came before ids above it (the held window is used up first)" \
    "$(q -c "SELECT coalesce(max(n) FILTER (WHERE (extract(epoch FROM p.ts) * 1000)::bigint <= $floor), 0)
                  < min(n) FILTER (WHERE (extract(epoch FROM p.ts) * 1000)::bigint > $floor) FROM ids, cosid_parse(ids.id, 'w') p")"

# 1b. An instance with no window when the raise comes (it just started, or released its
# lease) waits only until the store may grant above the raised floor: at most max_tolerance
# (1 s here) after the raise, then it issues ahead of the clock.
floor=$(raise_floors)
release_w
t0=$(now_ms)
out=$(q -v VERBOSITY=verbose -c "SELECT cosid_next('w')" 2>&1 || true)
took=$(( $(now_ms) - t0 ))
echo "# a new window right after a raise: ${took} ms"
check_true "a new window right after a raise gives an id above the raised floor within max_tolerance" \
    "$([[ "$out" =~ ^[0-9]+$ ]] && [ "$took" -lt 2500 ] && q -c "SELECT (extract(epoch FROM ts) * 1000)::bigint > $floor FROM cosid_parse($out, 'w')" || echo f)"

# 2. cosid.max_borrow = 0: the next window is waited for, not borrowed.
set_conf cosid.max_borrow 0
floor=$(raise_floors)
release_w  # the held window ends: the next call needs the raised one
t0=$(now_ms)
out=$(q -v VERBOSITY=verbose -c "SELECT cosid_next('w')" 2>&1 || true)
took=$(( $(now_ms) - t0 ))
echo "# max_borrow 0, first call on the raised window: ${took} ms ($(head -1 <<<"$out" | cut -c1-120))"
check_true "the call waits the raise out (4 s) and gets an id, where acquire_timeout is 1 s" \
    "$([[ "$out" =~ ^[0-9]+$ ]] && echo t || echo f)"
ts=$(q -c "SELECT (extract(epoch FROM ts) * 1000)::bigint FROM cosid_parse($out, 'w')" 2>/dev/null || true)
echo "# the raised floor: $floor ms; that id's timestamp: ${ts:-none} ms"
check_true "that id is above the raised floor" "$([[ "$ts" =~ ^[0-9]+$ ]] && [ "$ts" -gt "$floor" ] && echo t || echo f)"

# A clock 6 s behind the store's (cosid.clock_offset): after a raise it waits the raise's
# wait (what is left of it) plus acquire_timeout's 1 s, then ZC004 (not forever).
floor=$(raise_floors)
release_w
t0=$(now_ms)
out=$(q -v VERBOSITY=verbose -c "SET cosid.clock_offset = -6000" -c "SELECT cosid_next('w')" 2>&1 || true)
took=$(( $(now_ms) - t0 ))
echo "# a clock 6 s behind: ${took} ms, $(grep -oE 'ERROR: +[0-9A-Z]{5}' <<<"$out" | head -1)"
check_true "a clock behind the store's still fails with ZC004" "$(grep -q 'ZC004' <<<"$out" && echo t || echo f)"
rest=$(( floor - t0 ))  # the raise's wait left when the call began (the store's clock is this host's)
check_true "after the raise's wait left ($rest ms) and the timeout (1 s), not before, nor much later" \
    "$([ "$took" -ge $(( rest + 800 )) ] && [ "$took" -lt $(( rest + 5000 )) ] && echo t || echo f)"
reset_conf cosid.max_borrow

# The leases the raises freed: their backends moved on without an error.  A lease lost
# otherwise (revoked) after that raise still fails its next call once (ZC001): the keeper
# tells them apart by the store's last raise.
check "the keeper logged the leases the raises freed, without an error" 4 \
    "$(grep -c "was freed by the store's raise" "$DIR/server.log")"
release_w
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
assert_store_verified "$DIR" "$PORT" postgres
exit "$FAIL"

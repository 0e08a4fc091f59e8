#!/usr/bin/env bash
# Faults of processes while clients insert (docs/faults.md): kill -9 of a backend, the
# keeper stopped (SIGTERM) and killed (SIGKILL), a frozen backend whose slot is taken,
# an administrator's forced release, many backends on one lease, fast and immediate
# shutdown.  Each case is bounded; the checks at the end hold over everything inserted.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
fault_server "${1:-/tmp/cosid-e2e}/faults_process" 55450
trap 'touch "$DIR/stop"; kill $(jobs -p) 2>/dev/null || true; node_stop main immediate' EXIT

# holder_script FILE KEY: a session that binds a slot (its first id is a row of t, so that
# checks of the last id issued on a lease see it), waits at barrier KEY (barrier_close in
# test/lib/check.sh) until the test lets it go, then calls twice more.
holder_script() {
    cat > "$1" <<SQL
\\set ON_ERROR_STOP 0
\\set VERBOSITY sqlstate
WITH r AS (INSERT INTO t(client, phase) VALUES (0, 'holder') RETURNING id) SELECT 'first ' || (cosid_parse(id, 'f')).slot FROM r;
SELECT 'go' FROM pg_advisory_lock_shared($2);
SELECT 'after ' || cosid_next('f');
SELECT 'again ' || (cosid_parse(cosid_next('f'), 'f')).slot;
SQL
    chown "$PG_USER" "$1"
}

wait_service() {  # wait_service T0_MS: until cosid_next('f') works again (at most 60 s); prints ms since T0
    while [ $(( $(now_ms) - $1 )) -lt 60000 ]; do
        if q -c "SELECT cosid_next('f')" >/dev/null 2>&1; then echo $(( $(now_ms) - $1 )); return; fi
        sleep 0.1
    done
    echo "never"
}

echo "# 1. kill -9 of a backend in the middle of inserting"
# Leases of 30 s for this case, through a reload of cosid.ttl: they must outlive the crash
# restart however slow it is (WAL replay on a busy machine: 11 s seen on a loaded 2-core
# machine, past the 10 s this case had), so that the new incarnation surely meets them still live.
# The redo is kept short: a checkpoint just before the victim starts, and the victim killed
# as soon as it is bound (its INSERT had run while the renewals under the new ttl were waited
# for, and the replay of what it wrote took a crash restart of 37 s on a loaded machine).
# No lease goes back for being idle in this case (cosid.pool_idle_timeout, 1 s on this
# server): the victim claims nothing while it waits at its barrier, and on a loaded machine
# the clients claimed nothing for a second either, so the keeper released the instance's
# lease in order just before (once 7 ms after) the kill.  The old incarnation then held no
# live lease to meet, and the new one took the released slot at its exact last timestamp.
set_conf cosid.pool_idle_timeout 1h
set_conf cosid.ttl 30s
PHASE=kill9; start_clients 6; sleep 2
old_inc=$(q -c "SELECT incarnation FROM cosid_stats()")
check "a reload of cosid.ttl reaches the keeper and its store timeouts" 1 \
    "$(wait_for 30 "the keeper's log of the reload" bash -c "grep -q 'cosid.ttl is now 30000 ms; store calls are bounded by 5000 ms' '$DIR/server.log' && echo t" >/dev/null
       grep -c 'cosid.ttl is now 30000 ms; store calls are bounded by 5000 ms' "$DIR/server.log")"
check_true "the old incarnation's leases, renewed under the new ttl, live more than 5 s" "$(wait_for 30 "renewals under the new ttl" q -c "
    SELECT min(expires_at) - cosid.store_now() > 5000 FROM cosid.lease WHERE incarnation = '$old_inc'")"
q -c "CHECKPOINT" >/dev/null
# the victim: a backend in the middle of a long INSERT ... DEFAULT cosid_next('f'), held at
# barrier 22030 before its last row (its 3,000,000 rows had all been inserted before a poll on
# a loaded machine saw it bound, and there was no victim left to kill)
barrier_close 22030
q -c "INSERT INTO t(client, phase) SELECT 0, 'victim' FROM generate_series(1, 100000) g
        WHERE g < 100000 OR (SELECT g > 0 FROM pg_advisory_lock_shared(22030))" >/dev/null 2>&1 &
check_true "the victim inserted up to its last row" "$(wait_for 60 "the victim at the barrier" barrier_waiters 1)"
victim=$(barrier_pids)
bound=$(wait_for 30 "the victim's lease as the instance's only one in use" q -c "
    SELECT count(*) = 1 FROM cosid_pool() WHERE namespace = 'f' AND state = 'active' AND backends > 0")
t0=$(now_ms); kill -9 "$victim"
barrier_open
check_true "the victim is inserting, on the instance's lease" "$bound"
rec=$(wait_service "$t0"); echo "# service back after ${rec} ms (crash restart of all backends; new keeper, new slots)"
sleep 2; stop_clients
reset_conf cosid.ttl
reset_conf cosid.pool_idle_timeout
new_inc=$(q -c "SELECT incarnation FROM cosid_stats()")
check_true "crash restart is a new incarnation" "$([ "$old_inc" != "$new_inc" ] && echo t)"
# The new incarnation meets the old one's leases live unless the crash restart outlasted them
# (about 20 s left at the kill: renewed every ttl/3): the store's rows tell which it was.
live=$(old_lease_live_at_successor "$old_inc")
check_true "the old incarnation held a lease when it ended (the case has a live lease to meet)" \
    "$(q -c "WITH $(held_at_end "$old_inc") SELECT count(*) > 0 FROM held")"
if [ "$live" = t ]; then
    check_true "duplicate owner key counted: the old incarnation's live leases were seen" "$(q -c "SELECT duplicate_owner_keys > 0 FROM cosid_stats()")"
else
    echo "# skipped: duplicate owner key counted (the crash restart outlasted the old incarnation's leases: [$live])"
fi
check "no new window starts below a timestamp the old incarnation issued on its slot" 0 "$(no_window_below_old_ids "$old_inc")"
check "old live leases not taken over: new incarnation's first windows avoid them" 0 "$(taken_over_live_leases "$old_inc")"
echo "# errors during the fault: $(errors_of kill9)"

echo "# 2a. the keeper stopped with SIGTERM: restarted, resumes renewing"
PHASE=keeper_term; start_clients 4; sleep 1.5
renewals0=$(q -c "SELECT renewals FROM cosid_stats()")
kpid=$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'cosid keeper'")
t0=$(now_ms); kill -TERM "$kpid"
for _ in $(seq 1 100); do
    k2=$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'cosid keeper'")
    [ -n "$k2" ] && [ "$k2" != "$kpid" ] && break; sleep 0.1
done
echo "# new keeper after $(( $(now_ms) - t0 )) ms"
check_true "a new keeper runs" "$([ -n "$k2" ] && [ "$k2" != "$kpid" ] && echo t)"
check_true "renewals resumed under the new keeper" "$(wait_for 30 "a renewal by the new keeper" q -c "SELECT renewals > $renewals0 FROM cosid_stats()")"
stop_clients
check "same incarnation: a keeper restart is not a server restart" "$new_inc" "$(q -c "SELECT incarnation FROM cosid_stats()")"
echo "# inserts while the keeper restarted: $(oks_of keeper_term) ok; errors: $(errors_of keeper_term)"

echo "# 2b. the keeper killed with SIGKILL: the postmaster restarts everything"
PHASE=keeper_kill; start_clients 4; sleep 1.5
kpid=$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'cosid keeper'")
t0=$(now_ms); kill -9 "$kpid"
rec=$(wait_service "$t0"); echo "# service back after ${rec} ms"
check_true "keeper back after SIGKILL" "$(wait_for 30 "a keeper after the restart" q -c "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'cosid keeper'")"
stop_clients

echo "# 3. a backend and the keeper frozen (SIGSTOP) past ttl + tolerance; the slot taken by another owner"
# The lease must not go idle (1 s here) and be released in order before the freeze: then it
# is not lost, only ended, and the backend rightly goes on without ZC001.  (10 min: at 10 s, on
# a machine loaded far past its cores, the holder sat at its barrier longer than that, and its
# lease was handed back before the freeze.)
set_conf cosid.pool_idle_timeout 10min
# Leases left from the cases before are released first: the holder's first id must come from
# a lease acquired under this idle timeout, not be the last of one about to be released for
# idleness (then the pool had no lease left to freeze, and the case had no slot).
q -c "SELECT cosid_release()" >/dev/null
wait_for 30 "no lease of 'f' left in the pool" q -c "SELECT count(*) = 0 FROM cosid_pool() WHERE namespace = 'f'" >/dev/null
holder_script "$DIR/frozen.sql" 22031
barrier_close 22031
q -v ON_ERROR_STOP=0 -f "$DIR/frozen.sql" > "$DIR/frozen.out" 2>&1 &
fpsql=$!
# the holder waits at the barrier, having issued; it stays there until let go below
check_true "the holder waits after its first id" "$(wait_for 60 "the holder at the barrier" barrier_waiters 1)"
bpid=$(barrier_pids)
# the slot of the holder's first id (the pool's view of 'active' came back empty once on a
# loaded machine, and the case had no slot to freeze)
wait_for 15 "the holder's first id in its output" bash -c "grep -q '^first ' '$DIR/frozen.out' && echo t" >/dev/null
slot=$(grep '^first ' "$DIR/frozen.out" | awk '{print $2}')
echo "# the holder issued on slot $slot; the pool: $(q -c "SELECT string_agg(slot || ' ' || state, ', ') FROM cosid_pool() WHERE namespace = 'f'")"
kpid=$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'cosid keeper'")
kill -STOP "$bpid" "$kpid"
# > ttl (2 s) + tolerance (300 ms) after the keeper's last renewal: the lease expires in the store
check_true "the frozen lease expires in the store (ttl + tolerance past)" "$(wait_for 30 "the frozen lease to expire" q -c "
    SELECT expires_at + 300 < cosid.store_now() FROM cosid.lease WHERE namespace = 'f' AND slot = $slot")"
thief=$(q -c "SELECT slot || ' ' || floor FROM cosid.acquire('f', 'thief', gen_random_uuid(), 60000, $slot)")
# The keeper first, until it finds the lease lost and closes it; then the backend, whose
# wait at the barrier is over at once (opened while it was stopped).  Resumed together, the
# backend could issue once more inside its window before the keeper looked (safe: the
# thief's window starts at its ceiling) and the ZC001 would come a call later.
lost_before=$(q -c "SELECT leases_lost FROM cosid_stats()")
kill -CONT "$kpid"
check_true "the keeper finds the frozen lease lost" "$(wait_until 10 q -c "SELECT leases_lost > $lost_before FROM cosid_stats()")"
barrier_open
kill -CONT "$bpid"
wait "$fpsql" || true
sed 's/^/#   /' "$DIR/frozen.out"
check "the thief got the frozen backend's slot" "$slot" "${thief%% *}"
check "after resuming, the frozen backend refuses to issue: slot lost (ZC001)" 1 "$(grep -c 'ERROR:  ZC001' "$DIR/frozen.out")"
check "its next call issues on the instance's new lease" 1 "$(grep -c '^again ' "$DIR/frozen.out")"
check_true "the new slot is not the lost one" "$(grep '^again ' "$DIR/frozen.out" | awk -v s="$slot" '{print ($2 != s) ? "t" : "f"}')"
check_true "lease loss counted" "$(q -c "SELECT leases_lost > 0 FROM cosid_stats()")"
q -c "SELECT * FROM cosid.revoke('f', $slot)" >/dev/null   # the thief goes away; its window stays closed for us
reset_conf cosid.pool_idle_timeout

echo "# 6. forced release by an administrator of a slot in use"
# In order: the keeper closes the lease's issue word and hands the store its exact last
# timestamp; the backends using it go on with the instance's next lease, without an error.
# The instance's lease must not go idle between the phases (1 s here): on a loaded machine
# the holder's first id was the last one of the previous phase's lease, released for idleness
# just after, and the administrator's release found that slot free ('not held').
set_conf cosid.pool_idle_timeout 10min
holder_script "$DIR/forced.sql" 22036
barrier_close 22036
PHASE=forced; start_clients 3
q -v ON_ERROR_STOP=0 -f "$DIR/forced.sql" > "$DIR/forced.out" 2>&1 &
fpsql=$!
# the holder has issued its first id (on a loaded machine that takes more than a moment)
check_true "the holder issued on its slot" "$(wait_for 60 "the holder at the barrier" barrier_waiters 1)"
wait_for 15 "the holder's first id in its output" bash -c "grep -q '^first ' '$DIR/forced.out' && echo t" >/dev/null
first_slot=$(grep '^first ' "$DIR/forced.out" | awk '{print $2}')
# the slot the instance issues on now: the holder's, unless its lease had ended just after
slot=$(q -c "SELECT slot FROM cosid_pool() WHERE namespace = 'f' AND state = 'active'
             ORDER BY slot = ${first_slot:--1} DESC LIMIT 1")
[ "$slot" = "$first_slot" ] || echo "# the holder's first id was on slot $first_slot, the instance now issues on slot $slot"
check "administrator releases the slot in use" "released" "$(q -c "SELECT cosid_release('f', $slot)")"
# what the store holds for the slot now: the released lease's next_floor, or the floor of
# the instance's next lease if it got the same slot back
handed_on=$(q -c "SELECT CASE WHEN incarnation IS NULL THEN next_floor ELSE floor END FROM cosid.lease
                  WHERE namespace = 'f' AND slot = $slot")
barrier_open   # the holder calls again, after the release
wait "$fpsql" || true
stop_clients
reset_conf cosid.pool_idle_timeout
sed 's/^/#   /' "$DIR/forced.out"
check "the holder goes on without an error" 0 "$(grep -c 'ERROR' "$DIR/forced.out")"
check "and issues again" 1 "$(grep -c '^again ' "$DIR/forced.out")"
last_at_or_below=$(q -c "
    SELECT max((extract(epoch FROM p.ts) * 1000)::bigint)
    FROM t, cosid_parse(t.id, 'f') p WHERE p.slot = $slot AND (extract(epoch FROM p.ts) * 1000)::bigint <= $handed_on")
check "the store got the exact last timestamp issued on the slot (an id has it; nothing after it in that lease)" \
    "$handed_on" "$last_at_or_below"
[ "$handed_on" = "$last_at_or_below" ] || q -c "
    SELECT p.ts, t.phase, t.client, t.id FROM t, cosid_parse(t.id, 'f') p
    WHERE p.slot = $slot AND (extract(epoch FROM p.ts) * 1000)::bigint BETWEEN $handed_on - 200 AND $handed_on + 200
    ORDER BY t.id" | sed 's/^/#   around the handed-on timestamp: /' 

echo "# 7. many backends, one lease: 6 backends of namespace 'tiny' (4 slots) share one slot"
q -c "SELECT cosid_namespace_create('tiny', slot_bits => 2, tolerance => '300 ms')" >/dev/null
set_conf cosid.pool_idle_timeout 10min
barrier_close 22037   # the 6 stay there, after their call, until counted
for i in 1 2 3 4 5 6; do
    # (no ON_ERROR_STOP: a session whose call fails still waits at the barrier)
    q -v ON_ERROR_STOP=0 -v VERBOSITY=verbose -c "SELECT 'slot ' || (cosid_parse(cosid_next('tiny'), 'tiny')).slot" \
        -c "SELECT 'go' FROM pg_advisory_lock_shared(22037)" > "$DIR/tiny.$i.out" 2>&1 &
done
wait_for 60 "the 6 backends of 'tiny' at the barrier" barrier_waiters 6 >/dev/null
shared_lease=$(q -c "SELECT count(*) || ' ' || sum(backends) FROM cosid_pool() WHERE namespace = 'tiny' AND state = 'active'")
held_tiny=$(q -c "SELECT count(*) FROM cosid.lease WHERE namespace = 'tiny' AND incarnation IS NOT NULL")
barrier_open
wait
reset_conf cosid.pool_idle_timeout
check "one lease of 'tiny', used by the 6 backends" "1 6" "$shared_lease"
check "all 6 issued on the same slot" "6 1" "$(cat "$DIR"/tiny.*.out | grep '^slot ' | awk '{n++; s[$2]=1} END {print n, length(s)}')"
check "the store holds one slot of 'tiny' for the instance" 1 "$held_tiny"

echo "# 8a. fast shutdown during load: every idle slot released with its exact last timestamp"
PHASE=fast; start_clients 5; sleep 2
touch "$DIR/stop"; t0=$(now_ms)
node_stop main fast
stop_clients
node_start main
echo "# server back after $(( $(now_ms) - t0 )) ms"
check "slots of the old incarnation released with next_floor = last issued timestamp" 0 "$(q -c "
    WITH last AS (SELECT p.slot, max((extract(epoch FROM p.ts) * 1000)::bigint) AS ts
                  FROM t, cosid_parse(t.id, 'f') p GROUP BY 1)
    SELECT count(*) FROM cosid.lease l JOIN last USING (slot)
    WHERE l.namespace = 'f' AND l.incarnation IS NULL AND l.previous_owner_key <> 'thief' AND l.next_floor < last.ts")"
echo "# released in order: $(q -c "SELECT count(*) FROM cosid.lease WHERE namespace = 'f' AND incarnation IS NULL AND fence > 0")"
PHASE=after_fast; start_clients 4; sleep 2; stop_clients

echo "# 8b. immediate shutdown during load: new windows start at or after the old ceilings"
PHASE=immediate; start_clients 5; sleep 2
inc_before=$(q -c "SELECT incarnation FROM cosid_stats()")
touch "$DIR/stop"; t0=$(now_ms)
node_stop main immediate
stop_clients
node_start main
# shellcheck disable=SC2034  # PHASE: read by the clients of test/lib/faults.sh
PHASE=after_immediate; start_clients 4
rec=$(wait_service "$t0"); echo "# service back after ${rec} ms"
sleep 3; stop_clients
check "no new window starts below a timestamp the crashed incarnation issued on its slot" 0 "$(no_window_below_old_ids "$inc_before")"
check "leases live at the crash were not taken over before their ceiling" 0 "$(taken_over_live_leases "$inc_before")"

final_checks
exit $FAIL

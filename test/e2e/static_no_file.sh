#!/usr/bin/env bash
# Static slots without a state file (issue 22, item 3).  Nothing remembers across a restart
# how far a static slot was used, so a restart must never issue an id that the previous run
# (or the previous keeper) may have issued: without a file no id is borrowed ahead of the
# clock, and the first window after a start begins in a later tick than the clock's at the
# start.  A seconds-unit 53-bit namespace (4,096 ids per second per slot) makes borrowing
# easy: 24,000 rows in one statement used to reach ~5 s ahead of the clock, and the first
# window after a restart started at cosid.not_before (0), on ticks already used.
# Two restarts: the whole server (pg_ctl restart -m fast), and the keeper alone (SIGTERM,
# restarted by the postmaster with shared memory kept) after the window was released.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/static_no_file"; PORT=55478
ROWS=24000   # ~6 ticks of 4,096 ids
node_stop main immediate  # a run killed before its trap
node_up main "$DIR" "$PORT" "cosid.static_slots = 's53:3'" "cosid.state_file = ''" "cosid.static_ahead = '10s'"
trap 'node_stop main immediate' EXIT
q -c "CREATE EXTENSION cosid" \
  -c "SELECT cosid_namespace_create('s53', slot_bits => 4, unit => 's', total_bits => 53)" \
  -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('s53'), phase text)" >/dev/null

ts_ms() { echo "(extract(epoch FROM (cosid_parse($1, 's53')).ts) * 1000)::bigint"; }
# insert PHASE N: N ids in one statement, into the table with its primary key; prints how
# many collided with an earlier id (ON CONFLICT DO NOTHING counts them instead of failing)
insert() {
    local inserted
    inserted=$(q -c "SET cosid.acquire_timeout = '30s'" -c "
        WITH i AS (INSERT INTO t(phase) SELECT '$1' FROM generate_series(1, $2) ON CONFLICT (id) DO NOTHING RETURNING 1)
        SELECT count(*) FROM i")
    echo $(( $2 - inserted ))
}
# ahead PHASE: how far (ms) the last id of PHASE is ahead of the clock now (an id's tick
# starts at its timestamp: <= 0 means it was not borrowed ahead of the clock)
ahead() { q -c "SELECT max($(ts_ms id)) - (extract(epoch FROM clock_timestamp()) * 1000)::bigint FROM t WHERE phase = '$1'"; }
# later PHASE: every id of PHASE is in a later tick than every earlier id
later() {
    q -c "SELECT coalesce(min($(ts_ms id)) FILTER (WHERE phase = '$1') > max($(ts_ms id)) FILTER (WHERE phase <> '$1'), false) FROM t"
}
keeper_pid() { q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'cosid keeper'"; }

check "the namespace has 4,096 ids per second per slot, and runs without a state file" "4096|false" \
    "$(q -c "SELECT ids_per_second_per_slot || '|' || (SELECT static_clock_guard FROM cosid_stats()) FROM cosid_layouts WHERE namespace = 's53'")"

echo "# a restart of the whole server (pg_ctl restart -m fast)"
check "$ROWS ids in one statement" 0 "$(insert server $ROWS)"
ahead=$(ahead server)
check_true "without a state file no id is issued ahead of the clock (the last: $ahead ms ahead)" \
    "$([ "$ahead" -le 0 ] && echo t)"
node_restart main fast
check "after the restart, 0 of 5,000 ids repeat one issued before it" 0 "$(insert server_after 5000)"
check_true "the first id after the restart is in a later tick than every id before it" "$(later server_after)"
out=$(q -v VERBOSITY=sqlstate -c "INSERT INTO t(phase) SELECT 'server_plain' FROM generate_series(1, 1000)" 2>&1 || true)
check "a plain INSERT (no ON CONFLICT) after it: no unique violation" "" "$out"

echo "# the keeper alone restarted (SIGTERM) after the window was released"
# (the clock past every id so far: this case stands on its own)
wait_until 15 q -c "SELECT max($(ts_ms id)) < (extract(epoch FROM clock_timestamp()) * 1000)::bigint - 1000 FROM t" >/dev/null
check "$ROWS ids in one statement" 0 "$(insert keeper $ROWS)"
ahead=$(ahead keeper)
check_true "without a state file no id is issued ahead of the clock (the last: $ahead ms ahead)" \
    "$([ "$ahead" -le 0 ] && echo t)"
check "the window is released (its exact last timestamp is then in the keeper's memory only)" "released" \
    "$(q -c "SELECT cosid_release('s53', 3)")"
old=$(keeper_pid)
q -c "SELECT pg_terminate_backend($old)" >/dev/null
check_true "the postmaster starts a new keeper" \
    "$(wait_until 15 q -c "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'cosid keeper' AND pid <> $old")"
check "after the keeper's restart, 0 of 5,000 ids repeat one issued before it" 0 "$(insert keeper_after 5000)"
check_true "the first id after it is in a later tick than every id before it" "$(later keeper_after)"

echo "# the clock 30 s back within a run: no borrowing, so the used-up tick waits, then a clear error"
out=$(q -v VERBOSITY=verbose -c "SET cosid.clock_offset = -30000" -c "SET cosid.acquire_timeout = '1s'" \
        -c "SELECT count(cosid_next('s53')) FROM generate_series(1, 10000)" 2>&1 || true)
check_true "ZC004, saying that static slots without a state file issue nothing ahead of the clock" \
    "$(grep -q 'ZC004' <<<"$out" && grep -q 'without a state file issue no id ahead of the clock' <<<"$out" && echo t)"
check_true "the start WARNING names the cost: no id ahead of the clock" \
    "$(grep -q 'none is issued ahead of the clock' "$DIR/server.log" && echo t)"
assert_store_verified "$DIR" "$PORT" postgres "the database's history of its static windows"
exit $FAIL

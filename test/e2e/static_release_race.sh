#!/usr/bin/env bash
# A static slot's release racing its next window (review of issue 11): cosid_release() flags
# window A while the keeper is past A in its pass (held up by a renewal that waits on a
# locked lease row), and a backend asks for a new window B in the same pass.  B must not
# start while A is open: A's release would then write A's last timestamp over B's ceiling,
# and the file would hold less than B had issued (a crash then issues B's ids again).
# The state file must never hold less than the last timestamp issued on its slot.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/static_release_race"; PORT=55476
node_up main "$DIR" "$PORT" "cosid.static_slots = 'st:3'" "cosid.static_ahead = '2s'" "cosid.ttl = '30s'"
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT
FILE="$DIR/data/cosid.state"
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('st')" \
  -c "SELECT cosid_namespace_create('blk', slot_bits => 2)" >/dev/null
q -c "SELECT cosid_next('st')" -c "SELECT cosid_next('blk')" >/dev/null  # pool entry 0: st (static), 1: blk (leased)
check "st is static, blk leased" "st|static blk|lease" \
    "$(q -c "SELECT namespace || '|' || kind FROM cosid_pool() ORDER BY kind DESC" | tr '\n' ' ' | sed 's/ $//')"

# A locker holds blk's lease row: its next renewal (every 10 s) waits out the keeper's lock
# timeout (ttl/6 = 5 s), with the keeper past st's entry in its pass.
q -c "BEGIN" \
    -c "SELECT count(*) FROM (SELECT 1 FROM cosid.lease WHERE namespace = 'blk' AND incarnation IS NOT NULL FOR UPDATE) l" \
    -c "SELECT pg_sleep(20)" -c "COMMIT" >/dev/null 2>&1 &
check_true "the keeper waits on the locked row, past st's entry in its pass" \
    "$(wait_until 15 q -c "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'cosid keeper' AND wait_event_type = 'Lock'")"
# Now: A is flagged for release, and a request for st is posted, before the keeper moves on.
q -c "SELECT cosid_release('st', 3)" >"$DIR/release.out" 2>&1 &
releaser=$!
for _ in $(seq 1 100); do  # the flag is set (A shows as releasing): only then ask for st
    [ "$(q -c "SELECT count(*) FROM cosid_pool() WHERE namespace = 'st' AND state = 'releasing'")" = 1 ] && break
done
rm -f "$DIR/stop"
(
    trap - EXIT; set +e
    while [ ! -e "$DIR/stop" ]; do q -c "SELECT count(cosid_next('st')) FROM generate_series(1, 2000)" >/dev/null 2>&1; done
) &
issuer=$!
# The file must hold at least what was issued: last_issued read first, then the file.
# Sampled until 3 s after the release is done (B's first renewal fixes the file ~1 s after
# B starts issuing), at most 25 s.
violations=0; samples=0
deadline=$(( $(now_ms) + 25000 )); done_at=""
while [ "$(now_ms)" -lt "$deadline" ] && { [ -z "$done_at" ] || [ "$(now_ms)" -lt "$done_at" ]; }; do
    [ -z "$done_at" ] && ! kill -0 "$releaser" 2>/dev/null && done_at=$(( $(now_ms) + 3000 ))
    issued=$(q -c "SELECT coalesce(max(last_issued), 0) FROM cosid_pool() WHERE namespace = 'st'")
    held=$(awk '$1 == "window" && $2 == "st" && $3 == 3 {print $4}' "$FILE")
    samples=$((samples + 1))
    if [ -n "$held" ] && [ "$issued" -gt "$held" ]; then
        violations=$((violations + 1)); echo "#   issued $issued > file $held"
    fi
    sleep 0.02
done
touch "$DIR/stop"; wait "$issuer"
check "cosid_release() released the window" "released" "$(cat "$DIR/release.out")"
check "the state file never held less than the last timestamp issued ($samples samples)" 0 "$violations"
check "one window of st is active, none other open" 1 \
    "$(q -c "SELECT count(*) FROM cosid_pool() WHERE namespace = 'st' AND state = 'active'")"
assert_store_verified "$DIR" "$PORT" postgres "the database's history (static windows)"
exit $FAIL

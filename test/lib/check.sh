# shellcheck shell=bash
# The end-to-end scripts' assertions: each prints "ok - NAME" or "not ok - NAME ..." and
# a failure sets FAIL=1; a script ends with `exit $FAIL`.
FAIL=0
# the servers: test/lib/node.sh (node_init, node_start, node_sql, node_wait, ...)
source "$(dirname "${BASH_SOURCE[0]}")/node.sh"
# sleep as a builtin (Debian's bash-builtins, installed by scripts/test.sh), when there: the
# scripts' loops sleep hundreds of times a second in all, and a sleep process costs a fork and
# an exec each (2 to 3 ms of CPU here).
enable -f /usr/lib/bash/sleep sleep 2>/dev/null || true
# A client loop's pause after each committed statement.  A client that reconnects for every
# statement (psql and a backend's fork each time) and never pauses takes a whole core of a
# 2-core machine, which the other lanes' servers need for their timed steps; ten statements a
# second still write through every event a test stages (failovers, forks, restores).
CLIENT_PACE=${CLIENT_PACE:-0.1}
check() {  # check NAME EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then echo "ok - $1"; else echo "not ok - $1: expected [$2] got [$3]"; FAIL=1; fi
}
check_true() {  # check_true NAME VALUE: VALUE must be "t"
    if [ "$2" = "t" ]; then echo "ok - $1"; else echo "not ok - $1 (got [$2])"; FAIL=1; fi
}
sqlstate_of() {  # sqlstate_of TEXT: the SQLSTATE of the first "ERROR:  XXXXX" in TEXT (psql VERBOSITY verbose/sqlstate), or ""
    { grep -oE 'ERROR:  [0-9A-Z]{5}' <<<"$1" || true; } | head -1 | cut -c9-
}
now_ms() {  # the wall clock in ms, from bash itself: no process (date is one, 2 ms of CPU)
    local t=${EPOCHREALTIME/[.,]/}
    echo "${t%???}"
}
clock_past() { [ "$(now_ms)" -ge "$1" ] && echo t; }  # clock_past MS: "t" once now_ms reaches MS (for wait_until)
wait_until() {  # wait_until SECONDS COMMAND...: until COMMAND prints "t", at most SECONDS; prints it
    # Polled every 0.1 s for the first 5 s, then every 0.25 s: the scenarios' timed steps wait
    # seconds at most, and a long wait's polls (a psql and a backend each, about 60 ms of CPU
    # on this kind of machine) are CPU the other lanes need.
    local start; start=$(now_ms)
    local deadline=$(( start + $1 * 1000 )) v="" now; shift
    while :; do
        v=$("$@" 2>/dev/null || true)
        [ "$v" = t ] && break
        now=$(now_ms)
        [ "$now" -ge "$deadline" ] && break
        if [ $(( now - start )) -lt 5000 ]; then sleep 0.1; else sleep 0.25; fi
    done
    echo "${v:-f}"
}
wait_for() {  # wait_for SECONDS WHAT COMMAND...: wait_until COMMAND prints "t"; at the deadline
    # says what it waited for (and returns 1); "t" or "f" on stdout, as wait_until
    local s=$1 what=$2 v; shift 2
    v=$(wait_until "$s" "$@")
    [ "$v" = t ] || echo "# gave up after ${s} s waiting for: $what" >&2
    echo "$v"
}

# A barrier for the sessions a test starts, instead of a fixed pg_sleep that a condition must
# come true within: barrier_close KEY opens a session (through the script's q) that holds
# advisory lock KEY; a session waits at the barrier with
#     SELECT 'go' FROM pg_advisory_lock_shared(KEY)
# (or any statement that takes that lock), the test counts them there with barrier_waiting,
# and barrier_open ends the holding session: they all go on.  One barrier at a time.
barrier_close() {
    BARRIER_KEY=$1
    BARRIER_FLAG=$(mktemp -u /tmp/cosid-barrier.XXXXXX)
    # (the pipe's write end is only in the subshell: sessions started later do not hold it open)
    { echo "SELECT pg_advisory_lock($1);"; while [ ! -e "$BARRIER_FLAG" ]; do sleep 0.05; done; } | q >/dev/null 2>&1 &
    BARRIER_PID=$!
    if [ "$(wait_for 60 "the barrier's session to hold advisory lock $1" q -c "SELECT count(*) = 1 FROM pg_locks
            WHERE locktype = 'advisory' AND objid = $1 AND mode = 'ExclusiveLock' AND granted")" != t ]; then
        echo "not ok - barrier $1 closed"; FAIL=1
    fi
}
barrier_select() {  # barrier_select EXPR: EXPR over the sessions waiting at the barrier
    q -c "SELECT $1 FROM pg_locks WHERE locktype = 'advisory' AND objid = $BARRIER_KEY AND NOT granted"
}
barrier_waiting() { barrier_select "count(*)"; }                        # how many wait there
barrier_waiters() { barrier_select "count(*) >= $1"; }                  # "t" once N wait there
barrier_pids() { barrier_select "string_agg(pid::text, ' ')"; }         # their pids
barrier_open() {
    touch "$BARRIER_FLAG"
    wait "$BARRIER_PID" 2>/dev/null || true
    rm -f "$BARRIER_FLAG"
}

# assert_store_verified DIR PORT DB [WHAT]: the store's history of the windows it granted
# (cosid.window_history) holds windows, and cosid_verify() finds no two of one slot that
# overlap.  Called at the end of the scripts whose store saw real leasing, before its server
# stops.  The overlaps found, if any, are printed.
assert_store_verified() {
    local dir="$1" port="$2" db="$3" what="${4:-the store}" out windows
    # one session: the history's size on the first line, the overlaps (if any) after it
    out=$(psql_at "$dir" "$port" "$db" -At -F ' | ' -c "SELECT count(*) FROM cosid.window_history" \
              -c "SELECT * FROM cosid_verify()" 2>&1 || echo "(cosid_verify failed)")
    windows=$(head -1 <<<"$out"); out=$(tail -n +2 <<<"$out")
    if [ -z "$out" ] && [[ "$windows" =~ ^[0-9]+$ ]] && [ "$windows" -gt 0 ]; then
        echo "ok - $what: cosid_verify() finds no two overlapping windows among the $windows of its history"
    else
        echo "not ok - $what: cosid_verify() over $windows windows of history:"
        sed 's/^/#   /' <<<"${out:-(no window in the history)}"
        # shellcheck disable=SC2034  # FAIL: for the script that sourced this file
        FAIL=1
    fi
}

#!/usr/bin/env bash
# A random fault schedule (issue 9): two instances A and B keep their leases in a store that
# runs as a primary with an asynchronous streaming standby (floor raise on), clients insert
# all along, and for CHAOS_SECONDS (default 120; 180 and more by hand) a seeded schedule takes the faults the suite
# knows, in rounds that each hold every kind once in a random order:
#   kill -9 of a backend, kill -9 of a keeper, SIGSTOP past the ttl (a backend, a keeper or
#   a whole instance), clock steps both ways on A or B, clock steps of the store, store
#   restart (immediate or fast), store failover (the standby promoted, sometimes after the
#   WAL sender was frozen so that a tail is lost; a new standby is then cloned from the new
#   primary), forced release (cosid_release on the instance, cosid.revoke on the store).
# At the end: zero duplicate ids across A and B, no unique violation, and every id inside a
# window the store granted to its slot and to the instance that issued it.  Every window
# is written down by the store itself (a trigger on cosid.lease appends it to a file as the
# row changes, before the commit: the log may hold a window whose commit failed, never miss
# one that committed, even in a tail a failover loses).
# CHAOS_RAISE=off switches the store's floor raise after a failover off, to see the schedule
# catch the hazard (a failover with a lost tail then lets windows overlap).
# Replay: CHAOS_SEED=N bash test/e2e/chaos.sh [DIR] runs the same schedule (the timing
# differs: it is a real machine).  The seed and the fault log are printed on failure.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/chaos"
SEED="${CHAOS_SEED:-$(( $(date +%s%N) % 1000000 ))}"
SECONDS_TOTAL="${CHAOS_SECONDS:-120}"
S1="$base/s1"; S2="$base/s2"; A="$base/a"; B="$base/b"
P1=55460; P2=55461; PA=55462; PB=55463
TTL_MS=2000; MAX_TTL_MS=3000; TOL_MS=300
FROZEN=""
cleanup() {
    [ -n "$FROZEN" ] && kill -CONT $FROZEN 2>/dev/null
    touch "$base/stop"
    # shellcheck disable=SC2046  # one argument per pid
    kill $(jobs -p) 2>/dev/null || true
    node_stop_all immediate
}
trap cleanup EXIT
T0=$(now_ms)
rel() { local t=$(( $(now_ms) - T0 )); printf '%d.%d' $((t / 1000)) $(( (t % 1000) / 100 )); }
FAULTS="$base/faults.log"
flog() { echo "+$(rel)s $*" >> "$FAULTS"; }
DSN="host=$S1,$S2 port=$P1,$P2 dbname=postgres user=postgres target_session_attrs=read-write"
qstore() { as_pg "$PG_BIN/psql" -X -q -At -d "$DSN connect_timeout=2" "$@"; }
# The nodes: s1 and s2 (the store's servers), a and b (the instances); node_sql "${H,,}" for
# the node of H (A, B, S1 or S2).
# The current roles of the two store servers: PRIM and STBY name S1 or S2.
PRIM=S1; STBY=S2
port_of() { [ "$1" = S1 ] && echo $P1 || echo $P2; }
# Random choices come from the seeded RANDOM in this shell only, into R: a $(...) subshell
# would draw from a reseeded copy, and the schedule would not replay.
pick() { R=$(( RANDOM % $1 )); }              # pick N: R in 0 .. N-1
between() { R=$(( $1 + RANDOM % ($2 - $1 + 1) )); }
sleep_ms() { sleep "$(( $1 / 1000 )).$(printf '%03d' $(( $1 % 1000 )))"; }

# clone_standby FROM TO: TO becomes a streaming standby of FROM (replication slot "standby").
clone_standby() {
    local from=$1 to=$2 d=${!2}
    node_stop "${to,,}" immediate
    node_sql "${from,,}" -c "SELECT pg_drop_replication_slot('standby') FROM pg_replication_slots WHERE slot_name = 'standby'" \
        -c "SELECT pg_create_physical_replication_slot('standby')" >/dev/null
    rm -rf "$d/data"
    as_pg "$(node_bin "${from,,}")/pg_basebackup" -h "${!from}" -p "$(port_of "$from")" -D "$d/data" -R -X stream -S standby -c fast >/dev/null
    # (its port and socket lines after the copied ones; promotions not held up by the 5 s retry)
    node_attach "${to,,}" "$d" "$(port_of "$to")" "wal_retrieve_retry_interval = '100ms'"
    node_start "${to,,}"
    [ "$(wait_until 30 node_sql "${from,,}" -c "SELECT count(*) = 1 FROM pg_stat_replication WHERE state = 'streaming'")" = t ]
}

mkdir -p "$base"; rm -f "$base/stop" "$FAULTS"; : > "$FAULTS"
mkdir -p "$base/windows"; chown "$PG_USER" "$base" "$base/windows"
echo "# seed $SEED, $SECONDS_TOTAL s of faults (replay: CHAOS_SEED=$SEED bash test/e2e/chaos.sh)"
RANDOM=$SEED

# The store: S1 primary, S2 its asynchronous standby; windows written down by a trigger.
node_up s1 "$S1" "$P1" "wal_level = replica" "max_wal_senders = 4" "wal_keep_size = '64MB'" "max_connections = 40" \
    "cosid.store_only = on"  # a store for the instances only: its failover is not a fork
qs1 -q -c "CREATE EXTENSION cosid" -c "CREATE EXTENSION adminpack" \
    -c "SELECT cosid_namespace_create('x', slot_bits => 5, tolerance => '$TOL_MS ms')" \
    -c "SELECT cosid_store_settings(max_ttl => '$MAX_TTL_MS ms', max_tolerance => '1s', raise_floors_on_new_timeline => '${CHAOS_RAISE:-on}'::boolean)" >/dev/null
qs1 -q <<SQL >/dev/null
CREATE FUNCTION public.write_window() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
    PERFORM pg_catalog.pg_file_write('$base/windows/' || current_setting('port') || '.tsv',
        format(E'%s\t%s\t%s\t%s\t%s\n', NEW.slot, NEW.fence, NEW.floor, NEW.ceiling, NEW.owner_key), true);
    RETURN NULL;
END \$\$;
CREATE TRIGGER write_window AFTER UPDATE ON cosid.lease FOR EACH ROW
    WHEN (NEW.incarnation IS NOT NULL) EXECUTE FUNCTION public.write_window();
ALTER TABLE cosid.lease ENABLE ALWAYS TRIGGER write_window;
SQL
mkdir -p "$S2"; chown "$PG_USER" "$S2"
node_register s2 "$S2" "$P2"  # (clone_standby stops a server a killed run left in it)
clone_standby S1 S2 || { echo "not ok - the standby streams"; exit 1; }

for h in A B; do
    d=${!h}; p=$([ $h = A ] && echo $PA || echo $PB)
    node_up "${h,,}" "$d" "$p" "cosid.store_dsn = '$DSN'" "cosid.ttl = '${TTL_MS}ms'" "cosid.namespace = 'x'" \
        "cosid.acquire_timeout = '10s'" "cosid.pool_idle_timeout = '1s'" "restart_after_crash = on" "max_connections = 30"
    node_sql "${h,,}" -q -c "CREATE EXTENSION cosid" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), client int)" \
        -c "CREATE TABLE other (id bigint)" -c "CREATE TABLE win (slot int, fence bigint, floor bigint, ceiling bigint, owner_key text)" >/dev/null
    mkdir -p "$d/clients"; chown "$PG_USER" "$d/clients"
done
KEY_A=$(qa -c "SELECT owner_key FROM cosid_stats()"); KEY_B=$(qb -c "SELECT owner_key FROM cosid_stats()")

# Clients on each instance: two that connect for every statement (churn), one that keeps its
# connection (and its bound slot) until a fault ends it.  Each logs "ms ok" or "ms SQLSTATE".
# The churning ones pause 0.25 s after a committed statement (check.sh's CLIENT_PACE is 0.1):
# a connection each time is a setpriv, a psql and a backend, and at 0.1 s the four of them
# were most of the script's CPU; the persistent ones insert every 0.05 s through every fault.
CHAOS_PACE=${CHAOS_PACE:-0.25}
client_loop() {  # client_loop H N PERSISTENT
    local d=${!1}
    (
        trap - EXIT; set +e
        while [ ! -e "$base/stop" ]; do
            if [ "$3" = yes ]; then
                { while [ ! -e "$base/stop" ]; do
                      echo "INSERT INTO t(client) SELECT $2 FROM generate_series(1, 50);"; sleep 0.05; done; } |
                    node_sql "${1,,}" -v ON_ERROR_STOP=0 -v VERBOSITY=sqlstate 2>&1 >/dev/null |
                    while read -r line; do
                        code=$(grep -oE 'ERROR:  [0-9A-Z]{5}' <<<"$line" | cut -c9-)
                        echo "$(now_ms) ${code:-conn}"
                    done
                sleep 0.2
            elif out=$(node_sql "${1,,}" -v VERBOSITY=sqlstate \
                       -c "INSERT INTO t(client) SELECT $2 FROM generate_series(1, 50)" 2>&1); then
                echo "$(now_ms) ok"; sleep "$CHAOS_PACE"
            else
                code=$(sqlstate_of "$out")
                echo "$(now_ms) ${code:-conn}"; sleep 0.05
            fi
        done > "$d/clients/$2.log"
    ) &
}
for h in A B; do client_loop $h 1 no; client_loop $h 2 no; client_loop $h 3 yes; done
both_insert() { [ "$(qa -c "SELECT count(*) > 0 FROM t")" = t ] && qb -c "SELECT count(*) > 0 FROM t"; }
check_true "both instances insert" "$(wait_until 30 both_insert)"

# ---------------------------------------------------------------- the faults
LAST_STORE_BACK=0   # ms of the last backward step of the store's clock (see fault_failover)
STORE_OFFSET=0
nth() { awk -v n="$1" '{a[NR] = $1} END {if (NR) print a[n % NR + 1]}'; }  # nth N: line N mod count
pid_of() {  # pid_of H WHAT N: the keeper, or the Nth (mod count) inserting backend of instance H
    if [ "$2" = keeper ]; then
        node_sql "${1,,}" -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'cosid keeper'" 2>/dev/null
    else
        node_sql "${1,,}" -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'
                    AND query LIKE 'INSERT INTO t%' AND pid <> pg_backend_pid() ORDER BY pid" 2>/dev/null | nth "$3"
    fi
}
host() { pick 2; H=$([ "$R" = 0 ] && echo A || echo B); }

fault_kill() {  # kill -9 of a backend or the keeper: the instance restarts after the crash
    local h what pid; host; h=$H; what=$1; pick 7
    pid=$(pid_of "$h" "$what" "$R")
    if [ -n "$pid" ]; then kill -9 "$pid"; flog "kill -9 $h $what $pid"; else flog "kill -9 $h $what: none running"; fi
}

fault_freeze() {  # SIGSTOP past the ttl: a backend, the keeper, or the whole instance
    local h what pids ms w; host; h=$H; pick 3; w=(backend keeper instance); what=${w[$R]}
    between 300 2500; ms=$(( TTL_MS + R )); pick 7
    if [ "$what" = instance ]; then
        pids="$(head -1 "${!h}/data/postmaster.pid") $(pgrep -P "$(head -1 "${!h}/data/postmaster.pid")" | tr '\n' ' ')"
    else
        pids=$(pid_of "$h" "$what" "$R")
    fi
    [ -z "${pids// /}" ] && { flog "freeze $h $what: none running"; return; }
    kill -STOP $pids; FROZEN="$pids"
    flog "freeze $h $what ($(echo $pids | wc -w) processes) for $ms ms"
    sleep_ms "$ms"
    kill -CONT $pids; FROZEN=""
}

fault_clock() {  # the clock of A or B steps (forward or back), stays there, and steps back
    local h off hold; host; h=$H; pick 2; off=$(( R * 2 - 1 )); between 400 4000; off=$(( off * R )); between 1 4; hold=$R
    node_sql "${h,,}" -q -c "ALTER SYSTEM SET cosid.clock_offset = $off" -c "SELECT pg_reload_conf()" >/dev/null 2>&1
    flog "clock of $h steps by $off ms for $hold s"
    sleep "$hold"
    node_sql "${h,,}" -q -c "ALTER SYSTEM RESET cosid.clock_offset" -c "SELECT pg_reload_conf()" >/dev/null 2>&1
    flog "clock of $h steps back to 0"
}

store_offset() {  # store_offset MS: both store servers' clocks together (they stay within the tolerance)
    for s in S1 S2; do
        node_sql "${s,,}" -q -c "ALTER SYSTEM SET cosid.store_clock_offset = $1" -c "SELECT pg_reload_conf()" >/dev/null 2>&1
    done
    [ "$1" -lt "$STORE_OFFSET" ] && LAST_STORE_BACK=$(now_ms)
    STORE_OFFSET=$1
}
fault_store_clock() {
    local off hold; pick 2; off=$(( R * 2 - 1 )); between 400 4000; off=$(( off * R )); between 1 4; hold=$R
    store_offset "$off"; flog "store clock steps by $off ms for $hold s"
    sleep "$hold"
    store_offset 0; flog "store clock steps back to 0"
}

fault_store_restart() {
    local mode; pick 2; mode=$([ "$R" = 0 ] && echo immediate || echo fast)
    node_restart "${PRIM,,}" "$mode" >/dev/null 2>&1
    flog "store primary $PRIM restarted ($mode)"
}

fault_failover() {
    # The raise after a failover covers windows granted at store times up to its own clock
    # plus the tolerance: a failover right after the store's clock stepped back by d would
    # break that documented assumption (docs/failover.md), so wait d.
    local wait_ms=$(( LAST_STORE_BACK + 4500 - $(now_ms) )) lost ws pm t
    [ "$wait_ms" -gt 0 ] && { flog "failover waits $wait_ms ms after the store clock's backward step"; sleep $(( wait_ms / 1000 + 1 )); }
    pick 2; lost=$R; between 500 3500; lost=$(( lost * R ))
    if [ "$lost" -gt 0 ]; then  # the standby stops receiving: what the primary commits now dies with it
        ws=$(node_sql "${PRIM,,}" -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walsender'")
        [ -n "$ws" ] && { kill -STOP $ws; FROZEN="$ws"; sleep_ms "$lost"; }
    fi
    pm=$(head -1 "${!PRIM}/data/postmaster.pid")
    kill -9 "$pm" $(pgrep -P "$pm"); FROZEN=""
    t=$(now_ms)
    node_promote "${STBY,,}"
    flog "store failover: $PRIM killed (WAL sender frozen ${lost} ms before), $STBY promoted in $(( $(now_ms) - t )) ms"
    local old=$PRIM; PRIM=$STBY; STBY=$old
    if clone_standby "$PRIM" "$STBY"; then flog "new standby $STBY cloned from $PRIM"; else flog "new standby $STBY did not stream"; fi
}

fault_release() {  # forced release: in order on the instance, or revoked on the store
    local h slot r
    pick 2
    if [ "$R" = 0 ]; then
        host; h=$H; pick 7
        slot=$(node_sql "${h,,}" -c "SELECT slot FROM cosid_pool() WHERE namespace = 'x' ORDER BY slot" 2>/dev/null | nth "$R")
        [ -z "$slot" ] && { flog "release on $h: no slot held"; return; }
        r=$(node_sql "${h,,}" -c "SELECT cosid_release('x', $slot)" 2>&1 | head -1)
        flog "cosid_release('x', $slot) on $h: $r"
    else
        pick 7
        slot=$(qstore -c "SELECT slot FROM cosid.lease WHERE namespace = 'x' AND incarnation IS NOT NULL ORDER BY slot" 2>/dev/null | nth "$R")
        [ -z "$slot" ] && { flog "revoke: no slot held"; return; }
        r=$(qstore -c "SELECT previous_owner_key FROM cosid.revoke('x', $slot)" 2>&1 | head -1)
        flog "cosid.revoke('x', $slot) on the store: ${r:-not held}"
    fi
}

KINDS=(kill_backend kill_keeper freeze clock store_clock store_restart failover release)
declare -A FAULTS_DONE
set +e
rounds=0
while [ $(( $(now_ms) - T0 )) -lt $(( SECONDS_TOTAL * 1000 )) ]; do
    rounds=$((rounds + 1))
    order=("${KINDS[@]}")
    for ((i = ${#order[@]} - 1; i > 0; i--)); do pick $((i + 1)); x=${order[i]}; order[i]=${order[R]}; order[R]=$x; done
    for k in "${order[@]}"; do
        [ $(( $(now_ms) - T0 )) -ge $(( SECONDS_TOTAL * 1000 )) ] && break
        case $k in
            kill_backend) fault_kill backend ;;
            kill_keeper) fault_kill keeper ;;
            freeze) fault_freeze ;;
            clock) fault_clock ;;
            store_clock) fault_store_clock ;;
            store_restart) fault_store_restart ;;
            failover) fault_failover ;;
            release) fault_release ;;
        esac
        FAULTS_DONE[$k]=$(( ${FAULTS_DONE[$k]:-0} + 1 ))
        between 1000 3000; sleep_ms "$R"
    done
done
flog "faults end"
store_offset 0
for h in A B; do node_sql "${h,,}" -q -c "ALTER SYSTEM RESET cosid.clock_offset" -c "SELECT pg_reload_conf()" >/dev/null 2>&1; done
set -e
echo "# $rounds rounds of faults: $(for k in "${KINDS[@]}"; do printf '%s %s, ' "$k" "${FAULTS_DONE[$k]:-0}"; done)"

# Both instances issue again after the last fault (each within a failover's wait and more).
t_end=$(now_ms)
rows_at_end_a=$(qa -c "SELECT count(*) FROM t"); rows_at_end_b=$(qb -c "SELECT count(*) FROM t")
check_true "A inserts again after the faults" "$(wait_until 40 qa -c "SELECT count(*) > $rows_at_end_a FROM t")"
check_true "B inserts again after the faults" "$(wait_until 40 qb -c "SELECT count(*) > $rows_at_end_b FROM t")"
echo "# both again $(( $(now_ms) - t_end )) ms after the last fault"
touch "$base/stop"; wait 2>/dev/null || true

# ---------------------------------------------------------------- the checks
for h in A B; do
    d=${!h}
    echo "# $h: $(node_sql "${h,,}" -c "SELECT count(*) FROM t") rows; statements: $(cat "$d"/clients/*.log | awk '{print $2}' | sort | uniq -c | sort -rn | tr -s ' ' | tr '\n' ',')"
    echo "# $h: $(node_sql "${h,,}" -c "SELECT format('acquires %s, renewals %s, renewal failures %s, leases lost %s, store failovers %s', acquires, renewals, renewal_failures, leases_lost, store_failovers) FROM cosid_stats()")"
done
qb_ids() { qb -c "COPY t(id) TO STDOUT"; }
qb_ids | qa -q -c "COPY other FROM STDIN"
cat "$base"/windows/*.tsv | qa -q -c "COPY win FROM STDIN"
echo "# windows the store wrote: $(qa -c "SELECT count(DISTINCT (slot, fence, floor)) FROM win")"
check "zero duplicate ids across A and B over $(qa -c "SELECT (SELECT count(*) FROM t) + (SELECT count(*) FROM other)") rows" \
    0 "$(qa -c "SELECT count(*) FROM t JOIN other USING (id)")"
check "no unique violation (23505) in any client" 0 "$(cat "$A"/clients/*.log "$B"/clients/*.log | grep -c ' 23505' || true)"
outside() {  # outside TABLE OWNER_KEY: ids outside every window the store granted to that owner on their slot
    qa -c "
        WITH w AS (SELECT slot, fence, floor, max(ceiling) AS ceiling FROM win WHERE owner_key = '$2' GROUP BY 1, 2, 3),
             p AS (SELECT p.* FROM $1, cosid_parse($1.id, 'x') p)
        SELECT count(*) FROM p WHERE NOT EXISTS (
            SELECT 1 FROM w WHERE w.slot = p.slot
              AND (extract(epoch FROM p.ts) * 1000)::bigint > w.floor
              AND (extract(epoch FROM p.ts) * 1000)::bigint <= w.ceiling)"
}
# With the window rule, windows of one slot never share a tick: no (slot, tick) of A's is B's too
# (stronger than no duplicate id: the sequences may differ).
check "no (slot, timestamp) issued by both A and B" 0 "$(qa -c "
    SELECT count(*) FROM (SELECT DISTINCT p.slot, p.ts FROM t, cosid_parse(t.id, 'x') p) a
    JOIN (SELECT DISTINCT p.slot, p.ts FROM other, cosid_parse(other.id, 'x') p) b USING (slot, ts)")"
check "every id of A inside a window the store granted to A on its slot" 0 "$(outside t "$KEY_A")"
check "every id of B inside a window the store granted to B on its slot" 0 "$(outside other "$KEY_B")"
assert_store_verified "${!PRIM}" "$(port_of "$PRIM")" postgres "the store's primary ($PRIM)"
if [ "$FAIL" != 0 ]; then
    echo "# FAILED with seed $SEED: replay with CHAOS_SEED=$SEED bash test/e2e/chaos.sh"
    echo "# fault log:"; sed 's/^/#   /' "$FAULTS"
fi
exit $FAIL

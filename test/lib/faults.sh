# shellcheck shell=bash
# Shared pieces of the fault suites: a server with short leases, clients that keep
# inserting through every fault (one connection per statement, so they also churn), a
# record of the store's windows, and the checks that end every suite.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"

# The fault suites' server is node main (test/lib/node.sh) in DIR, on PORT; q is its shorthand.
# stat_of EXPR: EXPR over this server's cosid_stats() (a counter, or a test on counters).
stat_of() { q -c "SELECT $1 FROM cosid_stats()"; }
# set_conf NAME VALUE / reset_conf NAME: a setting of the fault server, reloaded.
set_conf() { q -c "ALTER SYSTEM SET $1 = '$2'" -c "SELECT pg_reload_conf()" >/dev/null; sleep 0.3; }
reset_conf() { q -c "ALTER SYSTEM RESET $1" -c "SELECT pg_reload_conf()" >/dev/null; }
# ids_table: the table id clients write into (the namespace, when each call started and
# ended, the id or the error, who asked) and the table `stop` whose first row ends them.  (The
# id comes before `done` among the columns: an INSERT evaluates its values in column order,
# so `done` is read after cosid_next() returned.)
ids_table() {
    q -c "CREATE TABLE ids (n serial PRIMARY KEY, ns text, start timestamptz NOT NULL DEFAULT clock_timestamp(),
                            id bigint, done timestamptz, who text, err text)" -c "CREATE TABLE stop ()" >/dev/null
}
# id_client NS [WHO] [N]: a session that issues N ids of NS (1 by default) every 20 ms, each
# call in its own transaction, into ids as WHO (default "old"), an error as a row with err
# (57014 too, which WHEN OTHERS leaves out), until `stop` has a row; in the background, its
# pid in ID_CLIENT, its output in $DIR/client_NS_WHO.log.
id_client() {
    local ns=$1 who=${2:-old} n=${3:-1}
    q -c "DO \$\$ DECLARE s timestamptz; BEGIN
            PERFORM set_config('application_name', '$ns:$who', false);
            WHILE NOT EXISTS (SELECT FROM stop) LOOP
                s := clock_timestamp();
                BEGIN
                    INSERT INTO ids (ns, start, id, done, who)
                    SELECT '$ns', s, cosid_next('$ns'), clock_timestamp(), '$who' FROM generate_series(1, $n);
                EXCEPTION WHEN others OR query_canceled THEN
                    INSERT INTO ids (ns, start, err) VALUES ('$ns', s, SQLSTATE || ' ' || SQLERRM);
                END;
                COMMIT;
                PERFORM pg_sleep(0.02);
            END LOOP;
          END \$\$" > "$DIR/client_${ns}_$who.log" 2>&1 &
    ID_CLIENT=$!
}
# store_outage_until MS: this server's store (local) answers no renewal nor acquire until Unix ms
# MS (cosid.lease locked: each call times out), then 10 ids are issued after it.
store_outage_until() {
    q -c "BEGIN" -c "LOCK TABLE cosid.lease" -c "SELECT pg_sleep(greatest($1 - $(now_ms), 0) / 1000.0)" -c "COMMIT" >/dev/null
    local end; end=$(now_ms)
    wait_for 30 "ids after the outage" q -c "SELECT count(*) >= 10 FROM ids WHERE start > to_timestamp($end / 1000.0)" >/dev/null
}
# stop_id_clients PID...: a row in `stop`, then waits for the id clients; CLIENT_STATUS is
# the last failing one's exit status, 0 if none failed (their output then in the log).
stop_id_clients() {
    local p; CLIENT_STATUS=0
    q -c "INSERT INTO stop DEFAULT VALUES" >/dev/null
    for p in "$@"; do wait "$p" || CLIENT_STATUS=$?; done
    [ "$CLIENT_STATUS" = 0 ] || cat "$DIR"/client_*.log | head -5 | sed 's/^/#   /'
}
# raised_server TTL MAX_TTL: this script's server (DIR, PORT) with cosid.ttl TTL, the store's
# max_ttl MAX_TTL and max_tolerance 1 s, namespace w (tolerance 1 s), the id clients' tables and
# one id client on w (its pid in `client`) that has issued 50 ids.
raised_server() {
    node_up main "$DIR" "$PORT" "cosid.ttl = '$1'" "cosid.acquire_timeout = '20s'"
    trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT
    q -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_ttl => '$2', max_tolerance => '1s')" \
      -c "SELECT cosid_namespace_create('w', tolerance => '1s')" >/dev/null
    ids_table
    id_client w
    # shellcheck disable=SC2034  # client: for the script that sourced this file
    client=$ID_CLIENT
    wait_for 20 "the client's first 50 ids" q -c "SELECT count(*) >= 50 FROM ids" >/dev/null
}
# after_renewal NS: returns once this instance's lease of NS was renewed (a raise right after
# it frees a lease whose window then lasts longest).
after_renewal() {
    local expires; expires=$(q -c "SELECT expires_at FROM cosid_pool() WHERE namespace = '$1'")
    wait_for 10 "a renewal" q -c "SELECT expires_at <> '$expires' FROM cosid_pool() WHERE namespace = '$1'" >/dev/null
}
# new_id NS: one id of NS from a new connection, as "new" in ids (its error, if any, in
# $DIR/new.log).
new_id() {
    q -c "INSERT INTO ids (ns, start, id, done, who) VALUES ('$1', clock_timestamp(), cosid_next('$1'), clock_timestamp(), 'new')" \
        >/dev/null 2>>"$DIR/new.log" || true
}
# new_ids_for NS MS: new_id NS every 50 ms for MS ms.
new_ids_for() {
    local until_ms=$(( $(now_ms) + $2 ))
    while [ "$(now_ms)" -lt "$until_ms" ]; do
        new_id "$1"
        sleep 0.05
    done
}
# check_order_kept: no id in ids below one of its namespace committed (50 ms margin) before its
# call began (every id an instance issues is above those its connections committed before);
# the first three that are, if any.
check_order_kept() {
    local below
    below=$(q -c "SELECT count(*) FROM ids b WHERE b.id IS NOT NULL AND EXISTS (
                      SELECT FROM ids a WHERE a.ns IS NOT DISTINCT FROM b.ns AND a.id > b.id AND a.done < b.start - interval '50 ms')")
    q -c "SELECT coalesce(b.ns, '') || ' ' || b.who || ' id at ' || to_char(b.start, 'HH24:MI:SS.MS') || ' below a ' || a.who
                 || ' id committed at ' || to_char(a.done, 'HH24:MI:SS.MS')
          FROM ids b JOIN LATERAL (SELECT * FROM ids a WHERE a.ns IS NOT DISTINCT FROM b.ns AND a.id > b.id
                                     AND a.done < b.start - interval '50 ms' ORDER BY a.done LIMIT 1) a ON true
          ORDER BY b.n LIMIT 3" | sed 's/^/#   /'
    check "no id below one committed before its statement began" 0 "$below"
}
# check_client_through WHAT STATUS [SINCE_MS]: the one id client (its exit STATUS) ran through WHAT
# without an error, no call waiting a second for its id (of the calls from SINCE_MS on, when
# given), its ids unique and increasing.  (A pause is what
# cosid_next() makes a caller wait: from the call's start to its id.  The time between two
# calls also holds the client's commit and its sleep, which a loaded machine may stretch to
# seconds while nothing waits for cosid: it is shown, not judged.)
check_client_through() {
    local gap wait since="${3:-0}"
    check "the client ran through $1 without an error" "0 0" "$2 $(q -c "SELECT count(*) FROM ids WHERE err IS NOT NULL")"
    q -c "SELECT DISTINCT err FROM ids WHERE err IS NOT NULL LIMIT 3" | sed 's/^/#   /'
    gap=$(q -c "SELECT round(max(d)) FROM (SELECT extract(epoch FROM start - lag(start) OVER (ORDER BY n)) * 1000 AS d FROM ids) x")
    wait=$(q -c "SELECT round(max(extract(epoch FROM done - start) * 1000)) FROM ids WHERE id IS NOT NULL
                   AND start >= to_timestamp($since / 1000.0)")
    echo "# $(q -c "SELECT count(*) FROM ids") ids; longest call: $wait ms; longest time between two calls' starts: $gap ms (the client sleeps 20 ms between calls)"
    check_true "no call waited a second for its id" "$(q -c "SELECT $wait < 1000")"
    check_true "every id unique and larger than the one before" \
        "$(q -c "SELECT count(DISTINCT id) = count(id) AND bool_and(d) FROM (SELECT id, id > lag(id, 1, 0::bigint) OVER (ORDER BY n) AS d FROM ids WHERE id IS NOT NULL) x")"
}
# raise_store_floors [PSQL ARGS...]: the fault server's store raises every floor, as after a
# failover (declared a copy of itself, its original gone: restored, then acknowledged), in one
# session after PSQL ARGS (a SET that must hold for it); quiet unless it fails.
raise_store_floors() {
    local out
    # A raise that fails (a deadlock, a refusal) fails the script here, where it happened.
    if ! out=$(q "$@" -c "SELECT cosid_store_follow_timeline(restored => true)" -c "SELECT cosid_fork_acknowledge()" 2>&1); then
        echo "not ok - the store's floors raised (restored => true, then acknowledged): $(grep -m2 ERROR <<<"$out")"
        # shellcheck disable=SC2034  # FAIL: for the script that sourced this file
        FAIL=1
    fi
}

# fault_server DIR PORT: ttl 2 s; namespace f with tolerance 300 ms; table t with a unique key.
# Every change of a lease row is written into observed by a trigger on cosid.lease, in the
# store's own transaction (the store is this server): every window that was granted or
# renewed is there, however short it lived and whether clients ran or not, and none that
# was rolled back.  Releases are rows too (incarnation NULL, previous_owner_key the owner).
# Each row has the lease's expires_at and the id of the transaction that wrote it (xid).
# (A sampler of cosid.lease every 0.1 s missed windows granted and given back between two
# samples, on a loaded machine: ids of the fast-shutdown phase and of a lone holder were
# found outside every recorded window.)
fault_server() {
    DIR="$1"; PORT="$2"
    node_up main "$DIR" "$PORT" "cosid.ttl = '2s'" "cosid.pool_idle_timeout = '1s'" "max_connections = 40" \
        "restart_after_crash = on"
    q -c "CREATE EXTENSION cosid" \
      -c "SELECT cosid_namespace_create('f', slot_bits => 6, tolerance => '300 ms')" \
      -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), client int, phase text)" \
      -c "CREATE TABLE observed (at timestamptz DEFAULT clock_timestamp(), namespace text, slot int, fence bigint,
                                 incarnation uuid, owner_key text, floor bigint, ceiling bigint,
                                 next_floor bigint, previous_owner_key text, expires_at bigint,
                                 xid bigint DEFAULT pg_current_xact_id()::text::bigint)" >/dev/null
    q <<'SQL' >/dev/null
CREATE FUNCTION public.observe_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.observed(namespace, slot, fence, incarnation, owner_key, floor, ceiling, next_floor,
                                previous_owner_key, expires_at)
    VALUES (NEW.namespace, NEW.slot, NEW.fence, NEW.incarnation, NEW.owner_key, NEW.floor, NEW.ceiling,
            NEW.next_floor, NEW.previous_owner_key, NEW.expires_at);
    RETURN NULL;
END $$;
CREATE TRIGGER observe_lease AFTER INSERT OR UPDATE ON cosid.lease FOR EACH ROW EXECUTE FUNCTION public.observe_lease();
ALTER TABLE cosid.lease ENABLE ALWAYS TRIGGER observe_lease;
SQL
    WINDOWS_BY_TRIGGER=yes
    mkdir -p "$DIR/clients"; chown "$PG_USER" "$DIR/clients"
}

# sample_windows: what the store holds now, into observed (for servers without the trigger
# of fault_server; upgrade.sh).
sample_windows() {
    [ "${WINDOWS_BY_TRIGGER:-}" = yes ] && return 0
    q -c "INSERT INTO observed(namespace, slot, fence, incarnation, owner_key, floor, ceiling)
          SELECT namespace, slot, fence, incarnation, owner_key, floor, ceiling FROM cosid.lease
          WHERE incarnation IS NOT NULL" >/dev/null 2>&1 || true
}

PHASE=start
# start_clients N: N clients inserting 50 rows per statement (a connection each, CLIENT_PACE
# apart) until stop_clients.
start_clients() {
    rm -f "$DIR/stop"
    CLIENT_PIDS=()
    for c in $(seq 1 "$1"); do
        (
            trap - EXIT; set +e  # a failing statement is data here, not a reason to stop
            while [ ! -e "$DIR/stop" ]; do
                if out=$(as_pg "$PG_BIN/psql" -X -q -h "$DIR" -p "$PORT" -d postgres -v VERBOSITY=sqlstate \
                      -c "INSERT INTO t(client, phase) SELECT $c, '$PHASE' FROM generate_series(1, 50)" 2>&1); then
                    echo "$(now_ms) ok"; sleep "$CLIENT_PACE"; else
                    code=$(sqlstate_of "$out")
                    echo "$(now_ms) ${code:-conn}"; sleep 0.05; fi
            done > "$DIR/clients/$PHASE.$c.log"
        ) &
        CLIENT_PIDS+=($!)
    done
    if [ "${WINDOWS_BY_TRIGGER:-}" != yes ]; then
        (
            trap - EXIT; set +e
            while [ ! -e "$DIR/stop" ]; do sample_windows; sleep 0.1; done
        ) &
        CLIENT_PIDS+=($!)
    fi
}

stop_clients() {
    touch "$DIR/stop"
    wait "${CLIENT_PIDS[@]}" 2>/dev/null || true
    sample_windows
}

# first_ok_after PHASE T_MS: the first successful insert of the phase at or after T_MS.
first_ok_after() { cat "$DIR"/clients/"$1".*.log | awk -v t="$2" '$2 == "ok" && $1 >= t {print $1}' | sort -n | head -1; }
errors_of() { cat "$DIR"/clients/"$1".*.log | awk '$2 != "ok" {print $2}' | sort | uniq -c | tr '\n' ' '; }
oks_of() { cat "$DIR"/clients/"$1".*.log | awk '$2 == "ok"' | wc -l; }

# The checks that hold whatever happened: no duplicate, no unique violation, every id in
# a window that the store handed to its slot, for an incarnation of this server.
final_checks() {
    check "zero duplicate ids over $(q -c "SELECT count(*) FROM t") rows" 0 "$(q -c "SELECT count(*) - count(DISTINCT id) FROM t")"
    check "no unique violation (23505) in any client" 0 "$(cat "$DIR"/clients/*.log | grep -c ' 23505' || true)"
    check "every id inside a window the store handed to its slot" 0 "$(q -c "
        WITH w AS (SELECT slot, fence, incarnation, min(floor) AS floor, max(ceiling) AS ceiling
                   FROM observed WHERE namespace = 'f' AND incarnation IS NOT NULL AND owner_key <> 'thief'
                   GROUP BY 1, 2, 3),
             p AS (SELECT p.* FROM t, cosid_parse(t.id, 'f') p)
        SELECT count(*) FROM p WHERE NOT EXISTS (
            SELECT 1 FROM w WHERE w.slot = p.slot
              AND (extract(epoch FROM p.ts) * 1000)::bigint > w.floor
              AND (extract(epoch FROM p.ts) * 1000)::bigint <= w.ceiling)")"
    assert_store_verified "$DIR" "$PORT" postgres
}

# no_window_below_old_ids OLD_INCARNATION: windows of a later incarnation that start below the
# last timestamp OLD_INCARNATION issued on their slot (0 when every one starts at or after it).
# The old incarnation's ids are the rows of t inside its windows that it inserted: those whose
# transaction (xmin) precedes the one that granted a later incarnation its first window
# (observed.xid).  A row gets its transaction id at its insert, after its id was issued, so a
# later incarnation's rows come after its first grant; the old incarnation's all committed
# before the crash or stop that ended it, and a restart hands out transaction ids above
# theirs.  Telling them apart by the old windows' ranges alone is wrong: a window released
# in order hands on its exact last timestamp, below its ceiling, and the next holder's ids
# above that floor lie in the old window's range too.
no_window_below_old_ids() {
    q -c "
    WITH old_w AS (SELECT slot, fence, min(floor) AS floor, max(ceiling) AS ceiling FROM observed
                   WHERE namespace = 'f' AND incarnation = '$1' GROUP BY 1, 2),
         new_w AS (SELECT slot, fence, min(floor) AS floor, min(xid) AS xid FROM observed
                   WHERE namespace = 'f' AND incarnation <> '$1' AND owner_key <> 'thief'
                     AND at > (SELECT min(at) FROM observed WHERE incarnation = '$1') GROUP BY 1, 2
                   HAVING min(at) > (SELECT max(at) FROM observed WHERE incarnation = '$1')),
         ids AS (SELECT p.slot, (extract(epoch FROM p.ts) * 1000)::bigint AS ts FROM t, cosid_parse(t.id, 'f') p
                 WHERE t.xmin::text::bigint < (SELECT min(xid) FROM new_w)),
         old_last AS (SELECT i.slot, max(i.ts) AS ts FROM ids i JOIN old_w w ON w.slot = i.slot
                      AND i.ts > w.floor AND i.ts <= w.ceiling GROUP BY 1)
    SELECT count(*) FROM new_w JOIN old_last USING (slot) WHERE new_w.floor < old_last.ts"
}

# held_at_end OLD_INCARNATION: the SQL of a WITH item "held", the leases OLD_INCARNATION held
# when it ended (a crash: its last window on the slot, not followed by its release, which the
# store records as the next fence without an owner), one row per (slot, fence) with the
# largest ceiling and expires_at it was granted.  Needs the trigger of fault_server.
held_at_end() {
    echo "held AS (SELECT slot, fence, max(ceiling) AS ceiling, max(expires_at) AS expires_at FROM observed o
                  WHERE namespace = 'f' AND incarnation = '$1'
                    AND NOT EXISTS (SELECT 1 FROM observed r WHERE r.namespace = 'f' AND r.slot = o.slot
                                      AND r.fence = o.fence + 1 AND r.incarnation IS NULL)
                  GROUP BY 1, 2)"
}

# old_lease_live_at_successor OLD_INCARNATION: "t" if a lease OLD_INCARNATION held when it ended
# (not released) had not expired when the first window of a later incarnation was granted (so
# that acquire met it live: it counts a duplicate owner key), "f" if every one had expired by
# then (a crash restart slower than their ttl), "" if a later incarnation has no window.  (The
# store's clock is clock_timestamp(): the grant's expires_at is read before its row's at.)
old_lease_live_at_successor() {
    q -c "
    WITH $(held_at_end "$1"),
         first_new AS (SELECT min(at) AS at FROM observed
                       WHERE namespace = 'f' AND incarnation <> '$1' AND owner_key <> 'thief'
                         AND at > (SELECT max(at) FROM observed WHERE incarnation = '$1'))
    SELECT coalesce(max(h.expires_at), 0) > (extract(epoch FROM f.at) * 1000)::bigint
    FROM first_new f LEFT JOIN held h ON true WHERE f.at IS NOT NULL GROUP BY f.at"
}

# taken_over_live_leases OLD_INCARNATION: windows of other owners that start below the ceiling
# of a lease OLD_INCARNATION still held when it ended (a crash: its last window on the slot,
# not followed by its release, which the store records as the next fence without an owner).
# A lease the old incarnation released in order before the crash hands on its exact last
# timestamp, below its ceiling, and is rightly not counted.  Needs the trigger of fault_server.
taken_over_live_leases() {
    q -c "
    WITH $(held_at_end "$1")
    SELECT count(*) FROM observed n JOIN held o USING (slot)
    WHERE n.namespace = 'f' AND n.incarnation <> '$1' AND n.fence > o.fence AND n.floor < o.ceiling"
}

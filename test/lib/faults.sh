# Shared pieces of the fault suites: a server with short leases, clients that keep
# inserting through every fault (one connection per statement, so they also churn), a
# record of the store's windows, and the checks that end every suite.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"

now_ms() { date +%s%3N; }
q() { psql_at "$DIR" "$PORT" postgres -At "$@"; }
# set_conf NAME VALUE / reset_conf NAME: a setting of the fault server, reloaded.
set_conf() { q -c "ALTER SYSTEM SET $1 = '$2'" -c "SELECT pg_reload_conf()" >/dev/null; sleep 0.3; }
reset_conf() { q -c "ALTER SYSTEM RESET $1" -c "SELECT pg_reload_conf()" >/dev/null; }
# raise_store_floors [PSQL ARGS...]: the fault server's store raises every floor, as after a
# failover (declared a copy of itself, its original gone: restored, then acknowledged), in one
# session after PSQL ARGS (a SET that must hold for it); quiet.
raise_store_floors() {
    q "$@" -c "SELECT cosid_store_follow_timeline(restored => true)" -c "SELECT cosid_fork_acknowledge()" >/dev/null 2>&1
}

# fault_server DIR PORT: ttl 2 s; namespace f with tolerance 300 ms; table t with a unique key.
# Every change of a lease row is written into observed by a trigger on cosid.lease, in the
# store's own transaction (the store is this server): every window that was granted or
# renewed is there, however short it lived and whether clients ran or not, and none that
# was rolled back.  Releases are rows too (incarnation NULL, previous_owner_key the owner).
# (A sampler of cosid.lease every 0.1 s missed windows granted and given back between two
# samples, on a loaded machine: ids of the fast-shutdown phase and of a lone holder were
# found outside every recorded window.)
fault_server() {
    DIR="$1"; PORT="$2"
    start_server "$DIR" "$PORT" "cosid.ttl = '2s'" "cosid.pool_idle_timeout = '1s'" "max_connections = 40" \
        "restart_after_crash = on"
    q -c "CREATE EXTENSION cosid" \
      -c "SELECT cosid_namespace_create('f', slot_bits => 6, tolerance => '300 ms')" \
      -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), client int, phase text)" \
      -c "CREATE TABLE observed (at timestamptz DEFAULT clock_timestamp(), namespace text, slot int, fence bigint,
                                 incarnation uuid, owner_key text, floor bigint, ceiling bigint,
                                 next_floor bigint, previous_owner_key text)" >/dev/null
    q <<'SQL' >/dev/null
CREATE FUNCTION public.observe_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.observed(namespace, slot, fence, incarnation, owner_key, floor, ceiling, next_floor, previous_owner_key)
    VALUES (NEW.namespace, NEW.slot, NEW.fence, NEW.incarnation, NEW.owner_key, NEW.floor, NEW.ceiling,
            NEW.next_floor, NEW.previous_owner_key);
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
# start_clients N: N clients inserting 50 rows per statement until stop_clients.
start_clients() {
    rm -f "$DIR/stop"
    CLIENT_PIDS=()
    for c in $(seq 1 "$1"); do
        (
            trap - EXIT; set +e  # a failing statement is data here, not a reason to stop
            while [ ! -e "$DIR/stop" ]; do
                if out=$(as_pg psql -X -q -h "$DIR" -p "$PORT" -d postgres -v VERBOSITY=sqlstate \
                      -c "INSERT INTO t(client, phase) SELECT $c, '$PHASE' FROM generate_series(1, 50)" 2>&1); then
                    echo "$(now_ms) ok"; else
                    code=$(grep -oE 'ERROR:  [0-9A-Z]{5}' <<<"$out" | head -1 | cut -c9-)
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

# no_window_below_old_ids OLD_INCARNATION: every window of a later incarnation starts at or
# after the last timestamp the old incarnation issued on that slot.
no_window_below_old_ids() {
    q -c "
    WITH old_w AS (SELECT slot, fence, min(floor) AS floor, max(ceiling) AS ceiling FROM observed
                   WHERE namespace = 'f' AND incarnation = '$1' GROUP BY 1, 2),
         ids AS (SELECT p.slot, (extract(epoch FROM p.ts) * 1000)::bigint AS ts FROM t, cosid_parse(t.id, 'f') p),
         old_last AS (SELECT i.slot, max(i.ts) AS ts FROM ids i JOIN old_w w ON w.slot = i.slot
                      AND i.ts > w.floor AND i.ts <= w.ceiling GROUP BY 1),
         new_w AS (SELECT slot, fence, min(floor) AS floor FROM observed
                   WHERE namespace = 'f' AND incarnation <> '$1' AND owner_key <> 'thief'
                     AND at > (SELECT min(at) FROM observed WHERE incarnation = '$1') GROUP BY 1, 2
                   HAVING min(at) > (SELECT max(at) FROM observed WHERE incarnation = '$1'))
    SELECT count(*) FROM new_w JOIN old_last USING (slot) WHERE new_w.floor < old_last.ts"
}

# taken_over_live_leases OLD_INCARNATION: windows of other owners that start below the ceiling
# of a lease OLD_INCARNATION still held when it ended (a crash: its last window on the slot,
# not followed by its release, which the store records as the next fence without an owner).
# A lease the old incarnation released in order before the crash hands on its exact last
# timestamp, below its ceiling, and is rightly not counted.  Needs the trigger of fault_server.
taken_over_live_leases() {
    q -c "
    WITH held AS (SELECT slot, fence, max(ceiling) AS ceiling FROM observed o
                  WHERE namespace = 'f' AND incarnation = '$1'
                    AND NOT EXISTS (SELECT 1 FROM observed r WHERE r.namespace = 'f' AND r.slot = o.slot
                                      AND r.fence = o.fence + 1 AND r.incarnation IS NULL)
                  GROUP BY 1, 2)
    SELECT count(*) FROM observed n JOIN held o USING (slot)
    WHERE n.namespace = 'f' AND n.incarnation <> '$1' AND n.fence > o.fence AND n.floor < o.ceiling"
}

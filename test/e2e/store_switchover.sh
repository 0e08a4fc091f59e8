#!/usr/bin/env bash
# A planned switchover of the store loses nothing, and ids go on without an error or a gap.
# The store P (cosid.store_only, the default store settings: max_ttl 60 s, max_tolerance 5 s)
# streams to an asynchronous standby SB; instances A and B (the default cosid.ttl, 30 s) lease
# from it through a multi-host DSN and insert every 20 ms.  P is stopped cleanly (fast), SB
# replays P's shutdown checkpoint and is promoted: the new timeline begins right after that
# checkpoint, so the store keeps its floors and its leases (before: it raised every floor to
# now + 70 s, and A and B failed with ZC001 and ZC004 for about 70 s).  Then a control: SB's
# own standby promoted after SB crashed (no shutdown checkpoint) still raises.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/store_switchover"
P="$base/p"; SB="$base/sb"; S3="$base/s3"; A="$base/a"; B="$base/b"
PP=55760; PSB=55761; PS3=55762; PA=55763; PB=55764
trap 'touch "$base/stop"; kill $(jobs -p) 2>/dev/null || true
      for d in "$A" "$B" "$P" "$SB" "$S3"; do stop_server "$d" immediate; done' EXIT
rm -rf "$base"; mkdir -p "$base"; chmod 755 "$base"
qa() { psql_at "$A" "$PA" postgres -At "$@"; }
qb() { psql_at "$B" "$PB" postgres -At "$@"; }
DSN="host=$P,$SB port=$PP,$PSB dbname=postgres user=postgres target_session_attrs=read-write"
qstore() { as_pg psql -X -q -At -d "$DSN connect_timeout=2" "$@"; }

# standby_of DIR PORT NEWDIR NEWPORT: a streaming standby of DIR (base backup, -R), started.
standby_of() {
    rm -rf "$3"; mkdir -p "$3"; chown "$PG_USER" "$3"
    as_pg "$PG_BIN/pg_basebackup" -h "$1" -p "$2" -D "$3/data" -R -X stream -c fast >/dev/null
    sed -i -e "s/^port = .*/port = $4/" -e "s|^unix_socket_directories = .*|unix_socket_directories = '$3'|" \
        "$3/data/postgresql.conf"
    echo "wal_retrieve_retry_interval = '100ms'" >> "$3/data/postgresql.conf"
    as_pg "$PG_BIN/pg_ctl" -D "$3/data" -l "$3/server.log" -w start >/dev/null
    check_true "$3 streams from $1" "$(wait_until 30 psql_at "$1" "$2" postgres -At -c "
        SELECT count(*) = 1 FROM pg_stat_replication WHERE state = 'streaming'")"
}
# replayed DIR PORT LSN: "t" once DIR replayed past LSN
replayed() { psql_at "$1" "$2" postgres -At -c "SELECT pg_last_wal_replay_lsn() > '$3'"; }
checkpoint_lsn() { as_pg "$PG_BIN/pg_controldata" -D "$1/data" | sed -n 's/^Latest checkpoint location: *//p'; }

start_server "$P" "$PP" "wal_level = replica" "max_wal_senders = 4" "wal_keep_size = '64MB'" "cosid.store_only = on"
psql_at "$P" "$PP" postgres -q -c "CREATE EXTENSION cosid" \
    -c "SELECT cosid_namespace_create('ha', slot_bits => 4, tolerance => '300 ms')" >/dev/null
standby_of "$P" "$PP" "$SB" "$PSB"
for s in A B; do
    d=${!s}; p=$([ $s = A ] && echo $PA || echo $PB)
    start_server "$d" "$p" "cosid.store_dsn = '$DSN'" "cosid.namespace = 'ha'"
    psql_at "$d" "$p" postgres -q -c "CREATE EXTENSION cosid" \
        -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), at timestamptz DEFAULT clock_timestamp())" \
        -c "CREATE TABLE other (id bigint)" -c "CREATE TABLE win (slot int, fence bigint, floor bigint, ceiling bigint)" >/dev/null
done

# The windows of the store that is primary now, every 100 ms, until $base/stop.
(
    trap - EXIT; set +e
    while [ ! -e "$base/stop" ]; do
        qstore -c "COPY (SELECT slot, fence, floor, ceiling FROM cosid.lease
                         WHERE namespace = 'ha' AND incarnation IS NOT NULL) TO STDOUT" >> "$base/windows.tsv" 2>/dev/null
        sleep 0.1
    done
) &
sampler=$!
# inserter DIR PORT SECONDS: one session inserting every 20 ms; "ok failed first-error" at the end
inserter() {
    psql_at "$1" "$2" postgres -At -c "DO \$\$
DECLARE ok int := 0; bad int := 0; e text; t0 timestamptz := clock_timestamp();
BEGIN
    WHILE clock_timestamp() < t0 + interval '$3 s' LOOP
        BEGIN
            INSERT INTO t DEFAULT VALUES; ok := ok + 1;
        EXCEPTION WHEN OTHERS THEN
            bad := bad + 1; e := coalesce(e, SQLSTATE || ' ' || SQLERRM);
        END;
        COMMIT;  -- each row by itself, as an application's
        PERFORM pg_sleep(0.02);
    END LOOP;
    RAISE NOTICE 'result % % %', ok, bad, coalesce(e, '-');
END \$\$" 2>&1 | sed -n 's/.*result //p' > "$1/result"
}
inserter "$A" "$PA" 16 & ia=$!
inserter "$B" "$PB" 16 & ib=$!
check_true "A issues from the store" "$(wait_until 30 qa -c "SELECT count(*) > 50 FROM t")"
check_true "B issues from the store" "$(wait_until 30 qb -c "SELECT count(*) > 50 FROM t")"

echo "# the switchover: P stopped cleanly, SB promoted once it replayed P's shutdown checkpoint"
t0=$(date +%s%3N)
stop_server "$P" fast
lsn=$(checkpoint_lsn "$P")
check_true "SB replayed P's shutdown checkpoint ($lsn)" "$(wait_until 30 replayed "$SB" "$PSB" "$lsn")"
as_pg "$PG_BIN/pg_ctl" -D "$SB/data" -w promote >/dev/null
echo "# SB promoted $(( $(date +%s%3N) - t0 )) ms after P's stop began"
wait $ia $ib
touch "$base/stop"; wait $sampler 2>/dev/null || true

check_true "the promoted store kept its floors and leases (its log: a planned switchover)" \
    "$(wait_for 10 "SB's log line" bash -c "grep -q 'a planned switchover, nothing lost' '$SB/server.log' && echo t")"
check "... and raised nothing" 0 "$(grep -c 'slots freed, their next_floor raised' "$SB/server.log")"
for s in A B; do
    d=${!s}; p=$([ $s = A ] && echo $PA || echo $PB)
    set -- $(cat "$d/result")
    echo "# $s: keeper $(psql_at "$d" "$p" postgres -At -c "SELECT format('renewals %s, failed %s, leases lost %s, store failovers seen %s',
        renewals, renewal_failures, leases_lost, store_failovers) FROM cosid_stats()")"
    echo "# $s: ${1:-0} INSERTs, ${2:-?} failed (${3:-}), longest time without a committed insert: $(psql_at "$d" "$p" postgres -At -c "
        SELECT max(gap) FROM (SELECT at - lag(at) OVER (ORDER BY at) AS gap FROM t) g")"
    check "$s: no INSERT failed through the switchover" 0 "${2:-x}"
    check_true "$s: no gap of 2 s or more in its inserts" "$(psql_at "$d" "$p" postgres -At -c "
        SELECT coalesce(max(gap) < interval '2 s', false) FROM (SELECT at - lag(at) OVER (ORDER BY at) AS gap FROM t) g")"
    check_true "$s: inserted after the switchover" "$(psql_at "$d" "$p" postgres -At -c "
        SELECT count(*) > 50 FROM t WHERE at > to_timestamp($t0 / 1000.0) + interval '2 s'")"
done
qb -c "COPY t(id) TO STDOUT" | qa -c "COPY other FROM STDIN"
check "zero duplicate ids across A and B" 0 "$(qa -c "SELECT count(*) FROM t JOIN other USING (id)")"
qstore -c "COPY (SELECT slot, fence, floor, ceiling FROM cosid.lease WHERE namespace = 'ha' AND incarnation IS NOT NULL) TO STDOUT" \
    >> "$base/windows.tsv"
qa -c "COPY win FROM STDIN" < "$base/windows.tsv"
check "every id inside a window the store granted to its slot" 0 "$(qa -c "
    WITH w AS (SELECT slot, fence, min(floor) AS floor, max(ceiling) AS ceiling FROM win GROUP BY 1, 2),
         p AS (SELECT p.* FROM t, cosid_parse(t.id, 'ha') p UNION ALL SELECT p.* FROM other, cosid_parse(other.id, 'ha') p)
    SELECT count(*) FROM p WHERE NOT EXISTS (
        SELECT 1 FROM w WHERE w.slot = p.slot AND (extract(epoch FROM p.ts) * 1000)::bigint > w.floor
                          AND (extract(epoch FROM p.ts) * 1000)::bigint <= w.ceiling)")"

echo "# control: SB crashes (no shutdown checkpoint), its standby S3 is promoted: the store raises"
standby_of "$SB" "$PSB" "$S3" "$PS3"
psql_at "$SB" "$PSB" postgres -q -c "CHECKPOINT" >/dev/null
lsn=$(psql_at "$SB" "$PSB" postgres -At -c "SELECT pg_current_wal_lsn()")
check_true "S3 replayed SB's WAL" "$(wait_until 30 replayed "$S3" "$PS3" "$lsn")"
stop_server "$SB" immediate
as_pg "$PG_BIN/pg_ctl" -D "$S3/data" -w promote >/dev/null
psql_at "$S3" "$PS3" postgres -q -c "SELECT cosid_store_follow_timeline()" >/dev/null
check "S3 raised every floor (a crash: commits may be lost)" 1 "$(grep -c 'slots freed, their next_floor raised' "$S3/server.log")"
check "... and did not take it for a switchover" 0 "$(grep -c 'a planned switchover' "$S3/server.log")"
exit $FAIL

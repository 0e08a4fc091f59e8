#!/usr/bin/env bash
# A server that issues ids from its own store (the default) forks when its data directory
# lives on twice.  A copy the store can recognise grants nothing (ZC009, at once, and
# cosid_health() says so) until an administrator runs cosid_fork_acknowledge() on it, which
# raises every floor from that moment; what cannot be told from a restart still issues at once.
#   1. a planned switchover (the primary stopped cleanly, its standby promoted): a fork too,
#      since nothing tells the copy that its original stays stopped: ZC009 until acknowledged
#      with the time the primary stopped, then ids, none equal to the primary's;
#   2. a standby promoted while its primary still issues (split brain): ZC009 on the promoted
#      one while the primary goes on; once the primary is stopped and the fork acknowledged,
#      zero ids issued by both;
#   3. a base backup restored as a new server (recovery.signal: a new timeline): ZC009;
#   4. a copy marked with a cosid.fork file: ZC009 until acknowledged, the file gone; 4b. a
#      keeper started again (pg_terminate_backend) records such a file too;
#   5. a crash restart is not a fork: ids at once;
#   6. static slots: a copy marked with a cosid.fork file opens no new static window until
#      acknowledged (its state file names the same slots as its original's), and after it
#      starts above what the original issued ahead of its clock since the copy;
#   7. a base backup (recovery.signal) of a server that has issued no id yet: a fork too (the
#      original may issue later);
#   8. a cosid.store_dsn that reaches the server itself: refused (it would hide the server
#      from its own store);
#   9. a copy whose configuration names another database of the server as its store
#      (cosid.database, kept outside the data directory): a copy all the same (cosid.history);
#  10. a server made store-only after it issued: its record is cleared, ids refused there.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
base="${1:-/tmp/cosid-e2e}/fork"
P="$base/p"; S1="$base/s1"; S2="$base/s2"; R="$base/r"
PP=55601; PS1=55602; PS2=55603; PR=55604; C="$base/c"; PC=55605
mkdir -p "$base"
trap 'touch "$base/stop"; kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT
# every node at once (some are base backups of others, made below): a killed run's servers stop
node_register p "$P" "$PP"; node_register s1 "$S1" "$PS1"; node_register s2 "$S2" "$PS2"; node_register r "$R" "$PR"
node_register c "$C" "$PC"
node_stop_all immediate
CONF=("wal_level = replica" "max_wal_senders = 4" "wal_keep_size = '64MB'" "wal_log_hints = on" "cosid.ttl = '2s'"
      "cosid.acquire_timeout = '10s'" "cosid.pool_idle_timeout = '60s'" "wal_retrieve_retry_interval = '100ms'")
# standby_of FROM NODE [recovery]: a base backup of node FROM started as NODE, as a streaming
# standby (-R), or as a restored backup that recovers and ends on a new timeline.
standby_of() {
    local dir; dir=$(node_dir "$2")
    rm -rf "$dir"; mkdir -p "$dir"; chown "$PG_USER" "$dir"
    if [ "${3:-}" = recovery ]; then
        as_pg "$PG_BIN/pg_basebackup" -h "$(node_dir "$1")" -p "$(node_port "$1")" -D "$dir/data" -X stream -c fast >/dev/null
        as_pg touch "$dir/data/recovery.signal"
        # no archive: recovery replays the backup's own WAL and ends on a new timeline
        echo "restore_command = 'false'" >> "$dir/data/postgresql.conf"
    else
        as_pg "$PG_BIN/pg_basebackup" -h "$(node_dir "$1")" -p "$(node_port "$1")" -D "$dir/data" -R -X stream -c fast >/dev/null
    fi
    node_attach "$2" "$dir" "$(node_port "$2")" ${EXTRA_CONF:+"$EXTRA_CONF"}
    node_start "$2"
    # a recovered copy takes read-only connections (hot_standby) before its recovery ends: a
    # call in between meets a standby (25006), not the copy
    if [ "${3:-}" = recovery ]; then
        wait_for 60 "the end of $dir's recovery" node_sql "$2" -c "SELECT NOT pg_is_in_recovery()" >/dev/null
    fi
}
# inserter NODE NAME: inserts 100 rows a statement until $base/stop, one line per statement
# ("ok" or the SQLSTATE) in $base/NAME.log.  (100, not 20: the thresholds below, in rows, are
# reached with a fifth of the statements, each a psql and a backend of its own: on a loaded
# 2-core machine 20 a statement took 280 of the script's 350 s.)
inserter() {
    ( trap - EXIT; set +e
      while [ ! -e "$base/stop" ]; do
          if out=$(node_sql "$1" -v VERBOSITY=sqlstate \
                   -c "INSERT INTO t(v) SELECT g FROM generate_series(1, 100) g" 2>&1); then echo ok; sleep "$CLIENT_PACE"
          else echo "$(sqlstate_of "$out")"; sleep 0.05; fi
      done > "$base/$2.log" ) &
}
# insert_once NODE: the SQLSTATE of one INSERT ("ok" when it worked), and how long it took
insert_once() {
    local t0 out; t0=$(now_ms)
    if out=$(node_sql "$1" -v VERBOSITY=sqlstate \
             -c "INSERT INTO t(v) SELECT g FROM generate_series(1, 20) g" 2>&1); then echo "ok $(( $(now_ms) - t0 ))"
    else echo "$(sqlstate_of "$out") $(( $(now_ms) - t0 ))"; fi
}

node_up p "$P" "$PP" "${CONF[@]}"
qp -c "CREATE EXTENSION cosid" \
    -c "SELECT cosid_store_settings(max_ttl => '3s', max_tolerance => '1s')" \
    -c "SELECT cosid_namespace_create('f', slot_bits => 2, tolerance => '300 ms')" \
    -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), v int,
                        src int DEFAULT current_setting('port')::int)" >/dev/null  # the server that issued

echo "# 1. a planned switchover: the primary stops cleanly, its standby is promoted"
standby_of p s1
rm -f "$base/stop"; inserter p p1
check_true "P issues" "$(wait_until 300 qp -c "SELECT count(*) >= 2000 FROM t")"
check_true "P's keeper recorded itself as the server issuing from its store" \
    "$(qp -c "SELECT issuer_incarnation IS NOT NULL FROM cosid.store_state")"
touch "$base/stop"; wait
lsn=$(qp -c "SELECT pg_current_wal_lsn()")
node_stop p fast
stopped_at=$(date -u '+%Y-%m-%d %H:%M:%S.%3N+00')
check_true "S1 received P's clean stop" "$(wait_until 30 qs1 -c "SELECT pg_last_wal_replay_lsn() > '$lsn'")"
check_true "the record still names P's keeper (a stopped server may start again)" \
    "$(qs1 -c "SELECT issuer_incarnation IS NOT NULL FROM cosid.store_state")"
node_promote s1
r=$(insert_once s1)
check "the promoted S1 refuses with ZC009 (${r#* } ms)" ZC009 "${r%% *}"
check_true "acknowledged with the time P stopped" \
    "$(qs1 -c "SELECT cosid_fork_acknowledge('$stopped_at') LIKE 'fork acknowledged%'")"
r=$(insert_once s1)
check "the promoted S1 issues (the raise from P's stop waited ${r#* } ms)" ok "${r%% *}"
check "zero duplicate ids on S1 over P's and its own rows" 0 "$(qs1 -c "SELECT count(*) - count(DISTINCT id) FROM t")"

echo "# 2. a standby promoted while its primary issues (split brain)"
standby_of s1 s2
rm -f "$base/stop"; inserter s1 s1
check_true "S2 streams from S1" "$(wait_until 30 qs1 -c "SELECT count(*) = 1 FROM pg_stat_replication WHERE state = 'streaming'")"
check_true "S2 has S1's record as the server issuing" "$(wait_until 30 qs2 -c "SELECT issuer_incarnation IS NOT NULL FROM cosid.store_state")"
node_promote s2
split_ms=$(now_ms)
r=$(insert_once s2)
check "the promoted S2 refuses with ZC009" ZC009 "${r%% *}"
check_true "... at once, not after cosid.acquire_timeout (${r#* } ms)" "$([ "${r#* }" -lt 8000 ] && echo t || echo f)"
check "cosid_health() on S2: fork critical" critical "$(qs2 -c "SELECT status FROM cosid_health() WHERE name = 'fork'")"
n=$(qs1 -c "SELECT count(*) FROM t")
# (2,000 rows, and for two of its ttls at least: S1 renews while S2 stands)
check_true "S1 goes on issuing meanwhile" "$(wait_until 300 qs1 -c "SELECT count(*) >= $n + 2000
    AND max(cosid_timestamp(id, 'f')) >= to_timestamp($split_ms / 1000.0) + interval '4 s' FROM t")"
r=$(insert_once s2)
check "S2 still refuses while S1 issues" ZC009 "${r%% *}"
touch "$base/stop"; wait
node_stop s1 immediate   # fenced
check "S1's client saw no error" 0 "$(grep -vc '^ok$' "$base/s1.log" || true)"
qs1 -c "SELECT 1" >/dev/null 2>&1 && echo "not ok - S1 is stopped" || true
node_start s1
qs1 -c "COPY (SELECT id, src FROM t) TO STDOUT" > "$base/s1_ids.txt"
node_stop s1 fast
check "an application role cannot acknowledge" 42501 "$(sqlstate_of "$(qs2 -v VERBOSITY=verbose \
    -c "CREATE ROLE app LOGIN" -c "SET ROLE app" -c "SELECT cosid_fork_acknowledge()" 2>&1)")"
check_true "cosid_fork_acknowledge() on S2" "$(qs2 -c "SELECT cosid_fork_acknowledge() LIKE 'fork acknowledged%'")"
check "cosid_health() on S2: fork ok" ok "$(qs2 -c "SELECT status FROM cosid_health() WHERE name = 'fork'")"
rm -f "$base/stop"; inserter s2 s2
check_true "S2 issues 4,000 rows after the acknowledgement" \
    "$(wait_until 300 qs2 -c "SELECT count(*) >= 4000 FROM t WHERE src = $PS2")"
touch "$base/stop"; wait
qs2 -c "CREATE TABLE s1_ids (id bigint, src int)" >/dev/null
qs2 -c "COPY s1_ids FROM STDIN" < "$base/s1_ids.txt"
check "ids issued by both S1 and S2 ($(qs2 -c "SELECT count(*) FROM s1_ids WHERE src = $PS1") of S1's, \
$(qs2 -c "SELECT count(*) FROM t WHERE src = $PS2") of S2's)" 0 \
    "$(qs2 -c "SELECT count(*) FROM s1_ids s JOIN t USING (id) WHERE s.src = $PS1 AND t.src = $PS2")"
check "S2's client saw no error" 0 "$(grep -vc '^ok$' "$base/s2.log" || true)"

echo "# 2b. the fenced S1 rewound into a standby of S2, then promoted beside it"
as_pg "$PG_BIN/pg_rewind" -D "$S1/data" --source-server="host=$S2 port=$PS2 user=postgres dbname=postgres" >/dev/null 2>&1
# (pg_rewind copied S2's configuration: S1's own address back)
sed -i -e "s/^port = .*/port = $PS1/" -e "s|^unix_socket_directories = .*|unix_socket_directories = '$S1'|" \
    "$S1/data/postgresql.conf"
as_pg touch "$S1/data/standby.signal"
echo "primary_conninfo = 'host=$S2 port=$PS2 user=postgres'" | as_pg tee -a "$S1/data/postgresql.auto.conf" >/dev/null
node_start s1
check_true "S1 follows S2 as a standby" "$(wait_until 30 qs2 -c "SELECT count(*) = 1 FROM pg_stat_replication WHERE state = 'streaming'")"
node_promote s1
r=$(insert_once s1)
check "the rewound S1 promoted beside S2 refuses with ZC009" ZC009 "${r%% *}"
node_stop s1 immediate

echo "# 3. a base backup of S2 restored as a new server (recovery.signal: a new timeline)"
rm -f "$base/stop"; inserter s2 s2b
n=$(qs2 -c "SELECT count(*) FROM t")
check_true "S2 issues" "$(wait_until 60 qs2 -c "SELECT count(*) > $n FROM t")"
standby_of s2 r recovery
check_true "R recovered and is writable" "$(wait_until 30 qr -c "SELECT NOT pg_is_in_recovery()")"
r=$(insert_once r)
check "the restored backup refuses with ZC009" ZC009 "${r%% *}"
touch "$base/stop"; wait
node_stop r immediate

echo "# 4. a copy marked with a cosid.fork file"
node_stop s2 fast
echo "a disk snapshot of S2 started as a second server" | as_pg tee "$S2/data/cosid.fork" >/dev/null
node_start s2
r=$(insert_once s2)
check "the marked copy refuses with ZC009" ZC009 "${r%% *}"
check_true "the store recorded why" "$(qs2 -c "SELECT fork_pending LIKE '%a disk snapshot of S2%' FROM cosid.store_state")"
check_true "the file is gone once recorded" "$([ ! -e "$S2/data/cosid.fork" ] && echo t || echo f)"
qs2 -c "SELECT cosid_fork_acknowledge()" >/dev/null
r=$(insert_once s2)
check "after the acknowledgement it issues" ok "${r%% *}"

echo "# 4b. a keeper started again looks at the data directory itself"
# (Its predecessor may have exited before the store took what it found there: the server keeps
# the pool and the keeper's readiness across the restart, not what the keeper had pending.)
echo "a copy whose first keeper exited before it recorded this" | as_pg tee "$S2/data/cosid.fork" >/dev/null
keeper_pid() { qs2 -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'cosid keeper'"; }
old_keeper=$(keeper_pid)
qs2 -c "SELECT pg_terminate_backend($old_keeper)" >/dev/null
check_true "a keeper started again recorded the file in the store" "$(wait_until 30 qs2 -c "
    SELECT coalesce(bool_or(fork_pending LIKE '%first keeper exited%'), false) FROM cosid.store_state")"
check_true "... from a new process, and the file is gone" \
    "$([ "$(keeper_pid)" != "$old_keeper" ] && [ ! -e "$S2/data/cosid.fork" ] && echo t || echo f)"
check_true "the acknowledgement after it" "$(qs2 -c "SELECT cosid_fork_acknowledge() LIKE 'fork acknowledged%'")"
r=$(insert_once s2)
check "then it issues" ok "${r%% *}"

echo "# 5. a crash restart is not a fork"
node_stop s2 immediate
node_start s2
r=$(insert_once s2)
check "after a crash restart it issues at once (${r#* } ms)" ok "${r%% *}"
check "zero duplicate ids on S2" 0 "$(qs2 -c "SELECT count(*) - count(DISTINCT id) FROM t")"
assert_store_verified "$S2" "$PS2" postgres "S2 (P's, S1's until the split and its own windows)"
echo "# 6. static slots: a copy marked with a cosid.fork file (its state file names the original's slots)"
node_stop s2 immediate
node_up r "$R" "$PR" "cosid.static_slots = 'st:1'"
qr -c "CREATE EXTENSION cosid" \
    -c "SELECT cosid_namespace_create('st', slot_bits => 2, sequence_bits => 8, unit => 's', total_bits => 50)" \
    -c "CREATE TABLE ts (id bigint PRIMARY KEY DEFAULT cosid_next('st'), v int)" -c "INSERT INTO ts(v) VALUES (0)" >/dev/null
rm -rf "$C"; mkdir -p "$C"; chown "$PG_USER" "$C"
as_pg "$PG_BIN/pg_basebackup" -h "$R" -p "$PR" -D "$C/data" -X stream -c fast >/dev/null
node_attach c "$C" "$PC"
echo "a disk snapshot of R" | as_pg tee "$C/data/cosid.fork" >/dev/null
# R goes on after the copy, 2,000 ids at 256 a second: borrowed up to cosid.static_ahead ahead
qr -c "INSERT INTO ts(v) SELECT 1 FROM generate_series(1, 2000)" >/dev/null
ahead=$(qr -c "SELECT round(extract(epoch FROM max(cosid_timestamp(id, 'st')) - clock_timestamp())) FROM ts")
qr -c "COPY (SELECT id FROM ts) TO STDOUT" > "$base/r_ids.txt"
assert_store_verified "$R" "$PR" postgres "R (static windows)"
node_stop r fast
stopped_at=$(date -u '+%Y-%m-%d %H:%M:%S.%3N+00')
node_start c
out=$(qc -v VERBOSITY=verbose -c "INSERT INTO ts(v) VALUES (2)" 2>&1 || true)
check "no new window of the copy's static slot (ZC009)" ZC009 "$(sqlstate_of "$out")"
qc -c "SELECT cosid_fork_acknowledge('$stopped_at')" >/dev/null
qc -c "SET cosid.acquire_timeout = '40s'" -c "INSERT INTO ts(v) SELECT 3 FROM generate_series(1, 2000)" >/dev/null 2>&1 || true
qc -c "CREATE TABLE r_ids (id bigint)" -c "COPY r_ids FROM STDIN" < "$base/r_ids.txt" >/dev/null
check "after the acknowledgement the copy's static slot issues 2,000 ids, none of R's (R's last id ${ahead} s ahead at its stop)" \
    "2000|0" "$(qc -c "SELECT count(*) FILTER (WHERE v = 3) || '|' || count(*) FILTER (WHERE v = 3 AND id IN (SELECT id FROM r_ids)) FROM ts")"
assert_store_verified "$C" "$PC" postgres "the acknowledged copy C (R's windows until the copy and its own)"
node_stop c immediate

echo "# 7. a base backup of a server that has issued nothing yet"
node_stop r immediate
node_up p "$P" "$PP" "${CONF[@]}"
qp -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('f', slot_bits => 2)" \
    -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), v int)" >/dev/null
check_true "its keeper recorded itself before any id" \
    "$(wait_until 20 qp -c "SELECT issuer_incarnation IS NOT NULL FROM cosid.store_state")"
standby_of p r recovery
check_true "R recovered and is writable" "$(wait_until 30 qr -c "SELECT NOT pg_is_in_recovery()")"
r=$(insert_once r)
check "the copy refuses with ZC009" ZC009 "${r%% *}"
node_stop r immediate

echo "# 8. a cosid.store_dsn that reaches the server itself"
qp -c "ALTER SYSTEM SET cosid.store_dsn = 'host=$P port=$PP dbname=postgres user=postgres'" >/dev/null
node_stop p fast
node_start p
out=$(qp -v VERBOSITY=verbose -c "INSERT INTO t(v) VALUES (1)" 2>&1 || true)
check "refused (ZC006)" ZC006 "$(sqlstate_of "$out")"
check_true "... saying why" "$(grep -q "reaches this server itself" <<<"$out" && echo t || echo f)"

echo "# 9. a recovered copy that uses another database of the server as its store"
qp -c "ALTER SYSTEM RESET cosid.store_dsn" >/dev/null
node_stop p fast
node_start p
qp -c "INSERT INTO t(v) VALUES (1)" -c "CREATE DATABASE db2" >/dev/null
node_sql_db p db2 -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('f', slot_bits => 2)" \
    -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), v int)" >/dev/null 2>&1
EXTRA_CONF="cosid.database = 'db2'" standby_of p r recovery
out=$(node_sql_db r db2 -v VERBOSITY=verbose -c "INSERT INTO t(v) VALUES (1)" 2>&1 || true)
check "the copy refuses with ZC009 in db2's store too" ZC009 "$(sqlstate_of "$out")"
check_true "... and cosid_health() names cosid.history as the reason" \
    "$(node_sql_db r db2 -c "SELECT status = 'critical' AND detail LIKE '%cosid.history%' FROM cosid_health() WHERE name = 'fork'")"
node_stop r immediate

echo "# 10. a server made store-only after it issued"
qp -c "ALTER SYSTEM SET cosid.store_only = on" >/dev/null
node_stop p fast
node_start p
check_true "its record is cleared" "$(wait_until 20 qp -c "SELECT issuer_incarnation IS NULL FROM cosid.store_state")"
out=$(qp -v VERBOSITY=verbose -c "INSERT INTO t(v) VALUES (1)" 2>&1 || true)
check "cosid_next() there: ZC006" ZC006 "$(sqlstate_of "$out")"
assert_store_verified "$P" "$PP" postgres "P made again (store-only at the end)"
exit $FAIL

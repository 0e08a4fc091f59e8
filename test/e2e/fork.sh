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
PP=55601; PS1=55602; PS2=55603; PR=55604
mkdir -p "$base"
trap 'touch "$base/stop"; kill $(jobs -p) 2>/dev/null || true; for d in "$P" "$S1" "$S2" "$R" "$base/c"; do stop_server "$d" immediate; done' EXIT
for d in "$P" "$S1" "$S2" "$R"; do stop_server "$d" immediate; done
CONF=("wal_level = replica" "max_wal_senders = 4" "wal_keep_size = '64MB'" "wal_log_hints = on" "cosid.ttl = '2s'"
      "cosid.acquire_timeout = '10s'" "cosid.pool_idle_timeout = '60s'" "wal_retrieve_retry_interval = '100ms'")
qd() { local d=$1 p=$2; shift 2; psql_at "$d" "$p" postgres -At "$@"; }

# standby_of DIR PORT NEWDIR NEWPORT [recovery]: a base backup of DIR started at NEWPORT, as a
# streaming standby (-R), or as a restored backup that recovers and ends on a new timeline.
standby_of() {
    rm -rf "$3"; mkdir -p "$3"; chown "$PG_USER" "$3"
    if [ "${5:-}" = recovery ]; then
        as_pg "$PG_BIN/pg_basebackup" -h "$1" -p "$2" -D "$3/data" -X stream -c fast >/dev/null
        as_pg touch "$3/data/recovery.signal"
        # no archive: recovery replays the backup's own WAL and ends on a new timeline
        echo "restore_command = 'false'" >> "$3/data/postgresql.conf"
    else
        as_pg "$PG_BIN/pg_basebackup" -h "$1" -p "$2" -D "$3/data" -R -X stream -c fast >/dev/null
    fi
    sed -i -e "s/^port = .*/port = $4/" -e "s|^unix_socket_directories = .*|unix_socket_directories = '$3'|" \
        "$3/data/postgresql.conf"
    [ -n "${EXTRA_CONF:-}" ] && echo "$EXTRA_CONF" >> "$3/data/postgresql.conf"
    as_pg "$PG_BIN/pg_ctl" -D "$3/data" -l "$3/server.log" -w start >/dev/null
    # a recovered copy takes read-only connections (hot_standby) before its recovery ends: a
    # call in between meets a standby (25006), not the copy
    if [ "${5:-}" = recovery ]; then
        wait_for 60 "the end of $3's recovery" as_pg "$PG_BIN/psql" -X -At -h "$3" -p "$4" -d postgres \
            -c "SELECT NOT pg_is_in_recovery()" >/dev/null
    fi
}
# inserter DIR PORT NAME: inserts 100 rows a statement until $base/stop, one line per statement
# ("ok" or the SQLSTATE) in $base/NAME.log.  (100, not 20: the thresholds below, in rows, are
# reached with a fifth of the statements, each a psql and a backend of its own: on a loaded
# 2-core machine 20 a statement took 280 of the script's 350 s.)
inserter() {
    ( trap - EXIT; set +e
      while [ ! -e "$base/stop" ]; do
          if out=$(as_pg "$PG_BIN/psql" -X -q -h "$1" -p "$2" -d postgres -v VERBOSITY=sqlstate \
                   -c "INSERT INTO t(v) SELECT g FROM generate_series(1, 100) g" 2>&1); then echo ok
          else echo "$(grep -oE 'ERROR:  [0-9A-Z]{5}' <<<"$out" | head -1 | cut -c9-)"; sleep 0.05; fi
      done > "$base/$3.log" ) &
}
# insert_once DIR PORT: the SQLSTATE of one INSERT ("ok" when it worked), and how long it took
insert_once() {
    local t0 out; t0=$(now_ms)
    if out=$(as_pg "$PG_BIN/psql" -X -q -h "$1" -p "$2" -d postgres -v VERBOSITY=sqlstate \
             -c "INSERT INTO t(v) SELECT g FROM generate_series(1, 20) g" 2>&1); then echo "ok $(( $(now_ms) - t0 ))"
    else echo "$(sqlstate_of "$out") $(( $(now_ms) - t0 ))"; fi
}

start_server "$P" "$PP" "${CONF[@]}"
qd "$P" "$PP" -c "CREATE EXTENSION cosid" \
    -c "SELECT cosid_store_settings(max_ttl => '3s', max_tolerance => '1s')" \
    -c "SELECT cosid_namespace_create('f', slot_bits => 2, tolerance => '300 ms')" \
    -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), v int,
                        src int DEFAULT current_setting('port')::int)" >/dev/null  # the server that issued

echo "# 1. a planned switchover: the primary stops cleanly, its standby is promoted"
standby_of "$P" "$PP" "$S1" "$PS1"
rm -f "$base/stop"; inserter "$P" "$PP" p1
check_true "P issues" "$(wait_until 300 qd "$P" "$PP" -c "SELECT count(*) >= 2000 FROM t")"
check_true "P's keeper recorded itself as the server issuing from its store" \
    "$(qd "$P" "$PP" -c "SELECT issuer_incarnation IS NOT NULL FROM cosid.store_state")"
touch "$base/stop"; wait
lsn=$(qd "$P" "$PP" -c "SELECT pg_current_wal_lsn()")
stop_server "$P" fast
stopped_at=$(date -u '+%Y-%m-%d %H:%M:%S.%3N+00')
check_true "S1 received P's clean stop" "$(wait_until 30 qd "$S1" "$PS1" -c "SELECT pg_last_wal_replay_lsn() > '$lsn'")"
check_true "the record still names P's keeper (a stopped server may start again)" \
    "$(qd "$S1" "$PS1" -c "SELECT issuer_incarnation IS NOT NULL FROM cosid.store_state")"
as_pg "$PG_BIN/pg_ctl" -D "$S1/data" -w promote >/dev/null
r=$(insert_once "$S1" "$PS1")
check "the promoted S1 refuses with ZC009 (${r#* } ms)" ZC009 "${r%% *}"
check_true "acknowledged with the time P stopped" \
    "$(qd "$S1" "$PS1" -c "SELECT cosid_fork_acknowledge('$stopped_at') LIKE 'fork acknowledged%'")"
r=$(insert_once "$S1" "$PS1")
check "the promoted S1 issues (the raise from P's stop waited ${r#* } ms)" ok "${r%% *}"
check "zero duplicate ids on S1 over P's and its own rows" 0 "$(qd "$S1" "$PS1" -c "SELECT count(*) - count(DISTINCT id) FROM t")"

echo "# 2. a standby promoted while its primary issues (split brain)"
standby_of "$S1" "$PS1" "$S2" "$PS2"
rm -f "$base/stop"; inserter "$S1" "$PS1" s1
check_true "S2 streams from S1" "$(wait_until 30 qd "$S1" "$PS1" -c "SELECT count(*) = 1 FROM pg_stat_replication WHERE state = 'streaming'")"
check_true "S2 has S1's record as the server issuing" "$(wait_until 30 qd "$S2" "$PS2" -c "SELECT issuer_incarnation IS NOT NULL FROM cosid.store_state")"
as_pg "$PG_BIN/pg_ctl" -D "$S2/data" -w promote >/dev/null
split_ms=$(now_ms)
r=$(insert_once "$S2" "$PS2")
check "the promoted S2 refuses with ZC009" ZC009 "${r%% *}"
check_true "... at once, not after cosid.acquire_timeout (${r#* } ms)" "$([ "${r#* }" -lt 8000 ] && echo t || echo f)"
check "cosid_health() on S2: fork critical" critical "$(qd "$S2" "$PS2" -c "SELECT status FROM cosid_health() WHERE name = 'fork'")"
n=$(qd "$S1" "$PS1" -c "SELECT count(*) FROM t")
# (2,000 rows, and for two of its ttls at least: S1 renews while S2 stands)
check_true "S1 goes on issuing meanwhile" "$(wait_until 300 qd "$S1" "$PS1" -c "SELECT count(*) >= $n + 2000
    AND max(cosid_timestamp(id, 'f')) >= to_timestamp($split_ms / 1000.0) + interval '4 s' FROM t")"
r=$(insert_once "$S2" "$PS2")
check "S2 still refuses while S1 issues" ZC009 "${r%% *}"
touch "$base/stop"; wait
stop_server "$S1" immediate   # fenced
check "S1's client saw no error" 0 "$(grep -vc '^ok$' "$base/s1.log" || true)"
psql_at "$S1" "$PS1" postgres -At -c "SELECT 1" >/dev/null 2>&1 && echo "not ok - S1 is stopped" || true
as_pg "$PG_BIN/pg_ctl" -D "$S1/data" -l "$S1/server.log" -w start >/dev/null
qd "$S1" "$PS1" -c "COPY (SELECT id, src FROM t) TO STDOUT" > "$base/s1_ids.txt"
stop_server "$S1" fast
check "an application role cannot acknowledge" 42501 "$(sqlstate_of "$(qd "$S2" "$PS2" -v VERBOSITY=verbose \
    -c "CREATE ROLE app LOGIN" -c "SET ROLE app" -c "SELECT cosid_fork_acknowledge()" 2>&1)")"
check_true "cosid_fork_acknowledge() on S2" "$(qd "$S2" "$PS2" -c "SELECT cosid_fork_acknowledge() LIKE 'fork acknowledged%'")"
check "cosid_health() on S2: fork ok" ok "$(qd "$S2" "$PS2" -c "SELECT status FROM cosid_health() WHERE name = 'fork'")"
rm -f "$base/stop"; inserter "$S2" "$PS2" s2
check_true "S2 issues 4,000 rows after the acknowledgement" \
    "$(wait_until 300 qd "$S2" "$PS2" -c "SELECT count(*) >= 4000 FROM t WHERE src = $PS2")"
touch "$base/stop"; wait
qd "$S2" "$PS2" -c "CREATE TABLE s1_ids (id bigint, src int)" >/dev/null
qd "$S2" "$PS2" -c "COPY s1_ids FROM STDIN" < "$base/s1_ids.txt"
check "ids issued by both S1 and S2 ($(qd "$S2" "$PS2" -c "SELECT count(*) FROM s1_ids WHERE src = $PS1") of S1's, \
$(qd "$S2" "$PS2" -c "SELECT count(*) FROM t WHERE src = $PS2") of S2's)" 0 \
    "$(qd "$S2" "$PS2" -c "SELECT count(*) FROM s1_ids s JOIN t USING (id) WHERE s.src = $PS1 AND t.src = $PS2")"
check "S2's client saw no error" 0 "$(grep -vc '^ok$' "$base/s2.log" || true)"

echo "# 2b. the fenced S1 rewound into a standby of S2, then promoted beside it"
as_pg "$PG_BIN/pg_rewind" -D "$S1/data" --source-server="host=$S2 port=$PS2 user=postgres dbname=postgres" >/dev/null 2>&1
# (pg_rewind copied S2's configuration: S1's own address back)
sed -i -e "s/^port = .*/port = $PS1/" -e "s|^unix_socket_directories = .*|unix_socket_directories = '$S1'|" \
    "$S1/data/postgresql.conf"
as_pg touch "$S1/data/standby.signal"
echo "primary_conninfo = 'host=$S2 port=$PS2 user=postgres'" | as_pg tee -a "$S1/data/postgresql.auto.conf" >/dev/null
as_pg "$PG_BIN/pg_ctl" -D "$S1/data" -l "$S1/server.log" -w start >/dev/null
check_true "S1 follows S2 as a standby" "$(wait_until 30 qd "$S2" "$PS2" -c "SELECT count(*) = 1 FROM pg_stat_replication WHERE state = 'streaming'")"
as_pg "$PG_BIN/pg_ctl" -D "$S1/data" -w promote >/dev/null
r=$(insert_once "$S1" "$PS1")
check "the rewound S1 promoted beside S2 refuses with ZC009" ZC009 "${r%% *}"
stop_server "$S1" immediate

echo "# 3. a base backup of S2 restored as a new server (recovery.signal: a new timeline)"
rm -f "$base/stop"; inserter "$S2" "$PS2" s2b
n=$(qd "$S2" "$PS2" -c "SELECT count(*) FROM t")
check_true "S2 issues" "$(wait_until 60 qd "$S2" "$PS2" -c "SELECT count(*) > $n FROM t")"
standby_of "$S2" "$PS2" "$R" "$PR" recovery
check_true "R recovered and is writable" "$(wait_until 30 qd "$R" "$PR" -c "SELECT NOT pg_is_in_recovery()")"
r=$(insert_once "$R" "$PR")
check "the restored backup refuses with ZC009" ZC009 "${r%% *}"
touch "$base/stop"; wait
stop_server "$R" immediate

echo "# 4. a copy marked with a cosid.fork file"
stop_server "$S2" fast
echo "a disk snapshot of S2 started as a second server" | as_pg tee "$S2/data/cosid.fork" >/dev/null
as_pg "$PG_BIN/pg_ctl" -D "$S2/data" -l "$S2/server.log" -w start >/dev/null
r=$(insert_once "$S2" "$PS2")
check "the marked copy refuses with ZC009" ZC009 "${r%% *}"
check_true "the store recorded why" "$(qd "$S2" "$PS2" -c "SELECT fork_pending LIKE '%a disk snapshot of S2%' FROM cosid.store_state")"
check_true "the file is gone once recorded" "$([ ! -e "$S2/data/cosid.fork" ] && echo t || echo f)"
qd "$S2" "$PS2" -c "SELECT cosid_fork_acknowledge()" >/dev/null
r=$(insert_once "$S2" "$PS2")
check "after the acknowledgement it issues" ok "${r%% *}"

echo "# 4b. a keeper started again looks at the data directory itself"
# (Its predecessor may have exited before the store took what it found there: the server keeps
# the pool and the keeper's readiness across the restart, not what the keeper had pending.)
echo "a copy whose first keeper exited before it recorded this" | as_pg tee "$S2/data/cosid.fork" >/dev/null
keeper_pid() { qd "$S2" "$PS2" -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'cosid keeper'"; }
old_keeper=$(keeper_pid)
qd "$S2" "$PS2" -c "SELECT pg_terminate_backend($old_keeper)" >/dev/null
check_true "a keeper started again recorded the file in the store" "$(wait_until 30 qd "$S2" "$PS2" -c "
    SELECT coalesce(bool_or(fork_pending LIKE '%first keeper exited%'), false) FROM cosid.store_state")"
check_true "... from a new process, and the file is gone" \
    "$([ "$(keeper_pid)" != "$old_keeper" ] && [ ! -e "$S2/data/cosid.fork" ] && echo t || echo f)"
check_true "the acknowledgement after it" "$(qd "$S2" "$PS2" -c "SELECT cosid_fork_acknowledge() LIKE 'fork acknowledged%'")"
r=$(insert_once "$S2" "$PS2")
check "then it issues" ok "${r%% *}"

echo "# 5. a crash restart is not a fork"
stop_server "$S2" immediate
as_pg "$PG_BIN/pg_ctl" -D "$S2/data" -l "$S2/server.log" -w start >/dev/null
r=$(insert_once "$S2" "$PS2")
check "after a crash restart it issues at once (${r#* } ms)" ok "${r%% *}"
check "zero duplicate ids on S2" 0 "$(qd "$S2" "$PS2" -c "SELECT count(*) - count(DISTINCT id) FROM t")"
assert_store_verified "$S2" "$PS2" postgres "S2 (P's, S1's until the split and its own windows)"
echo "# 6. static slots: a copy marked with a cosid.fork file (its state file names the original's slots)"
stop_server "$S2" immediate
C="$base/c"; PC=55605
start_server "$R" "$PR" "cosid.static_slots = 'st:1'"
qd "$R" "$PR" -c "CREATE EXTENSION cosid" \
    -c "SELECT cosid_namespace_create('st', slot_bits => 2, sequence_bits => 8, unit => 's', total_bits => 50)" \
    -c "CREATE TABLE ts (id bigint PRIMARY KEY DEFAULT cosid_next('st'), v int)" -c "INSERT INTO ts(v) VALUES (0)" >/dev/null
rm -rf "$C"; mkdir -p "$C"; chown "$PG_USER" "$C"
as_pg "$PG_BIN/pg_basebackup" -h "$R" -p "$PR" -D "$C/data" -X stream -c fast >/dev/null
sed -i -e "s/^port = .*/port = $PC/" -e "s|^unix_socket_directories = .*|unix_socket_directories = '$C'|" "$C/data/postgresql.conf"
echo "a disk snapshot of R" | as_pg tee "$C/data/cosid.fork" >/dev/null
# R goes on after the copy, 2,000 ids at 256 a second: borrowed up to cosid.static_ahead ahead
qd "$R" "$PR" -c "INSERT INTO ts(v) SELECT 1 FROM generate_series(1, 2000)" >/dev/null
ahead=$(qd "$R" "$PR" -c "SELECT round(extract(epoch FROM max(cosid_timestamp(id, 'st')) - clock_timestamp())) FROM ts")
qd "$R" "$PR" -c "COPY (SELECT id FROM ts) TO STDOUT" > "$base/r_ids.txt"
assert_store_verified "$R" "$PR" postgres "R (static windows)"
stop_server "$R" fast
stopped_at=$(date -u '+%Y-%m-%d %H:%M:%S.%3N+00')
as_pg "$PG_BIN/pg_ctl" -D "$C/data" -l "$C/server.log" -w start >/dev/null
out=$(qd "$C" "$PC" -v VERBOSITY=verbose -c "INSERT INTO ts(v) VALUES (2)" 2>&1 || true)
check "no new window of the copy's static slot (ZC009)" ZC009 "$(sqlstate_of "$out")"
qd "$C" "$PC" -c "SELECT cosid_fork_acknowledge('$stopped_at')" >/dev/null
qd "$C" "$PC" -c "SET cosid.acquire_timeout = '40s'" -c "INSERT INTO ts(v) SELECT 3 FROM generate_series(1, 2000)" >/dev/null 2>&1 || true
qd "$C" "$PC" -c "CREATE TABLE r_ids (id bigint)" -c "COPY r_ids FROM STDIN" < "$base/r_ids.txt" >/dev/null
check "after the acknowledgement the copy's static slot issues 2,000 ids, none of R's (R's last id ${ahead} s ahead at its stop)" \
    "2000|0" "$(qd "$C" "$PC" -c "SELECT count(*) FILTER (WHERE v = 3) || '|' || count(*) FILTER (WHERE v = 3 AND id IN (SELECT id FROM r_ids)) FROM ts")"
assert_store_verified "$C" "$PC" postgres "the acknowledged copy C (R's windows until the copy and its own)"
stop_server "$C" immediate

echo "# 7. a base backup of a server that has issued nothing yet"
stop_server "$R" immediate
start_server "$P" "$PP" "${CONF[@]}"
qd "$P" "$PP" -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('f', slot_bits => 2)" \
    -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), v int)" >/dev/null
check_true "its keeper recorded itself before any id" \
    "$(wait_until 20 qd "$P" "$PP" -c "SELECT issuer_incarnation IS NOT NULL FROM cosid.store_state")"
standby_of "$P" "$PP" "$R" "$PR" recovery
check_true "R recovered and is writable" "$(wait_until 30 qd "$R" "$PR" -c "SELECT NOT pg_is_in_recovery()")"
r=$(insert_once "$R" "$PR")
check "the copy refuses with ZC009" ZC009 "${r%% *}"
stop_server "$R" immediate

echo "# 8. a cosid.store_dsn that reaches the server itself"
qd "$P" "$PP" -c "ALTER SYSTEM SET cosid.store_dsn = 'host=$P port=$PP dbname=postgres user=postgres'" >/dev/null
stop_server "$P" fast
as_pg "$PG_BIN/pg_ctl" -D "$P/data" -l "$P/server.log" -w start >/dev/null
out=$(qd "$P" "$PP" -v VERBOSITY=verbose -c "INSERT INTO t(v) VALUES (1)" 2>&1 || true)
check "refused (ZC006)" ZC006 "$(sqlstate_of "$out")"
check_true "... saying why" "$(grep -q "reaches this server itself" <<<"$out" && echo t || echo f)"

echo "# 9. a recovered copy that uses another database of the server as its store"
qd "$P" "$PP" -c "ALTER SYSTEM RESET cosid.store_dsn" >/dev/null
stop_server "$P" fast
as_pg "$PG_BIN/pg_ctl" -D "$P/data" -l "$P/server.log" -w start >/dev/null
qd "$P" "$PP" -c "INSERT INTO t(v) VALUES (1)" -c "CREATE DATABASE db2" >/dev/null
psql_at "$P" "$PP" db2 -q -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('f', slot_bits => 2)" \
    -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), v int)" >/dev/null 2>&1
EXTRA_CONF="cosid.database = 'db2'" standby_of "$P" "$PP" "$R" "$PR" recovery
out=$(psql_at "$R" "$PR" db2 -At -v VERBOSITY=verbose -c "INSERT INTO t(v) VALUES (1)" 2>&1 || true)
check "the copy refuses with ZC009 in db2's store too" ZC009 "$(sqlstate_of "$out")"
check_true "... and cosid_health() names cosid.history as the reason" \
    "$(psql_at "$R" "$PR" db2 -At -c "SELECT status = 'critical' AND detail LIKE '%cosid.history%' FROM cosid_health() WHERE name = 'fork'")"
stop_server "$R" immediate

echo "# 10. a server made store-only after it issued"
qd "$P" "$PP" -c "ALTER SYSTEM SET cosid.store_only = on" >/dev/null
stop_server "$P" fast
as_pg "$PG_BIN/pg_ctl" -D "$P/data" -l "$P/server.log" -w start >/dev/null
check_true "its record is cleared" "$(wait_until 20 qd "$P" "$PP" -c "SELECT issuer_incarnation IS NULL FROM cosid.store_state")"
out=$(qd "$P" "$PP" -v VERBOSITY=verbose -c "INSERT INTO t(v) VALUES (1)" 2>&1 || true)
check "cosid_next() there: ZC006" ZC006 "$(sqlstate_of "$out")"
assert_store_verified "$P" "$PP" postgres "P made again (store-only at the end)"
exit $FAIL

#!/usr/bin/env bash
# The database's copy of the static slots' ceilings (cosid.static_ceiling, cosid 1.5) around
# the operations that could lose it or let it stop static issuing (found by a review of the
# first version of it; each case failed on that version):
#   bash test/e2e/static_ceiling.sh WORKDIR
# a) a 1.4 catalog updated (ALTER EXTENSION cosid UPDATE, then one cosid_next() per static
#    namespace) while the slot's window is open, a stop and pg_upgrade right after it, the new
#    clock 5 s back (as pg_upgrade.sh's static_case): the open window must be recorded.
# b) DROP EXTENSION cosid; CREATE EXTENSION cosid VERSION '1.4' under a running keeper: static
#    ids go on (a keeper that cached "the table exists" failed every window until a restart).
# c) a synchronous standby that does not answer: static ids go on (the row is durable locally).
# d) a switchover by logical replication (FOR ALL TABLES): the publisher's rows reach the
#    subscriber, which (same static slot, clock 5 s back) starts above them.
# e) the database read-only for 10 s: the record write fails, and the state file's ceiling
#    must not move on with each retry (it did when the file was written first).
# g) DROP and CREATE EXTENSION under a running keeper with a static window in the file: the
#    table made again gets the window back without waiting for the next window.
# f) cosid_adopt of a column whose ids are ahead of the clock into a static namespace, then
#    pg_upgrade before any window, the new cluster serving the namespace on another static
#    slot: the adopted floor must come over for every slot (it was only in the state file,
#    which pg_upgrade leaves behind; then only in the row of the old cluster's slot) and the
#    new cluster start above the adopted ids.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
ROOT="${1:-/tmp/cosid-e2e}/static_ceiling"
FAIL=0
B="$PG_BIN"; D="$ROOT"
OPORT=55701; NPORT=55702
trap 'node_stop_all immediate' EXIT
rm -rf "$D"; mkdir -p "$D/old" "$D/new"; chown -R "$PG_USER" "$D"
as_pg "$B/initdb" -D "$D/old/data" -A trust -U postgres -E UTF8 --locale=C -k >/dev/null
as_pg "$B/initdb" -D "$D/new/data" -A trust -U postgres -E UTF8 --locale=C -k >/dev/null
# the servers' settings after their port and socket (node_attach's: each its own socket directory)
conf=("listen_addresses = ''" "shared_preload_libraries = 'cosid'"
      "max_connections = 30" "fsync = off" "cosid.static_slots = 'st:5'" "cosid.acquire_timeout = '30s'")
node_attach o "$D/old" "$OPORT" "${conf[@]}"   # qo
node_attach n "$D/new" "$NPORT" "${conf[@]}"   # qn
NS="SELECT cosid_namespace_create('st', slot_bits => 4, sequence_bits => 8, unit => 's', total_bits => 55)"

# --- b) stale cache --------------------------------------------------------------------------
node_start o
qo -c "CREATE EXTENSION cosid" -c "$NS" -c "SELECT cosid_next('st')" >/dev/null
qo -c "ALTER SYSTEM SET cosid.pool_idle_timeout = '1s'" -c "SELECT pg_reload_conf()" >/dev/null
wait_for 30 "the static window released" qo -c "SELECT count(*) = 0 FROM cosid_pool() WHERE kind = 'static'" >/dev/null
qo -c "DROP EXTENSION cosid" -c "CREATE EXTENSION cosid VERSION '1.4'" -c "$NS" >/dev/null
got=$(qo -c "SELECT cosid_next('st') > 0" 2>&1 | head -1 || true)
check "b) a 1.4 catalog made again in the keeper's database: static ids still issued" "t" "$got"
qo -c "ALTER SYSTEM RESET cosid.pool_idle_timeout" -c "SELECT pg_reload_conf()" >/dev/null
qo -c "DROP EXTENSION cosid" >/dev/null
node_stop o

# --- c) synchronous standby not answering ----------------------------------------------------
node_start o
qo -c "CREATE EXTENSION cosid VERSION '1.4'" -c "$NS" >/dev/null
qo -c "ALTER EXTENSION cosid UPDATE" >/dev/null
qo -c "ALTER SYSTEM SET synchronous_standby_names = 'nobody'" -c "SELECT pg_reload_conf()" >/dev/null
got=$(qo -c "SET cosid.acquire_timeout = '15s'" -c "SELECT cosid_next('st') > 0" 2>&1 | head -1 || true)
check "c) synchronous standby down: a static id within 15 s (static slots need no store)" "t" "$got"
assert_store_verified "$D/old" "$OPORT" postgres "c) the store updated from 1.4"
qo -c "ALTER SYSTEM RESET synchronous_standby_names" -c "SELECT pg_reload_conf()" >/dev/null
qo -c "DROP EXTENSION cosid" >/dev/null
node_stop o
rm -f "$D/old/data/cosid.state"

# --- e) failed record writes ratchet the file's ceiling ----------------------------------------
node_start o
qo -c "CREATE EXTENSION cosid" -c "$NS" >/dev/null
qo -c "ALTER SYSTEM SET default_transaction_read_only = on" -c "SELECT pg_reload_conf()" >/dev/null
t0=$SECONDS
while [ $((SECONDS - t0)) -lt 10 ]; do qo -c "SET default_transaction_read_only = off" -c "SET cosid.acquire_timeout = '2s'" -c "SELECT cosid_next('st')" >/dev/null 2>&1 || true; done
ahead=$(( ($(awk '$1 == "window" {print $4}' "$D/old/data/cosid.state" 2>/dev/null || echo 0) - $(now_ms)) / 1000 ))
qo -c "ALTER SYSTEM RESET default_transaction_read_only" -c "SELECT pg_reload_conf()" >/dev/null
got=$(qo -c "SET cosid.acquire_timeout = '20s'" -c "SELECT cosid_next('st') > 0" 2>&1 | head -1 || true)
check "e) 10 s with the database read-only: the state file's ceiling at most static_ahead (10 s) ahead; an id within 20 s after" \
    "ahead<=10|t" "ahead<=$([ "$ahead" -le 10 ] && echo 10 || echo "$ahead")|$got"
assert_store_verified "$D/old" "$OPORT" postgres "e) the store after its read-only time"
qo -c "DROP EXTENSION cosid" >/dev/null
node_stop o
rm -f "$D/old/data/cosid.state"

# --- g) DROP and CREATE EXTENSION under a running keeper ------------------------------------------
# The table made again is empty: the keeper writes the file's windows and not-befores into it
# again (within a second), not only at the next static window, so that a pg_upgrade right
# after it still finds them.  Before, nothing was written until the next window.
node_start o
qo -c "CREATE EXTENSION cosid" -c "$NS" -c "SELECT cosid_next('st')" >/dev/null
# the window released first: no renewal would write its row again
qo -c "ALTER SYSTEM SET cosid.pool_idle_timeout = '1s'" -c "SELECT pg_reload_conf()" >/dev/null
wait_for 30 "the static window released" qo -c "SELECT count(*) = 0 FROM cosid_pool() WHERE kind = 'static'" >/dev/null
qo -c "ALTER SYSTEM RESET cosid.pool_idle_timeout" -c "SELECT pg_reload_conf()" >/dev/null
qo -c "DROP EXTENSION cosid" -c "CREATE EXTENSION cosid" -c "$NS" >/dev/null
file_ceiling() { awk '$1 == "window" && $2 == "st" && $3 == 5 {print $4}' "$D/old/data/cosid.state"; }
check_true "g) DROP and CREATE EXTENSION: the state file's window is in the new cosid.static_ceiling within 10 s, no id issued" \
    "$(wait_for 10 "the window's row in the table made again" qo -c "
        SELECT coalesce(max(ceiling_ms) >= $(file_ceiling), false) FROM cosid.static_ceiling WHERE namespace = 'st' AND slot = 5")"
qo -c "DROP EXTENSION cosid" >/dev/null
node_stop o
rm -f "$D/old/data/cosid.state"

# --- a) 1.4 -> 1.5 with a window open, then pg_upgrade ---------------------------------------
node_start o
qo -c "CREATE EXTENSION cosid VERSION '1.4'" -c "$NS" \
   -c "CREATE TABLE t_static (id bigint PRIMARY KEY DEFAULT cosid_next('st'), phase text)" >/dev/null
pids=()
for c in 1 2 3 4; do qo -c "INSERT INTO t_static(phase) SELECT 'before' FROM generate_series(1, 500)" >/dev/null & pids+=($!); done
for c in "${pids[@]}"; do wait "$c"; done
# docs/upgrades.md: "run ALTER EXTENSION cosid UPDATE on the old cluster before pg_upgrade, and
# let a static window be written, e.g. by one cosid_next() per static namespace"
qo -c "ALTER EXTENSION cosid UPDATE" >/dev/null
qo -c "INSERT INTO t_static(phase) VALUES ('before')" >/dev/null
before=$(qo -c "SELECT max(id) || '|' || (extract(epoch FROM cosid_timestamp(max(id), 'st')) * 1000)::bigint FROM t_static")
node_stop o
max_id=${before%%|*}; max_ms=${before#*|}
(cd "$D" && as_pg "$B/pg_upgrade" -b "$B" -B "$B" -d "$D/old/data" -D "$D/new/data" -p "$OPORT" -P "$NPORT" \
     -s "$D" -U postgres --no-sync --link) > "$D/pg_upgrade.out" 2>&1 || { echo "not ok - pg_upgrade failed"; tail "$D/pg_upgrade.out"; exit 1; }
echo "cosid.clock_offset = $(( max_ms - 5000 - $(now_ms) ))" >> "$D/new/data/postgresql.conf"
node_start n
pids=()
for c in 1 2 3 4; do qn -c "INSERT INTO t_static(phase) SELECT 'after' FROM generate_series(1, 500)" >/dev/null 2>>"$D/after.err" & pids+=($!); done
for c in "${pids[@]}"; do wait "$c" || true; done
check "a) the old cluster's row came over: its stop recorded the window opened under 1.4" "1" \
    "$(qn -c "SELECT count(*) FROM cosid.static_ceiling c, pg_control_system() s WHERE c.system_identifier <> s.system_identifier")"
check "a) 2000 ids after pg_upgrade, all above $max_id, none refused" "2000|true|" \
    "$(qn -c "SELECT count(*) || '|' || coalesce(min(id) > $max_id, false) FROM t_static WHERE phase = 'after'")|$(head -1 "$D/after.err")"
assert_store_verified "$D/new" "$NPORT" postgres "a) the upgraded cluster's store"
node_stop n

# --- f) cosid_adopt into a static namespace, then pg_upgrade -------------------------------------
F="$D/adopt"; mkdir -p "$F/old" "$F/new"; chown -R "$PG_USER" "$F"
for n in old:55705 new:55706; do
    d=${n%%:*}; as_pg "$B/initdb" -D "$F/$d/data" -A trust -U postgres -E UTF8 --locale=C -k >/dev/null
    # (no TCP: a listening port in the ephemeral range can be taken by another lane's
    # outgoing connection, and the server then fails to start: seen on a CI run)
    node_attach "f${d:0:1}" "$F/$d" "${n##*:}" "${conf[@]}"   # qfo, qfn
done
echo "cosid.static_slots = 'st:2'" >> "$F/new/data/postgresql.conf"   # the last line wins: slot 2 after the upgrade
node_start fo
# ids of another generator, 5 s ahead of the clock, on slot 2 (the new cluster's static slot)
qfo -c "CREATE EXTENSION cosid" -c "$NS" -c "CREATE TABLE t_adopt (id bigint PRIMARY KEY, phase text)" \
    -c "INSERT INTO t_adopt SELECT cosid_min_id(now() + interval '5 s', 'st') + (2 << 8) + k, 'adopted' FROM generate_series(0, 99) k" \
    -c "SELECT cosid_adopt('t_adopt', 'id', 'st')" >/dev/null
before=$(qfo -c "SELECT max(id) || '|' || (extract(epoch FROM cosid_timestamp(max(id), 'st')) * 1000)::bigint FROM t_adopt")
max_id=${before%%|*}; max_ms=${before#*|}
node_stop fo
(cd "$F" && as_pg "$B/pg_upgrade" -b "$B" -B "$B" -d "$F/old/data" -D "$F/new/data" -p 55705 -P 55706 \
     -s "$F" -U postgres --no-sync --link) > "$F/pg_upgrade.out" 2>&1 || { echo "not ok - pg_upgrade (f) failed"; tail "$F/pg_upgrade.out"; exit 1; }
# the new cluster's clock 5 s below the adopted ids (pg_upgrade took some of their lead)
echo "cosid.clock_offset = $(( max_ms - 5000 - $(now_ms) ))" >> "$F/new/data/postgresql.conf"
node_start fn
qfn -c "INSERT INTO t_adopt(phase) SELECT 'after' FROM generate_series(1, 2000)" >/dev/null 2>"$F/after.err" || true
check "f) cosid_adopt into a static namespace, then pg_upgrade onto another static slot: 2000 ids after it, all above the adopted $max_id" "2000|" \
    "$(qfn -c "SELECT count(*) FROM t_adopt WHERE phase = 'after' AND id > $max_id")|$(head -1 "$F/after.err")"
assert_store_verified "$F/new" 55706 postgres "f) the upgraded cluster's store"
node_stop fn

# --- d) logical replication switchover ----------------------------------------------------------
L="$D/logical"; mkdir -p "$L/pub" "$L/sub"; chown -R "$PG_USER" "$L"
for n in a:pub:55703 b:sub:55704; do   # qa the publisher, qb the subscriber
    d=${n#*:}; d=${d%%:*}; as_pg "$B/initdb" -D "$L/$d/data" -A trust -U postgres -E UTF8 --locale=C >/dev/null
    node_attach "${n%%:*}" "$L/$d" "${n##*:}" "listen_addresses = ''" "wal_level = logical" "${conf[@]:1}"
    node_start "${n%%:*}"
done
for q in qa qb; do $q -c "CREATE EXTENSION cosid" -c "$NS" -c "CREATE TABLE t_static (id bigint PRIMARY KEY DEFAULT cosid_next('st'), phase text)" >/dev/null; done
qa -c "INSERT INTO t_static(phase) SELECT 'before' FROM generate_series(1, 2000)" -c "CREATE PUBLICATION p FOR ALL TABLES" >/dev/null
qb -c "CREATE SUBSCRIPTION s CONNECTION '$(node_dsn a)' PUBLICATION p" >/dev/null 2>&1
wait_for 60 "2000 rows on the subscriber" qb -c "SELECT count(*) = 2000 FROM t_static" >/dev/null
before=$(qa -c "SELECT max(id) || '|' || (extract(epoch FROM cosid_timestamp(max(id), 'st')) * 1000)::bigint FROM t_static")
max_id=${before%%|*}; max_ms=${before#*|}
rows=$(qb -c "SELECT count(*) FROM cosid.static_ceiling")
assert_store_verified "$L/pub" 55703 postgres "d) the publisher's store"
node_stop a
qb -c "ALTER SUBSCRIPTION s DISABLE" >/dev/null
node_stop b
echo "cosid.clock_offset = $(( max_ms - 5000 - $(now_ms) ))" >> "$L/sub/data/postgresql.conf"
node_start b
qb -c "INSERT INTO t_static(phase) SELECT 'after' FROM generate_series(1, 2000)" >/dev/null 2>"$L/after.err" || true
check "d) after a logical-replication switchover: the publisher's ceiling on the subscriber, 2000 ids above $max_id" "1|2000|" \
    "$rows|$(qb -c "SELECT count(*) FROM t_static WHERE phase = 'after' AND id > $max_id")|$(head -1 "$L/after.err")"
assert_store_verified "$L/sub" 55704 postgres "d) the subscriber's store"
exit $FAIL

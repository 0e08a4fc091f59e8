#!/usr/bin/env bash
# A remote lease store lost and restored from its pg_dump at its address while the keepers
# keep knocking (issue 22, review).  pg_restore runs the dump's items in order, each
# committed by itself: CREATE EXTENSION cosid (its own record of the store state, the
# 'default' namespace with every slot free at the store's now), then the user tables, then
# their data by schema name (app.* before cosid.*), and only then the origin's record of
# the store state.  Until that record arrives the store looks like a brand-new one: an
# acquire in between is granted a window from now, below the ceiling of a holder of the
# lost store that issues on (I1, until its next renewal finds the lease lost).
# The store must raise before it grants anything during a restore.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/store_restore_race"
PST=${RACE_PORT0:-55495}; P1=$((PST + 1)); P2=$((PST + 2))
ST="$base/store"                   # the store's address: socket dir and port
ST2="$base/store2"                 # the restored store's cluster, started at that address
I1="$base/i1"; I2="$base/i2"
DSN="host=$ST port=$PST dbname=postgres user=postgres"
# st2: the restored store's cluster in $ST2, its socket at the store's address ($ST, PST): queried
# through node st, the address's node
node_register st "$ST" "$PST"; node_register i1 "$I1" "$P1"; node_register i2 "$I2" "$P2"; node_register st2 "$ST2" "$PST"
# shellcheck disable=SC2046  # one argument per pid
cleanup() { kill $(jobs -p) 2>/dev/null || true; [ -n "${keeper1:-}" ] && kill -CONT "$keeper1" 2>/dev/null; node_stop_all immediate; }
trap cleanup EXIT
cleanup
rm -rf "$base"; mkdir -p "$base"; chown "$PG_USER" "$base"

node_up st "$ST" "$PST" "cosid.ttl = '20s'" "cosid.store_only = on"
# The store's database is also an application's: a schema app with a large table.
qst -c "CREATE EXTENSION cosid" \
    -c "SELECT cosid_store_settings(max_ttl => '20s', max_tolerance => '1s')" \
    -c "CREATE SCHEMA app" -c "CREATE TABLE app.events (id bigint, payload text)" \
    -c "INSERT INTO app.events SELECT g, repeat('x', 100) FROM generate_series(1, 3000000) g" >/dev/null
for i in 1 2; do
    d=$I1; p=$P1; [ $i = 2 ] && { d=$I2; p=$P2; }
    node_up "i$i" "$d" "$p" "cosid.store_dsn = '$DSN'" "cosid.ttl = '20s'" "cosid.preferred_slot = 0" \
        "cosid.acquire_timeout = '60s'" "cosid.owner_key = 'i$i'"
    node_sql "i$i" -c "CREATE EXTENSION cosid" -c "CREATE TABLE t (id bigint PRIMARY KEY)" -c "CREATE TABLE stop ()" >/dev/null
done
node_stop i2  # I2 starts only after the store is lost

as_pg "$PG_BIN/pg_dump" -h "$ST" -p "$PST" -Fc -f "$base/store.dump" postgres
echo "# restore order: $(as_pg "$PG_BIN/pg_restore" -l "$base/store.dump" | grep -v '^;' | grep -E 'EXTENSION - cosid|TABLE DATA' | sed 's/^[0-9]*; [0-9]* [0-9]* //' | paste -sd, -)"
fresh_cluster "$ST2/data" 2>/dev/null || { mkdir -p "$ST2"; chown "$PG_USER" "$ST2"; fresh_cluster "$ST2/data"; }
chown -R "$PG_USER" "$ST2"
{ echo "port = $PST"; echo "listen_addresses = ''"; echo "unix_socket_directories = '$ST'";
  echo "shared_preload_libraries = 'cosid'"; echo "cosid.store_only = on"; echo "fsync = off"; echo "cosid.ttl = '20s'";
  echo "cosid.test_reach_cap = '1ms'"; } >> "$ST2/data/postgresql.conf"

# I1 holds slot 0 of 'default' and issues without a pause.
qi1 -c "INSERT INTO t SELECT cosid_next() FROM generate_series(1, 10)" >/dev/null
check "I1 holds slot 0" 0 "$(qi1 -c "SELECT slot FROM cosid_pool() WHERE namespace = 'default'")"
loop() {  # loop NODE
    set +e; trap - EXIT
    while [ ! -e "$base/stop" ]; do
        node_sql "$1" -c "DO \$\$ BEGIN
            WHILE NOT EXISTS (SELECT 1 FROM stop) LOOP
                INSERT INTO t SELECT cosid_next() FROM generate_series(1, 2000); COMMIT;
            END LOOP; END \$\$" >/dev/null 2>&1 || sleep 0.02
    done
}
loop i1 &

# The store is lost just after a renewal of I1; I1's keeper is held up meanwhile (SIGSTOP),
# so that I1's backends go on issuing in its window as long as it lasts.
keeper1=$(qi1 -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'cosid keeper'")
sleep 1
kill -STOP "$keeper1"
node_stop st immediate
# The empty cluster takes the address, I2 starts (its keeper knocks), and the dump is restored.
node_start st2
node_start i2
loop i2 &
# --enable-row-security: row_security stays on, so the restore is known by pg_restore's
# application_name alone (store_restore.sh restores with row_security off).  Before, such a
# restore was taken for a new store.
as_pg "$PG_BIN/pg_restore" --enable-row-security -h "$ST" -p "$PST" -d postgres "$base/store.dump" 2>"$base/restore.err" || true
check "pg_restore reports no error" 0 "$(grep -c 'error' "$base/restore.err" || true)"
check_true "I2 issued 20,000 ids" "$(wait_until 60 qi2 -c "SELECT count(*) >= 20000 FROM t")"
kill -CONT "$keeper1"
check_true "I1's lease is found freed by the restored store's raise at its renewal (its backends move on, no ZC001)" \
    "$(wait_until 30 bash -c "grep -q 'was freed by the store.s raise' '$I1/server.log' && echo t")"
touch "$base/stop"
for i in 1 2; do node_sql "i$i" -c "INSERT INTO stop DEFAULT VALUES" >/dev/null; done
wait

qi1 -c "CREATE TABLE t2 (id bigint)" >/dev/null
qi2 -c "COPY t TO STDOUT" | qi1 -c "COPY t2 FROM STDIN"
echo "# I1 issued $(qi1 -c "SELECT count(*) FROM t"), I2 $(qi1 -c "SELECT count(*) FROM t2") ids"
echo "# slot 0: I1's last tick $(qi1 -c "SELECT max(id >> 22) FROM t WHERE (id >> 12) & 1023 = 0"), I2's first $(qi1 -c "SELECT min(id >> 22) FROM t2 WHERE (id >> 12) & 1023 = 0")"
check "no id issued by both" 0 "$(qi1 -c "SELECT count(*) FROM t JOIN t2 USING (id)")"
check "no (slot, tick) issued by both" 0 "$(qi1 -c "
    SELECT count(*) FROM (SELECT DISTINCT id >> 12 FROM t) a(k) JOIN (SELECT DISTINCT id >> 12 FROM t2) b(k) USING (k)")"
grep -h 'cosid store:' "$ST2/server.log" | head -2 | sed 's/^/# /'
assert_store_verified "$ST" "$PST" postgres "the restored store (its history from the dump, then its own)"
exit $FAIL

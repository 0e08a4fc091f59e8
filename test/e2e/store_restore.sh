#!/usr/bin/env bash
# A remote lease store lost and restored from its nightly pg_dump at the same address (issue
# 22, item 1).  The dump is taken while slot 0 of 'orders' is free; then instance I1 acquires
# slot 0 and issues.  The store is lost; its dump is restored into a fresh cluster (of the
# same system identifier and timeline, as a copy of one initdb is) that takes over its
# address; I2 (cosid.preferred_slot = 0) starts and issues while I1 goes on until its next
# renewal.  The restored store must see that it is one (two records of its state: the
# dump's and its CREATE EXTENSION's) and raise every floor: no (slot, tick) issued by both,
# zero duplicate ids.  Before: I2 got slot 0 at the dumped floor and both issued the same ids.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/store_restore${RESTORE:+_$RESTORE}"
ST="$base/store"; PST=55491        # the store's address: socket dir and port
ST2="$base/store2"                 # the restored store's cluster, started at that address
I1="$base/i1"; P1=55492; I2="$base/i2"; P2=55493
DSN="host=$ST port=$PST dbname=postgres user=postgres"
# shellcheck disable=SC2046  # one argument per pid
cleanup() { kill $(jobs -p) 2>/dev/null || true; [ -n "${keeper1:-}" ] && kill -CONT "$keeper1" 2>/dev/null; node_stop_all immediate; }
trap cleanup EXIT
node_register st2 "$ST2" "$PST"  # (made below; registered now so that cleanup stops a killed run's)
cleanup
rm -rf "$base"; mkdir -p "$base"; chown "$PG_USER" "$base"

node_up st "$ST" "$PST" "cosid.ttl = '6s'" "cosid.store_only = on"
qst -c "CREATE EXTENSION cosid" \
    -c "SELECT cosid_store_settings(max_ttl => '6s', max_tolerance => '1s')" \
    -c "SELECT cosid_namespace_create('orders', slot_bits => 2, tolerance => '300 ms')" >/dev/null
for i in 1 2; do
    d=$I1; p=$P1; [ $i = 2 ] && { d=$I2; p=$P2; }
    node_up "i$i" "$d" "$p" "cosid.store_dsn = '$DSN'" "cosid.ttl = '6s'" "cosid.preferred_slot = 0" \
        "cosid.acquire_timeout = '30s'" "cosid.owner_key = 'i$i'"
    node_sql "i$i" -c "CREATE EXTENSION cosid" -c "CREATE TABLE t (id bigint PRIMARY KEY)" -c "CREATE TABLE stop ()" >/dev/null
done
node_stop i2  # I2 starts only after the restore

# The nightly dump: slot 0 of 'orders' is free in it.
as_pg "$PG_BIN/pg_dump" -h "$ST" -p "$PST" -Fc -f "$base/store.dump" postgres
check "the dump has slot 0 free" "" "$(qst -c "SELECT owner_key FROM cosid.lease WHERE namespace = 'orders' AND slot = 0")"
# The restored cluster is made ready beside the store (as a standby host would be).
# (node st2 is that cluster; at the store's address it is node st's socket and port)
mkdir -p "$ST2"; fresh_cluster "$ST2/data"
node_attach st2 "$ST2" "$PST" "listen_addresses = ''" "shared_preload_libraries = 'cosid'" "cosid.store_only = on" \
    "fsync = off" "cosid.ttl = '6s'" "cosid.test_reach_cap = '1ms'"
# restore_store NODE: the dump into ST2, started at NODE's socket directory, st2 or st (ST2 stays up).
# Restored beside the store (st2), it runs without the library: its own keeper would make a
# store call as soon as the extension is there, and raise the floors then, not when it takes over.
restore_store() {
    sed -i "s|^unix_socket_directories = .*|unix_socket_directories = '$(node_dir "$1")'|" "$ST2/data/postgresql.conf"
    if [ "$1" = st2 ]; then node_start st2 -o "-c shared_preload_libraries=''"; else node_start st2; fi
    if [ "${RESTORE:-whole}" = whole ]; then
        as_pg "$PG_BIN/pg_restore" -h "$(node_dir "$1")" -p "$PST" -d postgres "$base/store.dump" 2>"$base/restore.err" || true
    else
        # The order pg_restore -j may take (items of one section run at once, in any order): the
        # store's record first, a store call that raises the floors of the rows there so far,
        # then the lease rows, then the namespaces.  (Before: the lease rows failed on the
        # foreign key to the namespaces, and the slots of 'orders' were lost; with the key gone,
        # they came after the raise unraised, and I2 got slot 0 at the dumped floor.)  This
        # restore runs after the store is lost, as a real one does: its raise then lies above
        # I1's window.  (Restored ahead and raised then, the copy would be as old as a copy of
        # the data directory when it takes over: docs/failover.md.)
        as_pg "$PG_BIN/pg_restore" -l "$base/store.dump" > "$base/all.list"
        grep -E 'TABLE DATA cosid store_state ' "$base/all.list" > "$base/state.list"
        grep -E 'TABLE DATA cosid lease ' "$base/all.list" > "$base/lease.list"
        grep -vE 'TABLE DATA cosid (store_state|lease) ' "$base/all.list" > "$base/rest.list"
        chmod a+r "$base"/*.list
        r() { as_pg "$PG_BIN/pg_restore" -h "$(node_dir "$1")" -p "$PST" -d postgres "${@:2}" "$base/store.dump" 2>>"$base/restore.err" || true; }
        r "$1" --section=pre-data
        r "$1" -L "$base/state.list"
        node_sql "$1" -c "SELECT count(*) FROM cosid.acquire('default', 'probe', gen_random_uuid(), 1000)" >/dev/null
        check_true "the store raised on its first call, before the lease rows came" \
            "$(node_sql "$1" -c "SELECT count(*) = 1 AND bool_and(raised_at_ms > 0) FROM cosid.store_state")"
        r "$1" -L "$base/lease.list"
        r "$1" --section=data --section=post-data -L "$base/rest.list"
        check "the slots of 'orders' restored" 4 "$(node_sql "$1" -c "SELECT count(*) FROM cosid.lease WHERE namespace = 'orders'")"
    fi
    check "pg_restore reports no error" 0 "$(grep -c 'error' "$base/restore.err" || true)"
}
if [ "${RESTORE:-whole}" = whole ]; then
    # Restored beside the store, stopped until it takes over: no store call has raised it.
    restore_store st2
    node_stop st2 fast
fi

# I1 acquires slot 0 after the dump, and issues without a pause.
qi1 -c "INSERT INTO t SELECT cosid_next('orders') FROM generate_series(1, 10)" >/dev/null
check "I1 holds slot 0" 0 "$(qi1 -c "SELECT slot FROM cosid_pool() WHERE namespace = 'orders'")"
loop() {  # loop NODE: one session inserting 2,000 ids a transaction until a row in stop;
    # a new session after an error (an id refused past the window)
    set +e; trap - EXIT
    while [ ! -e "$base/stop" ]; do
        node_sql "$1" -c "DO \$\$ BEGIN
            WHILE NOT EXISTS (SELECT 1 FROM stop) LOOP
                INSERT INTO t SELECT cosid_next('orders') FROM generate_series(1, 2000); COMMIT;
            END LOOP; END \$\$" >/dev/null 2>&1 || sleep 0.02
    done
}
loop i1 &

# The store is lost; the restored one takes its address.  I1's keeper is held up meanwhile
# (SIGSTOP), so that I1's backends go on issuing in its window as long as it lasts, as they
# do until a renewal tells them otherwise.
keeper1=$(qi1 -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'cosid keeper'")
kill -STOP "$keeper1"
node_stop st immediate
if [ "${RESTORE:-whole}" = whole ]; then
    sed -i "s|^unix_socket_directories = '$ST2'|unix_socket_directories = '$ST'|" "$ST2/data/postgresql.conf"
    node_start st2
else
    restore_store st
fi
node_start i2
check_true "I2 issues on the restored store" \
    "$(wait_until 30 qi2 -c "INSERT INTO t SELECT cosid_next('orders') FROM generate_series(1, 10) RETURNING true" 2>/dev/null | head -1)"
loop i2 &
check_true "I2 issued 20,000 ids" "$(wait_until 30 qi2 -c "SELECT count(*) >= 20000 FROM t")"
kill -CONT "$keeper1"
check_true "I1's lease is found freed by the restored store's raise at its renewal (its backends move on, no ZC001)" \
    "$(wait_until 30 bash -c "grep -q 'was freed by the store.s raise' '$I1/server.log' && echo t")"
touch "$base/stop"
for n in i1 i2; do node_sql $n -c "INSERT INTO stop DEFAULT VALUES" >/dev/null; done
wait

# Every id of I2 beside every id of I1.
qi1 -c "CREATE TABLE t2 (id bigint)" >/dev/null
qi2 -c "COPY t TO STDOUT" | qi1 -c "COPY t2 FROM STDIN"
echo "# I1 issued $(qi1 -c "SELECT count(*) FROM t"), I2 $(qi1 -c "SELECT count(*) FROM t2") ids"
check "no id issued by both" 0 "$(qi1 -c "SELECT count(*) FROM t JOIN t2 USING (id)")"
check "no (slot, tick) issued by both" 0 "$(qi1 -c "
    SELECT count(*) FROM (SELECT DISTINCT id >> 12 FROM t) a(k) JOIN (SELECT DISTINCT id >> 12 FROM t2) b(k) USING (k)")"
check_true "the restored store counted the restore and raised" \
    "$(qst -c "SELECT count(*) = 1 AND bool_and(failovers >= 1 AND raised_at_ms > 0) FROM cosid.store_state")"
grep -h 'restored from a dump' "$ST2/server.log" | head -1 | sed 's/^/# /'
sample=$(qi2 -c "SELECT string_agg(id::text, ',') FROM (SELECT id FROM t ORDER BY random() LIMIT 50) s")
check "the restored store names I2 as the one issuer of 50 of its ids (cosid_issuer)" 0 "$(qst -c "
    SELECT count(*) FROM unnest('{$sample}'::bigint[]) x(id)
    WHERE (SELECT count(*) FILTER (WHERE i.owner_key = 'i2') || '/' || count(*) FROM cosid_issuer(x.id, 'orders') i) <> '1/1'")"
assert_store_verified "$ST" "$PST" postgres "the restored store"
exit $FAIL

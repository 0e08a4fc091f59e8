#!/usr/bin/env bash
# Several databases of one instance use one store (the one in cosid.database) through the
# one keeper: clients insert into three databases at once, with connection churn, and no
# id repeats across them.  A namespace unknown to the store is refused by the keeper; a
# database that defines a namespace with another layout than the store's is refused; an
# administrator's revoke points at the store.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
dir="${1:-/tmp/cosid-e2e}/databases"; port=55447
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT
node_up main "$dir" "$port" "cosid.database = 'postgres'"
qd() { local db="$1"; shift; node_sql_db main "$db" "$@"; }  # qd DB [psql args...]: on database DB

q -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('orders', slot_bits => 6)" >/dev/null
for db in app1 app2; do
    q -c "CREATE DATABASE $db" >/dev/null
    qd "$db" -c "CREATE EXTENSION cosid" >/dev/null
done
for db in postgres app1 app2; do
    qd "$db" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), v int)" >/dev/null
done

echo "INSERT INTO t(v) SELECT g FROM generate_series(1, 20) g;" > "$dir/ins.sql"; chmod a+r "$dir/ins.sql"
for db in postgres app1 app2; do
    as_pg pgbench -n -h "$dir" -p "$port" -c 2 -T 4 -f "$dir/ins.sql" "$db" > "$dir/$db.p.log" 2>&1 &
    as_pg pgbench -n -C -h "$dir" -p "$port" -c 1 -T 4 -f "$dir/ins.sql" "$db" > "$dir/$db.c.log" 2>&1 &
done
wait
check "no client failed in any database" 0 "$(cat "$dir"/*.p.log "$dir"/*.c.log | grep -c 'aborted' || true)"
for db in postgres app1 app2; do qd "$db" -c "SELECT id FROM t" > "$dir/$db.ids"; done
echo "# rows: postgres $(wc -l < "$dir/postgres.ids"), app1 $(wc -l < "$dir/app1.ids"), app2 $(wc -l < "$dir/app2.ids")"
check "zero duplicate ids across the three databases" 0 "$(sort "$dir"/*.ids | uniq -d | wc -l)"
check_true "every database inserted rows" "$(for db in postgres app1 app2; do [ -s "$dir/$db.ids" ] || echo f; done | grep -q f || echo t)"
check "one store: app1's and app2's own lease tables were never written" "0 0" \
    "$(qd app1 -c "SELECT count(*) FROM cosid.lease WHERE fence > 0") $(qd app2 -c "SELECT count(*) FROM cosid.lease WHERE fence > 0")"
check_true "... and the store in postgres holds this instance's leases" \
    "$(q -c "SELECT count(*) > 0 FROM cosid.lease WHERE namespace = 'default' AND fence > 0")"

# A namespace only the store knows is used from another database through the keeper;
# cosid_parse() there needs the namespace defined locally, with the store's layout.
check "cosid_next('orders') from app1 (defined only in the store)" "t" "$(qd app1 -c "SELECT cosid_next('orders') > 0")"
qd app1 -c "SELECT cosid_namespace_create('orders', slot_bits => 6)" >/dev/null
id=$(qd app1 -c "SELECT cosid_next('orders')")
check "app1 parses the id with the store's layout: its slot is one this instance holds" 1 \
    "$(q -c "SELECT count(*) FROM cosid.lease WHERE namespace = 'orders' AND owner_key = (SELECT owner_key FROM cosid_stats())
                      AND slot = $(qd app1 -c "SELECT (cosid_parse($id, 'orders')).slot")")"
qd app2 -c "SELECT cosid_namespace_create('orders', slot_bits => 5)" >/dev/null
out=$(qd app2 -v VERBOSITY=verbose -c "SELECT cosid_next('orders')" 2>&1 || true)
grep -E 'ERROR|DETAIL' <<<"$out" | sed 's/^/#   /'
check "a database defining the namespace with another layout is refused (42P17)" 1 "$(grep -c 'ERROR:  42P17' <<<"$out")"
check "... naming both layouts" 1 "$(grep -c 'here 46/5/12 bits, epoch 1704067200000 ms, unit ms; in the lease store 45/6/12 bits' <<<"$out")"
check "... and no generator of app2 uses the lease" 0 "$(q -c "
    SELECT coalesce(sum(backends), 0) FROM cosid_pool() WHERE namespace = 'orders'")"

out=$(qd app1 -v VERBOSITY=verbose -c "SELECT cosid_next('nope')" 2>&1 || true)
check "a namespace unknown to the store is refused by the keeper (42704)" 1 "$(grep -c 'ERROR:  42704' <<<"$out")"

q -c "SELECT slot FROM cosid.acquire('orders', 'elsewhere', gen_random_uuid(), 2000)" > "$dir/other_slot"
out=$(qd app1 -v VERBOSITY=verbose -c "SELECT cosid_release('orders', $(cat "$dir/other_slot"))" 2>&1 || true)
grep -E 'ERROR|HINT' <<<"$out" | sed 's/^/#   /'
check "revoking another owner's slot outside the store's database: 0A000 with the store's command" 1 \
    "$(grep -c "HINT:  On the store, as a superuser or member of cosid_admin, run: SELECT \* FROM cosid.revoke('orders'" <<<"$out")"
check "... and the slot stays with its owner" "elsewhere" "$(q -c "SELECT owner_key FROM cosid.lease WHERE namespace = 'orders' AND slot = $(cat "$dir/other_slot")")"
check "the same call in the store's database revokes it" "revoked" "$(q -c "SELECT cosid_release('orders', $(cat "$dir/other_slot"))")"

# DROP EXTENSION: refused in the store's database while slots are leased; elsewhere the
# extension's tables are not the store and it goes.
out=$(q -v VERBOSITY=verbose -c "DROP EXTENSION cosid CASCADE" 2>&1 || true)
grep -E 'ERROR|HINT' <<<"$out" | sed 's/^/#   /'
check "DROP EXTENSION in the store's database while slots are leased: 55006" 1 "$(grep -c 'ERROR:  55006' <<<"$out")"
check "... and the store is still there" 1 "$(q -c "SELECT count(*) FROM pg_extension WHERE extname = 'cosid'")"
check "DROP EXTENSION in another database goes through" "0" \
    "$(qd app2 -c "SET client_min_messages = warning" -c "DROP EXTENSION cosid CASCADE" -c "SELECT count(*) FROM pg_extension WHERE extname = 'cosid'")"
q -c "SELECT cosid_release(namespace, slot) FROM (SELECT DISTINCT namespace, slot FROM cosid_pool() WHERE slot IS NOT NULL) p" >/dev/null
# (the revoked slot's next_floor is its ceiling: the drop waits until the store's clock passed it)
check_true "with every slot released and every window behind the store's clock, DROP EXTENSION goes through" \
    "$(wait_until 20 q -c "SET client_min_messages = warning" -c "DROP EXTENSION cosid CASCADE" -c "SELECT count(*) = 0 FROM pg_extension WHERE extname = 'cosid'")"
check "and a store made again serves ids" "t" \
    "$(q -c "CREATE EXTENSION cosid" >/dev/null; q -c "SET cosid.acquire_timeout = '10s'" -c "SELECT cosid_next() > 0" | tail -1)"
assert_store_verified "$dir" "$port" postgres "the store made again"
exit $FAIL

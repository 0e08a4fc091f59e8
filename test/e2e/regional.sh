#!/usr/bin/env bash
# Regional stores (issue 26): one namespace served by two lease stores, each granting only
# its own range of the namespace's slots: region A's store [0,512), region B's [512,1024).
# Two instances per region insert at once into tables of one logical set; then: zero
# duplicate ids across all four, every id's slot inside its own store's range, each
# instance's copy of the namespace holds the range it saw.  Then the refusals: another range
# of the namespace on the same store, and an instance of region A pointed at region B's
# store (it saw [0,512); B's store states [512,1024)), which takes no slot there.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/regional"
SA="$base/store_a"; SB="$base/store_b"; A1="$base/a1"; A2="$base/a2"; B1="$base/b1"; B2="$base/b2"
PSA=55610; PSB=55611; PA1=55612; PA2=55613; PB1=55614; PB2=55615
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT

node_up sa "$SA" "$PSA"; node_up sb "$SB" "$PSB"
qsa -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('orders', slot_range => '[0,512)')" >/dev/null
qsb -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('orders', slot_range => '[512,1024)')" >/dev/null
check "region A's store states its range" "[0,512)" "$(qsa -c "SELECT slot_range FROM cosid.namespace WHERE name = 'orders'")"

instance() {  # instance NAME DIR PORT STORE_DIR STORE_PORT
    node_up "$1" "$2" "$3" "cosid.store_dsn = 'host=$4 port=$5 dbname=postgres user=postgres'" "cosid.ttl = '4s'" \
        "cosid.namespace = 'orders'"
    node_sql "$1" -c "CREATE EXTENSION cosid" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), v int)" >/dev/null
}
instance a1 "$A1" "$PA1" "$SA" "$PSA"; instance a2 "$A2" "$PA2" "$SA" "$PSA"
instance b1 "$B1" "$PB1" "$SB" "$PSB"; instance b2 "$B2" "$PB2" "$SB" "$PSB"

echo "INSERT INTO t(v) SELECT g FROM generate_series(1, 20) g;" > "$base/ins.sql"; chmod a+r "$base/ins.sql"
# 2 persistent clients and 1 reconnecting each, paced (300 and 30 statements a second: flat
# out, the twelve took both cores from the other lanes)
for n in a1 a2 b1 b2; do
    as_pg pgbench -n -h "$(node_dir $n)" -p "$(node_port $n)" -c 2 -R 300 -T 5 -f "$base/ins.sql" postgres > "$(node_dir $n)/p.log" 2>&1 &
    as_pg pgbench -n -C -h "$(node_dir $n)" -p "$(node_port $n)" -c 1 -R 30 -T 5 -f "$base/ins.sql" postgres > "$(node_dir $n)/c.log" 2>&1 &
done
wait
check "four instances loaded without a failed transaction" 0 "$(cat "$base"/*/[pc].log | grep -c 'aborted' || true)"
grep -h 'ERROR' "$base"/*/[pc].log | sort | uniq -c | head -3 | sed 's/^/#   /' || true
rows=0
for n in a1 a2 b1 b2; do
    node_sql $n -c "SELECT id FROM t" > "$(node_dir $n).ids"
    rows=$(( rows + $(wc -l < "$(node_dir $n).ids") ))
done
echo "# $rows rows in the four tables"
check_true "every instance inserted" "$(for f in "$A1" "$A2" "$B1" "$B2"; do [ -s "$f.ids" ] || echo no; done | grep -q no && echo f || echo t)"
check "zero duplicate ids across the two regions" 0 "$(sort "$base"/*.ids | uniq -d | wc -l)"
outside() {  # outside NAME LO HI: ids of the instance whose slot lies outside [LO, HI)
    node_sql "$1" -c "SELECT count(*) FROM t, cosid_parse(t.id, 'orders') p WHERE p.slot < $2 OR p.slot >= $3"
}
check "region A's ids all on slots in [0,512)" "0 0" "$(outside a1 0 512) $(outside a2 0 512)"
check "region B's ids all on slots in [512,1024)" "0 0" "$(outside b1 512 1024) $(outside b2 512 1024)"
echo "# slots: A1 $(qa1 -c "SELECT string_agg(DISTINCT (cosid_parse(id, 'orders')).slot::text, ',') FROM t")," \
     "B1 $(qb1 -c "SELECT string_agg(DISTINCT (cosid_parse(id, 'orders')).slot::text, ',') FROM t")"
check "each instance's copy of the namespace holds its store's range" "[0,512) [0,512) [512,1024) [512,1024)" \
    "$(for n in a1 a2 b1 b2; do node_sql $n -c "SELECT slot_range FROM cosid.namespace WHERE name = 'orders'"; done | xargs)"

# One namespace has one range per store: a second, overlapping range on region A's store.
over=$(qsa -v VERBOSITY=verbose -c "SELECT cosid_namespace_create('orders', slot_range => '[256,768)')" 2>&1 || true)
echo "$over" | grep -E 'ERROR|DETAIL|HINT' | sed 's/^/#   /'
check "an overlapping range on the same store is refused (42710)" 1 "$(grep -c 'ERROR:  42710' <<<"$over")"
check "the store's range is unchanged" "[0,512)" "$(qsa -c "SELECT slot_range FROM cosid.namespace WHERE name = 'orders'")"

# An instance of region A pointed at region B's store: its keeper saw [0,512) and refuses
# [512,1024), and hands the slot it was granted back at once.
key_a2=$(qa2 -c "SELECT owner_key FROM cosid_stats()")
node_stop a2
echo "cosid.store_dsn = 'host=$SB port=$PSB dbname=postgres user=postgres'" >> "$A2/data/postgresql.conf"
node_start a2
moved=$(qa2 -v VERBOSITY=verbose -c "SET cosid.acquire_timeout = '3s'" -c "SELECT cosid_next('orders')" 2>&1 || true)
echo "$moved" | grep -E 'ERROR|DETAIL|HINT' | sed 's/^/#   /'
check "an instance whose store states another range is refused (ZC008)" 1 "$(grep -c 'ERROR:  ZC008' <<<"$moved")"
check "the error names both ranges" 1 "$(grep -c 'grants slots \[512,1024) of namespace "orders"; this instance had \[0,512)' <<<"$moved")"
check "the hint says how to move it on purpose" 1 "$(grep -c "HINT: .*SELECT cosid._namespace_range_forget('orders')" <<<"$moved")"
check "it holds no slot of region B's store" 0 "$(qsb -c "
    SELECT count(*) FROM cosid.lease WHERE namespace = 'orders' AND owner_key = '$key_a2'")"
# moved on purpose: it forgets the range it saw, and takes a slot of region B's range
qa2 -c "SELECT cosid._namespace_range_forget('orders')" >/dev/null
check "after forgetting, the moved instance issues on region B's slots" t \
    "$(qa2 -c "SELECT (cosid_parse(cosid_next('orders'), 'orders')).slot >= 512")"
check "region B's instances go on" 100 "$(qb1 -c "SELECT count(cosid_next()) FROM generate_series(1, 100)")"
assert_store_verified "$SA" "$PSA" postgres "region A's store"
assert_store_verified "$SB" "$PSB" postgres "region B's store"
exit $FAIL

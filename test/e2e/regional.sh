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
trap 'kill $(jobs -p) 2>/dev/null || true
      for d in "$A1" "$A2" "$B1" "$B2" "$SA" "$SB"; do stop_server "$d" immediate; done' EXIT
q() { local d=$1 p=$2; shift 2; psql_at "$d" "$p" postgres -At "$@"; }

start_server "$SA" "$PSA"; start_server "$SB" "$PSB"
q "$SA" "$PSA" -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('orders', slot_range => '[0,512)')" >/dev/null
q "$SB" "$PSB" -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('orders', slot_range => '[512,1024)')" >/dev/null
check "region A's store states its range" "[0,512)" "$(q "$SA" "$PSA" -c "SELECT slot_range FROM cosid.namespace WHERE name = 'orders'")"

instance() {  # instance DIR PORT STORE_DIR STORE_PORT
    start_server "$1" "$2" "cosid.store_dsn = 'host=$3 port=$4 dbname=postgres user=postgres'" "cosid.ttl = '4s'" \
        "cosid.namespace = 'orders'"
    q "$1" "$2" -c "CREATE EXTENSION cosid" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), v int)" >/dev/null
}
instance "$A1" "$PA1" "$SA" "$PSA"; instance "$A2" "$PA2" "$SA" "$PSA"
instance "$B1" "$PB1" "$SB" "$PSB"; instance "$B2" "$PB2" "$SB" "$PSB"

echo "INSERT INTO t(v) SELECT g FROM generate_series(1, 20) g;" > "$base/ins.sql"; chmod a+r "$base/ins.sql"
for s in "$A1:$PA1" "$A2:$PA2" "$B1:$PB1" "$B2:$PB2"; do  # 2 persistent clients and 1 reconnecting each
    as_pg pgbench -n -h "${s%:*}" -p "${s#*:}" -c 2 -T 5 -f "$base/ins.sql" postgres > "${s%:*}/p.log" 2>&1 &
    as_pg pgbench -n -C -h "${s%:*}" -p "${s#*:}" -c 1 -T 5 -f "$base/ins.sql" postgres > "${s%:*}/c.log" 2>&1 &
done
wait
check "four instances loaded without a failed transaction" 0 "$(cat "$base"/*/[pc].log | grep -c 'aborted' || true)"
grep -h 'ERROR' "$base"/*/[pc].log | sort | uniq -c | head -3 | sed 's/^/#   /' || true
rows=0
for s in "$A1:$PA1" "$A2:$PA2" "$B1:$PB1" "$B2:$PB2"; do
    q "${s%:*}" "${s#*:}" -c "SELECT id FROM t" > "${s%:*}.ids"
    rows=$(( rows + $(wc -l < "${s%:*}.ids") ))
done
echo "# $rows rows in the four tables"
check_true "every instance inserted" "$(for f in "$A1" "$A2" "$B1" "$B2"; do [ -s "$f.ids" ] || echo no; done | grep -q no && echo f || echo t)"
check "zero duplicate ids across the two regions" 0 "$(sort "$base"/*.ids | uniq -d | wc -l)"
outside() {  # outside DIR PORT LO HI: ids of the instance whose slot lies outside [LO, HI)
    q "$1" "$2" -c "SELECT count(*) FROM t, cosid_parse(t.id, 'orders') p WHERE p.slot < $3 OR p.slot >= $4"
}
check "region A's ids all on slots in [0,512)" "0 0" "$(outside "$A1" "$PA1" 0 512) $(outside "$A2" "$PA2" 0 512)"
check "region B's ids all on slots in [512,1024)" "0 0" "$(outside "$B1" "$PB1" 512 1024) $(outside "$B2" "$PB2" 512 1024)"
echo "# slots: A1 $(q "$A1" "$PA1" -c "SELECT string_agg(DISTINCT (cosid_parse(id, 'orders')).slot::text, ',') FROM t")," \
     "B1 $(q "$B1" "$PB1" -c "SELECT string_agg(DISTINCT (cosid_parse(id, 'orders')).slot::text, ',') FROM t")"
check "each instance's copy of the namespace holds its store's range" "[0,512) [0,512) [512,1024) [512,1024)" \
    "$(for s in "$A1:$PA1" "$A2:$PA2" "$B1:$PB1" "$B2:$PB2"; do q "${s%:*}" "${s#*:}" -c "SELECT slot_range FROM cosid.namespace WHERE name = 'orders'"; done | xargs)"

# One namespace has one range per store: a second, overlapping range on region A's store.
over=$(q "$SA" "$PSA" -v VERBOSITY=verbose -c "SELECT cosid_namespace_create('orders', slot_range => '[256,768)')" 2>&1 || true)
echo "$over" | grep -E 'ERROR|DETAIL|HINT' | sed 's/^/#   /'
check "an overlapping range on the same store is refused (42710)" 1 "$(grep -c 'ERROR:  42710' <<<"$over")"
check "the store's range is unchanged" "[0,512)" "$(q "$SA" "$PSA" -c "SELECT slot_range FROM cosid.namespace WHERE name = 'orders'")"

# An instance of region A pointed at region B's store: its keeper saw [0,512) and refuses
# [512,1024), and hands the slot it was granted back at once.
key_a2=$(q "$A2" "$PA2" -c "SELECT owner_key FROM cosid_stats()")
stop_server "$A2"
echo "cosid.store_dsn = 'host=$SB port=$PSB dbname=postgres user=postgres'" >> "$A2/data/postgresql.conf"
as_pg "$PG_BIN/pg_ctl" -D "$A2/data" -l "$A2/server.log" -w start >/dev/null
moved=$(q "$A2" "$PA2" -v VERBOSITY=verbose -c "SET cosid.acquire_timeout = '3s'" -c "SELECT cosid_next('orders')" 2>&1 || true)
echo "$moved" | grep -E 'ERROR|DETAIL|HINT' | sed 's/^/#   /'
check "an instance whose store states another range is refused (ZC008)" 1 "$(grep -c 'ERROR:  ZC008' <<<"$moved")"
check "the error names both ranges" 1 "$(grep -c 'grants slots \[512,1024) of namespace "orders"; this instance had \[0,512)' <<<"$moved")"
check "the hint says how to move it on purpose" 1 "$(grep -c "HINT: .*SELECT cosid._namespace_range_forget('orders')" <<<"$moved")"
check "it holds no slot of region B's store" 0 "$(q "$SB" "$PSB" -c "
    SELECT count(*) FROM cosid.lease WHERE namespace = 'orders' AND owner_key = '$key_a2'")"
# moved on purpose: it forgets the range it saw, and takes a slot of region B's range
q "$A2" "$PA2" -c "SELECT cosid._namespace_range_forget('orders')" >/dev/null
check "after forgetting, the moved instance issues on region B's slots" t \
    "$(q "$A2" "$PA2" -c "SELECT (cosid_parse(cosid_next('orders'), 'orders')).slot >= 512")"
check "region B's instances go on" 100 "$(q "$B1" "$PB1" -c "SELECT count(cosid_next()) FROM generate_series(1, 100)")"
assert_store_verified "$SA" "$PSA" postgres "region A's store"
assert_store_verified "$SB" "$PSB" postgres "region B's store"
exit $FAIL

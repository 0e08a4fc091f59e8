#!/usr/bin/env bash
# Several servers, one store: servers A and B keep their leases in server S
# (cosid.store_dsn) and insert concurrently, with connection churn.  Then: zero duplicate
# ids across both servers, each server's ids only on slots the store gave its owner key,
# and the store's view of both owners.  Then A is killed (-9) and restarted while B goes on.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/shared_store"
S="$base/store"; A="$base/a"; B="$base/b"
PS=55444; PA=55445; PB=55446
trap 'kill $(jobs -p) 2>/dev/null || true; for d in "$A" "$B" "$S"; do stop_server "$d" immediate; done' EXIT
qs() { psql_at "$S" "$PS" postgres -At "$@"; }
qa() { psql_at "$A" "$PA" postgres -At "$@"; }
qb() { psql_at "$B" "$PB" postgres -At "$@"; }

start_server "$S" "$PS"
qs -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('shared', slot_bits => 4, tolerance => '300 ms')" >/dev/null
dsn="host=$S port=$PS dbname=postgres user=postgres"
for s in A B; do
    d=${!s}; p=$([ $s = A ] && echo $PA || echo $PB)
    # A's leases outlive its crash restart by far (a restart under load on 2 cores can take
    # longer than a 2 s lease), so its new incarnation is sure to meet them still live.
    ttl=$([ $s = A ] && echo 12s || echo 2s)
    start_server "$d" "$p" "cosid.store_dsn = '$dsn'" "cosid.ttl = '$ttl'" "cosid.namespace = 'shared'"
    psql_at "$d" "$p" postgres -q -c "CREATE EXTENSION cosid" \
        -c "SELECT cosid_namespace_create('shared', slot_bits => 4, tolerance => '300 ms')" \
        -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), v int)" >/dev/null
done
unknown=$(qa -v VERBOSITY=verbose -c "SET cosid.acquire_timeout = '3s'" -c "SELECT cosid_next('nope')" 2>&1 || true)
echo "$unknown" | sed 's/^/#   /'
check "a namespace unknown to the store is refused by it" 1 "$(grep -c 'ERROR:  42704' <<<"$unknown")"

echo "INSERT INTO t(v) SELECT g FROM generate_series(1, 20) g;" > "$base/ins.sql"; chmod a+r "$base/ins.sql"
load() {  # load DIR PORT SECONDS: 2 persistent clients and 2 reconnecting ones
    as_pg pgbench -n -h "$1" -p "$2" -c 2 -T "$3" -f "$base/ins.sql" postgres > "$1/p.log" 2>&1 &
    as_pg pgbench -n -C -h "$1" -p "$2" -c 2 -T "$3" -f "$base/ins.sql" postgres > "$1/c.log" 2>&1 &
}
load "$A" "$PA" 6; load "$B" "$PB" 6; wait
ka=$(qa -c "SELECT owner_key FROM cosid_stats()"); kb=$(qb -c "SELECT owner_key FROM cosid_stats()")
echo "# A ($ka) inserted $(qa -c "SELECT count(*) FROM t") rows, B ($kb) $(qb -c "SELECT count(*) FROM t")"
check "both servers loaded without a failed transaction" 0 "$(cat "$A"/*.log "$B"/*.log | grep -c 'aborted' || true)"
qs -c "SELECT slot, owner_key, fence, state FROM cosid_leases('shared') WHERE state <> 'free'" | sed 's/^/#   store: /'

dump_ids() { psql_at "$1" "$2" postgres -At -c "SELECT id FROM t" > "$3"; }
dump_ids "$A" "$PA" "$base/a.ids"; dump_ids "$B" "$PB" "$base/b.ids"
check "zero duplicate ids across the two servers" 0 "$(sort "$base/a.ids" "$base/b.ids" | uniq -d | wc -l)"
slots_a=$(qa -c "SELECT string_agg(DISTINCT (cosid_parse(id, 'shared')).slot::text, ',') FROM t")
slots_b=$(qb -c "SELECT string_agg(DISTINCT (cosid_parse(id, 'shared')).slot::text, ',') FROM t")
echo "# slots used: A {$slots_a}, B {$slots_b}"
check "no slot used by both servers" "" "$(comm -12 <(tr ',' '\n' <<<"$slots_a" | sort) <(tr ',' '\n' <<<"$slots_b" | sort))"
check "the store lists A's slots under A's owner key" 0 "$(qs -c "
    SELECT count(*) FROM unnest('{$slots_a}'::int[]) s
    WHERE NOT EXISTS (SELECT 1 FROM cosid.lease l WHERE l.namespace = 'shared' AND l.slot = s
                        AND coalesce(l.owner_key, l.previous_owner_key) = '$ka')")"

echo "# A crashes (immediate stop: nothing released) and restarts while B keeps inserting"
load "$B" "$PB" 5
sleep 1
as_pg "$PG_BIN/pg_ctl" -D "$A/data" -m immediate -w stop >/dev/null
as_pg "$PG_BIN/pg_ctl" -D "$A/data" -l "$A/server.log" -w start >/dev/null
load "$A" "$PA" 3; wait
check_dup=$(qa -c "SELECT duplicate_owner_keys FROM cosid_stats()")
check_true "A's new incarnation saw its old, still live leases and left them alone" "$([ "$check_dup" -gt 0 ] && echo t)"
dump_ids "$A" "$PA" "$base/a.ids"; dump_ids "$B" "$PB" "$base/b.ids"
check "still zero duplicate ids across the two servers" 0 "$(sort "$base/a.ids" "$base/b.ids" | uniq -d | wc -l)"
echo "# rows: A $(wc -l < "$base/a.ids"), B $(wc -l < "$base/b.ids")"
exit $FAIL

#!/usr/bin/env bash
# Several servers, one store: servers A and B keep their leases in server S
# (cosid.store_dsn) and insert concurrently, with connection churn.  Then: zero duplicate
# ids across both servers, each server's ids only on slots the store gave its owner key,
# and the store's view of both owners.  Then A is killed (-9) and restarted while B goes on;
# then the store freezes (no answer at all) past B's windows, B is shut down and started
# again, and both go on once the store answers; then the store restarts under load.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/shared_store"
S="$base/store"; A="$base/a"; B="$base/b"
PS=55444; PA=55445; PB=55446
frozen=""
trap '[ -n "$frozen" ] && kill -CONT $frozen; kill $(jobs -p) 2>/dev/null || true
      node_stop_all immediate' EXIT

node_up s "$S" "$PS"
qs -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('shared', slot_bits => 5, tolerance => '300 ms')" \
   -c "CREATE ROLE keeper_b LOGIN IN ROLE cosid_keeper" >/dev/null
# A's keeper logs in to the store as a superuser, B's as a plain member of cosid_keeper.
for s in A B; do
    dsn="host=$S port=$PS dbname=postgres user=$([ $s = A ] && echo postgres || echo keeper_b)"
    d=${!s}; p=$([ $s = A ] && echo $PA || echo $PB)
    # A's leases outlive its crash restart by far (a restart under load on 2 cores can take
    # longer than a 2 s lease), so its new incarnation is sure to meet them still live.
    ttl=$([ $s = A ] && echo 12s || echo 2s)
    node_up "${s,,}" "$d" "$p" "cosid.store_dsn = '$dsn'" "cosid.ttl = '$ttl'" "cosid.namespace = 'shared'"
    node_sql "${s,,}" -c "CREATE EXTENSION cosid" \
        -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), v int)" >/dev/null
done
# A defines the namespace itself, with the store's values; B leaves it to its keeper.
qa -c "SELECT cosid_namespace_create('shared', slot_bits => 5, tolerance => '300 ms')" >/dev/null
denied=$(qs -U keeper_b -v VERBOSITY=sqlstate -c "UPDATE cosid.lease SET fence = 0" 2>&1 || true)
check "cosid_keeper may not write the lease table directly" 1 "$(grep -c 'ERROR:  42501' <<<"$denied")"
check "B has no local definition of 'shared' before its first id" 0 "$(qb -c "SELECT count(*) FROM cosid.namespace WHERE name = 'shared'")"

# A local definition with another layout than the store's is refused, and takes no slot.
qs -c "SELECT cosid_namespace_create('other', slot_bits => 4)" >/dev/null
qa -c "SELECT cosid_namespace_create('other', slot_bits => 5)" >/dev/null
mismatch=$(qa -v VERBOSITY=verbose -c "SET cosid.acquire_timeout = '3s'" -c "SELECT cosid_next('other')" 2>&1 || true)
echo "$mismatch" | grep -E 'ERROR|DETAIL|HINT' | sed 's/^/#   /'
check "a local layout unlike the store's is refused (42P17)" 1 "$(grep -c 'ERROR:  42P17' <<<"$mismatch")"
check "the error says both layouts" 1 "$(grep -c 'DETAIL:  Layout (timestamp/slot/sequence bits) here 46/5/12 bits, epoch 1704067200000 ms, unit ms; in the lease store 47/4/12 bits' <<<"$mismatch")"
check "no slot of 'other' stays taken in the store" 0 "$(qs -c "SELECT count(*) FROM cosid_leases('other') WHERE state = 'held'")"
check "B copies 'other' from the store on its first id, and parses with the store's layout" "4 12" \
    "$(qb -c "SELECT cosid_next('other') > 0" >/dev/null; qb -c "SELECT slot_bits || ' ' || sequence_bits FROM cosid.namespace WHERE name = 'other'")"
unknown=$(qa -v VERBOSITY=verbose -c "SET cosid.acquire_timeout = '3s'" -c "SELECT cosid_next('nope')" 2>&1 || true)
echo "$unknown" | sed 's/^/#   /'
check "a namespace unknown to the store is refused by it" 1 "$(grep -c 'ERROR:  42704' <<<"$unknown")"

echo "INSERT INTO t(v) SELECT g FROM generate_series(1, 20) g;" > "$base/ins.sql"; chmod a+r "$base/ins.sql"
client_errors() {  # what made pgbench clients abort, if any
    grep -h 'ERROR\|aborted' "$A"/[pc].log "$B"/[pc].log | sort | uniq -c | head -4 | sed 's/^/#   /' || true
}
# load DIR PORT SECONDS: 2 persistent clients and 2 reconnecting ones, paced (pgbench --rate:
# 300 and 50 statements of 20 ids a second in all; flat out they took both cores from the
# other lanes, and the checks read slots and duplicates, which a few thousand ids show)
load() {
    as_pg pgbench -n -h "$1" -p "$2" -c 2 -R 300 -T "$3" -f "$base/ins.sql" postgres > "$1/p.log" 2>&1 &
    as_pg pgbench -n -C -h "$1" -p "$2" -c 2 -R 50 -T "$3" -f "$base/ins.sql" postgres > "$1/c.log" 2>&1 &
}
load "$A" "$PA" 6; load "$B" "$PB" 6; wait
ka=$(qa -c "SELECT owner_key FROM cosid_stats()"); kb=$(qb -c "SELECT owner_key FROM cosid_stats()")
echo "# A ($ka) inserted $(qa -c "SELECT count(*) FROM t") rows, B ($kb) $(qb -c "SELECT count(*) FROM t")"
check "both servers loaded without a failed transaction" 0 "$(cat "$A"/[pc].log "$B"/[pc].log | grep -c 'aborted' || true)"
client_errors
qs -c "SELECT slot, owner_key, fence, state FROM cosid_leases('shared') WHERE state <> 'free'" | sed 's/^/#   store: /'

dump_ids() { node_sql "$1" -c "SELECT id FROM t" > "$2"; }  # dump_ids NODE FILE
dump_ids a "$base/a.ids"; dump_ids b "$base/b.ids"
check "zero duplicate ids across the two servers" 0 "$(sort "$base/a.ids" "$base/b.ids" | uniq -d | wc -l)"
slots_a=$(qa -c "SELECT string_agg(DISTINCT (cosid_parse(id, 'shared')).slot::text, ',') FROM t")
slots_b=$(qb -c "SELECT string_agg(DISTINCT (cosid_parse(id, 'shared')).slot::text, ',') FROM t")
echo "# slots used: A {$slots_a}, B {$slots_b}"
check "B's keeper copied 'shared' from the store: same layout as A's" \
    "$(qa -c "SELECT (timestamp_bits, slot_bits, sequence_bits, epoch_ms, unit) FROM cosid.namespace WHERE name = 'shared'")" \
    "$(qb -c "SELECT (timestamp_bits, slot_bits, sequence_bits, epoch_ms, unit) FROM cosid.namespace WHERE name = 'shared'")"
check "no slot used by both servers" "" "$(comm -12 <(tr ',' '\n' <<<"$slots_a" | sort) <(tr ',' '\n' <<<"$slots_b" | sort))"
check_true "B's keeper works on the store as keeper_b (member of cosid_keeper, no superuser)" \
    "$(qs -c "SELECT count(*) > 0 FROM pg_stat_activity WHERE usename = 'keeper_b' AND application_name = 'cosid keeper'")"
check "the store lists A's slots under A's owner key" 0 "$(qs -c "
    SELECT count(*) FROM unnest('{$slots_a}'::int[]) s
    WHERE NOT EXISTS (SELECT 1 FROM cosid.lease l WHERE l.namespace = 'shared' AND l.slot = s
                        AND coalesce(l.owner_key, l.previous_owner_key) = '$ka')")"

echo "# A crashes (immediate stop: nothing released) and restarts while B keeps inserting"
load "$B" "$PB" 5
sleep 1
node_stop a immediate
node_start a
load "$A" "$PA" 3; wait
check_dup=$(qa -c "SELECT duplicate_owner_keys FROM cosid_stats()")
check_true "A's new incarnation saw its old, still live leases and left them alone" "$([ "$check_dup" -gt 0 ] && echo t)"

echo "# The store freezes (SIGSTOP: no answer and no error, as in a network partition) for 6 s"
fails0=$(qb -c "SELECT renewal_failures FROM cosid_stats()")
# A session on B opened and bound to B's lease before the freeze: what is left of B's window
# then (2 s + 300 ms, less up to ttl/3) goes to the ids, not to a loaded machine's psql start.
qb -c "CHECKPOINT" >/dev/null   # B's shutdown below then writes little
rm -f "$base/b.in"; mkfifo "$base/b.in"
qb < "$base/b.in" > "$base/b.out" 2>&1 &
bsession=$!
exec 7> "$base/b.in"
echo "SELECT 'bound ' || (cosid_next() > 0);" >&7
wait_for 60 "B's session on its lease" bash -c "grep -q '^bound true' '$base/b.out' && echo t" >/dev/null
pm=$(node_pid s)
frozen="$pm $(pgrep -P "$pm" | tr '\n' ' ')"
kill -STOP $frozen; t_freeze=$(now_ms)
echo "SELECT 'issued ' || count(cosid_next()) FROM generate_series(1, 1000);" >&7
exec 7>&-
wait $bsession || true
check "B's generators go on inside their windows while the store is frozen" 1000 "$(sed -n 's/^issued //p' "$base/b.out")"
# past every window of B (ttl 2 s + tolerance 300 ms), as B's own clock says
check_true "B's windows and leases are past (+ tolerance)" "$(wait_for 30 "B's windows to pass" qb -c "
    SELECT coalesce(bool_and(greatest((extract(epoch FROM expires_at) * 1000)::bigint, ceiling) + 300
                             < (extract(epoch FROM clock_timestamp()) * 1000)::bigint), true)
    FROM cosid_pool() WHERE namespace = 'shared'")"
past=$(qb -v VERBOSITY=verbose -c "SET cosid.acquire_timeout = '1s'" -c "SELECT cosid_next()" 2>&1 || true)
grep -E 'ERROR|DETAIL' <<<"$past" | sed 's/^/#   /'
check "past its windows, a caller on B gets a clear error (ZC002 or ZC006)" 1 "$(grep -cE 'ERROR:  ZC00[26]' <<<"$past")"
check_true "B's keeper is not stuck in a read from the frozen store: its calls time out and count" \
    "$(qb -c "SELECT renewal_failures > $fails0 FROM cosid_stats()")"
t0=$(now_ms)
PGCTLTIMEOUT=30 node_stop b fast  # (pg_ctl's wait at most 30 s)
stop_ms=$(( $(now_ms) - t0 ))
echo "# B's fast shutdown with the store frozen took $stop_ms ms"
check_true "B shuts down while the store is frozen, within 10 s" "$([ "$stop_ms" -le 10000 ] && echo t)"
check_true "the frozen store is still frozen (the checks above ran against a store that never answered)" \
    "$(grep -q '^State:.*T' /proc/"$pm"/status && echo t)"
kill -CONT $frozen; frozen=""; t_thaw=$(now_ms)
echo "# the store was frozen for $(( t_thaw - t_freeze )) ms"
echo "# slots of 'shared' held in the store when B starts again: $(qs -c "SELECT count(*) FROM cosid_leases('shared') WHERE state = 'held'") of 32"
node_start b
again=$(qb -c "SET cosid.acquire_timeout = '10s'" -c "SELECT cosid_next() > 0" 2>&1 || true)
echo "# B issues again $(( $(now_ms) - t_thaw )) ms after the store thawed"
check "B issues again once the store answers" "t" "$(tail -1 <<<"$again")"
load "$A" "$PA" 2; load "$B" "$PB" 2; wait
check "both servers loaded after the freeze without a failed transaction" 0 "$(cat "$A"/[pc].log "$B"/[pc].log | grep -c 'aborted' || true)"
client_errors

echo "# The store restarts (its connections break) while both servers insert"
load "$A" "$PA" 5; load "$B" "$PB" 5
sleep 1.5
node_restart s fast; t_restart=$(now_ms)
wait
echo "# pgbench after the store restart: $(cat "$A"/[pc].log "$B"/[pc].log | grep -c 'aborted' || true) client(s) aborted"
client_errors
check "A issues after the store restarted" "t" "$(qa -c "SET cosid.acquire_timeout = '10s'" -c "SELECT cosid_next() > 0" | tail -1)"
check "B issues after the store restarted" "t" "$(qb -c "SET cosid.acquire_timeout = '10s'" -c "SELECT cosid_next() > 0" | tail -1)"
check_true "B's keeper renewed through a new connection" "$(qs -c "
    SELECT count(*) > 0 FROM pg_stat_activity WHERE usename = 'keeper_b' AND application_name = 'cosid keeper'
       AND backend_start > to_timestamp($t_restart / 1000.0) - interval '2 s'")"
dump_ids a "$base/a.ids"; dump_ids b "$base/b.ids"
check "still zero duplicate ids across the two servers" 0 "$(sort "$base/a.ids" "$base/b.ids" | uniq -d | wc -l)"
echo "# rows: A $(wc -l < "$base/a.ids"), B $(wc -l < "$base/b.ids")"
# The store names the issuer of an id: B's keeper role for a sample of B's ids, A's for A's.
for s in a b; do
    role=$([ $s = a ] && echo postgres || echo keeper_b)
    sample=$(shuf -n 50 "$base/$s.ids" | paste -sd, -)
    check "the store names $role as the one issuer of 50 of ${s^^}'s ids (cosid_issuer)" 0 "$(qs -c "
        SELECT count(*) FROM unnest('{$sample}'::bigint[]) x(id)
        WHERE (SELECT count(*) FILTER (WHERE i.owner_role = '$role') || '/' || count(*)
                 FROM cosid_issuer(x.id, 'shared') i) <> '1/1'")"
done
assert_store_verified "$S" "$PS" postgres
exit $FAIL

#!/usr/bin/env bash
# Review 26: a slot outside a regional store's range, granted in a race with the range being
# set.  cosid.acquire reads the namespace row without a lock (cosid._namespace_row), and
# cosid_namespace_create(..., slot_range) / namespace_range_guard look for granted slots
# (fence > 0) without waiting for an acquire still in flight.  An acquire that read "no range"
# and commits after the range was set leaves a lease outside the range, renewed forever; the
# other region's store grants the same slot: duplicate ids.
# Two stores: SA (region A, 'default' made by CREATE EXTENSION, range set later to [512,1024))
# and SB (region B, [0,512)); instance A on SA, instance B on SB.  A's acquire is slowed (an
# AFTER UPDATE trigger on SA's lease table, as a commit waiting for a synchronous standby
# would be) while the operator sets SA's range.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/regional_range_race"
SA="$base/sa"; SB="$base/sb"; A="$base/a"; B="$base/b"
PSA=55496; PSB=55497; PA=55498; PB=55499
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT

node_up sa "$SA" "$PSA"; node_up sb "$SB" "$PSB"
qsa -c "CREATE EXTENSION cosid" >/dev/null
qsa <<'SQL' >/dev/null
CREATE FUNCTION public.slow_grant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.incarnation IS NULL AND NEW.incarnation IS NOT NULL THEN PERFORM pg_sleep(2); END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER slow_grant AFTER UPDATE ON cosid.lease FOR EACH ROW EXECUTE FUNCTION public.slow_grant();
SQL
qsb -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('default', slot_range => '[0,512)')" >/dev/null
node_up a "$A" "$PA" "cosid.store_dsn = 'host=$SA port=$PSA dbname=postgres'" "cosid.ttl = '30s'"
node_up b "$B" "$PB" "cosid.store_dsn = 'host=$SB port=$PSB dbname=postgres'" "cosid.ttl = '10s'"
for q in qa qb; do $q -c "CREATE EXTENSION cosid" -c "CREATE TABLE ids (id bigint)" >/dev/null; done

qa -c "SELECT cosid_next()" >/dev/null &   # A's first acquire, in flight for 2 s
sleep 1
set_out=$(qsa -c "SELECT cosid_namespace_create('default', slot_range => '[512,1024)')" 2>&1) && set_rc=0 || set_rc=$?
echo "range set on SA while A's acquire was in flight: rc=$set_rc ${set_out}"
wait
echo "SA: range $(qsa -c "SELECT slot_range FROM cosid.namespace WHERE name = 'default'"), held slots: $(qsa -c "SELECT string_agg(slot::text, ',') FROM cosid.lease WHERE incarnation IS NOT NULL")"
echo "A issues on slot $(qa -c "SELECT cosid_slot(cosid_next())"), B on slot $(qb -c "SELECT cosid_slot(cosid_next())")"
# Both regions insert at the same instants (3 bursts of 20000 ids, one per second).
t0=$(( $(date +%s) + 2 ))
load() { for k in 0 1 2; do
    $1 -c "SELECT pg_sleep_until(to_timestamp($t0 + $k))" -c "INSERT INTO ids SELECT cosid_next() FROM generate_series(1, 20000)"; done >/dev/null; }
load qa & load qb & wait
qa -c "COPY ids TO STDOUT" > "$base/a.ids"; qb -c "COPY ids TO STDOUT" > "$base/b.ids"
dups=$(sort "$base/a.ids" "$base/b.ids" | uniq -d | wc -l)
echo "ids: A $(wc -l < "$base/a.ids"), B $(wc -l < "$base/b.ids"), in both: $dups (e.g. $(sort "$base/a.ids" "$base/b.ids" | uniq -d | head -2 | tr '\n' ' '))"
check "no slot of SA granted outside its range (or the range refused)" 0 "$(qsa -c "SELECT count(*) FROM cosid.lease l JOIN cosid.namespace n ON n.name = l.namespace WHERE l.incarnation IS NOT NULL AND NOT l.slot <@ n.slot_range")"
if [ "$set_rc" = 0 ]; then check "duplicate ids across the regions" 0 "$dups"; else echo "ok - range refused: SA is no regional store (told: rc=$set_rc)"; fi
assert_store_verified "$SA" "$PSA" postgres "SA"
assert_store_verified "$SB" "$PSB" postgres "SB"
exit $FAIL

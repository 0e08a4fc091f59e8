#!/usr/bin/env bash
# A namespace's floor set far ahead must not stop it for good.  Instance A keeps its leases in
# store S through a keeper login (keeper_a, a member of cosid_keeper only).  (1) keeper_a cannot
# raise a floor to 2093 (42501), only up to max_ttl + 2 x max_tolerance ahead of S's clock.
# (2) A floor an administrator set that far: A's next acquire fails at once (ZC006) naming the
# floor's date, and no lease row of S takes it.  (3) The administrator lowers it
# (cosid_namespace_lower_floor) and A issues again.  (4) A slot whose next floor lies years
# ahead (left from before): the ZC004 that ends the wait names the real distance and the date,
# not the capped wait.  cosid_adopt through keeper_a (ids 3 s ahead) still works.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/floor_bounds"
S="$base/store"; A="$base/a"; PS=55601; PA=55602
trap 'node_stop_all immediate' EXIT
FAR=3903033600000  # 2093-09-06 00:00:00 UTC

node_up s "$S" "$PS"
qs -c "CREATE EXTENSION cosid" -c "CREATE ROLE keeper_a LOGIN IN ROLE cosid_keeper" \
   -c "SELECT cosid_namespace_create('z', slot_bits => 1)" >/dev/null
node_up a "$A" "$PA" "cosid.store_dsn = 'host=$S port=$PS dbname=postgres user=keeper_a'" "cosid.ttl = '2s'" \
    "cosid.acquire_timeout = '1s'"
qa -c "CREATE EXTENSION cosid" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), phase text)" >/dev/null
check_true "A issues ids through S" "$(wait_until 20 qa -c "INSERT INTO t(phase) VALUES ('warm') RETURNING true")"
layout=$(qs -c "SELECT format('%s, %s, %s, %s, %L', slot_bits, sequence_bits, timestamp_bits, epoch_ms, unit)
                FROM cosid.namespace WHERE name = 'default'")

echo "# (1) a keeper login raises a floor to 2093"
out=$(qs -U keeper_a -v VERBOSITY=verbose \
        -c "SELECT cosid.raise_floor('default', $FAR, $layout)" 2>&1 || true)
echo "# $(head -1 <<<"$out" | cut -c1-150)"
check "refused (42501)" 42501 "$(sqlstate_of "$out")"
check_true "with DETAIL and HINT" "$(grep -q '^DETAIL:' <<<"$out" && grep -q '^HINT:' <<<"$out" && echo t || echo f)"
check_true "the floor stays where it was" "$(qs -c "SELECT not_before_ms < $FAR FROM cosid.namespace WHERE name = 'default'")"
check_true "keeper_a still raises within the bound (cosid_adopt's few seconds)" \
    "$(qs -U keeper_a -c "SELECT cosid.raise_floor('default', cosid.store_now() + 3000, $layout) > 0")"

check_true "cosid_adopt on A of ids 3 s ahead still raises through keeper_a" "$(qa -c "
    CREATE TABLE legacy (id bigint PRIMARY KEY);
    INSERT INTO legacy VALUES (cosid_min_id(clock_timestamp() + interval '3 s'));
    SELECT count(*) = 1 FROM cosid_adopt('legacy', 'id') WHERE largest_id IS NOT NULL")"
check_true "the store's floor is that id's time" \
    "$(qs -c "SELECT not_before_ms > cosid.store_now() - 1000 FROM cosid.namespace WHERE name = 'default'")"
check_true "new ids lie above it" "$(qa -c "INSERT INTO legacy VALUES (DEFAULT)" -c "SELECT count(*) = 2 AND min(id) < max(id) FROM legacy")"

echo "# (2) an administrator sets it that far; A's next acquire"
qs -c "SELECT cosid.raise_floor('default', $FAR, $layout)" >/dev/null
before=$(qs -c "SELECT string_agg(slot || ':' || fence || ':' || floor || ':' || next_floor, ',' ORDER BY slot)
                FROM cosid.lease WHERE namespace = 'default'")
# A's window ends (released by a session that issued in it): the next call acquires
check_true "A releases its lease" "$(qa -c "SELECT cosid_next() > 0" -c "SELECT cosid_release() = 1" | tail -1)"
t0=$(now_ms)
out=$(qa -v VERBOSITY=verbose -c "INSERT INTO t(phase) VALUES ('far')" 2>&1 || true)
took=$(( $(now_ms) - t0 ))
echo "# after ${took} ms: $(grep -E '^(ERROR|DETAIL)' <<<"$out" | cut -c1-200 | tr '\n' ' ')"
check "the acquire fails (ZC006)" ZC006 "$(sqlstate_of "$out")"
check_true "its DETAIL names the floor's date" "$(grep -E '^DETAIL:' <<<"$out" | grep -q '2093-09-06' && echo t || echo f)"
check_true "its HINT says how to lower it" "$(grep -E '^HINT:' <<<"$out" | grep -q 'cosid_namespace_lower_floor' && echo t || echo f)"
check_true "at once, not after a wait for the clock (${took} ms)" "$([ "$took" -lt 8000 ] && echo t || echo f)"
check "no lease row of S took the floor" 0 \
    "$(qs -c "SELECT count(*) FROM cosid.lease WHERE namespace = 'default' AND (floor >= $FAR OR next_floor >= $FAR)")"
check "no slot's fence, floor or next floor moved but by releases" "" "$(qs -c "
    WITH b AS (SELECT split_part(x, ':', 1)::int AS slot, split_part(x, ':', 3)::bigint AS floor
               FROM unnest(string_to_array('$before', ',')) x)
    SELECT string_agg(l.slot::text, ',') FROM cosid.lease l JOIN b USING (slot)
     WHERE l.namespace = 'default' AND l.floor <> b.floor")"

echo "# (3) the administrator lowers it"
# not below A's last window (its ceiling, a few seconds ahead): as far as the lease rows allow
check_true "cosid_namespace_lower_floor('default', ...) down to what the lease rows show" \
    "$(qs -c "SELECT cosid_namespace_lower_floor('default', greatest(now(), to_timestamp(lowest_ms / 1000.0))) < '2093-01-01'
              FROM cosid._floor_lowest('default')")"
check_true "A issues again" "$(wait_until 20 qa -c "INSERT INTO t(phase) VALUES ('lowered') RETURNING true")"
check "zero duplicate ids" 0 "$(qa -c "SELECT count(*) - count(DISTINCT id) FROM t")"

echo "# (4) both slots of 'z' have a next floor in 2093 (as an acquire before this version left them)"
qs -c "UPDATE cosid.lease SET next_floor = $FAR WHERE namespace = 'z'" >/dev/null
t0=$(now_ms)
out=$(qa -v VERBOSITY=verbose -c "SELECT cosid_next('z')" 2>&1 || true)
took=$(( $(now_ms) - t0 ))
echo "# after ${took} ms: $(grep -E '^(ERROR|DETAIL|HINT)' <<<"$out" | cut -c1-260 | tr '\n' ' ')"
check "ZC004" ZC004 "$(sqlstate_of "$out")"
check_true "its DETAIL says how far the floor really is (years) and when" \
    "$(grep -E '^DETAIL:' <<<"$out" | grep -q '2093-09-06' && grep -E '^DETAIL:' <<<"$out" | grep -qE '[0-9.]+ years ahead of this clock' && echo t || echo f)"
check_true "not the capped wait as the distance" "$(grep -qE '19000 ms ahead' <<<"$out" && echo f || echo t)"
check_true "its HINT says what to do" "$(grep -E '^HINT:' <<<"$out" | grep -q 'cosid_namespace_lower_floor' && echo t || echo f)"
check_true "A still answers" "$(qa -c "SELECT true")"
assert_store_verified "$S" "$PS" postgres "S, the store of A"
exit $FAIL

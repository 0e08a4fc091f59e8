#!/usr/bin/env bash
# Ids stay in order across the move from a lease the store's raise freed to its successor on
# ANOTHER slot, with the freed lease's ids borrowed ahead of the clock up to its ceiling, a
# namespace of seconds, and the store's clock 800 ms behind this server's (max_tolerance 1 s):
#   bash test/e2e/raised_other_slot_order.sh WORKDIR
# Namespace o: unit s, 2 sequence bits (2 ids a second a slot): a client issuing every 20 ms
# keeps the lease's word at its ceiling, ttl + tolerance ahead of the store's clock.  Right
# after the raise another owner takes the freed slot in the store, so the successor is granted
# on another slot, above the raised floor.  New connections issue beside the old one.
# (The ids table takes `done` after `id`: an INSERT evaluates its values in the table's column
# order, and an id that waited at a ceiling would otherwise look issued before it was.)
# Checks: no error; no id below one committed (50 ms margin) before its statement began; ids
# unique; every id inside a window the store granted this server on its slot; cosid_verify().
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/raised_other_slot_order"; PORT=${PORT:-28470}
node_up main "$DIR" "$PORT" "cosid.ttl = '6s'" "cosid.acquire_timeout = '30s'" "cosid.store_clock_offset = -800"
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_ttl => '6s', max_tolerance => '1s')" \
  -c "SELECT cosid_namespace_create('o', unit => 's', slot_bits => 4, sequence_bits => 2, total_bits => 40, tolerance => '1s')" \
  -c "CREATE TABLE observed (slot int, fence bigint, owner_key text, floor bigint, ceiling bigint)" >/dev/null
ids_table
q <<'SQL' >/dev/null
CREATE FUNCTION public.observe_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.incarnation IS NOT NULL THEN
        INSERT INTO public.observed VALUES (NEW.slot, NEW.fence, NEW.owner_key, NEW.floor, NEW.ceiling);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER observe_lease AFTER INSERT OR UPDATE ON cosid.lease FOR EACH ROW EXECUTE FUNCTION public.observe_lease();
ALTER TABLE cosid.lease ENABLE ALWAYS TRIGGER observe_lease;
SQL
id_client o
client=$ID_CLIENT
wait_for 20 "the old connection's first 30 ids" q -c "SELECT count(*) >= 30 FROM ids" >/dev/null
slot=$(q -c "SELECT slot FROM cosid_pool() WHERE namespace = 'o' AND state = 'active'")
echo "# before the raise: ids up to $(q -c "SELECT round(max(extract(epoch FROM p.ts)) - extract(epoch FROM clock_timestamp()), 1) FROM ids, cosid_parse(id, 'o') p") s ahead of the clock, on slot $slot"
echo "# raise at $(date -u +%H:%M:%S.%3N)"
# The raise (the fork's acknowledgement) and the other owner's acquire of the freed slot in one
# transaction: the keeper, which asks for a successor as soon as it finds its lease freed,
# must not take that slot first (on a loaded machine it did, and no other slot was needed).
q -c "SELECT cosid_store_follow_timeline(restored => true)" >/dev/null 2>&1
thief=$(q -c "BEGIN" -c "SELECT cosid_fork_acknowledge()" \
          -c "SELECT 'thief ' || slot FROM cosid.acquire('o', 'thief', gen_random_uuid(), 60000, $slot)" -c "COMMIT" |
        sed -n 's/^thief //p')
check_true "the other owner took the freed slot ($slot) in the raise's transaction" "$([ "$thief" = "$slot" ] && echo t || echo f)"
# (the freed lease, at its ceiling, ends as soon as the keeper finds it freed)
wait_for 20 "a successor on another slot" \
    q -c "SELECT count(*) > 0 FROM cosid_pool() WHERE namespace = 'o' AND state = 'active' AND slot NOT IN ($slot, $thief)" >/dev/null
echo "# the other owner took slot $thief; pool: $(q -c "SELECT string_agg(slot || ':' || state, ' ') FROM cosid_pool() WHERE namespace = 'o'")"
: > "$DIR/new.log"
new_ids_for o 6000
stop_id_clients "$client"; status=$CLIENT_STATUS
echo "# ids per slot: $(q -c "SELECT string_agg(s || ':' || c, ' ') FROM (SELECT p.slot s, count(*) c FROM ids, cosid_parse(id, 'o') p GROUP BY 1 ORDER BY 1) x")"
check "the successor was on another slot than the freed lease" t \
    "$(q -c "SELECT count(DISTINCT p.slot) >= 2 AND bool_or(p.slot <> $slot AND p.slot <> $thief) FROM ids, cosid_parse(id, 'o') p")"
check "no error (old connection, new connections)" "0 0 0" \
    "$status $(q -c "SELECT count(*) FROM ids WHERE err IS NOT NULL") $(grep -c ERROR "$DIR/new.log" || true)"
check "zero duplicate ids" 0 "$(q -c "SELECT count(id) - count(DISTINCT id) FROM ids")"
check_order_kept
check "every id inside a window the store granted this server on its slot" 0 "$(q -c "
    WITH w AS (SELECT slot, fence, min(floor) AS floor, max(ceiling) AS ceiling FROM observed
               WHERE owner_key <> 'thief' GROUP BY 1, 2)
    SELECT count(*) FROM ids, cosid_parse(ids.id, 'o') p WHERE ids.id IS NOT NULL AND NOT EXISTS (
        SELECT FROM w WHERE w.slot = p.slot AND (extract(epoch FROM p.ts) * 1000)::bigint > w.floor
                        AND (extract(epoch FROM p.ts) * 1000)::bigint <= w.ceiling)")"
q -c "SELECT slot, fence, owner_key, to_char(to_timestamp(min(floor) / 1000.0), 'HH24:MI:SS.MS'), to_char(to_timestamp(max(ceiling) / 1000.0), 'HH24:MI:SS.MS') FROM observed GROUP BY 1, 2, 3 ORDER BY min(floor)" | sed 's/^/#   window /'
assert_store_verified "$DIR" "$PORT" postgres "the store"
exit $FAIL

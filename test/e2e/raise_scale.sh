#!/usr/bin/env bash
# The raise after lost history costs the held leases, not the slots (the lazy raise,
# cosid._follow_timeline), on a store of many slot rows:
#   bash test/e2e/raise_scale.sh WORKDIR
# Three namespaces of 15 slot bits (98,304 slot rows, 99,328 with the default namespace: see
# RAISE_SCALE_NAMESPACES and RAISE_SCALE_BITS below) and a real keeper holding a lease in each,
# ttl 6 s (the keeper bounds each store call at 1 s).  The raise is provoked as a new timeline
# would (store_state's timeline set by hand, in the transaction of the call that follows it, as
# test/sql/failover.sql does), and its work is counted, not timed: the rows the raise's
# transaction updated (pg_stat_xact_user_tables) and the leases its log line says it freed.
# Checks: the raise updated exactly the held rows and left every free row as it was; the keeper's
# successor leases and every free slot acquired afterwards start at or above the raised floor
# with a fence at least 2^32 above the slot's fence before the raise; a free slot not yet
# brought up still holds off a DELETE (the forget guard sees the raise); ids go on in every
# namespace, unique and above those before; cosid_verify().
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/raise_scale"; PORT=${PORT:-28495}
# RAISE_SCALE_NAMESPACES and RAISE_SCALE_BITS size the store (3 and 15; 5 and 16 is the fleet
# whose raise never finished before 1.8, docs/capacity.md)
N=${RAISE_SCALE_NAMESPACES:-3}; BITS=${RAISE_SCALE_BITS:-15}
NAMES=$(seq -f 'big%g' 1 "$N" | tr '\n' ' ')
node_up main "$DIR" "$PORT" "cosid.ttl = '6s'" "cosid.acquire_timeout = '30s'"
trap 'node_stop_all immediate' EXIT
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_ttl => '6s', max_tolerance => '1s')" >/dev/null
q -c "DO \$\$ BEGIN
        FOR i IN 1 .. $N LOOP
            PERFORM cosid_namespace_create('big' || i, slot_bits => $BITS, sequence_bits => 4, tolerance => '1s');
        END LOOP;
      END \$\$" >/dev/null
ids_table
for ns in $NAMES; do
    q -c "INSERT INTO ids (ns, id, done, who) SELECT '$ns', cosid_next('$ns'), clock_timestamp(), 'before'" >/dev/null
done
rows=$(q -c "SELECT count(*) FROM cosid.lease")
echo "# $rows slot rows in cosid.lease"
wait_for 20 "a lease in each of the three namespaces" \
    q -c "SELECT count(DISTINCT namespace) = $N FROM cosid_pool() WHERE state = 'active'" >/dev/null
# Every row's fence before the raise, and which rows are held.
q -c "CREATE TABLE before AS SELECT namespace, slot, fence, incarnation IS NOT NULL AS held, next_floor, raise_seen
      FROM cosid.lease" >/dev/null

# The raise: in one transaction with the change that provokes it, its own work counted there.
out=$(q -v ON_ERROR_STOP=1 <<'SQL'
BEGIN;
-- (no lease row changes meanwhile: the keeper's calls wait for this transaction; the store's
-- state first, in the store's lock order: src/README.md)
LOCK TABLE cosid.store_state IN SHARE ROW EXCLUSIVE MODE;
LOCK TABLE cosid.lease IN SHARE ROW EXCLUSIVE MODE;
SELECT count(*) FROM cosid.lease WHERE incarnation IS NOT NULL \gset held_
UPDATE cosid.store_state SET timeline = 0, issuer_incarnation = NULL;
SELECT clock_timestamp() AS t0 \gset
SELECT cosid_store_follow_timeline() >= 1;
SELECT :'held_count' || ' ' || (SELECT n_tup_upd FROM pg_stat_xact_user_tables WHERE relid = 'cosid.lease'::regclass)
       || ' ' || round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) * 1000);
COMMIT;
SQL
)
read -r held updated raise_ms <<<"$(tail -n 1 <<<"$out")"
echo "# the raise: $held held rows, $updated rows updated in its transaction, $raise_ms ms"
check "the raise updated exactly the held rows" "$held" "$updated"
check_true "some rows were held" "$([ "${held:-0}" -ge "$N" ] && echo t || echo f)"
logged=$(grep -o "cosid store: .*leases freed, their next_floor raised" "$(node_log main)" | tail -n 1)
check "its log line counts the held rows" "$held leases freed" "$(grep -o "[0-9]* leases freed" <<<"$logged")"
raised=$(q -c "SELECT raised_floor FROM cosid._raise_mark()")
count=$(q -c "SELECT raise_count FROM cosid.store_state")
# The free rows as they were (a row the keeper acquired since is brought up: left out here).
check "every free row left as it was" 0 "$(q -c "SELECT count(*) FROM cosid.lease l JOIN before b USING (namespace, slot)
      WHERE NOT b.held AND l.raise_seen < $count AND (l.fence, l.next_floor) <> (b.fence, b.next_floor)")"
check "no free row brought up by the raise itself" 0 "$(q -c "SELECT count(*) FROM cosid.lease l JOIN before b USING (namespace, slot)
      WHERE NOT b.held AND l.raise_seen = $count AND l.incarnation IS NULL")"

# A free slot not yet brought up holds off a DELETE until the raised floor passes.
free_slot=$(q -c "SELECT slot FROM cosid.lease WHERE namespace = 'big3' AND incarnation IS NULL AND raise_seen < $count ORDER BY slot DESC LIMIT 1")
check "DELETE of a free slot the raise left alone is refused (forget guard)" "55006" \
    "$(q -c "DO \$\$ BEGIN DELETE FROM cosid.lease WHERE namespace = 'big3' AND slot = $free_slot;
             EXCEPTION WHEN object_in_use THEN RAISE NOTICE '55006'; END \$\$" 2>&1 | grep -o 55006 | head -n 1)"

# The keeper's successors: it finds its leases freed at its next renewal (within ttl/3), goes on
# to their ceilings and asks for a successor of each at once.
successors="SELECT count(DISTINCT l.namespace) FROM cosid.lease l, cosid_pool() p
             WHERE l.namespace = p.namespace AND l.slot = p.slot AND p.state = 'active' AND l.incarnation IS NOT NULL
               AND l.raise_seen = $count AND l.floor >= $raised"
wait_for 30 "the keeper's successor lease in each namespace" q -c "SELECT ($successors) = $N" >/dev/null
check "the keeper holds a successor in each namespace, above the raised floor" "$N" "$(q -c "$successors")"
for ns in $NAMES; do
    q -c "INSERT INTO ids (ns, id, done, who) SELECT '$ns', cosid_next('$ns'), clock_timestamp(), 'after'" >/dev/null \
        2>>"$DIR/after.log" || true
done
check "ids after the raise in every namespace" "$N" "$(q -c "SELECT count(DISTINCT ns) FROM ids WHERE who = 'after'")"
check "each namespace's ids after the raise above those before" 0 "$(q -c "SELECT count(*) FROM ids a, ids b
      WHERE a.ns = b.ns AND a.who = 'after' AND b.who = 'before' AND a.id <= b.id")"
# Free slots acquired afterwards: 20 of each namespace by another owner, besides the keeper's.
q -c "DO \$\$ BEGIN
        FOR i IN 1 .. 20 LOOP
            FOR n IN 1 .. $N LOOP
                PERFORM cosid.acquire('big' || n, 'probe', '00000000-0000-0000-0000-0000000000aa', 6000);
            END LOOP;
        END LOOP;
      END \$\$" >/dev/null
granted=$(q -c "SELECT count(*) FILTER (WHERE l.floor < $raised OR l.fence < b.fence + 4294967296) || ' '
                       || count(*) FILTER (WHERE l.owner_key = 'probe')
                  FROM cosid.lease l JOIN before b USING (namespace, slot)
                 WHERE l.incarnation IS NOT NULL AND l.raise_seen = $count")
check "every window granted since the raise starts at or above the raised floor, fence 2^32 above (20 probes a namespace)" \
    "0 $((20 * N))" "$granted"
check "zero duplicate ids" 0 "$(q -c "SELECT count(id) - count(DISTINCT id) FROM ids")"
assert_store_verified "$DIR" "$PORT" postgres "the store"
# RAISE_SCALE_EAGER=1: what the raise before 1.8 cost here, for comparison (not a check): its
# statement over every row, with the rows' triggers, rolled back.
if [ "${RAISE_SCALE_EAGER:-0}" = 1 ]; then
    echo "# before 1.8, the same raise: $(q -v ON_ERROR_STOP=1 <<'SQL' | tail -n 1
BEGIN;
SELECT clock_timestamp() AS t0 \gset
UPDATE cosid.lease l SET next_floor = greatest(l.next_floor, l.ceiling, cosid.store_now() + 8000),
       previous_owner_key = coalesce(l.owner_key, l.previous_owner_key), owner_key = NULL, incarnation = NULL,
       owner_role = NULL, fence = l.fence + 4294967296;
SELECT (SELECT n_tup_upd FROM pg_stat_xact_user_tables WHERE relid = 'cosid.lease'::regclass) || ' rows updated in '
       || round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) * 1000) || ' ms';
ROLLBACK;
SQL
)"
fi
exit $FAIL

#!/usr/bin/env bash
# One server moves namespaces between leased and static issuing (cosid.static_slots changed,
# a restart), both ways at once: 'moved' was leased and becomes static on the slot it had;
# 'back' was static on slot 0 and becomes leased, its other slots held by other owners so that
# the store must grant slot 0 again; 'spare' was static on slot 0 too and becomes leased with
# free slots.  'moved' and 'back' issued ~12 s ahead of the clock before the restart (seconds
# namespaces with 12 sequence bits, 48,000 ids in one statement: 4,096 a tick).  The static
# keeper must start above where the store's windows on the slot end (cosid.lease), and the
# store's acquire above the static ceilings recorded in cosid.static_ceiling (the same
# database), preferring a slot that can start at once.
# Before: every id of 'moved' and 'back' after the restart repeated one of before (5,000 of
# 5,000 each).
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/static_switch"; S="$base/s"; P=55740
trap 'node_stop_all immediate' EXIT
node_register main "$S" "$P"; node_stop main immediate  # a run killed before its trap
rm -rf "$base"; mkdir -p "$base"; chown "$PG_USER" "$base"
node_up main "$S" "$P" "cosid.ttl = '30s'" "cosid.static_ahead = '30s'" "cosid.static_slots = 'back:0, spare:0'"
q -c "CREATE EXTENSION cosid" \
  -c "SELECT cosid_namespace_create(n, slot_bits => 2, unit => 's', sequence_bits => 12, total_bits => 53) FROM unnest(ARRAY['moved', 'back', 'spare']) n" \
  -c "CREATE TABLE t (ns text, phase text, id bigint)" >/dev/null
q -c "SET cosid.acquire_timeout = '30s'" \
  -c "INSERT INTO t SELECT 'moved', 'before', cosid_next('moved') FROM generate_series(1, 48000)" \
  -c "INSERT INTO t SELECT 'back', 'before', cosid_next('back') FROM generate_series(1, 48000)" \
  -c "INSERT INTO t SELECT 'spare', 'before', cosid_next('spare') FROM generate_series(1, 10)" >/dev/null
check "'moved' is leased, 'back' and 'spare' static before the restart" "spare static|moved lease|back static" \
    "$(q -c "SELECT string_agg(namespace || ' ' || kind, '|' ORDER BY namespace DESC) FROM cosid_pool()")"
# Other owners take the slots of 'back' that can start now: its slot 0, static until now, has
# its last ceiling ahead in cosid.static_ceiling and is passed over.
check "other owners hold slots 1, 2 and 3 of 'back'" "1,2,3" \
    "$(q -c "SELECT string_agg(a.slot::text, ',' ORDER BY a.slot)
               FROM generate_series(1, 3) i, LATERAL cosid.acquire('back', 'holder' || i, gen_random_uuid(), 55000) a")"
slot=$(q -c "SELECT slot FROM cosid_pool() WHERE namespace = 'moved'")
sed -i "/cosid.static_slots/d" "$S/data/postgresql.conf"
echo "cosid.static_slots = 'moved:$slot'" >> "$S/data/postgresql.conf"
node_restart main fast
# Only a switch while the ids are ahead of the clock can repeat them: make sure they are.
for ns in moved back; do
    check_true "the ids of '$ns' before the restart are still ahead of the clock" \
        "$(q -c "SELECT cosid_timestamp(max(id), '$ns') > clock_timestamp() FROM t WHERE ns = '$ns'")"
done
# ('spare' first: its last static ceiling, 30 s ahead when written, is still ahead.)
q -c "SET cosid.acquire_timeout = '30s'" \
  -c "INSERT INTO t SELECT 'spare', 'after', cosid_next('spare') FROM generate_series(1, 10)" \
  -c "INSERT INTO t SELECT 'moved', 'after', cosid_next('moved') FROM generate_series(1, 5000)" \
  -c "INSERT INTO t SELECT 'back', 'after', cosid_next('back') FROM generate_series(1, 5000)" \
  -c "ANALYZE t" >/dev/null  # (without statistics the checks below joined 53,000 rows to 5,000 by a nested loop: 90 s of CPU)
check "'moved' static on slot $slot, 'back' leased on its slot 0, 'spare' on slot 1 (free, can start at once) after the restart" \
    "spare lease 1|moved static $slot|back lease 0" \
    "$(q -c "SELECT string_agg(namespace || ' ' || kind || ' ' || slot, '|' ORDER BY namespace DESC) FROM cosid_pool()")"
for ns in moved back; do
    check "'$ns': no id after the restart equals one before" 0 \
        "$(q -c "SELECT count(*) FROM t a JOIN t b USING (ns, id) WHERE ns = '$ns' AND a.phase = 'after' AND b.phase = 'before'")"
    check "'$ns': every id after the restart (same slot) is above every id before" 0 \
        "$(q -c "SELECT count(*) FROM t WHERE ns = '$ns' AND phase = 'after'
                   AND id <= (SELECT max(id) FROM t WHERE ns = '$ns' AND phase = 'before')")"
done
# The database's history holds both kinds of window on the same slots: none overlaps, and
# each id's one window is of the kind that issued it ('moved' leased before, static after;
# 'back' the other way round).
assert_store_verified "$S" "$P" postgres "the database (leased and static windows of one slot)"
check "300 ids of 'moved' and 'back': each has one issuer, a lease or the static slot as it was issued" 0 "$(q -c "
    SELECT count(*) FROM (SELECT * FROM t WHERE ns IN ('moved', 'back') ORDER BY random() LIMIT 300) s
    WHERE (SELECT count(*) = 1 AND bool_and((i.source = 'static slot') = ((s.ns = 'moved') = (s.phase = 'after')))
             FROM cosid_issuer(s.id, s.ns) i) IS NOT TRUE")"
# A raise of the store's floors (a restore, a copy, a failover) lifts every next_floor
# max_ttl + 2 x max_tolerance above the clock, for leases a lost tail of the store's history
# may have granted, and the lease 'moved' had before it became static may be one of them: its
# next static window starts above the raised next_floor, and (with a state file) issues from
# there at once, ahead of the clock: never below it.
q -c "SELECT cosid_store_follow_timeline(restored => true)" -c "SELECT cosid_fork_acknowledge()" >/dev/null  # a copy of the store, its original gone
# (cosid_leases: a slot free at the raise takes it when next written, the lazy raise)
raised=$(q -c "SELECT max(next_floor) FROM cosid_leases('moved') WHERE slot = $slot")
q -c "SELECT cosid_release('moved', $slot)" >/dev/null
id=$(q -c "SET cosid.acquire_timeout = '2s'" \
         -c "INSERT INTO t SELECT 'moved', 'raised', cosid_next('moved') RETURNING id" 2>&1 || true)
check_true "after a raise, a new static window of 'moved' issues above the raised next_floor at once ($id)" \
    "$(q -c "SELECT (extract(epoch FROM ts) * 1000)::bigint > $raised FROM cosid_parse($id, 'moved')" 2>/dev/null || echo f)"
check "no id twice in all" 0 "$(q -c "SELECT count(*) - count(DISTINCT (ns, id)) FROM t")"
grep -q "static slot $slot of namespace \"moved\": starting above .*or by the slot's leases" "$S/server.log" && echo "ok - the keeper logs where the static slot of 'moved' starts" \
    || { echo "not ok - the keeper logs where the static slot of 'moved' starts"; FAIL=1; }
assert_store_verified "$S" "$P" postgres "the database after the raise"
exit $FAIL

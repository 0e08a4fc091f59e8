#!/usr/bin/env bash
# An instance that changes its store never issues one of its own ids again: the new store
# knows nothing of the windows the old one granted, so the keeper remembers them itself
# (cosid.history in the data directory, written before a window is used) and starts a window
# of another store above what the others granted on that slot.  A seconds-unit namespace
# (4,096 ids a second) with 40,000 ids in one statement issues ~9 s ahead of the clock:
#   1. cosid.database moved to another database of the instance, then a fast restart;
#   2. the instance joins a central store (cosid.store_dsn), then a fast restart;
#   3. back to its first store;
#   4. a damaged cosid.history: refused (ZC007), nothing issued, issuing again once removed
#      (the server never changed its store since the file was written: safe to remove).
# After each move 20,000 ids: none equal to an earlier one.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
base="${1:-/tmp/cosid-e2e}/store_change"
A="$base/a"; C="$base/c"; PA=55611; PC=55612
mkdir -p "$base"
trap 'node_stop_all immediate' EXIT
LAYOUT="slot_bits => 2, sequence_bits => 12, unit => 's', total_bits => 53"
node_up a "$A" "$PA" "cosid.acquire_timeout = '40s'"
node_up c "$C" "$PC"
qa -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('sec', $LAYOUT)" >/dev/null
qa -c "CREATE DATABASE other"
node_sql_db a other -c "SET client_min_messages = error" -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('sec', $LAYOUT)" >/dev/null
qc -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('sec', $LAYOUT)" \
   -c "CREATE ROLE keeper_a LOGIN PASSWORD 'change-me' IN ROLE cosid_keeper" >/dev/null

# repeats PHASE: the rows of PHASE equal to a row of another phase
repeats() {
    qa -c "SELECT count(*) FROM t2 a WHERE a.phase = '$1' AND EXISTS (SELECT 1 FROM t2 b WHERE b.id = a.id AND b.phase <> '$1')"
}
qa -c "CREATE TABLE t2 (id bigint DEFAULT cosid_next('sec'), phase text)" >/dev/null
insert2() {  # into the keyless table, so that a repeat is counted instead of failing the statement
    qa -c "INSERT INTO t2(phase) SELECT '$1' FROM generate_series(1, $2)" >/dev/null
    qa -c "SELECT round(extract(epoch FROM max(p.ts) - clock_timestamp())::numeric, 1)
           FROM t2, cosid_parse(t2.id, 'sec') p WHERE t2.phase = '$1'"
}
restart_a() { node_restart a fast; }

ahead=$(insert2 before 40000)
echo "# 40,000 ids in one statement: the last one ${ahead} s ahead of the clock"
check_true "ids were issued ahead of the clock (${ahead} s)" "$(awk -v a="$ahead" 'BEGIN {print (a > 3) ? "t" : "f"}')"
check_true "cosid.history records the store's grants" "$(as_pg grep -q '^slot sec ' "$A/data/cosid.history" && echo t || echo f)"

echo "# 1. cosid.database moved to another database"
qa -c "ALTER SYSTEM SET cosid.database = 'other'" >/dev/null; restart_a
insert2 moved_db 20000 >/dev/null
check "20,000 ids after the move: none equal to an earlier one" 0 "$(repeats moved_db)"
check_true "the keeper said where the new window starts" "$(grep -q 'granted up to .* by another store' "$A/server.log" && echo t || echo f)"

echo "# 2. joining a central store through cosid.store_dsn"
insert2 moved_db2 40000 >/dev/null   # ahead of the clock again, under database other
qa -c "ALTER SYSTEM SET cosid.store_dsn = 'host=$C port=$PC dbname=postgres user=keeper_a password=change-me'" >/dev/null
restart_a
insert2 joined 20000 >/dev/null
check "20,000 ids after joining: none equal to an earlier one" 0 "$(repeats joined)"
check_true "the central store granted them" "$(qc -c "SELECT count(*) > 0 FROM cosid.lease WHERE namespace = 'sec' AND coalesce(owner_key, previous_owner_key) IS NOT NULL")"

echo "# 3. back to the first store"
insert2 joined2 40000 >/dev/null
qa -c "ALTER SYSTEM RESET cosid.store_dsn" -c "ALTER SYSTEM RESET cosid.database" >/dev/null; restart_a
insert2 back 20000 >/dev/null
check "20,000 ids back on the first store: none equal to an earlier one" 0 "$(repeats back)"
check "zero duplicate ids over every phase" 0 "$(qa -c "SELECT count(*) - count(DISTINCT id) FROM t2")"

echo "# 4. a damaged cosid.history"
node_stop a fast
as_pg sed -i 's/^slot sec /slot  sec /' "$A/data/cosid.history"
node_start a
n=$(qa -c "SELECT count(*) FROM t2")
out=$(qa -v VERBOSITY=verbose -c "INSERT INTO t2(phase) VALUES ('damaged')" 2>&1 || true)
check "refused with ZC007" ZC007 "$(sqlstate_of "$out")"
check_true "the error names the file" "$(grep -q 'cosid.history' <<<"$out" && echo t || echo f)"
check "nothing inserted" "$n" "$(qa -c "SELECT count(*) FROM t2")"
as_pg rm "$A/data/cosid.history"
check "with the file removed (no store change since it was written) ids flow" 1 \
    "$(qa -c "INSERT INTO t2(phase) VALUES ('mended')" -c "SELECT count(*) FROM t2 WHERE phase = 'mended'")"
assert_store_verified "$A" "$PA" postgres "A's first store (database postgres)"
assert_store_verified "$A" "$PA" other "A's store in database other"
assert_store_verified "$C" "$PC" postgres "C, the central store"
exit $FAIL

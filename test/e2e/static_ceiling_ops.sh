#!/usr/bin/env bash
# More operations around cosid.static_ceiling (found by a second review; each case failed on
# the build before its fix):
#   bash test/e2e/static_ceiling_ops.sh WORKDIR
# h) a dump restored into another cluster with the same static slot (pg_restore --clean by
#    section), a window open when it begins and a cosid_next() between the restore's CREATE
#    EXTENSION and cosid's data: no static window may stay open or open before the origin's rows
#    have come (before: a window opened at this cluster's clock, set to the middle of the
#    origin's ids, and 184 of 20,000 ids were the origin's; one open before the restore went on
#    issuing through it, 9,260 of 10,000 ids at or below the origin's).
# i) DELETE FROM cosid.static_ceiling after a cosid_adopt (the file node stays, unlike TRUNCATE):
#    the keeper writes the rows again, and a pg_upgrade onto another static slot starts above
#    the adopted ids (before: the row never came back; 1,380 of 2,000 ids at or below them).
# j) the table locked after a TRUNCATE: the keeper's once-a-second comparison gives up on the
#    lock at once, and a dynamic namespace leased before goes on issuing (before: every keeper
#    loop waited the store bound, 10 s).  A new acquire reads cosid.static_ceiling (a slot
#    static before starts above its ceilings, static_switch.sh), so it waits for the lock as it
#    would for one on cosid.lease.
# k) pg_restore --clean of the cluster's own dump: while the restore is under way the keeper
#    writes nothing into cosid.static_ceiling (before: its once-a-second rewrite put this
#    cluster's row back, and the restore's COPY of the table failed on that key).
# l) a data-only restore into an extension made beforehand, with a static window opened before
#    the origin's rows came: the keeper closes it once the rows are there, and later windows
#    start above them (before: it renewed on below them, 6,260 of 20,000 ids at or below).
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
D="${1:-/tmp/cosid-e2e}/static_ceiling_ops"
B="$PG_BIN"; FAIL=0; PORT0=55707
# shellcheck disable=SC2046  # one argument per pid
cleanup() { kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate; }
trap cleanup EXIT
rm -rf "$D"; mkdir -p "$D"; chown -R "$PG_USER" "$D"
NS="SELECT cosid_namespace_create('st', slot_bits => 4, sequence_bits => 8, unit => 's', total_bits => 55)"
mk() {  # mk NAME PORT settings...: node NAME in $D/NAME, its own initdb (not the suite's template)
    local n=$1 p=$2; shift 2
    mkdir -p "$D/$n"; chown "$PG_USER" "$D/$n"
    as_pg "$B/initdb" -D "$D/$n/data" -A trust -U postgres -E UTF8 --locale=C -k >/dev/null
    node_attach "$n" "$D/$n" "$p" "listen_addresses = ''" \
        "shared_preload_libraries = 'cosid'" "fsync = off" "cosid.acquire_timeout = '30s'" "cosid.test_reach_cap = '1ms'" "$@"
}

spread_and_dump() {  # spread_and_dump NODE DUMP WHAT: 30,000 ids in NODE's table t, spread over a
    # few seconds so that another node's clock can be put among them; sets max_id, min_ms and
    # mid_ms (the first and the middle of their times), dumps NODE to DUMP, verifies its store
    # and stops it
    local n=$1
    node_sql "$n" -c "CREATE EXTENSION cosid" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), phase text)" \
        -c "DO \$\$ BEGIN FOR i IN 1..30000 LOOP INSERT INTO t(phase) VALUES ('a'); IF i % 10 = 0 THEN PERFORM pg_sleep(0.002); END IF; END LOOP; END \$\$" >/dev/null
    max_id=$(node_sql "$n" -c "SELECT max(id) FROM t")
    mid_ms=$(node_sql "$n" -c "SELECT ((extract(epoch FROM cosid_timestamp(min(id))) + extract(epoch FROM cosid_timestamp(max(id)))) * 500)::bigint FROM t")
    min_ms=$(node_sql "$n" -c "SELECT (extract(epoch FROM cosid_timestamp(min(id))) * 1000)::bigint FROM t")
    as_pg "$B/pg_dump" -h "$(node_dir "$n")" -p "$(node_port "$n")" -Fc -f "$2" postgres
    assert_store_verified "$(node_dir "$n")" "$(node_port "$n")" postgres "$3"
    node_stop "$n"
}

# --- h) restore with a cosid_next() between its sections --------------------------------------
PA=$PORT0; PB=$((PORT0 + 1))
mk a $PA "cosid.static_slots = 'default:5'"
mk b $PB "cosid.static_slots = 'default:5'"
node_start a
spread_and_dump a "$D/a.dump" "h) A"
# B's clock in the middle of A's ids (another host's clock)
echo "cosid.clock_offset = $(( mid_ms - $(now_ms) ))" >> "$D/b/data/postgresql.conf"
node_start b
# B issues before the restore too: its window, open when the restore starts, must be closed
qb -c "CREATE EXTENSION cosid" -c "SELECT cosid_next()" >/dev/null
as_pg "$B/pg_restore" -h "$D/b" -p $PB -d postgres --clean --if-exists --section=pre-data "$D/a.dump" 2>"$D/h.err0" || true
refused() {  # (psql's own status is an error here: not through a pipe under pipefail)
    local out; out=$(qb -v VERBOSITY=sqlstate -c "SELECT cosid_next()" 2>&1 || true)
    grep -q 'ERROR:  55000' <<<"$out" && echo t || echo f
}
check_true "h) the window open when the restore began is closed: cosid_next() refused within 10 s" \
    "$(wait_for 10 "the open window closed for the restore" refused)"
first=$(qb -v VERBOSITY=verbose -c "SELECT cosid_next()" 2>&1 || true)
echo "# h) cosid_next() between the restore's sections: $(echo "$first" | head -1)"
check "h) no static window between the restore's sections: refused (55000) with a hint" "55000 1" \
    "$(sqlstate_of "$first") $(grep -c '^HINT: ' <<<"$first")"
as_pg "$B/pg_restore" -h "$D/b" -p $PB -d postgres --section=data "$D/a.dump"
as_pg "$B/pg_restore" -h "$D/b" -p $PB -d postgres --section=post-data "$D/a.dump"
qb -c "CREATE TABLE t_after (id bigint)" -c "DO \$\$ BEGIN FOR i IN 1..20000 LOOP INSERT INTO t_after VALUES (cosid_next()); IF i % 10 = 0 THEN PERFORM pg_sleep(0.002); END IF; END LOOP; END \$\$" >/dev/null 2>"$D/h.err" || true
check "h) after the restore: 20000 ids on B, none at or below A's $max_id, none of A's" "20000|0|0|" \
    "$(qb -c "SELECT count(*) || '|' || count(*) FILTER (WHERE id <= $max_id) || '|' || count(*) FILTER (WHERE id IN (SELECT id FROM t)) FROM t_after")|$(head -1 "$D/h.err")"
assert_store_verified "$D/b" $PB postgres "h) B after the restore of A"
node_stop b

# --- i) DELETE FROM cosid.static_ceiling after an adopt, then pg_upgrade onto another slot -------
PO=$((PORT0 + 2)); PN=$((PORT0 + 3))
mk o $PO "cosid.static_slots = 'st:5'"
mk n $PN "cosid.static_slots = 'st:2'"
node_start o
qo -c "CREATE EXTENSION cosid" -c "$NS" -c "CREATE TABLE t_adopt (id bigint, phase text)" \
    -c "INSERT INTO t_adopt SELECT cosid_min_id(now() + interval '8 s', 'st') + (2 << 8) + k, 'adopted' FROM generate_series(0, 99) k" \
    -c "SELECT cosid_adopt('t_adopt', 'id', 'st')" >/dev/null
max_id=$(qo -c "SELECT max(id) FROM t_adopt")
adopted_ms=$(qo -c "SELECT (extract(epoch FROM cosid_timestamp($max_id, 'st')) * 1000)::bigint")
qo -c "DELETE FROM cosid.static_ceiling" >/dev/null   # a DBA emptying it by hand
check_true "i) the namespace's adopt row written again after a DELETE of every row" \
    "$(wait_for 10 "the adopt row back" qo -c "SELECT count(*) = 1 FROM cosid.static_ceiling WHERE namespace = 'st' AND slot = -1 AND ceiling_ms >= $adopted_ms")"
node_stop o
(cd "$D" && as_pg "$B/pg_upgrade" -b "$B" -B "$B" -d "$D/o/data" -D "$D/n/data" -p $PO -P $PN -s "$D" -U postgres --no-sync --link) \
    > "$D/pg_upgrade.out" 2>&1 || { echo "not ok - pg_upgrade failed"; tail "$D/pg_upgrade.out"; exit 1; }
echo "cosid.clock_offset = $(( adopted_ms - 5000 - $(now_ms) ))" >> "$D/n/data/postgresql.conf"
node_start n
qn -c "INSERT INTO t_adopt SELECT cosid_next('st'), 'after' FROM generate_series(1, 2000)" >/dev/null 2>"$D/i.err" || true
check "i) then pg_upgrade onto slot 2: 2000 ids, none at or below the adopted $max_id" "2000|0|" \
    "$(qn -c "SELECT count(*) || '|' || count(*) FILTER (WHERE id <= $max_id) FROM t_adopt WHERE phase = 'after'")|$(head -1 "$D/i.err")"
assert_store_verified "$D/n" $PN postgres "i) N after pg_upgrade"
node_stop n

# --- j) the table locked after a TRUNCATE: the keeper is not held up ------------------------------
PJ=$((PORT0 + 4))
mk j $PJ "cosid.static_slots = 'st:5'"
node_start j
qj -c "CREATE EXTENSION cosid" -c "$NS" -c "SELECT cosid_next('st')" -c "SELECT cosid_namespace_create('d1')" \
    -c "SELECT cosid_next('d1')" >/dev/null
qj -c "SELECT cosid_release('st', 5)" >/dev/null   # no static window: no renewal writes the table
# the TRUNCATE commits straight into a lock queued behind it, which holds the table 30 s
qj -c "BEGIN" -c "TRUNCATE cosid.static_ceiling" -c "SELECT pg_sleep(2)" -c "COMMIT" >/dev/null &
wait_for 10 "the TRUNCATE's lock" qj -c "SELECT count(*) > 0 FROM pg_locks WHERE relation = 'cosid.static_ceiling'::regclass AND mode = 'AccessExclusiveLock' AND granted" >/dev/null
qj -c "BEGIN" -c "LOCK TABLE cosid.static_ceiling" -c "SELECT pg_sleep(30)" -c "COMMIT" >/dev/null 2>&1 &
check_true "j) the keeper's comparison gave up on the lock and said so" \
    "$(wait_for 20 "the keeper's log of the locked table" bash -c "grep -q 'could not compare its static ceilings with cosid.static_ceiling' '$D/j/server.log' && echo t")"
# How much of its time the keeper spends waiting for that lock: 20 looks, 0.2 s apart.  A
# comparison gives up after 100 ms once a second (about one look in ten); a write waiting out
# the store bound (10 s at ttl 60 s) at every loop, as before, is seen in nearly every look.
waits=0
for _ in $(seq 1 20); do
    [ "$(qj -c "SELECT wait_event_type FROM pg_stat_activity WHERE backend_type = 'cosid keeper'")" = Lock ] && waits=$((waits + 1))
    sleep 0.2
done
check_true "j) the keeper waited for the lock in fewer than half of 20 looks ($waits)" "$([ "$waits" -lt 10 ] && echo t || echo f)"
got=$(qj -c "SET cosid.acquire_timeout = '8s'" -c "SELECT count(cosid_next('d1')) FROM generate_series(1, 1000)" 2>&1 | head -1 || true)
check "j) meanwhile a dynamic namespace leased before issues 1,000 ids within cosid.acquire_timeout = 8 s" "1000" "$got"
# shellcheck disable=SC2046  # one argument per pid
kill $(jobs -p) 2>/dev/null || true
assert_store_verified "$D/j" $PJ postgres "j) J"
node_stop j

# --- k) pg_restore --clean into the same cluster ---------------------------------------------------
PK=$((PORT0 + 5))
mk k $PK "cosid.static_slots = 'default:5'"
node_start k
qk -c "CREATE EXTENSION cosid" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), v int)" \
    -c "INSERT INTO t(v) SELECT g FROM generate_series(1, 1000) g" >/dev/null
max_id=$(qk -c "SELECT max(id) FROM t")
as_pg "$B/pg_dump" -h "$D/k" -p $PK -Fc -f "$D/k.dump" postgres
as_pg "$B/pg_restore" -h "$D/k" -p $PK -d postgres --clean --if-exists --section=pre-data "$D/k.dump" 2>"$D/k.err" || true
# the restore's CREATE EXTENSION left its mark: the keeper's rewrite (within a second) must not come
check "k) during the restore, no row written into the new cosid.static_ceiling (3 s)" "f" \
    "$(wait_until 3 qk -c "SELECT count(*) > 0 FROM cosid.static_ceiling")"
as_pg "$B/pg_restore" -h "$D/k" -p $PK -d postgres --section=data "$D/k.dump" 2>>"$D/k.err" || true
as_pg "$B/pg_restore" -h "$D/k" -p $PK -d postgres --section=post-data "$D/k.dump" 2>>"$D/k.err" || true
check "k) the restore reports no error; its rows are there" "0 1000" \
    "$(grep -c 'error' "$D/k.err") $(qk -c "SELECT count(*) FROM t")"
qk -c "INSERT INTO t(v) SELECT g FROM generate_series(1, 1000) g" >/dev/null 2>"$D/k2.err" || true
check "k) after it, 1000 more ids, all above $max_id" "1000|" \
    "$(qk -c "SELECT count(*) FROM t WHERE id > $max_id")|$(head -1 "$D/k2.err")"
assert_store_verified "$D/k" $PK postgres "k) K after pg_restore --clean"
node_stop k

# --- l) a data-only restore into an extension made beforehand, a window already open ---------------
PL=$((PORT0 + 6)); PM=$((PORT0 + 7))
mk la $PL "cosid.static_slots = 'default:5'"
mk lb $PM "cosid.static_slots = 'default:5'"
node_start la
spread_and_dump la "$D/l.dump" "l) LA"
# LB's clock at LA's first id: its server start and CREATE EXTENSION take a few seconds of LA's
# spread on a loaded machine, and its window must still open among LA's ids (from the middle,
# a slow start put it above them)
echo "cosid.clock_offset = $(( min_ms - $(now_ms) ))" >> "$D/lb/data/postgresql.conf"
node_start lb
early_id=$(qlb -c "CREATE EXTENSION cosid" -c "CREATE TABLE t (id bigint PRIMARY KEY, phase text)" \
    -c "CREATE TABLE t_after (id bigint)" -c "SELECT cosid_next()" | tail -1)   # a window opens before the rows come
as_pg "$B/pg_restore" -h "$D/lb" -p $PM -d postgres --data-only "$D/l.dump" 2>"$D/l.err" || true
check_true "l) the keeper closed the window that opened below the restored rows" \
    "$(wait_for 15 "the keeper's log of the closed window" bash -c "grep -q 'a ceiling above the open window.s floor was recorded' '$D/lb/server.log' && echo t")"
qlb -c "DO \$\$ BEGIN FOR i IN 1..20000 LOOP INSERT INTO t_after VALUES (cosid_next()); IF i % 10 = 0 THEN PERFORM pg_sleep(0.002); END IF; END LOOP; END \$\$" >/dev/null 2>"$D/l2.err" || true
check "l) then 20000 ids, none at or below the restored $max_id" "20000|0|" \
    "$(qlb -c "SELECT count(*) || '|' || count(*) FILTER (WHERE id <= $max_id) FROM t_after")|$(head -1 "$D/l2.err")"
# The history shows what the restore came too late for, as an audit should: the window LB
# opened on slot 5 before LA's rows arrived (the one that holds the id it issued then, among
# LA's ticks) overlaps LA's restored windows; no other window of LB does.  (The docs: let a
# restore finish before the application issues ids.)
early_ms=$(qlb -c "SELECT (extract(epoch FROM cosid_timestamp($early_id)) * 1000)::bigint")
check_true "l) cosid_verify() on LB reports the window opened before the restore, against LA's, and nothing else" \
    "$(qlb -c "SELECT count(*) > 0
                        AND bool_and((first_holder LIKE '%(this server)%') <> (second_holder LIKE '%(this server)%'))
                        AND bool_and(CASE WHEN first_holder LIKE '%(this server)%'
                                          THEN first_floor < $early_ms AND $early_ms <= first_ceiling
                                          ELSE second_floor < $early_ms AND $early_ms <= second_ceiling END)
                   FROM cosid_verify()")"
node_stop lb
exit $FAIL

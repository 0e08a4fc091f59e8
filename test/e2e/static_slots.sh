#!/usr/bin/env bash
# Static slots (issue 11): namespaces whose slot comes from cosid.static_slots, with windows
# from an fsync'd state file instead of the store.  A crash, a restart with the clock 30 s
# back, a read-only and a full state directory, damaged files, cosid.not_before, a promoted
# standby and cosid_adopt on a static namespace: zero duplicates, and no id beyond the
# ceiling the file durably held.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/static_slots"; PORT=55472
SDIR="$DIR/statedir"   # the state file's own directory: made read-only below
FULL="$DIR/full"       # a tiny file system for the full-disk case
STANDBY="$DIR/standby"; SPORT=55473
node_register sb "$STANDBY" "$SPORT"  # the promoted standby, made below
node_stop sb immediate  # a run killed before its trap (node_up stops main's)
node_up main "$DIR" "$PORT" "cosid.static_slots = '5, orders:9, tiny:9'" "cosid.static_ahead = '2s'" \
    "cosid.state_file = '$SDIR/cosid.state'" "restart_after_crash = on" "max_connections = 40"
trap 'kill $(jobs -p) 2>/dev/null || true; mountpoint -q "$FULL" && umount "$FULL" || true
      chmod 755 "$SDIR" 2>/dev/null || true; node_stop_all immediate' EXIT
mkdir -p "$SDIR" "$DIR/clients"; chown "$PG_USER" "$SDIR" "$DIR/clients"
FILE="$SDIR/cosid.state"
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('orders')" \
  -c "SELECT cosid_namespace_create('tiny', slot_bits => 2)" \
  -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), at timestamptz DEFAULT clock_timestamp(), phase text)" \
  -c "CREATE TABLE u (id bigint PRIMARY KEY DEFAULT cosid_next('orders'), at timestamptz DEFAULT clock_timestamp(), phase text)" \
  -c "GRANT ALL ON t, u TO PUBLIC" >/dev/null

# shellcheck disable=SC2120  # an optional argument, no caller passes it yet
restart() {  # restart [immediate]: stops and starts the server with its configuration
    node_stop main "${1:-fast}"
    node_start main
}
# file_value NS SLOT: the timestamp the state file holds for the slot
file_value() { awk -v ns="$1" -v s="$2" '$1 == "window" && $2 == ns && $3 == s {print $4}' "$FILE"; }
ts_ms() { echo "(extract(epoch FROM (cosid_parse($1, '$2')).ts) * 1000)::bigint"; }
# clients N PHASE [SETTINGS]: N clients inserting into t and u, one connection per statement
clients() {
    rm -f "$DIR/stop"
    CLIENT_PIDS=()
    for c in $(seq 1 "$1"); do
        (
            trap - EXIT; set +e
            while [ ! -e "$DIR/stop" ]; do
                # (no ON_ERROR_STOP: the insert runs after a failed setting, as it did)
                if out=$(q -v ON_ERROR_STOP=0 -v VERBOSITY=sqlstate ${3:+-c "$3"} \
                      -c "WITH a AS (INSERT INTO t(phase) SELECT '$2' FROM generate_series(1, 20))
                          INSERT INTO u(phase) SELECT '$2' FROM generate_series(1, 20)" 2>&1); then
                    echo "$(now_ms) ok"; sleep "$CLIENT_PACE"; else
                    echo "$out" > "$DIR/clients/$2.$c.last_error"
                    code=$(sqlstate_of "$out")
                    echo "$(now_ms) ${code:-conn}"; sleep 0.05; fi
            done > "$DIR/clients/$2.$c.log"
        ) &
        CLIENT_PIDS+=($!)
    done
}
stop_clients() { touch "$DIR/stop"; wait "${CLIENT_PIDS[@]}" 2>/dev/null || true; }
rows() { q -c "SELECT count(*) FROM $1 WHERE phase = '$2'"; }
no_unique_violation() {
    check "no unique violation (23505) in the $1 clients" 0 "$(cat "$DIR"/clients/"$1".*.log | grep -c ' 23505' || true)"
}

echo "# two namespaces with their own static slots, no store involved"
q -c "SELECT cosid_next(), cosid_next('orders')" >/dev/null
check "default issues on static slot 5, orders on 9" "5|9" \
    "$(q -c "SELECT (cosid_parse(cosid_next())).slot || '|' || (cosid_parse(cosid_next('orders'), 'orders')).slot")"
check "the store holds no lease for them" 0 "$(q -c "SELECT count(*) FROM cosid.lease WHERE incarnation IS NOT NULL")"
check "cosid_pool() shows both as static windows" "default|5|static orders|9|static" \
    "$(q -c "SELECT namespace || '|' || slot || '|' || kind FROM cosid_pool() ORDER BY 1" | tr '\n' ' ' | sed 's/ $//')"
check_true "the file holds a ceiling ahead of the clock for each" \
    "$(q -c "SELECT $(file_value default 5) > $(now_ms) AND $(file_value orders 9) > $(now_ms)")"
out=$(q -c "SELECT count(*) > 0 FROM cosid_leases('orders')" 2>&1)
check_true "cosid_leases() says the namespace has no lease in the store" \
    "$(grep -q 'uses static slot 9 on this instance' <<<"$out" && echo t)"
check "cosid_stats() shows the state file, guarding restarts" "$FILE|true" \
    "$(q -c "SELECT static_state_file || '|' || static_clock_guard FROM cosid_stats()")"
out=$(q -v VERBOSITY=verbose -c "SELECT cosid_next('tiny')" 2>&1 || true)
check_true "a static slot outside the namespace's layout is refused (F0000)" \
    "$(grep -q 'F0000' <<<"$out" && grep -q 'slot 9, but its layout has 2 slot bits' <<<"$out" && echo t)"

echo "# kill -9 of a backend during load: the crash restart starts above the durable ceiling"
clients 4 crash
check_true "the clients insert" "$(wait_until 20 q -c "SELECT count(*) >= 400 FROM u WHERE phase = 'crash'")"
# the victim: a backend in a tight loop of cosid_next(), so that it dies in the middle of claims
q -c "SELECT count(cosid_next()) FROM generate_series(1, 1000000000)" \
    >/dev/null 2>&1 &
check_true "a backend issues in a tight loop" "$(wait_until 10 q -c "SELECT count(*) = 1 FROM pg_stat_activity
    WHERE query LIKE 'SELECT count(cosid_next())%' AND state = 'active'")"
victim=$(q -c "SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT count(cosid_next())%' AND state = 'active'")
crash_ms=$(now_ms)
kill -9 "$victim"
check_true "the server restarted and the clients insert again" \
    "$(wait_until 30 q -c "SELECT count(*) >= 400 FROM u WHERE phase = 'crash' AND at > to_timestamp($crash_ms / 1000.0) + interval '1 s'")"
stop_clients
for tn in "t default" "u orders"; do
    set -- $tn
    # the crash restart's first window of the namespace starts at the ceiling the file held
    check_true "$1: every id before the crash is at or below the ceiling durable at the crash, every later one above" "$(q -c "
        WITH p AS (SELECT $(ts_ms id "$2") AS ts, at FROM $1 WHERE phase = 'crash'),
             f AS (SELECT min(ts) AS first_after FROM p WHERE at > to_timestamp($crash_ms / 1000.0) + interval '1 s')
        SELECT (SELECT max(ts) FROM p WHERE at < to_timestamp($crash_ms / 1000.0)) < (SELECT first_after FROM f)")"
done
check "zero duplicate ids in t and u ($(rows t crash) + $(rows u crash) rows)" 0 \
    "$(q -c "SELECT (SELECT count(*) - count(DISTINCT id) FROM t) + (SELECT count(*) - count(DISTINCT id) FROM u)")"
no_unique_violation crash
check_true "no id is beyond the ceiling the file holds" \
    "$(q -c "SELECT max($(ts_ms id default)) <= $(file_value default 5) FROM t")"

echo "# restart with the clock 30 s back: the floor is the old ceiling, and nothing is issued twice"
q -c "SELECT count(cosid_next()) + count(cosid_next('orders')) FROM generate_series(1, 1000)" >/dev/null
pm=$(head -1 "$DIR/data/postmaster.pid")
node_stop main immediate   # no orderly release: the file keeps the ceilings
# the old postmaster removes its socket as it exits, after its pid file: not under the new one's feet
check_true "the old postmaster is gone" "$(wait_until 10 bash -c "kill -0 $pm 2>/dev/null && echo f || echo t")"
c_default=$(file_value default 5); c_orders=$(file_value orders 9)
echo "cosid.clock_offset = -30000" >> "$DIR/data/postgresql.conf"
node_start main
clients 2 back "SET cosid.acquire_timeout = '60s'"
# (each statement asks for orders first: its main insert runs before the one in the WITH)
check_true "the first window of orders after the restart starts at the ceiling the file held" \
    "$(wait_until 15 q -c "SELECT count(*) = 1 FROM cosid_pool() WHERE (namespace, slot, floor) = ('orders', 9, $c_orders)")"
# With a state file, a window's floor ahead of the clock is borrowed from at once
# (cosid.max_borrow -1): each next ceiling is written to the file before an id reaches it.
t_back=$(now_ms)
check_true "ids flow at once while the clock is behind the floor (borrowed above it)" \
    "$(wait_until 50 q -c "SELECT count(*) >= 200 FROM u WHERE phase = 'back'")"
check_true "within 15 s, not after the clock passed the old ceiling (30 s)" \
    "$([ $(( $(now_ms) - t_back )) -lt 15000 ] && echo t || echo f)"
check_true "so does the first window of default" \
    "$(q -c "SELECT count(*) = 1 FROM cosid_pool() WHERE (namespace, slot, floor) = ('default', 5, $c_default)")"
stop_clients
check_true "every id after the restart is above the old ceiling and above every earlier id" "$(q -c "
    SELECT (SELECT min($(ts_ms id default)) FROM t WHERE phase = 'back') > $c_default
       AND (SELECT min($(ts_ms id orders)) FROM u WHERE phase = 'back') > $c_orders
       AND (SELECT min(id) FROM t WHERE phase = 'back') > (SELECT max(id) FROM t WHERE phase IS DISTINCT FROM 'back')
       AND (SELECT min(id) FROM u WHERE phase = 'back') > (SELECT max(id) FROM u WHERE phase IS DISTINCT FROM 'back')")"
no_unique_violation back
sed -i '/^cosid.clock_offset/d' "$DIR/data/postgresql.conf"
restart

echo "# a read-only state directory: ids stop at the durable ceiling, with a clear error"
q -c "SELECT cosid_next()" >/dev/null
chmod 555 "$SDIR"
before=$(file_value default 5)
out=$(q -v VERBOSITY=verbose -c "SET cosid.acquire_timeout = '1s'" \
        -c "SELECT count(cosid_next()) FROM generate_series(1, 100000000)" 2>&1 || true)
check_true "cosid_next() fails with ZC002 naming the write that failed" \
    "$(grep -q 'ZC002' <<<"$out" && grep -q 'Permission denied' <<<"$out" && echo t)"
check "the file was not changed" "$before" "$(file_value default 5)"
check_true "no id was issued past the ceiling the file holds" \
    "$(q -c "SELECT $(ts_ms last_id default) <= $before FROM cosid_pool() WHERE namespace = 'default' AND last_id IS NOT NULL")"
check_true "cosid_stats() counts the failed writes" "$(q -c "SELECT static_write_failures > 0 FROM cosid_stats()")"
chmod 755 "$SDIR"
check_true "ids flow again once the directory is writable" \
    "$(wait_until 10 q -c "SET cosid.acquire_timeout = '1s'" -c "SELECT cosid_next() > 0")"

echo "# a full state directory"
mkdir -p "$FULL"
if mount -t tmpfs -o size=16k,mode=0755 tmpfs "$FULL" 2>/dev/null; then
    chown "$PG_USER" "$FULL"
    node_stop main
    sed -i "s|^cosid.state_file = .*|cosid.state_file = '$FULL/cosid.state'|" "$DIR/data/postgresql.conf"
    node_start main
    q -c "SELECT cosid_next()" >/dev/null   # the file exists on the small file system
    dd if=/dev/zero of="$FULL/filler" bs=4k 2>/dev/null || true  # until no space is left
    out=$(q -v VERBOSITY=verbose -c "SET cosid.acquire_timeout = '1s'" \
            -c "SELECT count(cosid_next()) FROM generate_series(1, 100000000)" 2>&1 || true)
    check_true "with no space left, cosid_next() stops at the ceiling with ZC002 and says why" \
        "$(grep -q 'ZC002' <<<"$out" && grep -q 'No space left on device' <<<"$out" && echo t)"
    check_true "no temporary file is left behind" "$([ ! -e "$FULL/cosid.state.tmp" ] && echo t)"
    rm -f "$FULL/filler"
    check_true "ids flow again once there is space" \
        "$(wait_until 10 q -c "SET cosid.acquire_timeout = '1s'" -c "SELECT cosid_next() > 0")"
    node_stop main
    umount "$FULL"
    sed -i "s|^cosid.state_file = .*|cosid.state_file = '$FILE'|" "$DIR/data/postgresql.conf"
    node_start main
else
    echo "# skipped: this machine does not let root mount a small tmpfs (the read-only case above still ran)"
fi

echo "# damaged state files: a clear error that names the file; the file is never replaced"
q -c "SELECT cosid_next()" >/dev/null
node_stop main
cp "$FILE" "$DIR/good.state"
crc_fix() {  # rewrites the checksum line of $FILE (for the foreign-system case)
    python3 - "$FILE" <<'EOF'
import sys
p = sys.argv[1]; body = open(p, 'rb').read(); body = body[:body.rindex(b'crc32c ')]
crc = 0xFFFFFFFF
for b in body:
    crc ^= b
    for _ in range(8): crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
open(p, 'wb').write(body + b'crc32c %08x\n' % (crc ^ 0xFFFFFFFF))
EOF
}
damage() {  # damage NAME EXPECTED_TEXT COMMAND...: the damaged file is refused, and kept as it is
    local name="$1" expected="$2"; shift 2
    cp "$DIR/good.state" "$FILE"; chown "$PG_USER" "$FILE"
    "$@"
    cp "$FILE" "$DIR/damaged.state"
    node_start main
    local out; out=$(q -v VERBOSITY=verbose -c "SELECT cosid_next()" 2>&1 || true)
    check_true "$name: cosid_next() fails with ZC007, naming the file and the problem" \
        "$(grep -q 'ZC007' <<<"$out" && grep -qF "$FILE" <<<"$out" && grep -qF "$expected" <<<"$out" && echo t)"
    check_true "$name: the server log says so at start" \
        "$([ "$(tail -n 40 "$DIR/server.log" | grep -c 'WARNING:  cosid state file')" -gt 0 ] && echo t)"
    node_stop main
    check_true "$name: the file is left as it was" "$(cmp -s "$FILE" "$DIR/damaged.state" && echo t)"
}
damage "a changed ceiling" "checksum does not match" sed -i 's/^\(window default 5 \)1/\12/' "$FILE"
damage "a truncated file" "truncated" truncate -s 60 "$FILE"
damage "a future version" "newer cosid" sed -i 's/^cosid_state_version 1$/cosid_state_version 2/' "$FILE"
foreign() { sed -i 's/^system_identifier .*/system_identifier 1234567890123456789/' "$FILE"; crc_fix; }
damage "another system's file" "belongs to another PostgreSQL system" foreign
damage "an unreadable file" "could not open" chmod 000 "$FILE"
# A refused file that is then removed stays refused until a restart (cosid.not_before, a
# restart setting, must come with the removal); a file that comes back whole is taken again.
cp "$DIR/good.state" "$FILE"; chown "$PG_USER" "$FILE"; sed -i 's/^\(window default 5 \)1/\12/' "$FILE"
node_start main
q -c "SELECT cosid_next()" >/dev/null 2>&1 || true
rm "$FILE"
out=$(q -v VERBOSITY=verbose -c "SELECT cosid_next()" 2>&1 || true)
check_true "a refused file, removed: still refused until the server restarts" \
    "$(grep -q 'ZC007' <<<"$out" && grep -q 'until the server restarts' <<<"$out" && echo t)"
cp "$DIR/good.state" "$FILE"; chown "$PG_USER" "$FILE"; chmod 600 "$FILE"
check_true "the good file put back is taken at once" "$(q -c "SELECT cosid_next() > 0")"
node_stop main
cp "$DIR/good.state" "$FILE"; chown "$PG_USER" "$FILE"; chmod 600 "$FILE"
node_start main
check_true "with the file restored, ids flow again" "$(q -c "SELECT cosid_next() > 0")"

echo "# bad settings stop the server at start with a clear message"
node_stop main
for bad in "cosid.static_slots = 'orders:70000'" "cosid.static_slots = '5, 6'" "cosid.not_before = 'yesterday'"; do
    echo "$bad" >> "$DIR/data/postgresql.conf"
    # (pg_ctl itself: its log is start.log, where node_start's is server.log)
    as_pg "$PG_BIN/pg_ctl" -D "$DIR/data" -l "$DIR/start.log" -w start >/dev/null 2>&1 && node_stop main
    check_true "refused: $bad" "$(grep -q "invalid value for parameter \"${bad%% =*}\"" "$DIR/start.log" && echo t)"
    sed -i '$d' "$DIR/data/postgresql.conf"
done

echo "# cosid.not_before: the floor while the file does not exist yet"
rm -f "$FILE"
nb_ms=$(( $(now_ms) + 4000 ))
nb=$(date -u -d "@$((nb_ms / 1000)).$(printf %03d $((nb_ms % 1000)))" '+%Y-%m-%d %H:%M:%S.%3NZ')
echo "cosid.not_before = '$nb'" >> "$DIR/data/postgresql.conf"
node_start main
first=$(q -c "SET cosid.acquire_timeout = '10s'" -c "SELECT $(ts_ms 'cosid_next()' default)")
check_true "the first id lies after cosid.not_before ($nb)" "$([ "$first" -gt "$nb_ms" ] && echo t)"
check "the window's floor is cosid.not_before" "$nb_ms" "$(q -c "SELECT floor FROM cosid_pool() WHERE namespace = 'default'")"
sed -i '/^cosid.not_before/d' "$DIR/data/postgresql.conf"

echo "# cosid_adopt on a static namespace: ids of another generator, 3 s ahead of the clock"
ahead_ms=$(( $(now_ms) + 3000 ))
q -c "CREATE TABLE legacy (id bigint PRIMARY KEY, phase text)" \
  -c "INSERT INTO legacy SELECT (($ahead_ms - 1704067200000) << 22) | (1 << 12) | g, 'old' FROM generate_series(0, 99) g" \
  -c "GRANT ALL ON legacy TO PUBLIC" >/dev/null
adopted=$(q -c "SELECT largest_id || '|' || new_default FROM cosid_adopt('legacy', 'id', 'orders')" 2>/dev/null)
check "cosid_adopt switches the default to cosid_next('orders')" \
    "$(q -c "SELECT max(id) FROM legacy")|public.cosid_next('orders'::text)" "$adopted"
check_true "the state file keeps the namespace's new floor" "$(grep -q "^not_before orders $ahead_ms\$" "$FILE" && echo t)"
for c in 1 2 3 4; do
    q -c "INSERT INTO legacy(phase) SELECT 'new' FROM generate_series(1, 500)" >/dev/null 2>"$DIR/legacy.$c.err" &
done
wait
check "four clients insert after the adoption without an error" "" "$(cat "$DIR"/legacy.*.err)"
check_true "every new id is larger than every old one" \
    "$(q -c "SELECT min(id) FILTER (WHERE phase = 'new') > max(id) FILTER (WHERE phase = 'old') AND count(*) = 2100 FROM legacy")"
assert_store_verified "$DIR" "$PORT" postgres "the database's history of its static windows"

echo "# a promoted standby refuses the static slot its copy of the file describes"
rm -rf "$STANDBY"; mkdir -p "$STANDBY"; chown "$PG_USER" "$STANDBY"
as_pg "$PG_BIN/pg_basebackup" -h "$DIR" -p "$PORT" -D "$STANDBY/data" -R -X stream >/dev/null
# (cosid.state_file: its copy, as pg_basebackup makes of the default place)
node_attach sb "$STANDBY" "$SPORT" "cosid.state_file = 'cosid.state'"
node_start sb
node_promote sb
# The primary's file is not in the copy (it is outside the data directory here, and never
# replicated): a promoted server without a file must not start its slots at 0.
out=$(qsb -v VERBOSITY=verbose -c "SELECT cosid_next()" 2>&1 || true)
check_true "no file on a promoted server: ZC007 (it may be a copy of one that issued on these slots)" \
    "$(grep -q 'ZC007' <<<"$out" && grep -q 'does not exist, and this server is on timeline 2' <<<"$out" && echo t)"
node_stop sb
cp "$FILE" "$STANDBY/data/cosid.state"; chown "$PG_USER" "$STANDBY/data/cosid.state"
node_start sb
out=$(qsb -v VERBOSITY=verbose -c "SELECT cosid_next()" 2>&1 || true)
check_true "cosid_next() on the promoted standby fails with ZC007: the file is from another timeline" \
    "$(grep -q 'ZC007' <<<"$out" && grep -q 'from timeline 1; this server is on timeline 2' <<<"$out" \
       && grep -q "on timeline 2' and restart it" <<<"$out" && echo t)"
rm "$STANDBY/data/cosid.state"
out=$(qsb -v VERBOSITY=verbose -c "SELECT cosid_next()" 2>&1 || true)
check_true "removing the file alone does not do (ZC007)" \
    "$(grep -q 'ZC007' <<<"$out" && grep -q 'does not exist, and this server is on timeline 2' <<<"$out" && echo t)"
# What the hint says: its own static slot, cosid.not_before past the original's last id on this
# timeline, a restart.  A cosid.not_before without the timeline, or naming another, does not
# vouch for this one: it may be a copy (pg_basebackup copies postgresql.conf from the data
# directory) or be left from an earlier promotion, below what was issued since.
nb_ms=$(file_value default 5)
nb_text=$(date -u -d "@$((nb_ms / 1000)).$(printf %03d $((nb_ms % 1000)))" '+%Y-%m-%d %H:%M:%S.%3NZ')
for stale in "" " on timeline 1"; do
    node_stop sb
    { echo "cosid.static_slots = '6, orders:10'"; echo "cosid.not_before = '$nb_text$stale'"; } >> "$STANDBY/data/postgresql.conf"
    node_start sb
    out=$(qsb -v VERBOSITY=verbose -c "SELECT cosid_next()" 2>&1 || true)
    check_true "cosid.not_before '...$stale' does not vouch for timeline 2 (ZC007, the hint names it)" \
        "$(grep -q 'ZC007' <<<"$out" && grep -q "names $([ -z "$stale" ] && echo no || echo another) timeline" <<<"$out" \
           && grep -q "on timeline 2'" <<<"$out" && echo t)"
done
check "and no state file was written" "absent" "$([ -e "$STANDBY/data/cosid.state" ] && echo present || echo absent)"
node_stop sb
echo "cosid.not_before = '$nb_text on timeline 2'" >> "$STANDBY/data/postgresql.conf"
node_start sb
check_true "with its own slot and cosid.not_before, the promoted standby issues above the original's ids" \
    "$(wait_until 10 qsb -c "SET cosid.acquire_timeout = '5s'" -c "SELECT (cosid_parse(id)).slot = 6 AND $(ts_ms id default) > $nb_ms FROM (SELECT cosid_next() AS id) x")"
check_true "its new file is on timeline 2" "$(grep -q '^window default 6 [0-9]* 2$' "$STANDBY/data/cosid.state" && echo t)"
assert_store_verified "$STANDBY" "$SPORT" postgres "the promoted standby's history (the original's static windows and its own)"
exit $FAIL

#!/usr/bin/env bash
# A host clock that jumps forward a day and is corrected 3 s later, while clients insert
# (the README's row "host clock steps back while issuing": it never fails):
#   bash test/e2e/clock_jump.sh WORKDIR
# One server whose store is local, so the store's clock jumps with it (cosid.clock_offset and
# cosid.store_clock_offset moved together), two namespaces of 4 sequence bits: `j` leased
# (ttl 1 s, tolerance 200 ms), `s` on a static slot (cosid.static_ahead 500 ms).  During the
# jump both take windows a day ahead; after the correction their last ids are a day ahead of
# the clock.  The clients go on until each namespace used up the window it held at the
# correction and went on past it (the leased one on a slot that can start now, the static one
# above its ceiling); then once more with cosid.max_borrow = 0 (no id ahead of the clock) for
# the leased namespace, which then goes on at the clock on a slot whose window starts now.
# Over both:
#   - no INSERT failed, in any phase;
#   - no id twice;
#   - every leased id inside a window the store recorded for its slot (a trigger on
#     cosid.lease logs each one), every static id at or below a ceiling recorded
#     (cosid.static_ceiling, logged the same way) before the row was inserted;
#   - on each slot, a client's ids only go up, and no window of a slot starts below an id
#     issued in an earlier window of it.
# Before the fix (main at b927290) the leased namespace failed with ZC002 once its window ran
# out ("the store may be unreachable or ... clock runs ahead") until the idle timeout let the
# lease go, and the static one with ZC002 ("the keeper did not write a new one in time") until
# the clock reached the ceiling a day later; with cosid.max_borrow = 0 the leased one failed
# with ZC004 ("clock is behind the last id issued").
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
DIR="${1:-/tmp/cosid-e2e}/clock_jump"; PORT=${COSID_CLOCK_JUMP_PORT:-55487}
DAY=86400000
node_up main "$DIR" "$PORT" "cosid.ttl = '1s'" "cosid.static_slots = 's:3'" "cosid.static_ahead = '500ms'" \
    "cosid.state_file = '$DIR/cosid.state'" "max_connections = 30"
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT
# jump MS: the host clock MS ahead (0: corrected), for the keeper and the local store (a
# reload) and for the clients (which read it before each statement: a session inside a
# procedure does not see a reload).
jump() {
    q -c "UPDATE clock SET offset_ms = $1" -c "ALTER SYSTEM SET cosid.clock_offset = $1" \
      -c "ALTER SYSTEM SET cosid.store_clock_offset = $1" -c "SELECT pg_reload_conf()" >/dev/null
}

q -c "CREATE EXTENSION cosid" \
  -c "SELECT cosid_namespace_create('j', slot_bits => 4, sequence_bits => 4, total_bits => 53, tolerance => '200 ms')" \
  -c "SELECT cosid_namespace_create('s', slot_bits => 4, sequence_bits => 4, total_bits => 53)" >/dev/null
q <<'SQL' >/dev/null
CREATE TABLE tj (id bigint PRIMARY KEY DEFAULT cosid_next('j'), at timestamptz DEFAULT clock_timestamp(), client int, n bigint);
CREATE TABLE ts (id bigint PRIMARY KEY DEFAULT cosid_next('s'), at timestamptz DEFAULT clock_timestamp(), client int, n bigint);
CREATE TABLE runlog (client int, tbl text, at timestamptz, code text, message text);
CREATE TABLE stop ();
CREATE TABLE clock (offset_ms int);
INSERT INTO clock VALUES (0);
-- Every window the store writes (leases) and every static ceiling recorded, as they commit.
CREATE TABLE windows (at timestamptz DEFAULT clock_timestamp(), slot int, fence bigint, incarnation uuid,
                      floor bigint, ceiling bigint);
CREATE TABLE ceilings (at timestamptz DEFAULT clock_timestamp(), slot int, ceiling bigint);
CREATE FUNCTION log_window() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.namespace = 'j' AND NEW.incarnation IS NOT NULL THEN
        INSERT INTO public.windows(slot, fence, incarnation, floor, ceiling)
        VALUES (NEW.slot, NEW.fence, NEW.incarnation, NEW.floor, NEW.ceiling);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER log_window AFTER INSERT OR UPDATE ON cosid.lease FOR EACH ROW EXECUTE FUNCTION log_window();
CREATE FUNCTION log_ceiling() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.namespace = 's' THEN INSERT INTO public.ceilings(slot, ceiling) VALUES (NEW.slot, NEW.ceiling_ms); END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER log_ceiling AFTER INSERT OR UPDATE ON cosid.static_ceiling FOR EACH ROW EXECUTE FUNCTION log_ceiling();
-- A client: one session inserting 20 rows a statement (at most ~200 statements a second),
-- each statement in its own transaction, its outcome logged, until a row appears in `stop`.
CREATE PROCEDURE client(c int, tbl text) LANGUAGE plpgsql AS $$
DECLARE
    k bigint := 0;
    code text;
    message text;
BEGIN
    WHILE NOT EXISTS (SELECT FROM stop) LOOP
        k := k + 1;
        code := NULL;
        message := NULL;
        PERFORM set_config('cosid.clock_offset', (SELECT offset_ms FROM clock)::text, false);
        BEGIN
            EXECUTE format('INSERT INTO %I(client, n) SELECT $1, $2 * 100 + g FROM generate_series(1, 20) g', tbl)
                USING c, k;
        EXCEPTION WHEN others OR query_canceled THEN  -- (others leaves out 57014)
            code := SQLSTATE;
            message := SQLERRM;
        END;
        INSERT INTO runlog VALUES (c, tbl, clock_timestamp(), code, message);
        COMMIT;
        PERFORM pg_sleep(CASE WHEN code IS NULL THEN 0.005 ELSE 0.05 END);
    END LOOP;
END $$;
SQL

# ts_ms TABLE: an id's timestamp (Unix ms) in the namespace of TABLE
ts_of() { echo "(extract(epoch FROM (cosid_parse($1.id, '$2')).ts) * 1000)::bigint"; }
slot_of() { echo "(cosid_parse($1.id, '$2')).slot"; }
CLIENTS=()
for c in 1 2 3; do
    for tbl in tj ts; do
        ( trap - EXIT; q -c "CALL client($c, '$tbl')" >/dev/null 2>&1 ) &
        CLIENTS+=($!)
    done
done
t_start=$(now_ms)
wait_for 30 "both namespaces issuing" q -c "SELECT (SELECT count(*) > 0 FROM tj) AND (SELECT count(*) > 0 FROM ts)" >/dev/null

echo "# the host clock (and the local store's) a day ahead for 3 s"
jump $DAY
wait_for 30 "ids a day ahead in both namespaces" q -c "
    SELECT (SELECT max($(ts_of tj j)) FROM tj) > $(now_ms) + $DAY / 2
       AND (SELECT max($(ts_of ts s)) FROM ts) > $(now_ms) + $DAY / 2" >/dev/null
sleep 3
jump 0
t_fix=$(now_ms)
echo "# corrected"
# What each namespace held once the correction had reached every process (a reload is
# asynchronous: the keeper may write one more window a day ahead after it was asked): the
# lease's window and the static ceiling, a day ahead.  (A static ceiling already extended from
# the ids by then only asks for one more extension below.)
wait_for 30 "inserts 0.5 s after the correction" q -c "SELECT count(*) > 0 FROM runlog WHERE at > to_timestamp($t_fix / 1000.0) + interval '0.5 s'" >/dev/null
jump_slot=$(q -c "SELECT $(slot_of tj j) FROM tj ORDER BY id DESC LIMIT 1")
jump_ceiling_j=$(q -c "SELECT max(ceiling) FROM windows WHERE slot = $jump_slot")
jump_ceiling_s=$(q -c "SELECT max(ceiling) FROM ceilings")
echo "# at the correction: lease of slot $jump_slot ends $(( (jump_ceiling_j - t_fix) / 1000 )) s ahead, static ceiling $(( (jump_ceiling_s - t_fix) / 1000 )) s ahead"

# The windows of the jump ran out and ids went on past them: the leased namespace on a slot
# whose window starts now, the static one above the ceiling it held; then 2 s more of inserts.
past_windows() {
    q -c "SELECT EXISTS (SELECT FROM tj WHERE at > to_timestamp($t_fix / 1000.0) AND $(ts_of tj j) < $(now_ms) + 60000)
             AND EXISTS (SELECT FROM ts WHERE $(ts_of ts s) > $jump_ceiling_s)"
}
went_on=$(wait_for 20 "both namespaces past the windows held at the correction" past_windows)
t_past=$(now_ms)
[ "$went_on" = t ] && sleep 2
q -c "INSERT INTO stop DEFAULT VALUES" >/dev/null
wait "${CLIENTS[@]}" 2>/dev/null || true

echo "# again with cosid.max_borrow = 0 (no id ahead of the clock), the leased namespace alone"
q -c "DELETE FROM stop" -c "ALTER SYSTEM SET cosid.max_borrow = 0" -c "SELECT pg_reload_conf()" >/dev/null
wait_for 30 "cosid.max_borrow 0 in new sessions" q -c "SELECT current_setting('cosid.max_borrow') = '0'" >/dev/null
CLIENTS=()
for c in 4 5 6; do
    ( trap - EXIT; q -c "CALL client($c, 'tj')" >/dev/null 2>&1 ) &
    CLIENTS+=($!)
done
t_phase2=$(now_ms)
wait_for 30 "the new clients inserting" q -c "SELECT count(*) > 0 FROM tj WHERE client > 3" >/dev/null
jump $DAY
wait_for 30 "ids a day ahead" q -c "SELECT max($(ts_of tj j)) > $(now_ms) + $DAY / 2 FROM tj WHERE client > 3" >/dev/null
sleep 3
jump 0
t_fix2=$(now_ms)
moved2=$(wait_for 20 "leased ids at the clock again" q -c "
    SELECT EXISTS (SELECT FROM tj WHERE at > to_timestamp($t_fix2 / 1000.0) + interval '0.5 s' AND $(ts_of tj j) < $(now_ms) + 60000)")
echo "# max_borrow 0: ids at the clock again $(( $(now_ms) - t_fix2 )) ms after the correction"
[ "$moved2" = t ] && sleep 2
q -c "INSERT INTO stop DEFAULT VALUES" >/dev/null
wait "${CLIENTS[@]}" 2>/dev/null || true
echo "# inserts after the correction: tj $(q -c "SELECT count(*) FROM tj WHERE at > to_timestamp($t_fix / 1000.0)"), ts $(q -c "SELECT count(*) FROM ts WHERE at > to_timestamp($t_fix / 1000.0)") rows; went past both windows $(( t_past - t_fix )) ms after it"
echo "# statements: $(q -c "SELECT string_agg(tbl || ' ' || coalesce(code, 'ok') || ' ' || n, ', ') FROM (SELECT tbl, code, count(*) n FROM runlog GROUP BY 1, 2 ORDER BY 1, 2) x")"
echo "# failures by second after the correction: $(q -c "SELECT string_agg(tbl || '@' || s || 's ' || code || ' x' || n, ', ') FROM (SELECT tbl, code, floor((extract(epoch FROM at) * 1000 - $t_fix) / 1000)::int s, count(*) n FROM runlog WHERE code IS NOT NULL GROUP BY 1, 2, 3 ORDER BY 1, 3) x")"
echo "# what failed: $(q -c "SELECT coalesce(string_agg(DISTINCT code || ' ' || message, ' | '), 'nothing') FROM runlog WHERE code IS NOT NULL")"
[ "$(q -c "SELECT count(*) FROM runlog WHERE code IS NOT NULL")" = 0 ] ||
    grep -E 'cosid: .*(fail|not confirmed|orphan)' "$DIR/server.log" | tail -12 | cut -c1-300 | sed 's/^/#   keeper: /' || true

check_true "ids were issued a day ahead during the jump, in both namespaces" "$(q -c "
    SELECT (SELECT max($(ts_of tj j)) FROM tj) > $t_start + $DAY / 2 AND (SELECT max($(ts_of ts s)) FROM ts) > $t_start + $DAY / 2")"
check_true "after the correction both namespaces went past the windows they held (leased: a slot that starts now; static: above its ceiling)" "$went_on"
check "with cosid.max_borrow = 0: ids a day ahead during the jump, then at the clock again after the correction" "t|t" \
    "$(q -c "SELECT (SELECT max($(ts_of tj j)) FROM tj WHERE client > 3) > $t_phase2 + $DAY / 2")|$moved2"
check "no INSERT failed" "0" "$(q -c "SELECT count(*) FROM runlog WHERE code IS NOT NULL")"
check "no id twice" "0" "$(q -c "SELECT (SELECT count(*) - count(DISTINCT id) FROM tj) + (SELECT count(*) - count(DISTINCT id) FROM ts)")"
check "every leased id inside a window the store granted its slot" "0" "$(q -c "
    WITH w AS (SELECT slot, fence, incarnation, min(floor) AS floor, max(ceiling) AS ceiling FROM windows GROUP BY 1, 2, 3)
    SELECT count(*) FROM tj WHERE NOT EXISTS (
        SELECT FROM w WHERE w.slot = $(slot_of tj j) AND $(ts_of tj j) > w.floor AND $(ts_of tj j) <= w.ceiling)")"
check "every static id on its slot, at or below a ceiling recorded before it was inserted" "0" "$(q -c "
    SELECT count(*) FROM ts WHERE $(slot_of ts s) <> 3 OR NOT EXISTS (
        SELECT FROM ceilings c WHERE c.slot = 3 AND c.at <= ts.at AND $(ts_of ts s) <= c.ceiling)")"
check "on each slot a client's ids only go up" "0" "$(q -c "
    SELECT count(*) FROM (
        SELECT id, lag(id) OVER (PARTITION BY client, $(slot_of tj j) ORDER BY n) AS prev FROM tj
        UNION ALL
        SELECT id, lag(id) OVER (PARTITION BY client ORDER BY n) FROM ts) x WHERE id <= prev")"
check "no leased window starts below an id issued in an earlier window of its slot" "0" "$(q -c "
    WITH w AS (SELECT slot, fence, incarnation, min(floor) AS floor, max(ceiling) AS ceiling FROM windows GROUP BY 1, 2, 3),
         i AS (SELECT $(slot_of tj j) AS slot, $(ts_of tj j) AS ts FROM tj)
    SELECT count(*) FROM w later JOIN w earlier ON earlier.slot = later.slot AND earlier.fence < later.fence
    WHERE EXISTS (SELECT FROM i WHERE i.slot = earlier.slot AND i.ts > earlier.floor AND i.ts <= earlier.ceiling
                    AND i.ts > later.floor)")"
echo "# run time $(( ($(now_ms) - t_start) / 1000 )) s"
assert_store_verified "$DIR" "$PORT" postgres "the store (its clock moved back and forth)"
exit $FAIL

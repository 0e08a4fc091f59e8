#!/usr/bin/env bash
# cosid_adopt (issue 11): tables whose ids came from bigserial, from an IDENTITY, and from
# another Snowflake generator whose ids lie ahead of cosid's, move onto cosid_next(); then
# many clients insert: no unique violation, every new id larger than every old one.  Also
# what it refuses, and a pg_dump / pg_restore round trip into another server afterwards.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/adopt"; PORT=55474
TARGET="$DIR/target"; TPORT=55475
# (the target's data directory is in main's: a target a killed run left behind is stopped first)
node_register t "$TARGET" "$TPORT"; node_stop t immediate
node_up main "$DIR" "$PORT" "cosid.ttl = '3s'" "max_connections = 40"
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT
mkdir -p "$DIR/clients"; chown "$PG_USER" "$DIR/clients"
# The foreign generator: Twitter's layout (41 bits of ms since its epoch, 10 machine bits, 12
# sequence bits), three machines, its newest ids 3 s ahead of this clock (a clock running
# ahead).  Namespace 'legacy' has the same bits and epoch, so its ids continue them.
TWITTER_EPOCH=1288834974657
# (the store's limits fit the keeper's ttl: the restore below raises every floor by them)
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_ttl => '3s', max_tolerance => '1s')" \
  -c "SELECT cosid_namespace_create('legacy', epoch => to_timestamp($TWITTER_EPOCH / 1000.0))" \
  -c "CREATE TABLE serial_t (id bigserial PRIMARY KEY, phase text)" \
  -c "INSERT INTO serial_t(phase) SELECT 'old' FROM generate_series(1, 5000)" \
  -c "CREATE TABLE ident_t (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, phase text)" \
  -c "INSERT INTO ident_t(phase) SELECT 'old' FROM generate_series(1, 5000)" \
  -c "CREATE TABLE shared_t (id bigserial PRIMARY KEY, phase text)" \
  -c "CREATE TABLE other_t (id bigint DEFAULT nextval('shared_t_id_seq'))" \
  -c "INSERT INTO shared_t(phase) SELECT 'old' FROM generate_series(1, 10)" \
  -c "CREATE TABLE foreign_t (id bigint PRIMARY KEY, phase text)" \
  -c "INSERT INTO foreign_t
      SELECT ((ms - $TWITTER_EPOCH) << 22) | (m << 12) | s, 'old'
      FROM (SELECT (extract(epoch FROM now()) * 1000)::bigint + 3000 - g / 10 AS ms,
                   g % 3 AS m, g % 10 AS s FROM generate_series(0, 4999) g) x" \
  -c "SELECT cosid_namespace_create('web', slot_bits => 4, sequence_bits => 8, total_bits => 53)" \
  -c "CREATE TABLE small_t (id int PRIMARY KEY)" -c "CREATE TABLE uuid_t (id uuid PRIMARY KEY)" \
  -c "CREATE ROLE app LOGIN" -c "GRANT ALL ON ALL TABLES IN SCHEMA public TO app" >/dev/null
check_true "the foreign ids lie ahead of the ids cosid issues in 'legacy' now" \
    "$(q -c "SELECT max(id) > cosid_next('legacy') FROM foreign_t")"

echo "# what cosid_adopt refuses, changing nothing"
refused() {  # refused NAME SQLSTATE TEXT SQL
    local out; out=$(q -v VERBOSITY=verbose -c "$4" 2>&1 || true)
    check_true "$1 ($2)" "$(grep -q "ERROR:  $2" <<<"$out" && grep -qF "$3" <<<"$out" && echo t)"
}
refused "ids of another epoch, years ahead in 'default'" ZC005 "epoch at or before" \
    "SELECT * FROM cosid_adopt('foreign_t', 'id')"
check "the refused table keeps no default" "" "$(q -c "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = 'foreign_t'::regclass")"
refused "63-bit ids into a 53-bit namespace" ZC005 "every id is below 9007199254740992" \
    "SELECT * FROM cosid_adopt('foreign_t', 'id', 'web')"
refused "an int column" 42804 "TYPE bigint" "SELECT * FROM cosid_adopt('small_t', 'id')"
refused "a uuid column" 42804 "uuid column cannot hold bigint ids" "SELECT * FROM cosid_adopt('uuid_t', 'id')"
refused "an unknown column" 42703 "does not exist" "SELECT * FROM cosid_adopt('serial_t', 'nope')"
refused "an unknown namespace" 42704 "does not exist" "SELECT * FROM cosid_adopt('serial_t', 'id', 'nope')"
refused "a role that is not cosid_admin" 42501 "permission denied" "SET ROLE app; SELECT * FROM cosid_adopt('serial_t', 'id')"
check "the bigserial table still uses its sequence" "nextval('serial_t_id_seq'::regclass)" \
    "$(q -c "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = 'serial_t'::regclass")"

echo "# adopting"
check "a bigserial column: default cosid_next('default'), its sequence dropped" \
    "5000|public.cosid_next('default'::text)|public.serial_t_id_seq|dropped" \
    "$(q -c "SELECT concat_ws('|', largest_id, new_default, sequence, sequence_action) FROM cosid_adopt('serial_t', 'id')")"
check "an IDENTITY column: the identity and its sequence dropped" \
    "public.ident_t_id_seq|dropped with the identity|" \
    "$(q -c "SELECT concat_ws('|', sequence, sequence_action) FROM cosid_adopt('ident_t', 'id')")|$(q -c "SELECT attidentity FROM pg_attribute WHERE attrelid = 'ident_t'::regclass AND attname = 'id'")"
check "a sequence another column uses is kept, no longer owned by the column" \
    "kept: 1 other object uses it; no longer owned by the column|0" \
    "$(q -c "SELECT sequence_action FROM cosid_adopt('shared_t', 'id')")|$(q -c "SELECT count(*) FROM pg_depend WHERE objid = 'shared_t_id_seq'::regclass AND deptype = 'a'")"
check_true "the other column still draws from it" "$(q -c "INSERT INTO other_t DEFAULT VALUES RETURNING id > 10")"
foreign_max=$(q -c "SELECT max(id) FROM foreign_t")
check "the foreign column goes into 'legacy'; its floor is the largest id's timestamp" "$foreign_max|true" \
    "$(q -c "SELECT largest_id || '|' || (ids_above = to_timestamp(((largest_id >> 22) + $TWITTER_EPOCH) / 1000.0))
             FROM cosid_adopt('foreign_t', 'id', 'legacy')")"
check_true "cosid_adopt returned once the clock passed that floor (inserts need not wait)" \
    "$(q -c "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint > (SELECT (max(id) >> 22) + $TWITTER_EPOCH FROM foreign_t)")"
check "adopting again changes nothing more" "none" \
    "$(q -c "SELECT concat_ws('|', sequence, sequence_action) FROM cosid_adopt('serial_t', 'id')")"
check_true "the store keeps the namespace's floor" \
    "$(q -c "SELECT not_before_ms = (SELECT (max(id) >> 22) + $TWITTER_EPOCH FROM foreign_t) FROM cosid.namespace WHERE name = 'legacy'")"

echo "# eight clients insert into the adopted tables"
# A fixed amount of work (13 rounds of 20 rows per table each), not a time: a loaded machine
# had not reached 2,000 rows within the 30 s the check once gave them.
for c in $(seq 1 8); do
    (
        trap - EXIT; set +e
        for _ in $(seq 1 13); do
            if out=$(q -U app -v VERBOSITY=sqlstate \
                  -c "INSERT INTO serial_t(phase) SELECT 'new' FROM generate_series(1, 20)" \
                  -c "INSERT INTO ident_t(phase) SELECT 'new' FROM generate_series(1, 20)" \
                  -c "INSERT INTO foreign_t(phase) SELECT 'new' FROM generate_series(1, 20)" 2>&1); then
                echo "ok"; else echo "$out" | head -1; fi
        done > "$DIR/clients/$c.log"
    ) &
done
wait
check "the clients inserted 8 x 13 x 20 rows into each table" "2080 2080 2080" \
    "$(q -c "SELECT (SELECT count(*) FROM serial_t WHERE phase = 'new') || ' ' || (SELECT count(*) FROM ident_t WHERE phase = 'new') || ' ' || (SELECT count(*) FROM foreign_t WHERE phase = 'new')")"
check "no client saw an error (no unique violation)" "" "$(cat "$DIR"/clients/*.log | grep -v '^ok$' | sort | uniq -c)"
for t in serial_t ident_t foreign_t; do
    check_true "$t: every new id is larger than every old one ($(q -c "SELECT count(*) FROM $t WHERE phase = 'new'") new rows)" \
        "$(q -c "SELECT min(id) FILTER (WHERE phase = 'new') > max(id) FILTER (WHERE phase = 'old') FROM $t")"
done

echo "# pg_dump / pg_restore into another server, then adopt again there"
q -c "SELECT cosid_release()" >/dev/null
as_pg pg_dump -h "$DIR" -p "$PORT" -Fc -f "$DIR/adopted.dump" postgres
# shellcheck disable=SC2034  # NODE_DB: read by node_sql (test/lib/node.sh)
NODE_DB["t"]=dst  # qt: the restored database
node_up t "$TARGET" "$TPORT" "cosid.database = 'dst'" "cosid.ttl = '3s'" \
    "cosid.acquire_timeout = '10s'"  # the restored store keeps its origin's max_ttl, and raises its floors by max_ttl + 2 x max_tolerance
node_sql_db t postgres -c "CREATE DATABASE dst" -c "CREATE ROLE app LOGIN" >/dev/null
restore_errors=$(as_pg pg_restore -h "$TARGET" -p "$TPORT" -d dst "$DIR/adopted.dump" 2>&1 | grep -c 'error' || true)
check "pg_restore reports no error" 0 "$restore_errors"
check "the restored store keeps 'legacy''s floor" "$(q -c "SELECT not_before_ms FROM cosid.namespace WHERE name = 'legacy'")" \
    "$(qt -c "SELECT not_before_ms FROM cosid.namespace WHERE name = 'legacy'")"
check "adopting the restored tables on the new store" "3" \
    "$(qt -c "SELECT count(*) FROM (SELECT cosid_adopt('serial_t', 'id') UNION ALL SELECT cosid_adopt('ident_t', 'id')
                                   UNION ALL SELECT cosid_adopt('foreign_t', 'id', 'legacy')) a")"
# The dump was taken while this server issued from its store: the restored store is a fork of
# it and grants nothing until an administrator acknowledges it (here the origin goes on: the
# copy is a separate system, whose ids are compared only among themselves below).
out=$(qt -v VERBOSITY=verbose -c "INSERT INTO serial_t(phase) VALUES ('restored')" 2>&1 || true)
check "the restored store, a copy of an issuing server's, grants nothing before it is acknowledged (ZC009)" ZC009 \
    "$(sqlstate_of "$out")"
qt -c "SELECT cosid_fork_acknowledge()" >/dev/null
qt -c "INSERT INTO serial_t(phase) SELECT 'restored' FROM generate_series(1, 500)" \
   -c "INSERT INTO ident_t(phase) SELECT 'restored' FROM generate_series(1, 500)" \
   -c "INSERT INTO foreign_t(phase) SELECT 'restored' FROM generate_series(1, 500)" >/dev/null
for t in serial_t ident_t foreign_t; do
    check_true "$t on the restored server: new ids above every restored one" \
        "$(qt -c "SELECT min(id) FILTER (WHERE phase = 'restored') > max(id) FILTER (WHERE phase <> 'restored') FROM $t")"
done
assert_store_verified "$DIR" "$PORT" postgres "the first server's store"
assert_store_verified "$TARGET" "$TPORT" dst "the restored store (its history came with the dump)"
exit $FAIL

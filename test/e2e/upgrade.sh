#!/usr/bin/env bash
# ALTER EXTENSION cosid UPDATE from 1.0 to the current version in a database that holds leases and ids, with
# clients inserting all along: no window is lost (every lease keeps its fence, floor and
# ceiling), zero duplicates, every id inside a window the store handed out, and the updated
# extension is the same as a fresh install (objects, function definitions, privileges, columns,
# triggers and when they fire, indexes).
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/upgrade"; PORT=55477
stop_server "$DIR" immediate
start_server "$DIR" "$PORT" "cosid.ttl = '3s'" "max_connections = 40"
trap 'kill $(jobs -p) 2>/dev/null || true; stop_server "$DIR" immediate' EXIT
mkdir -p "$DIR/clients"; chown "$PG_USER" "$DIR/clients"
q -c "CREATE EXTENSION cosid VERSION '1.0'" \
  -c "SELECT cosid_namespace_create('f', slot_bits => 6, tolerance => '300 ms')" \
  -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), client int, phase text)" \
  -c "CREATE TABLE observed (at timestamptz DEFAULT clock_timestamp(), namespace text, slot int, fence bigint,
                             incarnation uuid, owner_key text, floor bigint, ceiling bigint)" >/dev/null
check "installed as 1.0" "1.0" "$(q -c "SELECT extversion FROM pg_extension WHERE extname = 'cosid'")"
check "the library serves a 1.0 catalog: cosid_pool() and cosid_stats() with their 1.0 columns" "10|13" \
    "$(q -c "SELECT cosid_next('f') > 0" >/dev/null; q -c "SELECT (SELECT count(*) FROM information_schema.parameters WHERE specific_name LIKE 'cosid_pool%' AND parameter_mode = 'OUT') || '|' || (SELECT count(*) FROM information_schema.parameters WHERE specific_name LIKE 'cosid_stats%' AND parameter_mode = 'OUT')")"
q -c "SELECT * FROM cosid_pool()" -c "SELECT * FROM cosid_stats()" >/dev/null

PHASE=before; start_clients 4
check_true "the clients insert on 1.0" "$(wait_until 60 q -c "SELECT count(*) >= 2000 FROM t")"
held=$(q -c "SELECT string_agg(namespace || ':' || slot || ':' || fence || ':' || floor, ',' ORDER BY namespace, slot)
             FROM cosid.lease WHERE incarnation IS NOT NULL")
ceilings=$(q -c "SELECT string_agg(namespace || ':' || slot || ':' || ceiling, ',' ORDER BY namespace, slot)
                 FROM cosid.lease WHERE incarnation IS NOT NULL")
q -c "ALTER EXTENSION cosid UPDATE" >/dev/null
current=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$(dirname "${BASH_SOURCE[0]}")/../../cosid.control")
check "updated to $current" "$current" "$(q -c "SELECT extversion FROM pg_extension WHERE extname = 'cosid'")"
check_true "right after the update the store names a server issuing from it (a copy made now is a fork)" \
    "$(q -c "SELECT issuer_incarnation IS NOT NULL FROM cosid.store_state")"
check_true "every lease held before the update is still held: same fence, same floor, ceiling not lower ($held)" "$(q -c "
    WITH before AS (SELECT split_part(x, ':', 1) AS ns, split_part(x, ':', 2)::int AS slot,
                           split_part(x, ':', 3)::bigint AS fence, split_part(x, ':', 4)::bigint AS floor
                    FROM unnest(string_to_array('$held', ',')) x),
         c AS (SELECT split_part(x, ':', 1) AS ns, split_part(x, ':', 2)::int AS slot,
                      split_part(x, ':', 3)::bigint AS ceiling FROM unnest(string_to_array('$ceilings', ',')) x)
    SELECT count(*) > 0 AND bool_and(l.fence = b.fence AND l.floor = b.floor AND l.ceiling >= c.ceiling)
    FROM before b JOIN c USING (ns, slot) JOIN cosid.lease l ON l.namespace = b.ns AND l.slot = b.slot")"
n=$(q -c "SELECT count(*) FROM t")
check_true "the clients go on inserting after the update" "$(wait_until 60 q -c "SELECT count(*) >= $n + 2000 FROM t")"
check "the new functions answer" "lease|f" \
    "$(q -c "SELECT kind FROM cosid_pool() WHERE namespace = 'f' AND state = 'active' LIMIT 1")|$(q -c "SELECT static_clock_guard IS NOT NULL FROM cosid_stats()")"
stop_clients
final_checks

echo "# the updated extension is a fresh one"
q -c "CREATE DATABASE fresh" >/dev/null
psql_at "$DIR" "$PORT" fresh -c "SET client_min_messages = error" -c "CREATE EXTENSION cosid" >/dev/null
catalog() {  # every object of the extension, functions with their definition and privileges, table columns
    psql_at "$DIR" "$PORT" "$1" -At -c "
        SELECT pg_describe_object(classid, objid, 0) FROM pg_depend
        WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
          AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'cosid')
        UNION ALL
        SELECT p.oid::regprocedure || ' ' || md5(pg_get_functiondef(p.oid)) || ' ' || coalesce(p.proacl::text, '')
        FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
        WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'cosid') AND p.prokind = 'f'
        UNION ALL
        SELECT c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull
               || ' ' || coalesce(pg_get_expr(ad.adbin, ad.adrelid), '')
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'cosid'
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
        WHERE c.relkind = 'r'
        UNION ALL
        SELECT conrelid::regclass || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
        WHERE connamespace = 'cosid'::regnamespace
        UNION ALL  -- triggers with when they fire (tgenabled: O, A always, R replica), and indexes
        SELECT pg_get_triggerdef(t.oid) || ' ' || t.tgenabled::text FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        WHERE c.relnamespace = 'cosid'::regnamespace AND NOT t.tgisinternal
        UNION ALL
        SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
        WHERE c.relnamespace = 'cosid'::regnamespace
        ORDER BY 1" | sort
}
catalog postgres > "$DIR/updated.catalog"; catalog fresh > "$DIR/fresh.catalog"
check "objects, function definitions, privileges, columns, triggers and indexes are the same ($(wc -l < "$DIR/fresh.catalog") lines)" "" \
    "$(diff "$DIR/updated.catalog" "$DIR/fresh.catalog" | head -20)"
exit $FAIL

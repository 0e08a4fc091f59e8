#!/usr/bin/env bash
# ALTER EXTENSION cosid UPDATE from every old version (1.0 to the one before the current) to
# the current one, each in a store that holds leases and ids, with clients inserting all
# along: no window is lost (every lease keeps its fence, floor and ceiling), zero duplicates,
# every id inside a window the store handed out, and the updated extension is the same as a
# fresh install (objects, function and view definitions, privileges, comments, the tables
# pg_dump carries, columns in their order, triggers and when they fire, indexes).
#
# sql/ holds one install script (cosid--1.0.sql) and the update scripts: CREATE EXTENSION
# runs them all in turn, and what only a new store needs runs when the extension is being
# created (the block at the end of cosid--1.5--1.6.sql).  So a fresh store is also checked
# here, in the keeper's database: its default namespace starts at the store's now, it names
# no issuer, and CREATE EXTENSION in a restore's session leaves the restore's mark.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
ROOT="${1:-/tmp/cosid-e2e}/upgrade"; PORT=55477
current=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$(dirname "${BASH_SOURCE[0]}")/../../cosid.control")
# Every version a store can be updated from: each step of the chain of update scripts.
olds=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../sql" && ls cosid--*--*.sql | sed 's/^cosid--\(.*\)--.*\.sql$/\1/' | sort -V)
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT

catalog() {  # every object of the extension and what makes it up
    node_sql_db main "$1" -c "
        WITH member AS (SELECT classid, objid, objsubid FROM pg_depend
                        WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
                          AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'cosid'))
        SELECT pg_describe_object(classid, objid, 0) FROM member
        UNION ALL
        SELECT p.oid::regprocedure || ' ' || md5(pg_get_functiondef(p.oid)) || ' ' || coalesce(p.proacl::text, '')
        FROM pg_proc p JOIN member m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
        WHERE p.prokind = 'f'
        UNION ALL  -- tables and views: privileges, columns in their order, view definitions
        SELECT c.oid::regclass || ' ' || c.relkind::text || ' ' || coalesce(c.relacl::text, '') || ' '
               || CASE c.relkind WHEN 'v' THEN md5(pg_get_viewdef(c.oid)) ELSE '' END
        FROM pg_class c JOIN member m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
        UNION ALL
        SELECT c.oid::regclass || '.' || a.attname || ' #' || a.attnum || ' ' || format_type(a.atttypid, a.atttypmod)
               || ' ' || a.attnotnull || ' ' || coalesce(pg_get_expr(ad.adbin, ad.adrelid), '') || ' ' || coalesce(a.attacl::text, '')
        FROM pg_class c JOIN member m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
        WHERE c.relkind IN ('r', 'v')
        UNION ALL
        SELECT conrelid::regclass || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
        WHERE connamespace = 'cosid'::regnamespace
        UNION ALL  -- triggers with when they fire (tgenabled: O, A always, R replica), and indexes
        SELECT pg_get_triggerdef(t.oid) || ' ' || t.tgenabled::text FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        WHERE c.relnamespace = 'cosid'::regnamespace AND NOT t.tgisinternal
        UNION ALL
        SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
        WHERE c.relnamespace = 'cosid'::regnamespace
        UNION ALL
        SELECT 'event trigger ' || evtname || ' ' || evtevent || ' ' || evtfoid::regproc || ' ' || evtenabled::text
        FROM pg_event_trigger
        UNION ALL
        SELECT 'comment ' || pg_describe_object(d.classoid, d.objoid, d.objsubid) || ': ' || d.description
        FROM pg_description d JOIN member m ON m.classid = d.classoid AND m.objid = d.objoid
        UNION ALL  -- the tables pg_dump carries, and which of their rows
        SELECT 'dumped ' || c::regclass || ' ' || w FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS u(c, w)
        WHERE e.extname = 'cosid'
        UNION ALL
        SELECT 'schema cosid ' || coalesce(nspacl::text, '') FROM pg_namespace WHERE nspname = 'cosid'
        ORDER BY 1" | sort
}

echo "# a fresh store, made in the keeper's database"
DIR="$ROOT/fresh"
node_up main "$DIR" "$PORT" "cosid.ttl = '3s'"
check "CREATE EXTENSION: the default namespace's 1024 slots start at the store's now, the store names no issuer, its max_ttl is the column's default" \
    "1024|true|true" \
    "$(q -c "SET client_min_messages = error" -c "BEGIN" -c "CREATE EXTENSION cosid" \
         -c "SELECT (SELECT count(*) FROM cosid.lease WHERE namespace = 'default' AND fence = 0
                       AND floor = ceiling AND next_floor = floor AND floor BETWEEN cosid.store_now() - 60000 AND cosid.store_now())
                    || '|' || (SELECT issuer_incarnation IS NULL AND system_identifier <> 0 FROM cosid.store_state)
                    || '|' || (SELECT s.max_ttl_ms = pg_get_expr(d.adbin, d.adrelid)::bigint
                               FROM cosid.store_state s, pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
                               WHERE d.adrelid = 'cosid.store_state'::regclass AND a.attname = 'max_ttl_ms')" -c "ROLLBACK")"
check "CREATE EXTENSION in a restore's session (row_security off): the store's record is the restore's mark" "0|0" \
    "$(q -c "SET client_min_messages = error" -c "SET row_security = off" -c "BEGIN" -c "CREATE EXTENSION cosid" \
         -c "SELECT system_identifier || '|' || timeline FROM cosid.store_state" -c "ROLLBACK")"
check "CREATE EXTENSION of an old version, then ALTER EXTENSION UPDATE in the same transaction: still a new store" "1024|true" \
    "$(q -c "SET client_min_messages = error" -c "BEGIN" -c "CREATE EXTENSION cosid VERSION '1.3'" -c "ALTER EXTENSION cosid UPDATE" \
         -c "SELECT (SELECT count(*) FROM cosid.lease WHERE namespace = 'default' AND floor > 0)
                    || '|' || (SELECT issuer_incarnation IS NULL FROM cosid.store_state)" -c "ROLLBACK")"
node_stop main immediate

i=0
for from in $olds; do
    echo "# from $from"
    DIR="$ROOT/$from"; i=$((i + 1))
    # shellcheck disable=SC2034  # PHASE: read by the clients of test/lib/faults.sh
    PHASE=before
    node_up main "$DIR" "$PORT" "cosid.ttl = '3s'" "max_connections = 40"
    mkdir -p "$DIR/clients"; chown "$PG_USER" "$DIR/clients"
    q -c "SET client_min_messages = error" -c "CREATE EXTENSION cosid VERSION '$from'" \
      -c "SELECT cosid_namespace_create('f', slot_bits => 6, tolerance => '300 ms')" \
      -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next('f'), client int, phase text)" \
      -c "CREATE TABLE observed (at timestamptz DEFAULT clock_timestamp(), namespace text, slot int, fence bigint,
                                 incarnation uuid, owner_key text, floor bigint, ceiling bigint)" >/dev/null
    check "installed as $from" "$from" "$(q -c "SELECT extversion FROM pg_extension WHERE extname = 'cosid'")"
    if [ "$from" = 1.0 ]; then
        check "the library serves a 1.0 catalog: cosid_pool() and cosid_stats() with their 1.0 columns" "10|13" \
            "$(q -c "SELECT cosid_next('f') > 0" >/dev/null; q -c "SELECT (SELECT count(*) FROM information_schema.parameters WHERE specific_name LIKE 'cosid_pool%' AND parameter_mode = 'OUT') || '|' || (SELECT count(*) FROM information_schema.parameters WHERE specific_name LIKE 'cosid_stats%' AND parameter_mode = 'OUT')")"
    fi
    q -c "SELECT * FROM cosid_pool()" -c "SELECT * FROM cosid_stats()" >/dev/null

    start_clients 4
    check_true "the clients insert on $from" "$(wait_until 60 q -c "SELECT count(*) >= 1000 FROM t")"
    held=$(q -c "SELECT string_agg(namespace || ':' || slot || ':' || fence || ':' || floor, ',' ORDER BY namespace, slot)
                 FROM cosid.lease WHERE incarnation IS NOT NULL")
    ceilings=$(q -c "SELECT string_agg(namespace || ':' || slot || ':' || ceiling, ',' ORDER BY namespace, slot)
                     FROM cosid.lease WHERE incarnation IS NOT NULL")
    q -c "SET client_min_messages = error" -c "ALTER EXTENSION cosid UPDATE" >/dev/null
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
    check_true "the clients go on inserting after the update" "$(wait_until 60 q -c "SELECT count(*) >= $n + 1000 FROM t")"
    check "the new functions answer" "lease|f" \
        "$(q -c "SELECT kind FROM cosid_pool() WHERE namespace = 'f' AND state = 'active' LIMIT 1")|$(q -c "SELECT static_clock_guard IS NOT NULL FROM cosid_stats()")"
    stop_clients
    final_checks

    q -c "CREATE DATABASE fresh" >/dev/null
    node_sql_db main fresh -c "SET client_min_messages = error" -c "CREATE EXTENSION cosid" >/dev/null
    catalog postgres > "$DIR/updated.catalog"; catalog fresh > "$DIR/fresh.catalog"
    check "updated from $from = fresh: objects, definitions, privileges, comments, dumped tables, columns, triggers, indexes ($(wc -l < "$DIR/fresh.catalog") lines)" "" \
        "$(diff "$DIR/updated.catalog" "$DIR/fresh.catalog" | head -20)"
    node_stop main immediate
done
check_true "every old version was updated ($(echo $olds))" "$([ "$i" -ge 6 ] && echo t || echo f)"
exit $FAIL

-- cosid 1.0 -> 1.1: static slots and cosid_adopt (issue 11).  Leases, windows and ids are
-- untouched: the lease table keeps every row as it is, and the store functions keep their
-- signatures (a keeper running the new library works with either version meanwhile).
\echo Use "ALTER EXTENSION cosid UPDATE TO '1.1'" to load this file. \quit

-- A namespace's not-before: no window starts below it (cosid_adopt raises it).
ALTER TABLE cosid.namespace
    ADD COLUMN not_before_ms bigint NOT NULL DEFAULT 0 CHECK (not_before_ms >= 0);

-- Every new window starts at or above the namespace's not-before.
CREATE OR REPLACE FUNCTION cosid.acquire(p_namespace text, p_owner_key text, p_incarnation uuid,
                              p_ttl_ms bigint, p_preferred int DEFAULT NULL)
RETURNS TABLE (slot int, fence bigint, expires_at bigint, floor bigint, ceiling bigint,
               next_floor bigint, store_now bigint, duplicate_key boolean, earliest_expiry bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_now  bigint := cosid.store_now();
    v_ns   cosid.namespace := cosid._namespace_row(p_namespace);
    v_dup  boolean;
    v_cond text;
    v_pref int := 0;
    v_after int;
    v_batch int;
    c      record;
    r      cosid.lease;
BEGIN
    IF p_owner_key IS NULL OR p_owner_key = '' OR p_incarnation IS NULL THEN
        RAISE EXCEPTION 'cosid.acquire needs an owner key and an incarnation'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_ttl_ms IS NULL OR p_ttl_ms <= 0 THEN
        RAISE EXCEPTION 'cosid lease ttl must be positive, got % ms', p_ttl_ms
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cosid._follow_timeline(p_ttl_ms);
    v_now := cosid.store_now();  -- after a raise, which may have waited for another caller's
    v_dup := EXISTS (SELECT 1 FROM cosid.lease l
                     WHERE l.namespace = p_namespace
                       AND coalesce(l.owner_key, l.previous_owner_key) = p_owner_key
                       AND l.owner_key = p_owner_key
                       AND l.incarnation <> p_incarnation AND l.expires_at > v_now);
    -- Only available slots are candidates: free, or expired.  A live lease is never handed
    -- out again, not even to its own incarnation, since the store cannot know what that
    -- incarnation issued in it.  Nor is an expired lease of the asking incarnation, except
    -- as the very last resort: its owner renews it (a renewal succeeds after expiry while
    -- nobody took over) or releases it, and taking it over would only cut its window short.
    -- As a last resort it is safe (the new window starts at its next_floor, its ceiling),
    -- and it keeps an orphan the owner never learnt of (an acquire whose answer was lost)
    -- from being lost to it for good.
    -- Preference: (1) preferred, (2) sticky: last owned by the same key, (3) lowest; each
    -- first among slots whose next window can start now (next_floor <= now: not one released
    -- at a ceiling still ahead, where the holder would wait for its clock to pass the floor),
    -- then (4) the lowest of any, then (5) an expired lease of the asking incarnation.  Each
    -- preference is read in slot order, 16 candidates at a time (an index scan, whatever the
    -- number of slots), until a slot is won; a slot lost to a racing acquirer just moves on
    -- to the next.  A slot that fits two preferences comes
    -- twice; the second try matches no row.
    FOREACH v_cond IN ARRAY ARRAY[
        'l.slot = $3 AND (l.incarnation IS NULL OR (l.expires_at <= $4 AND l.incarnation <> $6))'
            || ' AND l.next_floor <= $4',
        'coalesce(l.owner_key, l.previous_owner_key) = $2'
            || ' AND (l.incarnation IS NULL OR (l.expires_at <= $4 AND l.incarnation <> $6)) AND l.next_floor <= $4',
        '(l.incarnation IS NULL OR (l.expires_at <= $4 AND l.incarnation <> $6)) AND l.next_floor <= $4',
        '(l.incarnation IS NULL OR (l.expires_at <= $4 AND l.incarnation <> $6))',
        'l.incarnation = $6 AND l.expires_at <= $4']
    LOOP
        v_pref := v_pref + 1;
        v_after := -1;
        LOOP
            v_batch := 0;
            FOR c IN EXECUTE 'SELECT l.slot FROM cosid.lease l WHERE l.namespace = $1 AND l.slot > $5 AND '
                             || v_cond || ' ORDER BY l.slot LIMIT 16'
                     USING p_namespace, p_owner_key, p_preferred, v_now, v_after, p_incarnation
            LOOP
                v_batch := v_batch + 1;
                v_after := c.slot;
                UPDATE cosid.lease l
                   SET previous_owner_key = coalesce(l.owner_key, l.previous_owner_key),
                       owner_key   = p_owner_key,
                       incarnation = p_incarnation,
                       fence       = l.fence + 1,
                       floor       = greatest(l.next_floor, v_ns.not_before_ms),
                       expires_at  = v_now + p_ttl_ms,
                       ceiling     = greatest(v_now + p_ttl_ms + v_ns.tolerance_ms, l.next_floor, v_ns.not_before_ms),
                       next_floor  = greatest(v_now + p_ttl_ms + v_ns.tolerance_ms, l.next_floor, v_ns.not_before_ms)
                 WHERE l.namespace = p_namespace AND l.slot = c.slot
                   AND (l.incarnation IS NULL
                        OR (l.expires_at <= v_now AND (l.incarnation <> p_incarnation OR v_pref = 5)))
                RETURNING l.* INTO r;
                IF FOUND THEN
                    RETURN QUERY SELECT r.slot, r.fence, r.expires_at, r.floor, r.ceiling, r.next_floor,
                                        v_now, v_dup, NULL::bigint;
                    RETURN;
                END IF;
            END LOOP;
            EXIT WHEN v_batch < 16;
        END LOOP;
    END LOOP;
    -- Exhausted: no slot, and the earliest expiry to wait for.
    RETURN QUERY SELECT NULL::int, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
                        NULL::bigint, v_now, v_dup,
                        (SELECT min(l.expires_at) FROM cosid.lease l
                          WHERE l.namespace = p_namespace AND l.incarnation IS NOT NULL
                            AND l.expires_at > v_now);
END $$;

CREATE FUNCTION cosid.raise_floor(p_namespace text, p_floor_ms bigint, p_slot_bits int, p_sequence_bits int,
                                  p_timestamp_bits int, p_epoch_ms bigint, p_unit text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_ns cosid.namespace := cosid._namespace_row(p_namespace);
    v    bigint;
BEGIN
    IF p_floor_ms IS NULL OR p_floor_ms < 0 THEN
        RAISE EXCEPTION 'cosid floor must be a non-negative Unix time in ms, got %', p_floor_ms
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (v_ns.timestamp_bits, v_ns.slot_bits, v_ns.sequence_bits, v_ns.epoch_ms, v_ns.unit)
       IS DISTINCT FROM (p_timestamp_bits, p_slot_bits, p_sequence_bits, p_epoch_ms, p_unit) THEN
        RAISE EXCEPTION 'here %/%/% bits, epoch % ms, unit %; in the lease store %/%/% bits, epoch % ms, unit %',
            p_timestamp_bits, p_slot_bits, p_sequence_bits, p_epoch_ms, p_unit,
            v_ns.timestamp_bits, v_ns.slot_bits, v_ns.sequence_bits, v_ns.epoch_ms, v_ns.unit
            USING ERRCODE = 'invalid_object_definition';
    END IF;
    UPDATE cosid.namespace n SET not_before_ms = greatest(n.not_before_ms, p_floor_ms)
     WHERE n.name = p_namespace RETURNING n.not_before_ms INTO v;
    RETURN v;
END $$;
REVOKE ALL ON FUNCTION cosid.raise_floor(text, bigint, int, int, int, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid.raise_floor(text, bigint, int, int, int, bigint, text) TO cosid_keeper;

CREATE FUNCTION cosid._static_notice(p_namespace text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_slot int;
    v_static text := pg_catalog.current_setting('cosid.static_slots', true);
BEGIN
    IF p_namespace IS NOT NULL THEN
        v_slot := cosid._static_slot(p_namespace);
        IF v_slot IS NOT NULL THEN
            RAISE NOTICE 'cosid namespace "%" uses static slot % on this instance: it has no lease in the store',
                p_namespace, v_slot
                USING DETAIL = 'Its windows come from the state file (cosid.state_file); cosid_pool() shows them. '
                               'The rows listed are the store''s, which this instance does not use for it.';
        END IF;
    ELSIF v_static IS NOT NULL AND v_static <> '' THEN
        RAISE NOTICE 'this instance has static slots (cosid.static_slots = ''%''): they have no leases in the store',
            v_static
            USING DETAIL = 'Their windows come from the state file (cosid.state_file); cosid_pool() shows them.';
    END IF;
    RETURN true;
END $$;

CREATE OR REPLACE FUNCTION cosid_leases(namespace text DEFAULT NULL)
RETURNS TABLE (namespace text, slot int, owner_key text, incarnation uuid, fence bigint,
               expires_at timestamptz, floor bigint, ceiling bigint, next_floor bigint,
               state text)
LANGUAGE sql STABLE AS $$
    WITH now AS MATERIALIZED (  -- once: the notice is said once
        SELECT cosid.store_now() AS ms,
               CASE WHEN $1 IS NOT NULL THEN (cosid._namespace_row($1)).name END AS checked,
               cosid._static_notice($1) AS noticed)
    SELECT l.namespace, l.slot, l.owner_key, l.incarnation, l.fence,
           to_timestamp(l.expires_at / 1000.0), l.floor, l.ceiling, l.next_floor,
           CASE WHEN l.incarnation IS NULL THEN 'free'
                WHEN l.expires_at > now.ms THEN 'held'
                ELSE 'expired' END
    FROM now, cosid.lease l
    WHERE now.noticed AND ($1 IS NULL OR l.namespace = now.checked)
    ORDER BY l.namespace, l.slot
$$;

-- New output columns: cosid_pool().kind, cosid_stats()'s static_* columns.
DROP FUNCTION cosid_pool();
CREATE FUNCTION cosid_pool(OUT namespace text, OUT slot int, OUT fence bigint, OUT floor bigint,
                           OUT ceiling bigint, OUT expires_at timestamptz, OUT backends int,
                           OUT last_issued bigint, OUT last_id bigint, OUT state text, OUT kind text)
RETURNS SETOF record AS 'MODULE_PATHNAME', 'cosid_pool' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cosid_pool() IS 'the leases of this instance, shared by its backends, with the last id issued on each';
DROP FUNCTION cosid_stats();
CREATE FUNCTION cosid_stats(OUT acquires bigint, OUT renewals bigint, OUT renewal_failures bigint,
                            OUT leases_lost bigint, OUT duplicate_owner_keys bigint,
                            OUT clock_skew_events bigint, OUT waits_at_ceiling bigint,
                            OUT ids_issued bigint, OUT releases bigint, OUT store_transactions bigint,
                            OUT owner_key text, OUT incarnation uuid, OUT store_failovers bigint,
                            OUT static_state_file text, OUT static_clock_guard boolean,
                            OUT static_writes bigint, OUT static_write_failures bigint)
AS 'MODULE_PATHNAME', 'cosid_stats' LANGUAGE C VOLATILE;

CREATE FUNCTION cosid._static_slot(namespace text) RETURNS int
AS 'MODULE_PATHNAME', 'cosid_static_slot' LANGUAGE C STABLE;

CREATE FUNCTION cosid._adopt_raise(p_namespace text, p_max_id bigint, p_timestamp_bits int, p_slot_bits int,
                                   p_sequence_bits int, p_epoch_ms bigint, p_unit text) RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_adopt_raise' LANGUAGE C VOLATILE CALLED ON NULL INPUT;
REVOKE ALL ON FUNCTION cosid._adopt_raise(text, bigint, int, int, int, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid._adopt_raise(text, bigint, int, int, int, bigint, text) TO cosid_admin;

CREATE FUNCTION cosid_adopt(tbl regclass, col name, namespace text DEFAULT 'default')
RETURNS TABLE (adopted_table regclass, adopted_column name, adopted_namespace text, largest_id bigint,
               ids_above timestamptz, old_default text, new_default text, sequence text,
               sequence_action text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    v_ns      cosid.namespace;
    v_att     record;
    v_max     bigint;
    v_floor   bigint;
    v_seq     text;
    v_users   int;
    v_action  text := 'none';
    v_old     text;
    v_new     text;
BEGIN
    IF tbl IS NULL OR col IS NULL OR $3 IS NULL THEN
        RAISE EXCEPTION 'cosid_adopt: arguments must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT (pg_has_role('cosid_admin', 'MEMBER')
            OR (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user)) THEN
        RAISE EXCEPTION 'permission denied to adopt id columns into cosid'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'Only superusers and members of role cosid_admin may adopt id columns into cosid.',
                  HINT = 'GRANT cosid_admin TO the role that needs it.';
    END IF;
    v_ns := cosid._namespace_row($3);
    SELECT a.attnum, a.atttypid, a.attidentity, a.attgenerated, c.relkind, c.relowner INTO v_att
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
     WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column "%" of relation % does not exist', col, tbl USING ERRCODE = 'undefined_column';
    END IF;
    IF v_att.relkind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION '% is not a table', tbl USING ERRCODE = 'wrong_object_type';
    END IF;
    IF v_att.attgenerated <> '' THEN
        RAISE EXCEPTION 'column "%" of % is a generated column', col, tbl
            USING ERRCODE = 'feature_not_supported', DETAIL = 'A generated column cannot have a default.';
    END IF;
    IF v_att.atttypid <> 'bigint'::regtype THEN
        RAISE EXCEPTION 'cosid ids need a bigint column; column "%" of % is %', col, tbl, format_type(v_att.atttypid, NULL)
            USING ERRCODE = 'datatype_mismatch',
                  DETAIL = CASE WHEN v_att.atttypid IN ('integer'::regtype, 'smallint'::regtype)
                                THEN 'cosid ids are 63-bit numbers; they do not fit a ' || format_type(v_att.atttypid, NULL) || '.'
                                WHEN v_att.atttypid = 'uuid'::regtype
                                THEN 'A uuid column cannot hold bigint ids, and its values have no order cosid could continue.'
                                ELSE 'cosid ids are bigint values.' END,
                  HINT = CASE WHEN v_att.atttypid IN ('integer'::regtype, 'smallint'::regtype)
                              THEN format('ALTER TABLE %s ALTER COLUMN %I TYPE bigint (it rewrites the table and its indexes, and every column referencing it must change too), then adopt it.', tbl, col)
                              WHEN v_att.atttypid = 'uuid'::regtype
                              THEN 'Keep the uuid key and add a bigint column with DEFAULT cosid_next() for order, or give new tables cosid ids.'
                              ELSE 'Convert the column to bigint first.' END;
    END IF;
    IF NOT pg_has_role(v_att.relowner, 'MEMBER') THEN
        RAISE EXCEPTION 'must be owner of table %', tbl USING ERRCODE = 'insufficient_privilege';
    END IF;

    -- No row arrives between the largest value and the new default.
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', tbl);
    EXECUTE format('SELECT max(%I) FROM %s', col, tbl) INTO v_max;
    SELECT pg_get_expr(d.adbin, d.adrelid) INTO v_old FROM pg_attrdef d WHERE d.adrelid = tbl AND d.adnum = v_att.attnum;
    v_seq := pg_get_serial_sequence(tbl::text, col);

    v_floor := cosid._adopt_raise($3, v_max, v_ns.timestamp_bits, v_ns.slot_bits, v_ns.sequence_bits,
                                  v_ns.epoch_ms, v_ns.unit);

    IF v_att.attidentity <> '' THEN
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I DROP IDENTITY', tbl, col);
        v_action := 'dropped with the identity';
    END IF;
    EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %I.cosid_next(%L::text)', tbl, col, '@extschema@', $3);
    SELECT pg_get_expr(d.adbin, d.adrelid) INTO v_new FROM pg_attrdef d WHERE d.adrelid = tbl AND d.adnum = v_att.attnum;
    IF v_att.attidentity = '' AND v_seq IS NOT NULL THEN
        -- Still used elsewhere (another column's default, a view): kept, no longer owned by the
        -- column (dropping the column must not drop it); else dropped.
        SELECT count(*) INTO v_users FROM pg_depend dp
         WHERE dp.refclassid = 'pg_class'::regclass AND dp.refobjid = v_seq::regclass AND dp.deptype = 'n';
        IF v_users = 0 THEN
            EXECUTE format('DROP SEQUENCE %s', v_seq);
            v_action := 'dropped';
        ELSE
            EXECUTE format('ALTER SEQUENCE %s OWNED BY NONE', v_seq);
            v_action := format('kept: %s other object%s use%s it; no longer owned by the column', v_users,
                               CASE WHEN v_users = 1 THEN '' ELSE 's' END, CASE WHEN v_users = 1 THEN 's' ELSE '' END);
        END IF;
    END IF;
    RAISE NOTICE 'cosid adopted column "%" of %: largest id %, new ids of namespace "%" are above %', col, tbl,
        coalesce(v_max::text, 'none (empty)'), $3, coalesce(to_timestamp(v_floor / 1000.0)::text, 'any id already');
    RETURN QUERY SELECT tbl, col, $3, v_max, to_timestamp(v_floor / 1000.0), v_old, v_new, v_seq, v_action;
END $$;
REVOKE ALL ON FUNCTION cosid_adopt(regclass, name, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_adopt(regclass, name, text) TO cosid_admin;
COMMENT ON FUNCTION cosid_adopt(regclass, name, text) IS 'puts an existing bigint id column on cosid: new ids above its largest, default cosid_next(namespace) (superuser or cosid_admin)';

-- Columns: adopting an existing id column, and binding column defaults to the extension's
-- schema.

-- Each definition here is the current one: the build puts this file into the update script
-- of the version being developed (sql/README.md).

-- Puts an existing id column on cosid: its namespace's floor goes above the
-- column's largest id, so new ids sort after the old ones, and its default becomes
-- cosid_next(namespace).  An identity column stops being one, and a serial's sequence is
-- dropped (or detached, when something else uses it).  Any type but bigint is refused, with a DETAIL and HINT for the usual ones.
CREATE OR REPLACE FUNCTION cosid_adopt(tbl regclass, col name, namespace text DEFAULT 'default')
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
                                THEN 'cosid ids are 63-bit numbers; they do not fit in type ' || format_type(v_att.atttypid, NULL) || '.'
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
COMMENT ON FUNCTION cosid_adopt(regclass, name, text) IS 'puts an existing bigint id column on cosid: new ids above its largest, default cosid_next(namespace) (superuser or cosid_admin)';
REVOKE ALL ON FUNCTION cosid_adopt(regclass, name, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_adopt(regclass, name, text) TO cosid_admin;

CREATE OR REPLACE FUNCTION cosid._adopt_raise(p_namespace text, p_max_id bigint, p_timestamp_bits int, p_slot_bits int,
                                   p_sequence_bits int, p_epoch_ms bigint, p_unit text) RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_adopt_raise' LANGUAGE C VOLATILE CALLED ON NULL INPUT;
REVOKE ALL ON FUNCTION cosid._adopt_raise(text, bigint, int, int, int, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid._adopt_raise(text, bigint, int, int, int, bigint, text) TO cosid_admin;

-- Binds every default of this database that calls cosid_next() without argument and that
-- the current role may alter (all of them for a superuser); returns how many.  by_owner
-- (the update to 1.6, for defaults made before it): each in the namespace its owner's
-- sessions issue in (cosid._role_namespace); otherwise in this session's namespace without
-- a SET, and a SET that differs is refused.
CREATE OR REPLACE FUNCTION cosid.bind_defaults(by_owner boolean DEFAULT false) RETURNS int
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_unbound oid := format('%I.cosid_next()', '@extschema@')::regprocedure;
    v_bound oid := format('%I.cosid_next(text)', '@extschema@')::regprocedure;
    v_reset text;
    v_session text;
    v_ns text;
    v_expr text;
    v_what text;
    v_done int := 0;
    r record;
BEGIN
    FOR r IN
        SELECT DISTINCT 'c' AS kind, ad.oid, ad.adrelid AS rel, c.relkind, c.relowner AS owner,
               ad.adrelid::regclass::text AS target, a.attname::text AS col
        FROM pg_depend d
        JOIN pg_attrdef ad ON ad.oid = d.objid
        JOIN pg_class c ON c.oid = ad.adrelid
        JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum
        WHERE d.classid = 'pg_attrdef'::regclass AND d.refclassid = 'pg_proc'::regclass
          AND d.refobjid = v_unbound AND NOT pg_is_other_temp_schema(c.relnamespace)
        UNION
        SELECT 'd', t.oid, 0::oid, 'd'::"char", t.typowner, t.oid::regtype::text, NULL
        FROM pg_depend d
        JOIN pg_type t ON t.oid = d.objid
        WHERE d.classid = 'pg_type'::regclass AND d.refclassid = 'pg_proc'::regclass AND d.refobjid = v_unbound
        ORDER BY 1, 2
    LOOP
        CONTINUE WHEN NOT by_owner AND NOT pg_has_role(r.owner, 'USAGE');
        v_what := CASE r.kind WHEN 'd' THEN format('domain %s', r.target)
                              ELSE format('column %s.%I', r.target, r.col) END;
        IF by_owner THEN
            v_ns := cosid._role_namespace(r.owner);
        ELSE
            v_reset := coalesce(cosid._namespace_reset(), 'default');
            v_session := coalesce(current_setting('cosid.namespace', true), v_reset);
            IF v_session <> v_reset THEN
                RAISE EXCEPTION 'the default cosid_next() of % would issue in namespace "%" here, but "%" was SET in this session',
                                v_what, v_reset, v_session
                    USING ERRCODE = '42P17',
                          DETAIL = format('A default cosid_next() is bound to one namespace when it is made: the one this '
                                          'session issues in without a SET (its server, database, role or connection '
                                          'setting: "%s"). A SET cosid.namespace (also SET LOCAL, set_config(), or one a '
                                          'pooler carried over from another client: here "%s") is not what the table''s '
                                          'other sessions issue in, so it is not guessed from.', v_reset, v_session),
                          HINT = format('Name the namespace in the default: DEFAULT cosid_next(%L), or DEFAULT '
                                        'cosid_next(%L); or RESET cosid.namespace first.', v_session, v_reset);
            END IF;
            v_ns := v_reset;
        END IF;
        -- The default as it is now: a command run below may have bound it already.
        IF r.kind = 'd' THEN
            SELECT cosid._bind_expr(t.typdefaultbin, 0, v_unbound, v_bound, v_ns) INTO v_expr
            FROM pg_type t WHERE t.oid = r.oid;
        ELSE
            SELECT cosid._bind_expr(ad.adbin, ad.adrelid, v_unbound, v_bound, v_ns) INTO v_expr
            FROM pg_attrdef ad WHERE ad.oid = r.oid;
        END IF;
        CONTINUE WHEN v_expr IS NULL;
        IF r.kind = 'd' THEN
            EXECUTE format('ALTER DOMAIN %s SET DEFAULT %s', r.target, v_expr);
        ELSIF r.relkind = 'v' THEN
            EXECUTE format('ALTER VIEW %s ALTER COLUMN %I SET DEFAULT %s', r.target, r.col, v_expr);
        ELSIF r.relkind = 'f' THEN
            EXECUTE format('ALTER FOREIGN TABLE ONLY %s ALTER COLUMN %I SET DEFAULT %s', r.target, r.col, v_expr);
        ELSE
            EXECUTE format('ALTER TABLE ONLY %s ALTER COLUMN %I SET DEFAULT %s', r.target, r.col, v_expr);
        END IF;
        IF by_owner THEN
            RAISE NOTICE 'cosid: the default of % now names namespace "%"', v_what, v_ns;
        END IF;
        v_done := v_done + 1;
    END LOOP;
    RETURN v_done;
END $$;
COMMENT ON FUNCTION cosid.bind_defaults(boolean) IS 'binds every default cosid_next() of this database to a namespace: cosid_next(''<namespace>'') (the event trigger cosid_bind_defaults runs it after each DDL command)';

CREATE OR REPLACE FUNCTION cosid._bind_expr(expr pg_node_tree, rel oid, unbound oid, bound oid, namespace text) RETURNS text
AS 'MODULE_PATHNAME', 'cosid_bind_expr' LANGUAGE C STABLE;

CREATE OR REPLACE FUNCTION cosid._bind_defaults_on_ddl() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_stack text;
BEGIN
    -- The ALTER commands cosid.bind_defaults runs fire this trigger again: it binds them all
    -- itself, so the inner runs return at once.
    GET DIAGNOSTICS v_stack = PG_CONTEXT;
    IF strpos(v_stack, 'function cosid.bind_defaults(') > 0 THEN
        RETURN;
    END IF;
    PERFORM cosid.bind_defaults();
END $$;

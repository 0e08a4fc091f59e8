-- cosid 1.5 -> 1.6: forks of an issuing server, a change of store, bounded floor raises by
-- keepers, column defaults bound to their namespace.
\echo Use "ALTER EXTENSION cosid UPDATE TO '1.6'" to load this file. \quit

-- Column and domain defaults bound to their namespace (issue 31, item 4).  A default
-- cosid_next() would read cosid.namespace in each inserting session, which any role may SET
-- and a pooler may carry from one client to the next: sessions inserting into one table then
-- issue in two id spaces, and the same (slot, tick, sequence) in both is the same id.  So a
-- default is bound when it is made: the event trigger cosid_bind_defaults (ddl_command_end,
-- every command: CREATE/ALTER TABLE, ADD COLUMN, partitions and inherited children, LIKE
-- ... INCLUDING DEFAULTS, CREATE/ALTER DOMAIN, ALTER VIEW, foreign tables, CREATE SCHEMA
-- with its elements, restores) rewrites every cosid_next() call without argument in a
-- column's or domain's default into cosid_next('<namespace>'), so the catalog (and pg_dump)
-- names the namespace.  The namespace is the one the session issues in without a SET (its
-- server, database, role or connection setting): a SET, SET LOCAL or set_config() is refused
-- here (42P17) rather than guessed, since the same SET is what a pooler carries over.  A
-- cosid_next() called directly (INSERT ... VALUES (cosid_next())) or inside a function
-- still reads the setting when it runs.
CREATE FUNCTION cosid._namespace_reset() RETURNS text
AS 'MODULE_PATHNAME', 'cosid_namespace_reset' LANGUAGE C STABLE;
COMMENT ON FUNCTION cosid._namespace_reset() IS 'the namespace this session issues in without a SET (server, database, role or connection setting)';

CREATE FUNCTION cosid._bind_expr(expr pg_node_tree, rel oid, unbound oid, bound oid, namespace text) RETURNS text
AS 'MODULE_PATHNAME', 'cosid_bind_expr' LANGUAGE C STABLE;

-- The namespace a role's sessions in this database issue in without a SET: its setting for
-- this database, its own, this database's, then the server's configuration files
-- (pg_file_settings, readable by superusers: the update to 1.6 runs as one), then 'default'.
CREATE FUNCTION cosid._role_namespace(p_role oid) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(
        (SELECT substr(c, length('cosid.namespace=') + 1)
         FROM pg_db_role_setting s CROSS JOIN unnest(s.setconfig) c
         WHERE c LIKE 'cosid.namespace=%'
           AND ((s.setdatabase, s.setrole) IN ((d.oid, p_role), (0::oid, p_role), (d.oid, 0::oid)))
         ORDER BY s.setrole = 0, s.setdatabase = 0 LIMIT 1),
        (SELECT f.setting FROM pg_file_settings f
         WHERE f.name = 'cosid.namespace' AND f.applied AND f.error IS NULL ORDER BY f.seqno DESC LIMIT 1),
        'default')
    FROM pg_database d WHERE d.datname = current_database()
$$;
REVOKE ALL ON FUNCTION cosid._role_namespace(oid) FROM PUBLIC;

-- Binds every default of this database that calls cosid_next() without argument and that
-- the current role may alter (all of them for a superuser); returns how many.  by_owner
-- (the update to 1.6, for defaults made before it): each in the namespace its owner's
-- sessions issue in (cosid._role_namespace); otherwise in this session's namespace without
-- a SET, and a SET that differs is refused.
CREATE FUNCTION cosid.bind_defaults(by_owner boolean DEFAULT false) RETURNS int
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

CREATE FUNCTION cosid._bind_defaults_on_ddl() RETURNS event_trigger
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

-- Defaults made before 1.6 read cosid.namespace in each inserting session: each is bound to
-- the namespace its owner's sessions issue in now (the owner's database and role settings,
-- then the server's), never a session's SET.  Before the event trigger exists, so that its
-- own run does not bind them by this session's setting instead.
SELECT cosid.bind_defaults(by_owner => true) AS defaults_bound;
-- Enabled ALWAYS: also under session_replication_role = replica (pg_restore --disable-triggers).
CREATE EVENT TRIGGER cosid_bind_defaults ON ddl_command_end EXECUTE FUNCTION cosid._bind_defaults_on_ddl();
ALTER EVENT TRIGGER cosid_bind_defaults ENABLE ALWAYS;
COMMENT ON FUNCTION cosid_next() IS 'next id of namespace cosid.namespace (in a default: bound to cosid_next(namespace) when the default is made)';

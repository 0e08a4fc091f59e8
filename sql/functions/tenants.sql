-- A shared store's tenants: which role may touch which lease, the cap on one role's live leases,
-- and revoking a role's leases.

-- Each definition here is the current one: the build puts this file into the update script
-- of the version being developed (sql/README.md).

-- (PL/pgSQL, which keeps its plan for the session: a SQL function with a SET is never inlined,
-- and planned its query again at every call, in every acquire.)
CREATE OR REPLACE FUNCTION cosid._is_admin() RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = session_user), false)
           OR pg_catalog.pg_has_role(session_user, 'cosid_admin', 'MEMBER');
END $$;
REVOKE ALL ON FUNCTION cosid._is_admin() FROM PUBLIC;

-- The namespace a role's sessions in this database issue in without a SET: its setting for
-- this database, its own, this database's, then the server's configuration files
-- (pg_file_settings, readable by superusers: the update to 1.6 runs as one), then 'default'.
CREATE OR REPLACE FUNCTION cosid._role_namespace(p_role oid) RETURNS text
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

-- A lease belongs to the store role that acquired it (owner_role, the session's login role):
-- only that role renews or releases it.  On a store shared by many servers, one role per
-- server, a compromised or misconfigured server can then neither shorten, take nor hand on
-- another's window, even knowing its incarnation (which other roles cannot read: see
-- cosid.own_leases and cosid_leases()).  A lease acquired before cosid 1.4 has no role yet.
CREATE OR REPLACE FUNCTION cosid._refuse_other_role(p_namespace text, p_slot int, p_incarnation uuid, p_fence bigint,
                                         p_what text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_role name;
BEGIN
    -- (by the primary key: IS NOT DISTINCT FROM, = for an incarnation not NULL, leaves the
    -- planner no other index, as in cosid.renew; with =, the partial index of held leases was
    -- usable too, and a plan made while the statistics had every slot free read every held
    -- lease of the namespace at each release)
    SELECT l.owner_role INTO v_role FROM cosid.lease l
     WHERE l.namespace = p_namespace AND l.slot = p_slot AND p_incarnation IS NOT NULL
       AND l.incarnation IS NOT DISTINCT FROM p_incarnation AND l.fence = p_fence;
    IF FOUND AND v_role IS NOT NULL AND v_role <> session_user THEN
        RAISE EXCEPTION 'permission denied to % slot % of cosid namespace "%"', p_what, p_slot, p_namespace
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('The lease was acquired by store role %I; only that role renews or releases it.', v_role),
                  HINT = 'Each keeper renews and releases its own leases; an administrator frees another''s slot with cosid.revoke or cosid_release(namespace, slot).';
    END IF;
END $$;
REVOKE ALL ON FUNCTION cosid._refuse_other_role(text, int, uuid, bigint, text) FROM PUBLIC;

-- Refuses an acquire of a store role that holds its cap of live leases of the namespace
-- already.  Two acquires of one role that run at once may both pass: a role goes past its cap
-- by at most its sessions less one (ALTER ROLE ... CONNECTION LIMIT bounds them).  SQLSTATE
-- 53400, a class the keeper retries (src/core/store_errors.cpp): a server's own lease that
-- expires or goes back makes room, and its callers see the message if none does.  Called by
-- cosid.acquire for the roles that are capped (not superusers nor cosid_admin).
CREATE OR REPLACE FUNCTION cosid._lease_cap_check(p_ns cosid.namespace, p_now bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_slots int := coalesce(upper(p_ns.slot_range) - lower(p_ns.slot_range), 1 << p_ns.slot_bits);
    v_cap   int;
    v_from  text;
    v_held  int;
BEGIN
    SELECT c.max_leases,
           CASE WHEN c.role_name = '' THEN 'the store''s cap for every role (cosid_lease_cap)'
                ELSE pg_catalog.format('the cap of role %I (cosid_lease_cap)', c.role_name) END
      INTO v_cap, v_from
      FROM cosid.lease_cap c WHERE c.role_name IN (session_user, '') ORDER BY c.role_name DESC LIMIT 1;
    IF NOT FOUND THEN
        v_cap := greatest(2, v_slots / 2);
        v_from := 'the default: half the slots the store grants in the namespace, at least 2';
    END IF;
    IF v_cap >= v_slots THEN
        RETURN;
    END IF;
    SELECT count(*) INTO v_held
      FROM (SELECT 1 FROM cosid.lease l
             WHERE l.namespace = p_ns.name AND l.owner_role = session_user
               AND l.incarnation IS NOT NULL AND l.expires_at > p_now
             LIMIT v_cap) x;
    IF v_held >= v_cap THEN
        RAISE EXCEPTION 'cosid store role "%" holds its cap of live leases of namespace "%" already', session_user, p_ns.name
            USING ERRCODE = 'configuration_limit_exceeded',
                  DETAIL = pg_catalog.format('It holds %s live leases of the namespace, and a store role holds at most %s '
                                             '(%s); a server holds one lease per namespace it issues in. No slot was taken.',
                                             CASE WHEN v_held > 0 THEN 'at least ' || v_held ELSE '0' END, v_cap, v_from),
                  HINT = pg_catalog.format('Give each server its own store role. If role %I serves several servers on '
                                           'purpose, an administrator of the store raises its cap: SELECT * FROM '
                                           'cosid_lease_cap(%s, role => %L);', session_user, least(v_slots, v_cap * 2), session_user);
    END IF;
END $$;
REVOKE ALL ON FUNCTION cosid._lease_cap_check(cosid.namespace, bigint) FROM PUBLIC;

-- An administrator's caps (superuser or cosid_admin): cosid_lease_cap(n) caps every store role
-- at n live leases per namespace, cosid_lease_cap(n, role => 'r') one role (its own cap, above
-- or below every role's); NULL removes the cap set (back to every role's cap, or to the
-- default).  A cap at or above a namespace's slots leaves the role uncapped there, and is not
-- counted.  Returns the caps set.
CREATE OR REPLACE FUNCTION cosid_lease_cap(max_leases int, role name DEFAULT NULL)
RETURNS SETOF cosid.lease_cap
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
BEGIN
    IF max_leases < 0 THEN
        RAISE EXCEPTION 'cosid lease cap must be 0 or more, got %', max_leases
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'It is the number of live leases a store role may hold in one namespace.',
                  HINT = 'NULL removes the cap set; a cap of a namespace''s slots or more leaves the role uncapped there.';
    END IF;
    IF role IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = role) THEN
        RAISE EXCEPTION 'role "%" does not exist', role
            USING ERRCODE = 'undefined_object',
                  HINT = 'Name the store role a server''s keeper logs in as (the user of its cosid.store_dsn), or leave role out to cap every role.';
    END IF;
    IF max_leases IS NULL THEN
        DELETE FROM cosid.lease_cap c WHERE c.role_name = coalesce(role, '');
    ELSE
        INSERT INTO cosid.lease_cap AS c (role_name, max_leases) VALUES (coalesce(role, ''), max_leases)
        ON CONFLICT (role_name) DO UPDATE SET max_leases = EXCLUDED.max_leases;
    END IF;
    RAISE LOG 'cosid lease cap of %: % (set by %)', coalesce(pg_catalog.quote_ident(role), 'every store role'),
        coalesce(max_leases::text, 'removed'), session_user;
    RETURN QUERY SELECT c.* FROM cosid.lease_cap c ORDER BY c.role_name;
END $$;
COMMENT ON FUNCTION cosid_lease_cap(int, name) IS 'caps the live leases a store role holds per namespace: every role''s, or one role''s (superuser or cosid_admin)';
REVOKE ALL ON FUNCTION cosid_lease_cap(int, name) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_lease_cap(int, name) TO cosid_admin;

-- Revokes every lease a store role holds (of one namespace, or of all), as cosid.revoke does
-- one: the slot is freed with its next floor at least the window's ceiling and its fence
-- moved on, so the role's renewals and releases find it gone and the next holder starts
-- above anything the role could still issue.  The rows are locked first: a slot freed and
-- taken by another role meanwhile is not revoked.  Returns how many were revoked.
CREATE OR REPLACE FUNCTION cosid_revoke_role(role name, namespace text DEFAULT NULL) RETURNS int
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    r      record;
    v_done int := 0;
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'cosid_revoke_role: role must not be NULL'
            USING ERRCODE = 'null_value_not_allowed',
                  DETAIL = 'It revokes the leases of the store role named.',
                  HINT = 'SELECT cosid_revoke_role(''keeper_a'') revokes every lease of role keeper_a.';
    END IF;
    IF namespace IS NOT NULL THEN
        PERFORM cosid._namespace_row(namespace);
    END IF;
    -- The timeline followed before the rows are locked (cosid._store_state_lock: a raise it
    -- needs waits for lease rows, and is done here before this call holds any).
    PERFORM cosid._follow_timeline(NULL);
    FOR r IN SELECT l.namespace, l.slot FROM cosid.lease l
              WHERE l.owner_role = role AND l.incarnation IS NOT NULL
                AND (namespace IS NULL OR l.namespace = namespace)
              -- (byte order, as the keeper sends a pass's leases: run_due_leases)
              ORDER BY l.namespace COLLATE "C", l.slot FOR UPDATE
    LOOP
        PERFORM cosid.revoke(r.namespace, r.slot);
        v_done := v_done + 1;
    END LOOP;
    RAISE LOG 'cosid: % leases of store role % revoked%, by %', v_done, pg_catalog.quote_ident(role),
        coalesce(pg_catalog.format(' in namespace "%s"', namespace), ''), session_user;
    RETURN v_done;
END $$;
COMMENT ON FUNCTION cosid_revoke_role(name, text) IS 'revokes every lease a store role holds, of one namespace or of all (superuser or cosid_admin)';
REVOKE ALL ON FUNCTION cosid_revoke_role(name, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_revoke_role(name, text) TO cosid_admin;

-- Static slots: slots an instance owns without a lease, recorded in the store.

-- Each definition here is the current one: the build puts this file into the update script
-- of the version being developed (sql/README.md).

CREATE OR REPLACE FUNCTION cosid._static_slot(namespace text) RETURNS int
AS 'MODULE_PATHNAME', 'cosid_static_slot' LANGUAGE C STABLE;

CREATE OR REPLACE FUNCTION cosid._static_notice(p_namespace text) RETURNS boolean
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

-- The keeper's write of a window's ceiling (this cluster's row; never lowered: a window
-- released early keeps its ceiling here, only the state file holds the exact last id).
-- Locally durable whatever synchronous_commit says, and no more: only a cluster made from
-- this one reads the row, never a standby that is waited for.
CREATE OR REPLACE FUNCTION cosid._static_record(p_namespace text, p_slot int, p_ceiling_ms bigint) RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    SELECT pg_catalog.set_config('synchronous_commit', 'local', true);
    INSERT INTO cosid.static_ceiling AS c (namespace, slot, system_identifier, ceiling_ms)
    SELECT p_namespace, p_slot, s.system_identifier, p_ceiling_ms FROM pg_catalog.pg_control_system() s
    ON CONFLICT (namespace, slot, system_identifier) DO UPDATE
       SET ceiling_ms = greatest(c.ceiling_ms, excluded.ceiling_ms), written_at = pg_catalog.clock_timestamp()
    RETURNING ceiling_ms
$$;
REVOKE ALL ON FUNCTION cosid._static_record(text, int, bigint) FROM PUBLIC;

-- What the keeper reads before a static window: the largest ceiling other clusters recorded
-- for the slot or for the whole namespace (slot -1: the floor cosid_adopt raised, which holds
-- for a cluster serving the namespace on any slot), this cluster's own (NULL where there is
-- none), and whether a restore is under way: CREATE EXTENSION left its mark in store_state
-- (the install script's DO block) and the origin's record has not come yet, so neither may the
-- origin's rows here (pg_restore brings cosid's data last, static_ceiling's before
-- store_state's): no static window until then.  "Others" also counts what this database
-- recorded as a lease store: a slot that was leased here before this server made it static
-- (cosid.static_slots added, a restart) starts above where the store's windows on it end,
-- and a namespace above the floor cosid_adopt raised while it was leased; ids the lease
-- issued ahead of the clock are not issued again.  A slot never leased has no such end (its
-- next_floor is only where a first lease would start).  A store's raise (a failover, a
-- restore, pg_upgrade) lifts next_floor ~70 s ahead for leases a lost tail of its history
-- may have granted, and the slot's own lease before the switch may be one of them (a copy
-- of the store that missed its last renewals: 20,000 of 20,000 ids twice when only the
-- ceiling was counted): it is counted, and such a slot waits for its clock after a raise, as
-- leased slots do.
CREATE OR REPLACE FUNCTION cosid._static_recorded(p_namespace text, p_slot int, OUT others_ms bigint, OUT own_ms bigint,
                                       OUT restoring boolean)
LANGUAGE sql STABLE AS $$
    SELECT greatest(max(c.ceiling_ms) FILTER (WHERE c.system_identifier <> s.system_identifier),
                    -- (a slot not yet brought up to the store's last raise: where the raise puts it)
                    (SELECT cosid._raised_next_floor(CASE WHEN l.incarnation IS NULL THEN l.next_floor
                                                          ELSE greatest(l.next_floor, l.ceiling) END,
                                                     l.raise_seen, m.raise_count, m.raised_floor, m.settled)
                       FROM cosid.lease l, cosid._raise_mark() m
                      WHERE l.namespace = p_namespace AND l.slot = p_slot
                        AND coalesce(l.owner_key, l.previous_owner_key) IS NOT NULL),
                    (SELECT nullif(n.not_before_ms, 0) FROM cosid.namespace n WHERE n.name = p_namespace)),
           max(c.ceiling_ms) FILTER (WHERE c.system_identifier = s.system_identifier),
           (SELECT count(*) = 1 AND coalesce(bool_and(t.system_identifier = 0), false) FROM cosid.store_state t)
      FROM pg_catalog.pg_control_system() s
      LEFT JOIN cosid.static_ceiling c ON c.namespace = p_namespace AND c.slot IN (p_slot, -1)
$$;
REVOKE ALL ON FUNCTION cosid._static_recorded(text, int) FROM PUBLIC;

-- cosid 1.4 -> 1.5: static slots survive pg_upgrade and a restore into a new cluster
-- (issue 23): the keeper records each static window's ceiling in cosid.static_ceiling too.
\echo Use "ALTER EXTENSION cosid UPDATE TO '1.5'" to load this file. \quit

-- Static slots (cosid.static_slots) keep their ceilings in a state file in the data directory.
-- A new cluster made from this one (pg_upgrade, which leaves the file in the old data
-- directory; a dump restored elsewhere) has the database but not the file: the keeper also
-- records each static window's ceiling here, after the file, and a keeper whose file holds no
-- window for a slot, or that finds a row written by another cluster, starts the slot's next
-- window above the row (src/core/static_state: static_recorded_ms).
CREATE TABLE cosid.static_ceiling (
    namespace         text NOT NULL,
    slot              int NOT NULL CHECK (slot BETWEEN 0 AND 65535),
    ceiling_ms        bigint NOT NULL CHECK (ceiling_ms >= 0),  -- Unix ms; no id of the slot above it
    system_identifier bigint NOT NULL,                           -- of the cluster that wrote it
    written_at        timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    PRIMARY KEY (namespace, slot)
);
REVOKE ALL ON cosid.static_ceiling FROM PUBLIC;
GRANT SELECT ON cosid.static_ceiling TO PUBLIC;
-- pg_dump carries it: a restore into a new cluster with the same static slots starts above it.
SELECT pg_catalog.pg_extension_config_dump('cosid.static_ceiling', '');
-- Each server keeps its own: a subscription does not bring another server's ceilings.
CREATE TRIGGER keep_local BEFORE INSERT OR UPDATE OR DELETE ON cosid.static_ceiling
    FOR EACH ROW EXECUTE FUNCTION cosid._keep_local();
ALTER TABLE cosid.static_ceiling ENABLE REPLICA TRIGGER keep_local;

-- The keeper's write of a window's ceiling.  It never lowers a row: a window released early
-- keeps its ceiling here (only the state file holds the exact last id), and a row of another
-- cluster is below the new window anyway (the keeper started above it).
CREATE FUNCTION cosid._static_record(p_namespace text, p_slot int, p_ceiling_ms bigint) RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    INSERT INTO cosid.static_ceiling AS c (namespace, slot, ceiling_ms, system_identifier)
    SELECT p_namespace, p_slot, p_ceiling_ms, s.system_identifier FROM pg_catalog.pg_control_system() s
    ON CONFLICT (namespace, slot) DO UPDATE
       SET ceiling_ms = pg_catalog.greatest(c.ceiling_ms, excluded.ceiling_ms),
           system_identifier = excluded.system_identifier, written_at = pg_catalog.clock_timestamp()
    RETURNING ceiling_ms
$$;
REVOKE ALL ON FUNCTION cosid._static_record(text, int, bigint) FROM PUBLIC;

-- What the keeper reads before a static window: the row's ceiling, and whether this cluster
-- wrote it.  No row: NULLs.
CREATE FUNCTION cosid._static_recorded(p_namespace text, p_slot int, OUT ceiling_ms bigint, OUT this_cluster boolean)
LANGUAGE sql STABLE AS $$
    SELECT c.ceiling_ms, c.system_identifier = s.system_identifier
      FROM pg_catalog.pg_control_system() s
      LEFT JOIN cosid.static_ceiling c ON c.namespace = p_namespace AND c.slot = p_slot
$$;
REVOKE ALL ON FUNCTION cosid._static_recorded(text, int) FROM PUBLIC;

-- A keeper's pass in one store transaction (issue 26): the renewals and releases due for
-- several leases of one incarnation, element k of each array describing lease k.  Each is
-- cosid.renew or cosid.release itself, with its checks (fence and incarnation, the store role
-- that acquired it, the timeline); a row per lease the store still held for the caller, ord
-- naming it (1-based), none for a lease that was lost.  SECURITY INVOKER: whoever may call
-- renew and release (cosid_keeper) may batch them, and nobody else.  An error in any element
-- rolls back the whole pass: the keeper then asks lease by lease, and so learns which.
CREATE FUNCTION cosid.lease_pass(p_incarnation uuid, p_ttl_ms bigint, p_release boolean[], p_namespace text[],
                                 p_slot int[], p_fence bigint[], p_number bigint[])
RETURNS TABLE (ord int, slot int, fence bigint, expires_at bigint, floor bigint, ceiling bigint,
               next_floor bigint, store_now bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n int := coalesce(array_length(p_namespace, 1), 0);
BEGIN
    IF coalesce(array_length(p_release, 1), 0) <> n OR coalesce(array_length(p_slot, 1), 0) <> n
       OR coalesce(array_length(p_fence, 1), 0) <> n OR coalesce(array_length(p_number, 1), 0) <> n THEN
        RAISE EXCEPTION 'cosid.lease_pass needs arrays of one length'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('namespace %s, release %s, slot %s, fence %s, number %s elements', n,
                                  coalesce(array_length(p_release, 1), 0), coalesce(array_length(p_slot, 1), 0),
                                  coalesce(array_length(p_fence, 1), 0), coalesce(array_length(p_number, 1), 0));
    END IF;
    FOR k IN 1 .. n LOOP
        IF p_release[k] THEN
            RETURN QUERY SELECT k, r.slot, r.fence, NULL::bigint, NULL::bigint, NULL::bigint, r.next_floor, r.store_now
                           FROM cosid.release(p_namespace[k], p_slot[k], p_incarnation, p_fence[k], p_number[k]) r;
        ELSE
            RETURN QUERY SELECT k, r.slot, r.fence, r.expires_at, r.floor, r.ceiling, r.next_floor, r.store_now
                           FROM cosid.renew(p_namespace[k], p_slot[k], p_incarnation, p_fence[k], p_ttl_ms) r;
        END IF;
    END LOOP;
END $$;
REVOKE ALL ON FUNCTION cosid.lease_pass(uuid, bigint, boolean[], text[], int[], bigint[], bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid.lease_pass(uuid, bigint, boolean[], text[], int[], bigint[], bigint[]) TO cosid_keeper;

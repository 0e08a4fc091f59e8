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

-- cosid.acquire grants only the namespace's slot range (regional stores, below).
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
        v_after := coalesce(lower(v_ns.slot_range), 0) - 1;  -- a regional store grants only its range
        LOOP
            v_batch := 0;
            -- (a row past the layout's slots, left by a hand edit, is never granted: its ids
            -- would spill into the timestamp bits)
            FOR c IN EXECUTE 'SELECT l.slot FROM cosid.lease l WHERE l.namespace = $1 AND l.slot > $5 AND l.slot < $7 AND '
                             || v_cond || ' ORDER BY l.slot LIMIT 16'
                     USING p_namespace, p_owner_key, p_preferred, v_now, v_after, p_incarnation,
                           coalesce(upper(v_ns.slot_range), 1 << v_ns.slot_bits)
            LOOP
                v_batch := v_batch + 1;
                v_after := c.slot;
                UPDATE cosid.lease l
                   SET previous_owner_key = coalesce(l.owner_key, l.previous_owner_key),
                       owner_key   = p_owner_key,
                       incarnation = p_incarnation,
                       owner_role  = session_user,
                       fence       = l.fence + 1,
                       floor       = greatest(l.next_floor, v_ns.not_before_ms),
                       expires_at  = v_now + p_ttl_ms,
                       ceiling     = greatest(v_now + p_ttl_ms + v_ns.tolerance_ms, l.next_floor, v_ns.not_before_ms),
                       next_floor  = greatest(v_now + p_ttl_ms + v_ns.tolerance_ms, l.next_floor, v_ns.not_before_ms)
                 WHERE l.namespace = p_namespace AND l.slot = c.slot AND l.slot < (1 << v_ns.slot_bits)
                   AND (v_ns.slot_range IS NULL OR l.slot <@ v_ns.slot_range)
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
                            AND l.expires_at > v_now
                            AND (v_ns.slot_range IS NULL OR l.slot <@ v_ns.slot_range));
END $$;

---------------------------------------------------------------------------------------
-- Regional stores (issue 26): one namespace served by several lease stores, each granting
-- only its own range of the namespace's slots (cosid_namespace_create(..., slot_range =>
-- '[0,512)') on region A's store, '[512,1024)' on region B's), so that servers of different
-- regions never wait on a store across an ocean and never collide.  NULL: every slot.  The
-- rules (src/core/slot_range): a range lies within the layout's slots; one namespace has one
-- range per store, fixed once the store granted a slot of it; cosid.acquire grants only slots
-- in it (a preferred slot outside it too is passed over); a keeper keeps the range it first
-- saw for a namespace in its own database's copy of it and refuses a store stating another.
-- That ranges of different stores are disjoint is the operator's to keep: no store sees the
-- others.  Instances of one region keep their ids apart through their one store as before.
---------------------------------------------------------------------------------------
ALTER TABLE cosid.namespace ADD COLUMN slot_range int4range;
ALTER TABLE cosid.namespace ADD CONSTRAINT namespace_slot_range
    CHECK (slot_range IS NULL OR (NOT isempty(slot_range) AND NOT lower_inf(slot_range) AND NOT upper_inf(slot_range)
                                  AND lower(slot_range) >= 0 AND upper(slot_range) <= (1 << slot_bits)));

-- A namespace's range changes only while no slot of it was ever granted here: after that,
-- a narrower range would strand live leases outside it, and a wider or moved one would grant
-- slots another region's store may hold.  (An instance's copy of a store's namespace grants
-- nothing: an administrator may clear the range its keeper saw, to move it on purpose.)
CREATE FUNCTION cosid._namespace_range_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NEW.slot_range IS DISTINCT FROM OLD.slot_range
       AND EXISTS (SELECT 1 FROM cosid.lease l WHERE l.namespace = OLD.name AND l.fence > 0) THEN
        RAISE EXCEPTION 'cosid namespace "%" keeps its slot range', OLD.name
            USING ERRCODE = 'invalid_object_definition',
                  DETAIL = format('This store granted slots of it with range %s; %s would strand its leases or grant slots another store may grant.',
                                  coalesce(OLD.slot_range::text, 'all slots'), coalesce(NEW.slot_range::text, 'all slots')),
                  HINT = 'A range is stated when the namespace is created on a store, before its first lease; for other ranges create a namespace with another name.';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER namespace_range_guard BEFORE UPDATE ON cosid.namespace
    FOR EACH ROW EXECUTE FUNCTION cosid._namespace_range_guard();
ALTER TABLE cosid.namespace ENABLE ALWAYS TRIGGER namespace_range_guard;

-- cosid_namespace_create with a slot range: the layout as the function without one (which
-- it calls: same checks, same no-op for the same call again), then the range.
CREATE FUNCTION cosid_namespace_create(name text,
                                       slot_range int4range,
                                       slot_bits int DEFAULT 10,
                                       tolerance interval DEFAULT '1 second',
                                       epoch timestamptz DEFAULT '2024-01-01 00:00:00+00',
                                       sequence_bits int DEFAULT 12,
                                       unit text DEFAULT 'ms',
                                       total_bits int DEFAULT 63)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_range int4range := cosid_namespace_create.slot_range;
    v_old   cosid.namespace;
BEGIN
    IF v_range IS NOT NULL AND (isempty(v_range) OR lower_inf(v_range) OR upper_inf(v_range)) THEN
        RAISE EXCEPTION 'cosid slot_range must be a bounded, non-empty range of slots, got %', v_range
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'For example slot_range => ''[0,512)'' on one region''s store and ''[512,1024)'' on another''s.';
    END IF;
    IF slot_bits BETWEEN 1 AND 16 AND v_range IS NOT NULL
       AND (lower(v_range) < 0 OR upper(v_range) > (1 << slot_bits)) THEN
        RAISE EXCEPTION 'cosid slot_range % reaches past the slots of namespace "%"', v_range, name
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('A namespace of %s slot bits has slots [0,%s).', slot_bits, 1 << slot_bits),
                  HINT = 'Use a range within the layout''s slots, or more slot bits.';
    END IF;
    PERFORM @extschema@.cosid_namespace_create(name, slot_bits, tolerance, epoch, sequence_bits, unit, total_bits);
    SELECT * INTO v_old FROM cosid.namespace n WHERE n.name = cosid_namespace_create.name FOR UPDATE;
    IF v_old.slot_range IS NOT DISTINCT FROM v_range THEN
        RETURN;  -- the same call again
    END IF;
    IF v_old.slot_range IS NOT NULL OR EXISTS (SELECT 1 FROM cosid.lease l WHERE l.namespace = v_old.name AND l.fence > 0) THEN
        RAISE EXCEPTION 'cosid namespace "%" already has slot range % on this store', name,
                        coalesce(v_old.slot_range::text, '(all slots)')
            USING ERRCODE = 'duplicate_object',
                  DETAIL = format('One namespace has one range per store; %s %s it%s.',
                                  coalesce(v_range::text, 'all slots'),
                                  CASE WHEN v_old.slot_range IS NULL OR v_range IS NULL OR v_range && v_old.slot_range
                                       THEN 'overlaps' ELSE 'is beside' END,
                                  CASE WHEN v_old.slot_range IS NULL THEN ', and slots of it were granted here' ELSE '' END),
                  HINT = 'Another range of the namespace belongs on another store (another region), created there, disjoint from this one.';
    END IF;
    UPDATE cosid.namespace n SET slot_range = v_range WHERE n.name = v_old.name;
END $$;
REVOKE ALL ON FUNCTION cosid_namespace_create(text, int4range, int, interval, timestamptz, int, text, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_namespace_create(text, int4range, int, interval, timestamptz, int, text, int) TO cosid_admin;
COMMENT ON FUNCTION cosid_namespace_create(text, int4range, int, interval, timestamptz, int, text, int) IS 'creates a namespace whose slots this store grants only within slot_range (regional stores; superuser or cosid_admin)';

-- The keeper's record of the range a store stated for a namespace, in this instance's copy of
-- it (cosid._namespace_sync made it): the first one is kept; the keeper refuses another
-- (src/core/slot_range: judge_store_range).  Returns the range kept before, NULL if none.
CREATE FUNCTION cosid._namespace_range_seen(p_name text, p_range int4range) RETURNS int4range
LANGUAGE plpgsql AS $$
DECLARE
    v_seen int4range;
BEGIN
    SELECT n.slot_range INTO v_seen FROM cosid.namespace n WHERE n.name = p_name FOR UPDATE;
    IF v_seen IS NULL AND p_range IS NOT NULL THEN
        UPDATE cosid.namespace n SET slot_range = p_range WHERE n.name = p_name;
    END IF;
    RETURN v_seen;
END $$;
REVOKE ALL ON FUNCTION cosid._namespace_range_seen(text, int4range) FROM PUBLIC;

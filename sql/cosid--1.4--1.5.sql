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

-- Citus (issue 24, docs/citus.md): an error on a Citus worker, naming the coordinator; nothing
-- elsewhere (Citus' catalog is read as plain tables, Citus need not be loaded).  Called by
-- cosid_namespace_create (and, in C, by cosid_adopt): namespaces and the lease store live on
-- the coordinator.
CREATE FUNCTION cosid._refuse_on_citus_worker(what text) RETURNS void
AS 'MODULE_PATHNAME', 'cosid_refuse_on_citus_worker' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION cosid._refuse_on_citus_worker(text) FROM PUBLIC;

-- cosid_namespace_create refuses on a Citus worker (the first statement of its body).
CREATE OR REPLACE FUNCTION cosid_namespace_create(name text,
                                       slot_bits int DEFAULT 10,
                                       tolerance interval DEFAULT '1 second',
                                       epoch timestamptz DEFAULT '2024-01-01 00:00:00+00',
                                       sequence_bits int DEFAULT 12,
                                       unit text DEFAULT 'ms',
                                       total_bits int DEFAULT 63)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_tol_ms   bigint;
    v_epoch_ms bigint;
    v_unit     text;
    v_ts_bits  int;
    v_end_ms   numeric;
    v_old      cosid.namespace;
    v_max_tol  bigint;
BEGIN
    -- On a Citus worker its store is not the cluster's: namespaces are made on the coordinator.
    PERFORM cosid._refuse_on_citus_worker('cosid_namespace_create');
    IF name IS NULL OR slot_bits IS NULL OR tolerance IS NULL OR epoch IS NULL
       OR sequence_bits IS NULL OR unit IS NULL OR total_bits IS NULL THEN
        RAISE EXCEPTION 'cosid_namespace_create: arguments must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF name !~ '^[A-Za-z0-9_.:-]{1,63}$' THEN
        RAISE EXCEPTION 'invalid cosid namespace name "%"', name
            USING ERRCODE = 'invalid_name',
                  DETAIL = 'A namespace name is 1 to 63 letters, digits, "_", ".", ":" or "-".';
    END IF;
    v_unit := CASE lower(unit) WHEN 'ms' THEN 'ms' WHEN 'millisecond' THEN 'ms'
                               WHEN 's' THEN 's' WHEN 'second' THEN 's' END;
    IF v_unit IS NULL THEN
        RAISE EXCEPTION 'invalid cosid unit "%"', unit
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Use ''ms'' or ''s''.';
    END IF;
    -- An id is a sign bit (0) and total_bits of timestamp, slot and sequence: 53 keeps every
    -- id exact as a JavaScript number (a JSON double).
    IF total_bits < 33 OR total_bits > 63 THEN
        RAISE EXCEPTION 'cosid total_bits must be between 33 and 63, got %', total_bits
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use 63 (the default, ids use all of bigint) or 53 (ids exact in JavaScript and JSON).';
    END IF;
    IF tolerance < interval '0' OR tolerance > interval '1 hour' THEN
        RAISE EXCEPTION 'cosid tolerance must be between 0 and 1 hour, got %', tolerance
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_tol_ms := floor(extract(epoch FROM tolerance) * 1000)::bigint;
    PERFORM cosid._follow_timeline(NULL);  -- one row of store_state to read
    SELECT s.max_tolerance_ms INTO v_max_tol FROM cosid.store_state s;
    IF v_tol_ms > v_max_tol THEN
        RAISE EXCEPTION 'cosid tolerance % is above the lease store''s max_tolerance (% ms)', tolerance, v_max_tol
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'After a failover the store raises every floor by 2 x its max_tolerance, which must cover every namespace''s tolerance.',
                  HINT = format('Raise the limit on the store first: SELECT cosid_store_settings(max_tolerance => %L), and let its standbys replay it.', tolerance);
    END IF;
    v_epoch_ms := floor(extract(epoch FROM epoch) * 1000)::bigint;
    v_ts_bits := total_bits - slot_bits - sequence_bits;
    -- The same call again is a no-op, also for a namespace made under older rules.
    IF EXISTS (SELECT 1 FROM cosid.namespace n
               WHERE n.name = cosid_namespace_create.name
                 AND (n.slot_bits, n.sequence_bits, n.timestamp_bits, n.epoch_ms, n.unit, n.tolerance_ms)
                     = (cosid_namespace_create.slot_bits, cosid_namespace_create.sequence_bits, v_ts_bits,
                        v_epoch_ms, v_unit, v_tol_ms)) THEN
        RETURN;
    END IF;
    PERFORM cosid.layout_check(v_ts_bits, slot_bits, sequence_bits, v_epoch_ms, v_unit);
    -- A layout whose timestamps cannot cover now would only ever fail in cosid_next().
    IF epoch > now() THEN
        RAISE EXCEPTION 'cosid epoch % is in the future', epoch
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Ids hold the time since the epoch; none could be issued before it.';
    END IF;
    v_end_ms := v_epoch_ms + (power(2::numeric, v_ts_bits) - 1) * (CASE WHEN v_unit = 's' THEN 1000 ELSE 1 END);
    IF v_end_ms < extract(epoch FROM now()) * 1000 + 365.25 * 86400000 THEN
        RAISE EXCEPTION 'cosid layout with % timestamp bits (%) from epoch % ends within a year', v_ts_bits, v_unit, epoch
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('%s total bits - %s slot bits - %s sequence bits = %s timestamp bits.',
                                  total_bits, slot_bits, sequence_bits, v_ts_bits),
                  HINT = 'Use fewer slot or sequence bits, a later epoch, or unit ''s''.';
    END IF;

    SELECT * INTO v_old FROM cosid.namespace n WHERE n.name = cosid_namespace_create.name FOR UPDATE;
    IF FOUND THEN
        IF (v_old.slot_bits, v_old.sequence_bits, v_old.timestamp_bits, v_old.epoch_ms, v_old.unit, v_old.tolerance_ms)
           IS DISTINCT FROM (slot_bits, sequence_bits, v_ts_bits, v_epoch_ms, v_unit, v_tol_ms) THEN
            RAISE EXCEPTION 'cosid namespace "%" already exists with other values', name
                USING ERRCODE = 'duplicate_object',
                      DETAIL = format('Existing: total_bits=%s slot_bits=%s sequence_bits=%s epoch_ms=%s unit=%s tolerance_ms=%s; requested: total_bits=%s slot_bits=%s sequence_bits=%s epoch_ms=%s unit=%s tolerance_ms=%s.',
                                      v_old.timestamp_bits + v_old.slot_bits + v_old.sequence_bits,
                                      v_old.slot_bits, v_old.sequence_bits, v_old.epoch_ms, v_old.unit, v_old.tolerance_ms,
                                      total_bits, slot_bits, sequence_bits, v_epoch_ms, v_unit, v_tol_ms),
                      HINT = 'A namespace''s layout and tolerance never change; create a namespace with another name.';
        END IF;
        RETURN;
    END IF;
    PERFORM cosid._namespace_insert(name, slot_bits, sequence_bits, v_ts_bits, v_epoch_ms, v_unit, v_tol_ms);
END $$;

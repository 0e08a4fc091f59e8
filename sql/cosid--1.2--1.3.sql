-- cosid 1.2 -> 1.3: namespaces of fewer than 63 bits (cosid_namespace_create's total_bits;
-- 53 keeps ids exact in JavaScript), cosid_layouts, cosid_format / cosid_from_format, the
-- times of cosid_leases() as timestamptz, cosid_owners.  Nothing stored changes.
\echo Use "ALTER EXTENSION cosid UPDATE TO '1.3'" to load this file. \quit

-- The bit widths and epoch every layout keeps (cosid.layout_check also checks that the
-- timestamps end before PostgreSQL's last one): a row edited by hand past them is refused.
ALTER TABLE cosid.namespace ADD CONSTRAINT namespace_layout_bits
    CHECK (timestamp_bits BETWEEN 31 AND 60 AND slot_bits BETWEEN 1 AND 16 AND sequence_bits BETWEEN 1 AND 22
           AND timestamp_bits + slot_bits + sequence_bits <= 63 AND epoch_ms BETWEEN 0 AND 9224318015999999);

DROP FUNCTION cosid_namespace_create(text, int, interval, timestamptz, int, text);
CREATE FUNCTION cosid_namespace_create(name text,
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
BEGIN
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

REVOKE ALL ON FUNCTION cosid_namespace_create(text, int, interval, timestamptz, int, text, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_namespace_create(text, int, interval, timestamptz, int, text, int) TO cosid_admin;

-- New columns at the end, so scripts that read the old ones by position keep working.
DROP FUNCTION cosid_leases(text);
CREATE FUNCTION cosid_leases(namespace text DEFAULT NULL)
RETURNS TABLE (namespace text, slot int, owner_key text, incarnation uuid, fence bigint,
               expires_at timestamptz, floor bigint, ceiling bigint, next_floor bigint,
               state text, floor_at timestamptz, ceiling_at timestamptz, next_floor_at timestamptz)
LANGUAGE sql STABLE AS $$
    WITH now AS MATERIALIZED (  -- once: the notice is said once
        SELECT cosid.store_now() AS ms,
               CASE WHEN $1 IS NOT NULL THEN (cosid._namespace_row($1)).name END AS checked,
               cosid._static_notice($1) AS noticed)
    SELECT l.namespace, l.slot, l.owner_key, l.incarnation, l.fence,
           to_timestamp(l.expires_at / 1000.0), l.floor, l.ceiling, l.next_floor,
           CASE WHEN l.incarnation IS NULL THEN 'free'
                WHEN l.expires_at > now.ms THEN 'held'
                ELSE 'expired' END,
           to_timestamp(l.floor / 1000.0), to_timestamp(l.ceiling / 1000.0), to_timestamp(l.next_floor / 1000.0)
    FROM now, cosid.lease l
    WHERE now.noticed AND ($1 IS NULL OR l.namespace = now.checked)
    ORDER BY l.namespace, l.slot
$$;
COMMENT ON FUNCTION cosid_leases(text) IS 'every slot of the store with its lease';

-- A person's form of an id: UTC time, slot, sequence (20261203T072017.816Z-3-0262), and back.
CREATE FUNCTION cosid_format(id bigint, namespace text DEFAULT 'default') RETURNS text
AS 'MODULE_PATHNAME', 'cosid_format' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
CREATE FUNCTION cosid_from_format(formatted text, namespace text DEFAULT 'default') RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_from_format' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
COMMENT ON FUNCTION cosid_format(bigint, text) IS 'an id as UTC time, slot and sequence: 20261203T072017.816Z-3-0262';
COMMENT ON FUNCTION cosid_from_format(text, text) IS 'the id of a text written by cosid_format';

-- Every namespace's layout with what it means: how long it lasts, how many ids a slot
-- issues per second, the largest id, and whether its ids are exact in JavaScript.
CREATE VIEW cosid_layouts AS
SELECT n.name AS namespace,
       n.timestamp_bits + n.slot_bits + n.sequence_bits AS total_bits,
       n.timestamp_bits, n.slot_bits, n.sequence_bits, n.unit,
       to_timestamp(n.epoch_ms / 1000.0) AS epoch,
       -- (days, then ms, in UTC: to_timestamp's double loses the ms of far ends, and days
       -- added to a timestamptz follow the session's daylight saving time)
       CASE WHEN e.end_ms <= 9224318015999999
            THEN (timestamp 'epoch' + make_interval(days => floor(e.end_ms / 86400000)::int)
                  + (e.end_ms % 86400000)::bigint * interval '1 millisecond') AT TIME ZONE 'UTC'
            ELSE 'infinity'::timestamptz END AS ends,
       round(e.span_ms / (365.25 * 86400000), 1) AS lifetime_years,
       round((e.end_ms - extract(epoch FROM now()) * 1000) / (365.25 * 86400000), 1) AS years_left,
       1 << n.slot_bits AS slots,
       (1::bigint << n.sequence_bits) * CASE n.unit WHEN 's' THEN 1 ELSE 1000 END AS ids_per_second_per_slot,
       (power(2::numeric, n.timestamp_bits + n.slot_bits + n.sequence_bits) - 1)::bigint AS max_id,
       n.timestamp_bits + n.slot_bits + n.sequence_bits <= 53 AS javascript_safe
FROM cosid.namespace n,
     LATERAL (SELECT power(2::numeric, n.timestamp_bits) * CASE n.unit WHEN 's' THEN 1000 ELSE 1 END AS span_ms) s,
     LATERAL (SELECT n.epoch_ms + s.span_ms - CASE n.unit WHEN 's' THEN 1000 ELSE 1 END AS end_ms, s.span_ms) e;
COMMENT ON VIEW cosid_layouts IS 'every namespace''s layout: bits, lifetime in years, ids per second per slot, largest id, JavaScript safety';

-- Slots used per owner (an instance's cosid.owner_key) and how full each namespace is.
CREATE VIEW cosid_owners AS
WITH l AS (SELECT l.*, l.expires_at > cosid.store_now() AS live FROM cosid.lease l)
SELECT l.namespace, l.owner_key,
       count(*) FILTER (WHERE l.live)::int AS held,
       count(*) FILTER (WHERE NOT l.live)::int AS expired,
       count(DISTINCT l.incarnation)::int AS incarnations,
       to_timestamp(max(l.ceiling) / 1000.0) AS last_ceiling_at,
       t.slots AS namespace_slots,
       t.in_use AS namespace_in_use,
       round(100.0 * t.in_use / t.slots, 1) AS namespace_in_use_pct
FROM l
JOIN (SELECT namespace, count(*)::int AS slots, count(incarnation)::int AS in_use
      FROM cosid.lease GROUP BY namespace) t USING (namespace)
WHERE l.incarnation IS NOT NULL
GROUP BY l.namespace, l.owner_key, t.slots, t.in_use;
COMMENT ON VIEW cosid_owners IS 'slots held and expired per owner key and namespace, with how full the namespace is';
GRANT SELECT ON cosid_layouts, cosid_owners TO PUBLIC;

-- Ids and their parts: the generator's entry points (in C), the layout of an id, and the
-- functions that take an id apart or build the bounds of a time range.

-- Each definition here is the current one: the build puts this file into the update script
-- of the version being developed (sql/README.md).

-- Runtime functions: they need the library in shared_preload_libraries.
CREATE OR REPLACE FUNCTION cosid_next() RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_next_default' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION cosid_next() IS 'next id of namespace cosid.namespace (in a default: bound to cosid_next(namespace) when the default is made)';

CREATE OR REPLACE FUNCTION cosid_next(namespace text) RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_next_namespace' LANGUAGE C VOLATILE PARALLEL UNSAFE CALLED ON NULL INPUT;
COMMENT ON FUNCTION cosid_next(text) IS 'next id of the named namespace';

CREATE OR REPLACE FUNCTION cosid.unpack(id bigint, timestamp_bits int, slot_bits int, sequence_bits int,
                             epoch_ms bigint, unit text,
                             OUT ts_ms bigint, OUT slot int, OUT sequence int)
AS 'MODULE_PATHNAME', 'cosid_unpack' LANGUAGE C STRICT IMMUTABLE;

-- Layout check and id unpacking live in the C++ core; these work without preloading.
CREATE OR REPLACE FUNCTION cosid.layout_check(timestamp_bits int, slot_bits int, sequence_bits int,
                                   epoch_ms bigint, unit text)
RETURNS void AS 'MODULE_PATHNAME', 'cosid_layout_check' LANGUAGE C CALLED ON NULL INPUT;

-- How this database's definition of a namespace differs in layout from the store's (what
-- cosid_parse() here would misread), or NULL when it matches or is not defined here.
-- The text reaches the caller of cosid_next() in the DETAIL of a 42P17.
CREATE OR REPLACE FUNCTION cosid._layout_difference(p_name text, p_slot_bits int, p_sequence_bits int,
                                         p_timestamp_bits int, p_epoch_ms bigint, p_unit text)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT format('here %s/%s/%s bits, epoch %s ms, unit %s; in the lease store %s/%s/%s bits, epoch %s ms, unit %s',
                  n.timestamp_bits, n.slot_bits, n.sequence_bits, n.epoch_ms, n.unit,
                  p_timestamp_bits, p_slot_bits, p_sequence_bits, p_epoch_ms, p_unit)
    FROM cosid.namespace n
    WHERE n.name = p_name
      AND (n.timestamp_bits, n.slot_bits, n.sequence_bits, n.epoch_ms, n.unit)
          IS DISTINCT FROM (p_timestamp_bits, p_slot_bits, p_sequence_bits, p_epoch_ms, p_unit)
$$;

-- Reading ids in C (cosid_parse, cosid_timestamp, cosid_slot, cosid_sequence), the id range
-- of a timestamp (cosid_min_id, cosid_max_id) and a short text form (cosid_to_text,
-- cosid_from_text).

CREATE OR REPLACE FUNCTION cosid_parse(id bigint, namespace text DEFAULT 'default',
                                       OUT ts timestamptz, OUT slot int, OUT sequence int)
AS 'MODULE_PATHNAME', 'cosid_parse_c' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
COMMENT ON FUNCTION cosid_parse(bigint, text) IS 'timestamp, slot and sequence of an id';

-- Base 62, 11 characters: text order (COLLATE "C") is numeric order.
CREATE OR REPLACE FUNCTION cosid_to_text(id bigint) RETURNS text
AS 'MODULE_PATHNAME', 'cosid_to_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cosid_to_text(bigint) IS 'an id as 11 characters of base 62 (text order = id order under COLLATE "C")';

CREATE OR REPLACE FUNCTION cosid_from_text(text) RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_from_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cosid_from_text(text) IS 'the id of a text written by cosid_to_text';

CREATE OR REPLACE FUNCTION cosid_max_id(ts timestamptz, namespace text DEFAULT 'default') RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_max_id' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
COMMENT ON FUNCTION cosid_max_id(timestamptz, text) IS 'the largest id any slot can have at a timestamp';

-- The smallest and largest id any slot can have at a timestamp: WHERE id BETWEEN
-- cosid_min_id(a) AND cosid_max_id(b) is a range scan of the primary key.
CREATE OR REPLACE FUNCTION cosid_min_id(ts timestamptz, namespace text DEFAULT 'default') RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_min_id' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
COMMENT ON FUNCTION cosid_min_id(timestamptz, text) IS 'the smallest id any slot can have at a timestamp';

CREATE OR REPLACE FUNCTION cosid_sequence(id bigint, namespace text DEFAULT 'default') RETURNS int
AS 'MODULE_PATHNAME', 'cosid_sequence' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
COMMENT ON FUNCTION cosid_sequence(bigint, text) IS 'the sequence of an id';

CREATE OR REPLACE FUNCTION cosid_slot(id bigint, namespace text DEFAULT 'default') RETURNS int
AS 'MODULE_PATHNAME', 'cosid_slot' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
COMMENT ON FUNCTION cosid_slot(bigint, text) IS 'the slot of an id';

-- Reading ids (C, the namespace's layout cached per transaction and call site).
CREATE OR REPLACE FUNCTION cosid_timestamp(id bigint, namespace text DEFAULT 'default') RETURNS timestamptz
AS 'MODULE_PATHNAME', 'cosid_timestamp' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
COMMENT ON FUNCTION cosid_timestamp(bigint, text) IS 'the timestamp of an id';

-- A person's form of an id: UTC time, slot, sequence (20261203T072017.816Z-3-0262), and back.
CREATE OR REPLACE FUNCTION cosid_format(id bigint, namespace text DEFAULT 'default') RETURNS text
AS 'MODULE_PATHNAME', 'cosid_format' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
COMMENT ON FUNCTION cosid_format(bigint, text) IS 'an id as UTC time, slot and sequence: 20261203T072017.816Z-3-0262';

CREATE OR REPLACE FUNCTION cosid_from_format(formatted text, namespace text DEFAULT 'default') RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_from_format' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
COMMENT ON FUNCTION cosid_from_format(text, text) IS 'the id of a text written by cosid_format';

-- Every namespace's layout with what it means: how long it lasts, how many ids a slot
-- issues per second, the largest id, and whether its ids are exact in JavaScript.
CREATE OR REPLACE VIEW cosid_layouts AS
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
GRANT SELECT ON cosid_layouts, cosid_owners TO PUBLIC;

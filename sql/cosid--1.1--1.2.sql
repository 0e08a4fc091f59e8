-- cosid 1.1 -> 1.2: reading ids in C (cosid_parse, cosid_timestamp, cosid_slot,
-- cosid_sequence), the id range of a timestamp (cosid_min_id, cosid_max_id) and a short
-- text form (cosid_to_text, cosid_from_text).  Nothing stored changes.
\echo Use "ALTER EXTENSION cosid UPDATE TO '1.2'" to load this file. \quit

CREATE OR REPLACE FUNCTION cosid_parse(id bigint, namespace text DEFAULT 'default',
                                       OUT ts timestamptz, OUT slot int, OUT sequence int)
AS 'MODULE_PATHNAME', 'cosid_parse_c' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;

-- Reading ids (C, the namespace's layout cached per transaction and call site).
CREATE FUNCTION cosid_timestamp(id bigint, namespace text DEFAULT 'default') RETURNS timestamptz
AS 'MODULE_PATHNAME', 'cosid_timestamp' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
CREATE FUNCTION cosid_slot(id bigint, namespace text DEFAULT 'default') RETURNS int
AS 'MODULE_PATHNAME', 'cosid_slot' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
CREATE FUNCTION cosid_sequence(id bigint, namespace text DEFAULT 'default') RETURNS int
AS 'MODULE_PATHNAME', 'cosid_sequence' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
-- The smallest and largest id any slot can have at a timestamp: WHERE id BETWEEN
-- cosid_min_id(a) AND cosid_max_id(b) is a range scan of the primary key.
CREATE FUNCTION cosid_min_id(ts timestamptz, namespace text DEFAULT 'default') RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_min_id' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
CREATE FUNCTION cosid_max_id(ts timestamptz, namespace text DEFAULT 'default') RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_max_id' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
-- Base 62, 11 characters: text order (COLLATE "C") is numeric order.
CREATE FUNCTION cosid_to_text(id bigint) RETURNS text
AS 'MODULE_PATHNAME', 'cosid_to_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cosid_from_text(text) RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_from_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cosid_timestamp(bigint, text) IS 'the timestamp of an id';
COMMENT ON FUNCTION cosid_slot(bigint, text) IS 'the slot of an id';
COMMENT ON FUNCTION cosid_sequence(bigint, text) IS 'the sequence of an id';
COMMENT ON FUNCTION cosid_min_id(timestamptz, text) IS 'the smallest id any slot can have at a timestamp';
COMMENT ON FUNCTION cosid_max_id(timestamptz, text) IS 'the largest id any slot can have at a timestamp';
COMMENT ON FUNCTION cosid_to_text(bigint) IS 'an id as 11 characters of base 62 (text order = id order under COLLATE "C")';
COMMENT ON FUNCTION cosid_from_text(text) IS 'the id of a text written by cosid_to_text';

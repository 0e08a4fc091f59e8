-- Layouts of fewer than 63 bits (53: exact in JavaScript), cosid_layouts, cosid_format and
-- cosid_from_format, the times of cosid_leases() and cosid_owners.
SET timezone = 'UTC';
SET client_min_messages = warning;
-- 53 bits in ms: 41 timestamp bits (69.7 years from 2024), 16 slots of 256 ids per ms
SELECT cosid_namespace_create('web', slot_bits => 4, sequence_bits => 8, total_bits => 53);
-- 53 bits in seconds: 31 timestamp bits, 1024 slots of 4096 ids per second
SELECT cosid_namespace_create('web_s', slot_bits => 10, sequence_bits => 12, total_bits => 53, unit => 's');
RESET client_min_messages;
SELECT namespace, total_bits, timestamp_bits, slot_bits, sequence_bits, unit, epoch, ends, lifetime_years,
       slots, ids_per_second_per_slot, max_id, javascript_safe
FROM cosid_layouts WHERE namespace IN ('default', 'web', 'web_s') ORDER BY namespace;
SELECT years_left > 60 AND years_left < lifetime_years AS years_left_counts_from_now
FROM cosid_layouts WHERE namespace = 'web';
-- the same call again is a no-op; another total_bits is another layout
SELECT cosid_namespace_create('web', slot_bits => 4, sequence_bits => 8, total_bits => 53);
SELECT expect_error($$SELECT cosid_namespace_create('web', slot_bits => 4, sequence_bits => 8)$$);
SELECT error_detail($$SELECT cosid_namespace_create('web', slot_bits => 4, sequence_bits => 8)$$);
-- bad total_bits: out of range, NULL, a lifetime under a year (31 bits of ms), 61 timestamp bits
SELECT expect_error($$SELECT cosid_namespace_create('bad', total_bits => 64)$$);
SELECT expect_error($$SELECT cosid_namespace_create('bad', total_bits => 32)$$);
SELECT expect_error($$SELECT cosid_namespace_create('bad', total_bits => NULL)$$);
SELECT expect_error($$SELECT cosid_namespace_create('bad', total_bits => 53)$$);
SELECT expect_error($$SELECT cosid_namespace_create('bad', total_bits => 63, slot_bits => 1, sequence_bits => 1)$$);
SELECT count(*) AS nothing_made FROM cosid.namespace WHERE name = 'bad';

-- issuing in a 53-bit namespace: every id below 2^53, exact as a double, parsed back to now
CREATE TABLE web_rows (id bigint PRIMARY KEY DEFAULT cosid_next('web'), n int);
INSERT INTO web_rows (n) SELECT g FROM generate_series(1, 5000) g;
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_ids, max(id) < 2^53 AS below_2_53,
       bool_and(id::float8::bigint = id) AS exact_as_double,
       bool_and(id::float8::text::numeric = id) AS exact_as_json_number,
       bool_and(abs(extract(epoch FROM cosid_timestamp(id, 'web') - now())) < 60) AS timestamps_are_now,
       bool_and(cosid_slot(id, 'web') < 16 AND cosid_sequence(id, 'web') < 256) AS fields_fit
FROM web_rows;
SELECT to_json(max(id))::text::bigint = max(id) AS json_round_trip FROM web_rows;
-- ids outside the 53-bit layout are refused by every reader
SELECT expect_error($$SELECT cosid_timestamp(9007199254740992, 'web')$$);
SELECT error_detail($$SELECT cosid_slot(9007199254740992, 'web')$$);
SELECT cosid_timestamp(9007199254740991, 'web') AS last_tick, cosid_slot(9007199254740991, 'web') AS last_slot,
       cosid_sequence(9007199254740991, 'web') AS last_sequence;
SELECT cosid_max_id('2093-09-06 15:47:35.551+00', 'web') AS largest_web_id,
       cosid_min_id('2024-01-01+00', 'web_s') AS smallest_web_s_id,
       cosid_max_id(cosid_timestamp(9007199254740991, 'web_s'), 'web_s') AS largest_web_s_id;
SELECT expect_error($$SELECT cosid_max_id('2093-09-06 15:47:35.552+00', 'web')$$);

-- cosid_format and cosid_from_format
SELECT ((1796282417816 - 1704067200000) << 22) | (3 << 12) | 262 AS id \gset
SELECT cosid_format(:id) AS formatted, cosid_from_format(cosid_format(:id)) = :id AS round_trip;
SELECT cosid_format(0) AS first, cosid_format(9223372036854775807) AS last;
SELECT cosid_format(9007199254740991, 'web') AS web_last, cosid_format(0, 'web_s') AS web_s_first,
       cosid_from_format('20261203T072017Z-3-0262', 'web_s') = (((1796282417::bigint - 1704067200) << 22) | (3 << 12) | 262)
           AS seconds_round_trip;
SELECT count(*) FILTER (WHERE cosid_from_format(cosid_format(id, 'web'), 'web') <> id) AS mismatches
FROM web_rows;
-- within one tick and slot, text order is id order
SELECT bool_and((cosid_format(a) COLLATE "C" < cosid_format(a + 1) COLLATE "C")) AS ordered
FROM (SELECT (((random() * 1e11)::bigint << 22) | ((random() * 4094)::bigint)) AS a FROM generate_series(1, 1000)) x;
-- NULLs, ids outside the layout, malformed text, impossible dates, slots and sequences past the layout
SELECT expect_error($$SELECT cosid_format(NULL)$$);
SELECT expect_error($$SELECT cosid_format(1, NULL)$$);
SELECT expect_error($$SELECT cosid_format(-1)$$);
SELECT expect_error($$SELECT cosid_format(9007199254740992, 'web')$$);
SELECT expect_error($$SELECT cosid_format(1, 'nope')$$);
SELECT expect_error($$SELECT cosid_from_format(NULL)$$);
SELECT expect_error($$SELECT cosid_from_format('20261203T072017.816Z-3-0262', NULL)$$);
SELECT expect_error($$SELECT cosid_from_format('20261203T072017.816Z-3')$$);
SELECT error_detail($$SELECT cosid_from_format('20261203T072017.816Z-3')$$);
SELECT expect_error($$SELECT cosid_from_format('20261203T072017.816Z-3-0262', 'web_s')$$);
SELECT error_detail($$SELECT cosid_from_format('20261303T072017.816Z-3-0262')$$);
SELECT error_detail($$SELECT cosid_from_format('20270229T072017.816Z-3-0262')$$);
SELECT error_detail($$SELECT cosid_from_format('20261203T072017.816Z-16-262', 'web')$$);
SELECT error_detail($$SELECT cosid_from_format('20261203T072017.816Z-3-256', 'web')$$);
SELECT error_detail($$SELECT cosid_from_format('20231231T235959.999Z-0-0000')$$);
SELECT error_detail($$SELECT cosid_from_format('21000101T000000.000Z-0-0000')$$);

-- cosid_leases(): the times also as timestamptz; cosid_owners: slots used per owner
SELECT bool_and(floor_at = to_timestamp(floor / 1000.0) AND ceiling_at = to_timestamp(ceiling / 1000.0)
                AND next_floor_at = to_timestamp(next_floor / 1000.0)) AS same_times,
       bool_and(ceiling_at > now() - interval '1 minute') FILTER (WHERE state = 'held') AS held_ceilings_recent
FROM cosid_leases('web');
SELECT o.namespace, o.owner_key = s.owner_key AS this_instance, o.held, o.expired, o.incarnations,
       o.last_ceiling_at > now() - interval '1 minute' AS recent, o.namespace_slots, o.namespace_in_use,
       o.namespace_in_use_pct
FROM cosid_owners o, cosid_stats() s WHERE o.namespace = 'web';

-- every layout ends before PostgreSQL's last timestamp (294276-12-31): at most 53 timestamp
-- bits of ms, 43 of seconds from a recent epoch
SELECT expect_error($$SELECT cosid_namespace_create('far', slot_bits => 1, sequence_bits => 8)$$);
SELECT expect_error($$SELECT cosid_namespace_create('far', slot_bits => 10, sequence_bits => 9, unit => 's')$$);
SELECT cosid_namespace_create('far', slot_bits => 1, sequence_bits => 9) AS fifty_three_bits_of_ms;
SELECT ends, lifetime_years FROM cosid_layouts WHERE namespace = 'far';
SELECT cosid_format(9223372036854775807, 'far') AS last_of_far, cosid_timestamp(9223372036854775807, 'far') AS its_time,
       cosid_from_format(cosid_format(9223372036854775807, 'far'), 'far') = 9223372036854775807 AS round_trip;
-- one text per id: no leading zeros, the sequence at the layout's width
SELECT error_detail($$SELECT cosid_from_format('20261203T072017.816Z-03-0262')$$);
SELECT error_detail($$SELECT cosid_from_format('20261203T072017.816Z-3-262')$$);
-- the table keeps the bit widths, whoever writes it
SELECT expect_error($$UPDATE cosid.namespace SET sequence_bits = 30 WHERE name = 'far'$$);
SELECT expect_error($$UPDATE cosid.namespace SET timestamp_bits = 61 WHERE name = 'far'$$);
-- the internal unpacker refuses an id past a short layout too
SELECT expect_error($$SELECT cosid.unpack(9007199254740992, 41, 4, 8, 1704067200000, 'ms')$$);
-- cosid_layouts.ends is the same instant in any time zone (no daylight saving shift)
SET timezone = 'Europe/Berlin';
SELECT ends AT TIME ZONE 'UTC' AS default_ends_utc FROM cosid_layouts WHERE namespace = 'default';
SET timezone = 'UTC';
-- a namespace made under older rules, ending after PostgreSQL's last timestamp: making it
-- again with its values is still a no-op; its ids near now read, its far ones answer ZC005
SELECT cosid._namespace_insert('old_far', 1, 8, 54, 1704067200000, 'ms', 1000);
SELECT cosid_namespace_create('old_far', slot_bits => 1, sequence_bits => 8) AS same_again;
SELECT cosid_timestamp(cosid_min_id('2026-12-03 07:20:17.816+00', 'old_far'), 'old_far') AS near;
SELECT expect_error($$SELECT cosid_timestamp(9223372036854775807, 'old_far')$$);
SELECT expect_error($$SELECT cosid_format(9223372036854775807, 'old_far')$$);
SELECT expect_error($$SELECT * FROM cosid_parse(9223372036854775807, 'old_far')$$);
SELECT ends FROM cosid_layouts WHERE namespace = 'old_far';

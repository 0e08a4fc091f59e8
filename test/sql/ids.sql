-- Reading ids: cosid_parse, cosid_timestamp, cosid_slot, cosid_sequence, cosid_min_id,
-- cosid_max_id, cosid_to_text, cosid_from_text; the edges of the layouts and bad input.
SET client_min_messages = warning;
SELECT cosid_namespace_create('sec', slot_bits => 10, sequence_bits => 20, unit => 's');
RESET client_min_messages;
-- an id packed by hand in the default layout: 2026-12-03 07:20:17.816 UTC, slot 3, sequence 262
SELECT ((1796282417816 - 1704067200000) << 22) | (3 << 12) | 262 AS id \gset
SET timezone = 'UTC';
SELECT cosid_timestamp(:id), cosid_slot(:id), cosid_sequence(:id);
SELECT * FROM cosid_parse(:id);
-- the range of a timestamp: every id of that millisecond lies in it, and ranges touch
SELECT cosid_min_id('2026-12-03 07:20:17.816+00') <= :id AND :id <= cosid_max_id('2026-12-03 07:20:17.816+00') AS inside;
SELECT cosid_max_id('2026-12-03 07:20:17.816+00') + 1 = cosid_min_id('2026-12-03 07:20:17.817+00') AS touching;
SELECT cosid_min_id('2024-01-01 00:00:00+00') AS at_epoch,
       cosid_max_id('2093-09-06 15:47:35.551+00') = 9223372036854775807 AS last_tick_ends_at_bigint_max;
-- a layout in seconds rounds down to the second
SELECT cosid_min_id('2026-12-03 07:20:17.999+00', 'sec') = cosid_min_id('2026-12-03 07:20:17+00', 'sec') AS same_second;
SELECT cosid_timestamp(cosid_max_id('2026-12-03 07:20:17.5+00', 'sec'), 'sec');
-- outside the layout, infinity, NULLs, negative ids, unknown namespaces
SELECT cosid_min_id('2023-12-31 23:59:59.999+00');
SELECT cosid_max_id('2093-09-06 15:47:35.552+00');
SELECT cosid_max_id('infinity');
SELECT cosid_min_id(NULL);
SELECT cosid_timestamp(-1);
SELECT cosid_slot(NULL);
SELECT cosid_sequence(1, NULL);
SELECT cosid_timestamp(1, 'nope');
SELECT * FROM cosid_parse(NULL);
-- text: fixed width, round trip, bad input
SELECT cosid_to_text(0), cosid_to_text(61), cosid_to_text(62), cosid_to_text(9223372036854775807);
SELECT cosid_from_text(cosid_to_text(:id)) = :id AS round_trip, cosid_from_text('AzL8n0Y58m7') AS largest;
SELECT cosid_to_text(NULL) IS NULL AS null_in_null_out, cosid_from_text(NULL) IS NULL AS and_back;
SELECT cosid_to_text(-5);
SELECT cosid_from_text('123');
SELECT cosid_from_text('0000000000-');
SELECT cosid_from_text('AzL8n0Y58m8');
SELECT cosid_from_text('zzzzzzzzzzz');
-- text order under COLLATE "C" is id order
SELECT bool_and((cosid_to_text(a) COLLATE "C" < cosid_to_text(b) COLLATE "C") = (a < b)) AS ordered
FROM (SELECT (random() * 9e18)::bigint AS a, (random() * 9e18)::bigint AS b FROM generate_series(1, 1000)) x;
-- a namespace made again with another layout is read anew by the next statement
SET client_min_messages = warning;
SELECT cosid_namespace_create('again', slot_bits => 4);
SELECT cosid_slot((5::bigint << 12) | 7, 'again') AS slot_in_4_bits;
SET cosid.store_clock_offset = 3600000;  -- its slots start above the earlier raise (failover.sql)
DELETE FROM cosid.lease WHERE namespace = 'again';
DELETE FROM cosid.namespace WHERE name = 'again';
RESET cosid.store_clock_offset;
SELECT cosid_namespace_create('again', slot_bits => 2, sequence_bits => 14);
RESET client_min_messages;
SELECT cosid_slot((5::bigint << 12) | 7, 'again') AS slot_in_2_bits;

-- Regional stores (issue 26): a namespace whose slots this store grants only within a range
-- (cosid_namespace_create(..., slot_range => ...)); refusals change nothing.
SELECT cosid_namespace_create('region_a', slot_range => '[0,4)', slot_bits => 3, tolerance => '200 ms');
SELECT cosid_namespace_create('region_a', slot_range => '[0,4)', slot_bits => 3, tolerance => '200 ms');  -- the same again: no-op
SELECT name, slot_bits, slot_range FROM cosid.namespace WHERE name = 'region_a';

-- One namespace has one range per store: another range, overlapping or beside it, is refused.
SELECT expect_error($$SELECT cosid_namespace_create('region_a', slot_range => '[2,6)', slot_bits => 3, tolerance => '200 ms')$$);
SELECT error_detail($$SELECT cosid_namespace_create('region_a', slot_range => '[2,6)', slot_bits => 3, tolerance => '200 ms')$$);
SELECT error_detail($$SELECT cosid_namespace_create('region_a', slot_range => '[4,8)', slot_bits => 3, tolerance => '200 ms')$$);
-- A range past the layout's slots, empty or unbounded, is refused, and creates nothing.
SELECT expect_error($$SELECT cosid_namespace_create('region_x', slot_range => '[4,9)', slot_bits => 3)$$);
SELECT error_detail($$SELECT cosid_namespace_create('region_x', slot_range => '[4,9)', slot_bits => 3)$$);
SELECT expect_error($$SELECT cosid_namespace_create('region_x', slot_range => '[-1,2)', slot_bits => 3)$$);
SELECT expect_error($$SELECT cosid_namespace_create('region_x', slot_range => 'empty', slot_bits => 3)$$);
SELECT expect_error($$SELECT cosid_namespace_create('region_x', slot_range => '[2,)', slot_bits => 3)$$);
SELECT count(*) AS region_x FROM cosid.namespace WHERE name = 'region_x';
-- A hand edit past the layout is refused by the table's constraint.
SELECT expect_error($$UPDATE cosid.namespace SET slot_range = '[0,9)' WHERE name = 'region_a'$$);

-- The store grants only slots in the range: the preferred slot 6 is outside and passed over,
-- and after 4 grants the namespace is exhausted (no slot, and the earliest expiry to wait for).
SELECT a.slot FROM cosid.acquire('region_a', 'k1', '00000000-0000-0000-0000-000000000001', 60000, 6) a;
SELECT a.slot FROM cosid.acquire('region_a', 'k2', '00000000-0000-0000-0000-000000000002', 60000) a;
SELECT a.slot FROM cosid.acquire('region_a', 'k3', '00000000-0000-0000-0000-000000000003', 60000) a;
SELECT a.slot FROM cosid.acquire('region_a', 'k4', '00000000-0000-0000-0000-000000000004', 60000, 3) a;
SELECT a.slot IS NULL AS exhausted, a.earliest_expiry > a.store_now AS waits
  FROM cosid.acquire('region_a', 'k5', '00000000-0000-0000-0000-000000000005', 60000) a;
SELECT count(*) FILTER (WHERE incarnation IS NOT NULL AND slot < 4) AS held_in_range,
       count(*) FILTER (WHERE incarnation IS NOT NULL AND slot >= 4) AS held_outside
  FROM cosid.lease WHERE namespace = 'region_a';

-- Once a slot was granted the range is fixed: an edit is refused, and stating a range for a
-- namespace that granted slots without one is refused too.
SELECT expect_error($$UPDATE cosid.namespace SET slot_range = '[0,8)' WHERE name = 'region_a'$$);
SELECT error_detail($$UPDATE cosid.namespace SET slot_range = NULL WHERE name = 'region_a'$$);
SELECT cosid_namespace_create('region_none', slot_bits => 3);
SELECT a.slot FROM cosid.acquire('region_none', 'k1', '00000000-0000-0000-0000-000000000001', 60000) a;
SELECT expect_error($$SELECT cosid_namespace_create('region_none', slot_range => '[0,4)', slot_bits => 3)$$);
SELECT error_detail($$SELECT cosid_namespace_create('region_none', slot_range => '[0,4)', slot_bits => 3)$$);
SELECT name, slot_range FROM cosid.namespace WHERE name LIKE 'region%' ORDER BY name;

-- A namespace that never granted a slot may still get its range (the layout as before).
SELECT cosid_namespace_create('region_late', slot_bits => 3);
SELECT cosid_namespace_create('region_late', slot_range => '[4,8)', slot_bits => 3);
SELECT expect_error($$SELECT cosid_namespace_create('region_late', slot_range => '[4,8)', slot_bits => 4)$$);
SELECT slot_range FROM cosid.namespace WHERE name = 'region_late';

-- The keeper's record of the range a store stated, in its copy of the namespace (made
-- without a range): the first is kept and returned afterwards, for the keeper to compare.
SELECT cosid_namespace_create('region_copy', slot_bits => 3);
SELECT cosid._namespace_range_seen('region_copy', '[4,8)') AS before_first;
SELECT cosid._namespace_range_seen('region_copy', '[0,4)') AS kept;
SELECT slot_range FROM cosid.namespace WHERE name = 'region_copy';

-- Only superusers and cosid_admin create namespaces, with a range or without.
SELECT has_function_privilege('public', 'cosid_namespace_create(text, int4range, int, interval, timestamptz, int, text, int)', 'execute') AS public_may,
       has_function_privilege('cosid_admin', 'cosid_namespace_create(text, int4range, int, interval, timestamptz, int, text, int)', 'execute') AS admin_may;

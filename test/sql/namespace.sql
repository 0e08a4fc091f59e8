-- Namespaces: created with CREATE EXTENSION ('default'), idempotent with equal values,
-- rejected with other values or bad input, and nothing changes on error.
SELECT name, slot_bits, sequence_bits, timestamp_bits, epoch_ms, unit, tolerance_ms FROM cosid.namespace ORDER BY name;
SELECT count(*) AS default_slots, min(slot), max(slot) FROM cosid.lease WHERE namespace = 'default';

SELECT cosid_namespace_create('small', slot_bits => 2, tolerance => '200 ms');
SELECT cosid_namespace_create('small', slot_bits => 2, tolerance => '200 ms');  -- same values: no-op
SELECT expect_error($$SELECT cosid_namespace_create('small', slot_bits => 3, tolerance => '200 ms')$$);
SELECT error_detail($$SELECT cosid_namespace_create('small', slot_bits => 3, tolerance => '200 ms')$$);
SELECT expect_error($$SELECT cosid_namespace_create('default', tolerance => '2 seconds')$$);
SELECT cosid_namespace_create('seconds', slot_bits => 8, sequence_bits => 20, unit => 's',
                              epoch => '2020-01-01 00:00:00+00');
SELECT cosid_namespace_create('few_slots', slot_bits => 3, sequence_bits => 9);  -- 51 timestamp bits, 8 slots, 512 ids per ms

SELECT expect_error($$SELECT cosid_namespace_create('bad_bits', slot_bits => 17)$$);
SELECT expect_error($$SELECT cosid_namespace_create('bad_bits', slot_bits => 0)$$);
SELECT expect_error($$SELECT cosid_namespace_create('bad_bits', slot_bits => 16, sequence_bits => 22)$$);
SELECT expect_error($$SELECT cosid_namespace_create('bad_bits', sequence_bits => -1)$$);
SELECT expect_error($$SELECT cosid_namespace_create('bad_tol', tolerance => '-1 second')$$);
SELECT expect_error($$SELECT cosid_namespace_create('bad_tol', tolerance => '2 hours')$$);
SELECT expect_error($$SELECT cosid_namespace_create('bad_tol', tolerance => 'soon')$$);
SELECT expect_error($$SELECT cosid_namespace_create('bad unit', unit => 'minute')$$);
SELECT expect_error($$SELECT cosid_namespace_create('bad_unit', unit => 'minute')$$);
SELECT expect_error($$SELECT cosid_namespace_create(NULL)$$);
SELECT expect_error($$SELECT cosid_namespace_create('x', slot_bits => NULL)$$);
SELECT expect_error($$SELECT cosid_namespace_create('', slot_bits => 4)$$);
SELECT expect_error($$SELECT cosid_namespace_create('old_epoch', epoch => '1960-01-01')$$);

-- Nothing was created by the failures.
SELECT name, slot_bits, sequence_bits, timestamp_bits, unit, tolerance_ms FROM cosid.namespace ORDER BY name;
SELECT namespace, count(*) FROM cosid.lease GROUP BY namespace ORDER BY namespace;

SELECT namespace, slot, state FROM cosid_leases('small');
SELECT expect_error($$SELECT * FROM cosid_leases('missing')$$);

-- Layouts that cannot serve now are refused.
SELECT expect_error($$SELECT cosid_namespace_create('future', epoch => '2300-01-01')$$);
SELECT expect_error($$SELECT cosid_namespace_create('too_short', slot_bits => 10, sequence_bits => 22)$$);
SELECT count(*) AS none_created FROM cosid.namespace WHERE name IN ('future', 'too_short');

-- Rows of a namespace's slots without its row (no foreign key since 1.5: a parallel restore
-- loads cosid.lease before cosid.namespace): the namespace is not made over them, and nothing
-- changes.
INSERT INTO cosid.lease (namespace, slot) VALUES ('orphaned', 0), ('orphaned', 1);
SELECT expect_error($$SELECT cosid_namespace_create('orphaned', slot_bits => 1)$$);
SELECT error_detail($$SELECT cosid_namespace_create('orphaned', slot_bits => 1)$$);
SELECT (SELECT count(*) FROM cosid.namespace WHERE name = 'orphaned') AS namespace_rows,
       (SELECT count(*) FROM cosid.lease WHERE namespace = 'orphaned') AS lease_rows;
DELETE FROM cosid.lease WHERE namespace = 'orphaned';

-- The layout rules of the C++ core, reached from SQL.
SELECT cosid.layout_check(41, 10, 12, 1704067200000, 'ms');
SELECT cosid.layout_check(31, 10, 22, 1704067200000, 's');
SELECT expect_error($$SELECT cosid.layout_check(41, 10, 13, 1704067200000, 'ms')$$);
SELECT expect_error($$SELECT cosid.layout_check(30, 10, 23, 1704067200000, 'ms')$$);
SELECT expect_error($$SELECT cosid.layout_check(62, 0, 1, 1704067200000, 'ms')$$);
SELECT expect_error($$SELECT cosid.layout_check(41, 10, 12, -1, 'ms')$$);
SELECT expect_error($$SELECT cosid.layout_check(41, 10, 12, 1704067200001, 's')$$);
SELECT expect_error($$SELECT cosid.layout_check(41, 10, 12, 1704067200000, 'minute')$$);
SELECT expect_error($$SELECT cosid.layout_check(NULL, 10, 12, 1704067200000, 'ms')$$);

-- Unpacking: the top bits are the timestamp since the epoch, then slot, then sequence.
SELECT * FROM cosid.unpack((5::bigint << 22) | (3 << 12) | 7, 41, 10, 12, 1704067200000, 'ms');
SELECT * FROM cosid.unpack(9223372036854775807, 41, 10, 12, 1704067200000, 'ms');
SELECT expect_error($$SELECT cosid.unpack(-1, 41, 10, 12, 1704067200000, 'ms')$$);
SELECT ts, slot, sequence FROM cosid_parse((1000::bigint << 22) | (1023 << 12) | 4095);
SELECT expect_error($$SELECT cosid_parse(1, 'no_such_namespace')$$);
SELECT expect_error($$SELECT cosid_parse(NULL)$$);

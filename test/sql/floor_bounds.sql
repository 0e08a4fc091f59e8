-- A namespace's floor (not_before_ms): a keeper raises it at most max_ttl + 2 x max_tolerance
-- ahead of the store's clock, an acquire folds no floor beyond that into a lease row, and an
-- administrator lowers a floor raised by mistake, never below what the lease rows show.
CREATE FUNCTION fb_error(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    st text; det text; hint text;
BEGIN
    EXECUTE stmt;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, det = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RETURN st || ', detail ' || (coalesce(det, '') <> '') || ', hint ' || (coalesce(hint, '') <> '');
END $$;
CREATE FUNCTION fb_message(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    msg text;
BEGIN
    EXECUTE stmt;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
    RETURN msg;
END $$;
SELECT cosid_namespace_create('fb', slot_bits => 2, tolerance => '1 second');
SELECT slot_bits AS sb, sequence_bits AS qb, timestamp_bits AS tb, epoch_ms AS ep, unit AS un
  FROM cosid.namespace WHERE name = 'fb' \gset
-- (the limits' reach, or the last raise's: the reach cap after a restore an earlier test made)
SELECT cosid._floor_margin() AS margin \gset
-- 2093-09-06 00:00:00 UTC, the floor of the finding
SELECT (extract(epoch FROM timestamptz '2093-09-06 00:00:00+00') * 1000)::bigint AS far \gset
CREATE TABLE fb_rows AS SELECT slot, fence, floor, ceiling, next_floor FROM cosid.lease WHERE namespace = 'fb';

-- 1. A keeper login (a member of cosid_keeper only): up to the bound, not beyond.
CREATE ROLE fb_keeper LOGIN IN ROLE cosid_keeper;
SET SESSION AUTHORIZATION fb_keeper;
SELECT cosid.raise_floor('fb', cosid.store_now() + 5000, :sb, :qb, :tb, :ep, :'un') > 0 AS keeper_raises_5s;
SELECT fb_error(format('SELECT cosid.raise_floor(%L, cosid.store_now() + %s + 60000, %s, %s, %s, %s, %L)',
                       'fb', :margin, :sb, :qb, :tb, :ep, :'un')) AS keeper_past_bound;
SELECT fb_error(format('SELECT cosid.raise_floor(%L, %s, %s, %s, %s, %s, %L)', 'fb', :far, :sb, :qb, :tb, :ep, :'un'))
    AS keeper_to_2093;
SELECT fb_message(format('SELECT cosid.raise_floor(%L, %s, %s, %s, %s, %s, %L)', 'fb', :far, :sb, :qb, :tb, :ep, :'un'))
    LIKE '%2093-09-06 00:00:00.000 UTC' AS message_names_the_date;
SELECT fb_error($$SELECT cosid_namespace_lower_floor('fb', now())$$) AS keeper_lowers;
RESET SESSION AUTHORIZATION;
SELECT not_before_ms < cosid.store_now() + 10000 AS floor_within_10s FROM cosid.namespace WHERE name = 'fb';

-- 2. An administrator may set a floor that far; an acquire then refuses, naming it, and
-- touches no lease row.
SELECT cosid.raise_floor('fb', :far, :sb, :qb, :tb, :ep, :'un') = :far AS admin_raises_to_2093;
SELECT fb_error($$SELECT * FROM cosid.acquire('fb', 'elsewhere', '00000000-0000-0000-0000-0000000000f1', 10000)$$)
    AS acquire_refuses;
SELECT fb_message($$SELECT * FROM cosid.acquire('fb', 'elsewhere', '00000000-0000-0000-0000-0000000000f1', 10000)$$)
    LIKE 'cosid namespace "fb" grants no window before 2093-09-06 00:00:00.000 UTC (%years%ahead%' AS acquire_names_the_floor;
SELECT count(*) AS rows_changed FROM (
    SELECT slot, fence, floor, ceiling, next_floor FROM cosid.lease WHERE namespace = 'fb'
    EXCEPT SELECT * FROM fb_rows) x;

-- 3. The administrator lowers it as far as the lease rows allow: no slot of 'fb' was granted
-- yet (but the store's raise after a failover, which earlier tests ran, lifts next floors up to
-- max_ttl + 2 x max_tolerance ahead).
SELECT greatest(lowest_ms, (extract(epoch FROM now()) * 1000)::bigint) AS lowest FROM cosid._floor_lowest('fb') \gset
SELECT lowest_ms <= cosid.store_now() + :margin AS rows_within_the_bound FROM cosid._floor_lowest('fb');
SELECT cosid_namespace_lower_floor('fb', to_timestamp(:lowest / 1000.0)) IS NOT NULL AS lowered;
SELECT not_before_ms <= cosid.store_now() + :margin AS floor_back FROM cosid.namespace WHERE name = 'fb';
SELECT slot IS NOT NULL AS acquires_again, floor <= cosid.store_now() + :margin AS window_near
  FROM cosid.acquire('fb', 'elsewhere', '00000000-0000-0000-0000-0000000000f1', 10000);

-- 4. Never below what a lease row shows: slot granted up to its ceiling.
SELECT max(ceiling) AS granted FROM cosid.lease WHERE namespace = 'fb' \gset
SELECT cosid.raise_floor('fb', :far, :sb, :qb, :tb, :ep, :'un') = :far AS raised_again;
SELECT fb_error($$SELECT cosid_namespace_lower_floor('fb', now())$$) AS below_a_granted_window;
SELECT fb_error(format('SELECT cosid_namespace_lower_floor(%L, to_timestamp(%s / 1000.0))', 'fb', :granted))
    AS at_the_ceiling;
SELECT not_before_ms = :granted AS floor_at_the_ceiling FROM cosid.namespace WHERE name = 'fb';
-- and a static ceiling (cosid.static_ceiling, the namespace's adopted floor included)
SELECT cosid.raise_floor('fb', :far, :sb, :qb, :tb, :ep, :'un') = :far AS raised_once_more;
INSERT INTO cosid.static_ceiling (namespace, slot, system_identifier, ceiling_ms) VALUES ('fb', -1, 7, :granted + 5000);
SELECT fb_error(format('SELECT cosid_namespace_lower_floor(%L, to_timestamp(%s / 1000.0))', 'fb', :granted))
    AS below_a_static_ceiling;
SELECT cosid_namespace_lower_floor('fb', to_timestamp((:granted + 5000) / 1000.0)) IS NOT NULL AS at_the_static_ceiling;
DELETE FROM cosid.static_ceiling WHERE namespace = 'fb';

-- 5. Other refusals: only lowers, NULL, unknown namespace, infinity.
SELECT fb_error($$SELECT cosid_namespace_lower_floor('fb', now() + interval '1 day')$$) AS raising;
SELECT fb_error($$SELECT cosid_namespace_lower_floor(NULL, now())$$) AS null_namespace;
SELECT fb_error($$SELECT cosid_namespace_lower_floor('fb', NULL)$$) AS null_floor;
SELECT fb_error($$SELECT cosid_namespace_lower_floor('nope', now())$$) AS unknown;
SELECT fb_error($$SELECT cosid_namespace_lower_floor('fb', '-infinity')$$) AS infinite;

-- 6. The guard lets only that function lower a floor: not a hand UPDATE, not one that fakes
-- its mark below what the rows show.
SELECT fb_error($$UPDATE cosid.namespace SET not_before_ms = 0 WHERE name = 'fb'$$) AS hand_update;
SELECT fb_error($$SELECT set_config('cosid_internal.lower_floor', 'fb 0', false);
                  UPDATE cosid.namespace SET not_before_ms = 0 WHERE name = 'fb'$$) AS faked_mark;
RESET cosid_internal.lower_floor;
SELECT not_before_ms = :granted + 5000 AS floor_kept FROM cosid.namespace WHERE name = 'fb';

-- 7. A role with the grant but no administrator: refused inside too.
CREATE ROLE fb_granted;
GRANT EXECUTE ON FUNCTION cosid_namespace_lower_floor(text, timestamptz) TO fb_granted;
SET SESSION AUTHORIZATION fb_granted;
SELECT fb_error($$SELECT cosid_namespace_lower_floor('fb', now())$$) AS granted_not_admin;
RESET SESSION AUTHORIZATION;
REVOKE EXECUTE ON FUNCTION cosid_namespace_lower_floor(text, timestamptz) FROM fb_granted;
DROP ROLE fb_granted;
DROP ROLE fb_keeper;
DROP TABLE fb_rows;

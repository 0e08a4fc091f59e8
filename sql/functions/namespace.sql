-- Namespaces: making one, the rows the store keeps for it, its floor, and the guards on its row.

-- Each definition here is the current one: the build puts this file into the update script
-- of the version being developed (sql/README.md).

-- Makes a namespace: its layout (slot, sequence and timestamp bits, its epoch and unit) and
-- tolerance, and its slots' rows in the store.  The same call again changes nothing; a
-- different layout for an existing name is refused.  Refused on a Citus worker (namespaces
-- live on the coordinator).
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
    v_epoch_ms := floor(extract(epoch FROM epoch) * 1000)::bigint;
    v_ts_bits := total_bits - slot_bits - sequence_bits;
    -- The same call again is a no-op, also for a namespace made under older rules: a plain
    -- read, which holds up no acquire of the namespace.
    IF EXISTS (SELECT 1 FROM cosid.namespace n
               WHERE n.name = cosid_namespace_create.name
                 AND (n.slot_bits, n.sequence_bits, n.timestamp_bits, n.epoch_ms, n.unit, n.tolerance_ms)
                     = (cosid_namespace_create.slot_bits, cosid_namespace_create.sequence_bits, v_ts_bits,
                        v_epoch_ms, v_unit, v_tol_ms)) THEN
        RETURN;
    END IF;
    -- The namespace's row before the store's state, as an acquire takes them (src/README.md:
    -- the store's lock order): a raise here would otherwise hold the state while it waited
    -- for an acquire that holds the row and waits for the state.
    PERFORM FROM cosid.namespace n WHERE n.name = cosid_namespace_create.name FOR UPDATE;
    PERFORM cosid._follow_timeline(NULL);  -- one row of store_state to read
    SELECT s.max_tolerance_ms INTO v_max_tol FROM cosid.store_state s;
    IF v_tol_ms > v_max_tol THEN
        RAISE EXCEPTION 'cosid tolerance % is above the lease store''s max_tolerance (% ms)', tolerance, v_max_tol
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'After a failover the store raises every floor by 2 x its max_tolerance, which must cover every namespace''s tolerance.',
                  HINT = format('Raise the limit on the store first: SELECT cosid_store_settings(max_tolerance => %L), and let its standbys replay it.', tolerance);
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

-- cosid_namespace_create with a slot range: the layout as the function without one (which
-- it calls: same checks, same no-op for the same call again), then the range.
CREATE OR REPLACE FUNCTION cosid_namespace_create(name text,
                                       slot_range int4range,
                                       slot_bits int DEFAULT 10,
                                       tolerance interval DEFAULT '1 second',
                                       epoch timestamptz DEFAULT '2024-01-01 00:00:00+00',
                                       sequence_bits int DEFAULT 12,
                                       unit text DEFAULT 'ms',
                                       total_bits int DEFAULT 63)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_range int4range := cosid_namespace_create.slot_range;
    v_old   cosid.namespace;
BEGIN
    IF v_range IS NOT NULL AND (isempty(v_range) OR lower_inf(v_range) OR upper_inf(v_range)) THEN
        RAISE EXCEPTION 'cosid slot_range must be a bounded, non-empty range of slots, got %', v_range
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'For example slot_range => ''[0,512)'' on one region''s store and ''[512,1024)'' on another''s.';
    END IF;
    IF slot_bits BETWEEN 1 AND 16 AND v_range IS NOT NULL
       AND (lower(v_range) < 0 OR upper(v_range) > (1 << slot_bits)) THEN
        RAISE EXCEPTION 'cosid slot_range % reaches past the slots of namespace "%"', v_range, name
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('A namespace of %s slot bits has slots [0,%s).', slot_bits, 1 << slot_bits),
                  HINT = 'Use a range within the layout''s slots, or more slot bits.';
    END IF;
    PERFORM @extschema@.cosid_namespace_create(name, slot_bits, tolerance, epoch, sequence_bits, unit, total_bits);
    -- The same call again: a plain read first, which holds up no acquire of the namespace.
    IF EXISTS (SELECT 1 FROM cosid.namespace n
                WHERE n.name = cosid_namespace_create.name AND n.slot_range IS NOT DISTINCT FROM v_range) THEN
        RETURN;
    END IF;
    SELECT * INTO v_old FROM cosid.namespace n WHERE n.name = cosid_namespace_create.name FOR UPDATE;
    IF v_old.slot_range IS NOT DISTINCT FROM v_range THEN
        RETURN;  -- the same call again
    END IF;
    IF v_old.slot_range IS NOT NULL OR EXISTS (SELECT 1 FROM cosid.lease l WHERE l.namespace = v_old.name AND l.fence > 0) THEN
        RAISE EXCEPTION 'cosid namespace "%" already has slot range % on this store', name,
                        coalesce(v_old.slot_range::text, '(all slots)')
            USING ERRCODE = 'duplicate_object',
                  DETAIL = format('One namespace has one range per store; %s %s it%s.',
                                  coalesce(v_range::text, 'all slots'),
                                  CASE WHEN v_old.slot_range IS NULL OR v_range IS NULL OR v_range && v_old.slot_range
                                       THEN 'overlaps' ELSE 'is beside' END,
                                  CASE WHEN v_old.slot_range IS NULL THEN ', and slots of it were granted here' ELSE '' END),
                  HINT = 'Another range of the namespace belongs on another store (another region), created there, disjoint from this one.';
    END IF;
    UPDATE cosid.namespace n SET slot_range = v_range WHERE n.name = v_old.name;
END $$;
COMMENT ON FUNCTION cosid_namespace_create(text, int4range, int, interval, timestamptz, int, text, int) IS 'creates a namespace whose slots this store grants only within slot_range (regional stores; superuser or cosid_admin)';
REVOKE ALL ON FUNCTION cosid_namespace_create(text, int4range, int, interval, timestamptz, int, text, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_namespace_create(text, int4range, int, interval, timestamptz, int, text, int) TO cosid_admin;

CREATE OR REPLACE FUNCTION cosid._namespace_insert(p_name text, p_slot_bits int, p_sequence_bits int,
                                        p_timestamp_bits int, p_epoch_ms bigint, p_unit text,
                                        p_tolerance_ms bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_floor   bigint;
    v_orphans bigint;
    v_first   int;
    v_last    int;
    v_count   bigint;
BEGIN
    -- A namespace's slots start at the store's now: a store made again (DROP and CREATE
    -- EXTENSION, refused while any window reaches past now) never starts a window below one
    -- of the store it replaces, whatever the clocks of the holders.  A namespace made again
    -- after a raise (its first making lost in the old timeline's tail) may have holders from
    -- that tail: its slots start above the raise too, by the store's limits, not by this
    -- definition's tolerance (the lost one's may have been larger).
    PERFORM cosid._follow_timeline(NULL);
    SELECT greatest(cosid.store_now(),
                    CASE WHEN raised_at_ms > 0
                         THEN raised_at_ms + greatest(coalesce(raised_reach_ms, 0), max_ttl_ms + 2 * max_tolerance_ms)
                         ELSE 0 END),
           raise_count
      INTO v_floor, v_count FROM cosid.store_state;
    -- Rows of its slots already there without its row (no foreign key since 1.5: a parallel
    -- restore loads cosid.lease before cosid.namespace) record windows granted under the
    -- origin's layout, which only the origin's row says.
    SELECT count(*), min(l.slot), max(l.slot) INTO v_orphans, v_first, v_last FROM cosid.lease l WHERE l.namespace = p_name;
    IF v_orphans > 0 THEN
        RAISE EXCEPTION 'cosid namespace "%" has rows in cosid.lease but none in cosid.namespace', p_name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('%s rows of its slots (%s to %s) record windows granted under a layout this store no longer holds: '
                                  'a restore still loading, or one that brought cosid.lease without cosid.namespace.',
                                  v_orphans, v_first, v_last),
                  HINT = 'Let the restore end, or restore the namespace''s row from the same dump; or delete those rows '
                         '(refused while a window of them reaches past the store''s clock).';
    END IF;
    INSERT INTO cosid.namespace (name, slot_bits, sequence_bits, timestamp_bits, epoch_ms, unit, tolerance_ms)
    VALUES (p_name, p_slot_bits, p_sequence_bits, p_timestamp_bits, p_epoch_ms, p_unit, p_tolerance_ms);
    -- (above the store's raises already: brought up to the last one, cosid._raise_mark)
    PERFORM pg_catalog.set_config('cosid_internal.rows_of', p_name, true);
    INSERT INTO cosid.lease (namespace, slot, floor, ceiling, next_floor, raise_seen)
    SELECT p_name, s, v_floor, v_floor, v_floor, v_count FROM generate_series(0, (1 << p_slot_bits) - 1) AS s;
    PERFORM pg_catalog.set_config('cosid_internal.rows_of', '', true);
    -- Fresh statistics, so that an acquire reads the new slots through the index at once
    -- instead of waiting for autovacuum (up to 65536 new rows).
    ANALYZE cosid.lease;
END $$;
REVOKE ALL ON FUNCTION cosid._namespace_insert(text, int, int, int, bigint, text, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION cosid._namespace_row(p_namespace text) RETURNS cosid.namespace
LANGUAGE plpgsql STABLE AS $$
DECLARE
    r cosid.namespace;
BEGIN
    IF p_namespace IS NULL THEN
        RAISE EXCEPTION 'cosid namespace must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO r FROM cosid.namespace WHERE name = p_namespace;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cosid namespace "%" does not exist', p_namespace
            USING ERRCODE = 'undefined_object',
                  HINT = 'Create it with cosid_namespace_create(''' || p_namespace || ''').';
    END IF;
    RETURN r;
END $$;

-- With a remote store (cosid.store_dsn) the keeper copies each namespace it acquires in
-- from the store into this instance's table, so that cosid_parse() here reads the store's
-- layout; a local definition whose layout differs is refused rather than trusted.
CREATE OR REPLACE FUNCTION cosid._namespace_sync(p_name text, p_slot_bits int, p_sequence_bits int,
                                      p_timestamp_bits int, p_epoch_ms bigint, p_unit text,
                                      p_tolerance_ms bigint)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_difference text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM cosid.namespace WHERE name = p_name) THEN
        PERFORM cosid._namespace_insert(p_name, p_slot_bits, p_sequence_bits, p_timestamp_bits, p_epoch_ms,
                                        p_unit, p_tolerance_ms);
        RETURN 'copied';
    END IF;
    v_difference := cosid._layout_difference(p_name, p_slot_bits, p_sequence_bits, p_timestamp_bits,
                                             p_epoch_ms, p_unit);
    IF v_difference IS NOT NULL THEN
        -- The keeper hands this message to the caller of cosid_next(), who gets the why.
        RAISE EXCEPTION '%', v_difference USING ERRCODE = 'invalid_object_definition';
    END IF;
    RETURN 'same';
END $$;
REVOKE ALL ON FUNCTION cosid._namespace_sync(text, int, int, int, bigint, text, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION cosid._namespace_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF (NEW.name, NEW.slot_bits, NEW.sequence_bits, NEW.timestamp_bits, NEW.epoch_ms, NEW.unit, NEW.tolerance_ms)
       IS DISTINCT FROM
       (OLD.name, OLD.slot_bits, OLD.sequence_bits, OLD.timestamp_bits, OLD.epoch_ms, OLD.unit, OLD.tolerance_ms) THEN
        RAISE EXCEPTION 'cosid namespace "%" keeps its name, layout and tolerance', OLD.name
            USING ERRCODE = 'invalid_object_definition',
                  DETAIL = format('Ids of it may exist, packed as %s/%s/%s bits (timestamp/slot/sequence) from epoch %s ms in unit %s: '
                                  'another layout would read them as other times and slots, and issue them again.',
                                  OLD.timestamp_bits, OLD.slot_bits, OLD.sequence_bits, OLD.epoch_ms, OLD.unit),
                  HINT = 'Create a namespace with the new layout (cosid_namespace_create) and move the id column to it with cosid_adopt(table, column, namespace).';
    END IF;
    -- Lowered only by cosid_namespace_lower_floor (its mark, for this row and value), and never
    -- below what the lease rows show, whoever sets the mark.
    IF NEW.not_before_ms < OLD.not_before_ms
       AND (coalesce(current_setting('cosid_internal.lower_floor', true), '') <> format('%s %s', OLD.name, NEW.not_before_ms)
            OR NEW.not_before_ms < (SELECT f.lowest_ms FROM cosid._floor_lowest(OLD.name) f)) THEN
        RAISE EXCEPTION 'cosid namespace "%": not_before_ms only grows', OLD.name
            USING ERRCODE = 'invalid_object_definition',
                  DETAIL = format('It is %s; %s would let windows start below ids an adopted column holds.',
                                  OLD.not_before_ms, NEW.not_before_ms),
                  HINT = 'An administrator lowers a floor raised by mistake with cosid_namespace_lower_floor(namespace, floor).';
    END IF;
    RETURN NEW;
END $$;

-- A namespace's row goes only after its slots' rows (what a foreign key from cosid.lease
-- said before 1.5: it made a parallel restore fail whenever the lease rows came before the
-- namespace's, and the slots were lost); TRUNCATE cosid.namespace only with cosid.lease empty
-- (a TRUNCATE of cosid.lease before it, in the same transaction, counts).
CREATE OR REPLACE FUNCTION cosid._namespace_delete_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        IF EXISTS (SELECT 1 FROM cosid.lease) THEN
            RAISE EXCEPTION 'cosid: cannot truncate cosid.namespace while cosid.lease has rows of its slots'
                USING ERRCODE = 'foreign_key_violation',
                      HINT = 'Empty cosid.lease first (refused while a window reaches past the store''s clock).';
        END IF;
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM cosid.lease l WHERE l.namespace = OLD.name) THEN
        RAISE EXCEPTION 'cosid: cannot delete namespace "%" while cosid.lease has rows of its slots', OLD.name
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'Delete its rows from cosid.lease first (refused while a window of them reaches past the store''s clock).';
    END IF;
    RETURN OLD;
END $$;
REVOKE ALL ON FUNCTION cosid._namespace_delete_guard() FROM PUBLIC;

-- The keeper's record of the range a store stated for a namespace, in this instance's copy of
-- it (cosid._namespace_sync made it): the first one is kept; the keeper refuses another
-- (src/core/slot_range: judge_store_range).  Returns the range kept before, NULL if none.
CREATE OR REPLACE FUNCTION cosid._namespace_range_seen(p_name text, p_range int4range) RETURNS int4range
LANGUAGE plpgsql AS $$
DECLARE
    v_seen int4range;
BEGIN
    SELECT n.slot_range INTO v_seen FROM cosid.namespace n WHERE n.name = p_name FOR UPDATE;
    IF v_seen IS NULL AND p_range IS NOT NULL THEN
        PERFORM pg_catalog.set_config('cosid_internal.range_record', 'on', true);
        UPDATE cosid.namespace n SET slot_range = p_range WHERE n.name = p_name;
        PERFORM pg_catalog.set_config('cosid_internal.range_record', '', true);
    END IF;
    RETURN v_seen;
END $$;
REVOKE ALL ON FUNCTION cosid._namespace_range_seen(text, int4range) FROM PUBLIC;

-- ZC008's way out, on the instance (superuser): forget the range its keeper saw for a
-- namespace, so that it takes the next store's.  Never on a store: there the range is the
-- store's own, fixed once it granted a slot (namespace_range_guard).
CREATE OR REPLACE FUNCTION cosid._namespace_range_forget(p_name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.set_config('cosid_internal.range_record', 'on', true);
    UPDATE cosid.namespace n SET slot_range = NULL WHERE n.name = p_name;
    PERFORM pg_catalog.set_config('cosid_internal.range_record', '', true);
END $$;
REVOKE ALL ON FUNCTION cosid._namespace_range_forget(text) FROM PUBLIC;

-- A namespace's range changes only while no slot of it was ever granted here: after that,
-- a narrower range would strand live leases outside it, and a wider or moved one would grant
-- slots another region's store may hold.  (An instance's copy of a store's namespace grants
-- nothing: an administrator may clear the range its keeper saw, to move it on purpose.)  The
-- lock that waits for acquires in flight is FOR UPDATE on the namespace's row, which
-- conflicts with the FOR KEY SHARE each acquire holds on it, and with nothing a role without
-- UPDATE on the table can hold.
CREATE OR REPLACE FUNCTION cosid._namespace_range_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NEW.slot_range IS DISTINCT FROM OLD.slot_range THEN
        -- waits for acquires in flight (cosid.acquire): their grants are then seen below
        PERFORM 1 FROM cosid.namespace n WHERE n.name = OLD.name FOR UPDATE;
    END IF;
    -- An instance's own record of the range a store stated (cosid._namespace_range_seen,
    -- cosid._namespace_range_forget) is not a store's range: its old grants are its own history.
    IF NEW.slot_range IS DISTINCT FROM OLD.slot_range
       AND coalesce(pg_catalog.current_setting('cosid_internal.range_record', true), '') <> 'on'
       AND EXISTS (SELECT 1 FROM cosid.lease l WHERE l.namespace = OLD.name AND l.fence > 0) THEN
        RAISE EXCEPTION 'cosid namespace "%" keeps its slot range', OLD.name
            USING ERRCODE = 'invalid_object_definition',
                  DETAIL = format('This store granted slots of it with range %s; %s would strand its leases or grant slots another store may grant.',
                                  coalesce(OLD.slot_range::text, 'all slots'), coalesce(NEW.slot_range::text, 'all slots')),
                  HINT = 'A range is stated when the namespace is created on a store, before its first lease; for other ranges create a namespace with another name.';
    END IF;
    RETURN NEW;
END $$;

-- Column and domain defaults bound to their namespace.  A default
-- cosid_next() would read cosid.namespace in each inserting session, which any role may SET
-- and a pooler may carry from one client to the next: sessions inserting into one table then
-- issue in two id spaces, and the same (slot, tick, sequence) in both is the same id.  So a
-- default is bound when it is made: the event trigger cosid_bind_defaults (ddl_command_end,
-- every command: CREATE/ALTER TABLE, ADD COLUMN, partitions and inherited children, LIKE
-- ... INCLUDING DEFAULTS, CREATE/ALTER DOMAIN, ALTER VIEW, foreign tables, CREATE SCHEMA
-- with its elements, restores) rewrites every cosid_next() call without argument in a
-- column's or domain's default into cosid_next('<namespace>'), so the catalog (and pg_dump)
-- names the namespace.  The namespace is the one the session issues in without a SET (its
-- server, database, role or connection setting): a SET, SET LOCAL or set_config() is refused
-- here (42P17) rather than guessed, since the same SET is what a pooler carries over.  A
-- cosid_next() called directly (INSERT ... VALUES (cosid_next())) or inside a function
-- still reads the setting when it runs.
CREATE OR REPLACE FUNCTION cosid._namespace_reset() RETURNS text
AS 'MODULE_PATHNAME', 'cosid_namespace_reset' LANGUAGE C STABLE;
COMMENT ON FUNCTION cosid._namespace_reset() IS 'the namespace this session issues in without a SET (server, database, role or connection setting)';

CREATE OR REPLACE FUNCTION cosid_namespace_lower_floor(namespace text, floor timestamptz) RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    v_ns     cosid.namespace;
    v_ms     bigint;
    v_lowest record;
BEGIN
    IF namespace IS NULL OR floor IS NULL THEN
        RAISE EXCEPTION 'cosid_namespace_lower_floor: arguments must not be NULL'
            USING ERRCODE = 'null_value_not_allowed',
                  DETAIL = 'It takes a namespace and the floor to lower it to.',
                  HINT = 'SELECT cosid_namespace_lower_floor(''default'', now()) lowers the floor of namespace default to now.';
    END IF;
    IF NOT cosid._is_admin() THEN
        RAISE EXCEPTION 'permission denied to lower the floor of cosid namespace "%"', namespace
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'Only superusers and members of role cosid_admin lower a namespace''s floor.',
                  HINT = 'Ask an administrator of the lease store.';
    END IF;
    IF NOT isfinite(floor) OR floor < '1970-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'cosid floor must be a finite time after 1970-01-01, got %', floor
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Floors are Unix times in milliseconds.',
                  HINT = 'Pass the time no window of the namespace should start at or below, e.g. now().';
    END IF;
    -- The namespace's row first, as an acquire takes it (src/README.md: the store's lock
    -- order); then writers of lease rows wait until this commits: none grants a window
    -- meanwhile.
    SELECT * INTO v_ns FROM cosid.namespace n WHERE n.name = namespace FOR UPDATE;
    LOCK TABLE cosid.lease IN SHARE MODE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cosid namespace "%" does not exist', namespace
            USING ERRCODE = 'undefined_object',
                  DETAIL = 'The floor is lowered where the namespace is: in the lease store''s database.',
                  HINT = 'Run it on the lease store (cosid.database, or the server cosid.store_dsn names).';
    END IF;
    v_ms := pg_catalog.floor(extract(epoch FROM floor) * 1000)::bigint;
    IF v_ms >= v_ns.not_before_ms THEN
        RAISE EXCEPTION 'cosid namespace "%": its floor is % already, not above %', namespace,
            cosid._ms_text(v_ns.not_before_ms), cosid._ms_text(v_ms)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('cosid.namespace.not_before_ms is %s; this function only lowers it.', v_ns.not_before_ms),
                  HINT = 'cosid_adopt raises a floor; nothing needs to be done to keep windows above a time already passed.';
    END IF;
    SELECT * INTO v_lowest FROM cosid._floor_lowest(namespace);
    IF v_ms < v_lowest.lowest_ms THEN
        RAISE EXCEPTION 'cosid namespace "%": its floor cannot go below %', namespace, cosid._ms_text(v_lowest.lowest_ms)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('%s shows a window granted or ids issued up to %s ms; %s lies below it.',
                                  v_lowest.what, v_lowest.lowest_ms, cosid._ms_text(v_ms)),
                  HINT = format('Lower it to %s or later: SELECT cosid_namespace_lower_floor(%L, %L).',
                                cosid._ms_text(v_lowest.lowest_ms), namespace,
                                pg_catalog.replace(cosid._ms_text(v_lowest.lowest_ms), ' UTC', '+00'));
    END IF;
    PERFORM pg_catalog.set_config('cosid_internal.lower_floor', format('%s %s', namespace, v_ms), true);
    UPDATE cosid.namespace n SET not_before_ms = v_ms WHERE n.name = namespace;
    PERFORM pg_catalog.set_config('cosid_internal.lower_floor', '', true);
    RAISE LOG 'cosid namespace "%": floor lowered from % to % by %', namespace, cosid._ms_text(v_ns.not_before_ms),
        cosid._ms_text(v_ms), session_user;
    RETURN pg_catalog.to_timestamp(v_ms / 1000.0);
END $$;
COMMENT ON FUNCTION cosid_namespace_lower_floor(text, timestamptz) IS 'lowers a namespace''s floor raised by mistake, never below what its lease rows show (superuser or cosid_admin)';
REVOKE ALL ON FUNCTION cosid_namespace_lower_floor(text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_namespace_lower_floor(text, timestamptz) TO cosid_admin;

CREATE OR REPLACE FUNCTION cosid._floor_lowest(p_namespace text, OUT lowest_ms bigint, OUT what text)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(max(x.ms), 0), (array_agg(x.what ORDER BY x.ms DESC))[1]
      FROM (SELECT greatest(l.floor, l.ceiling, e.next_floor) AS ms,
                   pg_catalog.format('slot %s of the lease store (floor %s, ceiling %s, next_floor %s)',
                                     l.slot, l.floor, l.ceiling, e.next_floor) AS what
              -- (a slot not yet brought up to the store's last raise: where the raise puts it)
              FROM cosid.lease l, cosid._raise_mark() m,
                   LATERAL (SELECT cosid._raised_next_floor(l.next_floor, l.raise_seen, m.raise_count, m.raised_floor,
                                                            m.settled) AS next_floor) e
             WHERE l.namespace = p_namespace
            UNION ALL
            SELECT c.ceiling_ms, pg_catalog.format('a static %s''s recorded ceiling (cosid.static_ceiling)',
                                                   CASE WHEN c.slot = -1 THEN 'namespace' ELSE 'slot ' || c.slot END)
              FROM cosid.static_ceiling c WHERE c.namespace = p_namespace) x
$$;
REVOKE ALL ON FUNCTION cosid._floor_lowest(text) FROM PUBLIC;

-- How far ahead of the store's clock a floor may lie (a keeper's raise_floor, a namespace's
-- floor an acquire accepts): what a raise puts there, by the limits, or as far as the last
-- raise's own reach still lies ahead (the cap after a restore or a fork acknowledged).
-- (measured from the store's clock at the start of the caller's statement, which is never
-- later than the now its caller compares with: a margin read a moment later would refuse a
-- floor the raise itself set)
-- (PL/pgSQL, which keeps its plan for the session, as cosid._is_admin.)
CREATE OR REPLACE FUNCTION cosid._floor_margin() RETURNS bigint
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN (SELECT greatest(coalesce(max(s.max_ttl_ms), 60000) + 2 * coalesce(max(s.max_tolerance_ms), 5000),
                            coalesce(max(s.raised_at_ms + s.raised_reach_ms) FILTER (WHERE s.raised_at_ms > 0), 0)
                            - (floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint
                               + cosid._store_clock_offset()))
              FROM cosid.store_state s);
END $$;
REVOKE ALL ON FUNCTION cosid._floor_margin() FROM PUBLIC;

CREATE OR REPLACE FUNCTION cosid.raise_floor(p_namespace text, p_floor_ms bigint, p_slot_bits int, p_sequence_bits int,
                                  p_timestamp_bits int, p_epoch_ms bigint, p_unit text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_ns  cosid.namespace := cosid._namespace_row(p_namespace);
    v     bigint;
    v_now bigint := cosid.store_now();
BEGIN
    IF p_floor_ms IS NULL OR p_floor_ms < 0 THEN
        RAISE EXCEPTION 'cosid floor must be a non-negative Unix time in ms, got %', p_floor_ms
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- cosid_adopt raises to a column's largest id, at most seconds ahead of the clock.  A keeper
    -- (any server of the fleet) raises no further than a failover's raise would: a floor far
    -- ahead stops the namespace on every server until the clock reaches it.
    IF p_floor_ms > v_now + cosid._floor_margin() AND NOT cosid._is_admin() THEN
        RAISE EXCEPTION 'permission denied to raise the floor of cosid namespace "%" to %', p_namespace,
            cosid._ms_text(p_floor_ms)
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('That is %s ahead of the lease store''s clock (%s); a keeper raises a floor at most '
                                  'max_ttl + 2 x max_tolerance (%s ms) ahead of it.',
                                  cosid._ms_span(p_floor_ms - v_now), cosid._ms_text(v_now), cosid._floor_margin()),
                  HINT = 'cosid_adopt raises a floor only to a column''s largest id, at most seconds ahead of the clock: '
                         'check this server''s clock against the store''s. Only an administrator of the store '
                         '(superuser or cosid_admin) sets a floor further ahead.';
    END IF;
    IF (v_ns.timestamp_bits, v_ns.slot_bits, v_ns.sequence_bits, v_ns.epoch_ms, v_ns.unit)
       IS DISTINCT FROM (p_timestamp_bits, p_slot_bits, p_sequence_bits, p_epoch_ms, p_unit) THEN
        RAISE EXCEPTION 'here %/%/% bits, epoch % ms, unit %; in the lease store %/%/% bits, epoch % ms, unit %',
            p_timestamp_bits, p_slot_bits, p_sequence_bits, p_epoch_ms, p_unit,
            v_ns.timestamp_bits, v_ns.slot_bits, v_ns.sequence_bits, v_ns.epoch_ms, v_ns.unit
            USING ERRCODE = 'invalid_object_definition';
    END IF;
    UPDATE cosid.namespace n SET not_before_ms = greatest(n.not_before_ms, p_floor_ms)
     WHERE n.name = p_namespace RETURNING n.not_before_ms INTO v;
    RETURN v;
END $$;
REVOKE ALL ON FUNCTION cosid.raise_floor(text, bigint, int, int, int, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid.raise_floor(text, bigint, int, int, int, bigint, text) TO cosid_keeper;

-- Citus (docs/citus.md): an error on a Citus worker, naming the coordinator; nothing
-- elsewhere (Citus' catalog is read as plain tables, Citus need not be loaded).  Called by
-- cosid_namespace_create (and, in C, by cosid_adopt): namespaces and the lease store live on
-- the coordinator.
CREATE OR REPLACE FUNCTION cosid._refuse_on_citus_worker(what text) RETURNS void
AS 'MODULE_PATHNAME', 'cosid_refuse_on_citus_worker' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION cosid._refuse_on_citus_worker(text) FROM PUBLIC;

-- A store's tables never take rows from another server's history.  A publication FOR ALL
-- TABLES (or FOR TABLES IN SCHEMA cosid) publishes them too, and a subscriber that is a
-- cosid server would apply another store's leases onto its own live rows.  Rows that a
-- logical replication worker (apply or initial copy) brings are skipped here, silently, so
-- that the subscription goes on with the user's tables.  The trigger fires only under
-- session_replication_role = replica, where those workers run; its name sorts before the
-- guards, so a skipped row never reaches them.  A replicated TRUNCATE (the publisher's
-- TRUNCATE of its store) cannot be skipped by a trigger, and applied it would empty this
-- store under its live leases: it is refused, which stops the subscription until the
-- transaction is skipped (ALTER SUBSCRIPTION ... SKIP).
CREATE OR REPLACE FUNCTION cosid._keep_local() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_stat_get_activity(pg_catalog.pg_backend_pid()) a
               WHERE a.backend_type LIKE 'logical replication%') THEN
        IF TG_OP = 'TRUNCATE' THEN
            RAISE EXCEPTION 'cosid: a replicated TRUNCATE of %.% refused: the lease store keeps its own history',
                            TG_TABLE_SCHEMA, TG_TABLE_NAME
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = 'A publication with the lease store''s tables (FOR ALL TABLES, FOR TABLES IN SCHEMA cosid) '
                               'carried another server''s TRUNCATE; here it would forget the windows of live leases.',
                      HINT = 'Skip that transaction with ALTER SUBSCRIPTION ... SKIP (lsn = the "finished at" LSN in the CONTEXT '
                             'of this error), or publish without truncate: WITH (publish = ''insert, update, delete'').';
        END IF;
        RETURN NULL;
    END IF;
    RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
END $$;

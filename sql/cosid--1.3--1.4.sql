-- cosid 1.3 -> 1.4: the operations around the extension never issue an id twice (issue 22).
-- A store restored from a dump finds the state of its origin (cosid.store_state is now an
-- extension configuration table, one row per install) and raises every floor; the raise's
-- margin comes from the store's limits (max_ttl, and the new max_tolerance), never from a
-- namespace row; every grant respects max_ttl; a new namespace's slots start at the store's
-- now; a namespace's layout and tolerance never change and its not-before only grows; no
-- slot outside the layout is granted; rows a logical replication worker brings into the
-- store's tables are skipped, and a TRUNCATE of them it brings is refused.
\echo Use "ALTER EXTENSION cosid UPDATE TO '1.4'" to load this file. \quit

-- Functions that read the new columns are replaced below; first the columns.
ALTER TABLE cosid.store_state DROP CONSTRAINT store_state_pkey;
ALTER TABLE cosid.store_state
    ADD COLUMN max_tolerance_ms bigint NOT NULL DEFAULT 5000 CHECK (max_tolerance_ms BETWEEN 0 AND 3600000);
-- The largest tolerance a namespace has now is covered from the start.
UPDATE cosid.store_state
   SET max_tolerance_ms = greatest(5000, (SELECT max(tolerance_ms) FROM cosid.namespace));
ALTER TABLE cosid.store_state ADD COLUMN store_id uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid();
ALTER TABLE cosid.store_state ADD PRIMARY KEY (store_id);
ALTER TABLE cosid.store_state ADD COLUMN created_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp();
SELECT pg_catalog.pg_extension_config_dump('cosid.store_state', '');

-- Leases belong to the store role that acquired them; incarnations are not readable by
-- other roles.  Leases live at the update have no role yet: any keeper role that knows
-- their incarnation may still renew them, until they are released or expire.
ALTER TABLE cosid.lease ADD COLUMN owner_role name;
REVOKE SELECT ON cosid.lease FROM PUBLIC;
GRANT SELECT (namespace, slot, owner_key, fence, expires_at, floor, ceiling, next_floor, previous_owner_key, owner_role)
    ON cosid.lease TO PUBLIC;

-- A namespace's layout and tolerance never change: ids already issued were packed with them,
-- and a live lease keeps issuing with them while every new acquire would read the new ones
-- ((T, 1, q) under 8 slot bits is (T, 4, q) under 10).  Its not-before only grows.  Checked
-- on every UPDATE, whoever makes it.
CREATE FUNCTION cosid._namespace_guard() RETURNS trigger
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
    IF NEW.not_before_ms < OLD.not_before_ms THEN
        RAISE EXCEPTION 'cosid namespace "%": not_before_ms only grows', OLD.name
            USING ERRCODE = 'invalid_object_definition',
                  DETAIL = format('It is %s; %s would let windows start below ids an adopted column holds.',
                                  OLD.not_before_ms, NEW.not_before_ms);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER namespace_guard BEFORE UPDATE ON cosid.namespace FOR EACH ROW EXECUTE FUNCTION cosid._namespace_guard();
ALTER TABLE cosid.namespace ENABLE ALWAYS TRIGGER namespace_guard;

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
CREATE FUNCTION cosid._keep_local() RETURNS trigger
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
CREATE TRIGGER keep_local BEFORE INSERT OR UPDATE OR DELETE ON cosid.lease
    FOR EACH ROW EXECUTE FUNCTION cosid._keep_local();
CREATE TRIGGER keep_local BEFORE INSERT OR UPDATE OR DELETE ON cosid.namespace
    FOR EACH ROW EXECUTE FUNCTION cosid._keep_local();
ALTER TABLE cosid.lease ENABLE REPLICA TRIGGER keep_local;
ALTER TABLE cosid.namespace ENABLE REPLICA TRIGGER keep_local;
CREATE TRIGGER keep_local_truncate BEFORE TRUNCATE ON cosid.lease
    FOR EACH STATEMENT EXECUTE FUNCTION cosid._keep_local();
CREATE TRIGGER keep_local_truncate BEFORE TRUNCATE ON cosid.namespace
    FOR EACH STATEMENT EXECUTE FUNCTION cosid._keep_local();
ALTER TABLE cosid.lease ENABLE REPLICA TRIGGER keep_local_truncate;
ALTER TABLE cosid.namespace ENABLE REPLICA TRIGGER keep_local_truncate;

CREATE TRIGGER keep_local BEFORE INSERT OR UPDATE OR DELETE ON cosid.store_state
    FOR EACH ROW EXECUTE FUNCTION cosid._keep_local();
ALTER TABLE cosid.store_state ENABLE REPLICA TRIGGER keep_local;
CREATE TRIGGER keep_local_truncate BEFORE TRUNCATE ON cosid.store_state
    FOR EACH STATEMENT EXECUTE FUNCTION cosid._keep_local();
ALTER TABLE cosid.store_state ENABLE REPLICA TRIGGER keep_local_truncate;

-- Called first by every store mutation, and the one place that decides whether the store
-- still has its whole history.  It has when cosid.store_state holds exactly one row, of
-- this cluster and of the timeline it writes on.  Otherwise, in one transaction, it frees
-- every lease (fence + 2^32, so its holder's next renewal finds it lost) and raises every
-- slot's next_floor to at least now + max_ttl + 2 x max_tolerance of this server's clock,
-- and leaves one row, of here.  An old holder's ceiling is at most its grant's store time +
-- ttl + tolerance, and that store time is at most this now + tolerance when the two store
-- servers' clocks are within the tolerance of each other: no new window can then start
-- below a timestamp an old holder might still issue, whatever the holders' own clocks say.
-- The margin comes from the store's limits, never from a namespace row (which may be the
-- lost part).  A new timeline or cluster raises unless raise_floors_on_new_timeline is off
-- (synchronous replication loses nothing); more than one row (a restored dump: its origin
-- went on after the dump) or none always raises.  One caller raises; the others wait on
-- the table's lock and find it done.  Every caller's ttl is then checked against max_ttl,
-- whichever path it took: the raise covers no longer grant.
CREATE OR REPLACE FUNCTION cosid._follow_timeline(p_ttl_ms bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_tli     int := cosid._timeline();
    v_sys     bigint := (SELECT system_identifier FROM pg_catalog.pg_control_system());
    v_count   bigint;
    v_here    boolean;
    v_raise   boolean;
    v_now     bigint;
    v_rows    bigint := 0;
    v_max_ttl bigint;
    m         record;
BEGIN
    SELECT count(*), coalesce(bool_and(s.system_identifier = v_sys AND s.timeline = v_tli), false)
      INTO v_count, v_here FROM cosid.store_state s;
    IF NOT (v_count = 1 AND v_here) THEN
        -- Conflicts with itself and with every writer of the table, not with readers.
        LOCK TABLE cosid.store_state IN SHARE ROW EXCLUSIVE MODE;
        SELECT count(*), coalesce(bool_and(s.system_identifier = v_sys AND s.timeline = v_tli), false)
          INTO v_count, v_here FROM cosid.store_state s;
    END IF;
    IF v_count = 1 AND NOT v_here AND (SELECT s.system_identifier = 0 FROM cosid.store_state s) THEN
        -- The one record is the mark CREATE EXTENSION leaves when a restore runs it: the
        -- origin's record (and its limits) comes only with the dump's data, after the user
        -- tables and theirs, and until then the store cannot tell what its origin granted.
        RAISE EXCEPTION 'cosid lease store is being restored: it grants no window before the record of its origin''s state is restored'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'CREATE EXTENSION cosid ran in a restore (pg_restore, or a plain dump through psql: row_security off). '
                           'The dump''s data brings the origin''s record of the store state; the first store call after it raises every floor.',
                  HINT = 'Wait for the restore to end.  A dump without that record (cosid 1.3 or older, a partial restore): '
                         'SELECT cosid_store_follow_timeline(restored => true) raises the floors by the default limits.';
    END IF;
    IF NOT (v_count = 1 AND v_here) THEN
        -- The raise covers the longest lease and the largest tolerance any of the store's
        -- histories allowed.
        -- With several rows, the newest is the one CREATE EXTENSION wrote while restoring,
        -- with default limits: the origin's rows say what it granted.
        SELECT coalesce(bool_or(s.raise_floors_on_new_timeline), true) AS raise_flag,
               coalesce(max(s.max_ttl_ms), 60000) AS max_ttl_ms,
               coalesce(max(s.max_tolerance_ms), 5000) AS max_tolerance_ms,
               coalesce(max(s.failovers), 0) AS failovers, coalesce(max(s.raised_at_ms), 0) AS raised_at_ms,
               coalesce(max(s.timeline), 0) AS timeline
          INTO m
          FROM (SELECT s.*, row_number() OVER (ORDER BY s.created_at DESC, s.store_id) AS newest
                  FROM cosid.store_state s) s
         WHERE v_count = 1 OR s.newest > 1;
        v_raise := v_count <> 1 OR m.raise_flag;
        v_now := cosid.store_now();
        IF v_raise THEN
            UPDATE cosid.lease l
               SET next_floor = greatest(l.next_floor, l.ceiling, v_now + m.max_ttl_ms + 2 * m.max_tolerance_ms),
                   previous_owner_key = coalesce(l.owner_key, l.previous_owner_key),
                   owner_key = NULL, incarnation = NULL, owner_role = NULL,
                   -- far above any fence the lost tail can have used: a renewal or release from
                   -- it never matches a lease granted on this timeline
                   fence = l.fence + 4294967296;
            GET DIAGNOSTICS v_rows = ROW_COUNT;
        END IF;
        DELETE FROM cosid.store_state;
        INSERT INTO cosid.store_state (system_identifier, timeline, raise_floors_on_new_timeline, max_ttl_ms,
                                       max_tolerance_ms, failovers, last_failover_at, raised_at_ms)
        VALUES (v_sys, v_tli, m.raise_flag, m.max_ttl_ms, m.max_tolerance_ms, m.failovers + 1, clock_timestamp(),
                CASE WHEN v_raise THEN v_now ELSE m.raised_at_ms END);
        RAISE LOG 'cosid store: %: %',
            CASE WHEN v_count > 1 THEN format('restored from a dump (%s records of its state)', v_count)
                 WHEN v_count = 0 THEN 'its state was missing'
                 ELSE format('now writing on timeline %s of cluster %s (last write on timeline %s)', v_tli, v_sys,
                             m.timeline) END,
            CASE WHEN v_raise
                 THEN format('%s slots freed, their next_floor raised to at least now + %s ms + 2 x %s ms',
                             v_rows, m.max_ttl_ms, m.max_tolerance_ms)
                 ELSE 'floors left alone (raise_floors_on_new_timeline is off)' END;
    END IF;
    SELECT s.max_ttl_ms INTO v_max_ttl FROM cosid.store_state s;
    IF p_ttl_ms > v_max_ttl THEN
        RAISE EXCEPTION 'cosid lease ttl % ms is longer than the lease store allows (% ms)', p_ttl_ms, v_max_ttl
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'After a failover the store raises every floor by its longest lease; it grants none longer.',
                  HINT = 'Lower cosid.ttl, or raise the limit on the store first (SELECT cosid_store_settings(max_ttl => ...)) and let its standbys replay it.';
    END IF;
END $$;

-- A namespace row and its slots (all free), for cosid_namespace_create and for the
-- keeper's copy of a remote store's namespace.
CREATE OR REPLACE FUNCTION cosid._namespace_insert(p_name text, p_slot_bits int, p_sequence_bits int,
                                        p_timestamp_bits int, p_epoch_ms bigint, p_unit text,
                                        p_tolerance_ms bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_floor bigint;
BEGIN
    -- A namespace's slots start at the store's now: a store made again (DROP and CREATE
    -- EXTENSION, refused while any window reaches past now) never starts a window below one
    -- of the store it replaces, whatever the clocks of the holders.  A namespace made again
    -- after a raise (its first making lost in the old timeline's tail) may have holders from
    -- that tail: its slots start above the raise too, by the store's limits, not by this
    -- definition's tolerance (the lost one's may have been larger).
    PERFORM cosid._follow_timeline(NULL);
    SELECT greatest(cosid.store_now(),
                    CASE WHEN raised_at_ms > 0 THEN raised_at_ms + max_ttl_ms + 2 * max_tolerance_ms ELSE 0 END)
      INTO v_floor FROM cosid.store_state;
    INSERT INTO cosid.namespace (name, slot_bits, sequence_bits, timestamp_bits, epoch_ms, unit, tolerance_ms)
    VALUES (p_name, p_slot_bits, p_sequence_bits, p_timestamp_bits, p_epoch_ms, p_unit, p_tolerance_ms);
    INSERT INTO cosid.lease (namespace, slot, floor, ceiling, next_floor)
    SELECT p_name, s, v_floor, v_floor, v_floor FROM generate_series(0, (1 << p_slot_bits) - 1) AS s;
    -- Fresh statistics, so that an acquire reads the new slots through the index at once
    -- instead of waiting for autovacuum (up to 65536 new rows).
    ANALYZE cosid.lease;
END $$;

---------------------------------------------------------------------------------------
-- Store mutations.  Each try is ONE conditional UPDATE ... RETURNING on one row: under
-- READ COMMITTED a racing writer is waited for and the condition re-checked on the new
-- row version, so two acquirers never both win a slot.  Called by the lease keeper, each
-- in its own transaction.
---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION cosid.acquire(p_namespace text, p_owner_key text, p_incarnation uuid,
                              p_ttl_ms bigint, p_preferred int DEFAULT NULL)
RETURNS TABLE (slot int, fence bigint, expires_at bigint, floor bigint, ceiling bigint,
               next_floor bigint, store_now bigint, duplicate_key boolean, earliest_expiry bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_now  bigint := cosid.store_now();
    v_ns   cosid.namespace := cosid._namespace_row(p_namespace);
    v_dup  boolean;
    v_cond text;
    v_pref int := 0;
    v_after int;
    v_batch int;
    c      record;
    r      cosid.lease;
BEGIN
    IF p_owner_key IS NULL OR p_owner_key = '' OR p_incarnation IS NULL THEN
        RAISE EXCEPTION 'cosid.acquire needs an owner key and an incarnation'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_ttl_ms IS NULL OR p_ttl_ms <= 0 THEN
        RAISE EXCEPTION 'cosid lease ttl must be positive, got % ms', p_ttl_ms
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cosid._follow_timeline(p_ttl_ms);
    v_now := cosid.store_now();  -- after a raise, which may have waited for another caller's
    v_dup := EXISTS (SELECT 1 FROM cosid.lease l
                     WHERE l.namespace = p_namespace
                       AND coalesce(l.owner_key, l.previous_owner_key) = p_owner_key
                       AND l.owner_key = p_owner_key
                       AND l.incarnation <> p_incarnation AND l.expires_at > v_now);
    -- Only available slots are candidates: free, or expired.  A live lease is never handed
    -- out again, not even to its own incarnation, since the store cannot know what that
    -- incarnation issued in it.  Nor is an expired lease of the asking incarnation, except
    -- as the very last resort: its owner renews it (a renewal succeeds after expiry while
    -- nobody took over) or releases it, and taking it over would only cut its window short.
    -- As a last resort it is safe (the new window starts at its next_floor, its ceiling),
    -- and it keeps an orphan the owner never learnt of (an acquire whose answer was lost)
    -- from being lost to it for good.
    -- Preference: (1) preferred, (2) sticky: last owned by the same key, (3) lowest; each
    -- first among slots whose next window can start now (next_floor <= now: not one released
    -- at a ceiling still ahead, where the holder would wait for its clock to pass the floor),
    -- then (4) the lowest of any, then (5) an expired lease of the asking incarnation.  Each
    -- preference is read in slot order, 16 candidates at a time (an index scan, whatever the
    -- number of slots), until a slot is won; a slot lost to a racing acquirer just moves on
    -- to the next.  A slot that fits two preferences comes
    -- twice; the second try matches no row.
    FOREACH v_cond IN ARRAY ARRAY[
        'l.slot = $3 AND (l.incarnation IS NULL OR (l.expires_at <= $4 AND l.incarnation <> $6))'
            || ' AND l.next_floor <= $4',
        'coalesce(l.owner_key, l.previous_owner_key) = $2'
            || ' AND (l.incarnation IS NULL OR (l.expires_at <= $4 AND l.incarnation <> $6)) AND l.next_floor <= $4',
        '(l.incarnation IS NULL OR (l.expires_at <= $4 AND l.incarnation <> $6)) AND l.next_floor <= $4',
        '(l.incarnation IS NULL OR (l.expires_at <= $4 AND l.incarnation <> $6))',
        'l.incarnation = $6 AND l.expires_at <= $4']
    LOOP
        v_pref := v_pref + 1;
        v_after := -1;
        LOOP
            v_batch := 0;
            -- (a row past the layout's slots, left by a hand edit, is never granted: its ids
            -- would spill into the timestamp bits)
            FOR c IN EXECUTE 'SELECT l.slot FROM cosid.lease l WHERE l.namespace = $1 AND l.slot > $5 AND l.slot < $7 AND '
                             || v_cond || ' ORDER BY l.slot LIMIT 16'
                     USING p_namespace, p_owner_key, p_preferred, v_now, v_after, p_incarnation,
                           1 << v_ns.slot_bits
            LOOP
                v_batch := v_batch + 1;
                v_after := c.slot;
                UPDATE cosid.lease l
                   SET previous_owner_key = coalesce(l.owner_key, l.previous_owner_key),
                       owner_key   = p_owner_key,
                       incarnation = p_incarnation,
                       owner_role  = session_user,
                       fence       = l.fence + 1,
                       floor       = greatest(l.next_floor, v_ns.not_before_ms),
                       expires_at  = v_now + p_ttl_ms,
                       ceiling     = greatest(v_now + p_ttl_ms + v_ns.tolerance_ms, l.next_floor, v_ns.not_before_ms),
                       next_floor  = greatest(v_now + p_ttl_ms + v_ns.tolerance_ms, l.next_floor, v_ns.not_before_ms)
                 WHERE l.namespace = p_namespace AND l.slot = c.slot AND l.slot < (1 << v_ns.slot_bits)
                   AND (l.incarnation IS NULL
                        OR (l.expires_at <= v_now AND (l.incarnation <> p_incarnation OR v_pref = 5)))
                RETURNING l.* INTO r;
                IF FOUND THEN
                    RETURN QUERY SELECT r.slot, r.fence, r.expires_at, r.floor, r.ceiling, r.next_floor,
                                        v_now, v_dup, NULL::bigint;
                    RETURN;
                END IF;
            END LOOP;
            EXIT WHEN v_batch < 16;
        END LOOP;
    END LOOP;
    -- Exhausted: no slot, and the earliest expiry to wait for.
    RETURN QUERY SELECT NULL::int, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
                        NULL::bigint, v_now, v_dup,
                        (SELECT min(l.expires_at) FROM cosid.lease l
                          WHERE l.namespace = p_namespace AND l.incarnation IS NOT NULL
                            AND l.expires_at > v_now);
END $$;


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
    PERFORM cosid._follow_timeline(NULL);  -- one row of store_state to read
    SELECT s.max_tolerance_ms INTO v_max_tol FROM cosid.store_state s;
    IF v_tol_ms > v_max_tol THEN
        RAISE EXCEPTION 'cosid tolerance % is above the lease store''s max_tolerance (% ms)', tolerance, v_max_tol
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'After a failover the store raises every floor by 2 x its max_tolerance, which must cover every namespace''s tolerance.',
                  HINT = format('Raise the limit on the store first: SELECT cosid_store_settings(max_tolerance => %L), and let its standbys replay it.', tolerance);
    END IF;
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

DROP FUNCTION cosid_store_settings(boolean, interval);
DROP FUNCTION cosid_store_follow_timeline();
-- The store's failover behaviour and limits.  raise_floors_on_new_timeline (default on) may
-- be turned off only where the store replicates synchronously to every standby that can be
-- promoted: then no committed lease change is lost in a failover, and new acquires need not
-- wait.  With it on, the first acquires after a failover wait up to max_ttl + 2 x
-- max_tolerance for their clock to pass the raised floors.  NULL leaves a value as it is;
-- returns the state.
CREATE FUNCTION cosid_store_settings(raise_floors_on_new_timeline boolean DEFAULT NULL,
                                     max_ttl interval DEFAULT NULL,
                                     max_tolerance interval DEFAULT NULL)
RETURNS cosid.store_state
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r cosid.store_state;
    v_ms bigint := floor(extract(epoch FROM max_ttl) * 1000)::bigint;
    v_tol bigint := floor(extract(epoch FROM max_tolerance) * 1000)::bigint;
    v_used record;
BEGIN
    IF v_ms IS NOT NULL AND (v_ms < 300 OR v_ms > 86400000) THEN
        RAISE EXCEPTION 'cosid max_ttl must be between 300 ms and 24 hours, got %', max_ttl
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_tol IS NOT NULL AND (v_tol < 0 OR v_tol > 3600000) THEN
        RAISE EXCEPTION 'cosid max_tolerance must be between 0 and 1 hour, got %', max_tolerance
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Every store call reads the limits (cosid._follow_timeline) and holds its lock on the
    -- table until it commits: waiting for them all here puts every grant made under the old
    -- limits before this change in the WAL.  Otherwise an acquire that read max_ttl 60 s
    -- commits after a lowering to 1 s, and a failover that loses its commit but keeps the
    -- lowering raises the floors by 1 s while its holder issues for 60 (the same for a
    -- namespace made with a tolerance above a lowered max_tolerance).
    LOCK TABLE cosid.store_state IN ACCESS EXCLUSIVE MODE;
    SELECT n.name, n.tolerance_ms INTO v_used FROM cosid.namespace n
     WHERE n.tolerance_ms > v_tol ORDER BY n.tolerance_ms DESC, n.name LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cosid max_tolerance % is below the tolerance of namespace "%" (% ms)', max_tolerance,
            v_used.name, v_used.tolerance_ms
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'After a failover the store raises every floor by 2 x max_tolerance, which must cover every namespace''s tolerance.';
    END IF;
    PERFORM cosid._follow_timeline(NULL);  -- one row, of here
    UPDATE cosid.store_state s
       SET raise_floors_on_new_timeline = coalesce(cosid_store_settings.raise_floors_on_new_timeline,
                                                   s.raise_floors_on_new_timeline),
           max_ttl_ms = coalesce(v_ms, s.max_ttl_ms),
           max_tolerance_ms = coalesce(v_tol, s.max_tolerance_ms)
    RETURNING s.* INTO r;
    RETURN r;
END $$;
REVOKE ALL ON FUNCTION cosid_store_settings(boolean, interval, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_store_settings(boolean, interval, interval) TO cosid_admin;
COMMENT ON FUNCTION cosid_store_settings(boolean, interval, interval) IS 'the lease store''s failover behaviour, longest lease and largest tolerance (superuser or cosid_admin)';

-- Follows a new timeline now, without a statement timeout: for a store whose raise takes
-- longer than the keepers' store bound (many slots, a short ttl).  Returns failovers seen.
-- restored => true raises the floors whatever the store finds: for a copy of its data
-- directory started as it is (a disk snapshot, a file copy), which keeps the cluster and
-- timeline of its origin and so cannot be told from a restart of it.
CREATE FUNCTION cosid_store_follow_timeline(restored boolean DEFAULT false) RETURNS int
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF restored THEN
        LOCK TABLE cosid.store_state IN SHARE ROW EXCLUSIVE MODE;
        -- a second record of the state, as a restored dump has: the next call raises
        INSERT INTO cosid.store_state (system_identifier, timeline, raise_floors_on_new_timeline, max_ttl_ms,
                                       max_tolerance_ms, failovers, raised_at_ms)
        SELECT 0, 0, true, s.max_ttl_ms, s.max_tolerance_ms, s.failovers, s.raised_at_ms
          FROM cosid.store_state s;
    END IF;
    PERFORM cosid._follow_timeline(NULL);
    RETURN (SELECT failovers FROM cosid.store_state);
END $$;
REVOKE ALL ON FUNCTION cosid_store_follow_timeline(boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_store_follow_timeline(boolean) TO cosid_admin;
COMMENT ON FUNCTION cosid_store_follow_timeline(boolean) IS 'raises the floors now if the store lost history (a failover, a restore); restored => true for a copy of its data directory (superuser or cosid_admin)';

-- A lease belongs to the store role that acquired it (owner_role, the session's login role):
-- only that role renews or releases it.  On a store shared by many servers, one role per
-- server, a compromised or misconfigured server can then neither shorten, take nor hand on
-- another's window, even knowing its incarnation (which other roles cannot read: see
-- cosid.own_leases and cosid_leases()).  A lease acquired before cosid 1.4 has no role yet.
CREATE FUNCTION cosid._refuse_other_role(p_namespace text, p_slot int, p_incarnation uuid, p_fence bigint,
                                         p_what text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_role name;
BEGIN
    SELECT l.owner_role INTO v_role FROM cosid.lease l
     WHERE l.namespace = p_namespace AND l.slot = p_slot AND l.incarnation = p_incarnation AND l.fence = p_fence;
    IF FOUND AND v_role IS NOT NULL AND v_role <> session_user THEN
        RAISE EXCEPTION 'permission denied to % slot % of cosid namespace "%"', p_what, p_slot, p_namespace
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('The lease was acquired by store role %I; only that role renews or releases it.', v_role),
                  HINT = 'Each keeper renews and releases its own leases; an administrator frees another''s slot with cosid.revoke or cosid_release(namespace, slot).';
    END IF;
END $$;
REVOKE ALL ON FUNCTION cosid._refuse_other_role(text, int, uuid, bigint, text) FROM PUBLIC;

-- Renew: incarnation and fence must match; a replayed renew succeeds and never shrinks.
-- No row returned means the lease is lost.
CREATE OR REPLACE FUNCTION cosid.renew(p_namespace text, p_slot int, p_incarnation uuid, p_fence bigint,
                            p_ttl_ms bigint)
RETURNS TABLE (slot int, fence bigint, expires_at bigint, floor bigint, ceiling bigint,
               next_floor bigint, store_now bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_now bigint := cosid.store_now();
    v_ns  cosid.namespace := cosid._namespace_row(p_namespace);
    r     cosid.lease;
BEGIN
    IF p_ttl_ms IS NULL OR p_ttl_ms <= 0 THEN
        RAISE EXCEPTION 'cosid lease ttl must be positive, got % ms', p_ttl_ms
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cosid._follow_timeline(p_ttl_ms);
    PERFORM cosid._refuse_other_role(p_namespace, p_slot, p_incarnation, p_fence, 'renew');
    v_now := cosid.store_now();
    UPDATE cosid.lease l
       SET expires_at = greatest(l.expires_at, v_now + p_ttl_ms),
           ceiling    = greatest(greatest(l.expires_at, v_now + p_ttl_ms) + v_ns.tolerance_ms, l.floor),
           next_floor = greatest(greatest(l.expires_at, v_now + p_ttl_ms) + v_ns.tolerance_ms, l.floor),
           owner_role = session_user
     WHERE l.namespace = p_namespace AND l.slot = p_slot
       AND l.incarnation = p_incarnation AND l.fence = p_fence
       AND (l.owner_role IS NULL OR l.owner_role = session_user)
    RETURNING l.* INTO r;
    IF FOUND THEN
        RETURN QUERY SELECT r.slot, r.fence, r.expires_at, r.floor, r.ceiling, r.next_floor, v_now;
    END IF;
END $$;

-- Release in order: the exact last issued timestamp becomes the next holder's floor.
CREATE OR REPLACE FUNCTION cosid.release(p_namespace text, p_slot int, p_incarnation uuid, p_fence bigint,
                              p_last_issued bigint)
RETURNS TABLE (slot int, fence bigint, next_floor bigint, store_now bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_now bigint := cosid.store_now();
    r     cosid.lease;
BEGIN
    IF p_last_issued IS NULL THEN
        RAISE EXCEPTION 'cosid.release needs the last issued timestamp'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Pass the floor when nothing was issued.';
    END IF;
    PERFORM cosid._follow_timeline(NULL);
    PERFORM cosid._refuse_other_role(p_namespace, p_slot, p_incarnation, p_fence, 'release');
    UPDATE cosid.lease l
       SET next_floor = greatest(l.floor, least(p_last_issued, l.ceiling)),
           previous_owner_key = l.owner_key,
           owner_key = NULL, incarnation = NULL, owner_role = NULL,
           fence = l.fence + 1
     WHERE l.namespace = p_namespace AND l.slot = p_slot
       AND l.incarnation = p_incarnation AND l.fence = p_fence
       AND (l.owner_role IS NULL OR l.owner_role = session_user)
    RETURNING l.* INTO r;
    IF FOUND THEN
        RETURN QUERY SELECT r.slot, r.fence, r.next_floor, v_now;
    END IF;
END $$;

-- Forced release by an administrator: no last timestamp is known, so the ceiling is used.
CREATE OR REPLACE FUNCTION cosid.revoke(p_namespace text, p_slot int)
RETURNS TABLE (slot int, fence bigint, next_floor bigint, previous_owner_key text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_ns cosid.namespace := cosid._namespace_row(p_namespace);
    r    cosid.lease;
BEGIN
    IF p_slot IS NULL OR p_slot < 0 OR p_slot >= (1 << v_ns.slot_bits) THEN
        RAISE EXCEPTION 'cosid slot % is out of range for namespace "%"', p_slot, p_namespace
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Slots of this namespace are 0 to %s.', (1 << v_ns.slot_bits) - 1);
    END IF;
    PERFORM cosid._follow_timeline(NULL);
    UPDATE cosid.lease l
       SET next_floor = greatest(l.next_floor, l.ceiling),
           previous_owner_key = l.owner_key,
           owner_key = NULL, incarnation = NULL, owner_role = NULL,
           fence = l.fence + 1
     WHERE l.namespace = p_namespace AND l.slot = p_slot AND l.incarnation IS NOT NULL
    RETURNING l.* INTO r;
    IF FOUND THEN
        RETURN QUERY SELECT r.slot, r.fence, r.next_floor, r.previous_owner_key;
    END IF;
END $$;

-- The leases of one incarnation acquired by the calling store role, one at a time after
-- (namespace, slot): the keeper's look for orphans at its start.  Incarnations are not
-- readable by other roles (cosid.lease's column privileges), so this is how a keeper finds
-- its own.
CREATE FUNCTION cosid.own_leases(p_incarnation uuid, p_after_namespace text, p_after_slot int)
RETURNS TABLE (slot int, fence bigint, ceiling bigint, namespace text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT l.slot, l.fence, l.ceiling, l.namespace FROM cosid.lease l
     WHERE l.incarnation = p_incarnation AND (l.namespace, l.slot) > (p_after_namespace, p_after_slot)
       AND (l.owner_role IS NULL OR l.owner_role = session_user)
     ORDER BY l.namespace, l.slot LIMIT 1
$$;
REVOKE ALL ON FUNCTION cosid.own_leases(uuid, text, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid.own_leases(uuid, text, int) TO cosid_keeper;

-- Every slot with its lease.  Incarnations (what renew and release are called with) are shown
-- to superusers and cosid_admin only; everything else is for every role, monitoring
-- (pg_monitor) among them.
CREATE OR REPLACE FUNCTION cosid_leases(namespace text DEFAULT NULL)
RETURNS TABLE (namespace text, slot int, owner_key text, incarnation uuid, fence bigint,
               expires_at timestamptz, floor bigint, ceiling bigint, next_floor bigint,
               state text, floor_at timestamptz, ceiling_at timestamptz, next_floor_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH now AS MATERIALIZED (  -- once: the notice is said once
        SELECT cosid.store_now() AS ms,
               CASE WHEN $1 IS NOT NULL THEN (cosid._namespace_row($1)).name END AS checked,
               cosid._static_notice($1) AS noticed,
               (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user)
               OR pg_has_role(session_user, 'cosid_admin', 'MEMBER') AS admin)
    SELECT l.namespace, l.slot, l.owner_key, CASE WHEN now.admin THEN l.incarnation END, l.fence,
           to_timestamp(l.expires_at / 1000.0), l.floor, l.ceiling, l.next_floor,
           CASE WHEN l.incarnation IS NULL THEN 'free'
                WHEN l.expires_at > now.ms THEN 'held'
                ELSE 'expired' END,
           to_timestamp(l.floor / 1000.0), to_timestamp(l.ceiling / 1000.0), to_timestamp(l.next_floor / 1000.0)
    FROM now, cosid.lease l
    WHERE now.noticed AND ($1 IS NULL OR l.namespace = now.checked)
    ORDER BY l.namespace, l.slot
$$;

-- cosid 1.5 -> 1.6: forks of an issuing server, a change of store, bounded floor raises by
-- keepers, column defaults bound to their namespace.
\echo Use "ALTER EXTENSION cosid UPDATE TO '1.6'" to load this file. \quit

-- A keeper raises a namespace's floor at most max_ttl + 2 x max_tolerance ahead of the store's
-- clock (beyond that: an administrator of the store), an acquire folds no floor beyond that into
-- a lease row, and an administrator lowers a floor raised by mistake
-- (cosid_namespace_lower_floor), never below what the lease rows show.

CREATE OR REPLACE FUNCTION cosid._floor_margin() RETURNS bigint
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(max(s.max_ttl_ms), 60000) + 2 * coalesce(max(s.max_tolerance_ms), 5000) FROM cosid.store_state s
$$;

CREATE OR REPLACE FUNCTION cosid._is_admin() RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = session_user), false)
           OR pg_catalog.pg_has_role(session_user, 'cosid_admin', 'MEMBER')
$$;

CREATE OR REPLACE FUNCTION cosid._ms_text(p_ms bigint) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN p_ms BETWEEN 0 AND 9224318015999999
                THEN pg_catalog.to_char(pg_catalog.to_timestamp(p_ms / 1000.0) AT TIME ZONE 'UTC',
                                        'YYYY-MM-DD HH24:MI:SS.MS') || ' UTC'
                ELSE p_ms::text || ' ms (Unix time)' END
$$;

CREATE OR REPLACE FUNCTION cosid._ms_span(p_ms bigint) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN x.a < 10000 THEN p_ms || ' ms'
                WHEN x.a < 120000 THEN round(p_ms / 1000.0, 1) || ' s'
                WHEN x.a < 7200000 THEN (p_ms / 60000) || ' min'
                WHEN x.a < 172800000 THEN (p_ms / 3600000) || ' h'
                WHEN x.a < 63072000000 THEN (p_ms / 86400000) || ' days'
                ELSE trunc(p_ms / 31557600000.0, 1) || ' years' END
      FROM (SELECT abs(p_ms::numeric) AS a) x
$$;

REVOKE ALL ON FUNCTION cosid._floor_margin() FROM PUBLIC;
REVOKE ALL ON FUNCTION cosid._is_admin() FROM PUBLIC;

CREATE OR REPLACE FUNCTION cosid._floor_lowest(p_namespace text, OUT lowest_ms bigint, OUT what text)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(max(x.ms), 0), (array_agg(x.what ORDER BY x.ms DESC))[1]
      FROM (SELECT greatest(l.floor, l.ceiling, l.next_floor) AS ms,
                   pg_catalog.format('slot %s of the lease store (floor %s, ceiling %s, next_floor %s)',
                                     l.slot, l.floor, l.ceiling, l.next_floor) AS what
              FROM cosid.lease l WHERE l.namespace = p_namespace
            UNION ALL
            SELECT c.ceiling_ms, pg_catalog.format('a static %s''s recorded ceiling (cosid.static_ceiling)',
                                                   CASE WHEN c.slot = -1 THEN 'namespace' ELSE 'slot ' || c.slot END)
              FROM cosid.static_ceiling c WHERE c.namespace = p_namespace) x
$$;

REVOKE ALL ON FUNCTION cosid._floor_lowest(text) FROM PUBLIC;

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

CREATE OR REPLACE FUNCTION cosid.acquire(p_namespace text, p_owner_key text, p_incarnation uuid,
                              p_ttl_ms bigint, p_preferred int DEFAULT NULL)
RETURNS TABLE (slot int, fence bigint, expires_at bigint, floor bigint, ceiling bigint,
               next_floor bigint, store_now bigint, duplicate_key boolean, earliest_expiry bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_now  bigint := cosid.store_now();
    v_ns   cosid.namespace;
    v_dup  boolean;
    v_cond text;
    v_pref int := 0;
    v_after int;
    v_batch int;
    c      record;
    r      cosid.lease;
    v_static bigint;
    v_now_ok text;
BEGIN
    -- Shared with every acquire, exclusive with a change of the namespace's slot range
    -- (cosid._namespace_range_guard): a range is never set while an acquire that read the
    -- namespace without it is still in flight, and an acquire reads the range after it.
    PERFORM pg_catalog.pg_advisory_xact_lock_shared(1668248937, pg_catalog.hashtext(p_namespace));
    v_ns := cosid._namespace_row(p_namespace);
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
    -- A floor further ahead than any window reaches (an administrator's on purpose, or one left
    -- from before cosid 1.6) is never folded into a lease row, where it would stay for good:
    -- the acquire fails, naming it, and touches nothing.  cosid_namespace_lower_floor undoes it.
    IF v_ns.not_before_ms > v_now + cosid._floor_margin() THEN
        RAISE EXCEPTION 'cosid namespace "%" grants no window before % (% ahead of the lease store''s clock)',
            p_namespace, cosid._ms_text(v_ns.not_before_ms), cosid._ms_span(v_ns.not_before_ms - v_now)
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('Its floor (cosid.namespace.not_before_ms %s) lies beyond the %s ms a window may start '
                                  'ahead of the store''s clock (max_ttl + 2 x max_tolerance); no slot was touched.',
                                  v_ns.not_before_ms, cosid._floor_margin()),
                  HINT = format('If the floor was set by mistake and nothing was issued above it, an administrator '
                                'lowers it on the store: SELECT cosid_namespace_lower_floor(%L, now()).', p_namespace);
    END IF;
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
    -- "Can start now" also asks cosid.static_ceiling: a slot static here before (see the
    -- UPDATE below) has its last window's ceiling there, up to cosid.static_ahead ahead.
    v_now_ok := ' AND l.next_floor <= $4 AND NOT EXISTS (SELECT 1 FROM cosid.static_ceiling sc'
                || ' WHERE sc.namespace = l.namespace AND sc.slot IN (l.slot, -1) AND sc.ceiling_ms > $4)';
    FOREACH v_cond IN ARRAY ARRAY[
        'l.slot = $3 AND (l.incarnation IS NULL OR (l.expires_at <= $4 AND l.incarnation <> $6))' || v_now_ok,
        'coalesce(l.owner_key, l.previous_owner_key) = $2'
            || ' AND (l.incarnation IS NULL OR (l.expires_at <= $4 AND l.incarnation <> $6))' || v_now_ok,
        '(l.incarnation IS NULL OR (l.expires_at <= $4 AND l.incarnation <> $6))' || v_now_ok,
        '(l.incarnation IS NULL OR (l.expires_at <= $4 AND l.incarnation <> $6))',
        'l.incarnation = $6 AND l.expires_at <= $4']
    LOOP
        v_pref := v_pref + 1;
        v_after := coalesce(lower(v_ns.slot_range), 0) - 1;  -- a regional store grants only its range
        LOOP
            v_batch := 0;
            -- (a row past the layout's slots, left by a hand edit, is never granted: its ids
            -- would spill into the timestamp bits)
            FOR c IN EXECUTE 'SELECT l.slot FROM cosid.lease l WHERE l.namespace = $1 AND l.slot > $5 AND l.slot < $7 AND '
                             || v_cond || ' ORDER BY l.slot LIMIT 16'
                     USING p_namespace, p_owner_key, p_preferred, v_now, v_after, p_incarnation,
                           coalesce(upper(v_ns.slot_range), 1 << v_ns.slot_bits)
            LOOP
                v_batch := v_batch + 1;
                v_after := c.slot;
                -- A slot a server of this database issued on as a static slot before it was
                -- leased (cosid.static_slots removed, a restart), or a static namespace's
                -- adopted floor (slot -1): the window starts above the ceilings it recorded,
                -- so ids the static windows issued ahead of the clock are not issued again.
                v_static := (SELECT max(sc.ceiling_ms) FROM cosid.static_ceiling sc
                              WHERE sc.namespace = p_namespace AND sc.slot IN (c.slot, -1));
                UPDATE cosid.lease l
                   SET previous_owner_key = coalesce(l.owner_key, l.previous_owner_key),
                       owner_key   = p_owner_key,
                       incarnation = p_incarnation,
                       owner_role  = session_user,
                       fence       = l.fence + 1,
                       floor       = greatest(l.next_floor, v_ns.not_before_ms, v_static),
                       expires_at  = v_now + p_ttl_ms,
                       ceiling     = greatest(v_now + p_ttl_ms + v_ns.tolerance_ms, l.next_floor, v_ns.not_before_ms,
                                              v_static),
                       next_floor  = greatest(v_now + p_ttl_ms + v_ns.tolerance_ms, l.next_floor, v_ns.not_before_ms,
                                              v_static)
                 WHERE l.namespace = p_namespace AND l.slot = c.slot AND l.slot < (1 << v_ns.slot_bits)
                   AND (v_ns.slot_range IS NULL OR l.slot <@ v_ns.slot_range)
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
                            AND l.expires_at > v_now
                            AND (v_ns.slot_range IS NULL OR l.slot <@ v_ns.slot_range));
END $$;

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
    -- Writers of lease rows wait until this commits: none grants a window meanwhile.
    LOCK TABLE cosid.lease IN SHARE MODE;
    SELECT * INTO v_ns FROM cosid.namespace n WHERE n.name = namespace FOR UPDATE;
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

REVOKE ALL ON FUNCTION cosid_namespace_lower_floor(text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_namespace_lower_floor(text, timestamptz) TO cosid_admin;
COMMENT ON FUNCTION cosid_namespace_lower_floor(text, timestamptz) IS 'lowers a namespace''s floor raised by mistake, never below what its lease rows show (superuser or cosid_admin)';

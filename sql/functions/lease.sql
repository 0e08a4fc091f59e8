-- Leases: the compare-and-set of every window (acquire, renew, release, revoke, the keeper's
-- pass), and the guards on the lease table.

-- Each definition here is the current one: the build puts this file into the update script
-- of the version being developed (sql/README.md).

-- Store mutations.  Each try is ONE conditional UPDATE ... RETURNING on one row: under READ
-- COMMITTED a racing writer is waited for and the condition re-checked on the new row
-- version, so two acquirers never both win a slot.  Called by the lease keeper, each in its
-- own transaction.
--
-- An acquire: a slot of the namespace's range for the caller's incarnation, in the order of
-- src/core/lease_model.cpp's slot_preference (the caller's preferred slot, free slots, then
-- expired leases); every new window starts at or above the slot's next floor and the
-- namespace's floor.  A lease row another transaction holds locked is passed over, not
-- waited for, and a capped role is refused at its cap (cosid._lease_cap_check).
-- Where a new window on a lease row starts: its next floor with the store's raises it missed
-- (cosid._raised_next_floor), the namespace's floor, and the static ceilings recorded for its
-- slot (p_static; NULL: none).  cosid.acquire's floor, and what its ceiling is computed from.
CREATE OR REPLACE FUNCTION cosid._window_start(p_next_floor bigint, p_seen bigint, p_count bigint, p_raised_floor bigint,
                                               p_not_before bigint, p_static bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT greatest(cosid._raised_next_floor(p_next_floor, p_seen, p_count, p_raised_floor), p_not_before, p_static)
$$;
REVOKE ALL ON FUNCTION cosid._window_start(bigint, bigint, bigint, bigint, bigint, bigint) FROM PUBLIC;

-- A grant's window on a lease row: it starts where cosid._window_start says (its arguments
-- first), and its ceiling, which is also the row's next floor, is cosid._window_ceiling's for a
-- ttl of p_ttl from the store's p_now.  cosid.acquire's one place for both.  (A set-returning
-- SQL function: the planner inlines it into the UPDATE, where a function returning one record
-- would run as a statement of its own.)
CREATE OR REPLACE FUNCTION cosid._grant_window(p_next_floor bigint, p_seen bigint, p_count bigint, p_raised_floor bigint,
                                               p_not_before bigint, p_static bigint, p_ttl bigint, p_tol bigint,
                                               p_now bigint)
RETURNS TABLE (floor bigint, ceiling bigint)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT s.start, cosid._window_ceiling(s.start, s.start, p_ttl, p_tol, p_now)
      FROM (SELECT cosid._window_start(p_next_floor, p_seen, p_count, p_raised_floor, p_not_before, p_static) AS start) s
$$;
REVOKE ALL ON FUNCTION cosid._grant_window(bigint, bigint, bigint, bigint, bigint, bigint, bigint, bigint, bigint) FROM PUBLIC;

-- The slot search of cosid.acquire: a cursor over the next at most 16 slots above p_after,
-- in slot order, that fit preference p_pref (1 to 9, the order of cosid.acquire's comment).
-- The acquire stops at the first slot past its range (p_upper): a bound here too made the
-- generic plan's estimate so small that PostgreSQL planned the statement again at every
-- call.  Except for expired leases (4, 8), which no index finds: without the bound their scan
-- read every free slot above a regional store's range, up to the namespace's end.
-- Preferences 1 to 4 ask too that the slot's next window can start now
-- (p_now): its next floor with the raises it missed at or below it, and no static ceiling
-- recorded above it for its slot or its namespace (slot -1; a slot static here before has its
-- last window's ceiling there, up to cosid.static_ahead ahead).  Each shape is a static
-- statement, whose plan is made once a session and kept (a dynamic EXECUTE was planned at
-- every call: a quarter of an acquire's time); and a cursor, which the acquire reads one slot
-- at a time, so the common acquire reads one candidate's row, not a batch of them.
CREATE OR REPLACE FUNCTION cosid._slot_candidates(p_pref int, p_namespace text, p_owner_key text, p_preferred int,
                                                  p_now bigint, p_after int, p_incarnation uuid, p_upper int,
                                                  p_count bigint, p_raised_floor bigint) RETURNS refcursor
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_any boolean := p_pref > 4;  -- 5 to 9: whether or not the next window can start now
    c     refcursor;
BEGIN
    IF p_pref IN (1, 5) THEN
        OPEN c FOR SELECT l.slot FROM cosid.lease l
                    WHERE l.namespace = p_namespace AND l.slot > p_after
                      AND l.slot = p_preferred
                      AND (l.incarnation IS NULL OR (l.expires_at <= p_now AND l.incarnation <> p_incarnation))
                      AND (v_any OR (cosid._raised_next_floor(l.next_floor, l.raise_seen, p_count, p_raised_floor) <= p_now
                                     AND NOT EXISTS (SELECT FROM cosid.static_ceiling sc
                                                      WHERE sc.namespace = p_namespace AND sc.slot IN (l.slot, -1)
                                                        AND sc.ceiling_ms > p_now)));
    ELSIF p_pref IN (2, 6) THEN
        OPEN c FOR SELECT l.slot FROM cosid.lease l
                    WHERE l.namespace = p_namespace AND l.slot > p_after
                      AND coalesce(l.owner_key, l.previous_owner_key) = p_owner_key
                      AND (l.incarnation IS NULL OR (l.expires_at <= p_now AND l.incarnation <> p_incarnation))
                      AND (v_any OR (cosid._raised_next_floor(l.next_floor, l.raise_seen, p_count, p_raised_floor) <= p_now
                                     AND NOT EXISTS (SELECT FROM cosid.static_ceiling sc
                                                      WHERE sc.namespace = p_namespace AND sc.slot IN (l.slot, -1)
                                                        AND sc.ceiling_ms > p_now)))
                    ORDER BY l.slot LIMIT 16;
    ELSIF p_pref IN (3, 7) THEN
        OPEN c FOR SELECT l.slot FROM cosid.lease l
                    WHERE l.namespace = p_namespace AND l.slot > p_after
                      AND l.incarnation IS NULL
                      AND (v_any OR (cosid._raised_next_floor(l.next_floor, l.raise_seen, p_count, p_raised_floor) <= p_now
                                     AND NOT EXISTS (SELECT FROM cosid.static_ceiling sc
                                                      WHERE sc.namespace = p_namespace AND sc.slot IN (l.slot, -1)
                                                        AND sc.ceiling_ms > p_now)))
                    ORDER BY l.slot LIMIT 16;
    ELSIF p_pref IN (4, 8) THEN
        OPEN c FOR SELECT l.slot FROM cosid.lease l
                    WHERE l.namespace = p_namespace AND l.slot > p_after AND l.slot < p_upper
                      AND l.expires_at <= p_now AND l.incarnation <> p_incarnation
                      AND (v_any OR (cosid._raised_next_floor(l.next_floor, l.raise_seen, p_count, p_raised_floor) <= p_now
                                     AND NOT EXISTS (SELECT FROM cosid.static_ceiling sc
                                                      WHERE sc.namespace = p_namespace AND sc.slot IN (l.slot, -1)
                                                        AND sc.ceiling_ms > p_now)))
                    ORDER BY l.slot LIMIT 16;
    ELSE
        OPEN c FOR SELECT l.slot FROM cosid.lease l
                    WHERE l.namespace = p_namespace AND l.slot > p_after
                      AND l.incarnation = p_incarnation AND l.expires_at <= p_now
                    ORDER BY l.slot LIMIT 16;
    END IF;
    RETURN c;
END $$;
REVOKE ALL ON FUNCTION cosid._slot_candidates(int, text, text, int, bigint, int, uuid, int, bigint, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION cosid.acquire(p_namespace text, p_owner_key text, p_incarnation uuid,
                              p_ttl_ms bigint, p_preferred int DEFAULT NULL)
RETURNS TABLE (slot int, fence bigint, expires_at bigint, floor bigint, ceiling bigint,
               next_floor bigint, store_now bigint, duplicate_key boolean, earliest_expiry bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_now  bigint := cosid.store_now();
    v_ns   cosid.namespace;
    v_dup  boolean;
    v_after int;
    v_batch int;
    v_slot int;
    v_cur  refcursor;
    v_upper int;
    r      cosid.lease;
    v_static bigint;
    v_missed boolean := false;
    v_mark record;
BEGIN
    -- FOR KEY SHARE on the namespace's row: shared with every acquire and with a keeper's
    -- floor raise (cosid.raise_floor, FOR NO KEY UPDATE), exclusive with a change of the
    -- namespace's slot range (cosid._namespace_range_guard takes FOR UPDATE): a range is never
    -- set while an acquire that read the namespace without it is still in flight, and an
    -- acquire reads the range after it (a row lock that waited returns the row as the change
    -- committed it).  No role but the extension's owner may lock the row (FOR KEY SHARE needs
    -- UPDATE on cosid.namespace), so no login can hold this lock to stop the namespace's new
    -- windows, as it could an advisory key.
    SELECT n.* INTO v_ns FROM cosid.namespace n WHERE n.name = p_namespace FOR KEY SHARE;
    IF NOT FOUND THEN
        v_ns := cosid._namespace_row(p_namespace);  -- its error: a NULL or unknown namespace
    END IF;
    IF p_owner_key IS NULL OR p_owner_key = '' OR p_incarnation IS NULL THEN
        RAISE EXCEPTION 'cosid.acquire needs an owner key and an incarnation'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_ttl_ms IS NULL OR p_ttl_ms <= 0 THEN
        RAISE EXCEPTION 'cosid lease ttl must be positive, got % ms', p_ttl_ms
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_ttl_ms > 86400000 THEN
        -- (a longer max_ttl is refused too: cosid_store_settings)
        RAISE EXCEPTION 'cosid lease ttl must be at most 24 hours, got % ms', p_ttl_ms
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A ttl above the store''s max_ttl is granted at max_ttl; one above 24 hours is a mistake.';
    END IF;
    PERFORM cosid._follow_timeline(p_ttl_ms, false, NULL);
    SELECT g.ttl_ms INTO p_ttl_ms FROM cosid._grant_limits(p_ttl_ms) g;
    v_now := cosid.store_now();  -- after a raise, which may have waited for another caller's
    -- The store's last raise, for a row not yet brought up to it (the lazy raise,
    -- cosid._follow_timeline): one record of here now, so settled.  (Which slots can start
    -- now; the grant itself reads it again, in its UPDATE.)
    SELECT * INTO v_mark FROM cosid._raise_mark();
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
    IF NOT cosid._is_admin() THEN
        PERFORM cosid._lease_cap_check(v_ns, v_now);
    END IF;
    -- (IS DISTINCT FROM and a p_incarnation not NULL, the same here as <>: a row with this
    -- owner key has an incarnation, cosid.lease's CHECK.  With <> the partial index of held
    -- leases, lease_owner_role, was usable too, and a plan made while the namespace's
    -- statistics had every slot free chose it: every acquire read every held lease of the
    -- namespace, 1,200 rows at 1,200 held, 0.3 ms; a fleet's start grew with the square of
    -- its size.)
    v_dup := EXISTS (SELECT 1 FROM cosid.lease l
                     WHERE l.namespace = p_namespace
                       AND coalesce(l.owner_key, l.previous_owner_key) = p_owner_key
                       AND l.owner_key = p_owner_key
                       AND l.incarnation IS DISTINCT FROM p_incarnation AND p_incarnation IS NOT NULL
                       AND l.expires_at > v_now);
    -- Only available slots are candidates: free, or expired.  A live lease is never handed
    -- out again, not even to its own incarnation, since the store cannot know what that
    -- incarnation issued in it.  Nor is an expired lease of the asking incarnation, except
    -- as the very last resort: its owner renews it (a renewal succeeds after expiry while
    -- nobody took over) or releases it, and taking it over would only cut its window short.
    -- As a last resort it is safe (the new window starts at its next_floor, its ceiling),
    -- and it keeps an orphan the owner never learnt of (an acquire whose answer was lost)
    -- from being lost to it for good.
    -- Preference: (1) preferred, (2) sticky: last owned by the same key, (3) lowest free,
    -- then lowest expired; each first among slots whose next window can start now (next_floor
    -- <= now: not one released at a ceiling still ahead, where the holder would wait for its
    -- clock to pass the floor), then (4) the preferred and the sticky slot even if their next
    -- window cannot start now, then the lowest free and the lowest expired of any, then (5) an
    -- expired lease of the asking incarnation (the last condition, v_pref 9).  Each
    -- preference is read in slot order, 16 candidates at a time (an index scan, whatever the
    -- number of slots), until a slot is won; a slot lost to a racing acquirer just moves on
    -- to the next.  A slot that fits two preferences comes
    -- twice; the second try matches no row.
    -- Free slots come before expired leases (3 and 4 each in two steps, as in
    -- src/core/lease_model.cpp slot_preference): a free slot is found through the index of
    -- free slots (cosid.lease_free) without reading the held ones, so an acquire costs the
    -- same at every fill while free slots remain; and an expired lease's owner may still renew
    -- it, which it can only while nobody took it over.  (4) After a raise no slot's next
    -- window can start now (every next floor is at or above the raised floor, ahead of the
    -- clock until the store's clock reaches it): each asker takes back its own slot, which the
    -- raise freed, instead of the whole fleet racing for the lowest free slots at once, as it
    -- does after a switchover.  cosid._slot_candidates reads each preference.
    FOR v_pref IN 1 .. 9 LOOP
        -- (3) reads the free slots and the expired leases until one can start now: every one of
        -- them while the store's raised floor is ahead of its clock, when none can (see (4)).
        -- Skipped then: after a switchover each acquire read the whole namespace twice for
        -- nothing (tens of ms at 16 slot bits, for every instance of the fleet at once).
        CONTINUE WHEN v_pref IN (3, 4) AND v_mark.raised_floor > v_now;
        CONTINUE WHEN v_pref IN (1, 5) AND p_preferred IS NULL;  -- no preferred slot asked for
        v_after := coalesce(lower(v_ns.slot_range), 0) - 1;  -- a regional store grants only its range
        v_upper := coalesce(upper(v_ns.slot_range), 1 << v_ns.slot_bits);
        LOOP
            v_batch := 0;
            -- (a row past the layout's slots, left by a hand edit, is never granted: its ids
            -- would spill into the timestamp bits)
            v_cur := cosid._slot_candidates(v_pref, p_namespace, p_owner_key, p_preferred, v_now, v_after, p_incarnation,
                                            v_upper, v_mark.raise_count, v_mark.raised_floor);
            LOOP
                FETCH v_cur INTO v_slot;
                EXIT WHEN NOT FOUND;
                IF v_slot >= v_upper THEN  -- past the range: so is every slot after it
                    v_batch := 0;
                    EXIT;
                END IF;
                v_batch := v_batch + 1;
                v_after := v_slot;
                -- A slot a server of this database issued on as a static slot before it was
                -- leased (cosid.static_slots removed, a restart), or a static namespace's
                -- adopted floor (slot -1): the window starts above the ceilings it recorded,
                -- so ids the static windows issued ahead of the clock are not issued again.
                v_static := (SELECT max(sc.ceiling_ms) FROM cosid.static_ceiling sc
                              WHERE sc.namespace = p_namespace AND sc.slot IN (v_slot, -1));
                -- A row that missed the store's last raise (free when the raise ran, so left
                -- alone) is brought up to it here: its window starts at or above the raised
                -- floor, and its fence takes the raise's step (cosid._raise_fence_step) on top
                -- of this grant's +1, so a renewal or release from a lost tail that granted this
                -- slot never matches the new window.  The raise is read here, in this statement
                -- (m), not before it: a raise that committed while this UPDATE waited for the
                -- lease table's lock (the raise holds SHARE ROW EXCLUSIVE) is seen by the
                -- snapshot this statement takes after the wait, as the eager raise's next floor
                -- was seen by the re-check of the row.
                UPDATE cosid.lease l
                   SET previous_owner_key = coalesce(l.owner_key, l.previous_owner_key),
                       owner_key   = p_owner_key,
                       incarnation = p_incarnation,
                       owner_role  = session_user,
                       fence       = l.fence + 1 + cosid._raise_fence_step(l.raise_seen, m.raise_count),
                       raise_seen  = greatest(l.raise_seen, m.raise_count),
                       expires_at  = v_now + p_ttl_ms,
                       (floor, ceiling, next_floor)
                                   = (SELECT g.floor, g.ceiling, g.ceiling
                                        FROM cosid._grant_window(l.next_floor, l.raise_seen, m.raise_count,
                                                                 m.raised_floor, v_ns.not_before_ms, v_static,
                                                                 p_ttl_ms, v_ns.tolerance_ms, v_now) g)
                  FROM cosid._raise_mark() m
                 -- A row another transaction holds locked is passed over (SKIP LOCKED), not
                 -- waited for: a racing acquirer takes it anyway, and a keeper role that holds
                 -- its own acquire's or renewal's transaction open (a statement that sleeps
                 -- after the call) would otherwise stop every acquire that reaches that slot
                 -- until the callers' lock timeouts.  The conditions below are checked again on
                 -- the row as the lock found it.
                 WHERE l.namespace = p_namespace
                   AND l.slot = (SELECT k.slot FROM cosid.lease k
                                  WHERE k.namespace = p_namespace AND k.slot = v_slot
                                    AND (k.incarnation IS NULL
                                         OR (k.expires_at <= v_now AND (k.incarnation <> p_incarnation OR v_pref = 9)))
                                    FOR NO KEY UPDATE SKIP LOCKED)
                   AND l.slot < (1 << v_ns.slot_bits)
                   AND (v_ns.slot_range IS NULL OR l.slot <@ v_ns.slot_range)
                   AND (l.incarnation IS NULL
                        OR (l.expires_at <= v_now AND (l.incarnation <> p_incarnation OR v_pref = 9)))
                RETURNING l.* INTO r;
                IF FOUND THEN
                    -- Above a transaction's snapshot (REPEATABLE READ, SERIALIZABLE) the raise
                    -- read above is the snapshot's, and a raise that committed since left this
                    -- free row alone (it writes only the held ones): nothing made the grant
                    -- conflict with it.  The store's record then locked: a raise since replaced
                    -- it, and this fails (could not serialize, 40001) instead of granting below
                    -- the raised floor; the caller tries again in a new transaction.  (At READ
                    -- COMMITTED the UPDATE read the raise as it committed.)
                    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
                        PERFORM FROM cosid.store_state s FOR KEY SHARE;
                    END IF;
                    CLOSE v_cur;
                    RETURN QUERY SELECT r.slot, r.fence, r.expires_at, r.floor, r.ceiling, r.next_floor,
                                        v_now, v_dup, NULL::bigint;
                    RETURN;
                END IF;
                v_missed := true;  -- taken meanwhile, or passed over: its locker may roll back
            END LOOP;
            CLOSE v_cur;
            EXIT WHEN v_batch < 16;
        END LOOP;
    END LOOP;
    -- Exhausted: no slot, and the earliest expiry to wait for: at most 100 ms from now when
    -- a candidate was missed (the keeper tries again then: src/pg/keeper/keeper_request.cpp).
    RETURN QUERY SELECT NULL::int, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
                        NULL::bigint, v_now, v_dup,
                        (SELECT CASE WHEN v_missed THEN least(min(l.expires_at), v_now + 100) ELSE min(l.expires_at) END
                           FROM cosid.lease l
                          WHERE l.namespace = p_namespace AND l.incarnation IS NOT NULL
                            AND l.expires_at > v_now
                            AND (v_ns.slot_range IS NULL OR l.slot <@ v_ns.slot_range));
END $$;
REVOKE ALL ON FUNCTION cosid.acquire(text, text, uuid, bigint, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid.acquire(text, text, uuid, bigint, int),
                          cosid.renew(text, int, uuid, bigint, bigint),
                          cosid.release(text, int, uuid, bigint, bigint) TO cosid_keeper;

-- Renew: incarnation and fence must match; a replayed renew succeeds and never shrinks.  No
-- row returned means the lease is lost.  Grants at most max_ttl (cosid._grant_limits)
-- instead of refusing a longer ttl, and a capped role may not revive an expired lease past
-- its cap (cosid._lease_renew_revives).
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
    IF p_ttl_ms > 86400000 THEN
        -- (a longer max_ttl is refused too: cosid_store_settings)
        RAISE EXCEPTION 'cosid lease ttl must be at most 24 hours, got % ms', p_ttl_ms
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A ttl above the store''s max_ttl is granted at max_ttl; one above 24 hours is a mistake.';
    END IF;
    PERFORM cosid._follow_timeline(p_ttl_ms, false, NULL);
    SELECT g.ttl_ms INTO p_ttl_ms FROM cosid._grant_limits(p_ttl_ms) g;
    v_now := cosid.store_now();
    UPDATE cosid.lease l
       SET expires_at = greatest(l.expires_at, v_now + p_ttl_ms),
           ceiling    = cosid._window_ceiling(l.floor, l.ceiling, p_ttl_ms, v_ns.tolerance_ms, v_now),
           next_floor = cosid._window_ceiling(l.floor, l.ceiling, p_ttl_ms, v_ns.tolerance_ms, v_now),
           owner_role = session_user
     -- (by the primary key: IS NOT DISTINCT FROM, = for an incarnation not NULL, leaves the
     -- planner no other index, as in cosid.lease_pass)
     WHERE l.namespace = p_namespace AND l.slot = p_slot AND p_incarnation IS NOT NULL
       AND l.incarnation IS NOT DISTINCT FROM p_incarnation AND l.fence = p_fence
       AND (l.owner_role IS NULL OR l.owner_role = session_user)
       -- A lease that expired and nobody took is revived by its renewal: it counts against
       -- the role's cap again (cosid._lease_renew_revives refuses past it, 53400)
       AND CASE WHEN l.expires_at > v_now THEN true ELSE cosid._lease_renew_revives(v_ns, v_now) END
    RETURNING l.* INTO r;
    IF FOUND THEN
        RETURN QUERY SELECT r.slot, r.fence, r.expires_at, r.floor, r.ceiling, r.next_floor, v_now;
    ELSE
        -- Nothing renewed: the lease is gone, or another store role holds it (refused here
        -- with 42501, as before the UPDATE; asked only now, so a renewal reads its row once).
        PERFORM cosid._refuse_other_role(p_namespace, p_slot, p_incarnation, p_fence, 'renew');
    END IF;
END $$;
REVOKE ALL ON FUNCTION cosid.renew(text, int, uuid, bigint, bigint) FROM PUBLIC;

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
     WHERE l.namespace = p_namespace AND l.slot = p_slot AND p_incarnation IS NOT NULL
       AND l.incarnation IS NOT DISTINCT FROM p_incarnation AND l.fence = p_fence
       AND (l.owner_role IS NULL OR l.owner_role = session_user)
    RETURNING l.* INTO r;
    IF FOUND THEN
        RETURN QUERY SELECT r.slot, r.fence, r.next_floor, v_now;
    END IF;
END $$;
REVOKE ALL ON FUNCTION cosid.release(text, int, uuid, bigint, bigint) FROM PUBLIC;

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
REVOKE ALL ON FUNCTION cosid.revoke(text, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid.revoke(text, int) TO cosid_admin;

-- A keeper's pass in one store transaction: the renewals and releases due for several leases
-- of one incarnation, element k of each array describing lease k; a row per lease the store
-- still held for the caller, ord naming it (1-based), none for a lease that was lost.  An
-- error in any element rolls back the whole pass: the keeper then asks lease by lease, and so
-- learns which.  SECURITY DEFINER for the pass of renewals only; only cosid_keeper (and the
-- superuser) may call it, who may call cosid.renew and cosid.release anyway.
--
-- A pass of renewals only (the keeper's usual pass) is answered as cosid.renew called lease by
-- lease answers it, in about half the backend's instructions for a pass of 5 (docs/capacity.md):
-- what each renewal did again and found the same within one transaction (the timeline
-- followed, the ttl granted, the store's now) is done once, and the leases are renewed by one
-- UPDATE with cosid.renew's compare-and-set (namespace, slot, incarnation, fence, the store
-- role that holds it), the lease guard firing on each row.  It renews every lease of the pass
-- or answers nothing: a pass with a lease lost, expired (reviving one counts against the
-- role's cap), another role's or no store role's yet, of a namespace missing or named twice,
-- or arrays that do not start at 1, goes on lease by lease,
-- cosid.renew in order, as every pass with a release does (a release's exact last timestamp
-- is the next holder's floor).  A lease the UPDATE renewed is then renewed again, which
-- answers what renewing it once at that later now does: a renewal never shrinks, and its
-- ceiling is cosid._window_ceiling of the same floor and prior ceiling.  The first namespace
-- is looked up before the timeline is followed, as cosid.renew does, so that its error comes
-- first.
CREATE OR REPLACE FUNCTION cosid.lease_pass(p_incarnation uuid, p_ttl_ms bigint, p_release boolean[], p_namespace text[],
                                 p_slot int[], p_fence bigint[], p_number bigint[])
RETURNS TABLE (ord int, slot int, fence bigint, expires_at bigint, floor bigint, ceiling bigint,
               next_floor bigint, store_now bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n int := coalesce(array_length(p_namespace, 1), 0);
    v_ttl  bigint;
    v_now  bigint;
    v_rows bigint;
BEGIN
    IF coalesce(array_length(p_release, 1), 0) <> n OR coalesce(array_length(p_slot, 1), 0) <> n
       OR coalesce(array_length(p_fence, 1), 0) <> n OR coalesce(array_length(p_number, 1), 0) <> n THEN
        RAISE EXCEPTION 'cosid.lease_pass needs arrays of one length'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('namespace %s, release %s, slot %s, fence %s, number %s elements', n,
                                  coalesce(array_length(p_release, 1), 0), coalesce(array_length(p_slot, 1), 0),
                                  coalesce(array_length(p_fence, 1), 0), coalesce(array_length(p_number, 1), 0));
    END IF;
    IF n > 0 AND (true = ANY (p_release)) IS NOT TRUE THEN
        -- (arrays as the keeper sends them, one dimension from 1: unnest below pairs elements
        -- in storage order, where the loop indexes them)
        IF p_incarnation IS NOT NULL AND p_ttl_ms > 0 AND p_ttl_ms <= 86400000
           AND array_ndims(p_namespace) = 1 AND array_ndims(p_slot) = 1 AND array_ndims(p_fence) = 1
           AND array_lower(p_namespace, 1) = 1 AND array_lower(p_slot, 1) = 1 AND array_lower(p_fence, 1) = 1
           AND EXISTS (SELECT FROM cosid.namespace x WHERE x.name = p_namespace[1]) THEN
            PERFORM cosid._follow_timeline(p_ttl_ms, false, NULL);
            SELECT g.ttl_ms, cosid.store_now() INTO v_ttl, v_now FROM cosid._grant_limits(p_ttl_ms) g;
            RETURN QUERY
            WITH r AS (
                UPDATE cosid.lease l
                   SET expires_at = greatest(l.expires_at, v_now + v_ttl),
                       ceiling    = cosid._window_ceiling(l.floor, l.ceiling, v_ttl, x.tolerance_ms, v_now),
                       next_floor = cosid._window_ceiling(l.floor, l.ceiling, v_ttl, x.tolerance_ms, v_now),
                       owner_role = session_user
                  FROM unnest(p_namespace, p_slot, p_fence) WITH ORDINALITY u(ns, s, f, k), cosid.namespace x
                 -- (each row by its primary key: IS NOT DISTINCT FROM, = for an incarnation not NULL,
                 -- leaves the planner no other index.  With = and statistics taken before the
                 -- leases were held, the generic plan read every held row of the namespace
                 -- through lease_owner_role for each lease: 1,000 rows a renewal in a fleet's
                 -- first case.)
                 WHERE x.name = u.ns AND l.namespace = u.ns AND l.slot = u.s AND l.fence = u.f
                   AND l.incarnation IS NOT DISTINCT FROM p_incarnation
                   -- A lease with no store role yet (acquired before 1.4) takes the lease by lease
                   -- path: this UPDATE would give it one before the revive rule's count, which
                   -- renew in order does not (cosid._lease_renew_revives).
                   AND l.owner_role = session_user
                   -- Live at the store's clock as the row is reached, not at v_now: a row reached
                   -- after a wait on an earlier one's lock may have expired meanwhile, and its
                   -- renewal is then a revival, with the cap's check (lease by lease).
                   AND l.expires_at > cosid.store_now()
                RETURNING u.k, l.slot, l.fence, l.expires_at, l.floor, l.ceiling, l.next_floor)
            SELECT r.k::int, r.slot, r.fence, r.expires_at, r.floor, r.ceiling, r.next_floor, v_now
              FROM r WHERE (SELECT count(*) FROM r) = n ORDER BY r.k;
            GET DIAGNOSTICS v_rows = ROW_COUNT;
            IF v_rows = n THEN
                RETURN;
            END IF;
        END IF;
    END IF;
    FOR k IN 1 .. n LOOP
        IF p_release[k] THEN
            RETURN QUERY SELECT k, r.slot, r.fence, NULL::bigint, NULL::bigint, NULL::bigint, r.next_floor, r.store_now
                           FROM cosid.release(p_namespace[k], p_slot[k], p_incarnation, p_fence[k], p_number[k]) r;
        ELSE
            RETURN QUERY SELECT k, r.slot, r.fence, r.expires_at, r.floor, r.ceiling, r.next_floor, r.store_now
                           FROM cosid.renew(p_namespace[k], p_slot[k], p_incarnation, p_fence[k], p_ttl_ms) r;
        END IF;
    END LOOP;
END $$;
REVOKE ALL ON FUNCTION cosid.lease_pass(uuid, bigint, boolean[], text[], int[], bigint[], bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid.lease_pass(uuid, bigint, boolean[], text[], int[], bigint[], bigint[]) TO cosid_keeper;

-- A keeper's acquires due together, in one store transaction: after a switchover's raise
-- freed every lease, each instance asks for a successor in each of its namespaces at once,
-- and one commit, round trip and connection turn serves them all.  Each is cosid.acquire's,
-- in the order given (ord: its place in p_namespaces, from 1), with its answer row.  The
-- namespaces' rows are locked first, in the order of their names, and the timeline followed,
-- before any lease row (the store's lock order: src/README.md): no acquire of the batch then
-- waits for a namespace's row while the batch holds lease rows.  An error in one acquire
-- rolls back all of them: the keeper then asks again one acquire at a time, and each gets
-- its own answer.  At most 64 a call.
CREATE OR REPLACE FUNCTION cosid.acquire_many(p_namespaces text[], p_owner_key text, p_incarnation uuid,
                                              p_ttl_ms bigint, p_preferred int DEFAULT NULL)
RETURNS TABLE (ord int, namespace text, slot int, fence bigint, expires_at bigint, floor bigint, ceiling bigint,
               next_floor bigint, store_now bigint, duplicate_key boolean, earliest_expiry bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n        int := coalesce(cardinality(p_namespaces), 0);
    v_locked int;
BEGIN
    IF n > 64 OR (n > 0 AND (array_ndims(p_namespaces) <> 1 OR array_lower(p_namespaces, 1) <> 1)) THEN
        RAISE EXCEPTION 'cosid.acquire_many takes at most 64 namespaces, in an array of one dimension from 1'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('It got %s elements in %s dimensions.', n, coalesce(array_ndims(p_namespaces), 0));
    END IF;
    -- (NOWAIT: a row an administrator's open transaction holds FOR UPDATE fails the batch at
    -- once, and the keeper asks one namespace at a time: the batch does not wait a store
    -- bound for that row first, as all of its namespaces would)
    SELECT count(*) INTO v_locked
      FROM (SELECT FROM cosid.namespace x WHERE x.name = ANY (p_namespaces)
             ORDER BY x.name COLLATE "C" FOR KEY SHARE NOWAIT) l;
    IF v_locked < (SELECT count(DISTINCT u) FROM unnest(p_namespaces) u) THEN
        -- A namespace that does not exist fails the batch before any lease row (one made
        -- meanwhile would be locked after them): its own error, or a retry if it was just made.
        PERFORM cosid._namespace_row(u) FROM unnest(p_namespaces) u;
        RAISE EXCEPTION 'cosid.acquire_many: a namespace of % was made while the call locked them', p_namespaces
            USING ERRCODE = 'serialization_failure', HINT = 'Call again.';
    END IF;
    IF n > 0 AND p_ttl_ms > 0 AND p_ttl_ms <= 86400000 THEN
        PERFORM cosid._follow_timeline(p_ttl_ms, false, NULL);  -- (a bad ttl: cosid.acquire's error)
    END IF;
    FOR k IN 1 .. n LOOP
        RETURN QUERY SELECT k, p_namespaces[k], a.*
                       FROM cosid.acquire(p_namespaces[k], p_owner_key, p_incarnation, p_ttl_ms, p_preferred) a;
    END LOOP;
END $$;
REVOKE ALL ON FUNCTION cosid.acquire_many(text[], text, uuid, bigint, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid.acquire_many(text[], text, uuid, bigint, int) TO cosid_keeper;

-- The leases of one incarnation acquired by the calling store role, one at a time after
-- (namespace, slot): the keeper's look for orphans at its start.  Incarnations are not
-- readable by other roles (cosid.lease's column privileges), so this is how a keeper finds
-- its own.
CREATE OR REPLACE FUNCTION cosid.own_leases(p_incarnation uuid, p_after_namespace text, p_after_slot int)
RETURNS TABLE (slot int, fence bigint, ceiling bigint, namespace text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT l.slot, l.fence, l.ceiling, l.namespace FROM cosid.lease l
     WHERE l.incarnation = p_incarnation AND (l.namespace, l.slot) > (p_after_namespace, p_after_slot)
       AND (l.owner_role IS NULL OR l.owner_role = session_user)
     ORDER BY l.namespace, l.slot LIMIT 1
$$;
REVOKE ALL ON FUNCTION cosid.own_leases(uuid, text, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid.own_leases(uuid, text, int) TO cosid_keeper;

-- The lease rules (cosid--1.0.sql), checked on every change of a lease row, whoever makes it:
-- the same rules, in the same order, with the same error, from C (src/pg/store/lease_guard.cpp,
-- the rules in src/core/lease_rule.hpp).  Every acquire, renewal and release fires it, and
-- a PL/pgSQL trigger would build its expressions again in each of their transactions.  The
-- trigger lease_guard keeps calling it (ENABLE ALWAYS).
CREATE OR REPLACE FUNCTION cosid._lease_guard() RETURNS trigger
AS 'MODULE_PATHNAME', 'cosid_lease_guard' LANGUAGE C;

-- A DELETE or TRUNCATE of lease rows forgets their windows, as DROP EXTENSION does (the
-- lease table is their only record; a namespace made again starts its slots at the store's
-- now): refused while a row's window, or a free slot's next floor, reaches past the store's
-- clock, as the DROP guard refuses (src/pg/backend/drop_guard.cpp asks the same of every row).  A
-- TRUNCATE of cosid.namespace CASCADE truncates the lease table too and is held here.  Also
-- under session_replication_role = replica (the usual way to "turn triggers off" for a
-- cleanup); what logical replication brings is skipped or refused by keep_local, whose
-- triggers' names sort before these.  A TRUNCATE runs only at READ COMMITTED: it removes
-- every row whatever the snapshot, and at REPEATABLE READ or SERIALIZABLE the look below
-- reads the transaction's snapshot, taken before the TRUNCATE waited for its lock, which
-- misses a window an acquire granted meanwhile.  (A DELETE there fails on a row changed
-- since: could not serialize.)
CREATE OR REPLACE FUNCTION cosid._lease_forget_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_now  bigint := cosid.store_now();
    v_slot int;
    v_ns   text;
    v_ends bigint;
    v_mark record;
BEGIN
    -- A free row not yet brought up to the store's last raise (the lazy raise,
    -- cosid._follow_timeline) reaches as far as the raise put its next floor.  (Above a
    -- snapshot, the record locked: a raise since the snapshot replaced it, and this fails to
    -- serialize rather than judge by the raise before it, as cosid.acquire.)
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM FROM cosid.store_state s FOR KEY SHARE;
    END IF;
    SELECT * INTO v_mark FROM cosid._raise_mark();
    IF TG_OP = 'TRUNCATE' AND pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'cosid: cannot truncate cosid.lease at isolation level %',
                        pg_catalog.upper(pg_catalog.current_setting('transaction_isolation'))
            USING ERRCODE = 'invalid_transaction_state',
                  DETAIL = 'TRUNCATE removes every row whatever the snapshot, and the check of their windows would read this '
                           'transaction''s snapshot, taken before the TRUNCATE waited for its lock: a window granted meanwhile '
                           'would be forgotten.',
                  HINT = 'Run the TRUNCATE in a READ COMMITTED transaction.';
    END IF;
    IF TG_OP = 'TRUNCATE' THEN
        SELECT l.namespace, l.slot, e.ends INTO v_ns, v_slot, v_ends
          FROM cosid.lease l,
               LATERAL (SELECT cosid._raised_next_floor(CASE WHEN l.incarnation IS NULL THEN l.next_floor
                                                             ELSE greatest(l.ceiling, l.next_floor) END,
                                                        l.raise_seen, v_mark.raise_count, v_mark.raised_floor,
                                                        v_mark.settled) AS ends) e
         WHERE e.ends > v_now ORDER BY e.ends DESC LIMIT 1;
    ELSE
        v_ns := OLD.namespace; v_slot := OLD.slot;
        v_ends := cosid._raised_next_floor(CASE WHEN OLD.incarnation IS NULL THEN OLD.next_floor
                                                ELSE greatest(OLD.ceiling, OLD.next_floor) END,
                                           OLD.raise_seen, v_mark.raise_count, v_mark.raised_floor, v_mark.settled);
    END IF;
    IF v_ends > v_now THEN
        RAISE EXCEPTION 'cosid: cannot % cosid.lease while slot % of namespace "%" has a window reaching past the store''s clock',
                        lower(TG_OP), v_slot, v_ns
            USING ERRCODE = 'object_in_use',
                  DETAIL = format('It ends at %s UTC. The lease table is the only record of that window: a namespace '
                                  'made again could start a window below an id still to be issued in it.',
                                  to_char(to_timestamp(v_ends / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS')),
                  HINT = format('Release the slot (SELECT cosid_release(namespace, slot) FROM cosid_pool() on its '
                                'instance) and try again after %s UTC.',
                                to_char(to_timestamp(v_ends / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS'));
    END IF;
    RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NULL END;
END $$;
REVOKE ALL ON FUNCTION cosid._lease_forget_guard() FROM PUBLIC;

-- A lease row that arrives after the store's raise (a restore's rows loaded after the record
-- that made the first store call raise) is brought up to it at once, as cosid.acquire brings up
-- a free row that missed it: a held one freed, its next floor at least the raised floor, its
-- fence moved on by the raise's step (cosid._raise_fence_step; its mark may be of another
-- store's history, so at least one step), and marked as brought up.  A row the store makes
-- itself (cosid._namespace_insert) comes marked already, above the raise: nothing to do.
-- Every row that comes from outside (a restore's, a hand's) arrives with its mark cut below
-- the largest count the store's records hold: a dump of another store's history may bring
-- any mark, and a raise, which counts above the records, then counts above every row too; a
-- row is never taken as brought up to a raise of this store it never saw.  (A mark cut lower
-- only makes the row take a raise again: a floor it is above already, a fence step more.)
-- Only cosid._namespace_insert's own rows keep theirs (cosid_internal.rows_of names their
-- namespace for its INSERT).
CREATE OR REPLACE FUNCTION cosid._lease_arrives_raised() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_floor bigint;
    v_count bigint;
    v_most  bigint;
BEGIN
    -- (one look at the records per row: the largest count, and the raise's floor when the one
    -- record is of this cluster and raised)
    SELECT coalesce(max(s.raise_count), 0),
           CASE WHEN count(*) = 1 AND bool_and(s.system_identifier = c.system_identifier AND s.raised_at_ms > 0)
                THEN max(s.raised_at_ms + greatest(coalesce(s.raised_reach_ms, 0), s.max_ttl_ms + 2 * s.max_tolerance_ms))
           END
      INTO v_most, v_floor
      FROM cosid.store_state s, pg_catalog.pg_control_system() c;
    v_count := v_most;
    IF coalesce(pg_catalog.current_setting('cosid_internal.rows_of', true), '') <> NEW.namespace THEN
        NEW.raise_seen := least(NEW.raise_seen, v_most - 1);
    END IF;
    IF v_floor IS NOT NULL AND (NEW.incarnation IS NOT NULL OR NEW.next_floor < v_floor OR NEW.raise_seen <> v_count) THEN
        IF NEW.incarnation IS NOT NULL OR NEW.raise_seen <> v_count THEN
            NEW.previous_owner_key := coalesce(NEW.owner_key, NEW.previous_owner_key);
            NEW.owner_key := NULL;
            NEW.incarnation := NULL;
            NEW.owner_role := NULL;
            NEW.fence := NEW.fence + greatest(cosid._raise_fence_step(NEW.raise_seen, v_count), 4294967296);
        END IF;
        NEW.next_floor := greatest(NEW.next_floor, NEW.ceiling, v_floor);
        NEW.raise_seen := v_count;
    END IF;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION cosid._lease_arrives_raised() FROM PUBLIC;

-- A renewal of a lease that expired (nobody took its slot) revives it: a capped role may not
-- go past its cap that way either.  True, or the cap's error (cosid._lease_cap_check).
CREATE OR REPLACE FUNCTION cosid._lease_renew_revives(p_ns cosid.namespace, p_now bigint) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT cosid._is_admin() THEN
        PERFORM cosid._lease_cap_check(p_ns, p_now);
    END IF;
    RETURN true;
END $$;
REVOKE ALL ON FUNCTION cosid._lease_renew_revives(cosid.namespace, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION cosid_release() RETURNS int
AS 'MODULE_PATHNAME', 'cosid_release_own' LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION cosid_release(namespace text, slot int) RETURNS text
AS 'MODULE_PATHNAME', 'cosid_release_slot' LANGUAGE C VOLATILE CALLED ON NULL INPUT;

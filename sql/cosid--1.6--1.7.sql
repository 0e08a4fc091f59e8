-- cosid 1.6 -> 1.7: what a copy cannot see (the reach cap, forks that belong to the data
-- directory), a shared store's tenants, and cheaper acquires.
\echo Use "ALTER EXTENSION cosid UPDATE TO '1.7'" to load this file. \quit

-- >>> reach cap (docs/safety.md: what a copy cannot see)
-- The reach cap (src/core/reach.hpp): no limit lets a window reach more than this past the
-- clock that granted it, so a copy (an acknowledged fork, a restored dump) that cannot see the
-- limits its original set after the copy was made still raises above everything it issued.
CREATE FUNCTION cosid._reach_cap_ms() RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_reach_cap_ms' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cosid._max_tolerance_cap_ms() RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_max_tolerance_cap_ms' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cosid._static_ahead_cap_ms() RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_static_ahead_cap_ms' LANGUAGE C IMMUTABLE PARALLEL SAFE;
-- (what the raise covers: the cap, or cosid.test_reach_cap on a test server)
CREATE FUNCTION cosid._unseen_reach_cap_ms() RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_unseen_reach_cap_ms' LANGUAGE C STABLE PARALLEL SAFE;
REVOKE ALL ON FUNCTION cosid._unseen_reach_cap_ms() FROM PUBLIC;
REVOKE ALL ON FUNCTION cosid._reach_cap_ms() FROM PUBLIC;
REVOKE ALL ON FUNCTION cosid._max_tolerance_cap_ms() FROM PUBLIC;
REVOKE ALL ON FUNCTION cosid._static_ahead_cap_ms() FROM PUBLIC;

-- Limits within the reach cap: max_ttl + 2 x max_tolerance at most the cap, max_tolerance at
-- most its own cap (a static window reaches static_ahead + 2 x max_tolerance).  A store whose
-- limits lie past it (set before cosid 1.7) keeps them and may lower them: a copy of it sees
-- them, and raises by them (cosid._follow_timeline); nothing may reach further than the
-- greater of the two.
CREATE OR REPLACE FUNCTION cosid_store_settings(raise_floors_on_new_timeline boolean DEFAULT NULL,
                                                max_ttl interval DEFAULT NULL,
                                                max_tolerance interval DEFAULT NULL)
RETURNS cosid.store_state
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r cosid.store_state;
    v_ms bigint := floor(extract(epoch FROM max_ttl) * 1000)::bigint;
    v_tol bigint := floor(extract(epoch FROM max_tolerance) * 1000)::bigint;
    v_used record;
    v_old record;
    v_cap bigint := cosid._reach_cap_ms();
BEGIN
    IF v_ms IS NOT NULL AND (v_ms < 300 OR v_ms > 86400000) THEN
        RAISE EXCEPTION 'cosid max_ttl must be between 300 ms and 24 hours, got %', max_ttl
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_tol IS NOT NULL AND (v_tol < 0 OR v_tol > 3600000) THEN
        RAISE EXCEPTION 'cosid max_tolerance must be between 0 and 1 hour, got %', max_tolerance
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Every store call reads the limits (cosid._follow_timeline) and holds ROW SHARE on the
    -- table until it commits: waiting for them all here puts every grant made under the old
    -- limits before this change in the WAL.  Otherwise an acquire that read max_ttl 60 s
    -- commits after a lowering to 1 s, and a failover that loses its commit but keeps the
    -- lowering raises the floors by 1 s while its holder issues for 60 (the same for a
    -- namespace made with a tolerance above a lowered max_tolerance).  EXCLUSIVE, not ACCESS
    -- EXCLUSIVE: a login that only reads the table (PUBLIC may) does not hold it up, nor,
    -- queued behind it, every keeper's call.
    LOCK TABLE cosid.store_state IN EXCLUSIVE MODE;
    SELECT n.name, n.tolerance_ms INTO v_used FROM cosid.namespace n
     WHERE n.tolerance_ms > v_tol ORDER BY n.tolerance_ms DESC, n.name LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cosid max_tolerance % is below the tolerance of namespace "%" (% ms)', max_tolerance,
            v_used.name, v_used.tolerance_ms
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'After a failover the store raises every floor by 2 x max_tolerance, which must cover every namespace''s tolerance.';
    END IF;
    PERFORM cosid._follow_timeline(NULL);  -- one row, of here
    SELECT s.max_ttl_ms AS ttl, s.max_tolerance_ms AS tol, coalesce(v_ms, s.max_ttl_ms) AS new_ttl,
           coalesce(v_tol, s.max_tolerance_ms) AS new_tol INTO v_old FROM cosid.store_state s;
    IF v_old.new_tol > greatest(cosid._max_tolerance_cap_ms(), v_old.tol) THEN
        RAISE EXCEPTION 'cosid max_tolerance % ms is past its cap of % s', v_old.new_tol,
            cosid._max_tolerance_cap_ms() / 1000
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('A static window reaches cosid.static_ahead (at most %s s) + 2 x max_tolerance past its '
                                  'clock, and a copy of this store raises by the reach cap of %s s, which must cover it.',
                                  cosid._static_ahead_cap_ms() / 1000, v_cap / 1000),
                  HINT = 'Keep the servers'' clocks within a few seconds of the store''s (NTP) and max_tolerance at most 30 s.';
    END IF;
    IF v_old.new_ttl + 2 * v_old.new_tol > greatest(v_cap, v_old.ttl + 2 * v_old.tol) THEN
        RAISE EXCEPTION 'cosid max_ttl % ms + 2 x max_tolerance % ms reaches past the reach cap of % s',
            v_old.new_ttl, v_old.new_tol, v_cap / 1000
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('A copy of this store (a promoted standby, a restored dump, a copied data directory) '
                                  'cannot see a limit raised after it was made: it raises its floors by the reach cap '
                                  'instead, so no limit may let a window reach further (max_ttl + 2 x max_tolerance at '
                                  'most %s s, max_tolerance at most %s s).', v_cap / 1000,
                                  cosid._max_tolerance_cap_ms() / 1000),
                  HINT = format('Keep max_ttl + 2 x max_tolerance within %s s, e.g. SELECT * FROM cosid_store_settings('
                                'max_ttl => ''%s s'').', v_cap / 1000,
                                greatest((v_cap - 2 * v_old.new_tol) / 1000, 1));
    END IF;
    UPDATE cosid.store_state s
       SET raise_floors_on_new_timeline = coalesce(cosid_store_settings.raise_floors_on_new_timeline,
                                                   s.raise_floors_on_new_timeline),
           max_ttl_ms = v_old.new_ttl,
           max_tolerance_ms = v_old.new_tol
    RETURNING s.* INTO r;
    RETURN r;
END $$;

-- How far the last raise put the floors past its base (cosid._follow_timeline): the reach cap
-- after history the store could not see, or the limits after a failover.  What starts above
-- that raise later (a lease row a parallel restore loads after it, a namespace made after it)
-- starts above the same reach, not above the limits it sees now.  NULL: a raise before 1.7,
-- by the limits.
ALTER TABLE cosid.store_state ADD COLUMN raised_reach_ms bigint;

CREATE OR REPLACE FUNCTION cosid._lease_arrives_raised() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_floor bigint;
BEGIN
    SELECT s.raised_at_ms + greatest(coalesce(s.raised_reach_ms, 0), s.max_ttl_ms + 2 * s.max_tolerance_ms) INTO v_floor
      FROM cosid.store_state s, pg_catalog.pg_control_system() c
     WHERE s.system_identifier = c.system_identifier AND s.raised_at_ms > 0
       AND (SELECT count(*) FROM cosid.store_state) = 1;
    IF v_floor IS NOT NULL AND (NEW.incarnation IS NOT NULL OR NEW.next_floor < v_floor) THEN
        IF NEW.incarnation IS NOT NULL THEN
            NEW.previous_owner_key := coalesce(NEW.owner_key, NEW.previous_owner_key);
            NEW.owner_key := NULL;
            NEW.incarnation := NULL;
            NEW.owner_role := NULL;
            NEW.fence := NEW.fence + 4294967296;
        END IF;
        NEW.next_floor := greatest(NEW.next_floor, NEW.ceiling, v_floor);
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION cosid._namespace_insert(p_name text, p_slot_bits int, p_sequence_bits int,
                                        p_timestamp_bits int, p_epoch_ms bigint, p_unit text,
                                        p_tolerance_ms bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_floor   bigint;
    v_orphans bigint;
    v_first   int;
    v_last    int;
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
                         ELSE 0 END)
      INTO v_floor FROM cosid.store_state;
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
    INSERT INTO cosid.lease (namespace, slot, floor, ceiling, next_floor)
    SELECT p_name, s, v_floor, v_floor, v_floor FROM generate_series(0, (1 << p_slot_bits) - 1) AS s;
    -- Fresh statistics, so that an acquire reads the new slots through the index at once
    -- instead of waiting for autovacuum (up to 65536 new rows).
    ANALYZE cosid.lease;
END $$;

-- How far ahead of the store's clock a floor may lie (a keeper's raise_floor, a namespace's
-- floor an acquire accepts): what a raise puts there, by the limits, or as far as the last
-- raise's own reach still lies ahead (the cap after a restore or a fork acknowledged).
-- (measured from the store's clock at the start of the caller's statement, which is never
-- later than the now its caller compares with: a margin read a moment later would refuse a
-- floor the raise itself set)
CREATE OR REPLACE FUNCTION cosid._floor_margin() RETURNS bigint
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT greatest(coalesce(max(s.max_ttl_ms), 60000) + 2 * coalesce(max(s.max_tolerance_ms), 5000),
                    coalesce(max(s.raised_at_ms + s.raised_reach_ms) FILTER (WHERE s.raised_at_ms > 0), 0)
                    - (floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint + cosid._store_clock_offset()))
      FROM cosid.store_state s
$$;

-- A raise after history the store cannot see covers the reach cap (the rest as in 1.6).
CREATE OR REPLACE FUNCTION cosid._follow_timeline(p_ttl_ms bigint, p_fork_ack boolean, p_stopped_ms bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_tli     int := cosid._timeline();
    v_sys     bigint := cosid._system_identifier();
    v_count   bigint;
    v_here    boolean;
    v_raise   boolean;
    v_now     bigint;
    v_base    bigint;
    v_rows    bigint := 0;
    v_fork    text;
    v_upgraded boolean := false;
    v_from    record;
    v_read_here text;
    v_reach   bigint;
    m         record;
BEGIN
    -- Held until the call commits: cosid_store_settings (EXCLUSIVE) waits for every grant
    -- made under the limits it changes, and a login that only reads the table (ACCESS SHARE,
    -- which PUBLIC may take) holds up neither (docs/stores.md: what one role can cost).
    LOCK TABLE cosid.store_state IN ROW SHARE MODE;
    -- The common case first, without an aggregate (setting one up would cost each renewal
    -- more than the rest of this look): the one record, of this cluster and timeline, nothing
    -- pending.  Then nothing below applies.  Anything else takes the full look.
    IF NOT p_fork_ack
       AND ARRAY(SELECT s.system_identifier = v_sys AND s.timeline = v_tli
                        AND s.fork_pending IS NULL AND s.upgrade_origin_system IS NULL
                   FROM cosid.store_state s LIMIT 2) = ARRAY[true] THEN
        RETURN;
    END IF;
    SELECT count(*), coalesce(bool_and(s.system_identifier = v_sys AND s.timeline = v_tli
                                       AND s.fork_pending IS NULL AND s.upgrade_origin_system IS NULL), false)
      INTO v_count, v_here FROM cosid.store_state s;
    IF NOT (v_count = 1 AND v_here) OR p_fork_ack THEN
        -- Conflicts with itself and with every writer of the table, not with readers.
        LOCK TABLE cosid.store_state IN SHARE ROW EXCLUSIVE MODE;
        SELECT count(*), coalesce(bool_and(s.system_identifier = v_sys AND s.timeline = v_tli
                                           AND s.fork_pending IS NULL), false)
          INTO v_count, v_here FROM cosid.store_state s;
        IF v_count = 1 AND v_here THEN
            -- pg_upgrade read this server (the note of its cluster and timeline) and the server
            -- went on here: an upgrade given up, a rollback to the old cluster.  The note was for
            -- a new cluster that never took over; the store's history goes on here.
            UPDATE cosid.store_state SET upgrade_origin_system = NULL, upgrade_origin_timeline = NULL,
                                         upgrade_read_id = NULL
             WHERE upgrade_origin_system IS NOT NULL;
        END IF;
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
    -- A fork (src/core/fork_rule.hpp): this store is a copy of one whose own server issues
    -- ids from it (issuer_incarnation), and the copy runs elsewhere: a promoted standby or a recovered backup (a new
    -- timeline of the same cluster), a dump restored (the origin's record beside this one's),
    -- or a copy declared by its keeper (fork_pending: the data directory pg_upgrade copied,
    -- a file-level copy marked with cosid.fork).  The origin may go on issuing from its own
    -- copy on any slot, so no raise here can keep above it: nothing is granted until an
    -- administrator says it stopped (cosid_fork_acknowledge), which raises from that time.
    -- A new cluster with one record is pg_upgrade's new cluster, and pg_upgrade ran on a
    -- cleanly stopped origin: its old data directory carries the mark instead.
    IF NOT (v_count = 1 AND v_here) AND NOT p_fork_ack THEN
        v_fork := cosid._fork_reason();
        IF v_fork IS NOT NULL THEN
            RAISE EXCEPTION 'cosid lease store is a copy of a server that may still issue ids: it grants no window until that server is known to have stopped'
                USING ERRCODE = 'ZC009',
                      DETAIL = v_fork || '  Windows granted here could repeat ids the other copy issues on the same slots.',
                      HINT = 'Stop the other copy (or make sure it has stopped, e.g. fenced by your HA manager), then run '
                             'SELECT cosid_fork_acknowledge(); on this server (superuser or cosid_admin).';
        END IF;
    END IF;
    IF NOT (v_count = 1 AND v_here) OR p_fork_ack THEN
        -- The raise covers the longest lease and the largest tolerance any of the store's
        -- histories allowed.
        -- With several rows, the newest is the one CREATE EXTENSION wrote while restoring,
        -- with default limits: the origin's rows say what it granted.
        SELECT coalesce(bool_or(s.raise_floors_on_new_timeline), true) AS raise_flag,
               coalesce(max(s.max_ttl_ms), 60000) AS max_ttl_ms,
               coalesce(max(s.max_tolerance_ms), 5000) AS max_tolerance_ms,
               coalesce(max(s.failovers), 0) AS failovers, coalesce(max(s.raised_at_ms), 0) AS raised_at_ms,
               max(s.raised_reach_ms) AS raised_reach_ms,
               coalesce(max(s.timeline), 0) AS timeline,
               -- the server issuing from this store, kept across a raise (the same server
               -- goes on); an acknowledged fork starts without one
               CASE WHEN p_fork_ack THEN NULL ELSE min(s.issuer_incarnation::text)::uuid END AS issuer
          INTO m
          FROM (SELECT s.*, row_number() OVER (ORDER BY s.created_at DESC, s.store_id) AS newest
                  FROM cosid.store_state s) s
         WHERE v_count = 1 OR s.newest > 1;
        -- An acknowledged fork always raises: its origin issued after the copy was made.
        -- A new timeline that began at a clean stop, or pg_upgrade's new cluster (whose old
        -- cluster stopped cleanly), still raises: this server cannot see whether another
        -- branch went on from that stop (a sibling standby promoted, the old primary started
        -- again) or whether the old cluster had itself lost a tail before it.
        -- Except pg_upgrade's new cluster, when pg_upgrade read the old one on the timeline its
        -- store last wrote on: nothing was lost since (pg_upgrade stops it cleanly), and the
        -- new cluster (timeline 1, its cosid.upgraded file) goes on from that history alone.
        -- Not when the old cluster had moved on to a timeline its store had not followed (a
        -- standby promoted and stopped before any store call: it may have lost a tail).
        -- The note must be of the run that made this cluster (the same read id in its
        -- cosid.upgraded file): a note of a run that failed, carried to a standby that then
        -- lost its primary's tail and was upgraded without cosid loaded, is not.
        SELECT s.system_identifier AS sys, s.timeline AS tli, s.upgrade_origin_system AS origin_sys,
               s.upgrade_origin_timeline AS origin_tli, s.upgrade_read_id AS read_id INTO v_from
          FROM cosid.store_state s
         WHERE v_count = 1;
        -- (a read id of this data directory's cosid.upgraded file: the file names this cluster)
        v_read_here := cosid._upgrade_read_here();
        v_upgraded := coalesce(v_count = 1 AND NOT p_fork_ack AND v_tli = 1 AND v_from.sys NOT IN (0, v_sys)
                               AND v_from.origin_sys = v_from.sys AND v_from.origin_tli = v_from.tli
                               AND v_from.read_id = v_read_here, false);
        v_raise := v_count <> 1 OR (m.raise_flag AND NOT v_upgraded) OR p_fork_ack;
        IF v_raise THEN
            -- Waits for every transaction still writing lease rows, and holds off new ones
            -- until this one commits (readers go on): a row inserted meanwhile (pg_restore -j
            -- loads the lease table while the store's record, loaded already, makes a
            -- keeper's call raise) would be invisible to the UPDATE below, and its BEFORE
            -- INSERT trigger (cosid._lease_arrives_raised) would not see this raise yet.
            LOCK TABLE cosid.lease IN SHARE ROW EXCLUSIVE MODE;
        END IF;
        v_now := cosid.store_now();  -- after the wait
        -- An acknowledged fork raises from the time its origin stopped, when the
        -- administrator knows it, and never from later than now.
        v_base := CASE WHEN p_fork_ack AND p_stopped_ms IS NOT NULL THEN least(p_stopped_ms, v_now) ELSE v_now END;
        IF p_fork_ack AND v_base < v_now THEN
            -- Never before what this copy knows its original did: its latest grant (a lease's
            -- expires_at less the longest lease) and its latest static ceiling's write.
            v_base := greatest(v_base,
                               (SELECT max(l.expires_at) - m.max_ttl_ms FROM cosid.lease l),
                               (SELECT (extract(epoch FROM max(c.written_at)) * 1000)::bigint
                                  FROM cosid.static_ceiling c WHERE c.system_identifier <> 0));
            v_base := least(v_base, v_now);
        END IF;
        -- How far the windows granted in the history this store lost reach past its clock: what
        -- its limits show after a failover to a standby (a limit is raised only once the
        -- standbys replayed it: docs/failover.md), and the reach cap after history it cannot
        -- see at all (src/core/reach.hpp, unseen_history_reach_ms): an acknowledged fork's
        -- original and a restored dump's origin may have raised their limits after the copy
        -- was made, and no limit reaches past the cap (cosid_store_settings).
        v_reach := m.max_ttl_ms + 2 * m.max_tolerance_ms;
        IF p_fork_ack OR v_count <> 1 THEN
            v_reach := greatest(cosid._unseen_reach_cap_ms(), v_reach);
        END IF;
        IF v_raise THEN
            UPDATE cosid.lease l
               SET next_floor = greatest(l.next_floor, l.ceiling, v_base + v_reach),
                   previous_owner_key = coalesce(l.owner_key, l.previous_owner_key),
                   owner_key = NULL, incarnation = NULL, owner_role = NULL,
                   -- far above any fence the lost tail can have used: a renewal or release from
                   -- it never matches a lease granted on this timeline
                   fence = l.fence + 4294967296;
            GET DIAGNOSTICS v_rows = ROW_COUNT;
        END IF;
        IF v_upgraded AND m.issuer IS NOT NULL THEN
            -- The old server's own leases (a clean stop released them, unless its store was
            -- unreachable then): it is gone, its windows end where they ended.
            UPDATE cosid.lease l
               SET next_floor = greatest(l.next_floor, l.ceiling), previous_owner_key = l.owner_key,
                   owner_key = NULL, incarnation = NULL, owner_role = NULL, fence = l.fence + 1
             WHERE l.incarnation = m.issuer;
            GET DIAGNOSTICS v_rows = ROW_COUNT;
        END IF;
        IF p_fork_ack THEN
            -- Static slots: the original's windows reached cosid.static_ahead (at most
            -- src/core/reach.hpp's kStaticAheadCapMs, whatever it set after the copy) past its
            -- clock, within 2 x max_tolerance of this one: within the reach cap.  Every namespace
            -- static here, or static on the original (its rows in cosid.static_ceiling), starts
            -- its next static window above that, as cosid_adopt's floor does (slot -1; cluster 0:
            -- the original, whatever it was).  Rows written further ahead (a tolerance above
            -- the cap's, from before it) count as they show.
            INSERT INTO cosid.static_ceiling AS c (namespace, slot, system_identifier, ceiling_ms)
            SELECT n.name, -1, 0,
                   v_base + greatest(cosid._unseen_reach_cap_ms(),
                                     -- (a tolerance above its cap, from before it: the longest
                                     -- static_ahead past it; with a test's lower cap, this
                                     -- server's own static_ahead as before)
                                     CASE WHEN cosid._unseen_reach_cap_ms() = cosid._reach_cap_ms()
                                          THEN cosid._static_ahead_cap_ms()
                                          ELSE coalesce(floor(extract(epoch FROM pg_catalog.current_setting(
                                                   'cosid.static_ahead', true)::interval) * 1000)::bigint, 10000) END
                                     + 2 * m.max_tolerance_ms,
                                     (SELECT max(sc.ceiling_ms - (extract(epoch FROM sc.written_at) * 1000)::bigint)
                                        FROM cosid.static_ceiling sc WHERE sc.system_identifier <> 0 AND sc.slot >= 0)
                                     + 2 * m.max_tolerance_ms)
              FROM cosid.namespace n
             WHERE cosid._static_slot(n.name) IS NOT NULL
                OR EXISTS (SELECT 1 FROM cosid.static_ceiling sc WHERE sc.namespace = n.name AND sc.system_identifier <> 0)
            ON CONFLICT (namespace, slot, system_identifier) DO UPDATE SET ceiling_ms = greatest(c.ceiling_ms, EXCLUDED.ceiling_ms);
        END IF;
        DELETE FROM cosid.store_state;
        INSERT INTO cosid.store_state (system_identifier, timeline, raise_floors_on_new_timeline, max_ttl_ms,
                                       max_tolerance_ms, failovers, last_failover_at, raised_at_ms, issuer_incarnation,
                                       raised_reach_ms)
        VALUES (v_sys, v_tli, m.raise_flag, m.max_ttl_ms, m.max_tolerance_ms, m.failovers + 1, clock_timestamp(),
                CASE WHEN v_raise THEN greatest(v_base, m.raised_at_ms) ELSE m.raised_at_ms END,
                CASE WHEN v_count = 1 THEN m.issuer END,
                -- (as far as this raise, or the last one if that reached further)
                CASE WHEN v_raise
                     THEN greatest(v_base + v_reach,
                                   CASE WHEN m.raised_at_ms > 0
                                        THEN m.raised_at_ms + coalesce(m.raised_reach_ms, m.max_ttl_ms + 2 * m.max_tolerance_ms)
                                        ELSE 0 END) - greatest(v_base, m.raised_at_ms)
                     ELSE m.raised_reach_ms END);
        RAISE LOG 'cosid store: %: %',
            CASE WHEN p_fork_ack THEN 'a fork acknowledged: its origin stopped issuing'
                 WHEN v_upgraded THEN format('pg_upgrade''s new cluster %s (pg_upgrade read cluster %s on timeline %s, '
                                             'the timeline its store last wrote on: nothing lost)', v_sys, v_from.sys,
                                             v_from.tli)
                 WHEN v_count = 1 AND v_tli = 1 AND v_from.sys NOT IN (0, v_sys) AND cosid._upgraded_here()
                   THEN format('pg_upgrade''s new cluster %s, but its store last wrote on timeline %s of cluster %s '
                               'while pg_upgrade read %s',
                               v_sys, v_from.tli, v_from.sys,
                               CASE WHEN v_from.read_id IS NULL OR v_from.read_id IS DISTINCT FROM v_read_here
                                    THEN 'it with no note of its own (cosid not loaded in the old cluster, or a note of '
                                         'another run): a tail may be lost'
                                    ELSE format('timeline %s of cluster %s (a promoted standby, a recovered backup: a '
                                                'tail may be lost)', v_from.origin_tli, v_from.origin_sys) END)
                 WHEN v_count > 1 THEN format('restored from a dump (%s records of its state)', v_count)
                 WHEN v_count = 0 THEN 'its state was missing'
                 ELSE format('now writing on timeline %s of cluster %s (last write on timeline %s)', v_tli, v_sys,
                             m.timeline) END,
            CASE WHEN v_raise
                 THEN format('%s slots freed, their next_floor raised to at least %s + %s ms (%s)',
                             v_rows, CASE WHEN v_base < v_now THEN format('now - %s ms', v_now - v_base) ELSE 'now' END,
                             v_reach, CASE WHEN p_fork_ack OR v_count <> 1
                                           THEN 'the reach cap: limits set after the copy are unseen here'
                                           ELSE format('max_ttl %s ms + 2 x max_tolerance %s ms', m.max_ttl_ms,
                                                       m.max_tolerance_ms) END)
                 WHEN v_upgraded THEN format('floors left alone, %s leases of the old server freed', v_rows)
                 ELSE 'floors left alone (raise_floors_on_new_timeline is off)' END;
    END IF;
END $$;
REVOKE ALL ON FUNCTION cosid._follow_timeline(bigint, boolean, bigint) FROM PUBLIC;

-- An administrator's word that the other copy of a forked store's server has stopped issuing
-- (fenced, shut down, its data directory gone): every slot is freed and its next floor raised
-- above anything that copy could have issued, from stopped_at (default: now) + the reach cap
-- (its limits after the copy are unseen here), and the store grants again.  Nothing to
-- acknowledge: says so, changes nothing.
CREATE OR REPLACE FUNCTION cosid_fork_acknowledge(stopped_at timestamptz DEFAULT NULL) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_reason text;
    v_ms bigint := floor(extract(epoch FROM stopped_at) * 1000)::bigint;
    v_now bigint := cosid.store_now();
BEGIN
    IF pg_catalog.pg_is_in_recovery() THEN
        -- Patroni runs its on_role_change callback as soon as it asks for the promotion.
        RAISE EXCEPTION 'cosid_fork_acknowledge: this server is still in recovery'
            USING ERRCODE = 'read_only_sql_transaction',
                  DETAIL = 'A standby''s store changes only with its primary''s; a promotion in progress ends in a moment.',
                  HINT = 'Run it once SELECT pg_is_in_recovery() returns false (the documented callback waits for that).';
    END IF;
    IF v_ms IS NOT NULL AND v_ms > v_now THEN
        RAISE EXCEPTION 'cosid_fork_acknowledge: stopped_at is in the future'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('stopped_at %s; the store''s clock reads %s.', stopped_at,
                                  pg_catalog.to_timestamp(v_now / 1000.0)),
                  HINT = 'Give the time the other copy stopped issuing, or leave it out (now).';
    END IF;
    -- What the data directory shows (a promotion, a cosid.fork file) is declared by the
    -- keeper once it finds the store ready: after that, or this would not cover it.
    PERFORM cosid._fork_declared_here();
    LOCK TABLE cosid.store_state IN SHARE ROW EXCLUSIVE MODE;
    v_reason := cosid._fork_reason();
    IF v_reason IS NULL THEN
        RETURN 'no fork to acknowledge: the store grants as usual';
    END IF;
    PERFORM cosid._follow_timeline(NULL, true, v_ms);
    -- Every fork a data directory declared here is acknowledged with it (cosid._fork_check
    -- does not declare them again).
    UPDATE cosid.fork_declared SET acknowledged_at = pg_catalog.clock_timestamp() WHERE acknowledged_at IS NULL;
    RETURN format('fork acknowledged (%s): every slot freed, next floors at least %s + %s s (the reach cap)',
                  rtrim(v_reason, '.'), coalesce(stopped_at::text, 'now'), cosid._unseen_reach_cap_ms() / 1000.0);
END $$;
REVOKE ALL ON FUNCTION cosid_fork_acknowledge(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_fork_acknowledge(timestamptz) TO cosid_admin;
COMMENT ON FUNCTION cosid_fork_acknowledge(timestamptz) IS 'the other copy of this forked store''s server has stopped issuing: raise the floors from stopped_at and grant again (superuser or cosid_admin)';

-- >>> forks of the data directory
-- A fork belongs to the data directory (src/pg/fork.cpp): its keeper keeps every fork it saw
-- in cosid.history (a cosid.fork file, a new timeline, pg_upgrade's old cluster, restored =>
-- true) and declares each to whatever local store it uses, before every acquire and static
-- window.  This table is what a store was told, and what was acknowledged here: a fork
-- acknowledged in this store is not declared again; one this store never heard of (a copy
-- that switched cosid.database to it) stops it until cosid_fork_acknowledge() here.
CREATE TABLE cosid.fork_declared (
    fork_id         text PRIMARY KEY,
    reason          text NOT NULL,
    declared_at     timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    acknowledged_at timestamptz
);
REVOKE ALL ON cosid.fork_declared FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('cosid.fork_declared', '');

CREATE FUNCTION cosid._fork_lines(p_forks text, OUT fork_id text, OUT reason text) RETURNS SETOF record
LANGUAGE sql IMMUTABLE AS $$
    SELECT pg_catalog.split_part(l, E'\t', 1), pg_catalog.substr(l, pg_catalog.strpos(l, E'\t') + 1)
      FROM pg_catalog.regexp_split_to_table(p_forks, E'\n') l
     WHERE pg_catalog.strpos(l, E'\t') > 1
$$;
REVOKE ALL ON FUNCTION cosid._fork_lines(text) FROM PUBLIC;

-- p_forks: one "id<TAB>reason" line per fork the data directory keeps.  Returns the reason of
-- the first one not acknowledged here (after marking the store a fork: it grants nothing), or
-- NULL.
CREATE FUNCTION cosid._fork_check(p_forks text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_reason text;
BEGIN
    SELECT f.reason INTO v_reason
      FROM cosid._fork_lines(p_forks) f LEFT JOIN cosid.fork_declared d ON d.fork_id = f.fork_id
     WHERE d.acknowledged_at IS NULL
     ORDER BY d.declared_at NULLS LAST, f.fork_id LIMIT 1;
    IF v_reason IS NOT NULL THEN
        -- An acknowledgment in flight (SHARE ROW EXCLUSIVE on the table, till it commits)
        -- is waited for and then seen: read before it committed, the fork would be marked
        -- again on the state it writes, and the store refuse once more.
        LOCK TABLE cosid.store_state IN ROW EXCLUSIVE MODE;
        SELECT f.reason INTO v_reason
          FROM cosid._fork_lines(p_forks) f LEFT JOIN cosid.fork_declared d ON d.fork_id = f.fork_id
         WHERE d.acknowledged_at IS NULL
         ORDER BY d.declared_at NULLS LAST, f.fork_id LIMIT 1;
    END IF;
    IF v_reason IS NOT NULL THEN
        INSERT INTO cosid.fork_declared (fork_id, reason)
        SELECT f.fork_id, f.reason FROM cosid._fork_lines(p_forks) f
        ON CONFLICT (fork_id) DO NOTHING;
        PERFORM cosid._fork_mark(v_reason);
    END IF;
    RETURN v_reason;
END $$;
REVOKE ALL ON FUNCTION cosid._fork_check(text) FROM PUBLIC;

-- restored => true on a copy of an issuing server's data directory: the declaration belongs
-- to the data directory (a cosid.fork file, cosid._fork_file), so that a copy that switches
-- cosid.database is refused by that store too.  Returns the fork's id (the one the keeper
-- gives the file), NULL when a file was there already.
CREATE FUNCTION cosid._fork_file(p_reason text) RETURNS text
AS 'MODULE_PATHNAME', 'cosid_fork_file' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION cosid._fork_file(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION cosid_store_follow_timeline(restored boolean DEFAULT false) RETURNS int
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_id text;
BEGIN
    IF restored AND (SELECT bool_or(s.issuer_incarnation IS NOT NULL) FROM cosid.store_state s) THEN
        -- A copy of a server that was issuing from this store: its origin may go on, on any
        -- slot, and no raise keeps above that.  A fork until cosid_fork_acknowledge(), in this
        -- store and in every other store of this data directory (cosid._fork_file).
        PERFORM cosid._fork_mark('Declared a copy of its data directory (cosid_store_follow_timeline(restored => true)) '
                                 'while the store''s server was issuing ids from it.');
        -- The data directory's own store (this server issues from it, cosid.database here, no
        -- remote store, not store-only): the declaration is the data directory's, kept by its
        -- keeper for every database it may use.  Its fork is declared here at once, with the
        -- id the keeper gives the file, so that the acknowledgment here covers it.  Another
        -- database (a dump of another server's store restored beside this one's) declares
        -- only itself: its server may be the store of a fleet, and stops nothing else.
        IF pg_catalog.current_setting('cosid.database', true) = pg_catalog.current_database()
           AND coalesce(pg_catalog.current_setting('cosid.store_dsn', true), '') = ''
           AND coalesce(pg_catalog.current_setting('cosid.store_only', true), 'off') = 'off' THEN
            v_id := cosid._fork_file('Declared a copy of its data directory (cosid_store_follow_timeline(restored => true) '
                                     'in database ' || pg_catalog.quote_ident(pg_catalog.current_database()) || ').');
            IF v_id IS NOT NULL THEN
                INSERT INTO cosid.fork_declared (fork_id, reason)
                SELECT v_id, s.fork_pending FROM cosid.store_state s WHERE s.fork_pending IS NOT NULL
                ON CONFLICT (fork_id) DO NOTHING;
            END IF;
        END IF;
        RAISE NOTICE 'the store grants nothing until cosid_fork_acknowledge() runs: its server was issuing ids from it'
            USING HINT = 'Once the original server is stopped for good, SELECT cosid_fork_acknowledge(); here raises the floors and grants again.';
        RETURN (SELECT max(failovers) FROM cosid.store_state);
    ELSIF restored THEN
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


-- >>> tenants of a shared store

-- A shared store serves many servers, each through a store role of its own
-- (docs/stores.md): nothing one role can take may stop another's leases.
--  * The lock that keeps a namespace's slot range from changing under an acquire in flight is
--    a row lock on the namespace's row, taken inside the store's SECURITY DEFINER functions:
--    locking a row needs UPDATE on its table, which no role but the extension's owner has.
--    The advisory key used before (1.5 and 1.6) could be taken by any login
--    (pg_advisory_lock) and held, which stopped every new window of the namespace.
--  * An acquire passes over a lease row another transaction holds locked rather than wait
--    for it (see cosid.acquire).
--  * A store role holds at most a cap of live leases of a namespace (cosid.lease_cap,
--    cosid_lease_cap()); the store's own server's keeper (a superuser, through SPI) and the
--    administrators are not capped.  An administrator revokes every lease of a role at once
--    (cosid_revoke_role).
-- What any login may still lock: ACCESS SHARE on the tables PUBLIC reads (a SELECT in an open
-- transaction).  That conflicts only with ACCESS EXCLUSIVE, which no call of a keeper, nor
-- cosid_store_settings (EXCLUSIVE since 1.7), takes.

-- Caps on the live leases one store role holds in a namespace: a row per role, and the row
-- '' (no role has an empty name) for every role without a row of its own.  No row at all: the
-- default, half the slots the store grants in the namespace (its slot range, or all of its
-- slots), at least 2.  A server holds one lease per namespace it issues in (two for a moment:
-- a crash restart meets its old incarnation's lease still live), so a role of its own meets
-- the default only in a namespace of a few slots, and then for a moment (the keeper retries);
-- a role shared by a fleet (one login through PgBouncer) keeps up to half a namespace, which
-- a namespace sized for its fleet (docs/capacity.md) does not reach.
CREATE TABLE cosid.lease_cap (
    role_name  name PRIMARY KEY,
    max_leases int NOT NULL CHECK (max_leases >= 0)
);
REVOKE ALL ON cosid.lease_cap FROM PUBLIC;
GRANT SELECT ON cosid.lease_cap TO PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('cosid.lease_cap', '');
-- Rows logical replication brings are skipped; a TRUNCATE it brings is refused (as for the
-- store's other tables: another store's caps are not this one's).
CREATE TRIGGER keep_local BEFORE INSERT OR UPDATE OR DELETE ON cosid.lease_cap
    FOR EACH ROW EXECUTE FUNCTION cosid._keep_local();
ALTER TABLE cosid.lease_cap ENABLE REPLICA TRIGGER keep_local;
CREATE TRIGGER keep_local_truncate BEFORE TRUNCATE ON cosid.lease_cap
    FOR EACH STATEMENT EXECUTE FUNCTION cosid._keep_local();
ALTER TABLE cosid.lease_cap ENABLE REPLICA TRIGGER keep_local_truncate;

-- The cap's count reads only the calling role's live leases of the namespace.
CREATE INDEX lease_owner_role ON cosid.lease (namespace, owner_role) WHERE incarnation IS NOT NULL;

-- The free slots of each namespace, in slot order: cosid.acquire finds the lowest free slot
-- here, reading neither the held rows nor their heap pages.  A renewal changes no column of
-- it (incarnation stays set), so renewals stay heap-only updates.
CREATE INDEX lease_free ON cosid.lease (namespace, slot) WHERE incarnation IS NULL;

-- Refuses an acquire of a store role that holds its cap of live leases of the namespace
-- already.  Two acquires of one role that run at once may both pass: a role goes past its cap
-- by at most its sessions less one (ALTER ROLE ... CONNECTION LIMIT bounds them).  SQLSTATE
-- 53400, a class the keeper retries (src/core/store_errors.cpp): a server's own lease that
-- expires or goes back makes room, and its callers see the message if none does.  Called by
-- cosid.acquire for the roles that are capped (not superusers nor cosid_admin).
CREATE FUNCTION cosid._lease_cap_check(p_ns cosid.namespace, p_now bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_slots int := coalesce(upper(p_ns.slot_range) - lower(p_ns.slot_range), 1 << p_ns.slot_bits);
    v_cap   int;
    v_from  text;
    v_held  int;
BEGIN
    SELECT c.max_leases,
           CASE WHEN c.role_name = '' THEN 'the store''s cap for every role (cosid_lease_cap)'
                ELSE pg_catalog.format('the cap of role %I (cosid_lease_cap)', c.role_name) END
      INTO v_cap, v_from
      FROM cosid.lease_cap c WHERE c.role_name IN (session_user, '') ORDER BY c.role_name DESC LIMIT 1;
    IF NOT FOUND THEN
        v_cap := greatest(2, v_slots / 2);
        v_from := 'the default: half the slots the store grants in the namespace, at least 2';
    END IF;
    IF v_cap >= v_slots THEN
        RETURN;
    END IF;
    SELECT count(*) INTO v_held
      FROM (SELECT 1 FROM cosid.lease l
             WHERE l.namespace = p_ns.name AND l.owner_role = session_user
               AND l.incarnation IS NOT NULL AND l.expires_at > p_now
             LIMIT v_cap) x;
    IF v_held >= v_cap THEN
        RAISE EXCEPTION 'cosid store role "%" holds its cap of live leases of namespace "%" already', session_user, p_ns.name
            USING ERRCODE = 'configuration_limit_exceeded',
                  DETAIL = pg_catalog.format('It holds %s live leases of the namespace, and a store role holds at most %s '
                                             '(%s); a server holds one lease per namespace it issues in. No slot was taken.',
                                             CASE WHEN v_held > 0 THEN 'at least ' || v_held ELSE '0' END, v_cap, v_from),
                  HINT = pg_catalog.format('Give each server its own store role. If role %I serves several servers on '
                                           'purpose, an administrator of the store raises its cap: SELECT * FROM '
                                           'cosid_lease_cap(%s, role => %L);', session_user, least(v_slots, v_cap * 2), session_user);
    END IF;
END $$;
REVOKE ALL ON FUNCTION cosid._lease_cap_check(cosid.namespace, bigint) FROM PUBLIC;

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
    v_missed boolean := false;
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
    PERFORM cosid._follow_timeline(p_ttl_ms);
    SELECT g.ttl_ms INTO p_ttl_ms FROM cosid._grant_limits(p_ttl_ms) g;
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
    IF NOT cosid._is_admin() THEN
        PERFORM cosid._lease_cap_check(v_ns, v_now);
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
    -- Preference: (1) preferred, (2) sticky: last owned by the same key, (3) lowest free,
    -- then lowest expired; each first among slots whose next window can start now (next_floor
    -- <= now: not one released at a ceiling still ahead, where the holder would wait for its
    -- clock to pass the floor), then (4) the lowest free and the lowest expired of any, then
    -- (5) an expired lease of the asking incarnation (the last condition, v_pref 7).  Each
    -- preference is read in slot order, 16 candidates at a time (an index scan, whatever the
    -- number of slots), until a slot is won; a slot lost to a racing acquirer just moves on
    -- to the next.  A slot that fits two preferences comes
    -- twice; the second try matches no row.
    -- "Can start now" also asks cosid.static_ceiling: a slot static here before (see the
    -- UPDATE below) has its last window's ceiling there, up to cosid.static_ahead ahead.
    v_now_ok := ' AND l.next_floor <= $4 AND NOT EXISTS (SELECT 1 FROM cosid.static_ceiling sc'
                || ' WHERE sc.namespace = l.namespace AND sc.slot IN (l.slot, -1) AND sc.ceiling_ms > $4)';
    -- Free slots come before expired leases (3 and 4 each in two steps, as in
    -- src/core/lease_model.cpp slot_preference): a free slot is found through the index of
    -- free slots (cosid.lease_free) without reading the held ones, so an acquire costs the
    -- same at every fill while free slots remain; and an expired lease's owner may still renew
    -- it, which it can only while nobody took it over.
    FOREACH v_cond IN ARRAY ARRAY[
        'l.slot = $3 AND (l.incarnation IS NULL OR (l.expires_at <= $4 AND l.incarnation <> $6))' || v_now_ok,
        'coalesce(l.owner_key, l.previous_owner_key) = $2'
            || ' AND (l.incarnation IS NULL OR (l.expires_at <= $4 AND l.incarnation <> $6))' || v_now_ok,
        'l.incarnation IS NULL' || v_now_ok,
        'l.expires_at <= $4 AND l.incarnation <> $6' || v_now_ok,
        'l.incarnation IS NULL',
        'l.expires_at <= $4 AND l.incarnation <> $6',
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
                       ceiling     = cosid._window_ceiling(greatest(l.next_floor, v_ns.not_before_ms, v_static),
                                                           greatest(l.next_floor, v_ns.not_before_ms, v_static),
                                                           p_ttl_ms, v_ns.tolerance_ms, v_now),
                       next_floor  = cosid._window_ceiling(greatest(l.next_floor, v_ns.not_before_ms, v_static),
                                                           greatest(l.next_floor, v_ns.not_before_ms, v_static),
                                                           p_ttl_ms, v_ns.tolerance_ms, v_now)
                 -- A row another transaction holds locked is passed over (SKIP LOCKED), not
                 -- waited for: a racing acquirer takes it anyway, and a keeper role that holds
                 -- its own acquire's or renewal's transaction open (a statement that sleeps
                 -- after the call) would otherwise stop every acquire that reaches that slot
                 -- until the callers' lock timeouts.  The conditions below are checked again on
                 -- the row as the lock found it.
                 WHERE l.namespace = p_namespace
                   AND l.slot = (SELECT k.slot FROM cosid.lease k
                                  WHERE k.namespace = p_namespace AND k.slot = c.slot
                                    AND (k.incarnation IS NULL
                                         OR (k.expires_at <= v_now AND (k.incarnation <> p_incarnation OR v_pref = 7)))
                                    FOR NO KEY UPDATE SKIP LOCKED)
                   AND l.slot < (1 << v_ns.slot_bits)
                   AND (v_ns.slot_range IS NULL OR l.slot <@ v_ns.slot_range)
                   AND (l.incarnation IS NULL
                        OR (l.expires_at <= v_now AND (l.incarnation <> p_incarnation OR v_pref = 7)))
                RETURNING l.* INTO r;
                IF FOUND THEN
                    RETURN QUERY SELECT r.slot, r.fence, r.expires_at, r.floor, r.ceiling, r.next_floor,
                                        v_now, v_dup, NULL::bigint;
                    RETURN;
                END IF;
                v_missed := true;  -- taken meanwhile, or passed over: its locker may roll back
            END LOOP;
            EXIT WHEN v_batch < 16;
        END LOOP;
    END LOOP;
    -- Exhausted: no slot, and the earliest expiry to wait for: at most 100 ms from now when
    -- a candidate was missed (the keeper tries again then: src/pg/keeper_request.cpp).
    RETURN QUERY SELECT NULL::int, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
                        NULL::bigint, v_now, v_dup,
                        (SELECT CASE WHEN v_missed THEN least(min(l.expires_at), v_now + 100) ELSE min(l.expires_at) END
                           FROM cosid.lease l
                          WHERE l.namespace = p_namespace AND l.incarnation IS NOT NULL
                            AND l.expires_at > v_now
                            AND (v_ns.slot_range IS NULL OR l.slot <@ v_ns.slot_range));
END $$;



-- As before (1.5), but the lock that waits for acquires in flight is FOR UPDATE on the
-- namespace's row, which conflicts with the FOR KEY SHARE each acquire holds on it, and with
-- nothing a role without UPDATE on the table can hold.
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


-- An administrator's caps (superuser or cosid_admin): cosid_lease_cap(n) caps every store role
-- at n live leases per namespace, cosid_lease_cap(n, role => 'r') one role (its own cap, above
-- or below every role's); NULL removes the cap set (back to every role's cap, or to the
-- default).  A cap at or above a namespace's slots leaves the role uncapped there, and is not
-- counted.  Returns the caps set.
CREATE FUNCTION cosid_lease_cap(max_leases int, role name DEFAULT NULL)
RETURNS SETOF cosid.lease_cap
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
BEGIN
    IF max_leases < 0 THEN
        RAISE EXCEPTION 'cosid lease cap must be 0 or more, got %', max_leases
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'It is the number of live leases a store role may hold in one namespace.',
                  HINT = 'NULL removes the cap set; a cap of a namespace''s slots or more leaves the role uncapped there.';
    END IF;
    IF role IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = role) THEN
        RAISE EXCEPTION 'role "%" does not exist', role
            USING ERRCODE = 'undefined_object',
                  HINT = 'Name the store role a server''s keeper logs in as (the user of its cosid.store_dsn), or leave role out to cap every role.';
    END IF;
    IF max_leases IS NULL THEN
        DELETE FROM cosid.lease_cap c WHERE c.role_name = coalesce(role, '');
    ELSE
        INSERT INTO cosid.lease_cap AS c (role_name, max_leases) VALUES (coalesce(role, ''), max_leases)
        ON CONFLICT (role_name) DO UPDATE SET max_leases = EXCLUDED.max_leases;
    END IF;
    RAISE LOG 'cosid lease cap of %: % (set by %)', coalesce(pg_catalog.quote_ident(role), 'every store role'),
        coalesce(max_leases::text, 'removed'), session_user;
    RETURN QUERY SELECT c.* FROM cosid.lease_cap c ORDER BY c.role_name;
END $$;
REVOKE ALL ON FUNCTION cosid_lease_cap(int, name) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_lease_cap(int, name) TO cosid_admin;
COMMENT ON FUNCTION cosid_lease_cap(int, name) IS 'caps the live leases a store role holds per namespace: every role''s, or one role''s (superuser or cosid_admin)';

-- Revokes every lease a store role holds (of one namespace, or of all), as cosid.revoke does
-- one: the slot is freed with its next floor at least the window's ceiling and its fence
-- moved on, so the role's renewals and releases find it gone and the next holder starts
-- above anything the role could still issue.  The rows are locked first: a slot freed and
-- taken by another role meanwhile is not revoked.  Returns how many were revoked.
CREATE FUNCTION cosid_revoke_role(role name, namespace text DEFAULT NULL) RETURNS int
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    r      record;
    v_done int := 0;
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'cosid_revoke_role: role must not be NULL'
            USING ERRCODE = 'null_value_not_allowed',
                  DETAIL = 'It revokes the leases of the store role named.',
                  HINT = 'SELECT cosid_revoke_role(''keeper_a'') revokes every lease of role keeper_a.';
    END IF;
    IF namespace IS NOT NULL THEN
        PERFORM cosid._namespace_row(namespace);
    END IF;
    FOR r IN SELECT l.namespace, l.slot FROM cosid.lease l
              WHERE l.owner_role = role AND l.incarnation IS NOT NULL
                AND (namespace IS NULL OR l.namespace = namespace)
              ORDER BY l.namespace, l.slot FOR UPDATE
    LOOP
        PERFORM cosid.revoke(r.namespace, r.slot);
        v_done := v_done + 1;
    END LOOP;
    RAISE LOG 'cosid: % leases of store role % revoked%, by %', v_done, pg_catalog.quote_ident(role),
        coalesce(pg_catalog.format(' in namespace "%s"', namespace), ''), session_user;
    RETURN v_done;
END $$;
REVOKE ALL ON FUNCTION cosid_revoke_role(name, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_revoke_role(name, text) TO cosid_admin;
COMMENT ON FUNCTION cosid_revoke_role(name, text) IS 'revokes every lease a store role holds, of one namespace or of all (superuser or cosid_admin)';


-- A renewal of a lease that expired (nobody took its slot) revives it: a capped role may not
-- go past its cap that way either.  True, or the cap's error (cosid._lease_cap_check).
CREATE FUNCTION cosid._lease_renew_revives(p_ns cosid.namespace, p_now bigint) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT cosid._is_admin() THEN
        PERFORM cosid._lease_cap_check(p_ns, p_now);
    END IF;
    RETURN true;
END $$;
REVOKE ALL ON FUNCTION cosid._lease_renew_revives(cosid.namespace, bigint) FROM PUBLIC;

-- The renewal, as in 1.6, with the cap on a revived lease.
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
     WHERE l.namespace = p_namespace AND l.slot = p_slot
       AND l.incarnation = p_incarnation AND l.fence = p_fence
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

-- >>> acquire cost
-- An acquire costs the store no more than before the window history (cosid 1.5), at every
-- fill (docs/capacity.md).  In 1.6 one took 40 to 80 ms: the history's trigger plans with
-- enable_seqscan off (so that its plans use the history's indexes however small the table was
-- when a session planned them), which prices a scan of a table without a usable index, here
-- cosid.store_state and cosid.history_settings (a row each), at 10^10: past jit_above_cost,
-- LLVM compiled those statements in every acquire (tens of milliseconds each).  The functions
-- that plan with enable_seqscan off now turn jit off too, and the purge runs for one new
-- window in 32 instead of every one.

-- Counts the windows written, for the purge: one new window in 32 purges up to 200 ended
-- windows older than the retention (a lease's window is one row, a static slot's recorded
-- ceiling one), over six times as many as age out.  A sequence: no row lock between
-- acquirers, no snapshot, a WAL record every 32 calls.
CREATE SEQUENCE cosid.window_history_purge_tick;
REVOKE ALL ON SEQUENCE cosid.window_history_purge_tick FROM PUBLIC;

-- (enable_seqscan off, see cosid--1.5--1.6.sql; jit off: see above.  Both reach the functions
-- and triggers it runs, cosid._window_history_guard on each row it deletes.)
CREATE OR REPLACE FUNCTION cosid._history_purge(p_limit int) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET enable_seqscan = off SET jit = off AS $$
DECLARE
    v_rows bigint;
    v_cut  bigint := cosid.store_now() - cosid._history_retention_ms();  -- (a constant: an index bound)
BEGIN
    DELETE FROM cosid.window_history h
     WHERE h.ctid = ANY (ARRAY(SELECT o.ctid FROM cosid.window_history o
                                WHERE o.ended_at IS NOT NULL AND o.ceiling < v_cut
                                ORDER BY o.ceiling LIMIT p_limit));
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    RETURN v_rows;
END $$;

-- As in 1.6, with jit off and the purge for one new window in 32.
CREATE OR REPLACE FUNCTION cosid._window_history_lease() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET enable_seqscan = off SET jit = off AS $$
DECLARE
    v_end  bigint;
    v_how  text;
    v_ctx  text;
    v_sys  bigint;
BEGIN
    IF OLD.incarnation IS NOT NULL THEN
        IF TG_OP = 'DELETE' THEN
            v_end := OLD.ceiling;
            v_how := 'forgotten: its lease row was deleted';
        ELSE
            v_end := least(OLD.ceiling, greatest(NEW.next_floor, OLD.floor));
            GET DIAGNOSTICS v_ctx = PG_CONTEXT;
            v_how := CASE
                WHEN NEW.incarnation IS NOT NULL THEN 'taken over: expired, a new window granted'
                WHEN NEW.fence - OLD.fence >= 4294967296 THEN 'freed by the store''s raise (a failover, a restore, a fork acknowledged)'
                WHEN strpos(v_ctx, 'cosid.release(') > 0 THEN 'released'
                WHEN strpos(v_ctx, 'cosid.revoke(') > 0 THEN 'revoked'
                ELSE 'freed by hand' END;
        END IF;
        UPDATE cosid.window_history h
           SET ceiling = v_end, ended_at = pg_catalog.clock_timestamp(),
               ended_how = v_how
         WHERE h.namespace = OLD.namespace AND h.slot = OLD.slot AND h.fence = OLD.fence AND h.floor = OLD.floor
           AND h.ended_at IS NULL;
        IF NOT FOUND THEN
            INSERT INTO cosid.window_history (namespace, slot, kind, fence, floor, ceiling, owner_key, incarnation,
                                              owner_role, ended_at, ended_how)
            VALUES (OLD.namespace, OLD.slot, 'lease', OLD.fence, OLD.floor, v_end, OLD.owner_key, OLD.incarnation,
                    OLD.owner_role, pg_catalog.clock_timestamp(), v_how);
        END IF;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.incarnation IS NOT NULL THEN
        -- this server's own keeper (cosid._issuer_start names its incarnation before each
        -- acquire, and the store's record names the cluster it writes on)
        SELECT s.system_identifier INTO v_sys FROM cosid.store_state s WHERE s.issuer_incarnation = NEW.incarnation LIMIT 1;
        INSERT INTO cosid.window_history (namespace, slot, kind, fence, floor, ceiling, owner_key, incarnation,
                                          owner_role, client_addr, system_identifier, granted_at)
        VALUES (NEW.namespace, NEW.slot, 'lease', NEW.fence, NEW.floor, NEW.ceiling, NEW.owner_key, NEW.incarnation,
                NEW.owner_role, pg_catalog.inet_client_addr(), v_sys, pg_catalog.clock_timestamp());
        IF pg_catalog.nextval('cosid.window_history_purge_tick') % 32 = 0 THEN
            PERFORM cosid._history_purge(200);
        END IF;
    END IF;
    RETURN NULL;
END $$;

-- As in 1.6, with the purge for one new window in 32.
CREATE OR REPLACE FUNCTION cosid._window_history_static() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_ahead bigint := coalesce(pg_catalog.floor(extract(epoch FROM
                                   pg_catalog.current_setting('cosid.static_ahead', true)::interval) * 1000)::bigint,
                               10000);
    v_start bigint := NEW.ceiling_ms - v_ahead;
    v_floor bigint;
BEGIN
    IF TG_OP = 'UPDATE' AND v_start <= OLD.ceiling_ms THEN
        v_floor := OLD.ceiling_ms;
    ELSE
        IF (SELECT n.unit FROM cosid.namespace n WHERE n.name = NEW.namespace) = 's' THEN
            v_start := (v_start / 1000) * 1000;
        END IF;
        v_floor := greatest(v_start - 1, CASE WHEN TG_OP = 'UPDATE' THEN OLD.ceiling_ms END, 0,
                            (SELECT r.others_ms FROM cosid._static_recorded(NEW.namespace, NEW.slot) r,
                                                     pg_catalog.pg_control_system() c
                              WHERE c.system_identifier = NEW.system_identifier));
    END IF;
    INSERT INTO cosid.window_history (namespace, slot, kind, floor, ceiling, system_identifier, granted_at, ended_at,
                                      ended_how)
    VALUES (NEW.namespace, NEW.slot, 'static', least(v_floor, NEW.ceiling_ms), NEW.ceiling_ms, NEW.system_identifier,
            pg_catalog.clock_timestamp(), pg_catalog.clock_timestamp(), 'static slot: ceiling recorded');
    IF pg_catalog.nextval('cosid.window_history_purge_tick') % 32 = 0 THEN
        PERFORM cosid._history_purge(200);
    END IF;
    RETURN NULL;
END $$;

-- As in 1.6; the retention is read only where it is needed: for a DELETE (each row a purge
-- deletes) and a TRUNCATE, not for the UPDATE that ends a window (a release, a takeover).
CREATE OR REPLACE FUNCTION cosid._window_history_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_problem text;
    v_cut bigint;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        v_problem := CASE
            WHEN (NEW.namespace, NEW.slot, NEW.kind, NEW.fence, NEW.floor, NEW.owner_key, NEW.incarnation, NEW.owner_role,
                  NEW.client_addr, NEW.system_identifier, NEW.granted_at)
                 IS DISTINCT FROM
                 (OLD.namespace, OLD.slot, OLD.kind, OLD.fence, OLD.floor, OLD.owner_key, OLD.incarnation, OLD.owner_role,
                  OLD.client_addr, OLD.system_identifier, OLD.granted_at)
                THEN 'a window keeps its slot, floor and holder'
            WHEN OLD.ended_at IS NOT NULL AND NEW IS DISTINCT FROM OLD THEN 'an ended window stays as it ended'
            WHEN NEW.ended_at IS NULL AND NEW.ceiling < OLD.ceiling THEN 'a live window''s ceiling went down'
        END;
    ELSE
        v_cut := cosid.store_now() - cosid._history_retention_ms();
        IF TG_OP = 'DELETE' THEN
            IF OLD.ended_at IS NULL OR OLD.ceiling >= v_cut THEN
                v_problem := format('the window of slot %s of namespace "%s" (%s to %s) is %s', OLD.slot, OLD.namespace,
                                    cosid._ms_text(OLD.floor), cosid._ms_text(OLD.ceiling),
                                    CASE WHEN OLD.ended_at IS NULL THEN 'live' ELSE 'within the retention' END);
            END IF;
        ELSIF EXISTS (SELECT 1 FROM cosid.window_history h WHERE h.ended_at IS NULL OR h.ceiling >= v_cut) THEN
            v_problem := 'it holds windows within the retention';
        END IF;
    END IF;
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'cosid: cannot % cosid.window_history: %', lower(TG_OP), v_problem
            USING ERRCODE = 'integrity_constraint_violation',
                  DETAIL = 'The history of the windows the store granted is what cosid_verify() and cosid_issuer() read.',
                  HINT = 'Rows older than the retention go by themselves; shorten it with cosid_history_settings(retention => ...).';
    END IF;
    RETURN CASE TG_OP WHEN 'DELETE' THEN OLD WHEN 'UPDATE' THEN NEW END;
END $$;

-- The store's clock, its durability, its limits and the reach cap, and the timeline it follows:
-- what a raise after lost history covers.

-- Each definition here is the current one: the build puts this file into the update script
-- of the version being developed (sql/README.md).

CREATE OR REPLACE FUNCTION cosid.store_now() RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint + cosid._store_clock_offset()
$$;

-- The store's clock, in Unix ms.  cosid.store_clock_offset shifts it so that tests can move
-- the store's clock.  It is read in C, where the library defines it as superuser-only:
-- current_setting() would also read a placeholder that any role could SET on a store
-- server that does not preload cosid, and move the clock to take live leases early.
CREATE OR REPLACE FUNCTION cosid._store_clock_offset() RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_store_clock_offset' LANGUAGE C VOLATILE PARALLEL SAFE;

-- Every store write durable (cosid--1.0.sql): the same rule from C (src/pg/store/durable.cpp), which
-- raises a weaker synchronous_commit to "on" for the transaction, as before.
CREATE OR REPLACE FUNCTION cosid._durable() RETURNS void
AS 'MODULE_PATHNAME', 'cosid_durable' LANGUAGE C VOLATILE;

-- Where this server writes, from shared memory (src/pg/store/wal_position.cpp): the store asks
-- both first in every acquire and renewal (cosid._follow_timeline).  cosid._timeline() names
-- the timeline pg_walfile_name(pg_current_wal_lsn()) named, and fails as that did during
-- recovery; cosid._system_identifier() is pg_control_system()'s, without reading pg_control
-- from disk.
CREATE OR REPLACE FUNCTION cosid._timeline() RETURNS int
AS 'MODULE_PATHNAME', 'cosid_timeline' LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION cosid._system_identifier() RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_system_identifier' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION cosid._system_identifier() FROM PUBLIC;

-- The reach cap (src/core/reach.hpp): no limit lets a window reach more than this past the
-- clock that granted it, so a copy (an acknowledged fork, a restored dump) that cannot see the
-- limits its original set after the copy was made still raises above everything it issued.
CREATE OR REPLACE FUNCTION cosid._reach_cap_ms() RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_reach_cap_ms' LANGUAGE C IMMUTABLE PARALLEL SAFE;
REVOKE ALL ON FUNCTION cosid._reach_cap_ms() FROM PUBLIC;

CREATE OR REPLACE FUNCTION cosid._max_tolerance_cap_ms() RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_max_tolerance_cap_ms' LANGUAGE C IMMUTABLE PARALLEL SAFE;
REVOKE ALL ON FUNCTION cosid._max_tolerance_cap_ms() FROM PUBLIC;

CREATE OR REPLACE FUNCTION cosid._static_ahead_cap_ms() RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_static_ahead_cap_ms' LANGUAGE C IMMUTABLE PARALLEL SAFE;
REVOKE ALL ON FUNCTION cosid._static_ahead_cap_ms() FROM PUBLIC;

-- (what the raise covers: the cap, or cosid.test_reach_cap on a test server)
CREATE OR REPLACE FUNCTION cosid._unseen_reach_cap_ms() RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_unseen_reach_cap_ms' LANGUAGE C STABLE PARALLEL SAFE;
REVOKE ALL ON FUNCTION cosid._unseen_reach_cap_ms() FROM PUBLIC;

-- What an acquire or renewal grants, from the store's limits: ttl_ms, the ttl it grants: what
-- the keeper asked, at most the store's max_ttl (a raise after a lost history covers no longer
-- lease).  A longer cosid.ttl (reloaded on an instance, or a store whose limit was lowered)
-- gets shorter windows instead of an error: its keeper renews them in time and logs a warning
-- (src/core/lease_model.hpp, granted_ttl).
-- Called only by the store's own SECURITY DEFINER functions (their owner, their search_path),
-- in their FROM: plain SQL without SET or SECURITY DEFINER, it is inlined into the calling
-- query, whose plan lasts the session (a function call would plan its query again in every
-- transaction).
CREATE OR REPLACE FUNCTION cosid._grant_limits(p_ttl_ms bigint) RETURNS TABLE (ttl_ms bigint)
LANGUAGE sql STABLE AS $$
    SELECT LEAST(p_ttl_ms, pg_catalog.min(s.max_ttl_ms)) FROM cosid.store_state s
$$;
REVOKE ALL ON FUNCTION cosid._grant_limits(bigint) FROM PUBLIC;

-- The store's last raise after lost history as a lease row not yet brought up to it sees it
-- (the lazy raise, cosid._follow_timeline): raise_count, how many raises the store's history
-- counts (a row whose cosid.lease.raise_seen is below it missed one or more); raised_floor, the
-- floor the raises put every next window above, as the raise recorded it (raised_at_ms + its
-- reach: each raise keeps the furthest reach of the raises before it, so this covers every
-- raise a row missed; not the limits of now, which a raise of max_ttl since would lift to a
-- floor no lost window reaches, and a slot would wait for; the limits only for a raise before
-- 1.7, which recorded no reach); settled, false while the store holds several records (a
-- restore loading, a raise not yet made), when every row counts as not brought up.  Plain
-- SQL returning a table (one row: an aggregate), so that PostgreSQL inlines it into the FROM
-- of its callers, whose plans last the session; a function returning one record is not
-- inlined, and planned its query again at every call (twice in each acquire).
CREATE OR REPLACE FUNCTION cosid._raise_mark() RETURNS TABLE (raise_count bigint, raised_floor bigint, settled boolean)
LANGUAGE sql STABLE AS $$
    SELECT coalesce(pg_catalog.max(s.raise_count), 0),
           coalesce(pg_catalog.max(s.raised_at_ms + coalesce(s.raised_reach_ms, s.max_ttl_ms + 2 * s.max_tolerance_ms))
                      FILTER (WHERE s.raised_at_ms > 0), 0),
           pg_catalog.count(*) = 1
      FROM cosid.store_state s
$$;
REVOKE ALL ON FUNCTION cosid._raise_mark() FROM PUBLIC;

-- A lease row's next floor with the raises it missed applied (p_seen its raise_seen, p_count
-- and p_floor cosid._raise_mark's raise_count and raised_floor, p_settled its settled): where
-- its next window must start, what the guards and views read instead of next_floor.
CREATE OR REPLACE FUNCTION cosid._raised_next_floor(p_next_floor bigint, p_seen bigint, p_count bigint, p_floor bigint,
                                                    p_settled boolean DEFAULT true) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_seen < p_count OR NOT p_settled THEN greatest(p_next_floor, p_floor) ELSE p_next_floor END
$$;
REVOKE ALL ON FUNCTION cosid._raised_next_floor(bigint, bigint, bigint, bigint, boolean) FROM PUBLIC;

-- The fence step a row brought up to raise p_count takes (p_seen its raise_seen): 2^32 for each
-- raise it missed, as the raise before 1.8 gave every row at once.  A lost tail of the store's
-- history is far shorter than 2^32 grants of one row: a step per raise missed puts the row's
-- next fence above every fence a lost tail gave it from the raises this history knows.  A tail
-- that raised once more itself (a raise this history never saw) may have given the same fences
-- on its side, as the raise before 1.8 could: such a fence is told apart only by the
-- incarnation, which a renewal or release must match too.
CREATE OR REPLACE FUNCTION cosid._raise_fence_step(p_seen bigint, p_count bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_seen < p_count THEN (p_count - p_seen) * 4294967296 ELSE 0 END
$$;
REVOKE ALL ON FUNCTION cosid._raise_fence_step(bigint, bigint) FROM PUBLIC;

-- Whether this transaction holds a lock on p_rel of mode p_mode or a stronger one (src/pg/store/locks.cpp).
CREATE OR REPLACE FUNCTION cosid._lock_held(p_rel regclass, p_mode text) RETURNS boolean
AS 'MODULE_PATHNAME', 'cosid_lock_held' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION cosid._lock_held(regclass, text) FROM PUBLIC;

-- The store's state taken for a change (a raise, a fork refused or acknowledged, a restore
-- declared): SHARE ROW EXCLUSIVE on cosid.store_state till the transaction ends.  The store's
-- lock order is cosid.store_state first: a raise holds this lock and then waits for every
-- transaction that holds lease rows (cosid.fork_declared's writers hold a lock on the state
-- that excludes this one).  So a transaction that already holds lease rows must not wait for
-- it: every store call looks at the state before its first lease row, and one that holds
-- rows and finds the state unsettled only now (a keeper's pass lease by lease, whose next
-- renewal looks again after a fork was declared; cosid_revoke_role's next revoke) fails to
-- serialize (40001) at once and rolls back what it wrote.  Its caller asks again in a new
-- transaction, which settles the state before any lease row (the keeper goes on lease by
-- lease at once).  Unless it holds the state's lock already: its own raise settled it.
CREATE OR REPLACE FUNCTION cosid._store_state_lock() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF cosid._lock_held('cosid.lease', 'RowShareLock')
       AND NOT cosid._lock_held('cosid.store_state', 'ShareRowExclusiveLock') THEN
        RAISE EXCEPTION 'cosid lease store: its state changed while this transaction held lease rows'
            USING ERRCODE = 'serialization_failure',
                  DETAIL = 'The store''s state (a fork declared, a raise due, a restore) is settled before a store call''s '
                           'first lease row: a raise waits for every transaction that holds lease rows, and this one '
                           'would wait for the raise.',
                  HINT = 'Run the call again in a new transaction (the keeper does so at once); run an administrator''s '
                         'function in a transaction of its own.';
    END IF;
    LOCK TABLE cosid.store_state IN SHARE ROW EXCLUSIVE MODE;
END $$;
REVOKE ALL ON FUNCTION cosid._store_state_lock() FROM PUBLIC;

CREATE OR REPLACE FUNCTION cosid._follow_timeline(p_ttl_ms bigint) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT cosid._follow_timeline(p_ttl_ms, false, NULL)
$$;
REVOKE ALL ON FUNCTION cosid._follow_timeline(bigint) FROM PUBLIC;

-- Called first by every store mutation, and the one place that decides whether the store
-- still has its whole history.  It has when cosid.store_state holds exactly one row, of
-- this cluster and of the timeline it writes on.  Otherwise, in one transaction, it frees
-- every lease (fence + 2^32, so its holder's next renewal finds it lost) and raises every
-- slot's next floor to at least now + max_ttl + 2 x max_tolerance of this server's clock
-- (lazily: the held rows now, a free one when it is next acquired; see the UPDATE below),
-- and leaves one row, of here.  An old holder's ceiling is at most its grant's store time +
-- ttl + tolerance, and that store time is at most this now + tolerance when the two store
-- servers' clocks are within the tolerance of each other: no new window can then start
-- below a timestamp an old holder might still issue, whatever the holders' own clocks say.
-- The margin comes from the store's limits, never from a namespace row (which may be the
-- lost part); after history the store cannot see at all (a restored dump, a fork
-- acknowledged) it is the reach cap instead (docs/safety.md: what a copy cannot see).  A new
-- timeline or cluster raises unless raise_floors_on_new_timeline is off (synchronous
-- replication loses nothing).  One caller raises; the others wait on the table's lock and
-- find it done.  Every caller's ttl is then checked against max_ttl, whichever path it
-- took: the raise covers no longer grant.  Called only by the store's SECURITY DEFINER
-- functions (as their owner, with their search_path): no settings of its own.
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
    v_floor   bigint;
    v_count_raise bigint;
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
        PERFORM cosid._store_state_lock();
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
               coalesce(max(s.raise_count), 0) AS raise_count,
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
            -- Every next window above this raise, and above the raises before it (kept as the
            -- furthest reach in the record: rows not yet brought up to those take this floor).
            v_floor := greatest(v_base + v_reach,
                                CASE WHEN m.raised_at_ms > 0
                                     THEN m.raised_at_ms + coalesce(m.raised_reach_ms, m.max_ttl_ms + 2 * m.max_tolerance_ms)
                                     ELSE 0 END);
            -- This raise's number: above every record's, the newest's too, and so above every
            -- row's mark (a row from outside arrives with its mark cut below the records' largest
            -- count: cosid._lease_arrives_raised).
            v_count_raise := (SELECT coalesce(max(s.raise_count), 0) FROM cosid.store_state s) + 1;
            -- The lazy raise.  Only the held rows are written now: each is freed (its holder's
            -- renewal or release no longer matches: its fence moves far past anything the lost
            -- tail can have used, see cosid._raise_fence_step), its next floor raised, and it is
            -- marked as brought up to this raise.  A free row is left alone: it takes the raise
            -- when it is next written (cosid.acquire: its window starts at or above
            -- cosid._raise_mark's raised_floor and its fence takes the same step; a restore's
            -- row arriving later, cosid._lease_arrives_raised), and every reader that asks where
            -- its next window starts reads cosid._raised_next_floor (the forget guard, the DROP
            -- guard through the raise's own reach, static slots, cosid_leases, the floor an
            -- administrator may lower to).  The raise so costs the live leases, not the slots:
            -- it runs in whatever store call first sees the lost history, within the keeper's
            -- bound of ttl/6, and a store of 5 namespaces of 16 slot bits did not finish
            -- rewriting its 328,704 rows (and their triggers) in that bound (docs/capacity.md).
            UPDATE cosid.lease l
               SET next_floor = greatest(l.next_floor, l.ceiling, v_floor),
                   previous_owner_key = coalesce(l.owner_key, l.previous_owner_key),
                   owner_key = NULL, incarnation = NULL, owner_role = NULL,
                   fence = l.fence + greatest(cosid._raise_fence_step(l.raise_seen, v_count_raise), 4294967296),
                   raise_seen = v_count_raise
             -- (Above a transaction's snapshot, REPEATABLE READ or SERIALIZABLE, a lease granted
             -- and committed after the snapshot is free in it, and would escape the raise: every
             -- row is written then, as before the lazy raise, and a row changed since the
             -- snapshot makes the raise fail to serialize, 40001, instead.)
             WHERE l.incarnation IS NOT NULL
                OR pg_catalog.current_setting('transaction_isolation') <> 'read committed';
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
                                       raised_reach_ms, raise_count)
        VALUES (v_sys, v_tli, m.raise_flag, m.max_ttl_ms, m.max_tolerance_ms, m.failovers + 1, clock_timestamp(),
                CASE WHEN v_raise THEN greatest(v_base, m.raised_at_ms) ELSE m.raised_at_ms END,
                CASE WHEN v_count = 1 THEN m.issuer END,
                -- (as far as this raise, or the last one if that reached further)
                CASE WHEN v_raise THEN v_floor - greatest(v_base, m.raised_at_ms) ELSE m.raised_reach_ms END,
                CASE WHEN v_raise THEN v_count_raise ELSE m.raise_count END);
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
                 THEN format('%s leases freed, their next_floor raised to at least %s + %s ms (%s); free slots take '
                             'raise %s when next acquired',
                             v_rows, CASE WHEN v_base < v_now THEN format('now - %s ms', v_now - v_base) ELSE 'now' END,
                             v_reach, CASE WHEN p_fork_ack OR v_count <> 1
                                           THEN 'the reach cap: limits set after the copy are unseen here'
                                           ELSE format('max_ttl %s ms + 2 x max_tolerance %s ms', m.max_ttl_ms,
                                                       m.max_tolerance_ms) END,
                             v_count_raise)
                 WHEN v_upgraded THEN format('floors left alone, %s leases of the old server freed', v_rows)
                 ELSE 'floors left alone (raise_floors_on_new_timeline is off)' END;
    END IF;
END $$;
REVOKE ALL ON FUNCTION cosid._follow_timeline(bigint, boolean, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION cosid_store_follow_timeline(restored boolean DEFAULT false) RETURNS int
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_id text;
BEGIN
    IF restored THEN
        -- First, as every change of the store's state (cosid._store_state_lock): the keeper's
        -- cosid._fork_check may find the cosid.fork file written below before this commits,
        -- and must wait here, not declare the same fork beside this declaration.
        PERFORM cosid._store_state_lock();
    END IF;
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
        -- a second record of the state, as a restored dump has: the next call raises
        INSERT INTO cosid.store_state (system_identifier, timeline, raise_floors_on_new_timeline, max_ttl_ms,
                                       max_tolerance_ms, failovers, raised_at_ms, raise_count)
        SELECT 0, 0, true, s.max_ttl_ms, s.max_tolerance_ms, s.failovers, s.raised_at_ms, s.raise_count
          FROM cosid.store_state s;
    END IF;
    PERFORM cosid._follow_timeline(NULL);
    RETURN (SELECT failovers FROM cosid.store_state);
END $$;
COMMENT ON FUNCTION cosid_store_follow_timeline(boolean) IS 'raises the floors now if the store lost history (a failover, a restore); restored => true for a copy of its data directory (superuser or cosid_admin)';
REVOKE ALL ON FUNCTION cosid_store_follow_timeline(boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_store_follow_timeline(boolean) TO cosid_admin;

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
COMMENT ON FUNCTION cosid_store_settings(boolean, interval, interval) IS 'the lease store''s failover behaviour, longest lease and largest tolerance (superuser or cosid_admin)';
REVOKE ALL ON FUNCTION cosid_store_settings(boolean, interval, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_store_settings(boolean, interval, interval) TO cosid_admin;

-- The id of the pg_upgrade read that made this cluster (its cosid.upgraded file), or NULL.
CREATE OR REPLACE FUNCTION cosid._upgrade_read_here() RETURNS text
AS 'MODULE_PATHNAME', 'cosid_upgrade_read_here' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION cosid._upgrade_read_here() FROM PUBLIC;

-- Why this store is a fork whose origin may still issue ids (src/core/fork_rule.hpp), or
-- NULL: cosid._follow_timeline refuses every grant while it says so, cosid_health() shows it.
-- The store's record names the server that issues from it (issuer_incarnation: a keeper
-- runs there on this store, see cosid._issuer_start), and this copy of the store runs
-- elsewhere: on a new timeline of the same cluster (a promoted standby, a recovered base
-- backup), or restored from a dump (the origin's record beside the one CREATE EXTENSION
-- wrote); or a copy was declared (fork_pending: by the keeper of a data directory pg_upgrade
-- copied or one marked with a cosid.fork file, or by cosid_store_follow_timeline(restored
-- => true)).  A new cluster with one record is pg_upgrade's new cluster when its data
-- directory says so (cosid._upgraded_here): pg_upgrade needs a cleanly stopped origin, and
-- the old data directory carries the mark instead.  Any other cluster holding one record of
-- an issuing server's store is a copy of that server's data (pg_createsubscriber turns a
-- standby into one, a standby of an upgraded cluster promoted before its store followed).
CREATE OR REPLACE FUNCTION cosid._upgraded_here() RETURNS boolean
AS 'MODULE_PATHNAME', 'cosid_upgraded_here' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION cosid._upgraded_here() FROM PUBLIC;

-- The server whose keeper issues from this store, recorded by that keeper (a local store,
-- through SPI) when it finds the store ready and before each acquire.  No stop clears it: a
-- stopped server may be started again, and a copy of its store that finds the record on a
-- new timeline, or in a restored dump, knows its origin may still issue (cosid._fork_reason).
-- A server that only serves the store to others (cosid.store_only) records nothing.  The call
-- follows the timeline first, so a fork refuses here (ZC009) before its own keeper would
-- overwrite its origin's record.
CREATE OR REPLACE FUNCTION cosid._issuer_start(p_incarnation uuid) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM cosid._follow_timeline(NULL);
    UPDATE cosid.store_state s SET issuer_incarnation = p_incarnation
     WHERE s.issuer_incarnation IS DISTINCT FROM p_incarnation;
END $$;
REVOKE ALL ON FUNCTION cosid._issuer_start(uuid) FROM PUBLIC;

-- Which server and window issued an id: the id read with the namespace's layout, and every
-- window of its slot whose (floor, ceiling] holds its time (two rows: the slot had two windows
-- then, and cosid_verify() names them).  No window: one row saying why (older than the
-- retention, or not granted by this store).  Incarnations are shown to superusers and
-- cosid_admin, addresses also to pg_monitor.
CREATE OR REPLACE FUNCTION cosid_issuer(id bigint, namespace text DEFAULT 'default')
RETURNS TABLE (issued_at timestamptz, slot int, sequence int, source text, holder text, owner_key text,
               incarnation uuid, owner_role name, client_addr inet, fence bigint, window_floor timestamptz,
               window_ceiling timestamptz, granted_at timestamptz, ended_at timestamptz, ended_how text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_ns    cosid.namespace;
    v_id    record;
    v_admin boolean := (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = session_user)
                       OR pg_catalog.pg_has_role(session_user, 'cosid_admin', 'MEMBER');
    v_addr  boolean;
    v_cut   bigint := cosid.store_now() - cosid._history_retention_ms();
    v_oldest bigint;
BEGIN
    IF $1 IS NULL THEN
        RAISE EXCEPTION 'cosid id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_ns := cosid._namespace_row($2);
    v_addr := v_admin OR pg_catalog.pg_has_role(session_user, 'pg_monitor', 'MEMBER');
    -- (22003 for an id of another layout: past its bits, or negative)
    SELECT * INTO v_id FROM cosid.unpack($1, v_ns.timestamp_bits, v_ns.slot_bits, v_ns.sequence_bits, v_ns.epoch_ms,
                                         v_ns.unit) u;
    RETURN QUERY
        SELECT pg_catalog.to_timestamp(v_id.ts_ms / 1000.0), v_id.slot, v_id.sequence,
               CASE WHEN w.live THEN 'held lease' WHEN w.kind = 'static' THEN 'static slot' ELSE 'ended lease' END,
               cosid._window_holder(w.kind, w.owner_key, w.owner_role, w.client_addr, w.system_identifier),
               w.owner_key, CASE WHEN v_admin THEN w.incarnation END, w.owner_role,
               CASE WHEN v_addr THEN w.client_addr END, w.fence,
               pg_catalog.to_timestamp(w.floor / 1000.0), pg_catalog.to_timestamp(w.ceiling / 1000.0),
               w.granted_at, w.ended_at,
               coalesce(w.ended_how, CASE WHEN NOT w.live THEN 'no longer held: its end was not recorded (a restore freed it)' END)
          FROM cosid._windows(v_ns.name, v_id.slot) w
         WHERE w.floor < v_id.ts_ms AND v_id.ts_ms <= w.ceiling
         ORDER BY w.floor, w.kind, w.fence;
    IF FOUND THEN
        RETURN;
    END IF;
    SELECT min(h.ceiling) INTO v_oldest FROM cosid.window_history h WHERE h.namespace = v_ns.name AND h.slot = v_id.slot;
    RETURN QUERY
        SELECT pg_catalog.to_timestamp(v_id.ts_ms / 1000.0), v_id.slot, v_id.sequence,
               CASE WHEN v_id.ts_ms <= v_cut
                    THEN format('not in the history: older than its retention (%s): windows that ended before %s are purged',
                                cosid._ms_span(cosid._history_retention_ms()), cosid._ms_text(v_cut))
                    WHEN v_id.ts_ms <= v_ns.not_before_ms
                    THEN format('not in the history: at or below the namespace''s floor (%s), raised by cosid_adopt above ids '
                                'a column held before (not issued by cosid, or by another store)', cosid._ms_text(v_ns.not_before_ms))
                    WHEN v_oldest IS NULL OR v_id.ts_ms <= v_oldest
                    THEN 'not in the history: no window of its slot this early (the history began later: cosid 1.6, '
                         'or a store that lost that part of its history)'
                    ELSE 'not in the history: no window of this store held its slot then (another store''s id, '
                         'a window lost in a failover''s tail, or not a cosid id of this namespace)' END,
               NULL::text, NULL::text, NULL::uuid, NULL::name, NULL::inet, NULL::bigint, NULL::timestamptz,
               NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, NULL::text;
END $$;
COMMENT ON FUNCTION cosid_issuer(bigint, text) IS 'the server and window that issued an id, from the store''s history of windows (pg_monitor, cosid_admin)';
REVOKE ALL ON FUNCTION cosid_issuer(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_issuer(bigint, text) TO pg_monitor, cosid_admin;

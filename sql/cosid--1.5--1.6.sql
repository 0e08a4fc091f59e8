-- cosid 1.5 -> 1.6: forks of an issuing server, a change of store, bounded floor raises by
-- keepers, column defaults bound to their namespace.
\echo Use "ALTER EXTENSION cosid UPDATE TO '1.6'" to load this file. \quit
-- >>> forks

-- Forks of an issuing server: the store records the server that issues from it, and a copy
-- of it that runs elsewhere grants nothing until cosid_fork_acknowledge().
ALTER TABLE cosid.store_state ADD COLUMN issuer_incarnation uuid, ADD COLUMN fork_pending text;
-- The cluster and timeline pg_upgrade found this server on when it read it (pg_dump in
-- binary-upgrade mode, after its last store call): pg_upgrade's new cluster keeps the
-- floors only when the store last wrote on that very timeline.
ALTER TABLE cosid.store_state ADD COLUMN upgrade_origin_system bigint, ADD COLUMN upgrade_origin_timeline int;
-- ... and the id of that read (of that pg_upgrade run), which the new cluster's
-- cosid.upgraded file must name too: a note left by another run never counts.
ALTER TABLE cosid.store_state ADD COLUMN upgrade_read_id text;
-- A new store grants at most cosid.ttl's default (30 s) unless set: the wait after a raise is
-- then 30 s + 2 x max_tolerance.  An existing store keeps the limit it has (60 s unless set).
ALTER TABLE cosid.store_state ALTER COLUMN max_ttl_ms SET DEFAULT 30000;
-- A server that issues from this store now (its keeper runs here, on this database) is
-- recorded at once, not only when its keeper next looks (within ttl/3): a copy of the store
-- made in between must be a fork too.  The keeper writes its own incarnation over this one.
-- Not in CREATE EXTENSION (it runs this script too, see the end of this file): a store made
-- now has no issuer yet.
UPDATE cosid.store_state SET issuer_incarnation = '00000000-0000-0000-0000-000000000000'
 WHERE pg_catalog.current_setting('cosid.database', true) = pg_catalog.current_database()
   AND coalesce(pg_catalog.current_setting('cosid.store_dsn', true), '') = ''
   AND coalesce(pg_catalog.current_setting('cosid.store_only', true), 'off') = 'off'
   AND NOT EXISTS (SELECT FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_depend d
                     ON d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.refobjid = e.oid
                    WHERE e.extname = 'cosid' AND d.deptype = 'e'
                      AND d.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass
                      AND d.objid = 'cosid'::pg_catalog.regnamespace AND d.xmin = e.xmin);

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
CREATE FUNCTION cosid._upgraded_here() RETURNS boolean
AS 'MODULE_PATHNAME', 'cosid_upgraded_here' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION cosid._upgraded_here() FROM PUBLIC;
-- The id of the pg_upgrade read that made this cluster (its cosid.upgraded file), or NULL.
CREATE FUNCTION cosid._upgrade_read_here() RETURNS text
AS 'MODULE_PATHNAME', 'cosid_upgrade_read_here' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION cosid._upgrade_read_here() FROM PUBLIC;

CREATE FUNCTION cosid._fork_reason() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE
             WHEN bool_or(s.fork_pending IS NOT NULL) THEN min(s.fork_pending)
             WHEN count(*) = 1 AND bool_or(s.issuer_incarnation IS NOT NULL AND s.system_identifier = c.system_identifier
                                           AND s.timeline <> cosid._timeline())
               THEN format('The store''s server was issuing ids on timeline %s when this copy of it went on, '
                           'on timeline %s (a promoted standby, a recovered backup).', min(s.timeline), cosid._timeline())
             WHEN count(*) = 1 AND bool_or(s.issuer_incarnation IS NOT NULL
                                           AND s.system_identifier NOT IN (0, c.system_identifier)
                                           AND s.upgrade_origin_system = s.system_identifier
                                           AND s.upgrade_origin_timeline <> s.timeline)
               THEN format('The store''s server was issuing ids on timeline %s when a copy of it went on, on timeline %s '
                           '(a promoted standby, a recovered backup), and pg_upgrade made this cluster from that copy.',
                           min(s.timeline), min(s.upgrade_origin_timeline))
             WHEN count(*) = 1 AND bool_or(s.issuer_incarnation IS NOT NULL
                                           AND s.system_identifier NOT IN (0, c.system_identifier))
                  AND NOT cosid._upgraded_here()
               THEN format('The store''s record comes from another cluster (system identifier %s) whose server was '
                           'issuing ids from it, and pg_upgrade did not make this one: a copy of that server''s data '
                           '(pg_createsubscriber, a standby of it promoted before its store followed).',
                           min(s.system_identifier))
             WHEN count(*) > 1 AND bool_or(s.issuer_incarnation IS NOT NULL)
               THEN 'The dump restored here was taken while the store''s server was issuing ids from it.'
           END
      FROM cosid.store_state s, pg_catalog.pg_control_system() c
$$;
REVOKE ALL ON FUNCTION cosid._fork_reason() FROM PUBLIC;

-- Called only by the store's SECURITY DEFINER functions (as their owner, with their
-- search_path), first in every acquire and renewal: no user or settings of its own, which
-- would cost each of them a second switch.
CREATE FUNCTION cosid._follow_timeline(p_ttl_ms bigint, p_fork_ack boolean, p_stopped_ms bigint) RETURNS void
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
    m         record;
BEGIN
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
        IF v_raise THEN
            UPDATE cosid.lease l
               SET next_floor = greatest(l.next_floor, l.ceiling, v_base + m.max_ttl_ms + 2 * m.max_tolerance_ms),
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
            -- Static slots: the original's windows reached cosid.static_ahead past its clock
            -- (this server's setting: the copy's configuration is the original's).  Every
            -- namespace static here, or static on the original (its rows in cosid.static_ceiling),
            -- starts its next static window above that, as cosid_adopt's floor does (slot -1;
            -- cluster 0: the original, whatever it was).
            -- The original's cosid.static_ahead may differ from this server's: its rows show
            -- how far ahead of their writing it wrote them.
            INSERT INTO cosid.static_ceiling AS c (namespace, slot, system_identifier, ceiling_ms)
            SELECT n.name, -1, 0,
                   v_base + greatest(coalesce(floor(extract(epoch FROM
                                     pg_catalog.current_setting('cosid.static_ahead', true)::interval) * 1000)::bigint,
                                     10000),
                                     (SELECT max(sc.ceiling_ms - (extract(epoch FROM sc.written_at) * 1000)::bigint)
                                        FROM cosid.static_ceiling sc WHERE sc.system_identifier <> 0 AND sc.slot >= 0))
                   + 2 * m.max_tolerance_ms
              FROM cosid.namespace n
             WHERE cosid._static_slot(n.name) IS NOT NULL
                OR EXISTS (SELECT 1 FROM cosid.static_ceiling sc WHERE sc.namespace = n.name AND sc.system_identifier <> 0)
            ON CONFLICT (namespace, slot, system_identifier) DO UPDATE SET ceiling_ms = greatest(c.ceiling_ms, EXCLUDED.ceiling_ms);
        END IF;
        DELETE FROM cosid.store_state;
        INSERT INTO cosid.store_state (system_identifier, timeline, raise_floors_on_new_timeline, max_ttl_ms,
                                       max_tolerance_ms, failovers, last_failover_at, raised_at_ms, issuer_incarnation)
        VALUES (v_sys, v_tli, m.raise_flag, m.max_ttl_ms, m.max_tolerance_ms, m.failovers + 1, clock_timestamp(),
                CASE WHEN v_raise THEN greatest(v_base, m.raised_at_ms) ELSE m.raised_at_ms END,
                CASE WHEN v_count = 1 THEN m.issuer END);
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
                 THEN format('%s slots freed, their next_floor raised to at least %s + %s ms + 2 x %s ms',
                             v_rows, CASE WHEN v_base < v_now THEN format('now - %s ms', v_now - v_base) ELSE 'now' END,
                             m.max_ttl_ms, m.max_tolerance_ms)
                 WHEN v_upgraded THEN format('floors left alone, %s leases of the old server freed', v_rows)
                 ELSE 'floors left alone (raise_floors_on_new_timeline is off)' END;
    END IF;
END $$;
REVOKE ALL ON FUNCTION cosid._follow_timeline(bigint, boolean, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION cosid._follow_timeline(p_ttl_ms bigint) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT cosid._follow_timeline(p_ttl_ms, false, NULL)
$$;
REVOKE ALL ON FUNCTION cosid._follow_timeline(bigint) FROM PUBLIC;

-- What an acquire or renewal grants, from the store's limits: ttl_ms, the ttl it grants: what
-- the keeper asked, at most the store's max_ttl (a raise after a lost history covers no longer
-- lease).  A longer cosid.ttl (reloaded on an instance, or a store whose limit was lowered)
-- gets shorter windows instead of an error: its keeper renews them in time and logs a warning
-- (src/core/lease_model.hpp, granted_ttl).
-- Called only by the store's own SECURITY DEFINER functions (their owner, their search_path),
-- in their FROM: plain SQL without SET or SECURITY DEFINER, it is inlined into the calling
-- query, whose plan lasts the session (a function call would plan its query again in every
-- transaction).
CREATE FUNCTION cosid._grant_limits(p_ttl_ms bigint) RETURNS TABLE (ttl_ms bigint)
LANGUAGE sql STABLE AS $$
    SELECT LEAST(p_ttl_ms, pg_catalog.min(s.max_ttl_ms)) FROM cosid.store_state s
$$;
REVOKE ALL ON FUNCTION cosid._grant_limits(bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION cosid_store_follow_timeline(restored boolean DEFAULT false) RETURNS int
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF restored AND (SELECT bool_or(s.issuer_incarnation IS NOT NULL) FROM cosid.store_state s) THEN
        -- A copy of a server that was issuing from this store: its origin may go on, on any
        -- slot, and no raise keeps above that.  A fork until cosid_fork_acknowledge().
        PERFORM cosid._fork_mark('Declared a copy of its data directory (cosid_store_follow_timeline(restored => true)) '
                                 'while the store''s server was issuing ids from it.');
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

-- The server whose keeper issues from this store, recorded by that keeper (a local store,
-- through SPI) when it finds the store ready and before each acquire.  No stop clears it: a
-- stopped server may be started again, and a copy of its store that finds the record on a
-- new timeline, or in a restored dump, knows its origin may still issue (cosid._fork_reason).
-- A server that only serves the store to others (cosid.store_only) records nothing.  The call
-- follows the timeline first, so a fork refuses here (ZC009) before its own keeper would
-- overwrite its origin's record.
CREATE FUNCTION cosid._issuer_start(p_incarnation uuid) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM cosid._follow_timeline(NULL);
    UPDATE cosid.store_state s SET issuer_incarnation = p_incarnation
     WHERE s.issuer_incarnation IS DISTINCT FROM p_incarnation;
END $$;
REVOKE ALL ON FUNCTION cosid._issuer_start(uuid) FROM PUBLIC;

-- A copy its keeper recognised by a file in the data directory (cosid.fork: written by a
-- pg_upgrade that copied the data directory, or by an operator before starting a copy).
CREATE FUNCTION cosid._fork_mark(p_reason text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    UPDATE cosid.store_state s SET fork_pending = p_reason WHERE s.fork_pending IS NULL
$$;
REVOKE ALL ON FUNCTION cosid._fork_mark(text) FROM PUBLIC;

-- An administrator's word that the other copy of a forked store's server has stopped issuing
-- (fenced, shut down, its data directory gone): every slot is freed and its next floor raised
-- above anything that copy could have issued, from stopped_at (default: now) + max_ttl + 2 x
-- max_tolerance, and the store grants again.  Nothing to acknowledge: says so, changes nothing.
CREATE FUNCTION cosid_fork_acknowledge(stopped_at timestamptz DEFAULT NULL) RETURNS text
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
    RETURN format('fork acknowledged (%s): every slot freed, next floors at least %s + max_ttl + 2 x max_tolerance',
                  rtrim(v_reason, '.'), coalesce(stopped_at::text, 'now'));
END $$;
REVOKE ALL ON FUNCTION cosid_fork_acknowledge(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_fork_acknowledge(timestamptz) TO cosid_admin;
COMMENT ON FUNCTION cosid_fork_acknowledge(timestamptz) IS 'the other copy of this forked store''s server has stopped issuing: raise the floors from stopped_at and grant again (superuser or cosid_admin)';

CREATE OR REPLACE FUNCTION cosid_health()
RETURNS TABLE (name text, status text, detail text, hint text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    -- "Recently": a failure or loss this long ago still shows (a scrape every 15 s sees it
    -- many times; the counters in cosid_stats() keep the whole history).
    c_recent_ms constant bigint := 900000;
    h record;
    f record;                -- the store's facts
    v_facts boolean := false;  -- f holds the store's facts
    v_standby boolean := pg_is_in_recovery();
    v_db text := current_setting('cosid.database', true);
    v_dsn text := coalesce(current_setting('cosid.store_dsn', true), '');
    v_static text := coalesce(current_setting('cosid.static_slots', true), '');
    v_store_here boolean;    -- this database holds the store these checks read
    v_now bigint;
    v_list text;
    v_worst text;
    v_group int;
    r record;
BEGIN
    SELECT * INTO h FROM cosid._health_state();
    -- The store is here when this instance's keeper uses a local store in this database, or
    -- when the library is not preloaded (a store-only server: its tables are the store).
    v_store_here := v_dsn = '' AND (NOT h.preloaded OR v_db IS NULL OR v_db = current_database());
    IF v_store_here THEN
        SELECT * INTO f FROM cosid._store_health();
        v_facts := FOUND;
    ELSIF h.facts_age_ms IS NOT NULL THEN
        SELECT h.max_ttl_ms AS max_ttl_ms, h.max_tolerance_ms AS max_tolerance_ms, h.raise_floors AS raise_floors,
               h.standbys AS standbys, h.sync_standbys AS sync_standbys INTO f;
        v_facts := true;
    END IF;
    v_now := cosid.store_now();

    -- keeper: running, and able to serve
    name := 'keeper'; hint := NULL;
    IF NOT h.preloaded THEN
        status := 'ok';
        detail := 'not known: cosid is not in shared_preload_libraries on this server, so it has no keeper and '
                  'cosid_next() cannot run here (a store-only server needs none)';
    ELSIF v_standby THEN
        status := 'ok';
        detail := 'hot standby: the keeper starts when this server is promoted';
    ELSIF h.keeper_pid = 0 THEN
        status := 'critical';
        detail := 'the keeper is not running: cosid_next() fails on this server';
        hint := 'Read the server log for the keeper''s exit; the server restarts it within a second. '
                'See docs/monitoring.md#keeper';
    ELSIF NOT h.keeper_ready THEN
        status := 'critical';
        detail := format('the keeper (pid %s) cannot serve: %s', h.keeper_pid,
                         coalesce(nullif(h.keeper_problem_message, ''), 'it has not found its store ready yet'));
        hint := 'See docs/monitoring.md#keeper';
    ELSE
        status := 'ok';
        detail := format('the keeper (pid %s) serves in database %s', h.keeper_pid, v_db);
    END IF;
    RETURN NEXT;

    -- store: it answers, and leases are renewed within their ttl
    name := 'store'; hint := NULL;
    IF NOT h.preloaded OR v_standby OR h.keeper_pid = 0 OR NOT h.keeper_ready THEN
        status := 'ok';
        detail := 'not known: no keeper serving on this server (see check keeper)';
    ELSIF h.store_ok_age_ms IS NULL OR h.store_ok_age_ms > h.ttl_ms
          OR (h.leases > 0 AND coalesce(h.renewal_ok_age_ms, h.store_ok_age_ms) > h.ttl_ms) THEN
        status := 'critical';
        detail := format('the store last answered %s, the last lease confirmed (acquire or renewal) %s; ttl %s ms: '
                         'held leases expire',
                         coalesce(h.store_ok_age_ms || ' ms ago', 'never'),
                         coalesce(h.renewal_ok_age_ms || ' ms ago', 'never'), h.ttl_ms);
        hint := 'See docs/monitoring.md#store';
    ELSIF h.store_ok_age_ms > 2 * h.ttl_ms / 3
          OR (h.leases > 0 AND coalesce(h.renewal_ok_age_ms, 0) > 2 * h.ttl_ms / 3) THEN
        status := 'warning';
        detail := format('the store last answered %s ms ago, the last lease confirmed %s; ttl %s ms', h.store_ok_age_ms,
                         coalesce(h.renewal_ok_age_ms || ' ms ago', 'never'), h.ttl_ms);
        hint := 'See docs/monitoring.md#store';
    ELSE
        status := 'ok';
        detail := format('the store answered %s ms ago; %s leases held, last confirmed %s; ttl %s ms', h.store_ok_age_ms,
                         h.leases, coalesce(h.renewal_ok_age_ms || ' ms ago', 'none yet'), h.ttl_ms);
    END IF;
    RETURN NEXT;

    -- renewals: failing now, or failed recently
    name := 'renewals'; hint := NULL;
    IF NOT h.preloaded THEN
        status := 'ok'; detail := 'not known: cosid is not preloaded here';
    ELSIF h.failures_in_row > 0 AND h.failing_for_ms >= h.ttl_ms / 3 THEN
        status := 'critical';
        detail := format('renewals have failed for %s ms (%s in a row; ttl %s ms)', h.failing_for_ms,
                         h.failures_in_row, h.ttl_ms);
        hint := 'See docs/monitoring.md#renewals';
    ELSIF h.failures_in_row > 0 THEN
        status := 'warning';
        detail := format('%s renewals failed in a row, for %s ms', h.failures_in_row, h.failing_for_ms);
        hint := 'See docs/monitoring.md#renewals';
    ELSIF h.renewal_failed_age_ms < c_recent_ms THEN
        status := 'warning';
        detail := format('a renewal failed %s s ago; renewals succeed again', round(h.renewal_failed_age_ms / 1000.0));
        hint := 'See docs/monitoring.md#renewals';
    ELSE
        status := 'ok'; detail := 'no renewal failed in the last 15 minutes';
    END IF;
    RETURN NEXT;

    -- leases_lost
    name := 'leases_lost'; hint := NULL;
    IF NOT h.preloaded THEN
        status := 'ok'; detail := 'not known: cosid is not preloaded here';
    ELSIF h.lease_lost_age_ms < c_recent_ms THEN
        status := 'warning';
        detail := format('a lease was lost %s s ago: its callers got ZC001 once', round(h.lease_lost_age_ms / 1000.0));
        hint := 'See docs/monitoring.md#leases_lost';
    ELSE
        status := 'ok'; detail := 'no lease lost in the last 15 minutes';
    END IF;
    RETURN NEXT;

    -- clock_skew: this server's clock against the store's, at the keeper's last store call
    name := 'clock_skew'; hint := NULL;
    IF NOT h.preloaded OR h.skew_age_ms IS NULL THEN
        status := 'ok'; detail := 'not known: the keeper has not compared the clocks yet';
    ELSIF h.skew_ms > h.skew_tolerance_ms THEN
        status := 'critical';
        detail := format('this clock is %s ms off the store''s (tolerance %s ms), measured %s s ago', h.skew_ms,
                         h.skew_tolerance_ms, round(h.skew_age_ms / 1000.0));
        hint := 'See docs/monitoring.md#clock_skew';
    ELSIF h.skew_ms > h.skew_tolerance_ms / 2 THEN
        status := 'warning';
        detail := format('this clock is %s ms off the store''s (tolerance %s ms), measured %s s ago', h.skew_ms,
                         h.skew_tolerance_ms, round(h.skew_age_ms / 1000.0));
        hint := 'See docs/monitoring.md#clock_skew';
    ELSE
        status := 'ok';
        detail := format('this clock is within %s ms of the store''s (tolerance %s ms)', h.skew_ms, h.skew_tolerance_ms);
    END IF;
    RETURN NEXT;

    -- static_slots: a state file, and not a refused one
    name := 'static_slots'; hint := NULL;
    IF v_static = '' THEN
        status := 'ok'; detail := 'no static slots on this server';
    ELSIF NOT h.preloaded THEN
        status := 'ok'; detail := 'not known: cosid is not preloaded here';
    ELSIF h.static_refused THEN
        status := 'critical';
        detail := format('the state file (cosid.state_file) was refused: static slots %s issue nothing', v_static);
        hint := 'See docs/monitoring.md#static_slots';
    ELSIF NOT h.state_file THEN
        status := 'warning';
        detail := format('static slots %s without a state file: each keeper start waits for the clock, and '
                         'nothing guards a restart against a clock set back', v_static);
        hint := 'Set cosid.state_file. See docs/monitoring.md#static_slots';
    ELSE
        status := 'ok'; detail := format('static slots %s keep a state file', v_static);
    END IF;
    RETURN NEXT;

    -- store_max_ttl: the store grants no longer lease than its max_ttl
    name := 'store_max_ttl'; hint := NULL;
    IF NOT h.preloaded THEN
        status := 'ok'; detail := 'not known: cosid is not preloaded here (no keeper, no cosid.ttl of its own)';
    ELSIF NOT v_facts THEN
        status := 'ok';
        detail := format('not known: the keeper could not read the store''s limits (%s)',
                         coalesce(h.facts_error, 'not yet'));
    ELSIF coalesce(pg_catalog.current_setting('cosid.store_only', true), 'off') = 'on' THEN
        status := 'ok'; detail := 'this server serves the store only (cosid.store_only): it leases nothing itself';
    ELSIF f.max_ttl_ms < h.ttl_ms THEN
        status := 'warning';
        detail := format('the store''s max_ttl is %s ms, below this keeper''s cosid.ttl %s ms: leases are granted '
                         'for %s ms and renewed every third of that', f.max_ttl_ms, h.ttl_ms, f.max_ttl_ms);
        hint := 'See docs/monitoring.md#store_max_ttl';
    ELSE
        status := 'ok';
        detail := format('cosid.ttl %s ms fits the store''s max_ttl %s ms', h.ttl_ms, f.max_ttl_ms);
    END IF;
    RETURN NEXT;

    -- floor_raise: switched off only where every standby that may be promoted is synchronous
    name := 'floor_raise'; hint := NULL;
    IF NOT v_facts THEN
        status := 'ok';
        detail := format('not known: %s', CASE WHEN v_dsn <> '' THEN 'the keeper has not read the remote store yet'
                                               ELSE 'the store is in database ' || v_db END);
    ELSIF f.raise_floors THEN
        status := 'ok';
        detail := format('the store raises the floors after a failover (%s standbys, %s synchronous)', f.standbys,
                         f.sync_standbys);
    ELSIF f.standbys > f.sync_standbys THEN
        status := 'critical';
        detail := format('raise_floors_on_new_timeline is off while the store has %s asynchronous or potential '
                         'standbys: promoting one can issue ids twice', f.standbys - f.sync_standbys);
        hint := 'See docs/monitoring.md#floor_raise';
    ELSIF f.standbys = 0 THEN
        status := 'warning';
        detail := 'raise_floors_on_new_timeline is off while the store has no standby: a failover to a copy or a '
                  'recovery to a point in time can issue ids twice';
        hint := 'See docs/monitoring.md#floor_raise';
    ELSE
        status := 'ok';
        detail := format('the floor raise is off; every standby of the store (%s) is synchronous', f.standbys);
    END IF;
    RETURN NEXT;

    -- namespace_slots: the worst namespace (the store's lease table, where it is here)
    name := 'namespace_slots'; hint := NULL;
    IF NOT v_store_here THEN
        status := 'ok';
        detail := 'not known here: the store is elsewhere (run cosid_health() on it)';
    ELSE
        SELECT string_agg(format('%s %s/%s', u.namespace, u.in_use, u.slots), ', ' ORDER BY u.pct DESC),
               CASE max(u.pct) >= 95 WHEN true THEN 'critical' ELSE 'warning' END
          INTO v_list, v_worst
          FROM (SELECT l.namespace, count(*) FILTER (WHERE l.incarnation IS NOT NULL AND l.expires_at > v_now) AS in_use,
                       1 << n.slot_bits AS slots,
                       100.0 * count(*) FILTER (WHERE l.incarnation IS NOT NULL AND l.expires_at > v_now)
                             / (1 << n.slot_bits) AS pct
                  FROM cosid.lease l JOIN cosid.namespace n ON n.name = l.namespace
                 GROUP BY l.namespace, n.slot_bits) u
         WHERE u.pct >= 80;
        IF v_list IS NULL THEN
            status := 'ok'; detail := 'every namespace has more than 20 % of its slots free';
        ELSE
            status := v_worst;
            detail := 'slots in use: ' || v_list;
            hint := 'See docs/monitoring.md#namespace_slots';
        END IF;
    END IF;
    RETURN NEXT;

    -- layout_years: the namespaces' layouts run out
    name := 'layout_years'; hint := NULL;
    SELECT string_agg(format('%s %s years', l.namespace, l.years_left), ', ' ORDER BY l.years_left),
           CASE WHEN min(l.years_left) < 1 THEN 'critical' ELSE 'warning' END
      INTO v_list, v_worst
      FROM @extschema@.cosid_layouts l WHERE l.years_left < 5;
    IF v_list IS NULL THEN
        status := 'ok'; detail := 'every layout has 5 years or more left';
    ELSE
        status := v_worst;
        detail := 'layouts ending soon: ' || v_list;
        hint := 'See docs/monitoring.md#layout_years';
    END IF;
    RETURN NEXT;

    -- citus_store: a Citus worker must lease from its cluster's store (cosid.store_dsn)
    name := 'citus_store'; hint := NULL;
    IF to_regclass('pg_catalog.pg_dist_local_group') IS NULL THEN
        status := 'ok'; detail := 'not a Citus node';
    ELSE
        EXECUTE 'SELECT groupid FROM pg_catalog.pg_dist_local_group LIMIT 1' INTO v_group;
        IF coalesce(v_group, 0) = 0 THEN
            status := 'ok'; detail := 'Citus coordinator';
        ELSIF v_dsn = '' THEN
            status := 'critical';
            detail := format('Citus worker (group %s) with its own store (cosid.store_dsn empty): its ids can '
                             'collide with the other nodes''', v_group);
            hint := 'See docs/monitoring.md#citus_store';
        ELSE
            status := 'ok'; detail := format('Citus worker (group %s) leasing from cosid.store_dsn', v_group);
        END IF;
    END IF;
    RETURN NEXT;

    -- owner_key: two live incarnations with one owner key.  After a crash restart the old
    -- incarnation's leases stay live until they expire, at most the store's max_ttl (+ its
    -- tolerance) after the crash: a warning then.  A keeper that has run longer than that and
    -- still meets another live incarnation with its key shares the key with a live server.
    name := 'owner_key'; hint := NULL; status := 'ok';
    detail := 'no other live incarnation with this owner key';
    v_list := NULL;
    IF v_store_here THEN
        SELECT string_agg(format('%s (%s incarnations)', d.owner_key, d.n), ', ' ORDER BY d.owner_key) INTO v_list
          FROM (SELECT l.owner_key, count(DISTINCT l.incarnation) AS n FROM cosid.lease l
                 WHERE l.incarnation IS NOT NULL AND l.expires_at > v_now
                 GROUP BY l.owner_key HAVING count(DISTINCT l.incarnation) > 1) d;
        IF v_list IS NOT NULL THEN
            status := 'warning';
            detail := 'owner keys with more than one live incarnation in the store: ' || v_list
                      || ' (for up to max_ttl after a crash restart; longer: two servers share a key)';
            hint := 'See docs/monitoring.md#owner_key';
        ELSE
            detail := 'every owner key in the store has one live incarnation';
        END IF;
    END IF;
    IF h.preloaded AND h.facts_age_ms IS NOT NULL AND h.other_incarnations > 0 THEN
        IF h.keeper_age_ms > h.max_ttl_ms + h.max_tolerance_ms THEN
            status := 'critical';
            detail := format('another live server holds leases with this owner key %s (its keeper has run %s s, '
                             'longer than any lease of a crashed incarnation lives)', h.owner_key,
                             round(h.keeper_age_ms / 1000.0));
        ELSE
            status := 'warning';
            detail := format('another live incarnation holds leases with this owner key %s: this server''s own '
                             'before a crash restart (they expire within max_ttl), or another server''s', h.owner_key);
        END IF;
        hint := 'See docs/monitoring.md#owner_key';
    END IF;
    RETURN NEXT;

    -- keeper_database: the extension in cosid.database
    name := 'keeper_database'; hint := NULL;
    IF NOT h.preloaded THEN
        status := 'ok'; detail := 'not known: cosid is not preloaded here';
    ELSIF v_db = current_database() THEN
        status := 'ok'; detail := format('the keeper''s database %s is this one', v_db);
    ELSIF h.keeper_problem = 1 THEN
        status := 'critical';
        detail := format('cosid.database is %s, which has no cosid extension: the keeper cannot serve', v_db);
        hint := 'See docs/monitoring.md#keeper_database';
    ELSIF h.keeper_ready THEN
        status := 'ok'; detail := format('the keeper''s database %s has the extension', v_db);
    ELSE
        status := 'ok'; detail := format('not known yet: the keeper has not checked database %s', v_db);
    END IF;
    RETURN NEXT;

    -- fork: a copy of a server that was issuing from this store grants nothing until an
    -- administrator says the other copy stopped
    name := 'fork'; hint := NULL;
    IF NOT v_store_here THEN
        status := 'ok'; detail := 'not known here: the store is elsewhere (run cosid_health() on it)';
    ELSIF v_standby THEN
        status := 'ok'; detail := 'hot standby: a promotion is checked when it happens';
    ELSE
        detail := cosid._fork_reason();
        IF detail IS NULL THEN
            status := 'ok'; detail := 'the store is not a copy of a server that may still issue';
        ELSE
            status := 'critical';
            detail := 'the store grants no window: ' || detail;
            hint := 'Once the other copy has stopped issuing: SELECT cosid_fork_acknowledge(); See docs/monitoring.md#fork';
        END IF;
    END IF;
    RETURN NEXT;
END $$;
-- <<< forks

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

-- The ceiling of a window granted (p_prior = the floor) or renewed at store time p_now with
-- the granted ttl and the namespace's tolerance: now + ttl + tolerance, never below the prior
-- ceiling or the floor.  A floor further ahead (a raise, pg_upgrade's, a release at a ceiling
-- still ahead) gives an empty window until the store's clock comes within ttl + tolerance of
-- it; then it is issued from at once, ahead of the clock.  No reach from the floor or from the
-- store's current limits: the raise after a lost history covers only what a grant's own ttl
-- and tolerance reached.  The rule is src/core's window_ceiling; model_compare.sh holds the
-- two to each other.  (Plain SQL without SET: it is inlined into the UPDATE that calls it.)
CREATE FUNCTION cosid._window_ceiling(p_floor bigint, p_prior bigint, p_ttl bigint, p_tol bigint, p_now bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT GREATEST(p_floor, p_prior, p_now + p_ttl + p_tol)
$$;
REVOKE ALL ON FUNCTION cosid._window_ceiling(bigint, bigint, bigint, bigint, bigint) FROM PUBLIC;

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
                       ceiling     = cosid._window_ceiling(greatest(l.next_floor, v_ns.not_before_ms, v_static),
                                                           greatest(l.next_floor, v_ns.not_before_ms, v_static),
                                                           p_ttl_ms, v_ns.tolerance_ms, v_now),
                       next_floor  = cosid._window_ceiling(greatest(l.next_floor, v_ns.not_before_ms, v_static),
                                                           greatest(l.next_floor, v_ns.not_before_ms, v_static),
                                                           p_ttl_ms, v_ns.tolerance_ms, v_now)
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

-- Grants at most max_ttl (cosid._grant_limits) instead of refusing a longer ttl.
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
    RETURNING l.* INTO r;
    IF FOUND THEN
        RETURN QUERY SELECT r.slot, r.fence, r.expires_at, r.floor, r.ceiling, r.next_floor, v_now;
    ELSE
        -- Nothing renewed: the lease is gone, or another store role holds it (refused here
        -- with 42501, as before the UPDATE; asked only now, so a renewal reads its row once).
        PERFORM cosid._refuse_other_role(p_namespace, p_slot, p_incarnation, p_fence, 'renew');
    END IF;
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

-- Column and domain defaults bound to their namespace (issue 31, item 4).  A default
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
CREATE FUNCTION cosid._namespace_reset() RETURNS text
AS 'MODULE_PATHNAME', 'cosid_namespace_reset' LANGUAGE C STABLE;
COMMENT ON FUNCTION cosid._namespace_reset() IS 'the namespace this session issues in without a SET (server, database, role or connection setting)';

CREATE FUNCTION cosid._bind_expr(expr pg_node_tree, rel oid, unbound oid, bound oid, namespace text) RETURNS text
AS 'MODULE_PATHNAME', 'cosid_bind_expr' LANGUAGE C STABLE;

-- The namespace a role's sessions in this database issue in without a SET: its setting for
-- this database, its own, this database's, then the server's configuration files
-- (pg_file_settings, readable by superusers: the update to 1.6 runs as one), then 'default'.
CREATE FUNCTION cosid._role_namespace(p_role oid) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(
        (SELECT substr(c, length('cosid.namespace=') + 1)
         FROM pg_db_role_setting s CROSS JOIN unnest(s.setconfig) c
         WHERE c LIKE 'cosid.namespace=%'
           AND ((s.setdatabase, s.setrole) IN ((d.oid, p_role), (0::oid, p_role), (d.oid, 0::oid)))
         ORDER BY s.setrole = 0, s.setdatabase = 0 LIMIT 1),
        (SELECT f.setting FROM pg_file_settings f
         WHERE f.name = 'cosid.namespace' AND f.applied AND f.error IS NULL ORDER BY f.seqno DESC LIMIT 1),
        'default')
    FROM pg_database d WHERE d.datname = current_database()
$$;
REVOKE ALL ON FUNCTION cosid._role_namespace(oid) FROM PUBLIC;

-- Binds every default of this database that calls cosid_next() without argument and that
-- the current role may alter (all of them for a superuser); returns how many.  by_owner
-- (the update to 1.6, for defaults made before it): each in the namespace its owner's
-- sessions issue in (cosid._role_namespace); otherwise in this session's namespace without
-- a SET, and a SET that differs is refused.
CREATE FUNCTION cosid.bind_defaults(by_owner boolean DEFAULT false) RETURNS int
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_unbound oid := format('%I.cosid_next()', '@extschema@')::regprocedure;
    v_bound oid := format('%I.cosid_next(text)', '@extschema@')::regprocedure;
    v_reset text;
    v_session text;
    v_ns text;
    v_expr text;
    v_what text;
    v_done int := 0;
    r record;
BEGIN
    FOR r IN
        SELECT DISTINCT 'c' AS kind, ad.oid, ad.adrelid AS rel, c.relkind, c.relowner AS owner,
               ad.adrelid::regclass::text AS target, a.attname::text AS col
        FROM pg_depend d
        JOIN pg_attrdef ad ON ad.oid = d.objid
        JOIN pg_class c ON c.oid = ad.adrelid
        JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum
        WHERE d.classid = 'pg_attrdef'::regclass AND d.refclassid = 'pg_proc'::regclass
          AND d.refobjid = v_unbound AND NOT pg_is_other_temp_schema(c.relnamespace)
        UNION
        SELECT 'd', t.oid, 0::oid, 'd'::"char", t.typowner, t.oid::regtype::text, NULL
        FROM pg_depend d
        JOIN pg_type t ON t.oid = d.objid
        WHERE d.classid = 'pg_type'::regclass AND d.refclassid = 'pg_proc'::regclass AND d.refobjid = v_unbound
        ORDER BY 1, 2
    LOOP
        CONTINUE WHEN NOT by_owner AND NOT pg_has_role(r.owner, 'USAGE');
        v_what := CASE r.kind WHEN 'd' THEN format('domain %s', r.target)
                              ELSE format('column %s.%I', r.target, r.col) END;
        IF by_owner THEN
            v_ns := cosid._role_namespace(r.owner);
        ELSE
            v_reset := coalesce(cosid._namespace_reset(), 'default');
            v_session := coalesce(current_setting('cosid.namespace', true), v_reset);
            IF v_session <> v_reset THEN
                RAISE EXCEPTION 'the default cosid_next() of % would issue in namespace "%" here, but "%" was SET in this session',
                                v_what, v_reset, v_session
                    USING ERRCODE = '42P17',
                          DETAIL = format('A default cosid_next() is bound to one namespace when it is made: the one this '
                                          'session issues in without a SET (its server, database, role or connection '
                                          'setting: "%s"). A SET cosid.namespace (also SET LOCAL, set_config(), or one a '
                                          'pooler carried over from another client: here "%s") is not what the table''s '
                                          'other sessions issue in, so it is not guessed from.', v_reset, v_session),
                          HINT = format('Name the namespace in the default: DEFAULT cosid_next(%L), or DEFAULT '
                                        'cosid_next(%L); or RESET cosid.namespace first.', v_session, v_reset);
            END IF;
            v_ns := v_reset;
        END IF;
        -- The default as it is now: a command run below may have bound it already.
        IF r.kind = 'd' THEN
            SELECT cosid._bind_expr(t.typdefaultbin, 0, v_unbound, v_bound, v_ns) INTO v_expr
            FROM pg_type t WHERE t.oid = r.oid;
        ELSE
            SELECT cosid._bind_expr(ad.adbin, ad.adrelid, v_unbound, v_bound, v_ns) INTO v_expr
            FROM pg_attrdef ad WHERE ad.oid = r.oid;
        END IF;
        CONTINUE WHEN v_expr IS NULL;
        IF r.kind = 'd' THEN
            EXECUTE format('ALTER DOMAIN %s SET DEFAULT %s', r.target, v_expr);
        ELSIF r.relkind = 'v' THEN
            EXECUTE format('ALTER VIEW %s ALTER COLUMN %I SET DEFAULT %s', r.target, r.col, v_expr);
        ELSIF r.relkind = 'f' THEN
            EXECUTE format('ALTER FOREIGN TABLE ONLY %s ALTER COLUMN %I SET DEFAULT %s', r.target, r.col, v_expr);
        ELSE
            EXECUTE format('ALTER TABLE ONLY %s ALTER COLUMN %I SET DEFAULT %s', r.target, r.col, v_expr);
        END IF;
        IF by_owner THEN
            RAISE NOTICE 'cosid: the default of % now names namespace "%"', v_what, v_ns;
        END IF;
        v_done := v_done + 1;
    END LOOP;
    RETURN v_done;
END $$;
COMMENT ON FUNCTION cosid.bind_defaults(boolean) IS 'binds every default cosid_next() of this database to a namespace: cosid_next(''<namespace>'') (the event trigger cosid_bind_defaults runs it after each DDL command)';

CREATE FUNCTION cosid._bind_defaults_on_ddl() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_stack text;
BEGIN
    -- The ALTER commands cosid.bind_defaults runs fire this trigger again: it binds them all
    -- itself, so the inner runs return at once.
    GET DIAGNOSTICS v_stack = PG_CONTEXT;
    IF strpos(v_stack, 'function cosid.bind_defaults(') > 0 THEN
        RETURN;
    END IF;
    PERFORM cosid.bind_defaults();
END $$;

-- Defaults made before 1.6 read cosid.namespace in each inserting session: each is bound to
-- the namespace its owner's sessions issue in now (the owner's database and role settings,
-- then the server's), never a session's SET.  Before the event trigger exists, so that its
-- own run does not bind them by this session's setting instead.
SELECT cosid.bind_defaults(by_owner => true) AS defaults_bound;
-- Enabled ALWAYS: also under session_replication_role = replica (pg_restore --disable-triggers).
CREATE EVENT TRIGGER cosid_bind_defaults ON ddl_command_end EXECUTE FUNCTION cosid._bind_defaults_on_ddl();
ALTER EVENT TRIGGER cosid_bind_defaults ENABLE ALWAYS;
COMMENT ON FUNCTION cosid_next() IS 'next id of namespace cosid.namespace (in a default: bound to cosid_next(namespace) when the default is made)';

-- cosid_adopt's DETAIL for an integer or smallint column: "do not fit in type integer" (1.5 said "a integer").
CREATE OR REPLACE FUNCTION cosid_adopt(tbl regclass, col name, namespace text DEFAULT 'default')
RETURNS TABLE (adopted_table regclass, adopted_column name, adopted_namespace text, largest_id bigint,
               ids_above timestamptz, old_default text, new_default text, sequence text,
               sequence_action text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    v_ns      cosid.namespace;
    v_att     record;
    v_max     bigint;
    v_floor   bigint;
    v_seq     text;
    v_users   int;
    v_action  text := 'none';
    v_old     text;
    v_new     text;
BEGIN
    IF tbl IS NULL OR col IS NULL OR $3 IS NULL THEN
        RAISE EXCEPTION 'cosid_adopt: arguments must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT (pg_has_role('cosid_admin', 'MEMBER')
            OR (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user)) THEN
        RAISE EXCEPTION 'permission denied to adopt id columns into cosid'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'Only superusers and members of role cosid_admin may adopt id columns into cosid.',
                  HINT = 'GRANT cosid_admin TO the role that needs it.';
    END IF;
    v_ns := cosid._namespace_row($3);
    SELECT a.attnum, a.atttypid, a.attidentity, a.attgenerated, c.relkind, c.relowner INTO v_att
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
     WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column "%" of relation % does not exist', col, tbl USING ERRCODE = 'undefined_column';
    END IF;
    IF v_att.relkind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION '% is not a table', tbl USING ERRCODE = 'wrong_object_type';
    END IF;
    IF v_att.attgenerated <> '' THEN
        RAISE EXCEPTION 'column "%" of % is a generated column', col, tbl
            USING ERRCODE = 'feature_not_supported', DETAIL = 'A generated column cannot have a default.';
    END IF;
    IF v_att.atttypid <> 'bigint'::regtype THEN
        RAISE EXCEPTION 'cosid ids need a bigint column; column "%" of % is %', col, tbl, format_type(v_att.atttypid, NULL)
            USING ERRCODE = 'datatype_mismatch',
                  DETAIL = CASE WHEN v_att.atttypid IN ('integer'::regtype, 'smallint'::regtype)
                                THEN 'cosid ids are 63-bit numbers; they do not fit in type ' || format_type(v_att.atttypid, NULL) || '.'
                                WHEN v_att.atttypid = 'uuid'::regtype
                                THEN 'A uuid column cannot hold bigint ids, and its values have no order cosid could continue.'
                                ELSE 'cosid ids are bigint values.' END,
                  HINT = CASE WHEN v_att.atttypid IN ('integer'::regtype, 'smallint'::regtype)
                              THEN format('ALTER TABLE %s ALTER COLUMN %I TYPE bigint (it rewrites the table and its indexes, and every column referencing it must change too), then adopt it.', tbl, col)
                              WHEN v_att.atttypid = 'uuid'::regtype
                              THEN 'Keep the uuid key and add a bigint column with DEFAULT cosid_next() for order, or give new tables cosid ids.'
                              ELSE 'Convert the column to bigint first.' END;
    END IF;
    IF NOT pg_has_role(v_att.relowner, 'MEMBER') THEN
        RAISE EXCEPTION 'must be owner of table %', tbl USING ERRCODE = 'insufficient_privilege';
    END IF;

    -- No row arrives between the largest value and the new default.
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', tbl);
    EXECUTE format('SELECT max(%I) FROM %s', col, tbl) INTO v_max;
    SELECT pg_get_expr(d.adbin, d.adrelid) INTO v_old FROM pg_attrdef d WHERE d.adrelid = tbl AND d.adnum = v_att.attnum;
    v_seq := pg_get_serial_sequence(tbl::text, col);

    v_floor := cosid._adopt_raise($3, v_max, v_ns.timestamp_bits, v_ns.slot_bits, v_ns.sequence_bits,
                                  v_ns.epoch_ms, v_ns.unit);

    IF v_att.attidentity <> '' THEN
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I DROP IDENTITY', tbl, col);
        v_action := 'dropped with the identity';
    END IF;
    EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %I.cosid_next(%L::text)', tbl, col, '@extschema@', $3);
    SELECT pg_get_expr(d.adbin, d.adrelid) INTO v_new FROM pg_attrdef d WHERE d.adrelid = tbl AND d.adnum = v_att.attnum;
    IF v_att.attidentity = '' AND v_seq IS NOT NULL THEN
        -- Still used elsewhere (another column's default, a view): kept, no longer owned by the
        -- column (dropping the column must not drop it); else dropped.
        SELECT count(*) INTO v_users FROM pg_depend dp
         WHERE dp.refclassid = 'pg_class'::regclass AND dp.refobjid = v_seq::regclass AND dp.deptype = 'n';
        IF v_users = 0 THEN
            EXECUTE format('DROP SEQUENCE %s', v_seq);
            v_action := 'dropped';
        ELSE
            EXECUTE format('ALTER SEQUENCE %s OWNED BY NONE', v_seq);
            v_action := format('kept: %s other object%s use%s it; no longer owned by the column', v_users,
                               CASE WHEN v_users = 1 THEN '' ELSE 's' END, CASE WHEN v_users = 1 THEN 's' ELSE '' END);
        END IF;
    END IF;
    RAISE NOTICE 'cosid adopted column "%" of %: largest id %, new ids of namespace "%" are above %', col, tbl,
        coalesce(v_max::text, 'none (empty)'), $3, coalesce(to_timestamp(v_floor / 1000.0)::text, 'any id already');
    RETURN QUERY SELECT tbl, col, $3, v_max, to_timestamp(v_floor / 1000.0), v_old, v_new, v_seq, v_action;
END $$;

-- Where this server writes, from shared memory (src/pg/wal_position.cpp): the store asks
-- both first in every acquire and renewal (cosid._follow_timeline).  cosid._timeline() names
-- the timeline pg_walfile_name(pg_current_wal_lsn()) named, and fails as that did during
-- recovery; cosid._system_identifier() is pg_control_system()'s, without reading pg_control
-- from disk.
CREATE OR REPLACE FUNCTION cosid._timeline() RETURNS int
AS 'MODULE_PATHNAME', 'cosid_timeline' LANGUAGE C VOLATILE;
CREATE FUNCTION cosid._system_identifier() RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_system_identifier' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION cosid._system_identifier() FROM PUBLIC;

-- The lease rules (cosid--1.0.sql), checked on every change of a lease row, whoever makes it:
-- the same rules, in the same order, with the same error, from C (src/pg/lease_guard.cpp,
-- the rules in src/core/lease_rule.hpp).  Every acquire, renewal and release fires it, and
-- a PL/pgSQL trigger would build its expressions again in each of their transactions.  The
-- trigger lease_guard keeps calling it (ENABLE ALWAYS).
CREATE OR REPLACE FUNCTION cosid._lease_guard() RETURNS trigger
AS 'MODULE_PATHNAME', 'cosid_lease_guard' LANGUAGE C;

-- Every store write durable (cosid--1.0.sql): the same rule from C (src/pg/durable.cpp), which
-- raises a weaker synchronous_commit to "on" for the transaction, as before.
CREATE OR REPLACE FUNCTION cosid._durable() RETURNS void
AS 'MODULE_PATHNAME', 'cosid_durable' LANGUAGE C VOLATILE;

-- cosid_fork_acknowledge() waits (up to 30 s) until the keeper has declared every copy the
-- data directory shows (src/pg/fork.cpp): an acknowledgment must follow what it covers.
CREATE FUNCTION cosid._fork_declared_here() RETURNS void
AS 'MODULE_PATHNAME', 'cosid_fork_declared_here' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION cosid._fork_declared_here() FROM PUBLIC;

-- >>> CREATE EXTENSION only
-- CREATE EXTENSION cosid runs cosid--1.0.sql and then every update script in turn, this one
-- included; what only a new store needs is here, and runs when the extension was created by
-- the (sub)transaction that runs this script: the schema cosid became a member of the
-- extension in the same (sub)transaction that last wrote the extension's row (CREATE
-- EXTENSION inserts that row and rewrites it before each update script; ALTER EXTENSION
-- UPDATE rewrites it long after the schema was made).  A CREATE runs this block on the way to
-- any later version; what a later version needs only in a CREATE goes into a block of the
-- same kind at the end of its own update script.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_depend d
                     ON d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.refobjid = e.oid
                    WHERE e.extname = 'cosid' AND d.deptype = 'e'
                      AND d.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass
                      AND d.objid = 'cosid'::pg_catalog.regnamespace AND d.xmin = e.xmin) THEN
        RETURN;
    END IF;
    -- The store's limits as a new store's columns default to now (cosid--1.0.sql wrote its
    -- record with the defaults of 1.0: max_ttl 60 s).
    UPDATE cosid.store_state SET max_ttl_ms = DEFAULT;
    -- The default namespace as cosid_namespace_create makes one now: its slots start at the
    -- store's now (cosid._namespace_insert), not at 0 as cosid--1.0.sql made them.  A store
    -- made again after DROP EXTENSION then never starts a window below one of the store it
    -- replaces.  Only slots that no one ever held (all of them in a new store).
    IF NOT EXISTS (SELECT FROM cosid.lease WHERE namespace = 'default' AND (fence <> 0 OR ceiling <> 0 OR next_floor <> 0)) THEN
        DELETE FROM cosid.lease WHERE namespace = 'default';
        DELETE FROM cosid.namespace WHERE name = 'default';
        PERFORM cosid_namespace_create('default');
    END IF;
    -- A store made by a restore is not new: pg_restore (and a plain dump run through psql)
    -- runs CREATE EXTENSION first, each item committed by itself, and restores the origin's
    -- record of the store state only with the data, after the user tables and theirs.
    -- Meanwhile the store would grant windows from its now, below the ceilings its origin's
    -- holders still issue up to.  Both SET row_security off in their session (few other
    -- sessions do), and pg_restore names itself in application_name (also with
    -- --enable-row-security): then the record written here is a mark (cluster 0, timeline 0),
    -- and the store grants nothing until the origin's record has come (two records: the
    -- raise) or cosid_store_follow_timeline(restored => true) ran.  Only the session's own
    -- SET counts: a site that turns row_security off in postgresql.conf, or for a database or
    -- a role, is making a store, not restoring one.
    IF (SELECT setting = 'off' AND source = 'session' FROM pg_catalog.pg_settings WHERE name = 'row_security')
       OR pg_catalog.current_setting('application_name') = 'pg_restore' THEN
        UPDATE cosid.store_state SET system_identifier = 0, timeline = 0;
    END IF;
END $$;
-- <<< CREATE EXTENSION only

---------------------------------------------------------------------------------------
-- The history of the windows the store granted (issue 34): verify, not only trust.  Every
-- window a lease held, and every ceiling a static slot of this database recorded, kept for
-- a retention (cosid_history_settings) so that an auditor can ask the store two questions
-- no peer can answer: did two windows of a slot ever overlap (cosid_verify()), and which
-- server and window issued an id (cosid_issuer(id, namespace)).
-- A window's row is written when it is granted (an acquire: the fence changes and the slot
-- has a holder) and completed when it ends (taken over, released, revoked, freed by the
-- store's raise, its row deleted).  A renewal writes nothing: the live window's ceiling is
-- the lease row's own, and the trigger's WHEN clause skips it before any function runs.
---------------------------------------------------------------------------------------
CREATE TABLE cosid.window_history (
    namespace         text NOT NULL,
    slot              int NOT NULL,
    kind              text NOT NULL CHECK (kind IN ('lease', 'static')),
    fence             bigint,            -- the lease's fence while it held the window (NULL: static)
    floor             bigint NOT NULL,   -- store-clock Unix ms; ids of the window have floor < t <= ceiling
    -- The highest time the holder may have issued: the last ceiling the store knew while the
    -- window was live, and at a release in order the last timestamp the holder said it issued.
    ceiling           bigint NOT NULL,
    owner_key         text,
    incarnation       uuid,
    owner_role        name,              -- the store login that acquired it
    client_addr       inet,              -- its connection's address (NULL: a local socket or this server's keeper)
    -- This server's cluster when its own keeper was granted the window (a lease), or the
    -- cluster that recorded the ceiling (a static slot).
    system_identifier bigint,
    granted_at        timestamptz,       -- NULL: granted before the history began
    ended_at          timestamptz,       -- NULL: live (the lease row has its ceiling)
    ended_how         text,
    CHECK (ceiling >= floor),
    CHECK ((kind = 'lease') = (fence IS NOT NULL))
);
-- The window of a lease: its fence and floor (a namespace made again starts its fences anew,
-- above the old floors); cosid_issuer reads a slot's windows by it.  Not unique: a restore
-- may bring a row the store wrote too, and the readers take the two as one window.
CREATE INDEX window_history_window ON cosid.window_history (namespace, slot, fence, floor);
-- the purge: ended windows by their end
CREATE INDEX window_history_purge ON cosid.window_history (ceiling) WHERE ended_at IS NOT NULL;
-- No key (see above), and a publication FOR ALL TABLES takes it in: without a replica
-- identity, the UPDATE that ends a window and the purge's DELETE would be refused there, and
-- with them the acquire or release that made them.
ALTER TABLE cosid.window_history REPLICA IDENTITY FULL;

-- The retention: one row, written by cosid_history_settings (none: the default, 30 days).
CREATE TABLE cosid.history_settings (
    singleton     boolean NOT NULL DEFAULT true PRIMARY KEY CHECK (singleton),
    retention_ms  bigint NOT NULL CHECK (retention_ms BETWEEN 60000 AND 3155760000000)
);

REVOKE ALL ON cosid.window_history, cosid.history_settings FROM PUBLIC;
-- As cosid.lease: every column but the incarnation (what renew and release are called with)
-- and the address (pg_stat_activity shows other sessions' addresses to privileged roles only).
GRANT SELECT (namespace, slot, kind, fence, floor, ceiling, owner_key, owner_role, system_identifier, granted_at,
              ended_at, ended_how) ON cosid.window_history TO PUBLIC;
GRANT SELECT ON cosid.history_settings TO PUBLIC;
-- pg_dump carries both: a restored store still answers for the ids its origin issued, and
-- checks its own new windows against the origin's.
SELECT pg_catalog.pg_extension_config_dump('cosid.window_history', '');
SELECT pg_catalog.pg_extension_config_dump('cosid.history_settings', '');
-- Rows logical replication brings are skipped; a TRUNCATE it brings is refused.
CREATE TRIGGER keep_local BEFORE INSERT OR UPDATE OR DELETE ON cosid.window_history
    FOR EACH ROW EXECUTE FUNCTION cosid._keep_local();
CREATE TRIGGER keep_local BEFORE INSERT OR UPDATE OR DELETE ON cosid.history_settings
    FOR EACH ROW EXECUTE FUNCTION cosid._keep_local();
ALTER TABLE cosid.window_history ENABLE REPLICA TRIGGER keep_local;
ALTER TABLE cosid.history_settings ENABLE REPLICA TRIGGER keep_local;
CREATE TRIGGER keep_local_truncate BEFORE TRUNCATE ON cosid.window_history
    FOR EACH STATEMENT EXECUTE FUNCTION cosid._keep_local();
CREATE TRIGGER keep_local_truncate BEFORE TRUNCATE ON cosid.history_settings
    FOR EACH STATEMENT EXECUTE FUNCTION cosid._keep_local();
ALTER TABLE cosid.window_history ENABLE REPLICA TRIGGER keep_local_truncate;
ALTER TABLE cosid.history_settings ENABLE REPLICA TRIGGER keep_local_truncate;

CREATE FUNCTION cosid._history_retention_ms() RETURNS bigint
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce((SELECT h.retention_ms FROM cosid.history_settings h), 2592000000)
$$;

-- Ended windows whose ceiling is older than the retention, at most p_limit of them (the
-- oldest first, by index): every new window's row purges a few, so the work stays small.
-- (enable_seqscan off here and in the trigger below: a keeper's session keeps a plan made
-- while the table was small, and a sequential scan would grow with the history: 500 acquires
-- and releases took 1.6 s, then 3.8 s, then 7.1 s.)
CREATE FUNCTION cosid._history_purge(p_limit int) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET enable_seqscan = off AS $$
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
REVOKE ALL ON FUNCTION cosid._history_purge(int) FROM PUBLIC;

-- A lease row's change of window (its fence moved) or deletion: the old window ends (its row
-- completed, or written now if the history did not have it), and a new holder's window
-- begins.  The end's ceiling: a release in order lowers the next floor to the last timestamp
-- issued, which is where the window really ended; every other end keeps the ceiling.
CREATE FUNCTION cosid._window_history_lease() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET enable_seqscan = off AS $$
DECLARE
    v_end  bigint;
    v_how  text;
    v_ctx  text;
    v_sys  bigint;
    v_cut  bigint;
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
        -- (cosid._history_purge(100), inline: one call less on every acquire)
        v_cut := cosid.store_now() - cosid._history_retention_ms();
        DELETE FROM cosid.window_history h
         WHERE h.ctid = ANY (ARRAY(SELECT o.ctid FROM cosid.window_history o
                                    WHERE o.ended_at IS NOT NULL AND o.ceiling < v_cut ORDER BY o.ceiling LIMIT 100));
    END IF;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION cosid._window_history_lease() FROM PUBLIC;
-- WHEN: a renewal (same fence) queues nothing, nor a raise's change of a free slot.
-- OF fence: an UPDATE that does not set the fence (a renewal) does not even evaluate the WHEN,
-- which PostgreSQL would read and build again in every such UPDATE.  Only a BEFORE trigger
-- could change the fence without setting it, and cosid's own (lease_guard, keep_local) never
-- change a row; one an administrator adds could as well change a row after lease_guard.
CREATE TRIGGER window_history AFTER UPDATE OF fence ON cosid.lease
    FOR EACH ROW WHEN (OLD.fence IS DISTINCT FROM NEW.fence AND (OLD.incarnation IS NOT NULL OR NEW.incarnation IS NOT NULL))
    EXECUTE FUNCTION cosid._window_history_lease();
CREATE TRIGGER window_history_delete AFTER DELETE ON cosid.lease
    FOR EACH ROW WHEN (OLD.incarnation IS NOT NULL) EXECUTE FUNCTION cosid._window_history_lease();
ALTER TABLE cosid.lease ENABLE ALWAYS TRIGGER window_history;
ALTER TABLE cosid.lease ENABLE ALWAYS TRIGGER window_history_delete;

-- A static slot's recorded ceiling (cosid.static_ceiling) is its window's end, written before
-- the window is used.  A renewal continues the window before it: from the ceiling recorded
-- before (the same cluster's row).  A new window (a first one, one after a gap: a restart)
-- starts where its keeper's clock was, the new ceiling less cosid.static_ahead (the keeper
-- sets the ceiling that far past its clock or past its floor, whichever is later; in a layout
-- of seconds, the start of that clock's second), and never below what the keeper started
-- above: the slot's leases and other clusters' ceilings (cosid._static_recorded; for a row
-- of this cluster's own keeper).  The adopted floors (slot -1) are not windows.
CREATE FUNCTION cosid._window_history_static() RETURNS trigger
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
    PERFORM cosid._history_purge(100);
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION cosid._window_history_static() FROM PUBLIC;
CREATE TRIGGER window_history AFTER INSERT ON cosid.static_ceiling
    FOR EACH ROW WHEN (NEW.slot >= 0) EXECUTE FUNCTION cosid._window_history_static();
CREATE TRIGGER window_history_raised AFTER UPDATE ON cosid.static_ceiling
    FOR EACH ROW WHEN (NEW.slot >= 0 AND NEW.ceiling_ms > OLD.ceiling_ms) EXECUTE FUNCTION cosid._window_history_static();
ALTER TABLE cosid.static_ceiling ENABLE ALWAYS TRIGGER window_history;
ALTER TABLE cosid.static_ceiling ENABLE ALWAYS TRIGGER window_history_raised;

-- The history is evidence: whoever changes it (a superuser too; also under
-- session_replication_role = replica), a window keeps its slot, floor and holder, an ended
-- one stays as it ended, a live one's ceiling is lowered only when it ends, and no row goes
-- before it is older than the retention (cosid._history_purge), nor by TRUNCATE while one is.
CREATE FUNCTION cosid._window_history_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_problem text;
    v_cut bigint := cosid.store_now() - cosid._history_retention_ms();
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
    ELSIF TG_OP = 'DELETE' THEN
        IF OLD.ended_at IS NULL OR OLD.ceiling >= v_cut THEN
            v_problem := format('the window of slot %s of namespace "%s" (%s to %s) is %s', OLD.slot, OLD.namespace,
                                cosid._ms_text(OLD.floor), cosid._ms_text(OLD.ceiling),
                                CASE WHEN OLD.ended_at IS NULL THEN 'live' ELSE 'within the retention' END);
        END IF;
    ELSIF EXISTS (SELECT 1 FROM cosid.window_history h WHERE h.ended_at IS NULL OR h.ceiling >= v_cut) THEN
        v_problem := 'it holds windows within the retention';
    END IF;
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'cosid: cannot % cosid.window_history: %', lower(TG_OP), v_problem
            USING ERRCODE = 'integrity_constraint_violation',
                  DETAIL = 'The history of the windows the store granted is what cosid_verify() and cosid_issuer() read.',
                  HINT = 'Rows older than the retention go by themselves; shorten it with cosid_history_settings(retention => ...).';
    END IF;
    RETURN CASE TG_OP WHEN 'DELETE' THEN OLD WHEN 'UPDATE' THEN NEW END;
END $$;
REVOKE ALL ON FUNCTION cosid._window_history_guard() FROM PUBLIC;
CREATE TRIGGER window_history_guard BEFORE UPDATE OR DELETE ON cosid.window_history
    FOR EACH ROW EXECUTE FUNCTION cosid._window_history_guard();
CREATE TRIGGER window_history_guard_truncate BEFORE TRUNCATE ON cosid.window_history
    FOR EACH STATEMENT EXECUTE FUNCTION cosid._window_history_guard();
ALTER TABLE cosid.window_history ENABLE ALWAYS TRIGGER window_history_guard;
ALTER TABLE cosid.window_history ENABLE ALWAYS TRIGGER window_history_guard_truncate;

-- The history begins with the windows the lease rows show: each held lease's live window,
-- and each free slot's last one (an update from 1.5; a new store has none).
INSERT INTO cosid.window_history (namespace, slot, kind, fence, floor, ceiling, owner_key, incarnation, owner_role,
                                  ended_at, ended_how)
SELECT l.namespace, l.slot, 'lease', CASE WHEN l.incarnation IS NULL THEN l.fence - 1 ELSE l.fence END, l.floor,
       CASE WHEN l.incarnation IS NULL THEN least(l.ceiling, greatest(l.next_floor, l.floor)) ELSE l.ceiling END,
       coalesce(l.owner_key, l.previous_owner_key), l.incarnation, l.owner_role,
       CASE WHEN l.incarnation IS NULL THEN pg_catalog.clock_timestamp() END,
       CASE WHEN l.incarnation IS NULL THEN 'ended before the history began' END
  FROM cosid.lease l
 WHERE l.fence > 0;

-- The retention (at least 1 minute; default 30 days).  NULL leaves it as it is; returns it,
-- the windows the history holds and the end of the oldest.  Shortening it purges at once.
CREATE FUNCTION cosid_history_settings(retention interval DEFAULT NULL,
                                       OUT retention_now interval, OUT windows bigint, OUT live_windows bigint,
                                       OUT oldest_ceiling timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_ms bigint := pg_catalog.floor(extract(epoch FROM retention) * 1000)::bigint;
BEGIN
    IF v_ms IS NOT NULL THEN
        IF v_ms < 60000 OR v_ms > 3155760000000 THEN
            RAISE EXCEPTION 'cosid history retention must be between 1 minute and 100 years, got %', retention
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Keep windows at least as long as you may want to ask which server issued an id: the default is 30 days.';
        END IF;
        INSERT INTO cosid.history_settings AS s (singleton, retention_ms) VALUES (true, v_ms)
        ON CONFLICT (singleton) DO UPDATE SET retention_ms = excluded.retention_ms;
        PERFORM cosid._history_purge(2147483647);
    END IF;
    retention_now := cosid._history_retention_ms() * interval '1 millisecond';
    SELECT count(*), count(*) FILTER (WHERE h.ended_at IS NULL), pg_catalog.to_timestamp(min(h.ceiling) / 1000.0)
      INTO windows, live_windows, oldest_ceiling FROM cosid.window_history h;
END $$;
REVOKE ALL ON FUNCTION cosid_history_settings(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_history_settings(interval) TO cosid_admin;
COMMENT ON FUNCTION cosid_history_settings(interval) IS 'how long the store keeps the history of the windows it granted (superuser or cosid_admin to change it)';

-- Every window the store knows, one row each: the history's (a window recorded twice, e.g.
-- by a restore, taken once, at its highest ceiling) and the held leases' (their live ceiling).
-- With a namespace and slot, that slot's only (planned for them: read by index).
CREATE FUNCTION cosid._windows(p_namespace text DEFAULT NULL, p_slot int DEFAULT NULL)
RETURNS TABLE (namespace text, slot int, kind text, fence bigint, floor bigint, ceiling bigint, owner_key text,
               incarnation uuid, owner_role name, client_addr inet, system_identifier bigint,
               granted_at timestamptz, ended_at timestamptz, ended_how text, live boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN QUERY EXECUTE format($q$
    SELECT w.namespace, w.slot, w.kind, w.fence, max(w.floor), max(w.ceiling),
           (array_agg(w.owner_key) FILTER (WHERE w.owner_key IS NOT NULL))[1],
           (array_agg(w.incarnation) FILTER (WHERE w.incarnation IS NOT NULL))[1],
           (array_agg(w.owner_role) FILTER (WHERE w.owner_role IS NOT NULL))[1],
           (array_agg(w.client_addr) FILTER (WHERE w.client_addr IS NOT NULL))[1],
           max(w.system_identifier), min(w.granted_at), max(w.ended_at),
           (array_agg(w.ended_how ORDER BY w.ended_at DESC) FILTER (WHERE w.ended_how IS NOT NULL))[1],
           bool_or(w.live)
      FROM (SELECT h.namespace, h.slot, h.kind, h.fence, h.floor, h.ceiling, h.owner_key, h.incarnation, h.owner_role,
                   h.client_addr, h.system_identifier, h.granted_at, h.ended_at, h.ended_how, false AS live,
                   -- a static slot's window is known by its cluster and ceiling
                   CASE WHEN h.kind = 'lease' THEN h.floor ELSE h.ceiling END AS k
              FROM cosid.window_history h WHERE %1$s
            UNION ALL
            SELECT l.namespace, l.slot, 'lease', l.fence, l.floor, l.ceiling, l.owner_key, l.incarnation, l.owner_role,
                   NULL, NULL, NULL, NULL, NULL, true, l.floor
              FROM cosid.lease l WHERE l.incarnation IS NOT NULL AND %2$s) w
     GROUP BY w.namespace, w.slot, w.kind, w.fence, w.k, CASE WHEN w.kind = 'static' THEN w.system_identifier END
    $q$, CASE WHEN p_namespace IS NULL THEN 'true' ELSE 'h.namespace = $1 AND h.slot = $2' END,
         CASE WHEN p_namespace IS NULL THEN 'true' ELSE 'l.namespace = $1 AND l.slot = $2' END)
    USING p_namespace, p_slot;
END $$;
REVOKE ALL ON FUNCTION cosid._windows(text, int) FROM PUBLIC;

-- Who held a window, in words.
CREATE FUNCTION cosid._window_holder(p_kind text, p_owner_key text, p_owner_role name, p_client_addr inet,
                                     p_system_identifier bigint) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN p_kind = 'static'
                THEN format('static slot of cluster %s%s', p_system_identifier,
                            CASE WHEN p_system_identifier = (SELECT c.system_identifier FROM pg_catalog.pg_control_system() c)
                                 THEN ' (this server)' ELSE '' END)
                ELSE concat_ws(', ', coalesce(p_owner_key, 'owner key unknown'),
                               CASE WHEN p_system_identifier IS NOT NULL
                                    THEN format('this store''s own server (cluster %s)', p_system_identifier) END,
                               'store role ' || p_owner_role, 'from ' || host(p_client_addr)) END
$$;

-- Does a window of (f1, c1] share an id's time with one of (f2, c2]?  In a layout of seconds
-- a tick t is issued when floor < t x 1000 <= ceiling (the window rule): two windows meet
-- only if a whole second lies in both.
CREATE FUNCTION cosid._windows_meet(p_unit text, p_f1 bigint, p_c1 bigint, p_f2 bigint, p_c2 bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN p_unit = 's' THEN (least(p_c1, p_c2) / 1000) * 1000 > greatest(p_f1, p_f2)
                ELSE least(p_c1, p_c2) > greatest(p_f1, p_f2) END
$$;

-- Every two windows of one slot that overlap: none on a store whose rules held.  Read as
-- the history holds them (a static slot's window recorded twice, by its keeper and by a
-- restore of the history, is one: the same cluster, slot and ceiling): a window older
-- than the retention, or one granted in a tail of history the store lost (a failover, a
-- restore), is not there to compare.
CREATE FUNCTION cosid_verify()
RETURNS TABLE (namespace text, slot int, first_holder text, first_fence bigint, first_floor bigint,
               first_ceiling bigint, second_holder text, second_fence bigint, second_floor bigint,
               second_ceiling bigint, overlap_from timestamptz, overlap_to timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH w AS MATERIALIZED (
        SELECT w.*, coalesce(n.unit, 'ms') AS unit,
               row_number() OVER (PARTITION BY w.namespace, w.slot ORDER BY w.floor, w.ceiling, w.kind, w.fence,
                                                                        w.system_identifier) AS rn,
               max(w.ceiling) OVER (PARTITION BY w.namespace, w.slot ORDER BY w.floor, w.ceiling, w.kind, w.fence,
                                                                      w.system_identifier
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_max
          FROM cosid._windows() w LEFT JOIN cosid.namespace n ON n.name = w.namespace
         WHERE w.ceiling > w.floor),
    -- a window meets one before it (by floor) only if it meets the one that reached furthest
    flagged AS (
        SELECT * FROM w WHERE w.before_max IS NOT NULL AND cosid._windows_meet(w.unit, w.floor, w.ceiling, w.floor, w.before_max))
    SELECT a.namespace, a.slot,
           cosid._window_holder(a.kind, a.owner_key, a.owner_role, a.client_addr, a.system_identifier), a.fence,
           a.floor, a.ceiling,
           cosid._window_holder(b.kind, b.owner_key, b.owner_role, b.client_addr, b.system_identifier), b.fence,
           b.floor, b.ceiling,
           pg_catalog.to_timestamp(greatest(a.floor, b.floor) / 1000.0),
           pg_catalog.to_timestamp(least(a.ceiling, b.ceiling) / 1000.0)
      FROM flagged b
      JOIN w a ON a.namespace = b.namespace AND a.slot = b.slot AND a.rn < b.rn
     WHERE cosid._windows_meet(b.unit, a.floor, a.ceiling, b.floor, b.ceiling)
     ORDER BY a.namespace, a.slot, a.floor, b.floor
$$;
REVOKE ALL ON FUNCTION cosid_verify() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_verify() TO pg_monitor, cosid_admin;
COMMENT ON FUNCTION cosid_verify() IS 'every two windows of one slot in the store''s history that overlap: none when the window rule held (pg_monitor, cosid_admin)';

-- Which server and window issued an id: the id read with the namespace's layout, and every
-- window of its slot whose (floor, ceiling] holds its time (two rows: the slot had two windows
-- then, and cosid_verify() names them).  No window: one row saying why (older than the
-- retention, or not granted by this store).  Incarnations are shown to superusers and
-- cosid_admin, addresses also to pg_monitor.
CREATE FUNCTION cosid_issuer(id bigint, namespace text DEFAULT 'default')
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
REVOKE ALL ON FUNCTION cosid_issuer(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_issuer(bigint, text) TO pg_monitor, cosid_admin;
COMMENT ON FUNCTION cosid_issuer(bigint, text) IS 'the server and window that issued an id, from the store''s history of windows (pg_monitor, cosid_admin)';

-- cosid_stats(): leases_freed counts the leases the store's raise freed (after a failover, a
-- switchover or a restore).  Their backends issue up to the ceiling and move to a new lease
-- without an error, so leases_lost (its health check, the CosidLeaseLost alert) counts only
-- leases lost while in use, whose callers got ZC001.
DROP FUNCTION cosid_stats();
CREATE FUNCTION cosid_stats(OUT acquires bigint, OUT renewals bigint, OUT renewal_failures bigint,
                            OUT leases_lost bigint, OUT duplicate_owner_keys bigint,
                            OUT clock_skew_events bigint, OUT waits_at_ceiling bigint,
                            OUT ids_issued bigint, OUT releases bigint, OUT store_transactions bigint,
                            OUT owner_key text, OUT incarnation uuid, OUT store_failovers bigint,
                            OUT static_state_file text, OUT static_clock_guard boolean,
                            OUT static_writes bigint, OUT static_write_failures bigint,
                            OUT leases_freed bigint)
AS 'MODULE_PATHNAME', 'cosid_stats' LANGUAGE C VOLATILE;

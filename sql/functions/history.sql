-- The window history: every window the store granted, kept for cosid_verify(), and purged after
-- its retention.

-- Each definition here is the current one: the build puts this file into the update script
-- of the version being developed (sql/README.md).

-- The history is evidence: whoever changes it (a superuser too; also under
-- session_replication_role = replica), a window keeps its slot, floor and holder, an ended
-- one stays as it ended, a live one's ceiling is lowered only when it ends, and no row goes
-- before it is older than the retention (cosid._history_purge), nor by TRUNCATE while one is.
-- The retention is read only where it is needed: for a DELETE (each row a purge deletes) and
-- a TRUNCATE, not for the UPDATE that ends a window (a release, a takeover).
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
REVOKE ALL ON FUNCTION cosid._window_history_guard() FROM PUBLIC;

-- A lease row's change of window (its fence moved) or deletion: the old window ends (its row
-- completed, or written now if the history did not have it), and a new holder's window
-- begins.  The end's ceiling: a release in order lowers the next floor to the last timestamp
-- issued, which is where the window really ended; every other end keeps the ceiling.  One new
-- window in 32 purges (cosid.window_history_purge_tick counts them).  enable_seqscan off: a
-- keeper's session keeps a plan made while the history was small, and a sequential scan would
-- grow with it.  That setting prices a scan of a table without a usable index (store_state,
-- history_settings: a row each) past jit_above_cost, so jit is off too: LLVM compiled those
-- statements in every acquire, tens of milliseconds each (docs/capacity.md).
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
REVOKE ALL ON FUNCTION cosid._window_history_lease() FROM PUBLIC;

-- A static slot's recorded ceiling (cosid.static_ceiling) is its window's end, written before
-- the window is used.  A renewal continues the window before it: from the ceiling recorded
-- before (the same cluster's row).  A new window (a first one, one after a gap: a restart)
-- starts where its keeper's clock was, the new ceiling less cosid.static_ahead (the keeper
-- sets the ceiling that far past its clock or past its floor, whichever is later; in a layout
-- of seconds, the start of that clock's second), and never below what the keeper started
-- above: the slot's leases and other clusters' ceilings (cosid._static_recorded; for a row
-- of this cluster's own keeper).  The adopted floors (slot -1) are not windows.  One new
-- window in 32 purges, as for leases.
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
REVOKE ALL ON FUNCTION cosid._window_history_static() FROM PUBLIC;

CREATE OR REPLACE FUNCTION cosid._history_retention_ms() RETURNS bigint
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce((SELECT h.retention_ms FROM cosid.history_settings h), 2592000000)
$$;

-- Ended windows whose ceiling is older than the retention, at most p_limit of them (the
-- oldest first, by index): one new window in 32 purges up to 200, over six times as many as
-- age out, so the work stays small.  enable_seqscan and jit off as in
-- cosid._window_history_lease; both reach the functions and triggers it runs,
-- cosid._window_history_guard on each row it deletes.
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
REVOKE ALL ON FUNCTION cosid._history_purge(int) FROM PUBLIC;

-- The retention (at least 1 minute; default 30 days).  NULL leaves it as it is; returns it,
-- the windows the history holds and the end of the oldest.  Shortening it purges at once.
CREATE OR REPLACE FUNCTION cosid_history_settings(retention interval DEFAULT NULL,
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
COMMENT ON FUNCTION cosid_history_settings(interval) IS 'how long the store keeps the history of the windows it granted (superuser or cosid_admin to change it)';
REVOKE ALL ON FUNCTION cosid_history_settings(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_history_settings(interval) TO cosid_admin;

-- The ceiling of a window granted (p_prior = the floor) or renewed at store time p_now with
-- the granted ttl and the namespace's tolerance: now + ttl + tolerance, never below the prior
-- ceiling or the floor.  A floor further ahead (a raise, pg_upgrade's, a release at a ceiling
-- still ahead) gives an empty window until the store's clock comes within ttl + tolerance of
-- it; then it is issued from at once, ahead of the clock.  No reach from the floor or from the
-- store's current limits: the raise after a lost history covers only what a grant's own ttl
-- and tolerance reached.  The rule is src/core's window_ceiling; model_compare.sh holds the
-- two to each other.  (Plain SQL without SET: it is inlined into the UPDATE that calls it.)
CREATE OR REPLACE FUNCTION cosid._window_ceiling(p_floor bigint, p_prior bigint, p_ttl bigint, p_tol bigint, p_now bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT GREATEST(p_floor, p_prior, p_now + p_ttl + p_tol)
$$;
REVOKE ALL ON FUNCTION cosid._window_ceiling(bigint, bigint, bigint, bigint, bigint) FROM PUBLIC;

-- Who held a window, in words.
CREATE OR REPLACE FUNCTION cosid._window_holder(p_kind text, p_owner_key text, p_owner_role name, p_client_addr inet,
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

-- Every window the store knows, one row each: the history's (a window recorded twice, e.g.
-- by a restore, taken once, at its highest ceiling) and the held leases' (their live ceiling).
-- With a namespace and slot, that slot's only (planned for them: read by index).
CREATE OR REPLACE FUNCTION cosid._windows(p_namespace text DEFAULT NULL, p_slot int DEFAULT NULL)
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

-- Does a window of (f1, c1] share an id's time with one of (f2, c2]?  In a layout of seconds
-- a tick t is issued when floor < t x 1000 <= ceiling (the window rule): two windows meet
-- only if a whole second lies in both.
CREATE OR REPLACE FUNCTION cosid._windows_meet(p_unit text, p_f1 bigint, p_c1 bigint, p_f2 bigint, p_c2 bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN p_unit = 's' THEN (least(p_c1, p_c2) / 1000) * 1000 > greatest(p_f1, p_f2)
                ELSE least(p_c1, p_c2) > greatest(p_f1, p_f2) END
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

CREATE OR REPLACE FUNCTION cosid._ms_text(p_ms bigint) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN p_ms BETWEEN 0 AND 9224318015999999
                THEN pg_catalog.to_char(pg_catalog.to_timestamp(p_ms / 1000.0) AT TIME ZONE 'UTC',
                                        'YYYY-MM-DD HH24:MI:SS.MS') || ' UTC'
                ELSE p_ms::text || ' ms (Unix time)' END
$$;

-- Every two windows of one slot that overlap: none on a store whose rules held.  Read as
-- the history holds them (a static slot's window recorded twice, by its keeper and by a
-- restore of the history, is one: the same cluster, slot and ceiling): a window older
-- than the retention, or one granted in a tail of history the store lost (a failover, a
-- restore), is not there to compare.
CREATE OR REPLACE FUNCTION cosid_verify()
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
COMMENT ON FUNCTION cosid_verify() IS 'every two windows of one slot in the store''s history that overlap: none when the window rule held (pg_monitor, cosid_admin)';
REVOKE ALL ON FUNCTION cosid_verify() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_verify() TO pg_monitor, cosid_admin;

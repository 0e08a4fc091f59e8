-- cosid_health(): one row per check, with what was found and what to do.

-- Each definition here is the current one: the build puts this file into the update script
-- of the version being developed (sql/README.md).

-- cosid_health(): one row per check, every check always present, each ok, warning
-- or critical, with what it found and what to do (docs/monitoring.md has a section per check,
-- which the alert rules of contrib/prometheus link to).

-- What shared memory knows (src/pg/keeper/health.cpp).  Ages in ms (NULL: never happened); without
-- the library preloaded only preloaded (false), store_remote and ttl_ms.
CREATE OR REPLACE FUNCTION cosid._health_state(
    OUT preloaded boolean, OUT store_remote boolean, OUT ttl_ms bigint, OUT keeper_pid int, OUT keeper_ready boolean,
    OUT keeper_problem int, OUT keeper_problem_message text, OUT owner_key text, OUT store_ok_age_ms bigint,
    OUT renewal_ok_age_ms bigint, OUT renewal_failed_age_ms bigint, OUT failing_for_ms bigint,
    OUT failures_in_row bigint, OUT lease_lost_age_ms bigint, OUT skew_ms bigint, OUT skew_tolerance_ms bigint,
    OUT skew_age_ms bigint, OUT keeper_age_ms bigint, OUT static_slots boolean, OUT state_file boolean,
    OUT static_refused boolean, OUT leases int, OUT facts_age_ms bigint, OUT max_ttl_ms bigint,
    OUT max_tolerance_ms bigint, OUT raise_floors boolean, OUT standbys int, OUT sync_standbys int,
    OUT sync_names boolean, OUT facts_error text, OUT other_incarnations int)
AS 'MODULE_PATHNAME', 'cosid_health_state' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION cosid._health_state() FROM PUBLIC;
-- read-only facts, for the metrics of contrib/prometheus too
GRANT EXECUTE ON FUNCTION cosid._health_state() TO pg_monitor, cosid_admin;

-- The windows this instance issues in from the store, read once from cosid_pool() for
-- cosid_health() and for the metric cosid_keeper_window_left_seconds (contrib/prometheus):
-- the ms left in the shortest window held, by this server's clock (NULL while none is held),
-- and the smallest tolerance among the namespaces it holds leases in (NULL while none).
CREATE OR REPLACE FUNCTION cosid._pool_windows(OUT window_left_ms bigint, OUT min_tolerance_ms bigint)
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT min(p.ceiling) FILTER (WHERE p.state = 'active') - (extract(epoch FROM clock_timestamp()) * 1000)::bigint,
           min(n.tolerance_ms)
      FROM @extschema@.cosid_pool() p LEFT JOIN cosid.namespace n ON n.name = p.namespace
     WHERE p.kind = 'lease'
$$;
REVOKE ALL ON FUNCTION cosid._pool_windows() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid._pool_windows() TO pg_monitor, cosid_admin;

-- The store's limits and replication, for cosid_health() here and for the keepers of other
-- instances (they read it every ttl/3), and how many other live incarnations hold leases
-- with the caller's owner key.  SECURITY DEFINER: pg_stat_replication shows its sync_state,
-- and cosid.lease its incarnations, to privileged roles only.  A standby counts as
-- synchronous when a commit waits for it (sync, quorum); a potential or asynchronous one may
-- be promoted without the last grants.
CREATE OR REPLACE FUNCTION cosid._store_health(p_owner_key text DEFAULT NULL, p_incarnation uuid DEFAULT NULL,
                                    OUT max_ttl_ms bigint, OUT max_tolerance_ms bigint, OUT raise_floors boolean,
                                    OUT standbys int, OUT sync_standbys int, OUT sync_names boolean,
                                    OUT store_now bigint, OUT other_incarnations int,
                                    OUT failovers int, OUT timeline int)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT s.max_ttl_ms, s.max_tolerance_ms, s.raise_floors_on_new_timeline,
           (SELECT count(*) FROM pg_stat_replication)::int,
           (SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum'))::int,
           current_setting('synchronous_standby_names') <> '',
           n.now,
           (SELECT count(DISTINCT l.incarnation) FROM cosid.lease l
             WHERE l.owner_key = p_owner_key AND l.incarnation IS DISTINCT FROM p_incarnation
               AND l.expires_at > n.now)::int,
           s.failovers, s.timeline
      FROM cosid.store_state s, (SELECT cosid.store_now() AS now) n
     ORDER BY s.created_at DESC LIMIT 1
$$;
REVOKE ALL ON FUNCTION cosid._store_health(text, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid._store_health(text, uuid) TO cosid_keeper;

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
    v_left bigint;           -- ms left in the shortest window held (renewals)
    v_ttl bigint;            -- the ttl granted, the tolerance and the pause of a raise (floor_raise)
    v_tol bigint;
    v_pause bigint;
    w record;                -- the windows held (cosid._pool_windows), read once
BEGIN
    SELECT * INTO h FROM cosid._health_state();
    IF h.preloaded THEN
        SELECT * INTO w FROM cosid._pool_windows();
    ELSE
        SELECT NULL::bigint AS window_left_ms, NULL::bigint AS min_tolerance_ms INTO w;
    END IF;
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

    -- renewals: what is at risk is the window held (ids stop when it runs out), not how long
    -- renewals have failed.  A renewal extends it to about a ttl ahead every ttl/3: critical
    -- when renewals fail and the shortest window held has less than a quarter of a ttl left (at
    -- ttl 60 s, 15 s before ids stop), or, with none held, after half a ttl of failures; a
    -- warning while they fail with more left; ok once they succeed again (a store switchover
    -- the windows rode out), the last failure named for 15 minutes.  The same rule as the
    -- alert CosidRenewalsFailing (contrib/prometheus).
    name := 'renewals'; hint := NULL;
    IF NOT h.preloaded THEN
        status := 'ok'; detail := 'not known: cosid is not preloaded here';
    ELSIF h.failures_in_row > 0 THEN
        v_left := w.window_left_ms;
        status := CASE WHEN v_left < h.ttl_ms / 4 OR (v_left IS NULL AND h.failing_for_ms >= h.ttl_ms / 2)
                       THEN 'critical' ELSE 'warning' END;
        detail := format('renewals have failed for %s ms (%s in a row; ttl %s ms); %s', h.failing_for_ms,
                         h.failures_in_row, h.ttl_ms,
                         CASE WHEN v_left IS NULL THEN 'no window held'
                              WHEN v_left <= 0 THEN 'the shortest window held has run out: cosid_next() waits or fails'
                              ELSE format('the shortest window held has %s ms left', v_left) END);
        hint := 'See docs/monitoring.md#renewals';
    ELSIF h.renewal_failed_age_ms < c_recent_ms THEN
        status := 'ok';
        detail := format('a renewal failed %s s ago; renewals succeed again', round(h.renewal_failed_age_ms / 1000.0));
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
    ELSIF f.raise_floors AND h.preloaded
          AND coalesce(pg_catalog.current_setting('cosid.store_only', true), 'off') <> 'on' THEN
        -- What the raise costs this server (docs/monitoring.md#floor_raise): the raise puts the
        -- next floors max_ttl + 2 x max_tolerance past the store's clock, and a new window is
        -- issued from once the clock is within its ttl + tolerance of its floor; the window held
        -- covers ttl + tolerance from its last renewal, at most ttl/3 before.  The difference is
        -- a pause of ids here, beyond the failover's own time: a warning whenever there is one
        -- (a configuration that will stop ids is said before it does).
        v_ttl := least(h.ttl_ms, f.max_ttl_ms);
        v_tol := coalesce(w.min_tolerance_ms, (SELECT min(n.tolerance_ms) FROM cosid.namespace n), 1000);
        v_pause := greatest(0, f.max_ttl_ms + 2 * f.max_tolerance_ms - 2 * (v_ttl + v_tol) + v_ttl / 3);
        status := CASE WHEN v_pause > 0 THEN 'warning' ELSE 'ok' END;
        detail := format('the store raises the floors after a failover (%s standbys, %s synchronous) by max_ttl %s ms + '
                         '2 x max_tolerance %s ms; this server''s windows cover %s ms (ttl %s ms + tolerance %s ms): %s',
                         f.standbys, f.sync_standbys, f.max_ttl_ms, f.max_tolerance_ms, v_ttl + v_tol, v_ttl, v_tol,
                         CASE WHEN v_pause = 0 THEN 'no pause of ids'
                              ELSE format('ids here pause for up to %s s after a failover, beyond its own time',
                                          ceil(v_pause / 1000.0)) END);
        IF status = 'warning' THEN
            hint := 'Lower the store''s max_ttl and max_tolerance toward this server''s cosid.ttl and tolerance, '
                    'or raise cosid.ttl. See docs/monitoring.md#floor_raise';
        END IF;
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
            detail := format('Citus worker (group %s) without cosid.store_dsn: cosid_next() is refused here, '
                             'since its own store would grant slots the other nodes hold', v_group);
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
COMMENT ON FUNCTION cosid_health() IS 'one row per health check: ok, warning or critical, what was found and what to do (pg_monitor, cosid_admin)';
REVOKE ALL ON FUNCTION cosid_health() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_health() TO pg_monitor, cosid_admin;

-- cosid 1.4 -> 1.5: static slots survive pg_upgrade and a restore into a new cluster
-- (issue 23): the keeper records each static window's ceiling in cosid.static_ceiling too.
\echo Use "ALTER EXTENSION cosid UPDATE TO '1.5'" to load this file. \quit

-- Static slots (cosid.static_slots) keep their ceilings in a state file in the data directory.
-- A new cluster made from this one (pg_upgrade, which leaves the file in the old data
-- directory; a dump restored elsewhere; a logical replica switched over to) has the database
-- but not the file: the keeper also records each static window's ceiling here, before the
-- file, and a keeper starts a slot's next window above the rows other clusters wrote, and
-- above its own row when its kept file holds no window for the slot
-- (src/core/static_state: static_recorded_ms).  One row per cluster: rows that logical
-- replication or a restore brings never collide with the ones this cluster writes.
CREATE TABLE cosid.static_ceiling (
    namespace         text NOT NULL,
    slot              int NOT NULL CHECK (slot BETWEEN -1 AND 65535),  -- -1: every slot (cosid_adopt's floor)
    system_identifier bigint NOT NULL,                           -- of the cluster that wrote it
    ceiling_ms        bigint NOT NULL CHECK (ceiling_ms >= 0),  -- Unix ms; no id of the slot above it
    written_at        timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    PRIMARY KEY (namespace, slot, system_identifier)
);
REVOKE ALL ON cosid.static_ceiling FROM PUBLIC;
GRANT SELECT ON cosid.static_ceiling TO PUBLIC;
-- pg_dump carries it: a restore into a new cluster with the same static slots starts above it.
SELECT pg_catalog.pg_extension_config_dump('cosid.static_ceiling', '');
-- Rows logical replication brings are kept (each cluster's own key); a TRUNCATE it brings is
-- refused, as for the store's tables: it would forget this server's own ceilings.
CREATE TRIGGER keep_local_truncate BEFORE TRUNCATE ON cosid.static_ceiling
    FOR EACH STATEMENT EXECUTE FUNCTION cosid._keep_local();
ALTER TABLE cosid.static_ceiling ENABLE REPLICA TRIGGER keep_local_truncate;

-- The keeper's write of a window's ceiling (this cluster's row; never lowered: a window
-- released early keeps its ceiling here, only the state file holds the exact last id).
-- Locally durable whatever synchronous_commit says, and no more: only a cluster made from
-- this one reads the row, never a standby that is waited for.
CREATE FUNCTION cosid._static_record(p_namespace text, p_slot int, p_ceiling_ms bigint) RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    SELECT pg_catalog.set_config('synchronous_commit', 'local', true);
    INSERT INTO cosid.static_ceiling AS c (namespace, slot, system_identifier, ceiling_ms)
    SELECT p_namespace, p_slot, s.system_identifier, p_ceiling_ms FROM pg_catalog.pg_control_system() s
    ON CONFLICT (namespace, slot, system_identifier) DO UPDATE
       SET ceiling_ms = greatest(c.ceiling_ms, excluded.ceiling_ms), written_at = pg_catalog.clock_timestamp()
    RETURNING ceiling_ms
$$;
REVOKE ALL ON FUNCTION cosid._static_record(text, int, bigint) FROM PUBLIC;

-- What the keeper reads before a static window: the largest ceiling other clusters recorded
-- for the slot or for the whole namespace (slot -1: the floor cosid_adopt raised, which holds
-- for a cluster serving the namespace on any slot), this cluster's own (NULL where there is
-- none), and whether a restore is under way: CREATE EXTENSION left its mark in store_state
-- (the install script's DO block) and the origin's record has not come yet, so neither may the
-- origin's rows here (pg_restore brings cosid's data last, static_ceiling's before
-- store_state's): no static window until then.  "Others" also counts what this database
-- recorded as a lease store: a slot that was leased here before this server made it static
-- (cosid.static_slots added, a restart) starts above where the store's windows on it end,
-- and a namespace above the floor cosid_adopt raised while it was leased; ids the lease
-- issued ahead of the clock are not issued again.  A slot never leased has no such end (its
-- next_floor is only where a first lease would start).  A store's raise (a failover, a
-- restore, pg_upgrade) lifts next_floor ~70 s ahead for leases a lost tail of its history
-- may have granted, and the slot's own lease before the switch may be one of them (a copy
-- of the store that missed its last renewals: 20,000 of 20,000 ids twice when only the
-- ceiling was counted): it is counted, and such a slot waits for its clock after a raise, as
-- leased slots do.
CREATE FUNCTION cosid._static_recorded(p_namespace text, p_slot int, OUT others_ms bigint, OUT own_ms bigint,
                                       OUT restoring boolean)
LANGUAGE sql STABLE AS $$
    SELECT greatest(max(c.ceiling_ms) FILTER (WHERE c.system_identifier <> s.system_identifier),
                    (SELECT CASE WHEN l.incarnation IS NULL THEN l.next_floor ELSE greatest(l.next_floor, l.ceiling) END
                       FROM cosid.lease l
                      WHERE l.namespace = p_namespace AND l.slot = p_slot
                        AND coalesce(l.owner_key, l.previous_owner_key) IS NOT NULL),
                    (SELECT nullif(n.not_before_ms, 0) FROM cosid.namespace n WHERE n.name = p_namespace)),
           max(c.ceiling_ms) FILTER (WHERE c.system_identifier = s.system_identifier),
           (SELECT count(*) = 1 AND coalesce(bool_and(t.system_identifier = 0), false) FROM cosid.store_state t)
      FROM pg_catalog.pg_control_system() s
      LEFT JOIN cosid.static_ceiling c ON c.namespace = p_namespace AND c.slot IN (p_slot, -1)
$$;
REVOKE ALL ON FUNCTION cosid._static_recorded(text, int) FROM PUBLIC;

-- cosid_leases(): a slot with no floor (ceiling, next floor) yet shows NULL, not 1970-01-01.
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
           -- 0 is "none yet" (a slot never granted), not 1970
           to_timestamp(nullif(l.floor, 0) / 1000.0), to_timestamp(nullif(l.ceiling, 0) / 1000.0),
           to_timestamp(nullif(l.next_floor, 0) / 1000.0)
    FROM now, cosid.lease l
    WHERE now.noticed AND ($1 IS NULL OR l.namespace = now.checked)
    ORDER BY l.namespace, l.slot
$$;

-- cosid_health() (issue 25): one row per check, every check always present, each ok, warning
-- or critical, with what it found and what to do (docs/monitoring.md has a section per check,
-- which the alert rules of contrib/prometheus link to).

-- What shared memory knows (src/pg/health.cpp).  Ages in ms (NULL: never happened); without
-- the library preloaded only preloaded (false), store_remote and ttl_ms.
CREATE FUNCTION cosid._health_state(
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

-- The store's limits and replication, for cosid_health() here and for the keepers of other
-- instances (they read it every ttl/3), and how many other live incarnations hold leases
-- with the caller's owner key.  SECURITY DEFINER: pg_stat_replication shows its sync_state,
-- and cosid.lease its incarnations, to privileged roles only.  A standby counts as
-- synchronous when a commit waits for it (sync, quorum); a potential or asynchronous one may
-- be promoted without the last grants.
CREATE FUNCTION cosid._store_health(p_owner_key text DEFAULT NULL, p_incarnation uuid DEFAULT NULL,
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
-- Every keeper asks the above every ttl/3: its owner's leases are found by index, not by a
-- scan of every slot of every namespace (a store of 165,000 slots: 26-32 ms a call without it).
CREATE INDEX lease_owner_key ON cosid.lease (owner_key) WHERE owner_key IS NOT NULL;
REVOKE ALL ON FUNCTION cosid._store_health(text, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid._store_health(text, uuid) TO cosid_keeper;

CREATE FUNCTION cosid_health()
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
    ELSIF f.max_ttl_ms < h.ttl_ms THEN
        status := 'critical';
        detail := format('the store''s max_ttl is %s ms, below this keeper''s cosid.ttl %s ms: it refuses every '
                         'acquire and renewal', f.max_ttl_ms, h.ttl_ms);
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
END $$;
REVOKE ALL ON FUNCTION cosid_health() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_health() TO pg_monitor, cosid_admin;
COMMENT ON FUNCTION cosid_health() IS 'one row per health check: ok, warning or critical, what was found and what to do (pg_monitor, cosid_admin)';
-- Citus (issue 24, docs/citus.md): an error on a Citus worker, naming the coordinator; nothing
-- elsewhere (Citus' catalog is read as plain tables, Citus need not be loaded).  Called by
-- cosid_namespace_create (and, in C, by cosid_adopt): namespaces and the lease store live on
-- the coordinator.
CREATE FUNCTION cosid._refuse_on_citus_worker(what text) RETURNS void
AS 'MODULE_PATHNAME', 'cosid_refuse_on_citus_worker' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION cosid._refuse_on_citus_worker(text) FROM PUBLIC;

-- cosid_namespace_create refuses on a Citus worker (the first statement of its body).
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
-- A keeper's pass in one store transaction (issue 26): the renewals and releases due for
-- several leases of one incarnation, element k of each array describing lease k.  Each is
-- cosid.renew or cosid.release itself, with its checks (fence and incarnation, the store role
-- that acquired it, the timeline); a row per lease the store still held for the caller, ord
-- naming it (1-based), none for a lease that was lost.  SECURITY INVOKER: whoever may call
-- renew and release (cosid_keeper) may batch them, and nobody else.  An error in any element
-- rolls back the whole pass: the keeper then asks lease by lease, and so learns which.
CREATE FUNCTION cosid.lease_pass(p_incarnation uuid, p_ttl_ms bigint, p_release boolean[], p_namespace text[],
                                 p_slot int[], p_fence bigint[], p_number bigint[])
RETURNS TABLE (ord int, slot int, fence bigint, expires_at bigint, floor bigint, ceiling bigint,
               next_floor bigint, store_now bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n int := coalesce(array_length(p_namespace, 1), 0);
BEGIN
    IF coalesce(array_length(p_release, 1), 0) <> n OR coalesce(array_length(p_slot, 1), 0) <> n
       OR coalesce(array_length(p_fence, 1), 0) <> n OR coalesce(array_length(p_number, 1), 0) <> n THEN
        RAISE EXCEPTION 'cosid.lease_pass needs arrays of one length'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('namespace %s, release %s, slot %s, fence %s, number %s elements', n,
                                  coalesce(array_length(p_release, 1), 0), coalesce(array_length(p_slot, 1), 0),
                                  coalesce(array_length(p_fence, 1), 0), coalesce(array_length(p_number, 1), 0));
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

-- cosid.acquire grants only the namespace's slot range (regional stores, below).
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

---------------------------------------------------------------------------------------
-- Regional stores (issue 26): one namespace served by several lease stores, each granting
-- only its own range of the namespace's slots (cosid_namespace_create(..., slot_range =>
-- '[0,512)') on region A's store, '[512,1024)' on region B's), so that servers of different
-- regions never wait on a store across an ocean and never collide.  NULL: every slot.  The
-- rules (src/core/slot_range): a range lies within the layout's slots; one namespace has one
-- range per store, fixed once the store granted a slot of it; cosid.acquire grants only slots
-- in it (a preferred slot outside it too is passed over); a keeper keeps the range it first
-- saw for a namespace in its own database's copy of it and refuses a store stating another.
-- That ranges of different stores are disjoint is the operator's to keep: no store sees the
-- others.  Instances of one region keep their ids apart through their one store as before.
---------------------------------------------------------------------------------------
ALTER TABLE cosid.namespace ADD COLUMN slot_range int4range;
ALTER TABLE cosid.namespace ADD CONSTRAINT namespace_slot_range
    CHECK (slot_range IS NULL OR (NOT isempty(slot_range) AND NOT lower_inf(slot_range) AND NOT upper_inf(slot_range)
                                  AND lower(slot_range) >= 0 AND upper(slot_range) <= (1 << slot_bits)));

-- A namespace's range changes only while no slot of it was ever granted here: after that,
-- a narrower range would strand live leases outside it, and a wider or moved one would grant
-- slots another region's store may hold.  (An instance's copy of a store's namespace grants
-- nothing: an administrator may clear the range its keeper saw, to move it on purpose.)
CREATE FUNCTION cosid._namespace_range_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NEW.slot_range IS DISTINCT FROM OLD.slot_range THEN
        -- waits for acquires in flight (cosid.acquire): their grants are then seen below
        PERFORM pg_catalog.pg_advisory_xact_lock(1668248937, pg_catalog.hashtext(OLD.name));
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
CREATE TRIGGER namespace_range_guard BEFORE UPDATE ON cosid.namespace
    FOR EACH ROW EXECUTE FUNCTION cosid._namespace_range_guard();
ALTER TABLE cosid.namespace ENABLE ALWAYS TRIGGER namespace_range_guard;

-- cosid_namespace_create with a slot range: the layout as the function without one (which
-- it calls: same checks, same no-op for the same call again), then the range.
CREATE FUNCTION cosid_namespace_create(name text,
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
REVOKE ALL ON FUNCTION cosid_namespace_create(text, int4range, int, interval, timestamptz, int, text, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_namespace_create(text, int4range, int, interval, timestamptz, int, text, int) TO cosid_admin;
COMMENT ON FUNCTION cosid_namespace_create(text, int4range, int, interval, timestamptz, int, text, int) IS 'creates a namespace whose slots this store grants only within slot_range (regional stores; superuser or cosid_admin)';

-- The keeper's record of the range a store stated for a namespace, in this instance's copy of
-- it (cosid._namespace_sync made it): the first one is kept; the keeper refuses another
-- (src/core/slot_range: judge_store_range).  Returns the range kept before, NULL if none.
CREATE FUNCTION cosid._namespace_range_seen(p_name text, p_range int4range) RETURNS int4range
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
CREATE FUNCTION cosid._namespace_range_forget(p_name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.set_config('cosid_internal.range_record', 'on', true);
    UPDATE cosid.namespace n SET slot_range = NULL WHERE n.name = p_name;
    PERFORM pg_catalog.set_config('cosid_internal.range_record', '', true);
END $$;
REVOKE ALL ON FUNCTION cosid._namespace_range_forget(text) FROM PUBLIC;

-- A DELETE or TRUNCATE of lease rows forgets their windows, as DROP EXTENSION does (the
-- lease table is their only record; a namespace made again starts its slots at the store's
-- now): refused while a row's window, or a free slot's next floor, reaches past the store's
-- clock, as the DROP guard refuses (src/pg/drop_guard.cpp asks the same of every row).  A
-- TRUNCATE of cosid.namespace CASCADE truncates the lease table too and is held here.  Also
-- under session_replication_role = replica (the usual way to "turn triggers off" for a
-- cleanup); what logical replication brings is skipped or refused by keep_local, whose
-- triggers' names sort before these.  A TRUNCATE runs only at READ COMMITTED: it removes
-- every row whatever the snapshot, and at REPEATABLE READ or SERIALIZABLE the look below
-- reads the transaction's snapshot, taken before the TRUNCATE waited for its lock, which
-- misses a window an acquire granted meanwhile.  (A DELETE there fails on a row changed
-- since: could not serialize.)
CREATE FUNCTION cosid._lease_forget_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_now  bigint := cosid.store_now();
    v_slot int;
    v_ns   text;
    v_ends bigint;
BEGIN
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
          FROM cosid.lease l, LATERAL (SELECT CASE WHEN l.incarnation IS NULL THEN l.next_floor
                                                   ELSE greatest(l.ceiling, l.next_floor) END AS ends) e
         WHERE e.ends > v_now ORDER BY e.ends DESC LIMIT 1;
    ELSE
        v_ns := OLD.namespace; v_slot := OLD.slot;
        v_ends := CASE WHEN OLD.incarnation IS NULL THEN OLD.next_floor ELSE greatest(OLD.ceiling, OLD.next_floor) END;
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
CREATE TRIGGER lease_forget_guard BEFORE DELETE ON cosid.lease
    FOR EACH ROW EXECUTE FUNCTION cosid._lease_forget_guard();
CREATE TRIGGER lease_forget_guard_truncate BEFORE TRUNCATE ON cosid.lease
    FOR EACH STATEMENT EXECUTE FUNCTION cosid._lease_forget_guard();
ALTER TABLE cosid.lease ENABLE ALWAYS TRIGGER lease_forget_guard;
ALTER TABLE cosid.lease ENABLE ALWAYS TRIGGER lease_forget_guard_truncate;
REVOKE ALL ON FUNCTION cosid._lease_forget_guard() FROM PUBLIC;

ALTER TABLE cosid.lease DROP CONSTRAINT lease_namespace_fkey;
-- Lease rows that arrive after the store's raise (a restore's data loaded in parallel, by
-- pg_restore -j, in any order: cosid.store_state's record can come before the lease rows,
-- and the first store call then raises the rows that are there, not those still to come)
-- are raised as the raise would have raised them: a held one freed (its holder's history
-- is the one the raise gave up), every next floor at least the raise's now + max_ttl +
-- 2 x max_tolerance.  Rows made later (cosid._namespace_insert) start there already.
CREATE FUNCTION cosid._lease_arrives_raised() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_floor bigint;
BEGIN
    SELECT s.raised_at_ms + s.max_ttl_ms + 2 * s.max_tolerance_ms INTO v_floor
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
CREATE TRIGGER lease_arrives_raised BEFORE INSERT ON cosid.lease
    FOR EACH ROW EXECUTE FUNCTION cosid._lease_arrives_raised();
-- Also under session_replication_role = replica (a loader that "turns triggers off" that
-- way); rows logical replication brings are skipped before it by keep_local.
ALTER TABLE cosid.lease ENABLE ALWAYS TRIGGER lease_arrives_raised;
REVOKE ALL ON FUNCTION cosid._lease_arrives_raised() FROM PUBLIC;

-- A namespace's row goes only after its slots' rows (what a foreign key from cosid.lease
-- said before 1.5: it made a parallel restore fail whenever the lease rows came before the
-- namespace's, and the slots were lost); TRUNCATE cosid.namespace only with cosid.lease empty
-- (a TRUNCATE of cosid.lease before it, in the same transaction, counts).
CREATE FUNCTION cosid._namespace_delete_guard() RETURNS trigger
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
CREATE TRIGGER namespace_delete_guard BEFORE DELETE ON cosid.namespace
    FOR EACH ROW EXECUTE FUNCTION cosid._namespace_delete_guard();
CREATE TRIGGER namespace_delete_guard_truncate BEFORE TRUNCATE ON cosid.namespace
    FOR EACH STATEMENT EXECUTE FUNCTION cosid._namespace_delete_guard();
REVOKE ALL ON FUNCTION cosid._namespace_delete_guard() FROM PUBLIC;

-- The raise waits for transactions still writing lease rows (a parallel restore's load of
-- cosid.lease): see the LOCK in cosid._follow_timeline.
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
        IF v_raise THEN
            -- Waits for every transaction still writing lease rows, and holds off new ones
            -- until this one commits (readers go on): a row inserted meanwhile (pg_restore -j
            -- loads the lease table while the store's record, loaded already, makes a
            -- keeper's call raise) would be invisible to the UPDATE below, and its BEFORE
            -- INSERT trigger (cosid._lease_arrives_raised) would not see this raise yet.
            LOCK TABLE cosid.lease IN SHARE ROW EXCLUSIVE MODE;
        END IF;
        v_now := cosid.store_now();  -- after the wait
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

-- A namespace is not made over rows of its slots that came without its row (a parallel
-- restore's cosid.lease before its cosid.namespace): a clear 55000 instead of the lease table's 23505.
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
                    CASE WHEN raised_at_ms > 0 THEN raised_at_ms + max_ttl_ms + 2 * max_tolerance_ms ELSE 0 END)
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

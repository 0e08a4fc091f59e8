-- What an instance and its store show: the pool, the statistics, the leases and their owners.

-- Each definition here is the current one: the build puts this file into the update script
-- of the version being developed (sql/README.md).

CREATE OR REPLACE FUNCTION cosid_pool(OUT namespace text, OUT slot int, OUT fence bigint, OUT floor bigint,
                           OUT ceiling bigint, OUT expires_at timestamptz, OUT backends int,
                           OUT last_issued bigint, OUT last_id bigint, OUT state text, OUT kind text)
RETURNS SETOF record AS 'MODULE_PATHNAME', 'cosid_pool' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cosid_pool() IS 'the leases of this instance, shared by its backends, with the last id issued on each';

CREATE OR REPLACE FUNCTION cosid_stats(OUT acquires bigint, OUT renewals bigint, OUT renewal_failures bigint,
                            OUT leases_lost bigint, OUT duplicate_owner_keys bigint,
                            OUT clock_skew_events bigint, OUT waits_at_ceiling bigint,
                            OUT ids_issued bigint, OUT releases bigint, OUT store_transactions bigint,
                            OUT owner_key text, OUT incarnation uuid, OUT store_failovers bigint,
                            OUT static_state_file text, OUT static_clock_guard boolean,
                            OUT static_writes bigint, OUT static_write_failures bigint,
                            OUT leases_freed bigint)
AS 'MODULE_PATHNAME', 'cosid_stats' LANGUAGE C VOLATILE;

-- cosid_leases(): every slot of the store with its lease; a slot with no floor (ceiling, next
-- floor) yet shows NULL.  A free slot not yet brought up to the store's last raise (the lazy
-- raise, cosid._follow_timeline) shows the next floor the raise gives it.
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
           to_timestamp(l.expires_at / 1000.0), l.floor, l.ceiling, e.next_floor,
           CASE WHEN l.incarnation IS NULL THEN 'free'
                WHEN l.expires_at > now.ms THEN 'held'
                ELSE 'expired' END,
           -- 0 is "none yet" (a slot never granted), not 1970
           to_timestamp(nullif(l.floor, 0) / 1000.0), to_timestamp(nullif(l.ceiling, 0) / 1000.0),
           to_timestamp(nullif(e.next_floor, 0) / 1000.0)
    FROM now, cosid._raise_mark() m, cosid.lease l,
         LATERAL (SELECT cosid._raised_next_floor(l.next_floor, l.raise_seen, m.raise_count, m.raised_floor,
                                                  m.settled) AS next_floor) e
    WHERE now.noticed AND ($1 IS NULL OR l.namespace = now.checked)
    ORDER BY l.namespace, l.slot
$$;
COMMENT ON FUNCTION cosid_leases(text) IS 'every slot of the store with its lease';

-- Slots used per owner (an instance's cosid.owner_key) and how full each namespace is.
CREATE OR REPLACE VIEW cosid_owners AS
WITH l AS (SELECT l.*, l.expires_at > cosid.store_now() AS live FROM cosid.lease l)
SELECT l.namespace, l.owner_key,
       count(*) FILTER (WHERE l.live)::int AS held,
       count(*) FILTER (WHERE NOT l.live)::int AS expired,
       count(DISTINCT l.incarnation)::int AS incarnations,
       to_timestamp(max(l.ceiling) / 1000.0) AS last_ceiling_at,
       t.slots AS namespace_slots,
       t.in_use AS namespace_in_use,
       round(100.0 * t.in_use / t.slots, 1) AS namespace_in_use_pct
FROM l
JOIN (SELECT namespace, count(*)::int AS slots, count(incarnation)::int AS in_use
      FROM cosid.lease GROUP BY namespace) t USING (namespace)
WHERE l.incarnation IS NOT NULL
GROUP BY l.namespace, l.owner_key, t.slots, t.in_use;
COMMENT ON VIEW cosid_owners IS 'slots held and expired per owner key and namespace, with how full the namespace is';

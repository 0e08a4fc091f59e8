-- Forks: a copy of a data directory or of a store, marked, refused and acknowledged.

-- Each definition here is the current one: the build puts this file into the update script
-- of the version being developed (sql/README.md).

CREATE OR REPLACE FUNCTION cosid._fork_reason() RETURNS text
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

-- A copy its keeper recognised by a file in the data directory (cosid.fork: written by a
-- pg_upgrade that copied the data directory, or by an operator before starting a copy).
CREATE OR REPLACE FUNCTION cosid._fork_mark(p_reason text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    UPDATE cosid.store_state s SET fork_pending = p_reason WHERE s.fork_pending IS NULL
$$;
REVOKE ALL ON FUNCTION cosid._fork_mark(text) FROM PUBLIC;

-- cosid_fork_acknowledge() waits (up to 30 s) until the keeper has declared every copy the
-- data directory shows (src/pg/keeper/fork.cpp): an acknowledgment must follow what it covers.
CREATE OR REPLACE FUNCTION cosid._fork_declared_here() RETURNS void
AS 'MODULE_PATHNAME', 'cosid_fork_declared_here' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION cosid._fork_declared_here() FROM PUBLIC;

-- restored => true on a copy of an issuing server's data directory: the declaration belongs
-- to the data directory (a cosid.fork file, cosid._fork_file), so that a copy that switches
-- cosid.database is refused by that store too.  Returns the fork's id (the one the keeper
-- gives the file), NULL when a file was there already.
CREATE OR REPLACE FUNCTION cosid._fork_file(p_reason text) RETURNS text
AS 'MODULE_PATHNAME', 'cosid_fork_file' LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION cosid._fork_file(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION cosid._fork_lines(p_forks text, OUT fork_id text, OUT reason text) RETURNS SETOF record
LANGUAGE sql IMMUTABLE AS $$
    SELECT pg_catalog.split_part(l, E'\t', 1), pg_catalog.substr(l, pg_catalog.strpos(l, E'\t') + 1)
      FROM pg_catalog.regexp_split_to_table(p_forks, E'\n') l
     WHERE pg_catalog.strpos(l, E'\t') > 1
$$;
REVOKE ALL ON FUNCTION cosid._fork_lines(text) FROM PUBLIC;

-- p_forks: one "id<TAB>reason" line per fork the data directory keeps.  Returns the reason of
-- the first one not acknowledged here (after marking the store a fork: it grants nothing), or
-- NULL.
CREATE OR REPLACE FUNCTION cosid._fork_check(p_forks text) RETURNS text
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
        -- The state's row before cosid.fork_declared, in the store's lock order
        -- (cosid._store_state_lock).
        PERFORM cosid._fork_mark(v_reason);
        INSERT INTO cosid.fork_declared (fork_id, reason)
        SELECT f.fork_id, f.reason FROM cosid._fork_lines(p_forks) f
        ON CONFLICT (fork_id) DO NOTHING;
    END IF;
    RETURN v_reason;
END $$;
REVOKE ALL ON FUNCTION cosid._fork_check(text) FROM PUBLIC;

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
    PERFORM cosid._store_state_lock();
    v_reason := cosid._fork_reason();
    IF v_reason IS NULL THEN
        RETURN 'no fork to acknowledge: the store grants as usual';
    END IF;
    -- Every fork a data directory declared here is acknowledged with it (cosid._fork_check
    -- does not declare them again); before the raise takes the lease rows, in the store's
    -- lock order (cosid._store_state_lock).
    UPDATE cosid.fork_declared SET acknowledged_at = pg_catalog.clock_timestamp() WHERE acknowledged_at IS NULL;
    PERFORM cosid._follow_timeline(NULL, true, v_ms);
    RETURN format('fork acknowledged (%s): every slot freed, next floors at least %s + %s s (the reach cap)',
                  rtrim(v_reason, '.'), coalesce(stopped_at::text, 'now'),
                  pg_catalog.trim_scale(cosid._unseen_reach_cap_ms() / 1000.0));
END $$;
COMMENT ON FUNCTION cosid_fork_acknowledge(timestamptz) IS 'the other copy of this forked store''s server has stopped issuing: raise the floors from stopped_at and grant again (superuser or cosid_admin)';
REVOKE ALL ON FUNCTION cosid_fork_acknowledge(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_fork_acknowledge(timestamptz) TO cosid_admin;

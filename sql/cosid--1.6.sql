-- cosid 1.0: the lease store (schema cosid) and the user-facing functions.
\echo Use "CREATE EXTENSION cosid" to load this file. \quit

-- Administrators of the store: may create namespaces and release or revoke slots.
-- Keepers of other instances (cosid.store_dsn) log in as a member of cosid_keeper: it may
-- run acquire, renew and release, and nothing else; the tables stay read-only to it.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cosid_admin') THEN
        CREATE ROLE cosid_admin NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cosid_keeper') THEN
        CREATE ROLE cosid_keeper NOLOGIN;
    END IF;
END $$;

CREATE SCHEMA cosid;
GRANT USAGE ON SCHEMA cosid TO PUBLIC;

-- A namespace: a layout and its own set of slots; the row holds {limit, tolerance}.
CREATE TABLE cosid.namespace (
    name            text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9_.:-]{1,63}$'),
    slot_bits       int NOT NULL,
    sequence_bits   int NOT NULL,
    timestamp_bits  int NOT NULL,
    epoch_ms        bigint NOT NULL,
    unit            text NOT NULL CHECK (unit IN ('ms', 's')),
    tolerance_ms    bigint NOT NULL CHECK (tolerance_ms >= 0),
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- Store-clock Unix ms: no window of the namespace starts below it (cosid_adopt raises it
    -- above the largest id of a column it adopts).  It only grows.
    not_before_ms   bigint NOT NULL DEFAULT 0 CHECK (not_before_ms >= 0)
);

-- The bit widths and epoch every layout keeps (cosid.layout_check also checks that the
-- timestamps end before PostgreSQL's last one): a row edited by hand past them is refused.
ALTER TABLE cosid.namespace ADD CONSTRAINT namespace_layout_bits
    CHECK (timestamp_bits BETWEEN 31 AND 60 AND slot_bits BETWEEN 1 AND 16 AND sequence_bits BETWEEN 1 AND 22
           AND timestamp_bits + slot_bits + sequence_bits <= 63 AND epoch_ms BETWEEN 0 AND 9224318015999999);

-- One row per slot.  Times are store-clock Unix milliseconds; a holder issues t with
-- floor < t <= ceiling.  fence grows on every change of ownership.
CREATE TABLE cosid.lease (
    namespace           text NOT NULL,  -- no foreign key: see cosid._namespace_delete_guard
    slot                int NOT NULL CHECK (slot >= 0),
    owner_key           text,
    incarnation         uuid,
    fence               bigint NOT NULL DEFAULT 0,
    expires_at          bigint,
    floor               bigint NOT NULL DEFAULT 0,
    ceiling             bigint NOT NULL DEFAULT 0,
    next_floor          bigint NOT NULL DEFAULT 0,
    previous_owner_key  text,
    owner_role          name,  -- the store role (login) that acquired the lease: it alone renews and releases it
    PRIMARY KEY (namespace, slot),
    CHECK ((owner_key IS NULL) = (incarnation IS NULL))
);
-- An acquire looks up the slots this owner key holds or held last (sticky preference)
-- without reading every slot of a namespace.
CREATE INDEX lease_owner ON cosid.lease (namespace, (coalesce(owner_key, previous_owner_key)));

-- Finding the leases of one incarnation (the keeper's look for orphans at start).
CREATE INDEX lease_incarnation ON cosid.lease (incarnation, namespace, slot) WHERE incarnation IS NOT NULL;

-- The lease rules, checked on every change of a lease row, whoever makes it (the store's
-- functions, an administrator's UPDATE, a bug): a slot's floor never moves back, a held
-- lease's next_floor covers its ceiling, a new window starts at or above next_floor, a
-- renewal never lowers a ceiling, and next_floor goes down only when a release hands back
-- the unused end of a window (never below that window's floor).
CREATE FUNCTION cosid._lease_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_problem text;
BEGIN
    v_problem := CASE
        WHEN NEW.namespace <> OLD.namespace OR NEW.slot <> OLD.slot THEN 'a lease row never moves to another slot'
        WHEN NEW.fence < OLD.fence THEN 'the fence went down'
        WHEN NEW.floor < OLD.floor THEN 'the floor went down'
        WHEN NEW.ceiling < NEW.floor OR NEW.next_floor < NEW.floor THEN 'ceiling or next_floor below the floor'
        WHEN NEW.incarnation IS NOT NULL AND NEW.next_floor < NEW.ceiling THEN 'next_floor below the ceiling of a held lease'
        WHEN NEW.fence = OLD.fence AND NEW.incarnation IS DISTINCT FROM OLD.incarnation
            THEN 'the owner changed without a new fence'
        WHEN NEW.fence = OLD.fence AND (NEW.floor <> OLD.floor OR NEW.ceiling < OLD.ceiling)
            THEN 'a renewal moved the floor or lowered the ceiling'
        WHEN NEW.fence > OLD.fence AND NEW.incarnation IS NOT NULL AND NEW.floor < OLD.next_floor
            THEN 'a new window starts below next_floor'
        WHEN NEW.next_floor < OLD.next_floor AND NOT (OLD.incarnation IS NOT NULL AND NEW.incarnation IS NULL)
            THEN 'next_floor went down outside a release'
    END;
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'cosid lease rule broken on slot % of namespace "%": %', OLD.slot, OLD.namespace, v_problem
            USING ERRCODE = 'integrity_constraint_violation',
                  DETAIL = format('Before: fence %s, floor %s, ceiling %s, next_floor %s; after: fence %s, floor %s, ceiling %s, next_floor %s.',
                                  OLD.fence, OLD.floor, OLD.ceiling, OLD.next_floor,
                                  NEW.fence, NEW.floor, NEW.ceiling, NEW.next_floor),
                  HINT = 'Lease rows change only through cosid.acquire, renew, release and revoke (or cosid_release()).';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER lease_guard BEFORE UPDATE ON cosid.lease FOR EACH ROW EXECUTE FUNCTION cosid._lease_guard();
-- Also under session_replication_role = replica (logical replication's apply, some restores).
ALTER TABLE cosid.lease ENABLE ALWAYS TRIGGER lease_guard;

-- A namespace's layout and tolerance never change: ids already issued were packed with them,
-- and a live lease keeps issuing with them while every new acquire would read the new ones
-- ((T, 1, q) under 8 slot bits is (T, 4, q) under 10).  Its not-before only grows.  Checked
-- on every UPDATE, whoever makes it.
CREATE FUNCTION cosid._namespace_guard() RETURNS trigger
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
CREATE TRIGGER namespace_guard BEFORE UPDATE ON cosid.namespace FOR EACH ROW EXECUTE FUNCTION cosid._namespace_guard();
ALTER TABLE cosid.namespace ENABLE ALWAYS TRIGGER namespace_guard;

-- A store's tables never take rows from another server's history.  A publication FOR ALL
-- TABLES (or FOR TABLES IN SCHEMA cosid) publishes them too, and a subscriber that is a
-- cosid server would apply another store's leases onto its own live rows.  Rows that a
-- logical replication worker (apply or initial copy) brings are skipped here, silently, so
-- that the subscription goes on with the user's tables.  The trigger fires only under
-- session_replication_role = replica, where those workers run; its name sorts before the
-- guards, so a skipped row never reaches them.  A replicated TRUNCATE (the publisher's
-- TRUNCATE of its store) cannot be skipped by a trigger, and applied it would empty this
-- store under its live leases: it is refused, which stops the subscription until the
-- transaction is skipped (ALTER SUBSCRIPTION ... SKIP).
CREATE FUNCTION cosid._keep_local() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_stat_get_activity(pg_catalog.pg_backend_pid()) a
               WHERE a.backend_type LIKE 'logical replication%') THEN
        IF TG_OP = 'TRUNCATE' THEN
            RAISE EXCEPTION 'cosid: a replicated TRUNCATE of %.% refused: the lease store keeps its own history',
                            TG_TABLE_SCHEMA, TG_TABLE_NAME
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = 'A publication with the lease store''s tables (FOR ALL TABLES, FOR TABLES IN SCHEMA cosid) '
                               'carried another server''s TRUNCATE; here it would forget the windows of live leases.',
                      HINT = 'Skip that transaction with ALTER SUBSCRIPTION ... SKIP (lsn = the "finished at" LSN in the CONTEXT '
                             'of this error), or publish without truncate: WITH (publish = ''insert, update, delete'').';
        END IF;
        RETURN NULL;
    END IF;
    RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
END $$;
CREATE TRIGGER keep_local BEFORE INSERT OR UPDATE OR DELETE ON cosid.lease
    FOR EACH ROW EXECUTE FUNCTION cosid._keep_local();
CREATE TRIGGER keep_local BEFORE INSERT OR UPDATE OR DELETE ON cosid.namespace
    FOR EACH ROW EXECUTE FUNCTION cosid._keep_local();
ALTER TABLE cosid.lease ENABLE REPLICA TRIGGER keep_local;
ALTER TABLE cosid.namespace ENABLE REPLICA TRIGGER keep_local;
CREATE TRIGGER keep_local_truncate BEFORE TRUNCATE ON cosid.lease
    FOR EACH STATEMENT EXECUTE FUNCTION cosid._keep_local();
CREATE TRIGGER keep_local_truncate BEFORE TRUNCATE ON cosid.namespace
    FOR EACH STATEMENT EXECUTE FUNCTION cosid._keep_local();
ALTER TABLE cosid.lease ENABLE REPLICA TRIGGER keep_local_truncate;
ALTER TABLE cosid.namespace ENABLE REPLICA TRIGGER keep_local_truncate;

-- pg_dump keeps the namespaces users created and their slots' windows; the 'default'
-- namespace and its slots are made again by CREATE EXTENSION on restore.
SELECT pg_catalog.pg_extension_config_dump('cosid.namespace', 'WHERE name <> ''default''');
SELECT pg_catalog.pg_extension_config_dump('cosid.lease', 'WHERE namespace <> ''default''');

REVOKE ALL ON cosid.namespace, cosid.lease FROM PUBLIC;
-- Every column but the incarnation, which is what renew and release are called with.
GRANT SELECT ON cosid.namespace TO PUBLIC;
GRANT SELECT (namespace, slot, owner_key, fence, expires_at, floor, ceiling, next_floor, previous_owner_key, owner_role)
    ON cosid.lease TO PUBLIC;

-- The store's clock, in Unix ms.  cosid.store_clock_offset shifts it so that tests can move
-- the store's clock.  It is read in C, where the library defines it as superuser-only:
-- current_setting() would also read a placeholder that any role could SET on a store
-- server that does not preload cosid, and move the clock to take live leases early.
CREATE FUNCTION cosid._store_clock_offset() RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_store_clock_offset' LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE FUNCTION cosid.store_now() RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint + cosid._store_clock_offset()
$$;

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

-- Every store write must be durable before the keeper relies on it, whatever the server's
-- or role's synchronous_commit.  The keeper joins this function into the statement of each
-- acquire, renew and release, which raises a weaker level to "on" for that transaction
-- only (a stronger remote_apply, where configured, is kept).  No SET clause and no SECURITY
-- DEFINER: either would scope the change to this call instead of the transaction.
CREATE FUNCTION cosid._durable() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF pg_catalog.current_setting('synchronous_commit') IN ('off', 'local', 'remote_write') THEN
        PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
    END IF;
END $$;

-- The WAL timeline the store writes on: a promoted standby, or a server recovered to a point
-- in time, writes on a new one.  pg_walfile_name() names the timeline of the WAL being
-- inserted, at once after a promotion (pg_control_checkpoint() would lag until a checkpoint).
CREATE FUNCTION cosid._timeline() RETURNS int
LANGUAGE sql VOLATILE AS $$
    SELECT ('x' || substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8))::bit(32)::int
$$;

-- The store's own state: the cluster and WAL timeline it last wrote on, and what it does when
-- it finds itself elsewhere.  One row per install of the store: CREATE EXTENSION writes
-- one, and pg_dump carries it (an extension configuration table), so a store restored from
-- a dump holds the row of its origin beside the one its own CREATE EXTENSION wrote.  The
-- first store call that finds two rows, or a row of another cluster or timeline, knows the
-- store lost its latest history, and raises every floor (cosid._follow_timeline).
CREATE TABLE cosid.store_state (
    singleton       boolean NOT NULL DEFAULT true CHECK (singleton),  -- (its key before 1.4)
    -- the cluster and the WAL timeline the store last wrote on: another cluster (a restore
    -- elsewhere, a logical copy, pg_upgrade) counts as a new timeline too
    system_identifier bigint NOT NULL,
    timeline        int NOT NULL,
    -- On a new timeline the tail of the old one may be lost (an asynchronous standby
    -- promoted, a point-in-time recovery), and with it the last acquires and renewals: their
    -- holders may still issue up to ceilings this store does not know.  So every slot is
    -- freed and its next_floor raised above anything they could reach.  Off only where the
    -- store replicates synchronously (no committed change is ever lost).  A store restored
    -- from a dump always raises: a dump is always behind.
    raise_floors_on_new_timeline boolean NOT NULL DEFAULT true,
    -- The longest lease the store grants (acquire and renew refuse a longer ttl): the raise
    -- covers it.  A recorded "longest ttl asked for" would be lost in the same tail as the
    -- grant that needed it, so it is a limit set beforehand, on the store.
    max_ttl_ms      bigint NOT NULL DEFAULT 60000 CHECK (max_ttl_ms BETWEEN 300 AND 86400000),
    failovers       int NOT NULL DEFAULT 0,      -- new timelines seen
    last_failover_at timestamptz,
    raised_at_ms    bigint NOT NULL DEFAULT 0,   -- store now of the last raise: new slots start above it too
    -- The largest tolerance a namespace of this store may have (cosid_namespace_create
    -- refuses more): the raise's margin.  Like max_ttl a limit set beforehand: a namespace
    -- lost in a failover's tail takes its tolerance with it, and one made again may have a
    -- smaller one, so the margin never comes from a namespace row.
    max_tolerance_ms bigint NOT NULL DEFAULT 5000 CHECK (max_tolerance_ms BETWEEN 0 AND 3600000),
    store_id        uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid() PRIMARY KEY,
    created_at      timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),  -- of this record
    -- The incarnation of the keeper of this store's own server, which issues ids from it
    -- (set when that keeper starts, never cleared by a stop; not on a cosid.store_only
    -- server), and why the store is a fork waiting for cosid_fork_acknowledge()
    -- (cosid._fork_reason).
    issuer_incarnation uuid,
    fork_pending    text
);
INSERT INTO cosid.store_state (system_identifier, timeline)
SELECT system_identifier, cosid._timeline() FROM pg_catalog.pg_control_system();
REVOKE ALL ON cosid.store_state FROM PUBLIC;
GRANT SELECT ON cosid.store_state TO PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('cosid.store_state', '');
CREATE TRIGGER keep_local BEFORE INSERT OR UPDATE OR DELETE ON cosid.store_state
    FOR EACH ROW EXECUTE FUNCTION cosid._keep_local();
ALTER TABLE cosid.store_state ENABLE REPLICA TRIGGER keep_local;
CREATE TRIGGER keep_local_truncate BEFORE TRUNCATE ON cosid.store_state
    FOR EACH STATEMENT EXECUTE FUNCTION cosid._keep_local();
ALTER TABLE cosid.store_state ENABLE REPLICA TRIGGER keep_local_truncate;

-- Called first by every store mutation, and the one place that decides whether the store
-- still has its whole history.  It has when cosid.store_state holds exactly one row, of
-- this cluster and of the timeline it writes on.  Otherwise, in one transaction, it frees
-- every lease (fence + 2^32, so its holder's next renewal finds it lost) and raises every
-- slot's next_floor to at least now + max_ttl + 2 x max_tolerance of this server's clock,
-- and leaves one row, of here.  An old holder's ceiling is at most its grant's store time +
-- ttl + tolerance, and that store time is at most this now + tolerance when the two store
-- servers' clocks are within the tolerance of each other: no new window can then start
-- below a timestamp an old holder might still issue, whatever the holders' own clocks say.
-- The margin comes from the store's limits, never from a namespace row (which may be the
-- lost part).  A new timeline or cluster raises unless raise_floors_on_new_timeline is off
-- (synchronous replication loses nothing); more than one row (a restored dump: its origin
-- went on after the dump) or none always raises.  One caller raises; the others wait on
-- the table's lock and find it done.  An acquire or renewal then grants no lease longer than
-- max_ttl (cosid._granted_ttl): the raise covers no longer grant.
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

CREATE FUNCTION cosid._fork_reason() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE
             WHEN bool_or(s.fork_pending IS NOT NULL) THEN min(s.fork_pending)
             WHEN count(*) = 1 AND bool_or(s.issuer_incarnation IS NOT NULL AND s.system_identifier = c.system_identifier
                                           AND s.timeline <> cosid._timeline())
               THEN format('The store''s server was issuing ids on timeline %s when this copy of it went on, '
                           'on timeline %s (a promoted standby, a recovered backup).', min(s.timeline), cosid._timeline())
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

CREATE FUNCTION cosid._follow_timeline(p_ttl_ms bigint, p_fork_ack boolean, p_stopped_ms bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_tli     int := cosid._timeline();
    v_sys     bigint := (SELECT system_identifier FROM pg_catalog.pg_control_system());
    v_count   bigint;
    v_here    boolean;
    v_raise   boolean;
    v_now     bigint;
    v_base    bigint;
    v_rows    bigint := 0;
    v_fork    text;
    m         record;
BEGIN
    SELECT count(*), coalesce(bool_and(s.system_identifier = v_sys AND s.timeline = v_tli
                                       AND s.fork_pending IS NULL), false)
      INTO v_count, v_here FROM cosid.store_state s;
    IF NOT (v_count = 1 AND v_here) OR p_fork_ack THEN
        -- Conflicts with itself and with every writer of the table, not with readers.
        LOCK TABLE cosid.store_state IN SHARE ROW EXCLUSIVE MODE;
        SELECT count(*), coalesce(bool_and(s.system_identifier = v_sys AND s.timeline = v_tli
                                           AND s.fork_pending IS NULL), false)
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
        v_raise := v_count <> 1 OR m.raise_flag OR p_fork_ack;
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
                 WHEN v_count > 1 THEN format('restored from a dump (%s records of its state)', v_count)
                 WHEN v_count = 0 THEN 'its state was missing'
                 ELSE format('now writing on timeline %s of cluster %s (last write on timeline %s)', v_tli, v_sys,
                             m.timeline) END,
            CASE WHEN v_raise
                 THEN format('%s slots freed, their next_floor raised to at least %s + %s ms + 2 x %s ms',
                             v_rows, CASE WHEN v_base < v_now THEN format('now - %s ms', v_now - v_base) ELSE 'now' END,
                             m.max_ttl_ms, m.max_tolerance_ms)
                 ELSE 'floors left alone (raise_floors_on_new_timeline is off)' END;
    END IF;
END $$;
REVOKE ALL ON FUNCTION cosid._follow_timeline(bigint, boolean, bigint) FROM PUBLIC;

CREATE FUNCTION cosid._follow_timeline(p_ttl_ms bigint) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT cosid._follow_timeline(p_ttl_ms, false, NULL)
$$;
REVOKE ALL ON FUNCTION cosid._follow_timeline(bigint) FROM PUBLIC;

-- The ttl an acquire or renewal grants: what the keeper asked, at most the store's max_ttl
-- (a raise after a lost history covers no longer lease).  A longer cosid.ttl (reloaded on an
-- instance, or a store whose limit was lowered) gets shorter windows instead of an error: its
-- keeper renews them in time and logs a warning (src/core/lease_model.hpp, granted_ttl).
CREATE FUNCTION cosid._granted_ttl(p_ttl_ms bigint) RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT least(p_ttl_ms, min(s.max_ttl_ms)) FROM cosid.store_state s
$$;
REVOKE ALL ON FUNCTION cosid._granted_ttl(bigint) FROM PUBLIC;

-- How far ahead of the store's clock a namespace's floor may lie for the store to grant windows
-- above it: the longest lease and twice the largest tolerance, the margin of a failover's raise
-- (cosid._follow_timeline) and more than any window's ceiling reaches.  A keeper raises no floor
-- past it (cosid.raise_floor), and an acquire folds none past it into a lease row
-- (cosid.acquire): a floor far ahead would be kept by every slot it reached, for good.
CREATE FUNCTION cosid._floor_margin() RETURNS bigint
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(max(s.max_ttl_ms), 60000) + 2 * coalesce(max(s.max_tolerance_ms), 5000) FROM cosid.store_state s
$$;
REVOKE ALL ON FUNCTION cosid._floor_margin() FROM PUBLIC;

-- An administrator of the store: a superuser or a member of cosid_admin, as the session's login
-- (SECURITY DEFINER functions run as their owner).
CREATE FUNCTION cosid._is_admin() RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = session_user), false)
           OR pg_catalog.pg_has_role(session_user, 'cosid_admin', 'MEMBER')
$$;
REVOKE ALL ON FUNCTION cosid._is_admin() FROM PUBLIC;

-- A Unix time in ms as people read it, in UTC whatever the session's TimeZone.
-- (Past PostgreSQL's timestamps: the number.)
CREATE FUNCTION cosid._ms_text(p_ms bigint) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN p_ms BETWEEN 0 AND 9224318015999999
                THEN pg_catalog.to_char(pg_catalog.to_timestamp(p_ms / 1000.0) AT TIME ZONE 'UTC',
                                        'YYYY-MM-DD HH24:MI:SS.MS') || ' UTC'
                ELSE p_ms::text || ' ms (Unix time)' END
$$;

-- A distance in ms as people read it, in one unit, as format_span_ms (src/core/calendar) does:
-- "850 ms", "19.0 s", "12 min", "5 h", "40 days", "68.3 years".
CREATE FUNCTION cosid._ms_span(p_ms bigint) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN x.a < 10000 THEN p_ms || ' ms'
                WHEN x.a < 120000 THEN round(p_ms / 1000.0, 1) || ' s'
                WHEN x.a < 7200000 THEN (p_ms / 60000) || ' min'
                WHEN x.a < 172800000 THEN (p_ms / 3600000) || ' h'
                WHEN x.a < 63072000000 THEN (p_ms / 86400000) || ' days'
                ELSE trunc(p_ms / 31557600000.0, 1) || ' years' END
      FROM (SELECT abs(p_ms::numeric) AS a) x
$$;

-- Layout check and id unpacking live in the C++ core; these work without preloading.
CREATE FUNCTION cosid.layout_check(timestamp_bits int, slot_bits int, sequence_bits int,
                                   epoch_ms bigint, unit text)
RETURNS void AS 'MODULE_PATHNAME', 'cosid_layout_check' LANGUAGE C CALLED ON NULL INPUT;

CREATE FUNCTION cosid.unpack(id bigint, timestamp_bits int, slot_bits int, sequence_bits int,
                             epoch_ms bigint, unit text,
                             OUT ts_ms bigint, OUT slot int, OUT sequence int)
AS 'MODULE_PATHNAME', 'cosid_unpack' LANGUAGE C STRICT IMMUTABLE;

CREATE FUNCTION cosid._namespace_row(p_namespace text) RETURNS cosid.namespace
LANGUAGE plpgsql STABLE AS $$
DECLARE
    r cosid.namespace;
BEGIN
    IF p_namespace IS NULL THEN
        RAISE EXCEPTION 'cosid namespace must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO r FROM cosid.namespace WHERE name = p_namespace;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cosid namespace "%" does not exist', p_namespace
            USING ERRCODE = 'undefined_object',
                  HINT = 'Create it with cosid_namespace_create(''' || p_namespace || ''').';
    END IF;
    RETURN r;
END $$;

---------------------------------------------------------------------------------------
-- Store mutations.  Each try is ONE conditional UPDATE ... RETURNING on one row: under
-- READ COMMITTED a racing writer is waited for and the condition re-checked on the new
-- row version, so two acquirers never both win a slot.  Called by the lease keeper, each
-- in its own transaction.
---------------------------------------------------------------------------------------

CREATE FUNCTION cosid.acquire(p_namespace text, p_owner_key text, p_incarnation uuid,
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
    p_ttl_ms := cosid._granted_ttl(p_ttl_ms);
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

-- A lease belongs to the store role that acquired it (owner_role, the session's login role):
-- only that role renews or releases it.  On a store shared by many servers, one role per
-- server, a compromised or misconfigured server can then neither shorten, take nor hand on
-- another's window, even knowing its incarnation (which other roles cannot read: see
-- cosid.own_leases and cosid_leases()).  A lease acquired before cosid 1.4 has no role yet.
CREATE FUNCTION cosid._refuse_other_role(p_namespace text, p_slot int, p_incarnation uuid, p_fence bigint,
                                         p_what text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_role name;
BEGIN
    SELECT l.owner_role INTO v_role FROM cosid.lease l
     WHERE l.namespace = p_namespace AND l.slot = p_slot AND l.incarnation = p_incarnation AND l.fence = p_fence;
    IF FOUND AND v_role IS NOT NULL AND v_role <> session_user THEN
        RAISE EXCEPTION 'permission denied to % slot % of cosid namespace "%"', p_what, p_slot, p_namespace
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('The lease was acquired by store role %I; only that role renews or releases it.', v_role),
                  HINT = 'Each keeper renews and releases its own leases; an administrator frees another''s slot with cosid.revoke or cosid_release(namespace, slot).';
    END IF;
END $$;
REVOKE ALL ON FUNCTION cosid._refuse_other_role(text, int, uuid, bigint, text) FROM PUBLIC;

-- Renew: incarnation and fence must match; a replayed renew succeeds and never shrinks.
-- No row returned means the lease is lost.
CREATE FUNCTION cosid.renew(p_namespace text, p_slot int, p_incarnation uuid, p_fence bigint,
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
    PERFORM cosid._follow_timeline(p_ttl_ms);
    p_ttl_ms := cosid._granted_ttl(p_ttl_ms);
    PERFORM cosid._refuse_other_role(p_namespace, p_slot, p_incarnation, p_fence, 'renew');
    v_now := cosid.store_now();
    UPDATE cosid.lease l
       SET expires_at = greatest(l.expires_at, v_now + p_ttl_ms),
           ceiling    = greatest(greatest(l.expires_at, v_now + p_ttl_ms) + v_ns.tolerance_ms, l.floor),
           next_floor = greatest(greatest(l.expires_at, v_now + p_ttl_ms) + v_ns.tolerance_ms, l.floor),
           owner_role = session_user
     WHERE l.namespace = p_namespace AND l.slot = p_slot
       AND l.incarnation = p_incarnation AND l.fence = p_fence
       AND (l.owner_role IS NULL OR l.owner_role = session_user)
    RETURNING l.* INTO r;
    IF FOUND THEN
        RETURN QUERY SELECT r.slot, r.fence, r.expires_at, r.floor, r.ceiling, r.next_floor, v_now;
    END IF;
END $$;

-- Release in order: the exact last issued timestamp becomes the next holder's floor.
CREATE FUNCTION cosid.release(p_namespace text, p_slot int, p_incarnation uuid, p_fence bigint,
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
     WHERE l.namespace = p_namespace AND l.slot = p_slot
       AND l.incarnation = p_incarnation AND l.fence = p_fence
       AND (l.owner_role IS NULL OR l.owner_role = session_user)
    RETURNING l.* INTO r;
    IF FOUND THEN
        RETURN QUERY SELECT r.slot, r.fence, r.next_floor, v_now;
    END IF;
END $$;

-- Forced release by an administrator: no last timestamp is known, so the ceiling is used.
CREATE FUNCTION cosid.revoke(p_namespace text, p_slot int)
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

-- The leases of one incarnation acquired by the calling store role, one at a time after
-- (namespace, slot): the keeper's look for orphans at its start.  Incarnations are not
-- readable by other roles (cosid.lease's column privileges), so this is how a keeper finds
-- its own.
CREATE FUNCTION cosid.own_leases(p_incarnation uuid, p_after_namespace text, p_after_slot int)
RETURNS TABLE (slot int, fence bigint, ceiling bigint, namespace text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT l.slot, l.fence, l.ceiling, l.namespace FROM cosid.lease l
     WHERE l.incarnation = p_incarnation AND (l.namespace, l.slot) > (p_after_namespace, p_after_slot)
       AND (l.owner_role IS NULL OR l.owner_role = session_user)
     ORDER BY l.namespace, l.slot LIMIT 1
$$;
REVOKE ALL ON FUNCTION cosid.own_leases(uuid, text, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid.own_leases(uuid, text, int) TO cosid_keeper;

-- cosid_adopt, through the keeper: no window of the namespace starts at or below p_floor_ms
-- from now on.  The caller computed the floor from an id with its layout: the store's must
-- be the same, or the floor means another time.  Returns the namespace's not-before.
CREATE FUNCTION cosid.raise_floor(p_namespace text, p_floor_ms bigint, p_slot_bits int, p_sequence_bits int,
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

REVOKE ALL ON FUNCTION cosid.acquire(text, text, uuid, bigint, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION cosid.renew(text, int, uuid, bigint, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION cosid.release(text, int, uuid, bigint, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION cosid.revoke(text, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid.revoke(text, int) TO cosid_admin;
GRANT EXECUTE ON FUNCTION cosid.acquire(text, text, uuid, bigint, int),
                          cosid.renew(text, int, uuid, bigint, bigint),
                          cosid.release(text, int, uuid, bigint, bigint) TO cosid_keeper;

---------------------------------------------------------------------------------------
-- User-facing functions.
---------------------------------------------------------------------------------------

-- A namespace row and its slots (all free), for cosid_namespace_create and for the
-- keeper's copy of a remote store's namespace.
CREATE FUNCTION cosid._namespace_insert(p_name text, p_slot_bits int, p_sequence_bits int,
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
REVOKE ALL ON FUNCTION cosid._namespace_insert(text, int, int, int, bigint, text, bigint) FROM PUBLIC;

-- How this database's definition of a namespace differs in layout from the store's (what
-- cosid_parse() here would misread), or NULL when it matches or is not defined here.
-- The text reaches the caller of cosid_next() in the DETAIL of a 42P17.
CREATE FUNCTION cosid._layout_difference(p_name text, p_slot_bits int, p_sequence_bits int,
                                         p_timestamp_bits int, p_epoch_ms bigint, p_unit text)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT format('here %s/%s/%s bits, epoch %s ms, unit %s; in the lease store %s/%s/%s bits, epoch %s ms, unit %s',
                  n.timestamp_bits, n.slot_bits, n.sequence_bits, n.epoch_ms, n.unit,
                  p_timestamp_bits, p_slot_bits, p_sequence_bits, p_epoch_ms, p_unit)
    FROM cosid.namespace n
    WHERE n.name = p_name
      AND (n.timestamp_bits, n.slot_bits, n.sequence_bits, n.epoch_ms, n.unit)
          IS DISTINCT FROM (p_timestamp_bits, p_slot_bits, p_sequence_bits, p_epoch_ms, p_unit)
$$;

-- Citus (issue 24, docs/citus.md): an error on a Citus worker, naming the coordinator; nothing
-- elsewhere (Citus' catalog is read as plain tables, Citus need not be loaded).  Called by
-- cosid_namespace_create (and, in C, by cosid_adopt): namespaces and the lease store live on
-- the coordinator.
CREATE FUNCTION cosid._refuse_on_citus_worker(what text) RETURNS void
AS 'MODULE_PATHNAME', 'cosid_refuse_on_citus_worker' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION cosid._refuse_on_citus_worker(text) FROM PUBLIC;

CREATE FUNCTION cosid_namespace_create(name text,
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


-- With a remote store (cosid.store_dsn) the keeper copies each namespace it acquires in
-- from the store into this instance's table, so that cosid_parse() here reads the store's
-- layout; a local definition whose layout differs is refused rather than trusted.
CREATE FUNCTION cosid._namespace_sync(p_name text, p_slot_bits int, p_sequence_bits int,
                                      p_timestamp_bits int, p_epoch_ms bigint, p_unit text,
                                      p_tolerance_ms bigint)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_difference text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM cosid.namespace WHERE name = p_name) THEN
        PERFORM cosid._namespace_insert(p_name, p_slot_bits, p_sequence_bits, p_timestamp_bits, p_epoch_ms,
                                        p_unit, p_tolerance_ms);
        RETURN 'copied';
    END IF;
    v_difference := cosid._layout_difference(p_name, p_slot_bits, p_sequence_bits, p_timestamp_bits,
                                             p_epoch_ms, p_unit);
    IF v_difference IS NOT NULL THEN
        -- The keeper hands this message to the caller of cosid_next(), who gets the why.
        RAISE EXCEPTION '%', v_difference USING ERRCODE = 'invalid_object_definition';
    END IF;
    RETURN 'same';
END $$;
REVOKE ALL ON FUNCTION cosid._namespace_sync(text, int, int, int, bigint, text, bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION cosid_namespace_create(text, int, interval, timestamptz, int, text, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_namespace_create(text, int, interval, timestamptz, int, text, int) TO cosid_admin;

SELECT cosid_namespace_create('default');

-- A store made by a restore is not new: pg_restore (and a plain dump run through psql) runs
-- CREATE EXTENSION first, each item committed by itself, and restores the origin's record of
-- the store state only with the data, after the user tables and theirs.  Meanwhile the store
-- would grant windows from its now, below the ceilings its origin's holders still issue up
-- to.  Both SET row_security off in their session (few other sessions do), and pg_restore
-- names itself in application_name (also with --enable-row-security): then the record
-- written here is a mark (cluster 0, timeline 0), and the store grants nothing until the
-- origin's record has come (two records: the raise) or cosid_store_follow_timeline(restored
-- => true) ran.  Only the session's own SET counts: a site that turns row_security off in
-- postgresql.conf, or for a database or a role, is making a store, not restoring one.
DO $$
BEGIN
    IF (SELECT setting = 'off' AND source = 'session' FROM pg_catalog.pg_settings WHERE name = 'row_security')
       OR pg_catalog.current_setting('application_name') = 'pg_restore' THEN
        UPDATE cosid.store_state SET system_identifier = 0, timeline = 0;
    END IF;
END $$;

-- The store's failover behaviour and limits.  raise_floors_on_new_timeline (default on) may
-- be turned off only where the store replicates synchronously to every standby that can be
-- promoted: then no committed lease change is lost in a failover, and new acquires need not
-- wait.  With it on, the first acquires after a failover wait up to max_ttl + 2 x
-- max_tolerance for their clock to pass the raised floors.  NULL leaves a value as it is;
-- returns the state.
CREATE FUNCTION cosid_store_settings(raise_floors_on_new_timeline boolean DEFAULT NULL,
                                     max_ttl interval DEFAULT NULL,
                                     max_tolerance interval DEFAULT NULL)
RETURNS cosid.store_state
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r cosid.store_state;
    v_ms bigint := floor(extract(epoch FROM max_ttl) * 1000)::bigint;
    v_tol bigint := floor(extract(epoch FROM max_tolerance) * 1000)::bigint;
    v_used record;
BEGIN
    IF v_ms IS NOT NULL AND (v_ms < 300 OR v_ms > 86400000) THEN
        RAISE EXCEPTION 'cosid max_ttl must be between 300 ms and 24 hours, got %', max_ttl
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_tol IS NOT NULL AND (v_tol < 0 OR v_tol > 3600000) THEN
        RAISE EXCEPTION 'cosid max_tolerance must be between 0 and 1 hour, got %', max_tolerance
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Every store call reads the limits (cosid._follow_timeline) and holds its lock on the
    -- table until it commits: waiting for them all here puts every grant made under the old
    -- limits before this change in the WAL.  Otherwise an acquire that read max_ttl 60 s
    -- commits after a lowering to 1 s, and a failover that loses its commit but keeps the
    -- lowering raises the floors by 1 s while its holder issues for 60 (the same for a
    -- namespace made with a tolerance above a lowered max_tolerance).
    LOCK TABLE cosid.store_state IN ACCESS EXCLUSIVE MODE;
    SELECT n.name, n.tolerance_ms INTO v_used FROM cosid.namespace n
     WHERE n.tolerance_ms > v_tol ORDER BY n.tolerance_ms DESC, n.name LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cosid max_tolerance % is below the tolerance of namespace "%" (% ms)', max_tolerance,
            v_used.name, v_used.tolerance_ms
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'After a failover the store raises every floor by 2 x max_tolerance, which must cover every namespace''s tolerance.';
    END IF;
    PERFORM cosid._follow_timeline(NULL);  -- one row, of here
    UPDATE cosid.store_state s
       SET raise_floors_on_new_timeline = coalesce(cosid_store_settings.raise_floors_on_new_timeline,
                                                   s.raise_floors_on_new_timeline),
           max_ttl_ms = coalesce(v_ms, s.max_ttl_ms),
           max_tolerance_ms = coalesce(v_tol, s.max_tolerance_ms)
    RETURNING s.* INTO r;
    RETURN r;
END $$;
REVOKE ALL ON FUNCTION cosid_store_settings(boolean, interval, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_store_settings(boolean, interval, interval) TO cosid_admin;
COMMENT ON FUNCTION cosid_store_settings(boolean, interval, interval) IS 'the lease store''s failover behaviour, longest lease and largest tolerance (superuser or cosid_admin)';

-- Follows a new timeline now, without a statement timeout: for a store whose raise takes
-- longer than the keepers' store bound (many slots, a short ttl).  Returns failovers seen.
-- restored => true raises the floors whatever the store finds: for a copy of its data
-- directory started as it is (a disk snapshot, a file copy), which keeps the cluster and
-- timeline of its origin and so cannot be told from a restart of it.
CREATE FUNCTION cosid_store_follow_timeline(restored boolean DEFAULT false) RETURNS int
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
REVOKE ALL ON FUNCTION cosid_store_follow_timeline(boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_store_follow_timeline(boolean) TO cosid_admin;
COMMENT ON FUNCTION cosid_store_follow_timeline(boolean) IS 'raises the floors now if the store lost history (a failover, a restore); restored => true for a copy of its data directory (superuser or cosid_admin)';

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

-- Static slots are not in the store: cosid_leases() says so instead of listing free slots
-- as if they were all there is.
CREATE FUNCTION cosid._static_notice(p_namespace text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_slot int;
    v_static text := pg_catalog.current_setting('cosid.static_slots', true);
BEGIN
    IF p_namespace IS NOT NULL THEN
        v_slot := cosid._static_slot(p_namespace);
        IF v_slot IS NOT NULL THEN
            RAISE NOTICE 'cosid namespace "%" uses static slot % on this instance: it has no lease in the store',
                p_namespace, v_slot
                USING DETAIL = 'Its windows come from the state file (cosid.state_file); cosid_pool() shows them. '
                               'The rows listed are the store''s, which this instance does not use for it.';
        END IF;
    ELSIF v_static IS NOT NULL AND v_static <> '' THEN
        RAISE NOTICE 'this instance has static slots (cosid.static_slots = ''%''): they have no leases in the store',
            v_static
            USING DETAIL = 'Their windows come from the state file (cosid.state_file); cosid_pool() shows them.';
    END IF;
    RETURN true;
END $$;

-- Every slot with its lease.  Incarnations (what renew and release are called with) are shown
-- to superusers and cosid_admin only; everything else is for every role, monitoring
-- (pg_monitor) among them.
CREATE FUNCTION cosid_leases(namespace text DEFAULT NULL)
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

CREATE FUNCTION cosid_parse(id bigint, namespace text DEFAULT 'default',
                            OUT ts timestamptz, OUT slot int, OUT sequence int)
AS 'MODULE_PATHNAME', 'cosid_parse_c' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;

-- Reading ids (C, the namespace's layout cached per transaction and call site).
CREATE FUNCTION cosid_timestamp(id bigint, namespace text DEFAULT 'default') RETURNS timestamptz
AS 'MODULE_PATHNAME', 'cosid_timestamp' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
CREATE FUNCTION cosid_slot(id bigint, namespace text DEFAULT 'default') RETURNS int
AS 'MODULE_PATHNAME', 'cosid_slot' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
CREATE FUNCTION cosid_sequence(id bigint, namespace text DEFAULT 'default') RETURNS int
AS 'MODULE_PATHNAME', 'cosid_sequence' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
-- The smallest and largest id any slot can have at a timestamp: WHERE id BETWEEN
-- cosid_min_id(a) AND cosid_max_id(b) is a range scan of the primary key.
CREATE FUNCTION cosid_min_id(ts timestamptz, namespace text DEFAULT 'default') RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_min_id' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
CREATE FUNCTION cosid_max_id(ts timestamptz, namespace text DEFAULT 'default') RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_max_id' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
-- Base 62, 11 characters: text order (COLLATE "C") is numeric order.
CREATE FUNCTION cosid_to_text(id bigint) RETURNS text
AS 'MODULE_PATHNAME', 'cosid_to_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cosid_from_text(text) RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_from_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cosid_timestamp(bigint, text) IS 'the timestamp of an id';
COMMENT ON FUNCTION cosid_slot(bigint, text) IS 'the slot of an id';
COMMENT ON FUNCTION cosid_sequence(bigint, text) IS 'the sequence of an id';
COMMENT ON FUNCTION cosid_min_id(timestamptz, text) IS 'the smallest id any slot can have at a timestamp';
COMMENT ON FUNCTION cosid_max_id(timestamptz, text) IS 'the largest id any slot can have at a timestamp';
COMMENT ON FUNCTION cosid_to_text(bigint) IS 'an id as 11 characters of base 62 (text order = id order under COLLATE "C")';
COMMENT ON FUNCTION cosid_from_text(text) IS 'the id of a text written by cosid_to_text';
-- A person's form of an id: UTC time, slot, sequence (20261203T072017.816Z-3-0262), and back.
CREATE FUNCTION cosid_format(id bigint, namespace text DEFAULT 'default') RETURNS text
AS 'MODULE_PATHNAME', 'cosid_format' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
CREATE FUNCTION cosid_from_format(formatted text, namespace text DEFAULT 'default') RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_from_format' LANGUAGE C STABLE PARALLEL SAFE CALLED ON NULL INPUT;
COMMENT ON FUNCTION cosid_format(bigint, text) IS 'an id as UTC time, slot and sequence: 20261203T072017.816Z-3-0262';
COMMENT ON FUNCTION cosid_from_format(text, text) IS 'the id of a text written by cosid_format';

-- Every namespace's layout with what it means: how long it lasts, how many ids a slot
-- issues per second, the largest id, and whether its ids are exact in JavaScript.
CREATE VIEW cosid_layouts AS
SELECT n.name AS namespace,
       n.timestamp_bits + n.slot_bits + n.sequence_bits AS total_bits,
       n.timestamp_bits, n.slot_bits, n.sequence_bits, n.unit,
       to_timestamp(n.epoch_ms / 1000.0) AS epoch,
       -- (days, then ms, in UTC: to_timestamp's double loses the ms of far ends, and days
       -- added to a timestamptz follow the session's daylight saving time)
       CASE WHEN e.end_ms <= 9224318015999999
            THEN (timestamp 'epoch' + make_interval(days => floor(e.end_ms / 86400000)::int)
                  + (e.end_ms % 86400000)::bigint * interval '1 millisecond') AT TIME ZONE 'UTC'
            ELSE 'infinity'::timestamptz END AS ends,
       round(e.span_ms / (365.25 * 86400000), 1) AS lifetime_years,
       round((e.end_ms - extract(epoch FROM now()) * 1000) / (365.25 * 86400000), 1) AS years_left,
       1 << n.slot_bits AS slots,
       (1::bigint << n.sequence_bits) * CASE n.unit WHEN 's' THEN 1 ELSE 1000 END AS ids_per_second_per_slot,
       (power(2::numeric, n.timestamp_bits + n.slot_bits + n.sequence_bits) - 1)::bigint AS max_id,
       n.timestamp_bits + n.slot_bits + n.sequence_bits <= 53 AS javascript_safe
FROM cosid.namespace n,
     LATERAL (SELECT power(2::numeric, n.timestamp_bits) * CASE n.unit WHEN 's' THEN 1000 ELSE 1 END AS span_ms) s,
     LATERAL (SELECT n.epoch_ms + s.span_ms - CASE n.unit WHEN 's' THEN 1000 ELSE 1 END AS end_ms, s.span_ms) e;
COMMENT ON VIEW cosid_layouts IS 'every namespace''s layout: bits, lifetime in years, ids per second per slot, largest id, JavaScript safety';

-- Slots used per owner (an instance's cosid.owner_key) and how full each namespace is.
CREATE VIEW cosid_owners AS
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
GRANT SELECT ON cosid_layouts, cosid_owners TO PUBLIC;

-- Runtime functions: they need the library in shared_preload_libraries.
CREATE FUNCTION cosid_next() RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_next_default' LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION cosid_next(namespace text) RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_next_namespace' LANGUAGE C VOLATILE PARALLEL UNSAFE CALLED ON NULL INPUT;

CREATE FUNCTION cosid_pool(OUT namespace text, OUT slot int, OUT fence bigint, OUT floor bigint,
                           OUT ceiling bigint, OUT expires_at timestamptz, OUT backends int,
                           OUT last_issued bigint, OUT last_id bigint, OUT state text, OUT kind text)
RETURNS SETOF record AS 'MODULE_PATHNAME', 'cosid_pool' LANGUAGE C VOLATILE;

CREATE FUNCTION cosid_stats(OUT acquires bigint, OUT renewals bigint, OUT renewal_failures bigint,
                            OUT leases_lost bigint, OUT duplicate_owner_keys bigint,
                            OUT clock_skew_events bigint, OUT waits_at_ceiling bigint,
                            OUT ids_issued bigint, OUT releases bigint, OUT store_transactions bigint,
                            OUT owner_key text, OUT incarnation uuid, OUT store_failovers bigint,
                            OUT static_state_file text, OUT static_clock_guard boolean,
                            OUT static_writes bigint, OUT static_write_failures bigint)
AS 'MODULE_PATHNAME', 'cosid_stats' LANGUAGE C VOLATILE;

CREATE FUNCTION cosid_release() RETURNS int
AS 'MODULE_PATHNAME', 'cosid_release_own' LANGUAGE C VOLATILE;

CREATE FUNCTION cosid_release(namespace text, slot int) RETURNS text
AS 'MODULE_PATHNAME', 'cosid_release_slot' LANGUAGE C VOLATILE CALLED ON NULL INPUT;

CREATE FUNCTION cosid._static_slot(namespace text) RETURNS int
AS 'MODULE_PATHNAME', 'cosid_static_slot' LANGUAGE C STABLE;

CREATE FUNCTION cosid._adopt_raise(p_namespace text, p_max_id bigint, p_timestamp_bits int, p_slot_bits int,
                                   p_sequence_bits int, p_epoch_ms bigint, p_unit text) RETURNS bigint
AS 'MODULE_PATHNAME', 'cosid_adopt_raise' LANGUAGE C VOLATILE CALLED ON NULL INPUT;
REVOKE ALL ON FUNCTION cosid._adopt_raise(text, bigint, int, int, int, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid._adopt_raise(text, bigint, int, int, int, bigint, text) TO cosid_admin;

-- Puts an existing id column on cosid: every id the namespace issues from now on is larger
-- than the column's largest value, and the column's default becomes cosid_next(namespace).
-- One transaction, under an ACCESS EXCLUSIVE lock on the table (no row arrives between the
-- largest value and the new default).  The floor's raise is made by the keeper in its own
-- committed transaction before this one ends: a rollback leaves it raised, which is
-- harmless (ids only move up).
CREATE FUNCTION cosid_adopt(tbl regclass, col name, namespace text DEFAULT 'default')
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
REVOKE ALL ON FUNCTION cosid_adopt(regclass, name, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_adopt(regclass, name, text) TO cosid_admin;
COMMENT ON FUNCTION cosid_adopt(regclass, name, text) IS 'puts an existing bigint id column on cosid: new ids above its largest, default cosid_next(namespace) (superuser or cosid_admin)';

COMMENT ON FUNCTION cosid_next() IS 'next id of namespace cosid.namespace (in a default: bound to cosid_next(namespace) when the default is made)';
COMMENT ON FUNCTION cosid_next(text) IS 'next id of the named namespace';
COMMENT ON FUNCTION cosid_leases(text) IS 'every slot of the store with its lease';
COMMENT ON FUNCTION cosid_pool() IS 'the leases of this instance, shared by its backends, with the last id issued on each';
COMMENT ON FUNCTION cosid_parse(bigint, text) IS 'timestamp, slot and sequence of an id';

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
-- Enabled ALWAYS: also under session_replication_role = replica (pg_restore --disable-triggers).
CREATE EVENT TRIGGER cosid_bind_defaults ON ddl_command_end EXECUTE FUNCTION cosid._bind_defaults_on_ddl();
ALTER EVENT TRIGGER cosid_bind_defaults ENABLE ALWAYS;

-- cosid_next() in this database gets its leases through the lease keeper, which works in
-- cosid.database and needs the extension there too.  Said at CREATE EXTENSION time, when
-- the library is loaded (otherwise the setting is unknown here).
DO $$
DECLARE
    v_keeper_db text := pg_catalog.current_setting('cosid.database', true);
BEGIN
    IF v_keeper_db IS NOT NULL AND v_keeper_db <> pg_catalog.current_database() THEN
        RAISE WARNING 'cosid''s lease keeper works in database "%", not in "%"', v_keeper_db, pg_catalog.current_database()
            USING DETAIL = 'cosid_next() here gets its leases through the keeper; it fails at once while the keeper '
                           'cannot serve.',
                  HINT = format('Make sure CREATE EXTENSION cosid ran in database %I too (the keeper works there), '
                                'or set cosid.database = %L and restart the server to keep the store here.',
                                v_keeper_db, pg_catalog.current_database());
    END IF;
END $$;

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

-- The lowest a namespace's floor may be lowered to: the highest time any of its lease rows
-- shows a window could have issued or been granted up to (floor, ceiling, next_floor of every
-- slot), and every ceiling a static slot of it recorded (cosid.static_ceiling, its adopted
-- floor included); 0 when none.  `what` says which row holds it.
CREATE FUNCTION cosid._floor_lowest(p_namespace text, OUT lowest_ms bigint, OUT what text)
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

-- An administrator's way back from a floor raised by mistake: lowers the namespace's
-- not-before to `floor`, never below what its lease rows and static ceilings show could
-- have been granted or issued (cosid._floor_lowest).  The namespace guard lets exactly this
-- function lower it.  Lease rows already granted keep their own floors: only windows not
-- yet granted start lower.
CREATE FUNCTION cosid_namespace_lower_floor(namespace text, floor timestamptz) RETURNS timestamptz
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
REVOKE ALL ON FUNCTION cosid_health() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cosid_health() TO pg_monitor, cosid_admin;
COMMENT ON FUNCTION cosid_health() IS 'one row per health check: ok, warning or critical, what was found and what to do (pg_monitor, cosid_admin)';
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
CREATE TRIGGER window_history AFTER UPDATE ON cosid.lease
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

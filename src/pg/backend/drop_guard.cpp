// DROP EXTENSION cosid (or a DROP OWNED BY its owner, or any drop that cascades to it) is
// refused while any window or next floor of the lease table reaches past the store's clock:
// the lease table is the only record of the windows handed out, and a store made again by
// CREATE EXTENSION starts its slots at its now (see cosid._namespace_insert), which must lie
// above everything the old one handed out.  In every database that has the extension, not
// only this server's keeper's: remote instances may lease from any of them (cosid.store_dsn
// names the database), and a table nobody leases from has nothing ahead.  DROP DATABASE
// (WITH (FORCE) too) and ALTER DATABASE ... RENAME TO, which remove a store or let another
// take its name, are refused alike: a short-lived background worker connects to that
// database and looks.  A ProcessUtility hook (as pg_stat_statements installs one) and an
// object access hook (as sepgsql installs one), active only when preloaded.
#include "drop_guard.hpp"

#include "generator.hpp"

namespace cosid::pg {

namespace {

ProcessUtility_hook_type prev_process_utility = nullptr;
object_access_hook_type prev_object_access = nullptr;
// The transaction whose current statement has looked, at the first of cosid's objects to go,
// and found nothing ahead (so the objects after it go unchecked); every utility statement
// starts without it.
LocalTransactionId cascade_looked_in = InvalidLocalTransactionId;

// The statements that drop the extension: DROP EXTENSION cosid, and DROP OWNED BY a role that
// owns it or its schema (for that one *owners gets the roles, and whether it drops cosid is
// asked of the catalog in windows_ahead).  DROP SCHEMA cosid CASCADE is refused by PostgreSQL
// itself: the schema is a member of the extension (2BP01).  Drops that reach the extension as
// a cascade from something else are held by guard_object_access.
bool drops_cosid(const Node* stmt, List** owners) {
    *owners = NIL;
    if (stmt == nullptr) return false;
    if (IsA(stmt, DropOwnedStmt)) {
        const DropOwnedStmt* drop = reinterpret_cast<const DropOwnedStmt*>(stmt);
        ListCell* lc;
        foreach (lc, drop->roles) {
            Oid role = get_rolespec_oid(static_cast<RoleSpec*>(lfirst(lc)), true);
            if (OidIsValid(role)) *owners = lappend_oid(*owners, role);
        }
        return *owners != NIL;
    }
    if (!IsA(stmt, DropStmt)) return false;
    const DropStmt* drop = reinterpret_cast<const DropStmt*>(stmt);
    if (drop->removeType != OBJECT_EXTENSION) return false;
    ListCell* lc;
    foreach (lc, drop->objects) {
        if (strcmp(strVal(lfirst(lc)), "cosid") == 0) return true;
    }
    return false;
}

// What of this database's store still reaches past the store's clock: a window a holder may
// issue in (up to its ceiling, also after its lease expired: a renewal after expiry
// succeeds while nobody took over) or a free slot's next_floor (where a released window
// ended, which borrowed ticks may have put ahead of the clock; its old ceiling no longer
// counts).  A store made again would start below them.  The lease table is
// locked against writers first, so that no renewal moves a ceiling between this look and
// the drop.  `count` is 0 when the extension is not installed here.
// (Plain data: the DROP DATABASE check gets it through dynamic shared memory.)
struct Ahead {
    int64 count = 0;
    char until[64] = "";   // the store time the last of them ends, as text
    char which[160] = "";  // the slot it is
    bool looked = false;   // the check worker got through its look
};

// The look runs with search_path pg_catalog, pg_temp: the check's worker is a superuser in a
// database that whoever issues DROP DATABASE names, and the database's owner may have set a
// search_path there (ALTER DATABASE ... SET) whose schemas come before pg_catalog; an operator
// of theirs (say = on name) would then run as that superuser, and could answer for the look.
void windows_ahead(Ahead* out, List* owners) {
    int nest = NewGUCNestLevel();
    (void)set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                            false);
    SPI_connect();
    int rc = SPI_execute("SELECT e.extowner, n.nspowner FROM pg_catalog.pg_extension e "
                         "LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = 'cosid' WHERE e.extname = 'cosid'",
                         true, 1);
    bool dropped = rc == SPI_OK_SELECT && SPI_processed > 0;
    if (dropped && owners != NIL) {  // DROP OWNED BY: only a role that owns the extension or its schema
        bool isnull;
        Oid ext_owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
        Datum schema_datum = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
        Oid schema_owner = isnull ? InvalidOid : DatumGetObjectId(schema_datum);
        dropped =
            list_member_oid(owners, ext_owner) || (OidIsValid(schema_owner) && list_member_oid(owners, schema_owner));
    }
    if (dropped) {
        // The namespace table before the lease table, in the store's lock order (src/README.md):
        // an acquire holds its namespace's row while it waits for the lease table, and the
        // drop that follows this look takes every table of the extension.
        SPI_execute("LOCK TABLE cosid.namespace IN EXCLUSIVE MODE", false, 0);
        SPI_execute("LOCK TABLE cosid.lease IN SHARE MODE", false, 0);
        // Read with a snapshot taken now that the lock is held: the statement's own (taken
        // before it, and the transaction's at REPEATABLE READ) misses a window granted by an
        // acquire that committed while the lock was awaited, and the drop would forget it.
        PushActiveSnapshot(GetLatestSnapshot());
        rc = SPI_execute(
            // The last raise of the floors counts too, until the clock passes it: after a
            // restore that lost a namespace (no lease rows of it) its windows still reach
            // there.  (raised_reach_ms through to_jsonb: a catalog before 1.7 has no column.)
            "WITH now AS MATERIALIZED (SELECT cosid.store_now() AS ms), "
            "a AS (SELECT pg_catalog.format('slot %s of namespace \"%s\"%s', l.slot, l.namespace, "
            "             CASE WHEN l.incarnation IS NOT NULL THEN ', leased by ' || l.owner_key "
            "                  ELSE ', free, its next floor' END) AS which, e.ends "
            "        FROM cosid.lease l, now, LATERAL (SELECT CASE WHEN l.incarnation IS NULL "
            "      THEN l.next_floor ELSE greatest(l.ceiling, l.next_floor) END AS ends) e WHERE e.ends > now.ms "
            "      UNION ALL "
            "      SELECT 'the store''s last raise of its floors (a failover, a restore, a fork acknowledged)', r.ends "
            "        FROM cosid.store_state s, now, LATERAL (SELECT s.raised_at_ms + greatest(coalesce("
            "             (pg_catalog.to_jsonb(s) ->> 'raised_reach_ms')::bigint, 0), "
            "             s.max_ttl_ms + 2 * s.max_tolerance_ms) AS ends) r "
            "       WHERE s.raised_at_ms > 0 AND r.ends > now.ms) "
            "SELECT (SELECT count(*) FROM a), "
            "       pg_catalog.to_char(pg_catalog.to_timestamp(a.ends / 1000.0) AT TIME ZONE 'UTC', "
            "                          'YYYY-MM-DD HH24:MI:SS.MS \"UTC\"'), "
            "       a.which "
            "FROM a ORDER BY a.ends DESC LIMIT 1",
            true, 1);
        bool isnull;
        if (rc == SPI_OK_SELECT && SPI_processed > 0) {
            HeapTuple t = SPI_tuptable->vals[0];
            TupleDesc d = SPI_tuptable->tupdesc;
            out->count = DatumGetInt64(SPI_getbinval(t, d, 1, &isnull));
            if (char* v = SPI_getvalue(t, d, 2)) strlcpy(out->until, v, sizeof(out->until));
            if (char* v = SPI_getvalue(t, d, 3)) strlcpy(out->which, v, sizeof(out->which));
        }
        PopActiveSnapshot();
    }
    SPI_finish();
    AtEOXact_GUC(true, nest);
    out->looked = true;
}

// The database a DROP DATABASE or ALTER DATABASE ... RENAME TO takes away, or nullptr.
const char* database_taken_away(const Node* stmt) {
    if (stmt == nullptr) return nullptr;
    if (IsA(stmt, DropdbStmt)) return reinterpret_cast<const DropdbStmt*>(stmt)->dbname;
    if (IsA(stmt, RenameStmt)) {
        const RenameStmt* rename = reinterpret_cast<const RenameStmt*>(stmt);
        if (rename->renameType == OBJECT_DATABASE) return rename->subname;
    }
    return nullptr;
}

// windows_ahead in another database, by a background worker connected there (a backend
// cannot read another database's tables).  The worker's lock on the lease table ends with it:
// an acquire that commits between its look and the drop is not seen (the drop's own wait for
// the database's sessions, or WITH (FORCE)'s termination of them, follows at once).
void windows_ahead_in(Oid database, const char* name, Ahead* out) {
    dsm_segment* seg = dsm_create(sizeof(Ahead), 0);
    Ahead* shared_out = static_cast<Ahead*>(dsm_segment_address(seg));
    *shared_out = Ahead();
    BackgroundWorker worker;
    memset(&worker, 0, sizeof(worker));
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker.bgw_restart_time = BGW_NEVER_RESTART;
    strlcpy(worker.bgw_library_name, "cosid", BGW_MAXLEN);
    strlcpy(worker.bgw_function_name, "cosid_drop_check_main", BGW_MAXLEN);
    snprintf(worker.bgw_name, BGW_MAXLEN, "cosid drop check of database %u", database);
    strlcpy(worker.bgw_type, "cosid drop check", BGW_MAXLEN);
    worker.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(seg));
    memcpy(worker.bgw_extra, &database, sizeof(Oid));
    worker.bgw_notify_pid = MyProcPid;
    BackgroundWorkerHandle* handle = nullptr;
    if (!RegisterDynamicBackgroundWorker(&worker, &handle))
        ereport(ERROR,
                (errcode(ERRCODE_INSUFFICIENT_RESOURCES),
                 errmsg("cosid cannot check database \"%s\" for a lease store before it goes", name),
                 errdetail("No background worker slot is free to look at its lease table (max_worker_processes)."),
                 errhint("Try again once a background worker has ended, or raise max_worker_processes (a restart).")));
    if (WaitForBackgroundWorkerShutdown(handle) == BGWH_POSTMASTER_DIED)
        ereport(FATAL, (errcode(ERRCODE_ADMIN_SHUTDOWN), errmsg("postmaster died during cosid's drop check")));
    *out = *shared_out;
    dsm_detach(seg);
    if (!out->looked)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("cosid could not check database \"%s\" for a lease store before it goes", name),
                        errdetail("The background worker that looks at its lease table did not finish (a lock on "
                                  "cosid.namespace or cosid.lease held for 10 s, or an error: the server log says "
                                  "which)."),
                        errhint("End the session that holds cosid.namespace or cosid.lease in that database "
                                "(pg_locks), or first run DROP EXTENSION cosid there (it is checked there), and try "
                                "again.")));
}

void refuse_if_ahead(const Ahead& ahead, const char* what, const char* made_again) {
    if (ahead.count > 0)
        ereport(
            ERROR,
            (errcode(ERRCODE_OBJECT_IN_USE),
             errmsg("cannot %s while " INT64_FORMAT " slots of its lease store have windows reaching past "
                    "the store's clock",
                    what, ahead.count),
             errdetail("The last of them ends at %s (%s). The lease table is the only record of those "
                       "windows: a store made again (%s) could start a window below an id still to be "
                       "issued in them.",
                       ahead.until, ahead.which, made_again),
             errhint(
                 "Stop the writers, release their slots (on each instance: SELECT cosid_release(namespace, "
                 "slot) FROM (SELECT DISTINCT namespace, slot FROM cosid_pool() WHERE slot IS NOT NULL) p), and try again after %s: leases of other owners expire by "
                 "themselves.",
                 ahead.until)));
}

// Whether the object about to be dropped is the cosid extension, one of its members, or its
// lease table (also one taken out of it by ALTER EXTENSION ... DROP TABLE).
bool is_cosid_object(Oid class_id, Oid object_id) {
    Oid extension = get_extension_oid("cosid", true);
    if (!OidIsValid(extension)) return false;
    if (class_id == ExtensionRelationId) return object_id == extension;
    if (class_id == RelationRelationId) {
        Oid schema = get_namespace_oid("cosid", true);
        if (OidIsValid(schema) && object_id == get_relname_relid("lease", schema)) return true;
    }
    return getExtensionOfObject(class_id, object_id) == extension;
}

// Every way the extension goes, not only DROP EXTENSION and DROP OWNED: a cascade reaches it
// from anything it depends on (DROP SCHEMA public CASCADE, the schema it is installed in;
// DROP EXTENSION plpgsql CASCADE, its functions' language), and PostgreSQL then drops the
// whole extension.  The hook runs before each object of the drop goes, the extension's
// members before the extension: the look runs at the first of them, while the lease table and
// cosid.store_now() are still there, and they are locked already (AccessExclusiveLock, taken
// for the whole drop before any object goes).  Not in cosid's own update scripts, whose drops
// of members are the update.
void guard_object_access(ObjectAccessType access, Oid class_id, Oid object_id, int sub_id, void* arg) {
    if (prev_object_access != nullptr) prev_object_access(access, class_id, object_id, sub_id, arg);
    if (access != OAT_DROP || sub_id != 0 || IsBinaryUpgrade || cascade_looked_in == COSID_MY_LXID()) return;
    if (!is_cosid_object(class_id, object_id)) return;
    if (creating_extension && CurrentExtensionObject == get_extension_oid("cosid", true)) return;
    Ahead ahead;
    windows_ahead(&ahead, NIL);
    refuse_if_ahead(ahead, "drop extension cosid", "by CREATE EXTENSION");
    cascade_looked_in = COSID_MY_LXID();
}

// A database nobody can have granted a window from since this guard last looked at it, so
// that another look would find what that one found; the worker could not look anyway.
// Invalid (datconnlimit -2): only a DROP DATABASE that began dropping its files leaves it so,
// after the look let it through, and no session can connect to it since (the worker neither:
// looking, it would refuse for good the one statement PostgreSQL allows on it).  Locked
// AccessExclusive by this transaction: a RENAME of it ran here (DROP DATABASE runs in no
// transaction block), looked, and found it without sessions, and the lock keeps new ones out
// until commit; the worker would wait for that lock while this backend waits for the worker.
bool nobody_in_since_looked(Oid database) {
    if (database_is_invalid_oid(database)) return true;
    LOCKTAG tag;
    SET_LOCKTAG_OBJECT(tag, InvalidOid, DatabaseRelationId, database, 0);
#if PG_VERSION_NUM >= 170000
    return LockHeldByMe(&tag, AccessExclusiveLock, false);
#else
    return LockHeldByMe(&tag, AccessExclusiveLock);
#endif
}

void guard_process_utility(PlannedStmt* pstmt, const char* query, bool read_only_tree, ProcessUtilityContext context,
                           ParamListInfo params, QueryEnvironment* query_env, DestReceiver* dest, QueryCompletion* qc) {
    new_statement();  // COPY, DO, CALL, FETCH ... start statements without ExecutorStart
    cascade_looked_in = InvalidLocalTransactionId;
    List* owners = NIL;
    if (const char* name = database_taken_away(pstmt->utilityStmt)) {
        Oid database = get_database_oid(name, true);
        // (not one's own: PostgreSQL refuses that itself; nor in a standby's recovery; nor in
        // pg_upgrade's servers, which issue nothing and rebuild the databases from the old
        // cluster; nor for a role that does not own it: PostgreSQL refuses that one next, and
        // no worker is started in a database on behalf of a role with no right to drop it)
        if (OidIsValid(database) && database != MyDatabaseId && !RecoveryInProgress() && !IsBinaryUpgrade &&
            COSID_OWNS_DATABASE(database) && !nobody_in_since_looked(database)) {
            Ahead ahead;
            windows_ahead_in(database, name, &ahead);
            char what[NAMEDATALEN + 64];
            snprintf(what, sizeof(what), "%s database \"%s\"", IsA(pstmt->utilityStmt, DropdbStmt) ? "drop" : "rename",
                     name);
            refuse_if_ahead(ahead, what, "a database of that name with CREATE EXTENSION cosid");
        }
    }
    if (drops_cosid(pstmt->utilityStmt, &owners)) {
        Ahead ahead;
        windows_ahead(&ahead, owners);
        refuse_if_ahead(ahead, "drop extension cosid", "by CREATE EXTENSION");
        // (the lease table stays locked: guard_object_access need not look again)
        if (owners == NIL) cascade_looked_in = COSID_MY_LXID();
    }
    if (prev_process_utility != nullptr)
        prev_process_utility(pstmt, query, read_only_tree, context, params, query_env, dest, qc);
    else
        standard_ProcessUtility(pstmt, query, read_only_tree, context, params, query_env, dest, qc);
}

}  // namespace

// The DROP DATABASE check's worker: connects to the database (also one that takes no
// connections), looks as DROP EXTENSION does, writes the answer into the caller's segment and
// leaves.  An error here leaves `looked` false, and the caller refuses.
extern "C" PGDLLEXPORT void cosid_drop_check_main(Datum arg) {
    BackgroundWorkerUnblockSignals();
    CurrentResourceOwner = ResourceOwnerCreate(nullptr, "cosid drop check");
    dsm_segment* seg = dsm_attach(DatumGetUInt32(arg));
    if (seg == nullptr) proc_exit(1);  // the caller gave up and detached: nobody to answer
    Oid database;
    memcpy(&database, MyBgworkerEntry->bgw_extra, sizeof(Oid));
    BackgroundWorkerInitializeConnectionByOid(database, InvalidOid, BGWORKER_BYPASS_ALLOWCONN);
    pgstat_report_appname("cosid drop check");
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    PushActiveSnapshot(GetTransactionSnapshot());
    // A session holding the lease table (idle in a transaction that wrote it) must not keep
    // the DROP waiting for good: after 10 s the look fails, and the DROP is refused.
    SetConfigOption("lock_timeout", "10s", PGC_SUSET, PGC_S_OVERRIDE);
    Ahead ahead;
    windows_ahead(&ahead, NIL);
    PopActiveSnapshot();
    CommitTransactionCommand();
    memcpy(dsm_segment_address(seg), &ahead, sizeof(Ahead));
    dsm_detach(seg);
    proc_exit(0);
}

void install_drop_guard() {
    prev_process_utility = ProcessUtility_hook;
    ProcessUtility_hook = guard_process_utility;
    prev_object_access = object_access_hook;
    object_access_hook = guard_object_access;
}

}  // namespace cosid::pg

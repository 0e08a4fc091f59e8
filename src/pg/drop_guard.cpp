// DROP EXTENSION cosid in the store's database (or a DROP OWNED BY its owner, which drops it
// too) is refused while any window or next floor of the store
// reaches past its clock: the lease table is the only record of the windows handed
// out, and a store made again by CREATE EXTENSION starts its slots at its now (see
// cosid._namespace_insert), which must lie above everything the old one handed out.  A
// ProcessUtility hook (as pg_stat_statements installs one), active only when preloaded.
#include "drop_guard.hpp"

#include "generator.hpp"
#include "state.hpp"
#include "store.hpp"

namespace cosid::pg {

namespace {

ProcessUtility_hook_type prev_process_utility = nullptr;

// The statements that drop the extension: DROP EXTENSION cosid, and DROP OWNED BY a role that
// owns it or its schema (for that one *owners gets the roles, and whether it drops cosid is
// asked of the catalog in windows_ahead).  DROP SCHEMA cosid CASCADE is refused by PostgreSQL
// itself: the schema is a member of the extension (2BP01).
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
struct Ahead {
    int64 count = 0;
    char until[64] = "";   // the store time the last of them ends, as text
    char which[160] = "";  // the slot it is
};

void windows_ahead(Ahead* out, List* owners) {
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
        dropped = list_member_oid(owners, ext_owner) || (OidIsValid(schema_owner) && list_member_oid(owners, schema_owner));
    }
    if (dropped) {
        SPI_execute("LOCK TABLE cosid.lease IN SHARE MODE", false, 0);
        rc = SPI_execute(
            "WITH now AS MATERIALIZED (SELECT cosid.store_now() AS ms), "
            "a AS (SELECT l.*, e.ends FROM cosid.lease l, now, LATERAL (SELECT CASE WHEN l.incarnation IS NULL "
            "      THEN l.next_floor ELSE greatest(l.ceiling, l.next_floor) END AS ends) e WHERE e.ends > now.ms) "
            "SELECT (SELECT count(*) FROM a), "
            "       pg_catalog.to_char(pg_catalog.to_timestamp(a.ends / 1000.0) AT TIME ZONE 'UTC', "
            "                          'YYYY-MM-DD HH24:MI:SS.MS \"UTC\"'), "
            "       pg_catalog.format('slot %s of namespace \"%s\"%s', a.slot, a.namespace, "
            "                         CASE WHEN a.incarnation IS NOT NULL THEN ', leased by ' || a.owner_key "
            "                              ELSE ', free, its next floor' END) "
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
    }
    SPI_finish();
}

void guard_process_utility(PlannedStmt* pstmt, const char* query, bool read_only_tree, ProcessUtilityContext context,
                           ParamListInfo params, QueryEnvironment* query_env, DestReceiver* dest,
                           QueryCompletion* qc) {
    new_statement();  // COPY, DO, CALL, FETCH ... start statements without ExecutorStart
    List* owners = NIL;
    if (drops_cosid(pstmt->utilityStmt, &owners) && !store_is_remote() && in_store_database()) {
        Ahead ahead;
        windows_ahead(&ahead, owners);
        if (ahead.count > 0)
            ereport(ERROR,
                    (errcode(ERRCODE_OBJECT_IN_USE),
                     errmsg("cannot drop extension cosid while " INT64_FORMAT
                            " slots of its lease store have windows reaching past the store's clock",
                            ahead.count),
                     errdetail("The last of them ends at %s (%s). The lease table is the only record of those "
                               "windows: a store made again by CREATE EXTENSION could start a window below an id "
                               "still to be issued in them.",
                               ahead.until, ahead.which),
                     errhint("Stop the writers, release this instance's slots (SELECT cosid_release(namespace, slot) "
                             "FROM cosid_pool()), and try again after %s: leases of other owners expire by "
                             "themselves.",
                             ahead.until)));
    }
    if (prev_process_utility != nullptr)
        prev_process_utility(pstmt, query, read_only_tree, context, params, query_env, dest, qc);
    else
        standard_ProcessUtility(pstmt, query, read_only_tree, context, params, query_env, dest, qc);
}

}  // namespace

void install_drop_guard() {
    prev_process_utility = ProcessUtility_hook;
    ProcessUtility_hook = guard_process_utility;
}

}  // namespace cosid::pg

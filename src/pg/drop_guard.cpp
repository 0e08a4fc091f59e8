// DROP EXTENSION cosid in the store's database while slots are leased is refused: the lease
// table is the only record of the windows handed out, and a store made again by CREATE
// EXTENSION would start new windows that can overlap ones still in use.  A
// ProcessUtility hook (as pg_stat_statements installs one), active only when preloaded.
#include "drop_guard.hpp"

#include "generator.hpp"
#include "state.hpp"
#include "store.hpp"

namespace cosid::pg {

namespace {

ProcessUtility_hook_type prev_process_utility = nullptr;

bool drops_cosid(const Node* stmt) {
    if (stmt == nullptr || !IsA(stmt, DropStmt)) return false;
    const DropStmt* drop = reinterpret_cast<const DropStmt*>(stmt);
    if (drop->removeType != OBJECT_EXTENSION) return false;
    ListCell* lc;
    foreach (lc, drop->objects) {
        if (strcmp(strVal(lfirst(lc)), "cosid") == 0) return true;
    }
    return false;
}

// Live leases in this database's store; 0 when the extension is not installed here.
int64 live_leases() {
    SPI_connect();
    int64 n = 0;
    int rc = SPI_execute("SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'cosid'", true, 1);
    if (rc == SPI_OK_SELECT && SPI_processed > 0) {
        rc = SPI_execute("SELECT count(*) FROM cosid.lease WHERE incarnation IS NOT NULL "
                         "AND expires_at > cosid.store_now()",
                         true, 1);
        bool isnull;
        if (rc == SPI_OK_SELECT && SPI_processed > 0)
            n = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    }
    SPI_finish();
    return n;
}

void guard_process_utility(PlannedStmt* pstmt, const char* query, bool read_only_tree, ProcessUtilityContext context,
                           ParamListInfo params, QueryEnvironment* query_env, DestReceiver* dest,
                           QueryCompletion* qc) {
    new_statement();  // COPY, DO, CALL, FETCH ... start statements without ExecutorStart
    if (drops_cosid(pstmt->utilityStmt) && !store_is_remote() && in_store_database()) {
        int64 n = live_leases();
        if (n > 0)
            ereport(ERROR,
                    (errcode(ERRCODE_OBJECT_IN_USE),
                     errmsg("cannot drop extension cosid while " INT64_FORMAT " slots of its lease store are leased", n),
                     errdetail("The lease table is the only record of the windows handed out; a store made again by "
                               "CREATE EXTENSION could start a window that overlaps one still in use."),
                     errhint("Stop the writers, release this instance's slots (SELECT cosid_release(namespace, slot) "
                             "FROM cosid_pool()), and wait until cosid_leases() shows no held slot: leases of "
                             "other owners expire by themselves.")));
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

// How a backend waits for a lease of its namespace: it asks the keeper (one request per
// namespace, shared by every backend waiting for it) and waits on it up to
// cosid.acquire_timeout, or fails at once where waiting cannot help (the keeper cannot
// serve, the namespace does not exist, the store refused), with what the keeper or the
// store said.
#include "lease_wait.hpp"

#include "../boundary.hpp"
#include "calendar.hpp"
#include "../store/citus.hpp"
#include "../errors.hpp"
#include "../shmem/pool.hpp"
#include "../settings.hpp"
#include "../shmem/state.hpp"
#include "../store/store.hpp"

namespace cosid::pg {

namespace {

void check_namespace_exists(const char* ns) {
    Oid types[1] = {TEXTOID};
    Datum values[1] = {CStringGetTextDatum(ns)};
    SPI_connect();
    int rc = SPI_execute_with_args("SELECT 1 FROM cosid.namespace WHERE name = $1", 1, types, values, nullptr, true, 1);
    bool found = rc == SPI_OK_SELECT && SPI_processed > 0;
    SPI_finish();
    if (!found)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT), errmsg("cosid namespace \"%s\" does not exist", ns),
                        errhint("Create it with cosid_namespace_create('%s').", ns)));
}

}  // namespace

// In a database other than the keeper's, this database's cosid.namespace is only what
// cosid_parse() here reads: if it defines the namespace, its layout must be the one the
// store hands out (cosid._layout_difference, which the keeper's copy also uses).  Writes a
// description of the difference, or an empty string.
void local_layout_difference(const char* ns, const Layout& store, char* out, size_t len) {
    out[0] = '\0';
    Oid types[6] = {TEXTOID, INT4OID, INT4OID, INT4OID, INT8OID, TEXTOID};
    Datum values[6] = {CStringGetTextDatum(ns),
                       Int32GetDatum(store.slot_bits),
                       Int32GetDatum(store.sequence_bits),
                       Int32GetDatum(store.timestamp_bits),
                       Int64GetDatum(store.epoch_ms),
                       CStringGetTextDatum(store.unit == Unit::Second ? "s" : "ms")};
    SPI_connect();
    int rc = SPI_execute_with_args("SELECT cosid._layout_difference($1, $2, $3, $4, $5, $6)", 6, types, values, nullptr,
                                   true, 1);
    if (rc == SPI_OK_SELECT && SPI_processed > 0) {
        char* difference = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
        if (difference != nullptr) strlcpy(out, difference, len);
    }
    SPI_finish();
}

// A namespace defined here (`where`) with another layout than the store's is refused:
// cosid_parse() here would misread the ids.  `difference` names both layouts.
[[noreturn]] void report_layout_mismatch(const char* ns, const char* where, const char* difference, const char* outcome,
                                         const char* remedy) {
    ereport(ERROR, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
                    errmsg("cosid namespace \"%s\" %s has another layout than in the lease store", ns, where),
                    errdetail("Layout (timestamp/slot/sequence bits) %s. cosid_parse() here would misread the store's "
                              "ids, so %s.",
                              difference, outcome),
                    errhint("Remove the local definition as a superuser (DELETE FROM cosid.lease WHERE namespace = "
                            "'%s'; DELETE FROM cosid.namespace WHERE name = '%s'); %s.",
                            ns, ns, remedy)));
    pg_unreachable();
}

namespace {

// True when the extension's catalog row was written by this transaction (not committed yet).
bool extension_created_here() {
    SPI_connect();
    int rc = SPI_execute("SELECT xmin::text FROM pg_catalog.pg_extension WHERE extname = 'cosid'", true, 1);
    TransactionId xmin = InvalidTransactionId;
    if (rc == SPI_OK_SELECT && SPI_processed > 0) {
        char* v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
        if (v != nullptr) xmin = static_cast<TransactionId>(strtoul(v, nullptr, 10));
    }
    SPI_finish();
    return TransactionIdIsValid(xmin) && TransactionIdIsCurrentTransactionId(xmin);
}

// What the keeper already knows it cannot do, so that a caller fails at once instead of
// waiting out cosid.acquire_timeout: it cannot connect to cosid.database (it does not
// exist), the extension is missing there, or the remote store refused.  A caller in the
// keeper's own database waits when the extension is missing: it may have been created a
// moment ago, and the keeper looks again when woken.
// `here`: in_store_database(), computed by the caller (a catalog lookup: not under a lock).
// `checks_before`: the keeper's readiness checks when the caller began; what the keeper
// reports counts only from a check made after that (the extension may have been created a
// moment ago: the caller wakes the keeper, which looks again at once).
bool keeper_problem_known(bool here, uint64 checks_before) {
    if (shared->keeper_ready) return false;
    // cosid.database missing: unless this is it (created since), then the keeper is woken
    if (shared->keeper_failed_starts > 0) return !here;
    if (shared->keeper_checks <= checks_before) return false;
    return shared->keeper_problem == 2 || shared->keeper_problem == 3 || (shared->keeper_problem == 1 && !here);
}

void keeper_cannot_serve(bool here, uint64 checks_before) {
    if (!keeper_problem_known(here, checks_before)) return;
    char message[256];
    LWLockAcquire(shared->lock, LW_SHARED);
    int failed_starts = shared->keeper_failed_starts;
    int problem = shared->keeper_problem;
    char hint[256];
    strlcpy(message, shared->keeper_problem_message, sizeof(message));
    strlcpy(hint, shared->keeper_problem_hint, sizeof(hint));
    LWLockRelease(shared->lock);
    if (failed_starts == 0 && problem == 3) report_citus_worker(message, hint);  // the Citus guard (citus.hpp)
    if (failed_starts > 0)
        ereport(ERROR, (errcode(COSID_KEEPER_UNAVAILABLE),
                        errmsg("cosid lease keeper cannot connect to database \"%s\"", setting_database),
                        errdetail("The keeper's last %d start%s failed while connecting (see the server log).",
                                  failed_starts, failed_starts == 1 ? "" : "s"),
                        errhint("Create database \"%s\" and run CREATE EXTENSION cosid there, or set cosid.database "
                                "to the database that holds the lease store and restart the server.",
                                setting_database)));
    ereport(ERROR,
            (errcode(COSID_KEEPER_UNAVAILABLE), errmsg("cosid lease keeper cannot serve yet"),
             errdetail("The keeper in database \"%s\" reports: %s.", setting_database, message),
             hint[0] != '\0'
                 ? errhint("%s", hint)
                 : errhint(store_is_remote() && shared->keeper_problem == 2
                               ? "Install cosid on the lease store (cosid.store_dsn) and create the namespace there."
                               : "Run CREATE EXTENSION cosid in database \"%s\" (it holds the lease store), or set "
                                 "cosid.database to this database and restart the server.",
                           setting_database)));
}

// What refuses cosid_next() before any wait: a standby, a store-only server, the
// transaction that created the extension.
void refuse_before_waiting() {
    // No keeper runs during recovery, and a standby stores no rows anyway: say so at once
    // instead of waiting out the acquire timeout.
    if (RecoveryInProgress())
        ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION), errmsg("cosid_next() cannot run during recovery"),
                        errdetail("This server is a standby (or still recovering); no lease keeper runs here."),
                        errhint("Generate ids on the primary, where the rows are written.")));
    if (setting_store_only)
        ereport(ERROR, (errcode(COSID_KEEPER_UNAVAILABLE), errmsg("cosid_next() cannot run on a store-only server"),
                        errdetail("cosid.store_only is on: this server serves a lease store to other instances and "
                                  "issues no ids itself."),
                        errhint("Generate ids on the instances that lease from this store, or turn cosid.store_only "
                                "off and restart.")));
    // The keeper works in its own transactions: it cannot see an extension this transaction
    // created in its database (migration tools create and use it in one transaction).
    if (in_store_database() && extension_created_here())
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("cosid_next() cannot run in the transaction that created the extension cosid"),
                        errdetail("The lease keeper acquires leases in its own transactions, which cannot see the "
                                  "store until this transaction commits."),
                        errhint("Commit CREATE EXTENSION cosid first, then call cosid_next() (or insert rows that "
                                "use it) in a later transaction.")));
}

// What a backend learned while it waited for a lease of its namespace.
struct LeaseWait {
    bool leased = false;
    bool pool_full = false;
    char error[512] = "";  // the keeper's answer for the request, when it cannot be served
    char error_hint[256] = "";
    int error_code = 0;
    int64 earliest_expiry = 0;  // an exhausted namespace: when its earliest lease expires
    int tries = 0;              // transient store errors the keeper retried for this namespace
    char last_error[256] = "";
};

// Waits (up to the acquire timeout) until the keeper leased a slot of `ns` for this instance,
// or said why it cannot; `here` and `checks_before` as keeper_problem_known takes them.
void wait_on_request(const char* ns, bool here, uint64 checks_before, int64 start, int timeout, LeaseWait* w) {
    int request = -1;  // the request this backend counts itself a waiter of: entry and id
    uint64 request_id = 0;
    uint64 refusals_seen = 0;  // the request's refusals when this backend began to wait on it
    ConditionVariablePrepareToSleep(&shared->cv);
    for (;;) {
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        w->leased = active_entry_locked(ns) >= 0;
        if (!w->leased) {
            int r = request_entry_locked(ns);
            w->pool_full = r < 0;
            if (r >= 0) {
                PoolEntry* e = &shared->pool[r];
                if (r != request || e->request_id != request_id) {
                    e->waiters++;
                    request = r;
                    request_id = e->request_id;
                    refusals_seen = e->refusals;
                    // A refusal answered before this call asked is not its answer: the keeper
                    // asks again, at most kRefusedRetryMs after that refusal.  (Each call of a
                    // namespace the store refuses was a store call of its own, as fast as its
                    // clients called; a call after an administrator's fix got the old error.)
                    if (e->error[0] != '\0')
                        e->retry_at = Min(e->retry_at, Max(e->refused_at + kRefusedRetryMs, mono_ms()));
                }
                e->request_seen_at = mono_ms();
                // (at the caller's timeout, a refusal from before it asked says more than "the
                // keeper did not answer": with a cosid.acquire_timeout under kRefusedRetryMs)
                bool answered = e->refusals != refusals_seen || elapsed_ms(start) >= timeout;
                strlcpy(w->error, answered ? e->error : "", sizeof(w->error));
                strlcpy(w->error_hint, answered ? e->error_hint : "", sizeof(w->error_hint));
                w->error_code = answered ? e->error_code : 0;
                if (e->earliest_expiry != 0) w->earliest_expiry = e->earliest_expiry;
                if (e->tries > 0) {
                    w->tries = e->tries;
                    strlcpy(w->last_error, e->last_error, sizeof(w->last_error));
                }
            }
        }
        bool done = w->leased || w->error[0] != '\0' || w->pool_full || elapsed_ms(start) >= timeout ||
                    keeper_problem_known(here, checks_before);
        if (done && request >= 0) {
            // The last waiter to give up takes a request nobody is being served by along
            // (one the keeper is acquiring for, it drops when the store answers).  Not a
            // refused one: the next call of its namespace waits for its next answer instead
            // of posting a new request, which the keeper would take to the store at once; the
            // keeper drops it, without asking the store, if nobody waits for it when it is due
            // again (keeper_request.cpp, drop_refused_unwanted_locked).
            PoolEntry* e = &shared->pool[request];
            if ((e->state == kWanted || e->state == kAcquiring) && e->request_id == request_id && --e->waiters <= 0 &&
                e->state == kWanted && mono_ms() > e->keeper_wants_until && e->error[0] == '\0')
                drop_request_locked(e);
        }
        LWLockRelease(shared->lock);
        if (done) break;
        wake_keeper();
        ConditionVariableTimedSleep(&shared->cv, 50, PG_WAIT_EXTENSION);
    }
    ConditionVariableCancelSleep();
}

// Why no lease came: the keeper's answer, a full pool, a keeper not serving, or the timeout.
// report_no_lease when the keeper answered the request with an error: the error, worded for
// what it is about (split out of report_no_lease to keep it short: the same checks in the same
// order).
[[noreturn]] void report_keeper_answer(const char* ns, int32 static_slot, const LeaseWait& w) {
    // (the keeper retries transient errors and never relays one: keeper::request_failed_locked)
    if (static_slot >= 0)
        ereport(ERROR, (errcode(w.error_code), errmsg("%s", w.error),
                        errdetail("Namespace \"%s\" uses static slot %d (cosid.static_slots): its windows come from "
                                  "the state file, not from a lease store.",
                                  ns, static_slot),
                        w.error_hint[0] != '\0' ? errhint("%s", w.error_hint) : 0));
    if (w.error_code == COSID_KEEPER_UNAVAILABLE && w.error_hint[0] != '\0')
        report_citus_worker(w.error, w.error_hint);  // the only keeper refusal with a hint
    if (w.error_code == ERRCODE_UNDEFINED_OBJECT)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                        errmsg("cosid namespace \"%s\" does not exist in the lease store", ns),
                        errdetail("The lease store answered: %s", w.error),
                        errhint("Create it on the store with cosid_namespace_create('%s').", ns)));
    if (w.error_code == COSID_SLOT_RANGE)  // regional stores: src/core/slot_range
        ereport(ERROR,
                (errcode(COSID_SLOT_RANGE),
                 errmsg("cosid namespace \"%s\": the lease store's slot range is not the one this instance saw", ns),
                 errdetail("%s Its slots may be another region's store's: no slot was taken.", w.error),
                 errhint("Point cosid.store_dsn at this instance's own region's store. To move the instance to "
                         "that store on purpose, forget the range it saw, here as a superuser: SELECT "
                         "cosid._namespace_range_forget('%s').",
                         ns)));
    if (w.error_code == COSID_STATIC_STATE)  // cosid.history (src/pg/store/store_history.cpp)
        ereport(ERROR, (errcode(COSID_STATIC_STATE),
                        errmsg("cosid could not acquire a slot in namespace \"%s\": %s", ns, w.error),
                        errdetail("The file records what other stores granted this instance; without it a window "
                                  "could repeat ids issued under another store."),
                        w.error_hint[0] != '\0' ? errhint("%s", w.error_hint) : 0));
    if (w.error_code == COSID_FORK)  // a forked store (src/pg/keeper/fork.cpp)
        ereport(ERROR,
                (errcode(COSID_FORK),
                 errmsg("cosid could not acquire a slot in namespace \"%s\": the lease store is a copy of a server "
                        "that may still issue ids",
                        ns),
                 errdetail("The lease store answered: %s", w.error),
                 w.error_hint[0] != '\0' ? errhint("%s", w.error_hint) : 0));
    if (w.error_code == ERRCODE_INVALID_OBJECT_DEFINITION)
        report_layout_mismatch(ns, "on this instance", w.error, "no slot was taken",
                               "the keeper then copies the store's");
    ereport(ERROR, (errcode(COSID_KEEPER_UNAVAILABLE), errmsg("cosid could not acquire a slot in namespace \"%s\"", ns),
                    errdetail("The lease store answered: %s", w.error),
                    w.error_hint[0] != '\0' ? errhint("%s", w.error_hint) : 0));
    pg_unreachable();
}

// report_no_lease when no answer came: the keeper runs but cannot reach its store, or no
// keeper serves.  Returns when neither is so.
void report_keeper_not_serving(const char* ns, int timeout) {
    char keeper_found[256];
    LWLockAcquire(shared->lock, LW_SHARED);
    bool store_unready = shared->keeper_pid != 0 && !shared->keeper_ready && shared->keeper_problem_message[0] != '\0';
    strlcpy(keeper_found, shared->keeper_problem_message, sizeof(keeper_found));
    LWLockRelease(shared->lock);
    // The keeper runs but its store did not answer (a transient error: callers waited): say
    // what it found, not that no keeper attached.
    if (store_unready)
        ereport(ERROR, (errcode(COSID_KEEPER_UNAVAILABLE),
                        errmsg("cosid lease keeper cannot reach the lease store for namespace \"%s\"", ns),
                        errdetail("The keeper's last attempt on the lease store%s failed: %s",
                                  store_is_remote() ? " (cosid.store_dsn)" : "", keeper_found),
                        errhint("Check that the store (or the pooler in front of it) is up and accepts the keeper; "
                                "the server log has the keeper's entry for this outage.")));
    if (!shared->keeper_ready || shared->keeper_pid == 0)
        ereport(ERROR,
                (errcode(COSID_KEEPER_UNAVAILABLE), errmsg("cosid lease keeper is not serving namespace \"%s\"", ns),
                 errdetail("No keeper has attached to database \"%s\" with the extension installed within %d ms.",
                           setting_database, timeout),
                 errhint("Check the server log for the cosid keeper, and that CREATE EXTENSION cosid ran in "
                         "database \"%s\".",
                         setting_database)));
}

// report_no_lease when the wait ran out: the transient errors the keeper met, an exhausted
// namespace, or no answer at all.
[[noreturn]] void report_wait_over(const char* ns, int32 static_slot, int64 start, int timeout, const LeaseWait& w) {
    if (w.tries > 0 && static_slot >= 0)
        ereport(ERROR, (errcode(COSID_KEEPER_UNAVAILABLE),
                        errmsg("cosid could not open a window on static slot %d of namespace \"%s\" within %d ms",
                               static_slot, ns, timeout),
                        errdetail("Tried %d time%s in %lld ms; the last error: %s", w.tries, w.tries == 1 ? "" : "s",
                                  static_cast<long long>(elapsed_ms(start)), w.last_error),
                        errhint("The errors were transient (locks, timeouts): check what holds cosid.static_ceiling "
                                "in database \"%s\", or raise cosid.acquire_timeout.",
                                setting_database)));
    if (w.tries > 0)
        ereport(ERROR, (errcode(COSID_KEEPER_UNAVAILABLE),
                        errmsg("cosid could not acquire a slot in namespace \"%s\" within %d ms", ns, timeout),
                        errdetail("Tried %d time%s in %lld ms; the last answer of the lease store: %s", w.tries,
                                  w.tries == 1 ? "" : "s", static_cast<long long>(elapsed_ms(start)), w.last_error),
                        errhint("The store's errors were transient (locks, timeouts, connections); check what holds "
                                "the lease table or the store's connection, or raise cosid.acquire_timeout.")));
    if (w.earliest_expiry != 0)
        ereport(ERROR, (errcode(COSID_EXHAUSTED), errmsg("cosid namespace \"%s\" is exhausted", ns),
                        errdetail("Every slot is held; the earliest lease expires at %s. Waited %d ms.",
                                  ms_to_text(w.earliest_expiry), timeout),
                        errhint("Use a namespace with more slot bits, fewer instances, or raise "
                                "cosid.acquire_timeout.")));
    ereport(ERROR,
            (errcode(COSID_KEEPER_UNAVAILABLE), errmsg("cosid timed out waiting for a slot in namespace \"%s\"", ns),
             errdetail("The lease keeper did not answer within %d ms.", timeout),
             errhint("Check the server log; the store may be locked or unreachable.")));
}

[[noreturn]] void report_no_lease(const char* ns, bool here, uint64 checks_before, int64 start, int timeout,
                                  const LeaseWait& w) {
    keeper_cannot_serve(here, checks_before);
    int32 static_slot = static_slot_for(ns);
    if (w.error[0] != '\0') report_keeper_answer(ns, static_slot, w);
    if (w.pool_full)
        ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_RESOURCES), errmsg("cosid's lease pool is full"),
                        errdetail("This instance issues in %d namespaces at most at once (cosid.max_namespaces).",
                                  setting_max_namespaces),
                        errhint("Raise cosid.max_namespaces and restart the server.")));
    report_keeper_not_serving(ns, timeout);
    report_wait_over(ns, static_slot, start, timeout, w);
}

}  // namespace

// Waits until the instance holds a lease of `ns` (returns), or fails with what the keeper
// or the store said.  Every backend waiting for `ns` waits on the same request.
void wait_for_lease(const char* ns) {
    refuse_before_waiting();
    // Where this database holds the store, ask it; elsewhere the keeper's store answers.
    bool here = in_store_database();
    if (!store_is_remote() && here) check_namespace_exists(ns);
    uint64 checks_before = shared->keeper_checks;
    wake_keeper();
    if (here && shared->keeper_failed_starts > 0) {
        // The keeper backs off because its database did not exist; this is it: connect now.
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        shared->keeper_retry_now = true;
        LWLockRelease(shared->lock);
    }
    int64 start = mono_ms();
    int timeout = acquire_timeout_ms();
    LeaseWait w;
    wait_on_request(ns, here, checks_before, start, timeout, &w);
    if (!w.leased) report_no_lease(ns, here, checks_before, start, timeout, w);
}

}  // namespace cosid::pg

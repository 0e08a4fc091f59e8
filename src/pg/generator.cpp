// Each backend's generators: one per namespace it uses, each on the instance's lease of that
// namespace.  Every backend claims its ids from the lease's shared issue word (one
// compare-and-swap per id, no lock), with the rule of src/core/issue_word; so the ids of an
// instance are strictly increasing in issue order across its backends, and nothing is ever
// issued outside the window (floor, ceiling].
#include "generator.hpp"

#include <type_traits>

#include "boundary.hpp"
#include "calendar.hpp"
#include "citus.hpp"
#include "clock_step.hpp"
#include "errors.hpp"
#include "issue_word.hpp"
#include "settings.hpp"
#include "state.hpp"
#include "static_state.hpp"
#include "store.hpp"

namespace cosid::pg {

namespace {

// A backend's generator for one namespace: which lease it is on, and a copy of what of that
// lease never changes (slot, floor, layout), taken under the lock when it attached.
struct Gen {
    char ns[NAMEDATALEN];  // the hash key
    int entry;             // pool entry of the lease, -1: none
    uint64 generation;     // the lease's generation when it attached
    bool issued;           // it issued on this lease: a loss of it fails its next call once
    // Leases it issued on that closed while their release was pending: until the keeper ends
    // one, nobody knows whether the store still had it; found lost then, the next call fails.
    // A block of ids claimed at once, issued during the statement that claimed it (so that
    // every id is still above all ids committed before its statement began): the next id,
    // how many are left, and the statement; `want` doubles while a statement uses blocks up.
    int64 block_next_id;
    int64 block_left;
    uint64 block_statement;
    int64 want;
    static constexpr int kPending = 4;
    int pending_entry[kPending];
    uint64 pending_generation[kPending];  // 0: none
    bool any_pending;
    bool layout_checked;   // this database's definition of ns matches the store's
    bool is_static;        // the lease is a static slot's window
    int32 slot;
    int64 floor;
    int64 floor_wait_ms;   // the entry's: the wait for the floor that the store imposed
    Layout layout;
};
// ereport may longjmp over these: they must not need destructors.
static_assert(std::is_trivially_destructible_v<Gen>, "Gen must be trivially destructible");

HTAB* gens = nullptr;            // every namespace this backend used: no limit but the pool's
Gen* last_used = nullptr;        // the generator of the last cosid_next(namespace)
Gen* default_gen = nullptr;      // the generator of cosid.namespace ...
uint64 default_gen_setting = 0;  // ... as of this assignment of the setting
uint64 unflushed_ids = 0;
// Bumped at every executor start (statement_hook): a block of ids lives for one statement.
uint64 statement_number = 1;
ExecutorStart_hook_type prev_executor_start = nullptr;
// The most ids a generator claims at once: a tight loop's compare-and-swaps on the shared
// word fall by this factor.  Measured (bench): blocks of 64 let concurrent bulk inserts
// interleave 64-id runs in the primary key, 1.25-1.32x bigserial's index size with 4 and
// 16 writers; 8 gave 1.11x with 16; 4 keeps it at 1.00-1.03x and still brings two tight
// loops to about 1.1x one.  A statement skips at most 3 sequence values.
constexpr int64 kMaxBlock = 4;
bool exit_hook_registered = false;
int my_hazard = -1;  // this process's hazard slot (its pgprocno)

// Waits are measured on the monotonic clock: a wall-clock step neither ends nor stretches them.
int64 elapsed_ms(int64 since_mono_ms) { return mono_ms() - since_mono_ms; }

char* ms_to_text(int64 ms) { return pstrdup(timestamptz_to_str(ms_to_timestamptz(ms))); }

// A claim is bracketed by publish/unpublish (state.hpp, "Reuse of an entry").  The exchange
// is a full barrier: the hazard is visible before the generation is read.
inline void publish(int entry) {
    pg_atomic_exchange_u32(&claiming()[my_hazard].entry, static_cast<uint32>(entry + 1));
}
// After a successful compare-and-swap (a full barrier) a plain store suffices; elsewhere the
// exchange keeps the reads of the entry before the hazard is gone.
inline void unpublish_after_cas() { pg_atomic_write_u32(&claiming()[my_hazard].entry, 0); }
inline void unpublish() { pg_atomic_exchange_u32(&claiming()[my_hazard].entry, 0); }

// Under the lock: the instance's open lease of `ns` (the newest, should there be two), or -1.
int active_entry_locked(const char* ns) {
    int best = -1;
    uint64 best_generation = 0;
    for (int i = 0; i < shared->npool; ++i) {
        PoolEntry* e = &shared->pool[i];
        if (e->state != kLeased || e->releasing || e->release_requested || strcmp(e->ns, ns) != 0) continue;
        uint64 g = pg_atomic_read_u64(&e->generation);
        if (g == 0 || issue_word::closed(pg_atomic_read_u64(&e->word))) continue;
        if (g > best_generation) {
            best = i;
            best_generation = g;
        }
    }
    return best;
}

// Puts `g` on entry i's lease (under the lock).
void attach_locked(Gen* g, int i) {
    PoolEntry* e = &shared->pool[i];
    g->entry = i;
    g->generation = pg_atomic_read_u64(&e->generation);
    g->issued = false;
    g->is_static = e->is_static;
    g->slot = e->slot;
    g->floor = e->floor;
    g->floor_wait_ms = e->floor_wait_ms;
    g->layout = entry_layout(*e);
    e->users++;
}

// Takes `g` off its lease.  Only the keeper ends a lease: a generator just stops using it.
void detach(Gen* g) {
    if (g->entry < 0) return;
    PoolEntry* e = &shared->pool[g->entry];
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (pg_atomic_read_u64(&e->generation) == g->generation && e->users > 0) e->users--;
    LWLockRelease(shared->lock);
    g->entry = -1;
    g->generation = 0;
    g->issued = false;
    g->block_left = 0;
}

void detach_all_at_exit(int code, Datum arg) {
    // Exit callbacks run before PostgreSQL releases LWLocks: one held here means an error in
    // the middle of a change; the backend counts (display only) are then left as they are.
    if (shared == nullptr) return;
    if (my_hazard >= 0) pg_atomic_write_u32(&claiming()[my_hazard].entry, 0);  // (never set outside a claim anyway)
    flush_issued_count();
    if (gens == nullptr || LWLockHeldByMe(shared->lock)) return;
    HASH_SEQ_STATUS it;
    hash_seq_init(&it, gens);
    for (Gen* g; (g = static_cast<Gen*>(hash_seq_search(&it))) != nullptr;) detach(g);
}

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
    int rc = SPI_execute_with_args("SELECT cosid._layout_difference($1, $2, $3, $4, $5, $6)", 6, types, values,
                                   nullptr, true, 1);
    if (rc == SPI_OK_SELECT && SPI_processed > 0) {
        char* difference = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
        if (difference != nullptr) strlcpy(out, difference, len);
    }
    SPI_finish();
}

// A namespace defined here (`where`) with another layout than the store's is refused:
// cosid_parse() here would misread the ids.  `difference` names both layouts.
[[noreturn]] void report_layout_mismatch(const char* ns, const char* where, const char* difference,
                                         const char* outcome, const char* remedy) {
    ereport(ERROR, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
                    errmsg("cosid namespace \"%s\" %s has another layout than in the lease store", ns, where),
                    errdetail("Layout (timestamp/slot/sequence bits) %s. cosid_parse() here would misread the store's "
                              "ids, so %s.", difference, outcome),
                    errhint("Remove the local definition as a superuser (DELETE FROM cosid.lease WHERE namespace = "
                            "'%s'; DELETE FROM cosid.namespace WHERE name = '%s'); %s.", ns, ns, remedy)));
    pg_unreachable();
}


// Under the lock: the request entry for `ns` that every waiter shares, posted when there is
// none; -1 when the pool is full.
int request_entry_locked(const char* ns) {
    int in_use = 0;  // namespaces leased or asked for: at most cosid.max_namespaces
    for (int i = 0; i < shared->npool; ++i) {
        PoolEntry* e = &shared->pool[i];
        if ((e->state == kWanted || e->state == kAcquiring) && strcmp(e->ns, ns) == 0) return i;
        if (e->state == kWanted || e->state == kAcquiring || (e->state == kLeased && !e->releasing)) in_use++;
    }
    if (in_use >= setting_max_namespaces) return -1;
    for (int i = 0; i < shared->npool; ++i) {
        PoolEntry* e = &shared->pool[i];
        if (e->state != kEmpty) continue;
        memset(e->ns, 0, sizeof(e->ns));
        strlcpy(e->ns, ns, sizeof(e->ns));
        e->state = kWanted;
        e->request_id = ++shared->next_request_id;
        e->waiters = 0;
        e->request_seen_at = mono_ms();
        e->retry_at = 0;
        e->earliest_expiry = 0;
        e->error[0] = '\0';
        e->error_code = 0;
        e->tries = 0;
        e->last_error[0] = '\0';
        e->users = 0;
        e->release_requested = false;
        e->releasing = false;
        return i;
    }
    return -1;
}

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
    ereport(ERROR, (errcode(COSID_KEEPER_UNAVAILABLE),
                    errmsg("cosid lease keeper cannot serve yet"),
                    errdetail("The keeper in database \"%s\" reports: %s.", setting_database, message),
                    hint[0] != '\0' ? errhint("%s", hint)
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
        ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
                        errmsg("cosid_next() cannot run during recovery"),
                        errdetail("This server is a standby (or still recovering); no lease keeper runs here."),
                        errhint("Generate ids on the primary, where the rows are written.")));
    if (setting_store_only)
        ereport(ERROR, (errcode(COSID_KEEPER_UNAVAILABLE),
                        errmsg("cosid_next() cannot run on a store-only server"),
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
    char error[512] = "";      // the keeper's answer for the request, when it cannot be served
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
                }
                e->request_seen_at = mono_ms();
                strlcpy(w->error, e->error, sizeof(w->error));
                strlcpy(w->error_hint, e->error_hint, sizeof(w->error_hint));
                w->error_code = e->error_code;
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
            // (one the keeper is acquiring for, it drops when the store answers).
            PoolEntry* e = &shared->pool[request];
            if ((e->state == kWanted || e->state == kAcquiring) && e->request_id == request_id &&
                --e->waiters <= 0 && e->state == kWanted)
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
[[noreturn]] void report_no_lease(const char* ns, bool here, uint64 checks_before, int64 start, int timeout,
                                  const LeaseWait& w) {
    keeper_cannot_serve(here, checks_before);
    int32 static_slot = static_slot_for(ns);
    if (w.error[0] != '\0' && static_slot >= 0)
        ereport(ERROR, (errcode(w.error_code), errmsg("%s", w.error),
                        errdetail("Namespace \"%s\" uses static slot %d (cosid.static_slots): its windows come from "
                                  "the state file, not from a lease store.", ns, static_slot),
                        w.error_hint[0] != '\0' ? errhint("%s", w.error_hint) : 0));
    if (w.error[0] != '\0' && w.error_code == COSID_KEEPER_UNAVAILABLE && w.error_hint[0] != '\0')
        report_citus_worker(w.error, w.error_hint);  // the only keeper refusal with a hint
    if (w.error[0] != '\0' && w.error_code == ERRCODE_UNDEFINED_OBJECT)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT), errmsg("cosid namespace \"%s\" does not exist in the lease store", ns),
                        errdetail("The lease store answered: %s", w.error),
                        errhint("Create it on the store with cosid_namespace_create('%s').", ns)));
    if (w.error[0] != '\0' && w.error_code == COSID_SLOT_RANGE)  // regional stores: src/core/slot_range
        ereport(ERROR, (errcode(COSID_SLOT_RANGE),
                        errmsg("cosid namespace \"%s\": the lease store's slot range is not the one this instance saw",
                               ns),
                        errdetail("%s Its slots may be another region's store's: no slot was taken.", w.error),
                        errhint("Point cosid.store_dsn at this instance's own region's store. To move the instance to "
                                "that store on purpose, forget the range it saw, here as a superuser: SELECT "
                                "cosid._namespace_range_forget('%s').",
                                ns)));
    if (w.error[0] != '\0' && w.error_code == COSID_STATIC_STATE)  // cosid.history (src/pg/store_history.cpp)
        ereport(ERROR, (errcode(COSID_STATIC_STATE),
                        errmsg("cosid could not acquire a slot in namespace \"%s\": %s", ns, w.error),
                        errdetail("The file records what other stores granted this instance; without it a window "
                                  "could repeat ids issued under another store."),
                        w.error_hint[0] != '\0' ? errhint("%s", w.error_hint) : 0));
    if (w.error[0] != '\0' && w.error_code == COSID_FORK)  // a forked store (src/pg/fork.cpp)
        ereport(ERROR, (errcode(COSID_FORK),
                        errmsg("cosid could not acquire a slot in namespace \"%s\": the lease store is a copy of a server "
                               "that may still issue ids", ns),
                        errdetail("The lease store answered: %s", w.error),
                        w.error_hint[0] != '\0' ? errhint("%s", w.error_hint) : 0));
    if (w.error[0] != '\0' && w.error_code == ERRCODE_INVALID_OBJECT_DEFINITION)
        report_layout_mismatch(ns, "on this instance", w.error, "no slot was taken", "the keeper then copies the store's");
    if (w.error[0] != '\0')
        ereport(ERROR, (errcode(COSID_KEEPER_UNAVAILABLE),
                        errmsg("cosid could not acquire a slot in namespace \"%s\"", ns),
                        errdetail("The lease store answered: %s", w.error),
                        w.error_hint[0] != '\0' ? errhint("%s", w.error_hint) : 0));
    if (w.pool_full)
        ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_RESOURCES),
                        errmsg("cosid's lease pool is full"),
                        errdetail("This instance issues in %d namespaces at most at once (cosid.max_namespaces).",
                                  setting_max_namespaces),
                        errhint("Raise cosid.max_namespaces and restart the server.")));
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
        ereport(ERROR, (errcode(COSID_KEEPER_UNAVAILABLE),
                        errmsg("cosid lease keeper is not serving namespace \"%s\"", ns),
                        errdetail("No keeper has attached to database \"%s\" with the extension installed within %d ms.",
                                  setting_database, timeout),
                        errhint("Check the server log for the cosid keeper, and that CREATE EXTENSION cosid ran in "
                                "database \"%s\".", setting_database)));
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
    ereport(ERROR, (errcode(COSID_KEEPER_UNAVAILABLE),
                    errmsg("cosid timed out waiting for a slot in namespace \"%s\"", ns),
                    errdetail("The lease keeper did not answer within %d ms.", timeout),
                    errhint("Check the server log; the store may be locked or unreachable.")));
}

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

// Puts `g` on the instance's lease of `ns`, asking the keeper for one when it holds none.
// The layout check against this database's own definition runs before `g` counts as a user,
// so an error there leaves nothing to undo.
void attach(Gen* g) {
    const char* ns = g->ns;
    for (;;) {
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        int i = active_entry_locked(ns);
        if (i >= 0 && g->layout_checked) attach_locked(g, i);
        Layout layout = i >= 0 ? entry_layout(shared->pool[i]) : Layout{};
        LWLockRelease(shared->lock);
        if (i >= 0 && g->layout_checked) return;
        if (i >= 0) {
            // In the keeper's database the namespace came from the store (local) or was checked
            // by the keeper (remote); elsewhere this database's own definition is checked here.
            if (!in_store_database()) {
                char difference[256];
                local_layout_difference(ns, layout, difference, sizeof(difference));
                if (difference[0] != '\0') {
                    char where[NAMEDATALEN + 16];
                    snprintf(where, sizeof(where), "in database \"%s\"", get_database_name(MyDatabaseId));
                    report_layout_mismatch(ns, where, difference, "none was issued",
                                           "then create it with the store's values");
                }
            }
            g->layout_checked = true;
            continue;
        }
        wait_for_lease(ns);
    }
}

Gen* generator_for(const char* ns) {
    if (gens != nullptr) {
        Gen* g = static_cast<Gen*>(hash_search(gens, ns, HASH_FIND, nullptr));
        if (g != nullptr) return g;
    }
    if (!valid_namespace_name(ns))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("invalid cosid namespace name \"%s\"", ns),
                        errdetail("A namespace name is 1 to 63 letters, digits, \"_\", \".\", \":\" or \"-\".")));
    if (my_hazard < 0) {
        if (MyProc == nullptr || COSID_MY_PROC_NUMBER() < 0 || COSID_MY_PROC_NUMBER() >= shared->nclaiming)
            ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                            errmsg("cosid_next() cannot run in this kind of process"),
                            errdetail("Ids are issued by client backends, background workers and WAL senders.")));
        my_hazard = COSID_MY_PROC_NUMBER();
    }
    if (gens == nullptr) {
        HASHCTL ctl;
        memset(&ctl, 0, sizeof(ctl));
        ctl.keysize = NAMEDATALEN;
        ctl.entrysize = sizeof(Gen);
        ctl.hcxt = TopMemoryContext;
        gens = hash_create("cosid generators", 16, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
    }
    if (!exit_hook_registered) {
        before_shmem_exit(detach_all_at_exit, 0);
        exit_hook_registered = true;
    }
    char key[NAMEDATALEN];
    memset(key, 0, sizeof(key));
    strlcpy(key, ns, sizeof(key));
    bool found;
    Gen* g = static_cast<Gen*>(hash_search(gens, key, HASH_ENTER, &found));
    if (!found) {
        g->entry = -1;
        g->generation = 0;
        g->issued = false;
        for (int k = 0; k < Gen::kPending; ++k) g->pending_generation[k] = 0;
        g->block_left = 0;
        g->block_statement = 0;
        g->want = 1;
        g->any_pending = false;
        g->layout_checked = in_store_database();
    }
    return g;
}

[[noreturn]] void report_lost(const char* ns, int32 slot);

// Remembers g's current lease as one whose release is pending (the oldest unresolved one is
// given up when all places are taken: its loss, found later, then goes unreported).
void remember_pending(Gen* g) {
    int k = 0;
    while (k < Gen::kPending - 1 && g->pending_generation[k] != 0) ++k;
    g->pending_entry[k] = g->entry;
    g->pending_generation[k] = g->generation;
    g->any_pending = true;
}

// The lease `g` was on ended (its word closed, or its entry moved on).  A lease that was lost
// fails the next call of every generator that issued on it, once (ZC001); one released in
// order (idle, cosid_release) is just left for the next.
void lease_ended(Gen* g) {
    bool lost = false;
    if (g->issued) {
        LWLockAcquire(shared->lock, LW_SHARED);
        lost = lease_lost_locked(g->generation);
        // closed, not ended yet: its release is pending, and may still find it lost
        if (!lost && pg_atomic_read_u64(&shared->pool[g->entry].generation) == g->generation) remember_pending(g);
        LWLockRelease(shared->lock);
    }
    int32 slot = g->slot;
    detach(g);
    if (lost) report_lost(g->ns, slot);
}

// Leases this generator issued on, closed while their release was pending, that have ended
// since: if a release found its lease lost, this call fails once (ZC001).
void check_pending_leases(Gen* g) {
    bool lost = false, still = false;
    for (int k = 0; k < Gen::kPending; ++k) {
        if (g->pending_generation[k] == 0) continue;
        if (pg_atomic_read_u64(&shared->pool[g->pending_entry[k]].generation) == g->pending_generation[k]) {
            still = true;
            continue;
        }
        LWLockAcquire(shared->lock, LW_SHARED);
        lost = lease_lost_locked(g->pending_generation[k]) || lost;
        LWLockRelease(shared->lock);
        g->pending_generation[k] = 0;
    }
    g->any_pending = still;
    if (lost) report_lost(g->ns, -1);
}

[[noreturn]] void report_lost(const char* ns, int32 slot) {
    if (slot >= 0)
        ereport(ERROR, (errcode(COSID_SLOT_LOST), errmsg("cosid lost its lease on slot %d of namespace \"%s\"", slot, ns),
                        errdetail("The lease was revoked or taken over after it expired; no id is issued on it any more."),
                        errhint("Retry: the next call uses the instance's next lease.")));
    ereport(ERROR, (errcode(COSID_SLOT_LOST), errmsg("cosid lost a lease of namespace \"%s\"", ns),
                    errdetail("The lease this backend issued on was found revoked or taken over when it was released; "
                              "the ids issued were inside its window."),
                    errhint("Retry: the next call uses the instance's next lease.")));
}

int64 issue(Gen* g) {
    if (unlikely(g->any_pending)) check_pending_leases(g);
    // The rest of a block this statement claimed: no shared memory touched.  Its ids were
    // claimed inside the window and recorded in the word, so they stay unique and inside a
    // granted window even if the lease ended since (a release hands on the block's tick).
    // The lease's generation (a read-mostly cache line) is checked so that a lost lease still
    // fails this backend's next call (ZC001) instead of a block's worth of calls later.
    if (g->block_left > 0 && g->block_statement == statement_number &&
        pg_atomic_read_u64(&shared->pool[g->entry].generation) == g->generation) {
        g->block_left--;
        if (++unflushed_ids >= 1024) flush_issued_count();
        return g->block_next_id++;
    }
    // A statement that used up its block asks for twice as many next time (up to kMaxBlock).
    int64 want = g->block_statement == statement_number ? Min(g->want * 2, kMaxBlock) : 1;
    int64 wait_start = 0;
    bool counted_wait = false;
    bool asked_keeper = false;  // a wait for the clock longer than a move: the keeper was asked to look
    for (;;) {
        if (g->entry < 0) attach(g);
        PoolEntry* e = &shared->pool[g->entry];
        // The claim: nothing in here may ereport or be interrupted while the hazard is set
        // (claim() is pure arithmetic).
        publish(g->entry);
        if (pg_atomic_read_u64(&e->generation) != g->generation) {
            unpublish();
            lease_ended(g);
            continue;
        }
        int64 ceiling = static_cast<int64>(pg_atomic_read_u64(&e->ceiling));
        uint64 w = pg_atomic_read_u64(&e->word);
        // A static window without a state file borrows nothing ahead of the clock: a restart
        // could not know how far it went (src/core static_state.hpp).
        int64 borrow = g->is_static ? cosid::static_borrow_ms(static_state_file_configured(), setting_max_borrow_ms)
                                    : setting_max_borrow_ms;
        Claim c;
        for (;;) {
            c = claim(w, g->layout, g->slot, ClaimWindow{g->floor, ceiling}, clock_ms(), borrow, want);
            if (c.status != NextStatus::Issued) break;
            // Full barrier; on failure `w` is the word as it is now, and the claim is made again.
            if (pg_atomic_compare_exchange_u64(&e->word, &w, c.word)) break;
        }
        if (c.status == NextStatus::Issued) {
            unpublish_after_cas();
            g->issued = true;
            g->want = want;
            g->block_statement = statement_number;
            g->block_next_id = c.id + 1;
            g->block_left = c.count - 1;
            if (++unflushed_ids >= 1024) flush_issued_count();
            return c.id;
        }
        unpublish();
        if (c.status == NextStatus::Closed) {
            lease_ended(g);
            continue;
        }
        if (c.status == NextStatus::SequenceExhausted) {
            // The tick's sequence is used up and cosid.max_borrow says wait for the clock (a
            // clock that stepped back far makes that long: bounded by cosid.acquire_timeout).
            if (wait_start == 0) wait_start = mono_ms();
            // Longer than a move to a slot whose window starts now (a clock that stepped back
            // far behind the last id): the keeper renews at once, and leaves the lease
            // (src/core/clock_step.hpp).  Static slots have no other slot.
            if (!asked_keeper && !g->is_static &&
                c.wait_until_ms - clock_ms() > cosid::clock_step::patience_ms(g->layout, store_bound_ms())) {
                asked_keeper = true;
                LWLockAcquire(shared->lock, LW_EXCLUSIVE);
                if (pg_atomic_read_u64(&e->generation) == g->generation && e->next_renew_at > 0) e->next_renew_at = 0;
                LWLockRelease(shared->lock);
                wake_keeper();
            }
            if (elapsed_ms(wait_start) >= acquire_timeout_ms()) {
                // A static slot without a state file borrows nothing, whatever max_borrow says.
                bool no_file = g->is_static && !static_state_file_configured();
                ereport(ERROR,
                        (errcode(COSID_BEFORE_FLOOR_TIMEOUT),
                         errmsg("cosid clock is behind the last id issued in namespace \"%s\"", g->ns),
                         no_file ? errdetail("Static slots without a state file issue no id ahead of the clock; "
                                             "waited %d ms for it to reach the next tick.",
                                             acquire_timeout_ms())
                                 : errdetail("cosid.max_borrow (%d ms) forbids issuing further ahead of this clock; "
                                             "waited %d ms for it.",
                                             setting_max_borrow_ms, acquire_timeout_ms()),
                         no_file ? errhint("The clock stepped back. Set cosid.state_file to let static slots borrow "
                                           "ahead of the clock (cosid.max_borrow).")
                                 : errhint("The clock stepped back, or ids are asked for faster than the layout "
                                           "allows; raise cosid.max_borrow, or set it to -1 to borrow up to the "
                                           "window's end.")));
            }
            int64 wait = c.wait_until_ms - clock_ms();
            if (wait > 1) pg_usleep(Min(wait, 100) * 1000L);
            CHECK_FOR_INTERRUPTS();
            continue;
        }
        if (c.status == NextStatus::OutOfRange)
            ereport(ERROR, (errcode(COSID_OUT_OF_RANGE),
                            errmsg("cosid clock is outside namespace \"%s\"'s timestamp range", g->ns),
                            errdetail("The clock reads %lld ms; the layout covers its epoch plus %d timestamp bits.",
                                      static_cast<long long>(clock_ms()), g->layout.timestamp_bits)));
        if (wait_start == 0) wait_start = mono_ms();
        int timeout = acquire_timeout_ms();
        if (c.status == NextStatus::PastCeiling) {
            if (!counted_wait) {
                count(shared->stats.waits_at_ceiling);
                counted_wait = true;
                LWLockAcquire(shared->lock, LW_EXCLUSIVE);
                if (pg_atomic_read_u64(&e->generation) == g->generation && e->next_renew_at > 0) e->next_renew_at = 0;
                LWLockRelease(shared->lock);
                wake_keeper();
            }
            if (elapsed_ms(wait_start) >= timeout) {
                char static_error[200] = "";
                LWLockAcquire(shared->lock, LW_SHARED);
                bool is_static = pg_atomic_read_u64(&e->generation) == g->generation && e->is_static;
                if (is_static) strlcpy(static_error, e->static_error, sizeof(static_error));
                LWLockRelease(shared->lock);
                if (is_static)
                    ereport(ERROR, (errcode(COSID_CEILING_TIMEOUT),
                                    errmsg("cosid window on static slot %d of namespace \"%s\" ended and its next "
                                           "ceiling was not written", g->slot, g->ns),
                                    errdetail("The state file holds the ceiling %s; no id is issued past it. %s%s",
                                              ms_to_text(ceiling),
                                              static_error[0] != '\0' ? "The last write failed: " : "",
                                              static_error[0] != '\0' ? static_error : "The keeper did not write a new one in time."),
                                    errhint("Free space on, or fix the permissions of, the directory of the state "
                                            "file (cosid.state_file).")));
            }
            if (elapsed_ms(wait_start) >= timeout)
                ereport(ERROR, (errcode(COSID_CEILING_TIMEOUT),
                                errmsg("cosid window on slot %d of namespace \"%s\" ended and was not renewed",
                                       g->slot, g->ns),
                                errdetail("The window's ceiling is %s; no renewal arrived within %d ms.",
                                          ms_to_text(ceiling), timeout),
                                errhint("The lease store may be unreachable or locked, or this host's clock runs "
                                        "ahead of the store's.")));
        } else if (c.status == NextStatus::BeforeFloor) {
            // A floor the store raised (after a failover: up to max_ttl + 2 x max_tolerance
            // ahead) is waited out first: only a clock still behind it after that is late.
            // The wait is capped (state.cpp: 2 x ttl + 15 s); what is reported is the real
            // distance from this clock to the floor, which may be years.
            int64 budget = timeout + g->floor_wait_ms;
            if (elapsed_ms(wait_start) >= budget) {
                int64 ahead = g->floor - clock_ms();
                bool far = ahead > 2 * static_cast<int64>(setting_ttl_ms) + 15000;  // past any raise of the store
                char ahead_text[64];
                cpp_call([&] { strlcpy(ahead_text, cosid::format_span_ms(ahead).c_str(), sizeof(ahead_text)); });
                ereport(ERROR, (errcode(COSID_BEFORE_FLOOR_TIMEOUT),
                                errmsg("cosid clock is behind the window of slot %d of namespace \"%s\"",
                                       g->slot, g->ns),
                                errdetail("Ids may only be issued after %s, %s ahead of this clock; waited %lld ms "
                                          "(cosid.acquire_timeout %d ms, plus %lld ms for a floor the lease store "
                                          "set ahead of its clock).",
                                          ms_to_text(g->floor), ahead_text, static_cast<long long>(budget), timeout,
                                          static_cast<long long>(g->floor_wait_ms)),
                                far ? errhint("The floor lies further ahead than any raise of the lease store: if it "
                                              "was set by mistake and nothing was issued above it, an administrator "
                                              "lowers the namespace's floor on the store (SELECT "
                                              "cosid_namespace_lower_floor('%s', now())), and SELECT "
                                              "cosid_release('%s', %d) hands this slot back, so that the next call "
                                              "takes a slot whose window can start now.",
                                              g->ns, g->ns, g->slot)
                                    : errhint("This host's clock runs behind the lease store's.")));
            }
        }
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 5, PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
}

void count_statement(QueryDesc* query, int eflags) {
    new_statement();
    if (prev_executor_start != nullptr) prev_executor_start(query, eflags);
    else standard_ExecutorStart(query, eflags);
}

}  // namespace

void end_of_transaction(XactEvent event, void* arg) { new_statement(); }

void install_statement_hook() {
    prev_executor_start = ExecutorStart_hook;
    ExecutorStart_hook = count_statement;
    RegisterXactCallback(end_of_transaction, nullptr);
}

void new_statement() { ++statement_number; }

void flush_issued_count() {
    if (unflushed_ids > 0 && shared != nullptr) {
        count(shared->stats.ids_issued, unflushed_ids);
        unflushed_ids = 0;
    }
}

bool in_store_database() {
    // The keeper publishes its database's oid; comparing it spares a new backend a catalog
    // lookup on its first call.  Before the keeper connected, compare names.
    Oid store_db = shared->database_oid;
    return OidIsValid(store_db) ? store_db == MyDatabaseId
                                : strcmp(get_database_name(MyDatabaseId), setting_database) == 0;
}

int64 next_id(const char* ns) {
    Gen* g = last_used;
    if (g == nullptr || strcmp(g->ns, ns) != 0) {
        g = generator_for(ns);
        last_used = g;
    }
    return issue(g);
}

int64 next_id_default() {
    Gen* g = default_gen;
    if (g == nullptr || default_gen_setting != namespace_setting_generation) {
        g = generator_for(setting_namespace);
        default_gen = g;
        default_gen_setting = namespace_setting_generation;
    }
    return issue(g);
}

bool wait_for_releases(const int* entries, const uint64* generations, int n) {
    int64 start = mono_ms();
    ConditionVariablePrepareToSleep(&shared->cv);
    for (;;) {
        bool pending = false;
        LWLockAcquire(shared->lock, LW_SHARED);
        for (int i = 0; i < n; ++i) {
            PoolEntry* e = &shared->pool[entries[i]];
            if (pg_atomic_read_u64(&e->generation) == generations[i] && e->state == kLeased &&
                (e->release_requested || e->releasing))
                pending = true;
        }
        LWLockRelease(shared->lock);
        if (!pending || elapsed_ms(start) >= acquire_timeout_ms()) {
            ConditionVariableCancelSleep();
            return !pending;
        }
        ConditionVariableTimedSleep(&shared->cv, 50, PG_WAIT_EXTENSION);
    }
}

int release_own_leases() {
    if (gens == nullptr) return 0;
    int n = 0;
    int cap = Min(static_cast<int>(hash_get_num_entries(gens)), shared->npool);
    int* entries = static_cast<int*>(palloc(sizeof(int) * Max(cap, 1)));
    uint64* generations = static_cast<uint64*>(palloc(sizeof(uint64) * Max(cap, 1)));
    HASH_SEQ_STATUS it;
    hash_seq_init(&it, gens);
    for (Gen* g; (g = static_cast<Gen*>(hash_seq_search(&it))) != nullptr;) {
        if (g->entry < 0) continue;
        PoolEntry* e = &shared->pool[g->entry];
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        if (pg_atomic_read_u64(&e->generation) == g->generation && e->state == kLeased && !e->releasing &&
            n < cap) {
            e->release_requested = true;
            entries[n] = g->entry;
            generations[n++] = g->generation;
            if (g->issued) remember_pending(g);  // the release may find it lost
        }
        LWLockRelease(shared->lock);
        detach(g);
    }
    last_used = nullptr;
    default_gen = nullptr;
    if (n > 0) {
        wake_keeper();
        wait_for_releases(entries, generations, n);
    }
    return n;
}

}  // namespace cosid::pg

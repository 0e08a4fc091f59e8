// Each backend's generators: one per namespace it uses, each bound exclusively to one
// leased slot of the instance's pool.  The window's ceiling is read from shared memory on
// every id; nothing is ever issued outside (floor, ceiling].
#include "generator.hpp"

#include <type_traits>

#include "boundary.hpp"
#include "errors.hpp"
#include "settings.hpp"
#include "state.hpp"
#include "store.hpp"
#include "window_generator.hpp"

namespace cosid::pg {

namespace {

constexpr int kMaxBindings = 8;

struct Binding {
    bool active;
    char ns[NAMEDATALEN];
    int entry;
    WindowGenerator gen;
};
// ereport may longjmp over these: they must not need destructors.
static_assert(std::is_trivially_destructible_v<Binding>, "Binding must be trivially destructible");

Binding bindings[kMaxBindings];
Binding* last_used = nullptr;        // the binding of the last cosid_next(namespace)
Binding* default_binding = nullptr;  // the binding of cosid.namespace ...
uint64 default_binding_generation = 0;  // ... as of this assignment of the setting
uint64 unflushed_ids = 0;
bool exit_hook_registered = false;

// Waits are measured on the monotonic clock: a wall-clock step neither ends nor stretches them.
int64 elapsed_ms(int64 since_mono_ms) { return mono_ms() - since_mono_ms; }

char* ms_to_text(int64 ms) { return pstrdup(timestamptz_to_str(ms_to_timestamptz(ms))); }

// Under the lock: binds `b` to an idle leased entry of `ns`.
bool bind_idle_entry_locked(const char* ns, Binding* b) {
    for (int i = 0; i < shared->npool; ++i) {
        PoolEntry* e = &shared->pool[i];
        if (e->state != kLeased || e->bound_pid != 0 || e->release_requested ||
            pg_atomic_read_u32(&e->lost) != 0 || strcmp(e->ns, ns) != 0)
            continue;
        e->bound_pid = MyProcPid;
        Layout layout;
        layout.timestamp_bits = e->timestamp_bits;
        layout.slot_bits = e->slot_bits;
        layout.sequence_bits = e->sequence_bits;
        layout.epoch_ms = e->epoch_ms;
        layout.unit = e->unit_ms == 1000 ? Unit::Second : Unit::Millisecond;
        // The previous backend on this slot handed back its exact last timestamp: start after it.
        int64 floor = Max(e->floor, e->last_issued);
        b->gen.open(layout, e->slot, floor, static_cast<int64>(pg_atomic_read_u64(&e->ceiling)));
        b->entry = i;
        b->active = true;
        strlcpy(b->ns, ns, sizeof(b->ns));
        return true;
    }
    return false;
}

void unbind(Binding* b, bool release) {
    std::optional<int64> last = b->gen.close();
    PoolEntry* e = &shared->pool[b->entry];
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (e->bound_pid == MyProcPid) {
        if (last && *last > e->last_issued) e->last_issued = *last;
        e->bound_pid = 0;
        e->idle_since = mono_ms();
        if (release) e->release_requested = true;
    }
    LWLockRelease(shared->lock);
    b->active = false;
    if (last_used == b) last_used = nullptr;
    if (default_binding == b) default_binding = nullptr;
    flush_issued_count();
    ConditionVariableBroadcast(&shared->cv);
    if (release) wake_keeper();
}

void unbind_all_at_exit(int code, Datum arg) {
    if (shared == nullptr) return;
    for (auto& b : bindings)
        if (b.active) unbind(&b, false);
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

int post_request_locked(const char* ns) {
    for (int i = 0; i < shared->npool; ++i) {
        PoolEntry* e = &shared->pool[i];
        if (e->state != kEmpty) continue;
        memset(e->ns, 0, sizeof(e->ns));
        strlcpy(e->ns, ns, sizeof(e->ns));
        e->state = kWanted;
        e->requester_pid = MyProcPid;
        e->request_seen_at = mono_ms();
        e->retry_at = 0;
        e->earliest_expiry = 0;
        e->error[0] = '\0';
        e->error_code = 0;
        e->tries = 0;
        e->last_error[0] = '\0';
        e->bound_pid = 0;
        e->release_requested = false;
        e->releasing = false;
        pg_atomic_write_u32(&e->lost, 0);
        return i;
    }
    return -1;
}

bool is_my_request_locked(int i) {
    if (i < 0) return false;
    PoolEntry* e = &shared->pool[i];
    return (e->state == kWanted || e->state == kAcquiring) && e->requester_pid == MyProcPid;
}

void cancel_request_locked(int i) {
    if (!is_my_request_locked(i)) return;
    PoolEntry* e = &shared->pool[i];
    if (e->state == kWanted) e->state = kEmpty;  // an acquire in flight becomes an idle pool slot
    e->requester_pid = 0;
}

// Binds `b` to a slot of `ns`, asking the keeper for one when the pool has none idle.
void bind(const char* ns, Binding* b) {
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    bool bound = bind_idle_entry_locked(ns, b);
    LWLockRelease(shared->lock);
    if (bound) return;

    // No keeper runs during recovery, and a standby stores no rows anyway: say so at once
    // instead of waiting out the acquire timeout.
    if (RecoveryInProgress())
        ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
                        errmsg("cosid_next() cannot run during recovery"),
                        errdetail("This server is a standby (or still recovering); no lease keeper runs here."),
                        errhint("Generate ids on the primary, where the rows are written.")));
    // Where this database holds the store, ask it; elsewhere the keeper's store answers.
    if (!store_is_remote() && in_store_database()) check_namespace_exists(ns);
    int64 start = mono_ms();
    int timeout = acquire_timeout_ms();
    int request = -1;
    char error[256] = "";
    int error_code = 0;
    int64 earliest_expiry = 0;
    int tries = 0;              // transient store errors the keeper retried for us
    char last_error[256] = "";
    bool pool_full = false;
    ConditionVariablePrepareToSleep(&shared->cv);
    for (;;) {
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        bound = bind_idle_entry_locked(ns, b);
        if (bound) {
            cancel_request_locked(request);
        } else {
            if (is_my_request_locked(request)) {
                PoolEntry* e = &shared->pool[request];
                e->request_seen_at = mono_ms();
                strlcpy(error, e->error, sizeof(error));
                error_code = e->error_code;
                if (e->earliest_expiry != 0) earliest_expiry = e->earliest_expiry;
                if (e->tries > 0) {
                    tries = e->tries;
                    strlcpy(last_error, e->last_error, sizeof(last_error));
                }
            } else {
                // First pass, or another backend bound the slot our request produced.
                request = post_request_locked(ns);
                pool_full = request < 0;
            }
            if (error[0] != '\0' || pool_full || elapsed_ms(start) >= timeout) cancel_request_locked(request);
        }
        LWLockRelease(shared->lock);
        if (bound || error[0] != '\0' || pool_full || elapsed_ms(start) >= timeout) break;
        wake_keeper();
        ConditionVariableTimedSleep(&shared->cv, 50, PG_WAIT_EXTENSION);
    }
    ConditionVariableCancelSleep();
    if (bound) return;
    b->active = false;
    if (error[0] != '\0' && error_code == ERRCODE_UNDEFINED_OBJECT)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT), errmsg("cosid namespace \"%s\" does not exist in the lease store", ns),
                        errdetail("The lease store answered: %s", error),
                        errhint("Create it on the store with cosid_namespace_create('%s').", ns)));
    if (error[0] != '\0' && error_code == ERRCODE_INVALID_OBJECT_DEFINITION)
        report_layout_mismatch(ns, "on this instance", error, "no slot was taken", "the keeper then copies the store's");
    if (error[0] != '\0')
        ereport(ERROR, (errcode(COSID_KEEPER_UNAVAILABLE),
                        errmsg("cosid could not acquire a slot in namespace \"%s\"", ns),
                        errdetail("The lease store answered: %s", error)));
    if (pool_full)
        ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_RESOURCES),
                        errmsg("cosid's slot pool is full"),
                        errdetail("Every pool entry of this instance is in use."),
                        errhint("Raise max_connections, or close idle generators with cosid_release().")));
    if (!shared->keeper_ready || shared->keeper_pid == 0)
        ereport(ERROR, (errcode(COSID_KEEPER_UNAVAILABLE),
                        errmsg("cosid lease keeper is not serving namespace \"%s\"", ns),
                        errdetail("No keeper has attached to database \"%s\" with the extension installed within %d ms.",
                                  setting_database, timeout),
                        errhint("Check the server log for the cosid keeper, and that CREATE EXTENSION cosid ran in "
                                "database \"%s\".", setting_database)));
    if (tries > 0)
        ereport(ERROR, (errcode(COSID_KEEPER_UNAVAILABLE),
                        errmsg("cosid could not acquire a slot in namespace \"%s\" within %d ms", ns, timeout),
                        errdetail("Tried %d time%s in %lld ms; the last answer of the lease store: %s", tries,
                                  tries == 1 ? "" : "s", static_cast<long long>(elapsed_ms(start)), last_error),
                        errhint("The store's errors were transient (locks, timeouts, connections); check what holds "
                                "the lease table or the store's connection, or raise cosid.acquire_timeout.")));
    if (earliest_expiry != 0)
        ereport(ERROR, (errcode(COSID_EXHAUSTED), errmsg("cosid namespace \"%s\" is exhausted", ns),
                        errdetail("Every slot is held; the earliest lease expires at %s. Waited %d ms.",
                                  ms_to_text(earliest_expiry), timeout),
                        errhint("Use a namespace with more slot bits, fewer concurrent generators, or raise "
                                "cosid.acquire_timeout.")));
    ereport(ERROR, (errcode(COSID_KEEPER_UNAVAILABLE),
                    errmsg("cosid timed out waiting for a slot in namespace \"%s\"", ns),
                    errdetail("The lease keeper did not answer within %d ms.", timeout),
                    errhint("Check the server log; the store may be locked or unreachable.")));
}

// local_layout_difference for a binding just made: until the check passed, the binding must
// not stay active, since an error here (a cancel, a statement timeout) would leave it to the
// next call unchecked.
void local_layout_difference_or_unbind(const char* ns, Binding* b, char* out, size_t len) {
    PG_TRY();
    {
        local_layout_difference(ns, b->gen.layout(), out, len);
    }
    PG_CATCH();
    {
        unbind(b, false);
        PG_RE_THROW();
    }
    PG_END_TRY();
}

Binding* binding_for(const char* ns) {
    for (auto& b : bindings)
        if (b.active && strcmp(b.ns, ns) == 0) return &b;
    if (!valid_namespace_name(ns))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("invalid cosid namespace name \"%s\"", ns),
                        errdetail("A namespace name is 1 to 63 letters, digits, \"_\", \".\", \":\" or \"-\".")));
    Binding* free_binding = nullptr;
    for (auto& b : bindings)
        if (!b.active) {
            free_binding = &b;
            break;
        }
    if (free_binding == nullptr)
        ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                        errmsg("a backend can use at most %d cosid namespaces at once", kMaxBindings),
                        errhint("Call cosid_release() to close this backend's generators.")));
    if (!exit_hook_registered) {
        before_shmem_exit(unbind_all_at_exit, 0);
        exit_hook_registered = true;
    }
    bind(ns, free_binding);
    // In the keeper's database the namespace came from the store (local) or was checked by
    // the keeper (remote); elsewhere this database's own definition is checked here.
    if (!in_store_database()) {
        char difference[256];
        local_layout_difference_or_unbind(ns, free_binding, difference, sizeof(difference));
        if (difference[0] != '\0') {
            unbind(free_binding, false);
            char where[NAMEDATALEN + 16];
            snprintf(where, sizeof(where), "in database \"%s\"", get_database_name(MyDatabaseId));
            report_layout_mismatch(ns, where, difference, "none was issued", "then create it with the store's values");
        }
    }
    return free_binding;
}

[[noreturn]] void slot_lost(Binding* b) {
    int32 slot = b->gen.slot();
    char ns[NAMEDATALEN];
    strlcpy(ns, b->ns, sizeof(ns));
    unbind(b, false);
    ereport(ERROR, (errcode(COSID_SLOT_LOST), errmsg("cosid lost its lease on slot %d of namespace \"%s\"", slot, ns),
                    errdetail("The lease was revoked or taken over after it expired; no id is issued on it any more."),
                    errhint("Retry: the next call binds a new slot.")));
    pg_unreachable();
}

}  // namespace

void flush_issued_count() {
    if (unflushed_ids > 0 && shared != nullptr) {
        count(shared->stats.ids_issued, unflushed_ids);
        unflushed_ids = 0;
    }
}

namespace {
int64 issue(Binding* b, const char* ns);
}  // namespace

bool in_store_database() {
    // The keeper publishes its database's oid; comparing it spares a new backend a catalog
    // lookup on its first call.  Before the keeper connected, compare names.
    Oid store_db = shared->database_oid;
    return OidIsValid(store_db) ? store_db == MyDatabaseId
                                : strcmp(get_database_name(MyDatabaseId), setting_database) == 0;
}

int64 next_id(const char* ns) {
    Binding* b = last_used;
    if (b == nullptr || !b->active || strcmp(b->ns, ns) != 0) {
        b = binding_for(ns);
        last_used = b;
    }
    return issue(b, ns);
}

int64 next_id_default() {
    Binding* b = default_binding;
    if (b == nullptr || !b->active || default_binding_generation != namespace_setting_generation) {
        b = binding_for(setting_namespace);
        default_binding = b;
        default_binding_generation = namespace_setting_generation;
    }
    return issue(b, b->ns);
}

namespace {
int64 issue(Binding* b, const char* ns) {
    PoolEntry* e = &shared->pool[b->entry];
    int64 wait_start = 0;
    bool counted_wait = false;
    for (;;) {
        if (pg_atomic_read_u32(&e->lost) != 0) slot_lost(b);
        b->gen.extend(static_cast<int64>(pg_atomic_read_u64(&e->ceiling)));
        NextResult r = b->gen.next(clock_ms());
        if (r.status == NextStatus::Issued) {
            if (++unflushed_ids >= 1024) flush_issued_count();
            return r.id;
        }
        if (r.status == NextStatus::SequenceExhausted) {
            // The tick's sequence is used up: the next tick is at most one unit away.
            int64 wait = r.wait_until_ms - clock_ms();
            if (wait > 1) {
                pg_usleep(Min(wait, 100) * 1000L);
                CHECK_FOR_INTERRUPTS();
            }
            continue;
        }
        if (r.status == NextStatus::OutOfRange)
            ereport(ERROR, (errcode(COSID_OUT_OF_RANGE),
                            errmsg("cosid clock is outside namespace \"%s\"'s timestamp range", ns),
                            errdetail("The clock reads %lld ms; the layout covers its epoch plus %d timestamp bits.",
                                      static_cast<long long>(clock_ms()), b->gen.layout().timestamp_bits)));
        if (wait_start == 0) wait_start = mono_ms();
        int timeout = acquire_timeout_ms();
        if (r.status == NextStatus::PastCeiling) {
            if (!counted_wait) {
                count(shared->stats.waits_at_ceiling);
                counted_wait = true;
                LWLockAcquire(shared->lock, LW_EXCLUSIVE);
                if (e->next_renew_at > 0) e->next_renew_at = 0;  // renew now
                LWLockRelease(shared->lock);
                wake_keeper();
            }
            if (elapsed_ms(wait_start) >= timeout)
                ereport(ERROR, (errcode(COSID_CEILING_TIMEOUT),
                                errmsg("cosid window on slot %d of namespace \"%s\" ended and was not renewed",
                                       b->gen.slot(), ns),
                                errdetail("The window's ceiling is %s; no renewal arrived within %d ms.",
                                          ms_to_text(b->gen.ceiling_ms()), timeout),
                                errhint("The lease store may be unreachable or locked, or this host's clock runs "
                                        "ahead of the store's.")));
        } else if (r.status == NextStatus::BeforeFloor) {
            if (elapsed_ms(wait_start) >= timeout)
                ereport(ERROR, (errcode(COSID_BEFORE_FLOOR_TIMEOUT),
                                errmsg("cosid clock is behind the window of slot %d of namespace \"%s\"",
                                       b->gen.slot(), ns),
                                errdetail("Ids may only be issued after %s; waited %d ms.",
                                          ms_to_text(b->gen.floor_ms()), timeout),
                                errhint("This host's clock runs behind the lease store's.")));
        }
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 5, PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
}
}  // namespace

bool wait_for_releases(const int* entries, int n) {
    int64 start = mono_ms();
    ConditionVariablePrepareToSleep(&shared->cv);
    for (;;) {
        bool pending = false;
        LWLockAcquire(shared->lock, LW_SHARED);
        for (int i = 0; i < n; ++i)
            if (shared->pool[entries[i]].state == kLeased &&
                (shared->pool[entries[i]].release_requested || shared->pool[entries[i]].releasing))
                pending = true;
        LWLockRelease(shared->lock);
        if (!pending || elapsed_ms(start) >= acquire_timeout_ms()) {
            ConditionVariableCancelSleep();
            return !pending;
        }
        ConditionVariableTimedSleep(&shared->cv, 50, PG_WAIT_EXTENSION);
    }
}

int close_generators(bool release) {
    int closed = 0;
    int entries[kMaxBindings];
    for (auto& b : bindings)
        if (b.active) {
            entries[closed++] = b.entry;
            unbind(&b, release);
        }
    if (release) wait_for_releases(entries, closed);
    return closed;
}

}  // namespace cosid::pg

// Each backend's generators: one per namespace it uses, each on the instance's lease of that
// namespace.  Every backend claims its ids from the lease's shared issue word (one
// compare-and-swap per id, no lock), with the rule of src/core/issue_word; so the ids of an
// instance are strictly increasing in issue order across its backends, and nothing is ever
// issued outside the window (floor, ceiling].
#include "generator.hpp"
#include "lease_wait.hpp"
#include "../shmem/pool.hpp"

#include <type_traits>

#include "../boundary.hpp"
#include "calendar.hpp"
#include "../store/citus.hpp"
#include "clock_step.hpp"
#include "../errors.hpp"
#include "issue_word.hpp"
#include "../settings.hpp"
#include "../shmem/state.hpp"
#include "static_state.hpp"
#include "../store/store.hpp"

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
    bool layout_checked;  // this database's definition of ns matches the store's
    bool is_static;       // the lease is a static slot's window
    int32 slot;
    int64 floor;
    int64 floor_wait_ms;  // the entry's: the wait for the floor that the store imposed
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


// A claim is bracketed by publish/unpublish (state.hpp, "Reuse of an entry").  The exchange
// is a full barrier: the hazard is visible before the generation is read.
inline void publish(int entry) { pg_atomic_exchange_u32(&claiming()[my_hazard].entry, static_cast<uint32>(entry + 1)); }
// After a successful compare-and-swap (a full barrier) a plain store suffices; elsewhere the
// exchange keeps the reads of the entry before the hazard is gone.
inline void unpublish_after_cas() { pg_atomic_write_u32(&claiming()[my_hazard].entry, 0); }
inline void unpublish() { pg_atomic_exchange_u32(&claiming()[my_hazard].entry, 0); }

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
            ereport(ERROR,
                    (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("cosid_next() cannot run in this kind of process"),
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
        ereport(ERROR,
                (errcode(COSID_SLOT_LOST), errmsg("cosid lost its lease on slot %d of namespace \"%s\"", slot, ns),
                 errdetail("The lease was revoked or taken over after it expired; no id is issued on it any more."),
                 errhint("Retry: the next call uses the instance's next lease.")));
    ereport(ERROR, (errcode(COSID_SLOT_LOST), errmsg("cosid lost a lease of namespace \"%s\"", ns),
                    errdetail("The lease this backend issued on was found revoked or taken over when it was released; "
                              "the ids issued were inside its window."),
                    errhint("Retry: the next call uses the instance's next lease.")));
}

// The keeper is asked to renew entry e's lease at once (a backend at its ceiling, or waiting
// for a clock far behind the last id): only if g is still on that lease.
void ask_keeper_to_renew(const Gen* g, PoolEntry* e) {
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (pg_atomic_read_u64(&e->generation) == g->generation && e->next_renew_at > 0) e->next_renew_at = 0;
    LWLockRelease(shared->lock);
    wake_keeper();
}

// issue()'s wait when the tick's sequence is used up and cosid.max_borrow says wait for the
// clock (a clock that stepped back far makes that long: bounded by cosid.acquire_timeout).
// Split out of issue() to keep it short: the same statements, in the same order, after the
// hazard was cleared.  Returns after one short sleep; issue() then claims again.
void wait_for_clock(Gen* g, PoolEntry* e, const Claim& c, int64* wait_start, bool* asked_keeper) {
    if (*wait_start == 0) *wait_start = mono_ms();
    // Longer than a move to a slot whose window starts now (a clock that stepped back
    // far behind the last id): the keeper renews at once, and leaves the lease
    // (src/core/clock_step.hpp).  Static slots have no other slot.
    if (!*asked_keeper && !g->is_static &&
        c.wait_until_ms - clock_ms() > cosid::clock_step::patience_ms(g->layout, store_bound_ms())) {
        *asked_keeper = true;
        ask_keeper_to_renew(g, e);
    }
    if (elapsed_ms(*wait_start) >= acquire_timeout_ms()) {
        // A static slot without a state file borrows nothing, whatever max_borrow says.
        bool no_file = g->is_static && !static_state_file_configured();
        ereport(ERROR, (errcode(COSID_BEFORE_FLOOR_TIMEOUT),
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
}

[[noreturn]] void report_out_of_range(const Gen* g) {
    ereport(ERROR,
            (errcode(COSID_OUT_OF_RANGE), errmsg("cosid clock is outside namespace \"%s\"'s timestamp range", g->ns),
             errdetail("The clock reads %lld ms; the layout covers its epoch plus %d timestamp bits.",
                       static_cast<long long>(clock_ms()), g->layout.timestamp_bits)));
    pg_unreachable();
}

// issue()'s wait at the ceiling of entry e's window (NextStatus::PastCeiling).  Split out of
// issue() to keep it short: the same statements, in the same order.  Returns true when g moved
// off a lease the store's raise freed (issue() then attaches to its successor); otherwise
// fails once the wait is over `timeout` (unless the window holds no tick yet: `empty`).
bool wait_at_ceiling(Gen* g, PoolEntry* e, int64 ceiling, bool empty, int64 wait_start, int timeout,
                     bool* counted_wait) {
    // A lease the store's raise freed ends at its ceiling: once its successor holds a
    // tick, move to it now, without waiting for the keeper (which may be busy with a
    // store that does not answer) to end this one.  Its window lies above the raised
    // floor, above every id of this one.
    LWLockAcquire(shared->lock, LW_SHARED);
    bool move =
        pg_atomic_read_u64(&e->generation) == g->generation && e->raised_out && active_entry_locked(g->ns) != g->entry;
    LWLockRelease(shared->lock);
    if (move) {
        detach(g);
        return true;
    }
    if (!*counted_wait) {
        count(shared->stats.waits_at_ceiling);
        *counted_wait = true;
        ask_keeper_to_renew(g, e);
    }
    if (!empty && elapsed_ms(wait_start) >= timeout) {
        char static_error[200] = "";
        LWLockAcquire(shared->lock, LW_SHARED);
        bool is_static = pg_atomic_read_u64(&e->generation) == g->generation && e->is_static;
        if (is_static) strlcpy(static_error, e->static_error, sizeof(static_error));
        LWLockRelease(shared->lock);
        if (is_static)
            ereport(ERROR,
                    (errcode(COSID_CEILING_TIMEOUT),
                     errmsg("cosid window on static slot %d of namespace \"%s\" ended and its next "
                            "ceiling was not written",
                            g->slot, g->ns),
                     errdetail("The state file holds the ceiling %s; no id is issued past it. %s%s",
                               ms_to_text(ceiling), static_error[0] != '\0' ? "The last write failed: " : "",
                               static_error[0] != '\0' ? static_error : "The keeper did not write a new one in time."),
                     errhint("Free space on, or fix the permissions of, the directory of the state "
                             "file (cosid.state_file).")));
    }
    if (!empty && elapsed_ms(wait_start) >= timeout)
        ereport(ERROR, (errcode(COSID_CEILING_TIMEOUT),
                        errmsg("cosid window on slot %d of namespace \"%s\" ended and was not renewed", g->slot, g->ns),
                        errdetail("The window's ceiling is %s; no renewal arrived within %d ms.", ms_to_text(ceiling),
                                  timeout),
                        errhint("The lease store may be unreachable or locked, or this host's clock runs "
                                "ahead of the store's.")));
    return false;
}

// issue()'s wait for a clock behind the window's floor (NextStatus::BeforeFloor, or a window
// that holds no tick yet): fails once the wait is over its budget.  Split out of issue() to
// keep it short: the same statements, in the same order.
void check_floor_wait(const Gen* g, int64 wait_start, int timeout) {
    // A floor the store raised (after a failover: up to max_ttl + 2 x max_tolerance
    // ahead) is waited out first: only a clock still behind it after that is late.
    // The wait is capped (state.cpp: 2 x ttl + 15 s); what is reported is the real
    // distance from this clock to the floor, which may be years.
    int64 budget = timeout + g->floor_wait_ms;
    if (elapsed_ms(wait_start) >= budget) {
        int64 ahead = g->floor - clock_ms();
        bool far = ahead > raise_reach_ms();
        char ahead_text[64];
        cpp_call([&] { strlcpy(ahead_text, cosid::format_span_ms(ahead).c_str(), sizeof(ahead_text)); });
        ereport(ERROR, (errcode(COSID_BEFORE_FLOOR_TIMEOUT),
                        errmsg("cosid clock is behind the window of slot %d of namespace \"%s\"", g->slot, g->ns),
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
                            : errhint("This host's clock runs behind the lease store's, or the lease store "
                                      "did not answer.")));
    }
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
            wait_for_clock(g, e, c, &wait_start, &asked_keeper);
            continue;
        }
        if (c.status == NextStatus::OutOfRange) report_out_of_range(g);
        if (wait_start == 0) wait_start = mono_ms();
        int timeout = acquire_timeout_ms();
        // A window that holds no tick yet (a floor the store raised after a failover or a
        // restore, beyond what it may grant yet) opens at a renewal once the store's clock is
        // within the lease's ttl + tolerance of it: waited for as a floor ahead of the clock is.
        const bool empty = c.status == NextStatus::PastCeiling &&
                           cosid::holds_no_tick(ClaimWindow{g->floor, ceiling}, g->layout.unit_ms());
        if (c.status == NextStatus::PastCeiling &&
            wait_at_ceiling(g, e, ceiling, empty, wait_start, timeout, &counted_wait))
            continue;
        if (c.status == NextStatus::BeforeFloor || empty) check_floor_wait(g, wait_start, timeout);
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 5, PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
}

void count_statement(QueryDesc* query, int eflags) {
    new_statement();
    if (prev_executor_start != nullptr)
        prev_executor_start(query, eflags);
    else
        standard_ExecutorStart(query, eflags);
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
        count(shared->stats.ids_issued, static_cast<int64>(unflushed_ids));
        unflushed_ids = 0;
    }
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
    int cap = shared->npool;
    int* entries = static_cast<int*>(palloc(sizeof(int) * Max(cap, 1)));
    uint64* generations = static_cast<uint64*>(palloc(sizeof(uint64) * Max(cap, 1)));
    HASH_SEQ_STATUS it;
    hash_seq_init(&it, gens);
    for (Gen* g; (g = static_cast<Gen*>(hash_seq_search(&it))) != nullptr;) {
        if (g->entry < 0) continue;
        PoolEntry* own = &shared->pool[g->entry];
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        if (g->issued && pg_atomic_read_u64(&own->generation) == g->generation && own->state == kLeased &&
            !own->releasing)
            remember_pending(g);  // the release may find it lost
        // Every lease of the namespace, not only the one this backend is on: after a raise of
        // the store's floors the instance holds the freed one and its successor (which would
        // otherwise stay held while this says released).
        for (int i = 0; i < shared->npool && n < cap; ++i) {
            PoolEntry* e = &shared->pool[i];
            if (e->state != kLeased || e->releasing || strcmp(e->ns, g->ns) != 0) continue;
            e->release_requested = true;
            entries[n] = i;
            generations[n++] = pg_atomic_read_u64(&e->generation);
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

// The instance's shared state: the pool of leases, the keeper's handle, counters.
//
// A lease belongs to the instance, not to a backend (src/README.md, "The path of an id"): per
// namespace the keeper holds one active lease in a pool entry, and every backend's generator
// claims its ids from the entry's issue word (src/core/issue_word.hpp) with a
// compare-and-swap, no lock.
//
// Lock discipline: every field of a PoolEntry is guarded by SharedState::lock, except the
// atomics `ceiling`, `word` and `generation`, which backends read without the lock on every
// id.  Only the keeper writes `ceiling` (it only grows, and only after the store committed
// it) and `generation`; backends and the keeper both write `word` (claims, and the keeper's
// close), always with an atomic read-modify-write.
//
// Reuse of an entry: a backend publishes the entry it claims on in `claiming` (its hazard
// slot) before it reads the entry's generation, and clears it after its compare-and-swap.
// An ended lease's entry is "draining" until no hazard names it: only then may a new lease
// (another slot, layout or namespace) reset its word, so a backend stopped in the middle of
// a claim can never install a value computed for one lease into the word of another.
//
// Times named *_at / *_since without "store" are CLOCK_MONOTONIC ms (mono_ms()): they
// schedule work and must not move when the wall clock steps.  Lease times (floor,
// ceiling, expires_at, earliest_expiry) are store-clock Unix ms.
//
// Invariant: at most one leased entry per (ns, slot) whose word is open.  The keeper checks
// it whenever it adds a lease to the pool (keeper.cpp, retire_stale_entries_locked).
#pragma once
#include "health_state.hpp"
#include "issue_word.hpp"
#include "layout.hpp"
#include "../pg.hpp"
#include "../store/store_result.hpp"

namespace cosid::pg {

enum EntryState : uint32 {
    kEmpty = 0,
    kWanted,     // backends want a lease of `ns`; the keeper will acquire one
    kAcquiring,  // the keeper is talking to the store for it
    kLeased,     // a lease of this instance, shared by every backend that issues in `ns`
    kDraining,   // its lease ended; waits until no backend is in the middle of a claim on it
};

// A request the keeper refused (PoolEntry::error) is asked again this soon after the refusal
// when another call of its namespace comes (src/pg/backend/lease_wait.cpp).
constexpr int64 kRefusedRetryMs = 100;

struct PoolEntry {
    uint32 state;
    char ns[NAMEDATALEN];
    char store_id[40];    // the store that granted the lease (cosid.history); "" for static windows
    int64 store_seen_at;  // the store's time in its last answer that held the lease (grant, renewal)
    // the lease, or a static slot's window (is_static: no store; fence 0, expires_at = ceiling)
    bool is_static;
    int32 slot;
    int64 fence;
    int64 floor;
    // How far the floor was ahead of the store's clock when the store granted the window (a
    // floor the store raised after a failover or a restore; 0 for static windows): a wait the
    // store imposed, which a caller sits out before cosid.acquire_timeout starts to count a
    // clock behind the store's (ZC004).
    int64 floor_wait_ms;
    int64 expires_at;
    pg_atomic_uint64 ceiling;
    // The issue state: last (tick, sequence) claimed by any backend, and the closed bit.
    // Claims: compare-and-swap (a full barrier).  The keeper closes it with an atomic OR,
    // whose return value is the exact last timestamp issued, before it releases the lease or
    // gives it up as lost: after that no claim can succeed.  It moves between the cores of
    // every backend that issues: padded so that its cache line holds nothing else (the
    // generation and ceiling, read on every id, then stay shared in each core's cache).
    char pad_before_word[PG_CACHE_LINE_SIZE];
    pg_atomic_uint64 word;
    char pad_after_word[PG_CACHE_LINE_SIZE];
    // Which lease the entry holds: a number unique in this incarnation, 0 when none.  The
    // keeper writes it after the fields above (write barrier), and sets it to 0 when the lease
    // ends; a backend whose generation differs is on an ended lease.
    pg_atomic_uint64 generation;
    // the layout of the namespace
    int timestamp_bits, slot_bits, sequence_bits, unit_ms;
    int64 epoch_ms, tolerance_ms;
    // use
    int users;               // backends whose generator is on this lease (cosid_pool)
    uint64 observed_word;    // keeper: the word as it last saw it ...
    int64 idle_since;        // ... and since when (mono ms) it has not changed
    bool release_requested;  // cosid_release(): the keeper releases it in order
    // A release the store has not confirmed yet: the entry stays (closed: nothing more is
    // issued on it) and keeps the timestamp it hands on, until the store confirms the release
    // or says the lease is gone.  Forgetting it would let this instance's next window on the
    // slot start below ids it already issued.
    bool releasing;
    // The store's raise (a failover, a restore) freed the lease: every next window on its slot
    // starts above its ceiling, so the window stays this instance's up to that ceiling.  It is
    // not renewed; it ends when its ids reach the ceiling (keeper_lease.cpp, renew_prepare).
    bool raised_out;
    int64 release_last;      // the timestamp the release hands on: the exact last issued, or the floor
    bool release_uncertain;  // an attempt of this release failed with an unknown outcome
    // keeper bookkeeping
    int64 next_renew_at;  // mono ms; also the next try of a pending release
    int64 backoff_ms;
    // requests: every backend waiting for `ns` waits on the same entry
    uint64 request_id;      // which request: an entry dropped and posted again is another one
    int waiters;            // backends waiting on it (one cancelled mid-wait is not subtracted:
    int64 request_seen_at;  // mono ms: a waiter was last seen, which catches that case)
    int64 retry_at;         // mono ms: when the keeper tries this request again
    // A request the keeper posted itself, for the lease that replaces one the store's raise
    // freed (keeper_lease.cpp, want_successor_locked): kept without waiters until then (mono ms).
    int64 keeper_wants_until;
    int64 earliest_expiry;   // store ms, when the namespace was exhausted; 0 otherwise
    char error[512];         // set by the keeper when the request cannot be served: fail now
    uint64 refusals;         // how many times the keeper answered it with an error (error set);
                             // a caller that came after the last is answered kRefusedRetryMs after it at most
    int64 refused_at;        // mono ms: the last of them
    int error_code;          // the store's SQLSTATE for it
    char error_hint[256];    // static slots: what to do about it ('' = the caller's own hint)
    char static_error[200];  // static slots: why the next ceiling could not be written ('' = none)
    int tries;               // store answers that were transient errors, retried
    char last_error[256];    // the last transient error, for the caller's message at its timeout
};

// A layout as the core wants it, from the columns the store and the pool keep.
inline cosid::Layout make_layout(int timestamp_bits, int slot_bits, int sequence_bits, int64 epoch_ms, int unit_ms) {
    cosid::Layout layout;
    layout.timestamp_bits = timestamp_bits;
    layout.slot_bits = slot_bits;
    layout.sequence_bits = sequence_bits;
    layout.epoch_ms = epoch_ms;
    layout.unit = unit_ms == 1000 ? cosid::Unit::Second : cosid::Unit::Millisecond;
    return layout;
}
// The layout of the entry's namespace.
inline cosid::Layout entry_layout(const PoolEntry& e) {
    return make_layout(e.timestamp_bits, e.slot_bits, e.sequence_bits, e.epoch_ms, e.unit_ms);
}
// The entry's window as it is now (floor, ceiling].
inline cosid::ClaimWindow entry_window(PoolEntry& e) {
    return cosid::ClaimWindow{e.floor, static_cast<int64>(pg_atomic_read_u64(&e.ceiling))};
}

struct Stats {
    pg_atomic_uint64 acquires, renewals, renewal_failures, leases_lost, duplicate_owner_keys, clock_skew_events,
        waits_at_ceiling, ids_issued, releases, store_transactions,
        store_failovers,                       // new timelines of the store seen by this instance's keeper
        static_writes, static_write_failures,  // state file writes (each fsync'd) and failed ones
        leases_freed;                          // leases the store's raise freed (no caller error: not leases_lost)
};

// cosid_adopt() asks the keeper to raise a namespace's floor: one request at a time.
enum RaiseState : uint32 { kRaiseIdle = 0, kRaisePosted, kRaiseDone, kRaiseFailed };
struct RaiseRequest {
    uint32 state;
    uint64 id;  // which request: a waiter that gave up does not read another's answer
    char ns[NAMEDATALEN];
    int64 floor_ms;  // every id issued from now on has a timestamp above this
    // the layout the caller computed the floor with (the store refuses another)
    int timestamp_bits, slot_bits, sequence_bits, unit_ms;
    int64 epoch_ms;
    char error[256];
    int error_code;
    int leases_closed;  // this instance's windows of the namespace closed by the raise
    int64 answered_at;  // mono ms: an answer its waiter never took (it was cancelled) is
                        // cleared by the next caller after a while
};

struct SharedState {
    LWLock* lock;
    ConditionVariable cv;  // broadcast whenever an entry changes
    char owner_key[256];
    char incarnation[40];  // textual UUID, made when shared memory is initialised
    pg_uuid_t incarnation_uuid;
    int keeper_pid;
    Latch* keeper_latch;
    bool keeper_ready;  // the keeper found the extension in its database
    // Why a running keeper cannot serve yet (keeper_ready false): 0 none known, 1 the
    // extension is missing in cosid.database, 2 the remote store refused, 3 a local store on
    // a Citus worker (citus.hpp); and its message and hint ('' if none).
    int keeper_problem;
    char keeper_problem_message[256];
    char keeper_problem_hint[256];
    uint64 keeper_checks;        // readiness checks the keeper made: a problem counts only if seen after a caller began
    bool keeper_connecting;      // set while a keeper connects: still set at the next start = it failed
    int keeper_failed_starts;    // starts in a row that died connecting (missing cosid.database, ...)
    bool keeper_retry_now;       // a backend of cosid.database asks a backing-off keeper to connect now
    int64 store_failovers_seen;  // the store's failover count when the keeper last looked; -1: never
    bool test_keeper_exited;     // cosid.test_keeper_exit_after_acquire was honoured (once per server start)
    // The static slots' state file was refused since the server started (static_keeper.cpp):
    // it stays refused, removed or not, until a restart (with cosid.not_before set anew).
    bool static_file_refused;
    Oid database_oid;  // the keeper's database (cosid.database), once it connected
    // The timeline on which the keeper last declared to its store every copy its data directory
    // shows (fork.cpp: cosid.history's timeline, a cosid.fork file); 0 while a keeper that
    // started has not yet.  cosid_fork_acknowledge() waits for it: an acknowledgment made
    // before a declaration would not cover it.
    pg_atomic_uint32 fork_checked_timeline;
    RaiseRequest raise;  // under the lock
    Stats stats;
    HealthState health;      // cosid_health(): see health.hpp
    uint64 next_generation;  // under the lock: the last lease generation handed out
    uint64 next_request_id;  // under the lock: the last request id handed out
    // The generations of the last leases lost (renewal found them gone, revoked, taken over),
    // so that a backend that issued on one fails its next call once with ZC001 (under the
    // lock).  A generation older than the ring remembers counts as lost.
    static constexpr int kLostRing = 4096;
    uint64 lost_generations[kLostRing];
    uint64 lost_count;
    uint64 lost_forgotten_max;  // the largest generation pushed out of the ring
    int nclaiming;              // hazard slots, one per PGPROC (pgprocno), after the pool
    int npool;
    PoolEntry pool[FLEXIBLE_ARRAY_MEMBER];
};

extern SharedState* shared;

// The hazard slots: claiming()[pgprocno].entry = entry + 1 while that process claims on the
// entry.  One cache line each: every claim writes its own slot twice, which must not move
// another backend's slot between cores.
struct HazardSlot {
    pg_atomic_uint32 entry;
    char pad[PG_CACHE_LINE_SIZE - sizeof(pg_atomic_uint32)];
};
inline HazardSlot* claiming() { return reinterpret_cast<HazardSlot*>(&shared->pool[shared->npool]); }
// Under the lock: the entry's lease ended.  Closes its word, forgets its generation, and
// leaves it draining until no backend is in the middle of a claim on it.
void end_lease_locked(PoolEntry* e);
// Under the lock: entry e (a request being served, so no backend claims on it) now holds the
// window `r` (slot, fence, floor, expires_at, ceiling and the layout fields), and is visible.
void install_window_locked(PoolEntry* e, const StoreResult& r, bool is_static, int64 now_mono);
// Under the lock: a request (wanted, acquiring) nobody waits for any more is forgotten (the
// keeper after an answer nobody waits for; the last waiter to give up).
void drop_request_locked(PoolEntry* e);
// Under the lock: remembers that lease `generation` was lost.
void remember_lost_locked(uint64 generation);
// Under the lock (shared is enough): was lease `generation` lost (or too long ago to know)?
bool lease_lost_locked(uint64 generation);
// True while some process is in the middle of a claim on entry i.
bool entry_has_hazard(int i);

void install_shmem_hooks();
// Raises a clear error unless the user is a superuser or a member of cosid_admin.
void require_admin(const char* what);
// Raises a clear error when the library was not preloaded.
void require_preloaded(const char* function);
void wake_keeper();
// How far ahead of the store's clock a raise of its floors may put a floor, as far as this
// instance can tell (max_ttl + 2 x max_tolerance, 70 s with a store's widest defaults, stays
// below it): a floor within it is the store's wait, one beyond it a floor set by mistake.
int64 raise_reach_ms();
inline void count(pg_atomic_uint64& c, int64 n = 1) { pg_atomic_fetch_add_u64(&c, n); }

// True in cosid.database, where the keeper runs (and, without cosid.store_dsn, the store).
bool in_store_database();

}  // namespace cosid::pg

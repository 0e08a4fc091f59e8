// The instance's shared state: the pool of leased slots, the keeper's handle, counters.
//
// Lock discipline: every field of a PoolEntry is guarded by SharedState::lock, except
// `ceiling` and `lost`, which the bound backend reads without the lock on every id and only
// the keeper writes (ceiling only ever grows, and only after the store committed it).
//
// Times named *_at / *_since without "store" are CLOCK_MONOTONIC ms (mono_ms()): they
// schedule work and must not move when the wall clock steps.  Lease times (floor,
// ceiling, expires_at, earliest_expiry) are store-clock Unix ms.
//
// Invariant: at most one entry that is kLeased and not lost per (ns, slot).  The keeper
// checks it whenever it adds a lease to the pool (keeper.cpp, retire_stale_entries_locked).
#pragma once
#include "pg.hpp"

namespace cosid::pg {

enum EntryState : uint32 {
    kEmpty = 0,
    kWanted,     // a backend asked for a slot of `ns`; the keeper will acquire one
    kAcquiring,  // the keeper is talking to the store for it
    kLeased,     // a lease of this instance; bound to a backend or idle in the pool
};

struct PoolEntry {
    uint32 state;
    char ns[NAMEDATALEN];
    // the lease
    int32 slot;
    int64 fence;
    int64 floor;
    int64 expires_at;
    pg_atomic_uint64 ceiling;
    pg_atomic_uint32 lost;  // renewal found it gone, or it was released by force
    // the layout of the namespace
    int timestamp_bits, slot_bits, sequence_bits, unit_ms;
    int64 epoch_ms, tolerance_ms;
    // use
    int bound_pid;        // 0: idle in the pool
    int64 last_issued;    // exact last timestamp issued on it by this instance, -1: none
    int64 idle_since;     // mono ms, when bound_pid became 0
    bool release_requested;
    // A release the store has not confirmed yet: the entry stays (lost, so nobody binds or
    // issues on it) and keeps the timestamp it hands on, until the store confirms the
    // release or says the lease is gone.  Forgetting it would let this instance's next
    // window on the slot start below ids it already issued.
    bool releasing;
    int64 release_last;   // the timestamp the release hands on (last issued, floor or ceiling)
    // keeper bookkeeping
    int64 next_renew_at;  // mono ms; also the next try of a pending release
    int64 backoff_ms;
    // requests
    int requester_pid;
    int64 request_seen_at;  // mono ms: the requester was last seen waiting (it may have been cancelled)
    int64 retry_at;        // mono ms: when the keeper tries this request again
    int64 earliest_expiry; // store ms, when the namespace was exhausted; 0 otherwise
    char error[256];       // set by the keeper when the request cannot be served: fail now
    int error_code;        // the store's SQLSTATE for it
    int tries;             // store answers that were transient errors, retried
    char last_error[256];  // the last transient error, for the caller's message at its timeout
};

struct Stats {
    pg_atomic_uint64 acquires, renewals, renewal_failures, leases_lost, duplicate_owner_keys,
        clock_skew_events, waits_at_ceiling, ids_issued, releases, store_transactions,
        store_failovers;  // new timelines of the store seen by this instance's keeper
};

struct SharedState {
    LWLock* lock;
    ConditionVariable cv;  // broadcast whenever an entry changes
    char owner_key[256];
    char incarnation[40];  // textual UUID, made when shared memory is initialised
    pg_uuid_t incarnation_uuid;
    int keeper_pid;
    Latch* keeper_latch;
    bool keeper_ready;     // the keeper found the extension in its database
    bool keeper_connecting;    // set while a keeper connects: still set at the next start = it failed
    int keeper_failed_starts;  // starts in a row that died connecting (missing cosid.database, ...)
    int64 store_failovers_seen;  // the store's failover count when the keeper last looked; -1: never
    bool test_keeper_exited;   // cosid.test_keeper_exit_after_acquire was honoured (once per server start)
    Oid database_oid;      // the keeper's database (cosid.database), once it connected
    Stats stats;
    int npool;
    PoolEntry pool[FLEXIBLE_ARRAY_MEMBER];
};

extern SharedState* shared;

void install_shmem_hooks();
// Raises a clear error when the library was not preloaded.
void require_preloaded(const char* function);
void wake_keeper();
inline void count(pg_atomic_uint64& c, uint64 n = 1) { pg_atomic_fetch_add_u64(&c, n); }

}  // namespace cosid::pg

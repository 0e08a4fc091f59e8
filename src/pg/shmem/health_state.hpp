// The health record in shared memory (SharedState::health): a leaf header, so that the shared
// state (state.hpp) holds it without depending on the code that writes and reads it
// (health.hpp).
#pragma once
#include "../pg.hpp"

#include <initializer_list>

namespace cosid::pg {

// In SharedState.  The keeper is the only writer of every field.
//
// The atomics are single values a reader takes one by one, with no barrier: each stands for
// itself (an age), and a reader that sees a new failure count beside an older first-failure
// time misreports one 15 s sample, nothing more.  0 means "never" for the *_at fields.
//
// The store facts belong together (one read of the store): written and read under
// SharedState::lock.
struct HealthState {
    pg_atomic_uint64 store_ok_at;        // last store call that answered (any call)
    pg_atomic_uint64 renewal_ok_at;      // last renewal (or acquire) the store confirmed
    pg_atomic_uint64 renewal_failed_at;  // last renewal that failed (no answer, an error)
    pg_atomic_uint64 failing_since;      // first failure of the current run; 0 after a success
    pg_atomic_uint64 failures_in_row;    // renewal failures since the last success
    pg_atomic_uint64 lease_lost_at;      // last lease found lost
    pg_atomic_uint64 skew_measured_at;   // last comparison of this clock with the store's
    pg_atomic_uint64 skew_ms;            // its result: how far the store's now lay outside the call
    pg_atomic_uint64 skew_tolerance_ms;  // the tolerance it was measured against
    // under the lock
    int64 keeper_started_at;  // the running keeper's start (mono ms); 0 when none ran
    int64 facts_at;           // 0: never read
    int64 max_ttl_ms, max_tolerance_ms;
    bool raise_floors;
    int standbys, sync_standbys;  // replication of the store server (pg_stat_replication)
    bool sync_names;              // synchronous_standby_names set on the store
    int other_incarnations;       // other live incarnations holding leases with this owner key
    char facts_error[200];        // why the last read of the facts failed ('' none)
};

// At shared memory's creation (state.cpp): every time "never".
inline void health_init(HealthState* h) {
    for (pg_atomic_uint64* a :
         {&h->store_ok_at, &h->renewal_ok_at, &h->renewal_failed_at, &h->failing_since, &h->failures_in_row,
          &h->lease_lost_at, &h->skew_measured_at, &h->skew_ms, &h->skew_tolerance_ms})
        pg_atomic_init_u64(a, 0);
}

}  // namespace cosid::pg

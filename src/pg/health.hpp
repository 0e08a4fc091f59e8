// What cosid_health() needs to know about the keeper and the store beyond the counters of
// cosid_stats(): when things last went right or wrong (CLOCK_MONOTONIC ms, mono_ms(), the
// same clock in every process, so ages survive a step of the wall clock), and the store's
// limits and replication as the keeper last read them.
#pragma once
#include "pg.hpp"

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

void health_init(HealthState* h);
// The keeper's notes.
void health_keeper_started();  // under the lock
void health_store_answered();
void health_renewal(bool ok);
// A lease granted: as fresh as a renewed one (a new lease is not overdue for its first renewal).
void health_lease_granted();
void health_lease_lost();  // counts leases_lost too
// A lease freed by the store's raise (a failover, a restore): counted in leases_freed, not a
// loss (its backends issue to its ceiling, then move on without an error).
void health_lease_freed();
// A comparison of this clock with the store's: `store_now` against the local clock before
// and after the call.  Counts a clock skew event past half the tolerance.
void health_store_clock(int64 store_now, int64 local_before, int64 local_after, int64 tolerance_ms);
// Every ttl/3: the store's limits and replication (cosid._store_health() there).
// Returns whether the store answered (a store before 1.5 has no cosid._store_health()); its
// failover count and timeline then in *failovers and *timeline: the keeper's check of the
// store's failovers reads them here, in the same store transaction, and in *raises whether the
// store raises its floors on a new timeline (cosid_store_settings()).
bool health_read_store_facts(int64* failovers, int32* timeline, bool* raises);

}  // namespace cosid::pg

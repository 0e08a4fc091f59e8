// What cosid_health() needs to know about the keeper and the store beyond the counters of
// cosid_stats(): when things last went right or wrong (CLOCK_MONOTONIC ms, mono_ms(), the
// same clock in every process, so ages survive a step of the wall clock), and the store's
// limits and replication as the keeper last read them.
#pragma once
#include "../shmem/health_state.hpp"
#include "../pg.hpp"

namespace cosid::pg {

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

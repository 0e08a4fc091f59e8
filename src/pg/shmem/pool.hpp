// Queries of the pool of leases (SharedState::pool), under SharedState::lock: the entry that
// holds the open lease of a namespace, and the entry of its request.  Used by the generators
// (generator.cpp), the wait for a lease (lease_wait.cpp) and the keeper (keeper_lease.cpp).
#pragma once
#include "../pg.hpp"

namespace cosid::pg {

// Under the lock: the open lease of ns, or -1.
int active_entry_locked(const char* ns);
// Under the lock: the request for ns, posted if none; -1: the pool is full.
int request_entry_locked(const char* ns);

}  // namespace cosid::pg

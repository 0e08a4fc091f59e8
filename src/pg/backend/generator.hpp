#pragma once
#include "../pg.hpp"

namespace cosid::pg {
int64 next_id(const char* ns);
// next_id(cosid.namespace), skipping the name lookup while the setting is unchanged.
int64 next_id_default();
// cosid_release(): asks the keeper to release, in order, the instance's leases this
// backend's generators are on, and waits for it.  Returns how many it asked for.
int release_own_leases();
// Waits (up to cosid.acquire_timeout) until the keeper has released the given leases (pool
// entries and their generations); false when a release is still pending then.
bool wait_for_releases(const int* entries, const uint64* generations, int n);
// Counts statements: a block of ids is used within the statement that claimed it.  Executor
// starts, utility commands (drop_guard.cpp calls new_statement) and transaction ends each
// start a new one.
void install_statement_hook();
void new_statement();
// Adds the ids this backend issued since the last flush to cosid_stats().ids_issued.
void flush_issued_count();
}  // namespace cosid::pg

#pragma once
#include "pg.hpp"

namespace cosid::pg {
int64 next_id(const char* ns);
// next_id(cosid.namespace), skipping the name lookup while the setting is unchanged.
int64 next_id_default();
// Closes this backend's generators; with `release`, asks the keeper to release their slots
// to the store and waits for it.  Returns how many were closed.
int close_generators(bool release);
// Waits (up to cosid.acquire_timeout) until the keeper has released the given pool entries;
// false when a release is still pending then (the store did not confirm it yet).
bool wait_for_releases(const int* entries, int n);
// True in cosid.database, where the keeper runs (and, without cosid.store_dsn, the store).
bool in_store_database();
// Adds the ids this backend issued since the last flush to cosid_stats().ids_issued.
void flush_issued_count();
}  // namespace cosid::pg

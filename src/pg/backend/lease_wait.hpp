// A backend that finds no lease of its namespace waits for the keeper to get one
// (lease_wait.cpp), or fails with what the keeper or the store said.  Used by the generators
// (generator.cpp); it uses nothing of theirs (the pool's queries are in pool.hpp).
#pragma once
#include "layout.hpp"
#include "../pg.hpp"

namespace cosid::pg {

// Waits until the instance holds a lease of `ns` (returns), or fails (ereport) with what the
// keeper or the store said.  Every backend waiting for `ns` waits on the same request.
void wait_for_lease(const char* ns);
// In a database other than the keeper's: how this database's definition of `ns` differs from
// the layout the store hands out ("" when it does not, or when it has none).
void local_layout_difference(const char* ns, const Layout& store, char* out, size_t len);
// Refuses (ERROR) a namespace defined here (`where`) with another layout than the store's.
[[noreturn]] void report_layout_mismatch(const char* ns, const char* where, const char* difference, const char* outcome,
                                         const char* remedy);

}  // namespace cosid::pg

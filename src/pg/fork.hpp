// Forks of this server (src/core/fork_rule.hpp, part 1), on its keeper's side: the store's
// record of the server that issues from it, and the copies a keeper can recognise itself.
#pragma once
#include "pg.hpp"
#include "store.hpp"

namespace cosid::pg {

// Before each acquire from a local store: records this keeper as the server that issues from
// it (cosid._issuer_start, which refuses with ZC009 when the store is a fork), and refuses
// while a cosid.fork file waits to be recorded.
bool fork_before_local_acquire(StoreError* err);
// Before a new static window: false (ZC009 in err) while this data directory is a recognised
// copy (a cosid.fork file not recorded yet, or the store's cosid._fork_reason()).  Static
// slots do not come from the store, but a copy's state file names the same slots as its
// original's.
bool fork_static_check(StoreError* err);
// Once the store is ready: a cosid.fork file in the data directory marks this data directory
// as a copy (written by pg_upgrade's read of it, or by an operator); recorded in the store.
void fork_check_marker_file();
// Once the store is ready: the marker file, then this server recorded as the one issuing from
// its local store (unless cosid.store_only).
void fork_keeper_ready();
// _PG_init: in pg_upgrade's binary-upgrade server of the OLD cluster, the first connection of
// pg_dump writes the cosid.fork file: a later start of this data directory is a copy of the
// new cluster's history.
void install_upgrade_source_hook();

}  // namespace cosid::pg

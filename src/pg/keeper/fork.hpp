// Forks of this server (src/core/fork_rule.hpp, part 1), on its keeper's side: the store's
// record of the server that issues from it, and the copies a keeper can recognise itself.
#pragma once
#include "../pg.hpp"
#include "../store/store.hpp"

namespace cosid::pg {

// Before each acquire from a local store: records this keeper as the server that issues from
// it (cosid._issuer_start, which refuses with ZC009 when the store is a fork), and refuses
// while a cosid.fork file waits to be recorded.
bool fork_before_local_acquire(StoreError* err);
// Before a new static window: false (ZC009 in err) while this data directory is a declared
// copy (a cosid.fork file, recorded or not yet, pg_upgrade's source, restored => true): its
// state file names the same static slots as its original's.  A promoted standby's or a
// restored dump's static slots have their own rules already (the state file's timeline and
// cosid.not_before, the restore's cosid.static_ceiling rows), and their slots are the
// operator's to keep apart, as static slots always are.
bool fork_static_check(StoreError* err);
// Once the store is ready: a cosid.fork file in the data directory (written by pg_upgrade's
// read of it, or by an operator) and a cosid.history written on another timeline declare a
// copy to the store; then this server is recorded as the one issuing from its local store
// (unless cosid.store_only).
void fork_keeper_ready();
// Whether this keeper process ran fork_keeper_ready (a restarted keeper runs it again).
bool fork_data_dir_looked();
// A declaration that failed (the store did not answer) tried again, at most every 200 ms,
// so that an acknowledgment waiting for it does not depend on a caller asking for a slot.
bool fork_retry_pending();  // true: still pending
// The record again, every ttl/3: an ALTER EXTENSION cosid UPDATE to 1.6, or a store made
// again, while the keeper runs.  A no-op write when it is there.
void fork_record_issuer();
// _PG_init: in pg_upgrade's binary-upgrade server of the OLD cluster, the first connection of
// pg_dump writes the cosid.fork file: a later start of this data directory is a copy of the
// new cluster's history.
void install_upgrade_source_hook();
// pg_upgrade's NEW cluster (its binary-upgrade server: pg_restore connects, or a backend loads
// the library): a cosid.upgraded file naming this cluster's system identifier.  Its store's
// one record then comes from the old cluster, which pg_upgrade stopped cleanly: not a copy of
// a server that may still issue (cosid._fork_reason).  The first store call still raises.
void mark_upgrade_target(const char* seen);

// The data directory's cosid.fork file: its path, and `text` written durably unless a file is
// there already (false then; `failed` says why a write failed, "" when it did not).
void marker_file_path(char* out, size_t size);
bool marker_file_fork_id(const char* path, char* out, size_t size);  // the id the keeper gives it
bool marker_write(const char* path, const char* text, char* failed, size_t len);

}  // namespace cosid::pg

// Static slots: namespaces whose slot comes from cosid.static_slots
// instead of the store.  The keeper gives them windows from the state file: a ceiling is
// written and fsync'd before any id below it is issued, and a restart starts above it.
#pragma once
#include "../pg.hpp"

namespace cosid::pg {

// Keeper start: reads the state file and says in the log what it found.
void static_keeper_start();
// Once a second: the windows and not-befores of the state file go into cosid.static_ceiling
// again when the table was made again or emptied (DROP and CREATE EXTENSION, TRUNCATE), or
// came with ALTER EXTENSION cosid UPDATE, without waiting for the next static window.
void static_rows_tick();
// Entry i is a request for `ns`, whose static slot is `slot`: grants a window or sets the
// entry's error.  The entry is kAcquiring; the keeper holds no lock.
void serve_static_request(int i, const char* ns, int32 slot);
// Writes the next ceiling of static entry i ahead of the clock (the keeper's pass, or a
// backend waiting at the ceiling).
void renew_static(int i);
// Closes static entry i's word and ends it; the exact last timestamp issued becomes the
// slot's value in the state file, so that a restart does not wait for the ceiling.
void release_static(int i);
// cosid_adopt on a static namespace: no window of `ns` starts at or below floor_ms from now
// on (kept in the state file).  False with a message when the file cannot be written.
bool raise_static_not_before(const char* ns, int64 floor_ms, char* error, size_t len);

}  // namespace cosid::pg

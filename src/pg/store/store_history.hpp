// What this instance was granted, per namespace, slot and store: the file cosid.history in
// the data directory (src/core/fork_rule.hpp, part 2).  A store keeps the window rule only
// for what it granted itself; after cosid.database or cosid.store_dsn names another store,
// the keeper starts each window above what the other stores granted on its slot, so that the
// instance never issues one of its own ids again.  Used by the keeper only.
#pragma once
#include "layout.hpp"
#include "../pg.hpp"

namespace cosid::pg {

// The floor below which a window of `store_id` on `slot` must not issue (0: none).  False,
// with a message, when the file cannot be read (damaged: nothing is granted until it is
// mended or removed).
bool history_floor(const char* ns, const char* store_id, const cosid::Layout& layout, int32 slot, int64* floor_ms,
                   char* message, size_t message_size);
// Records a window's ceiling, durably, before the window is used, and, from a store of this
// server (local_store), the timeline this data directory issues on.  False, with a message,
// when the file cannot be written: the window must not be used beyond what was recorded.
bool history_record(const char* ns, const char* store_id, const cosid::Layout& layout, int32 slot, int64 ceiling_ms,
                    bool local_store, char* message, size_t message_size);
// The timeline this data directory last issued on from a store of its own server (0: never);
// false when the file cannot be read.
bool history_issued_on_timeline(uint32* timeline);
// Writes that timeline anew (a copy, once declared to its store, is not declared again).
bool history_set_timeline(uint32 timeline, char* message, size_t message_size);

// A fork this data directory is a copy in, kept for good (written durably before it returns
// true; nothing when that id is there already): every store the server uses must acknowledge
// it before it grants (fork.cpp).
bool history_add_fork(const char* id, const char* reason, char* message, size_t message_size);
// The forks kept, one "id<TAB>reason" line each ("" when none), palloc'd in the current
// memory context: what cosid._fork_check reads.  NULL with `message` when the file cannot
// be used.
char* history_forks_text(char* message, size_t message_size);

// A release in order with its exact last timestamp: the record comes down to it (best effort:
// a failed write keeps the higher value, which is only more cautious).
void history_released(const char* ns, const char* store_id, int32 slot, int64 last_ms);

}  // namespace cosid::pg

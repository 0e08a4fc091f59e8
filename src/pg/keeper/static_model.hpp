// The keeper's copy of the static slots' state file (`model`) and its mirror in
// cosid.static_ceiling (static_model.cpp), shared with the windows that rely on them
// (static_keeper.cpp).  Only the keeper process uses these.
#pragma once
#include "../boundary.hpp"
#include "../pg.hpp"
#include "../settings.hpp"
#include "static_state.hpp"
#include "../store/store.hpp"

namespace cosid::pg::static_model {

extern cosid::StateFile model;  // the file as the keeper last wrote or read it
extern cosid::StateFile saved;  // `model` before the change being written
extern bool model_loaded;       // false: read it (again) before the next window
extern char problem[1400];      // why the file cannot be used ('' = none known)
extern char problem_hint[512];
extern int64 model_started_ms;  // without a state file: the keeper's start (see the .cpp)
extern bool rows_synced;        // every window of `model` is in cosid.static_ceiling

inline bool have_file() { return static_state_file_configured(); }

// Under the lock or not: a copy of the entry's identity.
struct EntryKey {
    char ns[NAMEDATALEN];
    int32 slot;
};

// The row of a namespace's not-before (cosid_adopt's floor): it holds for every slot, also
// for a cluster made from this one that serves the namespace on another static slot.
constexpr int32 kEverySlot = -1;

struct RowToWrite {
    char ns[NAMEDATALEN];
    int32 slot;
    int64 ceiling;
};

// Reads the file into `model` if it is not loaded; false (with `problem`) when it cannot be used.
bool ensure_model();
bool load_model(bool* empty);
// Writes `model`; on failure puts `saved` back and says why.
bool save_model(char* error, size_t len);
// The rows `model` owes cosid.static_ceiling, palloc'd.
int model_rows(RowToWrite** out);
// Puts every window of `model` into cosid.static_ceiling when the table needs them.
bool sync_static_rows(bool* exists, StoreError* err, int lock_timeout_ms = 0, bool* restoring = nullptr);
// A window's ceiling (or a released slot's last timestamp) into cosid.static_ceiling.
bool record_static_ceiling(const char* ns, int32 slot, int64 ceiling_ms, StoreError* err);

// A change to `model`: `change` runs on it after a copy is kept in `saved`.
template <typename F>
void change_model(F&& change) {
    cpp_call([&] {
        saved = model;
        change();
    });
}

}  // namespace cosid::pg::static_model

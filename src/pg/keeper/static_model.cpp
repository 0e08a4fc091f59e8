// The keeper's copy of the static slots' state file and its mirror in cosid.static_ceiling:
// read, checked, written durably (a temporary file, fsync'd, renamed over the file, the
// directory fsync'd: src/core static_state.cpp) before anything relies on it, and every
// window and not-before copied into the table that pg_upgrade and restores carry.
#include "static_model.hpp"

#include <algorithm>

#include "../errors.hpp"
#include "../shmem/state.hpp"

namespace cosid::pg {

namespace static_model {

cosid::StateFile model;     // the file as the keeper last wrote or read it
cosid::StateFile saved;     // `model` before the change being written (no C++ object lives on
                            // a stack that an ereport(ERROR) could unwind)
bool model_loaded = false;  // false: read it (again) before the next window
char problem[1400];         // why the file cannot be used ('' = none known)
char problem_hint[512];

// Without a state file: the clock when `model` was last reset (the keeper's start).  The
// model knows nothing issued before it, and static_window_floor() starts no window at or
// below it (src/core static_state.hpp, "static slots without a state file").
int64 model_started_ms = 0;


// Reads the file into `model`.  A missing file is an empty one (floors from cosid.not_before);
// an unreadable, corrupt or foreign one is never replaced: every static request fails with
// `problem` until an administrator fixes or removes it (it is read again at each request).
// `model_loaded` is set only by a load that passed every check: nothing is ever written
// from a model that did not come from this server's own file (renewals and releases ask
// here first).
bool load_model(bool* empty);
bool save_model(char* error, size_t len);

// Refused once, refused until the server restarts, unless the file comes back whole: an
// administrator who removes a refused file must also set cosid.not_before (a restart
// setting), and the removal alone must not let windows start at the old one in between.
// A file of this system and timeline with windows (its permissions fixed, a passing read
// error over) is taken again.
bool ensure_model() {
    if (model_loaded) return true;
    bool empty = false;
    bool ok = load_model(&empty);
    if (ok && shared->static_file_refused && empty) {
        snprintf(problem, sizeof(problem),
                 "cosid state file \"%s\" was refused since the server started, and now "
                 "holds no window (refused until the server restarts)",
                 state_file_path());
        strlcpy(problem_hint,
                "Fix or remove the state file, set cosid.not_before past the last id issued on these "
                "static slots, and restart the server.",
                sizeof(problem_hint));
        ok = false;
    }
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    shared->static_file_refused = !ok;
    LWLockRelease(shared->lock);
    model_loaded = ok;
    return ok;
}

namespace {

// What load_model read of the state file.
struct FileLook {
    cosid::LoadStatus status;
    char message[300];
    uint64 file_system_id;
    uint32 other_timeline;  // a window written on another timeline, 0: none
    int windows;
    char other_ns[NAMEDATALEN];
    int32 other_slot;
};

// The refusal of problem/problem_hint for a server promoted or recovered to a point in time
// (timeline > 1) whose static slots nothing vouches for; `what` says what the file said.
void refuse_unvouched(uint32 timeline, const char* what) {
    if (what == nullptr) {
        snprintf(problem, sizeof(problem),
                 "cosid static slots run without a state file (cosid.state_file = ''), and this server is on timeline "
                 "%u: it was promoted or recovered to a point in time, and the server it came from may have issued on "
                 "these static slots",
                 timeline);
    } else {
        // Only a cosid.not_before naming this timeline vouches for it: a value without one,
        // or naming another, may be a copy (pg_basebackup copies the configuration in the
        // data directory) or be left from an earlier promotion, below what was issued since.
        char said[160] = "";
        if (not_before_ms() != 0)
            snprintf(said, sizeof(said), "; cosid.not_before (\"%s\") %s", setting_not_before,
                     not_before_timeline() == 0 ? "names no timeline" : "names another timeline");
        snprintf(problem, sizeof(problem),
                 "cosid state file \"%s\" %s, and this server is on timeline %u: it was promoted or recovered to a "
                 "point in time, and the server it came from may have issued on these static slots%s",
                 state_file_path(), what, timeline, said);
    }
    snprintf(problem_hint, sizeof(problem_hint),
             "Give this server its own static slots, set cosid.not_before = '<a time past the other server's last "
             "id> on timeline %u' and restart it.",
             timeline);
}

// Reads the state file: into `model` when it is this system's and of this timeline (or
// missing: an empty model), and what it holds into *f.
void read_state_file(uint64 system_id, uint32 timeline, FileLook* f) {
    f->file_system_id = 0;
    f->other_timeline = 0;
    f->windows = 0;
    f->other_ns[0] = '\0';
    f->other_slot = -1;
    cpp_call([&] {
        cosid::LoadResult r = cosid::load_state(state_file_path());
        f->status = r.status;
        strlcpy(f->message, r.message.c_str(), sizeof(f->message));
        if (r.status == cosid::LoadStatus::Ok) {
            f->file_system_id = r.file.system_identifier;
            f->windows = static_cast<int>(r.file.windows.size());
            for (const cosid::StateWindow& w : r.file.windows)
                if (w.timeline != timeline) {
                    f->other_timeline = w.timeline;
                    strlcpy(f->other_ns, w.ns.c_str(), sizeof(f->other_ns));
                    f->other_slot = w.slot;
                    break;
                }
            if (f->file_system_id == system_id && f->other_timeline == 0) model = r.file;
        } else if (r.status == cosid::LoadStatus::Missing) {
            model = cosid::StateFile{};
            model.system_identifier = system_id;
        }
    });
}

// Whether the file read into *f may be used; else problem and problem_hint say why.
bool state_file_usable(const FileLook& f, uint64 system_id, uint32 timeline) {
    switch (f.status) {
    case cosid::LoadStatus::Ok:
        if (f.file_system_id != system_id) {
            snprintf(problem, sizeof(problem),
                     "cosid state file \"%s\" belongs to another PostgreSQL system (system identifier " UINT64_FORMAT
                     "; this server's is " UINT64_FORMAT ")",
                     state_file_path(), f.file_system_id, system_id);
            strlcpy(problem_hint,
                    "It was copied from another server, whose static slots it describes. Give this server its "
                    "own static slots, remove the file and set cosid.not_before past the last id this server "
                    "issued in them (if any).",
                    sizeof(problem_hint));
            return false;
        }
        if (f.other_timeline != 0) {
            // A promoted standby or a recovery to a point in time: the file is a copy,
            // older than what the server it came from issued since (on any of its slots).
            snprintf(problem, sizeof(problem),
                     "cosid state file \"%s\" holds slot %d of namespace \"%s\" from timeline %u; this server "
                     "is on timeline %u: it was promoted or recovered to a point in time, and its copy of the file "
                     "may be older than what the server it came from issued since",
                     state_file_path(), f.other_slot, f.other_ns, f.other_timeline, timeline);
            // (a hint reaches cosid_next() through 256-byte buffers: kept short)
            snprintf(problem_hint, sizeof(problem_hint),
                     "Give this server its own static slots, remove the file, set cosid.not_before = '<a time past "
                     "the other server's last id> on timeline %u' and restart it.",
                     timeline);
            return false;
        }
        return true;
    case cosid::LoadStatus::Missing: return true;
    case cosid::LoadStatus::FutureVersion:
        snprintf(problem, sizeof(problem), "cosid state file \"%s\" cannot be read: %s", state_file_path(), f.message);
        strlcpy(problem_hint, "Install the cosid version that wrote it, or a newer one.", sizeof(problem_hint));
        return false;
    default:
        snprintf(problem, sizeof(problem), "cosid state file \"%s\" is unusable: %s", state_file_path(), f.message);
        strlcpy(problem_hint,
                "cosid never replaces it silently: its ceilings guard against the clock moving back. Remove it "
                "and set cosid.not_before past the last id this server issued in its static namespaces (an "
                "older copy of the file is not enough: ids were issued since).",
                sizeof(problem_hint));
        return false;
    }
}

// A keeper started again while static windows are live (this one's predecessor exited):
// the model, and the file, hold at least their published ceilings, even if the file was
// changed meanwhile.  *merged: a ceiling was taken from the pool.  False when the file could
// not be written (problem says so).
bool merge_live_windows(uint32 timeline, bool* merged) {
    cpp_call([&] { saved = model; });
    for (int i = 0; i < shared->npool; ++i) {
        PoolEntry* e = &shared->pool[i];
        LWLockAcquire(shared->lock, LW_SHARED);
        bool live = e->state == kLeased && e->is_static;
        char ns[NAMEDATALEN];
        strlcpy(ns, e->ns, sizeof(ns));
        int32 slot = e->slot;
        int64 ceiling = static_cast<int64>(pg_atomic_read_u64(&e->ceiling));
        LWLockRelease(shared->lock);
        if (!live) continue;
        cpp_call([&] {
            const cosid::StateWindow* w = model.find_window(ns, slot);
            if (w == nullptr || w->ceiling_ms < ceiling) {
                model.set_window(ns, slot, ceiling, timeline);
                *merged = true;
            }
        });
    }
    char write_error[300];
    if (*merged && !save_model(write_error, sizeof(write_error))) {
        snprintf(problem, sizeof(problem), "cosid could not write the ceilings of live static windows to \"%s\": %s",
                 state_file_path(), write_error);
        strlcpy(problem_hint, "Free space or fix the permissions of the state file's directory.", sizeof(problem_hint));
        return false;
    }
    return true;
}

}  // namespace

// Reads the file into `model` and checks it; `empty`: it was missing or held no window.
bool load_model(bool* empty) {
    uint64 system_id = GetSystemIdentifier();
    uint32 timeline = GetWALInsertionTimeLine();
    *empty = false;
    if (!have_file() && timeline > 1 && not_before_timeline() != timeline) {
        // Without a file the clock bounds what this server issued before, not what the server
        // it was promoted or recovered from issued since (on the same slots): the same rule
        // as for a missing file below.
        refuse_unvouched(timeline, nullptr);
        return false;
    }
    if (!have_file()) {
        // Every id issued before now is at or below the clock now (without a file no id is
        // borrowed ahead of it): whatever the last keeper or server knew is covered by it.
        model_started_ms = clock_ms();
        cpp_call([&] {
            model = cosid::StateFile{};
            model.system_identifier = system_id;
        });
        return true;
    }
    FileLook f;
    read_state_file(system_id, timeline, &f);
    if ((f.status == cosid::LoadStatus::Missing || (f.status == cosid::LoadStatus::Ok && f.windows == 0)) &&
        timeline > 1 && not_before_timeline() != timeline) {
        // The file is not replicated: a standby built before the first static window has
        // none, and a promoted one must not start at 0 on slots its primary may have used.
        refuse_unvouched(timeline, f.status == cosid::LoadStatus::Missing ? "does not exist" : "holds no window");
        return false;
    }
    if (!state_file_usable(f, system_id, timeline)) return false;
    *empty = f.status == cosid::LoadStatus::Missing || f.windows == 0;
    bool merged = false;
    if (!merge_live_windows(timeline, &merged)) return false;
    if (merged) *empty = false;
    problem[0] = '\0';
    return true;
}


// Writes `model`; on failure puts the copy from before the change back (nothing was issued
// under the new values) and says why.
bool save_model(char* error, size_t len) {
    if (!have_file()) return true;  // none configured: nothing is durable (the WARNING at start)
    bool ok = cpp_call([&] {
        auto failed = cosid::save_state(state_file_path(), model);
        if (failed) {
            strlcpy(error, failed->c_str(), len);
            model = saved;
        }
        return !failed;
    });
    count(ok ? shared->stats.static_writes : shared->stats.static_write_failures);
    return ok;
}


// Whether every window and not-before of `model` is in cosid.static_ceiling as the table is
// now (`synced_file`, its relation file node): windows opened before it was there (a 1.4
// catalog updated under a running server), before this keeper started, or before the table
// was made again or emptied (DROP and CREATE EXTENSION, TRUNCATE) are recorded before the
// next window is given or renewed.
bool rows_synced = false;
int64 synced_file = 0;


// The rows `model` owes the table: a window's ceiling per (namespace, slot), a not-before per
// namespace (slot kEverySlot).  Palloc'd, so that nothing of C++ outlives the call.
int model_rows(RowToWrite** out) {
    int windows = cpp_call([&] { return static_cast<int>(model.windows.size()); });
    int n = cpp_call([&] { return windows + static_cast<int>(model.not_before.size()); });
    RowToWrite* rows = static_cast<RowToWrite*>(palloc0(sizeof(RowToWrite) * Max(n, 1)));
    cpp_call([&] {
        for (int k = 0; k < windows; ++k) {
            strlcpy(rows[k].ns, model.windows[k].ns.c_str(), NAMEDATALEN);
            rows[k].slot = model.windows[k].slot;
            rows[k].ceiling = model.windows[k].ceiling_ms;
        }
        for (int k = windows; k < n; ++k) {
            strlcpy(rows[k].ns, model.not_before[k - windows].ns.c_str(), NAMEDATALEN);
            rows[k].slot = kEverySlot;
            rows[k].ceiling = model.not_before[k - windows].ms;
        }
    });
    *out = rows;
    return n;
}

// `*exists`: the catalog has cosid.static_ceiling (never on a standby: nothing is issued
// there, and nothing could be written).  When it has, the model's windows are in it.
// While a restore is under way (*restoring), *exists is false: nothing is written (the
// restore's COPY of the table comes later and would meet this cluster's row), and the caller
// gives no window.
bool sync_static_rows(bool* exists, StoreError* err, int lock_timeout_ms, bool* restoring) {
    *exists = false;
    if (restoring != nullptr) *restoring = false;
    if (RecoveryInProgress()) return true;
    int64 table_file = 0;
    bool being_restored = false;
    if (!store_static_ceiling_exists(exists, &table_file, &being_restored, err, lock_timeout_ms)) return false;
    if (restoring != nullptr) *restoring = being_restored;
    if (being_restored) *exists = false;
    if (!*exists) {
        rows_synced = false;
        return true;
    }
    if (rows_synced && table_file == synced_file) return true;
    RowToWrite* rows = nullptr;
    int n = model_rows(&rows);
    bool ok = true;
    for (int k = 0; k < n && ok; ++k)
        ok = store_static_record(rows[k].ns, rows[k].slot, rows[k].ceiling, err, lock_timeout_ms);
    pfree(rows);
    rows_synced = ok;
    synced_file = table_file;
    return ok;
}

// A window's ceiling (or a released slot's last timestamp) into cosid.static_ceiling, after the
// windows not recorded yet; nothing where the catalog has no such table.
bool record_static_ceiling(const char* ns, int32 slot, int64 ceiling_ms, StoreError* err) {
    bool exists = false;
    bool restoring = false;
    if (!sync_static_rows(&exists, err, 0, &restoring)) return false;
    if (restoring) {
        // No window is renewed (or adopted into) while a restore is under way: the table
        // cannot hold what it would issue, and the restore's data may lie above it.
        strlcpy(err->message, "a restore of this database is under way (cosid.store_state holds only its mark)",
                sizeof(err->message));
        err->sqlerrcode = ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
        err->outcome_unknown = false;
        err->hint[0] = '\0';
        return false;
    }
    return !exists || store_static_record(ns, slot, ceiling_ms, err);
}

}  // namespace static_model

}  // namespace cosid::pg

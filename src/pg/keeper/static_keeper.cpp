// The keeper's side of static slots.  The state file holds, per (namespace, slot), a
// timestamp no id of that slot ever exceeded: a ceiling written before any id below it was
// issued, or the exact last timestamp once a window was closed.  The keeper is its only
// writer and keeps a copy in its own memory (`model`); every change is written to a
// temporary file, fsync'd, renamed over the file and the directory fsync'd (src/core
// static_state.cpp) before anything relies on it.
//
// What a static window never does: reach past what the file durably holds.  A ceiling is
// published to the backends only after the write that holds it succeeded; a failed write
// leaves the backends at the old ceiling, where they wait and then fail (ZC002) naming it.
#include "static_keeper.hpp"

#include "reach.hpp"
#include "static_model.hpp"
#include "fork.hpp"
#include "keeper_parts.hpp"

#include <algorithm>

#include "../boundary.hpp"
#include "clock_step.hpp"
#include "../errors.hpp"
#include "issue_word.hpp"
#include "../settings.hpp"
#include "../shmem/state.hpp"
#include "static_state.hpp"
#include "../store/store.hpp"

namespace cosid::pg {

using namespace static_model;

void static_keeper_start() {
    if (!static_slots_configured()) return;
    model_loaded = false;  // a keeper started again reads what the last one wrote
    if (!have_file()) {
        ereport(WARNING, (errmsg("cosid static slots run without a state file (cosid.state_file is empty)"),
                          errdetail("Nothing protects their ids against the clock moving back across a restart. "
                                    "And so that a restart never repeats an id, none is issued ahead of the clock: "
                                    "at most 2^sequence_bits ids per tick per slot, and the first window after a "
                                    "start waits for the clock's next tick."),
                          errhint("Set cosid.state_file (the default, \"cosid.state\" in the data directory, is "
                                  "right for most servers).")));
        ensure_model();
        return;
    }
    if (!ensure_model()) {
        ereport(WARNING, (errmsg("%s", problem), errdetail("Static namespaces issue no id until it is fixed."),
                          errhint("%s", problem_hint)));
        return;
    }
    int windows = cpp_call([&] { return static_cast<int>(model.windows.size()); });
    ereport(LOG, (errmsg("cosid static slots \"%s\": state file \"%s\" holds %d window%s", setting_static_slots,
                         state_file_path(), windows, windows == 1 ? "" : "s")));
}

namespace {

// Why a static request cannot be served: as PoolEntry::error, error_hint and error_code.
struct Refusal {
    char error[512];
    char hint[256];
    int code;
};

// serve_static_request's checks before any window: the state file is usable, this data
// directory is no fork, the namespace exists here and the slot fits its layout (read into *r).
// False with *why when one fails.
bool static_request_possible(const char* ns, int32 slot, StoreResult* r, Refusal* why) {
    StoreError err;
    if (!ensure_model()) {
        strlcpy(why->error, problem, sizeof(why->error));
        strlcpy(why->hint, problem_hint, sizeof(why->hint));
    } else if (!fork_static_check(&err)) {
        // This data directory is a copy whose original may still issue on the same static
        // slots (src/pg/keeper/fork.cpp): no new window until the fork is acknowledged.
        strlcpy(why->error, err.message, sizeof(why->error));
        strlcpy(why->hint, err.hint, sizeof(why->hint));
        why->code = err.sqlerrcode;
    } else if (!store_local_namespace(ns, r, &err)) {
        snprintf(why->error, sizeof(why->error), "cosid could not read namespace \"%s\" in database \"%s\": %s", ns,
                 setting_database, err.message);
        why->code = err.sqlerrcode;
    } else if (!r->row) {
        snprintf(why->error, sizeof(why->error), "cosid namespace \"%s\" does not exist in database \"%s\"", ns,
                 setting_database);
        why->code = ERRCODE_UNDEFINED_OBJECT;
        snprintf(why->hint, sizeof(why->hint),
                 "A static slot takes its layout from there: create it with "
                 "cosid_namespace_create('%s') in database \"%s\".",
                 ns, setting_database);
    } else if (slot >= (1 << r->slot_bits)) {
        snprintf(why->error, sizeof(why->error),
                 "cosid.static_slots gives namespace \"%s\" slot %d, but its layout has %d slot "
                 "bits (slots 0 to %d)",
                 ns, slot, r->slot_bits, (1 << r->slot_bits) - 1);
        strlcpy(why->hint, "Fix cosid.static_slots and restart the server.", sizeof(why->hint));
        why->code = ERRCODE_CONFIG_FILE_ERROR;
    } else {
        return true;
    }
    return false;
}

// Another window of this (ns, slot) still open (a release asked for, not done yet) is
// released first: its exact last timestamp is then in the model before the new floor
// is read, and its release can never lower the file below the new window's ids.
void release_other_static_windows(int i, const char* ns, int32 slot) {
    for (int j = 0; j < shared->npool; ++j) {
        PoolEntry* o = &shared->pool[j];
        LWLockAcquire(shared->lock, LW_SHARED);
        bool other = j != i && o->state == kLeased && o->is_static && o->slot == slot && strcmp(o->ns, ns) == 0;
        LWLockRelease(shared->lock);
        if (other) release_static(j);
    }
}

// The database's copy: what other clusters this database came from (pg_upgrade, a
// restore elsewhere, a logical replica switched over to) issued on the slot, or what
// a lost file held.  Written before the file: a row ahead of the file only raises, a
// file ahead of a failed row write would push every retry's floor further ahead.
void read_database_copy(const char* ns, int32 slot, bool* db_exists, std::optional<int64>* others_ms,
                        std::optional<int64>* own_ms, Refusal* why) {
    bool restoring = false;
    StoreError db_err;
    if (!sync_static_rows(db_exists, &db_err, 0, &restoring) ||
        (*db_exists && !store_static_recorded(ns, slot, others_ms, own_ms, &restoring, &db_err))) {
        snprintf(why->error, sizeof(why->error),
                 "cosid could not read or write cosid.static_ceiling in database \"%s\": %s", setting_database,
                 db_err.message);
        strlcpy(why->hint,
                "The database keeps a copy of each static window's ceiling (for pg_upgrade and restores); "
                "no window is given without it.",
                sizeof(why->hint));
        why->code = db_err.sqlerrcode;
    } else if (restoring) {
        // The origin's rows come with the restore's data, after this CREATE EXTENSION: a
        // window now would start at this clock, below what the origin issued.
        snprintf(why->error, sizeof(why->error),
                 "cosid static slots of database \"%s\" are being restored: no window before "
                 "the origin's cosid.static_ceiling has come",
                 setting_database);
        strlcpy(why->hint,
                "Wait for the restore to end. If none runs (a schema-only or partial restore, a dump of cosid "
                "1.3 or older, CREATE EXTENSION run with row_security off): SELECT "
                "cosid_store_follow_timeline(restored => true) there.",
                sizeof(why->hint));
        why->code = ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
    }
}

// The new window's ceiling, recorded in the database's copy (when it exists) and then in the
// state file, fsync'd, before any id below it is issued; unless *why already holds an error.
void write_static_ceiling(const char* ns, int32 slot, int64 ceiling, uint32 timeline, bool db_exists, Refusal* why) {
    char write_error[300];
    StoreError record_err;
    if (why->error[0] != '\0') {
        // (the copy could not be read: nothing written)
    } else if (db_exists && !store_static_record(ns, slot, ceiling, &record_err)) {
        snprintf(why->error, sizeof(why->error),
                 "cosid could not record static slot %d's ceiling in cosid.static_ceiling "
                 "in database \"%s\": %s",
                 slot, setting_database, record_err.message);
        strlcpy(why->hint,
                "The database keeps a copy of each static window's ceiling for pg_upgrade and restores; "
                "no window is issued on before it is written.",
                sizeof(why->hint));
        why->code = record_err.sqlerrcode;
    } else {
        change_model([&] { model.set_window(ns, slot, ceiling, timeline); });
        if (!save_model(write_error, sizeof(write_error))) {
            snprintf(why->error, sizeof(why->error), "cosid could not write its state file: %s", write_error);
            strlcpy(why->hint,
                    "No id is issued past what the file durably holds. Free space or fix the permissions "
                    "of the file's directory (cosid.state_file).",
                    sizeof(why->hint));
        }
    }
}

// The window of static request i: above what the slot may have issued (the state file, the
// database's copy, the not-befores), written durably; into *r, or *why says why not.
void open_static_window(int i, const char* ns, int32 slot, uint32 timeline, StoreResult* r, Refusal* why) {
    release_other_static_windows(i, ns, slot);
    // floor: what this slot may already have issued, and the not-befores
    int64 window_value = 0;
    bool model_has_window = false;
    int64 ns_not_before = 0;
    cpp_call([&] {
        const cosid::StateWindow* w = model.find_window(ns, slot);
        if (w != nullptr) window_value = w->ceiling_ms;
        model_has_window = w != nullptr;
        ns_not_before = model.not_before_of(ns);
    });
    bool db_exists = false;
    std::optional<int64> others_ms, own_ms;
    read_database_copy(ns, slot, &db_exists, &others_ms, &own_ms, why);
    if (others_ms && window_value < *others_ms) {
        char at[40];
        int64 v = *others_ms;
        cpp_call([&] { strlcpy(at, cosid::format_timestamp_ms(v).c_str(), sizeof(at)); });
        ereport(LOG, (errmsg("cosid static slot %d of namespace \"%s\": starting above %s, recorded by another "
                             "cluster in cosid.static_ceiling (pg_upgrade, a restore) or by the slot's leases "
                             "before it was static (cosid.lease, cosid_adopt)",
                             slot, ns, at)));
    }
    window_value = cosid::static_recorded_ms(window_value, model_has_window, others_ms, own_ms, have_file());
    // Without a file the model holds only what this keeper saw: the floor is then never
    // below the clock at its start, which is above anything an earlier run issued.
    int64 floor = cosid::static_window_floor(window_value, std::max<int64>(ns_not_before, not_before_ms()), have_file(),
                                             model_started_ms);
    int64 ceiling = cosid::static_window_ceiling(floor, clock_ms(), setting_static_ahead_ms);
    write_static_ceiling(ns, slot, ceiling, timeline, db_exists, why);
    if (why->error[0] == '\0') {
        r->slot = slot;
        r->fence = 0;
        r->floor = floor;
        r->ceiling = ceiling;
        r->expires_at = ceiling;
    }
}

}  // namespace

void serve_static_request(int i, const char* ns, int32 slot) {
    PoolEntry* e = &shared->pool[i];
    Refusal why;
    why.error[0] = '\0';  // as PoolEntry::error
    why.hint[0] = '\0';
    why.code = COSID_STATIC_STATE;
    StoreResult r;
    memset(&r, 0, sizeof(r));
    uint32 timeline = GetWALInsertionTimeLine();
    if (static_request_possible(ns, slot, &r, &why)) open_static_window(i, ns, slot, timeline, &r, &why);
    int64 done = mono_ms();
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (why.error[0] != '\0') {
        // A transient error (the database's copy locked, a statement timeout under load) is
        // tried again; any other fails every waiter at once, and asked again, the keeper
        // looks again (a fixed file, a created namespace).
        if (keeper::request_abandoned_locked(e, done))
            drop_request_locked(e);
        else
            keeper::request_failed_locked(e, why.error, why.hint, why.code, done);
    } else {
        install_window_locked(e, r, true, done);
        count(shared->stats.acquires);
    }
    LWLockRelease(shared->lock);
    if (why.error[0] != '\0') ereport(LOG, (errmsg("%s", why.error), errhint("%s", why.hint)));
    ConditionVariableBroadcast(&shared->cv);
}

void renew_static(int i) {
    PoolEntry* e = &shared->pool[i];
    EntryKey k;
    LWLockAcquire(shared->lock, LW_SHARED);
    strlcpy(k.ns, e->ns, sizeof(k.ns));
    k.slot = e->slot;
    int64 ceiling = static_cast<int64>(pg_atomic_read_u64(&e->ceiling));
    int64 backoff = e->backoff_ms;
    cosid::Layout layout = entry_layout(*e);
    LWLockRelease(shared->lock);

    // By the clock (now + ahead); a window its ids used up further ahead than that (the clock
    // stepped back) is extended from its ids instead: the slot is fixed, and waiting would
    // last until the clock catches up with them (src/core/clock_step.hpp).
    int64 now = clock_ms();
    int64 target = cosid::clock_step::static_next_ceiling(layout, pg_atomic_read_u64(&e->word), ceiling, now,
                                                          setting_static_ahead_ms,
                                                          cosid::clock_step::patience_ms(layout, store_bound_ms()));
    char error[400] = "";
    bool ok = true;
    if (target > ceiling && !ensure_model()) {
        // (a keeper started again that cannot read the file: it never writes over it)
        strlcpy(error, problem, sizeof(error));
        ok = false;
    } else if (target > ceiling) {
        uint32 timeline = GetWALInsertionTimeLine();
        // the database's copy first (see serve_static_request), then the file
        StoreError record_err;
        if (!record_static_ceiling(k.ns, k.slot, target, &record_err)) {
            snprintf(error, sizeof(error), "cosid.static_ceiling in database \"%s\" could not be written: %s",
                     setting_database, record_err.message);
            ok = false;
        } else {
            change_model([&] { model.set_window(k.ns, k.slot, target, timeline); });
            ok = save_model(error, sizeof(error));
        }
    }
    int64 done = mono_ms();
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (ok) {
        // Published only now that the file holds it; a ceiling only grows.
        if (static_cast<uint64>(target) > pg_atomic_read_u64(&e->ceiling))
            pg_atomic_write_u64(&e->ceiling, static_cast<uint64>(target));
        e->expires_at = target;
        e->static_error[0] = '\0';
        e->backoff_ms = 0;
        // Again when half of `ahead` is left (on this clock; a step forward wakes the keeper
        // through a backend waiting at the ceiling).
        e->next_renew_at = done + std::max<int64>(target - now - setting_static_ahead_ms / 2, 50);
    } else {
        strlcpy(e->static_error, error, sizeof(e->static_error));
        e->backoff_ms = backoff == 0 ? 100 : Min(backoff * 2, 5000);
        e->next_renew_at = done + e->backoff_ms;
    }
    LWLockRelease(shared->lock);
    if (!ok && backoff == 0)
        ereport(LOG,
                (errmsg("cosid could not write the next ceiling of static slot %d in \"%s\": %s", k.slot, k.ns, error),
                 errdetail("Ids stop at the ceiling the file holds; the write is tried again with backoff.")));
    ConditionVariableBroadcast(&shared->cv);
}

void release_static(int i) {
    PoolEntry* e = &shared->pool[i];
    EntryKey k;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (e->state != kLeased) {
        LWLockRelease(shared->lock);
        return;
    }
    // After the OR nothing is claimed on it: its answer is the exact last timestamp issued.
    uint64 last_word = pg_atomic_fetch_or_u64(&e->word, issue_word::kClosed);
    std::optional<int64> last = issue_word::last_issued_ms(entry_layout(*e), last_word);
    int64 value = last ? *last : e->floor;
    strlcpy(k.ns, e->ns, sizeof(k.ns));
    k.slot = e->slot;
    end_lease_locked(e);
    // Never below another live window of the slot (serve_static_request allows none; this
    // holds whatever path gets here).
    for (int j = 0; j < shared->npool; ++j) {
        PoolEntry* o = &shared->pool[j];
        if (o->state == kLeased && o->is_static && o->slot == k.slot && strcmp(o->ns, k.ns) == 0)
            value = std::max<int64>(value, static_cast<int64>(pg_atomic_read_u64(&o->ceiling)));
    }
    LWLockRelease(shared->lock);
    ConditionVariableBroadcast(&shared->cv);

    // The file may keep the ceiling (always safe); the exact value spares a restart the wait
    // for the clock to pass the ceiling.
    count(shared->stats.releases);
    if (!ensure_model()) return;  // it keeps the ceilings: never written from a model not read from it
    // The database's copy holds at least this window (one opened before the table was there,
    // under a 1.4 catalog updated since, is recorded here at the latest: a clean stop before
    // pg_upgrade releases every window).  It keeps the ceiling; only the file is lowered.
    StoreError record_err;
    if (!record_static_ceiling(k.ns, k.slot, value, &record_err))
        ereport(LOG, (errmsg("cosid could not record static slot %d of \"%s\" in cosid.static_ceiling: %s", k.slot,
                             k.ns, record_err.message),
                      errdetail("A cluster made from this database (pg_upgrade, a restore) would not know this "
                                "window; the state file does.")));
    uint32 timeline = GetWALInsertionTimeLine();
    change_model([&] { model.set_window(k.ns, k.slot, value, timeline); });
    char error[300];
    if (!save_model(error, sizeof(error)))
        ereport(LOG, (errmsg("cosid could not write the last timestamp of static slot %d in \"%s\": %s", k.slot, k.ns,
                             error),
                      errdetail("The file keeps the slot's ceiling, which is above every id issued.")));
    // On failure `model` went back to the ceiling too: the next window starts above it (a
    // wait of at most cosid.static_ahead), never below.
}

bool raise_static_not_before(const char* ns, int64 floor_ms, char* error, size_t len) {
    if (!ensure_model()) {
        strlcpy(error, problem, len);
        return false;
    }
    // The raised floor goes into cosid.static_ceiling first, as a window's ceiling does: the
    // state file stays in the old data directory across pg_upgrade (and is absent in a
    // restore), and a cluster made from this database must not start below the adopted ids.
    // It is refused here when it cannot be recorded: the adopt fails and is run again.
    StoreError record_err;
    if (!record_static_ceiling(ns, kEverySlot, floor_ms, &record_err)) {
        snprintf(error, len, "cosid could not record the raised floor in cosid.static_ceiling: %s", record_err.message);
        return false;
    }
    change_model([&] { model.raise_not_before(ns, floor_ms); });
    char write_error[300];
    if (!save_model(write_error, sizeof(write_error))) {
        snprintf(error, len, "cosid could not write its state file: %s", write_error);
        return false;
    }
    return true;
}

namespace {

// static_rows_tick's comparison: rows the table lost (made again by DROP and CREATE EXTENSION,
// emptied by TRUNCATE or DELETE) are written again from the model.  Sets *exists and
// *restoring as cosid.static_ceiling is; false with *err when a store call failed.
bool rewrite_lost_rows(bool* exists, bool* restoring, StoreError* err) {
    // What the model holds, as JSON for one comparison with this cluster's rows.  Every store
    // call here gives up on a lock after 100 ms: the keeper's pass (dynamic namespaces too)
    // must not wait behind someone's lock on the table.
    StringInfoData json;
    initStringInfo(&json);
    appendStringInfoChar(&json, '[');
    RowToWrite* rows = nullptr;
    int n = model_rows(&rows);
    for (int k = 0; k < n; ++k) {
        if (k > 0) appendStringInfoChar(&json, ',');
        appendStringInfoString(&json, "{\"ns\":");
        escape_json(&json, rows[k].ns);
        appendStringInfo(&json, ",\"slot\":%d,\"ceiling\":" INT64_FORMAT "}", rows[k].slot, rows[k].ceiling);
    }
    appendStringInfoChar(&json, ']');
    pfree(rows);
    int64 table_file = 0;
    int64 missing = 0;
    bool ok = store_static_ceiling_exists(exists, &table_file, restoring, err, 100);
    if (ok && *exists && !*restoring && n > 0) ok = store_static_rows_missing(json.data, &missing, err, 100);
    if (ok && missing > 0) {
        rows_synced = false;
        ok = sync_static_rows(exists, err, 100);
        if (ok)
            ereport(LOG, (errmsg("cosid wrote " INT64_FORMAT " static ceiling%s into cosid.static_ceiling again "
                                 "(the table was made again or emptied)",
                                 missing, missing == 1 ? "" : "s")));
    }
    pfree(json.data);
    return ok;
}

// While a restore is under way no static window stays open: what it issued could lie
// below the rows the restore brings, and the table cannot take its ceiling meanwhile.
void close_static_windows_for_restore(bool ok, bool restoring) {
    static bool closed_for_restore = false;
    for (int i = 0; ok && restoring && i < shared->npool; ++i) {
        PoolEntry* e = &shared->pool[i];
        LWLockAcquire(shared->lock, LW_SHARED);
        bool open = e->state == kLeased && e->is_static;
        LWLockRelease(shared->lock);
        if (!open) continue;
        if (!closed_for_restore)
            ereport(LOG, (errmsg("cosid closes its static windows: a restore of database \"%s\" is under way",
                                 setting_database),
                          errdetail("No static window opens until the restore's data has come (cosid.store_state "
                                    "holds only the mark its CREATE EXTENSION left).")));
        closed_for_restore = true;
        release_static(i);
    }
    if (ok && !restoring) closed_for_restore = false;
}

// An open window below a ceiling another cluster recorded since it opened (a data-only
// restore, or logical replication, brought the rows after it): closed, so that the next
// window starts above them.  What it issued before cannot be taken back; it issues no more.
// Returns false with *err when a store call failed.
bool close_static_windows_below_records(StoreError* err) {
    bool ok = true;
    for (int i = 0; ok && i < shared->npool; ++i) {
        PoolEntry* e = &shared->pool[i];
        char ns[NAMEDATALEN];
        LWLockAcquire(shared->lock, LW_SHARED);
        bool open = e->state == kLeased && e->is_static;
        strlcpy(ns, e->ns, sizeof(ns));
        int32 slot = e->slot;
        int64 floor = e->floor;
        LWLockRelease(shared->lock);
        if (!open) continue;
        std::optional<int64> others_ms, own_ms;
        bool busy = false;
        ok = store_static_recorded(ns, slot, &others_ms, &own_ms, &busy, err, 100);
        if (!ok || !others_ms || *others_ms <= floor) continue;
        ereport(LOG, (errmsg("cosid static slot %d of namespace \"%s\": a ceiling above the open window's floor "
                             "was recorded (by another cluster in cosid.static_ceiling, or by a lease of the slot in "
                             "cosid.lease); the window is closed, the next starts above it",
                             slot, ns),
                      errdetail("The rows came after the window opened: a data-only restore or logical replication "
                                "while this server issued, or a server leasing this slot from this database. Ids "
                                "issued in the window before may repeat the other's."),
                      errhint("Let a restore finish before the application issues ids, and give each cluster its "
                              "own static slots, never leased by another.")));
        release_static(i);
    }
    return ok;
}

}  // namespace

void static_rows_tick() {
    static int64 next_at = 0;
    static bool failing = false;
    if (!static_slots_configured() || mono_ms() < next_at) return;
    next_at = mono_ms() + 1000;
    // Only a model read from a file has something to record; a refused file is reported at
    // every window already.
    if (!model_loaded || RecoveryInProgress()) return;
    bool exists = false;
    bool restoring = false;
    StoreError err;
    bool ok = rewrite_lost_rows(&exists, &restoring, &err);
    close_static_windows_for_restore(ok, restoring);
    if (ok && exists && !restoring) ok = close_static_windows_below_records(&err);
    if (!ok && !failing)
        ereport(LOG, (errmsg("cosid could not compare its static ceilings with cosid.static_ceiling: %s", err.message),
                      errdetail("Tried again every second; the next static window writes them in any case.")));
    failing = !ok;
}

}  // namespace cosid::pg

// The keeper's notes for cosid_health() (health.hpp), and cosid._health_state(): what shared
// memory knows, one row, read by the SQL function cosid_health() which turns it into checks.
#include "health.hpp"

#include "../settings.hpp"
#include "../shmem/state.hpp"
#include "../store/store.hpp"

using namespace cosid::pg;

namespace cosid::pg {

namespace {
HealthState* health() { return &shared->health; }
void stamp(pg_atomic_uint64* at) { pg_atomic_write_u64(at, static_cast<uint64>(mono_ms())); }
}  // namespace

void health_keeper_started() { health()->keeper_started_at = mono_ms(); }

void health_store_answered() { stamp(&health()->store_ok_at); }

void health_renewal(bool ok) {
    HealthState* h = health();
    if (ok) {
        stamp(&h->renewal_ok_at);
        pg_atomic_write_u64(&h->failures_in_row, 0);
        pg_atomic_write_u64(&h->failing_since, 0);
        return;
    }
    stamp(&h->renewal_failed_at);
    if (pg_atomic_read_u64(&h->failures_in_row) == 0) stamp(&h->failing_since);
    pg_atomic_write_u64(&h->failures_in_row, pg_atomic_read_u64(&h->failures_in_row) + 1);  // one writer
}

void health_lease_granted() { stamp(&health()->renewal_ok_at); }

void health_lease_lost() {
    count(shared->stats.leases_lost);
    stamp(&health()->lease_lost_at);
}

void health_lease_freed() { count(shared->stats.leases_freed); }

void health_store_clock(int64 store_now, int64 local_before, int64 local_after, int64 tolerance_ms) {
    // The store's now lies between our clock before and after the call, unless clocks differ.
    int64 skew = 0;
    if (store_now < local_before)
        skew = local_before - store_now;
    else if (store_now > local_after)
        skew = store_now - local_after;
    if (skew > tolerance_ms / 2) count(shared->stats.clock_skew_events);
    HealthState* h = health();
    pg_atomic_write_u64(&h->skew_ms, static_cast<uint64>(skew));
    pg_atomic_write_u64(&h->skew_tolerance_ms, static_cast<uint64>(tolerance_ms));
    stamp(&h->skew_measured_at);
}

bool health_read_store_facts(int64* failovers, int32* timeline, bool* raises) {
    StoreResult r;
    memset(&r, 0, sizeof(r));
    StoreError err;
    int64 before = clock_ms();
    bool ok = store_read_health(shared->owner_key, shared->incarnation, &r, &err);
    int64 after = clock_ms();
    HealthState* h = health();
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (ok && r.row) {
        h->facts_at = mono_ms();
        h->max_ttl_ms = r.fence;
        h->max_tolerance_ms = r.expires_at;
        h->raise_floors = r.found;
        h->standbys = r.slot;
        h->sync_standbys = static_cast<int>(r.floor);
        h->sync_names = r.ceiling != 0;
        h->other_incarnations = static_cast<int>(r.next_floor);
        h->facts_error[0] = '\0';
    } else {
        // A store of an older version has no cosid._store_health(): its facts stay unknown.
        strlcpy(h->facts_error, ok ? "cosid._store_health() returned no row" : err.message, sizeof(h->facts_error));
    }
    LWLockRelease(shared->lock);
    // The clocks are compared at every acquire and renewal, against the namespace's tolerance;
    // this read compares them (against the store's largest tolerance) only when no lease did
    // lately, so that a keeper without leases still watches its clock, and one with leases is
    // not judged by two tolerances in turn.
    uint64 measured = pg_atomic_read_u64(&h->skew_measured_at);
    bool lately = measured != 0 && mono_ms() - static_cast<int64>(measured) < setting_ttl_ms;
    if (ok && r.row && !lately) health_store_clock(r.store_now, before, after, r.expires_at);
    *failovers = r.failovers;
    *timeline = r.timeline;
    *raises = r.found;
    return ok && r.row;
}

}  // namespace cosid::pg

extern "C" {
PG_FUNCTION_INFO_V1(cosid_health_state);
}

namespace {
constexpr int kCols = 31;

// An age in ms of a mono_ms() stamp; NULL when it never happened.
void age(Datum* v, bool* nulls, int c, int64 now, uint64 at) {
    nulls[c] = at == 0;
    v[c] = Int64GetDatum(now - static_cast<int64>(at));
}
}  // namespace

// cosid._health_state(): one row.  Without the library preloaded only `preloaded` (false),
// `store_remote` and `ttl_ms` are known: the rest is NULL.
extern "C" Datum cosid_health_state(PG_FUNCTION_ARGS) {
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        elog(ERROR, "return type must be a row type");
    desc = BlessTupleDesc(desc);
    if (desc->natts != kCols) elog(ERROR, "cosid._health_state: %d columns expected", kCols);
    Datum v[kCols];
    bool nulls[kCols];
    for (int c = 0; c < kCols; ++c) {
        v[c] = (Datum)0;
        nulls[c] = true;
    }
    v[0] = BoolGetDatum(shared != nullptr);
    nulls[0] = false;
    v[1] = BoolGetDatum(store_is_remote());
    v[2] = Int64GetDatum(setting_ttl_ms);
    nulls[1] = nulls[2] = false;
    if (shared == nullptr) PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, v, nulls)));

    HealthState* h = &shared->health;
    int64 now = mono_ms();
    for (int c = 3; c < kCols; ++c) nulls[c] = false;
    // under the lock: the keeper's fields and the store facts belong together
    LWLockAcquire(shared->lock, LW_SHARED);
    int keeper_pid = shared->keeper_pid;
    bool ready = shared->keeper_ready;
    int problem = shared->keeper_problem;
    char problem_message[256];
    strlcpy(problem_message, shared->keeper_problem_message, sizeof(problem_message));
    bool refused = shared->static_file_refused;
    int leases = 0;
    for (int i = 0; i < shared->npool; ++i)
        if (shared->pool[i].state == kLeased && !shared->pool[i].is_static) ++leases;
    int64 keeper_started_at = h->keeper_started_at;
    int other_incarnations = h->other_incarnations;
    int64 facts_at = h->facts_at, max_ttl = h->max_ttl_ms, max_tol = h->max_tolerance_ms;
    bool raise = h->raise_floors, sync_names = h->sync_names;
    int standbys = h->standbys, sync_standbys = h->sync_standbys;
    char facts_error[200];
    strlcpy(facts_error, h->facts_error, sizeof(facts_error));
    LWLockRelease(shared->lock);

    v[3] = Int32GetDatum(keeper_pid);
    v[4] = BoolGetDatum(ready);
    v[5] = Int32GetDatum(problem);
    v[6] = CStringGetTextDatum(problem_message);
    v[7] = CStringGetTextDatum(shared->owner_key);
    age(v, nulls, 8, now, pg_atomic_read_u64(&h->store_ok_at));
    age(v, nulls, 9, now, pg_atomic_read_u64(&h->renewal_ok_at));
    age(v, nulls, 10, now, pg_atomic_read_u64(&h->renewal_failed_at));
    age(v, nulls, 11, now, pg_atomic_read_u64(&h->failing_since));
    v[12] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&h->failures_in_row)));
    age(v, nulls, 13, now, pg_atomic_read_u64(&h->lease_lost_at));
    uint64 skew_at = pg_atomic_read_u64(&h->skew_measured_at);
    v[14] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&h->skew_ms)));
    v[15] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&h->skew_tolerance_ms)));
    nulls[14] = nulls[15] = skew_at == 0;
    age(v, nulls, 16, now, skew_at);
    age(v, nulls, 17, now, keeper_pid != 0 ? static_cast<uint64>(keeper_started_at) : 0);  // keeper_age_ms
    v[18] = BoolGetDatum(static_slots_configured());
    v[19] = BoolGetDatum(static_state_file_configured());
    v[20] = BoolGetDatum(refused);
    v[21] = Int32GetDatum(leases);
    age(v, nulls, 22, now, static_cast<uint64>(facts_at));
    v[23] = Int64GetDatum(max_ttl);
    v[24] = Int64GetDatum(max_tol);
    v[25] = BoolGetDatum(raise);
    v[26] = Int32GetDatum(standbys);
    v[27] = Int32GetDatum(sync_standbys);
    v[28] = BoolGetDatum(sync_names);
    v[30] = Int32GetDatum(other_incarnations);
    for (int c = 23; c <= 30; ++c) nulls[c] = facts_at == 0;
    v[29] = CStringGetTextDatum(facts_error);
    nulls[29] = facts_error[0] == '\0';
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, v, nulls)));
}

#include "state.hpp"

#include "reach.hpp"

#include <algorithm>

#include <unistd.h>

#include <initializer_list>

#include "issue_word.hpp"
#include "lease_model.hpp"
#include "../settings.hpp"

namespace cosid::pg {

SharedState* shared = nullptr;

static shmem_request_hook_type prev_shmem_request_hook = nullptr;
static shmem_startup_hook_type prev_shmem_startup_hook = nullptr;

// Three entries per namespace the instance may use at once: its lease, and room for the
// next ones while an ended lease drains or a release is pending, or while leases the store's
// raises freed go on to their ceilings beside their successor (two raises within a ttl: two
// freed leases and a successor).  Without room, a successor is not asked for, the freed
// leases count for no namespace (lease_wait.cpp, request_entry_locked), and another
// namespace took the place of one in use, whose callers then failed with 53000.
static int pool_size() { return 3 * setting_max_namespaces; }
// One hazard slot per PGPROC a process that calls cosid_next() can have: regular backends,
// autovacuum, background workers and WAL senders are numbered below MaxBackends.
static int hazard_slots() { return MaxBackends; }

static Size shared_size() {
    return add_size(add_size(offsetof(SharedState, pool), mul_size(sizeof(PoolEntry), pool_size())),
                    mul_size(sizeof(HazardSlot), hazard_slots()));
}

static void request_shmem() {
    if (prev_shmem_request_hook) prev_shmem_request_hook();
    RequestAddinShmemSpace(shared_size());
    RequestNamedLWLockTranche("cosid", 1);
}

static void make_incarnation(SharedState* s) {
    uint8 b[16];
    if (!pg_strong_random(b, sizeof(b))) ereport(FATAL, (errmsg("cosid could not generate a random incarnation id")));
    b[6] = (b[6] & 0x0f) | 0x40;  // UUID version 4
    b[8] = (b[8] & 0x3f) | 0x80;  // RFC 4122 variant
    memcpy(s->incarnation_uuid.data, b, 16);
    snprintf(s->incarnation, sizeof(s->incarnation),
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5],
             b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static void startup_shmem() {
    if (prev_shmem_startup_hook) prev_shmem_startup_hook();
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found;
    shared = static_cast<SharedState*>(ShmemInitStruct("cosid", shared_size(), &found));
    if (!found) {
        // A fresh shared memory segment: server start or crash restart.  Either way a new
        // incarnation, which never takes over the old one's live leases.
        memset(shared, 0, shared_size());
        shared->lock = &(GetNamedLWLockTranche("cosid"))->lock;
        ConditionVariableInit(&shared->cv);
        make_incarnation(shared);
        if (setting_owner_key != nullptr && setting_owner_key[0] != '\0') {
            strlcpy(shared->owner_key, setting_owner_key, sizeof(shared->owner_key));
        } else {
            char host[200];
            if (gethostname(host, sizeof(host)) != 0) strlcpy(host, "localhost", sizeof(host));
            host[sizeof(host) - 1] = '\0';
            snprintf(shared->owner_key, sizeof(shared->owner_key), "%s:%d", host, PostPortNumber);
        }
        Stats* st = &shared->stats;
        for (pg_atomic_uint64* c :
             {&st->acquires, &st->renewals, &st->renewal_failures, &st->leases_lost, &st->duplicate_owner_keys,
              &st->clock_skew_events, &st->waits_at_ceiling, &st->ids_issued, &st->releases, &st->store_transactions,
              &st->store_failovers, &st->static_writes, &st->static_write_failures, &st->leases_freed})
            pg_atomic_init_u64(c, 0);
        health_init(&shared->health);
        shared->store_failovers_seen = -1;
        pg_atomic_init_u32(&shared->fork_checked_timeline, 0);
        shared->npool = pool_size();
        shared->nclaiming = hazard_slots();
        for (int i = 0; i < shared->npool; ++i) {
            pg_atomic_init_u64(&shared->pool[i].ceiling, 0);
            pg_atomic_init_u64(&shared->pool[i].word, 0);
            pg_atomic_init_u64(&shared->pool[i].generation, 0);
        }
        for (int i = 0; i < shared->nclaiming; ++i) pg_atomic_init_u32(&claiming()[i].entry, 0);
    }
    LWLockRelease(AddinShmemInitLock);
}

void install_shmem_hooks() {
    prev_shmem_request_hook = shmem_request_hook;
    shmem_request_hook = request_shmem;
    prev_shmem_startup_hook = shmem_startup_hook;
    shmem_startup_hook = startup_shmem;
}

void require_preloaded(const char* function) {
    if (shared == nullptr)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("%s() requires cosid to be loaded via shared_preload_libraries", function),
                        errdetail("The lease keeper and the slot pool live in shared memory, which only a "
                                  "preloaded library can set up."),
                        errhint("Add cosid to shared_preload_libraries in postgresql.conf and restart the server.")));
}

void require_admin(const char* what) {
    Oid admin = get_role_oid("cosid_admin", true);
    if (superuser() || (OidIsValid(admin) && has_privs_of_role(GetUserId(), admin))) return;
    ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE), errmsg("permission denied to %s", what),
                    errdetail("Only superusers and members of role cosid_admin may %s.", what),
                    errhint("GRANT cosid_admin TO the role that needs it.")));
}

void end_lease_locked(PoolEntry* e) {
    // After the OR no claim succeeds (a claim is a compare-and-swap on an open word).
    pg_atomic_fetch_or_u64(&e->word, cosid::issue_word::kClosed);
    pg_atomic_write_u64(&e->generation, 0);
    // Dekker with the backends (generator.cpp, publish): the generation is 0 before the keeper
    // looks at the hazard slots, and a backend's hazard is set before it reads the
    // generation; so either the keeper sees the hazard, or the backend sees generation 0.
    pg_memory_barrier();
    e->state = kDraining;
    e->users = 0;
    e->release_requested = false;
    e->releasing = false;
    e->raised_out = false;
    e->error[0] = '\0';
    e->error_hint[0] = '\0';
    e->error_code = 0;
    e->earliest_expiry = 0;
}

// A raise after history the store cannot see puts floors up to the reach cap ahead
// (src/core/reach.hpp); one after a failover, max_ttl + 2 x max_tolerance.
int64 raise_reach_ms() {
    return std::max<int64>(2 * static_cast<int64>(setting_ttl_ms),
                           setting_test_reach_cap_ms > 0 ? setting_test_reach_cap_ms : cosid::kReachCapMs) +
           15000;
}

void install_window_locked(PoolEntry* e, const StoreResult& r, bool is_static, int64 now_mono) {
    // The entry came from kEmpty, so no backend is in the middle of a claim on it: its word
    // may be reset.  Everything a generator copies is written before the generation that
    // makes the lease visible (write barrier; backends read it under the lock anyway).
    e->is_static = is_static;
    strlcpy(e->store_id, is_static ? "" : r.store_id, sizeof(e->store_id));
    e->store_seen_at = is_static ? 0 : r.store_now;
    e->slot = r.slot;
    e->fence = r.fence;
    e->floor = r.floor;
    // Capped: a raise after a failover is max_ttl + 2 x max_tolerance (70 s with the store's
    // defaults, below 2 x the default ttl + 15 s); a floor further ahead (cosid_adopt of ids
    // from the future) is not the store's wait, and callers get ZC004 as before.
    // A static window's floor ahead of this clock (an acknowledged fork's) is waited out the
    // same way: its window opens once the clock is within static_ahead of it.
    const int64 base = is_static ? clock_ms() : r.store_now;
    e->floor_wait_ms = base > 0 && r.floor > base ? std::min<int64>(r.floor - base, raise_reach_ms()) : 0;
    e->expires_at = r.expires_at;
    pg_atomic_write_u64(&e->ceiling, static_cast<uint64>(r.ceiling));
    pg_atomic_write_u64(&e->word, cosid::issue_word::kFresh);
    e->timestamp_bits = r.timestamp_bits;
    e->slot_bits = r.slot_bits;
    e->sequence_bits = r.sequence_bits;
    e->epoch_ms = r.epoch_ms;
    e->unit_ms = r.unit_ms;
    e->tolerance_ms = r.tolerance_ms;
    e->users = 0;
    e->observed_word = cosid::issue_word::kFresh;
    e->idle_since = now_mono;
    e->release_requested = false;
    e->releasing = false;
    e->raised_out = false;
    e->next_renew_at = now_mono + (is_static ? setting_static_ahead_ms / 2
                                             : cosid::renew_after_ms(setting_ttl_ms, r.expires_at, r.store_now, r.floor,
                                                                     r.ceiling, r.unit_ms));
    e->backoff_ms = 0;
    e->error[0] = '\0';
    e->error_hint[0] = '\0';
    e->static_error[0] = '\0';
    e->earliest_expiry = 0;
    e->tries = 0;
    e->last_error[0] = '\0';
    pg_write_barrier();
    pg_atomic_write_u64(&e->generation, ++shared->next_generation);
    e->state = kLeased;
}

void drop_request_locked(PoolEntry* e) {
    e->state = kEmpty;
    e->error[0] = '\0';
    e->error_hint[0] = '\0';
    e->error_code = 0;
    e->earliest_expiry = 0;
}

void remember_lost_locked(uint64 generation) {
    uint64 at = shared->lost_count % SharedState::kLostRing;
    if (shared->lost_count >= SharedState::kLostRing)
        shared->lost_forgotten_max = Max(shared->lost_forgotten_max, shared->lost_generations[at]);
    shared->lost_generations[at] = generation;
    shared->lost_count++;
}

bool lease_lost_locked(uint64 generation) {
    uint64 n = Min(shared->lost_count, static_cast<uint64>(SharedState::kLostRing));
    for (uint64 i = 0; i < n; ++i)
        if (shared->lost_generations[i] == generation) return true;
    return generation <= shared->lost_forgotten_max;
}

bool entry_has_hazard(int i) {
    for (int p = 0; p < shared->nclaiming; ++p)
        if (pg_atomic_read_u32(&claiming()[p].entry) == static_cast<uint32>(i + 1)) return true;
    return false;
}

void wake_keeper() {
    Latch* l = shared->keeper_latch;
    if (l != nullptr) SetLatch(l);
}

bool in_store_database() {
    // The keeper publishes its database's oid; comparing it spares a new backend a catalog
    // lookup on its first call.  Before the keeper connected, compare names.
    Oid store_db = shared->database_oid;
    return OidIsValid(store_db) ? store_db == MyDatabaseId
                                : strcmp(get_database_name(MyDatabaseId), setting_database) == 0;
}

}  // namespace cosid::pg

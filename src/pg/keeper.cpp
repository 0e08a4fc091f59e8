// The lease keeper: one background worker per instance, connected to cosid.database.
// It is the only writer of the store for this instance: it acquires slots that backends
// ask for, renews every lease every ttl/3 (with backoff on failure), releases idle pool
// slots and, at shutdown, every unbound slot with its exact last timestamp.
//
// One loop, like pg_cron's: wait on the latch, then do whatever is due.  Entries are
// copied out under the lock and the store is called without it.
#include "keeper.hpp"

#include "settings.hpp"
#include "state.hpp"
#include "store.hpp"

namespace cosid::pg {

namespace {

MemoryContext tick_context = nullptr;
// A waiting backend refreshes its request every 50 ms; one unseen for this long is abandoned.
constexpr int64 kAbandonedRequestMs = 2000;

void note_store_clock(int64 store_now, int64 local_before, int64 local_after, int64 tolerance_ms) {
    // The store's now lies between our clock before and after the call, unless clocks differ.
    int64 skew = 0;
    if (store_now < local_before) skew = local_before - store_now;
    else if (store_now > local_after) skew = store_now - local_after;
    if (skew > tolerance_ms / 2) count(shared->stats.clock_skew_events);
}

void free_entry_locked(PoolEntry* e) {
    e->state = kEmpty;
    e->bound_pid = 0;
    e->release_requested = false;
    e->error[0] = '\0';
    e->error_code = 0;
    e->earliest_expiry = 0;
    e->requester_pid = 0;
}

// Builds '{a,b,...}': the slots of `ns` this instance already holds, so that the store's
// idempotent-retry rule hands out a different slot.
void held_slots(const char* ns, char* buf, size_t len) {
    size_t used = strlcpy(buf, "{", len);
    bool first = true;
    LWLockAcquire(shared->lock, LW_SHARED);
    for (int i = 0; i < shared->npool; ++i) {
        PoolEntry* e = &shared->pool[i];
        if (e->state != kLeased || strcmp(e->ns, ns) != 0) continue;
        if (used + 16 >= len) break;
        used += snprintf(buf + used, len - used, first ? "%d" : ",%d", e->slot);
        first = false;
    }
    LWLockRelease(shared->lock);
    strlcat(buf, "}", len);
}

void serve_request(int i, int64 now) {
    PoolEntry* e = &shared->pool[i];
    char ns[NAMEDATALEN];
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (e->state != kWanted || e->retry_at > now) {
        LWLockRelease(shared->lock);
        return;
    }
    e->state = kAcquiring;
    strlcpy(ns, e->ns, sizeof(ns));
    LWLockRelease(shared->lock);

    char exclude[4096];
    held_slots(ns, exclude, sizeof(exclude));
    StoreResult r;
    StoreError err;
    int64 before = clock_ms();
    bool ok = store_acquire(ns, shared->owner_key, shared->incarnation, setting_ttl_ms, setting_preferred_slot,
                            exclude, &r, &err);
    if (ok && !r.row) {  // cosid.acquire always answers with a row; anything else is an error
        ok = false;
        snprintf(err.message, sizeof(err.message), "the lease store gave no answer for namespace \"%s\"", ns);
        err.sqlerrcode = ERRCODE_INTERNAL_ERROR;
    }
    if (ok && r.found && store_is_remote() && !store_sync_local_namespace(ns, r, &err)) {
        // Nothing was issued in the new window: hand it back at once, and tell the caller.
        StoreResult rel;
        StoreError rel_err;
        if (!store_release(ns, r.slot, shared->incarnation, r.fence, r.floor, &rel, &rel_err))
            ereport(LOG, (errmsg("cosid: release of slot %d in \"%s\" failed: %s", r.slot, ns, rel_err.message)));
        ok = false;
    }
    int64 after = clock_ms();

    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (!(ok && r.found) && e->requester_pid == 0) {
        // The requester stopped waiting while the store answered: nobody wants a retry.
        free_entry_locked(e);
    } else if (!ok) {
        // The request fails: the waiting backend reports the store's error.
        snprintf(e->error, sizeof(e->error), "%s", err.message);
        e->error_code = err.sqlerrcode;
        e->state = kWanted;
        e->retry_at = after + 1000;
    } else if (!r.found) {
        e->earliest_expiry = r.earliest_expiry;
        e->state = kWanted;
        e->retry_at = after + 100;  // exhausted: try again soon, the waiter has its own timeout
    } else {
        e->state = kLeased;
        e->slot = r.slot;
        e->fence = r.fence;
        e->floor = r.floor;
        e->expires_at = r.expires_at;
        pg_atomic_write_u64(&e->ceiling, static_cast<uint64>(r.ceiling));
        pg_atomic_write_u32(&e->lost, 0);
        e->timestamp_bits = r.timestamp_bits;
        e->slot_bits = r.slot_bits;
        e->sequence_bits = r.sequence_bits;
        e->epoch_ms = r.epoch_ms;
        e->unit_ms = r.unit_ms;
        e->tolerance_ms = r.tolerance_ms;
        e->bound_pid = 0;
        e->last_issued = -1;
        e->idle_since = wall_ms();
        e->release_requested = false;
        e->next_renew_at = after + setting_ttl_ms / 3;
        e->backoff_ms = 0;
        e->error[0] = '\0';
        e->earliest_expiry = 0;
    }
    LWLockRelease(shared->lock);
    if (ok) {
        if (r.duplicate_key) count(shared->stats.duplicate_owner_keys);
        if (r.found) {
            count(shared->stats.acquires);
            note_store_clock(r.store_now, before, after, r.tolerance_ms);
        }
        if (r.duplicate_key)
            ereport(LOG, (errmsg("cosid: another live incarnation holds leases with owner key \"%s\" in namespace \"%s\"",
                                 shared->owner_key, ns),
                          errdetail("Its leases are left alone; this incarnation uses other slots."),
                          errhint("Give each instance its own cosid.owner_key.")));
    } else {
        ereport(LOG, (errmsg("cosid: acquire in namespace \"%s\" failed: %s", ns, err.message)));
    }
    ConditionVariableBroadcast(&shared->cv);
}

// Releases entry i to the store.  `force`: a backend may still be bound, so the exact last
// timestamp is unknown and the ceiling is handed on instead.
void release_entry(int i, bool force) {
    PoolEntry* e = &shared->pool[i];
    char ns[NAMEDATALEN];
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    // An idle slot that a backend bound again since the keeper looked is in use: keep it.
    if (e->state != kLeased || (!force && e->bound_pid != 0)) {
        LWLockRelease(shared->lock);
        return;
    }
    pg_atomic_write_u32(&e->lost, 1);  // no generator may bind or issue on it any more
    strlcpy(ns, e->ns, sizeof(ns));
    int32 slot = e->slot;
    int64 fence = e->fence;
    int64 ceiling = static_cast<int64>(pg_atomic_read_u64(&e->ceiling));
    int64 last = (e->bound_pid != 0 || force) ? ceiling : (e->last_issued >= 0 ? e->last_issued : e->floor);
    bool still_bound = e->bound_pid != 0;
    LWLockRelease(shared->lock);

    StoreResult r;
    StoreError err;
    bool ok = store_release(ns, slot, shared->incarnation, fence, last, &r, &err);
    if (!ok) ereport(LOG, (errmsg("cosid: release of slot %d in \"%s\" failed: %s", slot, ns, err.message)));
    else if (r.found) count(shared->stats.releases);

    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    // A failed release leaves the lease to expire; it is lost to us either way.  A bound
    // backend keeps the entry until it notices and unbinds.
    if (!still_bound && e->bound_pid == 0) free_entry_locked(e);
    else e->release_requested = false;
    LWLockRelease(shared->lock);
    ConditionVariableBroadcast(&shared->cv);
}

// The current run of failed renewals, for the log.
struct {
    uint64 failures = 0;
    int64 since = 0;
} outage;

void renew_entry(int i, int64 now) {
    PoolEntry* e = &shared->pool[i];
    char ns[NAMEDATALEN];
    LWLockAcquire(shared->lock, LW_SHARED);
    strlcpy(ns, e->ns, sizeof(ns));
    int32 slot = e->slot;
    int64 fence = e->fence;
    int64 tol = e->tolerance_ms;
    LWLockRelease(shared->lock);

    StoreResult r;
    StoreError err;
    int64 before = clock_ms();
    bool ok = store_renew(ns, slot, shared->incarnation, fence, setting_ttl_ms, &r, &err);
    int64 after = clock_ms();

    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (ok && r.found) {
        e->expires_at = r.expires_at;
        if (static_cast<uint64>(r.ceiling) > pg_atomic_read_u64(&e->ceiling))
            pg_atomic_write_u64(&e->ceiling, static_cast<uint64>(r.ceiling));
        e->next_renew_at = after + setting_ttl_ms / 3;
        e->backoff_ms = 0;
    } else if (ok) {
        // Fence or incarnation changed: someone took the slot or it was revoked.
        pg_atomic_write_u32(&e->lost, 1);
        if (e->bound_pid == 0) free_entry_locked(e);
    } else {
        e->backoff_ms = e->backoff_ms == 0 ? 100 : Min(e->backoff_ms * 2, store_bound_ms());
        e->next_renew_at = after + e->backoff_ms;
    }
    LWLockRelease(shared->lock);

    if (ok && r.found) {
        count(shared->stats.renewals);
        note_store_clock(r.store_now, before, after, tol);
        if (outage.failures > 0) {
            ereport(LOG, (errmsg("cosid: renewals succeed again after " UINT64_FORMAT " failed ones in " INT64_FORMAT
                                 " ms",
                                 outage.failures, wall_ms() - outage.since)));
            outage.failures = 0;
        }
    } else if (ok) {
        count(shared->stats.leases_lost);
        ereport(LOG, (errmsg("cosid: lease on slot %d of namespace \"%s\" was lost", slot, ns),
                      errdetail("Its fence or incarnation changed in the store; generators on it stop.")));
    } else {
        count(shared->stats.renewal_failures);
        // One entry per outage in the log, not one per slot and retry: the rest at DEBUG1.
        if (outage.failures++ == 0) {
            outage.since = wall_ms();
            ereport(LOG, (errmsg("cosid: renewal of slot %d in \"%s\" failed: %s", slot, ns, err.message),
                          errdetail("Renewals are retried with backoff; further failures are logged at DEBUG1 "
                                    "until one succeeds.")));
        } else {
            ereport(DEBUG1, (errmsg("cosid: renewal of slot %d in \"%s\" failed: %s", slot, ns, err.message)));
        }
    }
    ConditionVariableBroadcast(&shared->cv);
}

// One pass over the pool; returns how long to sleep.
long keeper_pass() {
    int64 now = clock_ms();  // the keeper's clock: schedules renewals and retries
    int64 wall = wall_ms();  // shared with backends: idle times and request liveness
    long sleep_ms = 1000;
    for (int i = 0; i < shared->npool; ++i) {
        PoolEntry* e = &shared->pool[i];
        LWLockAcquire(shared->lock, LW_SHARED);
        uint32 state = e->state;
        bool lost = pg_atomic_read_u32(&e->lost) != 0;
        bool bound = e->bound_pid != 0;
        bool release = e->release_requested;
        int64 idle_since = e->idle_since;
        int64 next_renew = e->next_renew_at;
        int64 retry_at = e->retry_at;
        int64 request_seen_at = e->request_seen_at;
        LWLockRelease(shared->lock);

        if (state == kWanted && wall - request_seen_at > kAbandonedRequestMs) {
            // Its backend stopped waiting (cancelled, terminated): do not keep acquiring.
            LWLockAcquire(shared->lock, LW_EXCLUSIVE);
            if (e->state == kWanted && e->request_seen_at == request_seen_at) free_entry_locked(e);
            LWLockRelease(shared->lock);
        } else if (state == kWanted) {
            if (retry_at <= now) serve_request(i, now);
            else sleep_ms = Min(sleep_ms, static_cast<long>(retry_at - now));
        } else if (state == kLeased && lost) {
            if (!bound) {
                LWLockAcquire(shared->lock, LW_EXCLUSIVE);
                if (e->state == kLeased && e->bound_pid == 0) free_entry_locked(e);
                LWLockRelease(shared->lock);
            }
        } else if (state == kLeased && (release || (!bound && wall - idle_since >= setting_pool_idle_ms))) {
            release_entry(i, release && bound);
        } else if (state == kLeased) {
            if (next_renew <= now) {
                renew_entry(i, now);
                next_renew = now + 100;
            }
            sleep_ms = Min(sleep_ms, static_cast<long>(Max(next_renew - now, 1)));
            if (!bound) sleep_ms = Min(sleep_ms, static_cast<long>(Max(idle_since + setting_pool_idle_ms - wall, 1)));
        }
    }
    return Max(sleep_ms, 1L);
}

// At shutdown: give backends a moment to close their generators, then release every
// slot that none is bound to, with its exact last timestamp.  Slots still bound are left to
// expire (a server shutdown ends their backends too), or, when only the keeper was
// stopped, to its successor, which finds them in shared memory and renews them.  The wait
// is short so that such a successor starts quickly.
void release_all_at_shutdown() {
    for (int wait = 0; wait < 10; ++wait) {
        bool any_bound = false;
        LWLockAcquire(shared->lock, LW_SHARED);
        for (int i = 0; i < shared->npool; ++i)
            if (shared->pool[i].state == kLeased && shared->pool[i].bound_pid != 0 &&
                pg_atomic_read_u32(&shared->pool[i].lost) == 0)
                any_bound = true;
        LWLockRelease(shared->lock);
        if (!any_bound) break;
        pg_usleep(50000L);
    }
    for (int i = 0; i < shared->npool; ++i) {
        LWLockAcquire(shared->lock, LW_SHARED);
        bool releasable = shared->pool[i].state == kLeased && shared->pool[i].bound_pid == 0 &&
                          pg_atomic_read_u32(&shared->pool[i].lost) == 0;
        LWLockRelease(shared->lock);
        if (releasable) release_entry(i, false);
    }
}

// A store that blocks (rows locked by someone, a hung server) must not stall the keeper:
// every store call is bounded by ttl/6, then fails and backs off.  Re-applied when a reload
// changes cosid.ttl; a remote store connection is reopened to take the new bound.
void apply_store_timeouts() {
    static int applied_ttl_ms = -1;
    if (setting_ttl_ms == applied_ttl_ms) return;
    char timeout[32];
    snprintf(timeout, sizeof(timeout), INT64_FORMAT, store_bound_ms());
    SetConfigOption("lock_timeout", timeout, PGC_SUSET, PGC_S_OVERRIDE);
    SetConfigOption("statement_timeout", timeout, PGC_SUSET, PGC_S_OVERRIDE);
    if (applied_ttl_ms >= 0) {
        store_disconnect();
        ereport(LOG, (errmsg("cosid keeper: cosid.ttl is now %d ms; store calls are bounded by %s ms",
                             setting_ttl_ms, timeout)));
    }
    applied_ttl_ms = setting_ttl_ms;
}

// A keeper that cannot connect (cosid.database missing, no connection slot) dies FATAL and
// the postmaster starts it again a second later.  Starts that died connecting are counted,
// and the next start waits 1, 2, 4, ... up to 30 s more, so a wrong setting costs one log
// entry per attempt instead of one per second, and a database created later is still found.
void back_off_after_failed_starts() {
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    shared->keeper_failed_starts = shared->keeper_connecting ? shared->keeper_failed_starts + 1 : 0;
    shared->keeper_connecting = true;
    int failed = shared->keeper_failed_starts;
    LWLockRelease(shared->lock);
    if (failed == 0) return;
    long wait_ms = Min(1000L << Min(failed - 1, 5), 30000L);
    ereport(LOG, (errmsg("cosid keeper could not connect to database \"%s\" (%d failed starts in a row); "
                         "next attempt in %ld ms",
                         setting_database, failed, wait_ms),
                  errhint("Create database \"%s\" and run CREATE EXTENSION cosid there, or set cosid.database to "
                          "the database that holds the lease store and restart the server.",
                          setting_database)));
    int64 until = wall_ms() + wait_ms;
    while (!ShutdownRequestPending && wall_ms() < until) {
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, until - wall_ms(),
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
    }
    if (ShutdownRequestPending) {
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        shared->keeper_connecting = false;  // stopped while waiting: not a failed start
        LWLockRelease(shared->lock);
        proc_exit(1);
    }
}

}  // namespace

extern "C" PGDLLEXPORT void cosid_keeper_main(Datum arg) {
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
    BackgroundWorkerUnblockSignals();
    back_off_after_failed_starts();
    BackgroundWorkerInitializeConnection(setting_database, nullptr, 0);
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    shared->keeper_connecting = false;
    shared->keeper_failed_starts = 0;
    LWLockRelease(shared->lock);
    pgstat_report_appname("cosid keeper");

    apply_store_timeouts();

    tick_context = AllocSetContextCreate(TopMemoryContext, "cosid keeper", ALLOCSET_DEFAULT_SIZES);

    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    shared->keeper_pid = MyProcPid;
    shared->keeper_latch = &MyProc->procLatch;
    shared->database_oid = MyDatabaseId;
    LWLockRelease(shared->lock);
    ereport(LOG, (errmsg("cosid keeper started in database \"%s\" as owner \"%s\", incarnation %s, store %s",
                         setting_database, shared->owner_key, shared->incarnation,
                         store_is_remote() ? "remote (cosid.store_dsn)" : "local")));

    while (!ShutdownRequestPending) {
        long sleep_ms = 1000;
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
            apply_store_timeouts();
        }
        MemoryContext old = MemoryContextSwitchTo(tick_context);
        if (!shared->keeper_ready) {
            StoreError err;
            if (store_extension_ready(&err)) {
                shared->keeper_ready = true;
                ConditionVariableBroadcast(&shared->cv);
                sleep_ms = 0;
            }
        } else {
            sleep_ms = keeper_pass();
        }
        MemoryContextSwitchTo(old);
        MemoryContextReset(tick_context);
        if (sleep_ms > 0) {
            (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, sleep_ms, PG_WAIT_EXTENSION);
            ResetLatch(MyLatch);
        }
        CHECK_FOR_INTERRUPTS();
    }

    if (shared->keeper_ready) {
        MemoryContextSwitchTo(tick_context);
        release_all_at_shutdown();
    }
    store_disconnect();
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    shared->keeper_pid = 0;
    shared->keeper_latch = nullptr;
    LWLockRelease(shared->lock);
    // Exit code 1: the postmaster restarts a keeper that was stopped outside a shutdown.
    proc_exit(1);
}

void register_keeper() {
    BackgroundWorker worker;
    memset(&worker, 0, sizeof(worker));
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker.bgw_restart_time = 1;
    strlcpy(worker.bgw_library_name, "cosid", BGW_MAXLEN);
    strlcpy(worker.bgw_function_name, "cosid_keeper_main", BGW_MAXLEN);
    strlcpy(worker.bgw_name, "cosid keeper", BGW_MAXLEN);
    strlcpy(worker.bgw_type, "cosid keeper", BGW_MAXLEN);
    RegisterBackgroundWorker(&worker);
}

}  // namespace cosid::pg

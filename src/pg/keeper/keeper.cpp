// The lease keeper: one background worker per instance, connected to cosid.database.
// It is the only writer of the store for this instance: it acquires slots that backends
// ask for (one lease per namespace, shared by every backend), renews every lease every ttl/3
// (with backoff on failure), releases idle leases and, at shutdown, every lease, each with the
// exact last timestamp its issue word holds.
//
// One loop, like pg_cron's: wait on the latch, then do whatever is due, leases first and
// requests after.  Entries are copied out under the lock and the store is called without
// it.  Work is scheduled on CLOCK_MONOTONIC (mono_ms), so a wall-clock step never postpones
// a renewal; the wall and store clocks appear only in the lease arithmetic.
//
// What the keeper never does: forget a lease the store may still hold for this instance.
// A release the store did not confirm is retried with the same timestamp; a lease of this
// incarnation the pool does not know (an acquire whose answer was lost, a keeper that died
// mid-acquire) is released at its ceiling, which bounds anything issued in it.
//
// This file holds the worker and its pass over the pool; keeper_request.cpp serves the
// backends' requests, keeper_lease.cpp renews and releases (keeper_parts.hpp).
#include "keeper.hpp"
#include "keeper_parts.hpp"
#include "fork.hpp"
#include "../store/store_history.hpp"

#include "../errors.hpp"
#include "health.hpp"
#include "issue_word.hpp"
#include "lease_model.hpp"
#include "../settings.hpp"
#include "slot_range.hpp"
#include "../shmem/state.hpp"
#include "static_keeper.hpp"
#include "../store/store.hpp"
#include "store_errors.hpp"
#include "../store/store_io.hpp"

namespace cosid::pg {

namespace keeper {

MemoryContext tick_context = nullptr;

// A lease on which nothing was claimed yet is kept at least 2 s whatever the idle timeout,
// so that the backends that asked for it get to use it.
int64 idle_limit_ms(uint64 word) {
    return word == issue_word::kFresh ? Max(setting_pool_idle_ms, 2000) : setting_pool_idle_ms;
}

// Renewals retried 100, 200, 400, 800 ms apart, then every second (or the store call's bound,
// when shorter): once the store answers again, the leases are renewed within about a second,
// not after a backoff grown through a switchover.
int64 next_backoff_ms(int64 backoff_ms) {
    return backoff_ms == 0 ? 100 : Min(backoff_ms * 2, Min(static_cast<int64>(1000), store_bound_ms()));
}

bool transient(int sqlerrcode) { return store_error_is_transient(unpack_sql_state(sqlerrcode)); }

}  // namespace keeper

namespace {

using namespace keeper;

// One pass over the pool; returns how long to sleep.  Leases first (renewals, releases,
// lost entries), then requests, for at most one store bound: hundreds of waiting backends
// never hold up a renewal.  `serve_requests` is false while shutting down.
// A store that was promoted or recovered to a point in time writes on a new timeline and
// counts it (cosid._follow_timeline); the keeper looks every ttl/3 and reports it.  The
// leases themselves need nothing here: the store freed them, so their renewals find them lost.
int64 next_state_check_at = 0;

void check_store_failovers() {
    if (mono_ms() < next_state_check_at) return;
    next_state_check_at = mono_ms() + Max(setting_ttl_ms / 3, 100);
    fork_record_issuer();
    // One store transaction: cosid_health()'s facts (the store's limits, replication, the
    // clocks) and the failover count; a store before 1.5 answers the count alone.
    int64 failovers = 0;
    int32 timeline = 0;
    bool raises = true;
    if (!health_read_store_facts(&failovers, &timeline, &raises)) {
        StoreResult r;
        StoreError err;
        if (!store_read_state(&r, &err) || !r.row) return;
        failovers = r.fence;
        timeline = r.slot;
        raises = r.ceiling != 0;
    }
    int64 seen = shared->store_failovers_seen;
    shared->store_failovers_seen = failovers;  // only the keeper writes it
    if (seen >= 0 && failovers < seen)
        ereport(LOG, (errmsg("cosid: the lease store's failover count went back from " INT64_FORMAT " to " INT64_FORMAT,
                             seen, failovers),
                      errdetail("This keeper now talks to a store with an older history: an old primary that came "
                                "back, or a restore. Its windows may be stale."),
                      errhint("Fence or rewind the old primary. A restored dump, a point-in-time recovery and a "
                              "promotion raise the floors by themselves; a copy of the data directory started as "
                              "it is does not: run SELECT cosid_store_follow_timeline(restored => true) there.")));
    if (seen < 0 || failovers <= seen) return;
    count(shared->stats.store_failovers, failovers - seen);
    if (raises)
        ereport(LOG, (errmsg("cosid: the lease store now writes on timeline %d: it was promoted or recovered to a "
                             "point in time",
                             timeline),
                      errdetail("Leases held before are lost to their holders, whose backends move to new leases "
                                "without an error; new windows start above the floors the store raised.")));
    else
        ereport(LOG, (errmsg("cosid: the lease store now writes on timeline %d: it was promoted or recovered to a "
                             "point in time",
                             timeline),
                      errdetail("The store raises no floors (cosid_store_settings(raise_floors_on_new_timeline => "
                                "false)): leases held before stay with their holders, which is safe only where every "
                                "lease change reached the promoted standby (synchronous replication).")));
}

// A store the keeper cannot reach before its first pass (a pooler refusing it, a wrong
// cosid.store_dsn, the store down) is logged once, with the store's own words, and again
// when it answers; the checks in between (every second) are at DEBUG1.  The extension
// missing in this instance's own database is the normal state before CREATE EXTENSION:
// not logged.
struct {
    uint64 failures = 0;
    int64 since = 0;
} unreachable;

void log_store_reachability(bool ready, const StoreError& err) {
    if (ready) {
        if (unreachable.failures > 0)
            ereport(LOG, (errmsg("cosid keeper: the lease store answers again after " UINT64_FORMAT
                                 " failed attempt%s in " INT64_FORMAT " ms",
                                 unreachable.failures, unreachable.failures == 1 ? "" : "s",
                                 mono_ms() - unreachable.since)));
        unreachable.failures = 0;
        return;
    }
    if (strstr(err.message, "cosid.database") != nullptr) return;
    if (unreachable.failures++ == 0) {
        unreachable.since = mono_ms();
        ereport(LOG, (errmsg("cosid keeper: cannot reach the lease store%s: %s",
                             store_is_remote() ? " (cosid.store_dsn)" : "", err.message),
                      errdetail("Tried again every second; further failures are logged at DEBUG1 until it answers. "
                                "Callers of cosid_next() are told this answer."),
                      err.hint[0] != '\0' ? errhint("%s", err.hint)  // a refusal of the login: what to fix
                      : store_is_remote() ? errhint("A pooler in front of the store must run in session or "
                                                    "transaction mode; see docs/pooler.md.")
                                          : 0));
    } else {
        ereport(DEBUG1, (errmsg("cosid keeper: cannot reach the lease store: %s", err.message)));
    }
}

int request_cursor = 0;  // requests are served round-robin across passes
int64 next_ready_check_at = 0;

// A server issuing from its own store that is then added to a Citus cluster as a worker
// (citus_add_node) would go on renewing windows the coordinator's store grants again: the
// guard runs every second while the store is local (one catalog lookup without Citus), and
// on a worker every such lease is released in order at once (its word closed first: no id
// after that).  New requests are refused by the same guard in serve_request.
int64 next_citus_guard_at = 0;
void guard_local_leases() {
    if (store_is_remote() || mono_ms() < next_citus_guard_at) return;
    next_citus_guard_at = mono_ms() + 1000;
    StoreError err;
    if (store_local_guard(&err) || err.sqlerrcode != COSID_KEEPER_UNAVAILABLE) return;
    int released = 0;
    for (int i = 0; i < shared->npool; ++i) {
        LWLockAcquire(shared->lock, LW_SHARED);
        bool leased = shared->pool[i].state == kLeased && !shared->pool[i].is_static;
        LWLockRelease(shared->lock);
        if (leased) {
            release_entry(i);
            released++;
        }
    }
    if (released > 0)
        ereport(LOG, (errmsg("cosid: released %d lease%s of this server's own store: %s", released,
                             released == 1 ? "" : "s", err.message),
                      errhint("%s", err.hint)));
}

// One pass's work list (keeper_pass): the renewals and releases due, the renewals due soon
// that join them, the sleep until the next pass, and whether a request is due.
struct PassPlan {
    DueLease* due;
    int ndue;
    int* soon;
    int nsoon;
    long sleep_ms;
    bool requests_due;
    int64 early_ms;  // renewals due within this join a pass that goes to the store anyway
};

// What keeper_pass reads of entry i under the lock, in one look.
struct EntryLook {
    uint32 state;
    int64 now;
    bool claimed;  // since the last pass
    bool release;
    bool releasing;
    int64 idle_since;
    int64 next_renew;
    int64 retry_at;
    int64 request_seen_at;
};

// keeper_pass's look at entry i under the lock (split out of it to keep it short: the same
// statements in the same order).
EntryLook look_at_entry(PoolEntry* e) {
    EntryLook l;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    l.state = e->state;
    l.now = mono_ms();
    l.claimed = false;
    if (l.state == kLeased) {
        // Idle is measured on the word: a lease on which nothing was claimed for
        // cosid.pool_idle_timeout (and not since the last pass) goes back to the store,
        // whoever is attached to it.
        uint64 w = pg_atomic_read_u64(&e->word);
        if (w != e->observed_word) {
            e->observed_word = w;
            e->idle_since = l.now;
            l.claimed = true;
        }
    }
    l.release = e->release_requested;
    l.releasing = e->releasing;
    // Not idle: a window that holds no tick yet below a floor the store raised (within
    // what a raise sets, as generator.cpp's wait: nothing can be claimed on it, its
    // backends wait for it to open; handed back, the next grant has the same floor and the
    // callers' wait for that would restart shorter), nor the successor of a lease the
    // raise freed while that one serves.  Written to the entry, so that the idle time
    // counts from when that ended, not from the grant (end_lease resets it then).  The
    // pool is looked through for a freed lease only when the entry would go idle now:
    // every pass for every lease made the keeper's passes quadratic in the pool's size.
    if (l.state == kLeased && !e->is_static && !e->raised_out &&
        ((cosid::holds_no_tick(entry_window(*e), e->unit_ms) && e->floor - clock_ms() <= raise_reach_ms()) ||
         (!l.claimed && l.now - e->idle_since >= idle_limit_ms(e->observed_word) && freed_lease_serves_locked(e))))
        e->idle_since = l.now;
    l.idle_since = e->idle_since;
    l.next_renew = e->next_renew_at;
    l.retry_at = e->retry_at;
    l.request_seen_at = e->request_seen_at;
    LWLockRelease(shared->lock);
    return l;
}

// keeper_pass's decision for entry i after its look: drop an abandoned request, note a due
// one, free a drained entry, or put a release or renewal on the plan (split out of it to keep
// it short: the same statements in the same order).
void plan_entry(int i, const EntryLook& l, PassPlan* p) {
    PoolEntry* e = &shared->pool[i];
    int64 now = l.now;
    int64 next_renew = l.next_renew;
    if (l.state == kWanted && now - l.request_seen_at > kAbandonedRequestMs && now > e->keeper_wants_until) {
        // Its backends stopped waiting (cancelled, terminated): do not keep acquiring.
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        if (e->state == kWanted && e->request_seen_at == l.request_seen_at) drop_request_locked(e);
        LWLockRelease(shared->lock);
    } else if (l.state == kWanted) {
        if (l.retry_at <= now)
            p->requests_due = true;
        else
            p->sleep_ms = Min(p->sleep_ms, static_cast<long>(l.retry_at - now));
    } else if (l.state == kDraining) {
        // Free once no backend is in the middle of a claim on it (state.hpp); a backend
        // stopped there (SIGSTOP) keeps it draining, and new leases use other entries.
        if (!entry_has_hazard(i)) {
            LWLockAcquire(shared->lock, LW_EXCLUSIVE);
            if (e->state == kDraining) e->state = kEmpty;
            LWLockRelease(shared->lock);
        } else {
            p->sleep_ms = Min(p->sleep_ms, 100L);  // a backend stopped mid-claim: not urgent
        }
    } else if (l.state == kLeased && l.releasing) {
        if (next_renew <= now) {
            if (release_prepare(i, &p->due[p->ndue])) p->ndue++;
            next_renew = now + 100;
        }
        p->sleep_ms = Min(p->sleep_ms, static_cast<long>(Max(next_renew - now, 1)));
    } else if (l.state == kLeased &&
               (l.release || (!l.claimed && now - l.idle_since >= idle_limit_ms(e->observed_word)))) {
        if (release_prepare(i, &p->due[p->ndue])) p->ndue++;
    } else if (l.state == kLeased) {
        if (next_renew <= now) {
            if (renew_prepare(i, &p->due[p->ndue])) p->ndue++;
            next_renew = now + 100;
        } else if (next_renew <= now + p->early_ms) {
            p->soon[p->nsoon++] = i;
        }
        p->sleep_ms = Min(p->sleep_ms, static_cast<long>(Max(next_renew - now, 1)));
        p->sleep_ms = Min(p->sleep_ms, static_cast<long>(Max(l.idle_since + setting_pool_idle_ms - now, 10)));
    }
}

// The end of keeper_pass: due requests, round-robin, within one store bound from pass_start.
// Returns the next sleep: 0, a new pass computes it.
long serve_due_requests(int64 pass_start) {
    // Several due at once (a switchover's successors, a start): one store transaction first.
    bool served = serve_due_batch(mono_ms());
    for (int n = 0; n < shared->npool; ++n) {
        // Leases first again, then the rest, from where this pass stopped: a namespace whose
        // acquires keep failing cannot starve requests at later entries.  One due request is
        // served in every pass, whatever the leases took: while the store times out, one
        // renewal or release can take the whole bound, and a new namespace would then never
        // be asked for (its callers got "did not answer" instead of the store's answer).
        if (served && mono_ms() - pass_start > store_bound_ms()) return 0;
        int i = request_cursor;
        request_cursor = (request_cursor + 1) % shared->npool;
        LWLockAcquire(shared->lock, LW_SHARED);
        bool due = shared->pool[i].state == kWanted && shared->pool[i].retry_at <= mono_ms();
        LWLockRelease(shared->lock);
        if (due) {
            serve_request(i, mono_ms());
            served = true;
        }
    }
    return 0;  // a new pass computes the next wake-up
}

long keeper_pass(bool serve_requests) {
    int64 pass_start = mono_ms();
    PassPlan p;
    p.sleep_ms = 1000;
    p.requests_due = false;
    p.due = static_cast<DueLease*>(palloc(sizeof(DueLease) * Max(shared->npool, 1)));
    p.ndue = 0;
    p.soon = static_cast<int*>(palloc(sizeof(int) * Max(shared->npool, 1)));
    p.nsoon = 0;
    // Renewals due within ttl/6 join a pass that goes to the store anyway: leases acquired at
    // different times come into step, and then cost one store transaction per pass together.
    // Renewing early is harmless: a renewal never shortens a window.
    p.early_ms = setting_ttl_ms / 6;
    if (serve_requests) serve_raise_request();
    guard_local_leases();
    for (int i = 0; i < shared->npool; ++i) {
        EntryLook l = look_at_entry(&shared->pool[i]);
        plan_entry(i, l, &p);
    }
    if (p.ndue > 0) {
        // Static slots have no store to share a transaction with: renewed when due only.
        for (int k = 0; k < p.nsoon; ++k)
            if (!shared->pool[p.soon[k]].is_static && renew_prepare(p.soon[k], &p.due[p.ndue])) p.ndue++;
    }
    run_due_leases(p.due, p.ndue);
    // Then the store's failovers, orphans and requests, for at most one store bound in all.
    check_store_failovers();
    sweep_orphans(pass_start + store_bound_ms());
    if (orphan_sweep_due()) p.sleep_ms = 0;  // not done yet
    if (!serve_requests || !p.requests_due) return Max(p.sleep_ms, 0L);
    return serve_due_requests(pass_start);
}

// Start of a keeper: an entry left "acquiring" by a keeper that exited in the middle (its
// answer never arrived) is asked again, if anyone still waits; what that acquire may have
// taken in the store is an orphan, released by the first sweep.
void recover_interrupted_requests() {
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    for (int i = 0; i < shared->npool; ++i) {
        PoolEntry* e = &shared->pool[i];
        if (e->state != kAcquiring) continue;
        e->state = kWanted;
        e->retry_at = 0;
        // waiters refresh request_seen_at every 50 ms: if none does, it is dropped in 2 s
    }
    LWLockRelease(shared->lock);
    request_orphan_sweep();
}

// At shutdown every lease is released in order: its word is closed (after that no backend
// issues on it) and the exact last timestamp handed to the store.  Nothing waits for
// backends: the word holds what they issued.  Pending releases are tried once more.
void release_all_at_shutdown() {
    store_bound_reset();  // (the base bound for each: no slow kind's longer try at shutdown)
    for (int i = 0; i < shared->npool; ++i) {
        LWLockAcquire(shared->lock, LW_SHARED);
        bool leased = shared->pool[i].state == kLeased;
        LWLockRelease(shared->lock);
        // A store that fails now would hold shutdown for ttl/6 per lease: stop at the first
        // failure.  The rest stay open in shared memory (a keeper started again renews them)
        // or, at a server shutdown, expire at their ceilings.
        if (leased && !release_entry(i)) break;
    }
}

// A store that blocks (rows locked by someone, a hung server) must not stall the keeper:
// every store call is bounded by ttl/6, then fails and backs off (lock_timeout here; the
// statement itself by a timer that run_spi arms, or by the remote server's settings; the
// statement's bound is ttl/3 for a kind of call that ran out of it: store_bound.hpp).  Re-applied when a reload
// changes cosid.ttl; a remote store connection is reopened to take the new bound.
void apply_store_timeouts() {
    static int applied_ttl_ms = -1;
    if (setting_ttl_ms == applied_ttl_ms) return;
    char timeout[32];
    snprintf(timeout, sizeof(timeout), INT64_FORMAT, store_bound_ms());
    SetConfigOption("lock_timeout", timeout, PGC_SUSET, PGC_S_OVERRIDE);
    store_bound_reset();
    if (applied_ttl_ms >= 0) {
        store_disconnect();
        ereport(LOG, (errmsg("cosid keeper: cosid.ttl is now %d ms; store calls are bounded by %s ms", setting_ttl_ms,
                             timeout)));
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
    int64 until = mono_ms() + wait_ms;
    while (!ShutdownRequestPending && mono_ms() < until) {
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, until - mono_ms(), PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        // A backend of cosid.database asked (generator.cpp): the database exists now.
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        bool now = shared->keeper_retry_now;
        shared->keeper_retry_now = false;
        LWLockRelease(shared->lock);
        if (now) break;
    }
    if (ShutdownRequestPending) {
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        shared->keeper_connecting = false;  // stopped while waiting: not a failed start
        LWLockRelease(shared->lock);
        proc_exit(1);
    }
}

void forget_keeper(int code, Datum arg) {
    // Exit callbacks run before PostgreSQL releases LWLocks: one held here means an error in
    // the middle of a change; leave the fields (a stale latch only costs a spurious wakeup).
    if (shared == nullptr) return;
    // The next keeper publishes it again once it looked at the data directory (fork.cpp).
    pg_atomic_write_u32(&shared->fork_checked_timeline, 0);
    if (LWLockHeldByMe(shared->lock)) return;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (shared->keeper_latch == &MyProc->procLatch) shared->keeper_latch = nullptr;
    if (shared->keeper_pid == MyProcPid) shared->keeper_pid = 0;
    LWLockRelease(shared->lock);
}

// Every store call the keeper makes (store_io::run) is counted here, by the keeper: the store's
// client reports what happened and records nothing itself.
void note_store_call(bool answered) {
    count(shared->stats.store_transactions);
    if (answered) health_store_answered();
}

// The keeper's start, once it is the keeper: signals, the connection to cosid.database, and
// its name in shared memory (split out of cosid_keeper_main to keep it short: the same
// statements in the same order).
void start_keeper() {
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
    pqsignal(SIGINT, COSID_SIG_IGN);  // taken only during store calls (store_io.cpp, begin_store_call)
    BackgroundWorkerUnblockSignals();
    // Backends can wake this keeper from now on, also while it backs off; whatever way it
    // exits (FATAL too), it stops being the keeper.
    on_shmem_exit(forget_keeper, 0);
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    shared->keeper_latch = &MyProc->procLatch;
    LWLockRelease(shared->lock);
    back_off_after_failed_starts();
    BackgroundWorkerInitializeConnection(setting_database, nullptr, 0);
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    shared->keeper_connecting = false;
    shared->keeper_failed_starts = 0;
    LWLockRelease(shared->lock);
    pgstat_report_appname("cosid keeper");

    apply_store_timeouts();
    recover_interrupted_requests();
    static_keeper_start();

    tick_context = AllocSetContextCreate(TopMemoryContext, "cosid keeper", ALLOCSET_DEFAULT_SIZES);

    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    shared->keeper_pid = MyProcPid;
    health_keeper_started();
    shared->keeper_latch = &MyProc->procLatch;
    shared->database_oid = MyDatabaseId;
    LWLockRelease(shared->lock);
    ereport(LOG, (errmsg("cosid keeper started in database \"%s\" as owner \"%s\", incarnation %s, store %s",
                         setting_database, shared->owner_key, shared->incarnation,
                         store_is_remote() ? "remote (cosid.store_dsn)" : "local")));
}

// Until the store is ready: one look at it (the extension in cosid.database, or the remote
// store's answer), published for waiting callers.  Returns the sleep until the next turn of
// the keeper's loop (split out of cosid_keeper_main to keep it short).
long check_store_ready(long sleep_ms) {
    next_ready_check_at = mono_ms() + 100;
    StoreError err;
    bool ready = store_extension_ready(&err);
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    shared->keeper_ready = ready;
    // What a waiting cosid_next() reports at once instead of waiting out its timeout.
    // 1: the extension is missing here; 2: the remote store refused (a transient error
    // there, a timeout or a lost connection, is not known to last: 0, callers wait).
    shared->keeper_problem = ready                                              ? 0
                             : err.sqlerrcode == COSID_KEEPER_UNAVAILABLE       ? 3
                             : strstr(err.message, "cosid.database") != nullptr ? 1
                             : transient(err.sqlerrcode)                        ? 0
                                                                                : 2;
    strlcpy(shared->keeper_problem_message, ready ? "" : err.message, sizeof(shared->keeper_problem_message));
    strlcpy(shared->keeper_problem_hint, ready ? "" : err.hint, sizeof(shared->keeper_problem_hint));
    shared->keeper_checks++;
    LWLockRelease(shared->lock);
    log_store_reachability(ready, err);
    ConditionVariableBroadcast(&shared->cv);
    if (ready) {
        fork_keeper_ready();  // before the first acquire (fork.cpp)
        sleep_ms = 0;
    }
    return sleep_ms;
}

// The keeper's end at a shutdown: its leases handed back in order, and it is no longer the
// keeper.
[[noreturn]] void stop_keeper() {
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


}  // namespace

extern "C" PGDLLEXPORT void cosid_keeper_main(Datum arg) {
    // Never registered in binary-upgrade mode (register_keeper); should a keeper start there
    // anyway, it leaves before connecting, with exit code 0 so that it is not started again.
    if (IsBinaryUpgrade) {
        ereport(LOG, (errmsg("cosid keeper: binary-upgrade mode (pg_upgrade): exiting without connecting")));
        proc_exit(0);
    }
    store_io::set_call_observer(note_store_call);
    start_keeper();

    // (tests only: a keeper that looks at its store late, as on a loaded machine)
    next_ready_check_at = mono_ms() + setting_test_keeper_ready_delay_ms;
    while (!ShutdownRequestPending) {
        long sleep_ms = 1000;
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
            apply_store_timeouts();
        }
        MemoryContext old = MemoryContextSwitchTo(tick_context);
        if (!shared->keeper_ready && mono_ms() < next_ready_check_at) {
            // A waiting backend wakes the keeper, the keeper's answer wakes the backend: at
            // most one check per 100 ms, or the two would spin while the store is away.
            sleep_ms = static_cast<long>(next_ready_check_at - mono_ms());
        } else if (!shared->keeper_ready) {
            sleep_ms = check_store_ready(sleep_ms);
        } else {
            // A keeper started again finds keeper_ready set by the one before it: it looks
            // at the data directory itself before it serves (fork.cpp).
            if (!fork_data_dir_looked()) fork_keeper_ready();
            bool pending = fork_retry_pending();
            sleep_ms = keeper_pass(true);
            if (pending) sleep_ms = Min(sleep_ms, 200);
        }
        static_rows_tick();
        MemoryContextSwitchTo(old);
        MemoryContextReset(tick_context);
        if (sleep_ms > 0) {
            (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, sleep_ms, PG_WAIT_EXTENSION);
            ResetLatch(MyLatch);
        }
        // A cancel (pg_cancel_backend, or a store timeout's signal arriving late) outside a
        // store call has nothing to cancel; an ERROR here would end the keeper.
        QueryCancelPending = false;
        CHECK_FOR_INTERRUPTS();
    }
    stop_keeper();
}

void register_keeper() {
    // pg_upgrade starts the old and the new cluster with -b (binary-upgrade mode) and their
    // postgresql.conf, cosid preloaded included.  A keeper there would hold a session in
    // cosid.database, which pg_restore drops and creates again ("database is being accessed
    // by other users"), and would write to a store that is being copied: none is started.
    // Nothing is lost: no backend issues ids in these servers.
    if (IsBinaryUpgrade) {
        ereport(LOG, (errmsg("cosid: binary-upgrade mode (pg_upgrade): the lease keeper is not started")));
        return;
    }
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

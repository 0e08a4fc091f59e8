// The keeper's answers to the backends: a slot acquired for a namespace they wait for (or
// the reason it cannot be), cosid_adopt's raise of a floor, and the release of orphan leases
// an acquire whose answer was lost left in the store.
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

namespace cosid::pg::keeper {

// An acquire's slot against the range the store states for the namespace ("" for all slots).
bool slot_in_store_range(const StoreResult& r) {
    std::optional<SlotRange> range = parse_slot_range(r.slot_range, r.slot_bits);
    return range && range->contains(r.slot);
}

// Under the lock: the pool's invariant, at most one leased entry per (ns, slot).  The store only
// grants available slots, so a live entry of ours for the slot it just granted holds a lease
// that already expired in the store and was taken over: its fence is stale.  It is marked
// lost (its window ends where the new one starts, so nothing overlaps), and the new lease
// becomes the one entry.  Not a lease the store's raise freed (raised_out): the store holds
// nothing of it, every window granted since the raise starts above its ceiling, and it goes
// on to that ceiling beside its successor, which may be on the same slot.
void retire_stale_entries_locked(int except, const char* ns, int32 slot) {
    for (int j = 0; j < shared->npool; ++j) {
        PoolEntry* o = &shared->pool[j];
        if (j == except || o->state != kLeased || o->is_static || o->raised_out || o->slot != slot ||
            strcmp(o->ns, ns) != 0)
            continue;
        // A release of it that may have committed (outcome unknown) explains the new grant:
        // not a loss then.
        end_lease(o, !(o->releasing && o->release_uncertain));
        health_lease_lost();
        ereport(
            LOG,
            (errmsg(
                 "cosid: slot %d of namespace \"%s\" was granted again while the pool held it with fence " INT64_FORMAT
                 "; the older entry is lost",
                 slot, ns, o->fence),
             errdetail("Its lease had expired in the store; the new window starts at its ceiling.")));
    }
}

// Orphans: leases the store holds for this incarnation that no pool entry knows.
bool orphan_sweep_pending = true;  // at start, and after an acquire whose outcome is unknown
int64 next_orphan_sweep_at = 0;
// Where the sweep goes on: it reads one lease per round trip, within each pass's budget.
char sweep_after_ns[NAMEDATALEN] = "";
int32 sweep_after_slot = -1;

bool pool_knows_lease(const char* ns, int32 slot, int64 fence) {
    bool known = false;
    LWLockAcquire(shared->lock, LW_SHARED);
    for (int i = 0; i < shared->npool && !known; ++i) {
        PoolEntry* e = &shared->pool[i];
        known = e->state == kLeased && e->slot == slot && e->fence == fence && strcmp(e->ns, ns) == 0;
    }
    LWLockRelease(shared->lock);
    return known;
}

// Releases every orphan at its ceiling, going on where the last pass stopped, until
// `deadline` (mono ms).  The keeper is the only process that adds leases to the pool, and
// it is busy here, so none can appear while it looks.
void sweep_orphans(int64 deadline) {
    if (!orphan_sweep_pending || mono_ms() < next_orphan_sweep_at) return;
    for (;;) {
        if (mono_ms() >= deadline) return;  // the next pass goes on from here
        StoreResult r;
        StoreError err;
        if (!store_next_own_lease(shared->incarnation, sweep_after_ns, sweep_after_slot, &r, &err)) {
            next_orphan_sweep_at = mono_ms() + 1000;  // the store fails: not before a second
            return;
        }
        if (!r.row) break;
        strlcpy(sweep_after_ns, r.namespace_name, sizeof(sweep_after_ns));
        sweep_after_slot = r.slot;
        if (pool_knows_lease(r.namespace_name, r.slot, r.fence)) continue;
        StoreResult rel;
        if (!store_release(r.namespace_name, r.slot, shared->incarnation, r.fence, r.ceiling, &rel, &err)) {
            sweep_after_slot = r.slot - 1;  // this one again, not before a second
            next_orphan_sweep_at = mono_ms() + 1000;
            return;
        }
        if (rel.found) {
            count(shared->stats.releases);
            ereport(LOG, (errmsg("cosid: released an orphan lease on slot %d of namespace \"%s\" at its ceiling",
                                 r.slot, r.namespace_name),
                          errdetail("The store held it for this incarnation, but no pool entry knew it (an answer "
                                    "lost, or a keeper that stopped while acquiring); the next window on the slot "
                                    "starts at its ceiling.")));
        }
    }
    orphan_sweep_pending = false;
    sweep_after_ns[0] = '\0';
    sweep_after_slot = -1;
}

bool orphan_sweep_due() { return orphan_sweep_pending && mono_ms() >= next_orphan_sweep_at; }

// A new reason to sweep starts the sweep over from the first lease.
void request_orphan_sweep() {
    orphan_sweep_pending = true;
    sweep_after_ns[0] = '\0';
    sweep_after_slot = -1;
}

// An exhausted namespace is tried again when its earliest lease expires, but at least every
// second (another instance may release a slot in order before that) and at most every 100 ms.
int64 exhausted_retry_ms(const StoreResult& r) {
    int64 until_expiry = r.earliest_expiry > 0 ? r.earliest_expiry - r.store_now : 1000;
    return Min(Max(until_expiry, 100), 1000);
}

// Under the lock: whether nobody wants the request served any more: every waiter stopped
// waiting (or none was seen for kAbandonedRequestMs), and the keeper did not post it itself
// (a successor's request: keeper_lease.cpp, want_successor_locked).
bool request_abandoned_locked(const PoolEntry* e, int64 now) {
    return (e->waiters <= 0 || now - e->request_seen_at > kAbandonedRequestMs) && now > e->keeper_wants_until;
}

// Under the lock: a refused request due again that nobody waits for (its last caller left
// with the refusal; lease_wait.cpp keeps it for the next calls of its namespace): dropped
// instead of asked, so that it costs the store no call.  True when it was dropped.
static bool drop_refused_unwanted_locked(PoolEntry* e, int64 now) {
    if (e->error[0] == '\0' || e->waiters > 0 || now <= e->keeper_wants_until) return false;
    drop_request_locked(e);
    return true;
}

// The one answer to a request the keeper could not serve, for leases and static slots alike.
// A transient error (a lock, a timeout, a lost connection: store_errors.hpp) is tried again
// with backoff until the callers' cosid.acquire_timeout, and they report the last one; its
// SQLSTATE never reaches them (a 57014 of the keeper's own statement_timeout would read as a
// cancel of the caller's statement, which PL/pgSQL's WHEN OTHERS does not even catch).  Any
// other error fails every waiter at once with its message, hint and SQLSTATE.
void request_failed_locked(PoolEntry* e, const char* message, const char* hint, int code, int64 done) {
    e->state = kWanted;
    if (transient(code)) {
        e->tries++;
        e->earliest_expiry = 0;
        e->error[0] = '\0';  // a retry: an error of an earlier answer no longer holds
        e->error_hint[0] = '\0';
        e->error_code = 0;
        strlcpy(e->last_error, message, sizeof(e->last_error));
        e->retry_at = done + Min(100L << Min(e->tries - 1, 10), store_bound_ms());
        return;
    }
    snprintf(e->error, sizeof(e->error), "%s", message);
    strlcpy(e->error_hint, hint, sizeof(e->error_hint));
    e->error_code = code;
    e->refusals++;  // (lease_wait.cpp: a caller takes only a refusal that came after it asked)
    e->refused_at = done;
    e->tries = 0;  // an answer: the transient errors before it, and their backoff, are over
    e->last_error[0] = '\0';
    e->retry_at = done + 1000;
}

// A request the keeper refuses before asking the store: its waiting backends report
// `message` and `hint` with `code`, and it is looked at again in a second.
void refuse_request(PoolEntry* e, const char* message, const char* hint, int code) {
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    snprintf(e->error, sizeof(e->error), "%s", message);
    strlcpy(e->error_hint, hint, sizeof(e->error_hint));
    e->error_code = code;
    e->state = kWanted;
    e->refusals++;
    e->refused_at = mono_ms();
    e->retry_at = e->refused_at + 1000;
    LWLockRelease(shared->lock);
    ConditionVariableBroadcast(&shared->cv);
}

// A cosid.ttl above the store's max_ttl is granted at max_ttl: the leases are renewed in time
// (renew_after_ms), and the keeper says so once per setting and limit, not at every renewal.
void warn_if_grant_shortened(int64 expires_at, int64 store_now) {
    static int64 warned_for_ttl = -1, warned_lease = -1;
    if (!cosid::grant_shortened(setting_ttl_ms, expires_at, store_now)) return;
    int64 lease = expires_at - store_now;
    // the same limit within a second (a renewal's store time moves on while it runs)
    if (warned_for_ttl == setting_ttl_ms && std::abs(lease - warned_lease) < 1000) return;
    warned_for_ttl = setting_ttl_ms;
    warned_lease = lease;
    ereport(WARNING, (errmsg("cosid: cosid.ttl is %d ms, but the lease store grants leases of " INT64_FORMAT " ms",
                             setting_ttl_ms, lease),
                      errdetail("The store grants no lease longer than its max_ttl: a raise after a failover "
                                "covers no longer one. Leases are renewed every third of what was granted."),
                      errhint("Lower cosid.ttl to the store's max_ttl, or raise the limit on the store: "
                              "SELECT cosid_store_settings(max_ttl => ...);")));
}

namespace {

// A window just granted that will not be used (nothing was issued in it): handed back at its
// floor at once; should that fail, the orphan sweep hands it back at its ceiling.
// `log_failure`: the failed release is logged first.
void hand_back(const char* ns, const StoreResult& r, bool log_failure) {
    StoreResult rel;
    StoreError rel_err;
    if (!store_release(ns, r.slot, shared->incarnation, r.fence, r.floor, &rel, &rel_err)) {
        if (log_failure)
            ereport(LOG, (errmsg("cosid: release of slot %d in \"%s\" failed: %s", r.slot, ns, rel_err.message)));
        request_orphan_sweep();  // the sweep hands it back at its ceiling
    }
}

// The checks a granted window passes before it is used: the slot fits the layout and the
// store's slot range, a remote store's namespace is copied here, the ceiling is recorded in
// cosid.history (which may raise r->floor).  A window that fails one is handed back, and err
// says why.  (serve_request's checks, one after the other as they were there.)
bool window_usable(const char* ns, StoreResult* r, StoreError* err) {
    if (!make_layout(r->timestamp_bits, r->slot_bits, r->sequence_bits, r->epoch_ms, r->unit_ms).slot_fits(r->slot)) {
        // A row past the layout's slots (a hand edit): the store of this version never grants
        // it, an older one might.  Nothing was issued in it: handed back, and an error.
        hand_back(ns, *r, false);
        snprintf(err->message, sizeof(err->message),
                 "the lease store granted slot %d of namespace \"%s\", outside its %d slot bits", r->slot, ns,
                 r->slot_bits);
        err->sqlerrcode = ERRCODE_DATA_CORRUPTED;
        return false;
    }
    if (!slot_in_store_range(*r)) {
        // A store of this version grants only its range (cosid.acquire): one that does not is
        // not trusted with the slot.  Nothing was issued in it: handed back, and an error.
        hand_back(ns, *r, false);
        snprintf(err->message, sizeof(err->message),
                 "the lease store granted slot %d of namespace \"%s\", outside its slot range %s", r->slot, ns,
                 r->slot_range);
        err->sqlerrcode = ERRCODE_DATA_CORRUPTED;
        return false;
    }
    if (store_is_remote() && !store_sync_local_namespace(ns, *r, err)) {
        // Nothing was issued in the new window: hand it back at once, and tell the caller.
        hand_back(ns, *r, true);
        return false;
    }
    if (!history_applied(ns, r->store_id,
                         make_layout(r->timestamp_bits, r->slot_bits, r->sequence_bits, r->epoch_ms, r->unit_ms),
                         r->slot, r->ceiling, &r->floor, err)) {
        // The window could not be recorded in cosid.history: nothing was issued in it.
        hand_back(ns, *r, false);
        return false;
    }
    return true;
}

bool window_checked(const char* ns, bool ok, StoreResult* r, StoreError* err);

// The store call of serve_request: a window of `ns` acquired and checked (window_usable), or
// false with err.  r->found false with true: the namespace is exhausted.
bool acquire_window(const char* ns, StoreResult* r, StoreError* err) {
    memset(r, 0, sizeof(*r));
    // A local store first records this server as the one issuing from it, and refuses on a
    // fork (src/pg/keeper/fork.cpp).
    bool ok = store_is_remote() || fork_before_local_acquire(err);
    if (ok)
        ok = store_acquire(ns, shared->owner_key, shared->incarnation, setting_ttl_ms, setting_preferred_slot, r, err);
    return window_checked(ns, ok, r, err);
}

// The store's answer `ok`, r, err to an acquire in `ns` (alone or in a batch), checked as
// acquire_window's: r->found with true is a window to use.
bool window_checked(const char* ns, bool ok, StoreResult* r, StoreError* err) {
    if (ok && r->found && setting_test_keeper_exit[0] != '\0' && strcmp(setting_test_keeper_exit, ns) == 0 &&
        !shared->test_keeper_exited) {
        // Tests only: the acquire committed, and the keeper dies before it records the answer,
        // as on an ERROR there.  The entry stays "acquiring" and the lease is an orphan.
        shared->test_keeper_exited = true;
        ereport(FATAL,
                (errmsg("cosid keeper exits after an acquire in \"%s\" (cosid.test_keeper_exit_after_acquire)", ns)));
    }
    if (ok && !r->row) {  // cosid.acquire always answers with a row; anything else is an error
        ok = false;
        snprintf(err->message, sizeof(err->message), "the lease store gave no answer for namespace \"%s\"", ns);
        err->sqlerrcode = ERRCODE_INTERNAL_ERROR;
    }
    if (ok && r->found) ok = window_usable(ns, r, err);
    // A failed call may still have committed (an answer lost on the way back, a commit whose
    // confirmation timed out): whatever it took is found and released by the sweep.  An
    // error answer means a rollback: nothing to look for.
    if (!ok && err->outcome_unknown) request_orphan_sweep();
    return ok;
}

// Under the lock: the store's answer into request entry i (and, when the namespace is
// exhausted, every waiting entry of it).
void answer_request_locked(int i, const char* ns, bool ok, const StoreResult& r, const StoreError& err, int64 done) {
    PoolEntry* e = &shared->pool[i];
    if (!(ok && r.found) && request_abandoned_locked(e, done)) {
        // Every waiter stopped waiting while the store answered: nobody wants a retry.
        drop_request_locked(e);
    } else if (!ok) {
        request_failed_locked(e, err.message, err.hint, err.sqlerrcode, done);
    } else if (!r.found) {
        // Exhausted: every waiter of the namespace waits for the same next try, so that
        // hundreds of them cost one acquire, not one each.
        for (int j = 0; j < shared->npool; ++j) {
            PoolEntry* w = &shared->pool[j];
            if ((w->state != kWanted && j != i) || strcmp(w->ns, ns) != 0) continue;
            w->earliest_expiry = r.earliest_expiry;
            w->tries = 0;
            w->error[0] = '\0';
            w->error_code = 0;
            w->retry_at = done + exhausted_retry_ms(r);
        }
        e->state = kWanted;
    } else {
        retire_stale_entries_locked(i, ns, r.slot);
        install_window_locked(e, r, false, done);
    }
}

// After the answer is in the entry: the counters, the health notes and the log.
void note_acquire(const char* ns, bool ok, const StoreResult& r, const StoreError& err, int64 before, int64 after) {
    if (ok) {
        if (r.duplicate_key) count(shared->stats.duplicate_owner_keys);
        if (r.found) {
            count(shared->stats.acquires);
            health_lease_granted();
            warn_if_grant_shortened(r.expires_at, r.store_now);
            health_store_clock(r.store_now, before, after, r.tolerance_ms);
        }
        if (r.duplicate_key)
            ereport(LOG,
                    (errmsg("cosid: another live incarnation holds leases with owner key \"%s\" in namespace \"%s\"",
                            shared->owner_key, ns),
                     errdetail("Its leases are left alone; this incarnation uses other slots."),
                     errhint("Give each instance its own cosid.owner_key.")));
    } else {
        ereport(LOG, (errmsg("cosid: acquire in namespace \"%s\" failed: %s", ns, err.message)));
    }
}

// The answer to request i, into its entry, counted and logged; its waiters woken.
void answer_request(int i, const char* ns, bool ok, const StoreResult& r, const StoreError& err, int64 before,
                    int64 after) {
    int64 done = mono_ms();
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    answer_request_locked(i, ns, ok, r, err, done);
    LWLockRelease(shared->lock);
    note_acquire(ns, ok, r, err, before, after);
    ConditionVariableBroadcast(&shared->cv);
}

// A store without cosid.acquire_many (older than 1.8): one acquire a transaction, asked again
// later.
int64 acquire_many_missing_until = 0;

// Requests due together, at most this many in one store transaction.
constexpr int kBatchMax = 32;

struct BatchItem {
    int i;
    char ns[NAMEDATALEN];
};

static int batch_order(const void* a, const void* b) {
    return strcmp(static_cast<const BatchItem*>(a)->ns, static_cast<const BatchItem*>(b)->ns);
}

// The lease requests due now (not a static slot's), at most kBatchMax, marked "acquiring".
// Fewer than two: none is taken, and the requests are served one by one.
int take_due_batch(BatchItem* items, int64 now) {
    int n = 0;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    for (int i = 0; i < shared->npool && n < kBatchMax; ++i) {
        PoolEntry* e = &shared->pool[i];
        if (e->state != kWanted || e->retry_at > now || drop_refused_unwanted_locked(e, now) ||
            static_slot_for(e->ns) >= 0)
            continue;
        items[n].i = i;
        strlcpy(items[n].ns, e->ns, sizeof(items[n].ns));
        n++;
    }
    if (n < 2) n = 0;
    for (int k = 0; k < n; ++k) shared->pool[items[k].i].state = kAcquiring;
    LWLockRelease(shared->lock);
    return n;
}

// Requests of a batch the store did not answer as a batch go back to be served one by one.
void untake_batch(const BatchItem* items, int n) {
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    for (int k = 0; k < n; ++k) shared->pool[items[k].i].state = kWanted;
    LWLockRelease(shared->lock);
}

}  // namespace

// The lease requests due now, in one store transaction (cosid.acquire_many), each answered
// and checked as serve_request answers one.  After a switchover's raise freed every lease,
// an instance wants a successor in each of its namespaces at once, and the store's cost is
// then per instance, not per namespace.  A batch the store refused (an error in one acquire
// rolls back all) is asked again one by one, so that each request gets its own answer; one
// that failed on the way (a lost connection, an outcome unknown) fails every request in it,
// as the next calls would have within the same bound.  Returns whether it served any.
bool serve_due_batch(int64 now) {
    if (setting_store_only || now < acquire_many_missing_until) return false;
    BatchItem items[kBatchMax];
    int n = take_due_batch(items, now);
    if (n == 0) return false;
    StoreError err;
    memset(&err, 0, sizeof(err));
    bool ok = store_is_remote() || (store_local_guard(&err) && fork_before_local_acquire(&err));
    if (!ok) {  // refused before the store: each request gets the refusal from serve_request
        untake_batch(items, n);
        return false;
    }
    qsort(items, n, sizeof(BatchItem), batch_order);
    const char* names[kBatchMax];
    for (int k = 0; k < n; ++k) names[k] = items[k].ns;
    StoreResult* results = static_cast<StoreResult*>(palloc(sizeof(StoreResult) * n));
    int64 before = clock_ms();
    ok = store_acquire_many(names, n, shared->owner_key, shared->incarnation, setting_ttl_ms, setting_preferred_slot,
                            results, &err);
    int64 after = clock_ms();
    // Asked again one by one unless the store was not reached (or may have committed): a
    // transient answer of the store (one namespace's row locked, the batch past its statement
    // bound) is one request's as often as all of theirs, and must not hold up the others.
    if (!ok && !err.outcome_unknown && ERRCODE_TO_CATEGORY(err.sqlerrcode) != ERRCODE_CONNECTION_EXCEPTION) {
        bool missing = err.sqlerrcode == ERRCODE_UNDEFINED_FUNCTION;
        if (missing || (err.sqlerrcode == ERRCODE_INSUFFICIENT_PRIVILEGE && strstr(err.message, "acquire_many"))) {
            // Not there, or not for this store role (granted cosid.acquire itself, not
            // cosid_keeper): one acquire a transaction, asked again in a minute.
            acquire_many_missing_until = mono_ms() + 60000;
            ereport(LOG, (errmsg("cosid: the lease store %s cosid.acquire_many (%s); leases are acquired one "
                                 "transaction each",
                                 missing ? "has no" : "refuses", err.message),
                          errhint(missing ? "ALTER EXTENSION cosid UPDATE on the lease store."
                                          : "GRANT cosid_keeper to the keeper's store role on the lease store.")));
        }
        untake_batch(items, n);
        pfree(results);
        return false;
    }
    if (!ok && err.outcome_unknown) request_orphan_sweep();  // whatever it took is released
    for (int k = 0; k < n; ++k) {
        StoreError one = err;
        bool got = ok && window_checked(items[k].ns, true, &results[k], &one);
        answer_request(items[k].i, items[k].ns, got, results[k], one, before, after);
    }
    pfree(results);
    return true;
}

void serve_request(int i, int64 now) {
    PoolEntry* e = &shared->pool[i];
    char ns[NAMEDATALEN];
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (e->state != kWanted || e->retry_at > now || drop_refused_unwanted_locked(e, now)) {
        LWLockRelease(shared->lock);
        return;
    }
    e->state = kAcquiring;
    strlcpy(ns, e->ns, sizeof(ns));
    LWLockRelease(shared->lock);
    if (setting_store_only) {
        // A store-only server issues nothing: its copies are not forks (fork.cpp).  (Its
        // callers are refused before they ask: generator.cpp.)
        refuse_request(
            e, "this server only serves a lease store (cosid.store_only = on): it issues no ids",
            "Issue ids on the instances that lease from this store, or turn cosid.store_only off and restart.",
            ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE);
        return;
    }
    int32 static_slot = static_slot_for(ns);
    if (static_slot >= 0) {
        serve_static_request(i, ns, static_slot);
        return;
    }

    StoreResult r;
    StoreError err;
    if (!store_is_remote() && !store_local_guard(&err) && err.sqlerrcode == COSID_KEEPER_UNAVAILABLE) {
        // This database is a Citus worker (it became one after the keeper found it ready, or
        // static slots made it ready): no window from its own store.  The request fails with
        // the guard's reason and hint, as a store's refusal does.
        ereport(LOG,
                (errmsg("cosid: no slot acquired in namespace \"%s\": %s", ns, err.message), errhint("%s", err.hint)));
        refuse_request(e, err.message, err.hint, err.sqlerrcode);
        return;
    }
    int64 before = clock_ms();
    bool ok = acquire_window(ns, &r, &err);
    answer_request(i, ns, ok, r, err, before, clock_ms());
}

// cosid_adopt's request: the namespace's floor is raised where its windows come from (the
// store, or the state file of a static slot), then every open window of this instance in
// it is closed, so that the next one starts above the floor.  The keeper acquires nothing
// in between (one loop), so no window of the namespace that this instance issues on after
// the answer started below the floor.
void serve_raise_request() {
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (shared->raise.state != kRaisePosted) {
        LWLockRelease(shared->lock);
        return;
    }
    RaiseRequest q = shared->raise;
    LWLockRelease(shared->lock);

    char error[256] = "";
    int code = 0;
    if (static_slot_for(q.ns) >= 0) {
        // The floor was computed with the caller's layout: it must be the one static windows use.
        StoreResult l;
        StoreError err;
        if (!store_local_namespace(q.ns, &l, &err)) {
            strlcpy(error, err.message, sizeof(error));
            code = err.sqlerrcode != 0 ? err.sqlerrcode : ERRCODE_INTERNAL_ERROR;
        } else if (!l.row || l.timestamp_bits != q.timestamp_bits || l.slot_bits != q.slot_bits ||
                   l.sequence_bits != q.sequence_bits || l.epoch_ms != q.epoch_ms || l.unit_ms != q.unit_ms) {
            snprintf(error, sizeof(error),
                     "here %d/%d/%d bits, epoch " INT64_FORMAT " ms, unit %s; in database \"%s\" %s", q.timestamp_bits,
                     q.slot_bits, q.sequence_bits, q.epoch_ms, q.unit_ms == 1000 ? "s" : "ms", setting_database,
                     l.row ? "another layout" : "no such namespace");
            code = ERRCODE_INVALID_OBJECT_DEFINITION;
        } else if (!raise_static_not_before(q.ns, q.floor_ms, error, sizeof(error))) {
            code = COSID_STATIC_STATE;
        }
    } else {
        StoreResult r;
        StoreError err;
        if (!store_raise_floor(q.ns, q.floor_ms, q.timestamp_bits, q.slot_bits, q.sequence_bits, q.epoch_ms, q.unit_ms,
                               &r, &err)) {
            strlcpy(error, err.message, sizeof(error));
            code = err.sqlerrcode != 0 ? err.sqlerrcode : ERRCODE_INTERNAL_ERROR;
        }
    }
    int closed = 0;
    for (int i = 0; code == 0 && i < shared->npool; ++i) {
        PoolEntry* e = &shared->pool[i];
        LWLockAcquire(shared->lock, LW_SHARED);
        // A window whose floor is at or above the raised one issues above it already.
        bool open = e->state == kLeased && !e->releasing && e->floor < q.floor_ms && strcmp(e->ns, q.ns) == 0;
        LWLockRelease(shared->lock);
        if (!open) continue;
        // Closes the word at once; a release the store does not confirm stays pending (closed).
        release_entry(i);
        closed++;
    }
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (shared->raise.state == kRaisePosted && shared->raise.id == q.id) {
        shared->raise.answered_at = mono_ms();
        shared->raise.state = code == 0 ? kRaiseDone : kRaiseFailed;
        strlcpy(shared->raise.error, error, sizeof(shared->raise.error));
        shared->raise.error_code = code;
        shared->raise.leases_closed = closed;
    }
    LWLockRelease(shared->lock);
    if (code == 0)
        ereport(LOG, (errmsg("cosid: namespace \"%s\" issues no timestamp at or below " INT64_FORMAT " ms from now on "
                             "(cosid_adopt); %d window%s of this instance closed",
                             q.ns, q.floor_ms, closed, closed == 1 ? "" : "s")));
    ConditionVariableBroadcast(&shared->cv);
}


}  // namespace cosid::pg::keeper

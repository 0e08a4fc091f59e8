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
#include "keeper.hpp"
#include "fork.hpp"
#include "store_history.hpp"

#include "errors.hpp"
#include "health.hpp"
#include "issue_word.hpp"
#include "lease_model.hpp"
#include "settings.hpp"
#include "slot_range.hpp"
#include "state.hpp"
#include "static_keeper.hpp"
#include "store.hpp"
#include "store_errors.hpp"

namespace cosid::pg {

namespace {

MemoryContext tick_context = nullptr;
// A waiting backend refreshes its request every 50 ms; one unseen for this long is abandoned.
constexpr int64 kAbandonedRequestMs = 2000;

// A lease is ended by the keeper only: after a release the store confirmed, or when it was
// found lost.  A lost one is remembered so that its generators fail once (ZC001).
void end_lease(PoolEntry* e, bool lost) {
    if (lost) remember_lost_locked(pg_atomic_read_u64(&e->generation));
    end_lease_locked(e);
}

// A lease on which nothing was claimed yet is kept at least 2 s whatever the idle timeout,
// so that the backends that asked for it get to use it.
int64 idle_limit_ms(uint64 word) {
    return word == issue_word::kFresh ? Max(setting_pool_idle_ms, 2000) : setting_pool_idle_ms;
}

// The next wait after a failed store call: 100 ms, doubling, at most one store bound.
int64 next_backoff_ms(int64 backoff_ms) { return backoff_ms == 0 ? 100 : Min(backoff_ms * 2, store_bound_ms()); }

bool transient(int sqlerrcode) { return store_error_is_transient(unpack_sql_state(sqlerrcode)); }

// An acquire's slot against the range the store states for the namespace ("" for all slots).
bool slot_in_store_range(const StoreResult& r) {
    std::optional<SlotRange> range = parse_slot_range(r.slot_range, r.slot_bits);
    return range && range->contains(r.slot);
}

// Under the lock: the pool's invariant, at most one leased entry per (ns, slot).  The store only
// grants available slots, so a live entry of ours for the slot it just granted holds a lease
// that already expired in the store and was taken over: its fence is stale.  It is marked
// lost (its window ends where the new one starts, so nothing overlaps), and the new lease
// becomes the one entry.
void retire_stale_entries_locked(int except, const char* ns, int32 slot) {
    for (int j = 0; j < shared->npool; ++j) {
        PoolEntry* o = &shared->pool[j];
        if (j == except || o->state != kLeased || o->is_static || o->slot != slot || strcmp(o->ns, ns) != 0) continue;
        // A release of it that may have committed (outcome unknown) explains the new grant:
        // not a loss then.
        end_lease(o, !(o->releasing && o->release_uncertain));
        health_lease_lost();
        ereport(LOG, (errmsg("cosid: slot %d of namespace \"%s\" was granted again while the pool held it with fence "
                             INT64_FORMAT "; the older entry is lost",
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

// A window from the store is used only above what other stores granted this instance on its
// slot (cosid.history, src/pg/store_history.hpp), and only once its ceiling is recorded there:
// *floor is raised to that.  False (err set: a damaged file fails at once, a write that failed
// is retried until the caller's timeout) when the file cannot be read or written.
bool history_applied(const char* ns, const char* store_id, const cosid::Layout& layout, int32 slot, int64 ceiling,
                     int64* floor, StoreError* err) {
    int64 floor_ms = 0;
    char message[256];
    bool readable = history_floor(ns, store_id, layout, slot, &floor_ms, message, sizeof(message));
    if (!readable ||
        !history_record(ns, store_id, layout, slot, ceiling, !store_is_remote(), message, sizeof(message))) {
        snprintf(err->message, sizeof(err->message), "%s", message);
        // a damaged file fails at once (ZC007); a write that failed is tried again
        err->sqlerrcode = readable ? ERRCODE_IO_ERROR : COSID_STATIC_STATE;
        err->outcome_unknown = false;
        strlcpy(err->hint,
                "Make the data directory writable. A damaged cosid.history: remove it only if this server has not "
                "changed its store (cosid.database, cosid.store_dsn) since it was written.",
                sizeof(err->hint));
        ereport(LOG, (errmsg("cosid: %s", message)));
        return false;
    }
    if (floor_ms > *floor) {
        ereport(LOG, (errmsg("cosid: namespace \"%s\" slot %d: this instance was granted up to " INT64_FORMAT
                             " ms on it by another store; the new window starts there, not at " INT64_FORMAT " ms",
                             ns, slot, floor_ms, *floor)));
        *floor = floor_ms;
    }
    return true;
}

// A request the keeper refuses before asking the store: its waiting backends report
// `message` and `hint` with `code`, and it is looked at again in a second.
void refuse_request(PoolEntry* e, const char* message, const char* hint, int code) {
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    snprintf(e->error, sizeof(e->error), "%s", message);
    strlcpy(e->error_hint, hint, sizeof(e->error_hint));
    e->error_code = code;
    e->state = kWanted;
    e->retry_at = mono_ms() + 1000;
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
    if (setting_store_only) {
        // A store-only server issues nothing: its copies are not forks (fork.cpp).  (Its
        // callers are refused before they ask: generator.cpp.)
        refuse_request(e, "this server only serves a lease store (cosid.store_only = on): it issues no ids",
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
        ereport(LOG, (errmsg("cosid: no slot acquired in namespace \"%s\": %s", ns, err.message),
                      errhint("%s", err.hint)));
        refuse_request(e, err.message, err.hint, err.sqlerrcode);
        return;
    }
    int64 before = clock_ms();
    memset(&r, 0, sizeof(r));
    // A local store first records this server as the one issuing from it, and refuses on a
    // fork (src/pg/fork.cpp).
    bool ok = store_is_remote() || fork_before_local_acquire(&err);
    if (ok)
        ok = store_acquire(ns, shared->owner_key, shared->incarnation, setting_ttl_ms, setting_preferred_slot, &r,
                           &err);
    if (ok && r.found && setting_test_keeper_exit[0] != '\0' && strcmp(setting_test_keeper_exit, ns) == 0 &&
        !shared->test_keeper_exited) {
        // Tests only: the acquire committed, and the keeper dies before it records the answer,
        // as on an ERROR there.  The entry stays "acquiring" and the lease is an orphan.
        shared->test_keeper_exited = true;
        ereport(FATAL, (errmsg("cosid keeper exits after an acquire in \"%s\" (cosid.test_keeper_exit_after_acquire)",
                               ns)));
    }
    if (ok && !r.row) {  // cosid.acquire always answers with a row; anything else is an error
        ok = false;
        snprintf(err.message, sizeof(err.message), "the lease store gave no answer for namespace \"%s\"", ns);
        err.sqlerrcode = ERRCODE_INTERNAL_ERROR;
    }
    if (ok && r.found && !make_layout(r.timestamp_bits, r.slot_bits, r.sequence_bits, r.epoch_ms, r.unit_ms).slot_fits(r.slot)) {
        // A row past the layout's slots (a hand edit): the store of this version never grants
        // it, an older one might.  Nothing was issued in it: handed back, and an error.
        StoreResult rel;
        StoreError rel_err;
        if (!store_release(ns, r.slot, shared->incarnation, r.fence, r.floor, &rel, &rel_err))
            request_orphan_sweep();
        snprintf(err.message, sizeof(err.message),
                 "the lease store granted slot %d of namespace \"%s\", outside its %d slot bits", r.slot, ns,
                 r.slot_bits);
        err.sqlerrcode = ERRCODE_DATA_CORRUPTED;
        ok = false;
    }
    if (ok && r.found && !slot_in_store_range(r)) {
        // A store of this version grants only its range (cosid.acquire): one that does not is
        // not trusted with the slot.  Nothing was issued in it: handed back, and an error.
        StoreResult rel;
        StoreError rel_err;
        if (!store_release(ns, r.slot, shared->incarnation, r.fence, r.floor, &rel, &rel_err))
            request_orphan_sweep();
        snprintf(err.message, sizeof(err.message),
                 "the lease store granted slot %d of namespace \"%s\", outside its slot range %s", r.slot, ns,
                 r.slot_range);
        err.sqlerrcode = ERRCODE_DATA_CORRUPTED;
        ok = false;
    }
    if (ok && r.found && store_is_remote() && !store_sync_local_namespace(ns, r, &err)) {
        // Nothing was issued in the new window: hand it back at once, and tell the caller.
        StoreResult rel;
        StoreError rel_err;
        if (!store_release(ns, r.slot, shared->incarnation, r.fence, r.floor, &rel, &rel_err)) {
            ereport(LOG, (errmsg("cosid: release of slot %d in \"%s\" failed: %s", r.slot, ns, rel_err.message)));
            request_orphan_sweep();  // the sweep hands it back at its ceiling
        }
        ok = false;
    }
    if (ok && r.found &&
        !history_applied(ns, r.store_id, make_layout(r.timestamp_bits, r.slot_bits, r.sequence_bits, r.epoch_ms, r.unit_ms),
                         r.slot, r.ceiling, &r.floor, &err)) {
        // The window could not be recorded in cosid.history: nothing was issued in it.
        StoreResult rel;
        StoreError rel_err;
        if (!store_release(ns, r.slot, shared->incarnation, r.fence, r.floor, &rel, &rel_err))
            request_orphan_sweep();
        ok = false;
    }
    // A failed call may still have committed (an answer lost on the way back, a commit whose
    // confirmation timed out): whatever it took is found and released by the sweep.  An
    // error answer means a rollback: nothing to look for.
    if (!ok && err.outcome_unknown) request_orphan_sweep();
    int64 after = clock_ms();
    int64 done = mono_ms();

    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (!(ok && r.found) && (e->waiters <= 0 || done - e->request_seen_at > kAbandonedRequestMs)) {
        // Every waiter stopped waiting while the store answered: nobody wants a retry.
        drop_request_locked(e);
    } else if (!ok && transient(err.sqlerrcode)) {
        // Tried again until the caller's cosid.acquire_timeout; the caller reports the last one.
        e->tries++;
        e->earliest_expiry = 0;
        e->error[0] = '\0';  // a retry: an error of an earlier answer no longer holds
        e->error_code = 0;
        strlcpy(e->last_error, err.message, sizeof(e->last_error));
        e->state = kWanted;
        e->retry_at = done + Min(100L << Min(e->tries - 1, 10), store_bound_ms());
    } else if (!ok) {
        // The request fails: the waiting backend reports the store's error, and its hint.
        snprintf(e->error, sizeof(e->error), "%s", err.message);
        strlcpy(e->error_hint, err.hint, sizeof(e->error_hint));
        e->error_code = err.sqlerrcode;
        e->state = kWanted;
        e->retry_at = done + 1000;
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
    LWLockRelease(shared->lock);
    if (ok) {
        if (r.duplicate_key) count(shared->stats.duplicate_owner_keys);
        if (r.found) {
            count(shared->stats.acquires);
            health_lease_granted();
            warn_if_grant_shortened(r.expires_at, r.store_now);
            health_store_clock(r.store_now, before, after, r.tolerance_ms);
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

// Releases entry i to the store, in order: its word is closed first (no claim succeeds after
// that) and the OR's answer is the exact last timestamp any backend issued on it, which the
// store hands on as the slot's next floor; nothing waits for backends.  The entry ends only
// when the store answered: the release was applied, or the lease is not ours any more.  A
// failed release keeps the entry (closed) and is tried again with the same timestamp, so
// this instance never forgets what it issued on a slot it may still hold.
// A renewal or release of one lease, copied out of its entry under the lock and sent to
// the store without it: alone (send_one, release_entry) or with the others due in the
// same pass, in one store transaction (run_due_leases).
struct DueLease {
    int i;
    bool release;
    char ns[NAMEDATALEN];
    int32 slot;
    int64 fence;
    int64 last;  // release: the exact last timestamp issued on it
    int64 tol;   // renew: the namespace's tolerance, for the clock check
};

// False when there is nothing to send: not leased (any more), or a static slot (done here).
bool release_prepare(int i, DueLease* d) {
    PoolEntry* e = &shared->pool[i];
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (e->state != kLeased) {
        LWLockRelease(shared->lock);
        return false;
    }
    if (e->is_static) {  // no store: closed, and its last timestamp kept in the state file
        LWLockRelease(shared->lock);
        release_static(i);
        return false;
    }
    if (!e->releasing) {
        uint64 last_word = pg_atomic_fetch_or_u64(&e->word, issue_word::kClosed);
        std::optional<int64> last = issue_word::last_issued_ms(entry_layout(*e), last_word);
        e->release_last = last ? *last : e->floor;
        e->releasing = true;
        e->release_uncertain = false;
        e->backoff_ms = 0;
    }
    d->i = i;
    d->release = true;
    strlcpy(d->ns, e->ns, sizeof(d->ns));
    d->slot = e->slot;
    d->fence = e->fence;
    d->last = e->release_last;
    d->tol = e->tolerance_ms;
    LWLockRelease(shared->lock);
    return true;
}

// Whether the store counted a failover since `at_grant` (an acquire's answer): read once per
// second at most, when a renewal finds its lease gone.  A store that cannot be read says no.
bool store_failed_over_since(int64 at_grant) {
    static int64 read_at = 0, failovers = -1;
    if (failovers < 0 || mono_ms() - read_at > 1000) {
        StoreResult s;
        StoreError err;
        memset(&s, 0, sizeof(s));
        failovers = store_read_state(&s, &err) && s.row ? s.fence : -1;
        read_at = mono_ms();
    }
    return failovers > at_grant;
}

bool release_apply(const DueLease& d, bool ok, const StoreResult& r, const StoreError& err) {
    PoolEntry* e = &shared->pool[d.i];
    if (ok && r.found) {
        count(shared->stats.releases);
        history_released(d.ns, e->store_id, d.slot, d.last);  // (only the keeper writes store_id)
    }

    // The lease was gone already (expired and taken, or revoked) unless an earlier attempt
    // may have done the release itself: then it was lost while backends issued on it.  Freed
    // by a failover's raise, it was not (renew_apply).  (release_uncertain and the count at
    // grant are the keeper's own: read without the lock.)
    bool lost = ok && !r.found && !e->release_uncertain && !store_failed_over_since(e->store_failovers_at_grant);
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (ok) {
        // Done, or the lease was gone already: either way nothing of ours is left in the store.
        end_lease(e, lost);
    } else {
        if (err.outcome_unknown) e->release_uncertain = true;
        e->backoff_ms = next_backoff_ms(e->backoff_ms);
        e->next_renew_at = mono_ms() + e->backoff_ms;
    }
    int64 retry_in = e->backoff_ms;
    LWLockRelease(shared->lock);
    if (lost) {
        health_lease_lost();
        ereport(LOG, (errmsg("cosid: lease on slot %d of namespace \"%s\" was lost before its release", d.slot, d.ns),
                      errdetail("Its fence or incarnation had changed in the store (expired and taken, or revoked).")));
    }
    if (!ok)
        ereport(LOG, (errmsg("cosid: release of slot %d in \"%s\" failed: %s", d.slot, d.ns, err.message),
                      errdetail("The entry is kept with its last timestamp " INT64_FORMAT "; the release is tried "
                                "again in " INT64_FORMAT " ms.",
                                d.last, retry_in)));
    ConditionVariableBroadcast(&shared->cv);
    return ok;
}

// Releases entry i to the store, in order: its word is closed first (no claim succeeds after
// that) and the OR's answer is the exact last timestamp any backend issued on it, which the
// store hands on as the slot's next floor; nothing waits for backends.  The entry ends only
// when the store answered: the release was applied, or the lease is not ours any more.  A
// failed release keeps the entry (closed) and is tried again with the same timestamp, so
// this instance never forgets what it issued on a slot it may still hold.
bool release_entry(int i) {
    DueLease d;
    if (!release_prepare(i, &d)) return true;
    StoreResult r;
    StoreError err;
    bool ok = store_release(d.ns, d.slot, shared->incarnation, d.fence, d.last, &r, &err);
    return release_apply(d, ok, r, err);
}

// The current run of failed renewals, for the log.
struct {
    uint64 failures = 0;
    int64 since = 0;
} outage;

// False for a static slot: renewed here, without the store.
bool renew_prepare(int i, DueLease* d) {
    PoolEntry* e = &shared->pool[i];
    LWLockAcquire(shared->lock, LW_SHARED);
    d->i = i;
    d->release = false;
    strlcpy(d->ns, e->ns, sizeof(d->ns));
    d->slot = e->slot;
    d->fence = e->fence;
    d->last = 0;
    d->tol = e->tolerance_ms;
    bool is_static = e->is_static;
    LWLockRelease(shared->lock);
    if (is_static) {
        renew_static(i);
        return false;
    }
    return true;
}

// before/after: the wall clock around the store call, for the store clock check.
void renew_apply(const DueLease& d, bool ok, const StoreResult& r, const StoreError& store_err, int64 before,
                 int64 after) {
    PoolEntry* e = &shared->pool[d.i];
    StoreError err = store_err;
    if (ok && r.found) {
        // (only the keeper writes the entry's layout, floor and store: read without the lock)
        int64 floor = e->floor;
        // not recorded: the new ceiling is not used; tried again as a failed renewal
        if (!history_applied(d.ns, e->store_id, entry_layout(*e), d.slot, r.ceiling, &floor, &err)) ok = false;
    }
    // Lost to a raise: the store failed over since the grant and freed every lease, each
    // slot's next window starting above anything this lease issued.  Nothing is wrong with
    // its ids: its generators move on to a new lease and wait for it, without an error.
    bool to_raise = ok && !r.found && store_failed_over_since(e->store_failovers_at_grant);
    int64 done = mono_ms();
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (ok && r.found) {
        e->expires_at = r.expires_at;
        if (static_cast<uint64>(r.ceiling) > pg_atomic_read_u64(&e->ceiling))
            pg_atomic_write_u64(&e->ceiling, static_cast<uint64>(r.ceiling));
        e->next_renew_at = done + cosid::renew_after_ms(setting_ttl_ms, r.expires_at, r.store_now);
        e->backoff_ms = 0;
    } else if (ok) {
        // Fence or incarnation changed: someone took the slot or it was revoked, or a raise.
        end_lease(e, !to_raise);
    } else {
        e->backoff_ms = next_backoff_ms(e->backoff_ms);
        e->next_renew_at = done + e->backoff_ms;
    }
    LWLockRelease(shared->lock);

    if (ok && r.found) {
        count(shared->stats.renewals);
        health_renewal(true);
        warn_if_grant_shortened(r.expires_at, r.store_now);
        health_store_clock(r.store_now, before, after, d.tol);
        if (outage.failures > 0) {
            ereport(LOG, (errmsg("cosid: renewals succeed again after " UINT64_FORMAT " failed ones in " INT64_FORMAT
                                 " ms",
                                 outage.failures, mono_ms() - outage.since)));
            outage.failures = 0;
        }
    } else if (ok && to_raise) {
        ereport(LOG, (errmsg("cosid: lease on slot %d of namespace \"%s\" was freed by the store's raise after a "
                             "failover",
                             d.slot, d.ns),
                      errdetail("Every next window on its slot starts above what it issued; its backends move to a "
                                "new lease and wait for it, without an error.")));
    } else if (ok) {
        health_lease_lost();
        ereport(LOG, (errmsg("cosid: lease on slot %d of namespace \"%s\" was lost", d.slot, d.ns),
                      errdetail("Its fence or incarnation changed in the store; generators on it stop.")));
    } else {
        count(shared->stats.renewal_failures);
        health_renewal(false);
        // One entry per outage in the log, not one per slot and retry: the rest at DEBUG1.
        if (outage.failures++ == 0) {
            outage.since = mono_ms();
            ereport(LOG, (errmsg("cosid: renewal of slot %d in \"%s\" failed: %s", d.slot, d.ns, err.message),
                          errdetail("Renewals are retried with backoff; further failures are logged at DEBUG1 "
                                    "until one succeeds.")));
        } else {
            ereport(DEBUG1, (errmsg("cosid: renewal of slot %d in \"%s\" failed: %s", d.slot, d.ns, err.message)));
        }
    }
    ConditionVariableBroadcast(&shared->cv);
}

void send_one(const DueLease& d) {
    if (d.release) {
        StoreResult r;
        StoreError err;
        bool ok = store_release(d.ns, d.slot, shared->incarnation, d.fence, d.last, &r, &err);
        release_apply(d, ok, r, err);
        return;
    }
    StoreResult r;
    StoreError err;
    int64 before = clock_ms();
    bool ok = store_renew(d.ns, d.slot, shared->incarnation, d.fence, setting_ttl_ms, &r, &err);
    renew_apply(d, ok, r, err, before, clock_ms());
}

// A store without cosid.lease_pass (older than 1.5): lease by lease, asked again later.
int64 lease_pass_missing_until = 0;

// The renewals and releases due in a pass, in one store transaction (cosid.lease_pass),
// each answered and applied as alone.  A pass that fails with the store's answer (an error
// in one lease rolls back all) is asked again lease by lease, so that each lease gets its
// own answer, as before; a pass that failed on the way (a timeout, a lost connection)
// fails every lease in it, as the next calls would have failed within the same bound.
void run_due_leases(DueLease* due, int n) {
    if (n == 0) return;
    if (n == 1 || mono_ms() < lease_pass_missing_until) {
        for (int k = 0; k < n; ++k) send_one(due[k]);
        return;
    }
    LeaseCall* calls = static_cast<LeaseCall*>(palloc(sizeof(LeaseCall) * n));
    StoreResult* results = static_cast<StoreResult*>(palloc(sizeof(StoreResult) * n));
    for (int k = 0; k < n; ++k)
        calls[k] = LeaseCall{due[k].release, due[k].ns, due[k].slot, due[k].fence, due[k].last};
    StoreError err;
    int64 before = clock_ms();
    bool ok = store_lease_pass(calls, n, shared->incarnation, setting_ttl_ms, results, &err);
    int64 after = clock_ms();
    // Asked again lease by lease unless the store was not reached (or may have committed):
    // a transient answer of the store (one lease's row locked, the pass past its statement
    // bound) is one lease's as often as all of theirs, and must not hold up the others.
    if (!ok && !err.outcome_unknown && ERRCODE_TO_CATEGORY(err.sqlerrcode) != ERRCODE_CONNECTION_EXCEPTION) {
        if (err.sqlerrcode == ERRCODE_UNDEFINED_FUNCTION) {
            lease_pass_missing_until = mono_ms() + 60000;
            ereport(LOG, (errmsg("cosid: the lease store has no cosid.lease_pass (%s); leases are renewed one "
                                 "transaction each", err.message),
                          errhint("ALTER EXTENSION cosid UPDATE on the lease store.")));
        }
        for (int k = 0; k < n; ++k) send_one(due[k]);
        return;
    }
    for (int k = 0; k < n; ++k) {
        if (due[k].release) release_apply(due[k], ok, results[k], err);
        else renew_apply(due[k], ok, results[k], err, before, after);
    }
}

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
    count(shared->stats.store_failovers, static_cast<uint64>(failovers - seen));
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
            snprintf(error, sizeof(error), "here %d/%d/%d bits, epoch " INT64_FORMAT " ms, unit %s; in database \"%s\" %s",
                     q.timestamp_bits, q.slot_bits, q.sequence_bits, q.epoch_ms, q.unit_ms == 1000 ? "s" : "ms",
                     setting_database, l.row ? "another layout" : "no such namespace");
            code = ERRCODE_INVALID_OBJECT_DEFINITION;
        } else if (!raise_static_not_before(q.ns, q.floor_ms, error, sizeof(error))) {
            code = COSID_STATIC_STATE;
        }
    } else {
        StoreResult r;
        StoreError err;
        if (!store_raise_floor(q.ns, q.floor_ms, q.timestamp_bits, q.slot_bits, q.sequence_bits, q.epoch_ms,
                               q.unit_ms, &r, &err)) {
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

long keeper_pass(bool serve_requests) {
    int64 pass_start = mono_ms();
    long sleep_ms = 1000;
    bool requests_due = false;
    DueLease* due = static_cast<DueLease*>(palloc(sizeof(DueLease) * Max(shared->npool, 1)));
    int ndue = 0;
    int* soon = static_cast<int*>(palloc(sizeof(int) * Max(shared->npool, 1)));
    int nsoon = 0;
    // Renewals due within ttl/6 join a pass that goes to the store anyway: leases acquired at
    // different times come into step, and then cost one store transaction per pass together.
    // Renewing early is harmless: a renewal never shortens a window.
    int64 early_ms = setting_ttl_ms / 6;
    if (serve_requests) serve_raise_request();
    guard_local_leases();
    for (int i = 0; i < shared->npool; ++i) {
        PoolEntry* e = &shared->pool[i];
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        uint32 state = e->state;
        int64 now = mono_ms();
        bool claimed = false;  // since the last pass
        if (state == kLeased) {
            // Idle is measured on the word: a lease on which nothing was claimed for
            // cosid.pool_idle_timeout (and not since the last pass) goes back to the store,
            // whoever is attached to it.
            uint64 w = pg_atomic_read_u64(&e->word);
            if (w != e->observed_word) {
                e->observed_word = w;
                e->idle_since = now;
                claimed = true;
            }
        }
        bool release = e->release_requested;
        bool releasing = e->releasing;
        int64 idle_since = e->idle_since;
        int64 next_renew = e->next_renew_at;
        int64 retry_at = e->retry_at;
        int64 request_seen_at = e->request_seen_at;
        LWLockRelease(shared->lock);

        if (state == kWanted && now - request_seen_at > kAbandonedRequestMs) {
            // Its backends stopped waiting (cancelled, terminated): do not keep acquiring.
            LWLockAcquire(shared->lock, LW_EXCLUSIVE);
            if (e->state == kWanted && e->request_seen_at == request_seen_at) drop_request_locked(e);
            LWLockRelease(shared->lock);
        } else if (state == kWanted) {
            if (retry_at <= now) requests_due = true;
            else sleep_ms = Min(sleep_ms, static_cast<long>(retry_at - now));
        } else if (state == kDraining) {
            // Free once no backend is in the middle of a claim on it (state.hpp); a backend
            // stopped there (SIGSTOP) keeps it draining, and new leases use other entries.
            if (!entry_has_hazard(i)) {
                LWLockAcquire(shared->lock, LW_EXCLUSIVE);
                if (e->state == kDraining) e->state = kEmpty;
                LWLockRelease(shared->lock);
            } else {
                sleep_ms = Min(sleep_ms, 100L);  // a backend stopped mid-claim: not urgent
            }
        } else if (state == kLeased && releasing) {
            if (next_renew <= now) {
                if (release_prepare(i, &due[ndue])) ndue++;
                next_renew = now + 100;
            }
            sleep_ms = Min(sleep_ms, static_cast<long>(Max(next_renew - now, 1)));
        } else if (state == kLeased &&
                   (release || (!claimed && now - idle_since >= idle_limit_ms(e->observed_word)))) {
            if (release_prepare(i, &due[ndue])) ndue++;
        } else if (state == kLeased) {
            if (next_renew <= now) {
                if (renew_prepare(i, &due[ndue])) ndue++;
                next_renew = now + 100;
            } else if (next_renew <= now + early_ms) {
                soon[nsoon++] = i;
            }
            sleep_ms = Min(sleep_ms, static_cast<long>(Max(next_renew - now, 1)));
            sleep_ms = Min(sleep_ms, static_cast<long>(Max(idle_since + setting_pool_idle_ms - now, 10)));
        }
    }
    if (ndue > 0) {
        // Static slots have no store to share a transaction with: renewed when due only.
        for (int k = 0; k < nsoon; ++k)
            if (!shared->pool[soon[k]].is_static && renew_prepare(soon[k], &due[ndue])) ndue++;
    }
    run_due_leases(due, ndue);
    // Then the store's failovers, orphans and requests, for at most one store bound in all.
    check_store_failovers();
    sweep_orphans(pass_start + store_bound_ms());
    if (orphan_sweep_pending && mono_ms() >= next_orphan_sweep_at) sleep_ms = 0;  // not done yet
    if (!serve_requests || !requests_due) return Max(sleep_ms, 0L);
    bool served = false;
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
// statement itself by a timer that run_spi arms, or by the remote server's settings).  Re-applied when a reload
// changes cosid.ttl; a remote store connection is reopened to take the new bound.
void apply_store_timeouts() {
    static int applied_ttl_ms = -1;
    if (setting_ttl_ms == applied_ttl_ms) return;
    char timeout[32];
    snprintf(timeout, sizeof(timeout), INT64_FORMAT, store_bound_ms());
    SetConfigOption("lock_timeout", timeout, PGC_SUSET, PGC_S_OVERRIDE);
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
    int64 until = mono_ms() + wait_ms;
    while (!ShutdownRequestPending && mono_ms() < until) {
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, until - mono_ms(),
                        PG_WAIT_EXTENSION);
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
    if (shared == nullptr || LWLockHeldByMe(shared->lock)) return;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (shared->keeper_latch == &MyProc->procLatch) shared->keeper_latch = nullptr;
    if (shared->keeper_pid == MyProcPid) shared->keeper_pid = 0;
    LWLockRelease(shared->lock);
}

}  // namespace

extern "C" PGDLLEXPORT void cosid_keeper_main(Datum arg) {
    // Never registered in binary-upgrade mode (register_keeper); should a keeper start there
    // anyway, it leaves before connecting, with exit code 0 so that it is not started again.
    if (IsBinaryUpgrade) {
        ereport(LOG, (errmsg("cosid keeper: binary-upgrade mode (pg_upgrade): exiting without connecting")));
        proc_exit(0);
    }
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
    pqsignal(SIGINT, COSID_SIG_IGN);  // taken only during store calls (store.cpp, begin_store_call)
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
            next_ready_check_at = mono_ms() + 100;
            StoreError err;
            bool ready = store_extension_ready(&err);
            LWLockAcquire(shared->lock, LW_EXCLUSIVE);
            shared->keeper_ready = ready;
            // What a waiting cosid_next() reports at once instead of waiting out its timeout.
            // 1: the extension is missing here; 2: the remote store refused (a transient error
            // there, a timeout or a lost connection, is not known to last: 0, callers wait).
            shared->keeper_problem = ready ? 0
                                     : err.sqlerrcode == COSID_KEEPER_UNAVAILABLE ? 3
                                     : strstr(err.message, "cosid.database") != nullptr ? 1
                                     : transient(err.sqlerrcode) ? 0 : 2;
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
        } else {
            sleep_ms = keeper_pass(true);
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

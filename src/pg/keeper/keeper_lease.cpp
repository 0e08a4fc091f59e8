// The keeper's leases: each renewed every ttl/3 (with backoff on failure), released in order
// with the exact last timestamp its issue word holds, alone or with the others due in the
// same pass in one store transaction; a lease found gone ends here.
#include "keeper_parts.hpp"

#include "fork.hpp"
#include "../store/store_history.hpp"
#include "../shmem/pool.hpp"

#include "clock_step.hpp"
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

// A lease is ended by the keeper only: after a release the store confirmed, or when it was
// found lost.  A lost one is remembered so that its generators fail once (ZC001).
void end_lease(PoolEntry* e, bool lost) {
    if (lost) remember_lost_locked(pg_atomic_read_u64(&e->generation));
    if (e->raised_out) {
        // Its successor's idle time counts from now, when its backends move to it
        // (keeper_pass keeps it from going idle while this one served).
        int64 now = mono_ms();
        for (int j = 0; j < shared->npool; ++j) {
            PoolEntry* o = &shared->pool[j];
            if (o != e && o->state == kLeased && strcmp(o->ns, e->ns) == 0) o->idle_since = now;
        }
    }
    end_lease_locked(e);
}

// A window from the store is used only above what other stores granted this instance on its
// slot (cosid.history, src/pg/store/store_history.hpp), and only once its ceiling is recorded there:
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
    if (e->raised_out) {  // nothing of it is left in the store (renew_apply): it just ends
        end_lease(e, false);
        LWLockRelease(shared->lock);
        ConditionVariableBroadcast(&shared->cv);
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

// Whether the store's raise after a failover or a restore freed this lease (the rule:
// src/core lease_model.hpp, freed_by_raise).  Its backends then go on to its ceiling without
// an error.  A lease revoked or taken over without a raise since is lost (ZC001); so is one
// whose store cannot be read.  Asked only when a renewal or release finds the lease gone.
bool freed_by_raise(int64 seen_at) {
    int64 raised_at = 0, max_tolerance = 0;
    StoreError err;
    return seen_at > 0 && store_raised_at(&raised_at, &max_tolerance, &err) &&
           cosid::freed_by_raise(seen_at, raised_at > 0 ? std::optional<int64>(raised_at) : std::nullopt,
                                 max_tolerance);
}

bool release_apply(const DueLease& d, bool ok, const StoreResult& r, const StoreError& err) {
    PoolEntry* e = &shared->pool[d.i];
    if (ok && r.found) {
        count(shared->stats.releases);
        history_released(d.ns, e->store_id, d.slot, d.last);  // (only the keeper writes store_id)
    }

    // The lease was gone already (expired and taken, or revoked) unless an earlier attempt
    // may have done the release itself: then it was lost while backends issued on it.  Freed
    // by the store's raise, it is counted but its backends get no error (renew_apply).
    // (release_uncertain is the keeper's own: read without the lock.)
    bool gone = ok && !r.found && !e->release_uncertain;
    bool raised = gone && freed_by_raise(e->store_seen_at);
    bool lost = gone && !raised;
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
    if (raised) {
        health_lease_freed();
        ereport(LOG,
                (errmsg("cosid: lease on slot %d of namespace \"%s\" was freed by the store's raise (a failover or "
                        "a restore) before its release",
                        d.slot, d.ns)));
    }
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

// A lease the store's raise freed (raised_out) has nothing to renew: it ends once its ids
// reach its ceiling (a claim now finds no room there; a backend waiting at the ceiling asked
// for this pass), and its backends move to a new lease, whose window the raise put above this
// one.  Until then it is looked at every second.  Under the lock, exclusive.
bool end_raised_out_locked(PoolEntry* e) {
    Claim c = claim(pg_atomic_read_u64(&e->word), entry_layout(*e), e->slot, entry_window(*e), clock_ms(),
                    setting_max_borrow_ms);
    if (c.status == NextStatus::Issued || c.status == NextStatus::SequenceExhausted ||
        c.status == NextStatus::BeforeFloor) {
        e->next_renew_at = mono_ms() + 1000;
        return false;
    }
    ereport(LOG, (errmsg("cosid: the window on slot %d of namespace \"%s\" that the store's raise freed is used up "
                         "to its ceiling (%s); its backends move to a new lease",
                         e->slot, e->ns, ms_to_text(static_cast<int64>(pg_atomic_read_u64(&e->ceiling))))));
    end_lease(e, false);
    return true;
}

// A lease the store's raise freed goes on to its ceiling, and nothing renews it: its successor
// is asked for at once, so that it is granted, opens (its floor lies above the raised one: it
// holds no tick for up to max_ttl + 2 x max_tolerance - (ttl + tolerance)) and is renewed
// while the freed one still issues.  Asked only once the freed one was used up, an outage of
// the store within a ttl of the raise (a failover soon after a switchover) stopped ids until
// the store was back and the new window had opened.  Under the lock, exclusive.
void want_successor_locked(const PoolEntry* freed) {
    for (int j = 0; j < shared->npool; ++j) {
        const PoolEntry* o = &shared->pool[j];
        if (o == freed || strcmp(o->ns, freed->ns) != 0) continue;
        if (o->state == kWanted || o->state == kAcquiring) return;  // asked for already
        if (o->state == kLeased && !o->raised_out && !o->releasing && !o->release_requested) return;
    }
    int r = request_entry_locked(freed->ns);
    if (r < 0) return;  // the pool is full: its backends ask once the freed lease is used up
    // Kept without waiters for as long as the freed lease can last (its ceiling is at most
    // ttl + tolerance past its last renewal); its backends join it as waiters once it ends.
    shared->pool[r].keeper_wants_until = mono_ms() + setting_ttl_ms + kAbandonedRequestMs;
}

// Under the lock: whether a lease the raise freed still serves `e`'s namespace.  Its successor
// is not idle then, whoever claims on it yet.
bool freed_lease_serves_locked(const PoolEntry* e) {
    for (int j = 0; j < shared->npool; ++j) {
        const PoolEntry* o = &shared->pool[j];
        if (o != e && o->state == kLeased && o->raised_out && strcmp(o->ns, e->ns) == 0) return true;
    }
    return false;
}

// False for a static slot (renewed here, without the store) and a lease the raise freed.
bool renew_prepare(int i, DueLease* d) {
    PoolEntry* e = &shared->pool[i];
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (e->raised_out) {
        bool ended = e->state == kLeased && end_raised_out_locked(e);
        LWLockRelease(shared->lock);
        if (ended) ConditionVariableBroadcast(&shared->cv);
        return false;
    }
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

namespace {

// Under the lock: a renewal the store confirmed (and cosid.history recorded) into entry e.
// Returns whether the window is to be left (released in order, see below); *reach is then
// how far the store's grant reaches.  (renew_apply's branch, split out to keep it short: the
// same statements in the same order.)
bool renewed_locked(const DueLease& d, PoolEntry* e, const StoreResult& r, int64 done, int64* reach) {
    e->expires_at = r.expires_at;
    if (r.store_now > e->store_seen_at) e->store_seen_at = r.store_now;
    // The ceiling: only the keeper writes it, only upward, and only now that the store committed
    // it and cosid.history recorded it (renew_apply); a backend that reads the older, lower one
    // only waits.
    if (static_cast<uint64>(r.ceiling) > pg_atomic_read_u64(&e->ceiling))
        pg_atomic_write_u64(&e->ceiling, static_cast<uint64>(r.ceiling));
    e->next_renew_at = done + cosid::renew_after_ms(setting_ttl_ms, r.expires_at, r.store_now, e->floor,
                                                    static_cast<int64>(pg_atomic_read_u64(&e->ceiling)), e->unit_ms);
    e->backoff_ms = 0;
    // A window its ids used up further ahead than this renewal could reach, or whose next
    // tick lies further ahead of the clock than cosid.max_borrow allows (the clock stepped
    // back since it was granted): released in order, and its backends go on with a slot
    // whose window starts now instead of waiting for the clock to catch up
    // (src/core/clock_step.hpp).
    cosid::Layout layout = entry_layout(*e);
    *reach = Min(r.expires_at, r.store_now + static_cast<int64>(setting_ttl_ms)) + d.tol;
    bool leave = !e->release_requested && !e->releasing &&
                 cosid::clock_step::leave_lease(
                     layout, pg_atomic_read_u64(&e->word), static_cast<int64>(pg_atomic_read_u64(&e->ceiling)), *reach,
                     clock_ms(), setting_max_borrow_ms, cosid::clock_step::patience_ms(layout, store_bound_ms()));
    if (leave) {
        e->release_requested = true;
        e->next_renew_at = 0;
    }
    return leave;
}

// After the lock: the counters, the health notes and the log of a renewal's outcome
// (renew_apply's, split out to keep it short).
void note_renewal(const DueLease& d, bool ok, bool to_raise, const StoreResult& r, const StoreError& err, int64 before,
                  int64 after) {
    if (ok && r.found) {
        count(shared->stats.renewals);
        health_renewal(true);
        warn_if_grant_shortened(r.expires_at, r.store_now);
        health_store_clock(r.store_now, before, after, d.tol);
        if (outage.failures > 0) {
            ereport(LOG,
                    (errmsg("cosid: renewals succeed again after " UINT64_FORMAT " failed ones in " INT64_FORMAT " ms",
                            outage.failures, mono_ms() - outage.since)));
            outage.failures = 0;
        }
    } else if (ok && to_raise) {
        health_lease_freed();  // (cosid_stats().leases_freed: no caller gets an error)
        ereport(LOG,
                (errmsg("cosid: lease on slot %d of namespace \"%s\" was freed by the store's raise (a failover or "
                        "a restore)",
                        d.slot, d.ns),
                 errdetail("Every next window on its slot starts above its ceiling: its backends issue up to "
                           "that ceiling, then move to a new lease, asked for now, without an error.")));
        wake_keeper();  // (the new lease's request: served in the next pass)
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
}

}  // namespace

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
    // slot's next window starting above anything this lease can issue (its ceiling).  Nothing
    // is wrong with its ids, nor with the rest of its window: its backends go on up to the
    // ceiling, then move to a new lease (raised_out), without an error and without a wait.
    bool to_raise = ok && !r.found && freed_by_raise(e->store_seen_at);
    bool leave = false;
    int64 reach = 0;
    int64 done = mono_ms();
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (ok && r.found) {
        leave = renewed_locked(d, e, r, done, &reach);
    } else if (ok && to_raise) {
        e->raised_out = true;
        // Asked for even when this one ends at once (an empty window: the successor of a lease
        // an earlier raise freed, freed in turn before it opened): that earlier lease may still
        // serve, and its backends need the next successor before its ceiling.
        end_raised_out_locked(e);
        want_successor_locked(e);
    } else if (ok) {
        // Fence or incarnation changed: someone took the slot or it was revoked.
        end_lease(e, true);
    } else {
        e->backoff_ms = next_backoff_ms(e->backoff_ms);
        e->next_renew_at = done + e->backoff_ms;
    }
    LWLockRelease(shared->lock);

    if (leave) {
        int64 ahead = static_cast<int64>(pg_atomic_read_u64(&e->ceiling)) - reach;
        ereport(LOG, (errmsg("cosid: the window on slot %d of namespace \"%s\" is used up " INT64_FORMAT
                             " ms ahead of what the lease store grants now, or its ids stand further ahead of the "
                             "clock than cosid.max_borrow allows; it is released at its last id",
                             d.slot, d.ns, ahead),
                      errdetail("The clock stepped back after the window was granted. Its backends go on with a "
                                "slot whose window starts now instead of waiting for the clock.")));
        wake_keeper();
    }
    note_renewal(d, ok, to_raise, r, err, before, after);
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

// Leases in the order of the store's primary key (namespace, slot): the rows of a pass are
// then locked in the order cosid_revoke_role locks a role's, and neither waits for the other
// while holding a row the other needs.
static int due_order(const void* a, const void* b) {
    const DueLease* x = static_cast<const DueLease*>(a);
    const DueLease* y = static_cast<const DueLease*>(b);
    int c = strcmp(x->ns, y->ns);
    return c != 0 ? c : (x->slot > y->slot) - (x->slot < y->slot);
}

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
    qsort(due, n, sizeof(DueLease), due_order);
    LeaseCall* calls = static_cast<LeaseCall*>(palloc(sizeof(LeaseCall) * n));
    StoreResult* results = static_cast<StoreResult*>(palloc(sizeof(StoreResult) * n));
    for (int k = 0; k < n; ++k) calls[k] = LeaseCall{due[k].release, due[k].ns, due[k].slot, due[k].fence, due[k].last};
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
                                 "transaction each",
                                 err.message),
                          errhint("ALTER EXTENSION cosid UPDATE on the lease store.")));
        }
        for (int k = 0; k < n; ++k) send_one(due[k]);
        return;
    }
    for (int k = 0; k < n; ++k) {
        if (due[k].release)
            release_apply(due[k], ok, results[k], err);
        else
            renew_apply(due[k], ok, results[k], err, before, after);
    }
}


}  // namespace cosid::pg::keeper

// Queries of the pool of leases under SharedState::lock (pool.hpp).
#include "pool.hpp"

#include "issue_word.hpp"
#include "../settings.hpp"
#include "state.hpp"

namespace cosid::pg {

// Under the lock: the instance's open lease of `ns`, or -1.  A lease the store's raise freed
// (raised_out) that still has room below its ceiling comes first (the oldest, should there be
// two): its successor's window lies above the raised floor, above every id of it, and a
// backend that took the successor while the freed lease still served others would make their
// next ids smaller than ids committed before them (every id of an instance is larger than
// every id its connections committed before the id's statement began: docs/concepts.md).
// Then the newest lease whose window holds a tick, else the newest: until its successor's
// window holds a tick (it is empty until the store's clock comes near the raised floor:
// keeper_lease.cpp), a freed lease at its ceiling is still the one its backends wait on.
int active_entry_locked(const char* ns) {
    int best = -1;
    int rank = -1;  // 2: freed with room, 1: holds a tick, 0: other
    uint64 best_generation = 0;
    for (int i = 0; i < shared->npool; ++i) {
        PoolEntry* e = &shared->pool[i];
        if (e->state != kLeased || e->releasing || e->release_requested || strcmp(e->ns, ns) != 0) continue;
        uint64 g = pg_atomic_read_u64(&e->generation);
        uint64 w = pg_atomic_read_u64(&e->word);
        if (g == 0 || issue_word::closed(w)) continue;
        ClaimWindow window = entry_window(*e);
        int r = !cosid::holds_no_tick(window, e->unit_ms) ? 1 : 0;
        if (r == 1 && e->raised_out &&
            claim(w, entry_layout(*e), e->slot, window, clock_ms(), setting_max_borrow_ms).status !=
                NextStatus::PastCeiling)
            r = 2;
        if (r > rank || (r == rank && (r == 2 ? g < best_generation : g > best_generation))) {
            best = i;
            rank = r;
            best_generation = g;
        }
    }
    return best;
}

// Under the lock: the request entry for `ns` that every waiter shares, posted when there is
// none; -1 when the pool is full.  (The keeper posts one too: keeper_lease.cpp.)
int request_entry_locked(const char* ns) {
    int in_use = 0;  // namespaces leased or asked for: at most cosid.max_namespaces
    for (int i = 0; i < shared->npool; ++i) {
        PoolEntry* e = &shared->pool[i];
        if ((e->state == kWanted || e->state == kAcquiring) && strcmp(e->ns, ns) == 0) return i;
        // (a lease the raise freed is ending: its namespace's successor counts instead)
        if (e->state == kWanted || e->state == kAcquiring || (e->state == kLeased && !e->releasing && !e->raised_out))
            in_use++;
    }
    if (in_use >= setting_max_namespaces) return -1;
    for (int i = 0; i < shared->npool; ++i) {
        PoolEntry* e = &shared->pool[i];
        if (e->state != kEmpty) continue;
        memset(e->ns, 0, sizeof(e->ns));
        strlcpy(e->ns, ns, sizeof(e->ns));
        e->state = kWanted;
        e->request_id = ++shared->next_request_id;
        e->waiters = 0;
        e->request_seen_at = mono_ms();
        e->retry_at = 0;
        e->keeper_wants_until = 0;
        e->earliest_expiry = 0;
        e->error[0] = '\0';
        e->error_code = 0;
        e->refusals = 0;
        e->refused_at = 0;
        e->tries = 0;
        e->last_error[0] = '\0';
        e->users = 0;
        e->release_requested = false;
        e->releasing = false;
        return i;
    }
    return -1;
}

}  // namespace cosid::pg

// The lease keeper's parts (src/pg/keeper/keeper.cpp): what its files share.  keeper.cpp holds the
// worker's loop and the pass over the pool; keeper_request.cpp serves the backends' requests
// (acquires, cosid_adopt's raise, orphans); keeper_lease.cpp renews and releases leases.
#pragma once
#include "lease_model.hpp"
#include "../pg.hpp"
#include "../shmem/state.hpp"
#include "../store/store.hpp"

namespace cosid::pg::keeper {

// A waiting backend refreshes its request every 50 ms; one unseen for this long is abandoned.
constexpr int64 kAbandonedRequestMs = 2000;

// keeper.cpp
int64 next_backoff_ms(int64 backoff_ms);
bool transient(int sqlerrcode);

// keeper_request.cpp
void serve_request(int i, int64 now);
bool serve_due_batch(int64 now);
void request_failed_locked(PoolEntry* e, const char* message, const char* hint, int code, int64 done);
bool request_abandoned_locked(const PoolEntry* e, int64 now);
void serve_raise_request();
void sweep_orphans(int64 deadline);
bool orphan_sweep_due();  // a sweep is not done, and may go on now
void request_orphan_sweep();
void warn_if_grant_shortened(int64 expires_at, int64 store_now);

// keeper_lease.cpp
void end_lease(PoolEntry* e, bool lost);
bool freed_lease_serves_locked(const PoolEntry* e);
bool history_applied(const char* ns, const char* store_id, const cosid::Layout& layout, int32 slot, int64 ceiling,
                     int64* floor, StoreError* err);

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

// False when there is nothing to send: not leased (any more), or a static slot (done there).
bool release_prepare(int i, DueLease* d);
bool release_apply(const DueLease& d, bool ok, const StoreResult& r, const StoreError& err);
bool release_entry(int i);
bool renew_prepare(int i, DueLease* d);
void renew_apply(const DueLease& d, bool ok, const StoreResult& r, const StoreError& store_err, int64 before,
                 int64 after);
void send_one(const DueLease& d);
void run_due_leases(DueLease* due, int n);

}  // namespace cosid::pg::keeper

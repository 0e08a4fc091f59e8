// The keeper's client of the SQL store: each call is one transaction of its own, so a lease
// change commits whatever any user transaction does.  Only the keeper calls these.
#pragma once
#include "../pg.hpp"
#include "store_result.hpp"

#include <optional>

namespace cosid::pg {

// The store time of the store's last raise (cosid.store_state.raised_at_ms; 0: none) and its
// max_tolerance: a renewal that found its lease gone asks whether a raise freed it
// (src/core lease_model.hpp, freed_by_raise).
bool store_raised_at(int64* raised_at_ms, int64* max_tolerance_ms, StoreError* err);
// The extension is in cosid.database (and on the remote store).  A local store on a Citus
// worker is refused (ZC006, with a hint): it is not the cluster's store (citus.hpp).
bool store_extension_ready(StoreError* err);
// The Citus guard alone, for a local store: false (ZC006 in err) on a Citus worker.
bool store_local_guard(StoreError* err);
// Never returns a live lease, not even one of this incarnation (see cosid.acquire).
bool store_acquire(const char* ns, const char* owner_key, const char* incarnation, int64 ttl_ms, int preferred,
                   StoreResult* out, StoreError* err);
bool store_renew(const char* ns, int32 slot, const char* incarnation, int64 fence, int64 ttl_ms, StoreResult* out,
                 StoreError* err);
bool store_release(const char* ns, int32 slot, const char* incarnation, int64 fence, int64 last_issued,
                   StoreResult* out, StoreError* err);
// One lease's renewal or release in a keeper pass (store_lease_pass).
struct LeaseCall {
    bool release;
    const char* ns;
    int32 slot;
    int64 fence;
    int64 last_issued;  // release only
};
// Renews and releases `n` leases of this incarnation in one store transaction (cosid.lease_pass),
// each checked by the store as store_renew/store_release check it: results[k] answers calls[k]
// (found = false: the lease was lost).  A failure fails them all (one transaction).
bool store_lease_pass(const LeaseCall* calls, int n, const char* incarnation, int64 ttl_ms, StoreResult* results,
                      StoreError* err);
// Acquires in each of `n` namespaces for this incarnation in one store transaction
// (cosid.acquire_many, a store of 1.8 or later): results[k] answers namespaces[k] as
// store_acquire answers one (row = false: no answer came for it).  A failure fails them all
// (one transaction).
bool store_acquire_many(const char* const* namespaces, int n, const char* owner_key, const char* incarnation,
                        int64 ttl_ms, int preferred, StoreResult* results, StoreError* err);
// The first lease the store has for this incarnation after (after_ns, after_slot) in
// (namespace, slot) order: namespace_name, slot, fence and ceiling; row = false when none.
bool store_next_own_lease(const char* incarnation, const char* after_ns, int32 after_slot, StoreResult* out,
                          StoreError* err);
// The store's failover count (in `fence`), timeline (in `slot`) and whether it raises its
// floors on a new timeline (`ceiling` 1), from cosid.store_state.
bool store_read_state(StoreResult* out, StoreError* err);
// For cosid_health (cosid._store_health(), 1.5): max_ttl_ms in `fence`, max_tolerance_ms in
// `expires_at`, raise_floors_on_new_timeline in `found`, the store server's standbys in `slot`,
// its synchronous ones in `floor`, synchronous_standby_names set in `ceiling` (1), store_now,
// and in `next_floor` the other live incarnations holding leases with `owner_key`.
bool store_read_health(const char* owner_key, const char* incarnation, StoreResult* out, StoreError* err);
// With a remote store: copies the namespace's layout (as an acquire returned it) into this
// instance's cosid.namespace, or fails with 42P17 when a local definition differs.
bool store_sync_local_namespace(const char* ns, const StoreResult& layout, StoreError* err);
// The layout of `ns` in this instance's cosid.namespace (static slots; always SPI): the
// layout fields as an acquire returns them; row = false when it is not defined here.
bool store_local_namespace(const char* ns, StoreResult* out, StoreError* err);
// The database's copy of the static slots' ceilings (cosid.static_ceiling, cosid 1.5; always
// SPI).  `exists`: the catalog has it (false before ALTER EXTENSION cosid UPDATE to 1.5);
// `table_file`: its relation file node, which changes when the table is made again (DROP and
// CREATE EXTENSION) or emptied (TRUNCATE); `restoring`: a restore is under way (the mark its
// CREATE EXTENSION left is alone in cosid.store_state): nothing may be written to the table
// then, its COPY comes later and would meet this cluster's row (duplicate key).
bool store_static_ceiling_exists(bool* exists, int64* table_file, bool* restoring, StoreError* err,
                                 int lock_timeout_ms = 0);
// The largest ceiling other clusters recorded for the slot, and this cluster's (none: nullopt).
// `restoring`: a restore is under way (the mark CREATE EXTENSION left, the origin's record
// not come yet): no static window then.
bool store_static_recorded(const char* ns, int32 slot, std::optional<int64>* others_ms, std::optional<int64>* own_ms,
                           bool* restoring, StoreError* err, int lock_timeout_ms = 0);
// How many of `rows_json` ([{"ns":..,"slot":..,"ceiling":..}, ...]: the state file's windows and
// not-befores) this cluster's rows in cosid.static_ceiling do not cover (missing, or lower).
bool store_static_rows_missing(const char* rows_json, int64* missing, StoreError* err, int lock_timeout_ms);
// Records this cluster's ceiling of a static window there, durably on this server.
bool store_static_record(const char* ns, int32 slot, int64 ceiling_ms, StoreError* err, int lock_timeout_ms = 0);
// cosid_adopt: raises the namespace's not-before in the store (cosid.raise_floor), after the
// store checked that the caller's layout is its own; the new not-before in `floor`.
bool store_raise_floor(const char* ns, int64 floor_ms, int timestamp_bits, int slot_bits, int sequence_bits,
                       int64 epoch_ms, int unit_ms, StoreResult* out, StoreError* err);

// The store's own server (src/pg/keeper/fork.cpp), on a local store only.  A catalog older than 1.6
// records nothing (true).  store_issuer_start follows the timeline first: on a fork it fails
// with the store's ZC009.
bool store_issuer_start(const char* incarnation, StoreError* err);
// A store-only server's keeper: its own server issues nothing (any more), so a record of it
// left from before cosid.store_only was set is cleared, once the store is not a fork.
bool store_issuer_clear(StoreError* err);
// *pending: the local store records a declared copy (cosid.store_state.fork_pending in
// `reason`: a cosid.fork file, pg_upgrade's source, restored => true); false before 1.6.
bool store_fork_declared(char* reason, size_t size, bool* pending, StoreError* err);
// The forks this data directory keeps (history_forks_text), each declared to the local store
// unless acknowledged there (cosid._fork_check): *pending with the first one's reason while
// one is not acknowledged (the store then refuses every grant, ZC009).  *checked: false for
// a catalog before 1.7, which has no such check.
bool store_fork_check(const char* forks, char* reason, size_t size, bool* pending, bool* checked, StoreError* err);
// *recorded: false when the catalog is older than 1.6 and has nowhere to keep it.
// `id`: the fork's id in cosid.history (a 1.7 catalog declares it as cosid._fork_check does).
bool store_fork_mark(const char* id, const char* reason, bool* recorded, StoreError* err);

}  // namespace cosid::pg

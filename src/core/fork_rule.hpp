// Forks of an issuing server, and an issuer that changes its store: two rules about whose
// history a window is granted under.  Pure C++: no PostgreSQL headers.
//
// A store keeps the window rule for the issuers it knows: every issuer that leases from it.
// Two things put a second, unknown history beside it:
//
//  1. The store is copied while its own server issues ids from it (a local store, the
//     default).  The copy and the origin each believe they grant the same slots, and the
//     origin may go on on ANY slot (another namespace, a slot freed by its idle timeout): no
//     raise of the copy's floors keeps above an origin that is still running.  So a copy
//     that can be recognised grants nothing until an administrator says the origin stopped
//     (cosid_fork_acknowledge), and then raises from that time as a failover does.
//  2. An instance leases from another store than the one that granted its earlier windows
//     (cosid.database or cosid.store_dsn changed).  The new store knows nothing of what the
//     instance issued: the instance itself must remember it (a file in its data directory,
//     written before a window is used) and issue only above it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "layout.hpp"

namespace cosid {

// --- 1. forks (the SQL: cosid._fork_reason and cosid._follow_timeline) ---
// One record of cosid.store_state: the cluster and timeline the store last wrote on, whether
// its own server issues from it (issuer_incarnation set: a keeper runs there on this store;
// no stop clears it, since a stopped server may be started again), and whether a copy was
// declared (fork_pending).
struct StoreRecord {
    uint64_t system_identifier = 0;  // 0: the mark CREATE EXTENSION leaves in a restore
    uint32_t timeline = 0;
    bool issuer = false;
    bool fork_declared = false;
    // pg_upgrade's read of the server (cosid.store_state.upgrade_origin_*): the cluster and
    // timeline the server ran on then; 0: no read noted.
    uint64_t upgrade_origin_system = 0;
    uint32_t upgrade_origin_timeline = 0;
    // and that read is the one that made this cluster (its id in cosid.upgraded)
    bool upgrade_read_here = false;
};
enum class StoreHistory {
    Whole,          // one record, of here: grant as usual
    BeingRestored,  // only the restore's mark: grant nothing until the origin's record comes
    NewTimeline,    // a promotion or a recovery of a store nobody issued from here: raise (if on)
    Upgraded,       // pg_upgrade's new cluster, read on the timeline the store last wrote on: keep
    NewCluster,     // another cluster otherwise (pg_upgrade of a store that had not followed its
                    // timeline, a logical copy): raise (if on)
    Restored,       // a dump (several records) or no record: always raise
    Forked,         // a copy of a server that may still issue: grant nothing until acknowledged
};
// here_upgraded: this cluster is pg_upgrade's new cluster (its cosid.upgraded file).
StoreHistory classify_store(const std::vector<StoreRecord>& records, uint64_t here_system_identifier,
                            uint32_t here_timeline, bool here_upgraded);
bool store_grants(StoreHistory h);  // false for BeingRestored and Forked

// The next floor every slot gets when a fork is acknowledged: the origin stopped at
// stopped_ms (the administrator's word; never later than now), and its last grant then
// reached at most kReachCapMs past it (reach.hpp: its limits may have been raised after the
// copy), or what this copy's own limits show, if further.
int64_t fork_acknowledged_floor(std::optional<int64_t> stopped_ms, int64_t store_now_ms, int64_t max_ttl_ms,
                                int64_t max_tolerance_ms);

// --- 2. a change of store (the keeper: src/pg/store/store_history.cpp) ---
// What an instance was granted in one namespace: per store (cosid.store_state.store_id) and
// slot, the largest ceiling its windows there allowed, read with `layout`.
struct GrantedSlot {
    std::string store_id;
    int32_t slot;
    int64_t ceiling_ms;
};
struct GrantedNamespace {
    std::string ns;
    Layout layout;
    std::vector<GrantedSlot> slots;
    int64_t all_slots_ms = 0;  // a bound on every slot, carried from another layout
    // The largest ceiling on `slot` granted by any store but `except_store`, and all_slots_ms.
    int64_t bound(int32_t slot, const std::string& except_store) const;
    int64_t largest_id() const;  // -1 when nothing was granted
};
// The (exclusive) floor below which this instance must not issue on `slot` in a window that
// store `store_id` granted with `layout`.  A store keeps the window rule for what it granted
// itself, so only the other stores' grants count: the slot's largest ceiling under them (same
// layout); with another layout, every new id must exceed every id the earlier windows allowed
// (the largest of them, read in the new layout, as cosid_adopt reads a column's).
int64_t floor_after_store_change(const GrantedNamespace* before, const std::string& store_id, const Layout& layout,
                                 int32_t slot);
// Records a window's ceiling (the largest per store and slot).  Returns whether anything
// changed: the file must then be written before the window is used.
bool record_grant(GrantedNamespace* g, const std::string& store_id, const Layout& layout, int32_t slot,
                  int64_t ceiling_ms);
// A release in order: the window's word is closed and its exact last timestamp is known, so
// nothing on `slot` from `store_id` lies above last_ms; the record comes down to it (a later
// move to another store then waits only for what was issued, not for the window's ceiling).
// Returns whether anything changed.
bool record_release(GrantedNamespace* g, const std::string& store_id, int32_t slot, int64_t last_ms);

// The history file (cosid.history in the data directory):
//   # cosid: what this instance was granted per namespace and by which store; do not edit
//   cosid_history_version 1
//   timeline 2                               (optional: local_timeline)
//   namespace orders <timestamp_bits> <slot_bits> <sequence_bits> <epoch_ms> <unit_ms> <all_slots_ms>
//   slot orders <store_id> 3 1733250000123
//   crc32c 1a2b3c4d
// local_timeline: the WAL timeline on which this data directory last issued from a store of its
// own server (0: never).  A data directory that finds another one at start was promoted or
// recovered: a copy of a server that issued, whatever store it uses now (fork.cpp).
//   fork tl-7716258636065961467-1-2 A promoted or recovered copy ...    (any number)
// A fork this data directory is a copy in (a cosid.fork file, a new timeline): kept for good, so
// that every store the server uses refuses until the fork is acknowledged there, whichever
// database or file it looks at later (src/pg/keeper/fork.cpp).  The id names the fork in a store's
// cosid.fork_declared; the reason is one line of text.
struct ForkSeen {
    std::string id;
    std::string reason;
};
bool valid_fork_id(const std::string& id);
std::string fork_reason_line(const std::string& reason);  // printable, one line, at most 400 bytes
std::string serialize_history(const std::vector<GrantedNamespace>& h, uint32_t local_timeline = 0,
                              const std::vector<ForkSeen>& forks = {});
// Nothing when it parsed; else why not (the file is then refused, never guessed at).
std::optional<std::string> parse_history(const std::string& text, std::vector<GrantedNamespace>* out,
                                         uint32_t* local_timeline = nullptr, std::vector<ForkSeen>* forks = nullptr);

}  // namespace cosid

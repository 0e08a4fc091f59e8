// The world the exhaustive checker explores: issuers (servers that issue ids), lease stores,
// their clocks and files, and every id issued so far.  The rules come from src/core (the
// code the extension runs); where a rule lives only in SQL (sql/cosid--1.0.sql and its update
// scripts) the explorer mirrors it in moves.cpp and names the SQL function beside it.
//
// Everything is small on purpose, so that every interleaving up to the bound can be tried:
// one namespace of 2 slots and 2 sequence values per tick (the sequence runs out at once, so
// borrowing past the clock happens), ttl 2, tolerance 1, max_ttl 2, max_tolerance 1, a static
// window 2 ahead, times 0..kMaxTime.  Units are abstract ticks of 1 ms.
//
// The reach cap (src/core/reach.hpp) is scaled to these times: the model's cap is kModelReachCap
// ticks, and each tick stands for kScale ms when the model calls reach.hpp's functions and
// fork_acknowledged_floor (so a cap of 120 s is 8 ticks, max_tolerance's cap 2 and
// static_ahead's cap 4).  The limits may change (the move family "limits"): max_ttl 1..6,
// max_tolerance 1..2, cosid.static_ahead 2 or 6 (used: 4), within the scaled cap.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fork_rule.hpp"
#include "lease_model.hpp"
#include "layout.hpp"
#include "reach.hpp"

namespace model {

constexpr int kIssuers = 3;  // I0, I1, and I2: the slot a fork of I0 (a copy of its data directory) starts in
// S0 (I0's own server: a local store), S1 (a standalone store), S2 (a fork's copy of S0), S3 (the
// fork's copy of a second database of I0's server, where cosid is installed too: "databases" only)
constexpr int kStores = 4;
constexpr int64_t kTtl = 2, kTolerance = 1, kMaxTtl = 2, kMaxTolerance = 1;
constexpr int64_t kRogueTtl = 4;      // a keeper login asking for a longer lease than max_ttl
constexpr int64_t kStaticAhead = 2;   // cosid.static_ahead
constexpr int64_t kMaxBorrow = 2;     // cosid.max_borrow for static windows with a state file
constexpr int kMaxTime = 12;
// The reach cap in ticks, and the ms a tick stands for when the cap's functions are called.
constexpr int64_t kModelReachCap = 8;
constexpr int64_t kScale = cosid::kReachCapMs / kModelReachCap;
static_assert(kScale * kModelReachCap == cosid::kReachCapMs && cosid::kMaxToleranceCapMs % kScale == 0 &&
                  cosid::kStaticAheadCapMs % kScale == 0,
              "the model's cap must scale the real one exactly");
// The limits a store may be set to (cosid_store_settings), each checked with limits_within_cap:
// max_ttl + 2 x max_tolerance <= the cap.  The table of a store is made with the widest of them;
// the store's current max_ttl cuts every grant (LeaseTable::granted_ttl's rule, cosid.acquire).
constexpr int64_t kWideMaxTtl = 6, kWideMaxTolerance = 2;
// cosid.ttl of a keeper in the bounds with limit changes: above max_ttl, so that a raise of
// max_ttl is used at once (the operator raised both).
constexpr int64_t kLongTtl = 4;
constexpr int64_t kStaticAheadRaised = 6;  // a cosid.static_ahead above the cap (used: the cap)
constexpr int kLeaseCap = 1;  // live leases per store role and namespace, in the tenant bounds
constexpr int kMinIssuerClock = -2, kMaxIssuerClock = 2;
// The store's clock moves within max_tolerance (0..1): the raise after a lost history covers a
// store clock that moves back by at most max_tolerance (docs/failover.md), and no more.
constexpr int kMinStoreClock = 0, kMaxStoreClock = 1;

cosid::Layout layout_of(int version);  // 0: as made; 1: after the layout edit (epoch moved)
cosid::StoreLimits limits();
// reach.hpp's functions and fork_acknowledged_floor, called in ms (x kScale) on the model's ticks.
bool within_cap(int64_t max_ttl, int64_t max_tolerance);
int64_t static_ahead_used(int64_t setting);
int64_t unseen_history_reach(int64_t visible_reach);
int64_t fork_ack_floor(int64_t stopped, int64_t store_now, int64_t max_ttl, int64_t max_tolerance);

// The rules a run may switch off (--without NAME): each closes one path to a duplicate.
enum Rule : int {
    R_WINDOW,          // a generator issues only floor < t <= ceiling (issue_word claim)
    R_NEXT_FLOOR,      // a new window starts at the slot's next_floor (LeaseTable::acquire)
    R_FENCE,           // a renewal matches incarnation and fence (LeaseTable::renew)
    R_COMMIT,          // a renewal whose commit failed is a failure, not a new ceiling
    R_LIVE_REGRANT,    // a live lease is never handed back, not to its own incarnation (slot_preference)
    R_FLUSH,           // the keeper flushes the store's commit before using it (synchronous_commit = off)
    R_RAISE_FAILOVER,  // a store on a new timeline raises every floor (classify_store, raise_after_lost_history)
    R_RAISE_RESTORE,   // a store restored from a dump raises every floor
    R_RAISE_CLUSTER,   // a store on a new cluster (pg_upgrade) raises every floor
    R_RESTORE_MARK,    // a store being restored grants nothing before the origin's record (BeingRestored)
    R_ARRIVE_RAISED,   // lease rows arriving after the raise are raised (cosid._lease_arrives_raised)
    R_MAX_TTL,         // no grant longer than max_ttl (StoreLimits, granted_ttl)
    R_DROP_GUARD,      // DROP EXTENSION refused while a row reaches past now (store_may_be_dropped)
    R_FORGET_GUARD,    // DELETE / namespace made again refused while a row reaches past now
    R_FIRST_FLOOR,     // a namespace made after a raise starts at raised_at + margin (namespace_first_floor)
    R_LAYOUT_GUARD,    // a namespace's layout never changes (namespace_change_refused)
    R_ROLE_GUARD,      // a lease is released only by the store role that acquired it (cosid._refuse_other_role)
    R_FORK_DETECT,     // a copy of an issuing server's store grants nothing until acknowledged (Forked)
    R_RECORD_AT_START, // the keeper records its server when it finds its store ready, not at its first id
    R_RECORD_KEPT,     // a clean stop does not clear the record
    R_FORK_MARKER,     // pg_upgrade leaves cosid.fork in the old data directory
    R_STORE_HISTORY,   // after a change of store, windows start above what other stores granted (cosid.history)
    R_STATIC_DURABLE,  // a static ceiling is durable in the state file before it is used
    R_STATIC_FLOOR,    // a static window starts above the file's ceiling (static_window_floor)
    R_STATIC_NOFILE_BORROW,  // without a state file, no borrowing ahead of the clock (static_borrow_ms)
    R_STATIC_NOFILE_START,   // without a state file, the first window starts above the start's tick
    R_STATIC_TIMELINE, // a static slot on another timeline than its file's is refused
    R_STATIC_ROWS,     // a static window starts above other clusters' cosid.static_ceiling rows
    R_SWITCH_TO_STATIC,// a slot made static starts above the store's windows on it
    R_SWITCH_TO_LEASED,// a leased window starts above the static ceilings recorded for its slot
    R_UPGRADE_NOTE,    // pg_upgrade's new cluster keeps the floors only when read on its store's timeline
    R_REACH_CAP,       // a raise after unseen history (fork acknowledged, dump restored) covers the cap (unseen_history_reach_ms)
    R_FORK_DATADIR,    // a fork belongs to the data directory: every local store refuses until acknowledged there
    R_TENANT_LOCK,     // no lock on the acquire path can be taken by a login with no grants
    R_LEASE_CAP,       // a store role holds at most kLeaseCap live leases per namespace
    R_LEASE_CAP_RENEW, // a renewal that revives an expired lease counts against the cap too
    R_FIRST_FLOOR_CAP, // a namespace made after a raise starts above it by that raise's margin (the cap), not the limits'
    R_DROP_RAISE,      // DROP EXTENSION refused while a lost history is unfollowed or its raise reaches past now
    R_LAZY_RAISE,      // a free row the (lazy) raise left alone takes it when next acquired (LeaseTable::acquire)
    R_COUNT
};
const char* rule_name(int r);
const char* rule_story(int r);  // one line: what the rule closes

// Every move a bound without --only explores: all but the families explored only in bounds of
// their own (Family: limits, databases, tenants).
constexpr unsigned kOldFamilies = (1u << 14) - 1;

struct Config {
    int issuers = 2;             // I0, I1 (a fork adds I2 if forks are on)
    bool standalone_s1 = true;   // S1 exists from the start, a standalone store
    bool central = false;        // I0 and I1 both lease from S1, a store of its own server (S0 unused)
    bool ns_absent = false;      // the stores start without the namespace (cosid_namespace_create is a move)
    bool static_no_file = false; // static slots without a state file (cosid.state_file = '')
    bool static_start = false;   // I0 starts on static slot 0 instead of leasing
    unsigned families = kOldFamilies;  // which moves are enabled (Family bits)
    // A named start for a tooth: moves of the model applied before the search (initial_world),
    // so that a finding deeper than a bound can afford is reached from a state the moves reach.
    std::string preset;
    bool without[R_COUNT] = {};
};

enum Family : unsigned {
    F_CORE = 1u << 0,        // acquire, renew, release, issue, time, expiry
    F_LOSS = 1u << 1,        // lost / late / rolled-back renewals, failed releases
    F_CRASH = 1u << 2,       // crash (kill -9, immediate shutdown) and the restart after it
    F_CLOCK = 1u << 3,       // issuer clock steps
    F_STORE_CLOCK = 1u << 4, // store clock steps
    F_FAILOVER = 1u << 5,    // standby behind, failover (sync / async), store crash
    F_RESTORE = 1u << 6,     // dump, restore whole / in pieces / data-only
    F_DROP = 1u << 7,        // DROP / CREATE EXTENSION
    F_NAMESPACE = 1u << 8,   // namespace made again, layout edit
    F_ROGUE = 1u << 9,       // a keeper login calling granted functions with any arguments
    F_FORK = 1u << 10,       // promoted standby / copy beside it, pg_upgrade, acknowledge
    F_MOVE = 1u << 11,       // an issuer moving to another store
    F_STATIC = 1u << 12,     // static windows, switch between leased and static
    F_RESTART = 1u << 13,    // clean stop (fast shutdown), start
    // Families only in bounds of their own (--only): they multiply every bound.
    F_LIMITS = 1u << 14,     // max_ttl / max_tolerance / static_ahead raised or lowered; a burst of ids
    F_DATABASES = 1u << 15,  // a copy started with a cosid.fork file; a copy switching between its two databases
    F_TENANT = 1u << 16,     // a login with no grants holding a lock; a keeper role hoarding slots
};
const char* family_name(unsigned f);

struct Lease {  // the keeper's pool entry (shared memory)
    bool held = false;
    bool pending_release = false;  // a release failed: the entry stays until the store confirms it
    int8_t store = -1;
    int8_t layout = 0;
    int32_t slot = 0;
    int64_t fence = 0, floor = 0, ceiling = 0;
    uint64_t word = 0;
    int16_t seen_at = -1;     // the store's time in its last answer that held the lease
    bool raised_out = false;  // freed by the store's raise: not renewed, used up to its ceiling
};

struct StaticWindow {  // the keeper's static window (shared memory)
    bool open = false;
    int32_t slot = 0;
    int64_t floor = 0, ceiling = 0;
    uint64_t word = 0;
};

struct Issuer {
    bool exists = false, up = false;
    bool never_again = false;  // a fork was acknowledged on the word that this origin stopped
    int8_t clock = 0;          // offset from true time
    int16_t inc = 0;           // incarnation (a start or a crash makes a new one)
    int8_t store = -1;         // which store its keeper uses
    int8_t origin = -1;        // for a fork: the issuer it was copied from
    bool is_static = false;
    bool issued_once = false;  // since the start of its server (the old record rule)
    int64_t stopped_at = -1;   // true time of its last clean stop
    uint64_t sysid = 0;
    uint32_t timeline = 1;
    bool fork_marker = false;  // a cosid.fork file in its data directory
    bool dd_fork = false;      // cosid.history keeps a fork this data directory is a copy in (never forgotten)
    bool dd_local = false;     // cosid.history's timeline line: it recorded its server on a store of its own
    int8_t ttl = kTtl;         // cosid.ttl
    int8_t static_ahead = kStaticAhead;  // cosid.static_ahead (the setting; static_ahead_used_ms cuts it)
    bool upgraded = false;     // a cosid.upgraded file: pg_upgrade made this cluster
    Lease lease;
    // A lease the store's raise freed, going on to its ceiling beside its successor (`lease`),
    // asked for at once (keeper_lease.cpp, want_successor_locked).  One is kept: a second
    // raise's freed lease takes the place of the first (fewer behaviours, never a false one).
    Lease freed;
    // cosid.history: what each store granted it
    cosid::GrantedNamespace history;
    // the static state file (slot 0 only)
    bool file_has_window = false;
    int64_t file_ceiling = 0, file_prev_ceiling = 0;
    uint32_t file_timeline = 0;
    bool file_write_undurable = false;  // only with R_STATIC_DURABLE off: the last write may be lost
    // the keeper's memory of static slots, and when it began (static_state.hpp, no file)
    bool memory_has = false;
    int64_t memory_ms = 0, started_ms = 0;
    StaticWindow sw;
};

struct StaticRow {  // cosid.static_ceiling: one row per cluster (slot 0)
    uint64_t cluster;
    int64_t ceiling;
};

struct StoreCore {  // what a store's database holds (and a dump or a standby copies)
    bool ext = false, ns = false;
    int8_t layout = 0;
    int16_t store_id = 0;
    std::optional<cosid::LeaseTable> table;
    std::vector<cosid::StoreRecord> records;
    std::optional<int64_t> raised_at;
    int8_t raised_margin = 0;  // how far above raised_at that raise put the floors
    std::vector<StaticRow> static_rows;
    // cosid_store_settings: the limits.  A store call is one move: it reads the limits and
    // commits at once, as cosid_store_settings's ACCESS EXCLUSIVE lock on cosid.store_state
    // makes it (a grant that read the old limits is in the WAL before a change).
    int8_t max_ttl = kMaxTtl, max_tolerance = kMaxTolerance;
    bool fork_acked = false;  // cosid_fork_acknowledge ran here for its server's data directory's fork
};

struct Store {
    bool exists = false;
    int8_t host = -1;  // the issuer whose server this store is in (a local store), -1: its own server
    int8_t clock = 0;
    uint64_t sysid = 0;  // of a standalone store's server (a local store uses its host's)
    uint32_t timeline = 1;
    StoreCore core;
    std::optional<StoreCore> unflushed_before;  // only with R_FLUSH off: the state before the last commit
    std::optional<StoreCore> standby;           // an asynchronous standby that stopped receiving here
    std::optional<StoreCore> dump;
    bool restoring = false, records_pending = false, rows_pending = false;
    bool upgraded = false;  // a standalone store's server made by pg_upgrade (its cosid.upgraded file)
    bool public_lock = false;  // a login with no grants holds the advisory key the acquire path took (a session)
};

struct Issued {
    int64_t id;
    int8_t issuer;
    int32_t slot;
    int64_t tick;
};

struct World {
    int64_t now = 1;  // true time
    uint64_t next_sysid = 100;
    int16_t next_store_id = 10;
    Issuer iss[kIssuers];
    Store st[kStores];
    std::vector<Issued> ids;
};

struct Move {
    uint8_t kind = 0;
    int8_t a = -1;  // the issuer or store
    int8_t b = -1;  // a second issuer (whose lease a keeper login releases)
};

// With c.preset, the preset's moves are applied; *stories (if not null) gets one line each.
// Nothing when the preset is unknown.
std::optional<World> initial_world(const Config& c, std::vector<std::string>* stories = nullptr);
const char* preset_names();  // for the usage line
// Every move enabled in w (in a fixed order).
void moves_of(const World& w, const Config& c, std::vector<Move>* out);
// Applies m to w.  story (if not null) gets one line saying what happened; violation gets the
// broken promise, if the move broke it.  Returns false when the move turned out to change nothing.
bool apply(World& w, const Config& c, const Move& m, std::string* story, std::string* violation);
// The state as bytes, for hashing (every field that matters to the future).
void serialize(const World& w, std::string* out);
std::string describe(const World& w);  // a one-line summary of leases and windows, for traces

}  // namespace model

// Names and one-line stories of the rules a run may switch off, the move families, the
// layouts and limits of the explored world (world.hpp).
#include "world.hpp"

namespace model {

cosid::Layout layout_of(int version) {
    cosid::Layout l;
    l.timestamp_bits = 41;
    l.slot_bits = 1;
    l.sequence_bits = 1;
    // The layout edit moves the epoch 2 ticks later: an id of tick t under it is the id of
    // tick t - 2 under the layout ids were issued with before.
    l.epoch_ms = version == 0 ? 0 : 2;
    l.unit = cosid::Unit::Millisecond;
    return l;
}

cosid::StoreLimits limits() { return cosid::StoreLimits{kMaxTtl, kMaxTolerance}; }

// reach.hpp and fork_rule.hpp in the model's ticks: each tick is kScale ms, so a cap of 120 s
// is kModelReachCap ticks.  Exact: every value is a multiple of kScale.
bool within_cap(int64_t max_ttl, int64_t max_tolerance) {
    return cosid::limits_within_cap(max_ttl * kScale, max_tolerance * kScale);
}
int64_t static_ahead_used(int64_t setting) { return cosid::static_ahead_used_ms(setting * kScale) / kScale; }
int64_t unseen_history_reach(int64_t visible_reach) {
    return cosid::unseen_history_reach_ms(visible_reach * kScale) / kScale;
}
int64_t fork_ack_floor(int64_t stopped, int64_t store_now, int64_t max_ttl, int64_t max_tolerance) {
    return cosid::fork_acknowledged_floor(stopped * kScale, store_now * kScale, max_ttl * kScale,
                                          max_tolerance * kScale) /
           kScale;
}

namespace {
struct RuleText {
    const char* name;
    const char* story;
};
const RuleText kRules[R_COUNT] = {
    {"window", "a generator issues only floor < t <= ceiling: a process paused past its ceiling refuses to issue"},
    {"next-floor", "a new window starts at the slot's next_floor, the ceiling the last holder could use"},
    {"fence", "a renewal that finds its lease taken (another fence) ends the window"},
    {"commit", "a renewal rolled back at commit is a failure: the window keeps its committed ceiling"},
    {"live-regrant", "the store never hands a live lease back, not even to its own incarnation"},
    {"flush", "the keeper flushes a lease change before it uses it (synchronous_commit = off, then a crash)"},
    {"raise-failover",
     "a store on a new timeline (failover to a standby behind) frees every lease and raises every floor (raise_floors_on_new_timeline)"},
    {"raise-restore", "a store restored from a dump frees every lease and raises every floor"},
    {"raise-cluster",
     "a store on a new cluster (pg_upgrade) frees every lease and raises every floor (raise_floors_on_new_timeline)"},
    {"restore-mark", "a store being restored grants nothing before the origin's record arrives"},
    {"arrive-raised", "lease rows a restore loads after the raise are raised as the raise would have raised them"},
    {"max-ttl", "no lease longer than the store's max_ttl, whoever asks"},
    {"drop-guard", "DROP EXTENSION (or a drop that takes the store) is refused while a window reaches past now"},
    {"forget-guard", "DELETE of lease rows, or a namespace made again, is refused while a window reaches past now"},
    {"first-floor", "a namespace made after a raise starts at raised_at + max_ttl + 2 x max_tolerance"},
    {"layout-guard", "a namespace's layout never changes under live ids"},
    {"role-guard", "a lease is released (and its incarnation read) only by the store role that acquired it"},
    {"fork-detect",
     "a copy of an issuing server (promoted standby, recovered backup) grants nothing until acknowledged"},
    {"record-at-start", "the keeper records its server on its store as soon as it finds the store ready"},
    {"record-kept", "a clean stop does not clear that record"},
    {"fork-marker", "pg_upgrade leaves a cosid.fork file in the old data directory"},
    {"store-history", "after a change of store, windows start above what other stores granted (cosid.history)"},
    {"static-durable", "a static ceiling is durable in the state file before it is used"},
    {"static-floor", "a static window starts above the ceiling in the state file"},
    {"static-nofile-borrow", "without a state file, a static slot never borrows ahead of the clock"},
    {"static-nofile-start",
     "without a state file, the first static window starts above the clock at the keeper's start"},
    {"static-timeline",
     "a static slot whose state file is of another timeline (or missing past timeline 1) is refused"},
    {"static-rows", "a static window starts above the ceilings other clusters recorded (cosid.static_ceiling)"},
    {"switch-to-static", "a slot made static starts above the store's windows on it"},
    {"switch-to-leased", "a leased window starts above the static ceilings recorded for its slot"},
    {"upgrade-note",
     "pg_upgrade's new cluster keeps the floors only when pg_upgrade read its old cluster on the timeline the store last wrote on"},
    {"reach-cap",
     "a fork acknowledged or a dump restored raises by the reach cap (unseen_history_reach_ms), not by the limits the copy sees"},
    {"fork-datadir",
     "a fork belongs to the data directory (cosid.history): every database of the server refuses until it is acknowledged there"},
    {"tenant-lock", "no lock on the acquire path can be taken by a login with no grants"},
    {"lease-cap", "a store role holds at most a cap of live leases per namespace"},
    {"lease-cap-renew", "a renewal that revives an expired lease is held to the cap as an acquire is"},
    {"first-floor-cap",
     "a namespace made after a raise by the reach cap starts above that raise, not by the store's limits"},
    {"drop-raise-guard",
     "DROP EXTENSION is refused while the store has a lost history not yet followed, or its raise reaches past now (the lost tail may have had namespaces the rows no longer show)"},
    {"lazy-raise",
     "a free slot the raise left alone (it writes only held rows) starts its next window above the raise when next acquired"},
};
}  // namespace

const char* rule_name(int r) { return kRules[r].name; }
const char* rule_story(int r) { return kRules[r].story; }

const char* family_name(unsigned f) {
    switch (f) {
    case F_CORE: return "core";
    case F_LOSS: return "loss";
    case F_CRASH: return "crash";
    case F_CLOCK: return "clock";
    case F_STORE_CLOCK: return "store-clock";
    case F_FAILOVER: return "failover";
    case F_RESTORE: return "restore";
    case F_DROP: return "drop";
    case F_NAMESPACE: return "namespace";
    case F_ROGUE: return "keeper-login";
    case F_FORK: return "fork";
    case F_MOVE: return "move-store";
    case F_STATIC: return "static";
    case F_RESTART: return "restart";
    case F_LIMITS: return "limits";
    case F_DATABASES: return "databases";
    case F_TENANT: return "tenants";
    default: return "?";
    }
}

}  // namespace model

// The lease rules of docs/safety.md ("The rules that keep it"), as an in-memory reference
// model of the store.
//
// The SQL store (sql/cosid--1.0.sql) is the implementation PostgreSQL runs; this model is
// what it is tested against (test/model), and what the generator properties are proven on.
// The safety invariant these rules keep is stated in window_invariant.hpp.
// All times are store-clock Unix milliseconds.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "layout.hpp"

namespace cosid {

struct LeaseRow {
    int32_t slot = 0;
    std::string owner_key;    // empty when free
    std::string incarnation;  // empty when free
    int64_t fence = 0;
    int64_t expires_at = 0;
    int64_t floor = 0;
    int64_t ceiling = 0;
    int64_t next_floor = 0;
    std::string previous_owner_key;
    // The last raise after lost history this row has been brought up to (cosid.lease.raise_seen):
    // below the table's raise_count, the row was free when a raise ran and has not taken it yet
    // (LeaseTable::raise_after_lost_history, the lazy raise).
    int64_t raise_seen = 0;

    bool has_owner() const { return !incarnation.empty(); }
};

enum class SlotState { Free, Held, Expired };

// The store's limits (cosid.store_state.max_ttl_ms and max_tolerance_ms), set on the store
// beforehand: every grant's ttl is at most max_ttl and every namespace's tolerance at most
// max_tolerance.  They are limits and not records of what was granted because the record
// would be lost in the same tail as the grant that needed it (a failover, a dump): only a
// bound that held before the loss bounds what the lost tail handed out.
struct StoreLimits {
    int64_t max_ttl_ms = 60000;       // the longest lease the store grants
    int64_t max_tolerance_ms = 5000;  // the largest tolerance any namespace may have

    // How far above its now a store that lost its history starts every next window, and a
    // namespace made after that: see LeaseTable::raise_after_lost_history.
    int64_t raise_margin_ms() const { return max_ttl_ms + 2 * max_tolerance_ms; }
};

// Asked for more than a StoreLimits allows: a namespace with tolerance > max_tolerance.  The
// SQL raises an error (22023) instead of answering: the raise after a lost history covers no
// larger tolerance.  (An acquire or renewal with ttl > max_ttl is granted at max_ttl.)
struct StoreLimitExceeded : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

// What a fence grows by when the store frees every lease after losing its history: far above
// any fence the lost tail can have used, so no renewal or release from that tail matches a
// lease granted afterwards.
constexpr int64_t kLostHistoryFenceStep = int64_t{1} << 32;

// Rule: the floor a new namespace's slots start at (floor = ceiling =
// next_floor), for a store whose clock reads store_now and whose last raise after a lost
// history (if any) happened at store time raised_at.
//   - At least store_now: a store made again (DROP and CREATE EXTENSION, allowed only once
//     store_may_be_dropped) then never starts a window below one of the store it replaced,
//     whatever the clocks of the holders.
//   - At least raised_at + max_ttl + 2 x max_tolerance: the namespace may have existed before,
//     in the tail the store lost, with holders that still issue up to their ceilings.  The
//     margin is the store's limits', NOT this definition's tolerance: the lost definition may
//     have had a larger one (a namespace lost with tolerance T and made again with T' < T).
// The SQL: cosid._namespace_insert.
int64_t namespace_first_floor(int64_t store_now, std::optional<int64_t> raised_at, const StoreLimits& limits);

// When a keeper renews a lease it just got or renewed: after a third of the lease the store
// granted (expires_at - store_now), which is the ttl it asked for unless the store granted
// less (a ttl above max_ttl is granted at max_ttl); never sooner than 100 ms.  Two renewals
// can then fail before the lease expires.
int64_t renew_after_ms(int64_t asked_ttl_ms, int64_t expires_at, int64_t store_now);
// The same for a window from floor to ceiling: one that holds no whole tick of the layout
// (`unit_ms`) yet (a floor the store raised past now + ttl + tolerance, window_ceiling) opens
// as the store's clock comes within ttl + tolerance of the floor, so it is renewed every
// kEmptyWindowRenewMs until it opens.
constexpr int64_t kEmptyWindowRenewMs = 250;
int64_t renew_after_ms(int64_t asked_ttl_ms, int64_t expires_at, int64_t store_now, int64_t floor, int64_t ceiling,
                       int64_t unit_ms = 1);

// Rule: a lease a renewal or release finds gone was freed by the store's raise after a lost
// history (a failover, a restore, a fork acknowledged) when that raise, at store time
// `raised_at` (nothing: none), came after the store's last answer that held the lease, at
// `seen_at`; within `max_tolerance_ms` counts as after, since the raising store's clock may be
// that far behind the one that answered.  Such a lease's window goes on to its ceiling: the
// raise put every next floor above anything it can issue.  (Going on after any loss would
// issue no id twice either, since every next window starts at or above the ceiling the store
// committed; the rule keeps ZC001 for a revoke, which is meant to stop a server.)
inline bool freed_by_raise(int64_t seen_at, std::optional<int64_t> raised_at, int64_t max_tolerance_ms) {
    return raised_at && *raised_at + max_tolerance_ms > seen_at;
}

// Whether a grant was cut to the store's max_ttl: the lease ends before the ttl asked for.
inline bool grant_shortened(int64_t asked_ttl_ms, int64_t expires_at, int64_t store_now) {
    return store_now > 0 && expires_at - store_now < asked_ttl_ms;
}

// Rule: the ceiling of a window the store grants (acquire) or extends (renew) at store time
// `now` with the granted ttl and the namespace's tolerance, for a window above `floor` whose
// ceiling was `prior_ceiling` (an acquire: the floor): now + ttl + tolerance, never below the
// prior ceiling (ids may stand up to it) nor the floor.  A floor ahead of that (the raise after
// a failover or a restore, pg_upgrade's, a release at a ceiling still ahead) gives an empty
// window (ceiling = floor) until the store's clock comes within ttl + tolerance of it; then it
// is issued from at once, ahead of the clock (issue_word::claim, cosid.max_borrow).  The raise
// covers a lost grant only because no grant reaches further than its ttl + tolerance, both
// within the store's limits when granted: a reach measured from the floor, or from limits
// raised since (a raise of max_ttl a failover may lose), would not be covered.
// The SQL: cosid._window_ceiling.
int64_t window_ceiling(int64_t floor, int64_t prior_ceiling, int64_t ttl_ms, int64_t tolerance_ms, int64_t now);

// Rule: how far a keeper's login may raise a namespace's floor
// (cosid.raise_floor, cosid_adopt's raise through the keeper): to at most the store's now +
// max_ttl + 2 x max_tolerance, the margin of every raise the protocol itself makes.  Beyond
// it only an administrator of the store may raise (a keeper login of one fleet member must
// not stop every server for good), and an acquire refuses to fold such a floor into a lease
// row, so that nothing makes it irreversible.  The SQL: cosid._floor_margin.
bool keeper_may_raise_to(int64_t floor_ms, int64_t store_now, const StoreLimits& limits);
// The lowest a namespace's floor may be brought back to (cosid_namespace_lower_floor): never
// below anything its lease rows show could have been granted or issued (each row's floor,
// ceiling and next_floor) nor a static ceiling recorded for it.  The SQL: cosid._floor_lowest.
int64_t lowest_floor_allowed(const std::vector<LeaseRow>& rows, const std::vector<int64_t>& static_ceilings);

// Rule: how far a row of the lease table reaches, i.e. the largest
// timestamp a window of it may still issue (held: up to its ceiling, also after expiry, since
// a renewal after expiry succeeds while nobody took over) or the next window must start at
// (next_floor; a free row's old ceiling no longer counts: a release handed back what lay
// above its last timestamp).
inline int64_t reaches_until(const LeaseRow& r) {
    return r.has_owner() ? std::max(r.ceiling, r.next_floor) : r.next_floor;
}

// Rule: DROP EXTENSION is allowed only while no row reaches past the
// store's now.  The lease table is the only record of the windows handed out, and a store made
// again starts its slots at its now (namespace_first_floor), so that now must lie at or above
// everything the dropped store handed out.  (src/pg/backend/drop_guard.cpp implements it.)
bool store_may_be_dropped(const std::vector<LeaseRow>& rows, int64_t now);

// A namespace's definition as the store keeps it.
struct NamespaceDefinition {
    Layout layout;
    int64_t tolerance_ms = 0;
    int64_t not_before_ms = 0;
};

// Rule: a layout never changes under a live id.  Ids already issued were
// packed with the layout, and a live lease keeps issuing with it while every new acquire
// would read the new one ((T, 1, q) under 8 slot bits is (T, 4, q) under 10): so layout and
// tolerance never change, and not_before only grows.  Returns why an update from `before` to
// `after` is refused, nothing when it is allowed.  (The SQL: cosid._namespace_guard.)
std::optional<std::string> namespace_change_refused(const NamespaceDefinition& before,
                                                    const NamespaceDefinition& after);

struct AcquireRequest {
    std::string key;
    std::string incarnation;
    int64_t ttl_ms = 30000;
    std::optional<int32_t> preferred;
};

struct AcquireResult {
    std::optional<LeaseRow> lease;           // nothing: Exhausted
    std::optional<int64_t> earliest_expiry;  // when Exhausted: the first expiry to wait for
    bool duplicate_key = false;              // a live lease has this key and another incarnation
};

// The order in which acquire tries slots: (1) the preferred slot if available, (2) available
// slots last owned by the same key (sticky), (3) the lowest free slot, then the lowest
// expired lease, each among slots whose next window can start now (next_floor <= now), then
// (4) the preferred and the sticky slot even if their next window cannot start now (after a
// raise none can: each asker takes back its own slot rather than a fleet racing for the lowest
// free ones), then the lowest free slot and the lowest expired lease of any, then (5) an
// expired lease of the asking incarnation.  "Available" is free, or
// expired under another incarnation: an incarnation takes over its own expired lease only as
// the last resort, since it renews or releases it instead.
//
// A live lease is never a candidate, not even for its own (key, incarnation): handing it back
// would hand back its old floor, below timestamps that incarnation may already have issued in
// it (its failed release was forgotten, or it simply asked for a second slot).  So an acquire
// whose answer was lost leaves an orphan lease of that incarnation.  The orphan expires by ttl,
// or its owner releases it at its ceiling, which bounds anything it could have issued there.
std::vector<int32_t> slot_preference(const std::vector<LeaseRow>& rows, const AcquireRequest& req, int64_t now);

// One namespace's slots: 2^slot_bits rows, slots 0 to 2^slot_bits - 1, so a grant never
// packs a slot outside the layout (Layout::slot_fits; the SQL skips rows a hand edit left
// past the layout's slots).
class LeaseTable {
public:
    // Without limits: any ttl is granted (the model before the store had limits).
    // first_floor_ms is where the slots start (floor = ceiling = next_floor); see
    // namespace_first_floor.
    LeaseTable(int slot_bits, int64_t tolerance_ms, int64_t first_floor_ms = 0);
    // With the store's limits: acquire and renew refuse a ttl above max_ttl, and a tolerance
    // above max_tolerance is refused here (both throw StoreLimitExceeded).
    LeaseTable(int slot_bits, int64_t tolerance_ms, const StoreLimits& limits, int64_t first_floor_ms);

    // Throws StoreLimitExceeded when the table has limits and req.ttl_ms > max_ttl.
    AcquireResult acquire(const AcquireRequest& req, int64_t now);
    // Renew succeeds while incarnation and fence match, even after expiry if nobody took over.
    // Throws StoreLimitExceeded when the table has limits and ttl_ms > max_ttl (whether or not
    // the lease is still there: the store refuses the call).
    std::optional<LeaseRow> renew(int32_t slot, const std::string& incarnation, int64_t fence, int64_t ttl_ms,
                                  int64_t now);
    std::optional<LeaseRow> release(int32_t slot, const std::string& incarnation, int64_t fence, int64_t last_issued);
    // An administrator's forced release: no last timestamp is known, so the ceiling is used.
    std::optional<LeaseRow> revoke(int32_t slot);

    // Rule: a store without its latest history raises like a failover.
    // A store restored from a dump, promoted from an asynchronous standby or recovered to a
    // point in time may have lost its latest grants and renewals while their holders still
    // issue up to their ceilings, which it no longer knows.  The first call that finds it so
    // frees every lease (fence + kLostHistoryFenceStep: its holder's next renewal or release
    // finds it lost) and raises every slot's next_floor to
    //     max(next_floor, ceiling, now + max_ttl + 2 x max_tolerance).
    // Why that covers the lost tail: a lost grant or renewal made at the old store's time g
    // issues nothing past its ceiling, and a ceiling is never granted past g + ttl + tolerance
    // <= g + max_ttl + max_tolerance (window_ceiling; an empty window issues nothing), and g <= now +
    // max_tolerance when the two store servers' clocks are within max_tolerance of each other
    // (the grant happened before the loss, the raise after it).  The margin comes from the
    // store's limits, never from a namespace row or a recorded ttl: those may be the lost part.
    // Records now as the store's raised_at (namespace_first_floor).  Returns the rows freed.
    // The SQL: cosid._follow_timeline.
    //
    // The raise is lazy: it writes only the held rows (freed, next_floor raised, marked with
    // this raise's number), so that its cost follows the live leases and not the slots.  A free
    // row keeps its values and takes the raise when it is next written (bring_up: acquire, a row
    // arriving after the raise); every reader of where its next window starts reads
    // raised_next_floor.  raised_floor() is the furthest floor of every raise so far, so a row
    // that missed several takes the highest; its fence takes kLostHistoryFenceStep for each
    // raise it missed (a lost tail may have brought it up to the raises it knew itself).
    int raise_after_lost_history(int64_t now, const StoreLimits& limits);
    // Every row brought up to the last raise at once: what cosid._lease_arrives_raised does to
    // the rows a restore loads after the raise (a held one is freed, as the raise frees it).
    void bring_all_up();
    // Whether a row has missed a raise, and where its next window must start with the raises it
    // missed (cosid._raised_next_floor).
    bool missed_raise(const LeaseRow& r) const { return r.raise_seen < raise_count_; }
    int64_t raised_next_floor(const LeaseRow& r) const {
        return missed_raise(r) ? std::max(r.next_floor, raised_floor_) : r.next_floor;
    }
    // The rows as every reader of where a window may start sees them: next_floor with the raises
    // a row missed (the guards store_may_be_dropped, lowest_floor_allowed; slot_preference).
    std::vector<LeaseRow> rows_as_raised() const;
    int64_t raise_count() const { return raise_count_; }
    int64_t raised_floor() const { return raised_floor_; }
    // Only for the model checker's tooth "lazy-raise": marks every row brought up without
    // applying the raise, as an acquire that ignored the mark would (test/model/moves.cpp).
    void forget_missed_raises_for_tooth();

    SlotState state(int32_t slot, int64_t now) const;
    const LeaseRow& row(int32_t slot) const { return rows_.at(static_cast<size_t>(slot)); }
    const std::vector<LeaseRow>& rows() const { return rows_; }
    int64_t tolerance_ms() const { return tolerance_; }
    const std::optional<StoreLimits>& limits() const { return limits_; }
    // The store time of the last raise_after_lost_history, if any.
    const std::optional<int64_t>& raised_at() const { return raised_at_; }

private:
    int64_t granted_ttl(int64_t ttl_ms) const;

    std::vector<LeaseRow> rows_;
    int64_t tolerance_;
    std::optional<StoreLimits> limits_;
    std::optional<int64_t> raised_at_;
    int64_t raise_count_ = 0;   // raises so far (cosid.store_state.raise_count)
    int64_t raised_floor_ = 0;  // the furthest floor a raise set (cosid._raise_mark's raised_floor)

    void bring_up(LeaseRow& r);
};

}  // namespace cosid

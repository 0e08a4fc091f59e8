#include "lease_model.hpp"

#include <algorithm>

#include "issue_word.hpp"

namespace cosid {

namespace {
// Free, or expired under another incarnation.  An incarnation takes over its own expired
// lease only as the very last resort (see slot_preference): it renews it or releases it
// instead, and its pool never holds two windows of one slot.
bool is_available(const LeaseRow& r, const std::string& incarnation, int64_t now) {
    return !r.has_owner() || (r.expires_at <= now && r.incarnation != incarnation);
}
bool is_own_expired(const LeaseRow& r, const std::string& incarnation, int64_t now) {
    return r.has_owner() && r.expires_at <= now && r.incarnation == incarnation;
}
bool contains(const std::vector<int32_t>& v, int32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }
}  // namespace

std::vector<int32_t> slot_preference(const std::vector<LeaseRow>& rows, const AcquireRequest& req, int64_t now) {
    std::vector<int32_t> order;
    auto push = [&](int32_t s) {
        if (!contains(order, s)) order.push_back(s);
    };
    // Slots whose next window can start now come first (next_floor <= now): a slot released
    // at a ceiling still ahead would make its next holder wait for its clock to pass it.
    auto available = [&](const LeaseRow& r) { return is_available(r, req.incarnation, now); };
    auto usable = [&](const LeaseRow& r) { return available(r) && r.next_floor <= now; };
    // The asker's own slots that pass `ok`: the preferred one, then the sticky ones.
    auto own = [&](auto ok) {
        if (req.preferred && *req.preferred >= 0 && static_cast<size_t>(*req.preferred) < rows.size() &&
            ok(rows[static_cast<size_t>(*req.preferred)]))
            push(*req.preferred);
        for (const auto& r : rows) {
            const std::string& last = r.has_owner() ? r.owner_key : r.previous_owner_key;
            if (ok(r) && last == req.key) push(r.slot);
        }
    };
    // Free slots before expired leases, each in slot order: an expired lease's owner may
    // still renew it (a renewal succeeds after expiry while nobody took it over), and the
    // store finds a free slot through an index of free slots without reading the held ones.
    auto any = [&](auto ok) {
        for (const auto& r : rows)
            if (ok(r) && !r.has_owner()) push(r.slot);
        for (const auto& r : rows)
            if (ok(r)) push(r.slot);
    };
    own(usable);
    any(usable);
    // Then the preferred and the sticky slot even when their next window cannot start now:
    // after a raise none can, and each asker takes back its own slot (the raise freed it)
    // instead of a whole fleet racing for the lowest free slots at once.
    own(available);
    any(available);
    // Last resort: an orphan the owner never learnt of (its acquire's answer was lost) must not
    // stay lost to it; the new window starts at its next_floor (its ceiling), so it is safe.
    for (const auto& r : rows)
        if (is_own_expired(r, req.incarnation, now)) push(r.slot);
    return order;
}

bool keeper_may_raise_to(int64_t floor_ms, int64_t store_now, const StoreLimits& limits) {
    return floor_ms <= store_now + limits.raise_margin_ms();
}

int64_t lowest_floor_allowed(const std::vector<LeaseRow>& rows, const std::vector<int64_t>& static_ceilings) {
    int64_t v = 0;
    for (const LeaseRow& r : rows) v = std::max({v, r.floor, r.ceiling, r.next_floor});
    for (int64_t c : static_ceilings) v = std::max(v, c);
    return v;
}

int64_t namespace_first_floor(int64_t store_now, std::optional<int64_t> raised_at, const StoreLimits& limits) {
    // The margin is the store's, not the new definition's tolerance (see the header).
    if (!raised_at) return store_now;
    return std::max(store_now, *raised_at + limits.raise_margin_ms());
}

bool store_may_be_dropped(const std::vector<LeaseRow>& rows, int64_t now) {
    for (const LeaseRow& r : rows)
        if (reaches_until(r) > now) return false;
    return true;
}

std::optional<std::string> namespace_change_refused(const NamespaceDefinition& before,
                                                    const NamespaceDefinition& after) {
    const Layout &a = before.layout, &b = after.layout;
    if (a.timestamp_bits != b.timestamp_bits || a.slot_bits != b.slot_bits || a.sequence_bits != b.sequence_bits ||
        a.epoch_ms != b.epoch_ms || a.unit != b.unit)
        return std::string("a namespace's layout never changes: ids of it may exist, and another layout would "
                           "read them as other times and slots, and issue them again");
    if (before.tolerance_ms != after.tolerance_ms)
        return std::string("a namespace's tolerance never changes: live leases' ceilings were computed with it");
    if (after.not_before_ms < before.not_before_ms) return std::string("a namespace's not_before only grows");
    return std::nullopt;
}

LeaseTable::LeaseTable(int slot_bits, int64_t tolerance_ms, int64_t first_floor_ms) : tolerance_(tolerance_ms) {
    rows_.resize(size_t{1} << slot_bits);
    for (size_t i = 0; i < rows_.size(); ++i) {
        LeaseRow& r = rows_[i];
        r.slot = static_cast<int32_t>(i);
        r.floor = r.ceiling = r.next_floor = first_floor_ms;
    }
}

LeaseTable::LeaseTable(int slot_bits, int64_t tolerance_ms, const StoreLimits& limits, int64_t first_floor_ms)
    : LeaseTable(slot_bits, tolerance_ms, first_floor_ms) {
    // A larger tolerance would put ceilings above what a raise's 2 x max_tolerance covers.
    if (tolerance_ms > limits.max_tolerance_ms)
        throw StoreLimitExceeded("tolerance " + std::to_string(tolerance_ms) +
                                 " ms is above the store's max_tolerance (" + std::to_string(limits.max_tolerance_ms) +
                                 " ms)");
    limits_ = limits;
}

int64_t LeaseTable::granted_ttl(int64_t ttl_ms) const {
    // A longer lease would put a ceiling above what a raise's max_ttl covers.  It is granted at
    // max_ttl rather than refused: a keeper whose cosid.ttl was reloaded above the store's
    // limit renews shorter windows (and says so) instead of losing its lease.
    return limits_ ? std::min(ttl_ms, limits_->max_ttl_ms) : ttl_ms;
}

int64_t window_ceiling(int64_t floor, int64_t prior_ceiling, int64_t ttl_ms, int64_t tolerance_ms, int64_t now) {
    return std::max({floor, prior_ceiling, now + ttl_ms + tolerance_ms});
}

int64_t renew_after_ms(int64_t asked_ttl_ms, int64_t expires_at, int64_t store_now) {
    int64_t lease = asked_ttl_ms;
    if (grant_shortened(asked_ttl_ms, expires_at, store_now)) lease = expires_at - store_now;
    return std::max<int64_t>(lease / 3, 100);
}

int64_t renew_after_ms(int64_t asked_ttl_ms, int64_t expires_at, int64_t store_now, int64_t floor, int64_t ceiling,
                       int64_t unit_ms) {
    const int64_t after = renew_after_ms(asked_ttl_ms, expires_at, store_now);
    return holds_no_tick(ClaimWindow{floor, ceiling}, unit_ms) ? std::min(after, kEmptyWindowRenewMs) : after;
}

int LeaseTable::raise_after_lost_history(int64_t now, const StoreLimits& limits) {
    raised_floor_ = std::max(raised_floor_, now + limits.raise_margin_ms());
    // Above every row's mark: no row's mark is above the count (cosid._lease_arrives_raised cuts
    // the mark of a row from outside below the store's count).
    raise_count_ += 1;
    int freed = 0;
    for (LeaseRow& r : rows_) {
        if (!r.has_owner()) continue;  // a free row takes the raise when next written (bring_up)
        bring_up(r);
        ++freed;
    }
    raised_at_ = now;
    return freed;
}

void LeaseTable::bring_up(LeaseRow& r) {
    // A held row is always freed (its holder's history is the one the raise gave up), even one
    // marked already (a row arriving marked with another table's count).
    if (!missed_raise(r) && !r.has_owner()) return;
    r.next_floor = std::max({r.next_floor, r.ceiling, raised_floor_});
    if (r.has_owner()) r.previous_owner_key = r.owner_key;
    r.owner_key.clear();
    r.incarnation.clear();
    // One step per raise missed, at least one (cosid._raise_fence_step).
    r.fence += kLostHistoryFenceStep * std::max<int64_t>(1, raise_count_ - r.raise_seen);
    r.raise_seen = raise_count_;
}

void LeaseTable::bring_all_up() {
    for (LeaseRow& r : rows_) bring_up(r);
}

std::vector<LeaseRow> LeaseTable::rows_as_raised() const {
    std::vector<LeaseRow> out = rows_;
    for (LeaseRow& r : out) r.next_floor = raised_next_floor(r);
    return out;
}

void LeaseTable::forget_missed_raises_for_tooth() {
    for (LeaseRow& r : rows_) r.raise_seen = raise_count_;
}

SlotState LeaseTable::state(int32_t slot, int64_t now) const {
    const LeaseRow& r = row(slot);
    if (!r.has_owner()) return SlotState::Free;
    return r.expires_at > now ? SlotState::Held : SlotState::Expired;
}

AcquireResult LeaseTable::acquire(const AcquireRequest& req, int64_t now) {
    const int64_t ttl_ms = granted_ttl(req.ttl_ms);
    AcquireResult out;
    for (const auto& r : rows_)
        if (r.has_owner() && r.expires_at > now && r.owner_key == req.key && r.incarnation != req.incarnation)
            out.duplicate_key = true;
    // "Can start now" asks where the next window starts with the raises a row missed.
    for (int32_t s : slot_preference(rows_as_raised(), req, now)) {
        LeaseRow& r = rows_[static_cast<size_t>(s)];
        if (!is_available(r, req.incarnation, now) && !is_own_expired(r, req.incarnation, now))
            continue;  // the conditional update would match no row
        // A row that missed a raise takes it now: next_floor at the raised floor, the fence's step.
        if (missed_raise(r)) {
            r.next_floor = raised_next_floor(r);
            r.fence += kLostHistoryFenceStep * (raise_count_ - r.raise_seen);
            r.raise_seen = raise_count_;
        }
        if (r.has_owner()) r.previous_owner_key = r.owner_key;
        r.owner_key = req.key;
        r.incarnation = req.incarnation;
        r.fence += 1;
        r.floor = r.next_floor;
        r.expires_at = now + ttl_ms;
        r.ceiling = window_ceiling(r.floor, r.floor, ttl_ms, tolerance_, now);
        r.next_floor = r.ceiling;
        out.lease = r;
        return out;
    }
    for (const auto& r : rows_)
        if (r.has_owner() && r.expires_at > now && (!out.earliest_expiry || r.expires_at < *out.earliest_expiry))
            out.earliest_expiry = r.expires_at;
    return out;
}

std::optional<LeaseRow> LeaseTable::renew(int32_t slot, const std::string& incarnation, int64_t fence,
                                          int64_t requested_ttl_ms, int64_t now) {
    const int64_t ttl_ms = granted_ttl(requested_ttl_ms);
    LeaseRow& r = rows_.at(static_cast<size_t>(slot));
    if (!r.has_owner() || r.incarnation != incarnation || r.fence != fence) return std::nullopt;
    r.expires_at = std::max(r.expires_at, now + ttl_ms);
    r.ceiling = window_ceiling(r.floor, r.ceiling, ttl_ms, tolerance_, now);
    r.next_floor = r.ceiling;
    return r;
}

std::optional<LeaseRow> LeaseTable::release(int32_t slot, const std::string& incarnation, int64_t fence,
                                            int64_t last_issued) {
    LeaseRow& r = rows_.at(static_cast<size_t>(slot));
    if (!r.has_owner() || r.incarnation != incarnation || r.fence != fence) return std::nullopt;
    r.next_floor = std::max(r.floor, std::min(last_issued, r.ceiling));
    r.previous_owner_key = r.owner_key;
    r.owner_key.clear();
    r.incarnation.clear();
    r.fence += 1;
    return r;
}

std::optional<LeaseRow> LeaseTable::revoke(int32_t slot) {
    LeaseRow& r = rows_.at(static_cast<size_t>(slot));
    if (!r.has_owner()) return std::nullopt;
    r.next_floor = std::max(r.next_floor, r.ceiling);
    r.previous_owner_key = r.owner_key;
    r.owner_key.clear();
    r.incarnation.clear();
    r.fence += 1;
    return r;
}

}  // namespace cosid

// The core is compiled without PostgreSQL so GoogleTest can test it directly.
#ifdef POSTGRES_H
#error "src/core must stay free of PostgreSQL headers"
#endif

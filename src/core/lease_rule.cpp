#include "lease_rule.hpp"

namespace cosid {

namespace {
constexpr int64_t kRaiseFenceStep = int64_t{1} << 32;  // lease_model.hpp's kLostHistoryFenceStep
// a < b, true only when both are known (NULL < x is not true)
bool lt(const std::optional<int64_t>& a, const std::optional<int64_t>& b) { return a && b && *a < *b; }
bool eq(const std::optional<int64_t>& a, const std::optional<int64_t>& b) { return a && b && *a == *b; }
bool ne(const std::optional<int64_t>& a, const std::optional<int64_t>& b) { return a && b && *a != *b; }
}  // namespace

const char* lease_change_problem(const LeaseVersion& o, const LeaseVersion& n, bool moved,
                                 bool owner_changed) noexcept {
    if (moved) return "a lease row never moves to another slot";
    if (lt(n.fence, o.fence)) return "the fence went down";
    if (lt(n.floor, o.floor)) return "the floor went down";
    if (lt(n.ceiling, n.floor) || lt(n.next_floor, n.floor)) return "ceiling or next_floor below the floor";
    if (n.held && lt(n.next_floor, n.ceiling)) return "next_floor below the ceiling of a held lease";
    if (eq(n.fence, o.fence) && owner_changed) return "the owner changed without a new fence";
    if (eq(n.fence, o.fence) && (ne(n.floor, o.floor) || lt(n.ceiling, o.ceiling)))
        return "a renewal moved the floor or lowered the ceiling";
    if (lt(o.fence, n.fence) && n.held && lt(n.floor, o.next_floor)) return "a new window starts below next_floor";
    if (lt(n.next_floor, o.next_floor) && !(o.held && !n.held)) return "next_floor went down outside a release";
    // A row marked as brought up to raises it never took would start its next window below
    // them (cosid._raised_next_floor): the mark moves up only with the raises' fence step.
    if (lt(o.raise_seen, n.raise_seen) &&
        !(o.fence && n.fence && (*n.fence - *o.fence) / kRaiseFenceStep >= *n.raise_seen - *o.raise_seen))
        return "raise_seen went up without the raise's fence step";
    return nullptr;
}

}  // namespace cosid

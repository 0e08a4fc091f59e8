// The lease rules every change of a lease row keeps, whoever makes it (the store's functions,
// an administrator's UPDATE, a bug): the trigger cosid._lease_guard asks this for each UPDATE
// of cosid.lease (src/pg/store/lease_guard.cpp).  Pure C++: no PostgreSQL headers.
//
// A slot's floor never moves back, a held lease's next_floor covers its ceiling, a new window
// starts at or above next_floor, a renewal never lowers a ceiling, and next_floor goes down
// only when a release hands back the unused end of a window (never below that window's floor).
// A row's mark of the raises it has been brought up to (raise_seen, the lazy raise of
// cosid._follow_timeline) goes up only with the raise's fence step: 2^32 for each raise.
#pragma once
#include <cstdint>
#include <optional>

namespace cosid {

// One version of a lease row, as the trigger sees it.  A column is empty when NULL: a BEFORE
// trigger runs before NOT NULL is checked, and a comparison with NULL breaks no rule (SQL's
// three-valued logic: the rule's condition is not true).
struct LeaseVersion {
    std::optional<int64_t> fence, floor, ceiling, next_floor;
    std::optional<int64_t> raise_seen;  // empty also in a catalog before 1.8 (no such column)
    bool held = false;                  // incarnation IS NOT NULL
};

// The rule a change from `before` to `after` breaks, or nullptr.  `moved`: the row's
// namespace or slot changed; `owner_changed`: its incarnation IS DISTINCT FROM before.
// The first rule broken, in this order, names the problem.
const char* lease_change_problem(const LeaseVersion& before, const LeaseVersion& after, bool moved,
                                 bool owner_changed) noexcept;

}  // namespace cosid

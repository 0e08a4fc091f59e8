// The safety invariant of the lease store, and a checker for it.
//
//   No window is ever handed to anyone, the same incarnation included, whose floor is below
//   a timestamp already issued on that slot.
//
// Equivalently: every granted window's floor is >= the largest timestamp issued on the slot
// by any earlier window.  With each generator issuing only floor < t <= ceiling, the windows'
// issued timestamps are disjoint and ids are unique: no accurate clock is needed for that.
//
// "Already issued" includes what an earlier window issues AFTER the later grant (a paused
// holder keeps issuing up to its ceiling), so the checker tests the invariant from both sides:
// when a window is granted, against everything issued on the slot so far, and when a
// timestamp is issued or a window extended, against the floors of every window granted after
// it.  The store's own rules (fence, next_floor) are not used: the checker only sees what was
// granted and what was issued, so it also judges a store that breaks those rules.
// All times are store-clock milliseconds, as in lease_model.hpp.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cosid {

class WindowInvariant {
public:
    // A window (floor, ceiling] granted on slot, identified there by fence.  Granting a fence
    // again (a re-grant of a live lease) is checked like a new grant.  Returns the violation.
    std::optional<std::string> grant(int32_t slot, int64_t fence, int64_t floor, int64_t ceiling);
    // A renewal raised the ceiling of the window granted with fence.
    std::optional<std::string> extend(int32_t slot, int64_t fence, int64_t ceiling);
    // Timestamp t (ms) was issued in the window granted with fence.
    std::optional<std::string> issue(int32_t slot, int64_t fence, int64_t t);

    std::optional<int64_t> max_issued(int32_t slot) const;

private:
    struct Window {
        int64_t fence, floor, ceiling;
    };
    struct SlotHistory {
        std::vector<Window> windows;  // in grant order
        std::optional<int64_t> max_issued;
    };
    // The window's index in grant order, or -1.
    static int find(const SlotHistory& h, int64_t fence);
    // The violation if value exceeds the floor of a window granted after index i.
    static std::optional<std::string> above_later_floor(const SlotHistory& h, size_t i, int64_t value, const char* what,
                                                        int32_t slot);
    std::map<int32_t, SlotHistory> slots_;
};

}  // namespace cosid

// The lease rules cosid._lease_guard checks on every UPDATE of cosid.lease (lease_rule.hpp):
// each rule, the order that names the first one broken, and NULLs (not yet refused by NOT
// NULL when a BEFORE trigger runs) that break no rule.
#include <gtest/gtest.h>

#include <string>

#include "lease_rule.hpp"

using namespace cosid;

namespace {
LeaseVersion held(int64_t fence, int64_t floor, int64_t ceiling, int64_t next_floor) {
    LeaseVersion v;
    v.fence = fence;
    v.floor = floor;
    v.ceiling = ceiling;
    v.next_floor = next_floor;
    v.held = true;
    return v;
}
LeaseVersion freed(int64_t fence, int64_t floor, int64_t ceiling, int64_t next_floor) {
    LeaseVersion v = held(fence, floor, ceiling, next_floor);
    v.held = false;
    return v;
}
std::string problem(const LeaseVersion& o, const LeaseVersion& n, bool moved = false, bool owner_changed = false) {
    const char* p = lease_change_problem(o, n, moved, owner_changed);
    return p == nullptr ? "" : p;
}
const LeaseVersion LIVE = held(5, 100, 200, 200);
}  // namespace

TEST(LeaseRule, StoreChangesPass) {
    EXPECT_EQ(problem(LIVE, held(5, 100, 250, 250)), "");                                  // a renewal
    EXPECT_EQ(problem(LIVE, freed(6, 100, 200, 150), false, true), "");                    // a release at 150
    EXPECT_EQ(problem(freed(6, 100, 200, 150), held(7, 150, 300, 300), false, true), "");  // an acquire
    EXPECT_EQ(problem(LIVE, freed(5 + 4294967296LL, 100, 200, 300), false, true), "");     // a raise
    EXPECT_EQ(problem(LIVE, LIVE), "");
}

TEST(LeaseRule, EachRule) {
    EXPECT_EQ(problem(LIVE, LIVE, true), "a lease row never moves to another slot");
    EXPECT_EQ(problem(LIVE, held(4, 100, 200, 200)), "the fence went down");
    EXPECT_EQ(problem(LIVE, held(5, 99, 200, 200)), "the floor went down");
    EXPECT_EQ(problem(LIVE, held(6, 100, 90, 200), false, true), "ceiling or next_floor below the floor");
    EXPECT_EQ(problem(LIVE, freed(6, 100, 200, 90), false, true), "ceiling or next_floor below the floor");
    EXPECT_EQ(problem(LIVE, held(5, 100, 200, 150)), "next_floor below the ceiling of a held lease");
    EXPECT_EQ(problem(LIVE, held(5, 100, 200, 200), false, true), "the owner changed without a new fence");
    EXPECT_EQ(problem(LIVE, held(5, 101, 200, 200)), "a renewal moved the floor or lowered the ceiling");
    EXPECT_EQ(problem(LIVE, held(5, 100, 199, 199)), "a renewal moved the floor or lowered the ceiling");
    EXPECT_EQ(problem(LIVE, held(6, 150, 300, 300), false, true), "a new window starts below next_floor");
    EXPECT_EQ(problem(freed(6, 100, 200, 150), freed(6, 100, 200, 120)), "next_floor went down outside a release");
    EXPECT_EQ(problem(freed(6, 100, 200, 150), freed(7, 100, 200, 120)), "next_floor went down outside a release");
}

TEST(LeaseRule, FirstRuleBrokenNamesTheProblem) {
    EXPECT_EQ(problem(LIVE, held(4, 99, 50, 50), true), "a lease row never moves to another slot");
    EXPECT_EQ(problem(LIVE, held(4, 99, 50, 50)), "the fence went down");
    EXPECT_EQ(problem(LIVE, held(5, 99, 50, 50)), "the floor went down");
}

TEST(LeaseRule, NullBreaksNoRule) {
    LeaseVersion n = LIVE;
    n.fence.reset();
    EXPECT_EQ(problem(LIVE, n, false, true), "");  // fence = OLD.fence is not true either
    n = LIVE;
    n.floor.reset();
    n.ceiling = 50;
    EXPECT_EQ(problem(LIVE, n), "a renewal moved the floor or lowered the ceiling");  // 50 < 200
    n = LIVE;
    n.next_floor.reset();
    EXPECT_EQ(problem(LIVE, n), "");
}

// The lazy raise's mark (cosid.lease.raise_seen) moves up only with the raise's fence step, 2^32
// for each raise: an UPDATE that marked a free row as brought up without it would let its next
// window start below the raised floor.
TEST(LeaseRule, RaiseSeenGoesUpOnlyWithTheRaisesFenceStep) {
    const int64_t step = int64_t{1} << 32;
    LeaseVersion o = freed(5, 100, 200, 150), n = o;
    o.raise_seen = 1;
    n.raise_seen = 3;
    EXPECT_EQ(problem(o, n), "raise_seen went up without the raise's fence step");
    n.fence = 5 + step + 1;
    EXPECT_EQ(problem(o, n), "raise_seen went up without the raise's fence step") << "one step for two raises";
    n.fence = 5 + 2 * step + 1;  // cosid.acquire bringing a free row up two raises
    n.held = true;
    n.floor = 300;
    n.ceiling = n.next_floor = 400;
    EXPECT_EQ(problem(o, n), "");
    LeaseVersion down = o;
    down.raise_seen = 0;  // lower: the row would only take a raise again
    EXPECT_EQ(problem(o, down), "");
    LeaseVersion before_18 = o, after_18 = n;  // a catalog without the column
    before_18.raise_seen.reset();
    after_18.raise_seen.reset();
    after_18.fence = 6;
    EXPECT_EQ(problem(before_18, after_18), "");
}

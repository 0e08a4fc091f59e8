#include <gtest/gtest.h>

#include "lease_model.hpp"
#include "window_invariant.hpp"

using namespace cosid;

TEST(WindowInvariant, AcceptsTouchingWindows) {
    WindowInvariant inv;
    EXPECT_FALSE(inv.grant(0, 1, 0, 100));
    EXPECT_FALSE(inv.issue(0, 1, 1));
    EXPECT_FALSE(inv.issue(0, 1, 60));
    EXPECT_FALSE(inv.grant(0, 2, 60, 200));  // an orderly release handed on 60 exactly
    EXPECT_FALSE(inv.issue(0, 2, 61));
    EXPECT_FALSE(inv.issue(0, 1, 60));  // the earlier holder may repeat its last tick's ms
    EXPECT_FALSE(inv.extend(0, 2, 300));
    EXPECT_FALSE(inv.grant(1, 1, 0, 100));  // slots are independent
    EXPECT_FALSE(inv.issue(1, 1, 50));
    EXPECT_EQ(inv.max_issued(0), 61);
    EXPECT_EQ(inv.max_issued(1), 50);
    EXPECT_FALSE(inv.max_issued(2));
}

TEST(WindowInvariant, CatchesGrantBelowIssued) {
    WindowInvariant inv;
    inv.grant(3, 1, 0, 100);
    inv.issue(3, 1, 70);
    auto bad = inv.grant(3, 2, 69, 200);
    ASSERT_TRUE(bad);
    EXPECT_NE(bad->find("below the timestamp 70"), std::string::npos) << *bad;
}

TEST(WindowInvariant, CatchesReGrantToSameIncarnationWithOldFloor) {
    // The old idempotent-retry rule: the live lease handed back, fence and floor unchanged,
    // to an incarnation that has issued in it.
    WindowInvariant inv;
    inv.grant(0, 1, 10, 100);
    inv.issue(0, 1, 40);
    auto bad = inv.grant(0, 1, 10, 150);
    ASSERT_TRUE(bad);
    EXPECT_NE(bad->find("slot 0 fence 1"), std::string::npos) << *bad;
    // Re-granting a window nobody issued in yet is harmless.
    inv.grant(1, 1, 10, 100);
    EXPECT_FALSE(inv.grant(1, 1, 10, 150));
}

TEST(WindowInvariant, CatchesEarlierHolderIssuingIntoLaterWindow) {
    // A paused holder issues after its slot was handed on: only up to the next floor.
    WindowInvariant inv;
    inv.grant(0, 1, 0, 100);
    inv.grant(0, 2, 80, 200);  // a broken hand-over: should have been 100
    EXPECT_FALSE(inv.issue(0, 1, 80));
    auto bad = inv.issue(0, 1, 81);
    ASSERT_TRUE(bad);
    EXPECT_NE(bad->find("above the floor 80"), std::string::npos) << *bad;
    // A renewal of a window that is already followed is caught the same way.
    EXPECT_TRUE(inv.extend(0, 1, 120));
}

TEST(WindowInvariant, CatchesIdsOutsideAnyGrantedWindow) {
    WindowInvariant inv;
    EXPECT_TRUE(inv.issue(0, 1, 5));  // never granted
    inv.grant(0, 1, 10, 100);
    EXPECT_TRUE(inv.issue(0, 1, 10));   // floor is exclusive
    EXPECT_TRUE(inv.issue(0, 1, 101));  // ceiling is inclusive
    EXPECT_FALSE(inv.issue(0, 1, 100));
    EXPECT_TRUE(inv.issue(0, 2, 50));  // another fence
    EXPECT_TRUE(inv.extend(0, 7, 500));
}

TEST(WindowInvariant, HoldsForTheLeaseModelsHandOvers) {
    const int64_t TTL = 30000, NOW = 1750000000000LL;
    LeaseTable t(1, 1000);
    WindowInvariant inv;
    auto grant = [&](const AcquireResult& r) {
        ASSERT_TRUE(r.lease);
        auto bad = inv.grant(r.lease->slot, r.lease->fence, r.lease->floor, r.lease->ceiling);
        EXPECT_FALSE(bad) << *bad;
    };
    AcquireRequest a{"a", "i1", TTL, std::nullopt};
    auto l1 = t.acquire(a, NOW);
    grant(l1);
    EXPECT_FALSE(inv.issue(0, l1.lease->fence, NOW + 1));
    grant(t.acquire(a, NOW + 2));  // a second acquire by the same incarnation: slot 1
    t.release(0, "i1", l1.lease->fence, NOW + 1);
    grant(t.acquire(a, NOW + 3));  // slot 0 again, from the exact last timestamp
    t.revoke(0);
    grant(t.acquire(AcquireRequest{"b", "i2", TTL, std::nullopt}, NOW + 4));
}

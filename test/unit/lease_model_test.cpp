#include <gtest/gtest.h>

#include "lease_model.hpp"

using namespace cosid;

namespace {
const int64_t TTL = 30000, TOL = 1000, NOW = 1750000000000LL;
AcquireRequest req(const std::string& key, const std::string& inc) {
    AcquireRequest r;
    r.key = key; r.incarnation = inc; r.ttl_ms = TTL;
    return r;
}
}  // namespace

TEST(LeaseRules, AcquireFreeSlot) {
    LeaseTable t(3, TOL);
    auto r = t.acquire(req("a", "i1"), NOW);
    ASSERT_TRUE(r.lease);
    EXPECT_EQ(r.lease->slot, 0);
    EXPECT_EQ(r.lease->fence, 1);
    EXPECT_EQ(r.lease->floor, 0);
    EXPECT_EQ(r.lease->expires_at, NOW + TTL);
    EXPECT_EQ(r.lease->ceiling, NOW + TTL + TOL);
    EXPECT_EQ(r.lease->next_floor, r.lease->ceiling);
    EXPECT_EQ(t.state(0, NOW), SlotState::Held);
    EXPECT_FALSE(r.duplicate_key);
}

TEST(LeaseRules, HeldSlotIsNotTakenExpiredIs) {
    LeaseTable t(1, TOL);
    auto a = t.acquire(req("a", "i1"), NOW);
    auto b = t.acquire(req("b", "i2"), NOW);
    ASSERT_TRUE(b.lease);
    EXPECT_EQ(b.lease->slot, 1);
    auto c = t.acquire(req("c", "i3"), NOW + 10);
    EXPECT_FALSE(c.lease);
    ASSERT_TRUE(c.earliest_expiry);
    EXPECT_EQ(*c.earliest_expiry, NOW + TTL);
    EXPECT_EQ(t.state(0, NOW + TTL), SlotState::Expired);
    auto d = t.acquire(req("c", "i3"), NOW + TTL);  // expires_at <= now: expired
    ASSERT_TRUE(d.lease);
    EXPECT_EQ(d.lease->slot, 0);
    EXPECT_EQ(d.lease->fence, 2);
    EXPECT_EQ(d.lease->floor, a.lease->ceiling);  // floor = previous holder's ceiling
    EXPECT_EQ(d.lease->previous_owner_key, "a");
}

TEST(LeaseRules, CeilingNeverBelowFloor) {
    LeaseTable t(1, TOL);
    auto a = t.acquire(req("a", "i1"), NOW);
    // store clock jumps back an hour: the new holder's ceiling is at least its floor
    t.revoke(0);
    auto c = t.acquire(req("c", "i3"), NOW - 3600000);
    ASSERT_TRUE(c.lease);
    EXPECT_EQ(c.lease->slot, 0);
    EXPECT_EQ(c.lease->floor, a.lease->ceiling);
    EXPECT_EQ(c.lease->ceiling, c.lease->floor);
}

TEST(LeaseRules, RenewRequiresIncarnationAndFenceAndIsReplayable) {
    LeaseTable t(2, TOL);
    auto a = t.acquire(req("a", "i1"), NOW);
    EXPECT_FALSE(t.renew(0, "i2", a.lease->fence, TTL, NOW + 10));
    EXPECT_FALSE(t.renew(0, "i1", a.lease->fence + 1, TTL, NOW + 10));
    auto r1 = t.renew(0, "i1", a.lease->fence, TTL, NOW + 10000);
    ASSERT_TRUE(r1);
    EXPECT_EQ(r1->fence, a.lease->fence);
    EXPECT_EQ(r1->expires_at, NOW + 10000 + TTL);
    EXPECT_EQ(r1->ceiling, NOW + 10000 + TTL + TOL);
    // a replayed (older) renew succeeds and never shrinks the lease
    auto r2 = t.renew(0, "i1", a.lease->fence, TTL, NOW + 5000);
    ASSERT_TRUE(r2);
    EXPECT_EQ(r2->expires_at, NOW + 10000 + TTL);
    // after expiry, while nobody took it, renew still works
    EXPECT_TRUE(t.renew(0, "i1", a.lease->fence, TTL, NOW + 10 * TTL));
}

TEST(LeaseRules, RenewFailsAfterTakeover) {
    LeaseTable t(0 + 1, TOL);
    auto a = t.acquire(req("a", "i1"), NOW);
    t.acquire(req("x", "ix"), NOW);  // slot 1
    auto b = t.acquire(req("b", "i2"), NOW + TTL + 1);
    ASSERT_TRUE(b.lease);
    EXPECT_EQ(b.lease->slot, 0);
    EXPECT_FALSE(t.renew(0, "i1", a.lease->fence, TTL, NOW + TTL + 2));
}

TEST(LeaseRules, ReleaseHandsOnExactLastTimestamp) {
    LeaseTable t(1, TOL);
    auto a = t.acquire(req("a", "i1"), NOW);
    EXPECT_FALSE(t.release(0, "i1", a.lease->fence + 1, NOW + 5));
    auto rel = t.release(0, "i1", a.lease->fence, NOW + 5);
    ASSERT_TRUE(rel);
    EXPECT_EQ(rel->next_floor, NOW + 5);
    EXPECT_EQ(rel->fence, a.lease->fence + 1);
    EXPECT_EQ(t.state(0, NOW), SlotState::Free);
    auto b = t.acquire(req("b", "i2"), NOW + 6);
    EXPECT_EQ(b.lease->floor, NOW + 5);
}

TEST(LeaseRules, ReleaseClampsLastIssuedToWindow) {
    LeaseTable t(1, TOL);
    auto a = t.acquire(req("a", "i1"), NOW);
    auto rel = t.release(0, "i1", a.lease->fence, a.lease->ceiling + 99999);
    EXPECT_EQ(rel->next_floor, a.lease->ceiling);
    auto b = t.acquire(req("a", "i1"), NOW);
    rel = t.release(0, "i1", b.lease->fence, 5);  // below floor: floor wins
    EXPECT_EQ(rel->next_floor, b.lease->floor);
}

TEST(LeaseRules, RevokeUsesCeiling) {
    LeaseTable t(1, TOL);
    auto a = t.acquire(req("a", "i1"), NOW);
    auto rv = t.revoke(0);
    ASSERT_TRUE(rv);
    EXPECT_EQ(rv->next_floor, a.lease->ceiling);
    EXPECT_FALSE(t.revoke(0));
    EXPECT_FALSE(t.renew(0, "i1", a.lease->fence, TTL, NOW + 1));
}

TEST(SlotChoice, IdempotentRetryReturnsHeldSlot) {
    LeaseTable t(3, TOL);
    t.acquire(req("x", "ix"), NOW);  // slot 0
    auto a = t.acquire(req("a", "i1"), NOW);  // slot 1
    auto again = t.acquire(req("a", "i1"), NOW + 100);
    EXPECT_EQ(again.lease->slot, a.lease->slot);
    EXPECT_EQ(again.lease->fence, a.lease->fence);
    // a caller that lists the slot as already known gets another one
    auto r = req("a", "i1");
    r.exclude = {1};
    EXPECT_EQ(t.acquire(r, NOW + 100).lease->slot, 2);
}

TEST(SlotChoice, PreferredThenStickyThenLowest) {
    LeaseTable t(3, TOL);
    auto r = req("a", "i1");
    r.preferred = 5;
    EXPECT_EQ(t.acquire(r, NOW).lease->slot, 5);
    // preferred slot held by someone else: fall through to lowest free
    auto r2 = req("b", "i2");
    r2.preferred = 5;
    EXPECT_EQ(t.acquire(r2, NOW).lease->slot, 0);
    // sticky: a free slot last owned by the same key wins over the lowest
    auto c = t.acquire(req("c", "i3"), NOW);  // slot 1
    auto d = t.acquire(req("d", "i4"), NOW);  // slot 2
    t.release(d.lease->slot, "i4", d.lease->fence, NOW + 1);
    t.release(c.lease->slot, "i3", c.lease->fence, NOW + 1);
    EXPECT_EQ(t.acquire(req("d", "i5"), NOW + 2).lease->slot, 2);
    // sticky also for an expired slot of the same key (a crashed earlier incarnation)
    auto e = t.acquire(req("e", "i6"), NOW);  // slot 1
    ASSERT_EQ(e.lease->slot, 1);
    EXPECT_EQ(t.acquire(req("e", "i7"), NOW + TTL).lease->slot, 1);
}

TEST(SlotChoice, PreferenceListOrder) {
    LeaseTable t(2, TOL);
    t.acquire(req("k", "old"), NOW);                // slot 0, will expire
    auto mine = t.acquire(req("k", "me"), NOW + TTL);  // slot 0 expired? no: sticky picks 0
    ASSERT_EQ(mine.lease->slot, 0);
    AcquireRequest r = req("k", "me");
    r.preferred = 3;
    auto order = slot_preference(t.rows(), r, NOW + TTL);
    ASSERT_GE(order.size(), 3u);
    EXPECT_EQ(order[0], 0);  // held by me
    EXPECT_EQ(order[1], 3);  // preferred
    EXPECT_EQ(order[2], 1);  // lowest free
}

TEST(DuplicateOwnerKey, LiveLeaseWithSameKeyIsNeverTakenOver) {
    LeaseTable t(1, TOL);
    auto a = t.acquire(req("host:5432", "old"), NOW);
    auto b = t.acquire(req("host:5432", "new"), NOW + 1);
    ASSERT_TRUE(b.lease);
    EXPECT_TRUE(b.duplicate_key);
    EXPECT_NE(b.lease->slot, a.lease->slot);
    EXPECT_EQ(t.row(a.lease->slot).incarnation, "old");
}

TEST(SlotChoice, PreferenceListsOnlyAvailableSlots) {
    LeaseTable t(2, TOL);
    t.acquire(req("a", "i1"), NOW);            // slot 0, live
    auto b = t.acquire(req("b", "i2"), NOW);   // slot 1, released below
    t.acquire(req("c", "i3"), NOW - 2 * TTL);  // slot 2, already expired at NOW
    t.release(b.lease->slot, "i2", b.lease->fence, NOW);
    AcquireRequest r = req("z", "iz");
    r.preferred = 0;  // held by someone else: not a candidate
    auto order = slot_preference(t.rows(), r, NOW);
    EXPECT_EQ(order, (std::vector<int32_t>{1, 2, 3}));
}

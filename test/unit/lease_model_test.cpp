#include <gtest/gtest.h>

#include "lease_model.hpp"

using namespace cosid;

namespace {
const int64_t TTL = 30000, TOL = 1000, NOW = 1750000000000LL;
AcquireRequest req(const std::string& key, const std::string& inc) {
    AcquireRequest r;
    r.key = key;
    r.incarnation = inc;
    r.ttl_ms = TTL;
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
    t.acquire(req("x", "ix"), NOW);  // slot 1, live: slot 0 is the only available slot below
    // store clock jumps back an hour: the new holder's ceiling is at least its floor
    t.revoke(0);
    auto c = t.acquire(req("c", "i3"), NOW - 3600000);
    ASSERT_TRUE(c.lease);
    EXPECT_EQ(c.lease->slot, 0);
    EXPECT_EQ(c.lease->floor, a.lease->ceiling);
    EXPECT_EQ(c.lease->ceiling, c.lease->floor);  // empty: the store's now + ttl is below it
}

// After a raise every floor lies max_ttl + 2 x max_tolerance ahead: a window granted then is
// empty until the store's clock comes within ttl + tolerance of the floor (never measured from
// the floor, nor from the store's limits, which a failover may lose), then holds ids ahead of
// the clock; renewals extend it with the clock and never shrink it.
TEST(LeaseRules, AfterARaiseAWindowOpensWithinTtlPlusToleranceOfTheFloor) {
    StoreLimits lim;  // max_ttl 60 s, max_tolerance 5 s
    LeaseTable t(1, TOL, lim, NOW);
    t.acquire(req("a", "i1"), NOW);
    t.raise_after_lost_history(NOW + 1000, lim);
    const int64_t F = NOW + 1000 + lim.raise_margin_ms();
    auto b = t.acquire(req("b", "i2"), NOW + 1000);
    ASSERT_TRUE(b.lease);
    EXPECT_EQ(b.lease->floor, F);
    EXPECT_EQ(b.lease->ceiling, F);       // empty: F is past now + ttl + tolerance
    const int64_t opens = F - TTL - TOL;  // the store's now from which a window holds a tick
    auto r = t.renew(b.lease->slot, "i2", b.lease->fence, TTL, opens);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->ceiling, F);
    r = t.renew(b.lease->slot, "i2", b.lease->fence, TTL, opens + 2000);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->ceiling, F + 2000);
    // a renewal at an earlier store time (its clock stepped back) never shrinks the window
    r = t.renew(b.lease->slot, "i2", b.lease->fence, TTL, opens + 500);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->ceiling, F + 2000);
    // a window granted once the store is past the floor is an ordinary one
    auto c = t.acquire(req("c", "i3"), F + 10);
    ASSERT_TRUE(c.lease);
    EXPECT_EQ(c.lease->floor, F);
    EXPECT_EQ(c.lease->ceiling, F + 10 + TTL + TOL);
}

// A window that holds no whole tick of its layout yet is renewed soon: in a seconds layout
// (floor, floor + 500 ms] after a floor at .300 holds none, in a ms layout it holds 500.
TEST(LeaseRules, AWindowWithoutAWholeTickIsRenewedSoon) {
    const int64_t F = NOW + 300;
    EXPECT_EQ(renew_after_ms(TTL, NOW + TTL, NOW, F, F + 500, 1000), kEmptyWindowRenewMs);
    EXPECT_EQ(renew_after_ms(TTL, NOW + TTL, NOW, F, F + 700, 1000), TTL / 3);
    EXPECT_EQ(renew_after_ms(TTL, NOW + TTL, NOW, F, F + 500, 1), TTL / 3);
    EXPECT_EQ(renew_after_ms(TTL, NOW + TTL, NOW, F, F, 1), kEmptyWindowRenewMs);
}

// A lease found gone was freed by a raise when the raise came after the store's last answer
// that held it, within max_tolerance (the raising store's clock may be that far behind).
TEST(LeaseRules, FreedByARaiseOnlyWhenTheRaiseCameAfterTheLastAnswer) {
    EXPECT_TRUE(freed_by_raise(NOW, NOW + 1, 0));
    EXPECT_FALSE(freed_by_raise(NOW, NOW, 0));
    EXPECT_TRUE(freed_by_raise(NOW, NOW - 900, 1000));  // the new primary's clock 0.9 s behind
    EXPECT_FALSE(freed_by_raise(NOW, NOW - 1000, 1000));
    EXPECT_FALSE(freed_by_raise(NOW, std::nullopt, 5000));  // no raise: revoked or taken over
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
    ASSERT_TRUE(rel);
    EXPECT_EQ(rel->next_floor, a.lease->ceiling);
    // once that ceiling has passed, the same key gets slot 0 back, starting at the ceiling
    auto b = t.acquire(req("a", "i1"), a.lease->ceiling);
    ASSERT_TRUE(b.lease);
    ASSERT_EQ(b.lease->slot, 0);
    EXPECT_EQ(b.lease->floor, a.lease->ceiling);
    rel = t.release(b.lease->slot, "i1", b.lease->fence, 5);  // below floor: floor wins
    ASSERT_TRUE(rel);
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

TEST(SlotChoice, RepeatedAcquireBySameIncarnationGetsAnotherSlot) {
    LeaseTable t(2, TOL);
    t.acquire(req("x", "ix"), NOW);           // slot 0
    auto a = t.acquire(req("a", "i1"), NOW);  // slot 1
    // A retry of an acquire (its answer lost, or a second slot wanted) never gets the live
    // lease back with its old floor: it may already have issued there.
    auto again = t.acquire(req("a", "i1"), NOW + 100);
    ASSERT_TRUE(again.lease);
    EXPECT_EQ(again.lease->slot, 2);
    EXPECT_FALSE(again.duplicate_key);  // same incarnation: not a duplicate owner
    // not even when it is the preferred slot
    auto r = req("a", "i1");
    r.preferred = a.lease->slot;
    EXPECT_EQ(t.acquire(r, NOW + 200).lease->slot, 3);
    EXPECT_EQ(t.row(a.lease->slot).fence, a.lease->fence);
    EXPECT_EQ(t.row(a.lease->slot).expires_at, a.lease->expires_at);
    // every slot is held now, by this incarnation too: Exhausted
    auto none = t.acquire(req("a", "i1"), NOW + 300);
    EXPECT_FALSE(none.lease);
    ASSERT_TRUE(none.earliest_expiry);
    EXPECT_EQ(*none.earliest_expiry, NOW + TTL);
}

TEST(SlotChoice, LostAnswerOrphanReleasedAtItsCeiling) {
    LeaseTable t(1, TOL);
    auto seen = t.acquire(req("a", "i1"), NOW);         // slot 0: the owner got this answer
    auto orphan = t.acquire(req("a", "i1"), NOW + 10);  // slot 1: applied, answer lost
    ASSERT_EQ(orphan.lease->slot, 1);
    // The owner finds a lease of its incarnation it does not know and hands it back at its
    // ceiling: nothing it could have issued there lies above that.
    const LeaseRow& row = t.row(1);
    ASSERT_EQ(row.incarnation, "i1");
    auto rel = t.release(row.slot, "i1", row.fence, row.ceiling);
    ASSERT_TRUE(rel);
    EXPECT_EQ(rel->next_floor, orphan.lease->ceiling);
    auto next = t.acquire(req("b", "i2"), NOW + 20);
    ASSERT_EQ(next.lease->slot, 1);
    EXPECT_EQ(next.lease->floor, orphan.lease->ceiling);
    // left alone instead, an orphan expires and the next holder also starts at its ceiling
    t.release(seen.lease->slot, "i1", seen.lease->fence, NOW + 5);
    auto orphan2 = t.acquire(req("a", "i1"), NOW + 30);  // slot 0 again, answer lost
    ASSERT_EQ(orphan2.lease->slot, 0);
    EXPECT_EQ(orphan2.lease->floor, NOW + 5);
    auto later = t.acquire(req("c", "i3"), orphan2.lease->expires_at);
    ASSERT_EQ(later.lease->slot, 0);
    EXPECT_EQ(later.lease->floor, orphan2.lease->ceiling);
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
    // sticky also for an expired slot of the same key (a crashed earlier incarnation), once
    // its ceiling has passed; by then slot 0 (b's) is expired too and lower, but not sticky
    auto e = t.acquire(req("e", "i6"), NOW + 2);  // slot 1, released at NOW + 1
    ASSERT_EQ(e.lease->slot, 1);
    ASSERT_LE(t.row(0).next_floor, e.lease->ceiling);
    EXPECT_EQ(t.acquire(req("e", "i7"), e.lease->ceiling).lease->slot, 1);
}

TEST(SlotChoice, PreferenceListOrder) {
    LeaseTable t(2, TOL);
    auto old = t.acquire(req("k", "old"), NOW);            // slot 0, expired at NOW + TTL
    auto mine = t.acquire(req("k", "me"), NOW + TTL / 2);  // slot 1, live at `at`
    auto z = t.acquire(req("z", "iz"), NOW + TTL / 2);     // slot 2, live at `at`
    ASSERT_EQ(mine.lease->slot, 1);
    ASSERT_EQ(z.lease->slot, 2);
    const int64_t at = old.lease->ceiling;  // slot 0's next window can start now
    ASSERT_LT(at, mine.lease->expires_at);
    AcquireRequest r = req("k", "me");
    r.preferred = 3;
    auto order = slot_preference(t.rows(), r, at);
    // preferred, then sticky (expired, same key), then lowest; my own live slot 1 never
    EXPECT_EQ(order, (std::vector<int32_t>{3, 0}));
    r.preferred = std::nullopt;
    t.revoke(2);
    // slot 2's next window starts at its ceiling, still ahead: after every usable slot
    EXPECT_EQ(slot_preference(t.rows(), r, at), (std::vector<int32_t>{0, 3, 2}));
    // once that ceiling has passed (my slot 1 kept live), it is ordered by number again
    ASSERT_TRUE(t.renew(mine.lease->slot, "me", mine.lease->fence, TTL, at));
    EXPECT_EQ(slot_preference(t.rows(), r, z.lease->ceiling), (std::vector<int32_t>{0, 2, 3}));
}

TEST(SlotChoice, SlotWithFloorAheadComesLast) {
    LeaseTable t(2, TOL);
    auto a = t.acquire(req("a", "i1"), NOW);            // slot 0
    auto x = t.acquire(req("x", "ix"), NOW - 2 * TTL);  // slot 1, expired (and past its ceiling) at NOW
    ASSERT_EQ(a.lease->slot, 0);
    ASSERT_EQ(x.lease->slot, 1);
    ASSERT_LE(x.lease->ceiling, NOW);
    // slot 0 handed back at its ceiling: free, but its next window cannot start before that
    auto rel = t.release(0, "i1", a.lease->fence, a.lease->ceiling);
    ASSERT_TRUE(rel);
    ASSERT_EQ(rel->next_floor, a.lease->ceiling);
    ASSERT_GT(rel->next_floor, NOW + 10);
    // slot 0 is the lowest, the preferred and the sticky slot of "a", and still comes last;
    // the free slots 2 and 3 come before the expired lease of slot 1
    AcquireRequest r = req("a", "i2");
    r.preferred = 0;
    EXPECT_EQ(slot_preference(t.rows(), r, NOW + 10), (std::vector<int32_t>{2, 3, 1, 0}));
    // (the moment that floor is reached it is first again)
    EXPECT_EQ(slot_preference(t.rows(), r, a.lease->ceiling), (std::vector<int32_t>{0, 2, 3, 1}));
    auto got = t.acquire(r, NOW + 10);
    ASSERT_TRUE(got.lease);
    EXPECT_EQ(got.lease->slot, 2);
    EXPECT_EQ(t.row(0).incarnation, "");
    // with slots 1 and 3 held too, slot 0 is the only available slot: it is granted, starting
    // at its next_floor
    EXPECT_EQ(t.acquire(req("b", "i3"), NOW + 10).lease->slot, 3);
    EXPECT_EQ(t.acquire(req("c", "i4"), NOW + 10).lease->slot, 1);
    EXPECT_EQ(slot_preference(t.rows(), req("d", "i5"), NOW + 20), (std::vector<int32_t>{0}));
    auto last = t.acquire(req("d", "i5"), NOW + 20);
    ASSERT_TRUE(last.lease);
    EXPECT_EQ(last.lease->slot, 0);
    EXPECT_EQ(last.lease->floor, a.lease->ceiling);
    EXPECT_EQ(last.lease->fence, rel->fence + 1);
    EXPECT_GE(last.lease->ceiling, last.lease->floor);
}

// After a raise no slot's next window can start now: each asker takes back the slot the raise
// freed from it (sticky, or its preferred slot), not the lowest free slot every other asker
// would race for; a key that held none takes the lowest free slot, as before.
TEST(SlotChoice, AfterARaiseEachAskerTakesBackItsOwnSlot) {
    StoreLimits lim;
    LeaseTable t(3, TOL, lim, NOW);
    for (const char* k : {"a", "b", "c", "d"}) ASSERT_TRUE(t.acquire(req(k, std::string("1") + k), NOW).lease);
    t.raise_after_lost_history(NOW + 1000, lim);
    const int64_t at = NOW + 2000;  // every next floor is ahead of the clock
    EXPECT_EQ(slot_preference(t.rows_as_raised(), req("c", "2c"), at).front(), 2);
    AcquireRequest pref = req("z", "2z");
    pref.preferred = 3;
    EXPECT_EQ(slot_preference(t.rows_as_raised(), pref, at).front(), 3);
    EXPECT_EQ(t.acquire(req("d", "2d"), at).lease->slot, 3);
    EXPECT_EQ(t.acquire(req("b", "2b"), at).lease->slot, 1);
    EXPECT_EQ(t.acquire(req("new", "2n"), at).lease->slot, 0);  // a's slot, the lowest free one
    auto a = t.acquire(req("a", "2a"), at);                     // its own is taken: the lowest free
    ASSERT_TRUE(a.lease);
    EXPECT_EQ(a.lease->slot, 2);
    EXPECT_GE(a.lease->floor, NOW + 1000 + lim.raise_margin_ms());
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
    EXPECT_EQ(order, (std::vector<int32_t>{1, 3, 2}));  // free slots before the expired lease
}

// An orphan (an acquire whose answer its owner never saw) expires; the owner gets it back
// only when no other slot is available, and then with a window from its ceiling on.
TEST(SlotChoice, OwnExpiredOrphanIsTheLastResort) {
    LeaseTable t(1, TOL);
    auto orphan = t.acquire(req("a", "i1"), NOW);  // slot 0: the answer is lost
    ASSERT_TRUE(orphan.lease);
    auto later = NOW + TTL + TOL + 1;  // the orphan expired; slot 1 is free
    auto a = t.acquire(req("a", "i1"), later);
    ASSERT_TRUE(a.lease);
    EXPECT_EQ(a.lease->slot, 1);  // another available slot comes first
    EXPECT_EQ(slot_preference(t.rows(), req("a", "i1"), later), (std::vector<int32_t>{0}));
    auto back = t.acquire(req("a", "i1"), later);  // only the orphan is left
    ASSERT_TRUE(back.lease);
    EXPECT_EQ(back.lease->slot, 0);
    EXPECT_EQ(back.lease->fence, orphan.lease->fence + 1);
    EXPECT_EQ(back.lease->floor, orphan.lease->ceiling);
    // never while it is live
    EXPECT_FALSE(t.acquire(req("a", "i1"), later).lease);
}

TEST(FloorBounds, AKeeperRaisesNoFurtherThanTheProtocolsOwnMargin) {
    StoreLimits limits;  // 60 s, 5 s
    EXPECT_TRUE(keeper_may_raise_to(1000 + 70000, 1000, limits));
    EXPECT_FALSE(keeper_may_raise_to(1000 + 70001, 1000, limits));
    EXPECT_TRUE(keeper_may_raise_to(0, 1000, limits));  // a floor in the past raises nothing
    // 2093, from 2026: refused whatever the limits allow at most (24 h, 1 h)
    StoreLimits widest{86400000, 3600000};
    EXPECT_FALSE(keeper_may_raise_to(3902688000000, 1764892800000, widest));
}

TEST(FloorBounds, ALoweredFloorStaysAboveEveryRowAndStaticCeiling) {
    LeaseRow a, b;
    a.floor = 100;
    a.ceiling = 900;
    a.next_floor = 900;
    b.floor = 950;
    b.ceiling = 950;
    b.next_floor = 400;  // a row whose window never opened
    EXPECT_EQ(lowest_floor_allowed({a, b}, {}), 950);
    EXPECT_EQ(lowest_floor_allowed({a, b}, {1200}), 1200);
    EXPECT_EQ(lowest_floor_allowed({}, {}), 0);
}

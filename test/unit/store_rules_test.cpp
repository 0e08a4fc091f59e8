// The store's rules for a lost history, one by one: a store without its history raises like a
// failover (raise_after_lost_history, and namespace_first_floor after a raise), a store made
// again starts at its now (store_may_be_dropped, namespace_first_floor), the limits every
// grant and namespace keep (StoreLimits), and a layout never changes under a live id
// (namespace_change_refused, Layout::slot_fits).
#include <gtest/gtest.h>

#include "layout.hpp"
#include "lease_model.hpp"

using namespace cosid;

namespace {
const int64_t NOW = 1750000000000LL;
const StoreLimits LIMITS{60000, 5000};
const int64_t MARGIN = 60000 + 2 * 5000;

AcquireRequest req(const std::string& key, const std::string& inc, int64_t ttl = 30000) {
    AcquireRequest r;
    r.key = key;
    r.incarnation = inc;
    r.ttl_ms = ttl;
    return r;
}
}  // namespace

TEST(StoreLimitsRule, MarginIsMaxTtlAndTwiceMaxTolerance) {
    EXPECT_EQ(LIMITS.raise_margin_ms(), MARGIN);
    EXPECT_EQ((StoreLimits{300, 0}).raise_margin_ms(), 300);
}

TEST(StoreLimitsRule, NoGrantOrRenewalLongerThanMaxTtl) {
    LeaseTable t(2, 1000, LIMITS, NOW);
    // asked for longer: granted at max_ttl, not refused (a reloaded cosid.ttl loses no lease)
    auto a = t.acquire(req("a", "i1", LIMITS.max_ttl_ms + 1), NOW);
    ASSERT_TRUE(a.lease);
    EXPECT_EQ(a.lease->expires_at, NOW + LIMITS.max_ttl_ms);
    EXPECT_EQ(a.lease->ceiling, NOW + LIMITS.max_ttl_ms + 1000);
    auto r = t.renew(0, "i1", a.lease->fence, 10 * LIMITS.max_ttl_ms, NOW + 10);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->expires_at, NOW + 10 + LIMITS.max_ttl_ms);
    EXPECT_EQ(r->ceiling, NOW + 10 + LIMITS.max_ttl_ms + 1000);
    // a lease that is gone is still lost, whatever the ttl
    EXPECT_FALSE(t.renew(0, "other", 99, LIMITS.max_ttl_ms + 1, NOW + 10));
    EXPECT_TRUE(t.renew(0, "i1", a.lease->fence, LIMITS.max_ttl_ms, NOW + 20));
    // release and revoke take no ttl
    EXPECT_TRUE(t.release(0, "i1", a.lease->fence, NOW + 25));
    // a table without limits grants any ttl (the model before the store had limits)
    LeaseTable free_(1, 1000, NOW);
    auto f = free_.acquire(req("a", "i1", 10 * LIMITS.max_ttl_ms), NOW);
    ASSERT_TRUE(f.lease);
    EXPECT_EQ(f.lease->expires_at, NOW + 10 * LIMITS.max_ttl_ms);
    EXPECT_FALSE(free_.limits());
}

TEST(StoreLimitsRule, NoNamespaceToleranceAboveMaxTolerance) {
    EXPECT_THROW(LeaseTable(1, LIMITS.max_tolerance_ms + 1, LIMITS, NOW), StoreLimitExceeded);
    LeaseTable t(1, LIMITS.max_tolerance_ms, LIMITS, NOW);
    ASSERT_TRUE(t.limits());
    EXPECT_EQ(t.limits()->max_tolerance_ms, LIMITS.max_tolerance_ms);
}

TEST(LostHistoryRule, FreesEveryLeaseAndRaisesEveryNextFloor) {
    LeaseTable t(2, 5000, LIMITS, NOW - 100000);
    auto held = t.acquire(req("a", "i1"), NOW);             // slot 0, live
    auto released = t.acquire(req("b", "i2"), NOW);         // slot 1, released below
    auto far = t.acquire(req("c", "i3", 60000), NOW + 10);  // slot 2, revoked: next_floor far ahead
    ASSERT_TRUE(t.release(1, "i2", released.lease->fence, NOW + 7));
    ASSERT_TRUE(t.revoke(2));
    ASSERT_EQ(far.lease->slot, 2);
    const LeaseTable before = t;
    const int64_t R = NOW - 6000;  // the restored server's clock is 6 s behind
    EXPECT_FALSE(t.raised_at());
    EXPECT_EQ(t.raise_after_lost_history(R, LIMITS), 1) << "only the held row is written (the lazy raise)";
    EXPECT_EQ(t.raised_at(), R);
    EXPECT_EQ(t.raised_floor(), R + MARGIN);
    const std::vector<LeaseRow> seen = t.rows_as_raised();
    for (int32_t s = 0; s < 4; ++s) {
        const LeaseRow &r = t.row(s), &b = before.row(s);
        SCOPED_TRACE("slot " + std::to_string(s));
        EXPECT_FALSE(r.has_owner());
        EXPECT_EQ(r.fence, b.fence + (b.has_owner() ? kLostHistoryFenceStep : 0));
        EXPECT_EQ(t.missed_raise(r), !b.has_owner());
        EXPECT_EQ(seen[s].next_floor, std::max({b.next_floor, b.has_owner() ? b.ceiling : b.next_floor, R + MARGIN}));
        EXPECT_GE(seen[s].next_floor, R + MARGIN);
        EXPECT_EQ(r.floor, b.floor) << "floors never move back (nor does the raise move them)";
    }
    EXPECT_EQ(t.row(0).previous_owner_key, "a");
    EXPECT_EQ(t.row(1).previous_owner_key, "b");
    // slot 2's next_floor (the revoked ceiling) was above the margin already: kept
    EXPECT_EQ(seen[2].next_floor, far.lease->ceiling);
    ASSERT_GT(far.lease->ceiling, R + MARGIN);
    // the holder of the lost history finds its lease lost, its release too
    EXPECT_FALSE(t.renew(0, "i1", held.lease->fence, 30000, R + 1));
    EXPECT_FALSE(t.release(0, "i1", held.lease->fence, NOW + 10));
    // the next window starts above what the holder could still issue
    auto next = t.acquire(req("a", "i1"), R + 1);
    ASSERT_TRUE(next.lease);
    EXPECT_GE(next.lease->floor, held.lease->ceiling);
    EXPECT_GE(next.lease->floor, R + MARGIN);
    EXPECT_EQ(next.lease->fence, before.row(next.lease->slot).fence + kLostHistoryFenceStep + 1);
}

// The margin's proof at its edge: a grant of max_ttl with the namespace's max_tolerance made
// on the origin at g, lost, and the raise made at once on a server whose clock is
// max_tolerance behind.  The next window starts exactly at the lost ceiling.
TEST(LostHistoryRule, CoversALostGrantWithClocksMaxToleranceApart) {
    const LeaseTable dump(1, LIMITS.max_tolerance_ms, LIMITS, NOW - 1000);
    LeaseTable origin = dump;
    auto lost = origin.acquire(req("a", "i1", LIMITS.max_ttl_ms), NOW);  // not in the dump
    ASSERT_TRUE(lost.lease);
    LeaseTable restored = dump;
    restored.raise_after_lost_history(NOW - LIMITS.max_tolerance_ms, LIMITS);
    auto next = restored.acquire(req("b", "i2"), NOW - LIMITS.max_tolerance_ms);
    ASSERT_TRUE(next.lease);
    EXPECT_EQ(next.lease->slot, lost.lease->slot);
    EXPECT_EQ(next.lease->floor, lost.lease->ceiling);
}

TEST(LostHistoryRule, RaiseAgainOnlyRaises) {
    LeaseTable t(1, 1000, LIMITS, NOW);
    t.raise_after_lost_history(NOW + 5000, LIMITS);
    const LeaseTable once = t;
    t.raise_after_lost_history(NOW, LIMITS);  // a server whose clock is behind raises again
    EXPECT_EQ(t.raised_floor(), once.raised_floor()) << "the furthest floor of the two";
    for (int32_t s = 0; s < 2; ++s) {
        EXPECT_EQ(t.raised_next_floor(t.row(s)), once.raised_next_floor(once.row(s)));
        EXPECT_EQ(t.row(s).fence, once.row(s).fence) << "free rows are not written by a raise";
    }
    EXPECT_EQ(t.raised_at(), NOW);
    // a free row brought up after both takes a step for each
    auto a = t.acquire(req("a", "i1"), NOW);
    ASSERT_TRUE(a.lease);
    EXPECT_EQ(a.lease->fence, 2 * kLostHistoryFenceStep + 1);
    EXPECT_EQ(a.lease->floor, NOW + 5000 + MARGIN);
}

// The lazy raise (cosid._follow_timeline, LeaseTable::raise_after_lost_history): its cost is
// the held rows, and a free row takes it when it is next acquired.
TEST(LazyRaise, WritesOnlyTheHeldRows) {
    LeaseTable t(6, 1000, LIMITS, NOW - 100000);
    ASSERT_TRUE(t.acquire(req("a", "i1"), NOW).lease);
    ASSERT_TRUE(t.acquire(req("b", "i2"), NOW).lease);
    const LeaseTable before = t;
    EXPECT_EQ(t.raise_after_lost_history(NOW + 10, LIMITS), 2);
    int written = 0;
    for (int32_t s = 0; s < 64; ++s) {
        const LeaseRow &r = t.row(s), &b = before.row(s);
        const bool same = r.fence == b.fence && r.next_floor == b.next_floor && r.raise_seen == b.raise_seen &&
                          r.incarnation == b.incarnation;
        written += same ? 0 : 1;
    }
    EXPECT_EQ(written, 2);
    EXPECT_EQ(t.raise_count(), 1);
}

TEST(LazyRaise, AFreeRowTakesTheRaiseWhenAcquired) {
    LeaseTable t(1, 1000, LIMITS, NOW - 100000);
    auto a = t.acquire(req("a", "i1"), NOW);  // slot 0; slot 1 free
    ASSERT_TRUE(a.lease);
    const int64_t free_fence = t.row(1).fence;
    t.raise_after_lost_history(NOW + 10, LIMITS);
    ASSERT_TRUE(t.missed_raise(t.row(1)));
    EXPECT_LT(t.row(1).next_floor, NOW + 10 + MARGIN) << "left as it was";
    // the slot cannot start now: its next window starts at the raised floor
    auto b = t.acquire(req("b", "i2"), NOW + 20);
    ASSERT_TRUE(b.lease);
    auto c = t.acquire(req("c", "i3"), NOW + 20);
    ASSERT_TRUE(c.lease);
    const LeaseRow& r1 = t.row(1);
    EXPECT_EQ(r1.incarnation, b.lease->slot == 1 ? "i2" : "i3");
    EXPECT_EQ(r1.fence, free_fence + kLostHistoryFenceStep + 1);
    EXPECT_EQ(r1.floor, NOW + 10 + MARGIN);
    EXPECT_FALSE(t.missed_raise(r1));
}

// A row brought up in a lost tail (it knew the first raise) and again after the second raise
// on the standby that missed that tail: the second table's fence is above every fence of the
// tail, so a renewal or release from the tail never matches, not even by its own incarnation.
TEST(LazyRaise, AFenceFromALostTailNeverMatches) {
    LeaseTable t(0, 1000, LIMITS, NOW - 100000);
    t.raise_after_lost_history(NOW, LIMITS);  // raise 1: the one slot stays free, not brought up
    const LeaseTable standby = t;
    auto tail = t.acquire(req("a", "i1"), NOW + 1);  // lost: brought up to raise 1 in the tail
    ASSERT_TRUE(tail.lease);
    EXPECT_EQ(tail.lease->fence, kLostHistoryFenceStep + 1);
    LeaseTable promoted = standby;
    promoted.raise_after_lost_history(NOW + 2, LIMITS);  // raise 2
    auto again = promoted.acquire(req("a", "i1"), NOW + 2);
    ASSERT_TRUE(again.lease);
    EXPECT_GT(again.lease->fence, tail.lease->fence);
    EXPECT_EQ(again.lease->fence, 2 * kLostHistoryFenceStep + 1);
    EXPECT_FALSE(promoted.renew(0, "i1", tail.lease->fence, 30000, NOW + 3));
    EXPECT_FALSE(promoted.release(0, "i1", tail.lease->fence, NOW + 3));
    EXPECT_GE(again.lease->floor, tail.lease->ceiling);
}

TEST(LazyRaise, GuardsAndArrivalsSeeTheRaisedFloor) {
    LeaseTable t(1, 1000, LIMITS, NOW - 100000);
    t.raise_after_lost_history(NOW, LIMITS);
    EXPECT_TRUE(store_may_be_dropped(t.rows(), NOW + 1)) << "the rows as written do not show the raise";
    EXPECT_FALSE(store_may_be_dropped(t.rows_as_raised(), NOW + 1));
    EXPECT_TRUE(store_may_be_dropped(t.rows_as_raised(), NOW + MARGIN));
    EXPECT_EQ(lowest_floor_allowed(t.rows_as_raised(), {}), NOW + MARGIN);
    // rows a restore loads after the raise are brought up at once (cosid._lease_arrives_raised)
    LeaseTable arrived = t;
    arrived.bring_all_up();
    for (const LeaseRow& r : arrived.rows()) {
        EXPECT_FALSE(arrived.missed_raise(r));
        EXPECT_EQ(r.next_floor, NOW + MARGIN);
        EXPECT_EQ(r.fence, kLostHistoryFenceStep);
    }
}

TEST(NamespaceFirstFloorRule, StoreNowUnlessARaiseIsAhead) {
    EXPECT_EQ(namespace_first_floor(NOW, std::nullopt, LIMITS), NOW);
    EXPECT_EQ(namespace_first_floor(NOW, NOW - 1000, LIMITS), NOW - 1000 + MARGIN);
    EXPECT_EQ(namespace_first_floor(NOW, NOW - MARGIN - 1, LIMITS), NOW);
    // the slots of a new namespace start there
    LeaseTable t(1, 0, LIMITS, namespace_first_floor(NOW, NOW - 1000, LIMITS));
    for (const LeaseRow& r : t.rows()) {
        EXPECT_EQ(r.floor, NOW - 1000 + MARGIN);
        EXPECT_EQ(r.ceiling, r.floor);
        EXPECT_EQ(r.next_floor, r.floor);
        EXPECT_EQ(r.fence, 0);
    }
    auto a = t.acquire(req("a", "i1"), NOW);
    ASSERT_TRUE(a.lease);
    EXPECT_EQ(a.lease->floor, NOW - 1000 + MARGIN);
}

// A namespace made with tolerance T on the origin, lost in the tail of a failover, made
// again with tolerance 0 right after the raise on a server max_tolerance behind: its first
// window starts at or above the lost holder's ceiling, because the margin is the store's
// limits', not the new definition's tolerance.
TEST(NamespaceFirstFloorRule, NamespaceLostInTheTailAndMadeAgainWithSmallerTolerance) {
    const int64_t T = LIMITS.max_tolerance_ms;
    LeaseTable lost_ns(1, T, LIMITS, NOW - 1000);
    auto lost = lost_ns.acquire(req("a", "i1", LIMITS.max_ttl_ms), NOW);
    ASSERT_TRUE(lost.lease);
    ASSERT_EQ(lost.lease->ceiling, NOW + LIMITS.max_ttl_ms + T);
    const int64_t R = NOW - LIMITS.max_tolerance_ms;  // the promoted standby raises at once
    LeaseTable other(1, 0, LIMITS, NOW - 5000);       // a namespace the standby has
    other.raise_after_lost_history(R, LIMITS);
    LeaseTable again(1, 0, LIMITS, namespace_first_floor(R, other.raised_at(), LIMITS));
    auto next = again.acquire(req("b", "i2"), R);
    ASSERT_TRUE(next.lease);
    EXPECT_GE(next.lease->floor, lost.lease->ceiling);
    // from the new definition's tolerance (0) the floor would be 2 T below the lost ceiling
    EXPECT_EQ(R + LIMITS.max_ttl_ms + 2 * 0, lost.lease->ceiling - 2 * T);
}

TEST(DropRule, RefusedWhileAnyRowReachesPastNow) {
    LeaseTable t(2, 1000, LIMITS, NOW - 100000);
    EXPECT_TRUE(store_may_be_dropped(t.rows(), NOW)) << "slots that start in the past";
    EXPECT_FALSE(store_may_be_dropped(t.rows(), NOW - 100001));
    auto a = t.acquire(req("a", "i1"), NOW);  // slot 0: held up to NOW + 31000
    EXPECT_EQ(reaches_until(t.row(0)), a.lease->ceiling);
    EXPECT_FALSE(store_may_be_dropped(t.rows(), NOW + 30000)) << "a live lease";
    EXPECT_FALSE(store_may_be_dropped(t.rows(), a.lease->expires_at + 1)) << "expired, but issuing up to its ceiling";
    EXPECT_TRUE(store_may_be_dropped(t.rows(), a.lease->ceiling));
    // a release hands back the unused end: the old ceiling no longer holds the drop
    ASSERT_TRUE(t.release(0, "i1", a.lease->fence, NOW + 50));
    EXPECT_EQ(reaches_until(t.row(0)), NOW + 50);
    EXPECT_TRUE(store_may_be_dropped(t.rows(), NOW + 50));
    EXPECT_FALSE(store_may_be_dropped(t.rows(), NOW + 49));
    // a revoked lease's next_floor is its ceiling
    auto b = t.acquire(req("b", "i2"), NOW + 100);
    ASSERT_TRUE(t.revoke(b.lease->slot));
    EXPECT_FALSE(store_may_be_dropped(t.rows(), b.lease->ceiling - 1));
    EXPECT_TRUE(store_may_be_dropped(t.rows(), b.lease->ceiling));
    // a held row's next_floor counts too (a floor raised above the ceiling by a failover)
    LeaseRow held;
    held.incarnation = "i";
    held.owner_key = "k";
    held.ceiling = NOW;
    held.next_floor = NOW + 5;
    EXPECT_EQ(reaches_until(held), NOW + 5);
    EXPECT_FALSE(store_may_be_dropped({held}, NOW + 4));
    EXPECT_TRUE(store_may_be_dropped({}, NOW));
}

// Once the drop is allowed, the store made again (whatever its holders' clocks) starts at or
// above everything the dropped store handed out.
TEST(DropRule, StoreMadeAgainStartsAboveTheOldOne) {
    LeaseTable old(2, 1000, LIMITS, NOW - 100000);
    auto a = old.acquire(req("a", "i1"), NOW);
    auto b = old.acquire(req("b", "i2"), NOW + 10);
    ASSERT_TRUE(old.release(b.lease->slot, "i2", b.lease->fence, b.lease->ceiling));
    int64_t at = NOW;
    while (!store_may_be_dropped(old.rows(), at)) ++at;
    EXPECT_EQ(at, std::max(a.lease->ceiling, b.lease->ceiling));
    const int64_t first = namespace_first_floor(at, std::nullopt, LIMITS);
    LeaseTable again(2, 0, LIMITS, first);
    for (const LeaseRow& r : old.rows()) EXPECT_LE(reaches_until(r), first);
    auto n = again.acquire(req("a", "i1"), at);
    EXPECT_GE(n.lease->floor, a.lease->ceiling);
}

TEST(LayoutRule, LayoutAndToleranceNeverChangeNotBeforeOnlyGrows) {
    NamespaceDefinition d;
    d.tolerance_ms = 1000;
    d.not_before_ms = 500;
    EXPECT_FALSE(namespace_change_refused(d, d));
    auto with = [&](auto edit) {
        NamespaceDefinition e = d;
        edit(e);
        return namespace_change_refused(d, e);
    };
    EXPECT_TRUE(with([](NamespaceDefinition& e) { e.layout.slot_bits = 8; }));
    EXPECT_TRUE(with([](NamespaceDefinition& e) { e.layout.sequence_bits = 11; }));
    EXPECT_TRUE(with([](NamespaceDefinition& e) { e.layout.timestamp_bits = 40; }));
    EXPECT_TRUE(with([](NamespaceDefinition& e) { e.layout.epoch_ms = 0; }));
    EXPECT_TRUE(with([](NamespaceDefinition& e) { e.layout.unit = Unit::Second; }));
    EXPECT_TRUE(with([](NamespaceDefinition& e) { e.tolerance_ms = 999; }));
    EXPECT_TRUE(with([](NamespaceDefinition& e) { e.tolerance_ms = 1001; }));
    EXPECT_TRUE(with([](NamespaceDefinition& e) { e.not_before_ms = 499; }));
    EXPECT_FALSE(with([](NamespaceDefinition& e) { e.not_before_ms = 501; }));
    // why: the same id read under another slot width is another (tick, slot)
    Layout l8 = d.layout, l10 = d.layout;
    l8.slot_bits = 8;
    l8.sequence_bits = 14;
    const int64_t id = l10.pack(l10.epoch_tick() + 1000, 4, 0);
    EXPECT_NE(l8.unpack(id).slot, 4);
}

TEST(LayoutRule, EveryGrantFitsTheLayout) {
    Layout l;
    l.slot_bits = 2;
    EXPECT_TRUE(l.slot_fits(0));
    EXPECT_TRUE(l.slot_fits(3));
    EXPECT_FALSE(l.slot_fits(4));
    EXPECT_FALSE(l.slot_fits(-1));
    // a slot past the layout would spill into the timestamp bits: another tick's id
    const int64_t tick = l.epoch_tick() + 1000;
    EXPECT_EQ(l.unpack(l.pack(tick, 4, 0)).tick, tick + 1);
    EXPECT_EQ(l.unpack(l.pack(tick, 4, 0)).slot, 0);
    // the model's table has exactly the layout's slots: every grant fits
    LeaseTable t(l.slot_bits, 0, LIMITS, NOW);
    for (int i = 0; i < 4; ++i) {
        auto g = t.acquire(req("k" + std::to_string(i), "i" + std::to_string(i)), NOW);
        ASSERT_TRUE(g.lease);
        EXPECT_TRUE(l.slot_fits(g.lease->slot));
    }
    EXPECT_FALSE(t.acquire(req("x", "ix"), NOW).lease);
}


TEST(StoreLimitsRule, KeeperRenewsAThirdOfWhatWasGranted) {
    // asked 90 s, granted 60 s (max_ttl): renewed after 20 s, and the grant counts as shortened
    EXPECT_TRUE(grant_shortened(90000, NOW + 60000, NOW));
    EXPECT_EQ(renew_after_ms(90000, NOW + 60000, NOW), 20000);
    // granted what was asked (or more: a renewal never shrinks a lease): a third of the ttl
    EXPECT_FALSE(grant_shortened(30000, NOW + 30000, NOW));
    EXPECT_EQ(renew_after_ms(30000, NOW + 30000, NOW), 10000);
    EXPECT_EQ(renew_after_ms(30000, NOW + 45000, NOW), 10000);
    // no store time in the answer: the ttl asked for
    EXPECT_FALSE(grant_shortened(30000, 5, 0));
    EXPECT_EQ(renew_after_ms(30000, 5, 0), 10000);
    // never sooner than 100 ms
    EXPECT_EQ(renew_after_ms(30000, NOW + 150, NOW), 100);
}

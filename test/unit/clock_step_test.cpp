// A clock that stepped back while a window was issuing: when a used-up window moves on (a
// leased one to a slot that can start now, a static one by extending its ceiling from its
// ids) and when it waits for the clock (src/core/clock_step.hpp).
#include <gtest/gtest.h>

#include "clock_step.hpp"
#include "issue_word.hpp"

using namespace cosid;
using namespace cosid::clock_step;

namespace {
const int64_t T0 = kDefaultEpochMs + 1000000000;
const int64_t kDay = 86400000;

Layout seq4() {  // the layout of the measurement: 4 sequence bits
    Layout l;
    l.slot_bits = 4;
    l.sequence_bits = 4;
    l.timestamp_bits = 45;
    return l;
}
Layout seconds() {
    Layout l;
    l.unit = Unit::Second;
    l.slot_bits = 4;
    l.sequence_bits = 8;
    l.timestamp_bits = 43;
    l.epoch_ms = kDefaultEpochMs;
    return l;
}
// The word of a window used up at `tick`: its last sequence issued.
uint64_t used_up(const Layout& l, int64_t tick) { return issue_word::encode(l, tick, l.max_sequence()); }
}  // namespace

TEST(ClockStep, NextClaimFollowsTheClaimRule) {
    Layout l = seq4();
    EXPECT_FALSE(next_claim_ms(l, issue_word::kFresh, T0).has_value());
    EXPECT_FALSE(next_claim_ms(l, issue_word::encode(l, T0, 1) | issue_word::kClosed, T0).has_value());
    // the clock past the last tick: the clock's tick
    EXPECT_EQ(next_claim_ms(l, issue_word::encode(l, T0, 3), T0 + 7), T0 + 7);
    // the clock at or behind it: the last tick while its sequence lasts, then the next
    EXPECT_EQ(next_claim_ms(l, issue_word::encode(l, T0 + 50, 3), T0), T0 + 50);
    EXPECT_EQ(next_claim_ms(l, used_up(l, T0 + 50), T0), T0 + 51);
    // and the same as claim() takes, in a window wide enough
    for (uint64_t w : {issue_word::encode(l, T0 + 50, 3), used_up(l, T0 + 50), issue_word::encode(l, T0 - 5, 0)}) {
        Claim c = claim(w, l, 0, ClaimWindow{0, T0 + kDay}, T0, issue_word::kBorrowToCeiling);
        ASSERT_EQ(c.status, NextStatus::Issued);
        EXPECT_EQ(l.unpack(c.id).tick, *next_claim_ms(l, w, T0));
    }
    Layout s = seconds();
    EXPECT_EQ(next_claim_ms(s, used_up(s, T0 / 1000 + 10), T0), (T0 / 1000 + 11) * 1000);
}

TEST(ClockStep, ALeaseUsedUpADayAheadIsLeft) {
    // A day's jump, then the correction: the lease was renewed at the jumped clock, so its
    // ceiling is a day + ttl + tolerance ahead; its ids used it up.
    Layout l = seq4();
    const int64_t ttl = 30000, tol = 1000, ceiling = T0 + kDay + ttl + tol;
    const uint64_t w = used_up(l, ceiling);
    const int64_t reach = T0 + ttl + tol;  // what a renewal at the corrected clock reaches
    EXPECT_EQ(lead_past_reach_ms(l, w, ceiling, reach, T0), kDay + 1);
    EXPECT_TRUE(leave_lease(l, w, ceiling, reach, T0, issue_word::kBorrowToCeiling, patience_ms(l, ttl / 6)));
    // with room left in the window it goes on from its last id: no move yet
    const uint64_t room = issue_word::encode(l, ceiling - 100, l.max_sequence());
    EXPECT_EQ(lead_past_reach_ms(l, room, ceiling, reach, T0), 0);
    EXPECT_FALSE(leave_lease(l, room, ceiling, reach, T0, issue_word::kBorrowToCeiling, patience_ms(l, ttl / 6)));
    const uint64_t last_sequence_left = issue_word::encode(l, ceiling, l.max_sequence() - 1);
    EXPECT_FALSE(
        leave_lease(l, last_sequence_left, ceiling, reach, T0, issue_word::kBorrowToCeiling, patience_ms(l, ttl / 6)));
}

TEST(ClockStep, ABorrowingWindowWaitsForItsRenewal) {
    // Ids asked for faster than the layout issues use a window up by borrowing: its ceiling
    // is the last renewal's reach.  A renewal at a later store time reaches past it.
    Layout l = seq4();
    const int64_t ttl = 2000, tol = 300, renewed_at = T0, ceiling = renewed_at + ttl + tol;
    const uint64_t w = used_up(l, ceiling);
    for (int64_t later : {1, 5, 700}) {
        EXPECT_EQ(lead_past_reach_ms(l, w, ceiling, renewed_at + later + ttl + tol, T0 + later), 0) << later;
        EXPECT_FALSE(leave_lease(l, w, ceiling, renewed_at + later + ttl + tol, T0 + later,
                                 issue_word::kBorrowToCeiling, patience_ms(l, 0)));
    }
    // a renewal in the same millisecond reaches one tick short: that is no reason to move
    EXPECT_EQ(lead_past_reach_ms(l, w, ceiling, ceiling, T0), 1);
    EXPECT_FALSE(leave_lease(l, w, ceiling, ceiling, T0, issue_word::kBorrowToCeiling, patience_ms(l, 0)));
    // seconds: the next tick is up to a second past the reach; the patience is a tick at least
    Layout s = seconds();
    const int64_t sc = T0 + ttl + tol, last_tick = sc / 1000;
    const uint64_t sw = used_up(s, last_tick);
    EXPECT_GT(lead_past_reach_ms(s, sw, sc, sc, T0), 0);
    EXPECT_LE(lead_past_reach_ms(s, sw, sc, sc, T0), 1000);
    EXPECT_FALSE(leave_lease(s, sw, sc, sc, T0, issue_word::kBorrowToCeiling, patience_ms(s, 0)));
    EXPECT_EQ(patience_ms(s, 0), 1000);
    EXPECT_EQ(patience_ms(s, 5000), 5000);
}

TEST(ClockStep, AHostClockAheadOfTheStoreIsNotHelpedByAMove) {
    // The host clock past the ceiling (ahead of the store): the next claim comes from the
    // clock, and any new window would end at the same reach.
    Layout l = seq4();
    const int64_t ceiling = T0 + 2300;
    const uint64_t w = used_up(l, ceiling);
    EXPECT_EQ(lead_past_reach_ms(l, w, ceiling, ceiling, T0 + 10000), 0);
    EXPECT_FALSE(leave_lease(l, w, ceiling, ceiling, T0 + 10000, issue_word::kBorrowToCeiling, 0));
    EXPECT_FALSE(leave_lease(l, w, ceiling, ceiling, T0 + 10000, 0, 0));
    EXPECT_EQ(lead_past_reach_ms(l, issue_word::kFresh, ceiling, ceiling, T0 + 10000), 0);
}

TEST(ClockStep, ABorrowLimitLeavesWhenTheClockIsFarBehind) {
    // cosid.max_borrow 0: no id ahead of the clock.  After a day's jump, corrected, the last
    // tick is a day ahead with room left in the window; its sequence used up, the next tick
    // would wait a day for the clock.  A slot whose window starts now issues at the clock.
    Layout l = seq4();
    const int64_t ttl = 30000, tol = 1000, ceiling = T0 + kDay + ttl + tol, reach = T0 + ttl + tol;
    const int64_t patience = patience_ms(l, ttl / 6);
    EXPECT_TRUE(leave_lease(l, used_up(l, T0 + kDay), ceiling, reach, T0, 0, patience));
    EXPECT_TRUE(leave_lease(l, used_up(l, T0 + kDay), ceiling, reach, T0, 60000, patience));
    EXPECT_FALSE(leave_lease(l, used_up(l, T0 + kDay), ceiling, reach, T0, issue_word::kBorrowToCeiling, patience));
    // its last tick's sequence not used up: that tick is still issued, no wait
    EXPECT_FALSE(leave_lease(l, issue_word::encode(l, T0 + kDay, 2), ceiling, reach, T0, 0, patience));
    // a borrow limit that waits a tick (ids asked for faster than the layout issues) stays
    EXPECT_FALSE(leave_lease(l, used_up(l, T0), T0 + ttl + tol, reach, T0, 0, patience));
    EXPECT_FALSE(leave_lease(l, used_up(l, T0 + 4000), T0 + ttl + tol, reach, T0, 0, patience));
    EXPECT_TRUE(leave_lease(l, used_up(l, T0 + 6000), T0 + ttl + tol, reach, T0, 0, patience));
    // and agrees with claim(): it waits exactly when claim() says SequenceExhausted for long
    for (int64_t last : {T0 - 3, T0, T0 + 1, T0 + 4999, T0 + 5001, T0 + kDay})
        for (int64_t borrow : {int64_t{0}, int64_t{100}, int64_t{6000}}) {
            Claim c = claim(used_up(l, last), l, 0, ClaimWindow{0, T0 + 2 * kDay}, T0, borrow);
            const bool long_wait = c.status == NextStatus::SequenceExhausted && c.wait_until_ms - T0 > patience;
            EXPECT_EQ(leave_lease(l, used_up(l, last), T0 + 2 * kDay, T0 + 2 * kDay, T0, borrow, patience), long_wait)
                << last - T0 << " " << borrow;
        }
}

TEST(ClockStep, StaticCeilingFollowsTheClockOrTheIds) {
    Layout l = seq4();
    const int64_t ahead = 10000, patience = patience_ms(l, 5000);
    // by the clock: now + ahead, never below the ceiling
    EXPECT_EQ(static_next_ceiling(l, issue_word::kFresh, T0, T0, ahead, patience), T0 + ahead);
    EXPECT_EQ(static_next_ceiling(l, issue_word::encode(l, T0, 0), T0 + ahead, T0 + 3000, ahead, patience),
              T0 + 3000 + ahead);
    EXPECT_EQ(static_next_ceiling(l, issue_word::encode(l, T0, 0), T0 + ahead, T0 - 1000, ahead, patience), T0 + ahead);
    // borrowing used it up: the clock's next ceiling reaches past it, as before
    EXPECT_EQ(static_next_ceiling(l, used_up(l, T0 + ahead), T0 + ahead, T0 + 1, ahead, patience), T0 + 1 + ahead);
    // after a day's jump, corrected: the window a day ahead, used up.  It goes on from its ids.
    const int64_t c = T0 + kDay + ahead;
    const int64_t next = static_next_ceiling(l, used_up(l, c), c, T0, ahead, patience);
    EXPECT_EQ(next, c + 1 + ahead);
    Claim after = claim(used_up(l, c), l, 3, ClaimWindow{T0, next}, T0, issue_word::kBorrowToCeiling);
    ASSERT_EQ(after.status, NextStatus::Issued);
    EXPECT_EQ(l.unpack(after.id).tick, c + 1);  // above every id issued, inside the new ceiling
    // not used up yet: it issues on in the window it has, the ceiling stays
    EXPECT_EQ(static_next_ceiling(l, issue_word::encode(l, c - 50, 0), c, T0, ahead, patience), c);
    // a step back shorter than the patience waits for the clock
    const int64_t small = T0 + 4000 + ahead;
    EXPECT_EQ(static_next_ceiling(l, used_up(l, small), small, T0, ahead, patience), small);
}

#include <gtest/gtest.h>

#include <set>

#include "window_generator.hpp"

using namespace cosid;

namespace {
const int64_t T0 = kDefaultEpochMs + 1000000;  // some ms after the epoch
}

TEST(WindowGenerator, ClosedGeneratorIssuesNothing) {
    WindowGenerator g;
    EXPECT_EQ(g.next(T0).status, NextStatus::Closed);
}

TEST(WindowGenerator, IssuesOnlyInsideWindow) {
    Layout l;
    WindowGenerator g;
    g.open(l, 7, T0, T0 + 10, 0);  // no borrowing: the clock must pass the floor
    // floor is exclusive
    auto r = g.next(T0);
    EXPECT_EQ(r.status, NextStatus::BeforeFloor);
    EXPECT_EQ(r.wait_until_ms, T0 + 1);
    r = g.next(T0 + 1);
    ASSERT_EQ(r.status, NextStatus::Issued);
    EXPECT_EQ(l.unpack(r.id).tick, T0 + 1);
    EXPECT_EQ(l.unpack(r.id).slot, 7);
    // ceiling is inclusive
    ASSERT_EQ(g.next(T0 + 10).status, NextStatus::Issued);
    EXPECT_EQ(g.next(T0 + 11).status, NextStatus::PastCeiling);
    g.extend(T0 + 20);
    EXPECT_EQ(g.next(T0 + 11).status, NextStatus::Issued);
    g.extend(T0 + 5);  // never lowers
    EXPECT_EQ(g.ceiling_ms(), T0 + 20);
}

TEST(WindowGenerator, ClockBehindContinuesOnLastTimestamp) {
    Layout l;
    WindowGenerator g;
    g.open(l, 0, T0, T0 + 100000);
    auto a = g.next(T0 + 500);
    auto b = g.next(T0 + 100);  // clock jumped back 400 ms
    ASSERT_EQ(b.status, NextStatus::Issued);
    EXPECT_EQ(l.unpack(b.id).tick, T0 + 500);
    EXPECT_GT(b.id, a.id);
}

TEST(WindowGenerator, ClockBehindBorrowsNextTickWhenSequenceRunsOut) {
    Layout l;
    l.sequence_bits = 2;
    l.timestamp_bits = 51;
    WindowGenerator g;
    g.open(l, 0, T0, T0 + 100000);
    int64_t prev = -1;
    for (int i = 0; i < 4; ++i) {
        auto r = g.next(T0 + 500);
        ASSERT_EQ(r.status, NextStatus::Issued);
        EXPECT_GT(r.id, prev);
        prev = r.id;
    }
    auto r = g.next(T0 + 100);  // clock is behind and tick T0+500 is full
    ASSERT_EQ(r.status, NextStatus::Issued);
    EXPECT_EQ(l.unpack(r.id).tick, T0 + 501);
    EXPECT_GT(r.id, prev);
}

TEST(WindowGenerator, SequenceExhaustedWaitsForNextTickWithoutBorrowing) {
    Layout l;
    WindowGenerator g;
    g.open(l, 3, T0, T0 + 100000, /*borrow_ms=*/0);
    std::set<int64_t> ids;
    for (int i = 0; i < 4096; ++i) {
        auto r = g.next(T0 + 5);
        ASSERT_EQ(r.status, NextStatus::Issued) << i;
        ids.insert(r.id);
    }
    EXPECT_EQ(ids.size(), 4096u);
    auto r = g.next(T0 + 5);
    EXPECT_EQ(r.status, NextStatus::SequenceExhausted);
    EXPECT_EQ(r.wait_until_ms, T0 + 6);
    r = g.next(T0 + 6);
    ASSERT_EQ(r.status, NextStatus::Issued);
    EXPECT_EQ(l.unpack(r.id).sequence, 0);  // past half the range: restart at 0
}

TEST(WindowGenerator, SequenceCarriesOverTicksUntilHalfRange) {
    Layout l;
    WindowGenerator g;
    g.open(l, 0, T0, T0 + 100000);
    g.next(T0 + 1);
    auto r = g.next(T0 + 2);
    EXPECT_EQ(l.unpack(r.id).sequence, 1);  // not reset to 0 at every tick
}

TEST(WindowGenerator, CeilingStopsBorrowing) {
    Layout l;
    l.sequence_bits = 1;
    l.timestamp_bits = 52;
    WindowGenerator g;
    g.open(l, 0, T0, T0 + 2);
    EXPECT_EQ(g.next(T0 + 2).status, NextStatus::Issued);
    EXPECT_EQ(g.next(T0 + 1).status, NextStatus::Issued);
    EXPECT_EQ(g.next(T0 + 1).status, NextStatus::PastCeiling);  // would borrow T0+3 > ceiling
}

TEST(WindowGenerator, CloseReturnsExactLastTimestamp) {
    Layout l;
    WindowGenerator g;
    g.open(l, 0, T0, T0 + 1000);
    g.next(T0 + 7);
    g.next(T0 + 3);
    EXPECT_EQ(g.close(), T0 + 7);
    EXPECT_EQ(g.next(T0 + 8).status, NextStatus::Closed);
    WindowGenerator h;
    h.open(l, 0, T0, T0 + 1000);
    EXPECT_FALSE(h.close().has_value());
}

TEST(WindowGenerator, SecondUnitRule) {
    Layout l;
    l.unit = Unit::Second;
    l.timestamp_bits = 31;
    l.slot_bits = 10;
    l.sequence_bits = 22;
    ASSERT_FALSE(l.validate().has_value());
    const int64_t s0 = T0 - T0 % 1000;  // whole second in ms
    WindowGenerator g;
    // floor in the middle of a second: that second's t*1000 <= floor, so not allowed
    g.open(l, 0, s0 + 500, s0 + 2500, 0);
    auto r = g.next(s0 + 800);
    EXPECT_EQ(r.status, NextStatus::BeforeFloor);
    EXPECT_EQ(r.wait_until_ms, s0 + 1000);
    r = g.next(s0 + 1200);
    ASSERT_EQ(r.status, NextStatus::Issued);
    EXPECT_EQ(l.unpack(r.id).tick, s0 / 1000 + 1);
    EXPECT_EQ(g.next(s0 + 2999).status, NextStatus::Issued);  // t = s0/1000+2, t*1000 <= ceiling
    EXPECT_EQ(g.next(s0 + 3000).status, NextStatus::PastCeiling);
    EXPECT_EQ(g.close(), s0 + 2000);
    // the next holder starts from that timestamp and can never reuse second s0/1000+2
    WindowGenerator h;
    h.open(l, 0, s0 + 2000, s0 + 9000, 0);
    EXPECT_EQ(h.next(s0 + 2999).status, NextStatus::BeforeFloor);
    EXPECT_EQ(l.unpack(h.next(s0 + 3000).id).tick, s0 / 1000 + 3);
    // borrowing (the default) takes that second at once
    WindowGenerator b;
    b.open(l, 0, s0 + 2000, s0 + 9000);
    EXPECT_EQ(l.unpack(b.next(s0 + 2100).id).tick, s0 / 1000 + 3);
}

TEST(WindowGenerator, OutOfRangeBeforeEpochAndPastField) {
    Layout l;
    WindowGenerator g;
    g.open(l, 0, 0, kDefaultEpochMs + 10);
    EXPECT_EQ(g.next(kDefaultEpochMs - 5).status, NextStatus::OutOfRange);
    Layout small;
    small.timestamp_bits = 31;
    small.slot_bits = 10;
    small.sequence_bits = 22;  // ~24 days of ms
    WindowGenerator h;
    h.open(small, 0, 0, INT64_MAX / 2);
    EXPECT_EQ(h.next(small.max_tick() + 1).status, NextStatus::OutOfRange);
    EXPECT_EQ(h.next(small.max_tick()).status, NextStatus::Issued);
}

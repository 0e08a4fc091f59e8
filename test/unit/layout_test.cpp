#include <gtest/gtest.h>

#include <random>

#include "layout.hpp"

using cosid::Layout;
using cosid::Unit;

TEST(Layout, DefaultIsValid41_10_12) {
    Layout l;
    EXPECT_FALSE(l.validate().has_value());
    EXPECT_EQ(l.timestamp_bits, 41);
    EXPECT_EQ(l.slot_bits, 10);
    EXPECT_EQ(l.sequence_bits, 12);
    EXPECT_EQ(l.epoch_ms, 1704067200000LL);
    EXPECT_EQ(l.max_sequence(), 4095);
}

TEST(Layout, RejectsMoreThan63Bits) {
    Layout l;
    l.sequence_bits = 13;
    auto e = l.validate();
    ASSERT_TRUE(e.has_value());
    EXPECT_NE(e->find("at most 63"), std::string::npos) << *e;
}

// 53 bits: every id is exact as a JavaScript number (a double has a 53-bit significand).
TEST(Layout, FewerBitsKeepEveryIdBelowTwoToTheTotal) {
    Layout l;
    l.timestamp_bits = 41;
    l.slot_bits = 4;
    l.sequence_bits = 8;
    ASSERT_FALSE(l.validate().has_value());
    EXPECT_EQ(l.total_bits(), 53);
    const int64_t top = l.pack(l.max_tick(), l.max_slot(), l.max_sequence());
    EXPECT_EQ(top, (int64_t{1} << 53) - 1);
    EXPECT_EQ(static_cast<int64_t>(static_cast<double>(top)), top);
    EXPECT_TRUE(l.id_fits(top));
    EXPECT_FALSE(l.id_fits(top + 1));
    EXPECT_FALSE(l.id_fits(-1));
    EXPECT_TRUE(l.id_fits(0));
    auto u = l.unpack(top);
    EXPECT_EQ(u.tick, l.max_tick());
    EXPECT_EQ(u.slot, 15);
    EXPECT_EQ(u.sequence, 255);
    // The smallest total: 31 + 1 + 1.
    l.timestamp_bits = 31;
    l.slot_bits = 1;
    l.sequence_bits = 1;
    l.unit = Unit::Second;
    EXPECT_FALSE(l.validate().has_value());
    EXPECT_EQ(l.total_bits(), cosid::kMinTotalBits);
    Layout full;
    EXPECT_TRUE(full.id_fits(INT64_MAX));
}

TEST(Layout, TickOfRoundsDownAlsoBeforeTheEpoch) {
    Layout l;
    EXPECT_EQ(l.tick_of(1234), 1234);
    EXPECT_EQ(l.tick_of(-1), -1);
    l.unit = Unit::Second;
    EXPECT_EQ(l.tick_of(1999), 1);
    EXPECT_EQ(l.tick_of(2000), 2);
    EXPECT_EQ(l.tick_of(-1), -1);
    EXPECT_EQ(l.tick_of(-1000), -1);
    EXPECT_EQ(l.tick_of(-1001), -2);
}

TEST(Layout, RejectsEachFieldOutOfBounds) {
    Layout l;
    l.slot_bits = 0;
    l.timestamp_bits = 51;
    ASSERT_TRUE(l.validate().has_value());
    EXPECT_NE(l.validate()->find("slot bits"), std::string::npos);
    l = Layout{};
    l.slot_bits = 17;
    l.timestamp_bits = 34;
    ASSERT_TRUE(l.validate().has_value());
    l = Layout{};
    l.sequence_bits = 0;
    l.timestamp_bits = 53;
    EXPECT_NE(l.validate()->find("sequence bits"), std::string::npos);
    l = Layout{};
    l.sequence_bits = 23;
    l.timestamp_bits = 30;
    EXPECT_TRUE(l.validate().has_value());
    l = Layout{};
    l.timestamp_bits = 30;
    l.sequence_bits = 23;
    EXPECT_NE(l.validate()->find("timestamp bits"), std::string::npos);
}

TEST(Layout, RejectsNegativeEpochAndFractionalSecondEpoch) {
    Layout l;
    l.epoch_ms = -1;
    EXPECT_TRUE(l.validate().has_value());
    l = Layout{};
    l.unit = Unit::Second;
    l.epoch_ms = 1704067200001LL;
    EXPECT_TRUE(l.validate().has_value());
    l.epoch_ms = 1704067200000LL;
    EXPECT_FALSE(l.validate().has_value());
}

TEST(Layout, PackUnpackRoundTripsRandomValues) {
    std::mt19937_64 rng(42);
    for (int bits = 1; bits <= 16; ++bits) {
        Layout l;
        l.slot_bits = bits;
        l.sequence_bits = 12;
        l.timestamp_bits = 63 - bits - 12;
        ASSERT_FALSE(l.validate().has_value());
        for (int i = 0; i < 1000; ++i) {
            int64_t tick =
                l.epoch_tick() + static_cast<int64_t>(rng() % static_cast<uint64_t>(l.max_tick() - l.epoch_tick() + 1));
            int64_t slot = static_cast<int64_t>(rng() % static_cast<uint64_t>(l.max_slot() + 1));
            int64_t seq = static_cast<int64_t>(rng() % static_cast<uint64_t>(l.max_sequence() + 1));
            int64_t id = l.pack(tick, slot, seq);
            ASSERT_GE(id, 0);
            auto u = l.unpack(id);
            ASSERT_EQ(u.tick, tick);
            ASSERT_EQ(u.slot, slot);
            ASSERT_EQ(u.sequence, seq);
        }
    }
}

TEST(Layout, IdsSortByTimeThenSlotThenSequence) {
    Layout l;
    EXPECT_LT(l.pack(l.epoch_tick() + 5, 1023, 4095), l.pack(l.epoch_tick() + 6, 0, 0));
    EXPECT_LT(l.pack(l.epoch_tick() + 5, 1, 4095), l.pack(l.epoch_tick() + 5, 2, 0));
}

TEST(Layout, TickFitsBoundaries) {
    Layout l;
    EXPECT_FALSE(l.tick_fits(l.epoch_tick() - 1));
    EXPECT_TRUE(l.tick_fits(l.epoch_tick()));
    EXPECT_TRUE(l.tick_fits(l.max_tick()));
    EXPECT_FALSE(l.tick_fits(l.max_tick() + 1));
    EXPECT_EQ(l.pack(l.max_tick(), l.max_slot(), l.max_sequence()), INT64_MAX);
}

TEST(Layout, ParsesUnits) {
    EXPECT_EQ(cosid::parse_unit("ms"), Unit::Millisecond);
    EXPECT_EQ(cosid::parse_unit("second"), Unit::Second);
    EXPECT_FALSE(cosid::parse_unit("minute").has_value());
}

// Every layout's timestamps end before PostgreSQL's last timestamp, so a tick times its unit
// never overflows and every id's time can be shown.
TEST(Layout, EndsBeforePostgresLastTimestamp) {
    EXPECT_EQ(cosid::kLastTimestampMs + 1, cosid::days_from_civil(294277, 1, 1) * 86400000);
    Layout l;
    l.timestamp_bits = 53;
    l.slot_bits = 1;
    l.sequence_bits = 9;
    EXPECT_FALSE(l.validate().has_value());
    l.timestamp_bits = 54;
    l.sequence_bits = 8;
    ASSERT_TRUE(l.validate().has_value());
    EXPECT_NE(l.validate()->find("last timestamp"), std::string::npos) << *l.validate();
    EXPECT_FALSE(l.validate_bits().has_value());  // a row made before the rule still reads
    l.unit = Unit::Second;
    l.timestamp_bits = 43;
    l.slot_bits = 10;
    l.sequence_bits = 10;
    EXPECT_FALSE(l.validate().has_value());
    l.timestamp_bits = 44;
    l.sequence_bits = 9;
    EXPECT_TRUE(l.validate().has_value());
    l.timestamp_bits = 60;
    l.slot_bits = 1;
    l.sequence_bits = 2;
    EXPECT_TRUE(l.validate().has_value());
    // such a layout's far ticks have no ms; near ones do
    EXPECT_FALSE(l.tick_ms(l.max_tick()).has_value());
    EXPECT_EQ(*l.tick_ms(l.epoch_tick() + 1), l.epoch_ms + 1000);
    l = Layout{};
    l.epoch_ms = cosid::kLastTimestampMs + 1;
    EXPECT_TRUE(l.validate().has_value());
}

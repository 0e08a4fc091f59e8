// The id range of a timestamp and the base-62 text form.
#include <gtest/gtest.h>

#include <random>

#include "id_text.hpp"

using namespace cosid;

TEST(IdRange, MinAndMaxBracketEveryIdOfTheTick) {
    Layout l;
    const int64_t ms = kDefaultEpochMs + 123456789;
    int64_t lo = *min_id_at(l, ms), hi = *max_id_at(l, ms);
    EXPECT_EQ(lo, l.pack(ms, 0, 0));
    EXPECT_EQ(hi, l.pack(ms, l.max_slot(), l.max_sequence()));
    EXPECT_EQ(*max_id_at(l, ms) + 1, *min_id_at(l, ms + 1));  // ticks are contiguous ranges
    EXPECT_EQ(l.unpack(lo).tick, ms);
    EXPECT_EQ(l.unpack(hi).tick, ms);
}

TEST(IdRange, EdgesOfTheLayout) {
    Layout l;
    EXPECT_EQ(*min_id_at(l, kDefaultEpochMs), 0);
    EXPECT_FALSE(min_id_at(l, kDefaultEpochMs - 1).has_value());
    EXPECT_EQ(*max_id_at(l, l.max_tick()), INT64_MAX);
    EXPECT_FALSE(max_id_at(l, l.max_tick() + 1).has_value());
}

TEST(IdRange, SecondLayoutsRoundDownToTheSecond) {
    Layout l;
    l.timestamp_bits = 33; l.slot_bits = 10; l.sequence_bits = 20; l.unit = Unit::Second;
    const int64_t s = kDefaultEpochMs / 1000 + 5000;
    EXPECT_EQ(*min_id_at(l, s * 1000 + 999), *min_id_at(l, s * 1000));
    EXPECT_EQ(l.unpack(*max_id_at(l, s * 1000 + 500)).tick, s);
}

TEST(IdText, FixedWidthAndOrder) {
    EXPECT_EQ(*to_text(0), "00000000000");
    EXPECT_EQ(*to_text(61), "0000000000z");
    EXPECT_EQ(*to_text(62), "00000000010");
    EXPECT_EQ(*to_text(INT64_MAX), "AzL8n0Y58m7");
    EXPECT_FALSE(to_text(-1).has_value());
    std::mt19937_64 rng(7);
    for (int i = 0; i < 10000; ++i) {
        int64_t a = static_cast<int64_t>(rng() >> 1), b = static_cast<int64_t>(rng() >> 1);
        std::string ta = *to_text(a), tb = *to_text(b), why;
        EXPECT_EQ(ta.size(), 11u);
        EXPECT_EQ(a < b, ta < tb);  // byte order is numeric order
        EXPECT_EQ(*from_text(ta, &why), a);
    }
}

TEST(IdText, BadTextIsRefusedWithAReason) {
    std::string why;
    EXPECT_FALSE(from_text("123", &why).has_value());
    EXPECT_NE(why.find("11 characters"), std::string::npos);
    EXPECT_FALSE(from_text("0000000000-", &why).has_value());
    EXPECT_NE(why.find("character 11"), std::string::npos);
    EXPECT_FALSE(from_text("AzL8n0Y58m8", &why).has_value());  // INT64_MAX + 1
    EXPECT_NE(why.find("largest bigint"), std::string::npos);
    EXPECT_FALSE(from_text("zzzzzzzzzzz", &why).has_value());  // past 2^64
    EXPECT_EQ(*from_text("AzL8n0Y58m7", &why), INT64_MAX);
}

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
    l.timestamp_bits = 33;
    l.slot_bits = 10;
    l.sequence_bits = 20;
    l.unit = Unit::Second;
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

TEST(IdFormat, TheIssuesExample) {
    Layout l;
    // 2026-12-03T07:20:17.816Z, slot 3, sequence 262
    const int64_t ms = days_from_civil(2026, 12, 3) * 86400000 + ((7 * 60 + 20) * 60 + 17) * 1000 + 816;
    const int64_t id = l.pack(ms, 3, 262);
    EXPECT_EQ(*format_id(l, id), "20261203T072017.816Z-3-0262");
    std::string why;
    EXPECT_EQ(*parse_formatted(l, "20261203T072017.816Z-3-0262", &why), id);
}

TEST(IdFormat, RoundTripsEveryLayoutShapeAndKeepsOrderWithinATick) {
    std::mt19937_64 rng(11);
    Layout layouts[5];
    layouts[1].timestamp_bits = 41;
    layouts[1].slot_bits = 4;
    layouts[1].sequence_bits = 8;  // 53 bits
    layouts[2].timestamp_bits = 33;
    layouts[2].slot_bits = 10;
    layouts[2].sequence_bits = 20;
    layouts[2].unit = Unit::Second;
    layouts[3].timestamp_bits = 31;
    layouts[3].slot_bits = 10;
    layouts[3].sequence_bits = 12;  // 53 bits, s
    layouts[3].unit = Unit::Second;
    // the longest seconds layout: years up to 280,755 (six digits)
    layouts[4].timestamp_bits = 43;
    layouts[4].slot_bits = 10;
    layouts[4].sequence_bits = 10;
    layouts[4].unit = Unit::Second;
    for (const Layout& l : layouts) {
        ASSERT_FALSE(l.validate().has_value());
        const int64_t top = l.pack(l.max_tick(), l.max_slot(), l.max_sequence());
        std::string why;
        for (int64_t id : {int64_t{0}, top, top / 2}) {
            auto text = format_id(l, id);
            ASSERT_TRUE(text.has_value()) << id;
            EXPECT_EQ(*parse_formatted(l, *text, &why), id) << *text << " " << why;
        }
        for (int i = 0; i < 5000; ++i) {
            const int64_t id = static_cast<int64_t>(rng() % static_cast<uint64_t>(top));
            auto text = format_id(l, id);
            ASSERT_EQ(*parse_formatted(l, *text, &why), id) << *text << " " << why;
            auto u = l.unpack(id);
            if (u.sequence < l.max_sequence()) {
                EXPECT_LT(*text, *format_id(l, id + 1));  // the next sequence of the tick and slot
            }
        }
        if (l.total_bits() < 63) {
            EXPECT_FALSE(format_id(l, top + 1).has_value());
        }
        EXPECT_FALSE(format_id(l, -1).has_value());
    }
    // The seconds form has no fraction.
    EXPECT_EQ(format_id(layouts[2], 0)->find('.'), std::string::npos);
    EXPECT_EQ(*format_id(layouts[2], 0), "20240101T000000Z-0-0000000");
}

TEST(IdFormat, BadTextIsRefusedWithAReason) {
    Layout l, s;
    s.timestamp_bits = 33;
    s.slot_bits = 10;
    s.sequence_bits = 20;
    s.unit = Unit::Second;
    std::string why;
    for (const char* bad : {"", "x", "20261203T072017.816Z-3", "20261203T072017.816Z-3-", "20261203T072017.816Z--0262",
                            "20261203T072017Z-3-0262", "20261203 072017.816Z-3-0262", "20261203T072017.816-3-0262",
                            "20261203T072017.81Z-3-0262", "2026123T072017.816Z-3-0262", "20261203T072017.816Z-3-0262x",
                            "20261203T072017.816Z-+3-0262", "20261203T072017.816Z-3-1234567890"}) {
        EXPECT_FALSE(parse_formatted(l, bad, &why).has_value()) << bad;
        EXPECT_NE(why.find("form"), std::string::npos) << bad << ": " << why;
    }
    EXPECT_FALSE(parse_formatted(s, "20261203T072017.816Z-3-0262", &why).has_value());
    EXPECT_NE(why.find("seconds"), std::string::npos) << why;
    for (const char* bad : {"20261303T072017.816Z-3-0262", "20260230T072017.816Z-3-0262", "20261203T242017.816Z-3-0262",
                            "20261203T076017.816Z-3-0262", "20261203T072060.816Z-3-0262"}) {
        EXPECT_FALSE(parse_formatted(l, bad, &why).has_value()) << bad;
        EXPECT_NE(why.find("does not exist"), std::string::npos) << bad << ": " << why;
    }
    EXPECT_TRUE(parse_formatted(l, "20280229T000000.000Z-0-0000", &why).has_value());  // a leap day
    // one text per id: no leading zeros, the sequence at the layout's width
    for (const char* bad : {"020261203T072017.816Z-3-0262", "20261203T072017.816Z-03-0262"}) {
        EXPECT_FALSE(parse_formatted(l, bad, &why).has_value()) << bad;
        EXPECT_NE(why.find("form"), std::string::npos) << bad << ": " << why;
    }
    for (const char* bad : {"20261203T072017.816Z-3-262", "20261203T072017.816Z-3-00262"}) {
        EXPECT_FALSE(parse_formatted(l, bad, &why).has_value()) << bad;
        EXPECT_NE(why.find("digits"), std::string::npos) << bad << ": " << why;
    }
    EXPECT_TRUE(parse_formatted(l, "20261203T072017.816Z-0-0262", &why).has_value());
    EXPECT_FALSE(parse_formatted(l, "20261203T072017.816Z-1024-0262", &why).has_value());
    EXPECT_NE(why.find("last slot 1023"), std::string::npos) << why;
    EXPECT_FALSE(parse_formatted(l, "20261203T072017.816Z-3-4096", &why).has_value());
    EXPECT_NE(why.find("last sequence 4095"), std::string::npos) << why;
    EXPECT_FALSE(parse_formatted(l, "20231231T235959.999Z-0-0000", &why).has_value());  // before the epoch
    EXPECT_NE(why.find("range"), std::string::npos) << why;
    EXPECT_FALSE(parse_formatted(l, "21000101T000000.000Z-0-0000", &why).has_value());  // past 41 bits of ms
    EXPECT_NE(why.find("range"), std::string::npos) << why;
}

#include <gtest/gtest.h>

#include "slot_range.hpp"

using namespace cosid;

TEST(SlotRange, ParsesPostgresText) {
    auto r = parse_slot_range("[0,512)", 10);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->lo, 0);
    EXPECT_EQ(r->hi, 512);
    EXPECT_EQ(r->text(), "[0,512)");
    auto b = parse_slot_range("[512,1024)", 10);
    ASSERT_TRUE(b);
    EXPECT_TRUE(b->contains(512));
    EXPECT_TRUE(b->contains(1023));
    EXPECT_FALSE(b->contains(511));
    EXPECT_FALSE(b->contains(1024));
}

TEST(SlotRange, NoTextIsTheWholeLayout) {
    auto r = parse_slot_range("", 10);
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, (SlotRange{0, 1024}));
    EXPECT_EQ(whole_range(16), (SlotRange{0, 65536}));
}

TEST(SlotRange, RefusesWhatIsNoBoundedRange) {
    for (const char* t : {"empty", "[0,)", "(,5)", "[5,5)", "[7,3)", "0,5", "[a,5)", "[0,5]", "[,)"})
        EXPECT_FALSE(parse_slot_range(t, 10)) << t;
}

TEST(SlotRange, MustLieWithinTheLayout) {
    EXPECT_EQ(slot_range_problem({0, 512}, 10), "");
    EXPECT_EQ(slot_range_problem({512, 1024}, 10), "");
    EXPECT_NE(slot_range_problem({512, 1025}, 10), "");
    EXPECT_NE(slot_range_problem({-1, 5}, 10), "");
    EXPECT_NE(slot_range_problem({5, 5}, 10), "");
    EXPECT_NE(slot_range_problem({0, 2}, 0), "");
}

TEST(SlotRange, DisjointRangesDoNotOverlap) {
    SlotRange a{0, 512}, b{512, 1024}, c{500, 600};
    EXPECT_FALSE(a.overlaps(b));
    EXPECT_FALSE(b.overlaps(a));
    EXPECT_TRUE(a.overlaps(c));
    EXPECT_TRUE(c.overlaps(b));
    EXPECT_TRUE(a.overlaps(a));
}

TEST(SlotRange, KeeperKeepsTheFirstRangeAndRefusesAnother) {
    SlotRange a{0, 512}, b{512, 1024};
    EXPECT_EQ(judge_store_range(std::nullopt, a), RangeVerdict::First);
    EXPECT_EQ(judge_store_range(a, a), RangeVerdict::Same);
    EXPECT_EQ(judge_store_range(a, b), RangeVerdict::Differs);
    // a store that lost its range (grants every slot) differs from one that had a range
    EXPECT_EQ(judge_store_range(a, whole_range(10)), RangeVerdict::Differs);
}

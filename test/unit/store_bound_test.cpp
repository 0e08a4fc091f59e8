#include <gtest/gtest.h>

#include "store_bound.hpp"

namespace sb = cosid::store_bound;

TEST(StoreBound, BaseIsASixthOfTheTtlAtLeast100ms) {
    EXPECT_EQ(sb::base_ms(30000), 5000);
    EXPECT_EQ(sb::base_ms(1000), 166);
    EXPECT_EQ(sb::base_ms(300), 100);
    EXPECT_EQ(sb::call_ms(30000, 0), 5000);
    EXPECT_EQ(sb::call_ms(1000, 0), 166);
}

TEST(StoreBound, EachLevelDoublesUpToAThirdOfTheTtl) {
    EXPECT_EQ(sb::call_ms(30000, 1), 10000);
    EXPECT_EQ(sb::call_ms(30000, 2), 10000);
    EXPECT_EQ(sb::call_ms(1000, 1), 332);
    EXPECT_EQ(sb::call_ms(1000, 2), 333);
    EXPECT_EQ(sb::call_ms(1000, 50), 333);
    // a ttl so short that its third is below the 100 ms floor: the floor, at any level
    EXPECT_EQ(sb::call_ms(250, 0), 100);
    EXPECT_EQ(sb::call_ms(250, 3), 100);
}

TEST(StoreBound, ARunOutRaisesAQuickAnswerLowersNoCallKeeps) {
    // up while doubling still lengthens the bound, then no further (the level never runs away)
    int level = 0;
    for (int i = 0; i < 10; ++i) level = sb::next_level(30000, level, true, false, 0);
    EXPECT_EQ(level, 1);
    level = 0;
    for (int i = 0; i < 10; ++i) level = sb::next_level(1000, level, true, false, 0);
    EXPECT_EQ(level, 2);
    EXPECT_EQ(sb::call_ms(1000, level), 333);
    // an answer within half the next shorter bound (332 / 2, then 166 / 2): one level down
    EXPECT_EQ(sb::next_level(1000, 2, false, true, 165), 1);
    EXPECT_EQ(sb::next_level(1000, 1, false, true, 82), 0);
    EXPECT_EQ(sb::next_level(1000, 0, false, true, 1), 0);
    // a store whose calls take a steady 250 ms (1.5 base bounds) keeps the longer bound: no
    // call lost every other time
    level = sb::next_level(1000, 0, true, false, 166);
    for (int i = 0; i < 10; ++i) {
        EXPECT_EQ(sb::call_ms(1000, level), 332);
        level = sb::next_level(1000, level, false, true, 250);
    }
    // no store call made (a connection known down): unchanged
    EXPECT_EQ(sb::next_level(1000, 2, false, false, 0), 2);
    EXPECT_EQ(sb::next_level(250, 0, true, false, 100), 0);
    EXPECT_EQ(sb::next_level(1000, -3, false, false, 0), 0);
}

TEST(StoreBound, EachKindOfCallHasItsOwnLevel) {
    sb::Levels levels{};
    const uint64_t write = sb::call_key("SELECT * FROM cosid.renew($1)", "k");
    const uint64_t read = sb::call_key("SELECT min(fork_pending) FROM cosid.store_state", nullptr);
    EXPECT_NE(write, read);
    EXPECT_EQ(write, sb::call_key("SELECT * FROM cosid.renew($1)", "k"));
    EXPECT_NE(write, sb::call_key("SELECT * FROM cosid.renew($1)", "j"));  // another namespace
    EXPECT_NE(sb::call_key("ab", "c"), sb::call_key("a", "bc"));
    levels.note(write, 1000, true, false, 166);
    EXPECT_EQ(levels.level(write), 1);
    // a quick read does not shorten the slow write's bound
    for (int i = 0; i < 5; ++i) levels.note(read, 1000, false, true, 2);
    EXPECT_EQ(levels.level(read), 0);
    EXPECT_EQ(levels.level(write), 1);
    // the write answered quickly again: back to the base, and no longer kept
    levels.note(write, 1000, false, true, 10);
    EXPECT_EQ(levels.level(write), 0);
    for (const auto& s : levels.slots) EXPECT_EQ(s.level, 0);
}

TEST(StoreBound, AFullTableReplacesTheStatementUsedLongestAgo) {
    sb::Levels levels{};
    for (uint64_t k = 1; k <= sb::Levels::kSlots; ++k) levels.note(k, 30000, true, false, 5000);
    levels.note(1, 30000, false, true, 6000);  // statement 1 used again (still slow)
    levels.note(100, 30000, true, false, 5000);
    EXPECT_EQ(levels.level(100), 1);
    EXPECT_EQ(levels.level(1), 1);
    EXPECT_EQ(levels.level(2), 0);  // used longest ago
    EXPECT_EQ(levels.level(3), 1);
}

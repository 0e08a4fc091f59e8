#include <gtest/gtest.h>

#include "store_bound.hpp"

namespace sb = cosid::store_bound;

TEST(StoreBound, BaseIsASixthOfTheTtlAtLeast100ms) {
    EXPECT_EQ(sb::base_ms(30000), 5000);
    EXPECT_EQ(sb::base_ms(1000), 166);
    EXPECT_EQ(sb::base_ms(300), 100);
    EXPECT_EQ(sb::call_ms(30000, sb::kFast), 5000);
    EXPECT_EQ(sb::call_ms(1000, sb::kFast), 166);
}

TEST(StoreBound, SlowGetsAThirdOfTheTtlStuckTheBase) {
    EXPECT_EQ(sb::call_ms(30000, sb::kSlow), 10000);
    EXPECT_EQ(sb::call_ms(1000, sb::kSlow), 333);
    EXPECT_EQ(sb::call_ms(30000, sb::kStuck), 5000);
    EXPECT_EQ(sb::call_ms(1000, sb::kStuck), 166);
    // a ttl so short that its third is below the 100 ms floor: the floor
    EXPECT_EQ(sb::call_ms(250, sb::kSlow), 100);
}

TEST(StoreBound, ARunOutMakesSlowThenStuckThenFast) {
    EXPECT_EQ(sb::next_level(1000, sb::kFast, true, false, 166), sb::kSlow);
    EXPECT_EQ(sb::next_level(1000, sb::kSlow, true, false, 333), sb::kStuck);
    EXPECT_EQ(sb::next_level(1000, sb::kStuck, true, false, 166), sb::kFast);
    // a kind that never answers: 166, 333, 166, 166, 333, ... ms (2/9 ttl a try on average)
    int level = sb::kFast;
    int64_t spent = 0;
    for (int i = 0; i < 9; ++i) {
        spent += sb::call_ms(900, level);
        level = sb::next_level(900, level, true, false, sb::call_ms(900, level));
    }
    EXPECT_EQ(spent, 9 * 200);
    // one that answers only in the tail (a try of 400 ms made it stuck; it takes 250 ms):
    // its ttl / 3 try comes back within two tries
    level = sb::next_level(1000, sb::kSlow, true, false, 333);  // stuck
    level = sb::next_level(1000, level, true, false, 166);      // fast
    level = sb::next_level(1000, level, true, false, 166);      // slow
    EXPECT_EQ(sb::call_ms(1000, level), 333);
    // no longer bound to give (ttl / 3 below the floor): stays fast
    EXPECT_EQ(sb::next_level(250, sb::kFast, true, false, 100), sb::kFast);
    // out of range: taken as fast
    EXPECT_EQ(sb::next_level(1000, -3, false, false, 0), sb::kFast);
    EXPECT_EQ(sb::next_level(1000, 7, true, false, 0), sb::kSlow);
}

TEST(StoreBound, AnAnswerMakesStuckFastAndAQuickOneSlow) {
    EXPECT_EQ(sb::next_level(1000, sb::kStuck, false, true, 150), sb::kFast);
    EXPECT_EQ(sb::next_level(1000, sb::kSlow, false, true, 82), sb::kFast);
    // a kind that takes a steady 250 ms (1.5 base bounds) stays slow: no try lost every other time
    int level = sb::next_level(1000, sb::kFast, true, false, 166);
    for (int i = 0; i < 10; ++i) {
        EXPECT_EQ(sb::call_ms(1000, level), 333);
        level = sb::next_level(1000, level, false, true, 250);
    }
    EXPECT_EQ(sb::next_level(1000, sb::kFast, false, true, 1), sb::kFast);
    // no store call made (a connection known down): unchanged
    EXPECT_EQ(sb::next_level(1000, sb::kSlow, false, false, 0), sb::kSlow);
    EXPECT_EQ(sb::next_level(1000, sb::kStuck, false, false, 0), sb::kStuck);
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
    EXPECT_EQ(levels.level(write), sb::kSlow);
    // a quick read does not shorten the slow write's bound
    for (int i = 0; i < 5; ++i) levels.note(read, 1000, false, true, 2);
    EXPECT_EQ(levels.level(read), sb::kFast);
    EXPECT_EQ(levels.level(write), sb::kSlow);
    // the write answered quickly again: fast, and no longer kept
    levels.note(write, 1000, false, true, 10);
    EXPECT_EQ(levels.level(write), sb::kFast);
    for (const auto& s : levels.slots) EXPECT_EQ(s.level, sb::kFast);
    // reset: every kind fast
    levels.note(write, 1000, true, false, 166);
    levels.note(read, 1000, true, false, 166);
    levels.reset();
    EXPECT_EQ(levels.level(write), sb::kFast);
    EXPECT_EQ(levels.level(read), sb::kFast);
}

TEST(StoreBound, AFullTableReplacesTheKindUsedLongestAgo) {
    sb::Levels levels{};
    for (uint64_t k = 1; k <= sb::Levels::kSlots; ++k) levels.note(k, 30000, true, false, 5000);
    levels.note(1, 30000, false, true, 6000);  // kind 1 used again (still slow)
    levels.note(1000, 30000, true, false, 5000);
    EXPECT_EQ(levels.level(1000), sb::kSlow);
    EXPECT_EQ(levels.level(1), sb::kSlow);
    EXPECT_EQ(levels.level(2), sb::kFast);  // used longest ago
    EXPECT_EQ(levels.level(3), sb::kSlow);
}

// The shared issue word: its encoding, the claim rule, and many threads claiming from one
// std::atomic word the way backends do from shared memory (threads only here, in the test).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "issue_word.hpp"

using namespace cosid;

namespace {
const int64_t T0 = kDefaultEpochMs + 1000000;
const ClaimWindow kWide{T0, T0 + 1000000};
}  // namespace

TEST(IssueWord, EncodesTickAndSequenceAndFlags) {
    Layout l;
    uint64_t w = issue_word::encode(l, T0 + 5, 77);
    EXPECT_TRUE(issue_word::issued(w));
    EXPECT_FALSE(issue_word::closed(w));
    EXPECT_EQ(issue_word::tick(l, w), T0 + 5);
    EXPECT_EQ(issue_word::sequence(l, w), 77);
    EXPECT_EQ(issue_word::last_issued_ms(l, w), T0 + 5);
    EXPECT_FALSE(issue_word::last_issued_ms(l, issue_word::kFresh).has_value());
    // the widest timestamp + sequence a layout allows (62 bits) still leaves both flags free
    Layout wide;
    wide.timestamp_bits = 40;
    wide.slot_bits = 1;
    wide.sequence_bits = 22;
    ASSERT_FALSE(wide.validate().has_value());
    uint64_t m = issue_word::encode(wide, wide.max_tick(), wide.max_sequence());
    EXPECT_EQ(issue_word::tick(wide, m), wide.max_tick());
    EXPECT_EQ(issue_word::sequence(wide, m), wide.max_sequence());
    EXPECT_EQ(issue_word::tick(wide, m | issue_word::kClosed), wide.max_tick());
}

TEST(IssueWord, ClosedWordClaimsNothing) {
    Layout l;
    uint64_t w = issue_word::encode(l, T0 + 5, 1) | issue_word::kClosed;
    EXPECT_EQ(claim(w, l, 0, kWide, T0 + 10, 0).status, NextStatus::Closed);
    EXPECT_EQ(claim(issue_word::kClosed, l, 0, kWide, T0 + 10, 0).status, NextStatus::Closed);
}

TEST(IssueWord, BorrowsNextTickOnlyWithinTheLimit) {
    Layout l;
    l.sequence_bits = 2;
    l.timestamp_bits = 51;
    uint64_t full = issue_word::encode(l, T0 + 10, l.max_sequence());
    // at the clock, no borrowing: wait for the next tick
    Claim c = claim(full, l, 0, kWide, T0 + 10, 0);
    EXPECT_EQ(c.status, NextStatus::SequenceExhausted);
    EXPECT_EQ(c.wait_until_ms, T0 + 11);
    // a limit of 1 ms: the next tick is 1 ms ahead, so it is taken
    c = claim(full, l, 0, kWide, T0 + 10, 1);
    ASSERT_EQ(c.status, NextStatus::Issued);
    EXPECT_EQ(l.unpack(c.id).tick, T0 + 11);
    EXPECT_EQ(l.unpack(c.id).sequence, 0);
    // already 5 ms ahead of the clock: a limit of 5 ms refuses a sixth, and says when to retry
    uint64_t ahead = issue_word::encode(l, T0 + 15, l.max_sequence());
    c = claim(ahead, l, 0, kWide, T0 + 10, 5);
    EXPECT_EQ(c.status, NextStatus::SequenceExhausted);
    EXPECT_EQ(c.wait_until_ms, T0 + 11);
    EXPECT_EQ(claim(ahead, l, 0, kWide, T0 + 11, 5).status, NextStatus::Issued);
    // no limit of its own: only the ceiling stops it
    EXPECT_EQ(claim(ahead, l, 0, kWide, T0 + 10, issue_word::kBorrowToCeiling).status, NextStatus::Issued);
    EXPECT_EQ(claim(ahead, l, 0, ClaimWindow{T0, T0 + 15}, T0 + 10, issue_word::kBorrowToCeiling).status,
              NextStatus::PastCeiling);
}

TEST(IssueWord, NeverBackAndInsideTheWindow) {
    Layout l;
    uint64_t w = issue_word::kFresh;
    EXPECT_EQ(claim(w, l, 3, ClaimWindow{T0, T0 + 10}, T0, 0).status, NextStatus::BeforeFloor);
    Claim c = claim(w, l, 3, ClaimWindow{T0, T0 + 10}, T0 + 4, 0);
    ASSERT_EQ(c.status, NextStatus::Issued);
    c = claim(c.word, l, 3, ClaimWindow{T0, T0 + 10}, T0 + 1, 0);  // the clock went back
    ASSERT_EQ(c.status, NextStatus::Issued);
    EXPECT_EQ(l.unpack(c.id).tick, T0 + 4);
    EXPECT_EQ(l.unpack(c.id).sequence, 1);
    EXPECT_EQ(claim(c.word, l, 3, ClaimWindow{T0, T0 + 10}, T0 + 11, 0).status, NextStatus::PastCeiling);
}

// A window whose floor lies ahead of the clock (the store's raise after a failover, a floor
// pg_upgrade kept): borrowing starts at the floor's next tick at once; a borrow limit waits
// until the clock is within it; with borrowing off, until the clock passes the floor.
TEST(IssueWord, AFloorAheadIsBorrowedFromAtOnceWithinTheLimit) {
    Layout l;
    const ClaimWindow ahead{T0 + 40000, T0 + 71000};
    Claim c = claim(issue_word::kFresh, l, 3, ahead, T0, issue_word::kBorrowToCeiling);
    ASSERT_EQ(c.status, NextStatus::Issued);
    EXPECT_EQ(l.unpack(c.id).tick, T0 + 40001);
    EXPECT_EQ(l.unpack(c.id).sequence, 0);
    c = claim(c.word, l, 3, ahead, T0 + 5, issue_word::kBorrowToCeiling);  // the clock stays behind
    ASSERT_EQ(c.status, NextStatus::Issued);
    EXPECT_EQ(l.unpack(c.id).tick, T0 + 40001);
    EXPECT_EQ(l.unpack(c.id).sequence, 1);
    Claim w = claim(issue_word::kFresh, l, 3, ahead, T0, 1000);
    ASSERT_EQ(w.status, NextStatus::BeforeFloor);
    EXPECT_EQ(w.wait_until_ms, T0 + 39001);
    c = claim(issue_word::kFresh, l, 3, ahead, T0 + 39001, 1000);
    ASSERT_EQ(c.status, NextStatus::Issued);
    EXPECT_EQ(l.unpack(c.id).tick, T0 + 40001);
    w = claim(issue_word::kFresh, l, 3, ahead, T0 + 39001, 0);
    ASSERT_EQ(w.status, NextStatus::BeforeFloor);
    EXPECT_EQ(w.wait_until_ms, T0 + 40001);
    // an empty window (floor = ceiling: not yet within the store's reach) issues nothing
    EXPECT_EQ(
        claim(issue_word::kFresh, l, 3, ClaimWindow{T0 + 40000, T0 + 40000}, T0, issue_word::kBorrowToCeiling).status,
        NextStatus::PastCeiling);
}

// Many threads claim from one word with compare-and-swap, as backends do: every id is
// unique, each thread's ids increase, every id is inside the window, and the word's last
// timestamp is the largest issued.  With borrowing the ticks stay dense (every tick a
// claim passes is used up to its full sequence, except where the clock moved on).
namespace {
struct ClaimRun {
    std::vector<std::vector<int64_t>> ids;
    uint64_t word;
};
ClaimRun claim_concurrently(const Layout& l, int threads, int per_thread, ClaimWindow window, int64_t borrow_ms,
                            std::atomic<int64_t>& clock) {
    std::atomic<uint64_t> word{issue_word::kFresh};
    ClaimRun run;
    run.ids.resize(threads);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
        ts.emplace_back([&, t] {
            auto& mine = run.ids[t];
            mine.reserve(per_thread);
            while (static_cast<int>(mine.size()) < per_thread) {
                uint64_t w = word.load(std::memory_order_acquire);
                Claim c = claim(w, l, 5, window, clock.load(std::memory_order_relaxed), borrow_ms);
                if (c.status == NextStatus::Issued) {
                    if (word.compare_exchange_weak(w, c.word, std::memory_order_acq_rel)) mine.push_back(c.id);
                } else if (c.status == NextStatus::SequenceExhausted) {
                    // the test's clock: whoever finds the tick full moves it on
                    int64_t now = clock.load();
                    if (now < c.wait_until_ms) clock.compare_exchange_strong(now, c.wait_until_ms);
                } else {
                    ADD_FAILURE() << "unexpected claim status " << static_cast<int>(c.status);
                    return;
                }
            }
        });
    for (auto& t : ts) t.join();
    run.word = word.load();
    return run;
}
void check_run(const Layout& l, const ClaimRun& run, ClaimWindow window) {
    std::vector<int64_t> all;
    for (const auto& mine : run.ids) {
        for (size_t i = 1; i < mine.size(); ++i) ASSERT_GT(mine[i], mine[i - 1]);
        all.insert(all.end(), mine.begin(), mine.end());
    }
    std::sort(all.begin(), all.end());
    EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "a duplicate id";
    for (int64_t id : all) {
        const int64_t ms = l.unpack(id).tick * l.unit_ms();
        ASSERT_GT(ms, window.floor_ms);
        ASSERT_LE(ms, window.ceiling_ms);
        ASSERT_EQ(l.unpack(id).slot, 5);
    }
    EXPECT_EQ(issue_word::last_issued_ms(l, run.word), l.unpack(all.back()).tick * l.unit_ms());
}
}  // namespace

TEST(IssueWordThreads, EightThreadsWaitingForTheClock) {
    Layout l;
    l.timestamp_bits = 47;
    l.sequence_bits = 6;  // 64 ids per tick: the clock must move
    std::atomic<int64_t> clock{T0 + 1};
    ClaimWindow window{T0, T0 + 1000000};
    ClaimRun run = claim_concurrently(l, 8, 20000, window, 0, clock);
    check_run(l, run, window);
}

TEST(IssueWordThreads, EightThreadsBorrowingFillEveryTick) {
    Layout l;
    l.timestamp_bits = 47;
    l.sequence_bits = 6;
    std::atomic<int64_t> clock{T0 + 1};  // the clock stands still: every new tick is borrowed
    ClaimWindow window{T0, T0 + 1000000};
    ClaimRun run = claim_concurrently(l, 8, 4000, window, issue_word::kBorrowToCeiling, clock);
    check_run(l, run, window);
    // 32000 ids at 64 per tick: exactly 500 ticks, each filled (the first starts at sequence 0)
    std::vector<int64_t> per_tick(600, 0);
    for (const auto& mine : run.ids)
        for (int64_t id : mine) ++per_tick[l.unpack(id).tick - (T0 + 1)];
    for (int i = 0; i < 500; ++i) ASSERT_EQ(per_tick[i], 64) << "tick " << i;
    EXPECT_EQ(per_tick[500], 0);
}

TEST(IssueWordThreads, BorrowingStopsAtTheCeiling) {
    Layout l;
    l.timestamp_bits = 47;
    l.sequence_bits = 6;
    std::atomic<int64_t> clock{T0 + 1};
    ClaimWindow window{T0, T0 + 10};  // 10 ticks of 64: 640 ids at most
    std::atomic<uint64_t> word{issue_word::kFresh};
    std::atomic<int> issued{0}, past{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
        ts.emplace_back([&] {
            for (;;) {
                uint64_t w = word.load();
                Claim c = claim(w, l, 5, window, clock.load(), issue_word::kBorrowToCeiling);
                if (c.status == NextStatus::PastCeiling) {
                    ++past;
                    return;
                }
                if (c.status == NextStatus::Issued && word.compare_exchange_weak(w, c.word)) ++issued;
            }
        });
    for (auto& t : ts) t.join();
    EXPECT_EQ(issued.load(), 640);
    EXPECT_EQ(past.load(), 4);
}

TEST(IssueWord, BlocksStayInOneTick) {
    Layout l;
    l.sequence_bits = 4;
    l.timestamp_bits = 49;  // 16 per tick
    Claim c = claim(issue_word::kFresh, l, 2, kWide, T0 + 5, 0, 10);
    ASSERT_EQ(c.status, NextStatus::Issued);
    EXPECT_EQ(c.count, 10);
    EXPECT_EQ(l.unpack(c.id).sequence, 0);
    EXPECT_EQ(issue_word::sequence(l, c.word), 9);
    // the next block of the same tick gets what is left of it: 6
    c = claim(c.word, l, 2, kWide, T0 + 5, 0, 10);
    ASSERT_EQ(c.status, NextStatus::Issued);
    EXPECT_EQ(c.count, 6);
    EXPECT_EQ(l.unpack(c.id).sequence, 10);
    EXPECT_EQ(issue_word::sequence(l, c.word), 15);
    EXPECT_EQ(issue_word::tick(l, c.word), T0 + 5);
    EXPECT_EQ(claim(c.word, l, 2, kWide, T0 + 5, 0, 10).status, NextStatus::SequenceExhausted);
    // want 1 (and anything below) is one id
    EXPECT_EQ(claim(issue_word::kFresh, l, 2, kWide, T0 + 5, 0, 0).count, 1);
}

// Threads taking blocks of growing size, as backends in tight loops do within a statement:
// every id unique, each thread's ids increasing, all inside the window, and the word's last
// at least the largest id handed out.
TEST(IssueWordThreads, BlocksFromEightThreads) {
    Layout l;
    l.timestamp_bits = 47;
    l.sequence_bits = 6;
    std::atomic<int64_t> clock{T0 + 1};
    ClaimWindow window{T0, T0 + 1000000};
    std::atomic<uint64_t> word{issue_word::kFresh};
    std::vector<std::vector<int64_t>> ids(8);
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; ++t)
        ts.emplace_back([&, t] {
            int64_t want = 1;
            while (ids[t].size() < 5000) {
                uint64_t w = word.load();
                Claim c = claim(w, l, 5, window, clock.load(), issue_word::kBorrowToCeiling, want);
                if (c.status != NextStatus::Issued) {
                    ADD_FAILURE() << "status " << static_cast<int>(c.status);
                    return;
                }
                if (!word.compare_exchange_weak(w, c.word)) continue;
                for (int64_t k = 0; k < c.count; ++k) ids[t].push_back(c.id + k);
                want = want < 32 ? want * 2 : 1;
            }
        });
    for (auto& t : ts) t.join();
    std::vector<int64_t> all;
    for (const auto& mine : ids) {
        for (size_t i = 1; i < mine.size(); ++i) ASSERT_GT(mine[i], mine[i - 1]);
        all.insert(all.end(), mine.begin(), mine.end());
    }
    std::sort(all.begin(), all.end());
    EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "a duplicate id";
    for (int64_t id : all) {
        ASSERT_GT(l.unpack(id).tick, window.floor_ms);
        ASSERT_LE(l.unpack(id).tick, window.ceiling_ms);
        ASSERT_EQ(l.unpack(id).slot, 5);
    }
    EXPECT_GE(issue_word::last_issued_ms(l, word.load()), l.unpack(all.back()).tick);
    // whatever comes after the blocks is above every id they handed out
    Claim next = claim(word.load(), l, 5, window, clock.load(), issue_word::kBorrowToCeiling, 7);
    ASSERT_EQ(next.status, NextStatus::Issued);
    EXPECT_GT(next.id, all.back());
}

TEST(IssueWord, BlocksInSecondLayoutsAndUnderABorrowLimit) {
    Layout l;
    l.unit = Unit::Second;
    l.timestamp_bits = 31;
    l.slot_bits = 10;
    l.sequence_bits = 22;
    const int64_t s0 = T0 - T0 % 1000;
    Claim c = claim(issue_word::kFresh, l, 1, ClaimWindow{s0, s0 + 5000}, s0 + 1500, 0, 64);
    ASSERT_EQ(c.status, NextStatus::Issued);
    EXPECT_EQ(c.count, 64);
    EXPECT_EQ(l.unpack(c.id).tick, s0 / 1000 + 1);
    EXPECT_EQ(issue_word::last_issued_ms(l, c.word), s0 + 1000);
    // a full second's sequence with no borrowing: the next block waits for the clock
    Layout m;
    m.sequence_bits = 3;
    m.timestamp_bits = 50;
    uint64_t full = issue_word::encode(m, T0 + 4, m.max_sequence());
    EXPECT_EQ(claim(full, m, 0, kWide, T0 + 4, 0, 64).status, NextStatus::SequenceExhausted);
    c = claim(full, m, 0, kWide, T0 + 4, 1, 64);  // one ms of borrowing allowed
    ASSERT_EQ(c.status, NextStatus::Issued);
    EXPECT_EQ(c.count, 8);
    EXPECT_EQ(m.unpack(c.id).tick, T0 + 5);
}

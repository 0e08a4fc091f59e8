// The rules of src/core/fork_rule.hpp: which copies of a store grant, and what an instance
// that changes its store must stay above.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fork_rule.hpp"
#include "reach.hpp"

using namespace cosid;

namespace {
constexpr uint64_t kHere = 7300000000000000001ULL, kOther = 7300000000000000002ULL;

StoreRecord rec(uint64_t sys, uint32_t tli, bool issuer = false, bool declared = false) {
    StoreRecord r;
    r.system_identifier = sys;
    r.timeline = tli;
    r.issuer = issuer;
    r.fork_declared = declared;
    return r;
}
}  // namespace

TEST(ForkRule, ClassifiesEveryWayAStoreComesBack) {
    EXPECT_EQ(classify_store({rec(kHere, 1)}, kHere, 1, false), StoreHistory::Whole);
    EXPECT_EQ(classify_store({rec(kHere, 1, true)}, kHere, 1, false), StoreHistory::Whole);  // a restart, a crash
    // a promoted standby or recovered backup of a store nobody issued from here: a failover
    EXPECT_EQ(classify_store({rec(kHere, 1)}, kHere, 2, false), StoreHistory::NewTimeline);
    // ... of a store whose own server was issuing: the origin may go on
    EXPECT_EQ(classify_store({rec(kHere, 1, true)}, kHere, 2, false), StoreHistory::Forked);
    // another cluster (a logical copy, pg_upgrade without its note): raise
    EXPECT_EQ(classify_store({rec(kOther, 1, false)}, kHere, 1, false), StoreHistory::NewCluster);
    EXPECT_EQ(classify_store({rec(kOther, 1, false)}, kHere, 1, true), StoreHistory::NewCluster);
    // ... of a server that issued from it, not made by pg_upgrade: a copy of that server's data
    EXPECT_EQ(classify_store({rec(kOther, 1, true)}, kHere, 1, false), StoreHistory::Forked);
    // a dump: the origin's record beside the one CREATE EXTENSION wrote
    EXPECT_EQ(classify_store({rec(kOther, 1), rec(kHere, 1)}, kHere, 1, false), StoreHistory::Restored);
    EXPECT_EQ(classify_store({rec(kOther, 1, true), rec(kHere, 1)}, kHere, 1, false), StoreHistory::Forked);
    EXPECT_EQ(classify_store({}, kHere, 1, false), StoreHistory::Restored);
    EXPECT_EQ(classify_store({rec(0, 0)}, kHere, 1, false), StoreHistory::BeingRestored);
    // a declared copy (cosid.fork, pg_upgrade's old directory, restored => true) wins over all
    EXPECT_EQ(classify_store({rec(kHere, 1, false, true)}, kHere, 1, false), StoreHistory::Forked);
    EXPECT_EQ(classify_store({rec(kOther, 1, false, true), rec(kHere, 1)}, kHere, 1, false), StoreHistory::Forked);
}

TEST(ForkRule, PgUpgradeKeepsTheFloorsOnlyWhenReadOnTheStoresOwnTimeline) {
    auto noted = [](uint64_t sys, uint32_t tli, bool issuer, uint64_t origin_sys, uint32_t origin_tli) {
        StoreRecord r = rec(sys, tli, issuer);
        r.upgrade_origin_system = origin_sys;
        r.upgrade_origin_timeline = origin_tli;
        r.upgrade_read_here = true;
        return r;
    };
    // read on the timeline its store last wrote on, the new cluster on timeline 1: nothing lost
    EXPECT_EQ(classify_store({noted(kOther, 3, false, kOther, 3)}, kHere, 1, true), StoreHistory::Upgraded);
    EXPECT_EQ(classify_store({noted(kOther, 3, true, kOther, 3)}, kHere, 1, true), StoreHistory::Upgraded);
    // a note of another run (one that failed; the old cluster then read without cosid)
    StoreRecord stale = noted(kOther, 3, false, kOther, 3);
    stale.upgrade_read_here = false;
    EXPECT_EQ(classify_store({stale}, kHere, 1, true), StoreHistory::NewCluster);
    // a promoted standby stopped before any store call, then upgraded: it may have lost a tail
    EXPECT_EQ(classify_store({noted(kOther, 1, false, kOther, 2)}, kHere, 1, true), StoreHistory::NewCluster);
    // ... of a server that issued from its own store: a copy of it, whose origin may go on
    EXPECT_EQ(classify_store({noted(kOther, 1, true, kOther, 2)}, kHere, 1, true), StoreHistory::Forked);
    // a note of another cluster than the record's (an earlier upgrade never followed): raise
    EXPECT_EQ(classify_store({noted(kOther, 1, false, kOther + 5, 1)}, kHere, 1, true), StoreHistory::NewCluster);
    // no cosid.upgraded file here, or a standby of the new cluster promoted (timeline 2)
    EXPECT_EQ(classify_store({noted(kOther, 3, false, kOther, 3)}, kHere, 1, false), StoreHistory::NewCluster);
    EXPECT_EQ(classify_store({noted(kOther, 3, false, kOther, 3)}, kHere, 2, true), StoreHistory::NewCluster);
    // the note on the server that went on (an upgrade given up) changes nothing there
    EXPECT_EQ(classify_store({noted(kHere, 1, true, kHere, 1)}, kHere, 1, false), StoreHistory::Whole);
    EXPECT_TRUE(store_grants(StoreHistory::Upgraded));
}

TEST(ForkRule, OnlyForksAndUnfinishedRestoresGrantNothing) {
    EXPECT_TRUE(store_grants(StoreHistory::Whole));
    EXPECT_TRUE(store_grants(StoreHistory::NewTimeline));
    EXPECT_TRUE(store_grants(StoreHistory::NewCluster));
    EXPECT_TRUE(store_grants(StoreHistory::Restored));
    EXPECT_FALSE(store_grants(StoreHistory::BeingRestored));
    EXPECT_FALSE(store_grants(StoreHistory::Forked));
}

TEST(ForkRule, AcknowledgedFloorIsAboveAnythingTheStoppedOriginCouldGrantItself) {
    // the cap covers limits the original raised after the copy (reach.hpp)
    EXPECT_EQ(fork_acknowledged_floor(std::nullopt, 100000, 60000, 5000), 100000 + kReachCapMs);
    EXPECT_EQ(fork_acknowledged_floor(40000, 100000, 60000, 5000), 40000 + kReachCapMs);
    EXPECT_EQ(fork_acknowledged_floor(400000, 100000, 60000, 5000), 100000 + kReachCapMs);  // never after now
    EXPECT_EQ(fork_acknowledged_floor(std::nullopt, 100000, 600000, 5000), 710000);  // limits from before the cap
    // The origin's last grant at its store time g <= stopped + tolerance (clocks within the
    // tolerance) reaches at most g + max_ttl + tolerance: below the floor for every g.
    for (int64_t stopped = 0; stopped <= 100000; stopped += 997)
        for (int64_t g = stopped - 50000; g <= stopped + 5000; g += 1009)
            EXPECT_LT(g + 60000 + 5000, fork_acknowledged_floor(stopped, 100000, 60000, 5000) + 1);
}

TEST(StoreChange, SameStoreNeedsNothingAnotherStoreStartsAboveTheSlotsCeiling) {
    Layout l;
    GrantedNamespace g;
    g.ns = "orders";
    EXPECT_TRUE(record_grant(&g, "store-a", l, 3, 1000));
    EXPECT_TRUE(record_grant(&g, "store-a", l, 3, 2000));
    EXPECT_FALSE(record_grant(&g, "store-a", l, 3, 1500));  // a renewal never lowers it
    EXPECT_EQ(floor_after_store_change(&g, "store-a", l, 3), 0);
    EXPECT_EQ(floor_after_store_change(&g, "store-b", l, 3), 2000);
    EXPECT_EQ(floor_after_store_change(&g, "store-b", l, 4), 0);  // another slot: no wait
    EXPECT_EQ(floor_after_store_change(nullptr, "store-b", l, 3), 0);
    // moved to B: B's windows are recorded; back on A, only B's count (A knows its own)
    EXPECT_TRUE(record_grant(&g, "store-b", l, 4, 3000));
    EXPECT_EQ(floor_after_store_change(&g, "store-a", l, 3), 0);
    EXPECT_EQ(floor_after_store_change(&g, "store-a", l, 4), 3000);
    EXPECT_EQ(floor_after_store_change(&g, "store-c", l, 3), 2000);
}

TEST(StoreChange, AReleaseInOrderBringsTheBoundDownToTheLastId) {
    Layout l;
    GrantedNamespace g;
    record_grant(&g, "store-a", l, 0, 40000);
    EXPECT_TRUE(record_release(&g, "store-a", 0, 12000));
    EXPECT_EQ(floor_after_store_change(&g, "store-b", l, 0), 12000);
    EXPECT_FALSE(record_release(&g, "store-a", 0, 30000));  // never up
    EXPECT_FALSE(record_release(&g, "store-b", 0, 1));      // another store's: nothing recorded
    EXPECT_EQ(floor_after_store_change(&g, "store-b", l, 0), 12000);
}

TEST(StoreChange, AnotherLayoutStartsAboveEveryEarlierId) {
    Layout ms;  // 41/10/12 in ms
    Layout s53;
    s53.timestamp_bits = 35;
    s53.slot_bits = 6;
    s53.sequence_bits = 12;
    s53.unit = Unit::Second;
    GrantedNamespace g;
    g.ns = "x";
    record_grant(&g, "store-a", s53, 1, 1733250000000);
    const int64_t largest = g.largest_id();
    const int64_t f = floor_after_store_change(&g, "store-b", ms, 0);
    ASSERT_NE(f, INT64_MAX);
    // every tick of the new layout after the floor gives ids above the largest earlier one
    EXPECT_GT(ms.pack(ms.tick_of(f) + 1, 0, 0), largest);
    // and the bound survives the move
    record_grant(&g, "store-b", ms, 0, f + 5000);
    EXPECT_GE(floor_after_store_change(&g, "store-c", ms, 7), f);
}

TEST(StoreChange, HistoryFileRoundTripsAndRefusesEveryDamage) {
    Layout l;
    std::vector<GrantedNamespace> h(2);
    h[0].ns = "orders";
    record_grant(&h[0], "0b4c7d5e-1111-2222-3333-444455556666", l, 0, 1733250000123);
    record_grant(&h[0], "0b4c7d5e-1111-2222-3333-444455556666", l, 5, 1733250009999);
    h[1].ns = "web:1";
    h[1].all_slots_ms = 17;
    h[1].layout = l;
    record_grant(&h[1], "x", l, 2, 42);
    const std::string text = serialize_history(h, 3);
    std::vector<GrantedNamespace> back;
    uint32_t tli = 0;
    ASSERT_FALSE(parse_history(text, &back, &tli));
    EXPECT_EQ(tli, 3u);
    ASSERT_EQ(back.size(), 2u);
    EXPECT_EQ(back[0].bound(5, "other"), 1733250009999);
    EXPECT_EQ(back[1].all_slots_ms, 17);
    EXPECT_EQ(serialize_history(back, tli), text);
    for (size_t n = 0; n < text.size(); ++n) {
        std::vector<GrantedNamespace> cut;
        EXPECT_TRUE(parse_history(text.substr(0, n), &cut)) << "cut at " << n;
    }
    for (size_t i = 0; i < text.size(); ++i) {
        std::string t = text;
        t[i] = static_cast<char>(t[i] ^ 0x01);
        std::vector<GrantedNamespace> bad;
        EXPECT_TRUE(parse_history(t, &bad)) << "flipped byte " << i;
    }
}

// An instance that moves between stores at random, each store granting windows on its own,
// from its own history only (a store that never heard of the instance grants from 0): with
// the history rule, no id repeats; without it, ids repeat.
namespace {
int run_moves(bool with_rule, unsigned seed) {
    std::mt19937 rnd(seed);
    Layout l;
    l.slot_bits = 2;
    l.sequence_bits = 1;
    l.epoch_ms = 0;  // the model's times start near 0: every tick is representable (pack's rule)
    std::map<std::string, std::map<int32_t, int64_t>> next_floor;  // per store, per slot
    GrantedNamespace g;
    g.ns = "n";
    std::set<int64_t> issued;
    int repeats = 0;
    int64_t now = 1000000;
    for (int step = 0; step < 300; ++step) {
        const std::string store = std::string("store-") + char('a' + rnd() % 3);
        const int32_t slot = static_cast<int32_t>(rnd() % 4);
        now += rnd() % 50;
        int64_t& nf = next_floor[store][slot];
        const int64_t floor = std::max(nf, now - 100), ceiling = std::max(floor, now + 200);
        nf = ceiling;
        const int64_t local = with_rule ? floor_after_store_change(&g, store, l, slot) : 0;
        if (with_rule) record_grant(&g, store, l, slot, ceiling);
        for (int64_t t = std::max(floor, local) + 1; t <= ceiling; t += 1 + rnd() % 7)
            if (!issued.insert(l.pack(t, slot, 0)).second) ++repeats;
    }
    return repeats;
}
}  // namespace

TEST(StoreChange, RandomMovesBetweenStoresNeverRepeatAnIdWithTheRule) {
    int without = 0;
    for (unsigned seed = 1; seed <= 50; ++seed) {
        EXPECT_EQ(run_moves(true, seed), 0) << "seed " << seed;
        without += run_moves(false, seed);
    }
    EXPECT_GT(without, 0);  // the rule has teeth
}

TEST(ForkRule, HistoryKeepsEveryForkItSaw) {
    // A fork stays in the data directory's history whatever store it used since: a copy that
    // switches databases must be refused by the new one too (src/pg/keeper/fork.cpp).
    std::vector<GrantedNamespace> h;
    std::vector<ForkSeen> forks = {{"tl-7716258636065961467-1-2", "a promoted copy: timeline 1 to 2"},
                                   {"file-0a1b2c3d", "A cosid.fork file in the data directory: made by hand."}};
    const std::string text = serialize_history(h, 2, forks);
    std::vector<GrantedNamespace> back;
    std::vector<ForkSeen> seen;
    uint32_t tl = 0;
    ASSERT_FALSE(parse_history(text, &back, &tl, &seen).has_value());
    EXPECT_EQ(tl, 2u);
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[0].id, forks[0].id);
    EXPECT_EQ(seen[0].reason, forks[0].reason);
    EXPECT_EQ(seen[1].reason, forks[1].reason);
    // one line of printable text: a newline in a reason cannot forge another line
    EXPECT_EQ(fork_reason_line("two\nlines\tand a tab"), "two lines and a tab");
    EXPECT_FALSE(valid_fork_id("has space"));
    EXPECT_FALSE(valid_fork_id(""));
    EXPECT_TRUE(valid_fork_id("file-0a1b"));
    // a file that names one fork twice, or an id with a bad character, is refused
    std::string twice = serialize_history(h, 0, {forks[0], forks[0]});
    EXPECT_TRUE(parse_history(twice, &back, &tl, &seen).has_value());
}

TEST(ReachCap, NoWindowReachesPastTheCap) {
    // lease limits within the cap; a store set past it before the cap only lowers
    EXPECT_TRUE(limits_within_cap(30000, 5000));
    EXPECT_TRUE(limits_within_cap(60000, 30000));
    EXPECT_FALSE(limits_within_cap(110001, 5000));
    EXPECT_FALSE(limits_within_cap(30000, 30001));
    // a static window opens static_ahead past the clock, never further, even above a floor
    // ahead of the clock: it is empty until the clock comes within static_ahead of the floor
    EXPECT_EQ(static_window_ceiling(1000, 5000, 10000), 15000);
    EXPECT_EQ(static_window_ceiling(20000, 5000, 10000), 30000);    // its own ceiling ahead: borrowed above
    EXPECT_EQ(static_window_ceiling(50000, 5000, 60000), 65000);    // ... never past the cap
    EXPECT_EQ(static_window_ceiling(100000, 5000, 10000), 100000);  // empty: (floor, floor]
    EXPECT_EQ(static_window_ceiling(1000, 5000, 3600000), 5000 + kStaticAheadCapMs);
    for (int64_t floor = 0; floor < 300000; floor += 7919)
        for (int64_t ahead = 200; ahead <= kStaticAheadCapMs; ahead += 9973) {
            const int64_t c = static_window_ceiling(floor, 100000, ahead);
            EXPECT_GE(c, floor);
            EXPECT_TRUE(c == floor || c <= 100000 + kStaticAheadCapMs);  // empty, or within the cap
        }
    // a raise after unseen history covers the cap, or limits from before it that reach further
    EXPECT_EQ(unseen_history_reach_ms(40000), kReachCapMs);
    EXPECT_EQ(unseen_history_reach_ms(600000), 600000);
}

// Random histories of several owners against the lease model.  Besides acquire, renew,
// release, expiry, revocation, restarts (a key's new incarnation) and clock jumps, the
// network misbehaves: a message may be lost before the store (a failed release), applied
// with its answer lost (an acquire's answer: an orphan lease), or delivered again later (a
// replay).  Owners behave as the keeper must: they never forget a lease they know of, retry
// a failed release with the same last timestamp or stop renewing and let it expire, and hand
// back orphans of their incarnation at the orphan's ceiling.  Whatever happens, every grant
// keeps the window invariant (window_invariant.hpp), no two ids are equal, and each id lies
// in a window the store granted on its slot.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "lease_model.hpp"
#include "window_generator.hpp"
#include "window_invariant.hpp"

using namespace cosid;

namespace {

enum class HeldState {
    Active,     // renewed and issuing
    Lost,       // renewal found it lost; a paused process may still issue up to its ceiling
    Releasing,  // closed; its release failed and is retried with the same last timestamp
    Expiring,   // closed; its release failed and the owner stopped renewing: left to expire
};

struct Held {
    int32_t slot = 0;
    int64_t fence = 0;
    int64_t expires_at = 0;  // as the store last answered
    HeldState state = HeldState::Active;
    int64_t last_issued = 0;  // what the release reports, fixed when the generator closed
    WindowGenerator gen;
};

struct Owner {
    std::string key, inc;
    int restarts = 0;
    int64_t clock_offset = 0;  // owner clock = store clock + offset
    std::vector<Held> held;

    bool knows(int32_t slot, int64_t fence) const {
        for (const Held& h : held)
            if (h.slot == slot && h.fence == fence) return true;
        return false;
    }
};

// A message the network may deliver to the store once more, later.
struct Message {
    enum Kind { Acquire, Renew, Release } kind;
    AcquireRequest acquire;
    int32_t slot = 0;
    std::string inc;
    int64_t fence = 0;
    int64_t last_issued = 0;

    static Message acquire_of(const AcquireRequest& r) { return {Acquire, r, 0, r.incarnation, 0, 0}; }
    static Message renew_of(int32_t slot, const std::string& inc, int64_t fence) {
        return {Renew, {}, slot, inc, fence, 0};
    }
    static Message release_of(int32_t slot, const std::string& inc, int64_t fence, int64_t last) {
        return {Release, {}, slot, inc, fence, last};
    }
};

struct Stats {
    int issued = 0, handovers = 0, failed_releases = 0, retried_releases = 0, expired_releases = 0,
        replays[3] = {0, 0, 0}, lost_answers = 0, orphans_released = 0, restarts = 0, revokes = 0, store_clock_back = 0,
        sticky_handovers = 0;
};

// How the network treats one call.
enum class Delivery { Answered, NotApplied, AnswerLost };

void run_history(uint64_t seed, int slot_bits, Unit unit, Stats& stats) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    auto pick = [&](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(n)); };
    auto delivery = [&] {
        int64_t d = pick(10);
        return d < 7 ? Delivery::Answered : d < 9 ? Delivery::NotApplied : Delivery::AnswerLost;
    };
    Layout layout;
    layout.slot_bits = slot_bits;
    layout.sequence_bits = 3;  // tiny, to exercise sequence exhaustion and borrowing
    // Fewer than 63 bits (41 of ms, 33 of seconds): the rules do not depend on the total.
    layout.timestamp_bits = unit == Unit::Millisecond ? 41 : 33;
    layout.unit = unit;
    ASSERT_FALSE(layout.validate().has_value());
    const int64_t ttl = 300, tol = 100;
    LeaseTable table(slot_bits, tol);
    WindowInvariant invariant;
    std::vector<Owner> owners(6);
    for (size_t i = 0; i < owners.size(); ++i) {
        owners[i].key = "k" + std::to_string(i % 3);  // keys repeat: live duplicates and new incarnations
        owners[i].inc = "inc" + std::to_string(i);
    }
    int64_t now = kDefaultEpochMs + 1000000;
    std::set<int64_t> ids;
    std::map<int32_t, int64_t> last_floor;  // per slot: the floor of the latest grant
    std::vector<Message> in_flight;         // delivered once already; may come again

    // The store side: every mutation that applies is checked here, whoever sent it.
    auto store_acquire = [&](const AcquireRequest& r) {
        AcquireResult res = table.acquire(r, now);
        if (!res.lease) return res;
        const LeaseRow& l = *res.lease;
        if (auto bad = invariant.grant(l.slot, l.fence, l.floor, l.ceiling)) ADD_FAILURE() << *bad;
        // Nor below the ceiling of any generator that may still issue there (a paused one too).
        for (const Owner& o : owners)
            for (const Held& h : o.held) {
                if (h.gen.is_open() && h.slot == l.slot) {
                    EXPECT_GE(l.floor, h.gen.ceiling_ms()) << "slot " << l.slot << " fence " << l.fence;
                }
            }
        auto lf = last_floor.find(l.slot);
        if (lf != last_floor.end()) {
            EXPECT_GE(l.floor, lf->second) << "floor of slot " << l.slot << " decreased";
            ++stats.handovers;
            if (l.previous_owner_key == r.key) ++stats.sticky_handovers;
        }
        last_floor[l.slot] = l.floor;
        return res;
    };
    auto store_renew = [&](int32_t slot, const std::string& inc, int64_t fence) {
        auto res = table.renew(slot, inc, fence, ttl, now);
        if (res) {
            if (auto bad = invariant.extend(slot, fence, res->ceiling)) ADD_FAILURE() << *bad;
        }
        return res;
    };
    auto store_release = [&](int32_t slot, const std::string& inc, int64_t fence, int64_t last) {
        auto res = table.release(slot, inc, fence, last);
        if (res) {
            EXPECT_GE(res->next_floor, res->floor) << "slot " << slot;
            // The exact last timestamp (or the ceiling) covers everything issued on the slot.
            if (auto mx = invariant.max_issued(slot)) {
                EXPECT_GE(res->next_floor, *mx) << "slot " << slot;
            }
        }
        return res;
    };
    auto maybe_replay = [&](Message m) {
        if (pick(5) == 0) in_flight.push_back(std::move(m));
    };

    for (int step = 0; step < 5000 && !::testing::Test::HasFailure(); ++step) {
        Owner& o = owners[static_cast<size_t>(pick(static_cast<int64_t>(owners.size())))];
        switch (pick(14)) {
        case 0:
            now += pick(200);  // the store's clock moves; leases expire
            break;
        case 1:
            if (pick(8) == 0) {
                now -= pick(2 * ttl);  // the store fails over to a host whose clock is behind
                ++stats.store_clock_back;
            } else {
                o.clock_offset = pick(2 * tol * 3) - 3 * tol;  // owner clock jumps either way
            }
            break;
        case 2: {
            // Acquire, also while holding: a runtime takes more slots when one is not enough.
            if (o.held.size() >= 3) break;
            AcquireRequest r{o.key, o.inc, ttl, std::nullopt};
            if (pick(3) == 0) r.preferred = static_cast<int32_t>(pick(int64_t{1} << slot_bits));
            maybe_replay(Message::acquire_of(r));
            Delivery d = delivery();
            if (d == Delivery::NotApplied) break;
            auto res = store_acquire(r);
            if (!res.lease) break;
            if (d == Delivery::AnswerLost) {
                ++stats.lost_answers;  // an orphan of this incarnation
                break;
            }
            Held h;
            h.slot = res.lease->slot;
            h.fence = res.lease->fence;
            h.expires_at = res.lease->expires_at;
            h.gen.open(layout, h.slot, res.lease->floor, res.lease->ceiling);
            o.held.push_back(h);
            break;
        }
        case 3:
            for (size_t i = 0; i < o.held.size(); ++i) {
                Held& h = o.held[i];
                // A lease being released is kept alive until the release lands.
                if (h.state != HeldState::Active && h.state != HeldState::Releasing) continue;
                maybe_replay(Message::renew_of(h.slot, o.inc, h.fence));
                Delivery d = delivery();
                if (d == Delivery::NotApplied) continue;
                auto res = store_renew(h.slot, o.inc, h.fence);
                if (d == Delivery::AnswerLost) continue;  // tried again next time
                if (res) {
                    h.expires_at = res->expires_at;
                    if (h.gen.is_open()) h.gen.extend(res->ceiling);
                } else if (h.state == HeldState::Releasing || pick(2) == 0) {
                    h.gen.close();  // lost: cosid's generator fails fast
                    o.held.erase(o.held.begin() + static_cast<long>(i--));
                } else {
                    h.state = HeldState::Lost;  // a paused process does not know yet
                }
            }
            break;
        case 4: {
            // Orderly release of an active lease, or a retry of a failed one.
            if (o.held.empty()) break;
            size_t i = static_cast<size_t>(pick(static_cast<int64_t>(o.held.size())));
            Held& h = o.held[i];
            if (h.state == HeldState::Active) {
                auto last = h.gen.close();
                h.last_issued = last ? *last : h.gen.floor_ms();
            } else if (h.state == HeldState::Releasing) {
                ++stats.retried_releases;
            } else {
                break;
            }
            maybe_replay(Message::release_of(h.slot, o.inc, h.fence, h.last_issued));
            Delivery d = delivery();
            if (d != Delivery::NotApplied) store_release(h.slot, o.inc, h.fence, h.last_issued);
            if (d == Delivery::Answered) {
                // Released, or (a retry) no longer ours: done with it either way.
                o.held.erase(o.held.begin() + static_cast<long>(i));
            } else if (h.state == HeldState::Active) {
                ++stats.failed_releases;
                h.state = pick(2) == 0 ? HeldState::Releasing : HeldState::Expiring;
            } else if (pick(3) == 0) {
                h.state = HeldState::Expiring;  // gives up retrying
            }
            break;
        }
        case 5:
            // A lease left to expire is forgotten only once it has expired; a lost one when
            // its paused process catches up.
            for (size_t i = 0; i < o.held.size(); ++i) {
                Held& h = o.held[i];
                bool done = (h.state == HeldState::Expiring && h.expires_at <= now) ||
                            (h.state == HeldState::Lost && (pick(3) == 0 || !h.gen.is_open()));
                if (!done) continue;
                if (h.state == HeldState::Expiring) ++stats.expired_releases;
                h.gen.close();
                o.held.erase(o.held.begin() + static_cast<long>(i--));
            }
            break;
        case 6:
            // The owner finds leases of its incarnation it never got an answer for, and
            // hands them back at their ceiling, or leaves them to expire.
            if (pick(2) == 0) break;
            for (const LeaseRow& row : table.rows()) {
                if (row.incarnation != o.inc || o.knows(row.slot, row.fence)) continue;
                Delivery d = delivery();
                if (d != Delivery::NotApplied && store_release(row.slot, o.inc, row.fence, row.ceiling))
                    ++stats.orphans_released;
            }
            break;
        case 7:
            if (!in_flight.empty()) {
                // A replay: the store applies it again; nobody sees the answer.
                size_t i = static_cast<size_t>(pick(static_cast<int64_t>(in_flight.size())));
                Message m = in_flight[i];
                in_flight.erase(in_flight.begin() + static_cast<long>(i));
                ++stats.replays[m.kind];
                if (m.kind == Message::Acquire) store_acquire(m.acquire);
                if (m.kind == Message::Renew) store_renew(m.slot, m.inc, m.fence);
                if (m.kind == Message::Release) store_release(m.slot, m.inc, m.fence, m.last_issued);
            }
            break;
        case 8:
            if (pick(12) == 0) {
                if (table.revoke(static_cast<int32_t>(pick(int64_t{1} << slot_bits)))) ++stats.revokes;
            } else if (pick(8) == 0) {
                // A crash: everything this incarnation knew is gone, and the key comes
                // back as a new incarnation.  Its leases expire in the store.
                o.held.clear();
                o.inc = o.key + "/" + std::to_string(&o - owners.data()) + "." + std::to_string(++o.restarts);
                ++stats.restarts;
            }
            break;
        default:
            // Generate, even when the lease may already be lost in the store: a paused
            // holder does exactly that until its window ends.
            for (Held& h : o.held)
                for (int k = 0; k < 5 && h.gen.is_open(); ++k) {
                    auto r = h.gen.next(now + o.clock_offset);
                    if (r.status != NextStatus::Issued) break;
                    ASSERT_TRUE(ids.insert(r.id).second) << "duplicate id " << r.id;
                    auto u = layout.unpack(r.id);
                    ASSERT_EQ(u.slot, h.slot);
                    if (auto bad = invariant.issue(u.slot, h.fence, u.tick * layout.unit_ms())) ADD_FAILURE() << *bad;
                    ++stats.issued;
                }
        }
    }
}

void expect_coverage(const Stats& s) {
    if (::testing::Test::HasFailure()) return;  // the failure says it all
    EXPECT_GT(s.issued, 1000) << "the histories must actually issue ids";
    EXPECT_GT(s.handovers, 50) << "the histories must hand slots over";
    EXPECT_GT(s.failed_releases, 10);
    EXPECT_GT(s.retried_releases, 5);
    EXPECT_GT(s.expired_releases, 5);
    for (int r : s.replays) EXPECT_GT(r, 10) << "replays of every kind";
    EXPECT_GT(s.lost_answers, 10);
    EXPECT_GT(s.orphans_released, 5);
    EXPECT_GT(s.restarts, 5);
    EXPECT_GT(s.revokes, 5);
    EXPECT_GT(s.store_clock_back, 5);
    EXPECT_GT(s.sticky_handovers, 5) << "a key must get its own slot back after a hand-over";
}

}  // namespace

TEST(Property, RandomHistoriesNeverDuplicateMs) {
    Stats s;
    for (uint64_t seed = 1; seed <= 60 && !HasFailure(); ++seed) run_history(seed, 2, Unit::Millisecond, s);
    expect_coverage(s);
}

TEST(Property, RandomHistoriesNeverDuplicateSeconds) {
    Stats s;
    for (uint64_t seed = 100; seed <= 130 && !HasFailure(); ++seed) run_history(seed, 1, Unit::Second, s);
    expect_coverage(s);
}

TEST(Property, RandomHistoriesWithRoomToSpareNeverDuplicate) {
    // More slots than owners need: orphans and failed releases pile up without exhausting.
    Stats s;
    for (uint64_t seed = 200; seed <= 230 && !HasFailure(); ++seed) run_history(seed, 4, Unit::Millisecond, s);
    expect_coverage(s);
}

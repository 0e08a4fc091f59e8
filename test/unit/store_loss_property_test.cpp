// Random histories across the loss of a store's history (docs/safety.md): a store restored from a
// dump, a store dropped and made again, a namespace lost in a failover's tail and made again
// with a smaller tolerance.  Holders of the old store go on issuing up to their ceilings (a
// paused process, or one cut off from the store), and their renewals reach whatever store now
// answers at the address.  Whatever happens, no (slot, tick) is issued by two windows, no id
// twice, and every grant keeps the window invariant (window_invariant.hpp) across the stores.
// All store times are the answering store server's clock: the origin's is the true time, a
// restored store's is within max_tolerance of it; holders' clocks are the true time + offset.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <set>

#include "lease_model.hpp"
#include "window_generator.hpp"
#include "window_invariant.hpp"

using namespace cosid;

namespace {

// Small numbers, so that histories cross many windows: max_ttl 400 ms, max_tolerance 100 ms
// in ms layouts; ten times that (and time moving ten times as fast) in seconds layouts, so
// that windows hold whole seconds.
StoreLimits limits_for(const Layout& l) {
    return l.unit == Unit::Millisecond ? StoreLimits{400, 100} : StoreLimits{4000, 1000};
}

struct Lease {
    int uid = 0;
    int era = 0;  // which store granted it: 0 the first, 1 the one after the loss
    int32_t slot = 0;
    int64_t fence = 0;
    bool lost = false;  // a renewal found it lost; a paused process issues on up to its ceiling
    WindowGenerator gen;
};

struct Owner {
    std::string key, inc;
    int restarts = 0;
    int64_t clock_offset = 0;  // holder clock = true time + offset
    std::vector<Lease> held;
};

struct Findings {
    int issued = 0, grants = 0, grants_after_loss = 0, raised_rows = 0, old_issued_after_loss = 0,
        renewals_lost_after_loss = 0, renewed_across = 0, dup_ticks = 0, dup_ids = 0, violations = 0, histories = 0;
    std::vector<std::string> examples;
    void note(const std::string& s) {
        if (examples.size() < 6) examples.push_back(s);
    }
};

class World {
public:
    World(uint64_t seed, const Layout& layout, Findings& f)
        : lim(limits_for(layout)), rng_(seed), layout_(layout), f_(f) {
        for (int i = 0; i < 5; ++i)
            owners_.push_back({"k" + std::to_string(i % 3), "inc" + std::to_string(i), 0, 0, {}});
        ++f_.histories;
    }

    int64_t pick(int64_t n) { return static_cast<int64_t>(rng_() % static_cast<uint64_t>(n)); }
    int64_t store_now() const { return t_ + skew_; }
    int64_t true_time() const { return t_; }

    const StoreLimits lim;
    // The store at the address: nullptr while it cannot be reached (lost, dropped).
    std::unique_ptr<LeaseTable> table;
    int era = 0;
    int64_t skew_ = 0;  // the answering store server's clock - true time
    // Holders' clock offsets are drawn from [clock_lo, clock_hi].
    int64_t clock_lo = -3 * lim.max_tolerance_ms, clock_hi = 3 * lim.max_tolerance_ms;
    // Whether holders still send store calls (false: writers stopped, or cut off from the store).
    bool calls = true;
    // Whether a lease of an earlier store is renewed on the store that answers now (its
    // renewals reach the same address); false: they fail (the namespace is gone) and it is
    // only issued on up to its ceiling.  (b) and (c) run with false: a made-again namespace's
    // fences start at 0 again, so an old lease's retried renewal can match a new grant to the
    // same incarnation, slot and fence.  This model has one entry per grant; the keeper keeps
    // one per slot (src/pg/keeper/keeper.cpp, retire_stale_entries_locked: a slot granted again
    // retires the older entry), which this history does not model.
    bool old_leases_renew = true;

    void set_clocks(int64_t lo, int64_t hi) {
        clock_lo = lo;
        clock_hi = hi;
        for (Owner& o : owners_) o.clock_offset = lo + pick(hi - lo + 1);
    }

    // A store lost or dropped: what was granted until now belongs to the old store.
    void lose_store() {
        table.reset();
        loss_at_ = t_;
        lost_ = true;
    }

    void step() {
        Owner& o = owners_[static_cast<size_t>(pick(static_cast<int64_t>(owners_.size())))];
        int64_t a = pick(40);
        if (a < 5) {
            t_ += pick(lim.max_ttl_ms / 10);  // time passes; leases expire
        } else if (a < 7) {
            o.clock_offset = clock_lo + pick(clock_hi - clock_lo + 1);  // a holder's clock jumps
        } else if (a < 13) {
            acquire(o);
        } else if (a < 20) {
            renew(o);
        } else if (a < 22) {
            release(o);
        } else if (a < 23) {
            o.held.clear();  // a crash: a new incarnation of the key; its leases expire in the store
            o.inc = o.key + "/" + std::to_string(&o - owners_.data()) + "." + std::to_string(++o.restarts);
        } else if (a < 25) {
            // A lost lease is forgotten once its paused process catches up.
            for (size_t i = 0; i < o.held.size(); ++i)
                if (o.held[i].lost && (pick(3) == 0 || !o.held[i].gen.is_open()))
                    o.held.erase(o.held.begin() + static_cast<long>(i--));
        } else {
            issue(o);
        }
    }

    // The writers stop: some release their leases in order, the others are cut off from the
    // store and keep theirs (issued on up to their ceilings).
    void stop_writers() {
        for (Owner& o : owners_)
            if (pick(2) == 0)
                while (!o.held.empty() && table) {
                    Lease& h = o.held.back();
                    auto last = h.gen.close();
                    if (!h.lost) table->release(h.slot, o.inc, h.fence, last ? *last : h.gen.floor_ms());
                    o.held.pop_back();
                }
        calls = false;
    }

    // Runs steps until the true time has moved by `ms` (or a step budget runs out).
    void run_for(int64_t ms) {
        const int64_t until = t_ + ms;
        for (int k = 0; k < 20000 && t_ < until && !::testing::Test::HasFatalFailure(); ++k) step();
    }
    // Every holder renews for the longest lease, as the last thing the store does before it
    // is lost: the ceilings the raise must cover are then as high as they get.
    void renew_everyone_longest() {
        longest_ = true;
        for (Owner& o : owners_) renew(o);
        longest_ = false;
    }
    void run_steps(int n) {
        for (int k = 0; k < n && !::testing::Test::HasFatalFailure(); ++k) step();
    }

private:
    // The invariant checker's name of a window: fences of different stores may repeat, so a
    // window of era e is "fence" e x 2^40 + fence in its messages (2^40 + 2^32 + 2: fence 2
    // after a raise, on the store after the loss).
    int64_t key(int lease_era, int64_t fence) const { return (int64_t{lease_era} << 40) + fence; }
    // Often the longest lease the store allows: the raise's margin is tight for those.
    int64_t ttl() { return longest_ || pick(2) == 0 ? lim.max_ttl_ms : 100 + pick(lim.max_ttl_ms - 100 + 1); }

    void acquire(Owner& o) {
        if (!calls || !table || o.held.size() >= 3) return;
        AcquireRequest r{o.key, o.inc, ttl(), std::nullopt};
        if (pick(3) == 0) r.preferred = static_cast<int32_t>(pick(int64_t{1} << layout_.slot_bits));
        AcquireResult res = table->acquire(r, store_now());
        if (!res.lease) return;
        const LeaseRow& l = *res.lease;
        ++f_.grants;
        if (lost_) ++f_.grants_after_loss;
        EXPECT_TRUE(layout_.slot_fits(l.slot)) << "slot " << l.slot;
        if (auto bad = inv_.grant(l.slot, key(era, l.fence), l.floor, l.ceiling)) violation(*bad);
        if (pick(10) == 0) return;  // applied, answer lost: an orphan, left to expire
        Lease h;
        h.uid = next_uid_++;
        h.era = era;
        h.slot = l.slot;
        h.fence = l.fence;
        h.gen.open(layout_, l.slot, l.floor, l.ceiling);
        o.held.push_back(h);
    }

    void renew(Owner& o) {
        if (!calls || !table) return;  // an error: the lease is kept, issued on up to its ceiling
        for (size_t i = 0; i < o.held.size(); ++i) {
            Lease& h = o.held[i];
            if (h.lost) continue;
            if (h.era != era && (!old_leases_renew || pick(20) != 0)) continue;  // (backing off after errors)
            auto res = table->renew(h.slot, o.inc, h.fence, ttl(), store_now());
            if (res) {
                if (h.era != era) ++f_.renewed_across;
                if (auto bad = inv_.extend(h.slot, key(h.era, h.fence), res->ceiling)) violation(*bad);
                if (h.gen.is_open()) h.gen.extend(res->ceiling);
            } else {
                if (lost_ && h.era != era) ++f_.renewals_lost_after_loss;
                if (pick(2) == 0)
                    o.held.erase(o.held.begin() + static_cast<long>(i--));  // fails fast
                else
                    h.lost = true;  // a paused process does not know yet
            }
        }
    }

    void release(Owner& o) {
        if (!calls || !table || o.held.empty()) return;
        size_t i = static_cast<size_t>(pick(static_cast<int64_t>(o.held.size())));
        Lease& h = o.held[i];
        if (h.lost) return;
        if (h.era != era && !old_leases_renew) return;
        auto last = h.gen.close();
        table->release(h.slot, o.inc, h.fence, last ? *last : h.gen.floor_ms());
        o.held.erase(o.held.begin() + static_cast<long>(i));
    }

    void issue(Owner& o) {
        for (Lease& h : o.held)
            // Up to 4 ticks' worth: a busy holder borrows ahead and covers its window densely.
            for (int k = 0; k < 16 && h.gen.is_open(); ++k) {
                auto r = h.gen.next(t_ + o.clock_offset);
                if (r.status != NextStatus::Issued) break;
                ++f_.issued;
                if (lost_ && h.era < era) ++f_.old_issued_after_loss;
                auto u = layout_.unpack(r.id);
                EXPECT_EQ(u.slot, h.slot);
                if (!ids_.insert(r.id).second) ++f_.dup_ids;
                auto ins = tick_uid_.emplace(std::make_pair(u.slot, u.tick), h.uid);
                if (!ins.second && ins.first->second != h.uid) {
                    ++f_.dup_ticks;
                    f_.note("slot " + std::to_string(u.slot) + " tick " + std::to_string(u.tick) +
                            " issued by two windows (lease uids " + std::to_string(ins.first->second) + " and " +
                            std::to_string(h.uid) + ", era " + std::to_string(h.era) + ")");
                }
                if (auto bad = inv_.issue(u.slot, key(h.era, h.fence), u.tick * layout_.unit_ms())) violation(*bad);
            }
    }

    void violation(const std::string& what) {
        ++f_.violations;
        f_.note(what);
    }

    std::mt19937_64 rng_;
    Layout layout_;
    Findings& f_;
    int64_t t_ = kDefaultEpochMs + 500000000;
    int64_t loss_at_ = 0;
    bool lost_ = false;
    bool longest_ = false;
    std::vector<Owner> owners_;
    WindowInvariant inv_;
    std::map<std::pair<int32_t, int64_t>, int> tick_uid_;  // (slot, tick) -> the lease that issued it
    std::set<int64_t> ids_;
    int next_uid_ = 0;
};

// How long a lost store stays down, and how far the clock of the server that answers next
// is from the origin's (within max_tolerance): often at the edges, where the margin is tight.
// (run_for moves the time by steps of up to max_ttl / 10: 0 is "at once")
int64_t outage(World& w) { return w.pick(2) == 0 ? 0 : w.pick(2 * w.lim.max_ttl_ms); }
int64_t other_server_skew(World& w) {
    return w.pick(2) == 0 ? -w.lim.max_tolerance_ms : w.pick(2 * w.lim.max_tolerance_ms + 1) - w.lim.max_tolerance_ms;
}

Layout layout_of(Unit unit, int slot_bits) {
    Layout l;
    l.slot_bits = slot_bits;
    l.sequence_bits = 2;  // tiny: sequences run out, generators borrow ahead up to their ceilings
    l.timestamp_bits = unit == Unit::Millisecond ? 41 : 33;
    l.unit = unit;
    return l;
}

std::string report(const Findings& f) {
    std::string s = std::to_string(f.dup_ticks) + " (slot, tick) issued twice, " + std::to_string(f.dup_ids) +
                    " ids twice, " + std::to_string(f.violations) + " invariant violations in " +
                    std::to_string(f.histories) + " histories";
    for (const std::string& e : f.examples) s += "\n  " + e;
    return s;
}

void expect_clean(const Findings& f) {
    EXPECT_EQ(f.dup_ticks + f.dup_ids + f.violations, 0) << report(f);
    std::printf("[          ] %d histories, %d ids, %d grants (%d after the loss), %d rows raised, %d issued by old "
                "holders after the loss, %d old renewals found lost, %d renewed across stores\n",
                f.histories, f.issued, f.grants, f.grants_after_loss, f.raised_rows, f.old_issued_after_loss,
                f.renewals_lost_after_loss, f.renewed_across);
}

// (a) A dump: the table is copied at a random moment, the history goes on, then the store is
// lost and the copy restored at the same address on a server whose clock is within
// max_tolerance of the origin's.  The first call raises (raise_after_lost_history).
void run_dump(uint64_t seed, Unit unit, int slot_bits, Findings& f) {
    SCOPED_TRACE("dump seed " + std::to_string(seed));
    World w(seed, layout_of(unit, slot_bits), f);
    const int64_t tol = w.pick(w.lim.max_tolerance_ms + 1);
    w.table =
        std::make_unique<LeaseTable>(slot_bits, tol, w.lim, namespace_first_floor(w.store_now(), std::nullopt, w.lim));
    w.run_steps(static_cast<int>(20 + w.pick(400)));
    const LeaseTable dump = *w.table;
    w.run_steps(static_cast<int>(1 + w.pick(600)));  // holders acquire, renew, issue on the origin
    if (w.pick(2) == 0) w.renew_everyone_longest();
    w.lose_store();
    w.run_for(outage(w));  // down: the old holders issue on to their ceilings
    w.skew_ = other_server_skew(w);
    w.era = 1;
    w.table = std::make_unique<LeaseTable>(dump);
    f.raised_rows += w.table->raise_after_lost_history(w.store_now(), w.lim);
    w.run_steps(1500);
}

// (b) Drop and create again: the writers stop (some release in order, the rest are cut off
// from the store and issue on up to their ceilings, with clocks up to the tolerance behind),
// the drop happens once store_may_be_dropped allows it, and the store made again on the same
// server starts its namespace at its now.
void run_drop(uint64_t seed, Unit unit, int slot_bits, bool old_leases_renew, Findings& f) {
    SCOPED_TRACE("drop seed " + std::to_string(seed));
    World w(seed, layout_of(unit, slot_bits), f);
    const int64_t tol = w.pick(w.lim.max_tolerance_ms + 1);
    w.set_clocks(-tol, tol);
    w.table =
        std::make_unique<LeaseTable>(slot_bits, tol, w.lim, namespace_first_floor(w.store_now(), std::nullopt, w.lim));
    w.run_steps(static_cast<int>(20 + w.pick(800)));
    w.set_clocks(-tol, 0);  // holders' clocks behind the store's, by up to the tolerance
    w.stop_writers();
    int waited = 0;
    while (!store_may_be_dropped(w.table->rows(), w.store_now()) && waited++ < 20000) w.step();
    ASSERT_TRUE(store_may_be_dropped(w.table->rows(), w.store_now())) << "the drop never became possible";
    w.lose_store();
    w.run_for(w.pick(w.lim.max_ttl_ms));
    w.era = 1;
    const int64_t tol2 = w.pick(w.lim.max_tolerance_ms + 1);
    w.table =
        std::make_unique<LeaseTable>(slot_bits, tol2, w.lim, namespace_first_floor(w.store_now(), std::nullopt, w.lim));
    w.calls = true;
    w.old_leases_renew = old_leases_renew;
    w.run_steps(1500);
}

// (c) A namespace made on the origin with tolerance T, lost in a failover's tail (the
// promoted standby never had it), and made again with a smaller tolerance after the raise.
void run_namespace_lost(uint64_t seed, Unit unit, int slot_bits, bool old_leases_renew, Findings& f) {
    SCOPED_TRACE("namespace seed " + std::to_string(seed));
    World w(seed, layout_of(unit, slot_bits), f);
    const int64_t tol = w.lim.max_tolerance_ms - w.pick(w.lim.max_tolerance_ms / 2);
    w.table =
        std::make_unique<LeaseTable>(slot_bits, tol, w.lim, namespace_first_floor(w.store_now(), std::nullopt, w.lim));
    w.run_steps(static_cast<int>(20 + w.pick(w.pick(2) == 0 ? 100 : 800)));  // made shortly before the loss, or not
    if (w.pick(2) == 0) w.renew_everyone_longest();
    w.lose_store();
    w.run_for(outage(w));
    // The promoted standby: its clock within max_tolerance of the origin's.  Its first call
    // raises the namespaces it has (another one here) and records when.
    w.skew_ = other_server_skew(w);
    LeaseTable other(1, 0, w.lim, 0);
    f.raised_rows += other.raise_after_lost_history(w.store_now(), w.lim);
    w.run_for(w.pick(2) == 0 ? 0 : w.pick(w.lim.max_ttl_ms));  // the namespace does not exist here yet
    w.era = 1;
    const int64_t tol2 = w.pick(tol);  // made again with a smaller tolerance
    w.table = std::make_unique<LeaseTable>(slot_bits, tol2, w.lim,
                                           namespace_first_floor(w.store_now(), other.raised_at(), w.lim));
    w.old_leases_renew = old_leases_renew;
    w.run_steps(1500);
}

}  // namespace

TEST(StoreLossProperty, RestoredDumpNeverIssuesTwiceMs) {
    Findings f;
    for (uint64_t seed = 1; seed <= 40; ++seed) run_dump(seed, Unit::Millisecond, 2, f);
    for (uint64_t seed = 41; seed <= 60; ++seed) run_dump(seed, Unit::Millisecond, 1, f);
    expect_clean(f);
    EXPECT_GT(f.old_issued_after_loss, 100) << "old holders must issue after the loss";
    EXPECT_GT(f.grants_after_loss, 100);
    EXPECT_GT(f.renewals_lost_after_loss, 3) << "old holders' renewals must reach the restored store";
}

TEST(StoreLossProperty, RestoredDumpNeverIssuesTwiceSeconds) {
    Findings f;
    for (uint64_t seed = 100; seed <= 140; ++seed) run_dump(seed, Unit::Second, 1, f);
    expect_clean(f);
    EXPECT_GT(f.old_issued_after_loss, 5);
    EXPECT_GT(f.grants_after_loss, 100);
}

TEST(StoreLossProperty, StoreMadeAgainNeverIssuesTwice) {
    Findings f;
    for (uint64_t seed = 200; seed <= 240; ++seed) run_drop(seed, Unit::Millisecond, 2, false, f);
    for (uint64_t seed = 241; seed <= 260; ++seed) run_drop(seed, Unit::Second, 1, false, f);
    expect_clean(f);
    // (old holders issue little after the drop: it waits until every ceiling lies behind
    // the store's clock, and busy holders borrow ahead up to their ceilings before that)
    EXPECT_GT(f.grants_after_loss, 100);
}

TEST(StoreLossProperty, NamespaceMadeAgainWithSmallerToleranceIsCovered) {
    Findings f;
    for (uint64_t seed = 300; seed <= 340; ++seed) run_namespace_lost(seed, Unit::Millisecond, 2, false, f);
    for (uint64_t seed = 341; seed <= 360; ++seed) run_namespace_lost(seed, Unit::Second, 1, false, f);
    expect_clean(f);
    EXPECT_GT(f.old_issued_after_loss, 50) << "old holders must issue after the loss";
    EXPECT_GT(f.grants_after_loss, 100);
}

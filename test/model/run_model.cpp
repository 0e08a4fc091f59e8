// The exhaustive checker: breadth-first search over every sequence of moves (moves.cpp) from
// the initial world, up to a depth, with each state stored once (by a 128-bit hash of its
// bytes).  In every state reached, the promise is checked as each id is issued: no (slot,
// tick) of the namespace issued by two issuers, no id issued twice.  Breadth first, so the
// first violation found has a shortest trace; it is printed as a story, move by move.
//
//   run_model [--depth N] [--issuers N] [--only FAMILY,...] [--without RULE]... [--expect-violation]
//             [--static-start] [--static-no-file] [--central] [--ns-absent] [--preset NAME] [--max-seconds N]
//   run_model --list         the rules and the move families
// Exit 0: no violation (or, with --expect-violation, a violation found); 1 otherwise; 2: bad
// arguments or the bound was not explored in time.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "world.hpp"

using namespace model;

namespace {

struct Key {
    uint64_t a, b;
    bool operator==(const Key& o) const { return a == o.a && b == o.b; }
};
struct KeyHash {
    size_t operator()(const Key& k) const { return static_cast<size_t>(k.a ^ (k.b * 0x9e3779b97f4a7c15ULL)); }
};
Key key_of(const std::string& bytes) {
    // The library's hash beside a multiply-rotate hash over 8 bytes at a time (a byte-wise
    // FNV-1a was a third of the run): 128 bits in all.
    uint64_t f = 1469598103934665603ULL ^ bytes.size();
    const char* p = bytes.data();
    size_t n = bytes.size();
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        f = (f ^ v) * 0x9fb21c651e98df25ULL;
        f ^= f >> 29;
    }
    uint64_t t = 0;
    std::memcpy(&t, p, n);
    f = (f ^ t) * 0x9fb21c651e98df25ULL;
    f ^= f >> 32;
    return Key{std::hash<std::string_view>{}(bytes), f};
}

struct Node {
    uint32_t parent;
    Move move;
};

const unsigned kFamilies[] = {F_CORE,    F_LOSS,    F_CRASH,     F_CLOCK,     F_STORE_CLOCK, F_FAILOVER,
                              F_RESTORE, F_DROP,    F_NAMESPACE, F_ROGUE,     F_FORK,        F_MOVE,
                              F_STATIC,  F_RESTART, F_LIMITS,    F_DATABASES, F_TENANT};

int usage(const char* why) {
    std::fprintf(stderr, "run_model: %s (run_model --list for rules and families)\n", why);
    return 2;
}

void list() {
    std::printf("rules (--without NAME):\n");
    for (int r = 0; r < R_COUNT; ++r) std::printf("  %-22s %s\n", rule_name(r), rule_story(r));
    std::printf("move families (--only NAME,...):\n");
    for (unsigned f : kFamilies) std::printf("  %s\n", family_name(f));
}

std::string families_text(unsigned fs) {
    std::string o;
    for (unsigned f : kFamilies)
        if (fs & f) o += (o.empty() ? "" : ",") + std::string(family_name(f));
    return o;
}

}  // namespace

int main(int argc, char** argv) {
    Config c;
    int depth = 8;
    bool expect_violation = false;
    double max_seconds = 600;
    for (int k = 1; k < argc; ++k) {
        const std::string a = argv[k];
        auto value = [&]() -> std::string { return k + 1 < argc ? argv[++k] : ""; };
        if (a == "--list") {
            list();
            return 0;
        } else if (a == "--depth") {
            depth = std::atoi(value().c_str());
        } else if (a == "--issuers") {
            c.issuers = std::atoi(value().c_str());
        } else if (a == "--max-seconds") {
            max_seconds = std::atof(value().c_str());
        } else if (a == "--expect-violation") {
            expect_violation = true;
        } else if (a == "--static-start") {
            c.static_start = true;
        } else if (a == "--static-no-file") {
            c.static_no_file = true;
        } else if (a == "--central") {
            c.central = true;
        } else if (a == "--ns-absent") {
            c.ns_absent = true;
        } else if (a == "--preset") {
            c.preset = value();
        } else if (a == "--without") {
            const std::string r = value();
            int found = -1;
            for (int i = 0; i < R_COUNT; ++i)
                if (r == rule_name(i)) found = i;
            if (found < 0) return usage(("no rule named '" + r + "'").c_str());
            c.without[found] = true;
        } else if (a == "--only") {
            c.families = 0;
            std::string list_ = value() + ",";
            for (size_t p = 0, q; (q = list_.find(',', p)) != std::string::npos; p = q + 1) {
                const std::string f = list_.substr(p, q - p);
                unsigned bit = 0;
                for (unsigned x : kFamilies)
                    if (f == family_name(x)) bit = x;
                if (!bit) return usage(("no move family named '" + f + "'").c_str());
                c.families |= bit;
            }
        } else {
            return usage(("unknown argument " + a).c_str());
        }
    }
    if (c.issuers < 1 || c.issuers > 2 || depth < 1)
        return usage("--issuers is 1 or 2 (a fork adds a third), --depth at least 1");

    std::string without;
    for (int r = 0; r < R_COUNT; ++r)
        if (c.without[r]) without += std::string(without.empty() ? "" : ",") + rule_name(r);
    std::printf("bound: %d issuers%s leasing from %s, one namespace of 2 slots%s%s, times 1..%d, depth %d; moves: %s; "
                "rules switched off: %s\n",
                c.issuers, (c.families & F_FORK) ? " (+1 a fork may make)" : "",
                c.central ? "S1 (a store server of its own)" : "S0 (I0's own server; S1 a second store)",
                c.ns_absent ? " made by a move" : "", c.static_start ? ", I0 on static slot 0" : "", kMaxTime, depth,
                families_text(c.families).c_str(), without.empty() ? "none" : without.c_str());
    std::fflush(stdout);

    // Breadth first, level by level.  A state is kept only as its node (its parent and the
    // move that made it): a level's states are made again by replaying their moves from the
    // initial world, which costs a few moves each and keeps memory to ~50 bytes a state.  Two
    // threads expand halves of a level; their successors are merged in order, so a run is
    // deterministic and the first violation is a shortest one.
    const auto started = std::chrono::steady_clock::now();
    std::unordered_map<Key, uint32_t, KeyHash> seen;
    seen.reserve(1 << 22);
    std::vector<Node> nodes;
    std::string bytes;
    std::vector<std::string> preset_stories;
    const std::optional<World> init_ = initial_world(c, &preset_stories);
    if (!init_) return usage(("no preset named '" + c.preset + "' (" + preset_names() + ")").c_str());
    const World& init = *init_;
    for (const std::string& line : preset_stories) std::printf("  preset: %s\n", line.c_str());
    serialize(init, &bytes);
    seen.emplace(key_of(bytes), 0);
    nodes.push_back(Node{0, Move{}});
    std::vector<uint32_t> frontier{0}, next;
    uint64_t transitions = 0;
    std::optional<std::pair<uint32_t, Move>> bad;  // the parent of the violating move, and the move
    struct Successor {
        Key key;
        uint32_t parent;
        Move move;
    };
    struct Part {
        std::vector<Successor> out;
        uint64_t transitions = 0;
        std::optional<std::pair<uint32_t, Move>> bad;
        bool timed_out = false;
    };
    auto expand = [&](size_t from, size_t to, Part* part) {
        std::vector<Move> moves, chain;
        std::string buf;
        for (size_t f = from; f < to && !part->bad; ++f) {
            if ((f & 4095) == 0 &&
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() > max_seconds) {
                part->timed_out = true;
                return;
            }
            const uint32_t idx = frontier[f];
            chain.clear();
            for (uint32_t i = idx; i != 0; i = nodes[i].parent) chain.push_back(nodes[i].move);
            World w = init;
            for (size_t k = chain.size(); k-- > 0;) apply(w, c, chain[k], nullptr, nullptr);
            moves_of(w, c, &moves);
            for (const Move& m : moves) {
                World n = w;
                std::string violation;
                if (!apply(n, c, m, nullptr, &violation)) continue;
                ++part->transitions;
                if (!violation.empty()) {
                    part->bad = std::make_pair(idx, m);
                    break;
                }
                serialize(n, &buf);
                part->out.push_back(Successor{key_of(buf), idx, m});
            }
        }
    };
    int level = 0;
    for (; level < depth && !frontier.empty() && !bad; ++level) {
        Part parts[2];
        const size_t half = frontier.size() / 2;
        std::thread t([&] { expand(half, frontier.size(), &parts[1]); });
        expand(0, half, &parts[0]);
        t.join();
        if (parts[0].timed_out || parts[1].timed_out) {
            std::printf("not finished: depth %d not explored within %.0f s (%zu states)\n", level + 1, max_seconds,
                        nodes.size());
            return 2;
        }
        next.clear();
        for (Part& p : parts) {
            transitions += p.transitions;
            if (p.bad && !bad) bad = p.bad;
            if (bad) break;
            for (const Successor& s : p.out) {
                auto [it, fresh] = seen.emplace(s.key, static_cast<uint32_t>(nodes.size()));
                if (!fresh) continue;
                nodes.push_back(Node{s.parent, s.move});
                next.push_back(it->second);
            }
        }
        std::swap(frontier, next);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        std::printf("  depth %d: %zu states so far (%.1f s)\n", level + 1, nodes.size(), secs);
        std::fflush(stdout);
        if (secs > max_seconds && level + 1 < depth && !bad) {
            std::printf("not finished: depth %d explored, not %d, within %.0f s\n", level + 1, depth, max_seconds);
            return 2;
        }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("explored: %zu distinct states, %llu transitions, to depth %d, in %.1f s\n", nodes.size(),
                static_cast<unsigned long long>(transitions), level, secs);
    if (!bad) {
        std::printf("result: no violation: no (slot, tick) issued by two issuers, no id issued twice%s\n",
                    (c.families & F_TENANT) ? ", no server refused a window by another login" : "");
        return expect_violation ? 1 : 0;
    }
    // The shortest trace: the chain of moves back to the initial world, replayed with stories.
    std::vector<Move> trace{bad->second};
    for (uint32_t i = bad->first; i != 0; i = nodes[i].parent) trace.push_back(nodes[i].move);
    World w = init;
    std::printf("result: VIOLATION after %zu moves; the shortest trace:\n", trace.size());
    std::printf("  start: %s\n", describe(w).c_str());
    std::string violation;
    for (size_t k = trace.size(); k-- > 0;) {
        std::string story;
        apply(w, c, trace[k], &story, &violation);
        std::printf("  %2zu. %s\n", trace.size() - k, story.c_str());
        std::printf("      -> %s\n", describe(w).c_str());
    }
    std::printf("broken promise: %s\n", violation.c_str());
    return expect_violation ? 0 : 1;
}

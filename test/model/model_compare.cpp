// Drives the C++ lease model (src/core/lease_model) with a random operation sequence and
// writes the same sequence as SQL against the store's functions.  The SQL's output must
// equal the model's, line for line (test/e2e/model_compare.sh runs psql and diffs).
//
// Time: operation k happens at model time T0 + k*1000 ms.  The store's clock stands still at
// that time during the statement: test/e2e/model_compare.sh replaces cosid.store_now() in its
// database by one that reads what cosid_model_at set, in the namespace argument of the store
// function each statement calls.  (An offset from the real clock let a loaded machine's delays
// count: a separate statement once let 100 ms pass, a first call's compile 150 ms.)  Times
// are still printed rounded to 100 ms, relative to T0.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "lease_model.hpp"

using namespace cosid;

namespace {
int64_t T0 = 0;  // model time zero: near the real clock, so the store's offset stays small
const int64_t TTL = 4500, TOL = 300;
const int SLOT_BITS = 2;

struct Lease {
    int32_t slot;
    int64_t fence;
};

// An owner may hold several leases: acquire never hands back a live one, not even to its own
// incarnation, so acquiring while holding takes another slot.
struct Owner {
    std::string key, inc;
    std::vector<Lease> held;
};

std::string r100(int64_t v) { return std::to_string((v - T0 + 50) / 100 * 100 - ((v - T0 + 50) < 0 ? 100 : 0)); }
}  // namespace

int main(int argc, char** argv) {
    if (argc != 6) {
        std::fprintf(stderr, "usage: %s SEED STEPS OUT.sql EXPECTED.txt T0_MS\n", argv[0]);
        return 2;
    }
    T0 = std::strtoll(argv[5], nullptr, 10);
    std::mt19937_64 rng(std::strtoull(argv[1], nullptr, 10));
    int steps = std::atoi(argv[2]);
    FILE* sql = std::fopen(argv[3], "w");
    FILE* exp = std::fopen(argv[4], "w");
    if (!sql || !exp) return 2;
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };

    // The namespace is made at store time T0 (below): its slots start there (a new
    // namespace's first floor is the store's now).
    // With the store's limits close to the ops' ttl (model_compare.sh sets them with
    // cosid_store_settings; max_tolerance covers the store's default namespace's 1 s), so that
    // a raise (every floor max_ttl + 2 x max_tolerance ahead) leaves windows empty until the
    // store's clock is within ttl + tolerance of the floor, which both sides must agree on.
    const StoreLimits limits{TTL, 1000};
    LeaseTable model(SLOT_BITS, TOL, limits, T0);
    std::vector<Owner> owners(5);
    for (int i = 0; i < 5; ++i) {
        owners[i].key = "key" + std::to_string(i % 3);
        char inc[40];
        std::snprintf(inc, sizeof(inc), "00000000-0000-0000-0000-%012d", i + 1);
        owners[i].inc = inc;
    }
    std::fprintf(sql, "\\set ON_ERROR_STOP 1\n\\o /dev/null\n");  // only the ops' lines are compared
    // The clock is set in the namespace argument, as for every store call below.
    std::fprintf(sql, "SELECT cosid_namespace_create(cosid_model_at(%lld), slot_bits => %d, tolerance => '%lld ms');\n",
                 static_cast<long long>(T0), SLOT_BITS, static_cast<long long>(TOL));
    std::fprintf(sql, "CREATE TEMP TABLE out (n serial, line text);\n");

    for (int k = 1; k <= steps; ++k) {
        const int64_t now = T0 + int64_t{k} * 1000;
        Owner& o = owners[static_cast<size_t>(pick(5))];
        int op = pick(6);
        size_t which = o.held.empty() ? 0 : static_cast<size_t>(pick(static_cast<int>(o.held.size())));
        if (op <= 1) {
            AcquireRequest req{o.key, o.inc, TTL, std::nullopt};
            if (pick(3) == 0) req.preferred = pick(1 << SLOT_BITS);
            std::string pref = req.preferred ? std::to_string(*req.preferred) : "NULL";
            auto r = model.acquire(req, now);
            std::string line;
            if (r.lease) {
                line = "acquire " + o.key + " slot=" + std::to_string(r.lease->slot) +
                       " fence=" + std::to_string(r.lease->fence) + " floor=" + r100(r.lease->floor) +
                       " ceiling=" + r100(r.lease->ceiling) + " exp=" + r100(r.lease->expires_at) +
                       " dup=" + (r.duplicate_key ? "t" : "f");
                o.held.push_back({r.lease->slot, r.lease->fence});
            } else {
                line = "acquire " + o.key + " exhausted earliest=" + r100(*r.earliest_expiry) +
                       " dup=" + (r.duplicate_key ? "t" : "f");
            }
            std::fprintf(exp, "%s\n", line.c_str());
            std::fprintf(sql,
                         "INSERT INTO out(line) SELECT 'acquire %s ' || CASE WHEN slot IS NULL THEN "
                         "'exhausted earliest=' || cosid_r100(earliest_expiry) ELSE 'slot=' || slot || ' fence=' || "
                         "fence || ' floor=' || cosid_r100(floor) || ' ceiling=' || cosid_r100(ceiling) || ' exp=' || "
                         "cosid_r100(expires_at) END || ' dup=' || CASE WHEN duplicate_key THEN 't' ELSE 'f' END "
                         "FROM cosid.acquire(cosid_model_at(%lld), '%s', '%s', %lld, %s);\n",
                         o.key.c_str(), static_cast<long long>(now), o.key.c_str(), o.inc.c_str(),
                         static_cast<long long>(TTL), pref.c_str());
        } else if (op == 2 && !o.held.empty()) {
            const Lease l = o.held[which];
            auto r = model.renew(l.slot, o.inc, l.fence, TTL, now);
            std::fprintf(exp, "renew %s %s\n", o.key.c_str(),
                         r ? ("ceiling=" + r100(r->ceiling) + " exp=" + r100(r->expires_at)).c_str() : "lost");
            if (!r) o.held.erase(o.held.begin() + static_cast<long>(which));
            std::fprintf(
                sql,
                "INSERT INTO out(line) SELECT 'renew %s ' || coalesce((SELECT 'ceiling=' || "
                "cosid_r100(ceiling) || ' exp=' || cosid_r100(expires_at) FROM cosid.renew(cosid_model_at(%lld), %d, "
                "'%s', %lld, %lld)), 'lost');\n",
                o.key.c_str(), static_cast<long long>(now), l.slot, o.inc.c_str(), static_cast<long long>(l.fence),
                static_cast<long long>(TTL));
        } else if (op == 3 && !o.held.empty()) {
            const Lease l = o.held[which];
            const LeaseRow& row = model.row(l.slot);
            int64_t last = row.floor + int64_t{pick(40)} * 100;  // may be above ceiling: clamped
            if (row.floor < T0) last = now - 500;
            auto r = model.release(l.slot, o.inc, l.fence, last);
            std::fprintf(exp, "release %s %s\n", o.key.c_str(),
                         r ? ("next_floor=" + r100(r->next_floor)).c_str() : "lost");
            o.held.erase(o.held.begin() + static_cast<long>(which));
            std::fprintf(
                sql,
                "INSERT INTO out(line) SELECT 'release %s ' || coalesce((SELECT 'next_floor=' || "
                "cosid_r100(next_floor) FROM cosid.release(cosid_model_at(%lld), %d, '%s', %lld, %lld)), 'lost');\n",
                o.key.c_str(), static_cast<long long>(now), l.slot, o.inc.c_str(), static_cast<long long>(l.fence),
                static_cast<long long>(last));
        } else if (op == 5 && pick(8) == 0) {
            // the store lost its history (a restore declared): every lease freed, every floor
            // raised to now + max_ttl + 2 x max_tolerance
            model.raise_after_lost_history(now, limits);
            for (Owner& x : owners) x.held.clear();
            std::fprintf(exp, "raise\n");
            std::fprintf(sql,
                         "SELECT cosid_model_at(%lld);\nSELECT cosid_store_follow_timeline(restored => true);\n"
                         "INSERT INTO out(line) SELECT 'raise';\n",
                         static_cast<long long>(now));
        } else if (op == 4 && pick(3) == 0) {
            int slot = pick(1 << SLOT_BITS);
            auto r = model.revoke(slot);
            std::fprintf(exp, "revoke %d %s\n", slot, r ? ("next_floor=" + r100(r->next_floor)).c_str() : "free");
            std::fprintf(sql,
                         "INSERT INTO out(line) SELECT 'revoke %d ' || coalesce((SELECT 'next_floor=' || "
                         "cosid_r100(next_floor) FROM cosid.revoke(cosid_model_at(%lld), %d)), 'free');\n",
                         slot, static_cast<long long>(now), slot);
        } else {
            // time passes; print the state of every slot as the store sees it
            std::string line = "state";
            for (int s = 0; s < (1 << SLOT_BITS); ++s) {
                auto st = model.state(s, now);
                line += std::string(" ") + (st == SlotState::Free   ? "free"
                                            : st == SlotState::Held ? "held"
                                                                    : "expired");
            }
            std::fprintf(exp, "%s\n", line.c_str());
            std::fprintf(sql,
                         "INSERT INTO out(line) SELECT 'state ' || string_agg(state, ' ' ORDER BY slot) FROM "
                         "cosid_leases(cosid_model_at(%lld));\n",
                         static_cast<long long>(now));
        }
    }
    std::fprintf(sql, "\\o\n\\pset tuples_only on\n\\pset format unaligned\nSELECT line FROM out ORDER BY n;\n");
    std::fclose(sql);
    std::fclose(exp);
    return 0;
}

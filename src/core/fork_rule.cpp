#include "fork_rule.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "reach.hpp"
#include "static_state.hpp"  // crc32c, valid_namespace_name, adopt_floor

namespace cosid {

StoreHistory classify_store(const std::vector<StoreRecord>& records, uint64_t here_system_identifier,
                            uint32_t here_timeline, bool here_upgraded) {
    bool declared = false, issuer = false;
    for (const StoreRecord& r : records) {
        declared = declared || r.fork_declared;
        issuer = issuer || r.issuer;
    }
    if (declared) return StoreHistory::Forked;
    if (records.empty()) return StoreHistory::Restored;
    if (records.size() > 1) return issuer ? StoreHistory::Forked : StoreHistory::Restored;
    const StoreRecord& r = records.front();
    if (r.system_identifier == 0) return StoreHistory::BeingRestored;
    if (r.system_identifier != here_system_identifier) {
        // pg_upgrade read the server: on the timeline the store last wrote on, nothing was lost
        // (pg_upgrade stops it cleanly) and its new cluster (timeline 1) goes on from the same
        // history; on a later one, the server was a promoted or recovered copy whose store had
        // not followed: a fork where its origin issued from that store, else a lost tail.
        const bool noted = r.upgrade_origin_system == r.system_identifier;
        if (r.issuer && noted && r.upgrade_origin_timeline != r.timeline) return StoreHistory::Forked;
        if (r.issuer && !here_upgraded) return StoreHistory::Forked;  // a copy of its data (pg_createsubscriber)
        if (here_upgraded && here_timeline == 1 && noted && r.upgrade_read_here &&
            r.upgrade_origin_timeline == r.timeline)
            return StoreHistory::Upgraded;
        return StoreHistory::NewCluster;
    }
    if (r.timeline == here_timeline) return StoreHistory::Whole;
    return issuer ? StoreHistory::Forked : StoreHistory::NewTimeline;
}

bool store_grants(StoreHistory h) { return h != StoreHistory::BeingRestored && h != StoreHistory::Forked; }

int64_t fork_acknowledged_floor(std::optional<int64_t> stopped_ms, int64_t store_now_ms, int64_t max_ttl_ms,
                                int64_t max_tolerance_ms) {
    const int64_t base = stopped_ms ? std::min(*stopped_ms, store_now_ms) : store_now_ms;
    // The original's limits after the copy are unseen here: the cap, not this copy's limits.
    return base + unseen_history_reach_ms(max_ttl_ms + 2 * max_tolerance_ms);
}

int64_t GrantedNamespace::bound(int32_t slot, const std::string& except_store) const {
    int64_t v = all_slots_ms;
    for (const GrantedSlot& s : slots)
        if (s.slot == slot && s.store_id != except_store) v = std::max(v, s.ceiling_ms);
    return v;
}

int64_t GrantedNamespace::largest_id() const {
    int64_t best = -1;
    auto consider = [&](int64_t ceiling_ms, int64_t slot) {
        int64_t tick = layout.tick_of(ceiling_ms);
        tick = std::min(std::max(tick, layout.epoch_tick()), layout.max_tick());
        best = std::max(best, layout.pack(tick, slot, layout.max_sequence()));
    };
    for (const GrantedSlot& s : slots) consider(s.ceiling_ms, s.slot);
    if (all_slots_ms > 0) consider(all_slots_ms, layout.max_slot());
    return best;
}

namespace {
bool same_layout(const Layout& a, const Layout& b) {
    return a.timestamp_bits == b.timestamp_bits && a.slot_bits == b.slot_bits && a.sequence_bits == b.sequence_bits &&
           a.epoch_ms == b.epoch_ms && a.unit == b.unit;
}
}  // namespace

int64_t floor_after_store_change(const GrantedNamespace* before, const std::string& store_id, const Layout& layout,
                                 int32_t slot) {
    if (before == nullptr) return 0;
    if (same_layout(before->layout, layout)) return before->bound(slot, store_id);
    const int64_t largest = before->largest_id();
    if (largest < 0) return 0;
    if (!layout.id_fits(largest)) return INT64_MAX;  // no id of the new layout exceeds it
    const AdoptFloor f = adopt_floor(layout, largest);
    return f.status == AdoptFloor::Ok ? f.floor_ms : INT64_MAX;
}

bool record_grant(GrantedNamespace* g, const std::string& store_id, const Layout& layout, int32_t slot,
                  int64_t ceiling_ms) {
    bool changed = false;
    if (!same_layout(g->layout, layout)) {
        // Another layout: every slot of it starts above the largest id the old record allowed,
        // whichever store grants it.
        g->all_slots_ms =
            g->slots.empty() && g->all_slots_ms == 0 ? 0 : floor_after_store_change(g, store_id, layout, 0);
        g->slots.clear();
        g->layout = layout;
        changed = true;
    }
    for (GrantedSlot& s : g->slots) {
        if (s.slot != slot || s.store_id != store_id) continue;
        if (ceiling_ms <= s.ceiling_ms) return changed;
        s.ceiling_ms = ceiling_ms;
        return true;
    }
    g->slots.push_back(GrantedSlot{store_id, slot, ceiling_ms});
    return true;
}

bool record_release(GrantedNamespace* g, const std::string& store_id, int32_t slot, int64_t last_ms) {
    for (GrantedSlot& s : g->slots) {
        if (s.slot != slot || s.store_id != store_id || s.ceiling_ms <= last_ms) continue;
        s.ceiling_ms = std::max<int64_t>(last_ms, 0);
        return true;
    }
    return false;
}

bool valid_fork_id(const std::string& id) {
    if (id.empty() || id.size() > 64) return false;
    for (char c : id)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-')) return false;
    return true;
}

std::string fork_reason_line(const std::string& reason) {
    std::string r;
    for (char c : reason) {
        if (r.size() >= 400) break;
        r += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c;
    }
    while (!r.empty() && r.back() == ' ') r.pop_back();
    return r.empty() ? "a copy of another server's data directory" : r;
}

std::string serialize_history(const std::vector<GrantedNamespace>& h, uint32_t local_timeline,
                              const std::vector<ForkSeen>& forks) {
    std::ostringstream o;
    o << "# cosid: what this instance was granted per namespace and by which store; do not edit\n";
    o << "cosid_history_version 1\n";
    if (local_timeline != 0) o << "timeline " << local_timeline << '\n';
    for (const ForkSeen& f : forks) o << "fork " << f.id << ' ' << fork_reason_line(f.reason) << '\n';
    for (const GrantedNamespace& g : h) {
        o << "namespace " << g.ns << ' ' << g.layout.timestamp_bits << ' ' << g.layout.slot_bits << ' '
          << g.layout.sequence_bits << ' ' << g.layout.epoch_ms << ' ' << g.layout.unit_ms() << ' ' << g.all_slots_ms
          << '\n';
        for (const GrantedSlot& s : g.slots)
            o << "slot " << g.ns << ' ' << s.store_id << ' ' << s.slot << ' ' << s.ceiling_ms << '\n';
    }
    const std::string body = o.str();
    char crc[32];
    std::snprintf(crc, sizeof crc, "crc32c %08x\n", static_cast<unsigned>(crc32c(body)));
    return body + crc;
}

namespace {
bool to_int64(const std::string& s, int64_t lo, int64_t hi, int64_t* out) {
    if (s.empty() || s.size() > 20) return false;
    size_t i = s[0] == '-' ? 1 : 0;
    if (i == s.size()) return false;
    for (size_t k = i; k < s.size(); ++k)
        if (s[k] < '0' || s[k] > '9') return false;
    try {
        long long v = std::stoll(s);
        if (v < lo || v > hi) return false;
        *out = v;
        return true;
    } catch (...) {
        return false;
    }
}
}  // namespace

std::optional<std::string> parse_history(const std::string& text, std::vector<GrantedNamespace>* out,
                                         uint32_t* local_timeline, std::vector<ForkSeen>* forks) {
    uint32_t timeline = 0;
    std::vector<ForkSeen> seen;
    const size_t last = text.rfind("crc32c ");
    if (last == std::string::npos || (last > 0 && text[last - 1] != '\n')) return "it has no checksum line (truncated)";
    const std::string tail = text.substr(last);
    if (tail.size() != 16 || tail.back() != '\n') return "its checksum line is damaged";
    unsigned want = 0;
    if (std::sscanf(tail.c_str(), "crc32c %8x", &want) != 1 || want != crc32c(text.substr(0, last)))
        return "the checksum does not match: the file was changed or cut short";
    std::istringstream in(text.substr(0, last));
    std::string line;
    std::vector<GrantedNamespace> h;
    bool version = false;
    int n = 0;
    while (std::getline(in, line)) {
        ++n;
        const std::string at = " on line " + std::to_string(n);
        if (line.empty() || line[0] == '#') continue;
        std::istringstream f(line);
        std::vector<std::string> w;
        for (std::string x; f >> x;) w.push_back(x);
        int64_t a = 0, b = 0, c = 0, d = 0, e = 0;
        if (w.size() == 2 && w[0] == "cosid_history_version") {
            if (w[1] != "1") return "it was written by a newer cosid (history version " + w[1] + ")";
            version = true;
        } else if (!version) {
            return "it does not start with its version line";
        } else if (w.size() == 2 && w[0] == "timeline") {
            if (timeline != 0 || !h.empty() || !to_int64(w[1], 1, UINT32_MAX, &a)) return "bad timeline line" + at;
            timeline = static_cast<uint32_t>(a);
        } else if (w.size() >= 3 && w[0] == "fork") {
            if (!valid_fork_id(w[1])) return "bad fork id" + at;
            for (const ForkSeen& x : seen)
                if (x.id == w[1]) return "a second line for fork " + w[1] + at;
            const std::string reason = line.substr(line.find(w[1], 4) + w[1].size() + 1);
            if (fork_reason_line(reason) != reason) return "bad fork reason" + at;
            seen.push_back(ForkSeen{w[1], reason});
        } else if (w.size() == 8 && w[0] == "namespace") {
            if (!valid_namespace_name(w[1])) return "bad namespace name" + at;
            for (const GrantedNamespace& g : h)
                if (g.ns == w[1]) return "a second record of namespace " + w[1] + at;
            if (!to_int64(w[2], 1, 64, &a) || !to_int64(w[3], 1, 64, &b) || !to_int64(w[4], 1, 64, &c) ||
                !to_int64(w[5], INT64_MIN, INT64_MAX, &d) || !to_int64(w[6], 1, 1000, &e) || (e != 1 && e != 1000))
                return "bad layout" + at;
            GrantedNamespace g;
            g.ns = w[1];
            g.layout.timestamp_bits = static_cast<int>(a);
            g.layout.slot_bits = static_cast<int>(b);
            g.layout.sequence_bits = static_cast<int>(c);
            g.layout.epoch_ms = d;
            g.layout.unit = e == 1 ? Unit::Millisecond : Unit::Second;
            if (!to_int64(w[7], 0, INT64_MAX, &g.all_slots_ms)) return "bad bound for every slot" + at;
            if (g.layout.validate_readable()) return "bad layout" + at;
            h.push_back(g);
        } else if (w.size() == 5 && w[0] == "slot") {
            GrantedNamespace* g = nullptr;
            for (GrantedNamespace& x : h)
                if (x.ns == w[1]) g = &x;
            if (g == nullptr) return "a slot before its namespace's record" + at;
            if (w[2].empty() || w[2].size() > 64) return "bad store id" + at;
            if (!to_int64(w[3], 0, g->layout.max_slot(), &a) || !to_int64(w[4], 0, INT64_MAX, &b))
                return "bad slot line" + at;
            for (const GrantedSlot& x : g->slots)
                if (x.slot == a && x.store_id == w[2]) return "a second line for one slot of one store" + at;
            g->slots.push_back(GrantedSlot{w[2], static_cast<int32_t>(a), b});
        } else {
            return "line " + std::to_string(n) + " is not a version, timeline, fork, namespace or slot line";
        }
    }
    if (!version) return "it has no version line";
    *out = std::move(h);
    if (forks != nullptr) *forks = std::move(seen);
    if (local_timeline != nullptr) *local_timeline = timeline;
    return std::nullopt;
}

}  // namespace cosid

// The core is compiled without PostgreSQL so GoogleTest can test it directly.
#ifdef POSTGRES_H
#error "src/core must stay free of PostgreSQL headers"
#endif

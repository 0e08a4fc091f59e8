#include "static_state.hpp"
#include "durable_file.hpp"

#include "calendar.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace cosid {

namespace {

std::string trim(const std::string& s) {
    const char* ws = " \t\r\n\f\v";
    const size_t b = s.find_first_not_of(ws);
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// The pieces between separators: "a,,b" gives {"a", "", "b"}, "" gives {""}.
std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out(1);
    for (char c : s)
        if (c == sep)
            out.emplace_back();
        else
            out.back() += c;
    return out;
}

bool all_digits(const std::string& s) {
    if (s.empty()) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

// Plain decimal: digits only, no sign, no leading zero, at most `max`.
bool parse_decimal(const std::string& s, uint64_t max, uint64_t* out) {
    if (!all_digits(s) || (s.size() > 1 && s[0] == '0')) return false;
    uint64_t v = 0;
    for (char c : s) {
        const uint64_t d = static_cast<uint64_t>(c - '0');
        if (v > (max - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

}  // namespace

bool valid_namespace_name(const std::string& name) {
    if (name.empty() || name.size() > 63) return false;
    for (char c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              std::strchr("_.:-", c) != nullptr))
            return false;
    return true;
}

// --- cosid.static_slots ---

std::optional<int32_t> StaticSlots::slot_for(const std::string& ns) const {
    for (const auto& [name, slot] : named)
        if (name == ns) return slot;
    return any;
}

std::optional<std::string> parse_static_slots(const std::string& text, StaticSlots* out) {
    StaticSlots result;
    for (const std::string& piece : trim(text).empty() ? std::vector<std::string>{} : split(text, ',')) {
        const std::string item = trim(piece);
        if (item.empty()) return std::string("an item is empty (two commas in a row, or a comma at either end)");
        const size_t colon = item.rfind(':');
        const std::string num = trim(colon == std::string::npos ? item : item.substr(colon + 1));
        if (!all_digits(num)) return "item \"" + item + "\": \"" + num + "\" is not a slot number";
        const size_t nz = num.find_first_not_of('0');
        const std::string digits = nz == std::string::npos ? "0" : num.substr(nz);
        if (digits.size() > 5 || std::stol(digits) > 65535)
            return "item \"" + item + "\": slot " + num + " is out of range (0 to 65535)";
        const int32_t slot = static_cast<int32_t>(std::stol(digits));
        if (colon == std::string::npos) {
            if (result.any) return "item \"" + item + "\": there can be only one bare slot number";
            result.any = slot;
            continue;
        }
        const std::string ns = trim(item.substr(0, colon));
        if (!valid_namespace_name(ns))
            return "item \"" + item + "\": \"" + ns +
                   "\" is not a namespace name (1 to 63 letters, digits, \"_\", \".\", \":\" or \"-\")";
        for (const auto& n : result.named)
            if (n.first == ns) return "item \"" + item + "\": namespace " + ns + " is listed twice";
        result.named.emplace_back(ns, slot);
    }
    *out = std::move(result);
    return std::nullopt;
}

// --- cosid.not_before ---

std::optional<std::string> parse_timestamp_ms(const std::string& raw, int64_t* out_ms) {
    const std::string t = trim(raw);
    if (t.empty()) {
        *out_ms = 0;
        return std::nullopt;
    }
    const std::string what = "\"" + t + "\" ";
    const std::string shape = what + "is not a timestamp like 2026-12-03 07:20:17.816Z or 2026-12-03T08:20+01:00";
    size_t p = 0;
    // Reads exactly n digits.
    auto num = [&](size_t n, int64_t* v) {
        if (p + n > t.size() || !all_digits(t.substr(p, n))) return false;
        *v = std::stoll(t.substr(p, n));
        p += n;
        return true;
    };
    // Reads one of `chars`.
    auto lit = [&](const char* chars) {
        if (p >= t.size() || std::strchr(chars, t[p]) == nullptr) return false;
        ++p;
        return true;
    };
    int64_t y, mo, d, h, mi, s = 0, ms = 0;
    if (!num(4, &y) || !lit("-") || !num(2, &mo) || !lit("-") || !num(2, &d) || !lit("Tt ") || !num(2, &h) ||
        !lit(":") || !num(2, &mi))
        return shape;
    if (lit(":")) {
        if (!num(2, &s)) return shape;
        if (lit(".")) {
            const size_t b = p;
            while (p < t.size() && t[p] >= '0' && t[p] <= '9') ++p;
            if (p == b || p - b > 9) return what + "has a fraction of a second that is not 1 to 9 digits";
            ms = std::stoll((t.substr(b, std::min<size_t>(p - b, 3)) + "00").substr(0, 3));
        }
    }
    if (y < 1970 || y > 9999) return what + "has a year outside 1970 to 9999";
    if (mo < 1 || mo > 12) return what + "has no month " + std::to_string(mo);
    if (d < 1 || d > days_in_month(y, mo)) return what + "names a day that does not exist";
    if (h > 23 || mi > 59 || s > 59) return what + "has a time of day out of range";
    if (p == t.size()) return what + "has no time zone: add Z (UTC) or an offset like +01:00";
    int64_t offset_min = 0;
    if (!lit("Zz")) {
        const int64_t sign = p < t.size() && t[p] == '-' ? -1 : 1;  // (p < t.size(): checked above)
        int64_t oh, om = 0;
        if (!lit("+-") || !num(2, &oh)) return shape;
        if (p < t.size()) {
            lit(":");
            if (!num(2, &om)) return shape;
        }
        if (oh > 23 || om > 59) return what + "has a zone offset out of range";
        offset_min = sign * (oh * 60 + om);
    }
    if (p != t.size()) return shape;
    const int64_t v = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi - offset_min) * 60000 + s * 1000 + ms;
    if (v < 0) return what + "is before 1970-01-01 00:00Z";
    *out_ms = v;
    return std::nullopt;
}

std::optional<std::string> parse_not_before(const std::string& raw, NotBefore* out) {
    std::string t = trim(raw);
    uint32_t timeline = 0;
    const std::string suffix = " on timeline ";
    const size_t at = t.find(suffix);
    if (at != std::string::npos) {
        uint64_t v = 0;
        const std::string number = trim(t.substr(at + suffix.size()));
        if (!parse_decimal(number, UINT32_MAX, &v) || v == 0)
            return "\"" + number + "\" is not a timeline (1 to 4294967295) in \"" + t + "\"";
        timeline = static_cast<uint32_t>(v);
        t = trim(t.substr(0, at));  // (not empty: `t` was trimmed, and the suffix starts with a space)
    }
    int64_t ms = 0;
    if (auto e = parse_timestamp_ms(t, &ms)) return e;
    out->ms = ms;
    out->timeline = timeline;
    return std::nullopt;
}

std::string format_timestamp_ms(int64_t ms) {
    const int64_t days = floor_div(ms, 86400000), in_day = ms - days * 86400000;
    int64_t y, m, d;
    civil_from_days(days, &y, &m, &d);
    char buf[128];  // room for any int64, though years past 9999 never come from parse_timestamp_ms
    std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lld %02lld:%02lld:%02lld.%03lldZ", (long long)y, (long long)m,
                  (long long)d, (long long)(in_day / 3600000), (long long)(in_day / 60000 % 60),
                  (long long)(in_day / 1000 % 60), (long long)(in_day % 1000));
    return buf;
}

uint32_t crc32c(const std::string& bytes) {
    static const auto table = [] {
        std::vector<uint32_t> t(256);
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (c & 1 ? 0x82F63B78u : 0);
            t[i] = c;
        }
        return t;
    }();
    uint32_t c = 0xFFFFFFFFu;
    for (unsigned char b : bytes) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

// --- the state file ---

const StateWindow* StateFile::find_window(const std::string& ns, int32_t slot) const {
    for (const auto& w : windows)
        if (w.ns == ns && w.slot == slot) return &w;
    return nullptr;
}

void StateFile::set_window(const std::string& ns, int32_t slot, int64_t ceiling_ms, uint32_t timeline) {
    if (auto* w = const_cast<StateWindow*>(find_window(ns, slot)))
        *w = StateWindow{ns, slot, ceiling_ms, timeline};
    else
        windows.push_back(StateWindow{ns, slot, ceiling_ms, timeline});
}

int64_t StateFile::not_before_of(const std::string& ns) const {
    for (const auto& n : not_before)
        if (n.ns == ns) return n.ms;
    return 0;
}

void StateFile::raise_not_before(const std::string& ns, int64_t ms) {
    for (auto& n : not_before)
        if (n.ns == ns) {
            n.ms = std::max(n.ms, ms);
            return;
        }
    not_before.push_back(StateNotBefore{ns, ms});
}

std::string serialize_state(const StateFile& f) {
    std::string s =
        "# cosid static slot state: written by the cosid keeper; do not edit (a wrong value can issue an id twice)\n"
        "cosid_state_version " +
        std::to_string(kStateFileVersion) +
        "\n"
        "system_identifier " +
        std::to_string(f.system_identifier) + "\n";
    for (const auto& w : f.windows)
        s += "window " + w.ns + " " + std::to_string(w.slot) + " " + std::to_string(w.ceiling_ms) + " " +
             std::to_string(w.timeline) + "\n";
    for (const auto& n : f.not_before) s += "not_before " + n.ns + " " + std::to_string(n.ms) + "\n";
    char crc[32];
    std::snprintf(crc, sizeof crc, "crc32c %08x\n", static_cast<unsigned>(crc32c(s)));
    return s + crc;
}

LoadResult parse_state(const std::string& text) {
    auto corrupt = [](std::string m) { return LoadResult{LoadStatus::Corrupt, std::move(m), {}}; };
    if (text.empty()) return corrupt("it is empty");
    // Complete lines only (each ended by "\n"); `cut`: something follows the last "\n".
    std::vector<std::string> lines = split(text, '\n');
    const bool cut = !lines.back().empty();
    lines.pop_back();

    // The version first: a newer file may hold anything after it.
    size_t i = 0;
    while (i < lines.size() && !lines[i].empty() && lines[i][0] == '#') ++i;
    if (i == lines.size()) return corrupt("it ends before its version line (truncated)");
    uint64_t version = 0;
    const std::string vprefix = "cosid_state_version ";
    if (lines[i].compare(0, vprefix.size(), vprefix) != 0 ||
        !parse_decimal(lines[i].substr(vprefix.size()), UINT32_MAX, &version) || version == 0)
        return corrupt("line " + std::to_string(i + 1) + " is not the cosid_state_version line");
    if (version > static_cast<uint64_t>(kStateFileVersion))
        return LoadResult{LoadStatus::FutureVersion,
                          "it was written by a newer cosid (state version " + std::to_string(version) +
                              "; this one reads " + std::to_string(kStateFileVersion) + ")",
                          {}};

    // Then the checksum, which must be the last line.
    size_t c = i + 1;
    while (c < lines.size() && lines[c].compare(0, 7, "crc32c ") != 0) ++c;
    if (c == lines.size()) return corrupt("it ends before its checksum line (truncated)");
    if (c + 1 != lines.size() || cut) return corrupt("line " + std::to_string(c + 2) + " follows the checksum line");
    const std::string hex = lines[c].substr(7);
    if (hex.size() != 8 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
        return corrupt("line " + std::to_string(c + 1) + " is not a checksum (crc32c and 8 lowercase hex digits)");
    const size_t body = text.size() - lines[c].size() - 1;
    if (std::stoul(hex, nullptr, 16) != crc32c(text.substr(0, body)))
        return corrupt("the checksum does not match: the file was changed or cut short");

    LoadResult r{LoadStatus::Ok, "", {}};
    bool have_sysid = false;
    for (size_t k = i + 1; k < c; ++k) {
        const std::string at = " on line " + std::to_string(k + 1);
        const std::vector<std::string> f = split(lines[k], ' ');
        uint64_t a = 0, x = 0, y = 0;
        if (f[0] == "system_identifier" && f.size() == 2) {
            if (have_sysid) return corrupt("a second system_identifier" + at);
            if (!parse_decimal(f[1], UINT64_MAX, &a)) return corrupt("bad system_identifier " + f[1] + at);
            r.file.system_identifier = a;
            have_sysid = true;
        } else if (f[0] == "window" && f.size() == 5) {
            if (!valid_namespace_name(f[1])) return corrupt("bad namespace name \"" + f[1] + "\"" + at);
            if (!parse_decimal(f[2], 65535, &a)) return corrupt("bad slot " + f[2] + at);
            if (!parse_decimal(f[3], INT64_MAX, &x)) return corrupt("bad ceiling " + f[3] + at);
            if (!parse_decimal(f[4], UINT32_MAX, &y)) return corrupt("bad timeline " + f[4] + at);
            if (r.file.find_window(f[1], static_cast<int32_t>(a)))
                return corrupt("a second window for namespace " + f[1] + " slot " + f[2] + at);
            r.file.windows.push_back(
                StateWindow{f[1], static_cast<int32_t>(a), static_cast<int64_t>(x), static_cast<uint32_t>(y)});
        } else if (f[0] == "not_before" && f.size() == 3) {
            if (!valid_namespace_name(f[1])) return corrupt("bad namespace name \"" + f[1] + "\"" + at);
            if (!parse_decimal(f[2], INT64_MAX, &x)) return corrupt("bad not_before " + f[2] + at);
            for (const auto& n : r.file.not_before)
                if (n.ns == f[1]) return corrupt("a second not_before for namespace " + f[1] + at);
            r.file.not_before.push_back(StateNotBefore{f[1], static_cast<int64_t>(x)});
        } else {
            return corrupt("line " + std::to_string(k + 1) +
                           " is not a system_identifier, a window, a not_before or the checksum");
        }
    }
    if (!have_sysid) return corrupt("it has no system_identifier line");
    return r;
}

LoadResult load_state(const std::string& path) {
    std::string text, message;
    switch (read_small_file(path, kMaxStateFileBytes, &text, &message)) {
    case ReadStatus::Missing: return LoadResult{LoadStatus::Missing, message, {}};
    case ReadStatus::Unreadable: return LoadResult{LoadStatus::Unreadable, message, {}};
    case ReadStatus::Ok: break;
    }
    return parse_state(text);
}

std::optional<std::string> save_state(const std::string& path, const StateFile& f) {
    return write_file_durably(path, serialize_state(f));
}

// --- static slots without a state file ---

int64_t static_borrow_ms(bool have_state_file, int64_t max_borrow_ms) noexcept {
    return have_state_file ? max_borrow_ms : 0;  // 0: the next tick only once the clock is in it
}

int64_t static_window_floor(int64_t recorded_ms, int64_t not_before_ms, bool have_state_file,
                            int64_t started_ms) noexcept {
    const int64_t known = std::max(recorded_ms, not_before_ms);
    return have_state_file ? known : std::max(known, started_ms);
}

int64_t static_recorded_ms(int64_t model_ms, bool model_has_window, std::optional<int64_t> others_ms,
                           std::optional<int64_t> own_ms, bool have_state_file) noexcept {
    int64_t v = std::max(model_ms, others_ms.value_or(0));
    if (own_ms && have_state_file && !model_has_window) v = std::max(v, *own_ms);  // the file lost the slot
    return v;
}

// --- cosid_adopt ---

AdoptFloor adopt_floor(const Layout& layout, int64_t max_id) {
    if (max_id < 0) return AdoptFloor{AdoptFloor::Negative, 0};
    if (!layout.id_fits(max_id)) return AdoptFloor{AdoptFloor::NotInLayout, 0};  // at or past 2^total_bits
    const int64_t tick = layout.unpack(max_id).tick;
    const std::optional<int64_t> ms = layout.tick_ms(tick);
    if (tick >= layout.max_tick() || !ms) return AdoptFloor{AdoptFloor::LastTick, ms.value_or(0)};
    return AdoptFloor{AdoptFloor::Ok, *ms};
}

int64_t latest_epoch_exceeding(const Layout& layout, int64_t max_id, int64_t now_ms) {
    // An id issued at now_tick is at least (now_tick - epoch_tick) << shift, which exceeds
    // max_id exactly when now_tick - epoch_tick > max_id >> shift.
    const int64_t now_tick = layout.tick_of(now_ms);
    return (now_tick - (max_id >> (layout.slot_bits + layout.sequence_bits)) - 1) * layout.unit_ms();
}

}  // namespace cosid

// The core is compiled without PostgreSQL so GoogleTest can test it directly.
#ifdef POSTGRES_H
#error "src/core must stay free of PostgreSQL headers"
#endif

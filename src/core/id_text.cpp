#include "id_text.hpp"

#include <cstdio>

namespace cosid {

namespace {
const char kAlphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
int digit_of(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
    if (c >= 'a' && c <= 'z') return c - 'a' + 36;
    return -1;
}

int decimal_width(int64_t v) {
    int w = 1;
    while (v >= 10) v /= 10, ++w;
    return w;
}

// Reads `n` digits (n <= 18) at `p`; false when any is not a digit or the text ends first.
bool digits(const std::string& t, size_t p, size_t n, int64_t* out) {
    if (n == 0 || n > 18 || p + n > t.size()) return false;
    int64_t v = 0;
    for (size_t i = p; i < p + n; ++i) {
        if (t[i] < '0' || t[i] > '9') return false;
        v = v * 10 + (t[i] - '0');
    }
    *out = v;
    return true;
}

// The length of the run of digits starting at `p`.
size_t run_of_digits(const std::string& t, size_t p) {
    size_t n = 0;
    while (p + n < t.size() && t[p + n] >= '0' && t[p + n] <= '9') ++n;
    return n;
}
}  // namespace

std::optional<int64_t> min_id_at(const Layout& l, int64_t ms) {
    int64_t tick = l.tick_of(ms);
    if (!l.tick_fits(tick)) return std::nullopt;
    return l.pack(tick, 0, 0);
}

std::optional<int64_t> max_id_at(const Layout& l, int64_t ms) {
    int64_t tick = l.tick_of(ms);
    if (!l.tick_fits(tick)) return std::nullopt;
    return l.pack(tick, l.max_slot(), l.max_sequence());
}

std::optional<std::string> to_text(int64_t id) {
    if (id < 0) return std::nullopt;
    std::string out(kTextWidth, '0');
    uint64_t v = static_cast<uint64_t>(id);
    for (int i = kTextWidth - 1; i >= 0 && v > 0; --i, v /= 62) out[i] = kAlphabet[v % 62];
    return out;
}

std::optional<int64_t> from_text(const std::string& text, std::string* why) {
    if (text.size() != kTextWidth) {
        *why = "a cosid text id has " + std::to_string(kTextWidth) + " characters, this one " +
               std::to_string(text.size());
        return std::nullopt;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        int d = digit_of(text[i]);
        if (d < 0) {
            *why = "character " + std::to_string(i + 1) + " is not one of 0-9, A-Z, a-z";
            return std::nullopt;
        }
        // 62^11 > 2^64: check before each step
        if (v > (UINT64_MAX - static_cast<uint64_t>(d)) / 62) {
            *why = "it is larger than the largest bigint";
            return std::nullopt;
        }
        v = v * 62 + static_cast<uint64_t>(d);
    }
    if (v > static_cast<uint64_t>(INT64_MAX)) {
        *why = "it is larger than the largest bigint";
        return std::nullopt;
    }
    return static_cast<int64_t>(v);
}

std::optional<std::string> format_id(const Layout& l, int64_t id) {
    if (!l.id_fits(id)) return std::nullopt;
    const Unpacked u = l.unpack(id);
    const std::optional<int64_t> tick_ms = l.tick_ms(u.tick);
    if (!tick_ms) return std::nullopt;  // past PostgreSQL's last timestamp (a layout made before that rule)
    const int64_t ms = *tick_ms;
    const int64_t days = floor_div(ms, 86400000), in_day = ms - days * 86400000;
    int64_t y, m, d;
    civil_from_days(days, &y, &m, &d);
    char fraction[8] = "";
    if (l.unit == Unit::Millisecond) std::snprintf(fraction, sizeof fraction, ".%03lld", (long long)(in_day % 1000));
    char buf[96];
    std::snprintf(buf, sizeof buf, "%04lld%02lld%02lldT%02lld%02lld%02lld%sZ-%d-%0*d", (long long)y, (long long)m,
                  (long long)d, (long long)(in_day / 3600000), (long long)(in_day / 60000 % 60),
                  (long long)(in_day / 1000 % 60), fraction, u.slot, decimal_width(l.max_sequence()), u.sequence);
    return std::string(buf);
}

std::optional<int64_t> parse_formatted(const Layout& l, const std::string& t, std::string* why) {
    const bool ms_unit = l.unit == Unit::Millisecond;
    const std::string shape = ms_unit ? "it is not of the form YYYYMMDDTHHMMSS.mmmZ-slot-sequence"
                                      : "it is not of the form YYYYMMDDTHHMMSSZ-slot-sequence (a layout in seconds)";
    // Only the text cosid_format writes: no leading zeros in the slot, the sequence with the
    // digits of the layout's largest, so that each id has exactly one text.
    // The date: a year of 4 or more digits (years past 9999 only in very long layouts).
    const size_t date_len = run_of_digits(t, 0);
    int64_t y, mo, d, h, mi, s, frac = 0, slot, seq;
    // (a year past 9999 has no leading zero: one text per id)
    if (date_len < 8 || date_len > 12 || (date_len > 8 && t[0] == '0') || !digits(t, 0, date_len - 4, &y) ||
        !digits(t, date_len - 4, 2, &mo) || !digits(t, date_len - 2, 2, &d)) {
        *why = shape;
        return std::nullopt;
    }
    size_t p = date_len;
    if (p >= t.size() || t[p] != 'T' || run_of_digits(t, p + 1) != 6 || !digits(t, p + 1, 2, &h) ||
        !digits(t, p + 3, 2, &mi) || !digits(t, p + 5, 2, &s)) {
        *why = shape;
        return std::nullopt;
    }
    p += 7;
    if (ms_unit) {
        if (p >= t.size() || t[p] != '.' || run_of_digits(t, p + 1) != 3 || !digits(t, p + 1, 3, &frac)) {
            *why = shape;
            return std::nullopt;
        }
        p += 4;
    }
    if (p >= t.size() || t[p] != 'Z' || p + 1 >= t.size() || t[p + 1] != '-') {
        *why = shape;
        return std::nullopt;
    }
    p += 2;
    const size_t slot_len = run_of_digits(t, p);
    if (slot_len == 0 || slot_len > 9 || (slot_len > 1 && t[p] == '0') || !digits(t, p, slot_len, &slot) ||
        p + slot_len >= t.size() || t[p + slot_len] != '-') {
        *why = shape;
        return std::nullopt;
    }
    p += slot_len + 1;
    const size_t seq_len = run_of_digits(t, p);
    if (seq_len == 0 || seq_len > 9 || p + seq_len != t.size() || !digits(t, p, seq_len, &seq)) {
        *why = shape;
        return std::nullopt;
    }
    if (seq_len != static_cast<size_t>(decimal_width(l.max_sequence()))) {
        *why = "the sequence has " + std::to_string(seq_len) + " digits, the layout's " +
               std::to_string(decimal_width(l.max_sequence()));
        return std::nullopt;
    }
    if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || s > 59) {
        *why = "it names a date or time that does not exist";
        return std::nullopt;
    }
    if (slot > l.max_slot()) {
        *why = "slot " + std::to_string(slot) + " is past the layout's last slot " + std::to_string(l.max_slot());
        return std::nullopt;
    }
    if (seq > l.max_sequence()) {
        *why = "sequence " + std::to_string(seq) + " is past the layout's last sequence " +
               std::to_string(l.max_sequence());
        return std::nullopt;
    }
    const int64_t ms = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60000 + s * 1000 + frac;
    const int64_t tick = l.tick_of(ms);
    if (!l.tick_fits(tick)) {
        *why = "its time is outside the layout's range of timestamps";
        return std::nullopt;
    }
    return l.pack(tick, slot, seq);
}

}  // namespace cosid

#ifdef POSTGRES_H
#error "src/core must stay free of PostgreSQL headers"
#endif

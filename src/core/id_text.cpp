#include "id_text.hpp"

namespace cosid {

namespace {
const char kAlphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }
int digit_of(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
    if (c >= 'a' && c <= 'z') return c - 'a' + 36;
    return -1;
}
}  // namespace

std::optional<int64_t> min_id_at(const Layout& l, int64_t ms) {
    int64_t tick = floor_div(ms, l.unit_ms());
    if (!l.tick_fits(tick)) return std::nullopt;
    return l.pack(tick, 0, 0);
}

std::optional<int64_t> max_id_at(const Layout& l, int64_t ms) {
    int64_t tick = floor_div(ms, l.unit_ms());
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

}  // namespace cosid

#ifdef POSTGRES_H
#error "src/core must stay free of PostgreSQL headers"
#endif

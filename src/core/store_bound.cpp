#include "store_bound.hpp"

#include <algorithm>

namespace cosid::store_bound {

int64_t base_ms(int64_t ttl_ms) noexcept { return std::max<int64_t>(ttl_ms / 6, 100); }

int64_t call_ms(int64_t ttl_ms, int level) noexcept {
    const int64_t base = base_ms(ttl_ms);
    return level == kSlow ? std::max(ttl_ms / 3, base) : base;
}

int next_level(int64_t ttl_ms, int level, bool ran_out, bool answered, int64_t took_ms) noexcept {
    if (level != kSlow && level != kStuck) level = kFast;
    if (ran_out) {
        if (level == kFast) return call_ms(ttl_ms, kSlow) > base_ms(ttl_ms) ? kSlow : kFast;
        return level == kSlow ? kStuck : kFast;
    }
    if (!answered) return level;
    if (level == kStuck) return kFast;
    if (level == kSlow && took_ms < base_ms(ttl_ms) / 2) return kFast;
    return level;
}

uint64_t call_key(const char* sql, const char* first_arg) noexcept {
    uint64_t h = 1469598103934665603ULL;  // FNV-1a over the text, a 0 byte, the argument
    auto add = [&h](const char* p) {
        for (; p != nullptr && *p != '\0'; ++p) {
            h ^= static_cast<unsigned char>(*p);
            h *= 1099511628211ULL;
        }
        h *= 1099511628211ULL;
    };
    add(sql);
    add(first_arg);
    return h;
}

int Levels::level(uint64_t key) const noexcept {
    for (const Slot& s : slots)
        if (s.level > 0 && s.key == key) return s.level;
    return 0;
}

void Levels::note(uint64_t key, int64_t ttl_ms, bool ran_out, bool answered, int64_t took_ms) noexcept {
    Slot* found = nullptr;
    Slot* spare = &slots[0];  // a free slot, else the one used longest ago
    for (Slot& s : slots) {
        if (s.level > 0 && s.key == key) found = &s;
        if (spare->level > 0 && (s.level == 0 || s.used < spare->used)) spare = &s;
    }
    const int level = next_level(ttl_ms, found != nullptr ? found->level : kFast, ran_out, answered, took_ms);
    if (found == nullptr && level == kFast) return;
    Slot* s = found != nullptr ? found : spare;
    s->key = key;
    s->level = level;
    s->used = ++clock;
}

void Levels::reset() noexcept {
    for (Slot& s : slots) s.level = kFast;
}

}  // namespace cosid::store_bound

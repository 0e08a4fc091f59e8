#include "issue_word.hpp"

namespace cosid {

Claim claim(uint64_t w, const Layout& layout, int32_t slot, const ClaimWindow& window, int64_t now_ms,
            int64_t borrow_ms, int64_t want) {
    if (issue_word::closed(w)) return {NextStatus::Closed};
    const int64_t u = layout.unit_ms();
    const int64_t now_tick = layout.tick_of(now_ms);  // ms layouts: no division
    const bool issued = issue_word::issued(w);
    const int64_t last_tick = issued ? issue_word::tick(layout, w) : 0;
    const int64_t last_seq = issued ? issue_word::sequence(layout, w) : 0;
    int64_t tick, seq;
    if (!issued || now_tick > last_tick) {
        tick = now_tick;
        seq = (issued && last_seq + 1 <= layout.max_sequence() / 2) ? last_seq + 1 : 0;
    } else {
        tick = last_tick;
        seq = last_seq + 1;
        if (seq > layout.max_sequence()) {
            const int64_t next_ms = (last_tick + 1) * u;
            if (borrow_ms != issue_word::kBorrowToCeiling && next_ms - now_ms > borrow_ms)
                return {NextStatus::SequenceExhausted, 0, 0, next_ms - borrow_ms};
            tick = last_tick + 1;
            seq = 0;
        }
    }
    if (tick * u <= window.floor_ms) {
        // A floor ahead of the clock (a fresh window only: every claimed tick lies above it):
        // its first tick is taken at once when borrowing reaches it, else waited for.
        const int64_t first = floor_div(window.floor_ms, u) + 1;
        if (borrow_ms != issue_word::kBorrowToCeiling && first * u - now_ms > borrow_ms)
            return {NextStatus::BeforeFloor, 0, 0, first * u - (borrow_ms > 0 ? borrow_ms : 0)};
        tick = first;
        seq = 0;
    }
    if (tick * u > window.ceiling_ms) return {NextStatus::PastCeiling};
    if (!layout.tick_fits(tick)) return {NextStatus::OutOfRange};
    const int64_t count =
        want <= 1 ? 1 : (want < layout.max_sequence() - seq + 1 ? want : layout.max_sequence() - seq + 1);
    return {NextStatus::Issued, issue_word::encode(layout, tick, seq + count - 1), layout.pack(tick, slot, seq), 0,
            count};
}

}  // namespace cosid

// The core is compiled without PostgreSQL so GoogleTest can test it directly.
#ifdef POSTGRES_H
#error "src/core must stay free of PostgreSQL headers"
#endif

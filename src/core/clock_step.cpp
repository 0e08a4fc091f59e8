#include "clock_step.hpp"

#include <algorithm>

#include "issue_word.hpp"

namespace cosid::clock_step {

std::optional<int64_t> next_claim_ms(const Layout& layout, uint64_t word, int64_t now_ms) noexcept {
    if (issue_word::closed(word) || !issue_word::issued(word)) return std::nullopt;
    const int64_t last_tick = issue_word::tick(layout, word);
    const int64_t now_tick = layout.tick_of(now_ms);
    if (now_tick > last_tick) return now_tick * layout.unit_ms();
    const bool used_up = issue_word::sequence(layout, word) >= layout.max_sequence();
    return (used_up ? last_tick + 1 : last_tick) * layout.unit_ms();
}

int64_t lead_past_reach_ms(const Layout& layout, uint64_t word, int64_t ceiling_ms, int64_t reach_ms,
                           int64_t now_ms) noexcept {
    const std::optional<int64_t> next = next_claim_ms(layout, word, now_ms);
    if (!next || layout.tick_of(now_ms) > issue_word::tick(layout, word)) return 0;  // the clock leads
    if (*next <= ceiling_ms) return 0;                                               // room left
    return std::max<int64_t>(*next - reach_ms, 0);
}

int64_t patience_ms(const Layout& layout, int64_t move_cost_ms) noexcept {
    return std::max(layout.unit_ms(), move_cost_ms);
}

bool leave_lease(const Layout& layout, uint64_t word, int64_t ceiling_ms, int64_t reach_ms, int64_t now_ms,
                 int64_t borrow_ms, int64_t patience) noexcept {
    const std::optional<int64_t> next = next_claim_ms(layout, word, now_ms);
    if (!next) return false;
    const int64_t last_tick = issue_word::tick(layout, word);
    if (layout.tick_of(now_ms) > last_tick) return false;  // the clock leads: no wait for it
    int64_t wait = lead_past_reach_ms(layout, word, ceiling_ms, reach_ms, now_ms);
    // as issue_word::claim: the tick after a used-up one only within borrow_ms of the clock
    const bool borrows = *next > last_tick * layout.unit_ms();
    if (borrows && borrow_ms != issue_word::kBorrowToCeiling && *next - now_ms > borrow_ms)
        wait = std::max(wait, *next - borrow_ms - now_ms);
    return wait > patience;
}

int64_t static_next_ceiling(const Layout& layout, uint64_t word, int64_t ceiling_ms, int64_t now_ms, int64_t ahead_ms,
                            int64_t patience) noexcept {
    const int64_t by_clock = std::max(ceiling_ms, now_ms + ahead_ms);
    if (lead_past_reach_ms(layout, word, ceiling_ms, now_ms + ahead_ms, now_ms) <= patience) return by_clock;
    return std::max(by_clock, *next_claim_ms(layout, word, now_ms) + ahead_ms);
}

}  // namespace cosid::clock_step

// The core is compiled without PostgreSQL so GoogleTest can test it directly.
#ifdef POSTGRES_H
#error "src/core must stay free of PostgreSQL headers"
#endif

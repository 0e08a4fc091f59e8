#include "window_generator.hpp"

namespace cosid {

namespace {
int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
}
}  // namespace

void WindowGenerator::open(const Layout& layout, int32_t slot, int64_t floor_ms, int64_t ceiling_ms) {
    layout_ = layout;
    slot_ = slot;
    floor_ = floor_ms;
    ceiling_ = ceiling_ms;
    last_tick_ = 0;
    last_seq_ = 0;
    issued_ = false;
    open_ = true;
}

NextResult WindowGenerator::next(int64_t now_ms) {
    if (!open_) return {NextStatus::Closed};
    const int64_t u = layout_.unit_ms();
    const int64_t now_tick = u == 1 ? now_ms : floor_div(now_ms, u);  // ms layouts: no division
    int64_t tick, seq;
    if (!issued_ || now_tick > last_tick_) {
        tick = now_tick;
        // Like CosId, keep counting across ticks until half the range is used, so that
        // `id % N` is not skewed towards sequence 0 at low traffic.
        seq = (issued_ && last_seq_ + 1 <= layout_.max_sequence() / 2) ? last_seq_ + 1 : 0;
    } else {
        // The clock is at or behind the last tick: go on with the last tick, never back.
        tick = last_tick_;
        seq = last_seq_ + 1;
        if (seq > layout_.max_sequence()) {
            if (now_tick == last_tick_)
                return {NextStatus::SequenceExhausted, 0, (last_tick_ + 1) * u};
            // The clock is behind: waiting for it could take arbitrarily long, and the
            // window bounds how far ahead we may go, so take the next tick.
            tick = last_tick_ + 1;
            seq = 0;
        }
    }
    if (tick * u <= floor_) return {NextStatus::BeforeFloor, 0, (floor_div(floor_, u) + 1) * u};
    if (tick * u > ceiling_) return {NextStatus::PastCeiling};
    if (!layout_.tick_fits(tick)) return {NextStatus::OutOfRange};
    last_tick_ = tick;
    last_seq_ = seq;
    issued_ = true;
    return {NextStatus::Issued, layout_.pack(tick, slot_, seq)};
}

std::optional<int64_t> WindowGenerator::close() {
    open_ = false;
    return last_issued_ms();
}

}  // namespace cosid

// The core is compiled without PostgreSQL so GoogleTest can test it directly.
#ifdef POSTGRES_H
#error "src/core must stay free of PostgreSQL headers"
#endif

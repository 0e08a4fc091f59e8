#include "window_generator.hpp"

namespace cosid {

void WindowGenerator::open(const Layout& layout, int32_t slot, int64_t floor_ms, int64_t ceiling_ms,
                           int64_t borrow_ms) {
    layout_ = layout;
    slot_ = slot;
    floor_ = floor_ms;
    ceiling_ = ceiling_ms;
    borrow_ = borrow_ms;
    word_ = issue_word::kFresh;
    open_ = true;
}

NextResult WindowGenerator::next(int64_t now_ms) {
    if (!open_) return {NextStatus::Closed};
    Claim c = claim(word_, layout_, slot_, ClaimWindow{floor_, ceiling_}, now_ms, borrow_);
    if (c.status == NextStatus::Issued) word_ = c.word;
    return {c.status, c.id, c.wait_until_ms};
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

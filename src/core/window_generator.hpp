// A Snowflake generator confined to a leased time window (floor, ceiling] on one slot, with
// an issue word of its own (the model's and the tests' generator; backends share a word in
// shared memory and call issue_word's claim directly).
//
// The rule, for a layout whose unit is u milliseconds: a tick t (Unix time in units) may be
// issued only when  floor < t*u <= ceiling.  The generator reports t*u as its last issued
// timestamp, and the store hands that (or the ceiling) on as the next holder's floor, so the
// next holder's ticks t' satisfy t'*u > t*u, i.e. t' > t: windows on a slot never overlap,
// whatever the unit.
#pragma once
#include <cstdint>
#include <optional>

#include "issue_word.hpp"
#include "layout.hpp"

namespace cosid {

struct NextResult {
    NextStatus status;
    int64_t id = 0;
    int64_t wait_until_ms = 0;  // for BeforeFloor and SequenceExhausted
};

class WindowGenerator {
public:
    WindowGenerator() = default;  // closed

    // borrow_ms: how far ahead of the clock a tick may be taken when a sequence runs out
    // (issue_word::claim, whose rule this generator applies to a word of its own).
    void open(const Layout& layout, int32_t slot, int64_t floor_ms, int64_t ceiling_ms,
              int64_t borrow_ms = issue_word::kBorrowToCeiling);
    // A renewal only ever moves the ceiling up; a lower value is ignored.
    void extend(int64_t ceiling_ms) {
        if (ceiling_ms > ceiling_) ceiling_ = ceiling_ms;
    }
    NextResult next(int64_t now_ms);
    // Closes the generator; returns the exact last issued timestamp (ms), nothing if none.
    std::optional<int64_t> close();

    bool is_open() const { return open_; }
    int32_t slot() const { return slot_; }
    int64_t floor_ms() const { return floor_; }
    int64_t ceiling_ms() const { return ceiling_; }
    std::optional<int64_t> last_issued_ms() const { return issue_word::last_issued_ms(layout_, word_); }
    const Layout& layout() const { return layout_; }

private:
    Layout layout_;
    int32_t slot_ = 0;
    int64_t floor_ = 0;
    int64_t ceiling_ = 0;
    int64_t borrow_ = issue_word::kBorrowToCeiling;
    uint64_t word_ = issue_word::kFresh;
    bool open_ = false;
};

}  // namespace cosid

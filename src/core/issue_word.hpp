// The issue state of one leased slot, shared by every generator of the instance: one 64-bit
// word that each claim advances with a compare-and-swap (src/README.md, "The shared window").
// Pure C++.
//
//   bit 63    closed: the lease is over (released in order, or lost); nothing more is claimed
//   bit 62    issued: at least one id was claimed in this lease
//   bits 0-61 (tick - epoch tick) << sequence_bits | sequence of the last claim
//             (timestamp + sequence bits = 63 - slot bits <= 62)
//
// The word holds no slot and no window: the caller reads those beside it and must make sure
// that the word it compares against belongs to the same lease (src/pg/backend/generator.cpp).
#pragma once
#include <cstdint>
#include <optional>

#include "layout.hpp"

namespace cosid {

enum class NextStatus {
    Issued,
    BeforeFloor,        // the floor is further ahead of the clock than borrowing reaches: wait until wait_until_ms
    PastCeiling,        // the next tick is beyond ceiling: wait for a renewal
    SequenceExhausted,  // this tick's sequence is used up: wait until wait_until_ms
    OutOfRange,         // the tick is before the epoch or past the timestamp field
    Closed,
};

namespace issue_word {

constexpr uint64_t kClosed = uint64_t{1} << 63;
constexpr uint64_t kIssued = uint64_t{1} << 62;
// A fresh lease: nothing claimed yet.
constexpr uint64_t kFresh = 0;
// Borrowing without a limit of its own: the window's ceiling bounds it.
constexpr int64_t kBorrowToCeiling = -1;

inline bool closed(uint64_t w) { return (w & kClosed) != 0; }
inline bool issued(uint64_t w) { return (w & kIssued) != 0; }
inline uint64_t encode(const Layout& l, int64_t tick, int64_t seq) {
    return kIssued | (static_cast<uint64_t>(tick - l.epoch_tick()) << l.sequence_bits) | static_cast<uint64_t>(seq);
}
inline int64_t tick(const Layout& l, uint64_t w) {
    return static_cast<int64_t>((w & ~(kClosed | kIssued)) >> l.sequence_bits) + l.epoch_tick();
}
inline int64_t sequence(const Layout& l, uint64_t w) {
    return static_cast<int64_t>(w & static_cast<uint64_t>(l.max_sequence()));
}
// The exact last timestamp (ms) issued in the lease, nothing when nothing was.
inline std::optional<int64_t> last_issued_ms(const Layout& l, uint64_t w) {
    if (!issued(w)) return std::nullopt;
    return tick(l, w) * l.unit_ms();
}

}  // namespace issue_word

struct ClaimWindow {
    int64_t floor_ms;    // exclusive
    int64_t ceiling_ms;  // inclusive
};

// Whether (floor, ceiling] holds no whole tick of a layout of `unit_ms`: nothing can be
// claimed in it yet (a floor the store raised past what it grants, lease_model.hpp's
// window_ceiling).  A ms window needs ceiling > floor; a seconds one the next whole second.
inline bool holds_no_tick(const ClaimWindow& window, int64_t unit_ms) {
    return (floor_div(window.floor_ms, unit_ms) + 1) * unit_ms > window.ceiling_ms;
}

struct Claim {
    NextStatus status;
    uint64_t word = 0;          // for Issued: the word to install with a compare-and-swap
    int64_t id = 0;             // for Issued: the first id of the block
    int64_t wait_until_ms = 0;  // for BeforeFloor and SequenceExhausted
    int64_t count = 0;          // for Issued: ids in the block, id .. id + count - 1 (one tick)
};

// The one rule of issuing, for the word `w` read last, the clock `now_ms` and the window:
//  - never back: a tick below the last claimed one is never taken; with the clock at or
//    behind the last tick, go on with the last tick's next sequence;
//  - a new tick continues the sequence until half its range is used (like CosId), so that
//    `id % N` is not skewed towards 0 at low traffic, then restarts at 0;
//  - the last tick's sequence used up: the next tick is taken when it is at most
//    `borrow_ms` ahead of the clock (kBorrowToCeiling: any distance), else wait for the clock;
//  - a window whose floor lies ahead of the clock starts at the floor's next tick under the
//    same limit: at once when borrowing reaches it, else when the clock comes within
//    `borrow_ms` of it (BeforeFloor);
//  - every claimed tick t satisfies floor < t*unit <= ceiling, and fits the layout.
//  - `want` > 1 claims a block of up to `want` consecutive sequence values of the one tick the
//    rule picks (fewer when the tick's sequence runs out first): id .. id + count - 1, all
//    inside the window, and the word records the block's last.
// Pure: the caller installs `word` with a compare-and-swap against `w` and retries on failure.
Claim claim(uint64_t w, const Layout& layout, int32_t slot, const ClaimWindow& window, int64_t now_ms,
            int64_t borrow_ms, int64_t want = 1);

}  // namespace cosid

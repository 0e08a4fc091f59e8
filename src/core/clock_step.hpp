// A clock that stepped back while a window was issuing (a host clock that jumped forward and
// was corrected), and how a used-up window then goes on.  Pure C++.
//
// The generator goes on from its last id: a claim never goes back (issue_word::claim), so with
// the clock behind its last tick it takes that tick's next sequence, then borrows the next
// ticks ahead of the clock, up to the window's ceiling.  When those run out, the window grows
// only as far as the clock lets it: a lease's renewal reaches the store's now + ttl +
// tolerance, a static window's next ceiling the clock + cosid.static_ahead.  If the ids stand
// further ahead than that, waiting at the ceiling is waiting for the clock to catch up with
// them (a day after a day's jump).  Going on is shorter:
//  - a leased window is released in order (its exact last id becomes the slot's next floor)
//    and the instance takes a slot whose window can start now;
//  - a static window, whose slot is fixed, is extended from its ids: its next ceiling is the
//    next claim + cosid.static_ahead, recorded (cosid.static_ceiling, the state file) before
//    any id below it is issued, as every static ceiling is.
// Either way no id leaves a window the store granted or the state file holds, and no id on
// a slot goes below one issued on it before.  It is done only when the wait for the clock
// would be longer than `patience_ms`, at least one tick: a window used up by ids asked for
// faster than the layout issues (borrowing) waits at most a tick for the clock at its next
// renewal, and must neither hop slots nor run its static ceiling ahead of the clock.
#pragma once
#include <cstdint>
#include <optional>

#include "layout.hpp"

namespace cosid::clock_step {

// The timestamp (ms) the next claim on `word` takes with the clock at `now_ms`, ignoring the
// window: the clock's tick when it is past the last tick claimed; else the last tick (its
// next sequence), or the tick after it when its sequence is used up.  Nothing when the word
// is fresh or closed.
std::optional<int64_t> next_claim_ms(const Layout& layout, uint64_t word, int64_t now_ms) noexcept;

// How far (ms) the next claim on `word` stands beyond `reach_ms`, the furthest ceiling the
// clock lets the window have now, when the window is used up by its ids: the next claim comes
// from the word (the clock is at or behind its last tick) and lies past `ceiling_ms`.  0
// otherwise: the window still has room, or the clock itself is past the ceiling (a host clock
// ahead of the store: a new window would end at the same reach, so it would not help).
int64_t lead_past_reach_ms(const Layout& layout, uint64_t word, int64_t ceiling_ms, int64_t reach_ms,
                           int64_t now_ms) noexcept;

// The patience: the longest wait for the clock that is still shorter than going on.
// `move_cost_ms`: what going on costs (one store call, bounded by the keeper's store bound).
int64_t patience_ms(const Layout& layout, int64_t move_cost_ms) noexcept;

// Leased: true when the next claim waits longer than `patience_ms` for the clock: the window
// is used up ahead of what a renewal can reach (`reach_ms`: the store's now + the ttl it
// grants + the namespace's tolerance), or the last tick's sequence is used up and the next
// tick lies further ahead of the clock than `borrow_ms` allows (cosid.max_borrow;
// issue_word::kBorrowToCeiling: no limit but the ceiling).  Then release it in order and take
// a slot whose window can start now, where ids are issued at the clock.
bool leave_lease(const Layout& layout, uint64_t word, int64_t ceiling_ms, int64_t reach_ms, int64_t now_ms,
                 int64_t borrow_ms, int64_t patience_ms) noexcept;

// Static: the next ceiling of a window (ceiling_ms) with the clock at now_ms: the clock's
// (now + ahead, never below the ceiling), or, when the window is used up ahead of that by
// more than `patience_ms`, the next claim + ahead.
int64_t static_next_ceiling(const Layout& layout, uint64_t word, int64_t ceiling_ms, int64_t now_ms, int64_t ahead_ms,
                            int64_t patience_ms) noexcept;

}  // namespace cosid::clock_step

// How far ahead of the clock any window may reach, whatever the limits in force: the bound
// a copy can rely on without seeing those limits.  Pure C++: no PostgreSQL headers.
//
// A store that raises its floors after history it cannot see (a fork acknowledged, a dump
// restored) cannot know the limits the other side used after the copy was made: max_ttl,
// max_tolerance and cosid.static_ahead are settings, raised at any moment on the original.
// So no limit may ever let a window reach further than kReachCapMs past the clock that
// granted it, and such a raise always covers kReachCapMs.  The cap is a constant of the
// code, the same in every copy; a later version may raise it only together with the raise.
#pragma once
#include <algorithm>
#include <cstdint>

namespace cosid {

// max_ttl + 2 x max_tolerance, and static_ahead + 2 x max_tolerance, are at most this.
constexpr int64_t kReachCapMs = 120000;
// The largest max_tolerance a store accepts, and the longest static_ahead a server uses:
// together they keep a static window within the cap.
constexpr int64_t kMaxToleranceCapMs = 30000;
constexpr int64_t kStaticAheadCapMs = kReachCapMs - 2 * kMaxToleranceCapMs;

// Whether a store's limits keep every lease window within the cap (cosid_store_settings).
inline bool limits_within_cap(int64_t max_ttl_ms, int64_t max_tolerance_ms) {
    return max_tolerance_ms >= 0 && max_tolerance_ms <= kMaxToleranceCapMs && max_ttl_ms > 0 &&
           max_ttl_ms + 2 * max_tolerance_ms <= kReachCapMs;
}

// The static_ahead a server uses: its setting, at most kStaticAheadCapMs.
inline int64_t static_ahead_used_ms(int64_t setting_ms) { return std::min(setting_ms, kStaticAheadCapMs); }

// A static window's ceiling when it opens: static_ahead past the clock, or past its floor when
// that is ahead (the server's own last ceiling after its clock stepped back: it borrows above
// it at once), but never more than kStaticAheadCapMs past the clock, and never below the
// floor.  A floor further ahead (an acknowledged fork's, an administrator's) gives an empty
// window until the clock comes within the cap of it, as a lease's does (lease_rule's
// window_ceiling): measured from such a floor, a window would reach past the cap.
inline int64_t static_window_ceiling(int64_t floor_ms, int64_t clock_ms, int64_t static_ahead_ms) {
    const int64_t wanted = std::max(floor_ms, clock_ms) + static_ahead_used_ms(static_ahead_ms);
    return std::max(floor_ms, std::min(wanted, clock_ms + kStaticAheadCapMs));
}

// How far past its base a raise after unseen history puts every next floor: the cap, or what
// the store can see reached further (a window granted before the cap existed).
inline int64_t unseen_history_reach_ms(int64_t visible_reach_ms) { return std::max(kReachCapMs, visible_reach_ms); }

}  // namespace cosid

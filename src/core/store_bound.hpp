// How long the keeper gives one store call.  Pure C++.
//
// The keeper is one process serving every lease of its instance, so a store call that hangs
// must end (a statement and lock timeout, a deadline on a remote socket) and be tried again,
// instead of holding up the renewals of the other leases.  The base bound is ttl / 6 (at
// least 100 ms): a renewal falls due when a third of its lease has passed, so two tries at
// the base bound still end before the lease does.
//
// A bound that a store cannot meet at all is a wait nobody needs: on a loaded machine (a
// busy disk behind each commit's flush, a CPU shared with builds) every try of the same call
// runs out, and a namespace that nothing stops from issuing stops.  So the bound adapts, for
// each kind of call the keeper makes (a statement and its first argument: the namespace of a
// lease or static slot): a call that ran out of it gives the next call of that kind twice as
// long, up to ttl / 3; a call answered within half the next shorter bound halves it again.
// Per kind, because a loaded disk slows the writes and not the reads, and one namespace's
// rows may be slow (a trigger, a lock) while another's are not: a quick call must not shorten
// the bound of a slow one.  With the margin, a call that takes a steady 1.5 base bounds keeps
// the longer bound instead of losing every other try.
// At ttl / 3 a call still ends before the next renewal of a lease renewed just before it
// falls due.
#pragma once
#include <cstdint>

namespace cosid::store_bound {

// The base bound (ms) for a cosid.ttl of `ttl_ms`: ttl / 6, at least 100 ms.
int64_t base_ms(int64_t ttl_ms) noexcept;

// The bound (ms) of a call after `slow_level` levels of slowness: the base doubled for each
// level, never above ttl / 3 (nor below the base).
int64_t call_ms(int64_t ttl_ms, int slow_level) noexcept;

// The level after a call that took `took_ms`: one up when it ran out of its bound (as far as
// doubling still lengthens the bound for `ttl_ms`), one down when the store answered it
// within half the bound of the level below, else unchanged (a call that never reached the
// store, a connection known to be down, says nothing of its speed).
int next_level(int64_t ttl_ms, int slow_level, bool ran_out, bool answered, int64_t took_ms) noexcept;

// A kind of call's key: a hash of its statement's text and its first argument (nullptr: none).
uint64_t call_key(const char* sql, const char* first_arg) noexcept;

// The levels of the slow statements: those at level 0 are not kept.  Holds kSlots of them;
// one more replaces the one used longest ago.  Plain data: no constructor runs.
struct Levels {
    static constexpr int kSlots = 16;
    struct Slot {
        uint64_t key;
        int level;  // 0: free
        uint64_t used;
    };
    Slot slots[kSlots];
    uint64_t clock;

    int level(uint64_t key) const noexcept;
    void note(uint64_t key, int64_t ttl_ms, bool ran_out, bool answered, int64_t took_ms) noexcept;
};

}  // namespace cosid::store_bound

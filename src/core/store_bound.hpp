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
// runs out, and a namespace that nothing stops from issuing stops.  So each kind of call the
// keeper makes (a statement and its first argument: the namespace of a lease or a static
// slot) is one of three:
//  - fast: the base bound;
//  - slow: it ran out of the base bound; its tries get ttl / 3, twice as long, for as long
//    as they are answered.  At ttl / 3 a call still ends before the lease it renews does
//    (due when a third of it has passed);
//  - stuck: a slow try ran out of ttl / 3 too.  That may be a store that does not answer at
//    all (a synchronous standby gone, a statement that never ends), so its next try gets the
//    base bound again, and the one after it, if that runs out too, ttl / 3: a kind that never
//    answers costs the keeper ttl / 6, ttl / 3, ttl / 6, ttl / 6, ttl / 3, ... (2/9 ttl a
//    try on average, against ttl / 6 with a fixed bound), while one that answers only in the
//    tail of a slow store's times still gets a ttl / 3 try every third time.
// A slow kind answered within half the base bound is fast again; a stuck one once answered.
// Per kind, because a loaded disk slows the writes and not the reads, and one namespace's
// rows may be slow while another's are not: a quick call must not shorten the bound of a
// slow one.
#pragma once
#include <cstdint>

namespace cosid::store_bound {

// The base bound (ms) for a cosid.ttl of `ttl_ms`: ttl / 6, at least 100 ms.
int64_t base_ms(int64_t ttl_ms) noexcept;

enum Level : int { kFast = 0, kSlow = 1, kStuck = 2 };

// The bound (ms) of a call of a kind at `level`: ttl / 3 when slow (never below the base),
// else the base.
int64_t call_ms(int64_t ttl_ms, int level) noexcept;

// The level after a call that took `took_ms` (kFast for anything out of range): a run-out
// makes a fast kind slow (when ttl / 3 is longer than the base), a slow one stuck and a stuck
// one fast (its next run-out: slow again); an answer makes a stuck kind fast, and a slow one
// when it came within half the base bound; a call that never reached the store (a
// connection known to be down) changes nothing.
int next_level(int64_t ttl_ms, int level, bool ran_out, bool answered, int64_t took_ms) noexcept;

// A kind of call's key: a hash of its statement's text and its first argument (nullptr: none).
uint64_t call_key(const char* sql, const char* first_arg) noexcept;

// The levels of the kinds that are not fast: kSlots of them; one more replaces the one used
// longest ago.  Plain data: no constructor runs.
struct Levels {
    static constexpr int kSlots = 64;
    struct Slot {
        uint64_t key;
        int level;  // kFast: free
        uint64_t used;
    };
    Slot slots[kSlots];
    uint64_t clock;

    int level(uint64_t key) const noexcept;
    void note(uint64_t key, int64_t ttl_ms, bool ran_out, bool answered, int64_t took_ms) noexcept;
    void reset() noexcept;  // every kind fast (a new cosid.ttl, a shutdown)
};

}  // namespace cosid::store_bound

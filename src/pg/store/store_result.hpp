// What a store call answered (StoreResult) or why it failed (StoreError): a leaf header, so
// that the shared state (state.hpp), the keeper and the store's client can all name them
// without depending on each other.
#pragma once
#include "../pg.hpp"

namespace cosid::pg {

struct StoreResult {
    bool row;    // the store answered with a row
    bool found;  // acquire: a slot was won; renew/release: the lease matched
    int32 slot;
    int64 fence, expires_at, floor, ceiling, next_floor, store_now;
    bool duplicate_key;
    int64 earliest_expiry;  // 0: none
    // namespace layout (acquire only)
    int timestamp_bits, slot_bits, sequence_bits, unit_ms;
    int64 epoch_ms, tolerance_ms;
    char slot_range[32];               // acquire only: the store's range of the namespace's slots, "" for all
    char namespace_name[NAMEDATALEN];  // store_next_own_lease only
    int64 failovers;                   // store_read_health: the store's failover count
    int32 timeline;                    // and the timeline it writes on
    char store_id[40];                 // acquire only: cosid.store_state.store_id, "" before 1.4
    int64 raised_at_ms;                // store_raised_at: the store time of the last raise (0: none)
    int64 max_tolerance_ms;            // and the store's max_tolerance
};

struct StoreError {
    char message[256];
    int sqlerrcode;
    // The call may have committed although it failed: the answer was lost on the way back,
    // or the commit was not confirmed as configured (a cancelled wait for a synchronous
    // standby).  An ERROR answer means the transaction was rolled back: false then.
    bool outcome_unknown;
    char hint[256];  // '' unless the error says what to do (the Citus guard)
};

}  // namespace cosid::pg

// How a store call travels (store_io.cpp): SPI into this instance's cosid.database, or libpq
// to the server cosid.store_dsn names.  Either way one statement runs in a transaction of
// its own, with text parameters, and its first row (or each row, for a sink) comes back as
// text.  For store.cpp's calls only (and the keeper's count of them: set_call_observer).
#pragma once
#include "store_result.hpp"

#include <stdlib.h>

namespace cosid::pg::store_io {

constexpr int kMaxCols = 18;

struct TextRow {
    bool present;  // the statement returned a row
    bool null[kMaxCols];
    char value[kMaxCols][64];
};

using RowReader = void (*)(const TextRow&, StoreResult*);
// Every row of an answer, for the statements that return several (store_lease_pass); the
// others read the first row only.
struct RowSink {
    void (*take)(void* ctx, const TextRow&);
    void* ctx;
};

inline int64 get_int64(const TextRow& r, int col, int64 dflt) {
    return r.null[col - 1] ? dflt : strtoll(r.value[col - 1], nullptr, 10);
}
inline int32 get_int32(const TextRow& r, int col, int32 dflt) { return static_cast<int32>(get_int64(r, col, dflt)); }
inline bool get_bool(const TextRow& r, int col) { return !r.null[col - 1] && r.value[col - 1][0] == 't'; }

// Every store error is formed here, its text scrubbed of cosid.store_dsn's secrets.
void set_error(StoreError* err, const char* message, int sqlerrcode, bool outcome_unknown = false);
void set_hint(StoreError* err, const char* hint);
// One statement on the local store (cosid.database) by SPI, in a transaction of its own.
// lock_timeout_ms > 0: it gives up on a lock after that long.
bool run_spi(const char* sql, int nargs, const char* const* args, TextRow* row, StoreError* err,
             const RowSink* sink = nullptr, int lock_timeout_ms = 0);
// What run() did, for whoever counts the store's calls: `answered` is run()'s result.  The
// keeper sets it (keeper.cpp: cosid_stats().store_transactions and cosid_health()'s last
// answer); store_io itself records nothing in shared memory.  nullptr: nobody counts.
using CallObserver = void (*)(bool answered);
void set_call_observer(CallObserver observer);
// One statement on the store, local or remote; its first row read by `reader`; then the
// observer is told.
bool run(const char* sql, int nargs, const char* const* args, RowReader reader, StoreResult* out, StoreError* err,
         const RowSink* sink = nullptr);

}  // namespace cosid::pg::store_io

namespace cosid::pg {
// The keeper's hold on the transport (keeper.cpp).
// Every kind of store call back to the base bound (a new cosid.ttl, a shutdown's releases).
void store_bound_reset();
void store_disconnect();
}  // namespace cosid::pg

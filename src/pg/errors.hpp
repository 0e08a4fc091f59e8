// cosid's own SQLSTATEs (class ZC, implementation-defined), documented in docs/reference.md ("Errors").
#pragma once
#include "pg.hpp"

#define COSID_SLOT_LOST MAKE_SQLSTATE('Z', 'C', '0', '0', '1')             // lease lost: call again to rebind
#define COSID_CEILING_TIMEOUT MAKE_SQLSTATE('Z', 'C', '0', '0', '2')       // window ended, no renewal in time
#define COSID_EXHAUSTED MAKE_SQLSTATE('Z', 'C', '0', '0', '3')             // no free slot in time
#define COSID_BEFORE_FLOOR_TIMEOUT MAKE_SQLSTATE('Z', 'C', '0', '0', '4')  // clock far behind the window
#define COSID_OUT_OF_RANGE MAKE_SQLSTATE('Z', 'C', '0', '0', '5')          // time outside the layout
#define COSID_KEEPER_UNAVAILABLE MAKE_SQLSTATE('Z', 'C', '0', '0', '6')    // keeper not running or store failing
#define COSID_STATIC_STATE MAKE_SQLSTATE('Z', 'C', '0', '0', '7')  // static slot: state file unusable or unwritable
#define COSID_SLOT_RANGE MAKE_SQLSTATE('Z', 'C', '0', '0', '8')    // the store's slot range is not the one seen before
#define COSID_FORK MAKE_SQLSTATE('Z', 'C', '0', '0', '9')  // the store is a copy of a server that may still issue

namespace cosid::pg {
// An id argument: never negative (the sign bit of every cosid id is 0).
inline void require_cosid_id(int64 id) {
    if (id < 0)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%lld is not a cosid id", static_cast<long long>(id)),
                 errdetail("cosid ids are never negative: the sign bit is always 0.")));
}
}  // namespace cosid::pg

// cosid._lock_held(rel, mode): whether this transaction holds a lock on table rel of mode, or
// of a stronger one (the modes as pg_locks names them: RowShareLock, ShareRowExclusiveLock,
// ...).  cosid._store_state_lock asks it in every look at a store state that is not settled
// (during a fork, that is every store call), so it reads this backend's own lock table, not
// pg_locks, which locks every partition of the shared one.  Plain C inside: an ereport may
// leave it.
#include "../pg.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(cosid_lock_held);
}

extern "C" Datum cosid_lock_held(PG_FUNCTION_ARGS) {
    const Oid rel = PG_GETARG_OID(0);
    const char* name = text_to_cstring(PG_GETARG_TEXT_PP(1));
    // Table-level modes in increasing strength (lockdefs.h numbers them so).
    static const char* const kModes[] = {
        "AccessShareLock", "RowShareLock",          "RowExclusiveLock", "ShareUpdateExclusiveLock",
        "ShareLock",       "ShareRowExclusiveLock", "ExclusiveLock",    "AccessExclusiveLock"};
    LOCKMODE from = NoLock;
    for (size_t i = 0; i < lengthof(kModes); ++i)
        if (strcmp(name, kModes[i]) == 0) from = AccessShareLock + static_cast<LOCKMODE>(i);
    if (from == NoLock)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("cosid: unknown lock mode \"%s\"", name),
                        errhint("Name a table lock mode as pg_locks does, e.g. RowShareLock.")));
    LOCKTAG tag;
    SET_LOCKTAG_RELATION(tag, MyDatabaseId, rel);
    for (LOCKMODE mode = from; mode <= AccessExclusiveLock; ++mode)
        if (COSID_LOCK_HELD_BY_ME(&tag, mode)) PG_RETURN_BOOL(true);
    PG_RETURN_BOOL(false);
}

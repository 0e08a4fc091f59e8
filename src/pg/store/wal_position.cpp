// Where this server writes: its cluster's system identifier and the WAL timeline it inserts
// on, read from shared memory.  The store asks both first in every acquire and renewal
// (cosid._follow_timeline): pg_control_system() would read the pg_control file from disk,
// and pg_walfile_name(pg_current_wal_lsn()) formats a file name to parse the timeline back.
// Plain C inside: an ereport may leave either function.
#include "../pg.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(cosid_timeline);
PG_FUNCTION_INFO_V1(cosid_system_identifier);
}

// cosid._timeline(): the timeline of the WAL being inserted, the one pg_walfile_name() names
// (a promoted standby's new one at once; pg_control_system()'s checkpoint timeline would lag).
// During recovery it fails as pg_current_wal_lsn() does, with the same SQLSTATE and words:
// a standby grants nothing.
extern "C" Datum cosid_timeline(PG_FUNCTION_ARGS) {
    if (RecoveryInProgress())
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE), errmsg("recovery is in progress"),
                        errhint("WAL control functions cannot be executed during recovery.")));
    PG_RETURN_INT32(static_cast<int32>(GetWALInsertionTimeLine()));
}

// cosid._system_identifier(): pg_control_system()'s system_identifier, from the copy of
// pg_control the server keeps in memory (the identifier never changes while it runs).
extern "C" Datum cosid_system_identifier(PG_FUNCTION_ARGS) {
    PG_RETURN_INT64(static_cast<int64>(GetSystemIdentifier()));
}

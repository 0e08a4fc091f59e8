// Whether this server's timeline began where its parent ended cleanly: the last record the
// parent timeline holds before the switch is a shutdown checkpoint, written at most
// kCleanSwitchWindowS seconds before the promotion.  A primary writes nothing after its
// shutdown checkpoint, so a standby that replayed it and was promoted then holds every
// commit its primary made: a planned switchover (Patroni's, or pg_ctl stop then promote)
// loses no lease change, and the store need not raise its floors (cosid._follow_timeline).
// A crash, an asynchronous standby that lagged, a recovery to a point in time end elsewhere.
// The window excludes a standby that stopped replaying at an old clean stop of its primary
// (a restart long ago) and is promoted much later: its primary wrote after that stop.
//
// cosid._clean_timeline_switch(parent int) RETURNS bigint: the time of the promotion (Unix ms,
// the history file's) when the switch was clean, else NULL.  Called from PL/pgSQL inside an
// exception block (a WAL segment that is gone ends in an ERROR: then the switch counts as
// not clean, and the store raises as before).  Plain C inside: an ereport may leave it.
#include "pg.hpp"

#include <sys/stat.h>

extern "C" {
#include "access/timeline.h"
#include "access/xlog_internal.h"
#include "access/xlogreader.h"
#include "access/xlogutils.h"
#include "catalog/pg_control.h"
#include "nodes/pg_list.h"
}

namespace {
constexpr int kCleanSwitchWindowS = 60;
}

extern "C" {
PG_FUNCTION_INFO_V1(cosid_clean_timeline_switch);
}

extern "C" Datum cosid_clean_timeline_switch(PG_FUNCTION_ARGS) {
    int32 parent = PG_GETARG_INT32(0);
    if (RecoveryInProgress()) PG_RETURN_NULL();
    TimeLineID tli = GetWALInsertionTimeLine();
    if (tli <= 1) PG_RETURN_NULL();
    List* history = readTimeLineHistory(tli);
    if (list_length(history) < 2) PG_RETURN_NULL();
    // newest first: this timeline (begin = the switch point), then its parent
    TimeLineHistoryEntry* self = static_cast<TimeLineHistoryEntry*>(linitial(history));
    TimeLineHistoryEntry* up = static_cast<TimeLineHistoryEntry*>(lsecond(history));
    if (static_cast<int32>(up->tli) != parent || XLogRecPtrIsInvalid(self->begin)) PG_RETURN_NULL();
    XLogRecPtr switch_point = self->begin;

    // When the switch happened: the history file is written at the promotion.
    char path[MAXPGPATH];
    TLHistoryFilePath(path, tli);
    struct stat st;
    if (stat(path, &st) != 0) PG_RETURN_NULL();

    ReadLocalXLogPageNoWaitPrivate* priv =
        static_cast<ReadLocalXLogPageNoWaitPrivate*>(palloc0(sizeof(ReadLocalXLogPageNoWaitPrivate)));
    // (XL_ROUTINE is a C compound literal)
    XLogReaderRoutine routine;
    memset(&routine, 0, sizeof(routine));
    routine.page_read = &read_local_xlog_page_no_wait;
    routine.segment_open = &wal_segment_open;
    routine.segment_close = &wal_segment_close;
    XLogReaderState* reader = XLogReaderAllocate(wal_segment_size, nullptr, &routine, priv);
    if (reader == nullptr) PG_RETURN_NULL();
    // The last record before the switch point starts in its segment or, if long, in one of the
    // two before: find the first record of that segment and read on to the switch point.
    XLogRecPtr start = InvalidXLogRecPtr;
    for (int back = 0; back < 3 && XLogRecPtrIsInvalid(start); ++back) {
        XLogRecPtr probe = switch_point - 1 - static_cast<XLogRecPtr>(back) * wal_segment_size;
        if (probe >= switch_point) break;  // wrapped below zero
        XLogRecPtr seg_start = probe - probe % wal_segment_size;
        XLogRecPtr found = XLogFindNextRecord(reader, seg_start);
        if (!XLogRecPtrIsInvalid(found) && found < switch_point) start = found;
    }
    bool shutdown = false;
    XLogRecPtr last_end = InvalidXLogRecPtr;
    pg_time_t checkpoint_time = 0;
    if (!XLogRecPtrIsInvalid(start)) {
        XLogBeginRead(reader, start);
        char* error = nullptr;
        while (XLogReadRecord(reader, &error) != nullptr && reader->ReadRecPtr < switch_point) {
            uint8 info = XLogRecGetInfo(reader) & ~XLR_INFO_MASK;
            shutdown = XLogRecGetRmid(reader) == RM_XLOG_ID && info == XLOG_CHECKPOINT_SHUTDOWN;
            if (shutdown) {
                CheckPoint checkpoint;
                memcpy(&checkpoint, XLogRecGetData(reader), sizeof(checkpoint));
                checkpoint_time = checkpoint.time;
            }
            last_end = reader->EndRecPtr;
        }
    }
    XLogReaderFree(reader);
    // The switch point is the end of the last record replayed on the parent timeline.
    bool clean = shutdown && last_end == switch_point && checkpoint_time > 0 &&
                 st.st_mtime >= checkpoint_time && st.st_mtime - checkpoint_time <= kCleanSwitchWindowS;
    if (!clean) PG_RETURN_NULL();
    PG_RETURN_INT64(static_cast<int64>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000);
}

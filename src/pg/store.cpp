#include "store.hpp"

#include "settings.hpp"
#include "state.hpp"

namespace cosid::pg {

namespace {

using RowReader = void (*)(HeapTuple, TupleDesc, StoreResult*);

int64 get_int64(HeapTuple t, TupleDesc d, int col, int64 dflt) {
    bool isnull;
    Datum v = SPI_getbinval(t, d, col, &isnull);
    return isnull ? dflt : DatumGetInt64(v);
}
int32 get_int32(HeapTuple t, TupleDesc d, int col, int32 dflt) {
    bool isnull;
    Datum v = SPI_getbinval(t, d, col, &isnull);
    return isnull ? dflt : DatumGetInt32(v);
}

// Runs one statement in a transaction of its own; reads the first row, if any, with
// `reader`.  Errors (a lock timeout, a missing table, ...) are caught and returned, so a
// failing store never takes the keeper down.
bool run(const char* sql, int nargs, Oid* types, Datum* values, RowReader reader, StoreResult* out,
         StoreError* err) {
    MemoryContext caller = CurrentMemoryContext;
    volatile bool ok = false;
    memset(out, 0, sizeof(*out));
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    PG_TRY();
    {
        SPI_connect();
        PushActiveSnapshot(GetTransactionSnapshot());
        pgstat_report_activity(STATE_RUNNING, sql);
        int rc = SPI_execute_with_args(sql, nargs, types, values, nullptr, false, 1);
        if (rc != SPI_OK_SELECT) elog(ERROR, "cosid store query failed: %s", SPI_result_code_string(rc));
        if (SPI_processed > 0 && reader != nullptr) reader(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, out);
        SPI_finish();
        PopActiveSnapshot();
        CommitTransactionCommand();
        ok = true;
    }
    PG_CATCH();
    {
        MemoryContextSwitchTo(caller);
        ErrorData* ed = CopyErrorData();
        FlushErrorState();
        strlcpy(err->message, ed->message ? ed->message : "unknown error", sizeof(err->message));
        err->sqlerrcode = ed->sqlerrcode;
        FreeErrorData(ed);
        AbortCurrentTransaction();
    }
    PG_END_TRY();
    MemoryContextSwitchTo(caller);
    pgstat_report_activity(STATE_IDLE, nullptr);
    count(shared->stats.store_transactions);
    return ok;
}

void read_exists(HeapTuple, TupleDesc, StoreResult* out) { out->found = true; }

void read_lease(HeapTuple t, TupleDesc d, StoreResult* out) {
    out->slot = get_int32(t, d, 1, -1);
    out->found = out->slot >= 0;
    out->fence = get_int64(t, d, 2, 0);
    out->expires_at = get_int64(t, d, 3, 0);
    out->floor = get_int64(t, d, 4, 0);
    out->ceiling = get_int64(t, d, 5, 0);
    out->next_floor = get_int64(t, d, 6, 0);
    out->store_now = get_int64(t, d, 7, 0);
}

void read_acquire(HeapTuple t, TupleDesc d, StoreResult* out) {
    read_lease(t, d, out);
    bool isnull;
    Datum v = SPI_getbinval(t, d, 8, &isnull);
    out->duplicate_key = !isnull && DatumGetBool(v);
    out->earliest_expiry = get_int64(t, d, 9, 0);
    out->timestamp_bits = get_int32(t, d, 10, 0);
    out->slot_bits = get_int32(t, d, 11, 0);
    out->sequence_bits = get_int32(t, d, 12, 0);
    out->epoch_ms = get_int64(t, d, 13, 0);
    out->unit_ms = get_int32(t, d, 14, 1);
    out->tolerance_ms = get_int64(t, d, 15, 0);
}

void read_release(HeapTuple t, TupleDesc d, StoreResult* out) {
    out->slot = get_int32(t, d, 1, -1);
    out->found = out->slot >= 0;
    out->fence = get_int64(t, d, 2, 0);
    out->next_floor = get_int64(t, d, 3, 0);
    out->store_now = get_int64(t, d, 4, 0);
}

}  // namespace

bool store_extension_ready(StoreError* err) {
    StoreResult r;
    if (!run("SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'cosid'", 0, nullptr, nullptr, read_exists, &r,
             err))
        return false;
    return r.found;
}

bool store_acquire(const char* ns, const char* owner_key, const char* incarnation, int64 ttl_ms, int preferred,
                   const char* exclude_array, StoreResult* out, StoreError* err) {
    Oid types[6] = {TEXTOID, TEXTOID, TEXTOID, INT8OID, INT4OID, TEXTOID};
    Datum values[6] = {CStringGetTextDatum(ns), CStringGetTextDatum(owner_key), CStringGetTextDatum(incarnation),
                       Int64GetDatum(ttl_ms), Int32GetDatum(preferred), CStringGetTextDatum(exclude_array)};
    return run("SELECT a.slot, a.fence, a.expires_at, a.floor, a.ceiling, a.next_floor, a.store_now, "
               "a.duplicate_key, a.earliest_expiry, n.timestamp_bits, n.slot_bits, n.sequence_bits, n.epoch_ms, "
               "CASE n.unit WHEN 's' THEN 1000 ELSE 1 END, n.tolerance_ms "
               "FROM cosid.acquire($1, $2, $3::uuid, $4, nullif($5, -1), $6::int[]) a "
               "JOIN cosid.namespace n ON n.name = $1",
               6, types, values, read_acquire, out, err);
}

bool store_renew(const char* ns, int32 slot, const char* incarnation, int64 fence, int64 ttl_ms, StoreResult* out,
                 StoreError* err) {
    Oid types[5] = {TEXTOID, INT4OID, TEXTOID, INT8OID, INT8OID};
    Datum values[5] = {CStringGetTextDatum(ns), Int32GetDatum(slot), CStringGetTextDatum(incarnation),
                       Int64GetDatum(fence), Int64GetDatum(ttl_ms)};
    return run("SELECT slot, fence, expires_at, floor, ceiling, next_floor, store_now "
               "FROM cosid.renew($1, $2, $3::uuid, $4, $5)",
               5, types, values, read_lease, out, err);
}

bool store_release(const char* ns, int32 slot, const char* incarnation, int64 fence, int64 last_issued,
                   StoreResult* out, StoreError* err) {
    Oid types[5] = {TEXTOID, INT4OID, TEXTOID, INT8OID, INT8OID};
    Datum values[5] = {CStringGetTextDatum(ns), Int32GetDatum(slot), CStringGetTextDatum(incarnation),
                       Int64GetDatum(fence), Int64GetDatum(last_issued)};
    return run("SELECT slot, fence, next_floor, store_now FROM cosid.release($1, $2, $3::uuid, $4, $5)", 5, types,
               values, read_release, out, err);
}

}  // namespace cosid::pg

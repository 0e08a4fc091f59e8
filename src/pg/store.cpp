// The keeper's client of the lease store.  The store is either this instance's own
// database (SPI) or, with cosid.store_dsn, another PostgreSQL server shared by several
// instances (libpq).  Both run the same SQL, with text parameters, one transaction per
// mutation, and hand back the first row as text, so one set of readers serves both.
#include "store.hpp"

#include <stdlib.h>

extern "C" {
#include "libpq-fe.h"
}

#include "settings.hpp"
#include "state.hpp"

namespace cosid::pg {

namespace {

constexpr int kMaxCols = 16;

struct TextRow {
    bool present;  // the statement returned a row
    bool null[kMaxCols];
    char value[kMaxCols][64];
};

using RowReader = void (*)(const TextRow&, StoreResult*);

int64 get_int64(const TextRow& r, int col, int64 dflt) {
    return r.null[col - 1] ? dflt : strtoll(r.value[col - 1], nullptr, 10);
}
int32 get_int32(const TextRow& r, int col, int32 dflt) { return static_cast<int32>(get_int64(r, col, dflt)); }
bool get_bool(const TextRow& r, int col) { return !r.null[col - 1] && r.value[col - 1][0] == 't'; }

void set_error(StoreError* err, const char* message, int sqlerrcode) {
    strlcpy(err->message, message ? message : "unknown error", sizeof(err->message));
    err->sqlerrcode = sqlerrcode;
}

// --- SPI: the store is this instance's cosid.database --------------------------------
bool run_spi(const char* sql, int nargs, const char* const* args, TextRow* row, StoreError* err) {
    MemoryContext caller = CurrentMemoryContext;
    volatile bool ok = false;
    Oid types[kMaxCols];
    Datum values[kMaxCols];
    for (int i = 0; i < nargs; ++i) {
        types[i] = TEXTOID;
        values[i] = CStringGetTextDatum(args[i]);
    }
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    PG_TRY();
    {
        SPI_connect();
        PushActiveSnapshot(GetTransactionSnapshot());
        pgstat_report_activity(STATE_RUNNING, sql);
        int rc = SPI_execute_with_args(sql, nargs, types, values, nullptr, false, 1);
        if (rc != SPI_OK_SELECT) elog(ERROR, "cosid store query failed: %s", SPI_result_code_string(rc));
        if (SPI_processed > 0) {
            row->present = true;
            int ncols = Min(SPI_tuptable->tupdesc->natts, kMaxCols);
            for (int c = 0; c < ncols; ++c) {
                char* v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, c + 1);
                row->null[c] = v == nullptr;
                if (v != nullptr) strlcpy(row->value[c], v, sizeof(row->value[c]));
            }
        }
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
        set_error(err, ed->message, ed->sqlerrcode);
        FreeErrorData(ed);
        AbortCurrentTransaction();
    }
    PG_END_TRY();
    MemoryContextSwitchTo(caller);
    pgstat_report_activity(STATE_IDLE, nullptr);
    return ok;
}

// --- libpq: the store is a server shared by several instances --------------------------
PGconn* remote = nullptr;

bool connect_remote(StoreError* err) {
    if (remote != nullptr && PQstatus(remote) == CONNECTION_OK) return true;
    if (remote != nullptr) PQfinish(remote);
    // A store that hangs must not stall the keeper: bound connecting, waiting for locks and
    // every statement, then fail and back off like any other store error.
    char timeout[32], options[128];
    snprintf(timeout, sizeof(timeout), "%d", Max(setting_ttl_ms / 6000, 2));
    snprintf(options, sizeof(options), "-c statement_timeout=%d -c lock_timeout=%d", Max(setting_ttl_ms / 6, 100),
             Max(setting_ttl_ms / 6, 100));
    const char* keys[] = {"dbname", "connect_timeout", "options", "application_name", nullptr};
    const char* vals[] = {setting_store_dsn, timeout, options, "cosid keeper", nullptr};
    remote = PQconnectdbParams(keys, vals, 1 /* expand dbname: the DSN may be a conninfo or URI */);
    if (PQstatus(remote) != CONNECTION_OK) {
        set_error(err, PQerrorMessage(remote), ERRCODE_CONNECTION_FAILURE);
        PQfinish(remote);
        remote = nullptr;
        return false;
    }
    return true;
}

int sqlstate_of(const PGresult* res) {
    const char* s = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    if (s == nullptr || strlen(s) != 5) return ERRCODE_CONNECTION_FAILURE;
    return MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4]);
}

bool run_libpq(const char* sql, int nargs, const char* const* args, TextRow* row, StoreError* err) {
    if (!connect_remote(err)) return false;
    pgstat_report_activity(STATE_RUNNING, sql);
    PGresult* res = PQexecParams(remote, sql, nargs, nullptr, args, nullptr, nullptr, 0);
    bool ok = PQresultStatus(res) == PGRES_TUPLES_OK;
    if (ok && PQntuples(res) > 0) {
        row->present = true;
        int ncols = Min(PQnfields(res), kMaxCols);
        for (int c = 0; c < ncols; ++c) {
            row->null[c] = PQgetisnull(res, 0, c);
            if (!row->null[c]) strlcpy(row->value[c], PQgetvalue(res, 0, c), sizeof(row->value[c]));
        }
    } else if (!ok) {
        const char* primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
        set_error(err, primary != nullptr ? primary : PQerrorMessage(remote), sqlstate_of(res));
        if (PQstatus(remote) != CONNECTION_OK) {  // reconnect on the next call
            PQfinish(remote);
            remote = nullptr;
        }
    }
    PQclear(res);
    pgstat_report_activity(STATE_IDLE, nullptr);
    return ok;
}

// Runs one statement in a transaction of its own and reads its first row, if any, with
// `reader`.  Errors (a lock timeout, a lost connection, a missing table, ...) are
// returned, so a failing store never takes the keeper down.
bool run(const char* sql, int nargs, const char* const* args, RowReader reader, StoreResult* out,
         StoreError* err) {
    TextRow row;
    memset(&row, 0, sizeof(row));
    memset(out, 0, sizeof(*out));
    bool ok = store_is_remote() ? run_libpq(sql, nargs, args, &row, err) : run_spi(sql, nargs, args, &row, err);
    if (ok && row.present && reader != nullptr) reader(row, out);
    out->row = row.present;
    count(shared->stats.store_transactions);
    return ok;
}

void read_exists(const TextRow&, StoreResult* out) { out->found = true; }

void read_lease(const TextRow& r, StoreResult* out) {
    out->slot = get_int32(r, 1, -1);
    out->found = out->slot >= 0;
    out->fence = get_int64(r, 2, 0);
    out->expires_at = get_int64(r, 3, 0);
    out->floor = get_int64(r, 4, 0);
    out->ceiling = get_int64(r, 5, 0);
    out->next_floor = get_int64(r, 6, 0);
    out->store_now = get_int64(r, 7, 0);
}

void read_acquire(const TextRow& r, StoreResult* out) {
    read_lease(r, out);
    out->duplicate_key = get_bool(r, 8);
    out->earliest_expiry = get_int64(r, 9, 0);
    out->timestamp_bits = get_int32(r, 10, 0);
    out->slot_bits = get_int32(r, 11, 0);
    out->sequence_bits = get_int32(r, 12, 0);
    out->epoch_ms = get_int64(r, 13, 0);
    out->unit_ms = get_int32(r, 14, 1);
    out->tolerance_ms = get_int64(r, 15, 0);
}

void read_release(const TextRow& r, StoreResult* out) {
    out->slot = get_int32(r, 1, -1);
    out->found = out->slot >= 0;
    out->fence = get_int64(r, 2, 0);
    out->next_floor = get_int64(r, 3, 0);
    out->store_now = get_int64(r, 4, 0);
}

}  // namespace

bool store_is_remote() { return setting_store_dsn != nullptr && setting_store_dsn[0] != '\0'; }

void store_disconnect() {
    if (remote != nullptr) PQfinish(remote);
    remote = nullptr;
}

bool store_extension_ready(StoreError* err) {
    StoreResult r;
    // The local extension provides cosid_next(); a remote store must have it too.
    const char* sql = "SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'cosid'";
    TextRow local;
    memset(&local, 0, sizeof(local));
    if (!run_spi(sql, 0, nullptr, &local, err) || !local.present) return false;
    if (!store_is_remote()) return true;
    if (!run(sql, 0, nullptr, read_exists, &r, err)) return false;
    if (!r.found) set_error(err, "the lease store has no cosid extension", ERRCODE_UNDEFINED_OBJECT);
    return r.found;
}

bool store_acquire(const char* ns, const char* owner_key, const char* incarnation, int64 ttl_ms, int preferred,
                   const char* exclude_array, StoreResult* out, StoreError* err) {
    char ttl[32], pref[32];
    snprintf(ttl, sizeof(ttl), INT64_FORMAT, ttl_ms);
    snprintf(pref, sizeof(pref), "%d", preferred);
    const char* args[6] = {ns, owner_key, incarnation, ttl, pref, exclude_array};
    return run("SELECT a.slot, a.fence, a.expires_at, a.floor, a.ceiling, a.next_floor, a.store_now, "
               "a.duplicate_key, a.earliest_expiry, n.timestamp_bits, n.slot_bits, n.sequence_bits, n.epoch_ms, "
               "CASE n.unit WHEN 's' THEN 1000 ELSE 1 END, n.tolerance_ms "
               "FROM cosid.acquire($1::text, $2::text, $3::uuid, $4::bigint, nullif($5::int, -1), $6::int[]) a "
               "LEFT JOIN cosid.namespace n ON n.name = $1::text",  // LEFT: acquire always runs
               6, args, read_acquire, out, err);
}

namespace {
// The text parameters shared by renew and release: namespace, slot, incarnation, fence and
// one more number (the ttl or the last issued timestamp).
struct LeaseArgs {
    char slot[16], fence[32], number[32];
    const char* v[5];
};
void lease_args(LeaseArgs* a, const char* ns, int32 slot, const char* incarnation, int64 fence, int64 number) {
    snprintf(a->slot, sizeof(a->slot), "%d", slot);
    snprintf(a->fence, sizeof(a->fence), INT64_FORMAT, fence);
    snprintf(a->number, sizeof(a->number), INT64_FORMAT, number);
    a->v[0] = ns;
    a->v[1] = a->slot;
    a->v[2] = incarnation;
    a->v[3] = a->fence;
    a->v[4] = a->number;
}
}  // namespace

bool store_renew(const char* ns, int32 slot, const char* incarnation, int64 fence, int64 ttl_ms, StoreResult* out,
                 StoreError* err) {
    LeaseArgs a;
    lease_args(&a, ns, slot, incarnation, fence, ttl_ms);
    return run("SELECT slot, fence, expires_at, floor, ceiling, next_floor, store_now "
               "FROM cosid.renew($1::text, $2::int, $3::uuid, $4::bigint, $5::bigint)",
               5, a.v, read_lease, out, err);
}

bool store_release(const char* ns, int32 slot, const char* incarnation, int64 fence, int64 last_issued,
                   StoreResult* out, StoreError* err) {
    LeaseArgs a;
    lease_args(&a, ns, slot, incarnation, fence, last_issued);
    return run("SELECT slot, fence, next_floor, store_now "
               "FROM cosid.release($1::text, $2::int, $3::uuid, $4::bigint, $5::bigint)",
               5, a.v, read_release, out, err);
}

}  // namespace cosid::pg

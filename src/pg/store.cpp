// The keeper's client of the lease store.  The store is either this instance's own
// database (SPI) or, with cosid.store_dsn, another PostgreSQL server shared by several
// instances (libpq).  Both run the same SQL, with text parameters, one transaction per
// mutation, and hand back the first row as text, so one set of readers serves both.
#include "store.hpp"

extern "C" {
#include "datatype/timestamp.h"
#include "utils/timestamp.h"
}
#include "health.hpp"

#include <stdlib.h>

extern "C" {
#include "libpq-fe.h"
}

#include <optional>
#include <string>

#include "boundary.hpp"
#include "citus.hpp"
#include "dsn_scrub.hpp"
#include "errors.hpp"
#include "settings.hpp"
#include "slot_range.hpp"
#include "store_errors.hpp"
#include "state.hpp"

namespace cosid::pg {

namespace {

constexpr int kMaxCols = 17;

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

int64 get_int64(const TextRow& r, int col, int64 dflt) {
    return r.null[col - 1] ? dflt : strtoll(r.value[col - 1], nullptr, 10);
}
int32 get_int32(const TextRow& r, int col, int32 dflt) { return static_cast<int32>(get_int64(r, col, dflt)); }
bool get_bool(const TextRow& r, int col) { return !r.null[col - 1] && r.value[col - 1][0] == 't'; }

// Copies `text` into `out` (of `len` bytes) with every secret of cosid.store_dsn hidden
// (src/core/dsn_scrub): libpq echoes pieces of a connection string it cannot parse, and an
// error may quote anything.  Scrubbed whole, then truncated: a cut through a password would
// leave its start unmatched.  Every store error is formed here (set_error, the hint, the
// connection's last error), so none reaches a log line, an ereport or shared memory
// (cosid_health(), ZC006's DETAIL) with a password in it.
void copy_scrubbed(char* out, size_t len, const char* text) {
    if (!store_is_remote()) {
        strlcpy(out, text, len);
        return;
    }
    // No exception leaves the lambda (out of memory: the message is not shown at all), so
    // this never raises an ERROR, which would end the keeper in the middle of its error path.
    bool done = cpp_call([&]() -> bool {
        try {
            std::string s = scrub_dsn_secrets(text, setting_store_dsn);
            strlcpy(out, s.c_str(), len);
            return true;
        } catch (...) {
            return false;
        }
    });
    if (!done) strlcpy(out, "(the lease store's message could not be shown)", len);
}

void set_error(StoreError* err, const char* message, int sqlerrcode, bool outcome_unknown = false) {
    copy_scrubbed(err->message, sizeof(err->message), message ? message : "unknown error");
    err->sqlerrcode = sqlerrcode;
    err->outcome_unknown = outcome_unknown;
    err->hint[0] = '\0';
}

void set_hint(StoreError* err, const char* hint) { copy_scrubbed(err->hint, sizeof(err->hint), hint); }

// The keeper takes a cancel (the statement and lock timers' SIGINT, or pg_cancel_backend)
// only while it waits on the store: there it ends the call.  Anywhere else nothing is
// running to cancel, and a pending cancel would turn the next CHECK_FOR_INTERRUPTS (an
// ereport(LOG) has one) into an ERROR, which ends a worker.
//
// A cancel that arrived during a local call which still succeeded was swallowed by the
// commit's wait for a synchronous standby (that wait ends on a cancel with a WARNING, its
// change committed here only): the call counts as failed, with an unknown outcome.  Seen
// through the signal itself, so it holds whatever log_min_messages says.
volatile sig_atomic_t store_cancel_seen = 0;
void store_cancel_handler(SIGNAL_ARGS) {
    store_cancel_seen = 1;
    COSID_CALL_HANDLER(StatementCancelHandler);
}
void begin_store_call() {
    store_cancel_seen = 0;
    pqsignal(SIGINT, store_cancel_handler);
}
void end_store_call() {
    pqsignal(SIGINT, COSID_SIG_IGN);
    QueryCancelPending = false;
}

// --- SPI: the store is this instance's cosid.database --------------------------------
// statement_timeout is only armed by the backend's query loop, never for SPI in a worker:
// the keeper arms the same timer itself around each store transaction, so that a slow
// statement or a commit waiting for a synchronous standby ends within the bound.
// lock_timeout_ms > 0: the statement gives up on a lock after that long (SET LOCAL), for the
// keeper's background work, which must never hold up its pass behind someone's lock.
bool run_spi(const char* sql, int nargs, const char* const* args, TextRow* row, StoreError* err,
             const RowSink* sink = nullptr, int lock_timeout_ms = 0) {
    MemoryContext caller = CurrentMemoryContext;
    volatile bool ok = false;
    Oid types[kMaxCols];
    Datum values[kMaxCols];
    for (int i = 0; i < nargs; ++i) {
        types[i] = TEXTOID;
        values[i] = CStringGetTextDatum(args[i]);
    }
    SetCurrentStatementStartTimestamp();
    begin_store_call();
    enable_timeout_after(STATEMENT_TIMEOUT, static_cast<int>(store_bound_ms()));
    StartTransactionCommand();
    PG_TRY();
    {
        SPI_connect();
        PushActiveSnapshot(GetTransactionSnapshot());
        if (lock_timeout_ms > 0) {
            char set[96];
            snprintf(set, sizeof(set), "SELECT pg_catalog.set_config('lock_timeout', '%d', true)", lock_timeout_ms);
            if (SPI_execute(set, false, 0) != SPI_OK_SELECT) elog(ERROR, "cosid could not set lock_timeout");
        }
        pgstat_report_activity(STATE_RUNNING, sql);
        int rc = SPI_execute_with_args(sql, nargs, types, values, nullptr, false, sink != nullptr ? 0 : 1);
        if (rc != SPI_OK_SELECT) elog(ERROR, "cosid store query failed: %s", SPI_result_code_string(rc));
        for (uint64 n = 0; n < SPI_processed; ++n) {
            row->present = true;
            int ncols = Min(SPI_tuptable->tupdesc->natts, kMaxCols);
            for (int c = 0; c < ncols; ++c) {
                char* v = SPI_getvalue(SPI_tuptable->vals[n], SPI_tuptable->tupdesc, c + 1);
                row->null[c] = v == nullptr;
                if (v != nullptr) strlcpy(row->value[c], v, sizeof(row->value[c]));
            }
            if (sink == nullptr) break;
            sink->take(sink->ctx, *row);
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
        if (ed->hint != nullptr) set_hint(err, ed->hint);  // the SQL's own advice
        FreeErrorData(ed);
        AbortCurrentTransaction();
    }
    PG_END_TRY();
    disable_timeout(STATEMENT_TIMEOUT, true);  // keep the indicator: read just below
    // A cancel (the timer's, or anyone's) that produced no error interrupted the commit's wait
    // for a synchronous standby: a commit that is only local, not confirmed as configured.
    bool timed_out = get_timeout_indicator(STATEMENT_TIMEOUT, true);
    if (ok && (timed_out || store_cancel_seen)) {
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "the store's commit was not confirmed %s (a synchronous standby did not answer)",
                 timed_out ? "within the store bound" : "before a cancel");
        set_error(err, msg, ERRCODE_QUERY_CANCELED, true);
        ok = false;
    }
    end_store_call();
    MemoryContextSwitchTo(caller);
    pgstat_report_activity(STATE_IDLE, nullptr);
    return ok;
}

// --- libpq: the store is a server shared by several instances --------------------------
// Non-blocking: a store that stops answering (frozen, partitioned away) must not hold the
// keeper inside a socket read, where neither a shutdown nor the lease arithmetic can reach
// it.  Every wait is on the latch and the socket together, up to a deadline; past it the
// connection is dropped and the call fails like any other store error.
PGconn* remote = nullptr;
int64 remote_down_until = 0;  // after a timeout or a lost connection: fail fast until then
char remote_down_error[256];
int remote_down_code = ERRCODE_CONNECTION_FAILURE;  // and its SQLSTATE and hint
char remote_down_hint[256];
bool latch_seen = false;      // a latch wake-up taken while waiting on the store, to hand on
// The WARNING a store's commit sends when its wait for a synchronous standby was cancelled
// (by an administrator, or a shutdown): the change is committed on the store only, and
// such an answer is not relied on.  Recognised by the routine that raises it (the field is
// not translated); other warnings (a wraparound notice, a placeholder setting removed as
// the library loads, ...) say nothing about the commit and pass.  The keeper's session asks
// for warnings (client_min_messages) whatever its role's settings say.
bool remote_warned = false;
char remote_warning[200];

void on_remote_notice(void*, const PGresult* res) {
    const char* severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    const char* routine = PQresultErrorField(res, PG_DIAG_SOURCE_FUNCTION);
    if (severity == nullptr || strcmp(severity, "WARNING") != 0) return;
    if (routine == nullptr || strcmp(routine, "SyncRepWaitForLSN") != 0) return;
    const char* primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    if (!remote_warned) copy_scrubbed(remote_warning, sizeof(remote_warning), primary ? primary : "a warning");
    remote_warned = true;
}

// Waits until the store's socket is ready for `events` or `deadline` (ms) passes.
bool wait_remote(int events, int64 deadline) {
    for (;;) {
        int64 left = deadline - mono_ms();
        // No socket to wait on (WaitLatchOrSocket would raise an ERROR): a failed call.
        if (left <= 0 || PQsocket(remote) == PGINVALID_SOCKET) return false;
        int rc = WaitLatchOrSocket(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH | events,
                                   PQsocket(remote), left, PG_WAIT_EXTENSION);
        if (rc & WL_LATCH_SET) {
            ResetLatch(MyLatch);
            latch_seen = true;  // a request or a reload: the keeper's loop sees to it after this call
        }
        if (rc & events) return true;
    }
}

// Drops the connection after a timeout or a broken link, and fails the calls of the next
// backoff period at once, so that one dead store costs one bound per pass, not one per slot.
// A refusal of the login (src/core/store_errors: a password, a role, a database, pg_hba.conf)
// fails with its own SQLSTATE and hint, which no retry mends: the keeper's callers fail at
// once with them (ZC006) instead of waiting out cosid.acquire_timeout.
bool remote_failed(StoreError* err, const char* message, bool sent = false, int code = ERRCODE_CONNECTION_FAILURE,
                   const char* hint = nullptr) {
    // `message` may be err->message itself, or libpq's buffer that PQfinish frees: copy first.
    copy_scrubbed(remote_down_error, sizeof(remote_down_error), message);
    // libpq ends its messages with a newline; a DETAIL puts a full stop after them
    for (size_t n = strlen(remote_down_error); n > 0 && isspace(static_cast<unsigned char>(remote_down_error[n - 1]));)
        remote_down_error[--n] = '\0';
    set_error(err, remote_down_error, code, sent);  // sent: it may have run
    remote_down_code = code;
    remote_down_hint[0] = '\0';
    if (hint != nullptr) {
        set_hint(err, hint);
        strlcpy(remote_down_hint, err->hint, sizeof(remote_down_hint));
    }
    remote_down_until = mono_ms() + store_bound_ms();
    if (remote != nullptr) PQfinish(remote);
    remote = nullptr;
    return false;
}

bool connect_remote(StoreError* err) {
    if (remote != nullptr && PQstatus(remote) == CONNECTION_OK) return true;
    if (remote != nullptr) PQfinish(remote);
    remote = nullptr;
    // No startup options: a pooler in transaction mode (PgBouncer) refuses them ("unsupported
    // startup parameter"), and would hand any session setting to other clients anyway.  The
    // bounds are set in each store transaction instead (exec_remote).  Connecting is bounded
    // here, as libpq's connect_timeout is not used by PQconnectPoll.
    const char* keys[] = {"dbname", "application_name", nullptr};
    const char* vals[] = {setting_store_dsn, "cosid keeper", nullptr};
    int64 deadline = mono_ms() + Max(store_bound_ms(), 2000);
    remote = PQconnectStartParams(keys, vals, 1 /* expand dbname: the DSN may be a conninfo or URI */);
    if (remote == nullptr) return remote_failed(err, "out of memory connecting to the lease store");
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    while (PQstatus(remote) != CONNECTION_BAD && st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
        int events = st == PGRES_POLLING_READING ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
        if (!wait_remote(events, deadline)) {
            char msg[256];
            snprintf(msg, sizeof(msg), "connecting to the lease store timed out after %d ms",
                     (int)Max(store_bound_ms(), 2000));
            return remote_failed(err, msg);
        }
        st = PQconnectPoll(remote);
    }
    if (PQstatus(remote) != CONNECTION_OK) {
        ConnectRefusal refusal = store_connect_refusal(PQerrorMessage(remote));
        if (refusal.sqlstate == nullptr) return remote_failed(err, PQerrorMessage(remote));
        const char* s = refusal.sqlstate;
        return remote_failed(err, PQerrorMessage(remote), false, MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4]),
                             refusal.hint);
    }
    if (PQsetnonblocking(remote, 1) != 0) return remote_failed(err, PQerrorMessage(remote));
    PQsetNoticeReceiver(remote, on_remote_notice, nullptr);
    return true;
}

int sqlstate_of(const PGresult* res) {
    const char* s = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    if (s == nullptr || strlen(s) != 5) return ERRCODE_CONNECTION_FAILURE;
    return MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4]);
}

// The bounds of one store transaction, set in it and gone with it (is_local): the server
// ends a lock wait or a statement past the bound itself (a clean error, the connection
// stays), and passes on warnings (a commit's cancelled wait for a standby: on_remote_notice)
// whatever the store role's own settings.  Nothing of it outlives the transaction, so the
// keeper's session may be any server connection of a pooler, a new one each transaction.
constexpr const char* kBoundsSql =
    "SELECT pg_catalog.set_config('statement_timeout', $1, true), pg_catalog.set_config('lock_timeout', $1, true), "
    "pg_catalog.set_config('client_min_messages', 'warning', true)";

// Sends the bounds and one statement in one pipeline, one Sync: one round trip and one
// (implicit) transaction, which PostgreSQL arms the statement timer for again at each
// message, so the statement runs under the bound set just before it.  Unnamed statements
// only: none outlives the transaction (PgBouncer 1.18 keeps no prepared statements).
// Waits at most twice the bound: the server's own timeout answers first while it is alive.
// Returns the first failed result, else the statement's.
PGresult* exec_remote(const char* sql, int nargs, const char* const* args, StoreError* err) {
    int64 deadline = mono_ms() + 2 * store_bound_ms();
    char msg[256];
    snprintf(msg, sizeof(msg), "the lease store did not answer within %d ms", (int)(2 * store_bound_ms()));
    char bound[32];
    snprintf(bound, sizeof(bound), "%d", (int)store_bound_ms());
    const char* bound_args[1] = {bound};
    if (!PQenterPipelineMode(remote) ||
        !PQsendQueryParams(remote, kBoundsSql, 1, nullptr, bound_args, nullptr, nullptr, 0) ||
        !PQsendQueryParams(remote, sql, nargs, nullptr, args, nullptr, nullptr, 0) || !PQpipelineSync(remote)) {
        remote_failed(err, PQerrorMessage(remote));
        return nullptr;
    }
    for (int f; (f = PQflush(remote)) != 0;) {
        if (f < 0 || !wait_remote(WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE, deadline) || !PQconsumeInput(remote)) {
            remote_failed(err, f < 0 ? PQerrorMessage(remote) : msg, true);
            return nullptr;
        }
    }
    // The rows arrive at Execute, the commit's outcome only at Sync: an error after the
    // rows (a serialization failure, a deferred trigger, a failover) means the transaction
    // was rolled back, and the rows must not be used.  So every result up to the Sync's is
    // read, and the first error among them, if any, is the answer.
    PGresult* answer = nullptr;
    bool answer_failed = false;
    bool synced = false;
    int idle_nulls = 0;  // NULLs in a row with nothing busy: libpq has nothing more to give
    while (!synced && PQstatus(remote) == CONNECTION_OK && idle_nulls < 4) {
        while (PQisBusy(remote)) {
            if (!wait_remote(WL_SOCKET_READABLE, deadline)) {
                PQclear(answer);
                remote_failed(err, msg, true);
                return nullptr;
            }
            if (!PQconsumeInput(remote)) {
                PQclear(answer);
                remote_failed(err, PQerrorMessage(remote), true);
                return nullptr;
            }
        }
        PGresult* res = PQgetResult(remote);
        if (res == nullptr) {  // the end of one statement's results; the next follow
            idle_nulls++;
            continue;
        }
        idle_nulls = 0;
        ExecStatusType st = PQresultStatus(res);
        if (st == PGRES_PIPELINE_SYNC) {
            synced = true;
            PQclear(res);
            continue;
        }
        // A statement skipped after an earlier error (PIPELINE_ABORTED) carries no words of
        // its own: the earlier error stays the answer.
        bool failed = st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK;
        if (!answer_failed && (failed || answer == nullptr || st == PGRES_TUPLES_OK)) {
            PQclear(answer);
            answer = res;
            answer_failed = failed;
        } else {
            PQclear(res);
        }
    }
    // The connection broke before the Sync was answered (the loop ends only so): the
    // server's error, if it sent one (a FATAL: rolled back), is the answer, and run_libpq
    // drops the connection; without one the outcome is unknown.
    if (!synced && !(answer != nullptr && answer_failed)) {
        PQclear(answer);
        remote_failed(err, PQerrorMessage(remote), true);
        return nullptr;
    }
    if (synced && !PQexitPipelineMode(remote)) {
        PQclear(answer);
        remote_failed(err, PQerrorMessage(remote), true);
        return nullptr;
    }
    if (answer == nullptr) remote_failed(err, PQerrorMessage(remote), true);
    return answer;
}

bool run_libpq(const char* sql, int nargs, const char* const* args, TextRow* row, StoreError* err,
               const RowSink* sink = nullptr) {
    if (remote == nullptr && mono_ms() < remote_down_until) {
        set_error(err, remote_down_error, remote_down_code);
        if (remote_down_hint[0] != '\0') strlcpy(err->hint, remote_down_hint, sizeof(err->hint));
        return false;
    }
    latch_seen = false;
    begin_store_call();
    pgstat_report_activity(STATE_RUNNING, sql);
    bool ok = false;
    if (connect_remote(err)) {
        remote_warned = false;
        PGresult* res = exec_remote(sql, nargs, args, err);
        ok = res != nullptr && PQresultStatus(res) == PGRES_TUPLES_OK;
        if (ok && remote_warned) {
            char msg[256];
            snprintf(msg, sizeof(msg), "the lease store warned: %s; its answer is not relied on", remote_warning);
            set_error(err, msg, ERRCODE_WARNING, true);
            ok = false;
        } else if (ok) {
            for (int n = 0; n < PQntuples(res); ++n) {
                row->present = true;
                int ncols = Min(PQnfields(res), kMaxCols);
                for (int c = 0; c < ncols; ++c) {
                    row->null[c] = PQgetisnull(res, n, c);
                    if (!row->null[c]) strlcpy(row->value[c], PQgetvalue(res, n, c), sizeof(row->value[c]));
                }
                if (sink == nullptr) break;
                sink->take(sink->ctx, *row);
            }
        } else if (res != nullptr && !ok) {
            const char* primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
            // No SQLSTATE: libpq's own error (the connection broke), not the server's answer.
            bool answered = PQresultErrorField(res, PG_DIAG_SQLSTATE) != nullptr;
            set_error(err, primary != nullptr ? primary : PQerrorMessage(remote), sqlstate_of(res), !answered);
            if (const char* hint = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT))
                set_hint(err, hint);  // the store's own advice, for the caller
            if (PQstatus(remote) != CONNECTION_OK) remote_failed(err, err->message, !answered);
        }
        PQclear(res);
    }
    end_store_call();
    pgstat_report_activity(STATE_IDLE, nullptr);
    if (latch_seen) SetLatch(MyLatch);
    return ok;
}

// Runs one statement in a transaction of its own and reads its first row, if any, with
// `reader`.  Every mutation joins cosid._durable(), which makes its commit synchronous
// whatever the store's synchronous_commit (see the SQL script), locally and remotely alike.  Errors (a lock timeout, a lost connection, a missing table, ...) are
// returned, so a failing store never takes the keeper down.
bool run(const char* sql, int nargs, const char* const* args, RowReader reader, StoreResult* out,
         StoreError* err, const RowSink* sink = nullptr) {
    TextRow row;
    memset(&row, 0, sizeof(row));
    memset(out, 0, sizeof(*out));
    err->outcome_unknown = false;
    bool ok = store_is_remote() ? run_libpq(sql, nargs, args, &row, err, sink)
                                : run_spi(sql, nargs, args, &row, err, sink);
    if (ok && row.present && reader != nullptr) reader(row, out);
    out->row = row.present;
    count(shared->stats.store_transactions);
    if (ok) health_store_answered();
    return ok;
}

void read_exists(const TextRow&, StoreResult* out) { out->found = true; }
void read_system_identifier(const TextRow& r, StoreResult* out) {  // and the postmaster's start, in Unix µs
    out->fence = static_cast<int64>(strtoull(r.null[0] ? "0" : r.value[0], nullptr, 10));
    out->expires_at = get_int64(r, 2, 0);
}

// A lease's answer, seven columns from `first` on: slot (NULL: none), fence, expires_at,
// floor, ceiling, next_floor, store_now.
void read_lease_columns(const TextRow& r, int first, StoreResult* out) {
    out->slot = get_int32(r, first, -1);
    out->found = out->slot >= 0;
    out->fence = get_int64(r, first + 1, 0);
    out->expires_at = get_int64(r, first + 2, 0);
    out->floor = get_int64(r, first + 3, 0);
    out->ceiling = get_int64(r, first + 4, 0);
    out->next_floor = get_int64(r, first + 5, 0);
    out->store_now = get_int64(r, first + 6, 0);
}

void read_lease(const TextRow& r, StoreResult* out) { read_lease_columns(r, 1, out); }

// A namespace's layout and tolerance, six columns from `first` on: timestamp_bits, slot_bits,
// sequence_bits, epoch_ms, unit in ms, tolerance_ms (an acquire's answer, a local namespace).
void read_layout_columns(const TextRow& r, int first, StoreResult* out) {
    out->timestamp_bits = get_int32(r, first, 0);
    out->slot_bits = get_int32(r, first + 1, 0);
    out->sequence_bits = get_int32(r, first + 2, 0);
    out->epoch_ms = get_int64(r, first + 3, 0);
    out->unit_ms = get_int32(r, first + 4, 1);
    out->tolerance_ms = get_int64(r, first + 5, 0);
}

void read_acquire(const TextRow& r, StoreResult* out) {
    read_lease(r, out);
    out->duplicate_key = get_bool(r, 8);
    out->earliest_expiry = get_int64(r, 9, 0);
    read_layout_columns(r, 10, out);
    strlcpy(out->slot_range, r.null[15] ? "" : r.value[15], sizeof(out->slot_range));
    strlcpy(out->store_id, r.null[16] ? "" : r.value[16], sizeof(out->store_id));
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

int64 store_bound_ms() { return Max(setting_ttl_ms / 6, 100); }

void store_disconnect() {
    if (remote != nullptr) PQfinish(remote);
    remote = nullptr;
    remote_down_until = 0;
}

bool store_extension_ready(StoreError* err) {
    StoreResult r;
    // The local extension provides cosid_next(); a remote store must have it too.
    const char* sql = "SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'cosid'";
    TextRow local;
    memset(&local, 0, sizeof(local));
    if (!run_spi(sql, 0, nullptr, &local, err)) return false;
    if (!local.present) {
        char message[256];
        snprintf(message, sizeof(message), "extension cosid is not installed in database \"%s\" (cosid.database)",
                 setting_database);
        set_error(err, message, ERRCODE_UNDEFINED_OBJECT);
        return false;
    }
    // With static slots the keeper serves them anyway: the guard refuses each store request
    // instead (keeper.cpp).
    if (!store_is_remote()) return static_slots_configured() || store_local_guard(err);
    if (!run(sql, 0, nullptr, read_exists, &r, err)) return false;
    if (!r.found) {
        set_error(err, "the lease store has no cosid extension", ERRCODE_UNDEFINED_OBJECT);
        return false;
    }
    // A "remote" store that is this very server (a DSN naming it, or a localhost DSN copied
    // with the data directory into a copy of it) would hide from the store that its own
    // server issues from it, and a copy of the server could not be told from it (fork.cpp).
    // The same server: the same system identifier and the same postmaster start, to the
    // microsecond (servers cloned from one initdb share the identifier, not the start).
    if (!run("SELECT system_identifier, "
             "(pg_catalog.date_part('epoch', pg_catalog.pg_postmaster_start_time()) * 1000000)::bigint "
             "FROM pg_catalog.pg_control_system()",
             0, nullptr, read_system_identifier, &r, err))
        return false;
    int64 started_unix_us = PgStartTime + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
    // (the remote start comes through a double: equal to within a microsecond)
    if (r.row && static_cast<uint64>(r.fence) == GetSystemIdentifier() && (r.expires_at - started_unix_us <= 1 && started_unix_us - r.expires_at <= 1)) {
        set_error(err, "cosid.store_dsn reaches this server itself: a server's own store must be its local one",
                  ERRCODE_INVALID_PARAMETER_VALUE);
        strlcpy(err->hint,
                "Empty cosid.store_dsn and set cosid.database to the database that holds the store, then restart. "
                "A copy of this data directory used as its store is a fork of it.",
                sizeof(err->hint));
        return false;
    }
    return true;
}

bool store_local_guard(StoreError* err) {
    TextRow row;
    memset(&row, 0, sizeof(row));
    if (!run_spi(kCitusPresentQuery, 0, nullptr, &row, err)) return false;
    if (!row.present || row.null[0] || row.value[0][0] != 't') return true;
    memset(&row, 0, sizeof(row));
    if (!run_spi(kCitusNodeQuery, 0, nullptr, &row, err)) return false;
    if (!row.present) return true;
    CitusNode n;
    memset(&n, 0, sizeof(n));
    n.citus = true;
    n.group = get_int32(row, 1, 0);
    if (!row.null[1]) strlcpy(n.coordinator_host, row.value[1], sizeof(n.coordinator_host));
    n.coordinator_port = get_int32(row, 3, 0);
    if (!citus_worker(n)) return true;
    char detail[512];
    citus_worker_detail(n, detail, sizeof(detail));
    set_error(err, detail, COSID_KEEPER_UNAVAILABLE);
    citus_worker_hint(n, nullptr, err->hint, sizeof(err->hint));
    return false;
}

bool store_acquire(const char* ns, const char* owner_key, const char* incarnation, int64 ttl_ms, int preferred,
                   StoreResult* out, StoreError* err) {
    char ttl[32], pref[32];
    snprintf(ttl, sizeof(ttl), INT64_FORMAT, ttl_ms);
    snprintf(pref, sizeof(pref), "%d", preferred);
    const char* args[5] = {ns, owner_key, incarnation, ttl, pref};
    return run("SELECT a.slot, a.fence, a.expires_at, a.floor, a.ceiling, a.next_floor, a.store_now, "
               "a.duplicate_key, a.earliest_expiry, n.timestamp_bits, n.slot_bits, n.sequence_bits, n.epoch_ms, "
               "CASE n.unit WHEN 's' THEN 1000 ELSE 1 END, n.tolerance_ms, "
               // (a store before 1.5 has no slot_range: read through jsonb, NULL there)
               "pg_catalog.to_jsonb(n) OPERATOR(pg_catalog.->>) 'slot_range', "
               // the store that granted it (cosid.history): its record's id, newest first (a
               // store before 1.4 has none: NULL)
               "(SELECT pg_catalog.to_jsonb(s) OPERATOR(pg_catalog.->>) 'store_id' FROM cosid.store_state s "
               "ORDER BY pg_catalog.to_jsonb(s) OPERATOR(pg_catalog.->>) 'created_at' DESC LIMIT 1) "
               "FROM cosid._durable() durable, "
               "cosid.acquire($1::text, $2::text, $3::uuid, $4::bigint, nullif($5::int, -1)) a "
               "LEFT JOIN cosid.namespace n ON n.name = $1::text",  // LEFT: acquire always runs
               5, args, read_acquire, out, err);
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
               "FROM cosid._durable() durable, cosid.renew($1::text, $2::int, $3::uuid, $4::bigint, $5::bigint)",
               5, a.v, read_lease, out, err);
}

namespace {
void read_raised_at(const TextRow& r, StoreResult* out) {
    out->ceiling = get_int64(r, 1, 0);
    out->found = true;
}
}  // namespace

bool store_raised_at(int64* raised_at_ms, StoreError* err) {
    StoreResult r;
    memset(&r, 0, sizeof(r));
    // (raised_at_ms: a store of cosid 1.3 or later)
    if (!run("SELECT pg_catalog.max(raised_at_ms) FROM cosid.store_state", 0, nullptr, read_raised_at, &r, err))
        return false;
    *raised_at_ms = r.row ? r.ceiling : 0;
    return true;
}

bool store_release(const char* ns, int32 slot, const char* incarnation, int64 fence, int64 last_issued,
                   StoreResult* out, StoreError* err) {
    LeaseArgs a;
    lease_args(&a, ns, slot, incarnation, fence, last_issued);
    return run("SELECT slot, fence, next_floor, store_now "
               "FROM cosid._durable() durable, cosid.release($1::text, $2::int, $3::uuid, $4::bigint, $5::bigint)",
               5, a.v, read_release, out, err);
}

namespace {
// An array literal of `n` elements, each quoted (namespace names may hold commas, quotes or
// braces), in the keeper's memory context.
const char* array_literal(int n, const char* (*element)(const LeaseCall&, char* buf), const LeaseCall* calls) {
    StringInfoData out;
    initStringInfo(&out);
    appendStringInfoChar(&out, '{');
    char buf[32];
    for (int k = 0; k < n; ++k) {
        if (k > 0) appendStringInfoChar(&out, ',');
        appendStringInfoChar(&out, '"');
        for (const char* c = element(calls[k], buf); *c != '\0'; ++c) {
            if (*c == '"' || *c == '\\') appendStringInfoChar(&out, '\\');
            appendStringInfoChar(&out, *c);
        }
        appendStringInfoChar(&out, '"');
    }
    appendStringInfoChar(&out, '}');
    return out.data;
}

struct PassRows {
    StoreResult* results;
    int n;
};

// One row per lease the store still held for us (renewed, or released): ord (1-based), then
// the columns of cosid.renew; a lease without a row was lost, as with store_renew/release.
void take_pass_row(void* ctx, const TextRow& r) {
    PassRows* rows = static_cast<PassRows*>(ctx);
    int ord = get_int32(r, 1, 0);
    if (ord < 1 || ord > rows->n) return;
    StoreResult* out = &rows->results[ord - 1];
    out->row = true;
    read_lease_columns(r, 2, out);  // after the lease's ordinal in the pass
}
}  // namespace

bool store_lease_pass(const LeaseCall* calls, int n, const char* incarnation, int64 ttl_ms, StoreResult* results,
                      StoreError* err) {
    memset(results, 0, sizeof(StoreResult) * n);
    char ttl[32];
    snprintf(ttl, sizeof(ttl), INT64_FORMAT, ttl_ms);
    const char* args[7] = {
        incarnation,
        ttl,
        array_literal(n, [](const LeaseCall& c, char*) -> const char* { return c.release ? "t" : "f"; }, calls),
        array_literal(n, [](const LeaseCall& c, char*) -> const char* { return c.ns; }, calls),
        array_literal(n, [](const LeaseCall& c, char* b) -> const char* { snprintf(b, 32, "%d", c.slot); return b; },
                      calls),
        array_literal(n, [](const LeaseCall& c, char* b) -> const char* {
                          snprintf(b, 32, INT64_FORMAT, c.fence);
                          return b;
                      }, calls),
        array_literal(n, [](const LeaseCall& c, char* b) -> const char* {
                          snprintf(b, 32, INT64_FORMAT, c.release ? c.last_issued : 0);
                          return b;
                      }, calls),
    };
    PassRows rows{results, n};
    RowSink sink{take_pass_row, &rows};
    StoreResult first;
    return run("SELECT ord, slot, fence, expires_at, floor, ceiling, next_floor, store_now "
               "FROM cosid._durable() durable, "
               "cosid.lease_pass($1::uuid, $2::bigint, $3::bool[], $4::text[], $5::int[], $6::bigint[], $7::bigint[])",
               7, args, nullptr, &first, err, &sink);
}

namespace {
void read_own_lease(const TextRow& r, StoreResult* out) {
    out->slot = get_int32(r, 1, -1);
    out->fence = get_int64(r, 2, 0);
    out->ceiling = get_int64(r, 3, 0);
    strlcpy(out->namespace_name, r.null[3] ? "" : r.value[3], sizeof(out->namespace_name));
    out->found = true;
}
}  // namespace

bool store_next_own_lease(const char* incarnation, const char* after_ns, int32 after_slot, StoreResult* out,
                          StoreError* err) {
    char slot[16];
    snprintf(slot, sizeof(slot), "%d", after_slot);
    const char* args[3] = {incarnation, after_ns, slot};
    // cosid.own_leases (1.4): incarnations are not readable by keeper roles, and a keeper
    // finds only the leases its own store role acquired.  A store of an older version has no
    // such function, and its lease table is readable.
    if (run("SELECT slot, fence, ceiling, namespace FROM cosid.own_leases($1::uuid, $2::text, $3::int)", 3, args,
            read_own_lease, out, err))
        return true;
    if (err->sqlerrcode != ERRCODE_UNDEFINED_FUNCTION) return false;
    return run("SELECT slot, fence, ceiling, namespace FROM cosid.lease "
               "WHERE incarnation = $1::uuid AND (namespace, slot) > ($2::text, $3::int) "
               "ORDER BY namespace, slot LIMIT 1",
               3, args, read_own_lease, out, err);
}

namespace {
void read_state(const TextRow& r, StoreResult* out) {
    out->fence = get_int64(r, 1, 0);
    out->slot = get_int32(r, 2, 0);
    out->ceiling = get_bool(r, 3) ? 1 : 0;
    out->found = true;
}
}  // namespace

bool store_read_state(StoreResult* out, StoreError* err) {
    // (every version's store_state has the three columns)
    return run("SELECT failovers, timeline, raise_floors_on_new_timeline FROM cosid.store_state", 0, nullptr,
               read_state, out, err);
}

namespace {
void read_health(const TextRow& r, StoreResult* out) {
    out->fence = get_int64(r, 1, 0);        // max_ttl_ms
    out->expires_at = get_int64(r, 2, 0);   // max_tolerance_ms
    out->found = get_bool(r, 3);            // raise_floors_on_new_timeline
    out->slot = get_int32(r, 4, 0);         // standbys
    out->floor = get_int64(r, 5, 0);        // synchronous standbys
    out->ceiling = get_bool(r, 6) ? 1 : 0;  // synchronous_standby_names set
    out->store_now = get_int64(r, 7, 0);
    out->next_floor = get_int64(r, 8, 0);   // other live incarnations with this owner key
    out->failovers = get_int64(r, 9, 0);
    out->timeline = get_int32(r, 10, 0);
}
}  // namespace

bool store_read_health(const char* owner_key, const char* incarnation, StoreResult* out, StoreError* err) {
    const char* args[2] = {owner_key, incarnation};
    return run("SELECT max_ttl_ms, max_tolerance_ms, raise_floors, standbys, sync_standbys, sync_names, store_now, "
               "other_incarnations, failovers, timeline FROM cosid._store_health($1::text, $2::uuid)",
               2, args, read_health, out, err);
}

namespace {
// Regional stores: the range of slots the store states for a namespace against the one this
// instance saw first (kept in its copy of the namespace); another one is refused, since its
// slots may be another region's (src/core/slot_range).  Here alone a store that states no
// range means every slot.
bool check_store_range(const char* ns, const StoreResult& layout, StoreError* err) {
    std::optional<SlotRange> store = parse_slot_range(layout.slot_range, layout.slot_bits);
    if (!store) {
        char msg[256];
        snprintf(msg, sizeof(msg), "the lease store states slot range \"%s\" for namespace \"%s\", no range of its %d slot bits",
                 layout.slot_range, ns, layout.slot_bits);
        set_error(err, msg, ERRCODE_DATA_CORRUPTED);
        return false;
    }
    std::string store_text = store->text();
    const char* args[2] = {ns, layout.slot_range};  // "": no range stated, nothing to keep
    TextRow row;
    memset(&row, 0, sizeof(row));
    if (!run_spi("SELECT cosid._namespace_range_seen($1::text, nullif($2::text, '')::int4range)::text", 2, args, &row, err)) {
        // This database's cosid is older than 1.5: nothing to keep a range in.  Fine while the
        // store states none; a regional store's range needs the update here first.  Asked of
        // the catalog, not read from the SQLSTATE alone: a 42883 raised inside the function
        // (a broken search_path, a dropped helper) must not pass for "no range kept here".
        if (err->sqlerrcode != ERRCODE_UNDEFINED_FUNCTION) return false;
        TextRow exists;
        memset(&exists, 0, sizeof(exists));
        StoreError probe_err;
        if (!run_spi("SELECT pg_catalog.to_regprocedure('cosid._namespace_range_seen(text,int4range)') IS NOT NULL", 0,
                     nullptr, &exists, &probe_err))
            return false;  // (err keeps the first answer)
        if (!exists.present || exists.null[0] || strcmp(exists.value[0], "f") != 0) return false;
        if (layout.slot_range[0] == '\0') return true;
        char msg[256];
        snprintf(msg, sizeof(msg),
                 "The lease store grants only slots %s of namespace \"%s\"; this database's cosid keeps no slot "
                 "range before 1.5 (ALTER EXTENSION cosid UPDATE).",
                 store_text.c_str(), ns);
        set_error(err, msg, COSID_SLOT_RANGE);
        return false;
    }
    std::optional<SlotRange> seen;
    if (row.present && !row.null[0]) seen = parse_slot_range(row.value[0], layout.slot_bits);
    if (judge_store_range(seen, *store) != RangeVerdict::Differs) return true;
    char msg[256];
    snprintf(msg, sizeof(msg), "The lease store grants slots %s of namespace \"%s\"; this instance had %s.",
             store_text.c_str(), ns, seen ? seen->text().c_str() : "another range");
    set_error(err, msg, COSID_SLOT_RANGE);
    return false;
}
}  // namespace

// Always on this instance (SPI), whatever the store: see cosid._namespace_sync.
bool store_sync_local_namespace(const char* ns, const StoreResult& layout, StoreError* err) {
    char ts[16], slot[16], seq[16], epoch[32], tol[32];
    snprintf(ts, sizeof(ts), "%d", layout.timestamp_bits);
    snprintf(slot, sizeof(slot), "%d", layout.slot_bits);
    snprintf(seq, sizeof(seq), "%d", layout.sequence_bits);
    snprintf(epoch, sizeof(epoch), INT64_FORMAT, layout.epoch_ms);
    snprintf(tol, sizeof(tol), INT64_FORMAT, layout.tolerance_ms);
    const char* args[7] = {ns, slot, seq, ts, epoch, layout.unit_ms == 1000 ? "s" : "ms", tol};
    TextRow row;
    memset(&row, 0, sizeof(row));
    bool ok = run_spi("SELECT cosid._namespace_sync($1::text, $2::int, $3::int, $4::int, $5::bigint, $6::text, "
                      "$7::bigint)",
                      7, args, &row, err);
    if (ok && row.present && !row.null[0] && strcmp(row.value[0], "copied") == 0)
        ereport(LOG, (errmsg("cosid: namespace \"%s\" copied from the lease store to this instance", ns)));
    return ok && check_store_range(ns, layout, err);
}

bool store_local_namespace(const char* ns, StoreResult* out, StoreError* err) {
    TextRow row;
    memset(&row, 0, sizeof(row));
    memset(out, 0, sizeof(*out));
    const char* args[1] = {ns};
    bool ok = run_spi("SELECT timestamp_bits, slot_bits, sequence_bits, epoch_ms, "
                      "CASE unit WHEN 's' THEN 1000 ELSE 1 END, tolerance_ms FROM cosid.namespace WHERE name = $1",
                      1, args, &row, err);
    if (ok && row.present) {
        read_layout_columns(row, 1, out);
        out->found = true;
    }
    out->row = row.present;
    return ok;
}

// cosid.static_ceiling comes with cosid 1.5: a 1.4 catalog not updated yet (or made again at
// 1.4) has neither it nor its functions, and the file alone is the memory until ALTER
// EXTENSION cosid UPDATE.  Asked at every call, never cached (the catalog can change under a
// running keeper), and never inferred from an error of the functions themselves.
bool store_static_ceiling_exists(bool* exists, int64* table_file, bool* restoring, StoreError* err,
                                 int lock_timeout_ms) {
    TextRow row;
    memset(&row, 0, sizeof(row));
    *restoring = false;
    if (!run_spi("SELECT pg_catalog.to_regprocedure('cosid._static_record(text,integer,bigint)') IS NOT NULL "
                 "AND pg_catalog.to_regprocedure('cosid._static_recorded(text,integer)') IS NOT NULL, "
                 "coalesce(pg_catalog.pg_relation_filenode(pg_catalog.to_regclass('cosid.static_ceiling'))::bigint, 0)",
                 0, nullptr, &row, err))
        return false;
    *exists = get_bool(row, 1);
    *table_file = get_int64(row, 2, 0);
    if (!*exists) return true;
    // (a 1.5 catalog: its store_state has system_identifier.  Not through _static_recorded,
    // which reads cosid.static_ceiling too: a lock on that table must not stop this look.)
    memset(&row, 0, sizeof(row));
    if (!run_spi("SELECT count(*) = 1 AND coalesce(bool_and(system_identifier = 0), false) FROM cosid.store_state", 0,
                 nullptr, &row, err, nullptr, lock_timeout_ms))
        return false;
    *restoring = row.present && !row.null[0] && get_bool(row, 1);
    return true;
}

bool store_static_recorded(const char* ns, int32 slot, std::optional<int64>* others_ms, std::optional<int64>* own_ms,
                           bool* restoring, StoreError* err, int lock_timeout_ms) {
    TextRow row;
    memset(&row, 0, sizeof(row));
    char slot_text[16];
    snprintf(slot_text, sizeof(slot_text), "%d", slot);
    const char* args[2] = {ns, slot_text};
    *others_ms = std::nullopt;
    *own_ms = std::nullopt;
    if (!run_spi("SELECT others_ms, own_ms, restoring FROM cosid._static_recorded($1::text, $2::int)", 2, args, &row,
                 err, nullptr, lock_timeout_ms))
        return false;
    if (row.present && !row.null[0]) *others_ms = get_int64(row, 1, 0);
    if (row.present && !row.null[1]) *own_ms = get_int64(row, 2, 0);
    *restoring = row.present && !row.null[2] && get_bool(row, 3);
    return true;
}

bool store_static_rows_missing(const char* rows_json, int64* missing, StoreError* err, int lock_timeout_ms) {
    TextRow row;
    memset(&row, 0, sizeof(row));
    const char* args[1] = {rows_json};
    if (!run_spi("SELECT count(*) FROM pg_catalog.jsonb_to_recordset($1::jsonb) AS m(ns text, slot int, ceiling bigint) "
                 "WHERE NOT EXISTS (SELECT 1 FROM cosid.static_ceiling c, pg_catalog.pg_control_system() s "
                 "WHERE c.namespace = m.ns AND c.slot = m.slot AND c.system_identifier = s.system_identifier "
                 "AND c.ceiling_ms >= m.ceiling)",
                 1, args, &row, err, nullptr, lock_timeout_ms))
        return false;
    *missing = get_int64(row, 1, 0);
    return true;
}

bool store_static_record(const char* ns, int32 slot, int64 ceiling_ms, StoreError* err, int lock_timeout_ms) {
    TextRow row;
    memset(&row, 0, sizeof(row));
    char slot_text[16], ceiling_text[32];
    snprintf(slot_text, sizeof(slot_text), "%d", slot);
    snprintf(ceiling_text, sizeof(ceiling_text), INT64_FORMAT, ceiling_ms);
    const char* args[3] = {ns, slot_text, ceiling_text};
    return run_spi("SELECT cosid._static_record($1::text, $2::int, $3::bigint)", 3, args, &row, err, nullptr,
                   lock_timeout_ms);
}

namespace {
void read_raise(const TextRow& r, StoreResult* out) {
    out->floor = get_int64(r, 1, 0);
    out->found = true;
}
}  // namespace

bool store_raise_floor(const char* ns, int64 floor_ms, int timestamp_bits, int slot_bits, int sequence_bits,
                       int64 epoch_ms, int unit_ms, StoreResult* out, StoreError* err) {
    char floor[32], ts[16], slot[16], seq[16], epoch[32];
    snprintf(floor, sizeof(floor), INT64_FORMAT, floor_ms);
    snprintf(ts, sizeof(ts), "%d", timestamp_bits);
    snprintf(slot, sizeof(slot), "%d", slot_bits);
    snprintf(seq, sizeof(seq), "%d", sequence_bits);
    snprintf(epoch, sizeof(epoch), INT64_FORMAT, epoch_ms);
    const char* args[7] = {ns, floor, slot, seq, ts, epoch, unit_ms == 1000 ? "s" : "ms"};
    return run("SELECT r FROM cosid._durable() durable, "
               "cosid.raise_floor($1::text, $2::bigint, $3::int, $4::int, $5::int, $6::bigint, $7::text) r",
               7, args, read_raise, out, err);
}

// --- the store's own server (src/pg/fork.cpp): a local store only, through SPI ----------
namespace {
// A function of cosid 1.6: a catalog not updated yet has none, and then records nothing.
bool local_function_exists(const char* signature, bool* exists, StoreError* err) {
    TextRow row;
    memset(&row, 0, sizeof(row));
    const char* args[1] = {signature};
    if (!run_spi("SELECT pg_catalog.to_regprocedure($1) IS NOT NULL", 1, args, &row, err)) return false;
    *exists = row.present && !row.null[0] && row.value[0][0] == 't';
    return true;
}
bool run_local_if_exists(const char* signature, const char* sql, const char* arg, StoreError* err) {
    bool exists = false;
    if (!local_function_exists(signature, &exists, err)) return false;
    if (!exists) return true;
    TextRow row;
    memset(&row, 0, sizeof(row));
    const char* args[1] = {arg};
    return run_spi(sql, 1, args, &row, err);
}
}  // namespace

bool store_issuer_start(const char* incarnation, StoreError* err) {
    return run_local_if_exists("cosid._issuer_start(uuid)",
                               "SELECT 1 FROM cosid._durable() durable, cosid._issuer_start($1::uuid) i", incarnation, err);
}

bool store_issuer_clear(StoreError* err) {
    bool exists = false;
    if (!local_function_exists("cosid._fork_reason()", &exists, err)) return false;  // 1.6: the column too
    if (!exists) return true;
    TextRow row;
    memset(&row, 0, sizeof(row));
    // After the timeline is followed: on a fork this fails (ZC009) and clears nothing.
    return run_spi("SELECT cosid._follow_timeline(NULL); "
                   "UPDATE cosid.store_state SET issuer_incarnation = NULL WHERE issuer_incarnation IS NOT NULL; "
                   "SELECT 1",
                   0, nullptr, &row, err);
}

bool store_fork_declared(char* reason, size_t size, bool* pending, StoreError* err) {
    bool exists = false;
    *pending = false;
    if (!local_function_exists("cosid._fork_reason()", &exists, err)) return false;  // (1.6: the column too)
    if (!exists) return true;
    TextRow row;
    memset(&row, 0, sizeof(row));
    if (!run_spi("SELECT min(fork_pending) FROM cosid.store_state", 0, nullptr, &row, err)) return false;
    *pending = row.present && !row.null[0];
    if (*pending) strlcpy(reason, row.value[0], size);
    return true;
}

bool store_fork_mark(const char* reason, bool* recorded, StoreError* err) {
    bool exists = false;
    if (!local_function_exists("cosid._fork_mark(text)", &exists, err)) return false;
    *recorded = exists;
    if (!exists) return true;
    TextRow row;
    memset(&row, 0, sizeof(row));
    const char* args[1] = {reason};
    return run_spi("SELECT 1 FROM cosid._durable() durable, cosid._fork_mark($1::text) f", 1, args, &row, err);
}

}  // namespace cosid::pg

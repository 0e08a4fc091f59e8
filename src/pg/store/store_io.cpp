// The transport of the keeper's store calls: SPI when the store is this instance's own
// database, libpq (non-blocking, bounded, scrubbed of secrets) when cosid.store_dsn names
// another server.  store.cpp says what each call asks; this file how it gets there.
#include "store_io.hpp"

extern "C" {
#include "datatype/timestamp.h"
#include "utils/timestamp.h"
}

extern "C" {
#include "libpq-fe.h"
}

#include <optional>
#include <string>

#include "../boundary.hpp"
#include "dsn_scrub.hpp"
#include "../errors.hpp"
#include "../settings.hpp"
#include "store_bound.hpp"
#include "store_errors.hpp"

namespace cosid::pg::store_io {

// Copies `text` into `out` (of `len` bytes) with every secret of cosid.store_dsn hidden
// (src/core/dsn_scrub): libpq echoes pieces of a connection string it cannot parse, and an
// error may quote anything.  Scrubbed whole, then truncated: a cut through a password would
// leave its start unmatched.  Every store error is formed here (set_error, the hint, the
// connection's last error), so none reaches a log line, an ereport or shared memory
// (cosid_health(), ZC006's DETAIL) with a password in it.
static void copy_scrubbed(char* out, size_t len, const char* text) {
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

void set_error(StoreError* err, const char* message, int sqlerrcode, bool outcome_unknown) {
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
// A cancel that arrived during a local call which still succeeded either came while nothing
// could take it (the commit holds interrupts: a slow flush of its WAL, the local commit done
// as configured) or was swallowed by the commit's wait for a synchronous standby, which alone
// takes a cancel without an error: it clears the pending cancel and ends with a WARNING, its
// change committed here only.  So a cancel seen through the signal (whatever
// log_min_messages says) and no longer pending is the standby's: the call counts as failed,
// with an unknown outcome; one still pending after the commit is only a slow commit.  A
// second cancel (the timer's after someone's, or the other way round) could set it pending
// again after the standby's wait took the first: so a cancel that finds an earlier one
// taken remembers that.  (Only a call that committed reads these; a cancel taken by an
// ERROR rolled the call back.)
static volatile sig_atomic_t store_cancel_seen = 0;
static volatile sig_atomic_t store_cancel_taken = 0;
static void store_cancel_handler(SIGNAL_ARGS) {
    if (store_cancel_seen && !QueryCancelPending) store_cancel_taken = 1;
    store_cancel_seen = 1;
    COSID_CALL_HANDLER(StatementCancelHandler);
}
// Which kinds of call are slow or stuck (src/core/store_bound.hpp): after a call that ran out
// of the base bound, the tries of its kind get ttl / 3 while they are answered.  (Plain
// data, zeroed: no constructor or destructor runs.)
static cosid::store_bound::Levels slow_calls;
// A call's kind: its statement and first argument (the namespace of a lease or static slot).
static uint64 call_key(const char* sql, int nargs, const char* const* args) {
    return cosid::store_bound::call_key(sql, nargs > 0 ? args[0] : nullptr);
}
static int64 call_bound_ms(uint64 key) { return cosid::store_bound::call_ms(setting_ttl_ms, slow_calls.level(key)); }
static void note_call(uint64 key, bool ran_out, bool answered, int64 took_ms) {
    slow_calls.note(key, setting_ttl_ms, ran_out, answered, took_ms);
}

static void begin_store_call() {
    store_cancel_seen = 0;
    store_cancel_taken = 0;
    pqsignal(SIGINT, store_cancel_handler);
}
static void end_store_call() {
    pqsignal(SIGINT, COSID_SIG_IGN);
    QueryCancelPending = false;
}

// --- SPI: the store is this instance's cosid.database --------------------------------
// statement_timeout is only armed by the backend's query loop, never for SPI in a worker:
// the keeper arms the same timer itself around each store transaction, so that a slow
// statement or a commit waiting for a synchronous standby ends within the bound.
// lock_timeout_ms > 0: the statement gives up on a lock after that long (SET LOCAL), for the
// keeper's background work, which must never hold up its pass behind someone's lock.
bool run_spi(const char* sql, int nargs, const char* const* args, TextRow* row, StoreError* err, const RowSink* sink,
             int lock_timeout_ms) {
    MemoryContext caller = CurrentMemoryContext;
    volatile bool ok = false;
    Oid types[kMaxCols];
    Datum values[kMaxCols];
    for (int i = 0; i < nargs; ++i) {
        types[i] = TEXTOID;
        values[i] = CStringGetTextDatum(args[i]);
    }
    SetCurrentStatementStartTimestamp();
    const int64 started = mono_ms();
    begin_store_call();
    const uint64 key = call_key(sql, nargs, args);
    enable_timeout_after(STATEMENT_TIMEOUT, static_cast<int>(call_bound_ms(key)));
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
    // A cancel (the timer's, or anyone's) that produced no error and is no longer pending was
    // taken by the commit's wait for a synchronous standby: a commit that is only local, not
    // confirmed as configured.  One still pending came while the commit held interrupts.  A
    // postmaster that died ends that wait too, with ProcDiePending and no warning.
    bool timed_out = get_timeout_indicator(STATEMENT_TIMEOUT, true);
    // (a statement the timer cancelled: ProcessInterrupts read and reset the indicator)
    const bool ran_out = timed_out || (!ok && err->sqlerrcode == ERRCODE_QUERY_CANCELED);
    const bool cancel_swallowed =
        ok && (store_cancel_taken || ((timed_out || store_cancel_seen) && !QueryCancelPending) || ProcDiePending);
    note_call(key, ran_out, ok && !cancel_swallowed, mono_ms() - started);
    if (cancel_swallowed) {
        char msg[160];
        snprintf(msg, sizeof(msg), "the store's commit was not confirmed %s (a synchronous standby did not answer)",
                 ProcDiePending ? "before the postmaster died"
                 : timed_out    ? "within the store bound"
                                : "before a cancel");
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
static PGconn* remote = nullptr;
static int64 remote_down_until = 0;    // after a timeout or a lost connection: fail fast until then
static int64 remote_call_started = 0;  // mono_ms() when the current call began
static char remote_down_error[256];
static int remote_down_code = ERRCODE_CONNECTION_FAILURE;  // and its SQLSTATE and hint
static char remote_down_hint[256];
static bool latch_seen = false;  // a latch wake-up taken while waiting on the store, to hand on
// The WARNING a store's commit sends when its wait for a synchronous standby was cancelled
// (by an administrator, or a shutdown): the change is committed on the store only, and
// such an answer is not relied on.  Recognised by the routine that raises it (the field is
// not translated); other warnings (a wraparound notice, a placeholder setting removed as
// the library loads, ...) say nothing about the commit and pass.  The keeper's session asks
// for warnings (client_min_messages) whatever its role's settings say.
static bool remote_warned = false;
static char remote_warning[200];

static void on_remote_notice(void*, const PGresult* res) {
    const char* severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    const char* routine = PQresultErrorField(res, PG_DIAG_SOURCE_FUNCTION);
    if (severity == nullptr || strcmp(severity, "WARNING") != 0) return;
    if (routine == nullptr || strcmp(routine, "SyncRepWaitForLSN") != 0) return;
    const char* primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    if (!remote_warned) copy_scrubbed(remote_warning, sizeof(remote_warning), primary ? primary : "a warning");
    remote_warned = true;
}

// Waits until the store's socket is ready for `events` or `deadline` (ms) passes.
static bool wait_remote(int events, int64 deadline) {
    for (;;) {
        int64 left = deadline - mono_ms();
        // No socket to wait on (WaitLatchOrSocket would raise an ERROR): a failed call.
        if (left <= 0 || PQsocket(remote) == PGINVALID_SOCKET) return false;
        int rc = WaitLatchOrSocket(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH | events, PQsocket(remote),
                                   left, PG_WAIT_EXTENSION);
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
static bool remote_failed(StoreError* err, const char* message, bool sent = false,
                          int code = ERRCODE_CONNECTION_FAILURE, const char* hint = nullptr) {
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
    // Fail fast for as long as the failed attempt took (a bound after a timeout, so that a
    // dead store costs one bound per pass, not one per slot), at least 200 ms: a store that
    // refused at once (a restart) is tried again soon, not a whole bound later.
    const int64 took = mono_ms() - remote_call_started;
    remote_down_until = mono_ms() + Min(store_bound_ms(), Max(took, static_cast<int64>(200)));
    if (remote != nullptr) PQfinish(remote);
    remote = nullptr;
    return false;
}

static bool connect_remote(StoreError* err) {
    // A kept connection is idle between calls: anything to read now is its server session's
    // farewell (a restart, a switchover) or the end of the stream.  Then nothing of the next
    // call would run there: it goes to a new connection instead of failing first.
    if (remote != nullptr && PQstatus(remote) == CONNECTION_OK && PQconsumeInput(remote) &&
        PQstatus(remote) == CONNECTION_OK && !PQisBusy(remote))
        return true;
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

static int sqlstate_of(const PGresult* res) {
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
    "SELECT pg_catalog.set_config('statement_timeout', $1, true), pg_catalog.set_config('lock_timeout', $2, true), "
    "pg_catalog.set_config('client_min_messages', 'warning', true)";

// exec_remote's sending: the bounds and the statement in one pipeline, flushed within the
// deadline.  False when that failed (err says why; *ran_out when the deadline passed).
static bool send_pipeline(const char* sql, int nargs, const char* const* args, int64 call_bound, int64 deadline,
                          const char* msg, StoreError* err, bool* ran_out) {
    char bound[32], lock_bound[32];
    snprintf(bound, sizeof(bound), "%d", (int)call_bound);
    snprintf(lock_bound, sizeof(lock_bound), "%d", (int)store_bound_ms());
    const char* bound_args[2] = {bound, lock_bound};
    if (!PQenterPipelineMode(remote) ||
        !PQsendQueryParams(remote, kBoundsSql, 2, nullptr, bound_args, nullptr, nullptr, 0) ||
        !PQsendQueryParams(remote, sql, nargs, nullptr, args, nullptr, nullptr, 0) || !PQpipelineSync(remote)) {
        remote_failed(err, PQerrorMessage(remote));
        return false;
    }
    for (int f; (f = PQflush(remote)) != 0;) {
        if (f < 0 || !wait_remote(WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE, deadline) || !PQconsumeInput(remote)) {
            *ran_out = mono_ms() >= deadline;
            remote_failed(err, f < 0 ? PQerrorMessage(remote) : msg, true);
            return false;
        }
    }
    return true;
}

// exec_remote's reading: every result up to the Sync's.  False when the wait failed (err says
// why; *ran_out when the deadline passed; nothing to answer); else the answer in *answer,
// whether it is an error in *answer_failed, and whether the Sync came in *synced.
static bool read_pipeline(int64 deadline, const char* msg, StoreError* err, bool* ran_out, PGresult** answer,
                          bool* answer_failed, bool* synced) {
    // The rows arrive at Execute, the commit's outcome only at Sync: an error after the
    // rows (a serialization failure, a deferred trigger, a failover) means the transaction
    // was rolled back, and the rows must not be used.  So every result up to the Sync's is
    // read, and the first error among them, if any, is the answer.
    int idle_nulls = 0;  // NULLs in a row with nothing busy: libpq has nothing more to give
    while (!*synced && PQstatus(remote) == CONNECTION_OK && idle_nulls < 4) {
        while (PQisBusy(remote)) {
            if (!wait_remote(WL_SOCKET_READABLE, deadline)) {
                PQclear(*answer);
                *answer = nullptr;
                *ran_out = mono_ms() >= deadline;
                remote_failed(err, msg, true);
                return false;
            }
            if (!PQconsumeInput(remote)) {
                PQclear(*answer);
                *answer = nullptr;
                remote_failed(err, PQerrorMessage(remote), true);
                return false;
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
            *synced = true;
            PQclear(res);
            continue;
        }
        // A statement skipped after an earlier error (PIPELINE_ABORTED) carries no words of
        // its own: the earlier error stays the answer.
        bool failed = st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK;
        if (!*answer_failed && (failed || *answer == nullptr || st == PGRES_TUPLES_OK)) {
            PQclear(*answer);
            *answer = res;
            *answer_failed = failed;
        } else {
            PQclear(res);
        }
    }
    return true;
}

// Sends the bounds and one statement in one pipeline, one Sync: one round trip and one
// (implicit) transaction, which PostgreSQL arms the statement timer for again at each
// message, so the statement runs under the bound set just before it.  Unnamed statements
// only: none outlives the transaction (PgBouncer 1.18 keeps no prepared statements).
// Waits at most the statement's bound plus the base bound: the server's own timeout answers
// first while it is alive.  Past that wait the call ran out as much as on the server's
// timeout (a commit, which the server's statement_timeout does not cover, or a store that
// does not answer): either makes its kind slow, or stuck (src/core/store_bound.hpp).
// Returns the first failed result, else the statement's; *ran_out says whether the wait ended.
static PGresult* exec_remote(const char* sql, int nargs, const char* const* args, uint64 key, StoreError* err,
                             bool* ran_out) {
    // The statement's bound grows for a slow kind of call (src/core/store_bound.hpp); a lock
    // wait's does not (waiting longer for someone's lock is no cure), nor what the client
    // waits beyond the server's own timeout (a store that does not answer at all).
    const int64 call_bound = call_bound_ms(key);
    const int64 wait_ms = call_bound + store_bound_ms();
    int64 deadline = mono_ms() + wait_ms;
    char msg[256];
    snprintf(msg, sizeof(msg), "the lease store did not answer within %d ms", (int)wait_ms);
    if (!send_pipeline(sql, nargs, args, call_bound, deadline, msg, err, ran_out)) return nullptr;
    PGresult* answer = nullptr;
    bool answer_failed = false;
    bool synced = false;
    if (!read_pipeline(deadline, msg, err, ran_out, &answer, &answer_failed, &synced)) return nullptr;
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

// After exec_remote: did the call fail only because the connection's server session was gone
// before it (see run_libpq), so that nothing of it ran?
static bool remote_session_gone(const PGresult* res, const StoreError* err) {
    if (res == nullptr) return !err->outcome_unknown && remote == nullptr;  // the send failed: nothing left
    if (PQresultStatus(res) != PGRES_FATAL_ERROR || (remote != nullptr && PQstatus(remote) == CONNECTION_OK))
        return false;
    const char* state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    return state != nullptr &&
           (strcmp(state, "57P01") == 0 || strcmp(state, "57P02") == 0 || strcmp(state, "57P03") == 0);
}

static bool run_libpq(const char* sql, int nargs, const char* const* args, TextRow* row, StoreError* err,
                      const RowSink* sink = nullptr) {
    if (remote == nullptr && mono_ms() < remote_down_until) {
        set_error(err, remote_down_error, remote_down_code);
        if (remote_down_hint[0] != '\0') strlcpy(err->hint, remote_down_hint, sizeof(err->hint));
        return false;
    }
    latch_seen = false;
    const uint64 key = call_key(sql, nargs, args);
    bool ran_out = false;  // its bound passed: the wait's end, or the store's statement timeout
    begin_store_call();
    pgstat_report_activity(STATE_RUNNING, sql);
    remote_call_started = mono_ms();
    int64 exec_started = remote_call_started;
    bool ok = false;
    // A connection kept from an earlier call may have lost its server since (a restart, a
    // switchover): the first thing it reads is then the old session's farewell (57P01-57P03,
    // a FATAL: nothing of this call ran), or its send fails before anything left.  Such a call
    // is made again at once on a new connection, instead of taking the store for down for a
    // bound (the keeper's renewal came ~6 s late after a one-second restart).
    bool reused = remote != nullptr && PQstatus(remote) == CONNECTION_OK;
    for (int attempt = 0; attempt < 2 && connect_remote(err); ++attempt) {
        remote_warned = false;
        exec_started = mono_ms();  // (how long the store took: without connecting)
        PGresult* res = exec_remote(sql, nargs, args, key, err, &ran_out);
        // (not after a warning that a commit's wait for a standby was cut short: that one ran)
        if (reused && attempt == 0 && !remote_warned && remote_session_gone(res, err)) {
            PQclear(res);
            if (remote != nullptr) PQfinish(remote);
            remote = nullptr;
            remote_down_until = 0;
            reused = false;
            continue;
        }
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
            if (err->sqlerrcode == ERRCODE_QUERY_CANCELED) ran_out = true;  // the bound set on the store
            if (const char* hint = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT))
                set_hint(err, hint);  // the store's own advice, for the caller
            if (PQstatus(remote) != CONNECTION_OK) remote_failed(err, err->message, !answered);
        }
        PQclear(res);
        break;
    }
    end_store_call();
    note_call(key, ran_out, ok, mono_ms() - exec_started);
    pgstat_report_activity(STATE_IDLE, nullptr);
    if (latch_seen) SetLatch(MyLatch);
    return ok;
}

CallObserver call_observer = nullptr;  // who counts the calls (set_call_observer)

// Runs one statement in a transaction of its own and reads its first row, if any, with
// `reader`.  Every mutation joins cosid._durable(), which makes its commit synchronous
// whatever the store's synchronous_commit (see the SQL script), locally and remotely alike.  Errors (a lock timeout, a lost connection, a missing table, ...) are
// returned, so a failing store never takes the keeper down.
bool run(const char* sql, int nargs, const char* const* args, RowReader reader, StoreResult* out, StoreError* err,
         const RowSink* sink) {
    TextRow row;
    memset(&row, 0, sizeof(row));
    memset(out, 0, sizeof(*out));
    err->outcome_unknown = false;
    bool ok =
        store_is_remote() ? run_libpq(sql, nargs, args, &row, err, sink) : run_spi(sql, nargs, args, &row, err, sink);
    if (ok && row.present && reader != nullptr) reader(row, out);
    out->row = row.present;
    if (call_observer != nullptr) call_observer(ok);
    return ok;
}

void set_call_observer(CallObserver observer) { call_observer = observer; }

}  // namespace cosid::pg::store_io

namespace cosid::pg {

void store_disconnect() {
    using namespace store_io;
    if (remote != nullptr) PQfinish(remote);
    remote = nullptr;
    remote_down_until = 0;
}

void store_bound_reset() { store_io::slow_calls.reset(); }

}  // namespace cosid::pg

// The keeper's client of the lease store.  The store is either this instance's own
// database (SPI) or, with cosid.store_dsn, another PostgreSQL server shared by several
// instances (libpq).  Both run the same SQL, with text parameters, one transaction per
// mutation, and hand back the first row as text, so one set of readers serves both.
#include "store.hpp"

#include <stdlib.h>

#include "citus.hpp"
#include "../errors.hpp"
#include "../settings.hpp"
#include "slot_range.hpp"
#include "store_bound.hpp"
#include "store_io.hpp"

namespace cosid::pg {

using namespace store_io;

namespace {

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
    if (r.row && static_cast<uint64>(r.fence) == GetSystemIdentifier() &&
        (r.expires_at - started_unix_us <= 1 && started_unix_us - r.expires_at <= 1)) {
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

// The columns of an acquire's answer row (read_acquire), from its result `a` and its
// namespace's row `n`.  A store before 1.5 has no slot_range: read through jsonb, NULL there.
// The store that granted it (cosid.history): its record's id, newest first (a store before
// 1.4 has none: NULL).
#define ACQUIRE_COLUMNS                                                                                \
    "SELECT a.slot, a.fence, a.expires_at, a.floor, a.ceiling, a.next_floor, a.store_now, "            \
    "a.duplicate_key, a.earliest_expiry, n.timestamp_bits, n.slot_bits, n.sequence_bits, n.epoch_ms, " \
    "CASE n.unit WHEN 's' THEN 1000 ELSE 1 END, n.tolerance_ms, "                                      \
    "pg_catalog.to_jsonb(n) OPERATOR(pg_catalog.->>) 'slot_range', "                                   \
    "(SELECT pg_catalog.to_jsonb(s) OPERATOR(pg_catalog.->>) 'store_id' FROM cosid.store_state s "     \
    "ORDER BY pg_catalog.to_jsonb(s) OPERATOR(pg_catalog.->>) 'created_at' DESC LIMIT 1) "

bool store_acquire(const char* ns, const char* owner_key, const char* incarnation, int64 ttl_ms, int preferred,
                   StoreResult* out, StoreError* err) {
    char ttl[32], pref[32];
    snprintf(ttl, sizeof(ttl), INT64_FORMAT, ttl_ms);
    snprintf(pref, sizeof(pref), "%d", preferred);
    const char* args[5] = {ns, owner_key, incarnation, ttl, pref};
    return run(ACQUIRE_COLUMNS "FROM cosid._durable() durable, "
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
    out->raised_at_ms = get_int64(r, 1, 0);
    out->max_tolerance_ms = get_int64(r, 2, 0);
    out->found = true;
}
}  // namespace

bool store_raised_at(int64* raised_at_ms, int64* max_tolerance_ms, StoreError* err) {
    StoreResult r;
    memset(&r, 0, sizeof(r));
    // (raised_at_ms: a store of cosid 1.3 or later)
    if (!run("SELECT pg_catalog.max(raised_at_ms), pg_catalog.max(max_tolerance_ms) FROM cosid.store_state", 0, nullptr,
             read_raised_at, &r, err))
        return false;
    *raised_at_ms = r.row ? r.raised_at_ms : 0;
    *max_tolerance_ms = r.row ? r.max_tolerance_ms : 0;
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
// One element of an array literal, quoted: ',' before every element but the first.
void append_array_element(StringInfo out, int k, const char* value) {
    if (k > 0) appendStringInfoChar(out, ',');
    appendStringInfoChar(out, '"');
    for (const char* c = value; *c != '\0'; ++c) {
        if (*c == '"' || *c == '\\') appendStringInfoChar(out, '\\');
        appendStringInfoChar(out, *c);
    }
    appendStringInfoChar(out, '"');
}

const char* array_literal(int n, const char* (*element)(const LeaseCall&, char* buf), const LeaseCall* calls) {
    StringInfoData out;
    initStringInfo(&out);
    appendStringInfoChar(&out, '{');
    char buf[32];
    for (int k = 0; k < n; ++k) append_array_element(&out, k, element(calls[k], buf));
    appendStringInfoChar(&out, '}');
    return out.data;
}

// The answers of a call for several leases: results[k] for the k-th (ord k + 1).
struct OrdinalRows {
    StoreResult* results;
    int n;
};

// The answer a row of such a call is for, its ordinal in column `col` (1-based), marked as
// answered; nullptr for an ordinal outside the call.
StoreResult* row_for_ordinal(void* ctx, const TextRow& r, int col) {
    OrdinalRows* rows = static_cast<OrdinalRows*>(ctx);
    int ord = get_int32(r, col, 0);
    if (ord < 1 || ord > rows->n) return nullptr;
    StoreResult* out = &rows->results[ord - 1];
    out->row = true;
    return out;
}

// One row per lease the store still held for us (renewed, or released): ord (1-based), then
// the columns of cosid.renew; a lease without a row was lost, as with store_renew/release.
void take_pass_row(void* ctx, const TextRow& r) {
    if (StoreResult* out = row_for_ordinal(ctx, r, 1)) read_lease_columns(r, 2, out);  // after the ordinal
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
        array_literal(
            n, [](const LeaseCall& c, char*) -> const char* { return c.release ? "t" : "f"; }, calls),
        array_literal(
            n, [](const LeaseCall& c, char*) -> const char* { return c.ns; }, calls),
        array_literal(
            n,
            [](const LeaseCall& c, char* b) -> const char* {
                snprintf(b, 32, "%d", c.slot);
                return b;
            },
            calls),
        array_literal(
            n,
            [](const LeaseCall& c, char* b) -> const char* {
                snprintf(b, 32, INT64_FORMAT, c.fence);
                return b;
            },
            calls),
        array_literal(
            n,
            [](const LeaseCall& c, char* b) -> const char* {
                snprintf(b, 32, INT64_FORMAT, c.release ? c.last_issued : 0);
                return b;
            },
            calls),
    };
    OrdinalRows rows{results, n};
    RowSink sink{take_pass_row, &rows};
    StoreResult first;
    return run("SELECT ord, slot, fence, expires_at, floor, ceiling, next_floor, store_now "
               "FROM cosid._durable() durable, "
               "cosid.lease_pass($1::uuid, $2::bigint, $3::bool[], $4::text[], $5::int[], $6::bigint[], $7::bigint[])",
               7, args, nullptr, &first, err, &sink);
}

namespace {
// One row per acquire of the batch: the columns of store_acquire's answer, then its ordinal.
void take_acquire_row(void* ctx, const TextRow& r) {
    if (StoreResult* out = row_for_ordinal(ctx, r, 18)) read_acquire(r, out);
}
}  // namespace

bool store_acquire_many(const char* const* namespaces, int n, const char* owner_key, const char* incarnation,
                        int64 ttl_ms, int preferred, StoreResult* results, StoreError* err) {
    memset(results, 0, sizeof(StoreResult) * n);
    StringInfoData list;
    initStringInfo(&list);
    appendStringInfoChar(&list, '{');
    for (int k = 0; k < n; ++k) append_array_element(&list, k, namespaces[k]);
    appendStringInfoChar(&list, '}');
    char ttl[32], pref[32];
    snprintf(ttl, sizeof(ttl), INT64_FORMAT, ttl_ms);
    snprintf(pref, sizeof(pref), "%d", preferred);
    const char* args[5] = {list.data, owner_key, incarnation, ttl, pref};
    OrdinalRows rows{results, n};
    RowSink sink{take_acquire_row, &rows};
    StoreResult first;
    return run(ACQUIRE_COLUMNS ", a.ord "
                               "FROM cosid._durable() durable, "
                               "cosid.acquire_many($1::text[], $2::text, $3::uuid, $4::bigint, nullif($5::int, -1)) a "
                               "LEFT JOIN cosid.namespace n ON n.name = a.namespace",
               5, args, nullptr, &first, err, &sink);
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
    out->next_floor = get_int64(r, 8, 0);  // other live incarnations with this owner key
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
        snprintf(msg, sizeof(msg),
                 "the lease store states slot range \"%s\" for namespace \"%s\", no range of its %d slot bits",
                 layout.slot_range, ns, layout.slot_bits);
        set_error(err, msg, ERRCODE_DATA_CORRUPTED);
        return false;
    }
    std::string store_text = store->text();
    const char* args[2] = {ns, layout.slot_range};  // "": no range stated, nothing to keep
    TextRow row;
    memset(&row, 0, sizeof(row));
    if (!run_spi("SELECT cosid._namespace_range_seen($1::text, nullif($2::text, '')::int4range)::text", 2, args, &row,
                 err)) {
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
    if (!run_spi(
            "SELECT count(*) FROM pg_catalog.jsonb_to_recordset($1::jsonb) AS m(ns text, slot int, ceiling bigint) "
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

// --- the store's own server (src/pg/keeper/fork.cpp): a local store only, through SPI ----------
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
                               "SELECT 1 FROM cosid._durable() durable, cosid._issuer_start($1::uuid) i", incarnation,
                               err);
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

bool store_fork_check(const char* forks, char* reason, size_t size, bool* pending, bool* checked, StoreError* err) {
    *pending = false;
    *checked = false;
    bool exists = false;
    if (!local_function_exists("cosid._fork_check(text)", &exists, err)) return false;
    if (!exists) return true;  // a catalog before 1.7: the caller decides
    *checked = true;
    TextRow row;
    memset(&row, 0, sizeof(row));
    const char* args[1] = {forks};
    if (!run_spi("SELECT f FROM cosid._durable() durable, cosid._fork_check($1::text) f", 1, args, &row, err))
        return false;
    *pending = row.present && !row.null[0];
    if (*pending) strlcpy(reason, row.value[0], size);
    return true;
}

bool store_fork_mark(const char* id, const char* reason, bool* recorded, StoreError* err) {
    bool exists = false;
    // A 1.7 catalog declares it by its id, unless acknowledged there (a restored => true
    // declaration acknowledged before the keeper took its file is not declared again).
    if (!local_function_exists("cosid._fork_check(text)", &exists, err)) return false;
    if (exists) {
        *recorded = true;
        char line[600];
        snprintf(line, sizeof(line), "%s\t%s\n", id, reason);
        TextRow row;
        memset(&row, 0, sizeof(row));
        const char* args[1] = {line};
        return run_spi("SELECT 1 FROM cosid._durable() durable, cosid._fork_check($1::text) f", 1, args, &row, err);
    }
    if (!local_function_exists("cosid._fork_mark(text)", &exists, err)) return false;
    *recorded = exists;
    if (!exists) return true;
    TextRow row;
    memset(&row, 0, sizeof(row));
    const char* args[1] = {reason};
    return run_spi("SELECT 1 FROM cosid._durable() durable, cosid._fork_mark($1::text) f", 1, args, &row, err);
}

}  // namespace cosid::pg

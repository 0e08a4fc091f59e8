// The SQL-callable functions.  Each is a thin fmgr wrapper: argument checks with clear
// errors, then the generator, the pool or the pure core (through cpp_call).
#include "../boundary.hpp"
#include "../errors.hpp"
#include "generator.hpp"
#include "issue_word.hpp"
#include "layout.hpp"
#include "../settings.hpp"
#include "../shmem/state.hpp"
#include "../keeper/static_keeper.hpp"
#include "../store/store.hpp"

using namespace cosid;
using namespace cosid::pg;

extern "C" {
PG_FUNCTION_INFO_V1(cosid_next_default);
PG_FUNCTION_INFO_V1(cosid_next_namespace);
PG_FUNCTION_INFO_V1(cosid_pool);
PG_FUNCTION_INFO_V1(cosid_stats);
PG_FUNCTION_INFO_V1(cosid_release_own);
PG_FUNCTION_INFO_V1(cosid_release_slot);
PG_FUNCTION_INFO_V1(cosid_layout_check);
PG_FUNCTION_INFO_V1(cosid_unpack);
PG_FUNCTION_INFO_V1(cosid_store_clock_offset);
PG_FUNCTION_INFO_V1(cosid_static_slot);
}

namespace {

// The slots this backend released in its current transaction, with the answer it gave.  A
// second call for one of them answers the same instead of revoking the slot: after a raise
// a freed lease and its successor share a slot, so a release over the rows of cosid_pool()
// names it twice, and by the second call the store may have granted it to another server.
// (A transaction is known by its start time: the backend's next one starts later.)
struct ReleasedSlot {
    char ns[NAMEDATALEN];
    int32 slot;
    bool pending;
};
constexpr int kReleasedSlots = 64;
ReleasedSlot released_slots[kReleasedSlots];
int released_count = 0;
TimestampTz released_in_xact = 0;

const ReleasedSlot* released_before(const char* ns, int32 slot) {
    if (released_in_xact != GetCurrentTransactionStartTimestamp()) return nullptr;
    for (int i = 0; i < released_count; ++i)
        if (released_slots[i].slot == slot && strcmp(released_slots[i].ns, ns) == 0) return &released_slots[i];
    return nullptr;
}

void remember_released(const char* ns, int32 slot, bool pending) {
    if (released_in_xact != GetCurrentTransactionStartTimestamp()) {
        released_in_xact = GetCurrentTransactionStartTimestamp();
        released_count = 0;
    }
    if (released_count == kReleasedSlots) return;  // (more in one transaction: not remembered)
    ReleasedSlot* r = &released_slots[released_count++];
    strlcpy(r->ns, ns, sizeof(r->ns));
    r->slot = slot;
    r->pending = pending;
}

struct LayoutArgs {
    int timestamp_bits, slot_bits, sequence_bits;
    int64 epoch_ms;
    char unit[16];
};

// Validates with the core (only the bit widths and the epoch when `bits_only`: a layout
// made under older rules still reads); the message is copied out before any ereport.
bool layout_from(const LayoutArgs& a, Layout* out, char* message, size_t len, bool bits_only = false) {
    return cpp_call([&]() -> bool {
        Layout l;
        l.timestamp_bits = a.timestamp_bits;
        l.slot_bits = a.slot_bits;
        l.sequence_bits = a.sequence_bits;
        l.epoch_ms = a.epoch_ms;
        auto unit = parse_unit(a.unit);
        if (!unit) {
            snprintf(message, len, "unit must be 'ms' or 's', got '%s'", a.unit);
            return false;
        }
        l.unit = *unit;
        if (auto e = bits_only ? l.validate_readable() : l.validate()) {
            strlcpy(message, e->c_str(), len);
            return false;
        }
        *out = l;
        return true;
    });
}

void read_layout_args(FunctionCallInfo fcinfo, LayoutArgs* a) {
    for (int i = 0; i < 5; ++i)
        if (PG_ARGISNULL(i))
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("cosid layout values must not be NULL")));
    a->timestamp_bits = PG_GETARG_INT32(0);
    a->slot_bits = PG_GETARG_INT32(1);
    a->sequence_bits = PG_GETARG_INT32(2);
    a->epoch_ms = PG_GETARG_INT64(3);
    char* unit = text_to_cstring(PG_GETARG_TEXT_PP(4));
    strlcpy(a->unit, unit, sizeof(a->unit));
}

const char* entry_state_name(const PoolEntry& e, uint64 word) {
    switch (e.state) {
    case kWanted: return "wanted";
    case kAcquiring: return "acquiring";
    case kDraining: return "ended";
    case kLeased:
        if (e.releasing || e.release_requested || issue_word::closed(word)) return "releasing";
        if (e.raised_out) return "freed";
        return "active";
    default: return "empty";
    }
}

}  // namespace

extern "C" Datum cosid_next_default(PG_FUNCTION_ARGS) {
    require_preloaded("cosid_next");
    PG_RETURN_INT64(next_id_default());
}

extern "C" Datum cosid_next_namespace(PG_FUNCTION_ARGS) {
    require_preloaded("cosid_next");
    if (PG_ARGISNULL(0))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("cosid namespace must not be NULL")));
    char* ns = text_to_cstring(PG_GETARG_TEXT_PP(0));
    int64 id = next_id(ns);
    pfree(ns);
    PG_RETURN_INT64(id);
}

extern "C" Datum cosid_pool(PG_FUNCTION_ARGS) {
    require_preloaded("cosid_pool");
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    InitMaterializedSRF(fcinfo, 0);
    int n = shared->npool;
    PoolEntry* copy = static_cast<PoolEntry*>(palloc(sizeof(PoolEntry) * n));
    LWLockAcquire(shared->lock, LW_SHARED);
    memcpy(copy, shared->pool, sizeof(PoolEntry) * n);
    LWLockRelease(shared->lock);
    for (int i = 0; i < n; ++i) {
        const PoolEntry& e = copy[i];
        if (e.state == kEmpty) continue;
        uint64 word = pg_atomic_read_u64(const_cast<pg_atomic_uint64*>(&e.word));
        Layout layout = entry_layout(e);
        Datum v[11];
        bool nulls[11] = {false};
        v[0] = CStringGetTextDatum(e.ns);
        bool leased = e.state == kLeased;
        v[1] = Int32GetDatum(e.slot);
        v[2] = Int64GetDatum(e.fence);
        v[3] = Int64GetDatum(e.floor);
        v[4] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(const_cast<pg_atomic_uint64*>(&e.ceiling))));
        v[5] = TimestampTzGetDatum(ms_to_timestamptz(e.expires_at));
        for (int c = 1; c <= 5; ++c) nulls[c] = !leased;
        v[6] = Int32GetDatum(e.users);
        nulls[6] = !leased;
        bool issued = leased && issue_word::issued(word);
        if (issued) {
            int64 tick = issue_word::tick(layout, word);
            v[7] = Int64GetDatum(tick * layout.unit_ms());
            v[8] = Int64GetDatum(layout.pack(tick, e.slot, issue_word::sequence(layout, word)));
        }
        nulls[7] = nulls[8] = !issued;
        v[9] = CStringGetTextDatum(entry_state_name(e, word));
        v[10] = CStringGetTextDatum(leased && e.is_static ? "static" : static_slot_for(e.ns) >= 0 ? "static" : "lease");
        if (leased && e.is_static) nulls[2] = nulls[5] = true;  // no fence, no expiry: no store
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
    }
    return (Datum)0;
}

extern "C" Datum cosid_stats(PG_FUNCTION_ARGS) {
    require_preloaded("cosid_stats");
    flush_issued_count();
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        elog(ERROR, "return type must be a row type");
    desc = BlessTupleDesc(desc);
    Stats* s = &shared->stats;
    pg_atomic_uint64* counters[] = {
        &s->acquires,          &s->renewals,         &s->renewal_failures, &s->leases_lost, &s->duplicate_owner_keys,
        &s->clock_skew_events, &s->waits_at_ceiling, &s->ids_issued,       &s->releases,    &s->store_transactions};
    Datum v[18];
    bool nulls[18] = {false};
    int c = 0;
    for (pg_atomic_uint64* counter : counters) v[c++] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(counter)));
    v[c++] = CStringGetTextDatum(shared->owner_key);
    pg_uuid_t* uuid = static_cast<pg_uuid_t*>(palloc(sizeof(pg_uuid_t)));
    memcpy(uuid, &shared->incarnation_uuid, sizeof(pg_uuid_t));
    v[c++] = UUIDPGetDatum(uuid);
    v[c++] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&s->store_failovers)));
    // Static slots: the state file, and whether anything guards them against the clock
    // moving back across a restart (NULL: no static slots).
    bool any_static = static_slots_configured();
    bool file = static_state_file_configured();
    nulls[c] = !any_static || !file;
    v[c++] = CStringGetTextDatum(state_file_path());
    nulls[c] = !any_static;
    v[c++] = BoolGetDatum(file);
    v[c++] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&s->static_writes)));
    v[c++] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&s->static_write_failures)));
    // (1.6; an older script's row type has no such column, and heap_form_tuple reads only
    // the columns of the row type)
    v[c++] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&s->leases_freed)));
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, v, nulls)));
}

extern "C" Datum cosid_release_own(PG_FUNCTION_ARGS) {
    require_preloaded("cosid_release");
    // The leases are the instance's, shared by every backend: releasing them is an
    // administrator's act, like releasing a named slot.
    require_admin("release cosid leases");
    PG_RETURN_INT32(release_own_leases());
}

extern "C" Datum cosid_release_slot(PG_FUNCTION_ARGS) {
    require_preloaded("cosid_release");
    require_admin("release cosid slots");
    if (PG_ARGISNULL(0))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("cosid_release: namespace must not be NULL")));
    // A row of cosid_pool() without a slot is a request for a lease (after a raise, often a
    // successor's): nothing to release, so a release over cosid_pool()'s rows passes over it.
    if (PG_ARGISNULL(1)) PG_RETURN_NULL();
    char* ns = text_to_cstring(PG_GETARG_TEXT_PP(0));
    int32 slot = PG_GETARG_INT32(1);
    if (const ReleasedSlot* r = released_before(ns, slot))
        PG_RETURN_TEXT_P(cstring_to_text(r->pending ? "release pending" : "released"));

    // A slot of this instance: the keeper releases it in order, with the exact last timestamp
    // of its issue word; its backends move on to the instance's next lease.
    int* entries = static_cast<int*>(palloc(sizeof(int) * shared->npool));
    uint64* generations = static_cast<uint64*>(palloc(sizeof(uint64) * shared->npool));
    int count = 0;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    for (int i = 0; i < shared->npool; ++i) {
        PoolEntry* e = &shared->pool[i];
        if (e->state != kLeased || e->slot != slot || strcmp(e->ns, ns) != 0) continue;
        // (several after raises: the freed leases going on to their ceilings, and the
        // successor; all of them, or the successor could stay held while this says released)
        e->release_requested = true;
        entries[count] = i;
        generations[count++] = pg_atomic_read_u64(&e->generation);
    }
    LWLockRelease(shared->lock);
    if (count > 0) {
        wake_keeper();
        bool released = wait_for_releases(entries, generations, count);
        remember_released(ns, slot, !released);
        PG_RETURN_TEXT_P(cstring_to_text(released ? "released" : "release pending"));
    }

    // Another owner's slot (or a stale one of ours): revoke it in the store; the next holder
    // starts at its ceiling.  Only where the store is: this database's lease table is not the
    // store when the store is remote or in another database.
    if (store_is_remote() || !in_store_database())
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("slot %d of cosid namespace \"%s\" is not held by this instance, and the lease store "
                               "is not here",
                               slot, ns),
                        errdetail("Revoking another owner's slot is a change to the store; the store is %s.",
                                  store_is_remote() ? "on another server (cosid.store_dsn)" : "in cosid.database"),
                        errhint("On the store, as a superuser or member of cosid_admin, run: "
                                "SELECT * FROM cosid.revoke('%s', %d);",
                                ns, slot)));
    Oid types[2] = {TEXTOID, INT4OID};
    Datum values[2] = {CStringGetTextDatum(ns), Int32GetDatum(slot)};
    SPI_connect();
    int rc = SPI_execute_with_args("SELECT slot FROM cosid.revoke($1, $2)", 2, types, values, nullptr, false, 1);
    bool revoked = rc == SPI_OK_SELECT && SPI_processed > 0;
    SPI_finish();
    PG_RETURN_TEXT_P(cstring_to_text(revoked ? "revoked" : "not held"));
}

extern "C" Datum cosid_layout_check(PG_FUNCTION_ARGS) {
    LayoutArgs a;
    read_layout_args(fcinfo, &a);
    Layout l;
    char message[256];
    if (!layout_from(a, &l, message, sizeof(message)))
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("invalid cosid layout: %s", message),
                 errdetail("Layout: %d timestamp, %d slot and %d sequence bits, epoch %lld ms, unit %s.",
                           a.timestamp_bits, a.slot_bits, a.sequence_bits, static_cast<long long>(a.epoch_ms), a.unit),
                 errhint("slot_bits is 1 to 16, sequence_bits 1 to 22, timestamp bits (total_bits, 63 unless "
                         "given, minus both) 31 to 60, and the timestamps end before 294277: at most 53 bits of "
                         "ms or 43 of seconds from a recent epoch.")));
    PG_RETURN_VOID();
}

extern "C" Datum cosid_unpack(PG_FUNCTION_ARGS) {
    int64 id = PG_GETARG_INT64(0);
    LayoutArgs a;
    a.timestamp_bits = PG_GETARG_INT32(1);
    a.slot_bits = PG_GETARG_INT32(2);
    a.sequence_bits = PG_GETARG_INT32(3);
    a.epoch_ms = PG_GETARG_INT64(4);
    strlcpy(a.unit, text_to_cstring(PG_GETARG_TEXT_PP(5)), sizeof(a.unit));
    require_cosid_id(id);
    Layout l;
    char message[256];
    if (!layout_from(a, &l, message, sizeof(message), true))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("invalid cosid layout: %s", message)));
    if (!l.id_fits(id))
        ereport(ERROR, (errcode(COSID_OUT_OF_RANGE),
                        errmsg("%lld is not an id of a %d-bit layout", static_cast<long long>(id), l.total_bits())));
    Unpacked u = cpp_call([&] { return l.unpack(id); });
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        elog(ERROR, "return type must be a row type");
    desc = BlessTupleDesc(desc);
    std::optional<int64_t> ms = l.tick_ms(u.tick);
    if (!ms)
        ereport(ERROR, (errcode(COSID_OUT_OF_RANGE),
                        errmsg("the time of id %lld is past PostgreSQL's last timestamp", static_cast<long long>(id))));
    Datum v[3] = {Int64GetDatum(*ms), Int32GetDatum(u.slot), Int32GetDatum(u.sequence)};
    bool nulls[3] = {false, false, false};
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, v, nulls)));
}

// The C variable, not current_setting(): see cosid._store_clock_offset in the SQL script.
extern "C" Datum cosid_store_clock_offset(PG_FUNCTION_ARGS) { PG_RETURN_INT64(setting_store_clock_offset_ms); }

// cosid._static_slot(namespace): the static slot this instance gives it, NULL when it leases
// from the store (or the library is not preloaded: no settings).
extern "C" Datum cosid_static_slot(PG_FUNCTION_ARGS) {
    if (PG_ARGISNULL(0) || shared == nullptr) PG_RETURN_NULL();
    char* ns = text_to_cstring(PG_GETARG_TEXT_PP(0));
    int32 slot = static_slot_for(ns);
    if (slot < 0) PG_RETURN_NULL();
    PG_RETURN_INT32(slot);
}

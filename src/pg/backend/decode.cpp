// Reading ids: cosid_parse, cosid_timestamp, cosid_slot, cosid_sequence, the id range of a
// timestamp (cosid_min_id, cosid_max_id), the base-62 text form and the form for people
// (cosid_format, cosid_from_format).  The namespace's layout
// is read from this database's cosid.namespace once per transaction and call site (kept in
// fn_extra): a namespace's layout never changes, and one deleted and made again with
// another layout is seen by the next transaction.  Decoding a million ids then costs a
// compare of the namespace name per id, not a query.
#include "../boundary.hpp"
#include "../errors.hpp"
#include "id_text.hpp"
#include "layout.hpp"
#include "../settings.hpp"

using namespace cosid;
using namespace cosid::pg;

extern "C" {
PG_FUNCTION_INFO_V1(cosid_parse_c);
PG_FUNCTION_INFO_V1(cosid_timestamp);
PG_FUNCTION_INFO_V1(cosid_slot);
PG_FUNCTION_INFO_V1(cosid_sequence);
PG_FUNCTION_INFO_V1(cosid_min_id);
PG_FUNCTION_INFO_V1(cosid_max_id);
PG_FUNCTION_INFO_V1(cosid_to_text);
PG_FUNCTION_INFO_V1(cosid_from_text);
PG_FUNCTION_INFO_V1(cosid_format);
PG_FUNCTION_INFO_V1(cosid_from_format);
}

namespace {

struct CachedLayout {
    char ns[NAMEDATALEN];
    int ns_len;
    LocalTransactionId lxid;
    Layout layout;
    TupleDesc desc;  // cosid_parse's result row, blessed once per call site
};
static_assert(std::is_trivially_destructible_v<CachedLayout>, "lives in fn_extra");

// The layout of the namespace in argument `arg` (NULL: an error), cached for the call site.
const Layout& layout_arg(FunctionCallInfo fcinfo, int arg) {
    if (PG_ARGISNULL(arg))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("cosid namespace must not be NULL")));
    text* t = PG_GETARG_TEXT_PP(arg);
    const char* name = VARDATA_ANY(t);
    int len = VARSIZE_ANY_EXHDR(t);
    auto* c = static_cast<CachedLayout*>(fcinfo->flinfo->fn_extra);
    if (c != nullptr && c->lxid == COSID_MY_LXID() && c->ns_len == len && memcmp(c->ns, name, len) == 0)
        return c->layout;
    if (len == 0 || len >= NAMEDATALEN)
        ereport(ERROR,
                (errcode(ERRCODE_UNDEFINED_OBJECT), errmsg("cosid namespace \"%.*s\" does not exist", len, name)));
    char ns[NAMEDATALEN];
    memcpy(ns, name, len);
    ns[len] = '\0';
    Oid types[1] = {TEXTOID};
    Datum values[1] = {CStringGetTextDatum(ns)};
    SPI_connect();
    int rc = SPI_execute_with_args("SELECT timestamp_bits, slot_bits, sequence_bits, epoch_ms, unit = 's' "
                                   "FROM cosid.namespace WHERE name = $1",
                                   1, types, values, nullptr, true, 1);
    bool found = rc == SPI_OK_SELECT && SPI_processed > 0;
    Layout l;
    if (found) {
        bool isnull;
        HeapTuple row = SPI_tuptable->vals[0];
        TupleDesc desc = SPI_tuptable->tupdesc;
        l.timestamp_bits = DatumGetInt32(SPI_getbinval(row, desc, 1, &isnull));
        l.slot_bits = DatumGetInt32(SPI_getbinval(row, desc, 2, &isnull));
        l.sequence_bits = DatumGetInt32(SPI_getbinval(row, desc, 3, &isnull));
        l.epoch_ms = DatumGetInt64(SPI_getbinval(row, desc, 4, &isnull));
        l.unit = DatumGetBool(SPI_getbinval(row, desc, 5, &isnull)) ? Unit::Second : Unit::Millisecond;
    }
    SPI_finish();
    if (!found)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT), errmsg("cosid namespace \"%s\" does not exist", ns),
                        errhint("Create it with cosid_namespace_create('%s').", ns)));
    // The table's CHECK keeps the bits and epoch in range; this keeps a row edited past it
    // (the CHECK dropped) from shifting by 64 or more.
    char invalid[256] = "";
    cpp_call([&] {
        if (auto e = l.validate_readable()) strlcpy(invalid, e->c_str(), sizeof(invalid));
    });
    if (invalid[0] != '\0')
        ereport(ERROR, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
                        errmsg("cosid namespace \"%s\" has an invalid layout: %s", ns, invalid)));
    if (c == nullptr) {
        c = static_cast<CachedLayout*>(MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(CachedLayout)));
        fcinfo->flinfo->fn_extra = c;
    }
    memcpy(c->ns, name, len);
    c->ns_len = len;
    c->lxid = COSID_MY_LXID();
    c->layout = l;
    return c->layout;
}

int64 id_arg(FunctionCallInfo fcinfo) {
    if (PG_ARGISNULL(0)) ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("cosid id must not be NULL")));
    int64 id = PG_GETARG_INT64(0);
    require_cosid_id(id);
    return id;
}

// The id argument read with its namespace's layout: a layout of fewer than 63 bits has no id
// at or past 2^total_bits (a value that would decode to a time past the layout's end).
int64 layout_id_arg(FunctionCallInfo fcinfo, const Layout** layout) {
    int64 id = id_arg(fcinfo);
    const Layout& l = layout_arg(fcinfo, 1);
    if (!l.id_fits(id))
        ereport(ERROR, (errcode(COSID_OUT_OF_RANGE),
                        errmsg("%lld is not an id of namespace \"%s\"", static_cast<long long>(id),
                               text_to_cstring(PG_GETARG_TEXT_PP(1))),
                        errdetail("Its layout has %d bits: every id is below %lld.", l.total_bits(),
                                  static_cast<long long>(int64{1} << l.total_bits()))));
    *layout = &l;
    return id;
}

// The time of an id's tick as a timestamptz; an error past PostgreSQL's last timestamp
// (far-future ids of a layout made before cosid 1.3 refused such layouts).
TimestampTz tick_timestamptz(FunctionCallInfo fcinfo, const Layout& l, int64 id) {
    std::optional<int64_t> ms = l.tick_ms(l.unpack(id).tick);
    if (!ms)
        ereport(ERROR, (errcode(COSID_OUT_OF_RANGE),
                        errmsg("the time of id %lld of namespace \"%s\" is past PostgreSQL's last timestamp",
                               static_cast<long long>(id), text_to_cstring(PG_GETARG_TEXT_PP(1)))));
    return ms_to_timestamptz(*ms);
}

// Runs a core parser of text ids; on failure `why` holds its reason as a sentence (a DETAIL).
template <typename Parse>
bool parse_text(Parse parse, int64* id, char* why, size_t len) {
    return cpp_call([&] {
        std::string reason;
        std::optional<int64_t> v = parse(&reason);
        if (v) {
            *id = *v;
            return true;
        }
        strlcpy(why, reason.c_str(), len);
        why[0] = static_cast<char>(toupper(static_cast<unsigned char>(why[0])));
        return false;
    });
}

// Unix ms <-> timestamptz (microseconds since 2000-01-01), rounding down.
constexpr int64 kUnixToPgMicros = static_cast<int64>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000000;
int64 timestamptz_to_ms(TimestampTz t) {
    int64 us = t + kUnixToPgMicros;
    return us >= 0 ? us / 1000 : -((-us + 999) / 1000);
}

int64 id_range(FunctionCallInfo fcinfo, bool max) {
    if (PG_ARGISNULL(0))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("cosid timestamp must not be NULL")));
    TimestampTz ts = PG_GETARG_TIMESTAMPTZ(0);
    const Layout& l = layout_arg(fcinfo, 1);
    if (TIMESTAMP_NOT_FINITE(ts))
        ereport(ERROR, (errcode(COSID_OUT_OF_RANGE), errmsg("cosid ids have no infinite timestamp")));
    int64 ms = timestamptz_to_ms(ts);
    std::optional<int64_t> id = max ? max_id_at(l, ms) : min_id_at(l, ms);
    if (!id) {
        // (timestamptz_to_str returns a static buffer: each result copied before the next)
        char* at = pstrdup(timestamptz_to_str(ts));
        char* first = pstrdup(timestamptz_to_str(ms_to_timestamptz(l.epoch_ms)));
        char* last = pstrdup(timestamptz_to_str(ms_to_timestamptz(l.tick_ms(l.max_tick()).value_or(kLastTimestampMs))));
        ereport(ERROR, (errcode(COSID_OUT_OF_RANGE),
                        errmsg("timestamp %s is outside the layout of namespace \"%s\"", at,
                               text_to_cstring(PG_GETARG_TEXT_PP(1))),
                        errdetail("Its ids cover %s to %s.", first, last)));
    }
    return *id;
}

}  // namespace

extern "C" Datum cosid_parse_c(PG_FUNCTION_ARGS) {
    const Layout* lp;
    int64 id = layout_id_arg(fcinfo, &lp);
    const Layout& l = *lp;
    Unpacked u = l.unpack(id);
    auto* c = static_cast<CachedLayout*>(fcinfo->flinfo->fn_extra);  // set by layout_arg
    if (c->desc == nullptr) {
        TupleDesc desc;
        if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
            elog(ERROR, "return type must be a row type");
        MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
        c->desc = BlessTupleDesc(CreateTupleDescCopy(desc));
        MemoryContextSwitchTo(old);
    }
    TupleDesc desc = c->desc;
    Datum v[3] = {TimestampTzGetDatum(tick_timestamptz(fcinfo, l, id)), Int32GetDatum(u.slot),
                  Int32GetDatum(u.sequence)};
    bool nulls[3] = {false, false, false};
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, v, nulls)));
}

extern "C" Datum cosid_timestamp(PG_FUNCTION_ARGS) {
    const Layout* l;
    int64 id = layout_id_arg(fcinfo, &l);
    PG_RETURN_TIMESTAMPTZ(tick_timestamptz(fcinfo, *l, id));
}

extern "C" Datum cosid_slot(PG_FUNCTION_ARGS) {
    const Layout* l;
    int64 id = layout_id_arg(fcinfo, &l);
    PG_RETURN_INT32(l->unpack(id).slot);
}

extern "C" Datum cosid_sequence(PG_FUNCTION_ARGS) {
    const Layout* l;
    int64 id = layout_id_arg(fcinfo, &l);
    PG_RETURN_INT32(l->unpack(id).sequence);
}

extern "C" Datum cosid_min_id(PG_FUNCTION_ARGS) { PG_RETURN_INT64(id_range(fcinfo, false)); }
extern "C" Datum cosid_max_id(PG_FUNCTION_ARGS) { PG_RETURN_INT64(id_range(fcinfo, true)); }

extern "C" Datum cosid_to_text(PG_FUNCTION_ARGS) {
    int64 id = id_arg(fcinfo);
    char out[kTextWidth + 1];
    cpp_call([&] { strlcpy(out, to_text(id)->c_str(), sizeof(out)); });
    PG_RETURN_TEXT_P(cstring_to_text(out));
}

extern "C" Datum cosid_from_text(PG_FUNCTION_ARGS) {
    char* in = text_to_cstring(PG_GETARG_TEXT_PP(0));
    char why[128] = "";
    int64 id = 0;
    bool ok = parse_text([&](std::string* reason) { return from_text(in, reason); }, &id, why, sizeof(why));
    if (!ok)
        ereport(ERROR, (errcode(ERRCODE_INVALID_TEXT_REPRESENTATION), errmsg("invalid cosid text id: \"%s\"", in),
                        errdetail("%s.", why),
                        errhint("A cosid text id is 11 characters of 0-9, A-Z, a-z, as cosid_to_text() writes it.")));
    PG_RETURN_INT64(id);
}

extern "C" Datum cosid_format(PG_FUNCTION_ARGS) {
    const Layout* l;
    int64 id = layout_id_arg(fcinfo, &l);
    char out[96] = "";
    bool ok = cpp_call([&] {
        auto text = format_id(*l, id);
        if (text) strlcpy(out, text->c_str(), sizeof(out));
        return text.has_value();
    });
    if (!ok) {
        tick_timestamptz(fcinfo, *l, id);  // the one way format_id refuses a fitting id: says why
        elog(ERROR, "cosid_format: id %lld cannot be formatted", static_cast<long long>(id));
    }
    PG_RETURN_TEXT_P(cstring_to_text(out));
}

extern "C" Datum cosid_from_format(PG_FUNCTION_ARGS) {
    if (PG_ARGISNULL(0))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("cosid formatted id must not be NULL")));
    char* in = text_to_cstring(PG_GETARG_TEXT_PP(0));
    const Layout& l = layout_arg(fcinfo, 1);
    char why[160] = "";
    int64 id = 0;
    bool ok = parse_text([&](std::string* reason) { return parse_formatted(l, in, reason); }, &id, why, sizeof(why));
    if (!ok)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
                 errmsg("invalid cosid formatted id for namespace \"%s\": \"%s\"",
                        text_to_cstring(PG_GETARG_TEXT_PP(1)), in),
                 errdetail("%s.", why),
                 errhint(l.unit == Unit::Millisecond
                             ? "cosid_format() writes UTC time, slot and sequence, as in 20261203T072017.816Z-3-0262."
                             : "cosid_format() writes UTC time, slot and sequence, as in 20261203T072017Z-3-0262 "
                               "(a layout in seconds).")));
    PG_RETURN_INT64(id);
}

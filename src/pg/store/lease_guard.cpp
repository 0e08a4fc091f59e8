// cosid._lease_guard(): the BEFORE UPDATE trigger of cosid.lease that refuses a change
// breaking a lease rule (src/core/lease_rule.hpp), whoever makes it.  In C: every acquire,
// renewal and release updates a lease row, and a PL/pgSQL trigger would build its
// expressions again in each of their transactions.
// Plain C inside, but for the core's rule (noexcept, trivially destructible answers): an
// ereport may leave it.
#include "../pg.hpp"
extern "C" {
#include "commands/trigger.h"
}

#include "../boundary.hpp"
#include "lease_rule.hpp"

#include <type_traits>

// an ereport may leave the function over these
static_assert(std::is_trivially_destructible_v<cosid::LeaseVersion>);

extern "C" {
PG_FUNCTION_INFO_V1(cosid_lease_guard);
}

namespace {

int column(TupleDesc desc, const char* name) {
    for (int i = 0; i < desc->natts; i++) {
        Form_pg_attribute a = TupleDescAttr(desc, i);
        if (!a->attisdropped && strcmp(NameStr(a->attname), name) == 0) return i + 1;
    }
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
                    errmsg("cosid lease guard: table \"%s\" has no column \"%s\"", "cosid.lease", name)));
    pg_unreachable();
}

// 0 when the table has no such column (raise_seen: a catalog before 1.8, this library after)
int column_if_any(TupleDesc desc, const char* name) {
    for (int i = 0; i < desc->natts; i++) {
        Form_pg_attribute a = TupleDescAttr(desc, i);
        if (!a->attisdropped && strcmp(NameStr(a->attname), name) == 0) return i + 1;
    }
    return 0;
}

struct Columns {
    int namespace_, slot, incarnation, fence, floor, ceiling, next_floor, raise_seen;
};

std::optional<int64> bigint_of(HeapTuple t, TupleDesc desc, int attnum) {
    bool null;
    Datum d = heap_getattr(t, attnum, desc, &null);
    if (null) return std::nullopt;
    return DatumGetInt64(d);
}

cosid::LeaseVersion version_of(HeapTuple t, TupleDesc desc, const Columns& c) {
    cosid::LeaseVersion v;
    v.fence = bigint_of(t, desc, c.fence);
    v.floor = bigint_of(t, desc, c.floor);
    v.ceiling = bigint_of(t, desc, c.ceiling);
    v.next_floor = bigint_of(t, desc, c.next_floor);
    if (c.raise_seen > 0) v.raise_seen = bigint_of(t, desc, c.raise_seen);
    v.held = !heap_attisnull(t, c.incarnation, desc);
    return v;
}

// format('%s', x): empty for NULL
void text_of(const std::optional<int64>& v, char* out, size_t size) {
    if (v)
        snprintf(out, size, INT64_FORMAT, *v);
    else
        out[0] = '\0';
}

}  // namespace

extern "C" Datum cosid_lease_guard(PG_FUNCTION_ARGS) {
    if (!CALLED_AS_TRIGGER(fcinfo))
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("cosid._lease_guard() is a trigger function")));
    TriggerData* td = reinterpret_cast<TriggerData*>(fcinfo->context);
    if (!TRIGGER_FIRED_BY_UPDATE(td->tg_event) || !TRIGGER_FIRED_FOR_ROW(td->tg_event) ||
        !TRIGGER_FIRED_BEFORE(td->tg_event))
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("cosid._lease_guard() runs only BEFORE UPDATE FOR EACH ROW")));
    TupleDesc desc = RelationGetDescr(td->tg_relation);
    HeapTuple o = td->tg_trigtuple, n = td->tg_newtuple;
    Columns c{column(desc, "namespace"), column(desc, "slot"),    column(desc, "incarnation"), column(desc, "fence"),
              column(desc, "floor"),     column(desc, "ceiling"), column(desc, "next_floor"),
              column_if_any(desc, "raise_seen")};

    bool o_null, n_null;
    // NEW.namespace <> OLD.namespace OR NEW.slot <> OLD.slot (NULL on either side: not true)
    bool moved = false;
    Datum o_ns = heap_getattr(o, c.namespace_, desc, &o_null);
    Datum n_ns = heap_getattr(n, c.namespace_, desc, &n_null);
    if (!o_null && !n_null)
        moved = DatumGetBool(
            DirectFunctionCall2Coll(textne, TupleDescAttr(desc, c.namespace_ - 1)->attcollation, n_ns, o_ns));
    Datum o_slot = heap_getattr(o, c.slot, desc, &o_null);
    Datum n_slot = heap_getattr(n, c.slot, desc, &n_null);
    if (!o_null && !n_null && DatumGetInt32(n_slot) != DatumGetInt32(o_slot)) moved = true;
    // NEW.incarnation IS DISTINCT FROM OLD.incarnation
    Datum o_inc = heap_getattr(o, c.incarnation, desc, &o_null);
    Datum n_inc = heap_getattr(n, c.incarnation, desc, &n_null);
    bool owner_changed =
        o_null != n_null || (!o_null && memcmp(DatumGetUUIDP(o_inc), DatumGetUUIDP(n_inc), UUID_LEN) != 0);

    cosid::LeaseVersion before = version_of(o, desc, c), after = version_of(n, desc, c);
    const char* problem =
        cosid::pg::cpp_call([&]() { return cosid::lease_change_problem(before, after, moved, owner_changed); });
    if (problem != nullptr) {
        char b[4][32], a[4][32];
        text_of(before.fence, b[0], sizeof(b[0]));
        text_of(before.floor, b[1], sizeof(b[1]));
        text_of(before.ceiling, b[2], sizeof(b[2]));
        text_of(before.next_floor, b[3], sizeof(b[3]));
        text_of(after.fence, a[0], sizeof(a[0]));
        text_of(after.floor, a[1], sizeof(a[1]));
        text_of(after.ceiling, a[2], sizeof(a[2]));
        text_of(after.next_floor, a[3], sizeof(a[3]));
        Datum slot = heap_getattr(o, c.slot, desc, &o_null);
        char slot_text[16] = "<NULL>";
        if (!o_null) snprintf(slot_text, sizeof(slot_text), "%d", DatumGetInt32(slot));
        Datum ns = heap_getattr(o, c.namespace_, desc, &n_null);
        ereport(
            ERROR,
            (errcode(ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION),
             errmsg("cosid lease rule broken on slot %s of namespace \"%s\": %s", slot_text,
                    n_null ? "<NULL>" : TextDatumGetCString(ns), problem),
             errdetail("Before: fence %s, floor %s, ceiling %s, next_floor %s; after: fence %s, floor %s, ceiling %s, "
                       "next_floor %s.",
                       b[0], b[1], b[2], b[3], a[0], a[1], a[2], a[3]),
             errhint("Lease rows change only through cosid.acquire, renew, release and revoke (or cosid_release()).")));
    }
    return PointerGetDatum(n);
}

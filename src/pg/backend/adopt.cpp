// The C part of cosid_adopt() (the SQL function does the table: lock, largest value,
// default, identity, sequence): from the column's largest id, the floor above which the
// namespace's ids exceed it (src/core/static_state, adopt_floor), and the keeper's raise of
// that floor (keeper.cpp, serve_raise_request).
#include "../boundary.hpp"
#include "../store/citus.hpp"
#include "../errors.hpp"
#include "layout.hpp"
#include "../settings.hpp"
#include "../shmem/state.hpp"
#include "static_state.hpp"

using namespace cosid;
using namespace cosid::pg;

extern "C" {
PG_FUNCTION_INFO_V1(cosid_adopt_raise);
}

namespace {

// How far ahead of the clock a column's largest id may lie: cosid_adopt waits for the
// clock to pass it (holding the table's lock), so that inserts after it never wait.
constexpr int64 kMaxAheadMs = 10000;

// Posts the raise to the keeper and waits for its answer; returns the windows it closed.
int raise_via_keeper(const char* ns, int64 floor_ms, const Layout& l) {
    int64 start = mono_ms();
    int timeout = acquire_timeout_ms();
    uint64 id = 0;
    bool posted = false, answered = false;
    RaiseRequest answer;
    ConditionVariablePrepareToSleep(&shared->cv);
    for (;;) {
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        RaiseRequest* q = &shared->raise;
        // One request at a time: another adopt's first, and its answer until its waiter took
        // it (or gave up on it long ago: a cancelled caller).
        bool free = q->state == kRaiseIdle ||
                    ((q->state == kRaiseDone || q->state == kRaiseFailed) && mono_ms() - q->answered_at > 10000);
        if (!posted && free) {
            memset(q, 0, sizeof(*q));
            q->id = id = ++shared->next_request_id;
            strlcpy(q->ns, ns, sizeof(q->ns));
            q->floor_ms = floor_ms;
            q->timestamp_bits = l.timestamp_bits;
            q->slot_bits = l.slot_bits;
            q->sequence_bits = l.sequence_bits;
            q->epoch_ms = l.epoch_ms;
            q->unit_ms = static_cast<int>(l.unit_ms());
            q->state = kRaisePosted;
            posted = true;
        } else if (posted && q->id == id && q->state != kRaisePosted) {
            answer = *q;
            q->state = kRaiseIdle;
            answered = true;
        }
        bool give_up = !answered && mono_ms() - start >= timeout;
        if (give_up && posted && q->id == id) q->state = kRaiseIdle;  // withdrawn, or an answer come too late
        LWLockRelease(shared->lock);
        if (answered || give_up) break;
        wake_keeper();
        ConditionVariableTimedSleep(&shared->cv, 50, PG_WAIT_EXTENSION);
    }
    ConditionVariableCancelSleep();
    if (!answered)
        ereport(ERROR,
                (errcode(COSID_KEEPER_UNAVAILABLE),
                 errmsg("cosid lease keeper did not raise the floor of namespace \"%s\" within %d ms", ns, timeout),
                 errdetail("Nothing was changed in this transaction; the keeper may still raise the floor, "
                           "which is harmless (ids only move up)."),
                 errhint("Check the server log for the cosid keeper, then run cosid_adopt again.")));
    if (answer.state == kRaiseFailed) {
        if (answer.error_code == ERRCODE_INVALID_OBJECT_DEFINITION)
            ereport(ERROR, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
                            errmsg("cosid namespace \"%s\" has another layout in this database than in the lease "
                                   "store",
                                   ns),
                            errdetail("Layout (timestamp/slot/sequence bits) %s.", answer.error),
                            errhint("The column's ids were read with this database's definition; make it the "
                                    "store's, then adopt again.")));
        ereport(ERROR,
                (errcode(answer.error_code == COSID_STATIC_STATE ? COSID_STATIC_STATE : COSID_KEEPER_UNAVAILABLE),
                 errmsg("cosid could not raise the floor of namespace \"%s\"", ns), errdetail("%s", answer.error)));
    }
    return answer.leases_closed;
}

}  // namespace

// cosid._adopt_raise(namespace, largest id, layout...) -> the floor (Unix ms) every id of the
// namespace is now above, NULL when the column holds no id to stay above.
extern "C" Datum cosid_adopt_raise(PG_FUNCTION_ARGS) {
    require_preloaded("cosid_adopt");
    require_admin("adopt id columns into cosid");
    refuse_on_citus_worker("cosid_adopt");
    for (int i = 0; i < 7; ++i)
        if (i != 1 && PG_ARGISNULL(i))
            ereport(ERROR,
                    (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("cosid_adopt: arguments must not be NULL")));
    if (PG_ARGISNULL(1)) PG_RETURN_NULL();  // an empty column: nothing to stay above
    if (RecoveryInProgress())
        ereport(ERROR,
                (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION), errmsg("cosid_adopt() cannot run during recovery")));
    char* ns = text_to_cstring(PG_GETARG_TEXT_PP(0));
    int64 max_id = PG_GETARG_INT64(1);
    char* unit = text_to_cstring(PG_GETARG_TEXT_PP(6));
    Layout l;
    l.timestamp_bits = PG_GETARG_INT32(2);
    l.slot_bits = PG_GETARG_INT32(3);
    l.sequence_bits = PG_GETARG_INT32(4);
    l.epoch_ms = PG_GETARG_INT64(5);
    l.unit = strcmp(unit, "s") == 0 ? Unit::Second : Unit::Millisecond;
    // The layout comes as arguments (cosid_admin may call this): no shift past 63 bits below.
    char invalid[256] = "";
    cpp_call([&] {
        if (auto e = l.validate_readable()) strlcpy(invalid, e->c_str(), sizeof(invalid));
    });
    if (invalid[0] != '\0')
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("invalid cosid layout: %s", invalid)));
    AdoptFloor f = cpp_call([&] { return adopt_floor(l, max_id); });
    if (f.status == AdoptFloor::Negative) PG_RETURN_NULL();
    if (f.status == AdoptFloor::NotInLayout)
        ereport(ERROR, (errcode(COSID_OUT_OF_RANGE),
                        errmsg("cosid namespace \"%s\" has no id larger than " INT64_FORMAT, ns, max_id),
                        errdetail("Its layout has %d bits: every id is below " INT64_FORMAT ".", l.total_bits(),
                                  static_cast<int64>(int64{1} << l.total_bits())),
                        errhint("Adopt the column into a namespace of 63 bits.")));
    if (f.status == AdoptFloor::LastTick)
        ereport(ERROR, (errcode(COSID_OUT_OF_RANGE),
                        errmsg("cosid namespace \"%s\" has no id larger than " INT64_FORMAT, ns, max_id),
                        errdetail("The value lies in the last tick of the namespace's layout (%d timestamp bits).",
                                  l.timestamp_bits)));
    int64 now = clock_ms();
    if (f.floor_ms > now + kMaxAheadMs) {
        int64 epoch = cpp_call([&] { return latest_epoch_exceeding(l, max_id, now); });
        char floor_text[64], epoch_text[64], layout_epoch_text[64];
        cpp_call([&] {
            strlcpy(floor_text, format_timestamp_ms(f.floor_ms).c_str(), sizeof(floor_text));
            strlcpy(epoch_text, format_timestamp_ms(epoch).c_str(), sizeof(epoch_text));
            strlcpy(layout_epoch_text, format_timestamp_ms(l.epoch_ms).c_str(), sizeof(layout_epoch_text));
        });
        ereport(ERROR,
                (errcode(COSID_OUT_OF_RANGE),
                 errmsg("ids of cosid namespace \"%s\" pass " INT64_FORMAT " only at %s", ns, max_id, floor_text),
                 errdetail("Read with the namespace's layout (epoch %s), the column's largest value lies "
                           "%.1f days ahead of this clock; cosid adopts columns whose ids lie at most %d s "
                           "ahead. Nothing was changed.",
                           layout_epoch_text, static_cast<double>(f.floor_ms - now) / 86400000.0,
                           static_cast<int>(kMaxAheadMs / 1000)),
                 errhint("Ids of another generator (another epoch or layout) need a namespace whose ids are "
                         "larger now: create one with the same bits and an epoch at or before %s "
                         "(cosid_namespace_create(..., epoch => '%s')), and adopt into it.",
                         epoch_text, epoch_text)));
    }
    int closed = raise_via_keeper(ns, f.floor_ms, l);
    ereport(DEBUG1, (errmsg("cosid_adopt: %d window%s closed", closed, closed == 1 ? "" : "s")));
    // Every id issued from now on is above the floor; wait for the clock to pass it, so that
    // the inserts queued behind this transaction's lock do not wait instead.
    while (clock_ms() <= f.floor_ms) {
        pg_usleep(Min(f.floor_ms - clock_ms() + 1, 100) * 1000L);
        CHECK_FOR_INTERRUPTS();
    }
    PG_RETURN_INT64(f.floor_ms);
}

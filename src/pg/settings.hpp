// cosid.* settings (documented in docs/reference.md, "Settings").
#pragma once
#include "pg.hpp"

namespace cosid::pg {

extern char* setting_database;             // cosid.database: where the keeper (and the local store) live
extern char* setting_store_dsn;            // cosid.store_dsn: a store on another server ('' = local)
extern bool setting_store_only;            // cosid.store_only: this server only serves its store, it issues no id
extern int setting_ttl_ms;                 // cosid.ttl
extern char* setting_namespace;            // cosid.namespace
extern char* setting_owner_key;            // cosid.owner_key ('' = hostname:port)
extern int setting_preferred_slot;         // cosid.preferred_slot (-1 = none)
extern int setting_acquire_timeout_ms;     // cosid.acquire_timeout (-1 = ttl)
extern int setting_pool_idle_ms;           // cosid.pool_idle_timeout
extern int setting_max_borrow_ms;          // cosid.max_borrow (-1: up to the window's ceiling)
extern int setting_max_namespaces;         // cosid.max_namespaces
extern int setting_clock_offset_ms;        // cosid.clock_offset (superuser; tests)
extern int setting_store_clock_offset_ms;  // cosid.store_clock_offset (superuser; tests; read by SQL)
extern char* setting_test_keeper_exit;     // cosid.test_keeper_exit_after_acquire (superuser; tests)
extern int setting_test_keeper_ready_delay_ms;
extern int
    setting_test_reach_cap_ms;  // cosid.test_reach_cap (postgresql.conf; tests)  // cosid.test_keeper_ready_delay (superuser; tests)
extern uint64 namespace_setting_generation;  // bumped whenever cosid.namespace is assigned
extern char* setting_static_slots;           // cosid.static_slots ('' = every namespace leases from the store)
extern char* setting_state_file;             // cosid.state_file ('' = none: nothing guards a restart against the clock)
extern int setting_static_ahead_ms;          // cosid.static_ahead
extern char* setting_not_before;             // cosid.not_before (text as set; not_before_ms() parsed)

void define_settings();
int acquire_timeout_ms();
// The wall clock in Unix ms: for bookkeeping shared between processes (idle times,
// request liveness), which must not depend on any session's cosid.clock_offset.
int64 wall_ms();
// CLOCK_MONOTONIC in ms: what the keeper schedules on (renewals, retries, idle releases) and
// what backends stamp idle and request times with; the same clock in every process.
int64 mono_ms();
// True when cosid.store_dsn names a store on another server (shared by several instances).
bool store_is_remote();
// The base bound of a store call: ttl/6 (at least 100 ms), the keeper's lock timeout and the
// cap of its renewal backoff (src/core/store_bound.hpp).
int64 store_bound_ms();
// Waits are measured on the monotonic clock: a wall-clock step neither ends nor stretches them.
int64 elapsed_ms(int64 since_mono_ms);
// A Unix time in ms as a timestamp, palloc'd.
char* ms_to_text(int64 ms);
// The generator's clock: the wall clock shifted by cosid.clock_offset.
inline int64 clock_ms() { return wall_ms() + setting_clock_offset_ms; }
// Unix milliseconds as a PostgreSQL timestamptz.
inline TimestampTz ms_to_timestamptz(int64 ms) {
    return static_cast<TimestampTz>(ms -
                                    static_cast<int64>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000) *
           1000;
}
bool valid_namespace_name(const char* name);
// The static slot cosid.static_slots gives namespace `ns`, -1 when it leases from the store.
int32 static_slot_for(const char* ns);
bool static_slots_configured();
// cosid.state_file is set (not empty): static slots keep their ceilings in a file.  Without one
// they borrow no tick ahead of the clock and start every keeper's first window after the clock
// (src/core static_state.hpp, "static slots without a state file").
bool static_state_file_configured();
// The state file's full path ('' when there is none).
const char* state_file_path();
// cosid.not_before in Unix ms, 0 when unset.
int64 not_before_ms();
// The timeline cosid.not_before names ("... on timeline N"), 0 when it names none.
uint32 not_before_timeline();

}  // namespace cosid::pg

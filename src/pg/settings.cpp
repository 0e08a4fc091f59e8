#include "settings.hpp"

#include "reach.hpp"

#include "boundary.hpp"
#include "dsn_scrub.hpp"

#include <time.h>

#include "static_state.hpp"
#include "store_bound.hpp"

namespace cosid::pg {

char* setting_database = nullptr;
char* setting_store_dsn = nullptr;
int setting_ttl_ms = 30000;
char* setting_namespace = nullptr;
bool setting_store_only = false;
char* setting_owner_key = nullptr;
int setting_preferred_slot = -1;
int setting_acquire_timeout_ms = -1;
int setting_pool_idle_ms = 60000;
int setting_clock_offset_ms = 0;
int setting_max_borrow_ms = -1;
int setting_max_namespaces = 256;
int setting_store_clock_offset_ms = 0;
char* setting_test_keeper_exit = nullptr;
int setting_test_keeper_ready_delay_ms = 0;
int setting_test_reach_cap_ms = 0;
uint64 namespace_setting_generation = 0;
char* setting_static_slots = nullptr;
char* setting_state_file = nullptr;
int setting_static_ahead_ms = 10000;
char* setting_not_before = nullptr;

namespace {
// Parsed once, in the postmaster (both settings need a restart); inherited by every process.
cosid::StaticSlots parsed_static_slots;
int64 parsed_not_before_ms = 0;
uint32 parsed_not_before_timeline = 0;

// Check hooks must not throw: a C++ exception (out of memory) is a rejected value.
// (GUC_check_errdetail is called after the C++ objects are gone: it allocates.)
// `parse(text)` returns the core parser's problem, nothing when the value is good.
template <typename Parse>
bool check_with(const char* value, Parse parse, const char* hint) {
    char problem[256] = "";
    try {
        if (auto p = parse(std::string(value ? value : ""))) strlcpy(problem, p->c_str(), sizeof(problem));
    } catch (...) {
        strlcpy(problem, "out of memory", sizeof(problem));
    }
    if (problem[0] == '\0') return true;
    GUC_check_errdetail("%s", problem);
    GUC_check_errhint("%s", hint);
    return false;
}

bool check_static_slots(char** newval, void** extra, GucSource source) {
    return check_with(
        *newval,
        [](const std::string& v) {
            cosid::StaticSlots parsed;
            return cosid::parse_static_slots(v, &parsed);
        },
        "Write a slot for every namespace (\"7\"), slots per namespace (\"orders:7, default:3\"), "
        "or both (\"5, orders:7\").");
}
void assign_static_slots(const char* newval, void* extra) {
    try {
        cosid::StaticSlots parsed;
        if (!cosid::parse_static_slots(newval ? newval : "", &parsed)) parsed_static_slots = parsed;
    } catch (...) {}
}
bool check_not_before(char** newval, void** extra, GucSource source) {
    return check_with(
        *newval,
        [](const std::string& v) {
            cosid::NotBefore nb;
            return cosid::parse_not_before(v, &nb);
        },
        "Write a timestamp with its time zone, e.g. '2026-12-03 07:20:17+00', optionally followed by "
        "the timeline it vouches for: '2026-12-03 07:20:17+00 on timeline 2'.");
}
void assign_not_before(const char* newval, void* extra) {
    cosid::NotBefore nb;
    try {
        if (cosid::parse_not_before(newval ? newval : "", &nb)) nb = cosid::NotBefore{};
    } catch (...) {
        nb = cosid::NotBefore{};
    }
    parsed_not_before_ms = nb.ms;
    parsed_not_before_timeline = nb.timeline;
}
}  // namespace

int32 static_slot_for(const char* ns) {
    if (parsed_static_slots.empty()) return -1;
    try {
        auto slot = parsed_static_slots.slot_for(ns);
        return slot ? *slot : -1;
    } catch (...) {
        return -1;  // (a std::string of a namespace name: only out of memory)
    }
}
bool static_slots_configured() { return !parsed_static_slots.empty(); }
bool static_state_file_configured() { return setting_state_file != nullptr && setting_state_file[0] != '\0'; }
const char* state_file_path() {
    static char path_buffer[MAXPGPATH];
    if (!static_state_file_configured()) return "";
    if (is_absolute_path(setting_state_file)) return setting_state_file;
    snprintf(path_buffer, sizeof(path_buffer), "%s/%s", DataDir, setting_state_file);
    return path_buffer;
}
int64 not_before_ms() { return parsed_not_before_ms; }
uint32 not_before_timeline() { return parsed_not_before_timeline; }

bool valid_namespace_name(const char* name) {
    size_t n = strlen(name);
    if (n == 0 || n > 63) return false;
    for (size_t i = 0; i < n; ++i) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == ':' || c == '-'))
            return false;
    }
    return true;
}

static bool check_namespace(char** newval, void** extra, GucSource source) {
    if (*newval == nullptr || !valid_namespace_name(*newval)) {
        GUC_check_errdetail("A namespace name is 1 to 63 letters, digits, \"_\", \".\", \":\" or \"-\".");
        return false;
    }
    return true;
}

// Lets cosid_next() know that cosid.namespace is unchanged without comparing strings.
static void assign_namespace(const char* newval, void* extra) { ++namespace_setting_generation; }

// SHOW and pg_settings (read by pg_read_all_settings, pg_monitor's) show the DSN with its
// passwords hidden, as every message does (src/core/dsn_scrub).
static const char* show_store_dsn(void) {
    static char shown[1024];
    const char* dsn = setting_store_dsn != nullptr ? setting_store_dsn : "";
    cpp_call([&] { strlcpy(shown, cosid::scrub_dsn_secrets(dsn, dsn).c_str(), sizeof(shown)); });
    return shown;
}

static bool check_owner_key(char** newval, void** extra, GucSource source) {
    if (*newval != nullptr && strlen(*newval) > 200) {
        GUC_check_errdetail("An owner key is at most 200 bytes.");
        return false;
    }
    return true;
}

namespace {

// The settings read at server start only (PGC_POSTMASTER).
void define_server_start_settings() {
    DefineCustomStringVariable("cosid.database", "Database holding the cosid store; the lease keeper connects to it.",
                               nullptr, &setting_database, "postgres", PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
    DefineCustomStringVariable("cosid.store_dsn",
                               "Connection string of a lease store on another server, shared by several "
                               "instances (empty: the store is in cosid.database).",
                               nullptr, &setting_store_dsn, "", PGC_POSTMASTER,
                               // not in pg_settings (its reset_val would show the value as set)
                               GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL, nullptr, nullptr, show_store_dsn);
    DefineCustomBoolVariable("cosid.store_only",
                             "This server only serves a lease store to other instances: its keeper issues no "
                             "id, and a copy of its store is not a fork.",
                             nullptr, &setting_store_only, false, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
    DefineCustomIntVariable("cosid.max_namespaces",
                            "How many namespaces the instance can issue in at once (shared memory).", nullptr,
                            &setting_max_namespaces, 256, 1, 65536, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
    DefineCustomStringVariable("cosid.owner_key", "Owner key of this instance's leases (empty: hostname:port).",
                               nullptr, &setting_owner_key, "", PGC_POSTMASTER, 0, check_owner_key, nullptr, nullptr);
    DefineCustomStringVariable("cosid.static_slots",
                               "Static slots: namespaces that take their slot from this setting instead of "
                               "leasing one from the store (e.g. '7', or 'orders:7, default:3').",
                               nullptr, &setting_static_slots, "", PGC_POSTMASTER, 0, check_static_slots,
                               assign_static_slots, nullptr);
    DefineCustomStringVariable("cosid.state_file",
                               "File that keeps the static slots' ceilings across restarts (relative to the "
                               "data directory; empty: none).",
                               nullptr, &setting_state_file, "cosid.state", PGC_POSTMASTER, GUC_SUPERUSER_ONLY, nullptr,
                               nullptr, nullptr);
    DefineCustomStringVariable("cosid.not_before",
                               "Static slots issue no timestamp at or before this time (e.g. a migrated "
                               "generator's last id); \"... on timeline N\" also lets a server on timeline N "
                               "start its static slots without a state file.",
                               nullptr, &setting_not_before, "", PGC_POSTMASTER, 0, check_not_before, assign_not_before,
                               nullptr);
}

// The settings a reload (or a session, for the PGC_USERSET ones) changes.
void define_runtime_settings() {
    // At most the static part of the reach cap (src/core/reach.hpp): a copy of this server
    // acknowledged as a fork cannot see a value set here after the copy was made.
    DefineCustomIntVariable("cosid.static_ahead",
                            "How far ahead of the clock a static slot's ceiling is written to the state file.", nullptr,
                            &setting_static_ahead_ms, 10000, 200, static_cast<int>(cosid::kStaticAheadCapMs),
                            PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr, nullptr);
    DefineCustomIntVariable("cosid.ttl", "How long a lease lasts without renewal; renewed every ttl/3.", nullptr,
                            &setting_ttl_ms, 30000, 300, 24 * 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr,
                            nullptr);
    DefineCustomStringVariable("cosid.namespace", "Namespace used by cosid_next() without argument.", nullptr,
                               &setting_namespace, "default", PGC_USERSET, 0, check_namespace, assign_namespace,
                               nullptr);
    DefineCustomIntVariable("cosid.preferred_slot", "Slot to try first when acquiring (-1: none).", nullptr,
                            &setting_preferred_slot, -1, -1, 65535, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
    DefineCustomIntVariable("cosid.acquire_timeout",
                            "How long cosid_next() waits for a slot or a renewal before failing (-1: ttl).", nullptr,
                            &setting_acquire_timeout_ms, -1, -1, 24 * 3600 * 1000, PGC_USERSET, GUC_UNIT_MS, nullptr,
                            nullptr, nullptr);
    DefineCustomIntVariable(
        "cosid.pool_idle_timeout", "A lease on which no id was issued for this long is released to the store.", nullptr,
        &setting_pool_idle_ms, 60000, 0, 24 * 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr, nullptr);
    DefineCustomIntVariable("cosid.max_borrow",
                            "How far ahead of the clock ids may be issued when a millisecond's sequence runs "
                            "out (-1: up to the end of the leased window).",
                            nullptr, &setting_max_borrow_ms, -1, -1, 24 * 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, nullptr,
                            nullptr, nullptr);
}

// The settings of the test suites only.
void define_test_settings() {
    DefineCustomIntVariable("cosid.clock_offset", "Test only: shifts the generator's clock by this many ms.", nullptr,
                            &setting_clock_offset_ms, 0, -86400000, 86400000, PGC_SUSET, 0, nullptr, nullptr, nullptr);
    DefineCustomIntVariable("cosid.store_clock_offset", "Test only: shifts the store's clock by this many ms.", nullptr,
                            &setting_store_clock_offset_ms, 0, -86400000, 86400000, PGC_SUSET, 0, nullptr, nullptr,
                            nullptr);
    DefineCustomStringVariable("cosid.test_keeper_exit_after_acquire",
                               "Test only: the keeper exits once, right after an acquire in this namespace "
                               "commits and before it records the answer.",
                               nullptr, &setting_test_keeper_exit, "", PGC_SIGHUP, GUC_SUPERUSER_ONLY, nullptr, nullptr,
                               nullptr);
    DefineCustomIntVariable("cosid.test_keeper_ready_delay",
                            "Test only: a keeper that starts waits this long before it first looks at its store.",
                            nullptr, &setting_test_keeper_ready_delay_ms, 0, 0, 600000, PGC_SIGHUP,
                            GUC_UNIT_MS | GUC_SUPERUSER_ONLY, nullptr, nullptr, nullptr);
    // Only in postgresql.conf, and only lower: a test suite that forks and restores stores
    // dozens of times would wait out the reach cap at each (src/core/reach.hpp).  Defined
    // only when preloaded (a start-time setting cannot be made later); a store server that
    // loads the library in a backend raises by the cap itself.
    if (process_shared_preload_libraries_in_progress)
        DefineCustomIntVariable("cosid.test_reach_cap",
                                "Test only: a raise after history the store cannot see covers this (0: the reach cap).",
                                nullptr, &setting_test_reach_cap_ms, 0, 0, static_cast<int>(cosid::kReachCapMs),
                                PGC_POSTMASTER, GUC_UNIT_MS | GUC_SUPERUSER_ONLY, nullptr, nullptr, nullptr);
}

}  // namespace

void define_settings() {
    // Server-start settings can only be defined while preloading; loaded later (not
    // preloaded), the library only serves its pure functions anyway.
    if (process_shared_preload_libraries_in_progress) define_server_start_settings();
    define_runtime_settings();
    define_test_settings();
    MarkGUCPrefixReserved("cosid");
}

int acquire_timeout_ms() { return setting_acquire_timeout_ms >= 0 ? setting_acquire_timeout_ms : setting_ttl_ms; }

int64 wall_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace cosid::pg

namespace cosid::pg {
int64 mono_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

bool store_is_remote() { return setting_store_dsn != nullptr && setting_store_dsn[0] != '\0'; }

int64 store_bound_ms() { return cosid::store_bound::base_ms(setting_ttl_ms); }

int64 elapsed_ms(int64 since_mono_ms) { return mono_ms() - since_mono_ms; }

char* ms_to_text(int64 ms) { return pstrdup(timestamptz_to_str(ms_to_timestamptz(ms))); }
}  // namespace cosid::pg

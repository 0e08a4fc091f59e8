// Entry point: settings, shared memory and the lease keeper are only set up when cosid is
// in shared_preload_libraries; loaded any other way, only the pure functions work.
#include "store/citus.hpp"
#include "backend/drop_guard.hpp"
#include "keeper/fork.hpp"
#include "backend/generator.hpp"
#include "keeper/keeper.hpp"
#include "pg.hpp"
#include "settings.hpp"
#include "shmem/state.hpp"

extern "C" {
PG_MODULE_MAGIC;

void _PG_init(void) {
    cosid::pg::define_settings();
    // Loaded by a backend of a binary-upgrade server (not preloaded there): pg_restore's CREATE
    // FUNCTION or pg_upgrade's LOAD check, in the new cluster.
    if (IsBinaryUpgrade && IsUnderPostmaster) cosid::pg::mark_upgrade_target("cosid loaded in binary-upgrade mode");
    if (!process_shared_preload_libraries_in_progress) return;
    cosid::pg::warn_if_preloaded_before_citus();
    cosid::pg::install_shmem_hooks();
    cosid::pg::register_keeper();
    cosid::pg::install_drop_guard();
    cosid::pg::install_statement_hook();
    cosid::pg::install_upgrade_source_hook();
}
}

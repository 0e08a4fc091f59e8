// A server whose store is its own (the default: cosid.database on this server) forks when
// its data directory lives on twice: a standby promoted while it runs, a backup or disk copy
// started beside it, the old data directory of a pg_upgrade started again.  The store then
// exists twice, and each copy would grant the same slots.  The store recognises a new
// timeline, a restored dump and a declared copy (cosid._fork_reason) and grants nothing
// until cosid_fork_acknowledge(); this file is the keeper's part: it tells the store which
// server issues from it, and declares the copies only the data directory can tell about.
#include "fork.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include "boundary.hpp"
#include "durable_file.hpp"
#include "errors.hpp"
#include "settings.hpp"
#include "state.hpp"

#include "libpq/auth.h"
#include "libpq/libpq-be.h"
#include "utils/timestamp.h"

namespace cosid::pg {

namespace {
constexpr const char* kMarkerName = "cosid.fork";
bool marker_pending = false;  // a cosid.fork file this keeper could not record yet
char marker_reason[400];
bool issuer_recorded = false;  // this keeper recorded itself since it started

void marker_path(char* out, size_t size) { snprintf(out, size, "%s/%s", DataDir, kMarkerName); }

void remove_marker() {
    char path[MAXPGPATH];
    marker_path(path, sizeof(path));
    if (unlink(path) != 0 && errno != ENOENT) {
        ereport(WARNING, (errcode_for_file_access(), errmsg("cosid: could not remove \"%s\": %m", path)));
        return;
    }
    fsync_fname(DataDir, true);
    marker_pending = false;
}

ClientAuthentication_hook_type previous_auth_hook = nullptr;

void upgrade_source_hook(Port* port, int status) {
    if (previous_auth_hook != nullptr) previous_auth_hook(port, status);
    if (!IsBinaryUpgrade || status != STATUS_OK || port->application_name == nullptr) return;
    // pg_upgrade reads the old cluster with pg_dump --binary-upgrade (and pg_dumpall for its
    // roles); pg_upgrade --check does not, nor does anything in the new cluster.
    if (strcmp(port->application_name, "pg_dump") != 0 && strcmp(port->application_name, "pg_dumpall") != 0) return;
    char path[MAXPGPATH], text[400];
    marker_path(path, sizeof(path));
    struct stat st;
    if (stat(path, &st) == 0) return;
    snprintf(text, sizeof(text),
             "pg_upgrade copied this data directory into a new cluster (%s read it in binary-upgrade mode at %s), "
             "which issues ids from the same store history.\n",
             port->application_name, timestamptz_to_str(GetCurrentTimestamp()));
    char failed[256] = "";
    cpp_call([&] {
        if (auto bad = cosid::write_file_durably(path, text)) strlcpy(failed, bad->c_str(), sizeof(failed));
    });
    if (failed[0] != '\0')
        ereport(WARNING, (errmsg("cosid: could not mark this data directory as pg_upgrade's source: %s", failed),
                          errdetail("Started again after the upgrade, this server would not know that the new cluster "
                                    "issues from the same store history."),
                          errhint("Create the file %s by hand before starting this cluster again.", path)));
    else
        ereport(LOG, (errmsg("cosid: this data directory is pg_upgrade's source: started again, its store grants "
                             "nothing until cosid_fork_acknowledge()")));
}
}  // namespace

void install_upgrade_source_hook() {
    previous_auth_hook = ClientAuthentication_hook;
    ClientAuthentication_hook = upgrade_source_hook;
}

void fork_check_marker_file() {
    char path[MAXPGPATH];
    marker_path(path, sizeof(path));
    FILE* f = AllocateFile(path, "r");
    if (f == nullptr) {
        if (errno != ENOENT)
            ereport(WARNING, (errcode_for_file_access(), errmsg("cosid: could not read \"%s\": %m", path)));
        marker_pending = errno != ENOENT;
        return;
    }
    char line[300] = "";
    if (fgets(line, sizeof(line), f) == nullptr) line[0] = '\0';
    FreeFile(f);
    line[strcspn(line, "\r\n")] = '\0';
    snprintf(marker_reason, sizeof(marker_reason), "A %s file in the data directory: %s", kMarkerName,
             line[0] != '\0' ? line : "this data directory is a copy of another server's.");
    if (store_is_remote()) {
        // Leasing from another server's store, a copy of this data directory is one more
        // instance there, with an incarnation of its own: nothing to declare.
        ereport(LOG, (errmsg("cosid: %s ignored: this server leases from a remote store (cosid.store_dsn), where a "
                             "copy of it is another instance with leases of its own",
                             kMarkerName)));
        remove_marker();
        return;
    }
    StoreError err;
    bool recorded = false;
    if (!store_fork_mark(marker_reason, &recorded, &err) || !recorded) {
        marker_pending = true;  // acquires are refused until it is recorded
        ereport(WARNING, (errmsg("cosid: could not record %s in the lease store: %s", kMarkerName,
                                 recorded ? err.message : "its catalog is older than 1.6"),
                          errdetail("No slot is acquired while the file waits: this data directory is a copy."),
                          errhint("ALTER EXTENSION cosid UPDATE in database \"%s\".", setting_database)));
        return;
    }
    ereport(LOG, (errmsg("cosid: %s recorded in the lease store: it grants nothing until cosid_fork_acknowledge()",
                         kMarkerName),
                  errdetail("%s", marker_reason)));
    remove_marker();
}

bool fork_before_local_acquire(StoreError* err) {
    if (marker_pending) {
        fork_check_marker_file();
        if (marker_pending) {
            strlcpy(err->message, marker_reason, sizeof(err->message));
            err->sqlerrcode = COSID_FORK;
            strlcpy(err->hint, "ALTER EXTENSION cosid UPDATE in the keeper's database, then restart the server.",
                    sizeof(err->hint));
            err->outcome_unknown = false;
            return false;
        }
    }
    if (!store_issuer_start(shared->incarnation, err)) return false;
    issuer_recorded = true;
    return true;
}

void fork_after_clean_stop() {
    if (store_is_remote() || !issuer_recorded) return;
    // Clean only when nothing of this incarnation is left open: a release the store did not
    // confirm leaves its entry (and a window the store still holds for it).
    LWLockAcquire(shared->lock, LW_SHARED);
    bool open = false;
    for (int i = 0; i < shared->npool; ++i)
        if (shared->pool[i].state == kLeased && !shared->pool[i].is_static) open = true;
    LWLockRelease(shared->lock);
    if (open) return;
    StoreError err;
    if (!store_issuer_stop(shared->incarnation, &err))
        ereport(LOG, (errmsg("cosid: the lease store did not record this clean stop: %s", err.message),
                      errdetail("A copy of this data directory started on a new timeline will wait for "
                                "cosid_fork_acknowledge().")));
}

}  // namespace cosid::pg

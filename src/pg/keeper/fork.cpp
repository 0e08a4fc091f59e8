// A server whose store is its own (the default: cosid.database on this server) forks when
// its data directory lives on twice: a standby promoted while it runs, a backup or disk copy
// started beside it, the old data directory of a pg_upgrade started again.  The store then
// exists twice, and each copy would grant the same slots.  The store recognises a new
// timeline, a restored dump and a declared copy (cosid._fork_reason) and grants nothing
// until cosid_fork_acknowledge(); this file is the keeper's part: it tells the store which
// server issues from it, and declares the copies only the data directory can tell about.
//
// A server issues from its store as soon as its keeper runs there: the record is written
// when the keeper finds the store ready (and again before each acquire), and no stop clears
// it.  A copy made before the first id, or after a clean stop, is still a copy of a server
// that may issue (its original may be started again, or acquire later).  A server that only
// serves a store to other instances says so (cosid.store_only) and records nothing.
#include "fork.hpp"

#include <sys/stat.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "../boundary.hpp"
#include "durable_file.hpp"
#include "../errors.hpp"
#include "../settings.hpp"
#include "../shmem/state.hpp"
#include "../store/store_history.hpp"

extern "C" {
#include "access/xact.h"
#include "executor/spi.h"
#include "libpq/auth.h"
#include "libpq/libpq-be.h"
#include "postmaster/postmaster.h"
#include "storage/fd.h"
#include "tcop/utility.h"
#include "utils/timestamp.h"
}

namespace cosid::pg {

namespace {
constexpr const char* kMarkerName = "cosid.fork";
bool marker_pending = false;    // a cosid.fork file this keeper could not record yet
bool timeline_pending = false;  // cosid.history's earlier timeline, not recorded in the store yet
// Failures to read or record them are logged once until they succeed: they are tried again
// every 200 ms or more (fork_retry_pending).
bool timeline_warned = false;
bool marker_warned = false;
// A cosid.fork file the store recorded but that could not be removed: only its removal is
// tried again (recording it again would undo an acknowledgment made since).
bool marker_unlink_pending = false;
// This keeper process looked at its data directory (fork_keeper_ready).  Per process: a
// keeper started again after an exit finds the pool, and shared->keeper_ready, as the last
// one left them, and must look for itself (its pending flags start false).
bool data_dir_looked = false;
// The forks cosid.history keeps were not yet all declared to the store this keeper uses
// (forks_declared): the data directory's word is not published before they are.
bool forks_unchecked = true;
int64 next_pending_retry_at = 0;
int64 pending_backoff_ms = 200;
char marker_reason[400];
char timeline_reason[300];
void marker_path(char* out, size_t size) { snprintf(out, size, "%s/%s", DataDir, kMarkerName); }

// A cosid.fork file's fork id: its inode and modification time to the nanosecond, the same
// for every look at one file (a file the keeper could not remove is not declared again as
// another fork) and another for a file made later, even in a reused inode.  False when the
// file cannot be looked at.
bool marker_fork_id(const char* path, char* out, size_t size) {
    struct stat st;
    if (stat(path, &st) != 0) return false;
    snprintf(out, size, "file-%llx-%llx-%lx", static_cast<unsigned long long>(st.st_ino),
             static_cast<unsigned long long>(st.st_mtim.tv_sec), static_cast<long>(st.st_mtim.tv_nsec));
    return true;
}

void remove_marker() {
    char path[MAXPGPATH];
    marker_path(path, sizeof(path));
    marker_pending = false;  // recorded (or nothing to record): only the file is left
    if (unlink(path) != 0 && errno != ENOENT) {
        if (!marker_unlink_pending)
            ereport(WARNING, (errcode_for_file_access(), errmsg("cosid: could not remove \"%s\": %m", path),
                              errdetail("The lease store recorded it; its removal is tried again. Left in place, a "
                                        "later start would record it again.")));
        marker_unlink_pending = true;
        return;
    }
    marker_unlink_pending = false;
    fsync_fname(DataDir, true);
}

constexpr const char* kUpgradedName = "cosid.upgraded";
constexpr const char* kSourceMarkText = "pg_upgrade copied this data directory into a new cluster";
void upgraded_path(char* out, size_t size) { snprintf(out, size, "%s/%s", DataDir, kUpgradedName); }

// The first line of `path` into `first`, the second into `second` (if asked), each without
// its line end ("" past the end of the file).  False when the file cannot be opened: errno
// says why (ENOENT: there is none).
bool read_head(const char* path, char* first, size_t first_len, char* second = nullptr, size_t second_len = 0) {
    FILE* f = AllocateFile(path, "r");
    if (f == nullptr) return false;
    char* lines[2] = {first, second};
    size_t lens[2] = {first_len, second_len};
    for (int k = 0; k < 2 && lines[k] != nullptr; ++k) {
        if (fgets(lines[k], static_cast<int>(lens[k]), f) == nullptr) lines[k][0] = '\0';
        lines[k][strcspn(lines[k], "\r\n")] = '\0';
    }
    FreeFile(f);
    return true;
}

// A read id (this_runs_read_id): 32 hex digits.
bool is_read_id(const char* s) { return strlen(s) == 32; }

// Why a cosid.fork file makes this data directory a copy: its first line, in `where`.
void marker_reason_of(const char* line, const char* where, char* out, size_t size) {
    snprintf(out, size, "A %s file in %s: %s", kMarkerName, where,
             line[0] != '\0' ? line : "this data directory is a copy of another server's.");
}

// The markers below: `text` written durably to `path`; unless `overwrite`, only where the
// file is not there already (false then).  `failed` says why a write failed, "" when it did not.
bool write_marker(const char* path, const char* text, bool overwrite, char* failed, size_t len) {
    failed[0] = '\0';
    struct stat st;
    if (!overwrite && stat(path, &st) == 0) return false;
    cpp_call([&] {
        if (auto bad = cosid::write_file_durably(path, text)) strlcpy(failed, bad->c_str(), len);
    });
    return true;
}

}  // namespace

void marker_file_path(char* out, size_t size) { marker_path(out, size); }
bool marker_file_fork_id(const char* path, char* out, size_t size) { return marker_fork_id(path, out, size); }
bool marker_write(const char* path, const char* text, char* failed, size_t len) {
    return write_marker(path, text, false, failed, len);
}

namespace {
ClientAuthentication_hook_type previous_auth_hook = nullptr;
ProcessUtility_hook_type previous_utility_hook = nullptr;
bool origin_stamp_pending = false;  // this backend is pg_upgrade's pg_dump of the old cluster
// A cosid.fork file that pg_upgrade's read found in the old data directory and did not write
// itself (an operator's, a copy's): its reason, declared in the store with the note.
char found_marker[400];

// One pg_upgrade run's read of the old cluster is named by a random id, noted in the store
// (upgrade_read_id) and left in pg_upgrade's socket directory, which the old and the new
// cluster's binary-upgrade servers share; the new cluster copies it into cosid.upgraded.  It
// keeps the floors only when the two match: a note from another run (one that failed, read on
// a server that then lost its newer history) never does.
constexpr const char* kReadIdName = "cosid_upgrade_read";
bool read_id_path(char* out, size_t size) {
    if (Unix_socket_directories == nullptr || Unix_socket_directories[0] == '\0') return false;
    char dir[MAXPGPATH];
    strlcpy(dir, Unix_socket_directories, sizeof(dir));
    dir[strcspn(dir, ",")] = '\0';  // the first directory (pg_upgrade sets exactly one)
    char* d = dir;
    while (*d == ' ') ++d;
    if (*d == '\0') return false;
    if (strlen(d) + 1 + strlen(kReadIdName) >= size) return false;
    strlcpy(out, d, size);
    strlcat(out, "/", size);
    strlcat(out, kReadIdName, size);
    return true;
}

// The old cluster's side: the read id of this server's run (shared by every pg_dump of it:
// a file written since this server started is this run's), or a new one.  "" when none could
// be left for the new cluster (its floors are then raised).
void this_runs_read_id(char* out, size_t size) {
    out[0] = '\0';
    char path[MAXPGPATH];
    if (!read_id_path(path, sizeof(path))) return;
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        static_cast<int64>(st.st_mtime) >= timestamptz_to_time_t(PgStartTime)) {
        char line[64];
        if (read_head(path, line, sizeof(line)) && is_read_id(line)) {
            strlcpy(out, line, size);
            return;
        }
    }
    uint8 bytes[16];
    if (!pg_strong_random(bytes, sizeof(bytes))) return;
    char id[33];
    for (size_t k = 0; k < 16; ++k) snprintf(id + 2 * k, 3, "%02x", bytes[k]);
    char text[40];
    snprintf(text, sizeof(text), "%s\n", id);
    // Never through a link another user left in a shared directory, readable by this user only.
    unlink(path);
    int fd = OpenTransientFilePerm(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | PG_BINARY, S_IRUSR | S_IWUSR);
    if (fd < 0) {
        ereport(WARNING, (errcode_for_file_access(), errmsg("cosid: could not write \"%s\": %m", path),
                          errdetail("pg_upgrade's new cluster will raise the store's floors.")));
        return;
    }
    bool ok = write(fd, text, strlen(text)) == static_cast<ssize_t>(strlen(text));
    ok = CloseTransientFile(fd) == 0 && ok;
    if (ok) strlcpy(out, id, size);
}

// pg_upgrade's read of the old cluster (pg_dump --binary-upgrade) comes after the cluster's
// last store call and before its clean stop.  The store's record then notes the cluster and
// the timeline it is on (upgrade_origin_*), and pg_upgrade carries the note with the table:
// the new cluster keeps the floors only when the store last wrote on that very timeline
// (cosid._follow_timeline).  A standby promoted and stopped before any store call has a
// record of the timeline before, whose tail it may have lost: the new cluster raises.
// Plain C inside: SPI may ereport, and an error here fails pg_dump, so pg_upgrade stops
// before the old cluster's stop rather than carry a note from an earlier run.
void stamp_upgrade_origin() {
    origin_stamp_pending = false;
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "cosid: SPI_connect failed");
    int rc = SPI_execute("SELECT 1 FROM pg_catalog.pg_attribute "
                         "WHERE attrelid = pg_catalog.to_regclass('cosid.store_state') "
                         "AND attname = 'upgrade_read_id' AND NOT attisdropped",
                         true, 1);
    if (rc == SPI_OK_SELECT && SPI_processed == 1) {
        char read_id[40];
        this_runs_read_id(read_id, sizeof(read_id));
        Oid types[2] = {TEXTOID, TEXTOID};
        Datum values[2] = {CStringGetTextDatum(read_id), CStringGetTextDatum(found_marker)};
        // A copy of a server that issued from this store (a promoted standby, a recovered
        // backup, before any store call of its own) is declared a fork here, so that its new
        // cluster opens no window, leased or static, until cosid_fork_acknowledge().
        // So is a data directory that carries a cosid.fork file pg_upgrade did not write (a
        // copy marked as the docs say, whose keeper never ran to record it).
        rc = SPI_execute_with_args(
            "UPDATE cosid.store_state s SET upgrade_origin_system = c.system_identifier, "
            "upgrade_origin_timeline = cosid._timeline(), upgrade_read_id = NULLIF($1, ''), "
            "fork_pending = coalesce(s.fork_pending, NULLIF($2, ''), "
            "CASE WHEN s.issuer_incarnation IS NOT NULL "
            "AND s.system_identifier = c.system_identifier AND s.timeline <> cosid._timeline() "
            "THEN pg_catalog.format('pg_upgrade read a copy of a server that was issuing ids from this "
            "store on timeline %s; the copy ran on timeline %s (a promoted standby, a recovered backup).', "
            "s.timeline, cosid._timeline()) END) "
            "FROM pg_catalog.pg_control_system() c",
            2, types, values, nullptr, false, 0);
        if (rc != SPI_OK_UPDATE) elog(ERROR, "cosid: could not note pg_upgrade's read in the lease store (%d)", rc);
        ereport(LOG, (errmsg("cosid: pg_upgrade read this cluster: its lease store notes the timeline it is on (%lu "
                             "record(s))",
                             (unsigned long)SPI_processed)));
    }
    SPI_finish();
}

void origin_stamp_utility(PlannedStmt* pstmt, const char* query, bool read_only_tree, ProcessUtilityContext context,
                          ParamListInfo params, QueryEnvironment* query_env, DestReceiver* dest, QueryCompletion* qc) {
    // pg_dump's first SETs run before its read-only snapshot transaction, each in a
    // transaction of its own: the note commits with the first of them.
    if (origin_stamp_pending && !IsTransactionBlock() && context == PROCESS_UTILITY_TOPLEVEL) stamp_upgrade_origin();
    if (previous_utility_hook != nullptr)
        previous_utility_hook(pstmt, query, read_only_tree, context, params, query_env, dest, qc);
    else
        standard_ProcessUtility(pstmt, query, read_only_tree, context, params, query_env, dest, qc);
}

void upgrade_source_hook(Port* port, int status) {
    if (previous_auth_hook != nullptr) previous_auth_hook(port, status);
    if (!IsBinaryUpgrade || status != STATUS_OK || port->application_name == nullptr) return;
    // pg_upgrade restores the schema into the NEW cluster with pg_restore.
    if (strcmp(port->application_name, "pg_restore") == 0) {
        mark_upgrade_target("pg_restore connected in binary-upgrade mode");
        return;
    }
    // pg_upgrade reads the old cluster with pg_dump --binary-upgrade (and pg_dumpall for its
    // roles); pg_upgrade --check does not, nor does anything in the new cluster.
    if (strcmp(port->application_name, "pg_dump") != 0 && strcmp(port->application_name, "pg_dumpall") != 0) return;
    origin_stamp_pending = strcmp(port->application_name, "pg_dump") == 0;
    char path[MAXPGPATH], text[400], failed[256];
    marker_path(path, sizeof(path));
    found_marker[0] = '\0';
    // (a mark this run wrote, at pg_dumpall's read of this server since it started, is not one)
    struct stat mark;
    bool earlier = stat(path, &mark) == 0 && static_cast<int64>(mark.st_mtime) < timestamptz_to_time_t(PgStartTime);
    char line[250];
    // Also pg_upgrade's own mark of an earlier run: its new cluster may have started (a
    // copy-mode old directory upgraded again makes a second history).  After a run that
    // failed before any new cluster started, the file may be removed before trying again.
    if (earlier && read_head(path, line, sizeof(line)))
        marker_reason_of(line, "the data directory pg_upgrade read", found_marker, sizeof(found_marker));
    snprintf(text, sizeof(text),
             "%s (%s read it in binary-upgrade mode at %s), which issues ids from the same store history.\n",
             kSourceMarkText, port->application_name, timestamptz_to_str(GetCurrentTimestamp()));
    if (!write_marker(path, text, false, failed, sizeof(failed))) return;
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

// The new cluster's side: the read id this pg_upgrade run left in its socket directory ("" when
// none): the file must have been written since the run began (the newest directory of
// pg_upgrade_output.d, named by its start in local time), and is taken once.
static void take_read_id(char* out, size_t size) {
    out[0] = '\0';
    char path[MAXPGPATH], logs[MAXPGPATH], newest[MAXPGPATH] = "";
    if (!read_id_path(path, sizeof(path))) return;
    snprintf(logs, sizeof(logs), "%s/pg_upgrade_output.d", DataDir);
    DIR* dir = AllocateDir(logs);
    if (dir == nullptr) return;
    for (struct dirent* de; (de = ReadDir(dir, logs)) != nullptr;)
        if (de->d_name[0] != '.' && strcmp(de->d_name, newest) > 0) strlcpy(newest, de->d_name, sizeof(newest));
    FreeDir(dir);
    struct tm began;
    memset(&began, 0, sizeof(began));
    const char* rest = strptime(newest, "%Y%m%dT%H%M%S", &began);
    if (rest == nullptr) return;
    began.tm_isdst = -1;
    time_t run_start = mktime(&began);
    struct stat st;
    if (run_start == static_cast<time_t>(-1) || lstat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid() || st.st_mtime + 1 < run_start)
        return;
    char line[64];
    if (!read_head(path, line, sizeof(line)) || !is_read_id(line)) return;
    strlcpy(out, line, size);
    unlink(path);
}

void mark_upgrade_target(const char* seen) {
    char path[MAXPGPATH], text[500], failed[256], read_id[40];
    upgraded_path(path, sizeof(path));
    take_read_id(read_id, sizeof(read_id));
    snprintf(text, sizeof(text),
             "system_identifier " UINT64_FORMAT "\n"
             "upgrade_read %s\n"
             "pg_upgrade made this cluster (%s at %s): its lease store's record of the old cluster is not a "
             "copy of a server that may still issue ids.\n",
             GetSystemIdentifier(), read_id[0] != '\0' ? read_id : "-", seen,
             timestamptz_to_str(GetCurrentTimestamp()));
    // This run's read is written over a file an earlier start (pg_upgrade --check) left.
    if (!write_marker(path, text, read_id[0] != '\0', failed, sizeof(failed))) return;
    if (failed[0] != '\0')
        ereport(WARNING, (errmsg("cosid: could not mark this data directory as pg_upgrade's new cluster: %s", failed),
                          errdetail("Where the old cluster's server issued ids from its own store, the new "
                                    "cluster's store will be taken for a copy of it (ZC009) until "
                                    "cosid_fork_acknowledge().")));
}

void install_upgrade_source_hook() {
    previous_auth_hook = ClientAuthentication_hook;
    ClientAuthentication_hook = upgrade_source_hook;
    previous_utility_hook = ProcessUtility_hook;
    ProcessUtility_hook = origin_stamp_utility;
}

// Once every copy the data directory shows is declared to the store, an acknowledgment may
// follow (cosid_fork_acknowledge waits for it).  The store's declaration committed before;
// the write barrier orders that before the timeline a backend reads (its own read barrier).
static void publish_checked() {
    if (!data_dir_looked || marker_pending || timeline_pending || forks_unchecked) return;
    pg_write_barrier();
    pg_atomic_write_u32(&shared->fork_checked_timeline, RecoveryInProgress() ? 0 : GetWALInsertionTimeLine());
}

// The cosid.fork file, recorded in the store, then removed; marker_pending until then.
static void fork_check_marker_file() {
    char path[MAXPGPATH];
    marker_path(path, sizeof(path));
    char line[300];
    if (!read_head(path, line, sizeof(line))) {
        const bool missing = errno == ENOENT;
        if (!missing && !marker_warned)
            ereport(WARNING, (errcode_for_file_access(), errmsg("cosid: could not read \"%s\": %m", path)));
        marker_warned = !missing;
        marker_pending = !missing;
        return;
    }
    marker_reason_of(line, "the data directory", marker_reason, sizeof(marker_reason));
    // Kept in cosid.history before anything else: the file may be removed (by this keeper
    // below, by an operator) and cosid.database or cosid.store_dsn changed, and every store
    // of this data directory must still refuse until the fork is acknowledged there.
    char id[64] = "", message[256];
    if (!marker_fork_id(path, id, sizeof(id))) strlcpy(message, "the file could not be looked at", sizeof(message));
    if (id[0] == '\0' || !history_add_fork(id, marker_reason, message, sizeof(message))) {
        marker_pending = true;
        if (!marker_warned)
            ereport(WARNING,
                    (errmsg("cosid: could not keep %s in the data directory's history: %s", kMarkerName, message),
                     errdetail("No slot is acquired while the file waits: this data directory is a copy.")));
        marker_warned = true;
        return;
    }
    if (store_is_remote() && !static_slots_configured()) {
        // Leasing from another server's store, a copy of this data directory is one more
        // instance there, with an incarnation of its own: nothing to declare.  (Static slots
        // are declared in cosid.database's own record: the copy's state file names the
        // original's slots, fork_static_check.)
        ereport(LOG, (errmsg("cosid: %s ignored: this server leases from a remote store (cosid.store_dsn), where a "
                             "copy of it is another instance with leases of its own",
                             kMarkerName)));
        remove_marker();
        return;
    }
    StoreError err;
    bool recorded = false;
    if (!store_fork_mark(id, marker_reason, &recorded, &err) || !recorded) {
        marker_pending = true;  // acquires are refused until it is recorded
        if (!marker_warned)
            ereport(WARNING, (errmsg("cosid: could not record %s in the lease store: %s", kMarkerName,
                                     recorded ? err.message : "its catalog is older than 1.6"),
                              errdetail("No slot is acquired while the file waits: this data directory is a copy."),
                              errhint("ALTER EXTENSION cosid UPDATE in database \"%s\".", setting_database)));
        marker_warned = true;  // tried again every 200 ms: logged once until recorded
        return;
    }
    marker_warned = false;
    ereport(LOG, (errmsg("cosid: %s recorded in the lease store: it grants nothing until cosid_fork_acknowledge()",
                         kMarkerName),
                  errdetail("%s", marker_reason)));
    remove_marker();
}

void declare_timeline_copy();

// Every fork cosid.history keeps, declared to the local store this keeper uses unless it was
// acknowledged there (cosid._fork_check), whichever database that is: a copy that switches
// cosid.database is refused by the new store too.  A remote store is not asked: there a copy
// is one more instance, with an incarnation and leases of its own.  False when the store
// could not be asked; *reason (with *refused) when a fork waits for its acknowledgment.
static bool forks_declared(bool* refused, bool* old_catalog, char* reason, size_t size, StoreError* err) {
    *refused = false;
    *old_catalog = false;
    if (store_is_remote() && !static_slots_configured()) return true;
    char message[256] = "";
    char* forks = history_forks_text(message, sizeof(message));
    if (forks == nullptr) {
        strlcpy(err->message, message, sizeof(err->message));
        err->sqlerrcode = COSID_STATIC_STATE;  // (ZC007: a damaged cosid.history, as store_history.cpp's)
        return false;
    }
    const bool any = forks[0] != '\0';
    bool checked = false;
    bool ok = !any || store_fork_check(forks, reason, size, refused, &checked, err);
    pfree(forks);
    if (ok && any && !checked) {
        // A catalog before 1.7 cannot tell whether it acknowledged them: refused, not guessed.
        *refused = true;
        *old_catalog = true;
        snprintf(reason, size,
                 "update cosid in database \"%s\": its catalog, older than 1.7, cannot say whether "
                 "the forks cosid.history keeps were acknowledged there",
                 setting_database);
    }
    return ok;
}

// What this keeper could not declare or remove yet, tried again; true while a declaration
// is still pending (nothing may be granted then: a file left to remove is no reason).
static bool declarations_pending() {
    if (!(marker_pending || timeline_pending || marker_unlink_pending)) return false;
    if (marker_unlink_pending && !marker_pending) remove_marker();
    if (marker_pending) fork_check_marker_file();
    if (timeline_pending) declare_timeline_copy();
    publish_checked();
    return marker_pending || timeline_pending;
}

// The forks kept, declared to the store (forks_declared); once that answered, the data
// directory's word is published (cosid_fork_acknowledge waits for it).
static bool forks_refuse(StoreError* err) {
    bool refused = false, old_catalog = false;
    char reason[400] = "";
    if (!forks_declared(&refused, &old_catalog, reason, sizeof(reason), err)) return true;
    forks_unchecked = false;
    publish_checked();
    if (!refused) return false;
    if (old_catalog) {
        strlcpy(err->message, reason, sizeof(err->message));
        snprintf(err->hint, sizeof(err->hint),
                 "ALTER EXTENSION cosid UPDATE in database \"%s\", then, once the other copy has stopped issuing, "
                 "SELECT cosid_fork_acknowledge(); there.",
                 setting_database);
    } else {
        snprintf(err->message, sizeof(err->message),
                 "this data directory is a copy of a server that may still issue ids, not acknowledged in this "
                 "store: %s",
                 reason);
        strlcpy(err->hint,
                "Once the other copy has stopped issuing, SELECT cosid_fork_acknowledge(); in the keeper's "
                "database (each store this server uses acknowledges it once).",
                sizeof(err->hint));
    }
    err->sqlerrcode = COSID_FORK;
    err->outcome_unknown = false;
    return true;
}

bool fork_before_local_acquire(StoreError* err) {
    if (declarations_pending()) {
        strlcpy(err->message, marker_pending ? marker_reason : timeline_reason, sizeof(err->message));
        err->sqlerrcode = COSID_FORK;
        strlcpy(err->hint,
                "ALTER EXTENSION cosid UPDATE in the keeper's database (or let the store answer), then "
                "call again; the server log says what failed.",
                sizeof(err->hint));
        err->outcome_unknown = false;
        return false;
    }
    if (forks_refuse(err)) return false;
    return store_issuer_start(shared->incarnation, err);
}

bool fork_static_check(StoreError* err) {
    char reason[256] = "";
    if (declarations_pending()) {
        strlcpy(reason, marker_pending ? marker_reason : timeline_reason, sizeof(reason));
    } else if (forks_refuse(err)) {
        return false;
    } else {
        bool pending = false;
        if (!store_fork_declared(reason, sizeof(reason), &pending, err)) return false;
        if (!pending) return true;
    }
    snprintf(err->message, sizeof(err->message),
             "this data directory is a copy of a server that may still issue ids: %s", reason);
    err->sqlerrcode = COSID_FORK;
    strlcpy(err->hint,
            "Once the other copy has stopped issuing, SELECT cosid_fork_acknowledge(); in the keeper's database.",
            sizeof(err->hint));
    err->outcome_unknown = false;
    return false;
}

void fork_record_issuer() {
    if (store_is_remote()) return;
    static int last_code = -1;  // logged when the answer changes, not every ttl/3
    StoreError err;
    int code = (setting_store_only ? store_issuer_clear(&err) : store_issuer_start(shared->incarnation, &err))
                   ? 0
                   : err.sqlerrcode;
    if (code == last_code) return;
    last_code = code;
    if (code == COSID_FORK)
        ereport(LOG, (errmsg("cosid: the lease store is a copy of a server that may still issue ids: %s", err.message),
                      errhint("%s", err.hint)));
    else if (code != 0)
        ereport(LOG, (errmsg("cosid: the lease store did not record this server as issuing from it: %s", err.message),
                      errdetail("It is tried again every ttl/3 and before every acquire.")));
}

// A data directory that issued from a store of its own server on another timeline than the
// one it runs on now was promoted or recovered: a copy of a server that issued, even when it
// now uses another database of the server as its store (cosid.database changed in a
// configuration kept outside the data directory), whose record names no issuer.
void declare_timeline_copy() {
    timeline_pending = false;
    if (store_is_remote() || setting_store_only) return;
    uint32 then = 0, now = GetWALInsertionTimeLine();
    if (!history_issued_on_timeline(&then) || then == 0 || then == now) return;
    char reason[300], message[256];
    snprintf(reason, sizeof(reason),
             "cosid.history in the data directory shows that it issued ids from a store of its server on timeline %u; "
             "it now runs on timeline %u: a promoted or recovered copy.",
             then, now);
    // Kept in cosid.history for good before the timeline there moves on: a later start with
    // another cosid.database must still find this fork (forks_declared).
    char id[64];
    snprintf(id, sizeof(id), "tl-" UINT64_FORMAT "-%u-%u", GetSystemIdentifier(), then, now);
    if (!history_add_fork(id, reason, message, sizeof(message))) {
        timeline_pending = true;
        strlcpy(timeline_reason, reason, sizeof(timeline_reason));
        if (!timeline_warned) ereport(WARNING, (errmsg("cosid: %s", message)));
        timeline_warned = true;
        return;
    }
    StoreError err;
    bool recorded = false;
    bool ok = store_fork_mark(id, reason, &recorded, &err);
    if (ok && !recorded) {
        // A store before 1.6 raises its floors on a new timeline itself, and has no way to
        // acknowledge a fork: the copy is only logged there, as before.
        ereport(WARNING, (errmsg("cosid: could not record in the lease store that this data directory is a copy: its "
                                 "catalog is older than 1.6"),
                          errdetail("%s", reason),
                          errhint("ALTER EXTENSION cosid UPDATE in database \"%s\".", setting_database)));
        return;
    }
    if (!ok) {
        timeline_pending = true;  // acquires are refused until it is recorded (fork_before_local_acquire)
        strlcpy(timeline_reason, reason, sizeof(timeline_reason));
        if (!timeline_warned)
            ereport(WARNING,
                    (errmsg("cosid: could not record in the lease store that this data directory is a copy: %s",
                            err.message),
                     errdetail("No slot is acquired until it is recorded; the keeper tries again.")));
        timeline_warned = true;
        return;
    }
    timeline_warned = false;
    ereport(LOG, (errmsg("cosid: %s The lease store grants nothing until cosid_fork_acknowledge().", reason)));
    if (!history_set_timeline(now, message, sizeof(message))) ereport(LOG, (errmsg("cosid: %s", message)));
}

void fork_keeper_ready() {
    pg_atomic_write_u32(&shared->fork_checked_timeline, 0);
    data_dir_looked = true;
    fork_check_marker_file();
    declare_timeline_copy();
    StoreError err;
    (void)forks_refuse(&err);  // declares what cosid.history keeps, then publishes (or at the next try)
    publish_checked();
    fork_record_issuer();
}

bool fork_data_dir_looked() { return data_dir_looked; }

bool fork_retry_pending() {
    // A cosid.fork file written since the keeper looked (restored => true, cosid_fork_file; an
    // operator's): kept in cosid.history at once, not only at the next start.
    if (data_dir_looked && !marker_pending && !marker_unlink_pending && !RecoveryInProgress()) {
        char path[MAXPGPATH];
        marker_path(path, sizeof(path));
        if (access(path, F_OK) == 0) {
            fork_check_marker_file();
            forks_unchecked = true;
        }
    }
    if (!(marker_pending || timeline_pending || marker_unlink_pending || forks_unchecked)) return false;
    if (mono_ms() < next_pending_retry_at) return true;
    declarations_pending();
    if (forks_unchecked) {
        StoreError err;
        (void)forks_refuse(&err);
    }
    // From the end of the tries, doubling up to 5 s: a store that does not answer must not
    // take the keeper's time from its renewals.
    const bool pending = marker_pending || timeline_pending || marker_unlink_pending || forks_unchecked;
    pending_backoff_ms = pending ? Min(pending_backoff_ms * 2, 5000) : 200;
    next_pending_retry_at = mono_ms() + pending_backoff_ms;
    return pending;
}

}  // namespace cosid::pg

// cosid._upgraded_here(): this data directory is pg_upgrade's new cluster (its cosid.upgraded
// file names this cluster's system identifier).  Read by cosid._follow_timeline and
// cosid._fork_reason when the store's one record comes from another cluster.  Plain C
// inside: an ereport may leave it.
extern "C" {
PG_FUNCTION_INFO_V1(cosid_upgraded_here);
PG_FUNCTION_INFO_V1(cosid_upgrade_read_here);
}

namespace cosid::pg {
// Whether this data directory's cosid.upgraded file names this cluster, and the id of the
// pg_upgrade read it names ("" when none).  Plain C inside: an ereport may leave it.
static bool upgraded_here(char* read_id, size_t size) {
    read_id[0] = '\0';
    char path[MAXPGPATH], first[100], second[100];
    upgraded_path(path, sizeof(path));
    if (!read_head(path, first, sizeof(first), second, sizeof(second))) {
        if (errno != ENOENT)
            ereport(ERROR, (errcode_for_file_access(), errmsg("cosid: could not read \"%s\": %m", path)));
        return false;
    }
    char expected[100];
    snprintf(expected, sizeof(expected), "system_identifier " UINT64_FORMAT, GetSystemIdentifier());
    if (strcmp(first, expected) != 0) return false;
    if (strncmp(second, "upgrade_read ", 13) == 0 && is_read_id(second + 13)) strlcpy(read_id, second + 13, size);
    return true;
}
}  // namespace cosid::pg

// cosid._upgrade_read_here(): the id of the pg_upgrade read that made this cluster (its
// cosid.upgraded file), NULL when the file does not name this cluster or no read.
extern "C" Datum cosid_upgrade_read_here(PG_FUNCTION_ARGS) {
    char read_id[40];
    if (!cosid::pg::upgraded_here(read_id, sizeof(read_id)) || read_id[0] == '\0') PG_RETURN_NULL();
    PG_RETURN_TEXT_P(cstring_to_text(read_id));
}

extern "C" Datum cosid_upgraded_here(PG_FUNCTION_ARGS) {
    char read_id[40];
    PG_RETURN_BOOL(cosid::pg::upgraded_here(read_id, sizeof(read_id)));
}

// cosid._fork_declared_here(): waits until the keeper has declared to its store every copy
// this data directory shows (fork_keeper_ready), on the timeline the server runs on now.
// cosid_fork_acknowledge() calls it first, so that the acknowledgment covers them: Patroni
// runs its callback as the promotion ends, when the keeper may not have looked yet, and a
// declaration after the acknowledgment would stop the new primary again.  Without the library
// preloaded no keeper declares anything.  Plain C inside: an ereport may leave it.
extern "C" {
PG_FUNCTION_INFO_V1(cosid_fork_declared_here);
}

using cosid::pg::shared;

extern "C" Datum cosid_fork_declared_here(PG_FUNCTION_ARGS) {
    using cosid::pg::elapsed_ms;
    using cosid::pg::mono_ms;
    using cosid::pg::wake_keeper;
    if (shared == nullptr || RecoveryInProgress()) PG_RETURN_VOID();
    // The keeper declares into its own database's store only, and nothing at all when it
    // leases from a remote store without static slots (fork_check_marker_file).
    if (!cosid::pg::in_store_database() || (cosid::pg::store_is_remote() && !cosid::pg::static_slots_configured()))
        PG_RETURN_VOID();
    // Its later statements must see what the keeper declares meanwhile: a snapshot taken
    // once for the whole transaction would not.
    if (IsolationUsesXactSnapshot())
        ereport(ERROR, (errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
                        errmsg("cosid_fork_acknowledge() must run in a READ COMMITTED transaction"),
                        errdetail("It waits for the keeper to declare what the data directory shows, and must then see "
                                  "that declaration; a REPEATABLE READ or SERIALIZABLE snapshot would not."),
                        errhint("Run it in its own transaction: SET default_transaction_isolation = 'read committed' "
                                "first, if your settings choose another level.")));
    constexpr int kWaitMs = 30000;
    const uint32 now = GetWALInsertionTimeLine();
    const int64 start = mono_ms();
    for (;;) {
        uint32 checked = pg_atomic_read_u32(&shared->fork_checked_timeline);
        pg_read_barrier();  // pairs with publish_checked's write barrier: its declaration is seen
        if (checked == now) PG_RETURN_VOID();
        if (elapsed_ms(start) >= kWaitMs) break;
        wake_keeper();
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 50, PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
    char problem[256];
    LWLockAcquire(shared->lock, LW_SHARED);
    strlcpy(problem, shared->keeper_pid == 0 ? "the keeper is not running" : shared->keeper_problem_message,
            sizeof(problem));
    LWLockRelease(shared->lock);
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("cosid_fork_acknowledge: the keeper has not yet declared what this data directory shows"),
                    errdetail("The keeper tells the store which copies its data directory reveals (a promotion, a "
                              "cosid.fork file) when it finds the store ready; an acknowledgment before that would not "
                              "cover them. Waited %d ms%s%s.",
                              kWaitMs, problem[0] != '\0' ? "; the keeper reports: " : "", problem),
                    errhint("Check the keeper (SELECT * FROM cosid_health() WHERE name = 'keeper', and the server "
                            "log), then run cosid_fork_acknowledge() again.")));
    PG_RETURN_VOID();
}

// cosid._fork_file(reason): cosid_store_follow_timeline(restored => true) declares this data
// directory a copy: the declaration belongs to the data directory, not to the one database it
// ran in, so it is written as a cosid.fork file (when there is none), which the keeper keeps in
// cosid.history at its next look (fork_retry_pending) and declares to every store it uses.
// Returns the fork id the keeper gives the file (marker_fork_id), which the caller declares
// in its store at once, so that an acknowledgment there covers it; NULL when a file was there.
// Plain C inside but for write_marker's cpp_call: an ereport may leave it.
extern "C" {
PG_FUNCTION_INFO_V1(cosid_fork_file);
}

extern "C" Datum cosid_fork_file(PG_FUNCTION_ARGS) {
    char path[MAXPGPATH], line[500], failed[256], id[64];
    cosid::pg::marker_file_path(path, sizeof(path));
    char* reason = text_to_cstring(PG_GETARG_TEXT_PP(0));
    snprintf(line, sizeof(line), "%s\n", reason);
    bool written = cosid::pg::marker_write(path, line, failed, sizeof(failed));
    if (failed[0] != '\0' || (written && !cosid::pg::marker_file_fork_id(path, id, sizeof(id))))
        ereport(ERROR, (errcode_for_file_access(),
                        errmsg("cosid: could not write \"%s\": %s", path,
                               failed[0] != '\0' ? failed : "it cannot be looked at"),
                        errhint("Create the file by hand: this data directory is a copy.")));
    if (!written) PG_RETURN_NULL();
    PG_RETURN_TEXT_P(cstring_to_text(id));
}

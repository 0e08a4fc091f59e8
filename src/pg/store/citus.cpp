#include "citus.hpp"

#include "../errors.hpp"
#include "../settings.hpp"

extern "C" {
#include "commands/extension.h"
#include "utils/varlena.h"
}

namespace cosid::pg {

const char* const kCitusPresentQuery = "SELECT pg_catalog.to_regclass('pg_catalog.pg_dist_local_group') IS NOT NULL";
// pg_dist_local_group holds one row; a coordinator that registered itself
// (citus_set_coordinator_host) is the primary of group 0 in pg_dist_node.
const char* const kCitusNodeQuery =
    "SELECT l.groupid, c.nodename, c.nodeport FROM pg_catalog.pg_dist_local_group l "
    "LEFT JOIN LATERAL (SELECT n.nodename, n.nodeport FROM pg_catalog.pg_dist_node n "
    "WHERE n.groupid = 0 AND n.noderole = 'primary' ORDER BY n.nodeid LIMIT 1) c ON true";

void citus_worker_detail(const CitusNode& n, char* out, size_t size) {
    snprintf(out, size,
             "database \"%s\" is node group %d of a Citus cluster and cosid.store_dsn is not set: a store of its "
             "own would grant the coordinator's slots again, and both nodes would issue the same ids",
             setting_database, n.group);
}

void citus_worker_hint(const CitusNode& n, const char* what, char* out, size_t size) {
    if (what != nullptr) {
        if (n.coordinator_host[0] != '\0')
            snprintf(out, size, "Run %s on the coordinator (%s port %d), which holds the lease store.", what,
                     n.coordinator_host, n.coordinator_port);
        else
            snprintf(out, size, "Run %s on the coordinator, which holds the lease store.", what);
    } else if (n.coordinator_host[0] != '\0') {
        snprintf(out, size,
                 "Set cosid.store_dsn = 'host=%s port=%d dbname=%s user=...' on this node (the coordinator's "
                 "store; user: a login role there in cosid_keeper) and restart it.",
                 n.coordinator_host, n.coordinator_port, setting_database);
    } else {
        snprintf(out, size,
                 "Set cosid.store_dsn to the coordinator's database (a keeper role there) on this node and restart "
                 "it.");
    }
}

void report_citus_worker(const char* keeper_detail, const char* hint) {
    ereport(ERROR, (errcode(COSID_KEEPER_UNAVAILABLE),
                    errmsg("cosid does not issue ids on this Citus worker without cosid.store_dsn"),
                    errdetail("The keeper reports: %s.", keeper_detail), errhint("%s", hint)));
}

CitusNode citus_node_spi() {
    CitusNode n;
    memset(&n, 0, sizeof(n));
    if (SPI_execute(kCitusPresentQuery, true, 1) != SPI_OK_SELECT || SPI_processed != 1) return n;
    bool isnull;
    Datum present = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
    if (isnull || !DatumGetBool(present)) return n;
    if (SPI_execute(kCitusNodeQuery, true, 1) != SPI_OK_SELECT || SPI_processed != 1) return n;
    n.citus = true;
    n.group = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    char* host = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
    if (host != nullptr) strlcpy(n.coordinator_host, host, sizeof(n.coordinator_host));
    char* port = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
    if (port != nullptr) n.coordinator_port = atoi(port);
    return n;
}

namespace {
// "citus", "$libdir/citus", "citus.so": the library's name without directory and suffix.
bool library_is(const char* entry, const char* name) {
    const char* base = strrchr(entry, '/');
    base = base ? base + 1 : entry;
    size_t len = strlen(name);
    return strncmp(base, name, len) == 0 && (base[len] == '\0' || strcmp(base + len, ".so") == 0);
}
}  // namespace

void warn_if_preloaded_before_citus() {
    if (!process_shared_preload_libraries_in_progress || shared_preload_libraries_string == nullptr) return;
    char* raw = pstrdup(shared_preload_libraries_string);
    List* names = NIL;
    if (!SplitDirectoriesString(raw, ',', &names)) return;  // the postmaster reports a bad list
    int cosid_at = -1, citus_at = -1, i = 0;
    ListCell* lc;
    foreach (lc, names) {
        const char* name = static_cast<const char*>(lfirst(lc));
        if (cosid_at < 0 && library_is(name, "cosid")) cosid_at = i;
        if (citus_at < 0 && library_is(name, "citus")) citus_at = i;
        ++i;
    }
    if (cosid_at >= 0 && citus_at > cosid_at)
        ereport(LOG, (errmsg("cosid is loaded before citus (shared_preload_libraries = '%s')",
                             shared_preload_libraries_string),
                      errdetail("Citus stops the server unless it is the first library loaded."),
                      errhint("Set shared_preload_libraries = 'citus,cosid'.")));
}

// The namespaces and the store live on the coordinator; a worker's own tables are not them.
// Inside CREATE EXTENSION (Citus propagates it to the workers) the script's own calls pass:
// the script makes the local catalog, which every node needs.
void refuse_on_citus_worker(const char* what) {
    if (creating_extension) return;
    SPI_connect();
    CitusNode n = citus_node_spi();
    SPI_finish();
    if (!citus_worker(n)) return;
    char detail[512], hint[256];
    snprintf(detail, sizeof(detail),
             "This database is node group %d of a Citus cluster; cosid's namespaces and lease store live on the "
             "coordinator (group 0), and every node leases from there through cosid.store_dsn",
             n.group);
    citus_worker_hint(n, what, hint, sizeof(hint));
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE), errmsg("%s cannot run on a Citus worker", what),
                    errdetail("%s.", detail), errhint("%s", hint)));
}

}  // namespace cosid::pg

using namespace cosid::pg;

extern "C" {
PG_FUNCTION_INFO_V1(cosid_refuse_on_citus_worker);
}

extern "C" Datum cosid_refuse_on_citus_worker(PG_FUNCTION_ARGS) {
    if (!PG_ARGISNULL(0)) refuse_on_citus_worker(text_to_cstring(PG_GETARG_TEXT_PP(0)));
    PG_RETURN_VOID();
}

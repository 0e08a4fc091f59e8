// Citus (docs/citus.md): a database that is a node of a Citus cluster.  Its lease store lives on
// the coordinator; a worker's own store (CREATE EXTENSION cosid propagated by Citus) would
// grant the same slots as the coordinator's, and both would issue the same ids.  These
// helpers tell which node this is, from Citus' catalog tables read as plain tables: nothing
// here needs Citus loaded, and a database without Citus pays one to_regclass lookup.
#pragma once
#include "../pg.hpp"

namespace cosid::pg {

// The first query: does this database hold Citus' metadata?  One row, one boolean.
extern const char* const kCitusPresentQuery;
// The second, only where the first said yes: this node's group (0: the coordinator) and the
// coordinator's host and port (NULL when the metadata names none).
extern const char* const kCitusNodeQuery;

struct CitusNode {
    bool citus;                  // Citus' metadata is in this database
    int32 group;                 // this node's group; 0 is the coordinator
    char coordinator_host[256];  // '' when unknown
    int coordinator_port;        // 0 when unknown
};

// A node of a Citus cluster other than the coordinator.
inline bool citus_worker(const CitusNode& n) { return n.citus && n.group != 0; }

// The DETAIL and HINT of a refusal on a Citus worker (the guard and the SQL functions).
void citus_worker_detail(const CitusNode& n, char* out, size_t size);
void citus_worker_hint(const CitusNode& n, const char* what, char* out, size_t size);

// The caller's ERROR (ZC006) where the keeper refused a local store on a Citus worker.
void report_citus_worker(const char* keeper_detail, const char* hint);

// With SPI connected, in the caller's transaction.
CitusNode citus_node_spi();

// An ERROR (55000, DETAIL, HINT naming the coordinator) when this database is a Citus worker:
// for cosid_namespace_create and cosid_adopt.  Connects SPI itself.
void refuse_on_citus_worker(const char* what);

// At _PG_init while shared_preload_libraries is processed: a LOG line with a HINT when
// citus comes after cosid there (Citus then stops the server: "Citus has to be loaded first").
void warn_if_preloaded_before_citus();

}  // namespace cosid::pg

#include "store_errors.hpp"

#include <cstring>

namespace cosid {

bool store_error_is_transient(const char* sqlstate) {
    if (sqlstate == nullptr || std::strlen(sqlstate) != 5) return false;
    const char* const transient_classes[] = {"08", "53"};
    for (const char* c : transient_classes)
        if (std::strncmp(sqlstate, c, 2) == 0) return true;
    const char* const transient_codes[] = {"40001", "40P01", "55P03", "57014", "57P01",
                                           "57P02", "57P03", "58000", "58030", "25006"};
    for (const char* c : transient_codes)
        if (std::strcmp(sqlstate, c) == 0) return true;
    return false;
}

namespace {

// Words of a connection failure that passes (the store is starting, away, full): no refusal.
const char* const kTransientConnectWords[] = {"Connection refused",
                                              "timeout expired",
                                              "timed out",
                                              "starting up",
                                              "shutting down",
                                              "too many",
                                              "recovery",
                                              "No route to host",
                                              "could not translate host name",
                                              "Network is unreachable",
                                              "server closed the connection",
                                              "reserved for",
                                              "out of memory"};

// Words of a connection failure that lasts, and what the keeper's callers are told.
struct ConnectRule {
    const char* words;
    ConnectRefusal refusal;
};
const ConnectRule kConnectRules[] = {
    {"password authentication failed",
     {"28P01", "The store refused the password of the role in cosid.store_dsn. Set the role's password on the "
               "store (ALTER ROLE ... PASSWORD), or fix password= in cosid.store_dsn or the line in the "
               "~/.pgpass of the user the server runs as."}},
    {"no password supplied",
     {"28P01", "The store asks for a password and cosid.store_dsn gives none. Add password=... to "
               "cosid.store_dsn, or a line host:port:dbname:user:password in the ~/.pgpass of the user the "
               "server runs as (mode 0600)."}},
    {"no pg_hba.conf entry",
     {"28000", "The store's pg_hba.conf lets this connection in with no method. Add a line for the keeper's "
               "role and this host there (host ... scram-sha-256) and reload the store."}},
    {"Peer authentication failed",
     {"28000", "The store checks the operating system user for this connection (peer). Connect through TCP "
               "with a password (host= in cosid.store_dsn), or map the server's user to the role in the "
               "store's pg_ident.conf."}},
    {"Ident authentication failed",
     {"28000", "The store checks the operating system user for this connection (ident). Connect with a "
               "password, or map the server's user to the role in the store's pg_ident.conf."}},
    {"authentication failed",
     {"28000", "The store refused the login of the role in cosid.store_dsn. Check the store's pg_hba.conf "
               "and the role's credentials."}},
    {"is not permitted to log in",
     {"28000", "The role in cosid.store_dsn may not log in. On the store: ALTER ROLE ... LOGIN."}},
    {"role \"",
     {"28000", "The role in cosid.store_dsn does not exist on the store. Create it there: CREATE ROLE ... "
               "LOGIN PASSWORD '...' IN ROLE cosid_keeper."}},
    {"database \"",
     {"3D000", "The database in cosid.store_dsn does not exist on the store. Set dbname= to the store's "
               "database that holds the cosid extension, and restart the server."}},
    {"permission denied for database",
     {"42501", "The role in cosid.store_dsn may not connect to the store's database. On the store: GRANT "
               "CONNECT ON DATABASE ... TO the role."}},
    {"invalid connection option",
     {"22023", "cosid.store_dsn is not a valid connection string. Fix it and restart the server."}},
    {"missing \"=\" after",
     {"22023", "cosid.store_dsn is not a valid connection string. Fix it and restart the server."}},
    {"invalid URI", {"22023", "cosid.store_dsn is not a valid connection string. Fix it and restart the server."}},
    {"invalid percent-encoded token",
     {"22023", "cosid.store_dsn is not a valid connection string. Fix it and restart the server."}},
    {"unterminated quoted string",
     {"22023", "cosid.store_dsn is not a valid connection string. Fix it and restart the server."}},
    {"end of string reached when looking for matching",
     {"22023", "cosid.store_dsn is not a valid connection string. Fix it and restart the server."}},
    {"invalid port number",
     {"22023", "cosid.store_dsn is not a valid connection string. Fix it and restart the server."}},
    {"invalid integer value",
     {"22023", "cosid.store_dsn is not a valid connection string. Fix it and restart the server."}},
    {"unexpected spaces found in",
     {"22023", "cosid.store_dsn is not a valid connection string. Fix it and restart the server."}},
    {"unexpected character",
     {"22023", "cosid.store_dsn is not a valid connection string. Fix it and restart the server."}},
    {"invalid sslmode value",
     {"22023", "cosid.store_dsn is not a valid connection string. Fix it and restart the server."}},
};

}  // namespace

ConnectRefusal store_connect_refusal(const char* message) {
    if (message == nullptr) return {nullptr, nullptr};
    for (const char* w : kTransientConnectWords)
        if (std::strstr(message, w) != nullptr) return {nullptr, nullptr};
    for (const ConnectRule& r : kConnectRules) {
        if (std::strstr(message, r.words) == nullptr) continue;
        // "role" and "database" name an object that does not exist
        if ((std::strcmp(r.words, "role \"") == 0 || std::strcmp(r.words, "database \"") == 0) &&
            std::strstr(message, "does not exist") == nullptr)
            continue;
        return r.refusal;
    }
    return {nullptr, nullptr};
}

}  // namespace cosid

// The core is compiled without PostgreSQL so GoogleTest can test it directly.
#ifdef POSTGRES_H
#error "src/core must stay free of PostgreSQL headers"
#endif

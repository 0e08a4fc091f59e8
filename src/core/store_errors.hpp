// Which errors of the lease store the keeper retries.
//
// Transient: the same call may succeed if tried again soon, without anyone changing anything:
// the connection or the server is going (class 08, 57P01-57P03), the store is failing over to
// a standby (25006), a race or a timeout lost to other transactions (40001, 40P01, 55P03,
// 57014), or the server is short of resources (class 53, 58000, 58030).  Everything else is
// permanent, internal errors (XX000) included: a missing namespace, a privilege, a layout
// mismatch or a bad value stays wrong until an administrator acts, so retrying only hides it.
#pragma once

namespace cosid {

// sqlstate is the 5-character SQLSTATE text.  Anything else (nullptr, another length) is not
// an answer of the store and counts as permanent: a caller that lost the connection without
// an SQLSTATE passes "08006" (connection_failure), as sqlstate_of in src/pg/store/store.cpp does.
bool store_error_is_transient(const char* sqlstate);

// A failed connection to a remote store (libpq's PQerrorMessage, which carries no SQLSTATE):
// a refusal that no retry mends until someone changes a password, a role, a database, the
// store's pg_hba.conf or cosid.store_dsn.  `sqlstate` is the server's SQLSTATE for it (every
// one permanent for store_error_is_transient) and `hint` says what to fix.  A message that
// also shows a transient failure (another host of the DSN refused the connection, a server
// starting up, a timeout) is not a refusal: nullptr then, and the keeper retries.  libpq and
// the server print these messages in English unless lc_messages says otherwise: a translated
// refusal is not recognised and is retried as before (until cosid.acquire_timeout).
struct ConnectRefusal {
    const char* sqlstate;  // nullptr: not a refusal
    const char* hint;
};
ConnectRefusal store_connect_refusal(const char* message);

}  // namespace cosid

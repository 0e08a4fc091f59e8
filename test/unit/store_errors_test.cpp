#include <gtest/gtest.h>

#include "store_errors.hpp"

#include <cstring>

using cosid::store_error_is_transient;

TEST(StoreErrors, TransientWhenATryAgainMaySucceed) {
    for (const char* s : {"08000", "08003", "08006", "08001", "08004", "08P01",  // connection
                          "40001", "40P01", "55P03", "57014",                    // races, timeouts
                          "57P01", "57P02", "57P03",                             // server going
                          "53000", "53100", "53200", "53300", "53400",           // resources
                          "58000", "58030", "25006"})                            // i/o, failover
        EXPECT_TRUE(store_error_is_transient(s)) << s;
}

TEST(StoreErrors, PermanentOtherwise) {
    for (const char* s :
         {"XX000", "XX001", "42704", "42P17", "42501", "42883", "22023", "22003", "23505", "23502", "P0001",
          "ZC003", "40002", "40003", "55006", "57P04", "58P01", "25001", "00000", "0A000", "54000"})
        EXPECT_FALSE(store_error_is_transient(s)) << s;
}

TEST(StoreErrors, MalformedIsPermanent) {
    EXPECT_FALSE(store_error_is_transient(nullptr));
    EXPECT_FALSE(store_error_is_transient(""));
    EXPECT_FALSE(store_error_is_transient("08"));
    EXPECT_FALSE(store_error_is_transient("400010"));
    EXPECT_FALSE(store_error_is_transient("40p01"));  // SQLSTATEs are upper case
}

using cosid::store_connect_refusal;

TEST(StoreErrors, ConnectRefusalsArePermanentWithAHint) {
    struct Case {
        const char* message;
        const char* sqlstate;
    } cases[] = {
        {"connection to server at \"localhost\" (::1), port 5432 failed: FATAL:  password authentication failed for "
         "user \"keeper_second\"\n",
         "28P01"},
        {"connection to server at \"localhost\" (::1), port 5432 failed: fe_sendauth: no password supplied\n", "28P01"},
        {"connection to server at \"10.0.0.5\", port 5432 failed: FATAL:  no pg_hba.conf entry for host \"10.0.0.6\", "
         "user \"k\", database \"postgres\", no encryption\n",
         "28000"},
        {"connection to server on socket \"/var/run/postgresql/.s.PGSQL.5432\" failed: FATAL:  Peer authentication "
         "failed for user \"k\"\n",
         "28000"},
        {"connection to server at \"h\", port 5432 failed: FATAL:  role \"nobody\" does not exist\n", "28000"},
        {"connection to server at \"h\", port 5432 failed: FATAL:  role \"k\" is not permitted to log in\n", "28000"},
        {"connection to server at \"h\", port 5432 failed: FATAL:  database \"nodb\" does not exist\n", "3D000"},
        {"connection to server at \"h\", port 5432 failed: FATAL:  permission denied for database \"postgres\"\n"
         "DETAIL:  User does not have CONNECT privilege.\n",
         "42501"},
        {"invalid connection option \"passwd\"\n", "22023"},
        {"missing \"=\" after \"garbage\" in connection info string\n", "22023"},
        {"end of string reached when looking for matching \"]\" in IPv6 host address in URI: \"postgresql://k:"
         "********@[::1/postgres\"\n",
         "22023"},
    };
    for (const Case& c : cases) {
        auto r = store_connect_refusal(c.message);
        ASSERT_NE(r.sqlstate, nullptr) << c.message;
        EXPECT_STREQ(r.sqlstate, c.sqlstate) << c.message;
        EXPECT_FALSE(store_error_is_transient(r.sqlstate)) << c.message;
        ASSERT_NE(r.hint, nullptr) << c.message;
        EXPECT_GT(strlen(r.hint), 20u) << c.message;
    }
}

TEST(StoreErrors, ConnectFailuresThatMayMendAreNotRefusals) {
    for (const char* m :
         {"connection to server at \"localhost\" (::1), port 5432 failed: Connection refused\n\tIs the server running "
          "on that host and accepting TCP/IP connections?\n",
          "connection to server at \"h\", port 5432 failed: FATAL:  the database system is starting up\n",
          "connection to server at \"h\", port 5432 failed: FATAL:  the database system is shutting down\n",
          "connection to server at \"h\", port 5432 failed: FATAL:  sorry, too many clients already\n",
          "connection to server at \"h\", port 5432 failed: FATAL:  too many connections for role \"k\"\n",
          "connecting to the lease store timed out after 2000 ms",
          "could not translate host name \"store\" to address: Name or service not known\n",
          // two hosts: one refused the password, the other is down: the next try may reach a good one
          "connection to server at \"a\", port 5432 failed: FATAL:  password authentication failed for user \"k\"\n"
          "connection to server at \"b\", port 5432 failed: Connection refused\n",
          "server closed the connection unexpectedly\n", "", "FATAL:  role \"k\" is busy"}) {
        EXPECT_EQ(store_connect_refusal(m).sqlstate, nullptr) << m;
    }
    EXPECT_EQ(store_connect_refusal(nullptr).sqlstate, nullptr);
}

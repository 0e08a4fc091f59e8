#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "calendar.hpp"
#include "dsn_scrub.hpp"

using cosid::dsn_secrets;
using cosid::scrub_dsn_secrets;

namespace {

// What libpq and a store may say about a DSN: the whole string quoted, its URI, and the
// messages libpq builds from pieces of it (its wording, with the DSN's own text in them).
std::vector<std::string> messages_about(const std::string& dsn, const std::vector<std::string>& echoed) {
    std::vector<std::string> out = {
        "end of string reached when looking for matching \"]\" in IPv6 host address in URI: \"" + dsn + "\"",
        "could not parse \"" + dsn + "\" as a connection string",
        dsn,
    };
    for (const std::string& e : echoed) {
        out.push_back("invalid percent-encoded token: \"" + e + "\"");
        out.push_back("missing \"=\" after \"" + e + "\" in connection info string");
        out.push_back("invalid URI query parameter: \"" + e + "\"");
        out.push_back("invalid integer value \"" + e + "\" for connection option \"port\"");
        out.push_back("could not translate host name \"" + e + "\" to address: Name or service not known");
    }
    return out;
}

struct Case {
    const char* dsn;
    std::vector<std::string> must_hide;  // the password and what libpq may cut from it
    std::vector<std::string> echoed;     // pieces libpq echoes in its messages
};

const std::vector<Case>& cases() {
    static const std::vector<Case> c = {
        // URIs: well-formed, malformed, percent-encoded, several hosts, unencoded delimiters
        {"postgresql://keeper_a:TopSecret42@[::1/postgres", {"TopSecret42"}, {}},
        {"postgresql://keeper_a:TopSecret42@db.example:5432/postgres", {"TopSecret42"}, {}},
        {"postgres://keeper_a:TopSecret42@h1:5432,h2:5433,[::1]:5434/postgres?target_session_attrs=read-write",
         {"TopSecret42"},
         {}},
        {"postgresql://keeper_a:Top%53ecret42@host/db", {"Top%53ecret42", "TopSecret42"}, {"Top%53ecret42"}},
        {"postgresql://keeper_a:TopSecret42%zz@host/db", {"TopSecret42%zz", "TopSecret42"}, {"TopSecret42%zz"}},
        {"postgresql://keeper_a:Top%00Secret42@host/db", {"Top%00Secret42"}, {"Top%00Secret42"}},
        {"postgresql://keeper_a:Top/Secret42@host/db", {"Top/Secret42", "Secret42"}, {"Top", "Secret42@host"}},
        {"postgresql://keeper_a:Top@Secret42@host/db", {"Top@Secret42"}, {"Top@Secret42@host"}},
        {"postgresql://keeper_a:Top:Secret42@host/db", {"Top:Secret42", "Secret42"}, {"Secret42"}},
        {"postgresql://:TopSecret42@host/db", {"TopSecret42"}, {}},
        {"postgresql://keeper_a:TopSecret42@", {"TopSecret42"}, {}},
        {"postgresql://keeper_a:TopSecret42@host:notaport/db", {"TopSecret42"}, {"notaport"}},
        {"postgresql://host/db?user=keeper_a&password=TopSecret42&bogus=1", {"TopSecret42"}, {"bogus=1"}},
        {"postgresql://host/db?password=TopSecret42%", {"TopSecret42%", "TopSecret42"}, {"TopSecret42%"}},
        {"postgresql://host/db?password=Top%20Secret42",
         {"Top%20Secret42", "Top Secret42", "Secret42"},
         {"Top%20Secret42"}},
        {"postgresql://host/db?sslpassword=TopSecret42", {"TopSecret42"}, {}},
        {"postgresql://host/db?PASSWORD=TopSecret42", {"TopSecret42"}, {}},
        // keyword form: plain, quoted, escaped, unterminated, spaces, odd case, garbage after
        {"host=db port=5432 user=keeper_a password=TopSecret42 dbname=postgres", {"TopSecret42"}, {}},
        {"host=db password='TopSecret42' dbname=postgres", {"TopSecret42"}, {}},
        {"host=db password = 'Top Secret42' dbname=postgres", {"Top Secret42", "Secret42"}, {"Secret42"}},
        {"host=db password='Top\\'Secret42' dbname=postgres",
         {"Top\\'Secret42", "Top'Secret42", "Secret42"},
         {"Secret42"}},
        {"host=db password='TopSecret42 dbname=postgres", {"TopSecret42 dbname=postgres", "TopSecret42"}, {}},
        {"host=db password=Top Secret42", {"Top Secret42", "Secret42"}, {"Secret42"}},
        {"host=db password=Top Secret42 port=5432", {"Top Secret42", "Secret42"}, {"Secret42"}},
        {"host=db password=Top\\ Secret42 port=5432", {"Top\\ Secret42", "Top Secret42", "Secret42"}, {"Secret42"}},
        {"host=db Password=TopSecret42", {"TopSecret42"}, {}},
        {"host=db sslpassword=TopSecret42 sslkey=/k", {"TopSecret42"}, {}},
        {"password=TopSecret42", {"TopSecret42"}, {}},
        {"host=db password=TopSecret42=x", {"TopSecret42=x", "TopSecret42"}, {"TopSecret42=x"}},
        {"host=db password=\"TopSecret42\"", {"\"TopSecret42\"", "TopSecret42"}, {"\"TopSecret42\""}},
        {"host=db\tpassword=TopSecret42\nport=5", {"TopSecret42"}, {}},
        // a URI as a keyword's value, two passwords in one string
        {"dbname='postgresql://keeper_a:TopSecret42@host/db' password=Other99x", {"TopSecret42", "Other99x"}, {}},
    };
    return c;
}

}  // namespace

TEST(DsnScrub, NoMessageKeepsThePasswordOfAnyDsn) {
    for (const Case& c : cases()) {
        for (const std::string& m : messages_about(c.dsn, c.echoed)) {
            std::string scrubbed = scrub_dsn_secrets(m, c.dsn);
            for (const std::string& secret : c.must_hide)
                EXPECT_EQ(scrubbed.find(secret), std::string::npos)
                    << "DSN [" << c.dsn << "] message [" << m << "] scrubbed [" << scrubbed << "] shows [" << secret
                    << "]";
        }
    }
}

TEST(DsnScrub, MessagesStayReadable) {
    const std::string dsn = "host=db.example port=5432 user=keeper_a password=TopSecret42 dbname=postgres";
    EXPECT_EQ(scrub_dsn_secrets("connection to server at \"db.example\" (10.0.0.1), port 5432 failed: "
                                "FATAL:  password authentication failed for user \"keeper_a\"",
                                dsn),
              "connection to server at \"db.example\" (10.0.0.1), port 5432 failed: "
              "FATAL:  password authentication failed for user \"keeper_a\"");
    EXPECT_EQ(scrub_dsn_secrets("could not parse \"" + dsn + "\"", dsn),
              "could not parse \"host=db.example port=5432 user=keeper_a password=******** dbname=postgres\"");
    const std::string uri = "postgresql://keeper_a:TopSecret42@[::1/postgres";
    EXPECT_EQ(
        scrub_dsn_secrets(
            "end of string reached when looking for matching \"]\" in IPv6 host address in URI: \"" + uri + "\"", uri),
        "end of string reached when looking for matching \"]\" in IPv6 host address in URI: "
        "\"postgresql://keeper_a:********@[::1/postgres\"");
}

TEST(DsnScrub, NothingToHideWithoutAPassword) {
    for (const char* dsn : {"", "host=db port=5432 dbname=postgres user=keeper_a", "postgresql://keeper_a@db/postgres",
                            "postgresql://db:5432/postgres?sslmode=require", "service=cosid",
                            "password=", "host=db password='' dbname=x", "passfile=/home/p/.pgpass host=db"})
        EXPECT_TRUE(dsn_secrets(dsn).empty()) << dsn;
    EXPECT_EQ(scrub_dsn_secrets("connection refused", "host=db"), "connection refused");
}

TEST(DsnScrub, SecretsLongestFirstAndPieces) {
    auto s = dsn_secrets("host=db password='Top Secret42'");
    ASSERT_FALSE(s.empty());
    EXPECT_EQ(s.front(), "Top Secret42");
    EXPECT_NE(std::find(s.begin(), s.end(), "Secret42"), s.end());
    EXPECT_NE(std::find(s.begin(), s.end(), "Top"), s.end());
    // pieces shorter than 3 characters are not hidden on their own (they would blot out messages)
    s = dsn_secrets("host=db password=ab/cdefgh");
    EXPECT_EQ(std::find(s.begin(), s.end(), "ab"), s.end());
    EXPECT_NE(std::find(s.begin(), s.end(), "ab/cdefgh"), s.end());
}

TEST(Calendar, SpansAsPeopleReadThem) {
    using cosid::format_span_ms;
    EXPECT_EQ(format_span_ms(0), "0 ms");
    EXPECT_EQ(format_span_ms(850), "850 ms");
    EXPECT_EQ(format_span_ms(19000), "19.0 s");
    EXPECT_EQ(format_span_ms(70500), "70.5 s");
    EXPECT_EQ(format_span_ms(12 * 60000 + 5), "12 min");
    EXPECT_EQ(format_span_ms(5 * 3600000LL + 1), "5 h");
    EXPECT_EQ(format_span_ms(40 * 86400000LL), "40 days");
    EXPECT_EQ(format_span_ms(2157500000000LL), "68.3 years");  // 2093-09-06 seen from 2025-06
    EXPECT_EQ(format_span_ms(-19000), "-19.0 s");
    EXPECT_FALSE(format_span_ms(INT64_MIN).empty());
}

// One writer of bench/gaps.sh: INSERTs one row every PERIOD ms into TABLE over one connection
// (made again whenever it is lost) and logs every attempt with the client's clock, until
// STOPFILE exists or MAX_SECONDS have passed.  One line per attempt, line-buffered so that the
// script can read the log while the writer runs:
//   <unix ms> S <id>                  the INSERT succeeded and returned this id
//   <unix ms> E <sqlstate> <message>  the INSERT failed (the connection may have gone with it)
//   <unix ms> C                       no connection could be made (the INSERT was not sent)
// The time is taken when the INSERT returned.  A tick missed while an INSERT waited is not
// made up: the next INSERT goes at the next tick after it.
//   gaps_writer CONNINFO TABLE PERIOD_MS OUTFILE STOPFILE MAX_SECONDS
#include <libpq-fe.h>
#include <sys/stat.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

long long now_ms() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

long long mono_ms() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void sleep_until_mono(long long target) {
    long long d = target - mono_ms();
    if (d <= 0) return;
    timespec ts{static_cast<time_t>(d / 1000), static_cast<long>((d % 1000) * 1000000)};
    nanosleep(&ts, nullptr);
}

std::string one_line(const char* s) {
    std::string out = s ? s : "";
    for (char& c : out)
        if (c == '\n' || c == '\r') c = ' ';
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 7) {
        std::fprintf(stderr, "usage: %s CONNINFO TABLE PERIOD_MS OUTFILE STOPFILE MAX_SECONDS\n", argv[0]);
        return 2;
    }
    const std::string conninfo = std::string(argv[1]) + " connect_timeout=2";
    const std::string sql = std::string("INSERT INTO ") + argv[2] + " DEFAULT VALUES RETURNING id";
    const long long period = std::atoll(argv[3]);
    FILE* out = std::fopen(argv[4], "w");
    if (!out) {
        std::perror(argv[4]);
        return 2;
    }
    setvbuf(out, nullptr, _IOLBF, 0);
    const char* stopfile = argv[5];
    const long long deadline = mono_ms() + std::atoll(argv[6]) * 1000;

    PGconn* conn = nullptr;
    long long next = mono_ms();
    struct stat st{};
    while (stat(stopfile, &st) != 0 && mono_ms() < deadline) {
        if (!conn) {
            conn = PQconnectdb(conninfo.c_str());
            if (PQstatus(conn) != CONNECTION_OK) {
                PQfinish(conn);
                conn = nullptr;
                std::fprintf(out, "%lld C\n", now_ms());
            }
        }
        if (conn) {
            PGresult* res = PQexec(conn, sql.c_str());
            const long long t = now_ms();
            if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
                std::fprintf(out, "%lld S %s\n", t, PQgetvalue(res, 0, 0));
            } else {
                const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
                std::fprintf(out, "%lld E %s %s\n", t, state ? state : "-",
                             one_line(res ? PQresultErrorMessage(res) : PQerrorMessage(conn)).c_str());
                if (PQstatus(conn) != CONNECTION_OK) {
                    PQfinish(conn);
                    conn = nullptr;
                }
            }
            PQclear(res);
        }
        next += period;
        const long long now = mono_ms();
        if (next < now) next = now + period - (now - next) % period;
        sleep_until_mono(next);
    }
    if (conn) PQfinish(conn);
    std::fclose(out);
    return 0;
}

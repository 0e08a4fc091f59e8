// The fleet simulator: N simulated cosid instances against one lease store, each with its
// own store connection, owner key and incarnation, as a keeper has.  Each acquires a slot,
// renews every ttl/3, and now and then releases it or crashes (closes its connection and
// leaves the lease to expire), then comes back as a new incarnation.  Every call is the SQL
// the keeper sends (src/pg/store/store.cpp), joined with cosid._durable(), under the keeper's
// bounds (statement_timeout and lock_timeout = max(ttl/6, 100 ms)).
//
// One process, one epoll loop over libpq's asynchronous API: 20,000 connections need no
// threads.  Through a transaction pooler (--pooled) no session state survives a transaction,
// so the bounds are set per transaction (SET LOCAL, in the same round trip) instead of as
// startup options, which PgBouncer refuses.
//
// A lease counts as lost when the store answers a renewal with no row (the slot is no longer
// the instance's), when a renewal fails, or when the answer arrives after the lease expired
// as the instance reckons it (send time of the last granted call + ttl).  Nothing asserts
// here: the figures are printed as key=value for bench/run.sh.
#include <libpq-fe.h>
#include <dirent.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <queue>
#include <random>
#include <string>
#include <vector>

namespace {

int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

struct Options {
    std::string conninfo;
    int n = 100;
    int seconds = 60;     // measured period, after every instance holds a lease
    int64_t ttl_ms = 30000;
    std::string ns = "fleet";
    bool pooled = false;
    double churn = 0.002;  // per renewal: probability of a release or a crash (half each)
    int connect_parallel = 64;
    int ramp_seconds = 0;  // spread of the first acquires (default: ttl/3)
    std::string ready_file;    // made when the measured period starts (bench samples the store from then)
    std::string admin_conninfo;  // the store, directly: WAL position and backends at the measured period
    std::vector<int> watch_pids;  // the store's postmaster, PgBouncers: their CPU over the measured period
    int id_offset = 0;  // several processes: owner keys and preferred slots from here on
    std::string latency_file;  // every measured renewal latency in µs, one a line (to merge processes)
};

enum class State { Idle, Connecting, Ready, Acquiring, Holding, Renewing, Releasing, Down };
enum class Call { None, Acquire, Renew, Release };

struct Instance {
    int id = 0;
    PGconn* conn = nullptr;
    State state = State::Idle;
    Call call = Call::None;
    std::string owner_key, incarnation;
    int slot = -1;  // >= 0 while the instance holds a lease
    int64_t fence = 0;
    int answer_slot = -1;  // the slot and fence an acquire's answer granted
    int64_t answer_fence = 0;
    int64_t sent_us = 0;
    int64_t valid_until_us = 0;  // send time of the last granted acquire/renew + ttl
    int64_t last_granted_sent_us = 0;
    bool want_out = false;
    int result_rows = -1;
    std::string error;
};

struct Timer {
    int64_t at;
    int id;
    uint64_t gen;
    bool operator>(const Timer& o) const { return at > o.at; }
};

struct Stats {
    std::vector<int> renew_lat_us;
    std::vector<int> acquire_lat_us;
    long renewals = 0, acquires = 0, releases = 0, crashes = 0, lost_no_row = 0, lost_late = 0, errors = 0,
         exhausted = 0;
    std::string first_error;
};

Options opt;
std::vector<Instance> fleet;
std::vector<uint64_t> timer_gen;
std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers;
int ep = -1;
std::mt19937_64 rng(12345);
bool measuring = false;
Stats st;
int holders = 0, connecting = 0;

std::string new_uuid() {
    uint64_t a = rng(), b = rng();
    a = (a & ~0xF000ULL) | 0x4000ULL;                         // version 4
    b = (b & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL;  // variant
    char s[40];
    snprintf(s, sizeof(s), "%08x-%04x-%04x-%04x-%012llx", (unsigned)(a >> 32), (unsigned)((a >> 16) & 0xFFFF),
             (unsigned)(a & 0xFFFF), (unsigned)(b >> 48), (unsigned long long)(b & 0xFFFFFFFFFFFFULL));
    return s;
}

void schedule(int id, int64_t at) { timers.push({at, id, ++timer_gen[id]}); }

void watch(Instance& in, bool out) {
    int fd = PQsocket(in.conn);
    epoll_event ev{};
    ev.events = EPOLLIN | (out ? (uint32_t)EPOLLOUT : 0u);
    ev.data.u32 = static_cast<uint32_t>(in.id);
    if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) != 0) epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    in.want_out = out;
}

void drop_conn(Instance& in) {
    if (in.conn == nullptr) return;
    int fd = PQsocket(in.conn);
    if (fd >= 0) epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
    PQfinish(in.conn);
    in.conn = nullptr;
}

int64_t bound_ms() { return std::max<int64_t>(opt.ttl_ms / 6, 100); }

void start_connect(Instance& in) {
    char options[160];
    snprintf(options, sizeof(options), "-c statement_timeout=%lld -c lock_timeout=%lld -c client_min_messages=warning",
             (long long)bound_ms(), (long long)bound_ms());
    const char* keys[] = {"dbname", "options", "application_name", nullptr};
    const char* vals[] = {opt.conninfo.c_str(), opt.pooled ? "" : options, "cosid fleet", nullptr};
    in.conn = PQconnectStartParams(keys, vals, 1);
    in.state = State::Connecting;
    ++connecting;
    if (in.conn == nullptr || PQstatus(in.conn) == CONNECTION_BAD) {
        if (st.first_error.empty()) st.first_error = in.conn ? PQerrorMessage(in.conn) : "out of memory";
        ++st.errors;
        drop_conn(in);
        in.state = State::Down;
        --connecting;
        schedule(in.id, now_us() + 1000000);
        return;
    }
    watch(in, true);
}

void fail(Instance& in, const char* what) {
    ++st.errors;
    if (st.first_error.empty()) st.first_error = std::string(what) + ": " + (in.conn ? PQerrorMessage(in.conn) : "");
    if (in.state == State::Connecting) --connecting;
    drop_conn(in);
    in.state = State::Down;
    in.call = Call::None;
    // reconnect: with a lease, to renew it (lost only if too late); else as a new incarnation
    schedule(in.id, now_us() + (in.slot >= 0 ? 100000 : 1000000));
}

// One round trip: directly the keeper's statement with parameters; through the pooler the
// same statement inside BEGIN ... COMMIT with the bounds set for that transaction only.
void send(Instance& in, Call call, const std::string& sql, std::vector<std::string> args) {
    in.call = call;
    in.result_rows = -1;
    in.answer_slot = -1;
    in.error.clear();
    in.sent_us = now_us();
    int ok;
    if (!opt.pooled) {
        std::vector<const char*> v;
        for (auto& a : args) v.push_back(a.c_str());
        ok = PQsendQueryParams(in.conn, sql.c_str(), (int)v.size(), nullptr, v.data(), nullptr, nullptr, 0);
    } else {
        std::string text = sql;  // inline the parameters: numbers, uuids and our own names only
        for (size_t i = args.size(); i-- > 0;) {
            std::string ph = "$" + std::to_string(i + 1);
            std::string lit = "'" + args[i] + "'";
            for (size_t p; (p = text.find(ph)) != std::string::npos;) text.replace(p, ph.size(), lit);
        }
        char pre[200];
        snprintf(pre, sizeof(pre), "BEGIN; SET LOCAL statement_timeout = %lld; SET LOCAL lock_timeout = %lld; ",
                 (long long)bound_ms(), (long long)bound_ms());
        text = pre + text + "; COMMIT";
        ok = PQsendQuery(in.conn, text.c_str());
    }
    if (!ok) return fail(in, "send");
    int f = PQflush(in.conn);
    if (f < 0) return fail(in, "flush");
    watch(in, f == 1);
}

void acquire(Instance& in, int preferred) {
    in.state = State::Acquiring;
    send(in, Call::Acquire,
         "SELECT a.slot, a.fence, a.expires_at, a.floor, a.ceiling, a.next_floor, a.store_now, "
         "a.duplicate_key, a.earliest_expiry, n.timestamp_bits, n.slot_bits, n.sequence_bits, n.epoch_ms, "
         "CASE n.unit WHEN 's' THEN 1000 ELSE 1 END, n.tolerance_ms "
         "FROM cosid._durable() durable, "
         "cosid.acquire($1::text, $2::text, $3::uuid, $4::bigint, nullif($5::int, -1)) a "
         "LEFT JOIN cosid.namespace n ON n.name = $1::text",
         {opt.ns, in.owner_key, in.incarnation, std::to_string(opt.ttl_ms), std::to_string(preferred)});
}

void renew(Instance& in) {
    in.state = State::Renewing;
    send(in, Call::Renew,
         "SELECT slot, fence, expires_at, floor, ceiling, next_floor, store_now "
         "FROM cosid._durable() durable, cosid.renew($1::text, $2::int, $3::uuid, $4::bigint, $5::bigint)",
         {opt.ns, std::to_string(in.slot), in.incarnation, std::to_string(in.fence), std::to_string(opt.ttl_ms)});
}

void release(Instance& in) {
    in.state = State::Releasing;
    // Nothing issued: the floor is the last issued timestamp (hands the whole window back).
    send(in, Call::Release,
         "SELECT slot, fence, next_floor, store_now "
         "FROM cosid._durable() durable, cosid.release($1::text, $2::int, $3::uuid, $4::bigint, "
         "(SELECT floor FROM cosid.lease WHERE namespace = $1::text AND slot = $2::int))",
         {opt.ns, std::to_string(in.slot), in.incarnation, std::to_string(in.fence)});
}

// The instance's timer: connect, acquire, renew, or churn.
void on_timer(Instance& in) {
    switch (in.state) {
    case State::Idle:
    case State::Down:
        if (connecting >= opt.connect_parallel) return schedule(in.id, now_us() + 20000);
        if (in.slot < 0) in.incarnation = new_uuid();  // else: reconnecting to renew its lease
        return start_connect(in);
    case State::Ready:
        return acquire(in, opt.id_offset + in.id);  // each simulated server prefers its own slot (cosid.preferred_slot)
    case State::Holding: {
        double r = std::uniform_real_distribution<double>(0, 1)(rng);
        if (r < opt.churn / 2) {
            ++st.crashes;  // the lease is left to expire
            --holders;
            in.slot = -1;
            drop_conn(in);
            in.state = State::Down;
            return schedule(in.id, now_us() + 200000);
        }
        if (r < opt.churn) return release(in);
        return renew(in);
    }
    default:
        return;  // a call in flight: its answer schedules the next step
    }
}

void on_answer(Instance& in) {
    int64_t t = now_us();
    int lat = (int)(t - in.sent_us);
    Call call = in.call;
    in.call = Call::None;
    if (!in.error.empty()) {
        ++st.errors;
        if (call == Call::Renew) {  // a keeper tries again within its lease: lost only if too late
            if (st.first_error.empty()) st.first_error = in.error;
            drop_conn(in);
            in.state = State::Down;
            return schedule(in.id, t + 100000);
        }
        if (st.first_error.empty()) st.first_error = in.error;
        if (in.slot >= 0) --holders;
        in.slot = -1;
        drop_conn(in);
        in.state = State::Down;
        return schedule(in.id, t + 1000000);
    }
    switch (call) {
    case Call::Acquire:
        if (measuring) {
            st.acquire_lat_us.push_back(lat);
            ++st.acquires;
        }
        if (in.answer_slot >= 0) {
            ++holders;
            in.slot = in.answer_slot;
            in.fence = in.answer_fence;
            in.last_granted_sent_us = in.sent_us;
            in.valid_until_us = in.sent_us + opt.ttl_ms * 1000;
            in.state = State::Holding;
            return schedule(in.id, in.sent_us + opt.ttl_ms * 1000 / 3);
        }
        ++st.exhausted;  // namespace full: wait like a keeper, then try again
        in.state = State::Ready;
        return schedule(in.id, t + 1000000);
    case Call::Renew:
        if (measuring) {
            st.renew_lat_us.push_back(lat);
            ++st.renewals;
        }
        if (in.result_rows <= 0) {
            ++st.lost_no_row;
            --holders;
            in.slot = -1;
            in.state = State::Ready;
            return schedule(in.id, t);
        }
        if (t > in.valid_until_us) ++st.lost_late;
        in.valid_until_us = in.sent_us + opt.ttl_ms * 1000;
        in.state = State::Holding;
        return schedule(in.id, in.sent_us + opt.ttl_ms * 1000 / 3);
    case Call::Release:
        if (measuring) ++st.releases;
        --holders;
        in.slot = -1;
        in.incarnation = new_uuid();  // a restarted server's keeper: same owner key, new incarnation
        in.state = State::Ready;
        // preferred -1 from here: the sticky preference (same owner key) finds its old slot
        return schedule(in.id, t + 200000);
    case Call::None:
        return;
    }
}

// Reads what arrived; an answer is complete when PQgetResult returns NULL.
void on_readable(Instance& in) {
    if (!PQconsumeInput(in.conn)) return fail(in, "read");
    while (!PQisBusy(in.conn)) {
        PGresult* res = PQgetResult(in.conn);
        if (res == nullptr) {
            if (in.call != Call::None) on_answer(in);
            return;
        }
        ExecStatusType s = PQresultStatus(res);
        if (s == PGRES_TUPLES_OK) {
            in.result_rows = PQntuples(res);
            if (in.result_rows > 0 && in.call == Call::Acquire) {
                if (!PQgetisnull(res, 0, 0)) {
                    in.answer_slot = atoi(PQgetvalue(res, 0, 0));
                    in.answer_fence = atoll(PQgetvalue(res, 0, 1));
                }
            }
        } else if (s != PGRES_COMMAND_OK && in.error.empty()) {
            const char* m = PQresultErrorMessage(res);
            in.error = m && *m ? m : "error";
        }
        PQclear(res);
    }
}

void on_event(Instance& in, uint32_t events) {
    if (in.state == State::Connecting) {
        PostgresPollingStatusType p = PQconnectPoll(in.conn);
        if (p == PGRES_POLLING_FAILED) return fail(in, "connect");
        if (p == PGRES_POLLING_OK) {
            --connecting;
            PQsetnonblocking(in.conn, 1);
            watch(in, false);
            if (in.slot >= 0) {  // back after a failed renewal: renew at once
                in.state = State::Holding;
                return schedule(in.id, now_us());
            }
            in.state = State::Ready;
            int64_t spread = (opt.ramp_seconds > 0 ? opt.ramp_seconds * 1000LL : opt.ttl_ms / 3) * 1000;
            // the first acquires spread over the ramp, so that renewals spread over ttl/3
            return schedule(in.id, in.fence > 0 ? now_us() : now_us() + (int64_t)(rng() % spread));
        }
        // the socket may change across PQconnectPoll
        int fd = PQsocket(in.conn);
        epoll_event ev{};
        ev.events = p == PGRES_POLLING_READING ? EPOLLIN : EPOLLOUT;
        ev.data.u32 = (uint32_t)in.id;
        if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) != 0) epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        return;
    }
    if (in.conn == nullptr) return;
    if (events & EPOLLOUT) {
        int f = PQflush(in.conn);
        if (f < 0) return fail(in, "flush");
        if (f == 0) watch(in, false);
    }
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        if (in.call == Call::None && in.state != State::Ready && in.state != State::Holding) return;
        if (in.call == Call::None) {  // the server closed an idle connection (pooler or store restart)
            if (!PQconsumeInput(in.conn)) fail(in, "idle connection closed");
            return;
        }
        on_readable(in);
    }
}

// CPU ticks (user + system) of a process, its live children and the children it reaped.
long long cpu_ticks_of(int pid) {
    auto read_stat = [](int p, int* ppid, long long* own, long long* reaped) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/stat", p);
        FILE* f = fopen(path, "r");
        if (f == nullptr) return false;
        char buf[1024];
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        char* c = strrchr(buf, ')');
        if (c == nullptr) return false;
        long long v[20] = {0};
        char state;
        // fields after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
        if (sscanf(c + 2, "%c %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld", &state, &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11], &v[12], &v[13]) < 15)
            return false;
        *ppid = (int)v[0];
        *own = v[10] + v[11];
        *reaped = v[12] + v[13];
        return true;
    };
    int ppid;
    long long own, reaped, total = 0;
    if (!read_stat(pid, &ppid, &own, &reaped)) return 0;
    total = own + reaped;
    if (DIR* d = opendir("/proc")) {
        while (dirent* e = readdir(d)) {
            int p = atoi(e->d_name);
            long long o, r;
            if (p > 0 && p != pid && read_stat(p, &ppid, &o, &r) && ppid == pid) total += o;
        }
        closedir(d);
    }
    return total;
}

std::string admin_query(const char* sql) {
    if (opt.admin_conninfo.empty()) return "";
    PGconn* c = PQconnectdb(opt.admin_conninfo.c_str());
    std::string out;
    if (PQstatus(c) == CONNECTION_OK) {
        PGresult* r = PQexec(c, sql);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0) out = PQgetvalue(r, 0, 0);
        PQclear(r);
    }
    PQfinish(c);
    return out;
}

int pct(std::vector<int>& v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t i = (size_t)std::min<double>(v.size() - 1, std::max(0.0, std::ceil(v.size() * p) - 1));
    return v[i];
}

void run_until(int64_t until, bool stop_when_all_hold) {
    epoll_event evs[512];
    while (now_us() < until) {
        if (stop_when_all_hold && holders >= opt.n) return;
        int64_t t = now_us();
        while (!timers.empty() && timers.top().at <= t) {
            Timer tm = timers.top();
            timers.pop();
            if (tm.gen == timer_gen[tm.id]) on_timer(fleet[tm.id]);
        }
        int wait_ms = 50;
        if (!timers.empty()) wait_ms = (int)std::clamp<int64_t>((timers.top().at - now_us()) / 1000, 0, 50);
        int k = epoll_wait(ep, evs, 512, wait_ms);
        for (int i = 0; i < k; ++i) on_event(fleet[evs[i].data.u32], evs[i].events);
    }
}

}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--conninfo") opt.conninfo = v;
        else if (k == "--n") opt.n = atoi(v.c_str());
        else if (k == "--seconds") opt.seconds = atoi(v.c_str());
        else if (k == "--ttl-ms") opt.ttl_ms = atoll(v.c_str());
        else if (k == "--namespace") opt.ns = v;
        else if (k == "--pooled") opt.pooled = v == "1";
        else if (k == "--churn") opt.churn = atof(v.c_str());
        else if (k == "--connect-parallel") opt.connect_parallel = atoi(v.c_str());
        else if (k == "--ramp-seconds") opt.ramp_seconds = atoi(v.c_str());
        else if (k == "--latency-file") opt.latency_file = v;
        else if (k == "--ready-file") opt.ready_file = v;
        else if (k == "--admin-conninfo") opt.admin_conninfo = v;
        else if (k == "--id-offset") opt.id_offset = atoi(v.c_str());
        else if (k == "--watch-pids") {
            for (char* t = strtok(&v[0], ","); t != nullptr; t = strtok(nullptr, ",")) opt.watch_pids.push_back(atoi(t));
        }
        else {
            fprintf(stderr, "unknown option %s\n", k.c_str());
            return 2;
        }
    }
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < (rlim_t)opt.n + 64) {
        rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, opt.n + 64);
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < (rlim_t)opt.n + 64) {
        fprintf(stderr, "fleet: ulimit -n is %llu, %d instances need more\n", (unsigned long long)rl.rlim_cur, opt.n);
        return 2;
    }
    std::random_device rd;
    rng.seed(((uint64_t)rd() << 32) ^ rd());
    ep = epoll_create1(0);
    fleet.resize(opt.n);
    timer_gen.assign(opt.n, 0);
    for (int i = 0; i < opt.n; ++i) {
        fleet[i].id = i;
        fleet[i].owner_key = "fleet-" + std::to_string(opt.id_offset + i);
        schedule(i, now_us());
    }
    // Ramp: every instance connects and acquires; the first acquires spread over ttl/3.
    int64_t t0 = now_us();
    int64_t ramp_limit = t0 + (int64_t)(opt.ttl_ms / 3 + 120000 + opt.n * 100) * 1000;  // backends start slowly on a busy machine
    run_until(ramp_limit, true);
    int64_t ramp_us = now_us() - t0;
    if (holders < opt.n) {
        int by_state[8] = {0};
        for (auto& in : fleet) by_state[(int)in.state]++;
        printf("ok=0 holders=%d n=%d ramp_s=%.1f exhausted=%ld states=%d/%d/%d/%d/%d/%d/%d/%d first_error=\"%s\"\n",
               holders, opt.n, ramp_us / 1e6, st.exhausted, by_state[0], by_state[1], by_state[2], by_state[3],
               by_state[4], by_state[5], by_state[6], by_state[7], st.first_error.c_str());
        return 1;
    }
    // Measure a whole number of renewal rounds from here.
    long errors_before = st.errors;
    measuring = true;
    if (!opt.ready_file.empty()) {
        FILE* f = fopen(opt.ready_file.c_str(), "w");
        if (f != nullptr) fclose(f);
    }
    std::vector<long long> cpu0;
    for (int p : opt.watch_pids) cpu0.push_back(cpu_ticks_of(p));
    std::string wal0 = admin_query("SELECT pg_current_wal_lsn()");
    int64_t m0 = now_us();
    run_until(m0 + (int64_t)opt.seconds * 500000, false);
    std::string backends = admin_query("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'");
    run_until(m0 + (int64_t)opt.seconds * 1000000, false);
    double secs = (now_us() - m0) / 1e6;
    std::string cpu_text;
    for (size_t i = 0; i < opt.watch_pids.size(); ++i) {
        char b[64];
        snprintf(b, sizeof(b), "%s%.3f", i ? "," : "", (cpu_ticks_of(opt.watch_pids[i]) - cpu0[i]) / (double)sysconf(_SC_CLK_TCK) / secs);
        cpu_text += b;
    }
    std::string wal_rate = "0";
    if (!wal0.empty()) {
        std::string q = "SELECT round(pg_wal_lsn_diff(pg_current_wal_lsn(), '" + wal0 + "') / " + std::to_string(secs) + ")";
        wal_rate = admin_query(q.c_str());
    }
    measuring = false;
    if (!opt.latency_file.empty()) {
        FILE* f = fopen(opt.latency_file.c_str(), "w");
        if (f == nullptr) return 2;
        for (int us : st.renew_lat_us) fprintf(f, "%d\n", us);
        fclose(f);
    }
    int p50 = pct(st.renew_lat_us, 0.50), p99 = pct(st.renew_lat_us, 0.99), pmax = pct(st.renew_lat_us, 1.0);
    int a50 = pct(st.acquire_lat_us, 0.50), a99 = pct(st.acquire_lat_us, 0.99);
    for (auto& in : fleet) drop_conn(in);
    std::string e = st.first_error;
    std::replace(e.begin(), e.end(), '"', '\'');
    std::replace(e.begin(), e.end(), '\n', ' ');
    printf("ok=1 n=%d pooled=%d seconds=%.1f ramp_s=%.1f renewals=%ld renewals_per_s=%.1f renew_p50_ms=%.2f "
           "renew_p99_ms=%.2f renew_max_ms=%.2f acquires=%ld acquire_p50_ms=%.2f acquire_p99_ms=%.2f releases=%ld "
           "crashes=%ld lost_no_row=%ld lost_late=%ld errors=%ld exhausted=%ld holders_end=%d cpu=%s wal_bytes_per_s=%s "
           "backends=%s first_error=\"%s\"\n",
           opt.n, opt.pooled ? 1 : 0, secs, ramp_us / 1e6, st.renewals, st.renewals / secs, p50 / 1000.0,
           p99 / 1000.0, pmax / 1000.0, st.acquires, a50 / 1000.0, a99 / 1000.0, st.releases, st.crashes,
           st.lost_no_row, st.lost_late, st.errors - errors_before, st.exhausted, holders, cpu_text.c_str(),
           wal_rate.c_str(), backends.c_str(), e.c_str());
    return 0;
}

// The fleet simulator: N simulated cosid instances against one lease store, each with its
// own store connection, owner key and incarnation, as a keeper has, and one lease in each of
// k namespaces.  Each acquires its leases, renews them every ttl/3, and now and then
// releases them or crashes (closes its connection and leaves its leases to expire), then
// comes back as a new incarnation.  Every call is the SQL the keeper sends
// (src/pg/store/store.cpp), joined with cosid._durable(), under the keeper's bounds
// (statement_timeout and lock_timeout = max(ttl/6, 100 ms)).  As the keeper's pass
// (keeper_pass, run_due_leases), the renewals due in a pass, with those due within ttl/6,
// go in one store transaction: cosid.lease_pass for several leases, cosid.renew for one.
//
// One process, one epoll loop over libpq's asynchronous API: 20,000 connections need no
// threads.  Through a transaction pooler (--pooled) no session state survives a transaction,
// so the bounds are set per transaction (SET LOCAL, in the same round trip) instead of as
// startup options, which PgBouncer refuses.
//
// A lease counts as lost when a renewal's answer arrives after the lease expired as the
// instance reckons it (send time of the last granted call + ttl), or when the store
// answered a renewal with no row (a switchover's raise frees every lease) and the
// successor's grant came after that.  A lease freed whose successor came in time is
// counted as freed, not lost: its window served until the successor's.  Nothing asserts
// here: the figures are printed as key=value for fleet.sh.
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
#include <map>
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
    int seconds = 60;     // measured period, after every instance holds its leases
    int64_t ttl_ms = 30000;
    std::vector<std::string> namespaces{"fleet"};  // each instance holds one lease in each
    bool pooled = false;
    bool batch = true;     // the leases due in a pass renewed in one cosid.lease_pass, as the keeper does
    bool acquire_many = false;  // the leases missing acquired in one cosid.acquire_many (a store of 1.8 on)
    double churn = 0.002;  // per renewal round (ttl/3): probability of a release or a crash (half each)
    int connect_parallel = 64;
    int ramp_seconds = 0;  // spread of the first acquires (default: ttl/3)
    std::string ready_file;    // made when the measured period starts (fleet.sh times a switchover from it)
    std::string admin_conninfo;  // the store, directly: WAL position and backends at the measured period
    std::vector<int> watch_pids;  // the store's postmaster, PgBouncers: their CPU over the measured period
    int id_offset = 0;  // several processes: owner keys and preferred slots from here on
    std::string latency_file;  // every measured renewal pass's latency in µs, one a line (to merge processes)
    int idle_seconds = 0;  // the watched processes' CPU with no fleet yet: the store's own work, taken off per lease
};

enum class State { Idle, Connecting, Ready, Acquiring, Holding, Renewing, Releasing, Down };
enum class Call { None, Acquire, AcquireMany, Renew, Pass, Release };

// One of an instance's leases (one per namespace).
struct Lease {
    int slot = -1;  // >= 0 while held
    int64_t fence = 0, floor = 0, ceiling = 0;  // the window, in the store's ms
    int64_t next_renew_us = 0;
    int64_t valid_until_us = 0;  // send time of the last granted acquire/renew + ttl
    // A lease the store answered with no row (a switchover's raise frees them all): its
    // window still serves until valid_until, and the successor must come before that.
    int64_t orphan_until_us = 0;  // 0: none
    int64_t orphan_ceiling = 0;
    bool answered = false;  // in the call in flight: the store's row for it came
    int answer_slot = -1;   // an acquire's: the slot granted (-1: none, the namespace is full)
    int64_t answer_fence = 0, answer_floor = 0, answer_ceiling = 0;
};

struct Instance {
    int id = 0;
    PGconn* conn = nullptr;
    State state = State::Idle;
    Call call = Call::None;
    std::string owner_key, incarnation;
    std::vector<Lease> leases;
    std::vector<int> inflight;  // the leases the call in flight is for
    int64_t sent_us = 0;
    bool want_out = false;
    std::string error;
};

struct Timer {
    int64_t at;
    int id;
    uint64_t gen;
    bool operator>(const Timer& o) const { return at > o.at; }
};

// Counters run from the start; the phases are told apart by snapshots of them.
struct Stats {
    std::vector<int> renew_lat_us;    // per pass, measured period only
    std::vector<int> acquire_lat_us;  // every acquire from the ramp's acquires on
    long passes = 0, renewed = 0, acquires = 0, releases = 0, crashes = 0, freed = 0, lost_late = 0,
         successor_late = 0, errors = 0, exhausted = 0;
    // a freed lease: its successor's floor - its ceiling, the jump in its ids' timestamps (the
    // successor issues from its floor at once, ahead of the clock: no pause)
    int64_t jump_max_ms = 0;
    std::string first_error;
    std::map<std::string, long> error_kinds;  // by the start of the message (fleet.sh prints the commonest)
};

Options opt;
std::vector<Instance> fleet;
std::vector<uint64_t> timer_gen;
std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers;
int ep = -1;
std::mt19937_64 rng(12345);
bool measuring = false;
bool acquire_gate = false;  // shut while the fleet connects: the acquires' CPU is measured apart
Stats st;
int holders = 0, connecting = 0;  // holders: leases held, all instances

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

int held(const Instance& in) {
    int h = 0;
    for (auto& l : in.leases) h += l.slot >= 0;
    return h;
}

int missing(const Instance& in) {  // the first lease to acquire, or -1
    for (size_t i = 0; i < in.leases.size(); ++i)
        if (in.leases[i].slot < 0) return (int)i;
    return -1;
}

int64_t next_due_us(const Instance& in) {
    int64_t at = INT64_MAX;
    for (auto& l : in.leases)
        if (l.slot >= 0) at = std::min(at, l.next_renew_us);
    return at;
}

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

// The server stops (crash, or after a release): its leases are gone, its next life is a
// new incarnation with the same owner key.
void end_life(Instance& in) {
    holders -= held(in);
    for (auto& l : in.leases) l = Lease{};
    in.incarnation = new_uuid();
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

void count_error(const std::string& m) {
    std::string k = m.substr(0, 60);
    std::replace(k.begin(), k.end(), '"', '\'');
    std::replace(k.begin(), k.end(), '\n', ' ');
    std::replace(k.begin(), k.end(), '\t', ' ');
    ++st.error_kinds[k];
}

void fail(Instance& in, const char* what) {
    ++st.errors;
    count_error(std::string(what) + ": " + (in.conn ? PQerrorMessage(in.conn) : ""));
    if (st.first_error.empty()) st.first_error = std::string(what) + ": " + (in.conn ? PQerrorMessage(in.conn) : "");
    if (in.state == State::Connecting) --connecting;
    drop_conn(in);
    in.state = State::Down;
    in.call = Call::None;
    // reconnect: with leases, soon, to renew them (lost only if too late)
    schedule(in.id, now_us() + (held(in) > 0 ? 100000 : 1000000));
}

// One round trip: directly the keeper's statement with parameters; through the pooler the
// same statement inside BEGIN ... COMMIT with the bounds set for that transaction only.
void send(Instance& in, Call call, const std::string& sql, std::vector<std::string> args) {
    in.call = call;
    for (auto& l : in.leases) {
        l.answered = false;
        l.answer_slot = -1;
    }
    in.error.clear();
    in.sent_us = now_us();
    int ok;
    if (!opt.pooled) {
        std::vector<const char*> v;
        for (auto& a : args) v.push_back(a.c_str());
        ok = PQsendQueryParams(in.conn, sql.c_str(), (int)v.size(), nullptr, v.data(), nullptr, nullptr, 0);
    } else {
        // inline the parameters: numbers, uuids, our own names and arrays of them only
        // (from the last: $1 would match the start of $10)
        std::string text = sql;
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

// '{a,b,c}': one array argument of cosid.lease_pass, element k from lease inflight[k].
template <typename F>
std::string array_of(const Instance& in, F part) {
    std::string s = "{";
    for (size_t k = 0; k < in.inflight.size(); ++k) s += (k ? "," : "") + part(in.leases[in.inflight[k]], in.inflight[k]);
    return s + "}";
}

// The store's acquire for lease i (namespace i), the keeper's SQL (src/pg/store/store.cpp);
// with acquire_many every lease missing in one call, as the keeper's serve_due_batch asks for
// the requests due together (a switchover's successors).
void acquire(Instance& in, int i) {
    in.state = State::Acquiring;
    in.inflight.assign(1, i);
    if (opt.acquire_many)
        for (size_t k = i + 1; k < in.leases.size(); ++k)
            if (in.leases[k].slot < 0) in.inflight.push_back((int)k);
    // each simulated server prefers its own slot (cosid.preferred_slot), in every namespace
    std::string pref = std::to_string(opt.id_offset + in.id);
    const char* cols =
        "SELECT a.slot, a.fence, a.expires_at, a.floor, a.ceiling, a.next_floor, a.store_now, "
        "a.duplicate_key, a.earliest_expiry, n.timestamp_bits, n.slot_bits, n.sequence_bits, n.epoch_ms, "
        "CASE n.unit WHEN 's' THEN 1000 ELSE 1 END, n.tolerance_ms ";
    if (in.inflight.size() == 1)
        return send(in, Call::Acquire,
                    std::string(cols) +
                        "FROM cosid._durable() durable, "
                        "cosid.acquire($1::text, $2::text, $3::uuid, $4::bigint, nullif($5::int, -1)) a "
                        "LEFT JOIN cosid.namespace n ON n.name = $1::text",
                    {opt.namespaces[i], in.owner_key, in.incarnation, std::to_string(opt.ttl_ms), pref});
    send(in, Call::AcquireMany,
         std::string(cols) +
             ", a.ord FROM cosid._durable() durable, "
             "cosid.acquire_many($1::text[], $2::text, $3::uuid, $4::bigint, nullif($5::int, -1)) a "
             "LEFT JOIN cosid.namespace n ON n.name = a.namespace",
         {array_of(in, [](const Lease&, int k) { return opt.namespaces[k]; }), in.owner_key, in.incarnation,
          std::to_string(opt.ttl_ms), pref});
}

// The leases in `inflight`, renewed or released in one store transaction as the keeper's
// run_due_leases() does: cosid.renew/release alone for one lease, cosid.lease_pass for more.
void pass(Instance& in, bool release) {
    in.state = release ? State::Releasing : State::Renewing;
    Call call = release ? Call::Release : in.inflight.size() > 1 ? Call::Pass : Call::Renew;
    const Lease& l = in.leases[in.inflight[0]];
    const std::string& ns = opt.namespaces[in.inflight[0]];
    if (in.inflight.size() == 1 && !release)
        return send(in, call,
                    "SELECT slot, fence, expires_at, floor, ceiling, next_floor, store_now "
                    "FROM cosid._durable() durable, cosid.renew($1::text, $2::int, $3::uuid, $4::bigint, $5::bigint)",
                    {ns, std::to_string(l.slot), in.incarnation, std::to_string(l.fence), std::to_string(opt.ttl_ms)});
    if (in.inflight.size() == 1)  // nothing issued: the floor is the last issued (the whole window back)
        return send(in, call,
                    "SELECT slot, fence, next_floor, store_now "
                    "FROM cosid._durable() durable, cosid.release($1::text, $2::int, $3::uuid, $4::bigint, $5::bigint)",
                    {ns, std::to_string(l.slot), in.incarnation, std::to_string(l.fence), std::to_string(l.floor)});
    send(in, call,
         "SELECT ord, slot, fence, expires_at, floor, ceiling, next_floor, store_now "
         "FROM cosid._durable() durable, "
         "cosid.lease_pass($1::uuid, $2::bigint, $3::bool[], $4::text[], $5::int[], $6::bigint[], $7::bigint[])",
         {in.incarnation, std::to_string(opt.ttl_ms),
          array_of(in, [&](const Lease&, int) -> std::string { return release ? "t" : "f"; }),
          array_of(in, [](const Lease&, int i) { return opt.namespaces[i]; }),
          array_of(in, [](const Lease& x, int) { return std::to_string(x.slot); }),
          array_of(in, [](const Lease& x, int) { return std::to_string(x.fence); }),
          array_of(in, [&](const Lease& x, int) { return std::to_string(release ? x.floor : 0); })});
}

// The leases a pass renews now: those due, and with batching those due within ttl/6, which
// the keeper's pass takes along (keeper_pass: they come into step, one transaction for all).
// Without batching, one lease a round trip, as a keeper does with a store before 1.5.
void collect_due(Instance& in, int64_t now) {
    in.inflight.clear();
    int64_t early = opt.batch ? opt.ttl_ms * 1000 / 6 : 0;
    bool any_due = false;
    for (size_t i = 0; i < in.leases.size(); ++i)
        if (in.leases[i].slot >= 0 && in.leases[i].next_renew_us <= now) any_due = true;
    if (!any_due) return;
    for (size_t i = 0; i < in.leases.size(); ++i) {
        const Lease& l = in.leases[i];
        if (l.slot >= 0 && l.next_renew_us <= now + early) in.inflight.push_back((int)i);
        if (!opt.batch && !in.inflight.empty()) return;
    }
}

// The instance's timer: connect, acquire, renew, or churn.
void on_timer(Instance& in) {
    int64_t now = now_us();
    switch (in.state) {
    case State::Idle:
    case State::Down:
        if (connecting >= opt.connect_parallel) return schedule(in.id, now + 20000);
        return start_connect(in);
    case State::Ready:
        if (missing(in) >= 0) return acquire(in, missing(in));
        in.state = State::Holding;
        return schedule(in.id, next_due_us(in));
    case State::Holding: {
        if (missing(in) >= 0) {  // a lease the store no longer had: its successor first
            in.state = State::Ready;
            return on_timer(in);
        }
        collect_due(in, now);
        if (in.inflight.empty()) return schedule(in.id, next_due_us(in));
        // churn per renewal round of the instance (every ttl/3), whether its leases go in
        // one pass or one by one: a pass with some of them takes its share
        double r = std::uniform_real_distribution<double>(0, 1)(rng) * in.leases.size() / in.inflight.size();
        if (r < opt.churn / 2) {
            ++st.crashes;  // the leases are left to expire
            end_life(in);
            drop_conn(in);
            in.state = State::Down;
            return schedule(in.id, now + 200000);
        }
        if (r < opt.churn) {  // a server stopping: its keeper hands every lease back
            in.inflight.clear();
            for (size_t i = 0; i < in.leases.size(); ++i) in.inflight.push_back((int)i);
            return pass(in, true);
        }
        return pass(in, false);
    }
    default:
        return;  // a call in flight: its answer schedules the next step
    }
}

// The next step once an answer is applied: the next acquire, or the next renewal.
void carry_on(Instance& in, int64_t at) {
    in.state = missing(in) >= 0 ? State::Ready : State::Holding;
    schedule(in.id, in.state == State::Ready ? at : next_due_us(in));
}

void on_acquired(Instance& in, int64_t t, int lat) {
    if (acquire_gate) st.acquire_lat_us.push_back(lat);
    bool full = false;
    for (int i : in.inflight) {
        Lease& l = in.leases[i];
        ++st.acquires;
        if (l.answer_slot < 0) {
            ++st.exhausted;  // namespace full: wait like a keeper, then try again
            full = true;
            continue;
        }
        if (l.orphan_until_us > 0) {  // the successor of a lease the store freed
            if (t > l.orphan_until_us) ++st.successor_late;
            st.jump_max_ms = std::max(st.jump_max_ms, l.answer_floor - l.orphan_ceiling);
        }
        ++holders;
        l.slot = l.answer_slot;
        l.fence = l.answer_fence;
        l.floor = l.answer_floor;
        l.ceiling = l.answer_ceiling;
        l.orphan_until_us = 0;
        l.valid_until_us = in.sent_us + opt.ttl_ms * 1000;
        l.next_renew_us = in.sent_us + opt.ttl_ms * 1000 / 3;
    }
    if (full) {
        in.state = State::Ready;
        return schedule(in.id, t + 1000000);
    }
    carry_on(in, t);
}

void on_renewed(Instance& in, int64_t t, int lat) {
    if (measuring) st.renew_lat_us.push_back(lat);
    ++st.passes;
    for (int i : in.inflight) {
        Lease& l = in.leases[i];
        if (!l.answered) {  // no longer this instance's: freed by a raise, or lost
            ++st.freed;
            --holders;
            l.orphan_until_us = l.valid_until_us;
            l.orphan_ceiling = l.ceiling;
            l.slot = -1;
            continue;
        }
        ++st.renewed;
        if (t > l.valid_until_us) ++st.lost_late;
        l.ceiling = std::max(l.ceiling, l.answer_ceiling);
        l.valid_until_us = in.sent_us + opt.ttl_ms * 1000;
        l.next_renew_us = in.sent_us + opt.ttl_ms * 1000 / 3;
    }
    carry_on(in, t);
}

void on_answer(Instance& in) {
    int64_t t = now_us();
    int lat = (int)(t - in.sent_us);
    Call call = in.call;
    in.call = Call::None;
    if (!in.error.empty()) {
        ++st.errors;
        count_error(in.error);
        if (st.first_error.empty()) st.first_error = in.error;
        drop_conn(in);
        in.state = State::Down;
        // a renewal is tried again within the lease (lost only if too late); an acquire
        // after a second; a failed release leaves the leases to expire
        if (call == Call::Release) end_life(in);
        return schedule(in.id, t + (call == Call::Renew || call == Call::Pass ? 100000 : 1000000));
    }
    switch (call) {
    case Call::Acquire:
    case Call::AcquireMany:
        return on_acquired(in, t, lat);
    case Call::Renew:
    case Call::Pass:
        return on_renewed(in, t, lat);
    case Call::Release:
        ++st.releases;
        end_life(in);  // a restarted server's keeper: same owner key, new incarnation
        in.state = State::Ready;
        return schedule(in.id, t + 200000);
    case Call::None:
        return;
    }
}

// One row of an answer: an acquire's grant, or a renewal's (cosid.lease_pass: ord first).
void take_row(Instance& in, PGresult* res, int row) {
    if (in.call == Call::Acquire || in.call == Call::AcquireMany) {
        int ord = in.call == Call::AcquireMany ? atoi(PQgetvalue(res, row, 15)) : 1;  // (after the 15 columns)
        if (ord < 1 || ord > (int)in.inflight.size() || PQgetisnull(res, row, 0)) return;
        Lease& l = in.leases[in.inflight[ord - 1]];
        l.answered = true;
        l.answer_slot = atoi(PQgetvalue(res, row, 0));
        l.answer_fence = atoll(PQgetvalue(res, row, 1));
        l.answer_floor = atoll(PQgetvalue(res, row, 3));
        l.answer_ceiling = atoll(PQgetvalue(res, row, 4));
        return;
    }
    if (in.call != Call::Renew && in.call != Call::Pass) return;
    int ord = in.call == Call::Pass ? atoi(PQgetvalue(res, row, 0)) : 1;
    if (ord < 1 || ord > (int)in.inflight.size()) return;
    Lease& l = in.leases[in.inflight[ord - 1]];
    l.answered = true;
    l.answer_ceiling = atoll(PQgetvalue(res, row, in.call == Call::Pass ? 5 : 4));
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
            for (int r = 0; r < PQntuples(res); ++r) take_row(in, res, r);
        } else if (s != PGRES_COMMAND_OK && in.error.empty()) {
            const char* m = PQresultErrorMessage(res);
            in.error = m && *m ? m : "error";
        }
        PQclear(res);
    }
}

// Connected: back to its leases at once, or to the first acquires (spread over the ramp,
// so that renewals spread over ttl/3) once the gate opens.
void on_connected(Instance& in) {
    --connecting;
    PQsetnonblocking(in.conn, 1);
    watch(in, false);
    if (held(in) > 0) {
        in.state = State::Holding;
        return schedule(in.id, now_us());
    }
    in.state = State::Ready;
    if (acquire_gate) schedule(in.id, now_us());
}

void open_gate() {
    acquire_gate = true;
    int64_t spread = (opt.ramp_seconds > 0 ? opt.ramp_seconds * 1000LL : opt.ttl_ms / 3) * 1000;
    for (auto& in : fleet)
        if (in.state == State::Ready) schedule(in.id, now_us() + (int64_t)(rng() % spread));
}

void on_event(Instance& in, uint32_t events) {
    if (in.state == State::Connecting) {
        PostgresPollingStatusType p = PQconnectPoll(in.conn);
        if (p == PGRES_POLLING_FAILED) return fail(in, "connect");
        if (p == PGRES_POLLING_OK) return on_connected(in);
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

// CPU ticks (user + system) of a process, its live children and the children it reaped;
// -1 when it is gone.
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
    if (!read_stat(pid, &ppid, &own, &reaped)) return -1;  // gone (a switchover stopped it)
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

bool all_connected() {
    for (auto& in : fleet)
        if (in.state != State::Ready) return false;
    return true;
}

bool all_hold() { return holders >= opt.n * (int)opt.namespaces.size(); }

void run_until(int64_t until, bool (*done)()) {
    epoll_event evs[512];
    while (now_us() < until) {
        if (done != nullptr && done()) return;
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

// What the watched processes and the store did over a period: CPU (core-seconds each, -1
// for a process gone meanwhile) and WAL bytes.
struct Sample {
    std::vector<long long> ticks;
    std::string wal;
    int64_t at = 0;
};

Sample sample() {
    Sample s;
    for (int p : opt.watch_pids) s.ticks.push_back(cpu_ticks_of(p));
    s.wal = admin_query("SELECT pg_current_wal_lsn()");
    s.at = now_us();
    return s;
}

std::string cpu_seconds(const Sample& a, const Sample& b, double per) {
    std::string out;
    for (size_t i = 0; i < a.ticks.size(); ++i) {
        char t[64];
        if (a.ticks[i] < 0 || b.ticks[i] < 0) snprintf(t, sizeof(t), "%s-", i ? "," : "");
        else snprintf(t, sizeof(t), "%s%.3f", i ? "," : "", (b.ticks[i] - a.ticks[i]) / (double)sysconf(_SC_CLK_TCK) / per);
        out += t;
    }
    return out;
}

std::string wal_bytes(const Sample& a) {  // from a to now
    if (a.wal.empty()) return "0";
    std::string q = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '" + a.wal + "')";
    std::string b = admin_query(q.c_str());
    return b.empty() ? "-" : b;  // "-": the store changed (a switchover)
}

// At the end of the measured period: leases whose window ran out with no renewal answered
// yet, and freed ones still without a successor when their window ran out (a store that
// never came back would otherwise show no loss at all).
// The three commonest kinds of error, "count message|..." (messages cut at 60 characters).
std::string error_kinds() {
    std::vector<std::pair<long, std::string>> v;
    for (auto& [k, n] : st.error_kinds) v.push_back({n, k});
    std::sort(v.rbegin(), v.rend());
    std::string out;
    for (size_t i = 0; i < v.size() && i < 3; ++i) out += (i ? "|" : "") + std::to_string(v[i].first) + " " + v[i].second;
    return out;
}

long overdue_at_end() {
    int64_t t = now_us();
    long n = 0;
    for (auto& in : fleet)
        for (auto& l : in.leases)
            n += (l.slot >= 0 && l.valid_until_us < t) || (l.slot < 0 && l.orphan_until_us > 0 && l.orphan_until_us < t);
    return n;
}

void parse_options(int argc, char** argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--conninfo") opt.conninfo = v;
        else if (k == "--n") opt.n = atoi(v.c_str());
        else if (k == "--seconds") opt.seconds = atoi(v.c_str());
        else if (k == "--ttl-ms") opt.ttl_ms = atoll(v.c_str());
        else if (k == "--namespace") {  // one name, or several separated by commas
            opt.namespaces.clear();
            for (char* t = strtok(&v[0], ","); t != nullptr; t = strtok(nullptr, ",")) opt.namespaces.push_back(t);
        }
        else if (k == "--pooled") opt.pooled = v == "1";
        else if (k == "--batch") opt.batch = v == "1";
        else if (k == "--acquire-many") opt.acquire_many = v == "1";
        else if (k == "--churn") opt.churn = atof(v.c_str());
        else if (k == "--connect-parallel") opt.connect_parallel = atoi(v.c_str());
        else if (k == "--ramp-seconds") opt.ramp_seconds = atoi(v.c_str());
        else if (k == "--latency-file") opt.latency_file = v;
        else if (k == "--ready-file") opt.ready_file = v;
        else if (k == "--admin-conninfo") opt.admin_conninfo = v;
        else if (k == "--id-offset") opt.id_offset = atoi(v.c_str());
        else if (k == "--idle-seconds") opt.idle_seconds = atoi(v.c_str());
        else if (k == "--watch-pids") {
            for (char* t = strtok(&v[0], ","); t != nullptr; t = strtok(nullptr, ",")) opt.watch_pids.push_back(atoi(t));
        }
        else {
            fprintf(stderr, "unknown option %s\n", k.c_str());
            exit(2);
        }
    }
}

bool raise_open_files() {
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < (rlim_t)opt.n + 64) {
        rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, opt.n + 64);
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur >= (rlim_t)opt.n + 64) return true;
    fprintf(stderr, "fleet: ulimit -n is %llu, %d instances need more\n", (unsigned long long)rl.rlim_cur, opt.n);
    return false;
}

void print_not_ready(double ramp_s) {
    int by_state[8] = {0};
    for (auto& in : fleet) by_state[(int)in.state]++;
    printf("ok=0 holders=%d n=%d ramp_s=%.1f exhausted=%ld states=%d/%d/%d/%d/%d/%d/%d/%d first_error=\"%s\"\n",
           holders, opt.n, ramp_s, st.exhausted, by_state[0], by_state[1], by_state[2], by_state[3], by_state[4],
           by_state[5], by_state[6], by_state[7], st.first_error.c_str());
}

}  // namespace

int main(int argc, char** argv) {
    parse_options(argc, argv);
    if (!raise_open_files()) return 2;
    std::random_device rd;
    rng.seed(((uint64_t)rd() << 32) ^ rd());
    ep = epoll_create1(0);
    Sample i0 = sample();
    if (opt.idle_seconds > 0) sleep(opt.idle_seconds);
    std::string idle_cpu = cpu_seconds(i0, sample(), std::max(opt.idle_seconds, 1));
    fleet.resize(opt.n);
    timer_gen.assign(opt.n, 0);
    for (int i = 0; i < opt.n; ++i) {
        fleet[i].id = i;
        fleet[i].owner_key = "fleet-" + std::to_string(opt.id_offset + i);
        fleet[i].incarnation = new_uuid();
        fleet[i].leases.resize(opt.namespaces.size());
        schedule(i, now_us());
    }
    // Ramp: every instance connects; then, the gate open, acquires its leases, the first
    // acquires spread over ttl/3.  The acquires' phase is sampled apart (a direct fleet's
    // backend starts are not an acquire's cost).
    int64_t t0 = now_us();
    int64_t ramp_limit = t0 + (int64_t)(opt.ttl_ms / 3 + 120000 + opt.n * 100) * 1000;  // backends start slowly on a busy machine
    run_until(ramp_limit, all_connected);
    Sample a0 = sample();
    long acquires0 = st.acquires, renewed0 = st.renewed;
    open_gate();
    run_until(ramp_limit, all_hold);
    double acq_s = (now_us() - a0.at) / 1e6;
    Sample a1 = sample();
    std::string acq_wal = wal_bytes(a0);
    long acq_acquires = st.acquires - acquires0, acq_renewed = st.renewed - renewed0;
    int64_t ramp_us = now_us() - t0;
    if (!all_hold()) {
        print_not_ready(ramp_us / 1e6);
        return 1;
    }
    // The measured period: renewals in step, churn, and a switchover if fleet.sh makes one.
    long errors0 = st.errors, passes0 = st.passes, renewed1 = st.renewed, acquires1 = st.acquires,
         releases0 = st.releases, crashes0 = st.crashes, freed0 = st.freed, late0 = st.lost_late,
         succ0 = st.successor_late;
    measuring = true;
    if (!opt.ready_file.empty()) {
        FILE* f = fopen(opt.ready_file.c_str(), "w");
        if (f != nullptr) fclose(f);
    }
    Sample m0 = sample();
    run_until(m0.at + (int64_t)opt.seconds * 500000, nullptr);
    std::string backends = admin_query("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'");
    run_until(m0.at + (int64_t)opt.seconds * 1000000, nullptr);
    Sample m1 = sample();
    long overdue = overdue_at_end();
    double secs = (m1.at - m0.at) / 1e6;
    std::string wal = wal_bytes(m0);
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
    long renewed = st.renewed - renewed1;
    printf("ok=1 n=%d leases=%zu pooled=%d batch=%d seconds=%.1f ramp_s=%.1f passes=%ld renewed=%ld "
           "renewals_per_s=%.1f renew_p50_ms=%.2f renew_p99_ms=%.2f renew_max_ms=%.2f acquires=%ld acquire_p50_ms=%.2f "
           "acquire_p99_ms=%.2f releases=%ld crashes=%ld freed=%ld lost_late=%ld successor_late=%ld overdue=%ld "
           "jump_max_ms=%lld errors=%ld exhausted=%ld holders_end=%d cpu=%s wal_bytes=%s backends=%s "
           "acq_phase_s=%.1f acq_phase_acquires=%ld acq_phase_renewed=%ld acq_phase_cpu=%s acq_phase_wal_bytes=%s "
           "idle_cpu=%s first_error=\"%s\" error_kinds=\"%s\"\n",
           opt.n, opt.namespaces.size(), opt.pooled ? 1 : 0, opt.batch ? 1 : 0, secs, ramp_us / 1e6,
           st.passes - passes0, renewed, renewed / secs, p50 / 1000.0, p99 / 1000.0, pmax / 1000.0,
           st.acquires - acquires1, a50 / 1000.0, a99 / 1000.0, st.releases - releases0, st.crashes - crashes0,
           st.freed - freed0, st.lost_late - late0, st.successor_late - succ0, overdue, (long long)st.jump_max_ms,
           st.errors - errors0, st.exhausted, holders, cpu_seconds(m0, m1, secs).c_str(), wal.c_str(),
           backends.c_str(), acq_s, acq_acquires, acq_renewed, cpu_seconds(a0, a1, 1.0).c_str(), acq_wal.c_str(),
           idle_cpu.c_str(), e.c_str(), error_kinds().c_str());
    return 0;
}

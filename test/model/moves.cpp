// The moves of the explored world: what keepers, backends, stores and administrators may do at
// any point, each applying the rules of src/core (or, where the rule is SQL, a mirror of it
// named beside it).  A rule switched off (Config::without) is replaced by what cosid did
// before the rule, or by what PostgreSQL would let happen without the guard.
//
// A pause is no move of its own: a paused server takes no move while the others do, then
// goes on with what it holds in memory (its window, its word), which the breadth-first
// search tries at every point.  Moves the operator must not make (docs/safety.md, "Out of
// scope") are not offered: two stores for one namespace's slots, a static slot shared, a
// fork acknowledged while its origin runs, a clock moved back across a restart of static
// slots without a state file, a store clock outside max_tolerance.
#include <algorithm>
#include <climits>
#include <cstring>

#include "clock_step.hpp"
#include "issue_word.hpp"
#include "static_state.hpp"
#include "world.hpp"

namespace model {
using namespace cosid;

namespace {

enum Kind : uint8_t {
    K_TICK,
    K_JUMP,
    // an issuer's keeper and backends
    K_ACQUIRE,
    K_RENEW,
    K_RENEW_ANSWER_LOST,
    K_RENEW_ROLLED_BACK,
    K_RELEASE,
    K_RELEASE_FAILS,
    K_ISSUE,
    K_ISSUE_FREED,
    K_CRASH,
    K_STOP,
    K_START,
    K_CLOCK_FWD,
    K_CLOCK_BACK,
    K_MOVE_STORE,
    K_SWITCH,
    K_STATIC_OPEN,
    K_STATIC_EXTEND,
    K_ACQUIRE_LONG,
    K_ROGUE_RELEASE,
    K_FORK_PROMOTE,
    K_PG_UPGRADE,
    K_PG_UPGRADE_LINK,
    // a store and its administrator
    K_SCLOCK_FWD,
    K_SCLOCK_BACK,
    K_STANDBY_BEHIND,
    K_FAILOVER,
    K_STORE_CRASH,
    K_DUMP,
    K_RESTORE_WHOLE,
    K_RESTORE_PIECES,
    K_RESTORE_RECORDS,
    K_RESTORE_ROWS,
    K_DROP_CREATE,
    K_NS_CREATE,
    K_NS_REMAKE,
    K_LAYOUT_EDIT,
    K_FORK_ACK,
    K_STORE_UPGRADE,
    // bounds of their own: limits, a burst, a copy with a cosid.fork file, a second database, tenants
    K_MAX_TTL,
    K_MAX_TOLERANCE,
    K_STATIC_AHEAD,
    K_BURST,
    K_FORK_MARKED,
    K_SWITCH_DB,
    K_PUBLIC_LOCK,
    K_HOARD,
    K_HOARD_RENEW,
};

bool on(const Config& c, int rule) { return !c.without[rule]; }
bool fam(const Config& c, unsigned f) { return (c.families & f) != 0; }
std::string I(int i) { return "I" + std::to_string(i); }
std::string S(int s) { return "S" + std::to_string(s); }
std::string win(int64_t f, int64_t c) { return "(" + std::to_string(f) + ", " + std::to_string(c) + "]"; }
std::string key_of(int i) { return "k" + std::to_string(i); }
std::string inc_of(const Issuer& x, int i) { return "i" + std::to_string(i) + "." + std::to_string(x.inc); }
std::string store_id_text(const StoreCore& c) { return "store" + std::to_string(c.store_id); }

int64_t issuer_now(const World& w, int i) { return w.now + w.iss[i].clock; }
int64_t store_now(const World& w, int s) { return w.now + w.st[s].clock; }

uint64_t here_sysid(const World& w, int s) {
    const Store& st = w.st[s];
    return st.host >= 0 ? w.iss[st.host].sysid : st.sysid;
}
uint32_t here_timeline(const World& w, int s) {
    const Store& st = w.st[s];
    return st.host >= 0 ? w.iss[st.host].timeline : st.timeline;
}
bool here_upgraded(const World& w, int s) {
    const Store& st = w.st[s];
    return st.host >= 0 ? w.iss[st.host].upgraded : st.upgraded;
}
// The store's history as a call sees it (fork_rule's classify_store).  Without the rule
// upgrade-note, pg_upgrade's new cluster takes every note of pg_upgrade's read as made on the
// store's own timeline (the floors always kept).
StoreHistory history_of(const World& w, const Config& c, int s) {
    std::vector<StoreRecord> records = w.st[s].core.records;
    if (!on(c, R_UPGRADE_NOTE))
        for (StoreRecord& r : records) {
            r.upgrade_origin_system = r.system_identifier;
            r.upgrade_origin_timeline = r.timeline;
            r.upgrade_read_here = true;
        }
    return classify_store(records, here_sysid(w, s), here_timeline(w, s), here_upgraded(w, s));
}
// pg_upgrade's read of a server notes, in each store it holds, the cluster and timeline it is
// on, and declares a copy of a server that issued from that store a fork (src/pg/keeper/fork.cpp).
// declare: the rule upgrade-note (the note of an upgrade given up is cleared with 0, 0, false).
void note_upgrade_read(StoreCore& core, uint64_t sysid, uint32_t timeline, bool declare = false) {
    for (StoreRecord& r : core.records) {
        r.upgrade_origin_system = sysid;
        r.upgrade_origin_timeline = timeline;
        r.upgrade_read_here = sysid != 0;  // the run's id goes to the new cluster too
        if (declare && r.issuer && r.system_identifier == sysid && r.timeline != timeline) r.fork_declared = true;
    }
}

LeaseTable new_table(const Config& c, int64_t first_floor) {
    // Without the max_ttl rule the store grants any ttl (a table without limits).  With it, the
    // table is made with the widest limits the model's cap allows, and every grant is cut to the
    // store's max_ttl of the moment (granted_ttl below): the limits change (K_MAX_TTL).
    if (on(c, R_MAX_TTL)) return LeaseTable(1, kTolerance, StoreLimits{kWideMaxTtl, kWideMaxTolerance}, first_floor);
    return LeaseTable(1, kTolerance, first_floor);
}
// cosid.acquire and cosid.renew: a ttl above the store's max_ttl is granted at max_ttl
// (LeaseTable::granted_ttl's rule, with the limits of the moment).
int64_t granted_ttl(const Config& c, const StoreCore& core, int64_t ttl) {
    return on(c, R_MAX_TTL) ? std::min<int64_t>(ttl, core.max_ttl) : ttl;
}
// How far the store's limits let a window reach past the clock that granted it (what a raise
// by the limits the store sees covers).
int64_t visible_reach(const StoreCore& core) { return StoreLimits{core.max_ttl, core.max_tolerance}.raise_margin_ms(); }
// raise_after_lost_history raises by limits.raise_margin_ms(): these limits raise by `margin`.
StoreLimits margin_of(int64_t margin) { return StoreLimits{margin, 0}; }
// Every floor raised to base + margin (cosid._follow_timeline).
void raise_floors(StoreCore& core, int64_t base, int64_t margin) {
    if (core.table) core.table->raise_after_lost_history(base, margin_of(margin));
    core.raised_at = base;
    core.raised_margin = static_cast<int8_t>(margin);
}

// Marks the store's record of its own server as an issuer's (the keeper records its server).
void record_issuer(World& w, int s, bool issuer) {
    for (StoreRecord& r : w.st[s].core.records)
        if (r.system_identifier == here_sysid(w, s)) r.issuer = issuer;
    // cosid.history's timeline line is written with it, and no stop clears it (fork.cpp).
    if (issuer && w.st[s].host >= 0) w.iss[w.st[s].host].dd_local = true;
}

// A lease change committed on store s: with the flush rule the keeper waits for it to be
// durable; without, a crash of the store may take it back (synchronous_commit = off).
void committed(World& w, const Config& c, int s, const StoreCore& before) {
    if (!on(c, R_FLUSH) && !w.st[s].unflushed_before) w.st[s].unflushed_before = before;
}

// What every store call does first (the SQL: cosid._follow_timeline and cosid._fork_reason,
// called by cosid.acquire, renew and release): classify the store's history with
// fork_rule's classify_store, raise after a lost history, refuse while restoring or forked.
// Returns whether the store grants; *story gets what it did.
bool begin_call(World& w, const Config& c, int s, int caller, std::string* story) {
    Store& st = w.st[s];
    if (!st.exists || !st.core.ext) return false;
    // pg_restore's session is known by its application_name: a data-only restore that has not
    // brought the origin's record yet grants nothing either (store_restore_race.sh).
    if (st.restoring && st.records_pending && on(c, R_RESTORE_MARK)) return false;
    // src/pg/keeper/fork.cpp: a data directory that saw a fork (cosid.history) is refused by every
    // database of its server until the fork is acknowledged in that one.
    if (on(c, R_FORK_DATADIR) && caller >= 0 && st.host == caller && w.iss[caller].dd_fork && !st.core.fork_acked)
        return false;
    const int64_t now = store_now(w, s);
    const StoreHistory h = history_of(w, c, s);
    bool raise = false, follow = true;
    switch (h) {
    case StoreHistory::Whole:
        follow = false;
        note_upgrade_read(st.core, 0, 0);  // an upgrade given up: the server went on here
        break;
    case StoreHistory::Upgraded: break;  // nothing lost: the floors stay
    case StoreHistory::BeingRestored:
        if (on(c, R_RESTORE_MARK)) return false;
        follow = false;  // without the rule: granted from whatever is there
        break;
    case StoreHistory::Forked:
        if (on(c, R_FORK_DETECT)) return false;
        raise = on(c, R_RAISE_FAILOVER);  // without the rule: a new timeline like any other
        break;
    case StoreHistory::NewTimeline: raise = on(c, R_RAISE_FAILOVER); break;
    case StoreHistory::NewCluster: raise = on(c, R_RAISE_CLUSTER); break;
    case StoreHistory::Restored: raise = on(c, R_RAISE_RESTORE); break;
    }
    if (raise) {
        // A restored dump cannot see the limits used after it was taken: the reach cap
        // (unseen_history_reach_ms).  A failover's standby replayed every limit change with the
        // grants made before it (but a raise the operator made before the standby replayed it:
        // docs/failover.md, out of scope, and no such move is offered): the limits it sees.
        int64_t margin = visible_reach(st.core);
        if (h == StoreHistory::Restored && on(c, R_REACH_CAP)) margin = unseen_history_reach(margin);
        raise_floors(st.core, now, margin);
        if (story) *story += " [" + S(s) + " raises every floor to " + std::to_string(now + margin) + "]";
    }
    if (follow) st.core.records = {StoreRecord{here_sysid(w, s), here_timeline(w, s), false, false}};
    if (st.host == caller && on(c, R_RECORD_AT_START)) record_issuer(w, s, true);
    return true;
}

// A fresh id: checks the promise against every id issued before.
void check_issue(World& w, int i, const Layout& l, int64_t id, std::string* violation) {
    const Unpacked u = l.unpack(id);
    for (const Issued& p : w.ids) {
        if (p.id == id) {
            if (violation)
                *violation = "id " + std::to_string(id) + " issued twice: by " + I(p.issuer) + " and now by " + I(i) +
                             " (slot " + std::to_string(u.slot) + ", tick " + std::to_string(u.tick) + ")";
            return;
        }
        if (p.issuer != i && p.slot == u.slot && p.tick == u.tick) {
            if (violation)
                *violation = "(slot " + std::to_string(u.slot) + ", tick " + std::to_string(u.tick) + ") issued by " +
                             I(p.issuer) + " and by " + I(i);
            return;
        }
    }
    w.ids.push_back(Issued{id, static_cast<int8_t>(i), u.slot, u.tick});
}

// The largest static ceiling recorded on store s for slot 0 (cosid.acquire's v_static).
std::optional<int64_t> static_rows_max(const StoreCore& core, std::optional<uint64_t> except_cluster) {
    std::optional<int64_t> v;
    for (const StaticRow& r : core.static_rows)
        if (!except_cluster || r.cluster != *except_cluster) v = std::max(v.value_or(r.ceiling), r.ceiling);
    return v;
}
void record_static_row(StoreCore& core, uint64_t cluster, int64_t ceiling) {
    for (StaticRow& r : core.static_rows)
        if (r.cluster == cluster) {
            r.ceiling = std::max(r.ceiling, ceiling);
            return;
        }
    core.static_rows.push_back(StaticRow{cluster, ceiling});
}

// The keeper's release of its lease in order (its word closed, the exact last timestamp).
bool release_lease(World& w, const Config& c, int i, std::string* story) {
    Issuer& x = w.iss[i];
    Lease& l = x.lease;
    const Layout lay = layout_of(l.layout);
    const int64_t last = issue_word::last_issued_ms(lay, l.word).value_or(l.floor);
    l.word |= issue_word::kClosed;
    Store& st = w.st[l.store];
    const StoreCore before = st.core;
    if (!begin_call(w, c, l.store, i, story) || !st.core.table) {
        l.pending_release = true;
        if (story) *story += " release refused: the entry stays, last " + std::to_string(last);
        return true;
    }
    const auto r = st.core.table->release(l.slot, inc_of(x, i), l.fence, last);
    if (r) {
        committed(w, c, l.store, before);
        record_release(&x.history, store_id_text(st.core), l.slot, last);
        if (story)
            *story += " released slot " + std::to_string(l.slot) + " with last " + std::to_string(last) +
                      " (next_floor " + std::to_string(r->next_floor) + ")";
    } else if (story) {
        *story += " slot " + std::to_string(l.slot) + " was no longer its lease";
    }
    l = Lease{};
    return true;
}

void release_static(World& w, const Config& c, int i, std::string* story) {
    Issuer& x = w.iss[i];
    if (!x.sw.open) return;
    const int64_t last = issue_word::last_issued_ms(layout_of(0), x.sw.word).value_or(x.sw.floor);
    // A release lowers the file (or the keeper's memory) to the last id issued.
    if (!c.static_no_file) x.file_ceiling = last;
    x.memory_ms = last;
    x.memory_has = true;
    x.sw = StaticWindow{};
    if (story) *story += " static window released at " + std::to_string(last);
}

// A fast shutdown: every lease released in order, then down.
void clean_stop(World& w, const Config& c, int i, std::string* story) {
    Issuer& x = w.iss[i];
    if (x.lease.held) release_lease(w, c, i, story);
    x.lease = Lease{};
    x.freed = Lease{};  // (nothing of it is in the store: it ends here)
    release_static(w, c, i, story);
    x.up = false;
    x.stopped_at = w.now;
    if (!on(c, R_RECORD_KEPT))
        for (int s = 0; s < kStores; ++s)
            if (w.st[s].exists && w.st[s].host == i) record_issuer(w, s, false);
}

void start(World& w, const Config& c, int i, std::string* story) {
    Issuer& x = w.iss[i];
    x.up = true;
    x.inc += 1;
    x.issued_once = false;
    x.started_ms = issuer_now(w, i);
    x.memory_has = false;
    x.memory_ms = 0;
    x.lease = Lease{};
    x.freed = Lease{};
    x.sw = StaticWindow{};
    const bool marker = x.fork_marker;
    if (marker && on(c, R_FORK_DATADIR)) x.dd_fork = true;  // cosid.history: "fork <id> ..."
    for (int s = 0; s < kStores; ++s) {
        Store& st = w.st[s];
        if (!st.exists || st.host != i || !st.core.ext) continue;
        // The keeper finds a cosid.fork file and declares its store a copy (cosid._fork_mark).
        // With the rule fork-datadir, cosid.history keeps the fork for good and every database
        // of the server is told; the rule before: only the store it uses (cosid.database), and
        // the file removed.
        if (x.fork_marker && (on(c, R_FORK_DATADIR) || s == x.store))
            for (StoreRecord& r : st.core.records) r.fork_declared = true;
        // The keeper records its server as soon as it finds its store ready.
        if (on(c, R_RECORD_AT_START)) begin_call(w, c, s, i, story);
    }
    if (marker && !on(c, R_FORK_DATADIR) && x.store >= 0 && w.st[x.store].exists && w.st[x.store].host == i)
        x.fork_marker = false;
}

void crash(World& w, const Config& c, int i, std::string* story) {
    Issuer& x = w.iss[i];
    // A crash restart: a new incarnation; shared memory (the pool, the static windows and the
    // keeper's memory) is gone; the files stay, except a write that was never made durable.
    if (!on(c, R_STATIC_DURABLE) && x.file_write_undurable) {
        x.file_ceiling = x.file_prev_ceiling;
        if (story)
            *story +=
                " (the state file's last ceiling was not durable: back to " + std::to_string(x.file_ceiling) + ")";
    }
    x.file_write_undurable = false;
    for (int s = 0; s < kStores; ++s)
        if (w.st[s].exists && w.st[s].host == i && w.st[s].unflushed_before) {
            w.st[s].core = *w.st[s].unflushed_before;  // its local store crashed with it
            w.st[s].unflushed_before.reset();
            if (story) *story += " (its store " + S(s) + " loses the commits it had not flushed)";
        }
    const int64_t stopped = x.stopped_at;
    start(w, c, i, story);
    x.stopped_at = stopped;
}

// The floor and ceiling of a new static window of slot 0 (static_state.hpp's rules, and the
// SQL's cosid._static_recorded for the rows).  Nothing: refused (ZC007).
std::optional<std::pair<int64_t, int64_t>> static_window(const World& w, const Config& c, int i, std::string* story) {
    const Issuer& x = w.iss[i];
    const bool have_file = !c.static_no_file;
    const bool file_window = have_file && x.file_has_window;
    if (on(c, R_STATIC_TIMELINE)) {
        if (file_window && x.file_timeline != x.timeline) {
            if (story) *story += " refused: the state file is of timeline " + std::to_string(x.file_timeline);
            return std::nullopt;
        }
        if (!file_window && x.timeline > 1) {
            if (story) *story += " refused: no state file on timeline " + std::to_string(x.timeline);
            return std::nullopt;
        }
    }
    // src/pg/keeper/fork.cpp fork_static_check: a copy declared (a cosid.fork file) opens no static
    // window until the fork is acknowledged.
    if (on(c, R_FORK_DETECT) && x.store >= 0 && w.st[x.store].exists) {
        bool declared = x.fork_marker;
        for (const StoreRecord& r : w.st[x.store].core.records) declared = declared || r.fork_declared;
        if (on(c, R_FORK_DATADIR) && x.dd_fork && !w.st[x.store].core.fork_acked) declared = true;
        if (declared) {
            if (story) *story += " refused: this data directory is a declared copy (ZC009)";
            return std::nullopt;
        }
    }
    const int64_t model_ms = have_file ? x.file_ceiling : x.memory_ms;
    const bool model_has = have_file ? x.file_has_window : x.memory_has;
    std::optional<int64_t> others, own;
    if (x.store >= 0 && w.st[x.store].exists && w.st[x.store].core.ext) {
        const StoreCore& core = w.st[x.store].core;
        if (on(c, R_STATIC_ROWS)) others = static_rows_max(core, x.sysid);
        for (const StaticRow& r : core.static_rows)
            if (r.cluster == x.sysid) own = r.ceiling;
        // cosid._static_recorded: the lease row's reach on the slot counts among the others.
        if (on(c, R_SWITCH_TO_STATIC) && core.ns && core.table)
            others = std::max(others.value_or(0), reaches_until(core.table->rows_as_raised()[0]));
    }
    // Without the rule the file is read but its ceiling is not used.
    const int64_t recorded =
        static_recorded_ms(on(c, R_STATIC_FLOOR) ? model_ms : 0, model_has, others, own, have_file);
    const int64_t started = on(c, R_STATIC_NOFILE_START) ? x.started_ms : 0;
    const int64_t floor = static_window_floor(recorded, 0, have_file, started);
    return std::make_pair(floor, issuer_now(w, i) + static_ahead_used(x.static_ahead));
}

// The keeper writes a static ceiling: cosid.static_ceiling first, then the state file
// (durably, before the window uses it).
void write_static_ceiling(World& w, const Config& c, int i, int64_t ceiling) {
    Issuer& x = w.iss[i];
    if (x.store >= 0 && w.st[x.store].exists && w.st[x.store].core.ext)
        record_static_row(w.st[x.store].core, x.sysid, ceiling);
    if (!c.static_no_file) {
        x.file_prev_ceiling = x.file_ceiling;
        x.file_ceiling = ceiling;
        x.file_has_window = true;
        x.file_timeline = x.timeline;
        x.file_write_undurable = !on(c, R_STATIC_DURABLE);
    }
    x.memory_ms = ceiling;
    x.memory_has = true;
}

bool issue(World& w, const Config& c, int i, bool on_freed, std::string* story, std::string* violation) {
    Issuer& x = w.iss[i];
    const int64_t now = issuer_now(w, i);
    uint64_t* word;
    Layout lay;
    int32_t slot;
    ClaimWindow window;
    int64_t borrow;
    if (on_freed) {
        if (!x.freed.held) return false;
        word = &x.freed.word;
        lay = layout_of(x.freed.layout);
        slot = x.freed.slot;
        window = ClaimWindow{x.freed.floor, x.freed.ceiling};
        borrow = issue_word::kBorrowToCeiling;
    } else if (x.lease.held && !x.lease.pending_release) {
        word = &x.lease.word;
        lay = layout_of(x.lease.layout);
        slot = x.lease.slot;
        window = ClaimWindow{x.lease.floor, x.lease.ceiling};
        borrow = issue_word::kBorrowToCeiling;
    } else if (x.sw.open) {
        word = &x.sw.word;
        lay = layout_of(0);
        slot = x.sw.slot;
        window = ClaimWindow{x.sw.floor, x.sw.ceiling};
        // cosid.max_borrow: 2 in the bounds without limit changes; its default (to the window's
        // ceiling) in those with limit changes, where the window may reach further.
        const int64_t max_borrow = fam(c, F_LIMITS) ? issue_word::kBorrowToCeiling : kMaxBorrow;
        borrow = on(c, R_STATIC_NOFILE_BORROW) ? static_borrow_ms(!c.static_no_file, max_borrow)
                                               : static_borrow_ms(true, max_borrow);
    } else {
        return false;
    }
    // Without the window rule the generator does not stop at its ceiling.
    if (!on(c, R_WINDOW)) window.ceiling_ms = INT64_MAX / 4;
    const Claim cl = claim(*word, lay, slot, window, now, borrow);
    if (cl.status != NextStatus::Issued) return false;
    *word = cl.word;
    const Unpacked u = lay.unpack(cl.id);
    if (story)
        *story += " issues id " + std::to_string(cl.id) + " (slot " + std::to_string(slot) + ", tick " +
                  std::to_string(u.tick) + ", seq " + std::to_string(u.sequence) + ") at its clock " +
                  std::to_string(now) + " in " +
                  (window.ceiling_ms > 1000000 ? "(" + std::to_string(window.floor_ms) + ", no ceiling)"
                                               : win(window.floor_ms, window.ceiling_ms));
    // The old record rule: a store learnt its server issues from it only at the first id.
    if (!on(c, R_RECORD_AT_START) && !x.issued_once)
        for (int s = 0; s < kStores; ++s)
            if (w.st[s].exists && w.st[s].host == i && x.store == s) record_issuer(w, s, true);
    x.issued_once = true;
    check_issue(w, i, lay, cl.id, violation);
    return true;
}

// The live leases a store role holds (the model's roles: one per server's keeper, by its owner
// key, and the hoarding role's "evil").
int live_leases_of(const StoreCore& core, const std::string& role, int64_t now) {
    int n = 0;
    if (core.table)
        for (const LeaseRow& r : core.table->rows())
            if (r.has_owner() && r.owner_key == role && r.expires_at > now) ++n;
    return n;
}

// The availability promise of the tenant bounds (F_TENANT): a server whose role holds no live
// lease is never refused a window while the namespace has a slot for each role (2 slots: the
// server's role and the hoarding one).
void refused_window(const World& w, const Config& c, int i, const char* why, std::string* violation) {
    if (!fam(c, F_TENANT) || !violation) return;
    const Store& st = w.st[w.iss[i].store];
    if (live_leases_of(st.core, key_of(i), store_now(w, w.iss[i].store)) > 0) return;
    *violation = I(i) + " refused a window (" + why + "), holding no lease: another login's doing";
}

bool acquire(World& w, const Config& c, int i, int64_t ttl, std::string* story, std::string* violation = nullptr) {
    Issuer& x = w.iss[i];
    const int s = x.store;
    Store& st = w.st[s];
    // cosid.acquire took pg_advisory_xact_lock_shared(1668248937, hashtext(namespace)): a key
    // PUBLIC can hold.  With the rule no lock of the acquire path is one a login with no grants
    // can take (cosid.acquire's row locks on tables only cosid_keeper may read).
    if (!on(c, R_TENANT_LOCK) && st.public_lock) {
        if (story) *story += " refused: canceling statement due to lock timeout (ZC006)";
        refused_window(w, c, i, "lock timeout: a login with no grants holds the acquire path's advisory key",
                       violation);
        return true;
    }
    if (!begin_call(w, c, s, i, story)) {
        if (story) *story += " refused: the store grants nothing now";
        return true;
    }
    if (!st.core.ns || !st.core.table) {
        if (story) *story += " refused: no namespace";
        return true;
    }
    const int64_t now = store_now(w, s);
    // cosid.acquire: a store role holds at most the cap of live leases in a namespace (in the
    // tenant bounds; elsewhere the cap is above the model's 2 slots, as the default is above
    // what one server needs).
    if (fam(c, F_TENANT) && on(c, R_LEASE_CAP) && live_leases_of(st.core, key_of(i), now) >= kLeaseCap) {
        if (story) *story += " refused: its role holds the cap of live leases";
        return true;
    }
    const StoreCore before = st.core;
    const AcquireRequest req{key_of(i), inc_of(x, i), granted_ttl(c, st.core, ttl), 0};
    std::optional<LeaseRow> row;
    // The rule before: a live lease of the asking incarnation was handed back with its floor.
    if (!on(c, R_LIVE_REGRANT))
        for (const LeaseRow& r : st.core.table->rows())
            if (r.incarnation == req.incarnation && r.expires_at > now) row = r;
    if (!row) {
        // The rule before: an acquire that ignored the raise's mark on a free row the raise left
        // alone (cosid.acquire's cosid._raised_next_floor and cosid._raise_fence_step).
        if (!on(c, R_LAZY_RAISE)) st.core.table->forget_missed_raises_for_tooth();
        // (a ttl above max_ttl is granted at max_ttl: LeaseTable::granted_ttl)
        row = st.core.table->acquire(req, now).lease;
    }
    if (!row) {
        if (story) *story += " refused: no slot free";
        refused_window(w, c, i, "no slot free", violation);
        return true;
    }
    committed(w, c, s, before);
    int64_t floor = row->floor;
    if (!on(c, R_NEXT_FLOOR)) floor = std::min(floor, now);  // the rule before: from the store's now
    const Layout lay = layout_of(st.core.layout);
    const std::string sid = store_id_text(st.core);
    // cosid.history: above what other stores granted on the slot (the keeper: store_history.cpp).
    if (on(c, R_STORE_HISTORY)) floor = std::max(floor, floor_after_store_change(&x.history, sid, lay, row->slot));
    // cosid.acquire's v_static: above the static ceilings recorded for the slot.
    if (on(c, R_SWITCH_TO_LEASED) && row->slot == 0)
        floor = std::max(floor, static_rows_max(st.core, std::nullopt).value_or(floor));
    record_grant(&x.history, sid, lay, row->slot, row->ceiling);
    if (x.lease.held && x.lease.raised_out) x.freed = x.lease;  // its successor: the freed one goes on
    x.lease = Lease{true,       false, static_cast<int8_t>(s), st.core.layout,     row->slot,
                    row->fence, floor, row->ceiling,           issue_word::kFresh, static_cast<int16_t>(now),
                    false};
    if (story)
        *story += " got slot " + std::to_string(row->slot) + " window " + win(floor, row->ceiling) + " fence " +
                  std::to_string(row->fence) + " at store time " + std::to_string(now);
    return true;
}

bool renew(World& w, const Config& c, int i, int kind, std::string* story) {
    Issuer& x = w.iss[i];
    Lease& l = x.lease;
    Store& st = w.st[l.store];
    const int64_t now = store_now(w, l.store);
    if (kind == K_RENEW_ROLLED_BACK) {
        // The store rolled the renewal back at commit; the rule before took the answer sent
        // before the commit as the new ceiling.
        const int64_t would = now + kTtl + kTolerance;
        if (would <= l.ceiling) return false;
        l.ceiling = would;
        if (story)
            *story += " renewal rolled back at commit, but the window was extended to " + win(l.floor, l.ceiling);
        return true;
    }
    if (!begin_call(w, c, l.store, i, story) || !st.core.table) {
        if (story) *story += " renewal refused";
        return true;
    }
    const StoreCore before = st.core;
    if (fam(c, F_TENANT) && on(c, R_LEASE_CAP) && on(c, R_LEASE_CAP_RENEW) &&
        st.core.table->row(l.slot).expires_at <= now && live_leases_of(st.core, key_of(i), now) >= kLeaseCap) {
        if (story) *story += " renewal refused: its role holds the cap of live leases";
        return true;
    }
    const auto r = st.core.table->renew(l.slot, inc_of(x, i), l.fence, granted_ttl(c, st.core, x.ttl), now);
    if (r) committed(w, c, l.store, before);
    if (kind == K_RENEW_ANSWER_LOST) {
        if (story) *story += r ? " renewal applied, its answer lost" : " renewal found the lease lost, answer lost";
        return true;
    }
    if (r) {
        l.ceiling = std::max(l.ceiling, r->ceiling);
        l.seen_at = static_cast<int16_t>(std::max<int64_t>(l.seen_at, now));
        record_grant(&x.history, store_id_text(st.core), layout_of(l.layout), l.slot, l.ceiling);
        if (story) *story += " renewed: window " + win(l.floor, l.ceiling);
    } else if (on(c, R_FENCE) && freed_by_raise(l.seen_at, st.core.raised_at, limits().max_tolerance_ms)) {
        // lease_model.hpp, freed_by_raise: the raise put every next window above this one.
        // (Not a rule that closes a path: going on to the ceiling after any loss reaches no
        // duplicate either, since every next window starts at or above the ceiling the store
        // committed; a loss without a raise ends the window so that a revoke stops a server.)
        l.raised_out = true;
        if (story)
            *story += " renewal found the lease freed by the store's raise: the window goes on to its ceiling " +
                      win(l.floor, l.ceiling);
    } else if (!on(c, R_FENCE)) {
        l.ceiling = std::max(l.ceiling, now + kTtl + kTolerance);
        if (story) *story += " renewal found the lease lost, but the window goes on to " + win(l.floor, l.ceiling);
    } else {
        if (story) *story += " renewal found the lease lost: the window ends";
        l = Lease{};
    }
    return true;
}

void copy_data_directory(World& w, const Config& c, int from, int to) {
    Issuer& x = w.iss[to];
    const Issuer& o = w.iss[from];
    x = Issuer{};
    x.exists = true;
    x.origin = static_cast<int8_t>(from);
    x.clock = o.clock;
    x.inc = 0;
    x.is_static = o.is_static;
    x.sysid = o.sysid;
    x.timeline = o.timeline;
    x.upgraded = o.upgraded;
    x.history = o.history;
    x.file_has_window = o.file_has_window;
    x.file_ceiling = o.file_ceiling;
    x.file_prev_ceiling = o.file_prev_ceiling;
    x.file_timeline = o.file_timeline;
    x.ttl = o.ttl;  // postgresql.conf is in the data directory
    x.dd_local = o.dd_local;
    x.dd_fork = o.dd_fork;
    x.static_ahead = o.static_ahead;
    // Its cosid.store_dsn is copied too: a local store's copy is its own (S2), a remote one is shared.
    x.store = o.store == 0 ? 2 : o.store;
    if (o.store == 0) {
        w.st[2] = w.st[0];
        w.st[2].host = static_cast<int8_t>(to);
        w.st[2].standby.reset();
        w.st[2].dump.reset();
        w.st[2].unflushed_before.reset();
        if (fam(c, F_DATABASES)) {
            // The server's second database with cosid installed (its own namespace, of the same
            // name): the original never used it as its store (cosid.database).
            Store& d = w.st[3];
            d = Store{};
            d.exists = true;
            d.host = static_cast<int8_t>(to);
            d.core.ext = d.core.ns = true;
            d.core.store_id = 13;
            d.core.table = new_table(c, 0);
            d.core.records = {StoreRecord{o.sysid, o.timeline, false, false}};
        }
    }
}

}  // namespace

namespace {
World plain_world(const Config& c);
struct Preset {
    const char* name;
    std::vector<Move> moves;
};
// Each: the model's own moves, in order (Move{kind, issuer or store, value}).
const std::vector<Preset>& presets() {
    static const std::vector<Preset> p = {
        // finding 2: the nightly dump of S1 (max_ttl 2), then max_ttl raised to 6
        {"dump-then-raise", {Move{K_DUMP, 1}, Move{K_MAX_TTL, 1, 6}}},
        // finding 1: a standby of I0 promoted beside it (S2 sees max_ttl 2), then S0's max_ttl raised
        {"copy-then-raise", {Move{K_FORK_PROMOTE, 0}, Move{K_MAX_TTL, 0, 6}}},
        // finding 3: S0's max_ttl 1 (a reach of 3 visible), a copy started with a cosid.fork file,
        // then the original's cosid.static_ahead raised
        {"static-copy-then-raise", {Move{K_MAX_TTL, 0, 1}, Move{K_FORK_MARKED, 0}, Move{K_STATIC_AHEAD, 0}}},
        // a lowered limit, then a failover: S1's max_ttl raised to 6, I0 granted under it, lowered to 2
        // a dump of S1 taken before its namespace was made, then max_ttl raised (--ns-absent)
        {"dump-before-namespace", {Move{K_DUMP, 1}, Move{K_NS_CREATE, 1}, Move{K_MAX_TTL, 1, 6}}},
        {"grant-then-lower", {Move{K_MAX_TTL, 1, 6}, Move{K_ACQUIRE, 0}, Move{K_MAX_TTL, 1, 2}}},
    };
    return p;
}
}  // namespace

const char* preset_names() {
    return "dump-then-raise, copy-then-raise, static-copy-then-raise, dump-before-namespace, grant-then-lower";
}

std::optional<World> initial_world(const Config& c, std::vector<std::string>* stories) {
    World w = plain_world(c);
    if (c.preset.empty()) return w;
    for (const Preset& p : presets()) {
        if (c.preset != p.name) continue;
        for (const Move& m : p.moves) {
            std::string story, violation;
            apply(w, c, m, stories ? &story : nullptr, &violation);
            if (stories) stories->push_back(story);
        }
        return w;
    }
    return std::nullopt;
}

namespace {
World plain_world(const Config& c) {
    World w;
    for (int i = 0; i < c.issuers && i < 2; ++i) {
        Issuer& x = w.iss[i];
        x.exists = x.up = true;
        x.inc = 1;
        x.sysid = static_cast<uint64_t>(1 + i);
        x.store = static_cast<int8_t>(c.central ? 1 : 0);
        x.started_ms = 0;
        if (c.families & F_LIMITS) x.ttl = kLongTtl;
    }
    w.iss[0].is_static = c.static_start;
    w.iss[0].dd_local = !c.central && on(c, R_RECORD_AT_START);  // its keeper recorded it on S0 at start
    for (int s = 0; s < 2; ++s) {
        if (s == 1 && !c.standalone_s1 && !c.central) continue;
        Store& st = w.st[s];
        st.exists = true;
        st.host = static_cast<int8_t>(s == 0 ? 0 : -1);
        st.sysid = s == 0 ? 1 : 3;
        st.core.ext = true;
        st.core.ns = !c.ns_absent;
        st.core.store_id = static_cast<int16_t>(10 + s);
        if (st.core.ns) st.core.table = new_table(c, 0);
        st.core.records = {StoreRecord{st.sysid, 1, s == 0 && on(c, R_RECORD_AT_START), false}};
    }
    return w;
}
}  // namespace

void moves_of(const World& w, const Config& c, std::vector<Move>* out) {
    out->clear();
    auto add = [&](uint8_t k, int a, int b = -1) {
        out->push_back(Move{k, static_cast<int8_t>(a), static_cast<int8_t>(b)});
    };
    if (w.now < kMaxTime) add(K_TICK, -1);
    // A longer wait: as far as a raise puts floors ahead (max_ttl + 2 x max_tolerance), in one move.
    if (w.now + limits().raise_margin_ms() <= kMaxTime) add(K_JUMP, -1);
    for (int i = 0; i < kIssuers; ++i) {
        const Issuer& x = w.iss[i];
        if (!x.exists) continue;
        if (i == 0 && fam(c, F_FORK) && !w.iss[2].exists && !w.st[2].exists) add(K_PG_UPGRADE, i);
        // --link mode (the old directory cannot start again) of a copy: a promoted standby,
        // perhaps before any store call of its own
        if (x.origin >= 0 && fam(c, F_FORK) && !x.upgraded) add(K_PG_UPGRADE_LINK, i);
        if (!x.up) {
            if (fam(c, F_RESTART | F_FORK) && !x.never_again) add(K_START, i);
            continue;
        }
        const bool store_ok = x.store >= 0 && w.st[x.store].exists;
        if (fam(c, F_CORE)) {
            if (!x.is_static && store_ok && (!x.lease.held || x.lease.pending_release || x.lease.raised_out))
                add(K_ACQUIRE, i);
            if (x.lease.held && !x.lease.pending_release && !x.lease.raised_out) add(K_RENEW, i);
            if (x.lease.held) add(K_RELEASE, i);
            if ((x.lease.held && !x.lease.pending_release) || x.sw.open) add(K_ISSUE, i);
            if (x.freed.held) add(K_ISSUE_FREED, i);
        }
        if (fam(c, F_LOSS) && x.lease.held && !x.lease.pending_release && !x.lease.raised_out) {
            add(K_RENEW_ANSWER_LOST, i);
            if (!on(c, R_COMMIT)) add(K_RENEW_ROLLED_BACK, i);  // with the rule it changes nothing
            add(K_RELEASE_FAILS, i);
        }
        if (fam(c, F_CRASH)) add(K_CRASH, i);
        if (fam(c, F_RESTART)) add(K_STOP, i);
        if (fam(c, F_CLOCK)) {
            if (x.clock < kMaxIssuerClock) add(K_CLOCK_FWD, i);
            // Without a state file a static slot is safe only while the clock does not move
            // back across a restart: the operator's part (docs/safety.md), so no step back.
            if (x.clock > kMinIssuerClock && !c.static_no_file) add(K_CLOCK_BACK, i);
        }
        if (fam(c, F_MOVE) && !x.is_static) {
            // Ids issued under two stores collide unless the stores grant disjoint slots to
            // every instance that issued under both (docs/stores.md): the operator moves a
            // whole fleet by moving its store, so an instance moves alone.
            bool alone = true;
            for (int j = 0; j < kIssuers; ++j)
                if (j != i && w.iss[j].exists && w.iss[j].origin < 0) alone = false;
            const int other = x.store == 0 ? 1 : 0;
            if (alone && w.st[other].exists && (w.st[other].host < 0 || w.st[other].host == i)) add(K_MOVE_STORE, i);
        }
        if (fam(c, F_STATIC)) {
            if (x.is_static) {
                if (!x.sw.open)
                    add(K_STATIC_OPEN, i);
                else
                    add(K_STATIC_EXTEND, i);
            }
            // A static slot is the operator's promise that nobody else uses it: only a server
            // whose store no other server uses switches (forks are not the operator's choice).
            bool alone = true;
            for (int j = 0; j < kIssuers; ++j)
                if (j != i && w.iss[j].exists && w.iss[j].store == x.store && w.iss[j].origin < 0 && x.origin < 0)
                    alone = false;
            if (alone && i == 0) add(K_SWITCH, i);
        }
        if (fam(c, F_ROGUE) && store_ok && !x.is_static) {
            if (!x.lease.held || x.lease.pending_release) add(K_ACQUIRE_LONG, i);
            for (int j = 0; j < kIssuers; ++j)
                if (j != i && w.iss[j].exists && w.iss[j].lease.held && w.iss[j].lease.store == x.store)
                    add(K_ROGUE_RELEASE, i, j);
        }
        if (fam(c, F_FORK) && i == 0 && !w.iss[2].exists && !w.st[2].exists) add(K_FORK_PROMOTE, i);
        // A copy started with a cosid.fork file (a snapshot, a base backup; docs/safety.md):
        // in the bounds of limits and databases only.
        if (fam(c, F_FORK) && fam(c, F_LIMITS | F_DATABASES) && i == 0 && !w.iss[2].exists && !w.st[2].exists)
            add(K_FORK_MARKED, i);
        if (fam(c, F_LIMITS)) {
            if ((x.lease.held && !x.lease.pending_release) || x.sw.open) add(K_BURST, i);
            if (x.is_static) add(K_STATIC_AHEAD, i);
        }
        // cosid.database switched between the two databases of a copy's server, and a restart
        if (fam(c, F_DATABASES) && x.origin >= 0 && (x.store == 2 || x.store == 3) && w.st[2].exists && w.st[3].exists)
            add(K_SWITCH_DB, i);
    }
    for (int s = 0; s < kStores; ++s) {
        const Store& st = w.st[s];
        if (!st.exists) continue;
        if (fam(c, F_STORE_CLOCK)) {
            if (st.clock < kMaxStoreClock) add(K_SCLOCK_FWD, s);
            if (st.clock > kMinStoreClock) add(K_SCLOCK_BACK, s);
        }
        if (st.unflushed_before && st.host < 0) add(K_STORE_CRASH, s);
        if (fam(c, F_FAILOVER) && st.host < 0) {
            if (!st.standby) add(K_STANDBY_BEHIND, s);
            add(K_FAILOVER, s);
        }
        if (fam(c, F_RESTORE) && st.host < 0) {
            if (!st.dump && st.core.ext && !st.restoring) add(K_DUMP, s);
            if (st.dump && !st.restoring) {
                add(K_RESTORE_WHOLE, s);
                add(K_RESTORE_PIECES, s);
            }
            if (st.restoring && st.records_pending) add(K_RESTORE_RECORDS, s);
            if (st.restoring && st.rows_pending) add(K_RESTORE_ROWS, s);
        }
        if (fam(c, F_DROP) && st.core.ext && !st.restoring) add(K_DROP_CREATE, s);
        if (fam(c, F_DROP | F_NAMESPACE) && st.core.ext && !st.core.ns && !st.restoring) add(K_NS_CREATE, s);
        if (fam(c, F_NAMESPACE) && st.core.ns) {
            add(K_NS_REMAKE, s);
            if (st.core.layout == 0) add(K_LAYOUT_EDIT, s);
        }
        if (fam(c, F_FORK) && st.core.ext &&
            (history_of(w, c, s) == StoreHistory::Forked ||
             (on(c, R_FORK_DATADIR) && st.host >= 0 && w.iss[st.host].dd_fork && !st.core.fork_acked)))
            add(K_FORK_ACK, s);
        if (fam(c, F_LIMITS) && st.core.ext && !st.restoring) {
            for (int v : {1, 2, 6})
                if (v != st.core.max_ttl) add(K_MAX_TTL, s, v);
            add(K_MAX_TOLERANCE, s);
        }
        if (fam(c, F_TENANT) && st.core.ns && st.core.table) {
            add(K_PUBLIC_LOCK, s);
            add(K_HOARD, s);
            add(K_HOARD_RENEW, s);
        }
        // pg_upgrade of a store server of its own (the replicas made again afterwards)
        if (fam(c, F_FORK) && c.central && st.host < 0 && st.core.ext && !st.restoring) add(K_STORE_UPGRADE, s);
    }
}

bool apply(World& w, const Config& c, const Move& m, std::string* story, std::string* violation) {
    std::string line;
    std::string* st = story ? &line : nullptr;
    const int a = m.a;
    auto say = [&](const std::string& s) {
        if (st) *st += s;
    };
    bool changed = true;
    switch (m.kind) {
    case K_TICK:
        w.now += 1;
        say("time passes to " + std::to_string(w.now));
        break;
    case K_JUMP:
        w.now += limits().raise_margin_ms();
        say("time passes to " + std::to_string(w.now));
        break;
    case K_ACQUIRE:
        say(I(a) + "'s keeper asks " + S(w.iss[a].store) + " for a lease:");
        changed = acquire(w, c, a, w.iss[a].ttl, st, violation);
        break;
    case K_ACQUIRE_LONG:
        say(I(a) + "'s keeper login asks " + S(w.iss[a].store) + " for a lease of ttl " + std::to_string(kRogueTtl) +
            ":");
        changed = acquire(w, c, a, kRogueTtl, st);
        break;
    case K_RENEW:
    case K_RENEW_ANSWER_LOST:
    case K_RENEW_ROLLED_BACK:
        say(I(a) + "'s keeper renews slot " + std::to_string(w.iss[a].lease.slot) + " on " + S(w.iss[a].lease.store) +
            ":");
        changed = renew(w, c, a, m.kind, st);
        break;
    case K_RELEASE:
        say(I(a) + "'s keeper releases:");
        changed = release_lease(w, c, a, st);
        break;
    case K_RELEASE_FAILS: {
        Lease& l = w.iss[a].lease;
        l.word |= issue_word::kClosed;
        l.pending_release = true;
        say(I(a) + "'s release fails (rows locked): the entry stays, closed");
        break;
    }
    case K_ISSUE:
        say(I(a));
        changed = issue(w, c, a, false, st, violation);
        break;
    case K_ISSUE_FREED:
        say(I(a) + " on the lease the raise freed:");
        changed = issue(w, c, a, true, st, violation);
        break;
    case K_CRASH:
        say(I(a) + " crashes (kill -9) and restarts: new incarnation");
        crash(w, c, a, st);
        break;
    case K_STOP:
        say(I(a) + " stops (fast shutdown):");
        clean_stop(w, c, a, st);
        break;
    case K_START:
        say(I(a) + " starts");
        start(w, c, a, st);
        break;
    case K_CLOCK_FWD:
        w.iss[a].clock += 1;
        say(I(a) + "'s clock steps forward (offset " + std::to_string(w.iss[a].clock) + ")");
        break;
    case K_CLOCK_BACK:
        w.iss[a].clock -= 1;
        say(I(a) + "'s clock steps back (offset " + std::to_string(w.iss[a].clock) + ")");
        break;
    case K_MOVE_STORE: {
        const int other = w.iss[a].store == 0 ? 1 : 0;
        say(I(a) + " moves from " + S(w.iss[a].store) + " to " + S(other) + " (a restart):");
        clean_stop(w, c, a, st);
        w.iss[a].store = static_cast<int8_t>(other);
        start(w, c, a, st);
        break;
    }
    case K_SWITCH:
        say(I(a) + std::string(" restarts with its namespace ") + (w.iss[a].is_static ? "leased" : "on static slot 0") +
            ":");
        clean_stop(w, c, a, st);
        w.iss[a].is_static = !w.iss[a].is_static;
        start(w, c, a, st);
        break;
    case K_STATIC_OPEN: {
        say(I(a) + "'s keeper opens a static window on slot 0:");
        const auto win_ = static_window(w, c, a, st);
        if (!win_) return false;
        write_static_ceiling(w, c, a, win_->second);
        w.iss[a].sw = StaticWindow{true, 0, win_->first, win_->second, issue_word::kFresh};
        say(" " + win(win_->first, win_->second));
        break;
    }
    case K_STATIC_EXTEND: {
        Issuer& x = w.iss[a];
        // By the clock, or from its ids when they used it up further ahead than the clock
        // reaches (a clock that stepped back: src/core/clock_step).
        const Layout lay = layout_of(0);
        const int64_t ceiling =
            clock_step::static_next_ceiling(lay, x.sw.word, x.sw.ceiling, issuer_now(w, a),
                                            static_ahead_used(x.static_ahead), clock_step::patience_ms(lay, 0));
        if (ceiling <= x.sw.ceiling) return false;
        write_static_ceiling(w, c, a, ceiling);
        x.sw.ceiling = ceiling;
        say(I(a) + "'s keeper extends its static window to " + win(x.sw.floor, x.sw.ceiling));
        break;
    }
    case K_ROGUE_RELEASE: {
        const int j = m.b;
        Lease& l = w.iss[j].lease;
        say(I(a) + "'s keeper login calls cosid.release on " + I(j) + "'s slot " + std::to_string(l.slot) +
            " with last = its floor " + std::to_string(l.floor) + ":");
        if (on(c, R_ROLE_GUARD)) {
            say(" refused (42501: another role's lease)");
            return false;
        }
        Store& s = w.st[l.store];
        if (!begin_call(w, c, l.store, a, st) || !s.core.table) return false;
        const auto r = s.core.table->release(l.slot, inc_of(w.iss[j], j), l.fence, l.floor);
        if (!r) return false;
        say(" released, next_floor " + std::to_string(r->next_floor));
        break;
    }
    case K_FORK_PROMOTE:
        say(I(0) + "'s standby is promoted (or a backup of it recovered) beside it: " + I(2) + " on timeline " +
            std::to_string(w.iss[0].timeline + 1) + (w.iss[0].store == 0 ? ", with its copy S2 of S0" : ""));
        copy_data_directory(w, c, 0, 2);
        w.iss[2].timeline = w.iss[0].timeline + 1;
        // A data directory that issued from a store of its own server finds another timeline
        // than its cosid.history's at start: a fork it keeps (the rule before: only the store
        // whose record shows the timeline knew).
        w.iss[2].dd_fork = w.iss[2].dd_fork || (on(c, R_FORK_DATADIR) && w.iss[2].dd_local);
        start(w, c, 2, st);
        break;
    case K_PG_UPGRADE: {
        say(I(0) + " is upgraded by pg_upgrade (copy mode): the new cluster keeps the name " + I(0) +
            ", the old data directory is " + I(2) + " (stopped)");
        if (w.iss[0].up) {
            say(";");
            clean_stop(w, c, 0, st);  // pg_upgrade needs the old cluster stopped cleanly
            say(" then");
        }
        for (Store& s : w.st)  // pg_upgrade's read, before the old directory's last stop
            if (s.exists && s.host == 0)
                note_upgrade_read(s.core, w.iss[0].sysid, w.iss[0].timeline, on(c, R_UPGRADE_NOTE));
        copy_data_directory(w, c, 0, 2);
        w.iss[2].fork_marker = on(c, R_FORK_MARKER);
        Issuer& x = w.iss[0];
        x.sysid = w.next_sysid++;
        x.timeline = 1;
        x.upgraded = true;
        x.dd_local = x.dd_fork = false;
        x.file_has_window = false;  // the state file and cosid.history stay in the old directory
        x.file_ceiling = x.file_prev_ceiling = 0;
        x.history = GrantedNamespace{};
        break;
    }
    case K_PG_UPGRADE_LINK: {
        say(I(a) + " is upgraded by pg_upgrade --link (its old data directory cannot start again)");
        if (w.iss[a].up) {
            say(";");
            clean_stop(w, c, a, st);
            say(" then");
        }
        Issuer& x = w.iss[a];
        for (Store& s : w.st)
            if (s.exists && s.host == a) note_upgrade_read(s.core, x.sysid, x.timeline, on(c, R_UPGRADE_NOTE));
        x.sysid = w.next_sysid++;
        x.timeline = 1;
        x.upgraded = true;
        x.dd_local = x.dd_fork = false;
        x.file_has_window = false;
        x.file_ceiling = x.file_prev_ceiling = 0;
        x.history = GrantedNamespace{};
        break;
    }
    case K_STORE_UPGRADE: {
        Store& s = w.st[a];
        say(S(a) + "'s server is upgraded by pg_upgrade (stopped cleanly; its replicas made again)");
        note_upgrade_read(s.core, s.sysid, s.timeline, on(c, R_UPGRADE_NOTE));
        s.sysid = w.next_sysid++;
        s.timeline = 1;
        s.upgraded = true;
        s.standby.reset();
        s.unflushed_before.reset();
        break;
    }
    case K_SCLOCK_FWD:
        w.st[a].clock += 1;
        say(S(a) + "'s clock steps forward (offset " + std::to_string(w.st[a].clock) + ")");
        break;
    case K_SCLOCK_BACK:
        w.st[a].clock -= 1;
        say(S(a) + "'s clock steps back (offset " + std::to_string(w.st[a].clock) + ")");
        break;
    case K_STANDBY_BEHIND:
        w.st[a].standby = w.st[a].core;
        say(S(a) + "'s asynchronous standby stops receiving WAL here");
        break;
    case K_FAILOVER: {
        Store& s = w.st[a];
        say(S(a) + " fails over to its standby" +
            std::string(s.standby ? " (missing every commit since it fell behind)" : " (synchronous: nothing lost)"));
        if (s.standby) s.core = *s.standby;
        s.standby.reset();
        s.unflushed_before.reset();
        s.timeline += 1;
        break;
    }
    case K_STORE_CRASH:
        w.st[a].core = *w.st[a].unflushed_before;
        w.st[a].unflushed_before.reset();
        say(S(a) + " crashes: its commits since the last flush are gone");
        break;
    case K_DUMP:
        w.st[a].dump = w.st[a].core;
        say(S(a) + " is dumped (pg_dump)");
        break;
    case K_RESTORE_WHOLE: {
        Store& s = w.st[a];
        say(S(a) + " is lost and restored from its dump on a new server at the same address");
        s.sysid = w.next_sysid++;
        s.timeline = 1;
        s.core = *s.dump;
        s.core.records.push_back(StoreRecord{s.sysid, 1, false, false});  // CREATE EXTENSION's record
        s.dump.reset();
        s.standby.reset();
        s.unflushed_before.reset();
        break;
    }
    case K_RESTORE_PIECES: {
        Store& s = w.st[a];
        s.sysid = w.next_sysid++;
        s.timeline = 1;
        s.standby.reset();
        s.unflushed_before.reset();
        StoreCore fresh;
        fresh.ext = true;
        fresh.store_id = s.dump->store_id;
        // A data-only restore into a schema made by hand is the same once the operator runs
        // CREATE EXTENSION as a restore does (docs/failover.md): the mark, then the data.
        say(S(a) + " is lost; pg_restore -j (or a data-only restore) on a new server begins: CREATE EXTENSION "
                   "leaves the restore's mark");
        fresh.records = {StoreRecord{0, 1, false, false}};
        s.core = fresh;
        s.restoring = s.records_pending = s.rows_pending = true;
        break;
    }
    case K_RESTORE_RECORDS: {
        Store& s = w.st[a];
        for (const StoreRecord& r : s.dump->records) s.core.records.push_back(r);
        s.records_pending = false;
        say(S(a) + ": the restore loads cosid.store_state (the origin's record)");
        if (!s.rows_pending) s.restoring = false, s.dump.reset();
        break;
    }
    case K_RESTORE_ROWS: {
        Store& s = w.st[a];
        s.core.ns = s.dump->ns;
        s.core.layout = s.dump->layout;
        s.core.table = s.dump->table;
        for (const StaticRow& r : s.dump->static_rows) record_static_row(s.core, r.cluster, r.ceiling);
        s.rows_pending = false;
        say(S(a) + ": the restore loads the namespace and lease rows");
        // cosid._lease_arrives_raised: rows that arrive after the store's raise are raised as it
        // would have raised them.
        if (s.core.raised_at && s.core.table && on(c, R_ARRIVE_RAISED)) {
            s.core.table->raise_after_lost_history(*s.core.raised_at, margin_of(s.core.raised_margin));
            s.core.table->bring_all_up();  // each row as it arrives, not lazily
            say(" (raised on arrival)");
        }
        if (!s.records_pending) s.restoring = false, s.dump.reset();
        break;
    }
    case K_DROP_CREATE: {
        Store& s = w.st[a];
        const int64_t now = store_now(w, a);
        say("DROP EXTENSION cosid on " + S(a) + ":");
        if (on(c, R_DROP_GUARD) && s.core.table && !store_may_be_dropped(s.core.table->rows_as_raised(), now)) {
            say(" refused (55006: a window reaches past now)");
            return false;
        }
        // The rows show only what the store kept: a history lost and not yet followed (a
        // restore, a failover) or a raise still ahead of now may hide a namespace of the lost
        // tail whose windows reach past now, which a store made again would grant again.
        if (on(c, R_DROP_RAISE)) {
            const StoreHistory h = history_of(w, c, a);
            if ((h != StoreHistory::Whole && h != StoreHistory::Upgraded) ||
                (s.core.raised_at && *s.core.raised_at + s.core.raised_margin > now)) {
                say(" refused (55006: the store lost history whose windows may reach past now)");
                return false;
            }
        }
        StoreCore fresh;
        fresh.ext = true;
        fresh.store_id = w.next_store_id++;
        fresh.records = {StoreRecord{here_sysid(w, a), here_timeline(w, a), false, false}};
        s.core = fresh;
        s.unflushed_before.reset();
        say(" dropped, and CREATE EXTENSION makes it again");
        break;
    }
    case K_NS_CREATE:
    case K_NS_REMAKE: {
        Store& s = w.st[a];
        const int64_t now = store_now(w, a);
        if (m.kind == K_NS_REMAKE) {
            say("On " + S(a) + " the namespace's rows are deleted and it is made again:");
            // cosid._lease_forget_guard and cosid._namespace_delete_guard
            if (on(c, R_FORGET_GUARD) && !store_may_be_dropped(s.core.table->rows_as_raised(), now)) {
                say(" refused (55006: a window reaches past now)");
                return false;
            }
        } else {
            say("cosid_namespace_create on " + S(a) + ":");
            // It follows the store's history first, as every store call does.
            if (!begin_call(w, c, a, -1, st)) {
                say(" refused: the store grants nothing now");
                return false;
            }
        }
        // cosid._namespace_insert
        // (without first-floor-cap: by the store's limits, as cosid._namespace_insert in 1.7's
        // script does so far, below a raise by the reach cap)
        const StoreLimits margin = on(c, R_FIRST_FLOOR_CAP) ? margin_of(s.core.raised_margin)
                                                            : StoreLimits{s.core.max_ttl, s.core.max_tolerance};
        const int64_t first = on(c, R_FIRST_FLOOR) ? namespace_first_floor(now, s.core.raised_at, margin) : now;
        s.core.ns = true;
        s.core.table = new_table(c, first);
        say(" its slots start at " + std::to_string(first));
        break;
    }
    case K_LAYOUT_EDIT: {
        Store& s = w.st[a];
        say("A superuser's UPDATE of the namespace's layout on " + S(a) + " (epoch 2 ticks later):");
        NamespaceDefinition before{layout_of(0), kTolerance, 0}, after{layout_of(1), kTolerance, 0};
        if (on(c, R_LAYOUT_GUARD) && namespace_change_refused(before, after)) {
            say(" refused (42P17)");
            return false;
        }
        s.core.layout = 1;
        say(" accepted");
        break;
    }
    case K_FORK_ACK: {
        Store& s = w.st[a];
        const int origin = s.host >= 0 ? w.iss[s.host].origin : -1;
        // The operator's part: acknowledge only once the origin has stopped for good.  In the
        // bounds of limits and databases the move does both, as docs/failover.md says: stop, then
        // acknowledge.
        if (origin < 0 || (w.iss[origin].up && !fam(c, F_LIMITS | F_DATABASES))) return false;
        if (w.iss[origin].up) {
            say(I(origin) + " is stopped for good:");
            clean_stop(w, c, origin, st);
            say("; then ");
        }
        say("cosid_fork_acknowledge() on " + S(a));
        if (w.iss[origin].stopped_at < 0) return false;
        const int64_t now = store_now(w, a);
        const int64_t stopped = w.iss[origin].stopped_at + s.clock;
        // fork_acknowledged_floor: from the stop, by the reach cap (the original's limits after
        // the copy are unseen here).  The rule before: by the limits this copy sees.
        const int64_t floor = on(c, R_REACH_CAP) ? fork_ack_floor(stopped, now, s.core.max_ttl, s.core.max_tolerance)
                                                 : std::min(stopped, now) + visible_reach(s.core);
        const int64_t base = std::min(stopped, now);
        raise_floors(s.core, base, floor - base);
        s.core.records = {StoreRecord{here_sysid(w, a), here_timeline(w, a), true, false}};
        s.core.fork_acked = true;
        w.iss[s.host].fork_marker = false;
        w.iss[origin].never_again = true;
        say(": " + I(origin) + " stopped at " + std::to_string(w.iss[origin].stopped_at) + ", every floor raised to " +
            std::to_string(floor));
        break;
    }
    case K_MAX_TTL:
    case K_MAX_TOLERANCE: {
        Store& s = w.st[a];
        const int64_t ttl = m.kind == K_MAX_TTL ? m.b : s.core.max_ttl;
        const int64_t tol = m.kind == K_MAX_TTL ? s.core.max_tolerance : (s.core.max_tolerance == 1 ? 2 : 1);
        if (ttl == s.core.max_ttl && tol == s.core.max_tolerance) return false;
        const bool raised = ttl > s.core.max_ttl || tol > s.core.max_tolerance;
        // The operator raises a limit only once every standby replayed it (docs/failover.md):
        // a raise a failover loses is out of scope.
        if (raised && s.standby) return false;
        say("cosid_store_settings(max_ttl => " + std::to_string(ttl) + ", max_tolerance => " + std::to_string(tol) +
            ") on " + S(a) + ":");
        // cosid_store_settings refuses limits above the reach cap (limits_within_cap).
        if (!within_cap(ttl, tol)) {
            say(" refused (above the reach cap)");
            return false;
        }
        // (A lowering needs no more: every grant made under the old limits is in the store's
        // history before it, with its ceiling, which every raise keeps.)
        s.core.max_ttl = static_cast<int8_t>(ttl);
        s.core.max_tolerance = static_cast<int8_t>(tol);
        say(raised ? " raised" : " lowered");
        break;
    }
    case K_STATIC_AHEAD: {
        Issuer& x = w.iss[a];
        x.static_ahead = static_cast<int8_t>(x.static_ahead == kStaticAhead ? kStaticAheadRaised : kStaticAhead);
        say("ALTER SYSTEM SET cosid.static_ahead = " + std::to_string(x.static_ahead) + " on " + I(a) +
            " and a reload (used: " + std::to_string(static_ahead_used(x.static_ahead)) + ")");
        break;
    }
    case K_BURST: {
        say(I(a) + "'s backends issue a burst up to the window's ceiling:");
        int n = 0;
        std::string last;
        for (; n < 64; ++n) {
            std::string one;
            if (!issue(w, c, a, false, st ? &one : nullptr, violation)) break;
            last = one;
            if (violation && !violation->empty()) {
                ++n;
                break;
            }
        }
        if (n == 0) return false;
        say(" " + std::to_string(n) + " ids, the last:" + last);
        break;
    }
    case K_FORK_MARKED:
        say("A copy of " + I(0) +
            "'s data directory (a snapshot, a base backup) starts beside it with a cosid.fork "
            "file: " +
            I(2) + " on the same timeline" + (w.iss[0].store == 0 ? ", with its copy S2 of S0" : "") +
            (w.iss[0].store == 0 && fam(c, F_DATABASES) ? " and S3 of the server's second database" : "") + ";");
        copy_data_directory(w, c, 0, 2);
        w.iss[2].fork_marker = true;
        start(w, c, 2, st);
        break;
    case K_SWITCH_DB: {
        const int from = w.iss[a].store, to = from == 2 ? 3 : 2;
        say(I(a) + "'s cosid.database is switched from " + S(from) + " to " + S(to) + " (a restart):");
        clean_stop(w, c, a, st);
        w.iss[a].store = static_cast<int8_t>(to);
        start(w, c, a, st);
        break;
    }
    case K_PUBLIC_LOCK: {
        Store& s = w.st[a];
        s.public_lock = !s.public_lock;
        say(std::string("A login with no grants on ") + S(a) + (s.public_lock ? " takes" : " ends") +
            " pg_advisory_lock(1668248937, hashtext('default'))");
        break;
    }
    case K_HOARD: {
        Store& s = w.st[a];
        say("Another keeper role (\"evil\") calls cosid.acquire on " + S(a) + ":");
        if (!begin_call(w, c, a, -1, st) || !s.core.table) return false;
        const int64_t now = store_now(w, a);
        // cosid.acquire: the cap of live leases per store role and namespace
        if (on(c, R_LEASE_CAP) && live_leases_of(s.core, "evil", now) >= kLeaseCap) {
            say(" refused: the role holds the cap of live leases");
            break;
        }
        const StoreCore before = s.core;
        const auto r = s.core.table->acquire(AcquireRequest{"evil", "evil", granted_ttl(c, s.core, kRogueTtl), 0}, now);
        if (!r.lease) {
            say(" refused: no slot free");
            break;
        }
        committed(w, c, a, before);
        say(" got slot " + std::to_string(r.lease->slot));
        break;
    }
    case K_HOARD_RENEW: {
        Store& s = w.st[a];
        if (!s.core.table) return false;
        std::vector<std::pair<int32_t, int64_t>> mine;
        for (const LeaseRow& r : s.core.table->rows())
            if (r.has_owner() && r.owner_key == "evil") mine.emplace_back(r.slot, r.fence);
        if (mine.empty()) return false;
        say("The role \"evil\" renews its leases on " + S(a) + ":");
        if (!begin_call(w, c, a, -1, st)) return false;
        const int64_t now = store_now(w, a);
        const StoreCore before = s.core;
        for (const auto& [slot, fence] : mine) {
            // The cap holds for a renewal too: one that revives an expired lease is a new live
            // lease of the role (without this, a role takes a slot, lets it expire, takes the
            // next, and renews both).
            if (on(c, R_LEASE_CAP) && on(c, R_LEASE_CAP_RENEW) && s.core.table->row(slot).expires_at <= now &&
                live_leases_of(s.core, "evil", now) >= kLeaseCap) {
                say(" slot " + std::to_string(slot) + " refused (the cap)");
                continue;
            }
            if (s.core.table->renew(slot, "evil", fence, granted_ttl(c, s.core, kRogueTtl), now))
                say(" slot " + std::to_string(slot));
        }
        committed(w, c, a, before);
        break;
    }
    default: return false;
    }
    if (story) *story = "t=" + std::to_string(w.now) + "  " + line;
    return changed;
}

namespace {
// The state's bytes, written in place (std::string::append per field was a fifth of a run).
struct Out {
    std::string* s;
    size_t n = 0;
    void raw(const void* p, size_t k) {
        if (n + k > s->size()) s->resize(std::max(s->size() * 2, n + k + 256));
        std::memcpy(&(*s)[n], p, k);
        n += k;
    }
};
template <typename T>
void put(Out* o, T v) {
    o->raw(&v, sizeof v);
}
void put_str(Out* o, const std::string& s) {
    put<uint8_t>(o, static_cast<uint8_t>(s.size()));
    o->raw(s.data(), s.size());
}
void put_core(Out* o, const StoreCore& c) {
    put(o, c.ext), put(o, c.ns), put(o, c.layout), put(o, c.store_id);
    put(o, c.raised_at.value_or(-1)), put(o, c.raised_margin);
    put(o, c.max_ttl), put(o, c.max_tolerance), put(o, c.fork_acked);
    put<uint8_t>(o, static_cast<uint8_t>(c.records.size()));
    for (const StoreRecord& r : c.records)
        put(o, r.system_identifier), put(o, r.timeline), put(o, r.issuer), put(o, r.fork_declared),
            put(o, r.upgrade_origin_system), put(o, r.upgrade_origin_timeline), put(o, r.upgrade_read_here);
    put<uint8_t>(o, static_cast<uint8_t>(c.static_rows.size()));
    for (const StaticRow& r : c.static_rows) put(o, r.cluster), put(o, r.ceiling);
    put(o, c.table.has_value());
    if (c.table) {
        put(o, c.table->raised_at().value_or(-1));
        put(o, c.table->raised_floor());
        for (const LeaseRow& r : c.table->rows()) {
            put_str(o, r.owner_key), put_str(o, r.incarnation), put_str(o, r.previous_owner_key);
            put(o, r.fence), put(o, r.expires_at), put(o, r.floor), put(o, r.ceiling), put(o, r.next_floor);
            // how many raises it missed (the count itself only grows)
            put(o, c.table->raise_count() - r.raise_seen);
        }
    }
}
}  // namespace

void serialize(const World& w, std::string* bytes) {
    Out out{bytes};
    Out* o = &out;
    put(o, w.now), put(o, w.next_sysid), put(o, w.next_store_id);
    for (const Issuer& x : w.iss) {
        put(o, x.exists);
        if (!x.exists) continue;
        put(o, x.up), put(o, x.never_again), put(o, x.clock), put(o, x.inc), put(o, x.store), put(o, x.origin);
        put(o, x.is_static), put(o, x.issued_once), put(o, x.stopped_at), put(o, x.sysid), put(o, x.timeline);
        put(o, x.fork_marker), put(o, x.upgraded), put(o, x.dd_fork), put(o, x.dd_local), put(o, x.ttl),
            put(o, x.static_ahead);
        for (const Lease* lp : {&x.lease, &x.freed}) {
            const Lease& l = *lp;
            put(o, l.held);
            if (!l.held) continue;
            put(o, l.pending_release), put(o, l.store), put(o, l.layout), put(o, l.slot);
            put(o, l.fence), put(o, l.floor), put(o, l.ceiling), put(o, l.word), put(o, l.seen_at),
                put(o, l.raised_out);
        }
        put(o, x.history.all_slots_ms), put(o, x.history.layout.epoch_ms);
        put<uint8_t>(o, static_cast<uint8_t>(x.history.slots.size()));
        for (const GrantedSlot& g : x.history.slots) put_str(o, g.store_id), put(o, g.slot), put(o, g.ceiling_ms);
        put(o, x.file_has_window), put(o, x.file_ceiling), put(o, x.file_prev_ceiling), put(o, x.file_timeline);
        put(o, x.file_write_undurable), put(o, x.memory_has), put(o, x.memory_ms), put(o, x.started_ms);
        put(o, x.sw.open), put(o, x.sw.floor), put(o, x.sw.ceiling), put(o, x.sw.word);
    }
    for (const Store& s : w.st) {
        put(o, s.exists);
        if (!s.exists) continue;
        put(o, s.host), put(o, s.clock), put(o, s.sysid), put(o, s.timeline);
        put(o, s.restoring), put(o, s.records_pending), put(o, s.rows_pending), put(o, s.upgraded),
            put(o, s.public_lock);
        put_core(o, s.core);
        for (const auto* opt : {&s.unflushed_before, &s.standby, &s.dump}) {
            put(o, opt->has_value());
            if (*opt) put_core(o, **opt);
        }
    }
    // The ids as a set: the order they were issued in does not matter to the future.
    std::vector<Issued> ids = w.ids;
    std::sort(ids.begin(), ids.end(),
              [](const Issued& x, const Issued& y) { return x.id != y.id ? x.id < y.id : x.issuer < y.issuer; });
    for (const Issued& d : ids) put(o, d.id), put(o, d.issuer);
    bytes->resize(out.n);
}

std::string describe(const World& w) {
    std::string o;
    for (int i = 0; i < kIssuers; ++i) {
        const Issuer& x = w.iss[i];
        if (!x.exists) continue;
        o += I(i) + (x.up ? "" : "(down)") + ": ";
        if (x.lease.held)
            o += S(x.lease.store) + " slot " + std::to_string(x.lease.slot) + " " +
                 win(x.lease.floor, x.lease.ceiling) + (x.lease.pending_release ? " release pending" : "") +
                 (x.lease.raised_out ? " freed by a raise" : "");
        if (x.freed.held)
            o += ", and the freed " + S(x.freed.store) + " slot " + std::to_string(x.freed.slot) + " " +
                 win(x.freed.floor, x.freed.ceiling);
        else if (x.sw.open)
            o += "static slot 0 " + win(x.sw.floor, x.sw.ceiling);
        else
            o += "no window";
        o += "; ";
    }
    return o;
}

}  // namespace model

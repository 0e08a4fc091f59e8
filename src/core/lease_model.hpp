// The lease rules of DESIGN.md section 3, as an in-memory reference model of the store.
//
// The SQL store (sql/cosid--1.0.sql) is the implementation PostgreSQL runs; this model is
// what it is tested against (test/model), and what the generator properties are proven on.
// The safety invariant these rules keep is stated in window_invariant.hpp.
// All times are store-clock Unix milliseconds.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "layout.hpp"

namespace cosid {

struct LeaseRow {
    int32_t slot = 0;
    std::string owner_key;    // empty when free
    std::string incarnation;  // empty when free
    int64_t fence = 0;
    int64_t expires_at = 0;
    int64_t floor = 0;
    int64_t ceiling = 0;
    int64_t next_floor = 0;
    std::string previous_owner_key;

    bool has_owner() const { return !incarnation.empty(); }
};

enum class SlotState { Free, Held, Expired };

struct AcquireRequest {
    std::string key;
    std::string incarnation;
    int64_t ttl_ms = 30000;
    std::optional<int32_t> preferred;
};

struct AcquireResult {
    std::optional<LeaseRow> lease;        // nothing: Exhausted
    std::optional<int64_t> earliest_expiry;  // when Exhausted: the first expiry to wait for
    bool duplicate_key = false;           // a live lease has this key and another incarnation
};

// The order in which acquire tries slots: (1) the preferred slot if available, (2) available
// slots last owned by the same key (sticky), (3) the lowest available slot, each among
// slots whose next window can start now (next_floor <= now), then (4) the lowest available
// slot of any, then (5) an expired lease of the asking incarnation.  "Available" is free, or
// expired under another incarnation: an incarnation takes over its own expired lease only as
// the last resort, since it renews or releases it instead.
//
// A live lease is never a candidate, not even for its own (key, incarnation): handing it back
// would hand back its old floor, below timestamps that incarnation may already have issued in
// it (its failed release was forgotten, or it simply asked for a second slot).  So an acquire
// whose answer was lost leaves an orphan lease of that incarnation.  The orphan expires by ttl,
// or its owner releases it at its ceiling, which bounds anything it could have issued there.
std::vector<int32_t> slot_preference(const std::vector<LeaseRow>& rows, const AcquireRequest& req,
                                     int64_t now);

class LeaseTable {
public:
    LeaseTable(int slot_bits, int64_t tolerance_ms);

    AcquireResult acquire(const AcquireRequest& req, int64_t now);
    // Renew succeeds while incarnation and fence match, even after expiry if nobody took over.
    std::optional<LeaseRow> renew(int32_t slot, const std::string& incarnation, int64_t fence,
                                  int64_t ttl_ms, int64_t now);
    std::optional<LeaseRow> release(int32_t slot, const std::string& incarnation, int64_t fence,
                                    int64_t last_issued);
    // An administrator's forced release: no last timestamp is known, so the ceiling is used.
    std::optional<LeaseRow> revoke(int32_t slot);

    SlotState state(int32_t slot, int64_t now) const;
    const LeaseRow& row(int32_t slot) const { return rows_.at(static_cast<size_t>(slot)); }
    const std::vector<LeaseRow>& rows() const { return rows_; }
    int64_t tolerance_ms() const { return tolerance_; }

private:
    std::vector<LeaseRow> rows_;
    int64_t tolerance_;
};

}  // namespace cosid

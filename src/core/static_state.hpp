// Static slots: the parsing of their two settings, the state file that remembers how far each
// was used, and the arithmetic of adopting an existing id column.  Pure C++: no PostgreSQL
// headers.
//
// A static slot is not leased from the store, so nothing outside this instance knows which ids
// it issued: the state file is the only memory of the window ceilings, and losing a ceiling
// could issue an id twice.  Hence the strict parsing (anything unexpected is Corrupt, never
// guessed at), the checksum, and the durable write.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "layout.hpp"

namespace cosid {

// 1 to 63 of [A-Za-z0-9_.:-], as the CHECK of cosid.namespace in sql/cosid--1.0.sql.
bool valid_namespace_name(const std::string& name);

// --- cosid.static_slots ---
// "7" (every namespace uses slot 7), "orders:7, default:3", or "5, orders:7" (orders uses 7,
// every other namespace 5).  A name may contain ':', so an item splits at its last ':'.
struct StaticSlots {
    std::optional<int32_t> any;  // the bare number
    std::vector<std::pair<std::string, int32_t>> named;
    bool empty() const { return !any && named.empty(); }
    std::optional<int32_t> slot_for(const std::string& ns) const;  // named first, then any
};
// Nothing when the text is valid (blank text: no static slots); else a message naming the
// offending item, and *out is left alone.
std::optional<std::string> parse_static_slots(const std::string& text, StaticSlots* out);

// --- cosid.not_before ---
// "YYYY-MM-DD[T ]HH:MM[:SS[.fraction]]" and a required zone: Z, +HH, +HH:MM or +HHMM (or -).
// A zone is required because the server's TimeZone may differ from the writer's.  Years
// 1970-9999; the fraction (1-9 digits) is truncated to ms.  Blank text gives 0 (no value).
std::optional<std::string> parse_timestamp_ms(const std::string& text, int64_t* out_ms);
// cosid.not_before: a timestamp as above, optionally followed by "on timeline N" (N >= 1).
// The timeline is what lets a server on timeline > 1 without a state file issue: the value
// vouches for that one timeline only, so a copy of the setting (pg_basebackup copies the
// configuration in the data directory) or one left from an earlier promotion vouches for
// nothing after the next promotion.  `timeline` is 0 without the suffix.
struct NotBefore {
    int64_t ms = 0;
    uint32_t timeline = 0;
};
std::optional<std::string> parse_not_before(const std::string& text, NotBefore* out);
// "2026-12-03 07:20:17.816Z", UTC, for messages.
std::string format_timestamp_ms(int64_t ms);

// CRC-32C (Castagnoli), as the state file's checksum line uses it.
uint32_t crc32c(const std::string& bytes);

// --- the state file ---
//   # cosid static slot state: written by the cosid keeper; do not edit (...)
//   cosid_state_version 1
//   system_identifier 7312345678901234567
//   window orders 7 1733250000123 1        namespace, slot, ceiling (Unix ms), timeline
//   not_before orders 1733250000000        namespace, Unix ms
//   crc32c 1a2b3c4d                        over every byte before this line
struct StateWindow {
    std::string ns;
    int32_t slot;
    int64_t ceiling_ms;
    uint32_t timeline;
};
struct StateNotBefore {
    std::string ns;
    int64_t ms;
};
struct StateFile {
    uint64_t system_identifier = 0;
    std::vector<StateWindow> windows;        // at most one per (ns, slot)
    std::vector<StateNotBefore> not_before;  // at most one per ns
    const StateWindow* find_window(const std::string& ns, int32_t slot) const;
    void set_window(const std::string& ns, int32_t slot, int64_t ceiling_ms, uint32_t timeline);
    int64_t not_before_of(const std::string& ns) const;        // 0 when none
    void raise_not_before(const std::string& ns, int64_t ms);  // keeps the max
};
constexpr int kStateFileVersion = 1;
constexpr size_t kMaxStateFileBytes = size_t{1} << 20;

// Callers must use valid namespace names, slots 0-65535 and ceilings >= 0, or the text will
// not read back.
std::string serialize_state(const StateFile& f);

enum class LoadStatus { Ok, Missing, Unreadable, Corrupt, FutureVersion };
struct LoadResult {
    LoadStatus status;
    std::string message;  // one sentence, without the path (the caller adds it)
    StateFile file;       // for Ok
};
// Ok, Corrupt or FutureVersion.  The version line is checked first, so that a newer file is
// reported as such even when this version cannot read the rest of it.
LoadResult parse_state(const std::string& text);
// Missing when the file does not exist; Unreadable when it cannot be read, is a directory or
// is larger than kMaxStateFileBytes; else parse_state.
LoadResult load_state(const std::string& path);
// Writes path + ".tmp", fsyncs it, renames it over path and fsyncs the directory, so that a
// crash leaves either the old or the new file.  Nothing when all of it succeeded; else a
// message naming the step, the file and strerror, the temporary file removed.
std::optional<std::string> save_state(const std::string& path, const StateFile& f);

// --- static slots without a state file (cosid.state_file = '') ---
// Nothing then remembers across a restart how far a slot was used: the keeper's memory (the
// exact last timestamp of a released window, the windows it gave) is lost with the server,
// and with the keeper alone when the postmaster starts it again.  What a previous run may
// have issued can then only be bounded by the clock, and it is, as long as the clock does not
// move back across the restart, by two rules:
//  1. no id is issued ahead of the clock: a tick whose sequence is used up waits for the
//     clock's next tick instead of borrowing it (cosid.max_borrow does not apply), so at most
//     2^sequence_bits ids per tick per slot.  Borrowing is what let a run issue up to the
//     window's ceiling (now + cosid.static_ahead) ahead, which a restart could not know;
//  2. every window the keeper gives after it started (or read its empty model again) has a
//     floor no lower than the clock at that moment, `started_ms`.  The floor is exclusive, so
//     the tick holding started_ms is excluded too: every id of the previous run, by rule 1, is
//     in that tick or an earlier one.  The cost is a wait for the clock's next tick (up to a
//     second in a seconds-unit layout) when the first window follows the start closely.
// Within one keeper's life its memory holds each slot's last timestamp, which is above
// started_ms whenever it is known (a window given after the start has a floor above it).
// With a state file, the file's ceilings bound what was issued: neither rule applies.
//
// The borrow limit for a claim on a static window (issue_word's borrow_ms): 0 without a
// state file, else cosid.max_borrow as given.
int64_t static_borrow_ms(bool have_state_file, int64_t max_borrow_ms) noexcept;
// The (exclusive) floor of a new static window of a slot: above `recorded_ms` (what the
// file, or without one the keeper's memory, holds for the slot; 0 when nothing), the
// not-befores (cosid.not_before, the namespace's from cosid_adopt), and without a state file
// `started_ms` (the clock when the keeper's memory of the slots began).
int64_t static_window_floor(int64_t recorded_ms, int64_t not_before_ms, bool have_state_file,
                            int64_t started_ms) noexcept;

// --- the database's copy of the ceilings (cosid.static_ceiling) ---
// The keeper also records each static window's ceiling in cosid.database, before the file.
// The file stays with its data directory; the database goes where its data goes: pg_upgrade
// (the new cluster has another data directory and system identifier, and starts without the
// file), a dump restored into another cluster, a logical replica switched over to, a file
// deleted or replaced by an empty one.  Each cluster writes a row of its own.
// The value a slot's next window starts above (static_window_floor's `recorded_ms`):
//  - `model_ms`: what the file (without a file: the keeper's memory) holds for the slot,
//    `model_has_window` whether it holds anything;
//  - raised to `others_ms`, the largest ceiling other clusters recorded for the slot: they may
//    have issued up to it, and their files are not here;
//  - and to `own_ms`, this cluster's row, when the state file, which is kept, holds no window
//    for the slot: the file was lost or replaced.
// Otherwise the file is the exact memory (a release lowers it to the last id issued, the row
// keeps the ceiling) and, without a file, the clock rules above bound what was issued.
int64_t static_recorded_ms(int64_t model_ms, bool model_has_window, std::optional<int64_t> others_ms,
                           std::optional<int64_t> own_ms, bool have_state_file) noexcept;

// --- cosid_adopt ---
// For a column whose largest value is max_id, read in `layout`: every tick after floor_ms
// yields ids > max_id.  Negative: max_id < 0, every id is larger (floor_ms 0).  LastTick: max_id
// is in the layout's last tick, no larger id exists (floor_ms is that tick).
struct AdoptFloor {
    enum Status { Ok, Negative, NotInLayout, LastTick } status;
    int64_t floor_ms;
};
AdoptFloor adopt_floor(const Layout& layout, int64_t max_id);
// The latest epoch (Unix ms, a multiple of the unit) with the layout's bit widths with which
// an id issued at now_ms exceeds max_id.  It may be negative (no usable epoch), and the caller
// must still check that now_ms fits the timestamp field from that epoch.
int64_t latest_epoch_exceeding(const Layout& layout, int64_t max_id, int64_t now_ms);

}  // namespace cosid

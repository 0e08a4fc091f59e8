// Id layout: 1 sign bit | timestamp | slot | sequence.  Pure C++: no PostgreSQL headers.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "calendar.hpp"

namespace cosid {

enum class Unit { Millisecond, Second };

// 2024-01-01T00:00:00Z in Unix milliseconds.
constexpr int64_t kDefaultEpochMs = 1704067200000LL;

// Bounds chosen so every layout is usable: at least ~34 years of timestamps in seconds
// (31 bits), at most 65536 slots (the store keeps one row per slot), at least two
// sequence values per tick.
constexpr int kMinTimestampBits = 31, kMaxTimestampBits = 60;
constexpr int kMinSlotBits = 1, kMaxSlotBits = 16;
constexpr int kMinSequenceBits = 1, kMaxSequenceBits = 22;
// An id has timestamp + slot + sequence bits below a zero sign bit: 63 by default; fewer
// keep ids below 2^total (53: exact as a JavaScript number, a JSON double).
constexpr int kMaxTotalBits = 63;
constexpr int kMinTotalBits = kMinTimestampBits + kMinSlotBits + kMinSequenceBits;
constexpr int kJavaScriptSafeBits = 53;
// PostgreSQL's last timestamptz, 294276-12-31 23:59:59.999 UTC, in Unix ms: a layout's
// timestamps must end before it, so that every id's time can be shown (and multiplied out to
// ms without overflow).  53 timestamp bits of ms or 43 of seconds reach that far.
constexpr int64_t kLastTimestampMs = 9224318015999999LL;

struct Unpacked {
    int64_t tick;  // Unix time in the layout's unit (ms or s)
    int32_t slot;
    int32_t sequence;
};

struct Layout {
    int timestamp_bits = 41;
    int slot_bits = 10;
    int sequence_bits = 12;
    int64_t epoch_ms = kDefaultEpochMs;
    Unit unit = Unit::Millisecond;

    // Returns a message naming the first broken rule, or nothing when the layout is valid.
    std::optional<std::string> validate() const;
    // Only the bit widths' rules.
    std::optional<std::string> validate_bits() const;
    // The bit widths' and the epoch's rules: what reading ids needs (a layout made before the
    // end rule of validate() still reads; only its far ticks have no time: tick_ms).
    std::optional<std::string> validate_readable() const;

    int total_bits() const { return timestamp_bits + slot_bits + sequence_bits; }
    int64_t unit_ms() const { return unit == Unit::Millisecond ? 1 : 1000; }
    // The tick that holds Unix time `ms` (rounded down, also before 1970).
    int64_t tick_of(int64_t ms) const { return unit == Unit::Millisecond ? ms : floor_div(ms, unit_ms()); }
    int64_t epoch_tick() const { return epoch_ms / unit_ms(); }
    int64_t max_sequence() const { return (int64_t{1} << sequence_bits) - 1; }
    int64_t max_slot() const { return (int64_t{1} << slot_bits) - 1; }
    // Largest tick (Unix, in units) the timestamp field can hold.
    int64_t max_tick() const { return epoch_tick() + ((int64_t{1} << timestamp_bits) - 1); }
    // A tick is representable when it is not before the epoch and fits the field.
    bool tick_fits(int64_t tick) const { return tick >= epoch_tick() && tick <= max_tick(); }
    // The Unix ms of a tick, nothing when that is past kLastTimestampMs (only in layouts made
    // before that rule: their far-future ids).
    std::optional<int64_t> tick_ms(int64_t tick) const {
        if (tick > kLastTimestampMs / unit_ms()) return std::nullopt;
        return tick * unit_ms();
    }
    // An id of this layout: not negative and below 2^total_bits.
    bool id_fits(int64_t id) const { return id >= 0 && (static_cast<uint64_t>(id) >> total_bits()) == 0; }

    // A slot of this layout.  A layout never changes under a live id (the store refuses an
    // edit of a namespace's layout), and a window is used only on a slot that fits: pack()
    // never spills a slot into the timestamp bits.
    bool slot_fits(int64_t slot) const { return slot >= 0 && slot <= max_slot(); }

    // Callers must pass a representable tick, a slot <= max_slot() and sequence <= max_sequence().
    int64_t pack(int64_t tick, int64_t slot, int64_t sequence) const {
        return ((tick - epoch_tick()) << (slot_bits + sequence_bits)) | (slot << sequence_bits) | sequence;
    }
    Unpacked unpack(int64_t id) const {
        const uint64_t u = static_cast<uint64_t>(id);
        return Unpacked{static_cast<int64_t>(u >> (slot_bits + sequence_bits)) + epoch_tick(),
                        static_cast<int32_t>((u >> sequence_bits) & static_cast<uint64_t>(max_slot())),
                        static_cast<int32_t>(u & static_cast<uint64_t>(max_sequence()))};
    }
};

// Parses "ms"/"millisecond" and "s"/"second"; nothing for anything else.
std::optional<Unit> parse_unit(const std::string& text);
const char* unit_name(Unit unit);

}  // namespace cosid

#include "layout.hpp"

namespace cosid {

std::optional<std::string> Layout::validate_bits() const {
    auto range = [](const char* what, int v, int lo, int hi) -> std::optional<std::string> {
        if (v < lo || v > hi)
            return std::string(what) + " bits must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                   ", got " + std::to_string(v);
        return std::nullopt;
    };
    if (auto e = range("timestamp", timestamp_bits, kMinTimestampBits, kMaxTimestampBits)) return e;
    if (auto e = range("slot", slot_bits, kMinSlotBits, kMaxSlotBits)) return e;
    if (auto e = range("sequence", sequence_bits, kMinSequenceBits, kMaxSequenceBits)) return e;
    if (total_bits() > kMaxTotalBits)
        return "timestamp, slot and sequence bits must add up to at most 63 (one bit is the sign), got " +
               std::to_string(total_bits());
    return std::nullopt;
}

std::optional<std::string> Layout::validate_readable() const {
    if (auto e = validate_bits()) return e;
    if (epoch_ms < 0) return "epoch must not be before 1970-01-01, got " + std::to_string(epoch_ms) + " ms";
    if (epoch_ms % unit_ms() != 0) return "an epoch for a second layout must be a whole second";
    if (epoch_ms > kLastTimestampMs)
        return "epoch must be before 294277-01-01, got " + std::to_string(epoch_ms) + " ms";
    return std::nullopt;
}

std::optional<std::string> Layout::validate() const {
    if (auto e = validate_readable()) return e;
    // epoch_tick <= 9.3e15 and 2^60: max_tick() cannot overflow here.
    if (max_tick() > kLastTimestampMs / unit_ms())
        return std::to_string(timestamp_bits) + " timestamp bits of " + (unit == Unit::Second ? "seconds" : "ms") +
               " end after PostgreSQL's last timestamp (294276-12-31): use fewer (from a recent epoch, 53 of ms or "
               "43 of seconds fit)";
    return std::nullopt;
}

std::optional<Unit> parse_unit(const std::string& text) {
    if (text == "ms" || text == "millisecond") return Unit::Millisecond;
    if (text == "s" || text == "second") return Unit::Second;
    return std::nullopt;
}

const char* unit_name(Unit unit) { return unit == Unit::Millisecond ? "ms" : "s"; }

}  // namespace cosid

// The core is compiled without PostgreSQL so GoogleTest can test it directly.
#ifdef POSTGRES_H
#error "src/core must stay free of PostgreSQL headers"
#endif

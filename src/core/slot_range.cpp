#include "slot_range.hpp"

#include <cstdlib>

namespace cosid {

std::string SlotRange::text() const { return "[" + std::to_string(lo) + "," + std::to_string(hi) + ")"; }

SlotRange whole_range(int slot_bits) { return SlotRange{0, int32_t{1} << slot_bits}; }

std::optional<SlotRange> parse_slot_range(const std::string& text, int slot_bits) {
    if (text.empty()) return whole_range(slot_bits);
    // PostgreSQL prints a discrete range canonically: "[lo,hi)"; "empty" or an unbounded
    // side is no range a namespace can have.
    if (text.size() < 5 || text.front() != '[' || text.back() != ')') return std::nullopt;
    size_t comma = text.find(',');
    if (comma == std::string::npos || comma == 1 || comma + 2 >= text.size()) return std::nullopt;
    char* end = nullptr;
    std::string lo_text = text.substr(1, comma - 1), hi_text = text.substr(comma + 1, text.size() - comma - 2);
    long lo = std::strtol(lo_text.c_str(), &end, 10);
    if (*end != '\0') return std::nullopt;
    long hi = std::strtol(hi_text.c_str(), &end, 10);
    if (*end != '\0' || lo >= hi || lo < INT32_MIN || hi > INT32_MAX) return std::nullopt;
    return SlotRange{static_cast<int32_t>(lo), static_cast<int32_t>(hi)};
}

std::string slot_range_problem(const SlotRange& r, int slot_bits) {
    SlotRange all = whole_range(slot_bits);
    if (r.lo >= r.hi) return "the range is empty";
    if (r.lo < all.lo || r.hi > all.hi)
        return "the range " + r.text() + " reaches past the layout's slots " + all.text() + " (" +
               std::to_string(slot_bits) + " slot bits)";
    return "";
}

RangeVerdict judge_store_range(const std::optional<SlotRange>& seen, const SlotRange& store) {
    if (!seen) return RangeVerdict::First;
    return *seen == store ? RangeVerdict::Same : RangeVerdict::Differs;
}

}  // namespace cosid

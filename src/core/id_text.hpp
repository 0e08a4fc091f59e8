// What users do with ids besides issuing them: the id range of a timestamp (for range
// scans and partitions on the id column) and a short text form.  Pure C++.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "layout.hpp"

namespace cosid {

// The smallest and largest id any slot can have at Unix time `ms` (the tick that holds it,
// rounded down to the layout's unit); nothing when that tick is outside the layout.
std::optional<int64_t> min_id_at(const Layout& layout, int64_t ms);
std::optional<int64_t> max_id_at(const Layout& layout, int64_t ms);

// Base 62 in ASCII order (0-9, A-Z, a-z), fixed width: 11 characters hold any non-negative
// bigint, and byte order (COLLATE "C") is numeric order.
constexpr int kTextWidth = 11;
// nothing for a negative id (never a cosid id)
std::optional<std::string> to_text(int64_t id);
// nothing for a wrong length, a character outside the alphabet, or a value past 2^63 - 1;
// `why` then says which.
std::optional<int64_t> from_text(const std::string& text, std::string* why);

// A form for people: the UTC time of the tick, the slot and the sequence, as in
// 20261203T072017.816Z-3-0262 (a layout in seconds: 20261203T072017Z-3-0262).  The sequence
// has the digits of the layout's largest sequence, so within one tick and slot text order is
// id order.  Nothing for an id outside the layout (negative, or at or past 2^total_bits) or
// whose time is past kLastTimestampMs.
std::optional<std::string> format_id(const Layout& layout, int64_t id);
// The id of such a text in the layout; nothing when it is malformed, names a time that does
// not exist or is outside the layout, or a slot or sequence past the layout's; `why` says which.
std::optional<int64_t> parse_formatted(const Layout& layout, const std::string& text, std::string* why);

}  // namespace cosid

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

}  // namespace cosid

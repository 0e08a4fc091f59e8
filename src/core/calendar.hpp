// Integer time arithmetic shared by the core: division that rounds towards minus infinity
// (ticks of times before the epoch, seconds layouts) and the proleptic Gregorian calendar
// without libc time zones (Howard Hinnant's days_from_civil / civil_from_days).  Pure C++.
#pragma once
#include <cstdint>
#include <string>

namespace cosid {

inline int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }

// Days since 1970-01-01 of a date (month 1-12, day 1-31; not checked against the month).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d);
void civil_from_days(int64_t days, int64_t* y, int64_t* m, int64_t* d);
// Days in a month of a year.
int days_in_month(int64_t y, int64_t m);

// A distance in ms as people read it, in one unit, rounded down: "850 ms", "19.0 s",
// "12 min", "5 h", "40 days", "69.3 years" (a year of 365.25 days); negative ones with "-".
std::string format_span_ms(int64_t ms);

}  // namespace cosid

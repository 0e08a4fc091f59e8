// Integer time arithmetic shared by the core: division that rounds towards minus infinity
// (ticks of times before the epoch, seconds layouts) and the proleptic Gregorian calendar
// without libc time zones (Howard Hinnant's days_from_civil / civil_from_days).  Pure C++.
#pragma once
#include <cstdint>

namespace cosid {

inline int64_t floor_div(int64_t a, int64_t b) {
    return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
}

// Days since 1970-01-01 of a date (month 1-12, day 1-31; not checked against the month).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d);
void civil_from_days(int64_t days, int64_t* y, int64_t* m, int64_t* d);
// Days in a month of a year.
int days_in_month(int64_t y, int64_t m);

}  // namespace cosid

#include "calendar.hpp"

#include <cstdio>

namespace cosid {

int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
    y -= m <= 2;
    const int64_t era = floor_div(y, 400);
    const int64_t yoe = y - era * 400;
    const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

void civil_from_days(int64_t z, int64_t* y, int64_t* m, int64_t* d) {
    z += 719468;
    const int64_t era = floor_div(z, 146097);
    const int64_t doe = z - era * 146097;
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const int64_t mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yoe + era * 400 + (*m <= 2);
}

int days_in_month(int64_t y, int64_t m) {
    static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : kDays[m - 1];
}

std::string format_span_ms(int64_t ms) {
    if (ms < 0) return "-" + format_span_ms(ms == INT64_MIN ? INT64_MAX : -ms);
    char buf[64];
    constexpr int64_t kMin = 60000, kHour = 60 * kMin, kDay = 24 * kHour;
    if (ms < 10000)
        std::snprintf(buf, sizeof(buf), "%lld ms", static_cast<long long>(ms));
    else if (ms < 2 * kMin)
        std::snprintf(buf, sizeof(buf), "%lld.%lld s", static_cast<long long>(ms / 1000),
                      static_cast<long long>(ms % 1000 / 100));
    else if (ms < 2 * kHour)
        std::snprintf(buf, sizeof(buf), "%lld min", static_cast<long long>(ms / kMin));
    else if (ms < 2 * kDay)
        std::snprintf(buf, sizeof(buf), "%lld h", static_cast<long long>(ms / kHour));
    else if (ms < 730 * kDay)
        std::snprintf(buf, sizeof(buf), "%lld days", static_cast<long long>(ms / kDay));
    else {
        int64_t tenths = ms / 3155760000;  // tenths of a year of 365.25 days
        std::snprintf(buf, sizeof(buf), "%lld.%lld years", static_cast<long long>(tenths / 10),
                      static_cast<long long>(tenths % 10));
    }
    return buf;
}

}  // namespace cosid

#ifdef POSTGRES_H
#error "src/core must stay free of PostgreSQL headers"
#endif

#include "store_errors.hpp"

#include <cstring>

namespace cosid {

bool store_error_is_transient(const char* sqlstate) {
    if (sqlstate == nullptr || std::strlen(sqlstate) != 5) return false;
    const char* const transient_classes[] = {"08", "53"};
    for (const char* c : transient_classes)
        if (std::strncmp(sqlstate, c, 2) == 0) return true;
    const char* const transient_codes[] = {"40001", "40P01", "55P03", "57014", "57P01",
                                           "57P02", "57P03", "58000", "58030", "25006"};
    for (const char* c : transient_codes)
        if (std::strcmp(sqlstate, c) == 0) return true;
    return false;
}

}  // namespace cosid

// The core is compiled without PostgreSQL so GoogleTest can test it directly.
#ifdef POSTGRES_H
#error "src/core must stay free of PostgreSQL headers"
#endif

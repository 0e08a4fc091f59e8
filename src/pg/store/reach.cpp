// The reach cap (src/core/reach.hpp) for the store's SQL: cosid_store_settings refuses limits
// past it, and cosid._follow_timeline raises by it after history the store cannot see.  One
// constant in the code, read by the C++ and the SQL alike.
#include "reach.hpp"

#include "../boundary.hpp"
#include "../settings.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(cosid_reach_cap_ms);
PG_FUNCTION_INFO_V1(cosid_max_tolerance_cap_ms);
PG_FUNCTION_INFO_V1(cosid_static_ahead_cap_ms);
PG_FUNCTION_INFO_V1(cosid_unseen_reach_cap_ms);
}

extern "C" Datum cosid_reach_cap_ms(PG_FUNCTION_ARGS) { PG_RETURN_INT64(cosid::kReachCapMs); }
extern "C" Datum cosid_max_tolerance_cap_ms(PG_FUNCTION_ARGS) { PG_RETURN_INT64(cosid::kMaxToleranceCapMs); }
extern "C" Datum cosid_static_ahead_cap_ms(PG_FUNCTION_ARGS) { PG_RETURN_INT64(cosid::kStaticAheadCapMs); }

// What a raise after unseen history covers (cosid._follow_timeline): the cap, or the lower
// cosid.test_reach_cap of a test server's postgresql.conf.
extern "C" Datum cosid_unseen_reach_cap_ms(PG_FUNCTION_ARGS) {
    using cosid::pg::setting_test_reach_cap_ms;
    PG_RETURN_INT64(setting_test_reach_cap_ms > 0 ? setting_test_reach_cap_ms : cosid::kReachCapMs);
}

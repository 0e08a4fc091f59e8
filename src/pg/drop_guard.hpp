// Refuses DROP EXTENSION cosid in the store's database while slots are leased.
#pragma once
#include "pg.hpp"

namespace cosid::pg {
void install_drop_guard();
}  // namespace cosid::pg

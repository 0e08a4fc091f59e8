// Refuses DROP EXTENSION cosid (and every drop that takes it along), DROP DATABASE and ALTER
// DATABASE ... RENAME TO of a lease store while windows of it reach past the store's clock.
#pragma once
#include "../pg.hpp"

namespace cosid::pg {
void install_drop_guard();
}  // namespace cosid::pg

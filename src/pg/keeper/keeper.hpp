#pragma once
namespace cosid::pg {
void register_keeper();
}

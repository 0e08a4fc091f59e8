#include "window_invariant.hpp"

#include <algorithm>

namespace cosid {

namespace {
std::string where(int32_t slot, int64_t fence) {
    return "slot " + std::to_string(slot) + " fence " + std::to_string(fence);
}
}  // namespace

int WindowInvariant::find(const SlotHistory& h, int64_t fence) {
    for (size_t i = 0; i < h.windows.size(); ++i)
        if (h.windows[i].fence == fence) return static_cast<int>(i);
    return -1;
}

std::optional<std::string> WindowInvariant::above_later_floor(const SlotHistory& h, size_t i, int64_t value,
                                                              const char* what, int32_t slot) {
    for (size_t j = i + 1; j < h.windows.size(); ++j)
        if (value > h.windows[j].floor)
            return where(slot, h.windows[i].fence) + ": " + what + " " + std::to_string(value) +
                   " is above the floor " + std::to_string(h.windows[j].floor) + " of the later window fence " +
                   std::to_string(h.windows[j].fence);
    return std::nullopt;
}

std::optional<std::string> WindowInvariant::grant(int32_t slot, int64_t fence, int64_t floor, int64_t ceiling) {
    SlotHistory& h = slots_[slot];
    // Checked before recording, so that a re-grant is judged against its own earlier issues.
    std::optional<std::string> bad;
    if (h.max_issued && floor < *h.max_issued)
        bad = where(slot, fence) + ": window granted with floor " + std::to_string(floor) + " below the timestamp " +
              std::to_string(*h.max_issued) + " already issued on the slot";
    int i = find(h, fence);
    if (i < 0) {
        h.windows.push_back({fence, floor, ceiling});
    } else {
        Window& w = h.windows[static_cast<size_t>(i)];
        w.floor = std::min(w.floor, floor);  // the holder may now issue from the lower floor
        w.ceiling = std::max(w.ceiling, ceiling);
    }
    return bad;
}

std::optional<std::string> WindowInvariant::extend(int32_t slot, int64_t fence, int64_t ceiling) {
    SlotHistory& h = slots_[slot];
    int i = find(h, fence);
    if (i < 0) return where(slot, fence) + ": renewal of a window never granted";
    Window& w = h.windows[static_cast<size_t>(i)];
    w.ceiling = std::max(w.ceiling, ceiling);
    return above_later_floor(h, static_cast<size_t>(i), w.ceiling, "renewed ceiling", slot);
}

std::optional<std::string> WindowInvariant::issue(int32_t slot, int64_t fence, int64_t t) {
    SlotHistory& h = slots_[slot];
    int i = find(h, fence);
    if (i < 0) return where(slot, fence) + ": timestamp " + std::to_string(t) + " issued in a window never granted";
    const Window& w = h.windows[static_cast<size_t>(i)];
    h.max_issued = std::max(h.max_issued.value_or(t), t);
    if (t <= w.floor || t > w.ceiling)
        return where(slot, fence) + ": timestamp " + std::to_string(t) + " outside the window (" +
               std::to_string(w.floor) + ", " + std::to_string(w.ceiling) + "]";
    return above_later_floor(h, static_cast<size_t>(i), t, "timestamp", slot);
}

std::optional<int64_t> WindowInvariant::max_issued(int32_t slot) const {
    auto it = slots_.find(slot);
    if (it == slots_.end()) return std::nullopt;
    return it->second.max_issued;
}

}  // namespace cosid

// The core is compiled without PostgreSQL so GoogleTest can test it directly.
#ifdef POSTGRES_H
#error "src/core must stay free of PostgreSQL headers"
#endif

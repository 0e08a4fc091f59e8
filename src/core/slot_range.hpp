// Regional stores (docs/capacity.md): one namespace served by several lease stores, each
// granting only its own range of the namespace's slots, so that servers of different regions
// never share a store and never collide.  A namespace's range is [lo, hi) in the store's
// cosid.namespace.slot_range (int4range text, NULL: every slot of the layout).
// The SQL (cosid_namespace_create, cosid.acquire) and the keeper apply these rules.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace cosid {

struct SlotRange {
    int32_t lo = 0;  // first slot granted
    int32_t hi = 0;  // one past the last

    bool contains(int32_t slot) const { return slot >= lo && slot < hi; }
    bool overlaps(const SlotRange& o) const { return lo < o.hi && o.lo < hi; }
    bool operator==(const SlotRange& o) const { return lo == o.lo && hi == o.hi; }
    bool operator!=(const SlotRange& o) const { return !(*this == o); }
    std::string text() const;  // "[lo,hi)", as PostgreSQL prints an int4range
};

// Every slot of a layout of slot_bits bits: what a namespace without a range grants.
SlotRange whole_range(int slot_bits);

// Reads PostgreSQL's text of an int4range ("[0,512)"; "" or NULL: the whole layout).  Nothing
// when the text is no bounded, non-empty range.
std::optional<SlotRange> parse_slot_range(const std::string& text, int slot_bits);

// Why a range cannot be a namespace's of slot_bits bits, or empty when it can: it must be
// non-empty and lie within the layout's slots.
std::string slot_range_problem(const SlotRange& r, int slot_bits);

// What a keeper does with the range a store states for a namespace against the range it saw
// before for that namespace (kept in its own database's copy of the namespace).
enum class RangeVerdict {
    First,   // nothing seen yet: keep this one
    Same,    // as seen: go on
    Differs  // another store, or a store whose range changed: refuse, its slots may be another's
};
RangeVerdict judge_store_range(const std::optional<SlotRange>& seen, const SlotRange& store);

}  // namespace cosid

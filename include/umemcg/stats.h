// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Statistics items (memory.stat). The built-in items are generated from
// stat_items.def; applications may add their own named items at
// Controller creation (ControllerOptions::custom_stat_items), which get
// ids after the built-in ones.
//
// Thread safety: the functions here are pure; see Group for updates and
// reads.

#ifndef UMEMCG_STATS_H_
#define UMEMCG_STATS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "umemcg/export.h"

namespace umemcg {

// How an item's updates and values are counted.
enum class StatUnit : uint8_t { kPages, kBytes, kEvents };

// Built-in items; custom items are StatItem(kNumBuiltinStatItems + i).
enum class StatItem : uint16_t {
#define UMEMCG_STAT_ITEM(name, key, unit) name,
#include "umemcg/stat_items.def"
#undef UMEMCG_STAT_ITEM
};

inline constexpr size_t kNumBuiltinStatItems = 0
#define UMEMCG_STAT_ITEM(name, key, unit) +1
#include "umemcg/stat_items.def"
#undef UMEMCG_STAT_ITEM
    ;

// The memory.stat key of a built-in item ("anon", ...); null for ids out of
// the built-in range.
UMEMCG_EXPORT const char* BuiltinStatName(StatItem item);
// The unit of a built-in item (kEvents for ids out of range).
UMEMCG_EXPORT StatUnit BuiltinStatUnit(StatItem item);
// The built-in item with memory.stat key `key`, if any.
UMEMCG_EXPORT std::optional<StatItem> ParseBuiltinStat(std::string_view key);

}  // namespace umemcg

#endif  // UMEMCG_STATS_H_

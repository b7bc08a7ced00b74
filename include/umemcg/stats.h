// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Statistics items (memory.stat). The built-in items are generated from
// stat_items.def; applications may add their own named items at
// Controller creation (ControllerOptions::custom_stat_items), which get
// ids after the built-in ones (Controller::FindStatItem).
//
// Values are lazily flushed (kernel rstat: css_rstat_updated,
// mem_cgroup_flush_stats; docs/design.md, Statistics (rstat)): an
// update is a per-CPU add; readers see it after a flush of their subtree.
// How far an unflushed read can be off is published per group
// (Group::StatBound, StatErrorBound below).
//
// Thread safety: the functions here are pure; see Group for updates and
// reads.

#ifndef UMEMCG_STATS_H_
#define UMEMCG_STATS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "umemcg/export.h"

namespace umemcg {

// How an item's updates and values are counted. memory.stat prints pages
// and KiB as bytes, bytes as bytes and events as plain counts.
enum class StatUnit : uint8_t { kPages, kBytes, kKiB, kEvents };

// Built-in items; custom items are StatItem(kNumBuiltinStatItems + i).
enum class StatItem : uint16_t {
#define UMEMCG_STAT_ITEM(name, key, unit, c_name) name,
#include "umemcg/stat_items.def"
#undef UMEMCG_STAT_ITEM
};

inline constexpr size_t kNumBuiltinStatItems = 0
#define UMEMCG_STAT_ITEM(name, key, unit, c_name) +1
#include "umemcg/stat_items.def"
#undef UMEMCG_STAT_ITEM
    ;

// Custom items: at most this many per controller.
inline constexpr size_t kMaxCustomStatItems = 64;

// An application-defined item (ControllerOptions::custom_stat_items).
// `name` is its memory.stat key: 1..64 characters of [a-z0-9_], starting
// with a letter, distinct from every other item and from the derived keys
// "slab" and "stock".
struct StatItemSpec {
  std::string name;
  StatUnit unit = StatUnit::kEvents;
};

// The memory.stat key of a built-in item ("anon", ...); null for ids out of
// the built-in range.
UMEMCG_EXPORT const char* BuiltinStatName(StatItem item);
// The unit of a built-in item (kEvents for ids out of range).
UMEMCG_EXPORT StatUnit BuiltinStatUnit(StatItem item);
// The built-in item with memory.stat key `key`, if any.
UMEMCG_EXPORT std::optional<StatItem> ParseBuiltinStat(std::string_view key);

// Bytes (or the count, for kEvents) one unit of `unit` stands for in
// memory.stat: 4096, 1, 1024 or 1.
UMEMCG_EXPORT int64_t StatUnitScale(StatUnit unit);

// Which flushes readers trigger (two kernel eras: docs/architecture.md,
// Eras).
enum class StatsFlushMode : uint8_t {
  // v6.8+: each group counts its subtree's pending updates; a reader
  // flushes its own subtree when its group passes batch x nr_cpus.
  kPerGroupSubtree,
  // Before v6.8: one global count of pending updates; a reader flushes the
  // whole tree from the root when it passes batch x nr_cpus.
  kGlobalWholeTree,
};

// How far an unflushed read of a group (Group::StatFast,
// Group::StatLocalFast) taken after this bound can be from the true value
// of the updates that completed before the bound was taken (updates racing
// with the read may or may not be in it). Read the bound first, then the
// values: a flush in between only makes the values more exact.
struct StatErrorBound {
  // Updates of the group's subtree not yet flushed, in page-normalised
  // units: pages for page items, events for event items, and bytes or KiB
  // rounded up to whole pages per update (so one update of 1 byte counts
  // as 1). When `exceeded` is false, for every item i:
  //   |StatFast(i) - true(i)| <= pending x PageScale(unit(i))
  // where PageScale is 1 for pages and events, 4096 for bytes and 4 for
  // KiB. The same bound holds for the local value.
  uint64_t pending = 0;
  // The flush threshold (batch x nr_cpus) a reader compares pending with.
  uint64_t threshold = 0;
  // True when the group is over its threshold or an update of its subtree was
  // not counted here (counting stops at the first ancestor already over
  // its threshold, as in the kernel): no bound is known; a flushing read
  // (Group::Stat / StatExact) is needed.
  bool exceeded = false;
  // Time since the last flush that covered this group (its own subtree
  // flush, or a flush of an ancestor's including it).
  std::chrono::nanoseconds since_last_flush{0};

  // The bound in `unit`'s own units; INT64_MAX when exceeded.
  int64_t For(StatUnit unit) const;
};

}  // namespace umemcg

#endif  // UMEMCG_STATS_H_

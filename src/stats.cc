// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Statistics items and updates.
//
// TODO(core): this first version updates shared atomics on every level
// (exact, not per-CPU); the rstat engine of the statistics issue replaces
// it with per-CPU deltas and lazy hierarchical flushing.

#include "umemcg/stats.h"

#include "umemcg/group.h"

namespace umemcg {
namespace {

struct BuiltinStat {
  const char* key;
  StatUnit unit;
};

constexpr BuiltinStat kBuiltinStats[] = {
#define UMEMCG_STAT_ITEM(name, key, unit) {key, StatUnit::unit},
#include "umemcg/stat_items.def"
#undef UMEMCG_STAT_ITEM
};
static_assert(sizeof(kBuiltinStats) / sizeof(kBuiltinStats[0]) ==
              kNumBuiltinStatItems);

}  // namespace

const char* BuiltinStatName(StatItem item) {
  const auto i = static_cast<size_t>(item);
  return i < kNumBuiltinStatItems ? kBuiltinStats[i].key : nullptr;
}

StatUnit BuiltinStatUnit(StatItem item) {
  const auto i = static_cast<size_t>(item);
  return i < kNumBuiltinStatItems ? kBuiltinStats[i].unit : StatUnit::kEvents;
}

std::optional<StatItem> ParseBuiltinStat(std::string_view key) {
  for (size_t i = 0; i < kNumBuiltinStatItems; ++i) {
    if (key == kBuiltinStats[i].key) return static_cast<StatItem>(i);
  }
  return std::nullopt;
}

bool Group::ModState(StatItem item, int64_t delta) {
  const auto i = static_cast<size_t>(item);
  if (i >= kNumBuiltinStatItems || !online()) return false;
  // Relaxed: statistics only; exact once updates quiesce.
  stat_local_[i].fetch_add(delta, std::memory_order_relaxed);
  for (Group* g = this; g != nullptr; g = g->parent_) {
    g->stat_hier_[i].fetch_add(delta, std::memory_order_relaxed);
  }
  return true;
}

int64_t Group::StatLocal(StatItem item) const {
  const auto i = static_cast<size_t>(item);
  return i < kNumBuiltinStatItems
             ? stat_local_[i].load(std::memory_order_relaxed)
             : 0;
}

int64_t Group::Stat(StatItem item) const {
  const auto i = static_cast<size_t>(item);
  return i < kNumBuiltinStatItems
             ? stat_hier_[i].load(std::memory_order_relaxed)
             : 0;
}

}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Statistics: the item table (built-in + custom), Group's update and read
// API on top of the rstat engine (rstat.h), and the memory.stat /
// memory.events text.

#include "umemcg/stats.h"

#include <atomic>
#include <cstdint>
#include <limits>
#include <string>

#include "rstat.h"
#include "stat_extension.h"
#include "umemcg/controller.h"
#include "umemcg/group.h"

namespace umemcg {
namespace {

struct BuiltinStat {
  const char* key;
  StatUnit unit;
};

constexpr BuiltinStat kBuiltinStats[] = {
#define UMEMCG_STAT_ITEM(name, key, unit, c_name) {key, StatUnit::unit},
#include "umemcg/stat_items.def"
#undef UMEMCG_STAT_ITEM
};
static_assert(sizeof(kBuiltinStats) / sizeof(kBuiltinStats[0]) ==
              kNumBuiltinStatItems);

// Keys printed in memory.stat that are not items.
constexpr const char* kDerivedKeys[] = {"slab", "stock"};

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  if (name[0] < 'a' || name[0] > 'z') return false;
  for (char ch : name) {
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_')) {
      return false;
    }
  }
  return true;
}

void Append(std::string* out, const char* key, int64_t value) {
  out->append(key);
  out->push_back(' ');
  out->append(std::to_string(value));
  out->push_back('\n');
}

}  // namespace

namespace {
// The memory.stat extension (stat_extension.h).
std::atomic<internal::MemoryStatExtension> g_stat_extension{nullptr};
}  // namespace

void internal::SetMemoryStatExtension(MemoryStatExtension fn) {
  g_stat_extension.store(fn, std::memory_order_release);
}

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

int64_t StatUnitScale(StatUnit unit) {
  switch (unit) {
    case StatUnit::kPages:
      return 4096;
    case StatUnit::kKiB:
      return 1024;
    default:
      return 1;
  }
}

int64_t StatErrorBound::For(StatUnit unit) const {
  if (exceeded) return std::numeric_limits<int64_t>::max();
  const int64_t scale = unit == StatUnit::kBytes ? 4096
                        : unit == StatUnit::kKiB ? 4
                                                 : 1;
  if (pending >
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / scale)) {
    return std::numeric_limits<int64_t>::max();
  }
  return static_cast<int64_t>(pending) * scale;
}

Status internal::BuildStatTable(const std::vector<StatItemSpec>& custom,
                                std::vector<std::string>* names,
                                std::vector<StatUnit>* units) {
  auto bad = [](const std::string& what) {
    return Status(StatusCode::kInvalidArgument, "custom_stat_items: " + what);
  };
  if (custom.size() > kMaxCustomStatItems) return bad("too many items");
  names->clear();
  units->clear();
  for (const BuiltinStat& b : kBuiltinStats) {
    names->push_back(b.key);
    units->push_back(b.unit);
  }
  for (const StatItemSpec& spec : custom) {
    if (!ValidName(spec.name)) {
      return bad("malformed name '" + spec.name +
                 "' (1..64 of [a-z0-9_], starting with a letter)");
    }
    if (spec.unit != StatUnit::kPages && spec.unit != StatUnit::kBytes &&
        spec.unit != StatUnit::kKiB && spec.unit != StatUnit::kEvents) {
      return bad("unknown unit for '" + spec.name + "'");
    }
    for (const std::string& n : *names) {
      if (n == spec.name) return bad("duplicate name '" + spec.name + "'");
    }
    for (const char* d : kDerivedKeys) {
      if (spec.name == d) return bad("'" + spec.name + "' is a derived key");
    }
    names->push_back(spec.name);
    units->push_back(spec.unit);
  }
  return Status::Ok();
}

// ---- Controller ----

std::optional<StatItem> Controller::FindStatItem(std::string_view name) const {
  for (size_t i = 0; i < stat_names_.size(); ++i) {
    if (stat_names_[i] == name) return static_cast<StatItem>(i);
  }
  return std::nullopt;
}

const char* Controller::StatItemName(StatItem item) const {
  const auto i = static_cast<size_t>(item);
  return i < stat_names_.size() ? stat_names_[i].c_str() : nullptr;
}

StatUnit Controller::StatItemUnit(StatItem item) const {
  const auto i = static_cast<size_t>(item);
  return i < stat_units_.size() ? stat_units_[i] : StatUnit::kEvents;
}

void Controller::FlushAllStats() { rstat_->FlushSubtree(root_->stats_); }

// ---- Group: updates ----

bool Group::ModState(StatItem item, int64_t delta) {
  internal::GroupStats* s = stats_;
  const auto i = static_cast<size_t>(item);
  if (i >= s->nr_items() || !online()) return false;
  return s->Update(i, delta);
}

// ---- Group: readers ----

int64_t Group::StatFast(StatItem item) const {
  const auto i = static_cast<size_t>(item);
  return i < controller_->rstat_->nr_items() ? stats_->aggregate(i) : 0;
}

int64_t Group::StatLocalFast(StatItem item) const {
  const auto i = static_cast<size_t>(item);
  return i < controller_->rstat_->nr_items() ? stats_->local(i) : 0;
}

int64_t Group::Stat(StatItem item) {
  controller_->rstat_->FlushIfNeeded(stats_);
  return StatFast(item);
}

int64_t Group::StatLocal(StatItem item) {
  controller_->rstat_->FlushIfNeeded(stats_);
  return StatLocalFast(item);
}

int64_t Group::StatExact(StatItem item) {
  FlushStats();
  return StatFast(item);
}

int64_t Group::StatLocalExact(StatItem item) {
  FlushStats();
  return StatLocalFast(item);
}

StatErrorBound Group::StatBound() const {
  return controller_->rstat_->Bound(stats_);
}

void Group::FlushStats() { controller_->rstat_->FlushSubtree(stats_); }

void Group::FlushStatsRatelimited() {
  controller_->rstat_->FlushRatelimited(stats_);
}

// ---- Text ----

std::string Group::MemoryStat() {
  internal::Rstat& r = *controller_->rstat_;
  r.FlushIfNeeded(stats_);
  // Kernel: memory_stat_format(): value x unit, negative aggregates (per-CPU
  // deltas racing) shown as 0.
  auto bytes = [&](size_t i) {
    const int64_t v = stats_->aggregate(i);
    return v < 0 ? 0 : v * StatUnitScale(r.unit(i));
  };
  std::string out;
  out.reserve(32 * (r.nr_items() + 2));
  const auto slab_r = static_cast<size_t>(StatItem::kSlabReclaimable);
  const auto slab_u = static_cast<size_t>(StatItem::kSlabUnreclaimable);
  for (size_t i = 0; i < kNumBuiltinStatItems; ++i) {
    Append(&out, kBuiltinStats[i].key, bytes(i));
    if (i == slab_u) Append(&out, "slab", bytes(slab_r) + bytes(slab_u));
  }
  Append(&out, "stock",
         static_cast<int64_t>(StockedPages().raw()) *
             StatUnitScale(StatUnit::kPages));
  for (size_t i = kNumBuiltinStatItems; i < r.nr_items(); ++i) {
    Append(&out, controller_->stat_names_[i].c_str(), bytes(i));
  }
  if (internal::MemoryStatExtension ext =
          g_stat_extension.load(std::memory_order_acquire)) {
    ext(*this, &out);
  }
  return out;
}

std::string Group::MemoryEvents() const {
  std::string out;
  for (size_t e = 0; e < kNumMemoryEvents; ++e) {
    Append(&out, MemoryEventName(static_cast<MemoryEvent>(e)),
           static_cast<int64_t>(events(static_cast<MemoryEvent>(e))));
  }
  return out;
}

std::string Group::MemoryEventsLocal() const {
  std::string out;
  for (size_t e = 0; e < kNumMemoryEvents; ++e) {
    Append(&out, MemoryEventName(static_cast<MemoryEvent>(e)),
           static_cast<int64_t>(events_local(static_cast<MemoryEvent>(e))));
  }
  return out;
}

}  // namespace umemcg

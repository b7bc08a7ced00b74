// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The preload's C API (include/umemcg/preload.h): groups below "process"
// for the calling thread, the groups' files, the counters and the report
// line. Every call that may allocate runs with the thread marked inside
// umemcg (HookGuard), as the runtime does.

#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>

#include "preload/jemalloc_mode.h"
#include "preload/preload_internal.h"
#include "preload/runtime.h"
#include "umemcg/active.h"
#include "umemcg/events.h"
#include "umemcg/preload.h"
#include "umemcg/status.h"

namespace umemcg::preload {
namespace {

constexpr size_t kMaxPath = 200;

// "a/b" below "process": non-empty components without "." or "..".
bool ValidPath(std::string_view path) {
  if (path.empty() || path.size() > kMaxPath) return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

// The group `path` below "process" ("" = process itself), or null.
GroupRef LookupBelowProcess(Runtime& rt, const char* path) {
  if (path == nullptr || *path == '\0') return rt.process;
  if (!ValidPath(path)) return GroupRef();
  auto g = rt.controller->Lookup(rt.process->name() + "/" + path);
  return g.ok() ? std::move(g).value() : GroupRef();
}

// Finds or creates each component of `path` below "process".
StatusOr<GroupRef> FindOrCreate(Runtime& rt, std::string_view path) {
  GroupRef parent = rt.process;
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view name = path.substr(start, end - start);
    auto child = rt.controller->CreateGroup(*parent, name);
    if (!child.ok() && child.status().code() == StatusCode::kAlreadyExists) {
      child = rt.controller->Lookup(parent->path() + "/" + std::string(name));
    }
    if (!child.ok()) return child.status();
    parent = std::move(child).value();
    start = end + 1;
  }
  return parent;
}

}  // namespace
}  // namespace umemcg::preload

using umemcg::preload::g_runtime;
using umemcg::preload::HookGuard;
using umemcg::preload::Runtime;

extern "C" {

int umemcg_preload_set_group(const char* path) {
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr) return ENODEV;
  if (path == nullptr || *path == '\0') {
    umemcg::preload::ChooseGroup(rt->process.get(), nullptr);
    return 0;
  }
  if (!umemcg::preload::ValidPath(path)) return EINVAL;
  HookGuard guard;
  umemcg::Group* group = nullptr;
  umemcg::ObjCgroup* objcg = nullptr;
  {
    std::lock_guard<std::mutex> lock(rt->mu);
    for (const auto& a : rt->assigned) {
      if (a.path == path && a.group->online()) {
        group = a.group.get();
        objcg = a.objcg.get();
        break;
      }
    }
    if (objcg == nullptr) {
      // New, or the group was removed since (the old entry stays: its
      // blocks still point at its objcg).
      if (rt->assigned.size() >= umemcg::preload::kMaxAssignedGroups) {
        return ENOSPC;
      }
      auto found = umemcg::preload::FindOrCreate(*rt, path);
      if (!found.ok()) return umemcg::ErrnoOf(found.status().code());
      umemcg::ObjCgroupRef ref = umemcg::ObjCgroupFor(*found.value());
      group = found.value().get();
      objcg = ref.get();
      rt->assigned.push_back({path, std::move(found).value(), std::move(ref)});
    }
  }
  // Outside rt->mu (the registry's lock is never taken under it); the
  // entry in `assigned` pins both for good.
  umemcg::preload::ChooseGroup(group, objcg);
  return 0;
}

int umemcg_preload_remove_group(const char* path) {
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr) return ENODEV;
  if (path == nullptr || *path == '\0') return EINVAL;
  HookGuard guard;
  umemcg::GroupRef g = umemcg::preload::LookupBelowProcess(*rt, path);
  if (!g) return ENOENT;
  return umemcg::ErrnoOf(rt->controller->RemoveGroup(*g).code());
}

int umemcg_preload_get_stats(umemcg_preload_stats_t* out) {
  if (out == nullptr) return EINVAL;
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr) return ENODEV;
  umemcg_preload_stats_t s{};
  for (const auto& c : umemcg::preload::g_counters) {
    s.live_bytes += c.live_bytes.load(std::memory_order_relaxed);
    s.live_blocks += c.live_blocks.load(std::memory_order_relaxed);
    s.unaccounted_bytes += c.unaccounted_bytes.load(std::memory_order_relaxed);
    s.charge_failures += c.charge_failures.load(std::memory_order_relaxed);
    s.foreign_frees += c.foreign_frees.load(std::memory_order_relaxed);
  }
  const umemcg::preload::MapStats m = umemcg::preload::GetMapStats();
  s.charge_failures += m.charge_failures;
  s.mapped_bytes = static_cast<int64_t>(m.charged_bytes);
  s.reserved_bytes = static_cast<int64_t>(m.reserved_bytes);
  s.mapped_ranges = static_cast<int64_t>(m.ranges);
  s.enforce = rt->enforce ? 1 : 0;
  *out = s;
  return 0;
}

int umemcg_preload_read_file(const char* group, const char* file, char* buf,
                             size_t len, size_t* out_len) {
  if (file == nullptr || (buf == nullptr && len != 0)) return EINVAL;
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr) return ENODEV;
  HookGuard guard;
  umemcg::GroupRef g = umemcg::preload::LookupBelowProcess(*rt, group);
  if (!g) return ENOENT;
  auto text = g->ReadFile(file);
  if (!text.ok()) return umemcg::ErrnoOf(text.status().code());
  const std::string& t = text.value();
  if (len > 0) {
    const size_t n = std::min(len - 1, t.size());
    std::memcpy(buf, t.data(), n);
    buf[n] = '\0';
  }
  if (out_len != nullptr) *out_len = t.size();
  return 0;
}

int umemcg_preload_write_file(const char* group, const char* file,
                              const char* text) {
  if (file == nullptr || text == nullptr) return EINVAL;
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr) return ENODEV;
  HookGuard guard;
  umemcg::GroupRef g = umemcg::preload::LookupBelowProcess(*rt, group);
  if (!g) return ENOENT;
  return umemcg::ErrnoOf(g->WriteFile(file, text).code());
}

int umemcg_preload_sync(void) {
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr) return ENODEV;
  HookGuard guard;
  // The resident mode: the mappings' charge as of now, not as of the
  // scanner's last period.
  (void)umemcg::preload::RecountMappings();
  rt->controller->DrainAllStocks(rt->controller->root());
  rt->controller->FlushAllStats();
  return 0;
}

int umemcg_preload_report(int fd) {
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr) return ENODEV;
  int64_t accounted;
  int64_t anon_pages;
  uint64_t usage;
  uint64_t peak;
  uint64_t max_events;
  const bool je =
      umemcg::preload::g_heap_mode == umemcg::preload::kHeapJemalloc;
  umemcg::preload::JeHeapFigures je_figures{};
  umemcg::preload::MapStats maps;
  {
    HookGuard guard;
    umemcg::Group& process = *rt->process;
    // First: reading them settles the charges a fork deferred.
    if (je) je_figures = umemcg::preload::GetJeHeapFigures(process);
    // The resident mode: the mappings' charge as of now.
    (void)umemcg::preload::RecountMappings();
    // The mappings' charge and its statistic read together: no mapping
    // hook, nor the resident mode's scanner, changes them meanwhile.
    umemcg::preload::MapTableLockForFork();
    // Exact at quiescence: the object stocks' bytes and cached statistic
    // deltas are pushed out first (obj_cgroup.h).
    rt->controller->DrainAllStocks(process);
    accounted = process.StatExact(umemcg::preload::kHeapItem);
    anon_pages = process.StatExact(umemcg::preload::kMapItem);
    usage = process.usage().raw();
    peak = process.memory().watermark().raw();
    max_events = process.events(umemcg::MemoryEvent::kMax);
    maps = umemcg::preload::GetMapStatsLocked();
    umemcg::preload::MapTableUnlockAfterFork();
  }
  umemcg_preload_stats_t s;
  (void)umemcg_preload_get_stats(&s);
  s.mapped_bytes = static_cast<int64_t>(maps.charged_bytes);
  s.reserved_bytes = static_cast<int64_t>(maps.reserved_bytes);
  char line[768];
  const int n = std::snprintf(
      line, sizeof(line),
      "umemcg-preload: pid=%d live_bytes=%" PRId64 " accounted_bytes=%" PRId64
      " live_blocks=%" PRId64 " unaccounted_bytes=%" PRId64
      " mapped_bytes=%" PRId64 " anon_bytes=%" PRId64 " reserved_bytes=%" PRId64
      " usage_pages=%" PRIu64 " peak_pages=%" PRIu64 " max_events=%" PRIu64
      " charge_failures=%" PRIu64 " foreign_frees=%" PRIu64 "\n",
      static_cast<int>(getpid()), s.live_bytes, accounted, s.live_blocks,
      s.unaccounted_bytes, s.mapped_bytes, anon_pages * 4096, s.reserved_bytes,
      usage, peak, max_events, s.charge_failures, s.foreign_frees);
  if (n <= 0) return EIO;
  size_t len = std::min<size_t>(n, sizeof(line) - 1);
  if (je) {
    // jemalloc mode: no per-block counts (live_* stay 0); the heap is
    // charged in pages as "anon" with the mappings.
    const umemcg::preload::JeHeapFigures& f = je_figures;
    const int m =
        std::snprintf(line + len - 1, sizeof(line) - len + 1,
                      " heap=jemalloc heap_charged_bytes=%" PRId64
                      " heap_active_bytes=%" PRId64 " heap_dirty_bytes=%" PRId64
                      " heap_unaccounted_bytes=%" PRId64 "\n",
                      f.charged, f.active, f.dirty, f.unaccounted);
    if (m > 0) len = std::min<size_t>(len - 1 + m, sizeof(line) - 1);
  }
  if (maps.resident_mode) {
    // UMEMCG_MAP_CHARGE=resident: mapped_bytes are resident pages;
    // resident_forced counts growth charged past a refusal.
    const int m =
        std::snprintf(line + len - 1, sizeof(line) - len + 1,
                      " map_charge=resident resident_forced=%" PRIu64 "\n",
                      maps.resident_forced);
    if (m > 0) len = std::min<size_t>(len - 1 + m, sizeof(line) - 1);
  }
  return write(fd, line, len) < 0 ? errno : 0;
}

}  // extern "C"

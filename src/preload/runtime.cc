// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The preload's runtime: reads the environment at load, makes the
// controller and the "process" group, serves the umemcg_preload_* C API
// and writes the exit report. Everything here runs with the thread marked
// inside umemcg (HookGuard), so its own allocations are charged to nothing
// and never re-enter the charge path.
//
// Nothing here is ever destroyed: other threads and later destructors keep
// allocating and freeing after this library's destructor ran, and every
// charged block points at an objcg the runtime pins.

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "preload/ops_seam.h"
#include "preload/preload_internal.h"
#include "umemcg/active.h"
#include "umemcg/controller.h"
#include "umemcg/preload.h"

namespace umemcg::preload {
namespace {

constexpr size_t kMaxAssignedGroups = 256;
constexpr size_t kMaxPath = 200;

struct Assigned {
  std::string path;
  GroupRef group;
  ObjCgroupRef objcg;  // pins the objcg its blocks point at, for good
};

struct Runtime {
  std::unique_ptr<Controller> controller;
  GroupRef process;
  ObjCgroupRef process_objcg;
  bool enforce = false;
  std::string report;  // "", "stderr" or a path
  std::mutex mu;       // guards assigned
  std::vector<Assigned> assigned;
};

// Set once at load (release; the API's acquire loads pair with it).
std::atomic<Runtime*> g_runtime{nullptr};

void Warn(const char* fmt, const char* a, const char* b = "") {
  char line[512];
  const int n = std::snprintf(line, sizeof(line), fmt, a, b);
  if (n > 0) {
    (void)!write(2, line, std::min<size_t>(n, sizeof(line) - 1));
  }
}

bool Truthy(const char* v) {
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0 &&
         std::strcmp(v, "false") != 0 && std::strcmp(v, "no") != 0;
}

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

// Reads `env` and takes it out of the environment (see StartOps).
std::string TakeEnv(const char* env) {
  const char* found = std::getenv(env);
  if (found == nullptr) return std::string();
  std::string value = found;
  unsetenv(env);
  return value;
}

// Hands UMEMCG_MOUNT / UMEMCG_METRICS (`value`, taken out of the
// environment by TakeEnv before either starts) to the operations module
// (ops_glue.cc, see ops_seam.h); says why a setting had no effect. The
// mount and the port belong to this process: a child, or libfuse's
// fusermount3 (which gets this environment and, run by root, this
// preload), must not mount the same directory or bind the same port again.
void StartOps(Runtime& rt, const char* env, const std::string& value,
              const char* what, int (*start)(Controller*, const char*)) {
  if (value.empty()) return;
  const int err =
      start != nullptr ? start(rt.controller.get(), value.c_str()) : ENOSYS;
  if (err == ENOSYS) {
    char line[256];
    std::snprintf(line, sizeof(line),
                  "umemcg-preload: %s=%%s ignored: built without %s%%s\n", env,
                  what);
    Warn(line, value.c_str());
  } else if (err != 0) {
    char line[256];
    std::snprintf(line, sizeof(line), "umemcg-preload: %s=%%s: %%s\n", env);
    Warn(line, value.c_str(), std::strerror(err));
  }
}

void Init() {
  HookGuard guard;
  ControllerOptions options;
  // No flusher thread inside someone else's program: statistics are
  // flushed by readers (memory.stat, the report).
  options.stats_flush_period = std::chrono::nanoseconds(0);
  // Nor a memory.high worker: over-high groups are reclaimed by the next
  // blocking charge (UMEMCG_ENFORCE) or memory.high write.
  options.high_work = HighWorkMode::kNone;
  options.error_hook = [](const ErrorReport& r) {
    Warn("umemcg-preload: accounting error: %s%s\n", r.what, "");
  };
  auto controller = Controller::Create(std::move(options));
  if (!controller.ok()) {
    Warn("umemcg-preload: disabled: %s%s\n",
         controller.status().ToString().c_str());
    return;
  }
  auto* rt = new Runtime;  // never freed, see above
  rt->controller = std::move(controller).value();
  const char* name = std::getenv("UMEMCG_GROUP");
  auto process = rt->controller->CreateGroup(
      rt->controller->root(), name != nullptr && *name ? name : "process");
  if (!process.ok()) {
    Warn("umemcg-preload: disabled: UMEMCG_GROUP: %s%s\n",
         process.status().ToString().c_str());
    return;
  }
  rt->process = std::move(process).value();
  rt->process_objcg = ObjCgroupFor(*rt->process);
  rt->assigned.reserve(kMaxAssignedGroups);
  for (auto [env, file] : {std::pair{"UMEMCG_MAX", "memory.max"},
                           std::pair{"UMEMCG_HIGH", "memory.high"}}) {
    if (const char* v = std::getenv(env)) {
      Status s = rt->process->WriteFile(file, v);
      if (!s.ok()) {
        Warn("umemcg-preload: ignoring %s: %s\n", env, s.ToString().c_str());
      }
    }
  }
  rt->enforce = Truthy(std::getenv("UMEMCG_ENFORCE"));
  // Enforcing: reclaim and drain the stocks first, fail instead of
  // forcing. Otherwise never block and charge past max (counted as
  // memory.events "max"). Neither sleeps for memory.high inside malloc.
  g_charge_flags = rt->enforce
                       ? ChargeFlags::kMayReclaim | ChargeFlags::kNoThrottle
                       : kChargeAtomic | ChargeFlags::kNoThrottle;
  if (const char* v = std::getenv("UMEMCG_REPORT")) rt->report = v;

  const std::string mount_dir = TakeEnv("UMEMCG_MOUNT");
  const std::string metrics_address = TakeEnv("UMEMCG_METRICS");
  StartOps(*rt, "UMEMCG_MOUNT", mount_dir, "libfuse3 (MountFs)",
           umemcg_preload_ops_mount);
  StartOps(*rt, "UMEMCG_METRICS", metrics_address, "cpp-httplib (ServeMetrics)",
           umemcg_preload_ops_metrics);
  g_runtime.store(rt, std::memory_order_release);
  // From here on, every thread's blocks are charged (release: the hooks
  // see g_charge_flags and a complete objcg).
  g_default_objcg.store(rt->process_objcg.get(), std::memory_order_release);
}

void Fini() {
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr || rt->report.empty()) return;
  if (rt->report == "stderr") {
    (void)umemcg_preload_report(2);
    return;
  }
  const int fd =
      open(rt->report.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)umemcg_preload_report(fd);
  close(fd);
}

__attribute__((constructor)) void PreloadConstructor() { Init(); }
__attribute__((destructor)) void PreloadDestructor() { Fini(); }

}  // namespace
}  // namespace umemcg::preload

using umemcg::preload::g_runtime;
using umemcg::preload::HookGuard;
using umemcg::preload::Runtime;

extern "C" {

int umemcg_preload_set_group(const char* path) {
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr) return ENODEV;
  auto& tls = umemcg::preload::tls_state;
  if (path == nullptr || *path == '\0') {
    tls.objcg = nullptr;
    return 0;
  }
  if (!umemcg::preload::ValidPath(path)) return EINVAL;
  HookGuard guard;
  std::lock_guard<std::mutex> lock(rt->mu);
  for (const auto& a : rt->assigned) {
    if (a.path == path && a.group->online()) {
      tls.objcg = a.objcg.get();
      return 0;
    }
  }
  // New, or the group was removed since (the old entry stays: its blocks
  // still point at its objcg).
  if (rt->assigned.size() >= umemcg::preload::kMaxAssignedGroups) {
    return ENOSPC;
  }
  auto group = umemcg::preload::FindOrCreate(*rt, path);
  if (!group.ok()) return umemcg::ErrnoOf(group.status().code());
  umemcg::ObjCgroupRef objcg = umemcg::ObjCgroupFor(*group.value());
  tls.objcg = objcg.get();
  rt->assigned.push_back({path, std::move(group).value(), std::move(objcg)});
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
  rt->controller->DrainAllStocks(rt->controller->root());
  rt->controller->FlushAllStats();
  return 0;
}

int umemcg_preload_report(int fd) {
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr) return ENODEV;
  int64_t accounted;
  uint64_t usage;
  uint64_t max_events;
  {
    HookGuard guard;
    umemcg::Group& process = *rt->process;
    // Exact at quiescence: the object stocks' bytes and cached statistic
    // deltas are pushed out first (obj_cgroup.h).
    rt->controller->DrainAllStocks(process);
    accounted = process.StatExact(umemcg::preload::kHeapItem);
    usage = process.usage().raw();
    max_events = process.events(umemcg::MemoryEvent::kMax);
  }
  umemcg_preload_stats_t s;
  (void)umemcg_preload_get_stats(&s);
  char line[512];
  const int n = std::snprintf(
      line, sizeof(line),
      "umemcg-preload: live_bytes=%" PRId64 " accounted_bytes=%" PRId64
      " live_blocks=%" PRId64 " unaccounted_bytes=%" PRId64
      " usage_pages=%" PRIu64 " max_events=%" PRIu64 " charge_failures=%" PRIu64
      " foreign_frees=%" PRIu64 "\n",
      s.live_bytes, accounted, s.live_blocks, s.unaccounted_bytes, usage,
      max_events, s.charge_failures, s.foreign_frees);
  if (n <= 0) return EIO;
  return write(fd, line, std::min<size_t>(n, sizeof(line) - 1)) < 0 ? errno : 0;
}

}  // extern "C"

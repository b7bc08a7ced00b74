// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The preload's runtime: reads the environment at load, makes the
// controller and the "process" group (runtime.h), and writes the exit
// report; the umemcg_preload_* C API is in api.cc. Everything here runs with
// the thread marked inside umemcg (HookGuard), so its own allocations are
// charged to nothing and never re-enter the charge path.
//
// Nothing here is ever destroyed: other threads and later destructors keep
// allocating and freeing after this library's destructor ran, and every
// charged block points at an objcg the runtime pins.
//
// fork(). The child is a copy: its blocks, mappings, counters and groups
// are the parent's at the moment of the fork, and it goes on with them as
// its own (its frees uncharge what the parent's charges left in its copy;
// the kernel's commit accounting charges a child for the parent's
// committed mappings the same way, in dup_mmap). The fork handlers below
// let no heap booking be half made at the fork (heap_fork.h) and take the
// runtime's and the range table's locks around fork() so the child finds
// them free; the library's own locks have their own handlers.
// A child that exits writes its own report (its pid, its figures) to the
// same place; it neither serves nor unmounts the parent's mount and
// metrics endpoint.

#include "preload/runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "preload/heap_fork.h"
#include "preload/jemalloc_mode.h"
#include "preload/ops_seam.h"
#include "preload/preload_internal.h"
#include "umemcg/active.h"
#include "umemcg/controller.h"
#include "umemcg/heap_profile.h"
#include "umemcg/preload.h"

extern char** environ;

namespace umemcg::preload {

// hooks.cc / mmap_hooks.cc.
void SetMmapThreshold(size_t bytes);
void SetMmapMax(long max);
void InitMapTable(bool resident, uint64_t scan_period_ms);

std::atomic<Runtime*> g_runtime{nullptr};

void Warn(const char* fmt, ...) {
  // Formatted on the stack and written with one system call: no stdio
  // stream and no allocation (it may run inside the first malloc), and
  // errno as it was (a failed write sets it).
  const int saved_errno = errno;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n > 0) {
    (void)!syscall(SYS_write, 2, line, std::min<size_t>(n, sizeof(line) - 1));
  }
  errno = saved_errno;
}

namespace {

// The report's duplicate of stderr goes at the top of the descriptors a
// program may use (the soft RLIMIT_NOFILE), but no higher than this: the
// kernel's descriptor table grows to the highest number open, and every
// fork() copies it (at the soft limit of a container, often 2^20, that is
// 8 MiB per fork).
constexpr int kReportFdCeiling = 1024;
// Numbers below the top tried when the top one is taken.
constexpr int kReportFdTries = 16;

bool Truthy(const char* v) {
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0 &&
         std::strcmp(v, "false") != 0 && std::strcmp(v, "no") != 0;
}

// Reads `name` and removes it from the process's environment block itself
// (`environ`, which execve passes on and from which every shell builds
// its variables). Not unsetenv(): bash exports its own, which before
// bash's main() has run changes nothing, so bash would hand the variable
// to every child.
std::string TakeEnv(const char* name) {
  const char* found = std::getenv(name);
  if (found == nullptr) return std::string();
  std::string value = found;
  const size_t len = std::strlen(name);
  if (environ != nullptr) {
    char** out = environ;
    for (char** in = environ; *in != nullptr; ++in) {
      if (std::strncmp(*in, name, len) == 0 && (*in)[len] == '=') continue;
      *out++ = *in;
    }
    *out = nullptr;
  }
  return value;
}

// Sets `name` to `value` in `environ` itself (see TakeEnv). The new entry
// is never freed: `environ` may hold it until the process ends.
void ReplaceEnv(const char* name, const std::string& value) {
  if (environ == nullptr) return;
  const size_t len = std::strlen(name);
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, name, len) != 0 || (*e)[len] != '=') continue;
    const std::string entry = std::string(name) + "=" + value;
    char* copy = static_cast<char*>(std::malloc(entry.size() + 1));
    if (copy == nullptr) return;
    std::memcpy(copy, entry.c_str(), entry.size() + 1);
    *e = copy;
    return;
  }
}

// ---- The operations module (ops_seam.h) ----

// libumemcg-preload-ops.so: UMEMCG_PRELOAD_OPS, else next to this library.
std::string OpsPath() {
  if (const char* o = std::getenv("UMEMCG_PRELOAD_OPS"); o && *o) return o;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&OpsPath), &info) != 0 &&
      info.dli_fname != nullptr) {
    std::string self = info.dli_fname;
    const size_t slash = self.rfind('/');
    if (slash != std::string::npos) {
      return self.substr(0, slash + 1) + UMEMCG_PRELOAD_OPS_LIBRARY;
    }
  }
  return UMEMCG_PRELOAD_OPS_LIBRARY;
}

// Opens the module once; null (and `why` set) when it cannot be used.
void* OpenOps(std::string* why) {
  static void* handle = nullptr;
  static std::string error;
  static bool tried = false;
  if (!tried) {
    tried = true;
    const std::string path = OpsPath();
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = dlerror();
      error = "cannot load the operations module: " +
              std::string(e != nullptr ? e : path);
    } else {
      auto abi = reinterpret_cast<umemcg_preload_ops_abi_fn>(
          dlsym(handle, UMEMCG_PRELOAD_OPS_ABI));
      if (abi == nullptr || std::strcmp(abi(), UMEMCG_PRELOAD_ABI_TOKEN) != 0) {
        error = path + " is from another build of umemcg";
        handle = nullptr;  // left loaded: unloading runs its destructors
      }
    }
  }
  *why = error;
  return handle;
}

// Hands UMEMCG_MOUNT / UMEMCG_METRICS (`value`, taken out of the
// environment by TakeEnv before either starts) to the operations module;
// says why a setting had no effect. The mount and the port belong to this
// process: a child, or libfuse's fusermount3 (which gets this environment
// and, run by root, this preload), must not mount the same directory or
// bind the same port again.
void StartOps(Runtime& rt, const char* env, const std::string& value,
              const char* symbol, const char* failed) {
  if (value.empty()) return;
  std::string why;
  void* ops = OpenOps(&why);
  auto start =
      ops != nullptr
          ? reinterpret_cast<umemcg_preload_ops_start_fn>(dlsym(ops, symbol))
          : nullptr;
  if (start == nullptr) {
    if (why.empty()) why = std::string(symbol) + " not found";
    Warn("umemcg-preload: %s=%s ignored: %s\n", env, value.c_str(),
         why.c_str());
    return;
  }
  // The module's copy answers cgroup.threads / cgroup.procs from this
  // copy's thread registry, where the program's threads are (threads.cc).
  if (auto threads = reinterpret_cast<umemcg_preload_ops_threads_fn>(
          dlsym(ops, UMEMCG_PRELOAD_OPS_THREADS))) {
    threads(internal::ThisThreadRegistry());
  }
  char message[512] = "";
  const int err =
      start(rt.controller.get(), value.c_str(), message, sizeof(message));
  if (err == ENOSYS) {
    Warn("umemcg-preload: %s=%s ignored: %s\n", env, value.c_str(), message);
  } else if (err != 0) {
    // "UMEMCG_METRICS=127.0.0.1:9100 not served: cannot bind
    // 127.0.0.1:9100: Address already in use".
    Warn("umemcg-preload: %s=%s %s: %s\n", env, value.c_str(), failed,
         message[0] != '\0' ? message : std::strerror(err));
  }
}

// ---- How anonymous mappings are charged (mmap_hooks.cc) ----

// UMEMCG_MAP_CHARGE: "at-mmap" (all pages when mapped) or "resident"
// (pages resident, recounted). True for resident.
bool ReadMapCharge() {
  constexpr bool kDefaultResident = false;
  const char* v = std::getenv("UMEMCG_MAP_CHARGE");
  if (v == nullptr || *v == '\0') return kDefaultResident;
  if (std::strcmp(v, "resident") == 0) return true;
  if (std::strcmp(v, "at-mmap") == 0) return false;
  Warn("umemcg-preload: ignoring UMEMCG_MAP_CHARGE=%s (at-mmap or resident)\n",
       v);
  return kDefaultResident;
}

// UMEMCG_MAP_SCAN_MS: the resident mode's recount period (default 100).
uint64_t ReadScanPeriodMs() {
  constexpr uint64_t kDefault = 100;
  const char* v = std::getenv("UMEMCG_MAP_SCAN_MS");
  if (v == nullptr || *v == '\0') return kDefault;
  char* end = nullptr;
  const unsigned long long ms = std::strtoull(v, &end, 10);
  if (end == v || *end != '\0' || ms == 0) {
    Warn("umemcg-preload: ignoring UMEMCG_MAP_SCAN_MS=%s (milliseconds)\n", v);
    return kDefault;
  }
  return ms;
}

// ---- glibc's allocator settings the hooks size blocks by ----

void ReadMallocEnvironment() {
  if (const char* v = std::getenv("MALLOC_MMAP_THRESHOLD_")) {
    SetMmapThreshold(std::strtoul(v, nullptr, 0));
  }
  if (const char* v = std::getenv("MALLOC_MMAP_MAX_")) {
    SetMmapMax(std::strtol(v, nullptr, 0));
  }
  // GLIBC_TUNABLES=glibc.malloc.mmap_threshold=N:glibc.malloc.mmap_max=N
  if (const char* t = std::getenv("GLIBC_TUNABLES")) {
    std::string_view all(t);
    while (!all.empty()) {
      const size_t colon = all.find(':');
      const std::string item(all.substr(0, colon));
      all = colon == std::string_view::npos ? std::string_view()
                                            : all.substr(colon + 1);
      const size_t eq = item.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = item.substr(0, eq);
      const char* val = item.c_str() + eq + 1;
      if (key == "glibc.malloc.mmap_threshold") {
        SetMmapThreshold(std::strtoul(val, nullptr, 0));
      } else if (key == "glibc.malloc.mmap_max") {
        SetMmapMax(std::strtol(val, nullptr, 0));
      }
    }
  }
}

int DetectGlibcVersion() {
  unsigned major = 0, minor = 0;
  if (std::sscanf(gnu_get_libc_version(), "%u.%u", &major, &minor) != 2) {
    return 0;
  }
  return static_cast<int>(major * 1000 + minor);
}

// ---- The exit report's destination ----

void SetUpReport(ReportSink& sink, const char* setting) {
  if (setting == nullptr || *setting == '\0') return;
  if (std::strcmp(setting, "stderr") == 0) {
    sink.to_stderr = true;
    struct stat st;
    if (fstat(2, &st) != 0) return;  // no stderr: nowhere to write
    sink.dev = st.st_dev;
    sink.ino = st.st_ino;
    // Never a small fixed number: a script's `exec 100>lock` is saved and
    // restored by bash around the descriptor it finds there, so the
    // program's own use of the number must find it free.
    int top = kReportFdCeiling;
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
        lim.rlim_cur < static_cast<rlim_t>(kReportFdCeiling)) {
      top = static_cast<int>(lim.rlim_cur);
    }
    for (int fd = top - 1; fd >= 3 && fd >= top - kReportFdTries; --fd) {
      // F_DUPFD gives the lowest free number at or above `fd`; above it
      // only taken ones remain, so the first free from the top is found.
      sink.fd = fcntl(2, F_DUPFD_CLOEXEC, fd);
      if (sink.fd >= 0) return;
    }
    return;
  }
  sink.path = setting;
  if (setting[0] != '/') {
    // Resolved now: the program (or a forked child) may chdir. Children
    // get the absolute path too, so every report of a process tree lands
    // in the same file (edited in `environ` itself, see TakeEnv).
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) {
      sink.path = std::string(cwd) + "/" + setting;
      ReplaceEnv("UMEMCG_REPORT", sink.path);
    }
  }
}

bool SameFile(int fd, const ReportSink& sink) {
  struct stat st;
  return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == sink.dev &&
         st.st_ino == sink.ino;
}

// ---- The heap profile (UMEMCG_PROFILE, UMEMCG_PROFILE_RATE) ----

void SetUpProfile(Runtime& rt) {
  const char* path = std::getenv("UMEMCG_PROFILE");
  if (path == nullptr || *path == '\0') {
    // Nobody can read a profile: no sampling (no stack is captured, and
    // libunwind, which keeps a pipe open, is never loaded).
    SetHeapProfileRate(*rt.controller, Bytes(0));
    return;
  }
  if (const char* rate = std::getenv("UMEMCG_PROFILE_RATE"); rate && *rate) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(rate, &end, 10);
    if (end != rate && *end == '\0') {
      SetHeapProfileRate(*rt.controller, Bytes(v));
    } else {
      Warn("umemcg-preload: ignoring UMEMCG_PROFILE_RATE=%s (bytes)\n", rate);
    }
  }
  rt.profile_path = path;
  // SIGUSR2 asks for a profile now, if the program has not taken the
  // signal (its default would kill the process).
  struct sigaction old {};
  if (sigaction(SIGUSR2, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
    struct sigaction sa {};
    sa.sa_handler = [](int) {
      g_profile_requested.store(true, std::memory_order_relaxed);
    };
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &sa, nullptr);
  }
  if (path[0] != '/') {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) {
      rt.profile_path = std::string(cwd) + "/" + path;
      ReplaceEnv("UMEMCG_PROFILE", rt.profile_path);
    }
  }
}

// The process group's subtree profile, in the legacy heap text (pprof and
// google-pprof read it and symbolize from the maps it carries). `seq` > 0
// (SIGUSR2's n-th) is appended to the path as ".n".
void WriteProfile(const Runtime& rt, int seq = 0) {
  std::string path = rt.profile_path;
  if (const size_t at = path.find("%p"); at != std::string::npos) {
    path.replace(at, 2, std::to_string(getpid()));
  }
  if (seq > 0) {
    path += '.';
    path += std::to_string(seq);
  }
  const std::string text =
      FormatLegacyHeapProfile(SnapshotHeapProfile(*rt.process, true));
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    Warn("umemcg-preload: cannot write UMEMCG_PROFILE %s\n", path.c_str());
    return;
  }
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
}

}  // namespace

std::atomic<bool> g_profile_requested{false};

void WriteRequestedProfile() {
  static std::atomic<int> seq{0};  // relaxed: numbers the files only
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr || rt->profile_path.empty()) return;
  WriteProfile(*rt, seq.fetch_add(1, std::memory_order_relaxed) + 1);
}

namespace {

// ---- Fork ----

void ForkPrepare() {
  // Heap bookings first (the fork is announced and the bookings then in
  // progress complete; those that start later are deferred, never
  // blocked: heap_fork.h), then the range table (its holders may be
  // charging, which needs nothing held here), then the runtime's lock.
  HeapForkPrepare();
  MapTableLockForFork();
  if (Runtime* rt = g_runtime.load(std::memory_order_acquire)) rt->mu.lock();
}

void ForkParent() {
  if (Runtime* rt = g_runtime.load(std::memory_order_acquire)) rt->mu.unlock();
  MapTableUnlockAfterFork();
  HeapForkParent();  // applies the bookings deferred meanwhile
}

// The child's copies of both locks were taken by the forking thread,
// which is the child's only thread: it releases them, then applies the
// bookings deferred before the fork (the library's own child handlers,
// registered before these, have already run).
void ForkChild() {
  if (Runtime* rt = g_runtime.load(std::memory_order_acquire)) rt->mu.unlock();
  MapTableUnlockAfterFork();
  MapForkChild();
  HeapForkChild();
}

void Init() {
  HookGuard guard;
  g_glibc_version = DetectGlibcVersion();
  ReadMallocEnvironment();
  const bool chunks_ok = ProbeGlibcChunks();
  ControllerOptions options;
  // No flusher thread inside someone else's program: statistics are
  // flushed by readers (memory.stat, the report).
  options.stats_flush_period = std::chrono::nanoseconds(0);
  // Nor a memory.high worker: over-high groups are reclaimed by the next
  // blocking charge (UMEMCG_ENFORCE) or memory.high write.
  options.high_work = HighWorkMode::kNone;
  // The groups count the program's heap; the library's own memory is
  // never charged in the preload (its allocations run inside umemcg), and
  // so neither are the groups' statistics.
  options.charge_group_metadata = false;
  options.error_hook = [](const ErrorReport& r) {
    Warn("umemcg-preload: accounting error: %s\n", r.what);
  };
  auto controller = Controller::Create(std::move(options));
  if (!controller.ok()) {
    Warn("umemcg-preload: disabled: %s\n",
         controller.status().ToString().c_str());
    return;
  }
  if (!chunks_ok) {
    Warn("umemcg-preload: disabled: %s\n",
         "glibc's malloc chunk layout is not the one expected");
    return;
  }
  auto* rt = new Runtime;  // never freed, see above
  rt->controller = std::move(controller).value();
  const char* name = std::getenv("UMEMCG_GROUP");
  auto process = rt->controller->CreateGroup(
      rt->controller->root(), name != nullptr && *name ? name : "process");
  if (!process.ok()) {
    Warn("umemcg-preload: disabled: UMEMCG_GROUP: %s\n",
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
  g_enforce = rt->enforce;
  g_charge_flags = rt->enforce
                       ? ChargeFlags::kMayReclaim | ChargeFlags::kNoThrottle
                       : kChargeAtomic | ChargeFlags::kNoThrottle;
  SetUpReport(rt->report, std::getenv("UMEMCG_REPORT"));
  SetUpProfile(*rt);

  const std::string mount_dir = TakeEnv("UMEMCG_MOUNT");
  const std::string metrics_address = TakeEnv("UMEMCG_METRICS");
  StartOps(*rt, "UMEMCG_MOUNT", mount_dir, UMEMCG_PRELOAD_OPS_MOUNT,
           "not mounted");
  StartOps(*rt, "UMEMCG_METRICS", metrics_address, UMEMCG_PRELOAD_OPS_METRICS,
           "not served");
  InitMapTable(ReadMapCharge(), ReadScanPeriodMs());
  InitHeapFork();
  InitThreads();
  g_runtime.store(rt, std::memory_order_release);
  // After the controller (and its own fork handlers, if it registers any
  // when created): handlers run prepare in reverse order, so ours take the
  // preload's locks before the library takes its own.
  pthread_atfork(ForkPrepare, ForkParent, ForkChild);
  // jemalloc mode: the per-group arenas, charged by their extent hooks.
  // Their fork handlers, registered last, prepare first (before ours and
  // before jemalloc's, registered at its first allocation, which lock the
  // arenas) and run last in the parent and the child. Refused (jemalloc
  // without opt.retain or statistics), every block stays in jemalloc's
  // automatic arenas, charged to nothing.
  if (DecideHeapMode() == kHeapJemalloc) {
    const char* why = nullptr;
    if (!EnableJemallocHeap(*rt->controller, &why)) {
      Warn("umemcg-preload: UMEMCG_HEAP=jemalloc: heap not accounted: %s\n",
           why);
    }
  }
  // From here on, every thread's blocks and mappings are charged (release:
  // the hooks see g_charge_flags and a complete objcg).
  g_default_objcg.store(rt->process_objcg.get(), std::memory_order_release);
  // The main thread (this one) is known to cgroup.threads from here on.
  RegisterThreadIfNew();
}

void Fini() {
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr) return;
  if (!rt->profile_path.empty()) {
    HookGuard guard;
    WriteProfile(*rt);
  }
  const ReportSink& sink = rt->report;
  if (sink.to_stderr) {
    // The duplicate, if it is still the start-up stderr; else fd 2 if
    // that is (a program that closes all its descriptors takes both).
    const int fd = SameFile(sink.fd, sink) ? sink.fd
                   : SameFile(2, sink)     ? 2
                                           : -1;
    if (fd >= 0) (void)umemcg_preload_report(fd);
    return;
  }
  if (sink.path.empty()) return;
  const int fd =
      open(sink.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)umemcg_preload_report(fd);
  close(fd);
}

__attribute__((constructor)) void PreloadConstructor() { Init(); }
__attribute__((destructor)) void PreloadDestructor() { Fini(); }

}  // namespace
}  // namespace umemcg::preload

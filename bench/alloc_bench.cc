// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// umemcg-alloc-bench: malloc/free pair time and RSS per live byte of the
// per-group jemalloc arenas (include/umemcg/jemalloc.h) against plain
// jemalloc, umemcg's header mode (a pmr MemoryResource charging the active
// group) and glibc. Built twice from this file: umemcg-alloc-bench links
// libumemcg-jemalloc (its malloc is jemalloc's, routed), and
// umemcg-alloc-bench-glibc links neither (glibc's malloc): one process
// cannot hold both allocators as malloc.
//
//   umemcg-alloc-bench time [--seconds S] [--repeats N]
//   umemcg-alloc-bench rss [--live-mib M]
//   umemcg-alloc-bench switch [--repeats N]
//   umemcg-alloc-bench one --variant V [--threads T] [--tenants N]
//                          [--seconds S]
//   umemcg-alloc-bench one --variant V --rss [--live-mib M]
//   umemcg-alloc-bench sampled [--repeats N]
// Environment: UMEMCG_PROFILE_RATE=BYTES (the heap profiler's interval;
// 0 off) and UMEMCG_PROFILE_STACK=fp (frame-pointer stacks).
//
// one: a single measurement for `umemcg-bench alloc`, which runs the
// variants of both binaries (and the preload) side by side: V is plain,
// header or arenas; prints "ns_per_pair X", or with --rss one
// "rss SIZE X" line per block size.
//
// time: each variant x threads (1, 2) x tenants (1, 8): every thread keeps
// a window of 4096 live blocks (sizes 8 B-64 KiB, log-uniform), frees the
// oldest after each allocation; with 2 threads every second block is
// freed by the other thread (a lock-free handoff ring); with 8 tenants the
// thread switches ActiveGroupScope every 100 allocations. Prints ns per
// malloc+free pair per variant, the median of N repeats with min..max, the
// repeats of all variants interleaved.
// rss: for each block size 8 B .. 64 KiB, a child process allocates
// M MiB of live blocks of that size and reports (RSS growth) / (live
// bytes), per variant.
// sampled (arenas only): ns per malloc+free pair with every allocation
// sampled by the heap profiler against sampling off, per size: the cost
// of one sampled arena allocation and its free.
// switch: the cost of a per-request scope: ns per ActiveGroupScope enter
// and leave with one 64-byte malloc+free inside, the 8 tenants in turn,
// minus the same pair under one scope held throughout (both timed in the
// same repeat). In the arenas variant the first malloc after a switch
// also finds the new group's arena and thread cache.

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory_resource>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "umemcg/active.h"
#include "umemcg/heap_profile.h"
#include "umemcg/memory_resource.h"
#include "umemcg/umemcg.h"
#ifdef ALLOC_BENCH_JEMALLOC
#include <jemalloc/jemalloc.h>

#include "umemcg/jemalloc.h"
#endif

namespace {

using Clock = std::chrono::steady_clock;

enum class Variant { kPlain, kHeader, kArenas };

const char* Name(Variant v) {
#ifdef ALLOC_BENCH_JEMALLOC
  switch (v) {
    case Variant::kPlain:
      return "jemalloc";
    case Variant::kHeader:
      return "header(pmr)/jemalloc";
    case Variant::kArenas:
      return "jemalloc-arenas";
  }
#else
  switch (v) {
    case Variant::kPlain:
      return "glibc";
    case Variant::kHeader:
      return "header(pmr)/glibc";
    case Variant::kArenas:
      return "-";
  }
#endif
  return "?";
}

// The header mode's upstream: the process's plain allocator, uncharged
// (with the component linked, ::operator new would be routed too).
class PlainUpstream : public std::pmr::memory_resource {
  void* do_allocate(size_t n, size_t) override {
#ifdef ALLOC_BENCH_JEMALLOC
    return mallocx(n == 0 ? 1 : n, 0);  // automatic arena, uncharged
#else
    return std::malloc(n);
#endif
  }
  void do_deallocate(void* p, size_t, size_t) override {
#ifdef ALLOC_BENCH_JEMALLOC
    dallocx(p, 0);
#else
    std::free(p);
#endif
  }
  bool do_is_equal(const memory_resource& o) const noexcept override {
    return this == &o;
  }
};

struct Env {
  std::unique_ptr<umemcg::Controller> ctrl;
  std::vector<umemcg::GroupRef> tenants;
  PlainUpstream upstream;
  std::unique_ptr<umemcg::MemoryResource> header;
};

Env* g_env = nullptr;

void* Allocate(Variant v, size_t n) {
  if (v == Variant::kHeader) return g_env->header->allocate(n, 16);
  void* p = std::malloc(n);
  asm volatile("" : : "r"(p) : "memory");
  return p;
}
void Free(Variant v, void* p, size_t n) {
  if (v == Variant::kHeader) {
    g_env->header->deallocate(p, n, 16);
  } else {
    std::free(p);
  }
}

struct Block {
  void* p;
  size_t n;
};

// A single-producer single-consumer ring (cross-thread frees).
struct Ring {
  static constexpr size_t kSize = 1 << 14;
  alignas(64) std::atomic<size_t> head{0};
  alignas(64) std::atomic<size_t> tail{0};
  Block slots[kSize];
  bool Push(Block b) {
    const size_t t = tail.load(std::memory_order_relaxed);
    if (t - head.load(std::memory_order_acquire) == kSize) return false;
    slots[t % kSize] = b;
    tail.store(t + 1, std::memory_order_release);
    return true;
  }
  bool Pop(Block* b) {
    const size_t h = head.load(std::memory_order_relaxed);
    if (h == tail.load(std::memory_order_acquire)) return false;
    *b = slots[h % kSize];
    head.store(h + 1, std::memory_order_release);
    return true;
  }
};

// ns per pair for one configuration.
double TimeRun(Variant v, int threads, int tenants, double seconds) {
  constexpr int kWindow = 4096;
  std::vector<std::unique_ptr<Ring>> rings;
  for (int t = 0; t < threads; ++t) rings.push_back(std::make_unique<Ring>());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> pairs{0};
  auto worker = [&](int id) {
    std::mt19937_64 rng(id + 1);
    // Sizes precomputed: 8 B .. 64 KiB log-uniform.
    std::vector<size_t> sizes(1 << 12);
    for (auto& s : sizes) {
      s = size_t{8} << (rng() % 14);
      s += rng() % s;
    }
    std::vector<Block> window(kWindow, Block{nullptr, 0});
    Ring& mine = *rings[id];
    Ring& other = *rings[(id + 1) % threads];
    uint64_t n = 0;
    int tenant = id % tenants;
    std::optional<umemcg::ActiveGroupScope> scope;
    if (v != Variant::kPlain) scope.emplace(*g_env->tenants[tenant]);
    while (!stop.load(std::memory_order_relaxed)) {
      for (int k = 0; k < 100; ++k, ++n) {
        const size_t size = sizes[n % sizes.size()];
        Block& slot = window[n % kWindow];
        if (slot.p != nullptr) {
          if (threads > 1 && (n & 1) == 0 && other.Push(slot)) {
          } else {
            Free(v, slot.p, slot.n);
          }
        }
        slot = Block{Allocate(v, size), size};
        Block b;
        if (threads > 1 && mine.Pop(&b)) Free(v, b.p, b.n);
      }
      if (tenants > 1 && v != Variant::kPlain) {
        tenant = (tenant + 1) % tenants;
        scope.reset();
        scope.emplace(*g_env->tenants[tenant]);
      }
    }
    for (Block& b : window) {
      if (b.p != nullptr) Free(v, b.p, b.n);
    }
    scope.reset();
    pairs.fetch_add(n);
  };
  std::vector<std::thread> ts;
  const auto t0 = Clock::now();
  for (int t = 0; t < threads; ++t) ts.emplace_back(worker, t);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (auto& t : ts) t.join();
  const double elapsed =
      std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  for (auto& r : rings) {
    Block b;
    while (r->Pop(&b)) Free(v, b.p, b.n);
  }
  // Per thread: ns of one thread per pair.
  return elapsed * threads / static_cast<double>(pairs.load());
}

// ns per op of `ops` 64-byte pairs: each under its own scope of the
// tenants in turn (switching), or all under tenant 0's.
double SwitchRun(Variant v, bool switching, int ops) {
  const auto t0 = Clock::now();
  if (switching) {
    for (int i = 0; i < ops; ++i) {
      umemcg::ActiveGroupScope scope(*g_env->tenants[i & 7]);
      Free(v, Allocate(v, 64), 64);
    }
  } else {
    umemcg::ActiveGroupScope scope(*g_env->tenants[0]);
    for (int i = 0; i < ops; ++i) Free(v, Allocate(v, 64), 64);
  }
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() /
         ops;
}

long RssKiB() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  long size = 0, rss = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%ld %ld", &size, &rss) != 2) rss = 0;
    std::fclose(f);
  }
  return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

// In a child: RSS growth per live byte for `size`-byte blocks.
double RssRun(Variant v, size_t size, size_t live_bytes) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const size_t n = live_bytes / size;
    // The pointer array outside malloc, touched before the baseline.
    void** ptrs = static_cast<void**>(mmap(nullptr, n * sizeof(void*),
                                           PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    std::memset(ptrs, 0, n * sizeof(void*));
    std::optional<umemcg::ActiveGroupScope> scope;
    if (v != Variant::kPlain) scope.emplace(*g_env->tenants[0]);
    // Warm the allocator's structures, then the baseline.
    for (int i = 0; i < 100; ++i) Free(v, Allocate(v, size), size);
    const long before = RssKiB();
    for (size_t i = 0; i < n; ++i) {
      ptrs[i] = Allocate(v, size);
      std::memset(ptrs[i], 1, size);
    }
    const long after = RssKiB();
    const double ratio =
        static_cast<double>(after - before) * 1024.0 / (n * size);
    if (write(fds[1], &ratio, sizeof(ratio)) != sizeof(ratio)) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  double ratio = -1;
  if (read(fds[0], &ratio, sizeof(ratio)) != sizeof(ratio)) ratio = -1;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return ratio;
}

// plain, header or arenas (arenas only with the component linked).
std::optional<Variant> VariantNamed(const std::string& name) {
  if (name == "plain") return Variant::kPlain;
  if (name == "header") return Variant::kHeader;
#ifdef ALLOC_BENCH_JEMALLOC
  if (name == "arenas") return Variant::kArenas;
#endif
  return std::nullopt;
}

std::vector<Variant> Variants() {
#ifdef ALLOC_BENCH_JEMALLOC
  return {Variant::kPlain, Variant::kHeader, Variant::kArenas};
#else
  return {Variant::kPlain, Variant::kHeader};
#endif
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "time";
  double seconds = 0.3;
  int repeats = 5;
  size_t live_mib = 32;
  std::string variant;
  int threads_one = 1, tenants_one = 1;
  bool rss_one = false;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--rss") {
      rss_one = true;
      continue;
    }
    if (i + 1 >= argc) break;
    const char* value = argv[++i];
    if (flag == "--seconds") seconds = std::atof(value);
    if (flag == "--repeats") repeats = std::atoi(value);
    if (flag == "--live-mib") live_mib = std::strtoul(value, nullptr, 10);
    if (flag == "--variant") variant = value;
    if (flag == "--threads") threads_one = std::atoi(value);
    if (flag == "--tenants") tenants_one = std::atoi(value);
  }
  std::optional<Variant> one;
  if (mode == "one") {
    one = VariantNamed(variant);
    if (!one || threads_one < 1 || threads_one > 2 || tenants_one < 1 ||
        tenants_one > 8) {
      std::fprintf(stderr, "umemcg-alloc-bench one: bad arguments\n");
      return 2;
    }
  }
  Env env;
  g_env = &env;
  env.ctrl = umemcg::Controller::Create({}).value();
  // The heap profiler's interval (bytes; 0: off), as the preload reads it
  // (the library's default otherwise): sampling on and off side by side.
  if (const char* rate = std::getenv("UMEMCG_PROFILE_RATE");
      rate != nullptr && *rate != '\0') {
    umemcg::SetHeapProfileRate(*env.ctrl,
                               umemcg::Bytes(std::strtoull(rate, nullptr, 10)));
  }
  // UMEMCG_PROFILE_STACK=fp: frame-pointer stacks (heap_profile.h).
  if (const char* cap = std::getenv("UMEMCG_PROFILE_STACK");
      cap != nullptr && std::strcmp(cap, "fp") == 0) {
    umemcg::SetHeapProfileStackCapture(umemcg::StackCapture::kFramePointers);
  }
#ifdef ALLOC_BENCH_JEMALLOC
  // The arenas feed the profiler when asked (HeapOptions::heap_profile):
  // here when UMEMCG_PROFILE_RATE is set, and in `sampled`.
  umemcg::jemalloc::HeapOptions heap_options;
  if (const char* rate = std::getenv("UMEMCG_PROFILE_RATE");
      (rate != nullptr && *rate != '\0') || mode == "sampled") {
    heap_options.heap_profile = true;
  }
  if (!umemcg::jemalloc::Enable(*env.ctrl, heap_options).ok()) return 1;
#endif
  for (int t = 0; t < 8; ++t) {
    env.tenants.push_back(
        env.ctrl->CreateGroup(env.ctrl->root(), "t" + std::to_string(t))
            .value());
  }
  umemcg::MemoryResourceOptions mo;
  mo.upstream = &env.upstream;
  env.header = std::make_unique<umemcg::MemoryResource>(
      umemcg::kChargeActiveGroup, nullptr, mo);
  // In the header variant the scopes make the resource charge the tenant;
  // with the component linked the upstream is not routed (PlainUpstream),
  // and the arenas variant allocates with plain malloc under the scope.

#ifdef ALLOC_BENCH_JEMALLOC
  if (mode == "sampled") {
    // The heap profiler's cost per sampled arena allocation: malloc + free
    // pairs of SIZE bytes under one tenant's scope with every allocation
    // sampled (interval 1 byte) against sampling off (interval 0),
    // alternating, medians of N repeats; the difference is one sampled
    // allocation and its free (decision, sampled arena without a thread
    // cache, stack capture, record; the free's record removal).
    for (size_t size : {size_t{64}, size_t{4096}, size_t{32768}}) {
      constexpr int kPairs = 20000;
      std::vector<double> on, off;
      std::vector<void*> blocks(kPairs);
      for (int r = 0; r < repeats; ++r) {
        for (uint64_t rate : {uint64_t{1}, uint64_t{0}}) {
          umemcg::SetHeapProfileRate(*env.ctrl, umemcg::Bytes(rate));
          // A countdown drawn at the interval just set.
          umemcg::SeedHeapProfileThreadForTesting(r + 1);
          umemcg::ActiveGroupScope scope(*env.tenants[0]);
          const auto t0 = std::chrono::steady_clock::now();
          for (void*& p : blocks) {
            p = std::malloc(size);
            asm volatile("" : : "r"(p) : "memory");
          }
          for (void* p : blocks) std::free(p);
          const double ns = std::chrono::duration<double, std::nano>(
                                std::chrono::steady_clock::now() - t0)
                                .count() /
                            kPairs;
          (rate != 0 ? on : off).push_back(ns);
        }
      }
      std::sort(on.begin(), on.end());
      std::sort(off.begin(), off.end());
      std::printf(
          "sampled size=%zu ns_per_pair_sampled %.1f (%.1f..%.1f) "
          "ns_per_pair_off %.1f (%.1f..%.1f) cost_per_sample %.1f\n",
          size, on[on.size() / 2], on.front(), on.back(), off[off.size() / 2],
          off.front(), off.back(), on[on.size() / 2] - off[off.size() / 2]);
    }
    return 0;
  }
#endif
  if (mode == "one" && rss_one) {
    for (size_t size = 8; size <= 65536; size *= 2) {
      std::printf("rss %zu %.4f\n", size, RssRun(*one, size, live_mib << 20));
    }
  } else if (mode == "one") {
    std::printf("ns_per_pair %.3f\n",
                TimeRun(*one, threads_one, tenants_one, seconds));
  } else if (mode == "time") {
    std::printf(
        "# ns per malloc+free pair (one thread's time), median "
        "[min..max] of %d, %.2f s each\n",
        repeats, seconds);
    for (int threads : {1, 2}) {
      for (int tenants : {1, 8}) {
        std::vector<std::vector<double>> res(Variants().size());
        for (int r = 0; r < repeats; ++r) {
          for (size_t k = 0; k < Variants().size(); ++k) {
            res[k].push_back(TimeRun(Variants()[k], threads, tenants, seconds));
          }
        }
        for (size_t k = 0; k < Variants().size(); ++k) {
          auto& v = res[k];
          std::sort(v.begin(), v.end());
          std::printf("threads %d tenants %d %-22s %7.1f ns [%.1f..%.1f]\n",
                      threads, tenants, Name(Variants()[k]), v[v.size() / 2],
                      v.front(), v.back());
        }
      }
    }
  } else if (mode == "switch") {
    constexpr int kOps = 1 << 20;
    std::printf(
        "# ns per scope switch (enter+leave around a 64 B malloc+free, 8 "
        "tenants in turn) minus the pair under one scope; median [min..max] "
        "of %d\n",
        repeats);
    for (Variant v : Variants()) {
      if (v == Variant::kPlain) continue;
      SwitchRun(v, true, kOps / 8);  // warm: every tenant's arena and cache
      std::vector<double> sw, fixed, diff;
      for (int r = 0; r < repeats; ++r) {
        const double a = SwitchRun(v, true, kOps);
        const double b = SwitchRun(v, false, kOps);
        sw.push_back(a);
        fixed.push_back(b);
        diff.push_back(a - b);
      }
      for (auto* x : {&sw, &fixed, &diff}) std::sort(x->begin(), x->end());
      std::printf(
          "%-22s switch %6.1f ns [%.1f..%.1f]  pair %6.1f ns  switch-pair "
          "%6.1f ns [%.1f..%.1f]\n",
          Name(v), sw[sw.size() / 2], sw.front(), sw.back(),
          fixed[fixed.size() / 2], diff[diff.size() / 2], diff.front(),
          diff.back());
    }
  } else if (mode == "rss") {
    std::printf("# RSS growth per live byte, %zu MiB live per size\n",
                live_mib);
    std::printf("%8s", "size");
    for (Variant v : Variants()) std::printf(" %22s", Name(v));
    std::printf("\n");
    for (size_t size = 8; size <= 65536; size *= 2) {
      std::printf("%8zu", size);
      for (Variant v : Variants()) {
        std::printf(" %22.3f", RssRun(v, size, live_mib << 20));
      }
      std::printf("\n");
    }
  }
  env.header.reset();
#ifdef ALLOC_BENCH_JEMALLOC
  umemcg::jemalloc::Disable();
#endif
  env.tenants.clear();
  return 0;
}

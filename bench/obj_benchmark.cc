// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Micro-benchmarks of object (byte) accounting (Google Benchmark), with a
// ratio report against the targets of the object-accounting issue: the
// kmem_cache loops of the seed series "Reduce kmemcache memory accounting
// overhead" (docs/benchmarks.md: kmem). All benchmarks run in one
// binary, repetitions randomly interleaved.
//
//   BM_Malloc64               malloc(64) + free: the unaccounted loop.
//   BM_Malloc64_Cached        the same plus ObjCgroup::Charge(64) and
//                             Uncharge(64) (slab_unreclaimable +-64) on a
//                             child of the root, statistic deltas cached in
//                             the object stock (after the seed series).
//   BM_Malloc64_Immediate     the same with obj_stat_cache = false: every
//                             statistic delta applied at once (before it).
//   BM_Obj4K_PerCpu           all allowed CPUs, one thread each (pinned),
//                             Charge(4096) + Uncharge(4096) in one group:
//                             the per-CPU object stock.
//   BM_Obj4K_SharedPool       the same with obj_stock = false: every object
//                             goes through the objcg's shared
//                             nr_charged_bytes (the kernel's v1 -> v2 step).
//
// Flags (besides Google Benchmark's own --benchmark_*):
//   --json=<path>  also write the ratio report as JSON to <path>.
//   --no_pin       do not pin the threads of multi-threaded benchmarks.
// Defaults injected unless given: --benchmark_repetitions=5
//   --benchmark_min_time=0.2 --benchmark_enable_random_interleaving=true
//
// Ratios use medians over repetitions. Targets are reported, never
// asserted. Fast paths have extern "C" noinline wrappers (umemcg_bench_*).

#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ratio_report.h"
#include "umemcg/umemcg.h"

namespace {

using umemcg::Bytes;
using umemcg::Controller;
using umemcg::ControllerOptions;
using umemcg::GroupRef;
using umemcg::ObjCgroup;
using umemcg::ObjCgroupRef;
using umemcg::bench::Ratio;
using umemcg::bench::RatioReporter;
using umemcg::bench::Report;
using umemcg::bench::Sample;

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "obj_benchmark: %s\n", what);
  std::abort();
}

// One controller with one tenant under the root.
struct Tenant {
  explicit Tenant(ControllerOptions options) {
    auto c = Controller::Create(std::move(options));
    if (!c.ok()) Die("cannot create the controller");
    ctrl = std::move(c).value();
    group = ctrl->CreateGroup(ctrl->root(), "tenant").value();
    objcg = group->GetObjCgroup();
  }
  ~Tenant() {
    objcg.reset();
    group.reset();
  }
  std::unique_ptr<Controller> ctrl;
  GroupRef group;
  ObjCgroupRef objcg;
};

ControllerOptions Options(bool stat_cache, bool stock) {
  ControllerOptions o;
  o.obj_stat_cache = stat_cache;
  o.obj_stock = stock;
  return o;
}

struct Fixtures {
  Tenant cached{Options(true, true)};
  Tenant immediate{Options(false, true)};
  Tenant shared_pool{Options(true, false)};
};
Fixtures* g_fx = nullptr;

bool g_pin = true;
std::vector<int> g_allowed_cpus;

}  // namespace

// ---- Fast paths, out of line so their code can be reviewed ----

extern "C" {

__attribute__((noinline)) void umemcg_bench_malloc64() {
  void* p = std::malloc(64);
  benchmark::DoNotOptimize(p);
  std::free(p);
}

__attribute__((noinline)) bool umemcg_bench_malloc64_accounted(ObjCgroup* o) {
  if (!o->Charge(Bytes(64)).ok()) return false;
  void* p = std::malloc(64);
  benchmark::DoNotOptimize(p);
  std::free(p);
  o->Uncharge(Bytes(64));
  return true;
}

__attribute__((noinline)) bool umemcg_bench_obj4k_pair(ObjCgroup* o) {
  if (!o->Charge(Bytes(4096)).ok()) return false;
  o->Uncharge(Bytes(4096));
  return true;
}

}  // extern "C"

namespace {

void BM_Malloc64(benchmark::State& state) {
  for (auto _ : state) umemcg_bench_malloc64();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Malloc64)->UseRealTime();

void Malloc64Accounted(benchmark::State& state, Tenant* t) {
  ObjCgroup* o = t->objcg.get();
  for (auto _ : state) {
    if (!umemcg_bench_malloc64_accounted(o)) Die("charge failed");
  }
  state.SetItemsProcessed(state.iterations());
}
void BM_Malloc64_Cached(benchmark::State& state) {
  Malloc64Accounted(state, &g_fx->cached);
}
void BM_Malloc64_Immediate(benchmark::State& state) {
  Malloc64Accounted(state, &g_fx->immediate);
}
BENCHMARK(BM_Malloc64_Cached)->UseRealTime();
BENCHMARK(BM_Malloc64_Immediate)->UseRealTime();

void Obj4K(benchmark::State& state, Tenant* t) {
  umemcg::bench::ScopedPin pin(state, g_allowed_cpus, g_pin);
  ObjCgroup* o = t->objcg.get();
  for (auto _ : state) {
    if (!umemcg_bench_obj4k_pair(o)) Die("charge failed");
  }
  state.SetItemsProcessed(state.iterations());
}
void BM_Obj4K_PerCpu(benchmark::State& state) { Obj4K(state, &g_fx->cached); }
void BM_Obj4K_SharedPool(benchmark::State& state) {
  Obj4K(state, &g_fx->shared_pool);
}

Report BuildReport(const RatioReporter& rep, const Controller& ctrl,
                   int threads) {
  Report r;
  r.nr_cpus = ctrl.info().nr_cpus;
  r.allowed_cpus = static_cast<int>(g_allowed_cpus.size());
  r.cpu_source = umemcg::CpuSourceName(ctrl.info().cpu_source);
  const std::string t = "/threads:" + std::to_string(threads);
  const std::vector<std::string> keys = {
      "BM_Malloc64/threads:1", "BM_Malloc64_Cached/threads:1",
      "BM_Malloc64_Immediate/threads:1", "BM_Obj4K_PerCpu" + t,
      "BM_Obj4K_SharedPool" + t};
  std::map<std::string, Sample> m;
  for (const std::string& k : keys) {
    Sample s;
    if (rep.Get(k, &s)) {
      m[k] = s;
      r.medians.emplace_back(k, s);
      r.reps.push_back(rep.Repetitions(k));
    }
  }
  auto get = [&](const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? Sample{NAN, NAN, NAN, 1} : it->second;
  };
  auto lowest = [](double a, double b) { return std::fmin(a, b); };
  const Sample un = get(keys[0]), ca = get(keys[1]), im = get(keys[2]),
               pc = get(keys[3]), sp = get(keys[4]);
  r.ratios.push_back({"accounted_cached_vs_unaccounted",
                      "time(Malloc64_Cached) / time(Malloc64)",
                      ca.ns_per_op / un.ns_per_op, 2.0, true, "x",
                      lowest(ca.on_cpu(), un.on_cpu())});
  r.ratios.push_back({"cached_vs_immediate_stats",
                      "time(Malloc64_Cached) / time(Malloc64_Immediate)",
                      ca.ns_per_op / im.ns_per_op, 0.85, true, "x",
                      lowest(ca.on_cpu(), im.on_cpu())});
  r.ratios.push_back({"percpu_vs_shared_pool_4k",
                      "items/s(Obj4K_PerCpu) / items/s(Obj4K_SharedPool), " +
                          std::to_string(threads) + " threads",
                      pc.items_per_s / sp.items_per_s, 5.0, false, "x",
                      lowest(pc.on_cpu(), sp.on_cpu())});
  r.ratios.push_back({"accounting_overhead_ns",
                      "time(Malloc64_Cached) - time(Malloc64)",
                      ca.ns_per_op - un.ns_per_op, NAN, false, "ns"});
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  if (!umemcg::bench::InitBenchmarks(argc, argv, &json_path,
                                     umemcg::bench::NoPinFlag(&g_pin))) {
    return 1;
  }
  g_allowed_cpus = umemcg::bench::AllowedCpus();
  const int threads = std::max<int>(1, static_cast<int>(g_allowed_cpus.size()));

  auto fx = std::make_unique<Fixtures>();
  g_fx = fx.get();
  benchmark::RegisterBenchmark("BM_Obj4K_PerCpu", BM_Obj4K_PerCpu)
      ->UseRealTime()
      ->Threads(threads);
  benchmark::RegisterBenchmark("BM_Obj4K_SharedPool", BM_Obj4K_SharedPool)
      ->UseRealTime()
      ->Threads(threads);

  const umemcg::ControllerInfo& info = fx->cached.ctrl->info();
  std::printf("machine: %d CPUs (%d allowed), cpu source: %s\n", info.nr_cpus,
              threads, umemcg::CpuSourceName(info.cpu_source));
  std::fflush(stdout);

  RatioReporter reporter(umemcg::bench::ConsoleFormat());
  benchmark::RunSpecifiedBenchmarks(&reporter);

  const Report report = BuildReport(reporter, *fx->cached.ctrl, threads);
  umemcg::bench::Publish(report, json_path);
  g_fx = nullptr;
  fx.reset();
  benchmark::Shutdown();
  return 0;
}

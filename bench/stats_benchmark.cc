// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Statistics benchmarks, with a ratio report against the targets of the
// statistics issue (docs/benchmarks.md: pagefault and statread).
//
//   BM_AtomicAdd          fetch_add(1) on a private, cache-line aligned
//                         counter: the reference.
//   BM_ModState           Group::ModState(kFileMapped, +1) on the leaf of
//                         a 3-level tree (root/a/b/c) that is already on
//                         this CPU's updated tree (the pf3 hot path).
//                         Default controller: per-group thresholds,
//                         periodic flusher every 2 s, the rseq commit where
//                         available (ControllerInfo::stats_rseq).
//   BM_ModStateLocked     The same with ControllerOptions::stats_rseq =
//                         false: the per-CPU try-lock path (one xchg and a
//                         release store per update).
//   BM_RseqFloorAdd       The floor under BM_ModState: a per-CPU counter
//                         add in one out-of-line rseq sequence with only
//                         the CPU-id check (rseq_floor.h), called through
//                         a wrapper as ModState is.
//   Scenario (not Google Benchmark; run after the micro-benchmarks):
//                         10,000 groups (100 parents x 99 leaves + the
//                         parents), W writer threads each calling ModState
//                         on 10 leaves round-robin (the same 10 leaves for
//                         every writer), one reader reading memory.stat of a
//                         random group every 100 us and recording its
//                         latency. Run for both flush modes
//                         (kPerGroupSubtree vs kGlobalWholeTree), twice
//                         each, interleaved; the ratio report takes the
//                         p99 read latency and the writers' update
//                         throughput of each mode.
//
// Flags (besides Google Benchmark's own --benchmark_*):
//   --json=<path>          also write the ratio report as JSON to <path>.
//   --scenario_seconds=<s> length of one scenario run (default 2.5).
//   --writers=<n>          writer threads (default: allowed CPUs - 1, at
//                          least 1, so the reader keeps a CPU; pinned one
//                          per CPU from the second allowed CPU on).
// Defaults injected unless given on the command line:
//   --benchmark_repetitions=5 --benchmark_min_time=0.2
//   --benchmark_enable_random_interleaving=true
//
// Targets are reported, never asserted: the program exits 0 on a MISS.
// Every fast path has an extern "C" noinline wrapper (umemcg_bench_*) so its
// code can be read with `objdump -d --disassemble=umemcg_bench_...`. The
// wrappers and the benchmark bodies start a 64-byte line each, so that a
// change elsewhere in this file cannot move them within one (see
// charge_benchmark.cc and docs/benchmarks.md, Code placement).

#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ratio_report.h"
#include "rseq_floor.h"
#include "umemcg/umemcg.h"

namespace {

using umemcg::Controller;
using umemcg::ControllerOptions;
using umemcg::Group;
using umemcg::GroupRef;
using umemcg::StatItem;
using umemcg::StatsFlushMode;
using umemcg::bench::Ratio;
using umemcg::bench::RatioReporter;
using umemcg::bench::Report;
using umemcg::bench::Sample;

}  // namespace

// ---- Fast paths, out of line so their code can be reviewed ----

struct alignas(64) UmemcgStatsBenchCounter {
  std::atomic<int64_t> value{0};
};

extern "C" {

__attribute__((noinline, aligned(64))) void umemcg_bench_atomic_add(
    std::atomic<int64_t>* counter) {
  counter->fetch_add(1);
}

__attribute__((noinline, aligned(64))) bool umemcg_bench_mod_state(Group* g) {
  return g->ModState(StatItem::kFileMapped, 1);
}

// The floor (rseq_floor.h) in ModState's shape: a wrapper calling one
// out-of-line rseq add with only the CPU-id bound check.
__attribute__((noinline, aligned(64))) bool umemcg_bench_rseq_floor_add(
    umemcg::bench::RseqFloor* f) {
  return f->Add(1);
}

// The same call (the locked controller's group): a second symbol so that
// both can be annotated apart in a profile.
__attribute__((noinline, aligned(64))) bool umemcg_bench_mod_state_locked(
    Group* g) {
  return g->ModState(StatItem::kFileMapped, 1);
}

}  // extern "C"

namespace {

std::vector<int> g_allowed_cpus;
double g_scenario_seconds = 2.5;
int g_writers = 0;

void Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "stats_benchmark: %s\n", what);
  std::abort();
}

// ---- Micro-benchmarks ----

// A controller with the tree root/a/b/c; `leaf` is c.
struct Tree {
  std::unique_ptr<Controller> ctrl;
  GroupRef leaf;
  explicit Tree(bool rseq) {
    ControllerOptions o;
    o.stats_rseq = rseq;
    auto c = Controller::Create(o);
    if (!c.ok()) Die("controller");
    ctrl = std::move(c).value();
    Group* parent = &ctrl->root();
    for (const char* name : {"a", "b", "c"}) {
      auto g = ctrl->CreateGroup(*parent, name);
      if (!g.ok()) Die("group");
      leaf = g.value();
      parent = leaf.get();
    }
  }
};

struct MicroFixture {
  UmemcgStatsBenchCounter counter;
  Tree rseq{true};
  Tree locked{false};
};
MicroFixture* g_micro = nullptr;

[[gnu::aligned(64)]] void BM_AtomicAdd(benchmark::State& state) {
  std::atomic<int64_t>* c = &g_micro->counter.value;
  for (auto _ : state) umemcg_bench_atomic_add(c);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AtomicAdd)->UseRealTime();

[[gnu::aligned(64)]] void BM_ModState(benchmark::State& state) {
  Group* g = g_micro->rseq.leaf.get();
  if (!umemcg_bench_mod_state(g)) Die("ModState refused");  // now updated
  for (auto _ : state) umemcg_bench_mod_state(g);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ModState)->UseRealTime();

[[gnu::aligned(64)]] void BM_ModStateLocked(benchmark::State& state) {
  Group* g = g_micro->locked.leaf.get();
  if (!umemcg_bench_mod_state_locked(g)) Die("ModState refused");
  for (auto _ : state) umemcg_bench_mod_state_locked(g);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ModStateLocked)->UseRealTime();

// The floor under BM_ModState (rseq_floor.h). An aborted sequence is
// counted, not fatal.
[[gnu::aligned(64)]] void BM_RseqFloorAdd(benchmark::State& state) {
  static umemcg::bench::RseqFloor floor;
  if (!floor.available()) {
    state.SkipWithError("rseq not registered in this process");
    return;
  }
  int64_t failed = 0;
  for (auto _ : state) failed += !umemcg_bench_rseq_floor_add(&floor);
  state.counters["failed"] = static_cast<double>(failed);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RseqFloorAdd)->UseRealTime()->Threads(1);

// ---- The read-latency scenario ----

struct ScenarioResult {
  double p50_us = 0;
  double p99_us = 0;
  double p999_us = 0;
  double max_us = 0;
  double updates_per_s = 0;
  uint64_t reads = 0;
};

ScenarioResult RunScenario(StatsFlushMode mode, double seconds, int writers) {
  ControllerOptions o;
  o.stats_flush_mode = mode;
  auto c = Controller::Create(o);
  if (!c.ok()) Die("controller");
  std::unique_ptr<Controller> ctrl = std::move(c).value();
  std::vector<GroupRef> groups;  // every group but the root
  std::vector<Group*> hot;
  groups.reserve(10000);
  char name[32];
  for (int p = 0; p < 100; ++p) {
    std::snprintf(name, sizeof(name), "p%d", p);
    GroupRef parent = ctrl->CreateGroup(ctrl->root(), name).value();
    groups.push_back(parent);
    for (int l = 0; l < 99; ++l) {
      std::snprintf(name, sizeof(name), "l%d", l);
      groups.push_back(ctrl->CreateGroup(*parent, name).value());
      // Ten hot leaves spread over ten parents.
      if (l == 0 && p % 10 == 0) hot.push_back(groups.back().get());
    }
  }
  std::atomic<bool> stop{false};
  std::atomic<int> ready{0};
  std::vector<uint64_t> counts(static_cast<size_t>(writers), 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      if (g_allowed_cpus.size() > 1) {
        Pin(g_allowed_cpus[(1 + static_cast<size_t>(w)) %
                           g_allowed_cpus.size()]);
      }
      ready.fetch_add(1);
      uint64_t n = 0;
      size_t i = static_cast<size_t>(w);
      while (!stop.load(std::memory_order_relaxed)) {
        for (int k = 0; k < 64; ++k) {
          hot[i % hot.size()]->ModState(StatItem::kAnon, (n & 1) ? -1 : 2);
          ++i;
          ++n;
        }
      }
      counts[static_cast<size_t>(w)] = n;
    });
  }
  while (ready.load() < writers) std::this_thread::yield();
  if (!g_allowed_cpus.empty()) Pin(g_allowed_cpus[0]);
  std::mt19937 rng(12345);
  std::vector<double> lat_us;
  lat_us.reserve(static_cast<size_t>(seconds * 10000) + 16);
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  auto next = start;
  size_t bytes = 0;
  while (std::chrono::steady_clock::now() < end) {
    next += std::chrono::microseconds(100);
    std::this_thread::sleep_until(next);
    Group* g = groups[rng() % groups.size()].get();
    const auto t0 = std::chrono::steady_clock::now();
    bytes += g->MemoryStat().size();
    const auto t1 = std::chrono::steady_clock::now();
    lat_us.push_back(
        std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  stop.store(true);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  for (auto& t : threads) t.join();
  benchmark::DoNotOptimize(bytes);
  ScenarioResult r;
  uint64_t total = 0;
  for (uint64_t n : counts) total += n;
  r.updates_per_s = static_cast<double>(total) / elapsed;
  std::sort(lat_us.begin(), lat_us.end());
  r.reads = lat_us.size();
  auto pct = [&](double q) {
    if (lat_us.empty()) return static_cast<double>(NAN);
    const size_t i =
        std::min(lat_us.size() - 1, static_cast<size_t>(q * lat_us.size()));
    return lat_us[i];
  };
  r.p50_us = pct(0.50);
  r.p99_us = pct(0.99);
  r.p999_us = pct(0.999);
  r.max_us = lat_us.empty() ? NAN : lat_us.back();
  // Restore the main thread's affinity for what follows.
  if (!g_allowed_cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : g_allowed_cpus) CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  groups.clear();
  return r;
}

void PrintScenario(const char* name, const ScenarioResult& r) {
  std::printf(
      "scenario %-18s reads %6llu  p50 %8.2f us  p99 %8.2f us  p99.9 %8.2f "
      "us  max %9.2f us  updates %.3g/s\n",
      name, static_cast<unsigned long long>(r.reads), r.p50_us, r.p99_us,
      r.p999_us, r.max_us, r.updates_per_s);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  auto own = [](std::string_view a) {
    if (a.starts_with("--scenario_seconds=")) {
      g_scenario_seconds = std::atof(a.data() + 19);
      return true;
    }
    if (a.starts_with("--writers=")) {
      g_writers = std::atoi(a.data() + 10);
      return true;
    }
    return false;
  };
  if (!umemcg::bench::InitBenchmarks(argc, argv, &json_path, own)) return 1;
  g_allowed_cpus = umemcg::bench::AllowedCpus();
  if (g_writers <= 0) {
    g_writers = std::max<int>(1, static_cast<int>(g_allowed_cpus.size()) - 1);
  }

  auto micro = std::make_unique<MicroFixture>();
  g_micro = micro.get();
  const umemcg::ControllerInfo info = micro->rseq.ctrl->info();
  std::printf(
      "machine: %d CPUs (%zu allowed), cpu source: %s, stats_rseq: %s, "
      "writers: %d\n",
      info.nr_cpus, g_allowed_cpus.size(),
      umemcg::CpuSourceName(info.cpu_source), info.stats_rseq ? "on" : "off",
      g_writers);
  std::fflush(stdout);

  RatioReporter reporter(umemcg::bench::ConsoleFormat());
  benchmark::RunSpecifiedBenchmarks(&reporter);

  // Interleaved: A B A B, so slow drifts of the machine hit both modes.
  std::vector<ScenarioResult> per_group;
  std::vector<ScenarioResult> global;
  for (int round = 0; round < 2; ++round) {
    per_group.push_back(RunScenario(StatsFlushMode::kPerGroupSubtree,
                                    g_scenario_seconds, g_writers));
    PrintScenario("per_group_subtree", per_group.back());
    global.push_back(RunScenario(StatsFlushMode::kGlobalWholeTree,
                                 g_scenario_seconds, g_writers));
    PrintScenario("global_whole_tree", global.back());
  }
  auto median = [](const std::vector<ScenarioResult>& v, auto field) {
    std::vector<double> x;
    for (const ScenarioResult& r : v) x.push_back(r.*field);
    return umemcg::bench::Median(x);
  };

  Report r;
  r.nr_cpus = info.nr_cpus;
  r.allowed_cpus = static_cast<int>(g_allowed_cpus.size());
  r.cpu_source = umemcg::CpuSourceName(info.cpu_source);
  for (const char* k :
       {"BM_AtomicAdd/threads:1", "BM_ModState/threads:1",
        "BM_ModStateLocked/threads:1", "BM_RseqFloorAdd/threads:1"}) {
    Sample s;
    if (reporter.Get(k, &s)) {
      r.medians.emplace_back(k, s);
      r.reps.push_back(reporter.Repetitions(k));
    }
  }
  Sample atomic_add;
  Sample mod_state;
  const bool have = reporter.Get("BM_AtomicAdd/threads:1", &atomic_add) &&
                    reporter.Get("BM_ModState/threads:1", &mod_state);
  r.ratios.push_back(
      {"mod_state_vs_atomic_add",
       std::string("time(ModState, 3-level leaf, stats_rseq ") +
           (info.stats_rseq ? "on" : "off") + ") / time(AtomicAdd)",
       have ? mod_state.ns_per_op / atomic_add.ns_per_op : NAN, 0.75, true});
  if (have) {
    r.ratios.back().on_cpu = std::min(mod_state.on_cpu(), atomic_add.on_cpu());
  }
  r.ratios.push_back(
      {"mod_state_vs_atomic_add_cpu",
       "cpu_time/op(ModState) / cpu_time/op(AtomicAdd): without preemption",
       have ? mod_state.cpu_ns_per_op / atomic_add.cpu_ns_per_op : NAN, NAN,
       false});
  Sample locked;
  const bool have_locked =
      have && reporter.Get("BM_ModStateLocked/threads:1", &locked);
  r.ratios.push_back(
      {"mod_state_locked_vs_atomic_add",
       "time(ModState, try-lock path: stats_rseq = false) / time(AtomicAdd)",
       have_locked ? locked.ns_per_op / atomic_add.ns_per_op : NAN, NAN,
       false});
  r.ratios.push_back(
      {"mod_state_rseq_vs_locked",
       "time(ModState, rseq) / time(ModState, try-lock path)",
       have_locked ? mod_state.ns_per_op / locked.ns_per_op : NAN, NAN, false});
  // The floor: what any out-of-line rseq add of ModState's shape costs
  // here, and what ModState's own checks add to it.
  Sample floor;
  const bool have_floor =
      have && reporter.Get("BM_RseqFloorAdd/threads:1", &floor);
  r.ratios.push_back(
      {"rseq_floor_add_vs_atomic_add",
       "time(RseqFloorAdd) / time(AtomicAdd): the least an rseq add of "
       "ModState's shape can cost here",
       have_floor ? floor.ns_per_op / atomic_add.ns_per_op : NAN, NAN, false});
  if (have_floor) {
    r.ratios.back().on_cpu = std::min(floor.on_cpu(), atomic_add.on_cpu());
  }
  r.ratios.push_back(
      {"mod_state_vs_rseq_floor_add",
       "time(ModState) / time(RseqFloorAdd): ModState's checks over the "
       "floor",
       have_floor ? mod_state.ns_per_op / floor.ns_per_op : NAN, NAN, false});
  if (have_floor) {
    r.ratios.back().on_cpu = std::min(mod_state.on_cpu(), floor.on_cpu());
  }
  const double p99_pg = median(per_group, &ScenarioResult::p99_us);
  const double p99_gl = median(global, &ScenarioResult::p99_us);
  const double up_pg = median(per_group, &ScenarioResult::updates_per_s);
  const double up_gl = median(global, &ScenarioResult::updates_per_s);
  r.ratios.push_back({"read_p99_global_vs_per_group",
                      "p99 memory.stat latency: global+whole-tree / "
                      "per-group+subtree",
                      p99_gl / p99_pg, 10.0, false});
  r.ratios.push_back({"updates_per_group_vs_global",
                      "update throughput: per-group+subtree / "
                      "global+whole-tree (within 5%: >= 0.95)",
                      up_pg / up_gl, 0.95, false});
  r.ratios.push_back({"updates_global_vs_per_group",
                      "update throughput: global / per-group (within 5%: "
                      ">= 0.95)",
                      up_gl / up_pg, 0.95, false});
  r.ratios.push_back({"read_p99_per_group_us",
                      "p99 memory.stat latency, per-group+subtree", p99_pg, NAN,
                      false, "us"});
  r.ratios.push_back({"read_p99_global_us",
                      "p99 memory.stat latency, global+whole-tree", p99_gl, NAN,
                      false, "us"});
  r.ratios.push_back(
      {"read_p999_per_group_us", "p99.9 memory.stat latency, per-group+subtree",
       median(per_group, &ScenarioResult::p999_us), NAN, false, "us"});
  r.ratios.push_back(
      {"read_p999_global_us", "p99.9 memory.stat latency, global+whole-tree",
       median(global, &ScenarioResult::p999_us), NAN, false, "us"});
  umemcg::bench::Publish(r, json_path);
  g_micro = nullptr;
  micro.reset();
  benchmark::Shutdown();
  return 0;
}

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Micro-benchmarks of the charge path (Google Benchmark), with a ratio
// report against the targets of the charge-batching issue. All benchmarks
// run in one binary, side by side (repetitions randomly interleaved), so the
// ratios compare numbers taken under the same machine noise.
//
//   BM_AtomicPair            fetch_add(1) + fetch_sub(1) on a private,
//                            cache-line aligned counter: the floor.
//   BM_ThreadLocalPair       plain thread-local add + sub: the
//                            no-accounting ceiling.
//   BM_StockHitPair          Group::TryCharge(1) + Group::Uncharge(1) on a
//                            child of the root; after warm-up every op hits
//                            this CPU's stock. 1 and 2 threads, same group.
//                            The hit commits with rseq where available
//                            (ControllerInfo::stock_rseq).
//   BM_StockHitPairTryLock   the same with ControllerOptions::stock_rseq =
//                            false: the hit under the shard's try-lock.
//   BM_RseqFloorPair         the floor under BM_StockHitPair: a per-CPU
//                            counter +1 and -1, each one out-of-line rseq
//                            sequence with only the CPU-id check
//                            (rseq_floor.h), through one wrapper.
//   BM_AsymmetricPair/<v>    the netperf TCP_SENDFILE analog
//                            (docs/benchmarks.md: sendfile, P = 1): thread 0
//                            charges 3 pages per message to the leaf of
//                            root -> c1 -> c2 -> c3, thread 1 uncharges
//                            them through its own CPU's stock. Variants:
//                            batch64, batch32 (ControllerOptions::batch)
//                            and naive (a bare PageCounter chain: one
//                            atomic add per level for every message).
//   BM_TryCharge_Slow/<d>    a charge that always misses the stock (batch 1,
//                            3 pages) plus its direct uncharge, on a group at
//                            depth d: the cost of the counter walks.
//
// Multi-threaded benchmarks pin thread i to the i-th CPU this process may
// run on (so the threads use distinct stock shards), unless --no_pin.
//
// Flags (besides Google Benchmark's own --benchmark_*):
//   --json=<path>  also write the ratio report as JSON to <path>.
// Environment: UMEMCG_PROFILE_RATE=BYTES sets the heap profiler's interval
// on every fixture's controller (0: sampling off).
//   --no_pin       do not pin the threads of multi-threaded benchmarks.
// Defaults injected unless given on the command line:
//   --benchmark_repetitions=5 --benchmark_min_time=0.2
//   --benchmark_enable_random_interleaving=true
//
// The ratios use MEDIANS over the repetitions (computed here from the
// per-repetition runs). Targets are reported, never asserted: the program
// exits 0 on a MISS.
//
// Every fast path has an extern "C" noinline wrapper (umemcg_bench_*) so its
// code can be read with `objdump -d --disassemble=umemcg_bench_...`.

#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "port/try_lock.h"  // internal::CpuRelax
#include "ratio_report.h"
#include "rseq_floor.h"
#include "umemcg/heap_profile.h"
#include "umemcg/umemcg.h"

namespace {

using umemcg::Controller;
using umemcg::ControllerOptions;
using umemcg::Group;
using umemcg::GroupRef;
using umemcg::PageCounter;
using umemcg::Pages;
using umemcg::bench::Ratio;
using umemcg::bench::RatioReporter;
using umemcg::bench::Report;
using umemcg::bench::Sample;

constexpr int kMaxThreads = 64;
// Pages per message in the asymmetric pair: ceil(10 KiB / 4 KiB).
constexpr uint64_t kPagesPerMessage = 3;
// The producer publishes its count (and the consumer its progress) every
// this many messages: one shared cache-line transfer per 16 messages.
constexpr uint64_t kPublishEvery = 16;
// The "socket buffer": the producer waits while more than this many
// messages are unconsumed.
constexpr uint64_t kMaxBacklog = 1024;

}  // namespace

// ---- Fast paths, out of line so their code can be reviewed ----
//
// Each starts a 64-byte line (as Group::TryCharge and Group::Uncharge do):
// otherwise an unrelated change elsewhere in this file moves them within
// a line and the pairs read differently (docs/benchmarks.md, Code
// placement: a change of a default in ControllerOptions moved the
// stock-hit wrapper from 16 to 48 bytes past a line, and BM_StockHitPair
// read 12% slower over a stack sweep with identical instructions). The
// benchmark bodies holding the timed loops start a line too.

// Private per-thread counter for the floor reference, on its own line.
struct alignas(64) UmemcgBenchPaddedCounter {
  std::atomic<int64_t> value{0};
};

thread_local int64_t umemcg_bench_tls_counter = 0;

extern "C" {

__attribute__((noinline, aligned(64))) void umemcg_bench_atomic_pair(
    std::atomic<int64_t>* counter) {
  counter->fetch_add(1);
  counter->fetch_sub(1);
}

__attribute__((noinline, aligned(64))) void umemcg_bench_thread_local_pair() {
  int64_t& c = umemcg_bench_tls_counter;
  c += 1;
  benchmark::ClobberMemory();  // force the store and the reload
  c -= 1;
  benchmark::ClobberMemory();
}

// TryCharge(1) + Uncharge(1): both hit this CPU's stock after warm-up.
__attribute__((noinline, aligned(64))) bool umemcg_bench_stock_hit_pair(
    Group* g) {
  if (!g->TryCharge(Pages(1)).ok()) return false;
  g->Uncharge(Pages(1));
  return true;
}
// The same function body, called on a controller without rseq commits.
__attribute__((noinline, aligned(64))) bool umemcg_bench_stock_hit_pair_trylock(
    Group* g) {
  if (!g->TryCharge(Pages(1)).ok()) return false;
  g->Uncharge(Pages(1));
  return true;
}

// The asymmetric pair's two halves.
__attribute__((noinline, aligned(64))) bool umemcg_bench_charge_message(
    Group* leaf) {
  return leaf->TryCharge(Pages(kPagesPerMessage)).ok();
}
__attribute__((noinline, aligned(64))) void umemcg_bench_uncharge_message(
    Group* leaf) {
  leaf->Uncharge(Pages(kPagesPerMessage));
}
__attribute__((noinline, aligned(64))) bool umemcg_bench_naive_charge_message(
    PageCounter* leaf) {
  return leaf->TryCharge(Pages(kPagesPerMessage), nullptr);
}
__attribute__((noinline, aligned(64))) void umemcg_bench_naive_uncharge_message(
    PageCounter* leaf) {
  (void)leaf->Uncharge(Pages(kPagesPerMessage));
}

// A charge larger than the batch (always misses the stock: the counter
// walk, then the memory.high walk) and its direct uncharge (another walk).
__attribute__((noinline, aligned(64))) bool umemcg_bench_slow_pair(Group* g) {
  if (!g->TryCharge(Pages(3)).ok()) return false;
  g->UnchargeDirect(Pages(3));
  return true;
}

}  // extern "C"

namespace {

// ---- Fixtures, built once in main() before any benchmark runs ----

// A controller and a chain of groups root -> c1 -> ... -> c<depth>.
struct Chain {
  std::unique_ptr<Controller> ctrl;
  std::vector<GroupRef> groups;  // groups[k-1] is at depth k

  Chain(ControllerOptions options, int depth) {
    auto c = Controller::Create(std::move(options));
    if (!c.ok()) {
      std::fprintf(stderr, "Controller::Create: %s\n",
                   c.status().ToString().c_str());
      std::exit(1);
    }
    ctrl = std::move(c).value();
    Group* parent = &ctrl->root();
    for (int k = 1; k <= depth; ++k) {
      char name[16];
      std::snprintf(name, sizeof(name), "c%d", k);
      auto g = ctrl->CreateGroup(*parent, name);
      if (!g.ok()) {
        std::fprintf(stderr, "CreateGroup: %s\n",
                     g.status().ToString().c_str());
        std::exit(1);
      }
      groups.push_back(std::move(g).value());
      parent = groups.back().get();
    }
  }
  ~Chain() {
    groups.clear();  // every GroupRef before the controller
    ctrl.reset();
  }
  Group* at_depth(int k) const { return groups[k - 1].get(); }
  Group* leaf() const { return groups.back().get(); }
};

// The naive variant: the same 3-level tree (and the root's counter) as
// bare PageCounters, with the same protection support as a Group's.
struct NaiveChain {
  PageCounter root{nullptr};
  PageCounter l1{&root};
  PageCounter l2{&l1};
  PageCounter l3{&l2};
};

// The asymmetric pair's "socket buffer": message counts, one line each.
struct Channel {
  alignas(64) std::atomic<uint64_t> published{0};  // written by the producer
  alignas(64) std::atomic<uint64_t> consumed{0};   // written by the consumer
};

ControllerOptions TryLockOnly() {
  ControllerOptions o;
  o.stock_rseq = false;
  return o;
}

struct Fixtures {
  std::unique_ptr<UmemcgBenchPaddedCounter[]> counters{
      new UmemcgBenchPaddedCounter[kMaxThreads]};
  Chain stock_hit{ControllerOptions{}, 1};
  Chain stock_hit_trylock{TryLockOnly(), 1};
  umemcg::bench::RseqFloor floor;
  Chain asym64{ControllerOptions{.batch = 64}, 3};
  Chain asym32{ControllerOptions{.batch = 32}, 3};
  NaiveChain naive;
  Chain slow{ControllerOptions{.batch = 1}, 4};
  Channel channel;
};

Fixtures* g_fx = nullptr;
bool g_pin = true;
std::vector<int> g_allowed_cpus;  // the process's affinity at startup

// Spin briefly, then yield: the partner thread may share our CPU with the
// rest of the machine's load.
inline void Backoff(int& spins) {
  if (++spins < 512) {
    umemcg::internal::CpuRelax();
  } else {
    std::this_thread::yield();
  }
}

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "charge_benchmark: %s\n", what);
  std::abort();
}

// ---- Benchmarks ----

[[gnu::aligned(64)]] void BM_AtomicPair(benchmark::State& state) {
  umemcg::bench::ScopedPin pin(state, g_allowed_cpus, g_pin);
  std::atomic<int64_t>* c = &g_fx->counters[state.thread_index()].value;
  for (auto _ : state) umemcg_bench_atomic_pair(c);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AtomicPair)->UseRealTime()->Threads(1)->Threads(2);

[[gnu::aligned(64)]] void BM_ThreadLocalPair(benchmark::State& state) {
  for (auto _ : state) umemcg_bench_thread_local_pair();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ThreadLocalPair)->UseRealTime();

[[gnu::aligned(64)]] void BM_StockHitPair(benchmark::State& state) {
  umemcg::bench::ScopedPin pin(state, g_allowed_cpus, g_pin);
  Group* g = g_fx->stock_hit.leaf();
  // Warm-up, outside the timed loop: the first charge on this CPU misses
  // and fills the stock with batch - 1 pages.
  if (!umemcg_bench_stock_hit_pair(g)) Die("stock-hit warm-up charge failed");
  for (auto _ : state) {
    if (!umemcg_bench_stock_hit_pair(g)) Die("stock-hit charge failed");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StockHitPair)->UseRealTime()->Threads(1)->Threads(2);

[[gnu::aligned(64)]] void BM_StockHitPairTryLock(benchmark::State& state) {
  umemcg::bench::ScopedPin pin(state, g_allowed_cpus, g_pin);
  Group* g = g_fx->stock_hit_trylock.leaf();
  if (!umemcg_bench_stock_hit_pair_trylock(g)) Die("warm-up charge failed");
  for (auto _ : state) {
    if (!umemcg_bench_stock_hit_pair_trylock(g)) Die("charge failed");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StockHitPairTryLock)->UseRealTime();

// The floor (rseq_floor.h): a per-CPU counter +1 then -1, each an
// out-of-line rseq sequence with only the CPU-id bound check, called
// through one wrapper like BM_StockHitPair. An aborted sequence is
// retried by the next iteration (rare; counted, not fatal).
[[gnu::aligned(64)]] void BM_RseqFloorPair(benchmark::State& state) {
  umemcg::bench::ScopedPin pin(state, g_allowed_cpus, g_pin);
  umemcg::bench::RseqFloor& f = g_fx->floor;
  if (!f.available()) {
    state.SkipWithError("rseq not registered in this process");
    return;
  }
  int64_t failed = 0;
  for (auto _ : state) failed += !f.Pair();
  state.counters["failed"] = static_cast<double>(failed);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RseqFloorPair)->UseRealTime()->Threads(1);

// Thread 0 produces (charges), thread 1 consumes (uncharges) the same
// messages; both run state.max_iterations iterations.
template <typename Charge, typename Uncharge, typename Balanced>
void AsymmetricPair(benchmark::State& state, Charge charge, Uncharge uncharge,
                    Balanced balanced) {
  if (state.threads() != 2) Die("BM_AsymmetricPair needs 2 threads");
  umemcg::bench::ScopedPin pin(state, g_allowed_cpus, g_pin);
  Channel& ch = g_fx->channel;
  const uint64_t total = static_cast<uint64_t>(state.max_iterations);
  if (state.thread_index() == 0) {
    // Before the start barrier: thread 1 reads the channel only inside the
    // timed loop.
    ch.published.store(0, std::memory_order_relaxed);
    ch.consumed.store(0, std::memory_order_relaxed);
    uint64_t sent = 0;
    uint64_t consumed_seen = 0;
    for (auto _ : state) {
      for (int spins = 0; sent - consumed_seen >= kMaxBacklog;) {
        consumed_seen = ch.consumed.load(std::memory_order_acquire);
        if (sent - consumed_seen >= kMaxBacklog) Backoff(spins);
      }
      if (!charge()) Die("asymmetric charge failed");
      ++sent;
      // Release: the consumer uncharges only what was charged before.
      // The last message is published inside the loop: the end barrier
      // would otherwise wait for a consumer waiting for it.
      if (sent % kPublishEvery == 0 || sent == total) {
        ch.published.store(sent, std::memory_order_release);
      }
    }
    state.SetItemsProcessed(state.iterations());  // messages
    // Both loops are done (end barrier): every message was uncharged.
    if (!balanced()) Die("asymmetric pair left pages charged");
  } else {
    uint64_t received = 0;
    uint64_t available = 0;  // published count last seen
    for (auto _ : state) {
      for (int spins = 0; received == available;) {
        available = ch.published.load(std::memory_order_acquire);
        if (received == available) Backoff(spins);
      }
      uncharge();
      ++received;
      if (received % kPublishEvery == 0 || received == total) {
        ch.consumed.store(received, std::memory_order_release);
      }
    }
    // Items are summed over threads: count each message once.
  }
}

void BM_AsymmetricPair_Batch(benchmark::State& state, Chain* chain) {
  Group* leaf = chain->leaf();
  AsymmetricPair(
      state, [leaf] { return umemcg_bench_charge_message(leaf); },
      [leaf] { umemcg_bench_uncharge_message(leaf); },
      [leaf, chain] {
        // Whatever is still charged must sit in the stocks.
        return leaf->usage() == leaf->StockedPages() &&
               chain->ctrl->underflows() == 0;
      });
}
void BM_AsymmetricPair_Naive(benchmark::State& state) {
  PageCounter* leaf = &g_fx->naive.l3;
  AsymmetricPair(
      state, [leaf] { return umemcg_bench_naive_charge_message(leaf); },
      [leaf] { umemcg_bench_naive_uncharge_message(leaf); },
      [leaf] { return leaf->usage() == Pages(0) && leaf->underflows() == 0; });
}
// Registered in main() (the batch variants need the fixtures).

void BM_TryCharge_Slow(benchmark::State& state) {
  Group* g = g_fx->slow.at_depth(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    if (!umemcg_bench_slow_pair(g)) Die("slow-path charge failed");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TryCharge_Slow)->UseRealTime()->DenseRange(1, 4);

Report BuildReport(const RatioReporter& rep, const Controller& ctrl) {
  Report r;
  r.nr_cpus = ctrl.info().nr_cpus;
  r.allowed_cpus = static_cast<int>(g_allowed_cpus.size());
  r.cpu_source = umemcg::CpuSourceName(ctrl.info().cpu_source);

  const std::vector<std::string> keys = {
      "BM_AtomicPair/threads:1",
      "BM_AtomicPair/threads:2",
      "BM_ThreadLocalPair/threads:1",
      "BM_StockHitPair/threads:1",
      "BM_StockHitPair/threads:2",
      "BM_StockHitPairTryLock/threads:1",
      "BM_RseqFloorPair/threads:1",
      "BM_AsymmetricPair/batch64/threads:2",
      "BM_AsymmetricPair/batch32/threads:2",
      "BM_AsymmetricPair/naive/threads:2",
      "BM_TryCharge_Slow/1/threads:1",
      "BM_TryCharge_Slow/2/threads:1",
      "BM_TryCharge_Slow/3/threads:1",
      "BM_TryCharge_Slow/4/threads:1",
  };
  std::map<std::string, Sample> m;
  for (const std::string& k : keys) {
    Sample s;
    if (rep.Get(k, &s)) {
      m[k] = s;
      r.medians.emplace_back(k, s);
      r.reps.push_back(rep.Repetitions(k));
    }
  }
  auto ns = [&](const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? NAN : it->second.ns_per_op;
  };
  auto ips = [&](const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? NAN : it->second.items_per_s;
  };
  auto cpu = [&](const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? NAN : it->second.cpu_ns_per_op;
  };
  auto on_cpu = [&](std::initializer_list<const char*> ks) {
    double lowest = NAN;
    for (const char* k : ks) {
      auto it = m.find(k);
      if (it == m.end()) continue;
      const double f = it->second.on_cpu();
      if (std::isnan(lowest) || f < lowest) lowest = f;
    }
    return lowest;
  };

  r.ratios.push_back(
      {"stock_hit_vs_atomic_pair",
       "time(StockHitPair/1t) / time(AtomicPair/1t)",
       ns("BM_StockHitPair/threads:1") / ns("BM_AtomicPair/threads:1"), 1.0,
       true});
  r.ratios.back().on_cpu =
      on_cpu({"BM_StockHitPair/threads:1", "BM_AtomicPair/threads:1"});
  r.ratios.push_back(
      {"stock_hit_trylock_vs_atomic_pair",
       "time(StockHitPairTryLock/1t) / time(AtomicPair/1t): the hit without "
       "rseq commits",
       ns("BM_StockHitPairTryLock/threads:1") / ns("BM_AtomicPair/threads:1"),
       NAN, false});
  r.ratios.back().on_cpu =
      on_cpu({"BM_StockHitPairTryLock/threads:1", "BM_AtomicPair/threads:1"});
  // The floor: what any out-of-line rseq pair costs here, and what the
  // stock's own checks (lock byte, slot, count, batch) add to it.
  r.ratios.push_back(
      {"rseq_floor_pair_vs_atomic_pair",
       "time(RseqFloorPair) / time(AtomicPair/1t): the least an rseq pair "
       "of the stock hit's shape can cost here",
       ns("BM_RseqFloorPair/threads:1") / ns("BM_AtomicPair/threads:1"), NAN,
       false});
  r.ratios.back().on_cpu =
      on_cpu({"BM_RseqFloorPair/threads:1", "BM_AtomicPair/threads:1"});
  r.ratios.push_back(
      {"stock_hit_vs_rseq_floor_pair",
       "time(StockHitPair/1t) / time(RseqFloorPair): the stock's checks "
       "over the floor",
       ns("BM_StockHitPair/threads:1") / ns("BM_RseqFloorPair/threads:1"), NAN,
       false});
  r.ratios.back().on_cpu =
      on_cpu({"BM_StockHitPair/threads:1", "BM_RseqFloorPair/threads:1"});
  r.ratios.push_back(
      {"stock_hit_2t_vs_1t",
       "items/s(StockHitPair/2t) / items/s(StockHitPair/1t)",
       ips("BM_StockHitPair/threads:2") / ips("BM_StockHitPair/threads:1"), 1.8,
       false});
  r.ratios.back().on_cpu =
      on_cpu({"BM_StockHitPair/threads:2", "BM_StockHitPair/threads:1"});
  r.ratios.push_back({"asym_batch64_vs_batch32",
                      "msgs/s(Asymmetric/batch64) / msgs/s(Asymmetric/batch32)",
                      ips("BM_AsymmetricPair/batch64/threads:2") /
                          ips("BM_AsymmetricPair/batch32/threads:2"),
                      1.10, false});
  r.ratios.back().on_cpu = on_cpu({"BM_AsymmetricPair/batch64/threads:2",
                                   "BM_AsymmetricPair/batch32/threads:2"});
  r.ratios.push_back({"asym_batch64_vs_naive",
                      "msgs/s(Asymmetric/batch64) / msgs/s(Asymmetric/naive)",
                      ips("BM_AsymmetricPair/batch64/threads:2") /
                          ips("BM_AsymmetricPair/naive/threads:2"),
                      4.0, false});
  r.ratios.back().on_cpu = on_cpu({"BM_AsymmetricPair/batch64/threads:2",
                                   "BM_AsymmetricPair/naive/threads:2"});
  // Context for reading the targeted ratios on a noisy machine.
  r.ratios.push_back(
      {"stock_hit_vs_atomic_pair_cpu",
       "cpu_time/op(StockHitPair/1t) / cpu_time/op(AtomicPair/1t)"
       ": the first ratio without preemption",
       cpu("BM_StockHitPair/threads:1") / cpu("BM_AtomicPair/threads:1"), NAN,
       false});
  r.ratios.push_back(
      {"atomic_pair_2t_vs_1t",
       "items/s(AtomicPair/2t) / items/s(AtomicPair/1t): the "
       "scaling this machine allows now",
       ips("BM_AtomicPair/threads:2") / ips("BM_AtomicPair/threads:1"), NAN,
       false});
  // CPU time per op does not count time the threads were preempted, so
  // this is the 2-thread scaling had each thread kept a CPU to itself:
  // 2.0 means the threads do not slow each other down (no shared line).
  r.ratios.push_back(
      {"stock_hit_2t_vs_1t_per_cpu",
       "2 * cpu_time/op(StockHitPair/1t) / "
       "cpu_time/op(StockHitPair/2t)",
       2 * cpu("BM_StockHitPair/threads:1") / cpu("BM_StockHitPair/threads:2"),
       NAN, false});
  r.ratios.push_back(
      {"atomic_pair_2t_vs_1t_per_cpu",
       "2 * cpu_time/op(AtomicPair/1t) / "
       "cpu_time/op(AtomicPair/2t)",
       2 * cpu("BM_AtomicPair/threads:1") / cpu("BM_AtomicPair/threads:2"), NAN,
       false});
  r.ratios.push_back(
      {"stock_hit_vs_thread_local_pair",
       "time(StockHitPair/1t) / time(ThreadLocalPair)",
       ns("BM_StockHitPair/threads:1") / ns("BM_ThreadLocalPair/threads:1"),
       NAN, false});
  r.ratios.push_back({"slow_walk_ns_per_level",
                      "(time(Slow/4) - time(Slow/1)) / 3: one more level in "
                      "the charge, high-check and uncharge walks",
                      (ns("BM_TryCharge_Slow/4/threads:1") -
                       ns("BM_TryCharge_Slow/1/threads:1")) /
                          3,
                      NAN, false, "ns"});
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

  auto fx = std::make_unique<Fixtures>();
  g_fx = fx.get();
  // The heap profiler's interval (bytes; 0: off; default: the library's),
  // for sampling on and off side by side: the page API feeds it.
  if (const char* rate = std::getenv("UMEMCG_PROFILE_RATE");
      rate != nullptr && *rate != '\0') {
    const umemcg::Bytes b(std::strtoull(rate, nullptr, 10));
    for (Chain* c : {&fx->stock_hit, &fx->stock_hit_trylock, &fx->asym64,
                     &fx->asym32, &fx->slow}) {
      umemcg::SetHeapProfileRate(*c->ctrl, b);
    }
  }
  benchmark::RegisterBenchmark("BM_AsymmetricPair/batch64",
                               BM_AsymmetricPair_Batch, &fx->asym64)
      ->UseRealTime()
      ->Threads(2);
  benchmark::RegisterBenchmark("BM_AsymmetricPair/batch32",
                               BM_AsymmetricPair_Batch, &fx->asym32)
      ->UseRealTime()
      ->Threads(2);
  benchmark::RegisterBenchmark("BM_AsymmetricPair/naive",
                               BM_AsymmetricPair_Naive)
      ->UseRealTime()
      ->Threads(2);

  const umemcg::ControllerInfo& info = fx->stock_hit.ctrl->info();
  std::printf("machine: %d CPUs, cpu source: %s, stock hits %s\n", info.nr_cpus,
              umemcg::CpuSourceName(info.cpu_source),
              info.stock_rseq ? "rseq" : "try-lock");
  std::fflush(stdout);

  RatioReporter reporter(umemcg::bench::ConsoleFormat());
  benchmark::RunSpecifiedBenchmarks(&reporter);

  const Report report = BuildReport(reporter, *fx->stock_hit.ctrl);
  umemcg::bench::Publish(report, json_path);

  g_fx = nullptr;
  fx.reset();
  benchmark::Shutdown();
  return 0;
}

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// scale (issue 16): a fleet-tenant tree. --groups N (default 100,000;
// --quick 20,000) groups: N / --fanout (100) parents under the root, the
// rest leaves spread over them. One run:
//   1. create the first half of the leaves on one thread, the second half
//      on --threads creators at once (default: the allowed CPUs);
//   2. charge and uncharge one page in every leaf; RSS growth / N is
//      bytes_per_group (glibc's free memory trimmed first);
//   3. 20 rounds (10 when --seconds < 1, as under --quick) of: one
//      memory.stat update in every leaf (every group dirty on this CPU),
//      50 memory.stat reads of random leaves, one of the root (which then
//      flushes every group);
//   4. a hot thread (its own CPU) charges and uncharges one page of a hot
//      group, timing each pair, and every 8th pair also charges one of 64
//      busy groups (the other tenants): first alone for a quarter of
//      --seconds (quiet), then while the calling thread removes every
//      leaf and parent (churn).
// Two configurations run side by side: `small` (1,000 groups) and
// `large` (N), so that removal time per group can be compared across
// sizes under the same machine noise.
//
// ops = groups removed, seconds = the removal's wall time (so ops/s is
// removes/s). Fields: groups, create_per_s (one thread),
// create_concurrent_per_s, creators, bytes_per_group,
// charged_bytes_per_group (the leaves' metadata charged to their parents
// as "percpu", per leaf; the parents, children of the root, charge
// nothing), remove_per_s,
// remove_ns_per_group, root_stat_p50_ms, root_stat_p99_ms,
// leaf_stat_p50_us, leaf_stat_p99_us, hot_p50_quiet_ns, hot_p99_quiet_ns,
// hot_p50_churn_ns, hot_p99_churn_ns, hot_p99_churn_vs_quiet (the churn
// fields are empty when the hot thread got no CPU during the removal),
// live_groups_after (1: only the root is left once everything was
// removed and reaped); and, from the thread's CPU time instead of the
// wall clock (what the phase cost, whatever else ran on the machine):
// create_cpu_per_s, remove_cpu_per_s, remove_cpu_ns_per_group,
// root_stat_cpu_p99_ms; create_runqueue_share and remove_runqueue_share
// are the parts of the one-thread creation's and the removal's wall time
// spent runnable but without a CPU (/proc/thread-self/schedstat).

#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "scenarios.h"

namespace umemcg::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kBusyGroups = 64;
constexpr int kLeafReadsPerRound = 50;
constexpr size_t kMaxHotSamples = 4 << 20;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// This thread's CPU time in seconds: what a phase cost, without the time
// other processes took the CPU from it (the shared machines the results
// are measured on are often loaded).
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Resident set size in bytes (/proc/self/statm), 0 if unreadable.
double ResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<double>(resident) *
                      static_cast<double>(sysconf(_SC_PAGESIZE))
                : 0;
}

// Nanoseconds this thread spent runnable but waiting for a CPU
// (/proc/thread-self/schedstat, second field; 0 if unreadable): the part
// of a phase's wall time that other processes took.
double RunqueueWaitSeconds() {
  std::FILE* f = std::fopen("/proc/thread-self/schedstat", "r");
  if (f == nullptr) return 0;
  unsigned long long run = 0, wait = 0;
  const int n = std::fscanf(f, "%llu %llu", &run, &wait);
  std::fclose(f);
  return n == 2 ? static_cast<double>(wait) * 1e-9 : 0;
}

// p-th percentile of `v` (sorted here).
double SortedPercentile(std::vector<double>& v, double q) {
  std::sort(v.begin(), v.end());
  return Percentile(v, q);
}

StatusOr<Sample> RunOnce(int groups, int fanout, int creators, int rounds,
                         double quiet_seconds, const Params& p) {
  ScopedCpuPin pin_main(CpuForThread(0, p.pin));
  // Free memory from earlier runs goes back first, so the RSS growth below
  // is what this tree costs.
  malloc_trim(0);
  const double rss_before = ResidentBytes();
  // Leaves charge their statistics to their parents, as in the kernel
  // (opt-in in umemcg): creation pays for it, and the run says how much.
  auto c = MakeController({}, /*group_metadata=*/true);
  if (!c.ok()) return c.status();
  std::unique_ptr<Controller> ctrl = std::move(c).value();

  const int nparents = std::max(1, groups / fanout);
  const int nleaves = std::max(1, groups - nparents);
  std::vector<GroupRef> parents;
  parents.reserve(static_cast<size_t>(nparents));
  std::vector<GroupRef> leaves(static_cast<size_t>(nleaves));

  // 1. Creation: parents and the first half of the leaves on this thread,
  // the rest by `creators` threads at once.
  const auto t_create = Clock::now();
  const double cpu_create = ThreadCpuSeconds();
  const double wait_create = RunqueueWaitSeconds();
  for (int i = 0; i < nparents; ++i) {
    auto g = ctrl->CreateGroup(ctrl->root(), Numbered("p", i));
    if (!g.ok()) return g.status();
    parents.push_back(std::move(g).value());
  }
  const int half = nleaves / 2;
  auto create_leaf = [&](int i) -> Status {
    Group& parent = *parents[static_cast<size_t>(i % nparents)];
    auto g = ctrl->CreateGroup(parent, Numbered("l", i));
    if (!g.ok()) return g.status();
    leaves[static_cast<size_t>(i)] = std::move(g).value();
    return Status::Ok();
  };
  for (int i = 0; i < half; ++i) {
    if (Status s = create_leaf(i); !s.ok()) return s;
  }
  const double create_one = Since(t_create);
  const double create_one_cpu = ThreadCpuSeconds() - cpu_create;
  const double create_one_wait = RunqueueWaitSeconds() - wait_create;
  const auto t_concurrent = Clock::now();
  {
    std::vector<std::thread> team;
    std::vector<Status> errors(static_cast<size_t>(creators));
    for (int t = 0; t < creators; ++t) {
      team.emplace_back([&, t] {
        ScopedCpuPin pin(CpuForThread(t, p.pin));
        for (int i = half + t; i < nleaves; i += creators) {
          if (Status s = create_leaf(i); !s.ok()) {
            errors[static_cast<size_t>(t)] = s;
            return;
          }
        }
      });
    }
    for (std::thread& t : team) t.join();
    for (const Status& s : errors) {
      if (!s.ok()) return s;
    }
  }
  const double create_many = Since(t_concurrent);

  // 2. A page charged and uncharged in every leaf (stocks installed and
  // evicted all along), then the memory per group.
  for (GroupRef& g : leaves) {
    if (!g->TryCharge(Pages(1)).ok()) return Failed("charge refused");
    g->Uncharge(Pages(1));
  }
  const double rss_after = ResidentBytes();
  // What the leaves' own statistics charged to their parents ("percpu";
  // ControllerOptions::charge_group_metadata), per leaf: the footprint
  // formula's statistics terms at every CPU.
  double charged = 0;
  for (GroupRef& p : parents) {
    charged += static_cast<double>(p->StatExact(StatItem::kPercpu));
  }

  // 3. Reads with every group dirty.
  std::mt19937 rng(12345);
  std::vector<double> root_ms, leaf_us, root_cpu_ms;
  for (int r = 0; r < rounds; ++r) {
    const int64_t delta = (r & 1) ? -1 : 1;  // even rounds: back to 0
    for (GroupRef& g : leaves) g->ModState(StatItem::kAnon, delta);
    for (int k = 0; k < kLeafReadsPerRound; ++k) {
      Group& g = *leaves[rng() % leaves.size()];
      const auto t0 = Clock::now();
      auto text = g.ReadFile("memory.stat");
      leaf_us.push_back(Since(t0) * 1e6);
      if (!text.ok()) return text.status();
    }
    const auto t0 = Clock::now();
    const double c0 = ThreadCpuSeconds();
    auto text = ctrl->root().ReadFile("memory.stat");
    root_cpu_ms.push_back((ThreadCpuSeconds() - c0) * 1e3);
    root_ms.push_back(Since(t0) * 1e3);
    if (!text.ok()) return text.status();
  }
  if (rounds % 2 != 0) {
    for (GroupRef& g : leaves) g->ModState(StatItem::kAnon, -1);
  }

  // 4. The hot group, quiet then while the tree is removed.
  std::vector<GroupRef> others;  // hot first, then the busy groups
  for (int i = 0; i <= kBusyGroups; ++i) {
    auto g = ctrl->CreateGroup(ctrl->root(), Numbered("busy", i));
    if (!g.ok()) return g.status();
    others.push_back(std::move(g).value());
  }
  Group* hot = others[0].get();
  std::atomic<int> phase{0};  // 0 quiet, 1 churn, 2 stop
  std::atomic<bool> hot_ready{false};
  std::atomic<bool> churn_seen{false};  // the hot thread runs in phase 1
  std::vector<double> quiet_ns, churn_ns;
  quiet_ns.reserve(1 << 20);
  churn_ns.reserve(1 << 20);
  Status hot_error;
  std::thread hot_thread([&] {
    ScopedCpuPin pin(CpuForThread(1, p.pin));
    hot_ready.store(true);
    uint64_t n = 0;
    for (int ph; (ph = phase.load(std::memory_order_relaxed)) != 2; ++n) {
      if (ph == 1 && !churn_seen.load(std::memory_order_relaxed)) {
        churn_seen.store(true);
      }
      const auto t0 = Clock::now();
      if (!hot->TryCharge(Pages(1)).ok()) {
        hot_error = Failed("hot charge refused");
        return;
      }
      hot->Uncharge(Pages(1));
      const double ns =
          std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
      std::vector<double>& out = ph == 0 ? quiet_ns : churn_ns;
      if (out.size() < kMaxHotSamples) out.push_back(ns);
      if (n % 8 == 0) {
        Group* busy = others[1 + (n / 8) % kBusyGroups].get();
        if (busy->TryCharge(Pages(1)).ok()) busy->Uncharge(Pages(1));
      }
    }
  });
  while (!hot_ready.load()) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::duration<double>(quiet_seconds));
  phase.store(1);
  // Removal starts once the hot thread is running in the churn phase.
  while (!churn_seen.load()) std::this_thread::yield();
  const auto t_remove = Clock::now();
  const double cpu_remove = ThreadCpuSeconds();
  const double wait_remove = RunqueueWaitSeconds();
  Status remove_error;
  for (GroupRef& g : leaves) {
    if (Status s = ctrl->RemoveGroup(*g); !s.ok() && remove_error.ok()) {
      remove_error = s;
    }
    g.reset();
  }
  for (GroupRef& g : parents) {
    if (Status s = ctrl->RemoveGroup(*g); !s.ok() && remove_error.ok()) {
      remove_error = s;
    }
    g.reset();
  }
  const double remove_secs = Since(t_remove);
  const double remove_cpu = ThreadCpuSeconds() - cpu_remove;
  const double remove_wait = RunqueueWaitSeconds() - wait_remove;
  phase.store(2);
  hot_thread.join();
  if (!hot_error.ok()) return hot_error;
  if (!remove_error.ok()) return remove_error;
  ctrl->Reap();
  if (Status s = CheckBalanced(*ctrl, others); !s.ok()) return s;
  for (GroupRef& g : others) {
    if (Status s = ctrl->RemoveGroup(*g); !s.ok()) return s;
    g.reset();
  }
  ctrl->Reap();
  const int64_t live_after = ctrl->live_groups();
  if (live_after != 1) {
    return Failed(std::to_string(live_after) +
                  " groups still allocated after removing all and reaping");
  }

  Sample s;
  const double removed = static_cast<double>(nleaves + nparents);
  s.ops = removed;
  s.seconds = remove_secs;
  s.fields["groups"] = static_cast<double>(nleaves + nparents);
  s.fields["create_per_s"] = (nparents + half) / create_one;
  s.fields["create_cpu_per_s"] = (nparents + half) / create_one_cpu;
  s.fields["create_runqueue_share"] = create_one_wait / create_one;
  s.fields["create_concurrent_per_s"] = (nleaves - half) / create_many;
  s.fields["creators"] = creators;
  s.fields["bytes_per_group"] =
      (rss_after - rss_before) / static_cast<double>(nleaves + nparents);
  s.fields["charged_bytes_per_group"] = charged / nleaves;
  s.fields["remove_per_s"] = removed / remove_secs;
  s.fields["remove_ns_per_group"] = remove_secs * 1e9 / removed;
  s.fields["remove_cpu_per_s"] = removed / remove_cpu;
  s.fields["remove_cpu_ns_per_group"] = remove_cpu * 1e9 / removed;
  // Wall time of the removal the remover spent waiting for a CPU.
  s.fields["remove_runqueue_share"] = remove_wait / remove_secs;
  s.fields["root_stat_p50_ms"] = SortedPercentile(root_ms, 0.50);
  s.fields["root_stat_p99_ms"] = SortedPercentile(root_ms, 0.99);
  s.fields["root_stat_cpu_p99_ms"] = SortedPercentile(root_cpu_ms, 0.99);
  s.fields["leaf_stat_p50_us"] = SortedPercentile(leaf_us, 0.50);
  s.fields["leaf_stat_p99_us"] = SortedPercentile(leaf_us, 0.99);
  s.fields["hot_p50_quiet_ns"] = SortedPercentile(quiet_ns, 0.50);
  s.fields["hot_p99_quiet_ns"] = SortedPercentile(quiet_ns, 0.99);
  s.fields["hot_p50_churn_ns"] = SortedPercentile(churn_ns, 0.50);
  s.fields["hot_p99_churn_ns"] = SortedPercentile(churn_ns, 0.99);
  s.fields["hot_p99_churn_vs_quiet"] =
      s.fields["hot_p99_churn_ns"] / s.fields["hot_p99_quiet_ns"];
  s.fields["hot_samples_churn"] = static_cast<double>(churn_ns.size());
  s.fields["live_groups_after"] = static_cast<double>(live_after);
  return s;
}

}  // namespace

StatusOr<std::vector<Result>> RunScale(const Params& p) {
  const int large = std::max(2, p.groups);
  const int small = std::min(large, 1000);
  const int fanout = std::max(1, p.fanout);
  const int creators =
      p.threads > 0 ? p.threads
                    : std::max(1, static_cast<int>(AllowedCpus().size()));
  const int rounds = p.seconds < 1.0 ? 10 : 20;
  const double quiet = std::max(0.01, p.seconds / 4);
  const std::vector<std::string> defaults = {"small", "large"};
  std::vector<Config> configs;
  for (const std::string& v : defaults) {
    if (!Wanted(p, v, defaults)) continue;
    const int n = v == "small" ? small : large;
    configs.push_back({v, 64, creators, 2, "", [=] {
                         return RunOnce(n, fanout, creators, rounds, quiet, p);
                       }});
  }
  return RunInterleaved("scale", std::move(configs), p);
}

}  // namespace umemcg::bench

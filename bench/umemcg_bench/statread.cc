// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// statread (D, docs/benchmarks.md): memory.stat read latency while
// writers update statistics. --groups (10,000) groups under the root:
// ceil(sqrt(G)) parents and the rest as leaves spread over them. W writer
// threads (--threads; default allowed CPUs - 1, at least 1; pinned from
// the second allowed CPU on) update `anon` on 10 hot leaves round-robin
// (+2, -1 alternately); one reader (team thread 0, on the first allowed
// CPU) reads memory.stat (Group::ReadFile) of a random group every
// 100 us and records each read's latency. Variants:
//   global+whole-tree  StatsFlushMode::kGlobalWholeTree (before v6.8: one
//                      global pending count; a reader over it flushes the
//                      whole tree),
//   pergroup+subtree   StatsFlushMode::kPerGroupSubtree (v6.8+).
// ops = writer updates; fields: p50_us, p99_us, p999_us, max_us, reads.
// The run checks that the root's exact `anon` equals the sum of every
// update made.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "scenarios.h"

namespace umemcg::bench {
namespace {

constexpr int kHotLeaves = 10;
constexpr auto kReadInterval = std::chrono::microseconds(100);

StatusOr<Sample> RunOnce(const std::string& variant, int groups, int writers,
                         const Params& p) {
  ControllerOptions o;
  o.stats_flush_mode = variant == "global+whole-tree"
                           ? StatsFlushMode::kGlobalWholeTree
                           : StatsFlushMode::kPerGroupSubtree;
  auto c = MakeController(o);
  if (!c.ok()) return c.status();
  std::unique_ptr<Controller> ctrl = std::move(c).value();
  const int nparents =
      std::max(1, static_cast<int>(std::ceil(std::sqrt(groups))));
  std::vector<GroupRef> all;  // every group but the root
  all.reserve(static_cast<size_t>(groups));
  std::vector<Group*> parents, leaves;
  for (int i = 0; i < nparents && static_cast<int>(all.size()) < groups; ++i) {
    auto g = ctrl->CreateGroup(ctrl->root(), Numbered("p", i));
    if (!g.ok()) return g.status();
    parents.push_back(g.value().get());
    all.push_back(std::move(g).value());
  }
  for (int i = 0; static_cast<int>(all.size()) < groups; ++i) {
    Group* parent = parents[static_cast<size_t>(i) % parents.size()];
    auto g = ctrl->CreateGroup(*parent, Numbered("l", i));
    if (!g.ok()) return g.status();
    leaves.push_back(g.value().get());
    all.push_back(std::move(g).value());
  }
  std::vector<Group*> hot;
  const std::vector<Group*>& pool = leaves.empty() ? parents : leaves;
  for (int i = 0; i < kHotLeaves && i < static_cast<int>(pool.size()); ++i) {
    hot.push_back(pool[static_cast<size_t>(i) * pool.size() / kHotLeaves]);
  }

  struct alignas(64) WriterTotals {
    uint64_t updates = 0;
    int64_t sum = 0;
  };
  std::vector<WriterTotals> totals(static_cast<size_t>(writers));
  std::vector<double> lat_us;
  uint64_t bytes = 0;
  Status read_error;
  // Team: thread 0 is the reader, 1..W the writers.
  double on_cpu = 0;
  const double secs = RunTimed(
      writers + 1, p.pin, p.seconds,
      [&](int i, const std::atomic<bool>& stop) {
        if (i == 0) {
          std::mt19937 rng(12345);
          lat_us.reserve(static_cast<size_t>(p.seconds * 1e4) + 16);
          auto next = std::chrono::steady_clock::now();
          while (KeepRunning(stop, lat_us.size())) {
            next += kReadInterval;
            std::this_thread::sleep_until(next);
            Group* g = all[rng() % all.size()].get();
            const auto t0 = std::chrono::steady_clock::now();
            auto text = g->ReadFile("memory.stat");
            const auto t1 = std::chrono::steady_clock::now();
            if (!text.ok()) {
              read_error = text.status();
              return;
            }
            bytes += text.value().size();
            lat_us.push_back(
                std::chrono::duration<double, std::micro>(t1 - t0).count());
          }
          return;
        }
        WriterTotals& t = totals[static_cast<size_t>(i - 1)];
        size_t k = static_cast<size_t>(i);
        while (KeepRunning(stop, t.updates)) {
          for (int j = 0; j < 64; ++j) {
            const int64_t delta = (t.updates & 1) ? -1 : 2;
            hot[k++ % hot.size()]->ModState(StatItem::kAnon, delta);
            t.sum += delta;
            ++t.updates;
          }
        }
      },
      &on_cpu, /*first_timed=*/1);  // the reader sleeps between reads
  if (!read_error.ok()) return read_error;
  Sample s;
  s.seconds = secs;
  s.fields["on_cpu"] = on_cpu;
  int64_t sum = 0;
  for (const WriterTotals& t : totals) {
    s.ops += static_cast<double>(t.updates);
    sum += t.sum;
  }
  if (ctrl->root().StatExact(StatItem::kAnon) != sum) {
    return Failed("root anon " +
                  std::to_string(ctrl->root().StatExact(StatItem::kAnon)) +
                  " != sum of updates " + std::to_string(sum));
  }
  if (Status b = CheckBalanced(*ctrl, all); !b.ok()) return b;
  std::sort(lat_us.begin(), lat_us.end());
  s.fields["p50_us"] = Percentile(lat_us, 0.50);
  s.fields["p99_us"] = Percentile(lat_us, 0.99);
  s.fields["p999_us"] = Percentile(lat_us, 0.999);
  s.fields["max_us"] = lat_us.empty() ? NAN : lat_us.back();
  s.fields["reads"] = static_cast<double>(lat_us.size());
  s.fields["groups"] = static_cast<double>(all.size());
  s.fields["read_bytes"] = static_cast<double>(bytes);
  s.latencies_us = std::move(lat_us);
  return s;
}

}  // namespace

StatusOr<std::vector<Result>> RunStatread(const Params& p) {
  const int writers =
      p.threads > 0 ? p.threads
                    : std::max(1, static_cast<int>(AllowedCpus().size()) - 1);
  const int groups = std::max(2, p.groups);
  const std::vector<std::string> defaults = {"global+whole-tree",
                                             "pergroup+subtree"};
  std::vector<Config> configs;
  for (const std::string& v : defaults) {
    if (!Wanted(p, v, defaults)) continue;
    configs.push_back({v, 64, writers, 2, "",
                       [=] { return RunOnce(v, groups, writers, p); }});
  }
  return RunInterleaved("statread", std::move(configs), p);
}

}  // namespace umemcg::bench

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// pagefault1/2/3 and fallocate (B, docs/benchmarks.md): the
// will-it-scale analogs. N tasks (pinned to distinct CPUs) charge one leaf
// at depth D (chain root -> c1 -> ... -> cD). Each task loops over a
// 128 MiB "region" of 32768 page slots: fault every slot (one op each),
// then unmap.
//   pagefault1  fault: zero a 4 KiB page from a per-task pool (64 pages),
//               charge 1 page (stock) moving `anon` +1, pgfault +1.
//               unmap: `anon` -1 per page, direct uncharges in gathers of
//               32 pages (uncharge_batch: no stock).
//   pagefault2  as pagefault1 but copy the page from the task's "page
//               cache" (its 128 MiB file, charged once before the run as
//               `file` and uncharged after it).
//   pagefault3  fault: touch a byte, pgfault +1, `file_mapped` +1; no
//               charge (the file pages stay resident). unmap: `file_mapped`
//               -1 per page. Stats-bound: the stat-path canary.
//   fallocate   op: charge 2 pages as `shmem`, `file` +2, `inactive_anon`
//               +2, `pgpgin` +1 (custom items); every 128 ops "truncate":
//               reverse every statistic and uncharge 256 pages directly.
// Process mode: tasks share nothing but the group. Thread mode: one shared
// rwlock (mmap_lock) taken shared per fault and exclusive per unmap.
//
// Stat variants: global (kGlobalWholeTree, pre-v6.8 threshold), pergroup
// (kPerGroupSubtree, v6.8+, with the early stop at an ancestor over its
// threshold), naive-walk (kPerGroupSubtree without the early stop: every
// update walks every level, ControllerOptions::stats_update_early_stop =
// false) and unaccounted (the same page work, no charges or statistics).
//
// Fields (will-it-scale / LKP, 1.1): per_task_ops (ops/s per task),
// scalability (total at N / (N x total at 1 task, same variant, depth and
// mode; measured when 1 task was too: --threads N runs 1 and N tasks
// unless --no-single-task), ns_per_op (per task), vs_unaccounted.
//
// The run also checks the statistics: after it, the leaf's exact pgfault
// count equals the faults done and every page statistic is back to zero.

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "harness.h"
#include "scenarios.h"

namespace umemcg::bench {
namespace {

constexpr uint64_t kRegionPages = 32768;            // 128 MiB
constexpr uint64_t kGatherPages = 32;               // uncharge_batch gathers
constexpr uint64_t kPoolPages = 64;                 // per-task page pool
constexpr uint64_t kFallocateOpsPerTruncate = 128;  // 1 MiB of 8 KiB ops

enum class Kind { kPf1, kPf2, kPf3, kFallocate };

// The statistics one task updates (null group: unaccounted).
struct Accounting {
  Group* group = nullptr;
  StatItem inactive_anon{};
  StatItem pgpgin{};
  StatItem pgpgout{};
};

struct alignas(64) TaskTotals {
  uint64_t ops = 0;
  uint64_t checksum = 0;
  bool failed = false;
};

// The pages one task writes (and, pagefault2, copies from), allocated and
// touched before the timed run.
struct TaskPages {
  PageBuffer pool = AllocPages(kPoolPages * kPageSize, 0);
  PageBuffer cache;
};

// One task's loop until `stop`.
void TaskLoop(Kind kind, const Accounting& a, std::shared_mutex* mm_lock,
              const TaskPages& pages, const std::atomic<bool>& stop,
              TaskTotals& tot) {
  char* const pool = pages.pool.get();
  const char* const cache = pages.cache.get();
  Group* g = a.group;
  if (kind == Kind::kFallocate) {
    uint64_t pending = 0;  // ops since the last truncate
    auto truncate = [&] {
      if (g != nullptr) {
        for (uint64_t i = 0; i < pending; ++i) {
          g->ModState(StatItem::kShmem, -2);
          g->ModState(StatItem::kFile, -2);
          g->ModState(a.inactive_anon, -2);
          g->CountEvent(a.pgpgout);
        }
        g->UnchargeDirect(Pages(2 * pending));
      }
      pending = 0;
    };
    while (KeepRunning(stop, tot.ops)) {
      if (g != nullptr) {
        if (!g->TryCharge(Pages(2), kChargeDefault, StatItem::kShmem).ok()) {
          tot.failed = true;
          break;
        }
        g->ModState(StatItem::kFile, 2);
        g->ModState(a.inactive_anon, 2);
        g->CountEvent(a.pgpgin);
      }
      ++tot.ops;
      if (++pending == kFallocateOpsPerTruncate) truncate();
    }
    truncate();
    return;
  }
  while (KeepRunning(stop, tot.ops)) {
    uint64_t faulted = 0;
    for (; faulted < kRegionPages; ++faulted) {
      if (!KeepRunning(stop, tot.ops)) break;
      if (mm_lock != nullptr) mm_lock->lock_shared();
      char* page = pool + (faulted % kPoolPages) * kPageSize;
      if (kind == Kind::kPf1) {
        std::memset(page, 0, kPageSize);
      } else if (kind == Kind::kPf2) {
        std::memcpy(page, cache + (faulted % kPoolPages) * kPageSize,
                    kPageSize);
      } else {
        page[faulted % kPageSize] = 1;
      }
      if (g != nullptr) {
        if (kind == Kind::kPf3) {
          g->ModState(StatItem::kFileMapped, 1);
        } else if (!g->TryCharge(Pages(1), kChargeDefault, StatItem::kAnon)
                        .ok()) {
          tot.failed = true;
        }
        g->CountEvent(StatItem::kPgfault);
      }
      tot.checksum += static_cast<unsigned char>(page[faulted % 64]);
      if (mm_lock != nullptr) mm_lock->unlock_shared();
      ++tot.ops;
    }
    // munmap.
    if (mm_lock != nullptr) mm_lock->lock();
    if (g != nullptr) {
      const StatItem mapped =
          kind == Kind::kPf3 ? StatItem::kFileMapped : StatItem::kAnon;
      uint64_t gathered = 0;
      for (uint64_t i = 0; i < faulted; ++i) {
        g->ModState(mapped, -1);
        if (kind != Kind::kPf3 && ++gathered == kGatherPages) {
          g->UnchargeDirect(Pages(gathered));
          gathered = 0;
        }
      }
      if (gathered != 0) g->UnchargeDirect(Pages(gathered));
    }
    if (mm_lock != nullptr) mm_lock->unlock();
  }
}

ControllerOptions OptionsFor(const std::string& variant, int batch) {
  ControllerOptions o = BatchOptions(batch);
  o.custom_stat_items = {{"inactive_anon", StatUnit::kPages},
                         {"pgpgin", StatUnit::kEvents},
                         {"pgpgout", StatUnit::kEvents}};
  if (variant == "global") {
    o.stats_flush_mode = StatsFlushMode::kGlobalWholeTree;
  } else if (variant == "naive-walk") {
    o.stats_update_early_stop = false;
  }
  return o;
}

StatusOr<Sample> RunOnce(Kind kind, const std::string& variant, int threads,
                         int depth, bool thread_mode, int batch,
                         const Params& p) {
  std::unique_ptr<Controller> ctrl;
  std::vector<GroupRef> chain;
  Accounting acct;
  if (variant != "unaccounted") {
    auto c = MakeController(OptionsFor(variant, batch));
    if (!c.ok()) return c.status();
    ctrl = std::move(c).value();
    auto ch = MakeChain(*ctrl, depth, Pages(0));
    if (!ch.ok()) return ch.status();
    chain = std::move(ch).value();
    acct.group = chain.back().get();
    acct.inactive_anon = *ctrl->FindStatItem("inactive_anon");
    acct.pgpgin = *ctrl->FindStatItem("pgpgin");
    acct.pgpgout = *ctrl->FindStatItem("pgpgout");
  }
  const bool file_backed = kind == Kind::kPf2 || kind == Kind::kPf3;
  // Each task's file: charged once, before the timed run.
  if (acct.group != nullptr && file_backed &&
      !acct.group
           ->TryCharge(Pages(kRegionPages * threads), kChargeDefault,
                       StatItem::kFile)
           .ok()) {
    return Failed("file page charge failed");
  }
  std::shared_mutex mm_lock;
  std::vector<TaskTotals> totals(static_cast<size_t>(threads));
  std::vector<TaskPages> pages(static_cast<size_t>(threads));
  if (kind == Kind::kPf2) {
    for (TaskPages& t : pages) t.cache = AllocPages(kPoolPages * kPageSize, 7);
  }
  double on_cpu = 0;
  const double secs = RunTimed(
      threads, p.pin, p.seconds,
      [&](int i, const std::atomic<bool>& stop) {
        TaskLoop(kind, acct, thread_mode ? &mm_lock : nullptr,
                 pages[static_cast<size_t>(i)], stop,
                 totals[static_cast<size_t>(i)]);
      },
      &on_cpu);
  Sample s;
  s.seconds = secs;
  s.fields["on_cpu"] = on_cpu;
  for (const TaskTotals& t : totals) {
    if (t.failed) return Failed("a fault charge failed");
    s.ops += static_cast<double>(t.ops);
  }
  if (acct.group != nullptr) {
    Group* g = acct.group;
    if (file_backed) {
      g->UnchargeDirect(Pages(kRegionPages * threads), StatItem::kFile);
    }
    if (kind != Kind::kFallocate &&
        g->StatExact(StatItem::kPgfault) != static_cast<int64_t>(s.ops)) {
      return Failed("pgfault " +
                    std::to_string(g->StatExact(StatItem::kPgfault)) +
                    " != faults " + std::to_string(s.ops));
    }
    for (StatItem item : {StatItem::kAnon, StatItem::kFile, StatItem::kShmem,
                          StatItem::kFileMapped, acct.inactive_anon}) {
      if (ctrl->root().StatExact(item) != 0) {
        return Failed(std::string("statistic ") + ctrl->StatItemName(item) +
                      " not back to zero");
      }
    }
    if (Status b = CheckBalanced(*ctrl, chain); !b.ok()) return b;
  }
  const double per_task = s.ops / secs / threads;
  s.fields["per_task_ops"] = per_task;
  s.fields["ns_per_op"] = per_task > 0 ? 1e9 / per_task : 0;
  return s;
}

Kind KindOf(const std::string& scenario) {
  if (scenario == "pagefault1") return Kind::kPf1;
  if (scenario == "pagefault2") return Kind::kPf2;
  if (scenario == "pagefault3") return Kind::kPf3;
  return Kind::kFallocate;
}

}  // namespace

StatusOr<std::vector<Result>> RunPagefault(const std::string& scenario,
                                           const Params& p) {
  const Kind kind = KindOf(scenario);
  const int n =
      p.threads > 0 ? p.threads : static_cast<int>(AllowedCpus().size());
  std::vector<int> thread_counts = {1};
  if (n > 1) thread_counts.push_back(n);
  if (n > 1 && !p.single_task_baseline) thread_counts = {n};
  const std::vector<int> depths =
      p.depth > 0 ? std::vector<int>{p.depth} : std::vector<int>{2, 4};
  std::vector<std::string> modes = {p.mode};
  if (p.mode == "both") modes = {"process", "thread"};
  const int batch = p.batches.empty() ? 64 : p.batches.front();
  const std::vector<std::string> defaults = {"unaccounted", "global",
                                             "pergroup", "naive-walk"};
  std::vector<Config> configs;
  for (const std::string& mode : modes) {
    const bool thread_mode = mode == "thread";
    for (int t : thread_counts) {
      if (Wanted(p, "unaccounted", defaults)) {
        configs.push_back({"unaccounted", 0, t, 0, mode, [=] {
                             return RunOnce(kind, "unaccounted", t, 0,
                                            thread_mode, batch, p);
                           }});
      }
      for (int d : depths) {
        for (const char* v : {"global", "pergroup", "naive-walk"}) {
          if (!Wanted(p, v, defaults)) continue;
          const std::string variant = v;
          configs.push_back({variant, batch, t, d, mode, [=] {
                               return RunOnce(kind, variant, t, d, thread_mode,
                                              batch, p);
                             }});
        }
      }
    }
  }
  auto results = RunInterleaved(scenario, std::move(configs), p);
  if (!results.ok()) return results;
  std::vector<Result>& rs = results.value();
  AddScalability(rs);
  AddOverheads(rs);
  return results;
}

}  // namespace umemcg::bench

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ControllerImpl: the slow paths of charging, shared by Group and
// Controller (friend of both). One function per kernel function it mirrors;
// each lives in the file of its layer:
//   charge.cc   try_charge_memcg slow path, uncharge
//   reclaim.cc  try_to_free_mem_cgroup_pages walk, effective protection
//   high.cc     memory.high detection, reclaim_high, throttling penalty
//   oom.cc      memcg_oom and the OOM handler
//   group.cc    events, lifetime
//
// Thread-local charge state (the kernel keeps it in task_struct):
// pending memory.high overage and the "inside a reclaimer" flag
// (PF_MEMALLOC) that turns nested charges into forced ones.

#ifndef UMEMCG_SRC_CONTROLLER_IMPL_H_
#define UMEMCG_SRC_CONTROLLER_IMPL_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <utility>
#include <vector>

#include "port/fork.h"
#include "umemcg/controller.h"
#include "umemcg/group.h"

namespace umemcg::internal {

class ChargeStock;
class ObjStock;

inline constexpr int kMaxReclaimRetries = 16;  // MAX_RECLAIM_RETRIES
// 1 << PAGE_ALLOC_COSTLY_ORDER: larger charges never invoke OOM handling
// and do not retry merely because reclaim made progress.
inline constexpr uint64_t kCostlyPages = 8;
inline constexpr uint64_t kSwapClusterMax = 32;  // high reclaim retry batch
// Defensive caps (not in the kernel): a reclaimer or OOM handler that
// reports progress which never shows in usage would otherwise loop forever.
inline constexpr int kMaxProgressRounds = 256;

// memory.high penalty constants (mm/memcontrol.c), with HZ = 1000 so that
// one jiffy is one millisecond.
inline constexpr uint64_t kHz = 1000;
inline constexpr int kDelayPrecisionShift = 20;
inline constexpr int kDelayScalingShift = 14;
inline constexpr uint64_t kMaxHighDelayMs = 2 * kHz;
inline constexpr uint64_t kMinHighDelayMs = kHz / 100;  // forgiven at or below

struct ThreadChargeState {
  // The group whose memory.high overage is pending. Compared, never
  // dereferenced: the caller of HandleOverHigh supplies a live group.
  const Group* over_high_group = nullptr;
  uint64_t pages_over_high = 0;
  // > 0 inside a reclaimer or OOM handler (PF_MEMALLOC): charges are
  // forced, and SetMax/SetHigh/Reclaim are refused (they would recurse
  // into reclaim and OOM handling).
  int in_reclaim = 0;
  // > 0 while this thread holds the tree lock shared for a reclaim walk:
  // tree changes and reclaimer registration are refused (they would
  // deadlock waiting for the exclusive lock).
  int in_tree_walk = 0;
  // > 0 while this thread reaps (Controller::ReapImpl): a reap requested
  // from inside (the error hook reporting a leak) returns at once.
  int in_reap = 0;
};
extern constinit thread_local ThreadChargeState tls_charge;

// While one is alive on a thread, the error reports it raises (underflows
// found by a drain, ...) are queued instead of calling the error hook, and
// the outermost one delivers them when it ends. Every section holding a
// stock shard lock or objcg_mu_ is inside one, and a scope ends only after
// its locks were released, so the hook never runs under them (it may
// drain, remove groups or set limits). The queue holds a reference on each
// reported group until delivery; it never allocates: kMaxDeferredReports
// entries, same (controller, what, group) ones merged by adding pages. The
// groups take all but kDeferredAggregates of them; past that, reports
// merge into one sum per (controller, what) with a null group, and only
// when those are full too does the last entry absorb the rest.
class DeferReports {
 public:
  DeferReports();
  ~DeferReports();
  DeferReports(const DeferReports&) = delete;
  DeferReports& operator=(const DeferReports&) = delete;
};
inline constexpr int kMaxDeferredReports = 16;
inline constexpr int kDeferredAggregates = 4;

// Increments a ThreadChargeState depth for the scope's lifetime.
class DepthScope {
 public:
  explicit DepthScope(int& depth) : depth_(depth) { ++depth_; }
  ~DepthScope() { --depth_; }
  DepthScope(const DepthScope&) = delete;
  DepthScope& operator=(const DepthScope&) = delete;

 private:
  int& depth_;
};

// ((usage - high) << 20) / high, 0 when usage <= high. Kernel:
// calculate_overage().
uint64_t CalculateOverage(uint64_t usage, uint64_t high);
// Milliseconds owed for `overage` after charging `nr_pages`, before the
// 2 s clamp; saturates instead of wrapping. Kernel: calculate_high_delay().
uint64_t HighDelayMs(uint64_t overage, uint64_t nr_pages, uint64_t batch);

class ControllerImpl {
 public:
  // try_charge_memcg after the stock missed. REQUIRES: g online, not root,
  // 0 < n <= kPageCounterMax.
  static ChargeResult ChargeSlow(Group* g, uint64_t n, ChargeFlags flags);
  // page_counter_uncharge + underflow reporting.
  static void UnchargeCounters(Group* g, uint64_t n);

  // BatchPolicy::kAdaptive: a batch event of `g` (a charge refilled a
  // stock, or a slot passed its batch). Feeds AdaptiveBatch and applies its
  // decision: a new batch, with a trim of g's slots when it shrank.
  static void AdaptBatch(Group* g);

  // memcg_memory_event(): local, then hierarchical up to (not incl.) root;
  // `count` occurrences at once (one callback per level).
  // No lock, no allocation: async-signal-safe (events.cc).
  static void RaiseEvent(Group* g, MemoryEvent event, uint64_t count = 1);
  // Publishes `list` as the controller's observers (null: none) and
  // retires the old list. REQUIRES: c.observers_mu_ held. Returns what may
  // be freed now, to destroy after unlocking.
  static std::vector<std::shared_ptr<const void>> PublishObservers(
      Controller& c, std::shared_ptr<const Controller::ObserverList> list);
  // Keeps `old` (an object RaiseEvent may be using) until no RaiseEvent
  // is in flight. REQUIRES: c.observers_mu_ held. Returns what may be
  // freed now, to destroy after unlocking.
  static std::vector<std::shared_ptr<const void>> RetireForEvents(
      Controller& c, std::shared_ptr<const void> old);

  // try_to_free_mem_cgroup_pages(): asks the subtree's reclaimers for `n`
  // pages, honouring effective min/low. Returns pages reclaimed.
  static uint64_t ReclaimSubtree(Group* target, uint64_t n);
  // memory_max_write()'s loop, for a lowered memory.max and for a limit
  // outside the group (the cluster quota's): while g's usage is above
  // `goal` pages, drain its stocks once, reclaim its subtree (up to
  // kMaxReclaimRetries fruitless rounds), then, when `may_oom`, raise an
  // OOM event and run the OOM path until usage fits or the handler gives
  // up. At most kMaxProgressRounds rounds.
  static void ReclaimToLimit(Group* g, uint64_t goal, bool may_oom);

  // memcg_oom(): true if the handler made progress (retry).
  static bool Oom(Group* over, uint64_t n);
  // mem_cgroup_out_of_memory(): runs the handler under the OOM lock.
  static bool OutOfMemory(Group* over, uint64_t n);

  // After a successful batch charge: record memory.high overage on the
  // thread. Returns the first level (g or an ancestor) over its high, or
  // null. Kernel: the over-high detection in try_charge_memcg.
  static Group* HighCheck(Group* g, uint64_t batch);
  // Queues memory.high work for `g` unless already queued (kernel:
  // schedule_work(&memcg->high_work)) and wakes whoever runs it. A slow
  // path of non-blocking charges: no lock, and no allocation except the
  // first call in a fork child, which starts the worker thread there.
  static void ScheduleHighWork(Group* g);
  // Takes the whole queue / runs the work of each group on a taken list
  // (kernel: high_work_func). RunHighWorkList returns the groups run.
  static Group* PopHighWork(Controller& ctrl);
  static size_t RunHighWorkList(Controller& ctrl, Group* list);
  // The worker thread of HighWorkMode::kThread.
  static void HighWorkerMain(Controller* ctrl);
  // Starts / stops (joins) the worker; drops what is still queued.
  static void StartHighWork(Controller* ctrl);
  static void StopHighWork(Controller* ctrl);
  static void HighWorkChildAfterFork(Controller* ctrl);
  // Kernel: mem_cgroup_handle_over_high(). Consumes the thread's pending
  // overage; returns the penalty (slept unless kNoThrottle).
  static std::chrono::milliseconds HandleOverHigh(Group* g, ChargeFlags flags);
  // Largest overage of g and its ancestors, root excluded.
  static uint64_t MaxOverage(const Group* g);

  // Maps the counter a TryCharge refused at back to its group.
  static Group* GroupOfCounter(Group* start, const PageCounter* counter);

  static Controller& Ctrl(const Group* g) { return *g->controller_; }
  // True for a page-unit statistic of g's controller (what TryCharge /
  // Uncharge with an item move): one bounds check and one load.
  static bool IsPageItem(const Group& g, StatItem item) {
    const std::vector<StatUnit>& units = g.controller_->stat_units_;
    const auto i = static_cast<size_t>(item);
    return i < units.size() && units[i] == StatUnit::kPages;
  }
  static PageCounter& Memory(Group* g) { return g->memory_; }
  // g's online subtree in pre-order (g first, parents before children),
  // each with whether it has no online child; one pass under the tree
  // lock (shared).
  static std::vector<std::pair<GroupRef, bool>> SubtreePreorder(Group& g);
  // A page item's statistic moved with a charge (charge_stat.cc): to g,
  // or its nearest online ancestor once g was removed. REQUIRES:
  // IsPageItem(g, i).
  static void AccountStat(Group* g, size_t i, int64_t delta);

  // Drains every stock for `subtree` now (the body of DrainAllStocks, run
  // by the StockDrainer); TryDrainAllStocks: unless a drain is running.
  static void DrainStocksNow(Controller& c, Group& subtree);
  static bool TryDrainAllStocks(Controller& c, Group& subtree);

  // With no flusher thread: reaps if dead groups wait and are due
  // (Controller::ReapImpl, kAuto). From the charge slow path of charges
  // that may reclaim; two relaxed loads when nothing waits.
  static void ReapIfDue(Controller& c);

  // Gives the reports DeferReports queued on this thread to the hooks.
  static void DeliverDeferredReports();

  // Tests: the controller's stocks and its drain counters.
  static ChargeStock& StockOf(Controller& c) { return *c.stock_; }
  static ObjStock& ObjStockOf(Controller& c) { return *c.obj_stock_; }
  static uint64_t StockDrains(const Controller& c);
  static int ThreadsInStockDrain(const Controller& c);
};

// The tree lock held exclusively, and the fork guard (tree_fork_mu_) for
// the whole section: every change of the tree is made under both, so the
// fork handler, which takes only the guard, never forks in the middle of
// one (see ControllerForkHandler).
struct TreeWriteLock {
  explicit TreeWriteLock(Controller& c)
      : tree(c.tree_mu_), fork_guard(c.tree_fork_mu_) {}
  std::unique_lock<std::shared_mutex> tree;
  std::lock_guard<std::mutex> fork_guard;
};

// A controller's fork handlers (port/fork.h), registered from Create until
// destruction. Which locks are taken before fork and which are reset in
// the child, and why:
//
//  Taken in PrepareFork, released after fork in both processes, in this
//  order (the order every code path nests them in, so prepare cannot
//  deadlock with a thread that holds some and waits for another):
//    tree_fork_mu_            writers' sections: short, no callbacks
//    the drainer's mutex      bookkeeping only
//    objcg_mu_, observers_mu_, peaks_mu_   short list and peak updates
//    object stock shard locks, page stock shard locks   a few
//                             instructions each, never block
//    the statistics flush mutex, then the statistics shard locks (Rstat)
//  None is held while application code runs (error reports are deferred
//  past them), so the wait is always short, and the child finds no
//  section of theirs half done. No membarrier fence is needed: an rseq
//  commit is one store, whole in the child or absent.
//
//  Reset in ChildAfterFork, and re-taken for the forking thread's own
//  holds (HeldAcrossCallback records):
//    tree_mu_   held shared by reclaim walks while reclaimers run, and
//               those may block on anything, the forking thread included;
//               what it guards changes only under tree_fork_mu_, so it is
//               consistent in the child
//    oom_mu_    held while the OOM handler runs, for the same reason; it
//               guards no data
//
//  Also in the child: the stats flusher thread is gone (Rstat restarts it
//  on the child's first flush), and the drainer forgets drains of threads
//  the child does not have.
class ControllerForkHandler final : public ForkParticipant {
 public:
  explicit ControllerForkHandler(Controller* ctrl) : ctrl_(ctrl) {}
  void PrepareFork() override;
  void ParentAfterFork() override;
  void ChildAfterFork() override;

 private:
  void Release(bool child);
  Controller* const ctrl_;
};

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_CONTROLLER_IMPL_H_

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
#include <vector>

#include "umemcg/controller.h"
#include "umemcg/group.h"

namespace umemcg::internal {

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
};
extern constinit thread_local ThreadChargeState tls_charge;

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
  // decision: a new batch, with a drain of g's slots when it shrank.
  static void AdaptBatch(Group* g);

  // memcg_memory_event(): local, then hierarchical up to (not incl.) root.
  static void RaiseEvent(Group* g, MemoryEvent event);

  // try_to_free_mem_cgroup_pages(): asks the subtree's reclaimers for `n`
  // pages, honouring effective min/low. Returns pages reclaimed.
  static uint64_t ReclaimSubtree(Group* target, uint64_t n);

  // memcg_oom(): true if the handler made progress (retry).
  static bool Oom(Group* over, uint64_t n);
  // mem_cgroup_out_of_memory(): runs the handler under the OOM lock.
  static bool OutOfMemory(Group* over, uint64_t n);

  // After a successful batch charge: record memory.high overage on the
  // thread. Kernel: mem_cgroup_handle_over_high's detection in
  // try_charge_memcg.
  static void HighCheck(Group* g, uint64_t batch);
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
};

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_CONTROLLER_IMPL_H_

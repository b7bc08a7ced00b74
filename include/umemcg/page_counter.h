// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// PageCounter: a lock-free hierarchical page counter with the kernel's limits
// ladder (kernel: mm/page_counter.c). Each counter points at its parent's;
// a charge is added to the counter and every ancestor, so a parent's usage is
// its own charges plus all of its descendants'.
//
//   usage     pages charged here and below (may exceed max through forced
//             charges, a max lowered below it (ExchangeMax, as a write to
//             memory.max does before reclaiming), or transiently by the
//             sizes of the TryCharges in flight)
//   max       hard limit: TryCharge fails at the first level where
//             usage + n > max (usage == max is allowed)
//   high      throttle limit; stored here, enforced by Group (memory.high)
//   min, low  protection; with protection support the counter maintains
//             min_usage / low_usage = min(usage, min / low) and the parent's
//             children_min_usage / children_low_usage sums of them
//   emin, elow effective protection, recomputed lazily by reclaim walks
//             (CalculateProtection); stale otherwise, as in the kernel
//   watermark / local_watermark: all-time peak and peak since the last
//             ResetLocalWatermark (memory.peak per-fd reset)
//   failcnt   number of TryCharge refusals at this level (approximate)
//
// Thread safety: every method may be called from any thread concurrently,
// except that setters of one kind (SetMax with SetMax, SetMin with SetMin,
// ...) must be serialized by the caller, as the kernel requires. failcnt and
// the watermarks are updated racily and may miss concurrent updates (they
// are statistics only). The hot field `usage` sits on its own cache line,
// away from the read-mostly limits, so chargers do not invalidate the line
// that every charge reads (the kernel's 2022 layout).

#ifndef UMEMCG_PAGE_COUNTER_H_
#define UMEMCG_PAGE_COUNTER_H_

#include <atomic>
#include <cstdint>

#include "umemcg/export.h"
#include "umemcg/status.h"
#include "umemcg/units.h"

namespace umemcg {

class UMEMCG_EXPORT PageCounter {
 public:
  // `parent` (may be null) must outlive this counter. Protection tracking
  // (min/low propagation) costs a few reads per level per charge; only
  // counters whose min/low matter need it.
  explicit PageCounter(PageCounter* parent, bool protection_support = true);

  PageCounter(const PageCounter&) = delete;
  PageCounter& operator=(const PageCounter&) = delete;

  // ---- Charging ----

  // Adds `n` to this counter and every ancestor, ignoring max. Never fails.
  // Kernel: page_counter_charge().
  void Charge(Pages n);

  // Adds `n` at every level, all or nothing. Returns true on success. On
  // failure nothing stays charged, *limited_by (if non-null) is the first
  // level (closest to this one) whose max would be exceeded, and that
  // level's failcnt is incremented. Kernel: page_counter_try_charge().
  // REQUIRES: n <= kPageCounterMax.
  [[nodiscard]] bool TryCharge(Pages n, PageCounter** limited_by);

  // Subtracts `n` at this counter and every ancestor. A level that would go
  // below zero is clamped to 0 and its underflow count incremented; returns
  // false if any level underflowed (the caller reports the contract
  // violation). Kernel: page_counter_uncharge().
  bool Uncharge(Pages n);

  // Subtracts `n` at this level only (same clamping). Kernel:
  // page_counter_cancel().
  bool Cancel(Pages n);

  // ---- The owner's settled charge ----

  // A level's usage also counts charges in flight: a TryCharge that fails
  // at an ancestor raises every level below that one and then takes it
  // back, and a charge path may give back a batch the counters accepted
  // (a remote limit refused it). The group owning this counter records
  // here what its completed charges less its uncharges add up to, so that
  // a reader comparing two moments (the OOM policy: did a victim's memory
  // come back?) sees only memory that was charged or uncharged for real.
  // It holds no descendant's charge; a descendant's pages uncharged here
  // (reparented) take it below usage, even below zero: compare readings,
  // do not read it as a usage. Kernel: none (its OOM killer waits for a
  // victim task's exit, not for its usage).
  void Settle(int64_t delta) {
    // Relaxed: an exact count (RMW) read only for comparisons; nothing
    // else is published through it. Same cache line as usage_, which
    // every caller has just written.
    settled_.fetch_add(delta, std::memory_order_relaxed);
  }
  int64_t settled() const { return settled_.load(std::memory_order_relaxed); }

  // ---- Limits ----

  // Sets max unless usage already exceeds `max` (then kBusy, max unchanged).
  // Retries while usage grows concurrently, so on success usage <= max held
  // at the moment of the switch. Kernel: page_counter_set_max().
  Status SetMax(Pages max);
  // Sets max unconditionally (cgroup-v2 memory.max writes, which then
  // reclaim). Returns the old max.
  Pages ExchangeMax(Pages max);
  void SetHigh(Pages high);
  // Set protection, then re-propagate protected usage up the tree.
  void SetMin(Pages min);
  void SetLow(Pages low);

  // ---- Observers (single relaxed loads) ----

  Pages usage() const;
  Pages max() const { return Pages(max_.load(std::memory_order_relaxed)); }
  Pages high() const { return Pages(high_.load(std::memory_order_relaxed)); }
  Pages min() const { return Pages(min_.load(std::memory_order_relaxed)); }
  Pages low() const { return Pages(low_.load(std::memory_order_relaxed)); }
  Pages emin() const { return Pages(emin_.load(std::memory_order_relaxed)); }
  Pages elow() const { return Pages(elow_.load(std::memory_order_relaxed)); }
  Pages min_usage() const { return Pages(min_usage_.load(kRelaxed)); }
  Pages low_usage() const { return Pages(low_usage_.load(kRelaxed)); }
  Pages children_min_usage() const {
    return Pages(children_min_usage_.load(kRelaxed));
  }
  Pages children_low_usage() const {
    return Pages(children_low_usage_.load(kRelaxed));
  }
  Pages watermark() const { return Pages(watermark_.load(kRelaxed)); }
  Pages local_watermark() const {
    return Pages(local_watermark_.load(kRelaxed));
  }
  uint64_t failcnt() const { return failcnt_.load(kRelaxed); }
  // Number of times an uncharge/cancel would have gone below zero here.
  uint64_t underflows() const { return underflows_.load(kRelaxed); }
  PageCounter* parent() const { return parent_; }
  // max - usage, or 0 when usage >= max. Kernel: mem_cgroup_margin().
  Pages margin() const;

  // Sets both peaks (local first, then global) to the current usage.
  void ResetWatermark();
  // Sets the per-reset peak to the current usage (memory.peak write).
  void ResetLocalWatermark();

  // ---- Effective protection ----

  // Recomputes emin/elow of `counter` for a reclaim walk rooted at `root`.
  // Must be called top-down (parents before children) within one walk.
  // `recursive` enables memory_recursiveprot (distribute unclaimed parental
  // protection in proportion to unprotected usage). Kernel:
  // page_counter_calculate_protection().
  static void CalculateProtection(const PageCounter* root, PageCounter* counter,
                                  bool recursive);

 private:
  static constexpr std::memory_order kRelaxed = std::memory_order_relaxed;

  void PropagateProtectedUsage(int64_t usage);
  void UpdateWatermarks(int64_t usage);
  bool CancelLevel(int64_t n);

  // Line 1, write-hot: every charge and uncharge RMWs `usage_`.
  alignas(64) std::atomic<int64_t> usage_{0};
  std::atomic<uint64_t> failcnt_{0};
  std::atomic<int64_t> settled_{0};  // Settle (the owner's charge path)

  // Line 2: protection bookkeeping and peaks; written on charge only when
  // the value changes (min/low) or a new peak is reached.
  alignas(64) std::atomic<int64_t> emin_{0};
  std::atomic<int64_t> min_usage_{0};
  std::atomic<int64_t> children_min_usage_{0};
  std::atomic<int64_t> elow_{0};
  std::atomic<int64_t> low_usage_{0};
  std::atomic<int64_t> children_low_usage_{0};
  std::atomic<int64_t> watermark_{0};
  std::atomic<int64_t> local_watermark_{0};

  // Line 3, read-mostly: limits and links, read by every charge.
  alignas(64) std::atomic<int64_t> min_{0};
  std::atomic<int64_t> low_{0};
  std::atomic<int64_t> high_;
  std::atomic<int64_t> max_;
  PageCounter* const parent_;
  const bool protection_support_;
  std::atomic<uint64_t> underflows_{0};  // rare: only on contract violation
};

}  // namespace umemcg

#endif  // UMEMCG_PAGE_COUNTER_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ChargeStock: per-CPU caches of pre-charged pages (kernel: memcg_stock_pcp,
// the multi-memcg stock of v6.16+, docs/architecture.md: Eras). Each CPU
// shard holds up to `slots` groups, each with a 64-bit page count, and a
// round-robin eviction cursor. Pages in a slot are already charged to the group
// and all its ancestors; consuming them touches only the shard.
//
// Differences from the kernel, on purpose:
// - A slot that overflows one batch on refill returns its pages but keeps
//   its group reference (nr_pages = 0). The kernel drops and retakes the
//   css reference, which is free there (percpu_ref); ours is one shared
//   atomic, so keeping it saves two contended RMWs per batch.
// - DrainAll is synchronous and drains only the slots of the subtree, not
//   every slot of a CPU that holds one (see Controller::DrainAllStocks).
// - Each group records the shards whose slots cache it
//   (Group::stock_shards_, set on install, cleared on eviction), so that
//   removing a group locks (and fences) only those shards: DrainGroup.
//
// Hit paths. With the rseq CPU source, Consume and the in-batch Refill find
// the group's slot and commit its new page count with one plain store
// inside a restartable sequence (port/rseq.h), as the object stock does:
// no atomic RMW. Everything else takes the shard's TryLock, fencing the
// shard's CPU (RseqExclude) when the holder is not running on it. Without
// rseq the hit paths take the TryLock too.
//
// Thread safety: all methods are safe from any thread. Consume and Refill
// use the rseq commit or the shard's TryLock and fall back (fail /
// uncharge directly) when it is taken; DrainAll waits for it; Stocked
// reads without it (exact at quiescence).

#ifndef UMEMCG_SRC_CHARGE_STOCK_H_
#define UMEMCG_SRC_CHARGE_STOCK_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "port/cpu.h"
#include "port/per_cpu.h"
#include "port/rseq.h"
#include "port/try_lock.h"

namespace umemcg {
class Group;
namespace internal {

inline constexpr int kMaxStockSlots = 16;
// The kernel's cap (S8_MAX: its slot counts are uint8); ours are 64-bit.
inline constexpr int kMaxBatch = 127;

// One CPU's stock. Written under `lock` (and, with rseq, by the owning
// CPU's commit of a slot's `pages`); atomics so that the rseq path and
// Stocked may read them unlocked. Relaxed accesses everywhere: the lock
// and the rseq protocol order them.
struct StockShard {
  struct Slot {
    std::atomic<Group*> group{nullptr};  // holds a reference
    std::atomic<uint64_t> pages{0};      // <= batch
  };
  TryLock lock;
  uint8_t drain_idx = 0;  // next eviction victim (E5 round robin)
  uint16_t index = 0;     // this shard's number (set once)
  Slot slot[kMaxStockSlots];

  Group* group(int i) const {
    return slot[i].group.load(std::memory_order_relaxed);
  }
  uint64_t pages(int i) const {
    return slot[i].pages.load(std::memory_order_relaxed);
  }
  void set_pages(int i, uint64_t n) {
    slot[i].pages.store(n, std::memory_order_relaxed);
  }
};

class ChargeStock {
 public:
  ChargeStock(CpuIdSource cpu, int batch, int slots);
  ~ChargeStock();

  ChargeStock(const ChargeStock&) = delete;
  ChargeStock& operator=(const ChargeStock&) = delete;

  const CpuIdSource& cpu() const { return cpu_; }
  int batch() const { return batch_; }
  int slots() const { return slots_; }
  int nr_shards() const { return shards_.size(); }

  // True when the hit paths commit through rseq (see the file comment).
  bool rseq() const { return rseq_; }

  // Takes `n` pages of `group` from this CPU's stock. False if n > batch,
  // the shard is busy, or the slot holds fewer than n (no partial use).
  // Kernel: consume_stock().
  bool Consume(Group* group, uint64_t n) {
    if (n > static_cast<uint64_t>(batch_)) return false;
    if (rseq_) {
      if (const int r = CommitHit(group, n, /*consume=*/true); r >= 0) {
        return r != 0;
      }
    }
    const int k = TryLockCurrent();
    if (k < 0) return false;
    StockShard& s = shards_[k];
    bool ok = false;
    for (int i = 0; i < slots_; ++i) {
      if (s.group(i) != group) continue;
      if (s.pages(i) >= n) {
        s.set_pages(i, s.pages(i) - n);
        ok = true;
      }
      break;  // a group occupies at most one slot per shard
    }
    s.lock.unlock();
    return ok;
  }

  // Puts `n` charged pages of `group` into this CPU's stock; they are
  // uncharged directly when n > batch, the shard is busy or the group is
  // offline. A slot passing one batch returns its pages to the counters.
  // Kernel: refill_stock(). The common case (the group's slot exists and
  // stays within a batch) is inline; the rest is RefillSlow.
  void Refill(Group* group, uint64_t n) {
    if (n > static_cast<uint64_t>(batch_)) return UnchargeDirect(group, n);
    if (rseq_ && CommitHit(group, n, /*consume=*/false) == 1) return;
    const int k = TryLockCurrent();
    if (k < 0) return UnchargeDirect(group, n);
    StockShard& s = shards_[k];
    for (int i = 0; i < slots_; ++i) {
      if (s.group(i) != group) continue;
      // An installed slot implies the group was online when installed;
      // RemoveGroup's drain runs after it went offline and will take
      // these pages back (see RefillSlow for the install-time check).
      const uint64_t pages = s.pages(i) + n;
      if (pages <= static_cast<uint64_t>(batch_)) {
        s.set_pages(i, pages);
        s.lock.unlock();
        return;
      }
      break;
    }
    RefillSlow(s, group, n);
  }

  // Drains, on every shard, each slot whose group is `subtree` or below it
  // (null: every slot), dropping the slots' references.
  void DrainAll(const Group* subtree);
  // Drains the slots of `group` on the shards recorded in it only.
  // REQUIRES: `group` is offline (RemoveGroup) and has no online
  // descendant, so no slot caches it anywhere else or again.
  void DrainGroup(Group* group);

  uint64_t drained_shards() const {
    return drained_shards_.load(std::memory_order_relaxed);
  }

  // Empty string if every slot holds at most one batch and a referenced
  // group; else a description of the first bad slot. Quiescent use only.
  std::string CheckInvariants() const;

  // Pages cached for `group` over all shards.
  uint64_t Stocked(const Group* group) const;

  // Shard k's lock (tests, fork handling).
  TryLock& ShardLock(int k) { return shards_[k].lock; }

 private:
  // This CPU's shard locked (port/rseq.h), or -1 when it is busy.
  int TryLockCurrent() {
    return TryLockShard(shards_, cpu_.CurrentShard(), rseq_);
  }
  void LockShard(int k) const { internal::LockShard(shards_, k, rseq_); }
  // The rseq hit path: 1 = committed; 0 = Consume found the slot short
  // (the locked path would fail too); -1 = use the locked path.
  int CommitHit(Group* group, uint64_t n, bool consume) {
#if UMEMCG_HAVE_RSEQ_COMMIT
    // One retry after an abort; then the locked path.
    for (int attempt = 0; attempt < 2; ++attempt) {
      const uint32_t cpu = RseqCpuId();
      if (cpu >= nr_shards_) return -1;
      StockShard& s = shards_[static_cast<int>(cpu)];
      int i = 0;
      while (s.group(i) != group) {
        if (++i == slots_) return -1;
      }
      // Unlocked read: the commit re-checks the lock, the slot and it.
      const uint64_t pages = s.pages(i);
      uint64_t desired;
      if (consume) {
        if (pages < n) return 0;  // no partial use
        desired = pages - n;
      } else {
        desired = pages + n;
        if (desired > static_cast<uint64_t>(batch_)) return -1;  // overflow
      }
      switch (RseqCompareStore(cpu, s.lock.address(), &s.slot[i].group, group,
                               reinterpret_cast<uint64_t*>(&s.slot[i].pages),
                               pages, desired)) {
        case RseqResult::kCommitted:
          return 1;
        case RseqResult::kMismatch:
          return -1;
        case RseqResult::kAborted:
          break;
      }
    }
#else
    (void)group, (void)n, (void)consume;
#endif
    return -1;
  }

  // The rest of Refill: overflow, installing a slot, eviction. REQUIRES:
  // s.lock held; releases it.
  void RefillSlow(StockShard& s, Group* group, uint64_t n);
  // Returns pages straight to the counters.
  static void UnchargeDirect(Group* group, uint64_t n);
  static int ShardOf(const StockShard& s) { return s.index; }

  // Uncharges the slot's pages; with `release` also drops the reference
  // and empties the slot. REQUIRES: s.lock held.
  void DrainSlot(StockShard& s, int i, bool release);

  const CpuIdSource cpu_;
  const int batch_;
  const int slots_;
  const bool rseq_;
  const uint32_t nr_shards_;
  // Shards locked by DrainAll (tests count removal work; relaxed: a
  // counter that publishes nothing).
  std::atomic<uint64_t> drained_shards_{0};
  mutable PerCpu<StockShard> shards_;
};

}  // namespace internal
}  // namespace umemcg

#endif  // UMEMCG_SRC_CHARGE_STOCK_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ChargeStock: per-CPU caches of pre-charged pages (kernel: memcg_stock_pcp,
// the E4/E5 multi-memcg stock). Each CPU shard holds up to `slots` groups,
// each with a uint8 page count (so batch <= 127), and a round-robin eviction
// cursor. Pages in a slot are already charged to the group and all its
// ancestors; consuming them touches only the shard.
//
// Differences from the kernel, on purpose:
// - A slot that overflows one batch on refill returns its pages but keeps
//   its group reference (nr_pages = 0). The kernel drops and retakes the
//   css reference, which is free there (percpu_ref); ours is one shared
//   atomic, so keeping it saves two contended RMWs per batch.
// - DrainAll is synchronous and drains only the slots of the subtree, not
//   every slot of a CPU that holds one (see Controller::DrainAllStocks).
//
// Thread safety: all methods are safe from any thread. Consume and Refill
// use the shard's TryLock and fall back (fail / uncharge directly) when it
// is taken; DrainAll and Stocked wait for it.

#ifndef UMEMCG_SRC_CHARGE_STOCK_H_
#define UMEMCG_SRC_CHARGE_STOCK_H_

#include <cstdint>
#include <string>

#include "port/cpu.h"
#include "port/per_cpu.h"
#include "port/try_lock.h"

namespace umemcg {
class Group;
namespace internal {

inline constexpr int kMaxStockSlots = 16;
inline constexpr int kMaxBatch = 127;  // uint8 slot counts (S8_MAX)

// One CPU's stock. All fields are guarded by `lock`.
struct StockShard {
  TryLock lock;
  uint8_t drain_idx = 0;  // next eviction victim (E5 round robin)
  uint8_t nr_pages[kMaxStockSlots] = {};
  Group* cached[kMaxStockSlots] = {};  // each holds a reference
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

  // Takes `n` pages of `group` from this CPU's stock. False if n > batch,
  // the shard is busy, or the slot holds fewer than n (no partial use).
  // Kernel: consume_stock().
  bool Consume(Group* group, uint64_t n) {
    if (n > static_cast<uint64_t>(batch_)) return false;
    StockShard& s = shards_[cpu_.CurrentShard()];
    if (!s.lock.try_lock()) return false;
    bool ok = false;
    for (int i = 0; i < slots_; ++i) {
      if (s.cached[i] != group) continue;
      if (s.nr_pages[i] >= n) {
        s.nr_pages[i] = static_cast<uint8_t>(s.nr_pages[i] - n);
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
    StockShard& s = shards_[cpu_.CurrentShard()];
    if (!s.lock.try_lock()) return UnchargeDirect(group, n);
    for (int i = 0; i < slots_; ++i) {
      if (s.cached[i] != group) continue;
      // An installed slot implies the group was online when installed;
      // RemoveGroup's drain runs after it went offline and will take
      // these pages back (see RefillSlow for the install-time check).
      const unsigned pages = s.nr_pages[i] + static_cast<unsigned>(n);
      if (pages <= static_cast<unsigned>(batch_)) {
        s.nr_pages[i] = static_cast<uint8_t>(pages);
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

  // Empty string if every slot holds at most one batch and a referenced
  // group; else a description of the first bad slot. Quiescent use only.
  std::string CheckInvariants() const;

  // Pages cached for `group` over all shards.
  uint64_t Stocked(const Group* group) const;

 private:
  // The rest of Refill: overflow, installing a slot, eviction. REQUIRES:
  // s.lock held; releases it.
  void RefillSlow(StockShard& s, Group* group, uint64_t n);
  // Returns pages straight to the counters.
  static void UnchargeDirect(Group* group, uint64_t n);

  // Uncharges the slot's pages; with `release` also drops the reference
  // and empties the slot. REQUIRES: s.lock held.
  void DrainSlot(StockShard& s, int i, bool release);

  const CpuIdSource cpu_;
  const int batch_;
  const int slots_;
  mutable PerCpu<StockShard> shards_;
};

}  // namespace internal
}  // namespace umemcg

#endif  // UMEMCG_SRC_CHARGE_STOCK_H_

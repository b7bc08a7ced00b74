// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ObjStock: per-CPU caches of pre-charged bytes for objcgs (kernel:
// obj_stock_pcp, E5 "shrink obj_stock_pcp and cache multiple objcgs").
// Each CPU shard holds up to `slots` objcgs with a uint16 byte count, a
// round-robin eviction cursor, the cached slab statistic deltas of one slot
// (memcg-reference.md 7.6) and its own TryLock, separate from the page
// stock's. Bytes in a slot are part of whole pages already charged to the
// objcg's current group; consuming them touches only the shard.
//
// Differences from the kernel, on purpose:
// - The kmem page statistic (and the per-group count of pages charged
//   through objcgs that Reap needs, see Controller) is also cached per
//   shard, for one group at a time, and applied past one batch or on owner
//   change: the statistics engine applies every update to shared atomics,
//   so 4 KiB objects (a page charge per object) would otherwise contend.
//   The cache is keyed by the group charged, not by objcg, so a reparent
//   in between cannot credit the wrong group.
// - Draining a slot returns the whole pages that accumulated in the
//   objcg's central pool (the kernel keeps them until the objcg is freed),
//   so usage is exact at quiescence (see obj_cgroup.h).
//
// Thread safety: all methods are safe from any thread. Consume and Refill
// use the shard's TryLock and fall back (fail / go direct, section 7.5)
// when it is taken; DrainAll waits for it.

#ifndef UMEMCG_SRC_OBJ_STOCK_H_
#define UMEMCG_SRC_OBJ_STOCK_H_

#include <cstdint>
#include <string>

#include "port/cpu.h"
#include "port/per_cpu.h"
#include "port/try_lock.h"
#include "umemcg/stats.h"
#include "umemcg/units.h"

namespace umemcg {
class Group;
class ObjCgroup;
namespace internal {

inline constexpr int kMaxObjStockSlots = 16;
inline constexpr uint64_t kObjSlotMaxBytes = UINT16_MAX;  // uint16 nr_bytes
// Cached slab deltas are int16 in the kernel (S16_MAX).
inline constexpr int64_t kObjStatCacheMax = INT16_MAX;

// One CPU's object stock. All fields are guarded by `lock`.
struct ObjStockShard {
  TryLock lock;
  int8_t stat_owner = -1;  // slot whose slab deltas are cached, -1 = none
  uint8_t drain_idx = 0;   // next eviction victim (E5 round robin)
  // Cached byte deltas: [0] slab_reclaimable, [1] slab_unreclaimable.
  int32_t slab_bytes[2] = {};
  uint16_t nr_bytes[kMaxObjStockSlots] = {};
  ObjCgroup* cached[kMaxObjStockSlots] = {};  // each holds a reference
  // Cached kmem pages of one group (holds a reference).
  Group* kmem_group = nullptr;
  int64_t kmem_pages = 0;
};

class ObjStock {
 public:
  // `slots` 1..16; `batch` bounds the cached kmem delta; `cache_stats`
  // false applies every statistic delta at once; `enabled` false is the
  // shared-pool variant (ObjCgroup goes through nr_charged_bytes only).
  ObjStock(CpuIdSource cpu, int slots, int batch, bool cache_stats,
           bool enabled);
  ~ObjStock();

  ObjStock(const ObjStock&) = delete;
  ObjStock& operator=(const ObjStock&) = delete;

  bool enabled() const { return enabled_; }
  int slots() const { return slots_; }

  // Takes `size` bytes of `objcg` from this CPU's stock and accounts +size
  // on `item`. False if the shard is busy or holds fewer (no partial use).
  // Kernel: consume_obj_stock() + __account_obj_stock().
  bool Consume(ObjCgroup* objcg, uint64_t size, StatItem item) {
    ObjStockShard& s = shards_[cpu_.CurrentShard()];
    if (!s.lock.try_lock()) return false;
    for (int i = 0; i < slots_; ++i) {
      if (s.cached[i] != objcg) continue;
      if (s.nr_bytes[i] < size) break;  // no partial use
      s.nr_bytes[i] = static_cast<uint16_t>(s.nr_bytes[i] - size);
      Account(s, i, item, static_cast<int64_t>(size));
      s.lock.unlock();
      return true;
    }
    s.lock.unlock();
    return false;
  }

  // Returns `size` bytes of a freed object of `objcg` to this CPU's stock
  // (allow_uncharge) and accounts -size on `item`. The common case (the
  // objcg's slot exists and stays within a page) is inline.
  void Uncharge(ObjCgroup* objcg, uint64_t size, StatItem item) {
    ObjStockShard& s = shards_[cpu_.CurrentShard()];
    if (s.lock.try_lock()) {
      for (int i = 0; i < slots_; ++i) {
        if (s.cached[i] != objcg) continue;
        const uint64_t cur = s.nr_bytes[i] + size;
        if (cur > kPageSize) break;  // pages to uncharge: the slow path
        s.nr_bytes[i] = static_cast<uint16_t>(cur);
        Account(s, i, item, -static_cast<int64_t>(size));
        s.lock.unlock();
        return;
      }
      s.lock.unlock();
    }
    Refill(objcg, size, /*allow_uncharge=*/true, item,
           -static_cast<int64_t>(size));
  }

  // Puts `bytes` of `objcg` into this CPU's stock and accounts `stat_delta`
  // on `item`; first credits `kmem_pages` (pages just charged to
  // `charged`) to the kmem statistic. Kernel: refill_obj_stock().
  void Refill(ObjCgroup* objcg, uint64_t bytes, bool allow_uncharge,
              StatItem item, int64_t stat_delta, Group* charged = nullptr,
              uint64_t kmem_pages = 0);

  // Drains, on every shard, each slot whose objcg points into `subtree`
  // (null: every slot) and the kmem cache of a group in it.
  void DrainAll(const Group* subtree);

  // Empty string if every slot is sane; else the first bad slot.
  std::string CheckInvariants() const;

  // ---- Direct application (no stock), shared with ObjCgroup ----

  // kmem += pages on `g` (and the per-group objcg page count).
  static void ApplyKmem(Group* g, int64_t pages);
  // `item` += delta on `g`, or on its nearest online ancestor when `g` was
  // removed (the kernel moves a dead group's stats to the parent).
  static void ApplyStat(Group* g, StatItem item, int64_t delta);
  // Returns `pages` charged through an objcg to `g`'s counters (via the
  // page stock; the root's counter directly, see ObjCgroup::ChargePages).
  static void UnchargePages(Group* g, uint64_t pages, bool via_stock);
  // Moves the pool's whole pages back to the current group's counters.
  static void ReturnPoolPages(ObjCgroup* objcg);

 private:
  // Kernel: __account_obj_stock(). The common case (caching on, a slab
  // item, this slot owns the cache, the sum stays within a page) inline.
  void Account(ObjStockShard& s, int slot, StatItem item, int64_t delta) {
    if (cache_stats_ && s.stat_owner == slot &&
        (item == StatItem::kSlabReclaimable ||
         item == StatItem::kSlabUnreclaimable)) {
      int32_t& cached =
          s.slab_bytes[item == StatItem::kSlabReclaimable ? 0 : 1];
      const int64_t d = delta + cached;
      if (d >= -static_cast<int64_t>(kPageSize) &&
          d <= static_cast<int64_t>(kPageSize)) {
        cached = static_cast<int32_t>(d);
        return;
      }
    }
    AccountLocked(s, slot, item, delta);
  }
  void AccountLocked(ObjStockShard& s, int slot, StatItem item, int64_t delta);
  void FlushStatsLocked(ObjStockShard& s);
  void CacheKmemLocked(ObjStockShard& s, Group* g, int64_t pages);
  void FlushKmemLocked(ObjStockShard& s);
  void DrainSlotLocked(ObjStockShard& s, int i);

  const CpuIdSource cpu_;
  const int slots_;
  const int64_t batch_;
  const bool cache_stats_;
  const bool enabled_;
  mutable PerCpu<ObjStockShard> shards_;
};

}  // namespace internal
}  // namespace umemcg

#endif  // UMEMCG_SRC_OBJ_STOCK_H_

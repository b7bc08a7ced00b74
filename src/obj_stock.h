// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ObjStock: per-CPU caches of pre-charged bytes for objcgs (kernel:
// obj_stock_pcp, E5 "shrink obj_stock_pcp and cache multiple objcgs").
// Each CPU shard holds up to `slots` objcgs, each with one 64-bit word
// packing the slot's byte count (uint16) and its cached slab statistic
// deltas (two int24, memcg-reference.md 7.6), a round-robin eviction
// cursor and its own TryLock, separate from the page stock's. Bytes in a
// slot are part of whole pages already charged to the objcg's current
// group; consuming them touches only the shard.
//
// The hit paths (TryCommitConsume, TryCommitUncharge) run as a restartable
// sequence when the CPU source is rseq (port/rseq.h): find the slot, then
// commit the new word with one plain store if this thread is still on that
// CPU and nothing changed: no atomic RMW at all. Everything else takes the
// shard's TryLock; a lock holder that is not running on the shard's CPU
// first fences out that CPU's sequences (RseqExclude), which only happens
// after a migration or in DrainAll. Without rseq (fake or getcpu CPU
// source, TSan builds, other architectures) the hit paths take the lock.
//
// Differences from the kernel, on purpose:
// - Slab deltas are cached per slot, not for one owner per CPU, so one
//   store commits a hit and switching between cached objcgs flushes
//   nothing. Each cached delta is bounded as in the kernel (int16 range,
//   within a page unless the cache was empty) and applied when it leaves
//   that range, when the slot is drained, or on DrainAll.
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
// use the rseq commit or the shard's TryLock and fall back (fail / go
// direct, section 7.5) when it is taken; DrainAll waits for it.

#ifndef UMEMCG_SRC_OBJ_STOCK_H_
#define UMEMCG_SRC_OBJ_STOCK_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "port/cpu.h"
#include "port/per_cpu.h"
#include "port/rseq.h"
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

// A slot's word: bits 0-15 the byte count, 16-39 the cached
// slab_reclaimable delta, 40-63 the slab_unreclaimable one, each delta
// stored offset by 2^23 (offset binary), so that adding a small delta to a
// field is a plain add on the word that never carries into the next field
// while the result stays in range (what the rseq hit path relies on).
struct SlotWord {
  static constexpr int kStatShift[2] = {16, 40};
  static constexpr int64_t kBias = int64_t{1} << 23;
  // No bytes, no cached deltas: what an empty slot holds.
  static constexpr uint64_t kEmpty = uint64_t{kBias} << 16 | uint64_t{kBias}
                                                                 << 40;

  static uint64_t bytes(uint64_t w) { return w & 0xffff; }
  static int64_t stat(uint64_t w, int which) {
    return static_cast<int64_t>((w >> kStatShift[which]) & 0xffffff) - kBias;
  }
  static bool has_stats(uint64_t w) {
    return (w & ~uint64_t{0xffff}) != (kEmpty & ~uint64_t{0xffff});
  }
  static uint64_t Make(uint64_t bytes, int64_t reclaimable,
                       int64_t unreclaimable) {
    return bytes | static_cast<uint64_t>(reclaimable + kBias) << 16 |
           static_cast<uint64_t>(unreclaimable + kBias) << 40;
  }
  static uint64_t WithBytes(uint64_t w, uint64_t bytes) {
    return (w & ~uint64_t{0xffff}) | bytes;
  }
  static uint64_t WithStat(uint64_t w, int which, int64_t delta) {
    return which == 0 ? Make(bytes(w), delta, stat(w, 1))
                      : Make(bytes(w), stat(w, 0), delta);
  }
};
static_assert(kObjStatCacheMax < (1 << 23), "a cached delta fits 24 bits");

// 0 for slab_reclaimable, 1 for slab_unreclaimable, -1 for other items.
inline int SlabIndex(StatItem item) {
  return item == StatItem::kSlabReclaimable     ? 0
         : item == StatItem::kSlabUnreclaimable ? 1
                                                : -1;
}

// One CPU's object stock. All fields are written under `lock` (and, with
// rseq, by the owning CPU's commit of `word`). `word` and `cached` are
// atomics so that the rseq path may read them unlocked; relaxed accesses
// everywhere: the lock and the rseq protocol order them.
struct ObjStockShard {
  TryLock lock;
  uint8_t drain_idx = 0;  // next eviction victim (E5 round robin)
  std::atomic<uint64_t> word[kMaxObjStockSlots] = {};      // SlotWord
  std::atomic<ObjCgroup*> cached[kMaxObjStockSlots] = {};  // hold a reference
  // Cached kmem pages of one group (holds a reference).
  Group* kmem_group = nullptr;
  int64_t kmem_pages = 0;

  ObjCgroup* slot(int i) const {
    return cached[i].load(std::memory_order_relaxed);
  }
  uint64_t slot_word(int i) const {
    return word[i].load(std::memory_order_relaxed);
  }
  void set_word(int i, uint64_t w) {
    word[i].store(w, std::memory_order_relaxed);
  }

  ObjStockShard() {
    for (auto& w : word) w.store(SlotWord::kEmpty, std::memory_order_relaxed);
  }
};
static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t) &&
              sizeof(std::atomic<ObjCgroup*>) == sizeof(uint64_t));

class ObjStock {
 public:
  // `slots` 1..16; `batch` bounds the cached kmem delta; `cache_stats`
  // false applies every statistic delta at once; `enabled` false is the
  // shared-pool variant (ObjCgroup goes through nr_charged_bytes only).
  ObjStock(CpuIdSource cpu, int slots, int batch, bool cache_stats,
           bool enabled, bool rseq = true);
  ~ObjStock();

  ObjStock(const ObjStock&) = delete;
  ObjStock& operator=(const ObjStock&) = delete;

  bool enabled() const { return enabled_; }
  int slots() const { return slots_; }

  // True when the hit paths commit through rseq (see the file comment).
  bool rseq() const { return rseq_; }

  // The rseq hits alone (Consume / Uncharge without the locked path):
  // true when committed. Sizes of 1..4096 bytes only (0 and larger ones go
  // the checked way); false always without rseq or with the stock off.
  [[gnu::always_inline]] bool TryCommitConsume(ObjCgroup* objcg, uint64_t size,
                                               StatItem item) {
    return rseq_ && size - 1 < kPageSize && CommitHit(objcg, size, true, item);
  }
  [[gnu::always_inline]] bool TryCommitUncharge(ObjCgroup* objcg, uint64_t size,
                                                StatItem item) {
    return rseq_ && size - 1 < kPageSize && CommitHit(objcg, size, false, item);
  }

  // Takes `size` bytes of `objcg` from this CPU's stock and accounts +size
  // on `item`. False if the shard is busy or holds fewer (no partial use).
  // The locked path: callers try TryCommitConsume first (ObjCgroup::Charge
  // does), so a miss does not run the rseq attempt twice.
  // Kernel: consume_obj_stock() + __account_obj_stock().
  bool Consume(ObjCgroup* objcg, uint64_t size, StatItem item) {
    const int k = TryLockCurrent();
    if (k < 0) return false;
    ObjStockShard& s = shards_[k];
    for (int i = 0; i < slots_; ++i) {
      if (s.slot(i) != objcg) continue;
      const uint64_t bytes = SlotWord::bytes(s.slot_word(i));
      if (bytes < size) break;  // no partial use
      s.set_word(i, SlotWord::WithBytes(s.slot_word(i), bytes - size));
      Account(s, i, item, static_cast<int64_t>(size));
      s.lock.unlock();
      return true;
    }
    s.lock.unlock();
    return false;
  }

  // Returns `size` bytes of a freed object of `objcg` to this CPU's stock
  // (allow_uncharge) and accounts -size on `item`. The locked path, after
  // TryCommitUncharge (as Consume); the common case (the objcg's slot
  // exists and stays within a page) is inline.
  void Uncharge(ObjCgroup* objcg, uint64_t size, StatItem item) {
    if (const int k = TryLockCurrent(); k >= 0) {
      ObjStockShard& s = shards_[k];
      for (int i = 0; i < slots_; ++i) {
        if (s.slot(i) != objcg) continue;
        const uint64_t cur = SlotWord::bytes(s.slot_word(i)) + size;
        if (cur > kPageSize) break;  // pages to uncharge: the slow path
        s.set_word(i, SlotWord::WithBytes(s.slot_word(i), cur));
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
  // This CPU's shard locked (port/rseq.h), or -1 when it is busy.
  int TryLockCurrent() {
    return TryLockShard(shards_, cpu_.CurrentShard(), rseq_);
  }
  void LockShard(int k) const { internal::LockShard(shards_, k, rseq_); }
  // The rseq hit path of Consume (`consume`) and Uncharge: true when it
  // committed; false sends the caller to the locked path. Inline: it is
  // the whole cost of an accounted small object.
  bool CommitHit(ObjCgroup* objcg, uint64_t size, bool consume, StatItem item) {
#if UMEMCG_HAVE_RSEQ_COMMIT
    const int which = cache_stats_ ? SlabIndex(item) : -1;
    // An abort (preempted, migrated or signalled between the CPU read and
    // the commit) is rare: the locked path takes over, no retry loop (it
    // would keep more values live and cost the hit a stack frame).
    {
      const uint32_t cpu = RseqCpuId();
      if (cpu >= nr_shards_) return false;
      ObjStockShard& s = shards_[static_cast<int>(cpu)];
      int i = 0;
      while (s.slot(i) != objcg) {
        if (++i == slots_) return false;
      }
      // Unlocked reads: the commit re-checks the lock, the slot and the
      // word, so a stale read only makes it fail.
      const uint64_t w = s.slot_word(i);
      uint64_t desired;
      if (consume) {
        if (SlotWord::bytes(w) < size) return false;  // no partial use
        desired = w - size;
      } else {
        if (SlotWord::bytes(w) + size > kPageSize) return false;  // pages
        desired = w + size;
      }
      if (which >= 0) {
        // The common case of Account's rule (the delta stays within a
        // page); the rest goes through the lock. Offset binary: the add
        // cannot carry out of the field. Branches, not SlotWord's table:
        // this is the whole cost of an accounted object.
        const uint64_t field = which != 0 ? w >> 40 : (w >> 16) & 0xffffff;
        const uint64_t moved = consume ? field + size : field - size;
        if (moved - (SlotWord::kBias - kPageSize) > 2 * kPageSize) {
          return false;
        }
        const uint64_t unit =
            which != 0 ? uint64_t{1} << 40 : uint64_t{1} << 16;
        desired = consume ? desired + size * unit : desired - size * unit;
      }
      switch (RseqCompareStore(cpu, s.lock.address(), &s.cached[i], objcg,
                               reinterpret_cast<uint64_t*>(&s.word[i]), w,
                               desired)) {
        case RseqResult::kCommitted:
          // Statistics that are not cached are applied at once, as under
          // the lock (ModState has its own per-CPU path).
          if (which < 0) ApplyUncachedStat(objcg, item, size, consume);
          return true;
        case RseqResult::kMismatch:
        case RseqResult::kAborted:
          return false;
      }
    }
#else
    (void)objcg, (void)size, (void)consume, (void)item;
#endif
    return false;
  }
  static void ApplyUncachedStat(ObjCgroup* objcg, StatItem item, uint64_t size,
                                bool consume);
  // Kernel: __account_obj_stock(), for slot `slot` of a locked shard.
  void Account(ObjStockShard& s, int slot, StatItem item, int64_t delta);
  void FlushSlotStatsLocked(ObjStockShard& s, int i);
  void CacheKmemLocked(ObjStockShard& s, Group* g, int64_t pages);
  void FlushKmemLocked(ObjStockShard& s);
  void DrainSlotLocked(ObjStockShard& s, int i);

  const CpuIdSource cpu_;
  const int slots_;
  const int64_t batch_;
  const bool cache_stats_;
  const bool enabled_;
  const bool rseq_;
  const uint32_t nr_shards_;
  mutable PerCpu<ObjStockShard> shards_;
};

}  // namespace internal
}  // namespace umemcg

#endif  // UMEMCG_SRC_OBJ_STOCK_H_

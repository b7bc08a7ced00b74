// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ObjStock: per-CPU caches of pre-charged bytes for objcgs (kernel:
// obj_stock_pcp, E5 "shrink obj_stock_pcp and cache multiple objcgs").
// Each CPU shard holds up to `slots` objcgs, each with one 64-bit word
// packing the slot's byte count (uint16) and its cached slab statistic
// deltas (two int24; kernel: __account_obj_stock), a round-robin eviction
// cursor and its own TryLock, separate from the page stock's. Bytes in a
// slot are part of whole pages already charged to the objcg's current
// group; consuming them touches only the shard.
//
// The hit paths (TryCommitConsume, TryCommitUncharge, TryCommitUncached)
// run as a restartable sequence when the CPU source is rseq (port/rseq.h's
// protocol, written out in Sequence): find the slot, then inside the
// sequence re-check the CPU, the lock byte and the slot, read the word,
// compute and store the new one: no atomic RMW at all. Everything else
// takes the shard's TryLock; a lock holder that is not running on the
// shard's CPU first fences out that CPU's sequences (RseqExclude), which
// only happens after a migration or in DrainAll. Without rseq (fake or
// getcpu CPU source, ControllerOptions::stock_rseq false, TSan builds,
// other architectures) the hit paths take the lock.
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
//   in between cannot credit the wrong group. It holds a reference to that
//   group and records the shard in the group (Group::kmem_shards_), so a
//   removal flushes only the shards caching it; a removed group is never
//   cached again (its deltas are applied at once).
//
// Group pointers. An objcg's group() may be removed and freed while the
// objcg lives (obj_cgroup.h): code here follows it only under the shard's
// lock (the controller takes every shard lock once before freeing a
// group, WaitForLockHolders) or inside a read section of the controller's
// group SRCU (Refill, the uncached statistic of an rseq hit).
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
#include <cstddef>
#include <cstdint>
#include <string>

#include "port/cpu.h"
#include "port/per_cpu.h"
#include "port/rseq.h"
#include "port/srcu.h"
#include "port/try_lock.h"
#include "umemcg/obj_cgroup.h"
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
  uint16_t index = 0;     // this shard's number (set once)
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
  friend class ScaleTestPeer;
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
  int nr_shards() const { return shards_.size(); }
  // The controller's group SRCU (set once, before any use).
  void set_srcu(Srcu* srcu) { srcu_ = srcu; }
  // For ObjCgroup's copy (see there): the shards, and how many the rseq
  // hit may use (0 without rseq).
  ObjStockShard* shards_base() const { return base_; }
  uint32_t hit_shards() const { return hit_shards_; }
  bool cache_stats() const { return cache_stats_; }

  // True when the hit paths commit through rseq (see the file comment).
  bool rseq() const { return rseq_; }

  // The rseq hits alone (Consume / Uncharge without the locked path):
  // true when committed. Sizes of 1..4096 bytes only (0 and larger ones go
  // the checked way); false always without rseq or with the stock off.
  [[gnu::always_inline]] bool TryCommitConsume(ObjCgroup* objcg, uint64_t size,
                                               StatItem item) {
    return size - 1 < kPageSize && CommitHit(objcg, size, true, item);
  }
  [[gnu::always_inline]] bool TryCommitUncharge(ObjCgroup* objcg, uint64_t size,
                                                StatItem item) {
    return size - 1 < kPageSize && CommitHit(objcg, size, false, item);
  }
  // The same for a statistic the stock does not cache (other items, or
  // obj_stat_cache = false), which the two above leave alone so that the
  // slab hits need no stack frame: the sequence, then the statistic
  // applied at once, as under the lock (ModState has its own per-CPU
  // path). Callers try it on their slow path, before the lock.
  bool TryCommitUncached(ObjCgroup* objcg, uint64_t size, bool consume,
                         StatItem item) {
#if UMEMCG_HAVE_RSEQ_COMMIT
    if (size - 1 >= kPageSize || (cache_stats_ && SlabIndex(item) >= 0)) {
      return false;
    }
    if (!(consume ? Sequence<true, -1>(objcg, size)
                  : Sequence<false, -1>(objcg, size))) {
      return false;
    }
    ApplyUncachedStat(objcg, item, size, consume);
    return true;
#else
    (void)objcg, (void)size, (void)consume, (void)item;
    return false;
#endif
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
              StatItem item, int64_t stat_delta) {
    SrcuReadScope section(*srcu_);
    RefillInSection(objcg, bytes, allow_uncharge, item, stat_delta);
  }
  // The same, for a caller already inside a group SRCU read section (that
  // covers `charged`, which it read from the objcg).
  void RefillInSection(ObjCgroup* objcg, uint64_t bytes, bool allow_uncharge,
                       StatItem item, int64_t stat_delta,
                       Group* charged = nullptr, uint64_t kmem_pages = 0);

  // Drains, on every shard, each slot whose objcg points into `subtree`
  // (null: every slot) and the kmem cache of a group in it.
  void DrainAll(const Group* subtree);
  // Applies and drops the kmem caches holding `g`, on the shards recorded
  // in it only (RemoveGroup: g is offline, so none caches it again).
  void FlushKmemOf(Group* g);
  // Takes and releases every shard's lock once: afterwards no locked
  // section that read an objcg's group before the call is still running
  // (part of the controller's grace period). Nothing else waits.
  void WaitForLockHolders();

  uint64_t drained_shards() const {
    return drained_shards_.load(std::memory_order_relaxed);
  }

  // Empty string if every slot is sane; else the first bad slot.
  std::string CheckInvariants() const;

  // Shard k's lock (tests, fork handling).
  TryLock& ShardLock(int k) { return shards_[k].lock; }
  // The group whose kmem pages shard k caches (tests; read unlocked).
  const Group* KmemGroup(int k) const { return shards_[k].kmem_group; }

  // ---- Direct application (no stock), shared with ObjCgroup ----

  // kernel (MEMCG_KMEM) += pages on `g` (and the per-group objcg page
  // count).
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
  // The rseq hit path of Consume (`consume`) and Uncharge for a statistic
  // cached in the slot's word: true when it committed; false sends the
  // caller on (TryCommitUncached, then the locked path). Inline: it is the
  // whole cost of an accounted small object. The statistic decides which
  // field the sequence moves, a predictable branch.
  [[gnu::always_inline]] bool CommitHit(ObjCgroup* objcg, uint64_t size,
                                        bool consume, StatItem item) {
#if UMEMCG_HAVE_RSEQ_COMMIT
    const int which = objcg->stock_cache_stats_ ? SlabIndex(item) : -1;
    if (which == 1) {
      return consume ? Sequence<true, 1>(objcg, size)
                     : Sequence<false, 1>(objcg, size);
    }
    if (which == 0) {
      return consume ? Sequence<true, 0>(objcg, size)
                     : Sequence<false, 0>(objcg, size);
    }
    return false;  // not cached here: TryCommitUncached
#else
    (void)objcg, (void)size, (void)consume, (void)item;
    return false;
#endif
  }

#if UMEMCG_HAVE_RSEQ_COMMIT
  // One restartable sequence on this CPU's shard, written out as the page
  // stock's (charge_stock.h): the CPU id, the shard and the objcg's slot
  // (slot 0 inline, the others out of line) before it; inside it the CPU,
  // the lock byte and the slot are re-checked, the slot's word read, the
  // byte count checked (kConsume: no partial use; else within a page),
  // the cached slab field kWhich (-1: none) moved by the size within
  // Account's bound (the delta stays within a page of zero; past it the
  // locked path applies it), and the new word stored: the commit. An
  // abort (preempted, migrated or signalled inside) is rare: the locked
  // path takes over, no retry. REQUIRES: 1 <= size <= kPageSize.
  template <bool kConsume, int kWhich>
  [[gnu::always_inline]] bool Sequence(ObjCgroup* objcg, uint64_t size) {
    static_assert(PerCpu<ObjStockShard>::kStride == 320);
    static_assert(SlotWord::kStatShift[0] == 16 &&
                  SlotWord::kStatShift[1] == 40);
    constexpr int kShift = kWhich == 0 ? 16 : 40;
    // Registers: the four arguments of Charge / Uncharge stay live (for
    // the tail call to the slow path), the shard fields come from the
    // objcg's copies, four scratch: no stack frame.
    asm goto(
        ".pushsection __rseq_cs, \"aw?\"\n\t"
        ".balign 32\n\t"
        "3:\n\t"
        ".long 0x0, 0x0\n\t"
        ".quad 1f, (2f - 1f), 4f\n\t"
        ".popsection\n\t"
        "movl %%fs:4(%[off]), %%eax\n\t"  // cpu_id
        "cmpl %[hit_shards], %%eax\n\t"
        "jae %l[miss]\n\t"
        "leaq (%%rax,%%rax,4), %%r11\n\t"  // x 320 (kStride)
        "shlq $6, %%r11\n\t"
        "addq %[base], %%r11\n\t"
        "xorl %%r10d, %%r10d\n\t"
        "cmpq %[objcg], %c[cached](%%r11)\n\t"
        "jne 7f\n\t"
        "8:\n\t"
        "leaq 3b(%%rip), %%r9\n\t"
        "movq %%r9, %%fs:8(%[off])\n\t"  // rseq_cs: the sequence starts
        "1:\n\t"
        "cmpl %%fs:4(%[off]), %%eax\n\t"  // still on that CPU?
        "jne %l[miss]\n\t"
        "cmpb $0, %c[lock](%%r11)\n\t"
        "jne %l[miss]\n\t"
        "cmpq %[objcg], %c[cached](%%r11,%%r10,8)\n\t"
        "jne %l[miss]\n\t"
        "movq %c[word](%%r11,%%r10,8), %%rax\n\t"
        "movzwl %%ax, %%r9d\n\t"  // the byte count
        ".if %c[consume]\n\t"
        "cmpq %[size], %%r9\n\t"
        "jb %l[miss]\n\t"
        "subq %[size], %%rax\n\t"
        ".else\n\t"
        "addq %[size], %%r9\n\t"
        "cmpq %[page], %%r9\n\t"
        "ja %l[miss]\n\t"
        "addq %[size], %%rax\n\t"
        ".endif\n\t"
        ".if %c[which] >= 0\n\t"
        "movq %%rax, %%r9\n\t"
        "shrq %[shift], %%r9\n\t"
        ".if %c[which] == 0\n\t"
        "andl $0xffffff, %%r9d\n\t"
        ".endif\n\t"
        ".if %c[consume]\n\t"
        "addq %[size], %%r9\n\t"
        ".else\n\t"
        "subq %[size], %%r9\n\t"
        ".endif\n\t"
        "subq %[low], %%r9\n\t"  // within a page of zero (offset binary)
        "cmpq %[span], %%r9\n\t"
        "ja %l[miss]\n\t"
        "movq %[size], %%r9\n\t"  // the field's change, size << shift
        "shlq %[shift], %%r9\n\t"
        ".if %c[consume]\n\t"
        "addq %%r9, %%rax\n\t"
        ".else\n\t"
        "subq %%r9, %%rax\n\t"
        ".endif\n\t"
        ".endif\n\t"
        "movq %%rax, %c[word](%%r11,%%r10,8)\n\t"  // the commit
        "2:\n\t"
        // The rest of the slot scan, outside the sequence.
        ".pushsection .text.unlikely, \"ax?\"\n\t"
        "7:\n\t"
        "incl %%r10d\n\t"
        "cmpl %[slots], %%r10d\n\t"
        "jae %l[miss]\n\t"
        "cmpq %[objcg], %c[cached](%%r11,%%r10,8)\n\t"
        "jne 7b\n\t"
        "jmp 8b\n\t"
        ".popsection\n\t"
        ".pushsection __rseq_failure, \"ax?\"\n\t"
        ".byte 0x0f, 0xb9, 0x3d\n\t"
        ".long 0x53053053\n\t"  // RSEQ_SIG (x86), checked in port/rseq.cc
        "4:\n\t"
        "jmp %l[miss]\n\t"
        ".popsection\n\t"
        :
        :
        [off] "r"(rseq_area_offset), [hit_shards] "m"(objcg->stock_hit_shards_),
        [base] "m"(objcg->stock_shards_), [objcg] "r"(objcg),
        [slots] "m"(objcg->stock_slots_), [size] "r"(size),
        [cached] "i"(offsetof(ObjStockShard, cached)),
        [word] "i"(offsetof(ObjStockShard, word)),
        [lock] "i"(offsetof(ObjStockShard, lock)),
        [consume] "i"(kConsume ? 1 : 0), [which] "i"(kWhich),
        [shift] "i"(kShift), [page] "i"(kPageSize),
        [low] "i"(SlotWord::kBias - static_cast<int64_t>(kPageSize)),
        [span] "i"(2 * kPageSize)
        : "memory", "cc", "rax", "r9", "r10", "r11"
        : miss);
    return true;
  miss:
    return false;
  }
#endif

  static void ApplyUncachedStat(ObjCgroup* objcg, StatItem item, uint64_t size,
                                bool consume);
  // Kernel: __account_obj_stock(), for slot `slot` of a locked shard.
  void Account(ObjStockShard& s, int slot, StatItem item, int64_t delta);
  void FlushSlotStatsLocked(ObjStockShard& s, int i);
  void CacheKmemLocked(ObjStockShard& s, Group* g, int64_t pages);
  void FlushKmemLocked(ObjStockShard& s);
  void DrainSlotLocked(ObjStockShard& s, int i);

  const CpuIdSource cpu_;
  const int32_t slots_;
  const int64_t batch_;
  const bool cache_stats_;
  const bool enabled_;
  const bool rseq_;
  const uint32_t nr_shards_;
  const uint32_t hit_shards_;  // nr_shards_ with rseq_, else 0
  Srcu* srcu_ = nullptr;
  // Shards locked by DrainAll and FlushKmemOf (tests count removal work;
  // relaxed: a counter that publishes nothing).
  std::atomic<uint64_t> drained_shards_{0};
  mutable PerCpu<ObjStockShard> shards_;
  ObjStockShard* const base_;  // &shards_[0]
};

}  // namespace internal
}  // namespace umemcg

#endif  // UMEMCG_SRC_OBJ_STOCK_H_

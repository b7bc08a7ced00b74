// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ChargeStock: per-CPU caches of pre-charged pages (kernel: memcg_stock_pcp,
// the E4/E5 multi-memcg stock). Each CPU shard holds up to `slots` groups,
// each with a 32-bit page count (batches of up to 4096 pages), and a
// round-robin eviction cursor. Pages in a slot are already charged to the
// group and all its ancestors; consuming them touches only the shard.
//
// Per-group batch. A slot holds at most its group's current batch
// (Group::batch_): the controller's `batch` for every group under the
// fixed policy, a value the adaptive policy moves per group (charge.cc,
// adaptive_batch.h). A group's batch only shrinks together with a trim of
// its slots (TrimGroup), so a slot holds more than it only while a trim
// that found a shard busy is pending (Group::trim_pending_): the group's
// next batch event trims again.
//
// Differences from the kernel, on purpose:
// - A slot that overflows one batch on refill returns its pages but keeps
//   its group reference (nr_pages = 0). The kernel drops and retakes the
//   css reference, which is free there (percpu_ref); ours is one shared
//   atomic, so keeping it saves two contended RMWs per batch.
// - DrainAll is synchronous and drains only the slots of the subtree, not
//   every slot of a CPU that holds one (see Controller::DrainAllStocks).
// - Page counts are 32-bit (the kernel's are uint8, MEMCG_CHARGE_BATCH <=
//   S8_MAX), for batches up to 4096 pages. Not 16-bit: a 16-bit store and
//   reload of the same count (a charge, then an uncharge) is not renamed
//   in the store queue on current x86 cores and costs a store-forwarding
//   round trip, about 3 ns per pair on the AMD EPYC machine the benchmarks
//   run on; 32- and 64-bit ones are free.
// - Each group records the shards whose slots cache it
//   (Group::stock_shards_, set on install, cleared on eviction), so that
//   removing a group locks (and fences) only those shards: DrainGroup.
//
// Hit paths. With the rseq CPU source, ConsumeHit and RefillHit are one
// restartable sequence each (port/rseq.h's protocol, written out here):
// store the descriptor, then inside the sequence read the CPU id, check
// the shard's lock byte, find the group's slot (slot 0 inline; the others
// out of line, re-entering the sequence from the start), read the slot's
// count, check it (and the group's batch) and store the new count: the
// commit. Each value is read once: the sequence starts before the CPU id
// is read, so nothing needs re-checking. No atomic RMW, no lock, no stack
// frame, no taken branch. Everything else takes the shard's
// TryLock, fencing the shard's CPU (RseqExclude) when the holder is not
// running on it. Without rseq the hit paths report a miss and the callers
// take the locked paths (ConsumeMiss, RefillMiss).
//
// Footprint: one 256-byte shard (four cache lines) per CPU: the 16 counts
// (64 bytes), then the lock word, the eviction cursor and the shard's
// number, then the 16 group pointers (the first six on the lock's line). A
// hit on one of the first six slots reads two lines.
//
// Thread safety: all methods are safe from any thread. Consume and Refill
// use the rseq commit or the shard's TryLock and fall back (fail /
// uncharge directly) when it is taken; DrainAll waits for it; Stocked
// reads without it (exact at quiescence).

#ifndef UMEMCG_SRC_CHARGE_STOCK_H_
#define UMEMCG_SRC_CHARGE_STOCK_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "adaptive_batch.h"
#include "port/cpu.h"
#include "port/per_cpu.h"
#include "port/rseq.h"
#include "port/try_lock.h"
#include "umemcg/group.h"

namespace umemcg {
namespace internal {

inline constexpr int kMaxStockSlots = 16;
inline constexpr int kMaxBatch = 4096;

// One CPU's stock. Written under `lock` and, with rseq, by the owning
// CPU's commit of a slot's count; atomics so that the rseq path and
// Stocked may read them unlocked. Relaxed accesses everywhere: the lock
// and the rseq protocol order them.
struct StockShard {
  // <= the group's batch, except while its trim is pending (above).
  std::atomic<uint32_t> nr_pages[kMaxStockSlots] = {};
  TryLock lock;
  uint8_t drain_idx = 0;  // next eviction victim (E5 round robin)
  uint16_t index = 0;     // this shard's number (set once)
  std::atomic<Group*> cached[kMaxStockSlots] = {};  // each holds a reference

  Group* group(int i) const {
    return cached[i].load(std::memory_order_relaxed);
  }
  uint64_t pages(int i) const {
    return nr_pages[i].load(std::memory_order_relaxed);
  }
  void set_pages(int i, uint64_t n) {
    nr_pages[i].store(static_cast<uint32_t>(n), std::memory_order_relaxed);
  }
};

class ChargeStock {
 public:
  // `batch`: the base batch (ControllerOptions::batch). `rseq`: use rseq
  // commits when this process supports them. `adaptive`: per-group
  // batches move by `policy` (BatchPolicy::kAdaptive).
  ChargeStock(CpuIdSource cpu, int batch, int slots, bool rseq,
              bool adaptive = false, int batch_max = 0);
  ~ChargeStock();

  ChargeStock(const ChargeStock&) = delete;
  ChargeStock& operator=(const ChargeStock&) = delete;

  const CpuIdSource& cpu() const { return cpu_; }
  int batch() const { return batch_; }
  int slots() const { return slots_; }
  int nr_shards() const { return static_cast<int>(nr_shards_); }

  // True when the hit paths commit through rseq (see the file comment).
  bool rseq() const { return rseq_; }

  // BatchPolicy::kAdaptive and its rule (adaptive_batch.h).
  bool adaptive() const { return adaptive_; }
  const AdaptiveBatch& policy() const { return policy_; }

  // The rseq hit of Consume: true when `n` pages of `group` were taken
  // from this CPU's stock. False (never an error) when rseq is off, the
  // slot is missing or short, the shard is locked, or the sequence was
  // aborted twice: the caller then tries Consume (or charges).
  bool ConsumeHit(const Group* group, uint64_t n) {
#if UMEMCG_HAVE_RSEQ_COMMIT
    for (int attempt = 0; attempt < 2; ++attempt) {
      switch (RseqUpdate</*kConsume=*/true>(group, n)) {
        case RseqResult::kCommitted:
          return true;
        case RseqResult::kMismatch:
          return false;
        case RseqResult::kAborted:
          break;
      }
    }
#else
    (void)group, (void)n;
#endif
    return false;
  }

  // The rseq hit of Refill: true when `n` pages were added to `group`'s
  // slot on this CPU, staying within the group's batch. False when rseq
  // is off, the slot is missing, it would pass the batch, the shard is
  // locked or the sequence was aborted twice: the caller then calls
  // Refill.
  bool RefillHit(const Group* group, uint64_t n) {
#if UMEMCG_HAVE_RSEQ_COMMIT
    if (n > static_cast<uint64_t>(kMaxBatch)) return false;
    for (int attempt = 0; attempt < 2; ++attempt) {
      switch (RseqUpdate</*kConsume=*/false>(group, n)) {
        case RseqResult::kCommitted:
          return true;
        case RseqResult::kMismatch:
          return false;
        case RseqResult::kAborted:
          break;
      }
    }
#else
    (void)group, (void)n;
#endif
    return false;
  }

  // Takes `n` pages of `group` from this CPU's stock: the rseq hit, else
  // under the shard's lock. False if the shard is busy or the slot holds
  // fewer than n (no partial use). Kernel: consume_stock().
  bool Consume(Group* group, uint64_t n) {
    return rseq_ ? ConsumeHit(group, n) : ConsumeMiss(group, n);
  }
  // Consume after ConsumeHit failed: with rseq nothing more to try (the
  // hit fails only where the locked path would: a busy shard, a missing or
  // short slot; or after two aborts, when charging a batch is also
  // right), else the locked path.
  bool ConsumeMiss(Group* group, uint64_t n) {
    return !rseq_ && ConsumeLocked(group, n);
  }

  // Puts `n` charged pages of `group` into this CPU's stock; they are
  // uncharged directly when n > the group's batch, the shard is busy or
  // the group is offline. A slot passing the batch returns its pages to
  // the counters. Kernel: refill_stock(). Returns true when a slot passed
  // its batch (a batch event for the adaptive policy).
  bool Refill(Group* group, uint64_t n) {
    return !RefillHit(group, n) && RefillMiss(group, n);
  }
  // Refill after RefillHit failed: the locked path.
  bool RefillMiss(Group* group, uint64_t n);

  // Drains, on every shard, each slot whose group is `subtree` or below it
  // (null: every slot), dropping the slots' references.
  void DrainAll(const Group* subtree);
  // DrainAll for a charge that must not block (async-signal-safe): a
  // shard whose lock stays busy for a few tries is skipped (its holder
  // may be the thread this charge interrupted). False if one was.
  bool TryDrainAll(const Group* subtree);
  // Drains the slots of `group` on the shards recorded in it only.
  // REQUIRES: `group` is offline (RemoveGroup) and has no online
  // descendant, so no slot caches it anywhere else or again.
  void DrainGroup(Group* group);
  // Returns the pages of `group`'s own slots on every shard (keeping the
  // slots): after it, no slot holds more than the group's batch read
  // under each shard's lock. Never blocks (charge and uncharge paths call
  // it, signal handlers included): a shard whose lock stays busy for a
  // few tries is skipped, and false returned; the caller marks the trim
  // pending (Group::trim_pending_) and trims again later.
  bool TrimGroup(const Group* group);

  uint64_t drained_shards() const {
    return drained_shards_.load(std::memory_order_relaxed);
  }

  // Empty string if every slot holds at most its group's batch and a
  // referenced group; else a description of the first bad slot.
  // Quiescent use only.
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
  // A few try-locks of shard k (a holder on another CPU releases within
  // them); false if it stays busy. Never waits.
  bool TryLockShardBriefly(int k) const;
  // DrainAll (try_only: TryDrainAll, skipping busy shards; false then).
  bool DrainSubtree(const Group* subtree, bool try_only);

#if UMEMCG_HAVE_RSEQ_COMMIT
  // One restartable sequence on this CPU's shard: find `group`'s slot and
  // store its count minus `n` (kConsume; mismatch when short) or plus `n`
  // (mismatch past the group's batch). Mismatch also when the shard is
  // locked, the slot is missing or the CPU id is not below hit_shards_;
  // aborted when preempted, migrated or signalled inside (nothing stored).
  //
  // The sequence starts before the CPU id is read, so the id, the shard,
  // the lock byte and the slot are read once each and stay valid up to
  // the commit: nothing is re-checked. hit_shards_ is 0 without rseq
  // commits, and the sequence is not entered then (rseq_area_offset is
  // only known valid once rseq commits were enabled); an rseq area that
  // is not registered holds a negative id, which fails the bound. Slot 0
  // is inline; the scan of the others runs out of line, outside the
  // sequence's range (a preemption there clears the descriptor without an
  // abort), and re-enters it from the descriptor store with the found
  // index: every check is then made again, on whatever CPU runs it. When
  // that slot no longer holds the group there (a migration, or a slot
  // change), the scan starts again from slot 0 on the CPU the re-entry
  // read and enters a second copy of the sequence (its own descriptor,
  // out of line), which gives up on a miss: resuming after the found
  // index would miss the new CPU's lower slots and send a hit to the
  // locked path. The hit path itself is unchanged by this.
  template <bool kConsume>
  RseqResult RseqUpdate(const Group* group, uint64_t n) {
    static_assert(sizeof(uint32_t) == sizeof(StockShard::nr_pages[0]));
    static_assert(sizeof(Group*) == sizeof(StockShard::cached[0]));
    static_assert(sizeof(int32_t) == sizeof(Group::batch_));
    static_assert(PerCpu<StockShard>::kStride == 256);
    // The descriptor (start, length up to and including the commit,
    // abort handler) lives in a writable data section, as in port/rseq.h;
    // the kernel clears rseq_cs on abort, so each attempt stores it. The
    // abort handler is preceded by glibc's RSEQ_SIG (x86), inside a ud1.
    // The sequence's body: CPU id, shard, lock byte, slot r10, count,
    // commit. MISS: where a slot that does not hold the group goes.
#define UMEMCG_STOCK_SEQUENCE(MISS)                                     \
  "movl %%fs:4(%[off]), %%eax\n\t" /* cpu_id, fixed until the commit */ \
  "cmpl %[hit_shards], %%eax\n\t"                                       \
  "jae %l[mismatch]\n\t"                                                \
  "movl %%eax, %%r11d\n\t"                                              \
  "shlq $8, %%r11\n\t" /* x kStride (256, above) */                     \
  "addq %[base], %%r11\n\t"                                             \
  "cmpb $0, %c[lock](%%r11)\n\t" /* the shard's lock byte */            \
  "jne %l[mismatch]\n\t"                                                \
  "cmpq %[group], %c[cached](%%r11,%%r10,8)\n\t"                        \
  "jne " MISS                                                           \
  "\n\t"                                                                \
  "movl %c[nr_pages](%%r11,%%r10,4), %%eax\n\t"                         \
  ".if %c[consume]\n\t"                                                 \
  "subq %[n], %%rax\n\t"                                                \
  "jb %l[mismatch]\n\t" /* short: no partial use */                     \
  ".else\n\t"                                                           \
  "addl %k[n], %%eax\n\t"    /* n <= kMaxBatch: no carry */             \
  "cmpl %[batch], %%eax\n\t" /* the group's batch, read inside */       \
  "ja %l[mismatch]\n\t"                                                 \
  ".endif\n\t"                                                          \
  "movl %%eax, %c[nr_pages](%%r11,%%r10,4)\n\t" /* the commit */
    asm goto(
        ".pushsection __rseq_cs, \"aw?\"\n\t"
        ".balign 32\n\t"
        "3:\n\t"
        ".long 0x0, 0x0\n\t"
        ".quad 1f, (2f - 1f), 4f\n\t"
        // The second sequence's (out of line, below).
        ".balign 32\n\t"
        "5:\n\t"
        ".long 0x0, 0x0\n\t"
        ".quad 11f, (12f - 11f), 4f\n\t"
        ".popsection\n\t"
        "cmpl $0, %[hit_shards]\n\t"  // rseq commits off: never enter
        "je %l[mismatch]\n\t"
        "xorl %%r10d, %%r10d\n\t"  // the slot: 0, or the scan's find
        "8:\n\t"
        "leaq 3b(%%rip), %%rcx\n\t"
        "movq %%rcx, %%fs:8(%[off])\n\t"  // rseq_cs: the sequence starts
        "1:\n\t" UMEMCG_STOCK_SEQUENCE("7f")
        "2:\n\t"
        // The rest of the slot scan, out of line and outside the sequence.
        ".pushsection .text.unlikely, \"ax?\"\n\t"
        "7:\n\t"
        "testl %%r10d, %%r10d\n\t"  // slot 0 missed: scan from slot 1
        "jz 9f\n\t"
        // A re-entry whose found slot no longer holds the group (a
        // migration, or the slot changed): this CPU's slots from 0, then
        // the second sequence, which gives up on a miss.
        "movl $-1, %%r10d\n\t"
        "10:\n\t"
        "incl %%r10d\n\t"
        "cmpl %[slots], %%r10d\n\t"
        "jae %l[mismatch]\n\t"
        "cmpq %[group], %c[cached](%%r11,%%r10,8)\n\t"
        "jne 10b\n\t"
        "leaq 5b(%%rip), %%rcx\n\t"
        "movq %%rcx, %%fs:8(%[off])\n\t"
        "11:\n\t" UMEMCG_STOCK_SEQUENCE("%l[mismatch]")
        "12:\n\t"
        "jmp 2b\n\t"
        "9:\n\t"
        "incl %%r10d\n\t"
        "cmpl %[slots], %%r10d\n\t"
        "jae %l[mismatch]\n\t"
        "cmpq %[group], %c[cached](%%r11,%%r10,8)\n\t"
        "jne 9b\n\t"
        "jmp 8b\n\t"
        ".popsection\n\t"
        ".pushsection __rseq_failure, \"ax?\"\n\t"
        ".byte 0x0f, 0xb9, 0x3d\n\t"
        ".long 0x53053053\n\t"  // RSEQ_SIG (x86), checked in port/rseq.cc
        "4:\n\t"
        "jmp %l[aborted]\n\t"
        ".popsection\n\t"
        :
        :
        [off] "r"(rseq_area_offset), [hit_shards] "m"(hit_shards_),
        [base] "m"(base_), [group] "r"(group), [slots] "m"(slots_), [n] "r"(n),
        [batch] "m"(group->batch_), [cached] "i"(offsetof(StockShard, cached)),
        [nr_pages] "i"(offsetof(StockShard, nr_pages)),
        [lock] "i"(offsetof(StockShard, lock)), [consume] "i"(kConsume ? 1 : 0)
        : "memory", "cc", "rax", "rcx", "r10", "r11"
        : aborted, mismatch);
#undef UMEMCG_STOCK_SEQUENCE
    return RseqResult::kCommitted;
  aborted:
    return RseqResult::kAborted;
  mismatch:
    return RseqResult::kMismatch;
  }
#endif

  bool ConsumeLocked(Group* group, uint64_t n);
  // The locked part of Refill. REQUIRES: s.lock held; releases it.
  bool RefillLocked(StockShard& s, Group* group, uint64_t n);
  // Returns pages straight to the counters.
  static void UnchargeDirect(Group* group, uint64_t n);
  static int ShardOf(const StockShard& s) { return s.index; }

  // Uncharges the slot's pages; with `release` also drops the reference
  // and empties the slot. REQUIRES: s.lock held.
  void DrainSlot(StockShard& s, int i, bool release);

  // Read by every hit (one line): base_ is &shards_[0].
  const uint32_t hit_shards_;  // nr_shards_ with rseq_, else 0
  const bool rseq_;
  const uint32_t nr_shards_;
  const int32_t slots_;
  const int batch_;
  StockShard* base_;
  const bool adaptive_;
  const AdaptiveBatch policy_;
  const CpuIdSource cpu_;
  // Shards locked by DrainAll / DrainGroup (tests count removal work;
  // relaxed: a counter that publishes nothing).
  std::atomic<uint64_t> drained_shards_{0};
  mutable PerCpu<StockShard> shards_;
};

}  // namespace internal
}  // namespace umemcg

#endif  // UMEMCG_SRC_CHARGE_STOCK_H_

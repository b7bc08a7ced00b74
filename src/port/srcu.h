// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Srcu: sleepable read-copy-update for pointers that readers follow without
// taking a reference (kernel: SRCU, kernel/rcu/srcutree.c, in its classic
// two-index form). A reader brackets its use of such a pointer with
// ReadLock / ReadUnlock (it may block in between: reclaim, OOM handling,
// memory.high sleeps); an updater that unpublished an object frees it only
// after a grace period that started after the unpublication has ended:
// then no reader that could have seen the object is still running.
//
// Readers. Each CPU shard has lock and unlock counts per index (0 or 1);
// ReadLock adds one to lock[idx] of the current shard, ReadUnlock one to
// unlock[idx] of whatever shard it runs on then. With restartable
// sequences (the rseq CPU source, one shard per CPU) each add is a plain
// store committed on the CPU that owns the counter (port/rseq.h), with no
// fence: the grace period supplies the barriers with membarrier(2) (the
// kernel's SRCU-fast / liburcu's membarrier flavour). Without rseq each add
// is a seq_cst fetch_add (one locked instruction, which is a full fence).
// A thread whose rseq CPU id is out of range uses separate shared atomic
// counts, so no count is ever written both ways.
//
// Grace periods are polled, never waited for: StartGracePeriod begins one,
// PollGracePeriod advances it as far as the readers allow and says whether
// it ended. A step checks that the readers of an index are gone: full
// barrier on every CPU running this process (membarrier, or a seq_cst
// fence), sum the unlock counts, fence, sum the lock counts; equal means
// none is in flight (a reader whose lock add the sum missed ran its reads
// after the barrier, so it cannot have seen what was unpublished before).
// A grace period checks the index readers are not using (stragglers that
// read the index before the previous flip), flips the index, then checks
// the old one: readers that start meanwhile use the new index, so a steady
// stream of short readers never holds a grace period up; a reader that
// blocks holds it up until it returns.
//
// Without membarrier. If the fence fails for good (a seccomp filter
// installed after start-up denies membarrier), the grace period neither
// fails nor aborts: it closes every CPU's counts to rseq commits (the byte
// each commit checks), visits every CPU once (port/rseq.h, RseqVisitCpu:
// no section that saw its counts open is still in flight, and each CPU ran
// a full barrier), and from then on readers add to the shared counts with
// seq_cst read-modify-writes and the fence is a plain seq_cst fence.
//
// Thread safety: ReadLock / ReadUnlock from any thread, nested or not;
// StartGracePeriod / PollGracePeriod serialised by the caller (the
// controller's reap mutex). Never allocates after construction.

#ifndef UMEMCG_SRC_PORT_SRCU_H_
#define UMEMCG_SRC_PORT_SRCU_H_

#include <atomic>
#include <cstdint>

#include "port/cpu.h"
#include "port/per_cpu.h"
#include "port/rseq.h"

namespace umemcg::internal {

class Srcu {
 public:
  // `cpu` must outlive this. `rseq`: the CPU source commits rseq (the
  // stocks' condition: rseq source, one shard per CPU, fences available).
  Srcu(const CpuIdSource* cpu, bool rseq);
  Srcu(const Srcu&) = delete;
  Srcu& operator=(const Srcu&) = delete;

  // Enters a read section; returns the index ReadUnlock needs.
  int ReadLock() {
    // Acquire: a reader that sees the flip also sees what the updater
    // unpublished before it (pairs with the release in Flip).
    const int idx = static_cast<int>(idx_.load(std::memory_order_acquire) & 1);
    Add(/*unlock=*/false, idx);
    return idx;
  }
  void ReadUnlock(int idx) { Add(/*unlock=*/true, idx); }

  // Begins a grace period. REQUIRES: none in progress.
  void StartGracePeriod() { phase_ = Phase::kScanInactive; }
  // Advances the grace period in progress without waiting; true once it
  // ended (then none is in progress).
  bool PollGracePeriod();
  bool grace_period_in_progress() const { return phase_ != Phase::kIdle; }

  // Grace periods ended so far (tests and benchmarks).
  uint64_t completed() const { return completed_; }

 private:
  struct Counts {
    // Written by their CPU's rseq commits (or atomically, see Add);
    // summed by the grace period. Atomics so the sums may read them.
    std::atomic<uint64_t> lock[2] = {};
    std::atomic<uint64_t> unlock[2] = {};
    // What the rseq commit's lock and owner checks compare against: a
    // lock byte that is zero until the membarrier fallback closes it for
    // good, and an owner that never changes.
    std::atomic<uint8_t> closed{0};
    const void* self = this;
  };
  enum class Phase : uint8_t { kIdle, kScanInactive, kScanOld };

  void Add(bool unlock, int idx) {
#if UMEMCG_HAVE_RSEQ_COMMIT
    if (rseq_) return AddRseq(unlock, idx);
#endif
    Counts& c = cpus_[cpu_->CurrentShard()];
    // seq_cst: a full fence between the lock add and the section's reads
    // (and the section's reads and the unlock add), pairing with the
    // grace period's fences.
    (unlock ? c.unlock[idx] : c.lock[idx])
        .fetch_add(1, std::memory_order_seq_cst);
  }
  // The rseq add. Out of line, in one translation unit: its restartable
  // sequence descriptor must not point into an inline function's copy
  // that the linker may discard.
  void AddRseq(bool unlock, int idx);

  // True when no reader of `idx` is in flight (see the file comment).
  bool ReadersGone(int idx);
  // A full memory barrier on every CPU running a thread of this process.
  void FenceAll();
  // membarrier failed for good: see "Without membarrier" above.
  void CloseRseq();

  const CpuIdSource* const cpu_;
  const bool rseq_;
  // Set once by CloseRseq (serialised with the grace period); read by
  // FenceAll only.
  bool closed_ = false;
  const uint32_t nr_shards_;
  PerCpu<Counts> cpus_;
  Counts shared_;  // for threads without a valid rseq CPU id
  // The readers' index (low bit). Flipped only by the grace period.
  alignas(kCacheLineSize) std::atomic<uint64_t> idx_{0};
  Phase phase_ = Phase::kIdle;  // serialised by the caller
  uint64_t completed_ = 0;
};

// A read section for the scope's lifetime.
class SrcuReadScope {
 public:
  explicit SrcuReadScope(Srcu& srcu) : srcu_(srcu), idx_(srcu.ReadLock()) {}
  ~SrcuReadScope() { srcu_.ReadUnlock(idx_); }
  SrcuReadScope(const SrcuReadScope&) = delete;
  SrcuReadScope& operator=(const SrcuReadScope&) = delete;

 private:
  Srcu& srcu_;
  const int idx_;
};

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_PORT_SRCU_H_

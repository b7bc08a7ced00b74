// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "port/srcu.h"

#include <cerrno>

#if UMEMCG_HAVE_RSEQ_COMMIT
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "umemcg/check.h"

namespace umemcg::internal {

Srcu::Srcu(const CpuIdSource* cpu, bool rseq)
    : cpu_(cpu),
      rseq_(rseq),
      nr_shards_(static_cast<uint32_t>(cpu->nr_shards())),
      cpus_(cpu->nr_shards()) {}

#if UMEMCG_HAVE_RSEQ_COMMIT
void Srcu::AddRseq(bool unlock, int idx) {
  for (;;) {
    const uint32_t cpu = RseqCpuId();
    if (cpu >= nr_shards_) break;
    Counts& c = cpus_[static_cast<int>(cpu)];
    std::atomic<uint64_t>& w = unlock ? c.unlock[idx] : c.lock[idx];
    // Relaxed: only this CPU writes it (the commit re-checks it); the grace
    // period's membarrier orders it for the summing thread.
    const uint64_t old = w.load(std::memory_order_relaxed);
    const RseqResult r =
        RseqCompareStore(cpu, &c.closed, &c.self, &c,
                         reinterpret_cast<uint64_t*>(&w), old, old + 1);
    if (r == RseqResult::kCommitted) return;
    // Closed for good by the membarrier fallback (CloseRseq). Relaxed: a
    // commit that failed on it implies the byte was seen set.
    if (r == RseqResult::kMismatch &&
        c.closed.load(std::memory_order_relaxed) != 0) {
      break;
    }
    // Preempted, migrated, or another thread's add on this CPU came first:
    // read the CPU and the count again.
  }
  // No valid rseq CPU id on this thread, or the counts are closed: the
  // shared counts.
  (unlock ? shared_.unlock[idx] : shared_.lock[idx])
      .fetch_add(1, std::memory_order_seq_cst);
}
#endif

void Srcu::FenceAll() {
#if UMEMCG_HAVE_RSEQ_COMMIT
  if (rseq_ && !closed_) {
    // The RSEQ fence without MEMBARRIER_CMD_FLAG_CPU: an IPI to every CPU
    // running a thread of this process, each running smp_mb() (ipi_rseq,
    // Linux 5.10+, the version the rseq commits already require), plus a
    // barrier on this thread before and after; threads not running pass
    // through a context switch, itself a full barrier. The command was
    // registered with the rseq commits (RseqCommitAvailable).
    bool registered_again = false;
    for (;;) {
      if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0,
                  0) == 0) {
        return;
      }
      if (errno == EINTR || errno == EAGAIN) continue;
      // EPERM also means "not registered" (a fork child on a kernel whose
      // children do not inherit the registration; registering is
      // idempotent).
      if (errno == EPERM && !registered_again) {
        registered_again = true;
        if (syscall(__NR_membarrier,
                    MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0,
                    0) == 0) {
          continue;
        }
      }
      break;
    }
    CloseRseq();  // its CPU visits are the barriers this call owes
    return;
  }
#endif
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void Srcu::CloseRseq() {
  RseqMarkFenceFailed();
  // Relaxed: the system calls of the visits below order the stores before
  // what the visited CPUs run next.
  for (int k = 0; k < cpus_.size(); ++k) {
    cpus_[k].closed.store(1, std::memory_order_relaxed);
  }
  for (int k = 0; k < cpus_.size(); ++k) {
    RseqVisitCpu(static_cast<uint32_t>(k));
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  closed_ = true;
}

bool Srcu::ReadersGone(int idx) {
  FenceAll();
  // Unlocks first: a reader whose unlock is seen here has its lock seen
  // below, so lock == unlock means none is in flight. Acquire: a reader's
  // section happens before what the caller frees after the grace period
  // (pairs with the unlock's seq_cst add).
  uint64_t unlocks = shared_.unlock[idx].load(std::memory_order_acquire);
  for (int k = 0; k < cpus_.size(); ++k) {
    unlocks += cpus_[k].unlock[idx].load(std::memory_order_acquire);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Relaxed: ordered after the unlock sums by the fence above.
  uint64_t locks = shared_.lock[idx].load(std::memory_order_relaxed);
  for (int k = 0; k < cpus_.size(); ++k) {
    locks += cpus_[k].lock[idx].load(std::memory_order_relaxed);
  }
  return locks == unlocks;
}

bool Srcu::PollGracePeriod() {
  switch (phase_) {
    case Phase::kIdle:
      return true;
    case Phase::kScanInactive:
      // Readers that read the index before the previous flip and still
      // use it would be missed by the scan after this flip.
      // Relaxed: only the (serialised) grace period writes idx_.
      if (!ReadersGone(
              static_cast<int>(idx_.load(std::memory_order_relaxed) & 1) ^ 1)) {
        return false;
      }
      // seq_cst (release for the readers' acquire load): a reader that
      // sees the new index sees what was unpublished before the flip.
      idx_.fetch_add(1, std::memory_order_seq_cst);
      phase_ = Phase::kScanOld;
      [[fallthrough]];
    case Phase::kScanOld:
      if (!ReadersGone(
              static_cast<int>(idx_.load(std::memory_order_relaxed) & 1) ^ 1)) {
        return false;
      }
      phase_ = Phase::kIdle;
      ++completed_;
      return true;
  }
  return false;
}

}  // namespace umemcg::internal

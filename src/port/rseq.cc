// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "port/rseq.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>

#include "port/cpu.h"

namespace umemcg::internal {

uint8_t rseq_commits_off = 0;

#if UMEMCG_HAVE_RSEQ_COMMIT
static_assert(RSEQ_SIG == 0x53053053, "the abort signature in rseq.h");

ptrdiff_t rseq_area_offset = 0;

namespace {

// Set (release) once the hand-over after switching commits off finished;
// RseqExclude may return at once only then (acquire).
std::atomic<bool> handover_done{false};
// Serializes the switch: a second failing fence waits for the first
// hand-over instead of starting its own.
constinit std::mutex switch_mu;

long Membarrier(int cmd, unsigned flags, int cpu) {
  return syscall(__NR_membarrier, cmd, flags, cpu);
}

bool RegisterRseqFence() {
  rseq_area_offset = __rseq_offset;
  const long cmds = Membarrier(MEMBARRIER_CMD_QUERY, 0, 0);
  if (cmds < 0 || (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ) == 0) {
    return false;
  }
  if (Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) != 0) {
    return false;
  }
  // MEMBARRIER_CMD_FLAG_CPU (Linux 5.10+): EINVAL before it.
  return Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ,
                    MEMBARRIER_CMD_FLAG_CPU, 0) == 0;
}

void SleepMs(int ms) {
  timespec t{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

// Makes sure no critical section that passed the rseq_commits_off check
// before it was set is still in flight on any CPU (the fallback contract
// in rseq.h).
void HandOver() {
  cpu_set_t original;
  if (sched_getaffinity(0, sizeof(original), &original) != 0) {
    return SleepMs(kRseqGraceMs);
  }
  bool visited_all = true;
  for (int cpu : PossibleCpus()) {
    if (cpu >= CPU_SETSIZE) {
      visited_all = false;
      continue;
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) == 0) continue;
    // EINVAL: not in this process's cpuset, or offline: no thread of the
    // process runs there. Anything else (EPERM from a filter): cannot
    // visit, fall back to waiting.
    if (errno != EINVAL) visited_all = false;
  }
  (void)sched_setaffinity(0, sizeof(original), &original);
  if (!visited_all) SleepMs(kRseqGraceMs);
}

// A fence failed for good: switch commits off and hand over.
void SwitchOff() {
  std::lock_guard<std::mutex> lock(switch_mu);
  if (handover_done.load(std::memory_order_relaxed)) return;
  // A plain byte read by the assembly: the release fence orders it before
  // the hand-over's migrations (each a full barrier through the kernel).
  __atomic_store_n(&rseq_commits_off, 1, __ATOMIC_RELEASE);
  HandOver();
  handover_done.store(true, std::memory_order_release);
}

}  // namespace

bool RseqCommitAvailable() {
  // Registration is process-wide and idempotent; done once.
  static const bool fence = RegisterRseqFence();
  return fence && RseqAvailable() &&
         __atomic_load_n(&rseq_commits_off, __ATOMIC_ACQUIRE) == 0;
}

bool RseqCommitsSwitchedOff() {
  return handover_done.load(std::memory_order_acquire);
}

void RseqExclude(uint32_t cpu) {
  // Acquire: pairs with the release at the end of the hand-over.
  if (handover_done.load(std::memory_order_acquire)) return;
  if (RseqCpuId() == cpu) return;  // the sections on `cpu` were preempted
  bool registered_again = false;
  for (;;) {
    if (Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ,
                   MEMBARRIER_CMD_FLAG_CPU, static_cast<int>(cpu)) == 0) {
      return;
    }
    if (errno == EINTR || errno == EAGAIN) continue;
    // EPERM also means "not registered": a fork child on a kernel whose
    // children do not inherit the registration (this process's children
    // do on Linux 6.x; registering again is idempotent).
    if (errno == EPERM && !registered_again) {
      registered_again = true;
      if (Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) ==
          0) {
        continue;
      }
    }
    return SwitchOff();
  }
}

#else

bool RseqCommitAvailable() { return false; }
bool RseqCommitsSwitchedOff() { return false; }
void RseqExclude(uint32_t) {}

#endif

}  // namespace umemcg::internal

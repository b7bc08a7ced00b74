// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "port/rseq.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "port/cpu.h"

namespace umemcg::internal {

#if UMEMCG_HAVE_RSEQ_COMMIT
static_assert(RSEQ_SIG == 0x53053053, "the abort signature in rseq.h");

ptrdiff_t rseq_area_offset = 0;

namespace {

// Sets rseq_area_offset when this copy of the library is loaded, before
// any of its code can run a sequence. Eagerly, not on first use: a process
// may hold several copies of libumemcg (libumemcg-preload.so and its
// operations module, or a program linking libumemcg statically with the
// preload loaded), each with its own variable, and a copy can run the
// sequences on a controller another copy created (the operations module
// works on the preload's): its own RseqCommitAvailable() is then never
// called, and an offset left at 0 would make every sequence store its
// descriptor at thread pointer + 8 (glibc's tcbhead_t.dtv). Priority 101,
// the first one available to programs: before any C++ static initializer
// of this copy that could create a controller. The loader runs it before
// dlopen() returns and before anything else of this copy is called.
__attribute__((constructor(101))) void InitRseqAreaOffset() {
  rseq_area_offset = __rseq_offset;
}

// Set once a fence failed for good (relaxed: a hint for new controllers;
// correctness rests on each lock's closed bit).
std::atomic<bool> fence_failed{false};

long Membarrier(int cmd, unsigned flags, int cpu) {
  return syscall(__NR_membarrier, cmd, flags, cpu);
}

bool RegisterRseqFence() {
  // Set at load already (InitRseqAreaOffset); written only if some code of
  // this copy ran before its constructors (an initializer of another
  // object at the same priority), never while another thread could read it.
  if (rseq_area_offset != __rseq_offset) rseq_area_offset = __rseq_offset;
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

}  // namespace

void RseqVisitCpu(uint32_t cpu) {
  cpu_set_t original;
  if (sched_getaffinity(0, sizeof(original), &original) == 0 &&
      cpu < CPU_SETSIZE) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    // Returns once this thread runs on `cpu` (the kernel migrates it
    // first): whatever ran there was preempted.
    if (sched_setaffinity(0, sizeof(one), &one) == 0) {
      (void)sched_setaffinity(0, sizeof(original), &original);
      return;
    }
    // Not in this process's cpuset, or offline: no thread of the process
    // runs there.
    if (errno == EINVAL) return;
  }
  // Denied (a filter): a section runs a few instructions unpreempted.
  SleepMs(kRseqGraceMs);
}

bool RseqCommitAvailable() {
  // Registration is process-wide and idempotent; done once.
  static const bool fence = RegisterRseqFence();
  return fence && RseqAvailable() &&
         !fence_failed.load(std::memory_order_relaxed);
}

bool RseqFenceFailed() { return fence_failed.load(std::memory_order_relaxed); }

void RseqMarkFenceFailed() {
  fence_failed.store(true, std::memory_order_relaxed);
}

void RseqExclude(uint32_t cpu, TryLock& held) {
  // Closed by an earlier holder, whose exclusion of in-flight sections
  // this one inherits: no commit guarded by `held` can succeed any more.
  if (held.closed_for_rseq()) return;
  if (RseqCpuId() == cpu) return;  // the sections on `cpu` were preempted
  bool registered_again = false;
  for (;;) {
    if (Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ,
                   MEMBARRIER_CMD_FLAG_CPU, static_cast<int>(cpu)) == 0) {
      return;
    }
    if (errno == EINTR || errno == EAGAIN) continue;
    // EPERM also means "not registered": a fork child on a kernel whose
    // children do not inherit the registration (they do on Linux 6.x;
    // registering again is idempotent).
    if (errno == EPERM && !registered_again) {
      registered_again = true;
      if (Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) ==
          0) {
        continue;
      }
    }
    break;
  }
  // Failed for good: close `held` (new sections see it), then wait out
  // those that passed its check before (the system calls below order the
  // close before them).
  fence_failed.store(true, std::memory_order_relaxed);
  held.CloseForRseq();
  RseqVisitCpu(cpu);
}

#else

bool RseqCommitAvailable() { return false; }
bool RseqFenceFailed() { return false; }
void RseqMarkFenceFailed() {}
void RseqVisitCpu(uint32_t) {}
void RseqExclude(uint32_t, TryLock&) {}

#endif

}  // namespace umemcg::internal

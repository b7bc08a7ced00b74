// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "port/rseq.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "umemcg/check.h"

namespace umemcg::internal {

#if UMEMCG_HAVE_RSEQ_COMMIT
static_assert(RSEQ_SIG == 0x53053053, "the abort signature in rseq.h");

ptrdiff_t rseq_area_offset = 0;

namespace {

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

}  // namespace

bool RseqCommitAvailable() {
  // Registration is process-wide and idempotent; done once.
  static const bool fence = RegisterRseqFence();
  return fence && RseqAvailable();
}

void RseqExclude(uint32_t cpu) {
  if (RseqCpuId() == cpu) return;  // the sections on `cpu` were preempted
  while (Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ,
                    MEMBARRIER_CMD_FLAG_CPU, static_cast<int>(cpu)) != 0) {
    // Registered and supported (RseqCommitAvailable): only EINTR-like
    // transient failures remain; anything else would break exclusion.
    UMEMCG_CHECK(errno == EINTR || errno == EAGAIN);
  }
}

#else

bool RseqCommitAvailable() { return false; }
void RseqExclude(uint32_t) {}

#endif

}  // namespace umemcg::internal

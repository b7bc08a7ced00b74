// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "port/try_lock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace umemcg::internal {

namespace {

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value,
           const timespec* timeout) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value,
                 timeout, nullptr, 0);
}

}  // namespace

void TryLock::LockSlow() {
  for (int spins = 0; spins < kSpins; ++spins) {
    CpuRelax();
    if (TryAcquire()) return;
  }
  // Announce the wait before the last check: the increment is a full
  // barrier, so an unlock that this check misses (the word still reads
  // locked) either sees the count and wakes us, or stored the word before
  // the kernel compares it (the wait then returns at once); see the file
  // comment for the one window a bounded sleep covers.
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  const timespec bound{0, kMaxSleepNs};
  while (!TryAcquire()) {
    // Private futex: the word never leaves this process. Returns on a wake,
    // a mismatch (EAGAIN: unlocked meanwhile), a signal or the bound.
    const uint32_t seen = word_.load(std::memory_order_relaxed);
    if ((seen & kLocked) == 0) continue;
    Futex(&word_, FUTEX_WAIT_PRIVATE, seen, &bound);
  }
  waiters_.fetch_sub(1, std::memory_order_relaxed);
}

void TryLock::Wake() { Futex(&word_, FUTEX_WAKE_PRIVATE, 1, nullptr); }

}  // namespace umemcg::internal

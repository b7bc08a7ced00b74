// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// TryLock: a one-byte lock whose fast path never waits (kernel:
// local_trylock). Hot paths call try_lock() and, when it fails, take their
// direct fallback instead of spinning: the holder is another thread that
// raced onto the same CPU shard (or a drainer). Only maintenance paths
// (DrainAllStocks, observers) wait, with lock().
//
// Thread safety: usable from any thread; not recursive.

#ifndef UMEMCG_SRC_PORT_TRY_LOCK_H_
#define UMEMCG_SRC_PORT_TRY_LOCK_H_

#include <atomic>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace umemcg::internal {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

class TryLock {
 public:
  // Acquire on success: the critical section sees the previous holder's
  // writes (pairs with unlock's release store).
  bool try_lock() {
    // Test before exchange: a failed attempt then costs a shared read, not
    // a cache-line steal from the holder.
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  // Waits for the holder: spins briefly, then yields (the holder may have
  // been preempted inside its few-instruction section).
  void lock() {
    for (int spins = 0; !try_lock(); ++spins) {
      if (spins < 64) {
        CpuRelax();
      } else {
        std::this_thread::yield();
      }
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }
  // The lock byte (0 = free), for code that checks it without the C++
  // memory model (port/rseq.h).
  const void* address() const { return &locked_; }

 private:
  std::atomic<bool> locked_{false};
  static_assert(sizeof(std::atomic<bool>) == 1);
};

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_PORT_TRY_LOCK_H_

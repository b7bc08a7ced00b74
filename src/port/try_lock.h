// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// TryLock: a small lock whose fast path never waits (kernel:
// local_trylock). Hot paths call try_lock() and, when it fails, take their
// direct fallback instead of waiting: the holder is another thread that
// raced onto the same CPU shard (or a drainer). Maintenance paths
// (DrainAllStocks, flushes, fork handling) wait with lock(): a bounded
// spin (the holder's sections are a few instructions and never block),
// then a futex wait on the lock word, so a waiter never keeps a preempted
// holder from running on its own CPU (a SCHED_FIFO drainer spinning or
// yielding there would: sched_yield never lets a lower class run).
//
// Fairness. While a thread waits in lock(), try_lock() fails: hot paths
// take their fallbacks (as they do when the holder is busy) and the lock
// falls free for the waiter, however often they would retake it.
//
// Wake-ups. unlock() is a plain release store followed by a load of the
// waiter count on the same cache line (no atomic read-modify-write: the
// locked paths of the stocks and statistics take and drop these locks on
// every operation). A waiter announces itself with an atomic increment
// (a full barrier), re-checks the lock and sleeps only while the word
// still reads locked. Without a barrier in unlock(), its load of the count
// can pass its own store of the word, so in a window of a few cycles a
// waiter can go to sleep unseen; every sleep is therefore bounded
// (kMaxSleep) and then the lock is tried again. Lost wake-ups cost at most
// that bound, never liveness.
//
// Layout: the word's low byte is what the rseq commits check for zero
// (address(), port/rseq.h; x86-64 is little-endian): bit 0 is the lock,
// bit 1 closes the lock to rseq commits for good (CloseForRseq).
//
// Thread safety: usable from any thread; not recursive.

#ifndef UMEMCG_SRC_PORT_TRY_LOCK_H_
#define UMEMCG_SRC_PORT_TRY_LOCK_H_

#include <atomic>
#include <cstdint>

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
  // Spins before sleeping, and the longest sleep before trying again.
  static constexpr int kSpins = 128;
  static constexpr long kMaxSleepNs = 1000000;  // 1 ms

  // Acquire on success: the critical section sees the previous holder's
  // writes (pairs with unlock's release store). Fails while a thread waits
  // in lock(), so that hot paths, which retake a shard lock over and over,
  // take their fallbacks instead of starving it.
  bool try_lock() {
    // Relaxed: a hint (same cache line as the word); lock() does not rely
    // on it for correctness, only for progress.
    return waiters_.load(std::memory_order_relaxed) == 0 && TryAcquire();
  }
  // Waits for the holder: spins briefly, then sleeps on the lock word.
  void lock() {
    if (!TryAcquire()) LockSlow();
  }
  void unlock() {
    // Only the holder changes the word's other bits (CloseForRseq), so its
    // own relaxed read is current; a plain store, no read-modify-write.
    word_.store(word_.load(std::memory_order_relaxed) & ~kLocked,
                std::memory_order_release);
    // Relaxed: a hint; a waiter this misses sleeps at most kMaxSleepNs
    // (see the file comment). Same cache line as the word just written.
    if (waiters_.load(std::memory_order_relaxed) != 0) Wake();
  }
  bool is_locked() const {
    // Relaxed: a snapshot (tests, invariant checks).
    return (word_.load(std::memory_order_relaxed) & kLocked) != 0;
  }
  // The lock byte (0 = free and open to rseq commits), for code that
  // checks it without the C++ memory model (port/rseq.h).
  const void* address() const { return &word_; }

  // rseq commits check the lock byte for zero. Closing the lock sets a
  // second bit there for good, so every commit guarded by this lock fails
  // from then on and its users take their locked paths (port/rseq.h,
  // RseqExclude's fallback). REQUIRES: held by the caller.
  void CloseForRseq() {
    // Relaxed: the caller's fence or wait that follows orders it (a
    // system call; see RseqExclude).
    word_.store(word_.load(std::memory_order_relaxed) | kRseqClosed,
                std::memory_order_relaxed);
  }
  bool closed_for_rseq() const {
    // Relaxed: set once by a holder; read by later holders, whose acquire
    // of the lock ordered it.
    return (word_.load(std::memory_order_relaxed) & kRseqClosed) != 0;
  }

  // In the child of fork() (port/fork.h), by the thread that locked it in
  // the prepare handler: unlocks and forgets waiters, which were threads
  // of the parent.
  void UnlockInForkChild() {
    waiters_.store(0, std::memory_order_relaxed);
    word_.store(word_.load(std::memory_order_relaxed) & ~kLocked,
                std::memory_order_release);
  }

 private:
  static constexpr uint32_t kLocked = 1;
  static constexpr uint32_t kRseqClosed = 2;

  bool TryAcquire() {
    // Test before the read-modify-write: a failed attempt then costs a
    // shared read, not a cache-line steal from the holder. One bit set
    // atomically (lock bts): the closed bit survives.
    return (word_.load(std::memory_order_relaxed) & kLocked) == 0 &&
           (word_.fetch_or(kLocked, std::memory_order_acquire) & kLocked) == 0;
  }
  void LockSlow();
  void Wake();

  std::atomic<uint32_t> word_{0};     // kLocked | kRseqClosed
  std::atomic<uint32_t> waiters_{0};  // threads in LockSlow's sleep loop
  static_assert(sizeof(std::atomic<uint32_t>) == 4);
};

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_PORT_TRY_LOCK_H_

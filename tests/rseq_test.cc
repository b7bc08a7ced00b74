// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The rseq commit primitive (port/rseq.h): its compares, its CPU check,
// and exactness of per-CPU counters updated by it from more threads than
// CPUs while lock holders on other CPUs fence it out (RseqExclude).
// Skipped where the primitive is not available (TSan builds, no rseq or no
// membarrier RSEQ fences), with the reason.

#include "port/rseq.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <thread>
#include <vector>

#include "port/per_cpu.h"
#include "port/try_lock.h"

namespace umemcg::internal {
namespace {

#define SKIP_WITHOUT_RSEQ_COMMIT()                                       \
  if (!RseqCommitAvailable()) {                                          \
    GTEST_SKIP() << "rseq commit unavailable here (TSan build, no rseq " \
                    "registration or no membarrier RSEQ fence): the "    \
                    "object stock takes its locked path";                \
  }

// Pins the calling thread to `cpu`; false if the CPU is not allowed.
bool PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

int FirstAllowedCpu() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) return c;
  }
  return 0;
}

struct alignas(64) Cell {
  TryLock lock;
  std::atomic<void*> owner{nullptr};
  std::atomic<uint64_t> word{0};
};

#if UMEMCG_HAVE_RSEQ_COMMIT
RseqResult Commit(uint32_t cpu, Cell& c, void* owner, uint64_t expected,
                  uint64_t desired) {
  return RseqCompareStore(cpu, c.lock.address(), &c.owner, owner,
                          reinterpret_cast<uint64_t*>(&c.word), expected,
                          desired);
}
#endif

TEST(RseqTest, CommitsOnlyWhenEveryCompareHolds) {
  SKIP_WITHOUT_RSEQ_COMMIT();
#if UMEMCG_HAVE_RSEQ_COMMIT
  const int cpu = FirstAllowedCpu();
  ASSERT_TRUE(PinTo(cpu));
  Cell c;
  int owner_a = 0, owner_b = 0;
  c.owner.store(&owner_a);
  c.word.store(5);
  // Retries: a preemption between the CPU check and the commit aborts.
  auto commit = [&](void* owner, uint64_t expected, uint64_t desired) {
    RseqResult r;
    do {
      r = Commit(static_cast<uint32_t>(cpu), c, owner, expected, desired);
    } while (r == RseqResult::kAborted &&
             RseqCpuId() == static_cast<uint32_t>(cpu));
    return r;
  };
  EXPECT_EQ(commit(&owner_a, 5, 7), RseqResult::kCommitted);
  EXPECT_EQ(c.word.load(), 7u);
  EXPECT_EQ(commit(&owner_a, 5, 9), RseqResult::kMismatch);  // word moved
  EXPECT_EQ(commit(&owner_b, 7, 9), RseqResult::kMismatch);  // other owner
  c.lock.lock();
  EXPECT_EQ(commit(&owner_a, 7, 9), RseqResult::kMismatch);  // lock held
  c.lock.unlock();
  EXPECT_EQ(c.word.load(), 7u);
  // Another CPU than the one this thread runs on: never committed.
  EXPECT_EQ(Commit(static_cast<uint32_t>(cpu) + 1000, c, &owner_a, 7, 9),
            RseqResult::kAborted);
  EXPECT_EQ(c.word.load(), 7u);
#endif
}

// A lock closed to rseq (RseqExclude's fallback when membarrier fails)
// rejects every commit from then on, whether it is held or not, and stays
// closed through lock and unlock; the locked path keeps working.
TEST(RseqTest, ClosedLockRejectsCommitsForGood) {
  SKIP_WITHOUT_RSEQ_COMMIT();
#if UMEMCG_HAVE_RSEQ_COMMIT
  const int cpu = FirstAllowedCpu();
  ASSERT_TRUE(PinTo(cpu));
  Cell c;
  int owner = 0;
  c.owner.store(&owner);
  auto commit = [&](uint64_t expected, uint64_t desired) {
    RseqResult r;
    do {
      r = Commit(static_cast<uint32_t>(cpu), c, &owner, expected, desired);
    } while (r == RseqResult::kAborted &&
             RseqCpuId() == static_cast<uint32_t>(cpu));
    return r;
  };
  EXPECT_EQ(commit(0, 1), RseqResult::kCommitted);
  c.lock.lock();
  c.lock.CloseForRseq();
  c.lock.unlock();
  EXPECT_FALSE(c.lock.is_locked());
  EXPECT_TRUE(c.lock.closed_for_rseq());
  EXPECT_EQ(commit(1, 2), RseqResult::kMismatch);
  ASSERT_TRUE(c.lock.try_lock());
  c.word.store(2);  // the locked path
  c.lock.unlock();
  EXPECT_TRUE(c.lock.closed_for_rseq());
  EXPECT_EQ(commit(2, 3), RseqResult::kMismatch);
  EXPECT_EQ(c.word.load(), 2u);
  // A closed lock needs no fence: RseqExclude returns at once.
  c.lock.lock();
  RseqExclude(static_cast<uint32_t>(cpu) + 1, c.lock);
  c.lock.unlock();
#endif
}

// Per-CPU counters: threads (twice as many as CPUs, unpinned, so they are
// preempted and migrated; a signaller interrupts them all the time, which
// aborts sections it lands in) add 1 through the commit; a locker thread
// takes the cells' locks from wherever it runs, fences their CPU and adds 1
// with plain stores. No increment may be lost.
TEST(RseqTest, PerCpuCountersStayExactUnderPreemptionAndFencedLockers) {
  SKIP_WITHOUT_RSEQ_COMMIT();
#if UMEMCG_HAVE_RSEQ_COMMIT
  const int nr_cpus = static_cast<int>(std::thread::hardware_concurrency());
  ASSERT_GT(nr_cpus, 0);
  // Indexed by CPU id; ids beyond the array fall back to the lock.
  constexpr int kCells = 1024;
  PerCpu<Cell> cells(kCells);
  int owner = 0;
  for (int i = 0; i < kCells; ++i) cells[i].owner.store(&owner);
  const int nr_threads = 2 * nr_cpus + 1;
  constexpr int kOps = 1000000;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> locked_adds{0};
  std::atomic<uint64_t> aborts{0};
  auto locked_add = [&](int k) {
    Cell& c = cells[k];
    c.lock.lock();
    RseqExclude(static_cast<uint32_t>(k), c.lock);
    c.word.store(c.word.load(std::memory_order_relaxed) + 1,
                 std::memory_order_relaxed);
    c.lock.unlock();
  };
  struct sigaction sa = {};
  sa.sa_handler = [](int) {};
  ASSERT_EQ(sigaction(SIGUSR1, &sa, nullptr), 0);
  std::vector<std::thread> threads;
  std::vector<pthread_t> handles(nr_threads);
  std::atomic<int> started{0};
  std::atomic<int> done_workers{0};
  for (int t = 0; t < nr_threads; ++t) {
    threads.emplace_back([&, t] {
      handles[t] = pthread_self();
      started.fetch_add(1);
      uint64_t local_aborts = 0;
      for (int n = 0; n < kOps; ++n) {
        if (n % 1024 == 0) std::this_thread::yield();  // let the others run
        for (;;) {
          const uint32_t cpu = RseqCpuId();
          if (cpu >= kCells) {
            locked_add(0);
            break;
          }
          Cell& c = cells[static_cast<int>(cpu)];
          const uint64_t w = c.word.load(std::memory_order_relaxed);
          const RseqResult r = Commit(cpu, c, &owner, w, w + 1);
          if (r == RseqResult::kCommitted) break;
          if (r == RseqResult::kAborted) ++local_aborts;
          if (r == RseqResult::kMismatch && c.lock.try_lock()) {
            // Held or changed under us: the locked path, fenced.
            RseqExclude(cpu, c.lock);
            c.word.store(c.word.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
            c.lock.unlock();
            break;
          }
        }
      }
      aborts.fetch_add(local_aborts);
      done_workers.fetch_add(1);
    });
  }
  while (started.load() < nr_threads) std::this_thread::yield();
  std::atomic<int> finished{0};
  std::thread signaller([&] {
    for (uint64_t n = 0; finished.load(std::memory_order_relaxed) == 0; ++n) {
      pthread_kill(handles[n % static_cast<uint64_t>(nr_threads)], SIGUSR1);
      if (n % 16 == 0) std::this_thread::yield();
    }
  });
  std::thread locker([&] {
    uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      locked_add(static_cast<int>(n++ % static_cast<uint64_t>(nr_cpus)));
      locked_adds.fetch_add(1, std::memory_order_relaxed);
    }
  });
  // The workers are joined only after the signaller stopped, so every
  // handle it uses is valid (an exited, unjoined thread may be signalled).
  while (done_workers.load() < nr_threads) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  finished.store(1);
  signaller.join();
  for (auto& th : threads) th.join();
  stop.store(true);
  locker.join();
  uint64_t sum = 0;
  for (int i = 0; i < kCells; ++i) sum += cells[i].word.load();
  EXPECT_EQ(sum, static_cast<uint64_t>(nr_threads) * kOps + locked_adds.load());
  RecordProperty("aborts", static_cast<int>(aborts.load()));
  RecordProperty("locked_adds", static_cast<int>(locked_adds.load()));
#endif
}

}  // namespace
}  // namespace umemcg::internal

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// TryLock::lock (port/try_lock.h): a waiter spins briefly, then blocks
// until the holder unlocks, so a waiter that outranks the holder on the
// holder's CPU (SCHED_FIFO against a preempted SCHED_OTHER holder) cannot
// keep it from running. Both tests observe the waiter's scheduler state
// (/proc/self/task/<tid>/stat): a blocked waiter sleeps ('S'), a spinning
// or yielding one is always runnable ('R'). The waits are hang guards only.

#include "port/try_lock.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace umemcg::internal {
namespace {

constexpr auto kHangGuard = std::chrono::seconds(30);

// The scheduler state letter of thread `tid` of this process.
char ThreadState(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string line;
  std::getline(f, line);
  // "pid (comm) S ...": the state follows the last ')'.
  const size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size()
             ? '?'
             : line[paren + 2];
}

// Polls until thread `tid` is seen sleeping; false after the hang guard.
bool SeenSleeping(pid_t tid) {
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ThreadState(tid) == 'S') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

pid_t Gettid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

TEST(TryLockTest, WaiterBlocksInsteadOfSpinningWhileTheHolderKeepsTheLock) {
  TryLock lock;
  ASSERT_TRUE(lock.try_lock());
  std::atomic<pid_t> waiter_tid{0};
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    waiter_tid.store(Gettid());
    lock.lock();
    acquired.store(true);
    lock.unlock();
  });
  while (waiter_tid.load() == 0) std::this_thread::yield();
  const bool slept = SeenSleeping(waiter_tid.load());
  EXPECT_FALSE(acquired.load());
  lock.unlock();
  waiter.join();
  EXPECT_TRUE(acquired.load());
  EXPECT_TRUE(slept) << "lock() never blocked: it spins or yields forever";
  // Usable afterwards, by anyone.
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
}

// The bit that closes a lock to rseq commits survives every operation.
TEST(TryLockTest, ClosedForRseqSurvivesLockingAndTheForkChildUnlock) {
  TryLock lock;
  EXPECT_FALSE(lock.closed_for_rseq());
  lock.lock();
  lock.CloseForRseq();
  EXPECT_TRUE(lock.is_locked());
  EXPECT_FALSE(lock.try_lock());
  lock.unlock();
  EXPECT_FALSE(lock.is_locked());
  EXPECT_TRUE(lock.closed_for_rseq());
  ASSERT_TRUE(lock.try_lock());
  lock.unlock();
  lock.lock();
  lock.UnlockInForkChild();
  EXPECT_FALSE(lock.is_locked());
  EXPECT_TRUE(lock.closed_for_rseq());
  // The byte rseq commits check stays nonzero.
  EXPECT_NE(*static_cast<const volatile uint8_t*>(lock.address()), 0);
}

TEST(TryLockTest, ManyWaitersAllGetTheLockInTurn) {
  TryLock lock;
  constexpr int kThreads = 6;
  constexpr int kRounds = 20000;
  int64_t counter = 0;  // guarded by `lock`
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      for (int r = 0; r < kRounds; ++r) {
        lock.lock();
        ++counter;
        lock.unlock();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, int64_t{kThreads} * kRounds);
}

// A SCHED_FIFO waiter on the holder's only CPU: with a yield loop the
// holder (SCHED_OTHER) would only run when the kernel's RT throttling
// steps in (if it is on at all); blocking lets it run at once.
TEST(TryLockTest, FifoWaiterOnTheHoldersCpuLetsTheHolderFinish) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  int cpu = -1;
  for (int c = 0; c < CPU_SETSIZE && cpu < 0; ++c) {
    if (CPU_ISSET(c, &allowed)) cpu = c;
  }
  ASSERT_GE(cpu, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);

  TryLock lock;
  std::atomic<int> stage{0};
  std::atomic<pid_t> waiter_tid{0};
  std::atomic<int> fifo_error{0};
  std::atomic<bool> acquired{false};
  std::thread holder([&] {
    pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
    lock.lock();
    stage.store(1);
    // Runs again only once the FIFO waiter leaves the CPU.
    while (stage.load() < 2) std::this_thread::yield();
    lock.unlock();
  });
  while (stage.load() < 1) std::this_thread::yield();
  std::thread waiter([&] {
    pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
    sched_param param{};
    param.sched_priority = 1;
    if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) != 0) {
      fifo_error.store(errno == 0 ? EPERM : errno);
      stage.store(2);
      return;
    }
    waiter_tid.store(Gettid());
    lock.lock();
    acquired.store(true);
    lock.unlock();
  });
  while (waiter_tid.load() == 0 && fifo_error.load() == 0) {
    std::this_thread::yield();
  }
  if (fifo_error.load() != 0) {
    holder.join();
    waiter.join();
    GTEST_SKIP() << "SCHED_FIFO not permitted here ("
                 << std::strerror(fifo_error.load())
                 << "): the blocking itself is covered by "
                    "WaiterBlocksInsteadOfSpinningWhileTheHolderKeepsTheLock";
  }
  const bool slept = SeenSleeping(waiter_tid.load());
  stage.store(2);
  holder.join();
  waiter.join();
  EXPECT_TRUE(acquired.load());
  EXPECT_TRUE(slept) << "the FIFO waiter kept the CPU from the holder";
}

}  // namespace
}  // namespace umemcg::internal

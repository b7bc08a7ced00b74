// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// fork() while other threads hold the heap profiler's mutex, in a process
// that has never sampled a block. The profiler's fork handlers used to be
// installed at the first sampled block: until then a child forked while
// another thread looked up a group's sampling rate (which every sampling
// point of every thread does, under that mutex) inherited the mutex held,
// and its own next sampling point or rate lookup waited forever (seen as
// forked children of programs under libumemcg-preload.so hanging on a
// futex in the profiler's slow path).
//
// Its own binary: a test before it in the same process that samples a
// block would install the old handlers and hide the bug.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "test_util.h"
#include "umemcg/heap_profile.h"
#include "umemcg/umemcg.h"

namespace umemcg {
namespace {

using testing::TestController;

// A child that does not finish in this long is counted as hung: it does
// nothing but one rate lookup, so the bound only guards against a child
// that never ends (generous for a loaded machine).
constexpr unsigned kChildSeconds = 60;

TEST(HeapProfileForkTest, ChildOfThreadsReadingRatesBeforeAnySample) {
  TestController t;
  GroupRef g = t.Make("a");
  ASSERT_EQ(HeapProfileLiveSamplesForTesting(), 0u);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> lookups{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i) {
    readers.emplace_back([&] {
      uint64_t n = 0;
      // Relaxed: a stop flag and a progress count only.
      while (!stop.load(std::memory_order_relaxed)) {
        if (HeapProfileRate(*g) != kDefaultHeapProfileRate) std::abort();
        lookups.store(++n, std::memory_order_relaxed);
      }
    });
  }
  // Each fork lands while a reader is likely inside its lookup (the
  // readers do little else); 200 of them leave the old handlers no chance.
  constexpr int kForks = 200;
  int hung = 0;
  int failed = 0;
  int forks = 0;
  for (; forks < kForks && hung == 0; ++forks) {
    // Relaxed: see above. Wait until the readers run.
    while (lookups.load(std::memory_order_relaxed) == 0)
      std::this_thread::yield();
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(kChildSeconds);  // SIGALRM ends a hung child
      const bool ok = HeapProfileRate(*g) == kDefaultHeapProfileRate;
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
      ++hung;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
    }
  }
  stop.store(true, std::memory_order_relaxed);
  for (std::thread& r : readers) r.join();
  EXPECT_EQ(hung, 0) << "a child hung on the profiler's mutex (fork " << forks
                     << " of " << kForks << ")";
  EXPECT_EQ(failed, 0);
  EXPECT_GT(lookups.load(), 0u);
}

}  // namespace
}  // namespace umemcg

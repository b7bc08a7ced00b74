// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The thread registry behind cgroup.threads / cgroup.procs
// (src/threads/thread_registry.h): moving another thread's default group,
// moving it back, a scope and the thread's own choice winning, thread exit,
// a group removed while a thread points at it, the whole process, fork.

#include "threads/thread_registry.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory_resource>
#include <mutex>
#include <thread>

#include "test_util.h"
#include "umemcg/active.h"
#include "umemcg/memory_resource.h"

namespace umemcg {
namespace {

using internal::MoveProcess;
using internal::MoveThread;
using internal::RegisteredThreadCount;
using internal::ThreadsIn;
using testing::TestController;

pid_t Tid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// A thread that runs the steps it is given, one at a time, and reports
// its TID; the test moves it between steps.
class Worker {
 public:
  Worker() {
    thread_ = std::thread([this] { Loop(); });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return tid_ != 0; });
  }
  ~Worker() {
    Run(nullptr);
    thread_.join();
  }
  pid_t tid() const { return tid_; }
  // Runs `step` on the worker and waits for it (null: exit).
  void Run(std::function<void()> step) {
    std::unique_lock<std::mutex> lock(mu_);
    step_ = std::move(step);
    quit_ = step_ == nullptr;
    has_step_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !has_step_; });
  }
  Group* Active() {
    Group* g = nullptr;
    Run([&] { g = ActiveGroup(); });
    return g;
  }

 private:
  void Loop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tid_ = Tid();
      cv_.notify_all();
    }
    for (;;) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return has_step_; });
      if (quit_) {
        has_step_ = false;
        cv_.notify_all();
        return;
      }
      step_();
      has_step_ = false;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> step_;
  bool has_step_ = false;
  bool quit_ = false;
  pid_t tid_ = 0;
  std::thread thread_;
};

TEST(ThreadRegistryTest, MoveChangesTheThreadsDefaultAndMoveBack) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  Worker w;
  w.Run([&] { SetThreadDefaultGroup(a.get()); });
  EXPECT_EQ(ThreadsIn(*a), std::vector<pid_t>{w.tid()});
  ASSERT_TRUE(MoveThread(w.tid(), *b).ok());
  // Membership moves at once; the thread's default at its next lookup.
  EXPECT_TRUE(ThreadsIn(*a).empty());
  EXPECT_EQ(ThreadsIn(*b), std::vector<pid_t>{w.tid()});
  ObjCgroup* objcg = nullptr;
  Group* dflt = nullptr;
  w.Run([&] {
    objcg = ActiveObjCgroup();
    dflt = ThreadDefaultGroup();
  });
  EXPECT_EQ(objcg, b->GetObjCgroup().get());
  EXPECT_EQ(dflt, b.get());
  // Back again.
  ASSERT_TRUE(MoveThread(w.tid(), *a).ok());
  EXPECT_EQ(w.Active(), a.get());
  EXPECT_EQ(ThreadsIn(*a), std::vector<pid_t>{w.tid()});
  // The calling thread was not touched.
  EXPECT_EQ(ActiveGroup(), nullptr);
  w.Run([] { SetThreadDefaultGroup(nullptr); });
}

TEST(ThreadRegistryTest, ChargesBeforeTheMoveStayWhereTheyWere) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  MemoryResource mr(kChargeActiveGroup, nullptr);
  constexpr size_t kBlock = 4 * kPageSize;
  Worker w;
  void* before = nullptr;
  void* after = nullptr;
  w.Run([&] {
    SetThreadDefaultGroup(a.get());
    before = mr.allocate(kBlock);
  });
  ASSERT_TRUE(MoveThread(w.tid(), *b).ok());
  w.Run([&] { after = mr.allocate(kBlock); });
  t.Drain();
  EXPECT_EQ(MemoryResource::OwnerOf(before), a->GetObjCgroup().get());
  EXPECT_EQ(MemoryResource::OwnerOf(after), b->GetObjCgroup().get());
  // Each group holds its block, header included, rounded up to pages.
  const uint64_t pages =
      (MemoryResource::ChargedSizeOf(before) + kPageSize - 1) / kPageSize;
  EXPECT_GE(pages, 4u);
  EXPECT_EQ(a->usage(), Pages(pages));
  EXPECT_EQ(b->usage(), Pages(pages));
  // Freeing uncharges the group each block was charged to.
  w.Run([&] {
    mr.deallocate(before, kBlock);
    mr.deallocate(after, kBlock);
    SetThreadDefaultGroup(nullptr);
  });
  t.Drain();
  EXPECT_EQ(a->usage(), Pages(0));
  EXPECT_EQ(b->usage(), Pages(0));
}

TEST(ThreadRegistryTest, AScopeWinsAndTheThreadsOwnChoiceWins) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  GroupRef c = t.Make("c");
  Worker w;
  Group* in_scope = nullptr;
  Group* after_scope = nullptr;
  w.Run([&] { SetThreadDefaultGroup(a.get()); });
  // A move while a scope is live changes the default only.
  std::unique_ptr<ActiveGroupScope> scope;
  w.Run([&] { scope = std::make_unique<ActiveGroupScope>(*c); });
  ASSERT_TRUE(MoveThread(w.tid(), *b).ok());
  w.Run([&] {
    in_scope = ActiveGroup();
    scope.reset();
    after_scope = ActiveGroup();
  });
  EXPECT_EQ(in_scope, c.get());
  EXPECT_EQ(after_scope, b.get());
  // A move not yet picked up loses against the thread's own set.
  ASSERT_TRUE(MoveThread(w.tid(), *c).ok());
  w.Run([&] { SetThreadDefaultGroup(a.get()); });
  EXPECT_EQ(w.Active(), a.get());
  EXPECT_EQ(ThreadsIn(*a), std::vector<pid_t>{w.tid()});
  EXPECT_TRUE(ThreadsIn(*c).empty());
  w.Run([] { SetThreadDefaultGroup(nullptr); });
}

TEST(ThreadRegistryTest, ThreadExitRemovesItsSlotAndReleasesItsGroups) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  const size_t threads_before = RegisteredThreadCount();
  const int64_t groups_before = t.ctrl->live_groups();
  pid_t tid = 0;
  {
    Worker w;
    tid = w.tid();
    w.Run([&] { SetThreadDefaultGroup(a.get()); });
    EXPECT_EQ(RegisteredThreadCount(), threads_before + 1);
    // A move the thread never picks up: its exit releases it.
    ASSERT_TRUE(MoveThread(tid, *b).ok());
  }
  EXPECT_EQ(RegisteredThreadCount(), threads_before);
  // A thread that only registered leaves at exit too.
  std::thread([&] {
    RegisterThread();
    EXPECT_EQ(RegisteredThreadCount(), threads_before + 1);
  }).join();
  EXPECT_EQ(RegisteredThreadCount(), threads_before);
  EXPECT_TRUE(ThreadsIn(*a).empty());
  EXPECT_TRUE(ThreadsIn(*b).empty());
  EXPECT_EQ(MoveThread(tid, *a).code(), StatusCode::kNoSuchProcess);
  // No reference left: both groups can be removed and freed.
  Group* ra = a.get();
  Group* rb = b.get();
  a.reset();
  b.reset();
  ASSERT_TRUE(t.ctrl->RemoveGroup(*ra).ok());
  ASSERT_TRUE(t.ctrl->RemoveGroup(*rb).ok());
  t.ctrl->Reap();
  EXPECT_EQ(t.ctrl->live_groups(), groups_before - 2);
}

TEST(ThreadRegistryTest, RegisterThreadWithoutADefaultIsListedInTheRoot) {
  TestController t;
  GroupRef a = t.Make("a");
  Worker w;
  w.Run([] { RegisterThread(); });
  std::vector<pid_t> root = ThreadsIn(t.ctrl->root());
  EXPECT_NE(std::find(root.begin(), root.end(), w.tid()), root.end());
  EXPECT_EQ(w.Active(), nullptr);
  ASSERT_TRUE(MoveThread(w.tid(), *a).ok());
  EXPECT_EQ(w.Active(), a.get());
  root = ThreadsIn(t.ctrl->root());
  EXPECT_EQ(std::find(root.begin(), root.end(), w.tid()), root.end());
  w.Run([] { SetThreadDefaultGroup(nullptr); });
}

// Two controllers: a thread without a group is listed in the root of the
// controller it belongs to (its last group's) and in no other root; one
// that never had a group belongs to none and is listed in both roots.
TEST(ThreadRegistryTest, AThreadWithoutAGroupIsListedInItsOwnControllersRoot) {
  TestController t1;
  TestController t2;
  GroupRef a = t1.Make("a");
  GroupRef b = t2.Make("b");
  auto listed = [](const Group& g, pid_t tid) {
    const std::vector<pid_t> tids = ThreadsIn(g);
    return std::find(tids.begin(), tids.end(), tid) != tids.end();
  };
  Worker w;
  w.Run([] { RegisterThread(); });
  EXPECT_TRUE(listed(t1.ctrl->root(), w.tid()));
  EXPECT_TRUE(listed(t2.ctrl->root(), w.tid()));
  Group* ga = a.get();
  w.Run([ga] { SetThreadDefaultGroup(ga); });
  w.Run([] { SetThreadDefaultGroup(nullptr); });
  EXPECT_TRUE(listed(t1.ctrl->root(), w.tid()));
  EXPECT_FALSE(listed(t2.ctrl->root(), w.tid()));
  // A move makes it the other controller's.
  ASSERT_TRUE(MoveThread(w.tid(), *b).ok());
  EXPECT_EQ(w.Active(), b.get());
  w.Run([] { SetThreadDefaultGroup(nullptr); });
  EXPECT_FALSE(listed(t1.ctrl->root(), w.tid()));
  EXPECT_TRUE(listed(t2.ctrl->root(), w.tid()));
}

// The kernel refuses rmdir of a populated cgroup (EBUSY); Group removal
// here does not look at threads (the FUSE mount's rmdir does): the
// thread keeps its reference and charges the parent, like a scope.
TEST(ThreadRegistryTest, GroupRemovedUnderAThreadChargesTheParent) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  GroupRef d = t.Make("d");
  Worker w;
  w.Run([&] { SetThreadDefaultGroup(c.get()); });
  ASSERT_TRUE(t.ctrl->RemoveGroup(*c).ok());
  Group* charged = nullptr;
  w.Run([&] { charged = ActiveObjCgroup()->group(); });
  EXPECT_EQ(charged, p.get());
  // Moving into a removed group is refused; out of it works.
  EXPECT_EQ(MoveThread(w.tid(), *c).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(MoveProcess(*c).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(MoveThread(w.tid(), *d).ok());
  EXPECT_EQ(w.Active(), d.get());
  // c's last reference was the thread's: it can be freed now.
  const int64_t groups = t.ctrl->live_groups();
  c.reset();
  t.ctrl->Reap();
  EXPECT_EQ(t.ctrl->live_groups(), groups - 1);
  w.Run([] { SetThreadDefaultGroup(nullptr); });
}

TEST(ThreadRegistryTest, UnknownTidAndWholeProcess) {
  TestController t;
  GroupRef a = t.Make("a");
  // PID 1 is another process: never a thread of this one.
  EXPECT_EQ(MoveThread(1, *a).code(), StatusCode::kNoSuchProcess);
  Worker w1, w2;
  w1.Run([] { RegisterThread(); });
  w2.Run([] { RegisterThread(); });
  SetThreadDefaultGroup(nullptr);  // registers this thread
  ASSERT_TRUE(MoveProcess(*a).ok());
  const std::vector<pid_t> in_a = ThreadsIn(*a);
  EXPECT_EQ(in_a.size(), RegisteredThreadCount());
  EXPECT_EQ(w1.Active(), a.get());
  EXPECT_EQ(w2.Active(), a.get());
  EXPECT_EQ(ActiveGroup(), a.get());
  SetThreadDefaultGroup(nullptr);
  w1.Run([] { SetThreadDefaultGroup(nullptr); });
  w2.Run([] { SetThreadDefaultGroup(nullptr); });
  EXPECT_TRUE(ThreadsIn(*a).empty());
}

// Moves published while the thread charges in a loop (TSan checks the
// hand-over): every block is charged to one of the two groups, the last
// move wins, and everything comes back.
TEST(ThreadRegistryTest, MovesRaceWithTheThreadsCharges) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  ObjCgroup* objcg_a = a->GetObjCgroup().get();
  ObjCgroup* objcg_b = b->GetObjCgroup().get();
  MemoryResource mr(kChargeActiveGroup, nullptr);
  std::atomic<pid_t> tid{0};
  std::atomic<bool> stop{false};
  std::atomic<int> stray{0};
  std::atomic<Group*> last{nullptr};
  std::thread worker([&] {
    SetThreadDefaultGroup(b.get());  // the last move is to a
    tid = Tid();
    while (!stop.load()) {
      void* p = mr.allocate(64);
      ObjCgroup* owner = MemoryResource::OwnerOf(p);
      if (owner != objcg_a && owner != objcg_b) stray.fetch_add(1);
      mr.deallocate(p, 64);
    }
    last = ActiveGroup();
    SetThreadDefaultGroup(nullptr);
  });
  while (tid.load() == 0) std::this_thread::yield();
  for (int i = 0; i < 2000; ++i) {
    Group& to = i % 2 == 0 ? *b : *a;
    ASSERT_TRUE(MoveThread(tid.load(), to).ok());
    ASSERT_EQ(ThreadsIn(to), std::vector<pid_t>{tid.load()});
  }
  stop = true;
  worker.join();
  EXPECT_EQ(stray.load(), 0);
  EXPECT_EQ(last.load(), a.get());  // the last move (i = 1999) was to a
  t.Drain();
  EXPECT_EQ(a->usage(), Pages(0));
  EXPECT_EQ(b->usage(), Pages(0));
}

TEST(ThreadRegistryTest, ForkChildKeepsOnlyTheForkingThread) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "TSan does not support threads after a multi-threaded fork";
#endif
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  SetThreadDefaultGroup(a.get());
  Worker w;
  w.Run([&] { SetThreadDefaultGroup(a.get()); });
  ASSERT_EQ(ThreadsIn(*a).size(), 2u);
  const pid_t parent_tid = Tid();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // One thread, under its new TID; the worker is unknown here.
    int bad = 0;
    const pid_t me = Tid();
    if (me == parent_tid) bad |= 1;
    if (RegisteredThreadCount() != 1) bad |= 2;
    if (ThreadsIn(*a) != std::vector<pid_t>{me}) bad |= 4;
    if (MoveThread(w.tid(), *b).code() != StatusCode::kNoSuchProcess) bad |= 8;
    if (!MoveThread(me, *b).ok() || ActiveGroup() != b.get()) bad |= 16;
    ::_exit(bad);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent is unchanged.
  EXPECT_EQ(ThreadsIn(*a).size(), 2u);
  EXPECT_EQ(ActiveGroup(), a.get());
  SetThreadDefaultGroup(nullptr);
  w.Run([] { SetThreadDefaultGroup(nullptr); });
}

}  // namespace
}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// memory.high work for charges that may not block (kernel: high_work,
// scheduled from try_charge_memcg where the charging context cannot
// reclaim; high_work_func -> reclaim_high with one batch). Before it, a
// group pushed over high by non-blocking charges was reclaimed only when a
// blocking charge or a memory.high write came along.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "controller_impl.h"
#include "test_util.h"

namespace umemcg {
namespace {

using testing::TestController;

// A reclaimer that may be called from the worker while the test charges.
class LockedReclaimer : public Reclaimer {
 public:
  explicit LockedReclaimer(Group* g) : group_(g) {}
  bool Fill(Pages n, ChargeFlags flags) {
    if (!group_->TryCharge(n, flags).ok()) return false;
    std::lock_guard<std::mutex> lock(mu_);
    held_ += n.raw();
    return true;
  }
  Pages Reclaimable() override {
    std::lock_guard<std::mutex> lock(mu_);
    return Pages(held_);
  }
  Pages Reclaim(Pages target) override {
    uint64_t n;
    {
      std::lock_guard<std::mutex> lock(mu_);
      n = std::min<uint64_t>(held_, target.raw());
      held_ -= n;
      asked_ += target.raw();
      ++calls_;
    }
    group_->UnchargeDirect(Pages(n));
    return Pages(n);
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    group_->UnchargeDirect(Pages(held_));
    held_ = 0;
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  uint64_t asked() {
    std::lock_guard<std::mutex> lock(mu_);
    return asked_;
  }

 private:
  Group* group_;
  std::mutex mu_;
  uint64_t held_ = 0;
  uint64_t asked_ = 0;
  int calls_ = 0;
};

// Waits (a hang guard, not a timing assertion) until `done` holds.
template <typename F>
bool WaitFor(F done) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Charges `pages` one page at a time without blocking (batch 8: one batch
// charge per 8 pages), as an allocator that must not sleep does.
void ChargeNonBlocking(LockedReclaimer& r, int pages) {
  for (int i = 0; i < pages; ++i) {
    ASSERT_TRUE(r.Fill(Pages(1), ChargeFlags::kNone));
  }
}

TEST(HighWorkTest, ManualModeQueuesOnceAndRunsOneBatchPerLevel) {
  int notified = 0;
  TestController t({.batch = 8,
                    .high_work = HighWorkMode::kManual,
                    .high_work_notify = [&] { ++notified; }});
  EXPECT_EQ(t.ctrl->info().high_work, HighWorkMode::kManual);
  GroupRef p = t.Make("p");
  GroupRef g = t.Make("p/g");
  ASSERT_TRUE(g->SetHigh(Pages(64)).ok());
  LockedReclaimer r(g.get());
  ASSERT_TRUE(g->AddReclaimer(&r).ok());

  ChargeNonBlocking(r, 128);
  // Over high from the 9th batch charge on: queued by the first of them,
  // the 7 others found it still queued.
  EXPECT_EQ(t.ctrl->high_work_queued(), 1u);
  EXPECT_EQ(notified, 1);
  EXPECT_EQ(r.calls(), 0);  // nobody reclaimed on the charging thread
  EXPECT_EQ(g->events(MemoryEvent::kHigh), 0u);

  // high_work_func: reclaim_high with one batch, which the reclaim walk
  // raises to SWAP_CLUSTER_MAX (32) as try_to_free_mem_cgroup_pages does.
  EXPECT_EQ(t.ctrl->RunHighWork(), 1u);
  EXPECT_EQ(t.ctrl->high_work_queued(), 0u);
  EXPECT_EQ(r.asked(), 32u);
  EXPECT_EQ(g->events_local(MemoryEvent::kHigh), 1u);
  EXPECT_EQ(p->events(MemoryEvent::kHigh), 1u);
  EXPECT_EQ(g->usage(), Pages(96));
  EXPECT_EQ(t.ctrl->RunHighWork(), 0u);  // nothing left

  // Queued again by the next non-blocking charge over high; every level
  // over its high gets a batch and an event.
  ASSERT_TRUE(p->SetHigh(Pages(66), ChargeFlags::kNone).ok());
  ChargeNonBlocking(r, 8);  // usage 104: g is the first level over high
  EXPECT_EQ(t.ctrl->high_work_queued(), 1u);
  EXPECT_EQ(notified, 2);
  EXPECT_EQ(t.ctrl->RunHighWork(), 1u);
  // g: 104 > 64, reclaimed to 72; p: still 72 > 66, reclaimed to 40.
  EXPECT_EQ(r.asked(), 96u);
  EXPECT_EQ(g->usage(), Pages(40));
  EXPECT_EQ(g->events_local(MemoryEvent::kHigh), 2u);
  EXPECT_EQ(p->events_local(MemoryEvent::kHigh), 1u);
  EXPECT_EQ(p->events(MemoryEvent::kHigh), 3u);

  ASSERT_TRUE(g->RemoveReclaimer(&r).ok());
  r.Release();
  (void)g->HandleOverHigh(ChargeFlags::kNoThrottle);
}

TEST(HighWorkTest, BlockingChargesDoNotQueue) {
  TestController t({.batch = 8, .high_work = HighWorkMode::kManual});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetHigh(Pages(16)).ok());
  LockedReclaimer r(g.get());
  ASSERT_TRUE(g->AddReclaimer(&r).ok());
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(r.Fill(Pages(1), kChargeDefault | ChargeFlags::kNoThrottle));
  }
  EXPECT_EQ(t.ctrl->high_work_queued(), 0u);
  EXPECT_GT(r.calls(), 0);  // they reclaimed themselves, past one batch
  ASSERT_TRUE(g->RemoveReclaimer(&r).ok());
  r.Release();
  (void)g->HandleOverHigh(ChargeFlags::kNoThrottle);
}

// The thread's pending overage (what its next HandleOverHigh or blocking
// charge pays as a penalty) is recorded the same with and without work.
TEST(HighWorkTest, PenaltyAccountingIsUnchanged) {
  uint64_t pending[2] = {};
  const HighWorkMode modes[] = {HighWorkMode::kNone, HighWorkMode::kManual};
  for (int m = 0; m < 2; ++m) {
    TestController t({.batch = 8, .high_work = modes[m]});
    GroupRef g = t.Make("g");
    ASSERT_TRUE(g->SetHigh(Pages(32)).ok());
    LockedReclaimer r(g.get());
    ASSERT_TRUE(g->AddReclaimer(&r).ok());
    ChargeNonBlocking(r, 96);
    pending[m] = internal::tls_charge.pages_over_high;
    const Group* pending_group = internal::tls_charge.over_high_group;
    EXPECT_EQ(pending_group, g.get());
    if (modes[m] == HighWorkMode::kNone) {
      EXPECT_EQ(t.ctrl->high_work_queued(), 0u);
      EXPECT_EQ(t.ctrl->RunHighWork(), 0u);
    }
    (void)g->HandleOverHigh(ChargeFlags::kNoThrottle);
    EXPECT_EQ(internal::tls_charge.pages_over_high, 0u);
    ASSERT_TRUE(g->RemoveReclaimer(&r).ok());
    r.Release();
  }
  // Batches 5..12 found g over its 32 pages: 8 batches of 8.
  EXPECT_EQ(pending[0], 64u);
  EXPECT_EQ(pending[1], pending[0]);
}

TEST(HighWorkTest, WorkerThreadReclaimsByDefault) {
  TestController t({.batch = 8});
  EXPECT_EQ(t.ctrl->info().high_work, HighWorkMode::kThread);
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetHigh(Pages(32)).ok());
  LockedReclaimer r(g.get());
  ASSERT_TRUE(g->AddReclaimer(&r).ok());
  ChargeNonBlocking(r, 96);
  // The worker reclaims without this thread doing anything more.
  ASSERT_TRUE(WaitFor([&] {
    return r.calls() > 0 && g->events_local(MemoryEvent::kHigh) > 0 &&
           t.ctrl->high_work_queued() == 0;
  }));
  // Not a multiple of SWAP_CLUSTER_MAX in general: the worker may run while
  // this thread is still filling the reclaimer, whose scan target is then
  // what it holds (seen under TSan: 6 pages).
  EXPECT_GT(r.asked(), 0u);
  ASSERT_TRUE(g->RemoveReclaimer(&r).ok());
  r.Release();
  (void)g->HandleOverHigh(ChargeFlags::kNoThrottle);
}

TEST(HighWorkTest, RemovedGroupsAreSkippedAndFreed) {
  TestController t({.batch = 8, .high_work = HighWorkMode::kManual});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetHigh(Pages(8)).ok());
  ASSERT_TRUE(g->TryCharge(Pages(32), ChargeFlags::kNone).ok());
  ASSERT_EQ(t.ctrl->high_work_queued(), 1u);
  g->UnchargeDirect(Pages(32));
  ASSERT_TRUE(t.ctrl->RemoveGroup(*g).ok());
  const int64_t live = t.ctrl->live_groups();
  g.reset();
  t.ctrl->Reap();
  EXPECT_EQ(t.ctrl->live_groups(), live);  // the queue holds it
  EXPECT_EQ(t.ctrl->RunHighWork(), 1u);
  t.ctrl->Reap();
  EXPECT_EQ(t.ctrl->live_groups(), live - 1);
  internal::tls_charge = {};
}

TEST(HighWorkTest, QueuedWorkIsDroppedWithTheController) {
  auto t = std::make_unique<TestController>(
      ControllerOptions{.batch = 8, .high_work = HighWorkMode::kManual});
  GroupRef g = t->Make("g");
  ASSERT_TRUE(g->SetHigh(Pages(8)).ok());
  ASSERT_TRUE(g->TryCharge(Pages(32), ChargeFlags::kNone).ok());
  ASSERT_EQ(t->ctrl->high_work_queued(), 1u);
  g->UnchargeDirect(Pages(32));
  g.reset();
  t.reset();  // no leak, no use after free (ASan)
  internal::tls_charge = {};
}

TEST(HighWorkTest, NotFromInsideAReclaimer) {
  TestController t({.batch = 8, .high_work = HighWorkMode::kManual});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetHigh(Pages(8)).ok());
  struct Nested : Reclaimer {
    Controller* ctrl;
    size_t ran = 99;
    Pages Reclaimable() override { return Pages(1); }
    Pages Reclaim(Pages) override {
      ran = ctrl->RunHighWork();
      return Pages(0);
    }
  } nested;
  nested.ctrl = t.ctrl.get();
  ASSERT_TRUE(g->AddReclaimer(&nested).ok());
  ASSERT_TRUE(g->TryCharge(Pages(32), ChargeFlags::kNone).ok());
  ASSERT_TRUE(g->Reclaim(Pages(1)).code() == StatusCode::kAgain);
  EXPECT_EQ(nested.ran, 0u);
  EXPECT_EQ(t.ctrl->high_work_queued(), 1u);
  EXPECT_EQ(t.ctrl->RunHighWork(), 1u);
  ASSERT_TRUE(g->RemoveReclaimer(&nested).ok());
  g->UnchargeDirect(Pages(32));
  internal::tls_charge = {};
}

// Threads charging without blocking while the worker reclaims (TSan).
TEST(HighWorkTest, ConcurrentChargersAndWorker) {
  TestController t({.batch = 8});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetHigh(Pages(64)).ok());
  LockedReclaimer r(g.get());
  ASSERT_TRUE(g->AddReclaimer(&r).ok());
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        if (!r.Fill(Pages(1), ChargeFlags::kNone)) ADD_FAILURE();
        if (i % 3 == 0) (void)g->HandleOverHigh(ChargeFlags::kNoThrottle);
      }
      (void)g->HandleOverHigh(ChargeFlags::kNoThrottle);
    });
  }
  for (std::thread& th : threads) th.join();
  ASSERT_TRUE(WaitFor([&] { return t.ctrl->high_work_queued() == 0; }));
  EXPECT_GT(r.calls(), 0);
  ASSERT_TRUE(g->RemoveReclaimer(&r).ok());
  r.Release();
  t.Drain();
  EXPECT_EQ(g->usage(), Pages(0));
  (void)g->HandleOverHigh(ChargeFlags::kNoThrottle);
}

}  // namespace
}  // namespace umemcg

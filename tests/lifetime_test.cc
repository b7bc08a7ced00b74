// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Lifetimes and callbacks: page statistics when a group is removed while
// it is charged or charging, the OOM outcome's victims outliving the
// handler's references, where the error hook runs, the object stock's kmem
// cache on a removed group, and the guard on concurrent stock drains.
// Deterministic: fake CPUs, one thread unless a test says otherwise.

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "charge_stock.h"
#include "controller_impl.h"
#include "obj_stock.h"
#include "port/try_lock.h"
#include "test_util.h"
#include "umemcg/obj_cgroup.h"

namespace umemcg {
namespace {

using testing::TestController;

// ---- Page statistics on removal (issue 13 item 3) ----

// Charged with a statistic, removed, then uncharged: the removal moved the
// +n into the parent (the root here); the uncharge must take it back there.
TEST(RemovalStatsTest, UnchargeAfterRemovingATopLevelGroupBalancesTheRoot) {
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->TryCharge(Pages(5), kChargeDefault, StatItem::kAnon).ok());
  EXPECT_EQ(t.ctrl->root().StatExact(StatItem::kAnon), 5);
  ASSERT_TRUE(t.ctrl->RemoveGroup(*g).ok());
  EXPECT_EQ(t.ctrl->root().StatExact(StatItem::kAnon), 5);
  g->Uncharge(Pages(5), StatItem::kAnon);
  t.Drain();
  EXPECT_EQ(t.ctrl->root().usage(), Pages(0));
  EXPECT_EQ(t.ctrl->root().StatExact(StatItem::kAnon), 0);
}

// The same below a live parent, for both uncharge forms.
TEST(RemovalStatsTest, UnchargeAfterRemovingALeafBalancesItsAncestors) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef m = t.Make("p/m");
  GroupRef l = t.Make("p/m/l");
  ASSERT_TRUE(l->TryCharge(Pages(3), kChargeDefault, StatItem::kFile).ok());
  ASSERT_TRUE(l->TryCharge(Pages(2), kChargeDefault, StatItem::kFile).ok());
  ASSERT_TRUE(t.ctrl->RemoveGroup(*l).ok());
  EXPECT_EQ(m->StatExact(StatItem::kFile), 5);
  l->Uncharge(Pages(3), StatItem::kFile);
  l->UnchargeDirect(Pages(2), StatItem::kFile);
  for (Group* g : {m.get(), p.get(), &t.ctrl->root()}) {
    EXPECT_EQ(g->StatExact(StatItem::kFile), 0) << g->path();
  }
}

// A charge that completes after its group went offline (here: the OOM
// handler removes the group the charge is for, then frees memory so the
// retried charge fits). Its +n must land where the later -n will go.
TEST(RemovalStatsTest, ChargeCompletingAfterRemovalCountsInTheParent) {
  for (const char* path : {"top", "p/mid", "p/m/leaf"}) {
    SCOPED_TRACE(path);
    TestController t;
    std::string parent_path = path;
    parent_path = parent_path.substr(0, parent_path.rfind('/'));
    if (parent_path != path) {
      // Create the ancestors.
      for (size_t pos = 0; pos != std::string::npos;) {
        pos = parent_path.find('/', pos + 1);
        (void)t.Make(parent_path.substr(0, pos));
      }
    }
    GroupRef g = t.Make(path);
    GroupRef filler = t.Make(parent_path != path ? parent_path + "/filler"
                                                 : std::string("filler"));
    Group* parent = g->parent();
    ASSERT_TRUE(g->SetMax(Pages(4)).ok());
    ASSERT_TRUE(g->TryCharge(Pages(4), ChargeFlags::kNone).ok());
    t.ctrl->SetOomHandler([&](const OomContext& ctx) {
      EXPECT_TRUE(t.ctrl->RemoveGroup(*ctx.over_limit).ok());
      ctx.over_limit->UnchargeDirect(Pages(4));
      return OomOutcome{.progress = true};
    });
    ASSERT_TRUE(g->TryCharge(Pages(1), kChargeDefault, StatItem::kAnon).ok());
    EXPECT_FALSE(g->online());
    for (Group* a = parent; a != nullptr; a = a->parent()) {
      EXPECT_EQ(a->StatExact(StatItem::kAnon), 1) << a->path();
    }
    g->Uncharge(Pages(1), StatItem::kAnon);
    t.Drain();
    for (Group* a = parent; a != nullptr; a = a->parent()) {
      EXPECT_EQ(a->StatExact(StatItem::kAnon), 0) << a->path();
      EXPECT_EQ(a->usage(), Pages(0)) << a->path();
    }
    EXPECT_TRUE(t.errors.empty());
  }
}

// ---- The OOM outcome holds its victims (issue 13 item 5) ----

// The handler removes its victim and drops the last reference to it before
// the charge path looks at the outcome; a Reap (here the handler's own,
// standing for any other thread's) must not free it under the charge path.
TEST(OomLifetimeTest, OutcomeKeepsTheVictimAliveAfterItsLastRefIsDropped) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  ASSERT_TRUE(p->SetMax(Pages(4)).ok());
  GroupRef victim = t.Make("p/victim");
  ASSERT_TRUE(victim->TryCharge(Pages(4), ChargeFlags::kNone).ok());
  int64_t live_in_handler = 0;
  int64_t live_before = 0;
  t.ctrl->SetOomHandler([&](const OomContext&) {
    EXPECT_TRUE(t.ctrl->RemoveGroup(*victim).ok());
    victim->UnchargeDirect(Pages(4));
    OomOutcome out{.progress = true, .killed = victim.get()};
    live_before = t.ctrl->live_groups();
    victim.reset();  // the last GroupRef
    t.ctrl->Reap();
    live_in_handler = t.ctrl->live_groups();
    return out;
  });
  ASSERT_TRUE(c->TryCharge(Pages(1)).ok());
  // The outcome still held the victim while the charge path used it.
  EXPECT_EQ(live_in_handler, live_before);
  EXPECT_EQ(p->events(MemoryEvent::kOomKill), 1u);
  t.ctrl->Reap();
  EXPECT_EQ(t.ctrl->live_groups(), 3);  // root, p, c
  t.Drain();
  c->UnchargeDirect(Pages(1));
}

// ---- The error hook runs outside every stock lock (issue 13 item 5) ----

// True when some charge-stock or object-stock shard lock of `ctrl` is held
// (by this thread: the tests using it are single-threaded).
bool AnyStockLockHeld(Controller& ctrl) {
  internal::ChargeStock& stock = internal::ControllerImpl::StockOf(ctrl);
  internal::ObjStock& obj = internal::ControllerImpl::ObjStockOf(ctrl);
  bool held = false;
  for (int k = 0; k < stock.nr_shards(); ++k) {
    if (!stock.ShardLock(k).try_lock()) {
      held = true;
    } else {
      stock.ShardLock(k).unlock();
    }
    if (!obj.ShardLock(k).try_lock()) {
      held = true;
    } else {
      obj.ShardLock(k).unlock();
    }
  }
  return held;
}

TEST(ErrorHookTest, UnderflowFoundByADrainIsReportedOutsideTheShardLock) {
  std::vector<std::string> reports;
  std::vector<bool> under_lock;
  Controller* ctrl = nullptr;
  ControllerOptions options;
  options.cpu_source = CpuSource::kFake;
  options.nr_cpus = 2;
  options.stats_flush_period = std::chrono::nanoseconds(0);
  options.error_hook = [&](const ErrorReport& r) {
    reports.push_back(r.what);
    const bool held = AnyStockLockHeld(*ctrl);
    under_lock.push_back(held);
    // What a hook may do: drain (takes every shard lock; under one it
    // would wait for itself forever) and read the group.
    if (!held) ctrl->DrainAllStocks(ctrl->root());
    (void)r.group->usage();
  };
  SetFakeCpu(0);
  std::unique_ptr<Controller> owner = Controller::Create(options).value();
  ctrl = owner.get();
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  // 1 page charged: 63 of the batch go to this CPU's stock.
  ASSERT_TRUE(g->TryCharge(Pages(1)).ok());
  // Uncharge the whole batch behind the stock's back: the stock now holds
  // more than the counter.
  g->UnchargeDirect(Pages(64));
  ASSERT_TRUE(reports.empty());
  ctrl->DrainAllStocks(ctrl->root());
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0], "underflow");
  ASSERT_EQ(under_lock.size(), 1u);
  EXPECT_FALSE(under_lock[0]) << "the error hook ran under a stock lock";
  EXPECT_EQ(g->usage(), Pages(0));
}

// The same from the object stock: a drained slot whose pages exceed what
// the group's counter holds.
TEST(ErrorHookTest, UnderflowFoundByAnObjectDrainIsReportedOutsideTheLock) {
  std::vector<bool> under_lock;
  Controller* ctrl = nullptr;
  ControllerOptions options;
  options.cpu_source = CpuSource::kFake;
  options.nr_cpus = 2;
  options.stats_flush_period = std::chrono::nanoseconds(0);
  options.error_hook = [&](const ErrorReport&) {
    under_lock.push_back(AnyStockLockHeld(*ctrl));
  };
  SetFakeCpu(0);
  std::unique_ptr<Controller> owner = Controller::Create(options).value();
  ctrl = owner.get();
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  ObjCgroupRef o = g->GetObjCgroup();
  ASSERT_TRUE(o->Charge(Bytes(4000)).ok());
  o->Uncharge(Bytes(4000));  // the slot now holds a whole page
  ctrl->DrainAllStocks(*g);  // ... returned here
  ASSERT_TRUE(under_lock.empty());
  ASSERT_TRUE(o->Charge(Bytes(4000)).ok());
  o->Uncharge(Bytes(4000));
  // Behind the stocks' back: the counter loses the page the slot holds and
  // the 63 the page stock holds.
  g->UnchargeDirect(Pages(64));
  ctrl->DrainAllStocks(*g);
  ASSERT_FALSE(under_lock.empty());
  for (bool held : under_lock) EXPECT_FALSE(held);
}

// ---- The kmem cache and removed groups (issue 13 item 5) ----

// A charge that completes on a group removed meanwhile (the OOM handler
// removes it) must not leave that group in the CPU's kmem cache, where it
// would stay referenced until the CPU caches another group.
TEST(ObjStockLifetimeTest, KmemCacheNeverHoldsARemovedGroup) {
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetMax(Pages(1)).ok());
  ASSERT_TRUE(g->TryCharge(Pages(1), ChargeFlags::kNone).ok());
  ObjCgroupRef o = g->GetObjCgroup();
  t.ctrl->SetOomHandler([&](const OomContext& ctx) {
    EXPECT_TRUE(t.ctrl->RemoveGroup(*ctx.over_limit).ok());
    ctx.over_limit->UnchargeDirect(Pages(1));
    return OomOutcome{.progress = true};
  });
  ASSERT_TRUE(o->Charge(Bytes(100)).ok());
  EXPECT_FALSE(g->online());
  internal::ObjStock& obj = internal::ControllerImpl::ObjStockOf(*t.ctrl);
  for (int k = 0; k < 4; ++k) {
    EXPECT_NE(obj.KmemGroup(k), g.get()) << "cpu " << k;
  }
  // The page is counted as kmem where the removed group's stats went.
  EXPECT_EQ(t.ctrl->root().StatExact(StatItem::kKernel), 1);
  o->Uncharge(Bytes(100));
  o.reset();
  t.Drain();
  EXPECT_EQ(t.ctrl->root().StatExact(StatItem::kKernel), 0);
  EXPECT_EQ(t.ctrl->root().usage(), Pages(0));
}

// ---- One stock drain at a time (issue 13 item 5) ----

// Chargers refused at a limit whose pages sit in another CPU's stock: the
// first drains (blocked here behind that CPU's shard lock, which the test
// holds), the others do not start drains of their own but wait for one
// that starts after their request. When the shard is released: exactly
// two drains ran (the first, and one for all who waited), and every charge
// succeeded (the stock returned its pages).
TEST(DrainGuardTest, RefusedChargersShareDrainsInsteadOfEachDraining) {
  constexpr int kChargers = 6;
  TestController t({}, /*nr_cpus=*/2);
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetMax(Pages(64)).ok());
  SetFakeCpu(1);
  ASSERT_TRUE(g->TryCharge(Pages(1)).ok());  // 63 pages in CPU 1's stock
  SetFakeCpu(0);
  ASSERT_EQ(g->usage(), Pages(64));
  internal::ChargeStock& stock = internal::ControllerImpl::StockOf(*t.ctrl);
  stock.ShardLock(1).lock();
  const uint64_t drains_before = internal::ControllerImpl::StockDrains(*t.ctrl);
  std::atomic<int> ok{0};
  std::vector<std::thread> chargers;
  for (int i = 0; i < kChargers; ++i) {
    chargers.emplace_back([&] {
      SetFakeCpu(0);
      if (g->TryCharge(Pages(1)).ok()) ok.fetch_add(1);
    });
  }
  // Hang guard only: every charger is inside DrainAllStocks (draining or
  // waiting for a drain).
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (internal::ControllerImpl::ThreadsInStockDrain(*t.ctrl) < kChargers &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(internal::ControllerImpl::ThreadsInStockDrain(*t.ctrl), kChargers);
  stock.ShardLock(1).unlock();
  for (auto& c : chargers) c.join();
  EXPECT_EQ(ok.load(), kChargers);
  EXPECT_EQ(internal::ControllerImpl::StockDrains(*t.ctrl) - drains_before, 2u);
  g->UnchargeDirect(Pages(1 + kChargers));
}

// ---- Dying groups go by themselves (issue 33 item 1) ----

// Creates `n` children of `parent`, charges each through the stock and the
// object stock, uncharges everything and removes them; no reference is
// kept. They are then dying: below kReapBatch, so no tree operation frees
// them at once.
void RemoveChargedChildren(Controller& ctrl, Group& parent, int n) {
  for (int i = 0; i < n; ++i) {
    GroupRef g = ctrl.CreateGroup(parent, "d" + std::to_string(i)).value();
    ASSERT_TRUE(g->TryCharge(Pages(3)).ok());
    g->Uncharge(Pages(3));
    ObjCgroupRef o = g->GetObjCgroup();
    ASSERT_TRUE(o->Charge(Bytes(100)).ok());
    o->Uncharge(Bytes(100));
    ASSERT_TRUE(ctrl.RemoveGroup(*g).ok());
  }
}

// Polls (real time, generous: the machine may be busy) until `done`.
template <typename F>
bool EventuallyTrue(F done) {
  for (int i = 0; i < 60000 && !done(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

// The kernel frees a dying memcg once its last reference goes (css
// release, then an RCU grace period), with no call. Here the periodic
// flusher reaps: one period of the (manual) clock frees all 30, with no
// Reap() call and no tree operation.
TEST(DyingGroupTest, FreedWithinOneFlusherPeriodWithoutReap) {
  TestController t;  // flusher period 2 s on a manual clock
  GroupRef p = t.Make("p");
  RemoveChargedChildren(*t.ctrl, *p, 30);
  ASSERT_LT(30, Controller::kReapBatch);
  EXPECT_EQ(p->nr_dying_descendants(), 30);
  EXPECT_EQ(t.ctrl->root().nr_dying_descendants(), 30);
  // The clock has not moved: the flusher has not run, nothing was freed.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(p->nr_dying_descendants(), 30);
  t.clock.Advance(std::chrono::seconds(2));
  EXPECT_TRUE(EventuallyTrue([&] { return p->nr_dying_descendants() == 0; }))
      << p->nr_dying_descendants() << " still dying";
  EXPECT_EQ(t.ctrl->root().nr_dying_descendants(), 0);
  EXPECT_EQ(p->nr_descendants(), 0);
  EXPECT_TRUE(t.errors.empty());
}

// A group still referenced stays dying; once the reference goes, the next
// period frees it.
TEST(DyingGroupTest, AReferencedGroupIsFreedAtThePeriodAfterItsLastRef) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef held = t.Make("p/held");
  ASSERT_TRUE(t.ctrl->RemoveGroup(*held).ok());
  RemoveChargedChildren(*t.ctrl, *p, 1);  // a marker: freed by the period
  EXPECT_EQ(p->nr_dying_descendants(), 2);
  t.clock.Advance(std::chrono::seconds(2));
  ASSERT_TRUE(EventuallyTrue([&] { return p->nr_dying_descendants() == 1; }))
      << p->nr_dying_descendants();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(p->nr_dying_descendants(), 1);  // `held` pins it
  held.reset();
  t.clock.Advance(std::chrono::seconds(2));
  EXPECT_TRUE(EventuallyTrue([&] { return p->nr_dying_descendants() == 0; }));
}

// No flusher thread: the next charge slow path (of a charge that may
// reclaim) or tree operation after one period frees them; before the
// period, neither does (fewer than kReapBatch wait).
TEST(DyingGroupTest, WithoutAFlusherTheChargeSlowPathFreesThemAfterAPeriod) {
  ControllerOptions o;
  o.stats_flush_period = std::chrono::nanoseconds(0);
  TestController t(o);
  GroupRef p = t.Make("p");
  GroupRef live = t.Make("live");
  RemoveChargedChildren(*t.ctrl, *p, 30);
  ASSERT_TRUE(live->TryCharge(Pages(200)).ok());  // a slow path, too early
  EXPECT_EQ(p->nr_dying_descendants(), 30);
  t.clock.Advance(std::chrono::seconds(2));
  live->Uncharge(Pages(200));
  t.Drain();
  ASSERT_TRUE(live->TryCharge(Pages(200)).ok());  // the stock misses
  EXPECT_EQ(p->nr_dying_descendants(), 0);
  live->Uncharge(Pages(200));
  // And by a tree operation: another 30, one period, one mkdir.
  RemoveChargedChildren(*t.ctrl, *p, 30);
  EXPECT_EQ(p->nr_dying_descendants(), 30);
  t.clock.Advance(std::chrono::seconds(2));
  GroupRef q = t.Make("q");
  EXPECT_EQ(p->nr_dying_descendants(), 0);
}

}  // namespace
}  // namespace umemcg

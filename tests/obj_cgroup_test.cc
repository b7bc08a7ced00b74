// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ObjCgroup and the object stock: byte accounting, statistics, bad input,
// reparenting and lifetime, exactness under threads and fake CPUs.
//
// Rounding at quiescence (after DrainAllStocks, see obj_cgroup.h): for an
// objcg with `live` bytes in live objects, its share of its group's usage
// is ceil(live / 4096) pages and its pool holds the rest of the last page;
// slab_* statistics equal `live` exactly and "kernel" (MEMCG_KMEM) equals
// the pages.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "test_util.h"
#include "umemcg/umemcg.h"

namespace umemcg {
namespace {

using testing::TestController;

constexpr int64_t Ceil(int64_t bytes) { return (bytes + 4095) / 4096; }

int64_t Slab(Group& g) { return g.StatExact(StatItem::kSlabUnreclaimable); }

TEST(ObjCgroupTest, SmallChargeTakesOnePageAndKeepsTheRest) {
  TestController t;
  GroupRef g = t.Make("a");
  ObjCgroupRef o = g->GetObjCgroup();
  ASSERT_TRUE(o);
  EXPECT_EQ(o->group(), g.get());
  ASSERT_TRUE(o->Charge(Bytes(100)).ok());
  EXPECT_EQ(g->usage() - g->StockedPages(), Pages(1));
  // The next 39 objects of 100 B come from the stock: no new page.
  for (int i = 0; i < 39; ++i) ASSERT_TRUE(o->Charge(Bytes(100)).ok());
  EXPECT_EQ(g->usage() - g->StockedPages(), Pages(1));
  t.Drain();
  EXPECT_EQ(Slab(*g), 4000);
  EXPECT_EQ(g->StatExact(StatItem::kKernel), 1);
  EXPECT_EQ(o->pooled(), Bytes(96));
  for (int i = 0; i < 40; ++i) o->Uncharge(Bytes(100));
  t.Drain();
  EXPECT_EQ(g->usage(), Pages(0));
  EXPECT_EQ(Slab(*g), 0);
  EXPECT_EQ(g->StatExact(StatItem::kKernel), 0);
  EXPECT_EQ(o->pooled(), Bytes(0));
  EXPECT_EQ(t.ctrl->root().usage(), Pages(0));
  EXPECT_TRUE(t.errors.empty());
}

TEST(ObjCgroupTest, ReclaimableStatIsSeparate) {
  TestController t;
  GroupRef g = t.Make("a");
  ObjCgroupRef o = g->GetObjCgroup();
  ASSERT_TRUE(
      o->Charge(Bytes(64), kChargeDefault, StatItem::kSlabReclaimable).ok());
  t.Drain();
  EXPECT_EQ(g->StatExact(StatItem::kSlabReclaimable), 64);
  EXPECT_EQ(Slab(*g), 0);
  o->Uncharge(Bytes(64), StatItem::kSlabReclaimable);
  t.Drain();
  EXPECT_EQ(g->StatExact(StatItem::kSlabReclaimable), 0);
}

TEST(ObjCgroupTest, BadInput) {
  TestController t;
  GroupRef g = t.Make("a");
  ObjCgroupRef o = g->GetObjCgroup();
  EXPECT_TRUE(o->Charge(Bytes(0)).ok());
  o->Uncharge(Bytes(0));
  EXPECT_EQ(g->usage(), Pages(0));
  const Bytes too_big(kPageCounterMax.in_bytes() + 1);
  EXPECT_EQ(o->Charge(too_big).code, StatusCode::kInvalidArgument);
  EXPECT_EQ(g->usage(), Pages(0));
  // The root's objcg is never charged.
  ObjCgroupRef root = t.ctrl->root().GetObjCgroup();
  ASSERT_TRUE(root);
  EXPECT_TRUE(root->is_root());
  EXPECT_TRUE(root->Charge(Bytes(5000)).ok());
  root->Uncharge(Bytes(5000));
  EXPECT_EQ(t.ctrl->root().usage(), Pages(0));
  EXPECT_TRUE(t.errors.empty());
}

TEST(ObjCgroupTest, UnderflowClampsCountsAndReports) {
#if UMEMCG_DCHECK_IS_ON
  GTEST_SKIP() << "debug builds abort on underflow by design";
#endif
  TestController t;
  GroupRef g = t.Make("a");
  ObjCgroupRef o = g->GetObjCgroup();
  ASSERT_TRUE(o->Charge(Bytes(100)).ok());
  o->Uncharge(Bytes(3 * 4096 + 100));
  t.Drain();
  EXPECT_EQ(g->usage(), Pages(0));
  EXPECT_GE(t.ctrl->underflows(), 1u);
  ASSERT_FALSE(t.errors.empty());
  EXPECT_EQ(t.errors[0], "underflow");
  o->Uncharge(Bytes(kPageCounterMax.in_bytes() + 1));
  EXPECT_GE(t.ctrl->underflows(), 2u);
  o.reset();
  g.reset();
  t.errors.clear();
}

TEST(ObjCgroupTest, ReleaseWithAPartialPageIsReported) {
  TestController t;
  GroupRef c = t.Make("c");
  ObjCgroupRef o = c->GetObjCgroup();
  ASSERT_TRUE(o->Charge(Bytes(100)).ok());
  ASSERT_TRUE(t.ctrl->RemoveGroup(*c).ok());
  o->Uncharge(Bytes(60));  // 40 bytes never freed: the pool is not whole
  o.reset();
  c.reset();
  t.Drain();
  t.ctrl->Reap();
  ASSERT_EQ(t.errors.size(), 1u);
  EXPECT_EQ(t.errors[0], "objcg_partial_page");
  EXPECT_EQ(t.ctrl->live_objcgs(), 1);  // the root's
  EXPECT_EQ(t.ctrl->live_groups(), 1);
  t.errors.clear();
}

TEST(ObjCgroupTest, ObjStockSlotsAreValidated) {
  for (int slots : {0, 17}) {
    ControllerOptions opts;
    opts.obj_stock_slots = slots;
    EXPECT_EQ(Controller::Create(opts).status().code(),
              StatusCode::kInvalidArgument);
  }
}

TEST(ObjCgroupTest, LimitsApplyToPageCharges) {
  TestController t;
  GroupRef g = t.Make("a");
  ASSERT_TRUE(g->SetMax(Pages(2)).ok());
  ObjCgroupRef o = g->GetObjCgroup();
  ASSERT_TRUE(o->Charge(Bytes(8000), ChargeFlags::kNone).ok());
  ChargeResult r = o->Charge(Bytes(4096), ChargeFlags::kNone);
  EXPECT_EQ(r.code, StatusCode::kResourceExhausted);
  EXPECT_EQ(r.limited_by, g.get());
  // Small objects still fit in the 192 B left in the stock.
  EXPECT_TRUE(o->Charge(Bytes(100), ChargeFlags::kNone).ok());
  // Forced charges go past max, as with TryCharge.
  r = o->Charge(Bytes(4096), ChargeFlags::kNoFail);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.forced);
  o->Uncharge(Bytes(8000 + 100 + 4096));
  t.Drain();
  EXPECT_EQ(g->usage(), Pages(0));
}

TEST(ObjCgroupTest, SingleSlotStockEvictsToThePool) {
  ControllerOptions opts;
  opts.obj_stock_slots = 1;
  TestController t(opts);
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  ObjCgroupRef oa = a->GetObjCgroup(), ob = b->GetObjCgroup();
  ASSERT_TRUE(oa->Charge(Bytes(92)).ok());
  ASSERT_TRUE(ob->Charge(Bytes(92)).ok());  // evicts a: 4004 B to a's pool
  EXPECT_EQ(oa->pooled(), Bytes(4004));
  ASSERT_TRUE(oa->Charge(Bytes(92)).ok());  // page charge; adopts the pool
  EXPECT_EQ(oa->pooled(), Bytes(0));
  t.Drain();
  EXPECT_EQ(a->usage(), Pages(1));  // 184 B live: one page after drain
  EXPECT_EQ(oa->pooled(), Bytes(4096 - 184));
  oa->Uncharge(Bytes(184));
  ob->Uncharge(Bytes(92));
  t.Drain();
  EXPECT_EQ(a->usage(), Pages(0));
  EXPECT_EQ(b->usage(), Pages(0));
  EXPECT_EQ(oa->pooled(), Bytes(0));
}

TEST(ObjCgroupTest, DrainAllStocksDrainsOnlyTheSubtree) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  ObjCgroupRef oa = a->GetObjCgroup(), ob = b->GetObjCgroup();
  ASSERT_TRUE(oa->Charge(Bytes(10)).ok());
  ASSERT_TRUE(ob->Charge(Bytes(10)).ok());
  t.ctrl->DrainAllStocks(*a);
  EXPECT_EQ(oa->pooled(), Bytes(4086));
  EXPECT_EQ(ob->pooled(), Bytes(0));
  oa->Uncharge(Bytes(10));
  ob->Uncharge(Bytes(10));
  t.Drain();
}

// Removing a group re-points its objcg: later uncharges land on the
// parent, later charges charge the parent, and the group is freed once
// its own references go, while the objcg lives on (issue 14 item 1).
TEST(ObjCgroupTest, ReparentingMovesChargesToTheParent) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  GroupRef gc = t.Make("p/c/g");
  ObjCgroupRef oc = c->GetObjCgroup(), og = gc->GetObjCgroup();
  ASSERT_TRUE(oc->Charge(Bytes(3 * 4096)).ok());
  ASSERT_TRUE(og->Charge(Bytes(100)).ok());
  const int64_t live_before = t.ctrl->live_groups();
  ASSERT_TRUE(t.ctrl->RemoveGroup(*gc).ok());
  EXPECT_EQ(og->group(), c.get());
  EXPECT_FALSE(gc->GetObjCgroup());
  ASSERT_TRUE(t.ctrl->RemoveGroup(*c).ok());  // inherited objcg moves too
  EXPECT_EQ(og->group(), p.get());
  EXPECT_EQ(oc->group(), p.get());
  // Charging through a removed group's objcg charges the live ancestor.
  ASSERT_TRUE(oc->Charge(Bytes(4096)).ok());
  t.Drain();
  EXPECT_EQ(p->usage(), Pages(5));
  EXPECT_EQ(Slab(*p), 4 * 4096 + 100);
  oc->Uncharge(Bytes(4 * 4096));
  og->Uncharge(Bytes(100));
  gc.reset();
  c.reset();
  t.Drain();
  EXPECT_EQ(p->usage(), Pages(0));
  EXPECT_EQ(Slab(*p), 0);
  EXPECT_EQ(p->StatExact(StatItem::kKernel), 0);
  t.ctrl->Reap();
  // The objcgs (still referenced) do not pin their removed groups.
  EXPECT_EQ(t.ctrl->live_groups(), live_before - 2);
  EXPECT_EQ(oc->group(), p.get());
  oc.reset();
  og.reset();
  t.ctrl->Reap();
  EXPECT_EQ(t.ctrl->live_groups(), live_before - 2);
  EXPECT_EQ(p->usage(), Pages(0));
  EXPECT_EQ(t.ctrl->root().usage(), Pages(0));
  EXPECT_TRUE(t.errors.empty()) << t.errors[0];
}

TEST(ObjCgroupTest, ReparentedToTheRootChargesTheRootCounter) {
  TestController t;
  GroupRef c = t.Make("c");
  ObjCgroupRef o = c->GetObjCgroup();
  ASSERT_TRUE(o->Charge(Bytes(50)).ok());
  ASSERT_TRUE(t.ctrl->RemoveGroup(*c).ok());
  ASSERT_TRUE(o->Charge(Bytes(8192)).ok());
  t.Drain();
  EXPECT_EQ(t.ctrl->root().usage(), Pages(3));
  o->Uncharge(Bytes(8192 + 50));
  t.Drain();
  EXPECT_EQ(t.ctrl->root().usage(), Pages(0));
  o.reset();
  c.reset();
  t.ctrl->Reap();
  EXPECT_EQ(t.ctrl->live_groups(), 1);
  EXPECT_TRUE(t.errors.empty());
}

// ---- Threads and fake CPUs ----

struct Variant {
  int slots;
  bool stat_cache;
  bool stock;
};

class ObjCgroupExactnessTest : public ::testing::TestWithParam<Variant> {};

// Threads on different fake CPUs charge random sizes (1 B .. 3 pages) to
// three groups and hand half of their objects to the next thread, which
// frees them on its own CPU. At quiescence every group's usage and
// statistics are exact (see the file comment).
TEST_P(ObjCgroupExactnessTest, RandomSizesAcrossThreadsAreExact) {
  ControllerOptions opts;
  opts.obj_stock_slots = GetParam().slots;
  opts.obj_stat_cache = GetParam().stat_cache;
  opts.obj_stock = GetParam().stock;
  TestController t(opts, /*nr_cpus=*/3);
  constexpr int kGroups = 3;
  constexpr int kThreads = 4;
  constexpr int kOps = 3000;
  GroupRef groups[kGroups] = {t.Make("a"), t.Make("b"), t.Make("a/c")};
  ObjCgroupRef objcgs[kGroups];
  for (int i = 0; i < kGroups; ++i) objcgs[i] = groups[i]->GetObjCgroup();
  struct Obj {
    int group;
    uint64_t size;
  };
  std::vector<std::vector<Obj>> kept(kThreads), handed(kThreads);
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(1234 + w);
      SetFakeCpu(w);
      std::vector<Obj> live;
      for (int i = 0; i < kOps; ++i) {
        if (rng() % 8 == 0) SetFakeCpu(static_cast<int>(rng() % 5));
        if (!live.empty() && rng() % 3 == 0) {
          const size_t k = rng() % live.size();
          objcgs[live[k].group]->Uncharge(Bytes(live[k].size));
          live[k] = live.back();
          live.pop_back();
          continue;
        }
        Obj o{static_cast<int>(rng() % kGroups), 1 + rng() % (3 * 4096)};
        ASSERT_TRUE(objcgs[o.group]->Charge(Bytes(o.size)).ok());
        live.push_back(o);
      }
      for (size_t k = 0; k < live.size(); ++k) {
        (k % 2 == 0 ? kept[w] : handed[(w + 1) % kThreads]).push_back(live[k]);
      }
    });
  }
  for (auto& th : threads) th.join();
  threads.clear();
  auto check = [&](const char* when) {
    t.Drain();
    int64_t live[kGroups] = {};
    for (int w = 0; w < kThreads; ++w) {
      for (const Obj& o : kept[w]) live[o.group] += o.size;
      for (const Obj& o : handed[w]) live[o.group] += o.size;
    }
    for (int i = 0; i < kGroups; ++i) {
      SCOPED_TRACE(std::string(when) + " group " + groups[i]->path());
      const int64_t local = i == 0 ? live[0] + live[2] : live[i];
      const int64_t pages =
          i == 0 ? Ceil(live[0]) + Ceil(live[2]) : Ceil(live[i]);
      EXPECT_EQ(static_cast<int64_t>(groups[i]->usage().raw()), pages);
      EXPECT_EQ(Slab(*groups[i]), local);
      EXPECT_EQ(groups[i]->StatExact(StatItem::kKernel), pages);
      EXPECT_EQ(static_cast<int64_t>(objcgs[i]->pooled().raw()),
                Ceil(live[i]) * 4096 - live[i]);
    }
    EXPECT_EQ(t.ctrl->root().usage().raw(),
              groups[0]->usage().raw() + groups[1]->usage().raw());
  };
  check("after charging");
  // Free everything, each thread on its own fake CPU.
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      SetFakeCpu(w + 1);
      for (const Obj& o : handed[w]) objcgs[o.group]->Uncharge(Bytes(o.size));
      for (const Obj& o : kept[w]) objcgs[o.group]->Uncharge(Bytes(o.size));
    });
  }
  for (auto& th : threads) th.join();
  for (auto& v : kept) v.clear();
  for (auto& v : handed) v.clear();
  check("after freeing");
  EXPECT_TRUE(t.errors.empty());
  EXPECT_EQ(t.ctrl->underflows(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Variants, ObjCgroupExactnessTest,
                         ::testing::Values(Variant{5, true, true},
                                           Variant{1, true, true},
                                           Variant{5, false, true},
                                           Variant{16, true, true},
                                           Variant{5, true, false}));

// Threads allocate in a child; the child is removed mid-run; objects are
// freed afterwards. The parent ends exactly at its baseline and the child
// is freed once its last object is gone.
TEST(ObjCgroupStressTest, ReparentingUnderLoad) {
  TestController t({}, /*nr_cpus=*/4);
  GroupRef p = t.Make("p");
  ObjCgroupRef po = p->GetObjCgroup();
  ASSERT_TRUE(po->Charge(Bytes(12345)).ok());  // the baseline
  t.Drain();
  const Pages baseline = p->usage();
  const int64_t groups_before = t.ctrl->live_groups();
  GroupRef c = t.Make("p/c");
  ObjCgroupRef co = c->GetObjCgroup();
  constexpr int kThreads = 4;
  std::atomic<int> started{0};
  std::atomic<bool> removed{false};
  std::vector<std::vector<uint64_t>> objs(kThreads);
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(77 + w);
      SetFakeCpu(w);
      ObjCgroupRef mine(co);
      started.fetch_add(1);
      for (int i = 0; i < 4000 || !removed.load(); ++i) {
        if (!objs[w].empty() && rng() % 4 == 0) {
          mine->Uncharge(Bytes(objs[w].back()));
          objs[w].pop_back();
        } else {
          const uint64_t size = 1 + rng() % 9000;
          ASSERT_TRUE(mine->Charge(Bytes(size)).ok());
          objs[w].push_back(size);
        }
      }
    });
  }
  // Drains race with the charges and with the removal.
  std::thread drainer([&] {
    SetFakeCpu(3);
    while (!removed.load()) {
      t.ctrl->DrainAllStocks(*p);
      std::this_thread::yield();
    }
  });
  while (started.load() < kThreads) std::this_thread::yield();
  ASSERT_TRUE(t.ctrl->RemoveGroup(*c).ok());
  removed.store(true);
  drainer.join();
  for (auto& th : threads) th.join();
  c.reset();
  EXPECT_EQ(co->group(), p.get());
  // Free everything on other threads / CPUs.
  threads.clear();
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      SetFakeCpu(w + 2);
      for (uint64_t size : objs[w]) co->Uncharge(Bytes(size));
    });
  }
  for (auto& th : threads) th.join();
  t.Drain();
  EXPECT_EQ(p->usage(), baseline);
  EXPECT_EQ(Slab(*p), 12345);
  EXPECT_EQ(p->StatExact(StatItem::kKernel),
            static_cast<int64_t>(baseline.raw()));
  co.reset();
  t.ctrl->Reap();
  EXPECT_EQ(t.ctrl->live_groups(), groups_before);
  EXPECT_EQ(p->usage(), baseline);
  po->Uncharge(Bytes(12345));
  t.Drain();
  EXPECT_EQ(p->usage(), Pages(0));
  EXPECT_TRUE(t.errors.empty()) << t.errors[0];
}

// Many threads on one shard charge one group: the try-lock fallbacks and
// the central pool race; nothing is lost (and TSan sees no data race).
TEST(ObjCgroupStressTest, ContentionOnOneGroup) {
  TestController t({}, /*nr_cpus=*/2);
  GroupRef g = t.Make("g");
  ObjCgroupRef o = g->GetObjCgroup();
  constexpr int kThreads = 8;
  std::atomic<int> running{kThreads};
  std::vector<std::thread> threads;
  threads.emplace_back([&] {  // drains race with the charges
    while (running.load() > 0) {
      t.Drain();
      std::this_thread::yield();
    }
  });
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      SetFakeCpu(w % 2);
      std::mt19937_64 rng(w);
      std::vector<uint64_t> live;
      for (int i = 0; i < 20000; ++i) {
        if (!live.empty() && rng() % 2 == 0) {
          o->Uncharge(Bytes(live.back()));
          live.pop_back();
        } else {
          live.push_back(rng() % 2 == 0 ? 4096 : 1 + rng() % 300);
          EXPECT_TRUE(o->Charge(Bytes(live.back())).ok());
        }
      }
      for (uint64_t s : live) o->Uncharge(Bytes(s));
      running.fetch_sub(1);
    });
  }
  for (auto& th : threads) th.join();
  t.Drain();
  EXPECT_EQ(g->usage(), Pages(0));
  EXPECT_EQ(o->pooled(), Bytes(0));
  EXPECT_EQ(Slab(*g), 0);
  EXPECT_EQ(g->StatExact(StatItem::kKernel), 0);
  EXPECT_TRUE(t.errors.empty());
}

}  // namespace
}  // namespace umemcg

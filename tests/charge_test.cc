// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The charge path (kernel: try_charge_memcg): limits at every level,
// retry without surplus, reclaim, draining before OOM, flags, forced
// charges and bad input.

#include <gtest/gtest.h>

#include "controller_impl.h"
#include "test_util.h"

namespace umemcg {
namespace {

using testing::PageReclaimer;
using testing::TestController;

TEST(ChargeTest, ZeroPagesAndRootChargesAreFreeSuccesses) {
  TestController t;
  GroupRef g = t.Make("g");
  EXPECT_TRUE(g->TryCharge(Pages(0)).ok());
  EXPECT_EQ(g->usage(), Pages(0));
  EXPECT_TRUE(t.ctrl->root().TryCharge(Pages(100)).ok());
  EXPECT_EQ(t.ctrl->root().usage(), Pages(0));
  t.ctrl->root().Uncharge(Pages(100));
  EXPECT_EQ(t.ctrl->underflows(), 0u);
}

TEST(ChargeTest, CountAboveCounterMaximumIsInvalid) {
  TestController t;
  GroupRef g = t.Make("g");
  ChargeResult r = g->TryCharge(Pages(kPageCounterMax.raw() + 1));
  EXPECT_EQ(r.code, StatusCode::kInvalidArgument);
  EXPECT_EQ(g->usage(), Pages(0));
}

TEST(ChargeTest, RootUsageIsSumOfChildren) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  GroupRef c = t.Make("a/c");
  ASSERT_TRUE(a->TryCharge(Pages(3)).ok());
  ASSERT_TRUE(b->TryCharge(Pages(5)).ok());
  ASSERT_TRUE(c->TryCharge(Pages(7)).ok());
  t.Drain();
  EXPECT_EQ(a->usage(), Pages(10));
  EXPECT_EQ(c->usage(), Pages(7));
  EXPECT_EQ(t.ctrl->root().usage(), Pages(15));
}

TEST(ChargeTest, BatchThatDoesNotFitIsRetriedWithoutSurplus) {
  TestController t({.batch = 64});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetMax(Pages(10)).ok());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(g->TryCharge(Pages(1), ChargeFlags::kNone).ok()) << i;
  }
  EXPECT_EQ(g->usage(), Pages(10));
  EXPECT_EQ(g->StockedPages(), Pages(0));
  // Full: a non-blocking charge fails at once, naming the group, and
  // raises no max event (the kernel raises it only when it may reclaim).
  ChargeResult r = g->TryCharge(Pages(1), ChargeFlags::kNone);
  EXPECT_EQ(r.code, StatusCode::kResourceExhausted);
  EXPECT_EQ(r.limited_by, g.get());
  EXPECT_EQ(g->events(MemoryEvent::kMax), 0u);
  EXPECT_GE(g->memory().failcnt(), 1u);
}

TEST(ChargeTest, RefusingAncestorIsReported) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  ASSERT_TRUE(p->SetMax(Pages(5)).ok());
  ChargeResult r = c->TryCharge(Pages(6), ChargeFlags::kNone);
  EXPECT_EQ(r.code, StatusCode::kResourceExhausted);
  EXPECT_EQ(r.limited_by, p.get());
  EXPECT_EQ(c->usage(), Pages(0));
}

TEST(ChargeTest, StockOnOtherCpusIsDrainedBeforeFailing) {
  TestController t({.batch = 32}, /*nr_cpus=*/4);
  GroupRef p = t.Make("p");
  GroupRef a = t.Make("p/a");
  GroupRef b = t.Make("p/b");
  ASSERT_TRUE(p->SetMax(Pages(100)).ok());
  // Three CPUs each cache 31 pages for a: 96 charged, 3 used.
  for (int cpu = 1; cpu <= 3; ++cpu) {
    SetFakeCpu(cpu);
    ASSERT_TRUE(a->TryCharge(Pages(1)).ok());
  }
  SetFakeCpu(0);
  EXPECT_EQ(p->usage(), Pages(96));
  // b needs 10: only fits after the stocks are drained.
  ChargeResult r = b->TryCharge(Pages(10), kChargeDefault);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.forced);
  EXPECT_EQ(a->StockedPages(), Pages(0));
  t.Drain();
  EXPECT_EQ(p->usage(), Pages(13));
  // The attempt that hit the limit raised max on p.
  EXPECT_GE(p->events(MemoryEvent::kMax), 1u);
}

TEST(ChargeTest, NonBlockingChargeDoesNotDrainRemoteStocks) {
  TestController t({.batch = 32}, 4);
  GroupRef p = t.Make("p");
  GroupRef a = t.Make("p/a");
  GroupRef b = t.Make("p/b");
  ASSERT_TRUE(p->SetMax(Pages(40)).ok());
  SetFakeCpu(1);
  ASSERT_TRUE(a->TryCharge(Pages(1)).ok());  // 32 charged
  SetFakeCpu(0);
  EXPECT_EQ(b->TryCharge(Pages(10), ChargeFlags::kNone).code,
            StatusCode::kResourceExhausted);
  EXPECT_EQ(a->StockedPages(), Pages(31));
}

TEST(ChargeTest, ReclaimMakesRoom) {
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetMax(Pages(100)).ok());
  PageReclaimer cache(g.get());
  ASSERT_TRUE(g->AddReclaimer(&cache).ok());
  ASSERT_TRUE(cache.Fill(Pages(100), ChargeFlags::kNone));
  ChargeResult r = g->TryCharge(Pages(5));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.forced);
  EXPECT_GE(cache.calls(), 1);
  // At least SWAP_CLUSTER_MAX pages are asked for per reclaim.
  EXPECT_EQ(cache.held(), 100u - 32u);
  t.Drain();
  EXPECT_EQ(g->usage(), Pages(100 - 32 + 5));
  EXPECT_EQ(g->events(MemoryEvent::kMax), 1u);
  ASSERT_TRUE(g->RemoveReclaimer(&cache).ok());
  cache.Release();
  g->Uncharge(Pages(5));
}

TEST(ChargeTest, NoRetryGivesUpAfterOneReclaimAndDrain) {
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetMax(Pages(4)).ok());
  ASSERT_TRUE(g->TryCharge(Pages(4), ChargeFlags::kNone).ok());
  ChargeResult r =
      g->TryCharge(Pages(1), ChargeFlags::kMayReclaim | ChargeFlags::kNoRetry);
  EXPECT_EQ(r.code, StatusCode::kResourceExhausted);
  // One attempt before the drain, one after.
  EXPECT_EQ(g->events(MemoryEvent::kMax), 2u);
}

TEST(ChargeTest, RetriesThenOomThenFail) {
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetMax(Pages(4)).ok());
  ASSERT_TRUE(g->TryCharge(Pages(4), ChargeFlags::kNone).ok());
  ChargeResult r = g->TryCharge(Pages(1));
  EXPECT_EQ(r.code, StatusCode::kResourceExhausted);
  // 1 + drain retry + 16 retries, each raising max.
  EXPECT_EQ(g->events(MemoryEvent::kMax), 18u);
  EXPECT_EQ(g->events(MemoryEvent::kOom), 1u);
  // retry_mayfail: no OOM.
  r = g->TryCharge(Pages(1), kChargeDefault | ChargeFlags::kRetryMayFail);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(g->events(MemoryEvent::kOom), 1u);
  // Costly (> 8 pages) charges never invoke OOM.
  r = g->TryCharge(Pages(9));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(g->events(MemoryEvent::kOom), 1u);
}

TEST(ChargeTest, NoFailAndHighForcePastMax) {
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetMax(Pages(4)).ok());
  ASSERT_TRUE(g->TryCharge(Pages(4), ChargeFlags::kNone).ok());
  ChargeResult r = g->TryCharge(Pages(2), kChargeAtomic);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.forced);
  EXPECT_EQ(r.limited_by, g.get());
  EXPECT_EQ(g->usage(), Pages(6));
  EXPECT_EQ(g->events(MemoryEvent::kMax), 1u);  // raised when forced
  r = g->TryCharge(Pages(1), kChargeDefault | ChargeFlags::kNoFail);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.forced);
  EXPECT_EQ(g->usage(), Pages(7));
  g->UnchargeDirect(Pages(7));
}

// A reclaimer that charges from inside reclaim (as PF_MEMALLOC context):
// the nested charge is forced instead of recursing.
class ChargingReclaimer : public Reclaimer {
 public:
  explicit ChargingReclaimer(Group* g) : g_(g) {}
  Pages Reclaimable() override { return Pages(1); }
  Pages Reclaim(Pages) override {
    ++calls_;
    nested_ = g_->TryCharge(Pages(1));
    nested_create_ = g_->controller().CreateGroup(*g_, "x").status().code();
    nested_set_max_ = g_->SetMax(Pages(1)).code();
    return Pages(0);
  }
  ChargeResult nested_;
  StatusCode nested_create_ = StatusCode::kOk;
  StatusCode nested_set_max_ = StatusCode::kOk;
  uint64_t calls_ = 0;

 private:
  Group* g_;
};

TEST(ChargeTest, ChargesFromReclaimersAreForcedAndTreeChangesRefused) {
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetMax(Pages(2)).ok());
  ASSERT_TRUE(g->TryCharge(Pages(2), ChargeFlags::kNone).ok());
  ChargingReclaimer r(g.get());
  ASSERT_TRUE(g->AddReclaimer(&r).ok());
  ChargeResult res =
      g->TryCharge(Pages(1), kChargeDefault | ChargeFlags::kNoRetry);
  EXPECT_FALSE(res.ok());
  EXPECT_TRUE(r.nested_.ok());
  EXPECT_TRUE(r.nested_.forced);
  EXPECT_EQ(r.nested_create_, StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.nested_set_max_, StatusCode::kFailedPrecondition);
  ASSERT_TRUE(g->RemoveReclaimer(&r).ok());
  t.Drain();
  EXPECT_GE(r.calls_, 1u);
  EXPECT_EQ(g->usage(), Pages(2 + r.calls_));  // each call forced 1 page
  g->UnchargeDirect(g->usage());
}

TEST(ChargeTest, SetMaxReclaimsDownToTheNewLimit) {
  TestController t;
  GroupRef g = t.Make("g");
  PageReclaimer cache(g.get());
  ASSERT_TRUE(g->AddReclaimer(&cache).ok());
  ASSERT_TRUE(cache.Fill(Pages(200)));
  ASSERT_TRUE(g->SetMax(Pages(50)).ok());
  EXPECT_LE(g->usage(), Pages(50));
  EXPECT_EQ(g->memory().max(), Pages(50));
  ASSERT_TRUE(g->RemoveReclaimer(&cache).ok());
  cache.Release();
}

TEST(ChargeTest, SetMaxBelowUnreclaimableUsageStillSucceeds) {
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->TryCharge(Pages(20)).ok());
  ASSERT_TRUE(g->SetMax(Pages(5)).ok());  // the kernel's write succeeds
  EXPECT_EQ(g->usage(), Pages(20));       // drained, nothing reclaimable
  EXPECT_EQ(g->events(MemoryEvent::kOom), 1u);
  EXPECT_EQ(g->TryCharge(Pages(1), ChargeFlags::kNone).code,
            StatusCode::kResourceExhausted);
  g->Uncharge(Pages(20));
}

TEST(ChargeTest, RootHasNoLimits) {
  TestController t;
  EXPECT_EQ(t.ctrl->root().SetMax(Pages(1)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(t.ctrl->root().SetMin(Pages(1)).code(),
            StatusCode::kInvalidArgument);
}

TEST(ChargeTest, MaxAboveCounterMaximumMeansUnlimited) {
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetMax(Pages(UINT64_MAX)).ok());
  EXPECT_EQ(g->memory().max(), kPageCounterMax);
}

// A charge fails first at the group's own max and, after the group's
// stocks are drained, at an ancestor's max because a sibling's stock fills
// the ancestor. The charge path must drain the ancestor's subtree too
// before failing: the header promises that stock never causes a failure
// that draining would avoid. (Found by RandomOperationsMatchTheModel.)
TEST(StockDrainRegressionTest, EveryLimitingLevelIsDrainedBeforeFailing) {
  ControllerOptions options;
  options.batch = 8;
  options.cpu_source = CpuSource::kFake;
  options.nr_cpus = 4;
  options.charge_group_metadata = false;  // exact page counts
  auto ctrl = Controller::Create(std::move(options)).value();
  GroupRef a = ctrl->CreateGroup(ctrl->root(), "a").value();
  GroupRef g = ctrl->CreateGroup(*a, "g").value();
  GroupRef h = ctrl->CreateGroup(*a, "h").value();
  ASSERT_TRUE(a->SetMax(Pages(15)).ok());
  ASSERT_TRUE(g->SetMax(Pages(12)).ok());
  SetFakeCpu(0);
  // g: 5 used + 3 in CPU 0's stock.
  ASSERT_TRUE(g->TryCharge(Pages(5), ChargeFlags::kNone).ok());
  // h: the batch does not fit under a, so exactly 5; then 2 returned to
  // CPU 0's stock.
  ASSERT_TRUE(h->TryCharge(Pages(5), ChargeFlags::kNone).ok());
  h->Uncharge(Pages(2));
  ASSERT_EQ(a->usage(), Pages(13));  // 8 used + 5 stocked
  // On CPU 1, 6 more for g: g would be at 11 <= 12 and a at 14 <= 15 once
  // the stocks are returned.
  SetFakeCpu(1);
  ChargeResult r = g->TryCharge(Pages(6), kChargeDefault);
  SetFakeCpu(0);
  EXPECT_TRUE(r.ok()) << StatusCodeName(r.code) << " limited by "
                      << (r.limited_by ? r.limited_by->path() : "-");
  EXPECT_FALSE(r.forced);
  ctrl->DrainAllStocks(ctrl->root());
  if (r.ok()) {
    EXPECT_EQ(g->usage(), Pages(11));
    EXPECT_EQ(a->usage(), Pages(14));
    g->Uncharge(Pages(6));
  }
  g->Uncharge(Pages(5));
  h->Uncharge(Pages(3));
  ctrl->DrainAllStocks(ctrl->root());
  EXPECT_EQ(ctrl->root().usage(), Pages(0));
  EXPECT_EQ(ctrl->underflows(), 0u);
}

TEST(ChargeTest, ChargesCanMoveAPageStatisticOfTheCallersChoice) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  ASSERT_TRUE(c->TryCharge(Pages(5), kChargeDefault, StatItem::kSock).ok());
  c->Uncharge(Pages(2), StatItem::kSock);
  EXPECT_EQ(c->StatExact(StatItem::kSock), 3);
  EXPECT_EQ(p->StatExact(StatItem::kSock), 3);
  // Not a page item: refused, nothing charged.
  EXPECT_EQ(c->TryCharge(Pages(1), kChargeDefault, StatItem::kPgfault).code,
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(c->SetMax(Pages(0)).ok());  // refused charges move nothing
  EXPECT_FALSE(
      c->TryCharge(Pages(1), ChargeFlags::kNone, StatItem::kSock).ok());
  EXPECT_EQ(c->StatExact(StatItem::kSock), 3);
  // After removal the -n lands on the nearest online ancestor.
  ASSERT_TRUE(t.ctrl->RemoveGroup(*c).ok());
  c->UnchargeDirect(Pages(3), StatItem::kSock);
  EXPECT_EQ(p->StatExact(StatItem::kSock), 0);
  EXPECT_EQ(c->usage(), Pages(0));
}

}  // namespace
}  // namespace umemcg

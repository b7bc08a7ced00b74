// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The per-CPU charge stock, observed through Group (consume/refill/drain,
// E4/E5 multi-slot semantics, reference counting of cached groups).

#include "charge_stock.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace umemcg {
namespace {

using testing::TestController;

TEST(ChargeStockTest, FirstChargeChargesABatchAndCachesTheRest) {
  TestController t({.batch = 64});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->TryCharge(Pages(1)).ok());
  EXPECT_EQ(g->usage(), Pages(64));
  EXPECT_EQ(g->StockedPages(), Pages(63));
  EXPECT_EQ(t.ctrl->root().usage(), Pages(64));
  // The next 63 single-page charges hit the stock.
  for (int i = 0; i < 63; ++i) ASSERT_TRUE(g->TryCharge(Pages(1)).ok());
  EXPECT_EQ(g->usage(), Pages(64));
  EXPECT_EQ(g->StockedPages(), Pages(0));
  ASSERT_TRUE(g->TryCharge(Pages(1)).ok());
  EXPECT_EQ(g->usage(), Pages(128));
}

TEST(ChargeStockTest, ConsumeIsPerCpu) {
  TestController t({.batch = 32});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->TryCharge(Pages(1)).ok());  // CPU 0: 31 stocked
  SetFakeCpu(1);
  ASSERT_TRUE(g->TryCharge(Pages(1)).ok());  // CPU 1 misses: new batch
  EXPECT_EQ(g->usage(), Pages(64));
  EXPECT_EQ(g->StockedPages(), Pages(62));
  SetFakeCpu(0);
}

TEST(ChargeStockTest, NoPartialConsumption) {
  TestController t({.batch = 64});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->TryCharge(Pages(60)).ok());  // stock: 4
  ASSERT_TRUE(g->TryCharge(Pages(5)).ok());   // 5 > 4: new batch of 64
  EXPECT_EQ(g->usage(), Pages(128));
  EXPECT_EQ(g->StockedPages(), Pages(4 + 59));
}

TEST(ChargeStockTest, ChargesLargerThanBatchBypassTheStock) {
  TestController t({.batch = 16});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->TryCharge(Pages(100)).ok());
  EXPECT_EQ(g->usage(), Pages(100));
  EXPECT_EQ(g->StockedPages(), Pages(0));
  g->Uncharge(Pages(100));  // > batch: directly
  EXPECT_EQ(g->usage(), Pages(0));
}

TEST(ChargeStockTest, UnchargeRefillsAndOverflowReturnsPages) {
  TestController t({.batch = 8});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->TryCharge(Pages(8)).ok());  // n == batch: no surplus
  ASSERT_TRUE(g->TryCharge(Pages(8)).ok());
  EXPECT_EQ(g->StockedPages(), Pages(0));
  EXPECT_EQ(g->usage(), Pages(16));
  g->Uncharge(Pages(5));
  EXPECT_EQ(g->usage(), Pages(16));  // still charged, in the stock
  EXPECT_EQ(g->StockedPages(), Pages(5));
  g->Uncharge(Pages(3));  // 8: not over batch yet
  EXPECT_EQ(g->StockedPages(), Pages(8));
  g->Uncharge(Pages(8));  // 16 > 8: the slot returns its pages
  EXPECT_EQ(g->StockedPages(), Pages(0));
  EXPECT_EQ(g->usage(), Pages(0));
  // The slot stays installed (no reference churn): next refill reuses it.
  ASSERT_TRUE(g->TryCharge(Pages(1)).ok());
  EXPECT_EQ(g->StockedPages(), Pages(7));
  EXPECT_EQ(t.errors.size(), 0u);
}

TEST(ChargeStockTest, SlotsHoldSeveralGroupsAndEvictRoundRobin) {
  TestController t({.batch = 4, .stock_slots = 2});
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  GroupRef c = t.Make("c");
  ASSERT_TRUE(a->TryCharge(Pages(1)).ok());  // slot 0: a(3)
  ASSERT_TRUE(b->TryCharge(Pages(1)).ok());  // slot 1: b(3)
  EXPECT_EQ(a->StockedPages(), Pages(3));
  EXPECT_EQ(b->StockedPages(), Pages(3));
  ASSERT_TRUE(c->TryCharge(Pages(1)).ok());  // evicts slot 0 (a)
  EXPECT_EQ(a->StockedPages(), Pages(0));
  EXPECT_EQ(a->usage(), Pages(1));  // a's 3 stocked pages went back
  EXPECT_EQ(b->StockedPages(), Pages(3));
  EXPECT_EQ(c->StockedPages(), Pages(3));
  ASSERT_TRUE(a->TryCharge(Pages(1)).ok());  // evicts slot 1 (b)
  EXPECT_EQ(b->StockedPages(), Pages(0));
  EXPECT_EQ(c->StockedPages(), Pages(3));
}

TEST(ChargeStockTest, SingleSlotReproducesTheOlderKernel) {
  TestController t({.batch = 4, .stock_slots = 1});
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  ASSERT_TRUE(a->TryCharge(Pages(1)).ok());
  ASSERT_TRUE(b->TryCharge(Pages(1)).ok());
  EXPECT_EQ(a->StockedPages(), Pages(0));
  EXPECT_EQ(b->StockedPages(), Pages(3));
}

TEST(ChargeStockTest, DrainAllReturnsOnlyTheSubtree) {
  TestController t({.batch = 16});
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  GroupRef other = t.Make("other");
  for (int cpu = 0; cpu < 4; ++cpu) {
    SetFakeCpu(cpu);
    ASSERT_TRUE(c->TryCharge(Pages(1)).ok());
    ASSERT_TRUE(other->TryCharge(Pages(1)).ok());
  }
  SetFakeCpu(0);
  EXPECT_EQ(c->StockedPages(), Pages(60));
  EXPECT_LE(c->StockedPages(), c->StockSlackBound());
  EXPECT_EQ(c->StockSlackBound(), Pages(4 * 16));
  t.ctrl->DrainAllStocks(*p);
  EXPECT_EQ(c->StockedPages(), Pages(0));
  EXPECT_EQ(c->usage(), Pages(4));
  EXPECT_EQ(p->usage(), Pages(4));
  EXPECT_EQ(other->StockedPages(), Pages(60));
}

TEST(ChargeStockTest, StockHoldsAReferenceUntilDrained) {
  TestController t({.batch = 16});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->TryCharge(Pages(1)).ok());
  g->UnchargeDirect(Pages(1));
  const int64_t live = t.ctrl->live_groups();
  ASSERT_TRUE(t.ctrl->RemoveGroup(*g).ok());  // drains: ref dropped
  EXPECT_EQ(t.ctrl->root().usage(), Pages(0));
  g.reset();
  t.ctrl->Reap();
  EXPECT_EQ(t.ctrl->live_groups(), live - 1);
}

TEST(ChargeStockTest, RefillForOfflineGroupGoesDirect) {
  TestController t({.batch = 16});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->TryCharge(Pages(4), ChargeFlags::kNone).ok());
  ASSERT_TRUE(t.ctrl->RemoveGroup(*g).ok());
  EXPECT_EQ(g->usage(), Pages(4));  // zombie keeps its charges
  g->Uncharge(Pages(4));            // allowed after removal
  EXPECT_EQ(g->usage(), Pages(0));
  EXPECT_EQ(g->StockedPages(), Pages(0));
  EXPECT_EQ(t.ctrl->root().usage(), Pages(0));
}

}  // namespace
}  // namespace umemcg

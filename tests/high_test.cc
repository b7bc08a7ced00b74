// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// memory.high: detection, reclaim_high, and the throttling penalty
// (kernel: calculate_overage, calculate_high_delay, handle_over_high).

#include <gtest/gtest.h>

#include "controller_impl.h"
#include "test_util.h"

namespace umemcg {
namespace {

using internal::CalculateOverage;
using internal::HighDelayMs;
using testing::MiB;
using testing::PageReclaimer;
using testing::TestController;

uint64_t PenaltyMs(uint64_t usage_pages, uint64_t high_pages, uint64_t n,
                   uint64_t batch) {
  return std::min<uint64_t>(
      HighDelayMs(CalculateOverage(usage_pages, high_pages), n, batch), 2000);
}

// The table in the kernel's comment above MEMCG_DELAY_PRECISION_SHIFT
// (mm/memcontrol.c): high = 100 MiB, n = batch.
TEST(HighTest, PenaltyReproducesTheReferenceTable) {
  const uint64_t expected_ms[] = {6,    25,   57,   102,  159,  230,
                                  313,  409,  518,  639,  774,  921,
                                  1081, 1254, 1439, 1638, 1849, 2000};
  for (int i = 0; i < 18; ++i) {
    const uint64_t usage = MiB(101 + i).raw();
    EXPECT_EQ(PenaltyMs(usage, MiB(100).raw(), 64, 64), expected_ms[i])
        << (101 + i) << "M";
  }
  EXPECT_EQ(PenaltyMs(MiB(200).raw(), MiB(100).raw(), 64, 64), 2000u);
}

TEST(HighTest, PenaltyScalesWithPagesChargedOverBatch) {
  const uint64_t one =
      HighDelayMs(CalculateOverage(MiB(110).raw(), MiB(100).raw()), 64, 64);
  const uint64_t two =
      HighDelayMs(CalculateOverage(MiB(110).raw(), MiB(100).raw()), 128, 64);
  EXPECT_EQ(two, 2 * one);
  // Batch 32 doubles the per-page penalty (the kernel's constant moved).
  EXPECT_EQ(
      HighDelayMs(CalculateOverage(MiB(110).raw(), MiB(100).raw()), 64, 32),
      2 * one);
}

TEST(HighTest, PenaltySaturatesInsteadOfWrapping) {
  // Usage far beyond high (the kernel's 64-bit product wraps past ~130x).
  for (uint64_t factor : {100ull, 131ull, 1000ull, 1ull << 20}) {
    const uint64_t ov = CalculateOverage(factor * 25600, 25600);
    EXPECT_GE(HighDelayMs(ov, 64, 64), 2000u) << factor;
  }
  EXPECT_EQ(HighDelayMs(CalculateOverage(kPageCounterMax.raw(), 0), 64, 64),
            UINT64_MAX);
  EXPECT_EQ(CalculateOverage(10, 10), 0u);
  EXPECT_EQ(CalculateOverage(9, 10), 0u);
}

TEST(HighTest, ChargingOverHighIsNeverRefused) {
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetHigh(Pages(10)).ok());
  ChargeResult r = g->TryCharge(Pages(100), ChargeFlags::kNone);
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.forced);
  g->UnchargeDirect(Pages(100));
}

TEST(HighTest, ThrottleSleepsThroughTheInjectedClock) {
  TestController t({.batch = 64});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetHigh(MiB(100)).ok());
  // Get to 110 MiB without throttling (non-blocking charges record the
  // overage but never sleep), then drop the pending overage.
  ASSERT_TRUE(g->TryCharge(MiB(110), ChargeFlags::kNone).ok());
  EXPECT_EQ(g->HandleOverHigh(ChargeFlags::kNoThrottle).count(),
            static_cast<int64_t>(
                PenaltyMs(MiB(110).raw(), MiB(100).raw(), MiB(110).raw(), 64)));
  EXPECT_EQ(t.clock.sleeps(), 0u);
  // Two batch charges: the second pushes the pending overage past one
  // batch, so the charge reclaims (nothing) and sleeps.
  ASSERT_TRUE(g->TryCharge(Pages(64)).ok());
  EXPECT_EQ(t.clock.sleeps(), 0u);
  ASSERT_TRUE(g->TryCharge(Pages(64)).ok());
  EXPECT_EQ(t.clock.sleeps(), 1u);
  const uint64_t usage = MiB(110).raw() + 128;
  EXPECT_EQ(
      static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(t.clock.slept())
              .count()),
      PenaltyMs(usage, MiB(100).raw(), 128, 64));
  EXPECT_GE(g->events(MemoryEvent::kHigh), 1u);
  g->UnchargeDirect(g->usage());
}

TEST(HighTest, NoThrottleReturnsThePenaltyInstead) {
  TestController t({.batch = 64});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetHigh(MiB(100)).ok());
  ASSERT_TRUE(g->TryCharge(MiB(110), ChargeFlags::kNone).ok());
  (void)g->HandleOverHigh(ChargeFlags::kNoThrottle);
  const ChargeFlags flags = kChargeDefault | ChargeFlags::kNoThrottle;
  ASSERT_TRUE(g->TryCharge(Pages(64), flags).ok());
  ChargeResult r = g->TryCharge(Pages(64), flags);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(static_cast<uint64_t>(r.throttle.count()),
            PenaltyMs(MiB(110).raw() + 128, MiB(100).raw(), 128, 64));
  EXPECT_EQ(t.clock.sleeps(), 0u);
  g->UnchargeDirect(g->usage());
}

// A reclaimer that runs the thread's pending memory.high handling: it used
// to reclaim from inside the reclaim walk (the tree lock taken twice on one
// thread, the reclaimers re-entered). Now it waits for a later call.
TEST(HighTest, HandleOverHighFromAReclaimerWaits) {
  // No high work: the worker thread would run this reclaimer too.
  TestController t({.batch = 64, .high_work = HighWorkMode::kNone});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetHigh(MiB(100)).ok());
  struct Nested : Reclaimer {
    Group* g;
    int depth = 0, max_depth = 0;
    int64_t inner_penalty = -1;
    Pages Reclaimable() override { return Pages(1); }
    Pages Reclaim(Pages) override {
      max_depth = std::max(max_depth, ++depth);
      inner_penalty = g->HandleOverHigh(ChargeFlags::kNoThrottle).count();
      --depth;
      return Pages(0);
    }
  } nested;
  nested.g = g.get();
  ASSERT_TRUE(g->AddReclaimer(&nested).ok());
  // 110 MiB without throttling leaves this thread's overage pending.
  ASSERT_TRUE(g->TryCharge(MiB(110), ChargeFlags::kNone).ok());
  (void)g->Reclaim(Pages(1));
  EXPECT_EQ(nested.max_depth, 1);
  EXPECT_EQ(nested.inner_penalty, 0);
  // Still pending, handled outside the walk.
  EXPECT_GT(g->HandleOverHigh(ChargeFlags::kNoThrottle).count(), 0);
  ASSERT_TRUE(g->RemoveReclaimer(&nested).ok());
  g->UnchargeDirect(g->usage());
}

TEST(HighTest, SmallOverageIsForgiven) {
  TestController t({.batch = 64});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetHigh(MiB(100)).ok());
  ASSERT_TRUE(g->TryCharge(MiB(100), ChargeFlags::kNone).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(g->TryCharge(Pages(64)).ok());
  // 100.5 MiB with 128 pages pending: 2 ms owed, forgiven.
  EXPECT_EQ(t.clock.sleeps(), 0u);
  g->UnchargeDirect(g->usage());
}

TEST(HighTest, ReclaimHighBringsUsageDownWithoutSleeping) {
  // No high work: this is about the blocking charge's own reclaim (the
  // worker would reclaim after the non-blocking charge; high_work_test).
  TestController t({.batch = 64, .high_work = HighWorkMode::kNone});
  GroupRef g = t.Make("g");
  PageReclaimer cache(g.get());
  ASSERT_TRUE(g->AddReclaimer(&cache).ok());
  ASSERT_TRUE(g->SetHigh(MiB(100)).ok());
  ASSERT_TRUE(cache.Fill(MiB(100), ChargeFlags::kNone));  // at high
  // 10 MiB over high, recorded as pending overage (non-blocking charge).
  ASSERT_TRUE(g->TryCharge(MiB(10), ChargeFlags::kNone).ok());
  EXPECT_EQ(t.clock.sleeps(), 0u);
  // The next blocking charge handles the overage: reclaim_high asks the
  // cache for the pending pages, usage returns to high, nothing is owed.
  ChargeResult r = g->TryCharge(Pages(64));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(t.clock.sleeps(), 0u);
  EXPECT_LE(g->usage(), MiB(100));
  EXPECT_EQ(cache.held(), MiB(90).raw() - 64);
  EXPECT_EQ(g->events(MemoryEvent::kHigh), 1u);
  ASSERT_TRUE(g->RemoveReclaimer(&cache).ok());
  cache.Release();
  g->UnchargeDirect(MiB(10) + Pages(64));
  EXPECT_EQ(g->usage(), Pages(0));
}

TEST(HighTest, AncestorOverHighThrottlesDescendants) {
  TestController t({.batch = 64});
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  ASSERT_TRUE(p->SetHigh(MiB(10)).ok());
  ASSERT_TRUE(c->TryCharge(MiB(12), ChargeFlags::kNone).ok());
  (void)c->HandleOverHigh(ChargeFlags::kNoThrottle);
  ASSERT_TRUE(c->TryCharge(Pages(64)).ok());
  ASSERT_TRUE(c->TryCharge(Pages(64)).ok());
  EXPECT_EQ(t.clock.sleeps(), 1u);
  EXPECT_GE(p->events(MemoryEvent::kHigh), 1u);
  EXPECT_EQ(c->events_local(MemoryEvent::kHigh), 0u);
  c->UnchargeDirect(c->usage());
}

TEST(HighTest, SetHighReclaimsTowardTheLimit) {
  TestController t;
  GroupRef g = t.Make("g");
  PageReclaimer cache(g.get());
  ASSERT_TRUE(g->AddReclaimer(&cache).ok());
  ASSERT_TRUE(cache.Fill(Pages(300)));
  ASSERT_TRUE(g->SetHigh(Pages(100)).ok());
  EXPECT_LE(g->usage(), Pages(100));
  ASSERT_TRUE(g->RemoveReclaimer(&cache).ok());
  cache.Release();
}

}  // namespace
}  // namespace umemcg

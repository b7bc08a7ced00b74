// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "umemcg/page_counter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace umemcg {
namespace {

struct Chain {
  PageCounter root{nullptr};
  PageCounter mid{&root};
  PageCounter leaf{&mid};
};

TEST(PageCounterTest, ChargeAddsAtEveryLevel) {
  Chain c;
  c.leaf.Charge(Pages(5));
  EXPECT_EQ(c.leaf.usage(), Pages(5));
  EXPECT_EQ(c.mid.usage(), Pages(5));
  EXPECT_EQ(c.root.usage(), Pages(5));
  EXPECT_TRUE(c.leaf.Uncharge(Pages(5)));
  EXPECT_EQ(c.root.usage(), Pages(0));
}

TEST(PageCounterTest, DefaultsAreUnlimited) {
  PageCounter pc(nullptr);
  EXPECT_EQ(pc.max(), kPageCounterMax);
  EXPECT_EQ(pc.high(), kPageCounterMax);
  EXPECT_EQ(pc.min(), Pages(0));
  EXPECT_EQ(pc.low(), Pages(0));
  EXPECT_EQ(kPageCounterMax.raw(), 2251799813685247u);
}

TEST(PageCounterTest, TryChargeAllowsUsageEqualToMax) {
  Chain c;
  ASSERT_TRUE(c.mid.SetMax(Pages(10)).ok());
  PageCounter* fail = nullptr;
  EXPECT_TRUE(c.leaf.TryCharge(Pages(10), &fail));
  EXPECT_EQ(fail, nullptr);
  EXPECT_FALSE(c.leaf.TryCharge(Pages(1), &fail));
  EXPECT_EQ(fail, &c.mid);
}

TEST(PageCounterTest, TryChargeFailsAtFirstAncestorOverMaxAndRollsBack) {
  Chain c;
  ASSERT_TRUE(c.root.SetMax(Pages(5)).ok());
  ASSERT_TRUE(c.mid.SetMax(Pages(8)).ok());
  PageCounter* fail = nullptr;
  // Fits mid (8) but not root (5): the refusing level is root.
  EXPECT_FALSE(c.leaf.TryCharge(Pages(6), &fail));
  EXPECT_EQ(fail, &c.root);
  EXPECT_EQ(c.leaf.usage(), Pages(0));
  EXPECT_EQ(c.mid.usage(), Pages(0));
  EXPECT_EQ(c.root.usage(), Pages(0));
  EXPECT_EQ(c.root.failcnt(), 1u);
  EXPECT_EQ(c.mid.failcnt(), 0u);
  // Over both: the closest level (mid) refuses.
  EXPECT_FALSE(c.leaf.TryCharge(Pages(9), &fail));
  EXPECT_EQ(fail, &c.mid);
}

TEST(PageCounterTest, ForcedChargeIgnoresMax) {
  Chain c;
  ASSERT_TRUE(c.leaf.SetMax(Pages(1)).ok());
  c.leaf.Charge(Pages(3));
  EXPECT_EQ(c.leaf.usage(), Pages(3));
  EXPECT_EQ(c.leaf.margin(), Pages(0));
}

TEST(PageCounterTest, UnderflowClampsToZeroAndIsCounted) {
#if UMEMCG_DCHECK_IS_ON
  GTEST_SKIP() << "debug builds abort on underflow by design";
#endif
  Chain c;
  c.leaf.Charge(Pages(2));
  EXPECT_FALSE(c.leaf.Uncharge(Pages(5)));
  EXPECT_EQ(c.leaf.usage(), Pages(0));
  EXPECT_EQ(c.root.usage(), Pages(0));
  EXPECT_EQ(c.leaf.underflows(), 1u);
  EXPECT_EQ(c.root.underflows(), 1u);
  // Still usable afterwards.
  c.leaf.Charge(Pages(1));
  EXPECT_EQ(c.root.usage(), Pages(1));
}

// More than any counter holds (a negative count cast to Pages): an
// underflow, not a negative delta that raised the usage by one page.
TEST(PageCounterTest, HugeUnchargeUnderflowsInsteadOfRaisingUsage) {
#if UMEMCG_DCHECK_IS_ON
  GTEST_SKIP() << "debug builds abort on underflow by design";
#endif
  Chain c;
  c.leaf.Charge(Pages(2));
  EXPECT_FALSE(c.leaf.Uncharge(Pages(UINT64_MAX)));
  EXPECT_EQ(c.leaf.usage(), Pages(0));
  EXPECT_EQ(c.root.usage(), Pages(0));
  EXPECT_EQ(c.leaf.underflows(), 1u);
  c.leaf.Charge(Pages(2));
  EXPECT_FALSE(c.leaf.Cancel(Pages(UINT64_MAX - 1)));
  EXPECT_EQ(c.leaf.usage(), Pages(0));
  EXPECT_EQ(c.leaf.underflows(), 2u);
  c.root.Uncharge(c.root.usage());
}

TEST(PageCounterTest, SetMaxBelowUsageIsBusy) {
  PageCounter pc(nullptr);
  pc.Charge(Pages(10));
  Status s = pc.SetMax(Pages(9));
  EXPECT_EQ(s.code(), StatusCode::kBusy);
  EXPECT_EQ(pc.max(), kPageCounterMax);
  EXPECT_TRUE(pc.SetMax(Pages(10)).ok());
  EXPECT_EQ(pc.max(), Pages(10));
}

TEST(PageCounterTest, ExchangeMaxSetsUnconditionally) {
  PageCounter pc(nullptr);
  pc.Charge(Pages(10));
  EXPECT_EQ(pc.ExchangeMax(Pages(3)), kPageCounterMax);
  EXPECT_EQ(pc.max(), Pages(3));
  // Values above the counter maximum are clamped.
  pc.ExchangeMax(Pages(UINT64_MAX));
  EXPECT_EQ(pc.max(), kPageCounterMax);
}

TEST(PageCounterTest, WatermarksTrackPeaksAndReset) {
  PageCounter pc(nullptr);
  pc.Charge(Pages(7));
  EXPECT_TRUE(pc.Uncharge(Pages(5)));
  EXPECT_EQ(pc.watermark(), Pages(7));
  EXPECT_EQ(pc.local_watermark(), Pages(7));
  pc.ResetLocalWatermark();
  EXPECT_EQ(pc.local_watermark(), Pages(2));
  EXPECT_EQ(pc.watermark(), Pages(7));
  pc.Charge(Pages(1));
  EXPECT_EQ(pc.local_watermark(), Pages(3));
  pc.ResetWatermark();
  EXPECT_EQ(pc.watermark(), Pages(3));
}

TEST(PageCounterTest, ProtectedUsagePropagatesToParent) {
  Chain c;
  c.mid.SetMin(Pages(10));
  c.mid.SetLow(Pages(20));
  c.leaf.Charge(Pages(15));
  // mid's protected usage = min(usage, setting).
  EXPECT_EQ(c.mid.min_usage(), Pages(10));
  EXPECT_EQ(c.mid.low_usage(), Pages(15));
  EXPECT_EQ(c.root.children_min_usage(), Pages(10));
  EXPECT_EQ(c.root.children_low_usage(), Pages(15));
  EXPECT_TRUE(c.leaf.Uncharge(Pages(12)));
  EXPECT_EQ(c.root.children_min_usage(), Pages(3));
  EXPECT_EQ(c.root.children_low_usage(), Pages(3));
  // Lowering the setting re-propagates at once.
  c.mid.SetMin(Pages(1));
  EXPECT_EQ(c.root.children_min_usage(), Pages(1));
}

TEST(PageCounterTest, ProtectionSupportOffSkipsPropagation) {
  PageCounter root(nullptr);
  PageCounter child(&root, /*protection_support=*/false);
  child.SetMin(Pages(10));
  child.Charge(Pages(5));
  EXPECT_EQ(root.children_min_usage(), Pages(0));
}

// Effective protection (kernel: effective_protection), hand-computed.
TEST(PageCounterTest, EffectiveProtectionFirstLevelGetsDeclaredValue) {
  PageCounter root(nullptr);
  PageCounter a(&root);
  a.SetMin(Pages(100));
  a.SetLow(Pages(200));
  a.Charge(Pages(50));
  PageCounter::CalculateProtection(&root, &a, false);
  EXPECT_EQ(a.emin(), Pages(100));
  EXPECT_EQ(a.elow(), Pages(200));
}

TEST(PageCounterTest, EffectiveProtectionOvercommitSplitsByUsedProtection) {
  PageCounter root(nullptr);
  PageCounter p(&root);
  PageCounter c1(&p);
  PageCounter c2(&p);
  p.SetMin(Pages(100));
  c1.SetMin(Pages(150));  // claims more than the parent has
  c2.SetMin(Pages(50));
  c1.Charge(Pages(120));  // protected 120
  c2.Charge(Pages(80));   // protected 50
  PageCounter::CalculateProtection(&root, &p, false);
  PageCounter::CalculateProtection(&root, &c1, false);
  PageCounter::CalculateProtection(&root, &c2, false);
  EXPECT_EQ(p.emin(), Pages(100));
  // siblings_protected = 170 > parent emin 100 -> 120*100/170, 50*100/170.
  EXPECT_EQ(c1.emin(), Pages(120 * 100 / 170));
  EXPECT_EQ(c2.emin(), Pages(50 * 100 / 170));
}

TEST(PageCounterTest, EffectiveProtectionRecursiveDistributesUnclaimed) {
  PageCounter root(nullptr);
  PageCounter p(&root);
  PageCounter c1(&p);
  PageCounter c2(&p);
  p.SetLow(Pages(1000));
  c1.SetLow(Pages(100));
  c1.Charge(Pages(300));  // protected 100, unprotected 200
  c2.Charge(Pages(200));  // protected 0, unprotected 200
  for (bool recursive : {false, true}) {
    PageCounter::CalculateProtection(&root, &p, recursive);
    PageCounter::CalculateProtection(&root, &c1, recursive);
    PageCounter::CalculateProtection(&root, &c2, recursive);
    if (!recursive) {
      EXPECT_EQ(c1.elow(), Pages(100));
      EXPECT_EQ(c2.elow(), Pages(0));
    } else {
      // unclaimed = (1000 - 100) * unprotected / (500 - 100)
      EXPECT_EQ(c1.elow(), Pages(100 + 900 * 200 / 400));
      EXPECT_EQ(c2.elow(), Pages(0 + 900 * 200 / 400));
    }
  }
}

TEST(PageCounterTest, EffectiveProtectionIgnoresReclaimRootAndEmptyGroups) {
  PageCounter root(nullptr);
  PageCounter a(&root);
  a.SetMin(Pages(10));
  a.Charge(Pages(5));
  PageCounter::CalculateProtection(&a, &a, false);  // target: untouched
  EXPECT_EQ(a.emin(), Pages(0));
  PageCounter b(&root);
  b.SetMin(Pages(10));
  PageCounter::CalculateProtection(&root, &b, false);  // empty: stale
  EXPECT_EQ(b.emin(), Pages(0));
  EXPECT_TRUE(a.Uncharge(Pages(5)));
}

TEST(PageCounterTest, ConcurrentTryChargeNeverLeavesUsageAboveMax) {
  PageCounter root(nullptr);
  PageCounter leaf(&root);
  ASSERT_TRUE(leaf.SetMax(Pages(1000)).ok());
  std::atomic<int64_t> charged{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        if (leaf.TryCharge(Pages(3), nullptr)) {
          charged.fetch_add(3);
          if (i % 2) {
            ASSERT_TRUE(leaf.Uncharge(Pages(3)));
            charged.fetch_sub(3);
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(leaf.usage(), Pages(1000));
  EXPECT_EQ(leaf.usage().raw(), static_cast<uint64_t>(charged.load()));
  EXPECT_EQ(root.usage(), leaf.usage());
  EXPECT_LE(leaf.watermark(), Pages(1000));
}

TEST(PageCounterTest, SetMaxRacingWithChargesKeepsUsageBelowNewMax) {
  PageCounter pc(nullptr);
  std::atomic<bool> stop{false};
  std::thread charger([&] {
    while (!stop.load()) {
      if (pc.TryCharge(Pages(1), nullptr)) {
        ASSERT_TRUE(pc.Uncharge(Pages(1)));
      }
    }
  });
  for (int i = 0; i < 2000; ++i) {
    const Pages m(static_cast<uint64_t>(i % 3));
    Status s = pc.SetMax(m);
    EXPECT_TRUE(s.ok() || s.code() == StatusCode::kBusy);
    ASSERT_TRUE(pc.SetMax(kPageCounterMax).ok());
  }
  stop.store(true);
  charger.join();
  EXPECT_EQ(pc.usage(), Pages(0));
}

}  // namespace
}  // namespace umemcg

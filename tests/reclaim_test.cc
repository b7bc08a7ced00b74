// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The reclaim walk (try_to_free_mem_cgroup_pages): proportional pressure,
// min/low protection, the low-reclaim second pass, memory.reclaim.

#include <gtest/gtest.h>

#include "test_util.h"

namespace umemcg {
namespace {

using testing::PageReclaimer;
using testing::TestController;

TEST(ReclaimTest, PressureIsProportionalToReclaimablePages) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef a = t.Make("p/a");
  GroupRef b = t.Make("p/b");
  PageReclaimer ra(a.get());
  PageReclaimer rb(b.get());
  ASSERT_TRUE(a->AddReclaimer(&ra).ok());
  ASSERT_TRUE(b->AddReclaimer(&rb).ok());
  ASSERT_TRUE(ra.Fill(Pages(300)));
  ASSERT_TRUE(rb.Fill(Pages(100)));
  ASSERT_TRUE(p->Reclaim(Pages(40)).ok());
  // 3:1, within rounding of each round's ceil().
  EXPECT_NEAR(static_cast<double>(300 - ra.held()),
              3.0 * static_cast<double>(100 - rb.held()), 8.0);
  EXPECT_GE(600 - ra.held() - rb.held(), 40u + 200u);
  ASSERT_TRUE(a->RemoveReclaimer(&ra).ok());
  ASSERT_TRUE(b->RemoveReclaimer(&rb).ok());
  ra.Release();
  rb.Release();
}

TEST(ReclaimTest, ReclaimReturnsAgainWhenNothingCanBeFreed) {
  TestController t;
  GroupRef g = t.Make("g");
  EXPECT_EQ(g->Reclaim(Pages(10)).code(), StatusCode::kAgain);
  EXPECT_TRUE(g->Reclaim(Pages(0)).ok());
}

TEST(ReclaimTest, GroupsBelowMinAreNeverReclaimed) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef a = t.Make("p/a");
  GroupRef b = t.Make("p/b");
  ASSERT_TRUE(a->SetMin(Pages(1000)).ok());
  PageReclaimer ra(a.get());
  PageReclaimer rb(b.get());
  ASSERT_TRUE(a->AddReclaimer(&ra).ok());
  ASSERT_TRUE(b->AddReclaimer(&rb).ok());
  ASSERT_TRUE(ra.Fill(Pages(500)));
  ASSERT_TRUE(rb.Fill(Pages(500)));
  EXPECT_EQ(p->Reclaim(Pages(800)).code(), StatusCode::kAgain);
  EXPECT_EQ(ra.held(), 500u);
  EXPECT_EQ(rb.held(), 0u);
  EXPECT_EQ(a->events(MemoryEvent::kLow), 0u);
  ASSERT_TRUE(a->RemoveReclaimer(&ra).ok());
  ASSERT_TRUE(b->RemoveReclaimer(&rb).ok());
  ra.Release();
}

TEST(ReclaimTest, BelowLowIsReclaimedOnlyWhenNothingElseIsLeft) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef a = t.Make("p/a");
  GroupRef b = t.Make("p/b");
  ASSERT_TRUE(a->SetLow(Pages(1000)).ok());
  PageReclaimer ra(a.get());
  PageReclaimer rb(b.get());
  ASSERT_TRUE(a->AddReclaimer(&ra).ok());
  ASSERT_TRUE(b->AddReclaimer(&rb).ok());
  ASSERT_TRUE(ra.Fill(Pages(500)));
  ASSERT_TRUE(rb.Fill(Pages(100)));
  // First: b alone pays.
  ASSERT_TRUE(p->Reclaim(Pages(100)).ok());
  EXPECT_EQ(ra.held(), 500u);
  EXPECT_EQ(rb.held(), 0u);
  EXPECT_EQ(a->events(MemoryEvent::kLow), 0u);
  // Then the low reserve is tapped, raising `low`.
  ASSERT_TRUE(p->Reclaim(Pages(100)).ok());
  EXPECT_LE(ra.held(), 400u);
  EXPECT_GE(a->events(MemoryEvent::kLow), 1u);
  EXPECT_GE(p->events(MemoryEvent::kLow), 1u);  // hierarchical
  ASSERT_TRUE(a->RemoveReclaimer(&ra).ok());
  ASSERT_TRUE(b->RemoveReclaimer(&rb).ok());
  ra.Release();
}

TEST(ReclaimTest, TargetOwnProtectionIsIgnored) {
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetMin(Pages(1000)).ok());
  PageReclaimer r(g.get());
  ASSERT_TRUE(g->AddReclaimer(&r).ok());
  ASSERT_TRUE(r.Fill(Pages(100)));
  ASSERT_TRUE(g->Reclaim(Pages(50)).ok());
  EXPECT_LE(r.held(), 50u);
  ASSERT_TRUE(g->RemoveReclaimer(&r).ok());
  r.Release();
}

TEST(ReclaimTest, ReclaimerRegistrationErrors) {
  TestController t;
  GroupRef g = t.Make("g");
  PageReclaimer r(g.get());
  EXPECT_EQ(g->AddReclaimer(nullptr).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(g->AddReclaimer(&r).ok());
  EXPECT_EQ(g->AddReclaimer(&r).code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(g->RemoveReclaimer(&r).ok());
  EXPECT_EQ(g->RemoveReclaimer(&r).code(), StatusCode::kNotFound);
}

TEST(ReclaimTest, ChargePathReclaimsFromTheRefusingAncestorsSubtree) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef cache_group = t.Make("p/cache");
  GroupRef worker = t.Make("p/worker");
  ASSERT_TRUE(p->SetMax(Pages(256)).ok());
  PageReclaimer cache(cache_group.get());
  ASSERT_TRUE(cache_group->AddReclaimer(&cache).ok());
  ASSERT_TRUE(cache.Fill(Pages(256), ChargeFlags::kNone));
  // The worker's charge hits p's max; p's subtree (the cache) pays.
  ChargeResult r = worker->TryCharge(Pages(8));
  ASSERT_TRUE(r.ok());
  EXPECT_LT(cache.held(), 256u);
  EXPECT_EQ(p->events_local(MemoryEvent::kMax), 1u);
  ASSERT_TRUE(cache_group->RemoveReclaimer(&cache).ok());
  cache.Release();
  t.Drain();
  worker->UnchargeDirect(Pages(8));
}

}  // namespace
}  // namespace umemcg

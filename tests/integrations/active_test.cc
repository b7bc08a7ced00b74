// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ActiveGroupScope and the thread default group (kernel set_active_memcg):
// nesting, per-thread isolation, removed groups and reference lifetime.

#include "umemcg/active.h"

#include <gtest/gtest.h>

#include <latch>
#include <thread>

#include "test_util.h"

namespace umemcg {
namespace {

using testing::TestController;

TEST(ActiveGroupScopeTest, NothingActiveByDefault) {
  EXPECT_EQ(ActiveGroup(), nullptr);
  EXPECT_EQ(ActiveObjCgroup(), nullptr);
  EXPECT_EQ(ThreadDefaultGroup(), nullptr);
}

TEST(ActiveGroupScopeTest, NestedScopesRestoreTheEnclosingOne) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  {
    ActiveGroupScope outer(*a);
    EXPECT_EQ(ActiveGroup(), a.get());
    EXPECT_EQ(ActiveObjCgroup(), a->GetObjCgroup().get());
    {
      ActiveGroupScope inner(*b);
      EXPECT_EQ(ActiveGroup(), b.get());
      EXPECT_EQ(ActiveObjCgroup(), b->GetObjCgroup().get());
      {
        ActiveGroupScope again(*a);  // the same group twice in the stack
        EXPECT_EQ(ActiveGroup(), a.get());
      }
      EXPECT_EQ(ActiveGroup(), b.get());
    }
    EXPECT_EQ(ActiveGroup(), a.get());
    EXPECT_EQ(ActiveObjCgroup(), a->GetObjCgroup().get());
  }
  EXPECT_EQ(ActiveGroup(), nullptr);
  EXPECT_EQ(ActiveObjCgroup(), nullptr);
}

TEST(ActiveGroupScopeTest, DefaultGroupAndNullScope) {
  TestController t;
  GroupRef d = t.Make("d");
  GroupRef a = t.Make("a");
  SetThreadDefaultGroup(d.get());
  EXPECT_EQ(ThreadDefaultGroup(), d.get());
  EXPECT_EQ(ActiveGroup(), d.get());
  {
    ActiveGroupScope scope(*a);
    EXPECT_EQ(ActiveGroup(), a.get());
    {
      ActiveGroupScope back_to_default(nullptr);
      EXPECT_EQ(ActiveGroup(), d.get());
      EXPECT_EQ(ActiveObjCgroup(), d->GetObjCgroup().get());
    }
    // Changing the default under a live scope does not change the scope.
    SetThreadDefaultGroup(nullptr);
    EXPECT_EQ(ActiveGroup(), a.get());
  }
  EXPECT_EQ(ActiveGroup(), nullptr);
}

TEST(ActiveGroupScopeTest, ThreadsAreIsolated) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  std::latch both_in_scope(2);
  std::latch checked(2);
  Group* seen_a = nullptr;
  Group* seen_b = nullptr;
  Group* seen_a_after = nullptr;
  std::thread ta([&] {
    ActiveGroupScope s(*a);
    both_in_scope.arrive_and_wait();  // b's scope is live now too
    seen_a = ActiveGroup();
    checked.arrive_and_wait();
  });
  std::thread tb([&] {
    SetThreadDefaultGroup(b.get());
    both_in_scope.arrive_and_wait();
    seen_b = ActiveGroup();
    checked.arrive_and_wait();
    SetThreadDefaultGroup(nullptr);
  });
  ta.join();
  tb.join();
  // A new thread starts with nothing active.
  std::thread tc([&] { seen_a_after = ActiveGroup(); });
  tc.join();
  EXPECT_EQ(seen_a, a.get());
  EXPECT_EQ(seen_b, b.get());
  EXPECT_EQ(seen_a_after, nullptr);
  EXPECT_EQ(ActiveGroup(), nullptr);
}

TEST(ActiveGroupScopeTest, RemovedGroupResolvesToTheParentsObjcg) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  ASSERT_TRUE(t.ctrl->RemoveGroup(*c).ok());
  ActiveGroupScope s(*c);
  EXPECT_EQ(ActiveGroup(), c.get());
  EXPECT_EQ(ActiveObjCgroup(), p->GetObjCgroup().get());
}

TEST(ActiveGroupScopeTest, RemovalDuringAScopeChargesTheParent) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  {
    ActiveGroupScope s(*c);
    ObjCgroup* objcg = ActiveObjCgroup();
    ASSERT_TRUE(t.ctrl->RemoveGroup(*c).ok());
    // The scope's objcg was reparented: it now charges p.
    EXPECT_EQ(objcg->group(), p.get());
    ASSERT_TRUE(objcg->Charge(Bytes(100)).ok());
    t.Drain();
    EXPECT_EQ(p->usage(), Pages(1));
    objcg->Uncharge(Bytes(100));
  }
  t.Drain();
  EXPECT_EQ(p->usage(), Pages(0));
}

TEST(ActiveGroupScopeTest, ReferencesAreDroppedWithScopeAndDefault) {
  TestController t;
  GroupRef c = t.Make("c");
  Group* raw = c.get();
  const int64_t groups_before = t.ctrl->live_groups();
  {
    ActiveGroupScope s(*raw);
    SetThreadDefaultGroup(raw);
    c.reset();
    ASSERT_TRUE(t.ctrl->RemoveGroup(*raw).ok());
    t.ctrl->Reap();
    // Still pinned by the scope and the default.
    EXPECT_EQ(t.ctrl->live_groups(), groups_before);
    SetThreadDefaultGroup(nullptr);
  }
  t.ctrl->Reap();
  EXPECT_EQ(t.ctrl->live_groups(), groups_before - 1);
}

}  // namespace
}  // namespace umemcg

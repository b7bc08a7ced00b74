// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// OOM handling (memcg_oom, memory.oom.group) and memory events
// (hierarchical and local counts, callbacks, memory_localevents).

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "test_util.h"

namespace umemcg {
namespace {

using testing::TestController;

// A group with max = 1 page and that page charged: the next charge OOMs.
GroupRef MakeFull(TestController& t, const std::string& name) {
  GroupRef g = t.Make(name);
  EXPECT_TRUE(g->SetMax(Pages(1)).ok());
  EXPECT_TRUE(g->TryCharge(Pages(1), ChargeFlags::kNone).ok());
  return g;
}

TEST(OomTest, HandlerThatFreesMemoryLetsTheChargeSucceed) {
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetMax(Pages(8)).ok());
  ASSERT_TRUE(g->TryCharge(Pages(8), ChargeFlags::kNone).ok());
  int calls = 0;
  g->SetOomHandler([&](const OomContext& ctx) {
    ++calls;
    EXPECT_EQ(ctx.over_limit, g.get());
    EXPECT_EQ(ctx.kill_group, nullptr);
    EXPECT_EQ(ctx.nr_pages, Pages(1));
    ctx.over_limit->UnchargeDirect(Pages(4));  // "kill" a task's memory
    return OomOutcome{.progress = true, .killed = ctx.over_limit};
  });
  ChargeResult r = g->TryCharge(Pages(1));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(g->events(MemoryEvent::kOom), 1u);
  EXPECT_EQ(g->events(MemoryEvent::kOomKill), 1u);
  EXPECT_EQ(g->events(MemoryEvent::kOomGroupKill), 0u);
  t.Drain();
  EXPECT_EQ(g->usage(), Pages(5));
  g->UnchargeDirect(Pages(5));
}

TEST(OomTest, WithoutAHandlerTheChargeFailsWithResourceExhausted) {
  TestController t;
  GroupRef g = MakeFull(t, "g");
  ChargeResult r = g->TryCharge(Pages(1));
  EXPECT_EQ(r.code, StatusCode::kResourceExhausted);
  EXPECT_EQ(r.limited_by, g.get());
  EXPECT_EQ(g->events(MemoryEvent::kOom), 1u);
  EXPECT_EQ(g->events(MemoryEvent::kOomKill), 0u);
  g->UnchargeDirect(Pages(1));
}

TEST(OomTest, HandlerWithoutProgressFailsAfterOneCall) {
  TestController t;
  GroupRef g = MakeFull(t, "g");
  int calls = 0;
  t.ctrl->SetOomHandler([&](const OomContext&) {
    ++calls;
    return OomOutcome{};
  });
  EXPECT_FALSE(g->TryCharge(Pages(1)).ok());
  EXPECT_EQ(calls, 1);
  g->UnchargeDirect(Pages(1));
}

TEST(OomTest, LyingHandlerCannotLoopForever) {
  TestController t;
  GroupRef g = MakeFull(t, "g");
  int calls = 0;
  t.ctrl->SetOomHandler([&](const OomContext&) {
    ++calls;
    return OomOutcome{.progress = true};  // but frees nothing
  });
  EXPECT_FALSE(g->TryCharge(Pages(1)).ok());
  EXPECT_GT(calls, 1);
  EXPECT_LE(calls, 300);
  g->UnchargeDirect(Pages(1));
}

TEST(OomTest, GroupHandlerOverridesControllerHandlerForItsSubtree) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  GroupRef other = t.Make("other");
  std::vector<std::string> who;
  t.ctrl->SetOomHandler([&](const OomContext&) {
    who.push_back("controller");
    return OomOutcome{};
  });
  p->SetOomHandler([&](const OomContext&) {
    who.push_back("p");
    return OomOutcome{};
  });
  for (Group* g : {c.get(), other.get()}) {
    ASSERT_TRUE(g->SetMax(Pages(0)).ok());
    EXPECT_FALSE(g->TryCharge(Pages(1)).ok());
  }
  EXPECT_EQ(who, (std::vector<std::string>{"p", "controller"}));
  p->SetOomHandler(nullptr);
  EXPECT_FALSE(c->TryCharge(Pages(1)).ok());
  EXPECT_EQ(who.back(), "controller");
}

TEST(OomTest, OomGroupPicksTheHighestMarkedAncestorOfTheVictim) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("a/b");
  GroupRef c = t.Make("a/b/c");
  ASSERT_TRUE(a->SetMax(Pages(4)).ok());
  ASSERT_TRUE(a->SetOomGroup(true).ok());
  ASSERT_TRUE(b->SetOomGroup(true).ok());
  ASSERT_TRUE(c->TryCharge(Pages(4), ChargeFlags::kNone).ok());
  Group* kill_group = nullptr;
  Group* for_victim = nullptr;
  t.ctrl->SetOomHandler([&](const OomContext& ctx) {
    kill_group = ctx.kill_group;
    for_victim = ctx.KillGroupFor(*c);
    c->UnchargeDirect(Pages(4));
    return OomOutcome{.progress = true, .killed = c.get()};
  });
  ASSERT_TRUE(b->TryCharge(Pages(1)).ok());
  EXPECT_EQ(kill_group, a.get());
  EXPECT_EQ(for_victim, a.get());
  EXPECT_EQ(c->events_local(MemoryEvent::kOomKill), 1u);
  EXPECT_EQ(a->events_local(MemoryEvent::kOomGroupKill), 1u);
  EXPECT_EQ(a->events(MemoryEvent::kOomKill), 1u);  // hierarchical
  t.Drain();
  b->UnchargeDirect(Pages(1));
}

TEST(OomTest, KillGroupForStopsAtTheOomDomain) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("a/b");
  GroupRef c = t.Make("a/b/c");
  ASSERT_TRUE(a->SetOomGroup(true).ok());
  ASSERT_TRUE(c->SetOomGroup(true).ok());
  OomContext ctx;
  ctx.over_limit = b.get();  // a is above the domain
  EXPECT_EQ(ctx.KillGroupFor(*c), c.get());
  EXPECT_EQ(ctx.KillGroupFor(*b), nullptr);
  EXPECT_EQ(ctx.KillGroupFor(*a), nullptr);  // outside the domain
}

TEST(OomTest, VictimOutsideTheDomainIsReported) {
  TestController t;
  GroupRef g = t.Make("g");
  GroupRef other = t.Make("other");
  ASSERT_TRUE(g->SetMax(Pages(0)).ok());
  t.ctrl->SetOomHandler([&](const OomContext&) {
    return OomOutcome{.progress = false, .killed = other.get()};
  });
  EXPECT_FALSE(g->TryCharge(Pages(1)).ok());
  EXPECT_EQ(other->events(MemoryEvent::kOomKill), 0u);
  ASSERT_EQ(t.errors.size(), 1u);
  EXPECT_EQ(t.errors[0], "oom_victim");
}

TEST(OomTest, MaxWriteInvokesOomUntilUsageFits) {
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->TryCharge(Pages(10), ChargeFlags::kNone).ok());
  int calls = 0;
  t.ctrl->SetOomHandler([&](const OomContext& ctx) {
    ++calls;
    ctx.over_limit->UnchargeDirect(Pages(3));
    return OomOutcome{.progress = true, .killed = ctx.over_limit};
  });
  ASSERT_TRUE(g->SetMax(Pages(4)).ok());
  EXPECT_EQ(calls, 2);  // 10 -> 7 -> 4
  EXPECT_EQ(g->usage(), Pages(4));
  EXPECT_EQ(g->events(MemoryEvent::kOom), 2u);
  g->UnchargeDirect(Pages(4));
}

TEST(OomTest, HandlerMayRemoveTheVictimGroup) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef victim = t.Make("p/victim");
  GroupRef c = t.Make("p/c");
  ASSERT_TRUE(p->SetMax(Pages(4)).ok());
  ASSERT_TRUE(victim->TryCharge(Pages(4), ChargeFlags::kNone).ok());
  t.ctrl->SetOomHandler([&](const OomContext&) {
    EXPECT_TRUE(t.ctrl->RemoveGroup(*victim).ok());
    victim->UnchargeDirect(Pages(4));
    return OomOutcome{.progress = true, .killed = victim.get()};
  });
  ASSERT_TRUE(c->TryCharge(Pages(1)).ok());
  EXPECT_FALSE(victim->online());
  EXPECT_EQ(p->events(MemoryEvent::kOomKill), 1u);
  t.Drain();
  c->UnchargeDirect(Pages(1));
}

// Issue 14 item 2: oom_kill counts killed tasks in the victim's group
// (kernel: __oom_kill_process, once per task, memcg_memory_event), also
// every member an oom.group sweep kills; oom_group_kill once per swept
// subtree (oom_kill_process).
TEST(OomTest, EveryVictimOfAnOomGroupSweepCountsOnce) {
  TestController t;
  GroupRef top = t.Make("top");
  GroupRef a = t.Make("top/a");
  GroupRef m[3] = {t.Make("top/a/m0"), t.Make("top/a/m1"), t.Make("top/a/m2")};
  ASSERT_TRUE(a->SetMax(Pages(3)).ok());
  ASSERT_TRUE(a->SetOomGroup(true).ok());
  for (GroupRef& g : m)
    ASSERT_TRUE(g->TryCharge(Pages(1), ChargeFlags::kNone).ok());
  t.ctrl->SetOomHandler([&](const OomContext& ctx) {
    EXPECT_EQ(ctx.kill_group, a.get());
    // The chosen victim, then the sweep of its oom.group subtree.
    Group* kg = ctx.KillGroupFor(*m[0]);
    EXPECT_EQ(kg, a.get());
    OomOutcome out{.progress = true, .killed = m[0].get()};
    for (GroupRef& g : m) {
      g->UnchargeDirect(Pages(1));
      if (g.get() != m[0].get()) out.victims.emplace_back(g);
    }
    return out;
  });
  ASSERT_TRUE(m[0]->TryCharge(Pages(1)).ok());
  for (GroupRef& g : m) {
    EXPECT_EQ(g->events_local(MemoryEvent::kOomKill), 1u) << g->name();
    EXPECT_EQ(g->events(MemoryEvent::kOomKill), 1u) << g->name();
    EXPECT_EQ(g->events(MemoryEvent::kOomGroupKill), 0u) << g->name();
  }
  EXPECT_EQ(a->events(MemoryEvent::kOomKill), 3u);
  EXPECT_EQ(a->events_local(MemoryEvent::kOomKill), 0u);
  EXPECT_EQ(top->events(MemoryEvent::kOomKill), 3u);
  EXPECT_EQ(a->events_local(MemoryEvent::kOomGroupKill), 1u);
  EXPECT_EQ(a->events(MemoryEvent::kOomGroupKill), 1u);
  EXPECT_EQ(top->events(MemoryEvent::kOomGroupKill), 1u);
  EXPECT_EQ(a->events_local(MemoryEvent::kOom), 1u);
  EXPECT_NE(a->MemoryEvents().find("oom_kill 3\noom_group_kill 1\n"),
            std::string::npos)
      << a->MemoryEvents();
  m[0]->UnchargeDirect(Pages(1));
}

TEST(OomTest, VictimsCountTheirTasksAndMayRepeat) {
  TestController t;
  GroupRef g = t.Make("g");
  GroupRef x = t.Make("g/x");
  GroupRef y = t.Make("g/y");
  ASSERT_TRUE(g->SetMax(Pages(2)).ok());
  ASSERT_TRUE(x->TryCharge(Pages(2), ChargeFlags::kNone).ok());
  t.ctrl->SetOomHandler([&](const OomContext&) {
    x->UnchargeDirect(Pages(2));
    return OomOutcome{.progress = true,
                      .killed = OomVictim(x, 4),
                      .victims = {OomVictim(y, 2), OomVictim(x.get())}};
  });
  ASSERT_TRUE(y->TryCharge(Pages(1)).ok());
  EXPECT_EQ(x->events(MemoryEvent::kOomKill), 5u);
  EXPECT_EQ(y->events(MemoryEvent::kOomKill), 2u);
  EXPECT_EQ(g->events(MemoryEvent::kOomKill), 7u);
  // No oom.group anywhere: no group kill.
  EXPECT_EQ(g->events(MemoryEvent::kOomGroupKill), 0u);
  y->UnchargeDirect(Pages(1));
}

// Victims in two different oom.group subtrees of the domain: one group
// kill each; a victim outside the domain is reported and not counted.
TEST(OomTest, OneGroupKillPerSweptSubtreeAndStrayVictimsAreReported) {
  TestController t;
  GroupRef d = t.Make("d");
  GroupRef p = t.Make("d/p");
  GroupRef q = t.Make("d/q");
  GroupRef p1 = t.Make("d/p/1");
  GroupRef q1 = t.Make("d/q/1");
  GroupRef other = t.Make("other");
  ASSERT_TRUE(p->SetOomGroup(true).ok());
  ASSERT_TRUE(q->SetOomGroup(true).ok());
  ASSERT_TRUE(d->SetMax(Pages(1)).ok());
  ASSERT_TRUE(p1->TryCharge(Pages(1), ChargeFlags::kNone).ok());
  t.ctrl->SetOomHandler([&](const OomContext&) {
    p1->UnchargeDirect(Pages(1));
    return OomOutcome{.progress = true,
                      .killed = p1.get(),
                      .victims = {OomVictim(p), OomVictim(q1), other}};
  });
  ASSERT_TRUE(q1->TryCharge(Pages(1)).ok());
  EXPECT_EQ(p->events_local(MemoryEvent::kOomGroupKill), 1u);
  EXPECT_EQ(q->events_local(MemoryEvent::kOomGroupKill), 1u);
  EXPECT_EQ(d->events(MemoryEvent::kOomGroupKill), 2u);
  EXPECT_EQ(d->events(MemoryEvent::kOomKill), 3u);
  EXPECT_EQ(other->events(MemoryEvent::kOomKill), 0u);
  ASSERT_EQ(t.errors.size(), 1u);
  EXPECT_EQ(t.errors[0], "oom_victim");
  q1->UnchargeDirect(Pages(1));
}

TEST(EventsTest, HierarchicalCountsStopBelowRoot) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("a/b");
  ASSERT_TRUE(b->SetMax(Pages(0)).ok());
  EXPECT_FALSE(
      b->TryCharge(Pages(1), kChargeDefault | ChargeFlags::kNoRetry).ok());
  EXPECT_EQ(b->events_local(MemoryEvent::kMax), 2u);
  EXPECT_EQ(b->events(MemoryEvent::kMax), 2u);
  EXPECT_EQ(a->events_local(MemoryEvent::kMax), 0u);
  EXPECT_EQ(a->events(MemoryEvent::kMax), 2u);
  EXPECT_EQ(t.ctrl->root().events(MemoryEvent::kMax), 0u);
  EXPECT_EQ(t.ctrl->root().events_local(MemoryEvent::kMax), 0u);
}

TEST(EventsTest, LocalEventsOptionKeepsCountsLocal) {
  TestController t({.local_events = true});
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("a/b");
  ASSERT_TRUE(b->SetMax(Pages(0)).ok());
  EXPECT_FALSE(
      b->TryCharge(Pages(1), kChargeDefault | ChargeFlags::kNoRetry).ok());
  EXPECT_EQ(b->events(MemoryEvent::kMax), 2u);
  EXPECT_EQ(a->events(MemoryEvent::kMax), 0u);
}

TEST(EventsTest, CallbacksFireForLocalAndHierarchicalChanges) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("a/b");
  std::vector<std::tuple<std::string, MemoryEvent, bool>> seen;
  auto record = [&](Group& g, MemoryEvent e, bool local) {
    seen.emplace_back(g.name(), e, local);
  };
  a->SetEventCallback(record);
  b->SetEventCallback(record);
  ASSERT_TRUE(b->SetMax(Pages(0)).ok());
  ASSERT_TRUE(b->TryCharge(Pages(1), kChargeAtomic).ok());  // forced: max
  using E = std::tuple<std::string, MemoryEvent, bool>;
  EXPECT_EQ(seen, (std::vector<E>{{"b", MemoryEvent::kMax, true},
                                  {"b", MemoryEvent::kMax, false},
                                  {"a", MemoryEvent::kMax, false}}));
  b->SetEventCallback(nullptr);
  seen.clear();
  ASSERT_TRUE(b->TryCharge(Pages(1), kChargeAtomic).ok());
  EXPECT_EQ(seen.size(), 1u);  // only a's
  b->UnchargeDirect(Pages(2));
}

}  // namespace
}  // namespace umemcg

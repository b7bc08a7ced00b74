// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// PressureKiller (umemcg/pressure_killer.h) with the injectable clock:
// stalls of known lengths in chosen groups (MemoryStallScope while the
// manual clock advances), checks once per second of that clock. The
// thrashing tenant is killed, not the biggest; the limit must hold for the
// whole duration; a dip starts it over; after a kill, the post-kill delay
// and a victim whose memory has not come back hold off further kills (the
// OOM handler's too); -1000 and actions that kill nothing; the thread.

#include "umemcg/pressure_killer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "umemcg/oom_policy.h"
#include "umemcg/pressure.h"

namespace umemcg {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using testing::TestController;

// A parent "p" with leaves charged a known number of pages; each leaf's
// kill action records the kill and, unless told to hold it, frees its
// memory (as cancelling a tenant's work would).
struct Tenants {
  Tenants(TestController& t, const std::map<std::string, uint64_t>& usage,
          OomPolicyOptions options = {})
      : t(t) {
    p = t.Make("p");
    options.clock = &t.clock;
    policy = OomPolicy::Create(*t.ctrl, options);
    for (const auto& [name, pages] : usage) {
      GroupRef g = t.Make("p/" + name);
      EXPECT_TRUE(g->TryCharge(Pages(pages), ChargeFlags::kNone).ok());
      held[name] = pages;
      leaves[name] = g;
      EXPECT_TRUE(policy
                      ->SetKillAction(*g,
                                      [this, name](Group& v) {
                                        killed.push_back(name);
                                        if (!hold_memory) {
                                          v.UnchargeDirect(Pages(held[name]));
                                          held[name] = 0;
                                        }
                                        return uint64_t{1};
                                      })
                      .ok());
    }
  }
  ~Tenants() {
    for (auto& [name, g] : leaves) {
      if (held[name] != 0) g->UnchargeDirect(Pages(held[name]));
    }
  }
  // `g` stalled for `stall`, then idle for the rest of a second.
  void Second(const std::string& leaf, nanoseconds stall) {
    {
      MemoryStallScope s(*leaves.at(leaf));
      t.clock.Advance(stall);
    }
    t.clock.Advance(seconds(1) - stall);
  }
  void IdleSecond() { t.clock.Advance(seconds(1)); }

  TestController& t;
  GroupRef p;
  std::unique_ptr<OomPolicy> policy;
  std::map<std::string, GroupRef> leaves;
  std::map<std::string, uint64_t> held;
  std::vector<std::string> killed;
  bool hold_memory = false;
};

PressureKillerOptions NoThread() {
  PressureKillerOptions o;
  o.interval = nanoseconds(0);
  return o;
}

TEST(PressureKillerTest, MemoryStallScopeCountsExactlyInTheGroupAndAncestors) {
  TestController t({.batch = 1});
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("a/b");
  {
    MemoryStallScope s(*b);
    t.clock.Advance(milliseconds(250));
    {
      MemoryStallScope nested(*b);  // nested: counted once
      t.clock.Advance(milliseconds(250));
    }
  }
  t.clock.Advance(milliseconds(100));
  EXPECT_EQ(ReadPressure(*b).some.total_us, 500'000u);
  EXPECT_EQ(ReadPressure(*a).some.total_us, 500'000u);
  EXPECT_EQ(ReadPressure(t.ctrl->root()).some.total_us, 500'000u);
  // The only thread that charged b was stalled: full too.
  EXPECT_EQ(ReadPressure(*b).full.total_us, 500'000u);
}

TEST(PressureKillerTest, KillsTheThrashingTenantNotTheBiggest) {
  TestController t({.batch = 1});
  Tenants ts(t, {{"big", 1000}, {"thrash", 200}, {"idle", 50}});
  std::vector<PressureKill> seen;
  PressureKillerOptions o = NoThread();
  o.on_kill = [&](const PressureKill& k) { seen.push_back(k); };
  auto killer = PressureKiller::Create(*ts.policy, o);
  ASSERT_TRUE(
      killer->Watch(*ts.p, {.avg10_limit = 1000, .duration = seconds(10)})
          .ok());
  // "thrash" stalls half of every second; the parent's avg10 climbs past
  // 10% within a few periods, then must stay above for 10 s.
  int64_t first_above_ns = -1;
  int64_t kill_ns = -1;
  for (int s = 0; s < 60 && ts.killed.empty(); ++s) {
    ts.Second("thrash", milliseconds(500));
    const int64_t now = t.clock.Now().count();
    // What the killer will read (a read only brings the averages up to
    // date: reading twice changes nothing).
    const bool above = ReadPressure(*ts.p).some.avg10 > 1000;
    if (above && first_above_ns < 0) first_above_ns = now;
    EXPECT_TRUE(above || first_above_ns < 0) << "stays above once above";
    const auto kills = killer->Check();
    if (!kills.empty()) kill_ns = now;
  }
  ASSERT_EQ(ts.killed, std::vector<std::string>{"thrash"});
  ASSERT_GE(first_above_ns, 0);
  EXPECT_EQ(kill_ns - first_above_ns, nanoseconds(seconds(10)).count());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].victim->path(), "p/thrash");
  EXPECT_EQ(seen[0].watched->path(), "p");
  EXPECT_GT(seen[0].victim_avg10, 1000u);
  EXPECT_GT(seen[0].watched_pressure.some.avg10, 1000u);
  EXPECT_EQ(seen[0].score, 200u);
  EXPECT_EQ(seen[0].tasks, 1u);
  EXPECT_EQ(killer->stats().kills, 1u);
  // Not an OOM kill: memory.events is untouched.
  EXPECT_NE(ts.leaves["thrash"]->MemoryEvents().find("oom_kill 0"),
            std::string::npos);
}

TEST(PressureKillerTest, WithoutAThrashingLeafTheMostUsageAboveProtection) {
  TestController t({.batch = 1});
  Tenants ts(t, {{"a", 1000}, {"b", 300}});
  ASSERT_TRUE(ts.leaves["a"]->SetMin(Pages(900)).ok());  // a's score: 100
  auto killer = PressureKiller::Create(*ts.policy, NoThread());
  // Each leaf alone 30% (below the 50% limit), the parent 60%.
  ASSERT_TRUE(
      killer->Watch(*ts.p, {.avg10_limit = 5000, .duration = seconds(4)}).ok());
  for (int s = 0; s < 120 && ts.killed.empty(); ++s) {
    {
      MemoryStallScope sa(*ts.leaves["a"]);
      t.clock.Advance(milliseconds(300));
    }
    {
      MemoryStallScope sb(*ts.leaves["b"]);
      t.clock.Advance(milliseconds(300));
    }
    t.clock.Advance(milliseconds(400));
    (void)killer->Check();
  }
  ASSERT_EQ(ts.killed, std::vector<std::string>{"b"});
  EXPECT_LT(ReadPressure(*ts.leaves["a"]).some.avg10, 5000u);
}

TEST(PressureKillerTest, ADipBelowTheLimitStartsTheDurationOver) {
  TestController t({.batch = 1});
  Tenants ts(t, {{"x", 100}});
  auto killer = PressureKiller::Create(*ts.policy, NoThread());
  // Watched directly: the leaf is its own only candidate.
  ASSERT_TRUE(killer
                  ->Watch(*ts.leaves["x"],
                          {.avg10_limit = 2000, .duration = seconds(30)})
                  .ok());
  auto above = [&] { return ReadPressure(*ts.leaves["x"]).some.avg10 > 2000; };
  // Fully stalled seconds until above the limit, 4 more, then idle until
  // the average decayed below it: above for well under 30 s.
  int above_for = 0;
  for (int i = 0; !above(); ++i) {
    ASSERT_LT(i, 100);
    ts.Second("x", seconds(1));
    (void)killer->Check();
  }
  for (int s = 0; s < 4; ++s, ++above_for) {
    ts.Second("x", seconds(1));
    (void)killer->Check();
  }
  for (; above(); ++above_for) {
    ASSERT_LT(above_for, 25);
    ts.IdleSecond();
    (void)killer->Check();
  }
  EXPECT_TRUE(ts.killed.empty());
  // Above again: the 30 s count from the first check above, anew.
  for (int i = 0; !above(); ++i) {
    ASSERT_LT(i, 100);
    ts.Second("x", seconds(1));
    (void)killer->Check();
  }
  for (int s = 0; s < 29; ++s) {
    ts.Second("x", seconds(1));
    (void)killer->Check();
    ASSERT_TRUE(ts.killed.empty()) << "killed after " << s + 1 << " s above";
  }
  ts.Second("x", seconds(1));
  (void)killer->Check();
  EXPECT_EQ(ts.killed, std::vector<std::string>{"x"});
}

TEST(PressureKillerTest, OneVictimAtATimeWithTheOomHandlerToo) {
  TestController t({.batch = 1});
  OomPolicyOptions po;
  po.victim_timeout = seconds(20);
  Tenants ts(t, {{"a", 400}, {"b", 300}}, po);
  ts.hold_memory = true;  // the kill actions free nothing (yet)
  PressureKillerOptions o = NoThread();
  o.post_kill_delay = seconds(5);
  auto killer = PressureKiller::Create(*ts.policy, o);
  ASSERT_TRUE(
      killer->Watch(*ts.p, {.avg10_limit = 1000, .duration = seconds(10)})
          .ok());
  // Both thrash (both above the limit by the end of the duration); a's
  // usage is larger: a first.
  for (int s = 0; s < 30 && ts.killed.empty(); ++s) {
    ts.Second("a", milliseconds(400));
    ts.Second("b", milliseconds(400));
    (void)killer->Check();
  }
  ASSERT_EQ(ts.killed, std::vector<std::string>{"a"});
  // a's memory has not come back: no second kill, neither by the killer
  // (due again after its duration, past its post-kill delay) nor by an OOM
  // in p (within the victim timeout).
  for (int s = 0; s < 15; ++s) {
    ts.Second("b", milliseconds(800));
    (void)killer->Check();
  }
  EXPECT_EQ(ts.killed, std::vector<std::string>{"a"});
  EXPECT_GT(killer->stats().blocked, 0u);
  ASSERT_TRUE(ts.p->SetMax(ts.p->usage()).ok());
  t.ctrl->SetOomHandler(ts.policy->Handler());
  EXPECT_FALSE(ts.leaves["b"]->TryCharge(Pages(1)).ok());
  EXPECT_EQ(ts.policy->stats().blocked_by_pending, 1u);
  EXPECT_EQ(ts.killed, std::vector<std::string>{"a"});
  // a frees: the killer may choose again, and b is the one thrashing.
  ts.leaves["a"]->UnchargeDirect(Pages(ts.held["a"]));
  ts.held["a"] = 0;
  ts.Second("b", milliseconds(800));
  (void)killer->Check();
  EXPECT_EQ(ts.killed, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(killer->stats().kills, 2u);
}

TEST(PressureKillerTest, PostKillDelayHoldsOffTheNextKill) {
  TestController t({.batch = 1});
  Tenants ts(t, {{"a", 400}, {"b", 300}});
  PressureKillerOptions o = NoThread();
  o.post_kill_delay = seconds(8);
  auto killer = PressureKiller::Create(*ts.policy, o);
  ASSERT_TRUE(
      killer->Watch(*ts.p, {.avg10_limit = 1000, .duration = seconds(0)}).ok());
  int64_t first_kill = -1;
  int64_t second_kill = -1;
  for (int s = 0; s < 60 && second_kill < 0; ++s) {
    // Both thrash (a killed tenant's stalls stop: it is idle).
    for (const char* leaf : {"a", "b"}) {
      if (ts.held[leaf] != 0) {
        ts.Second(leaf, milliseconds(400));
      } else {
        ts.IdleSecond();
      }
    }
    if (!killer->Check().empty()) {
      (first_kill < 0 ? first_kill : second_kill) = t.clock.Now().count();
    }
  }
  ASSERT_EQ(ts.killed.size(), 2u);
  EXPECT_NE(ts.killed[0], ts.killed[1]);
  EXPECT_GE(second_kill - first_kill, nanoseconds(seconds(8)).count());
  EXPECT_LT(second_kill - first_kill, nanoseconds(seconds(12)).count());
}

TEST(PressureKillerTest, NeverAndNothingKilled) {
  TestController t({.batch = 1});
  Tenants ts(t, {{"a", 400}});
  ASSERT_TRUE(ts.policy->SetScoreAdj(*ts.leaves["a"], -1000).ok());
  auto killer = PressureKiller::Create(*ts.policy, NoThread());
  ASSERT_TRUE(
      killer->Watch(*ts.p, {.avg10_limit = 0, .duration = seconds(0)}).ok());
  for (int i = 0; i < 3; ++i) ts.Second("a", milliseconds(900));
  EXPECT_GT(ReadPressure(*ts.p).some.avg10, 0u);
  EXPECT_TRUE(killer->Check().empty());
  EXPECT_EQ(killer->stats().no_victim, 1u);
  // An action that kills nothing: not a kill.
  ASSERT_TRUE(ts.policy->SetScoreAdj(*ts.leaves["a"], 0).ok());
  ASSERT_TRUE(
      ts.policy
          ->SetKillAction(*ts.leaves["a"], [](Group&) { return uint64_t{0}; })
          .ok());
  EXPECT_TRUE(killer->Check().empty());
  EXPECT_EQ(killer->stats().no_victim, 2u);
  EXPECT_EQ(killer->stats().kills, 0u);
}

TEST(PressureKillerTest, WatchArguments) {
  TestController t;
  GroupRef g = t.Make("g");
  auto policy = OomPolicy::Create(*t.ctrl, {.clock = &t.clock});
  auto killer = PressureKiller::Create(*policy, NoThread());
  EXPECT_EQ(killer->Watch(*g, {.avg10_limit = 10001}).code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(killer->Watch(*g, {.duration = seconds(-1)}).code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(killer->Unwatch(*g).code(), StatusCode::kNotFound);
  EXPECT_TRUE(killer->Watch(*g).ok());
  EXPECT_TRUE(killer->Unwatch(*g).ok());
  EXPECT_TRUE(killer->Watch(*g).ok());
  // A removed group is dropped at the next check.
  ASSERT_TRUE(t.ctrl->RemoveGroup(*g).ok());
  EXPECT_EQ(killer->Watch(*g).code(), StatusCode::kFailedPrecondition);
  (void)killer->Check();
  EXPECT_EQ(killer->Unwatch(*g).code(), StatusCode::kNotFound);
}

TEST(PressureKillerTest, TheThreadChecksEveryInterval) {
  TestController t({.batch = 1});
  Tenants ts(t, {{"x", 100}});
  ts.Second("x", milliseconds(900));
  ts.Second("x", milliseconds(900));
  std::atomic<int> kills{0};
  PressureKillerOptions o;
  o.interval = milliseconds(100);
  o.on_kill = [&](const PressureKill&) { kills.fetch_add(1); };
  auto killer = PressureKiller::Create(*ts.policy, o);
  ASSERT_TRUE(
      killer->Watch(*ts.p, {.avg10_limit = 1000, .duration = seconds(1)}).ok());
  // Checks happen as the manual clock moves; the kill comes once 1 s of
  // it passed above the limit. Bounded by real time only against a hang.
  for (int i = 0; i < 20000 && kills.load() == 0; ++i) {
    t.clock.Advance(milliseconds(10));
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(kills.load(), 1);
  EXPECT_EQ(ts.killed, std::vector<std::string>{"x"});
  killer.reset();  // stops the thread promptly
}

}  // namespace
}  // namespace umemcg

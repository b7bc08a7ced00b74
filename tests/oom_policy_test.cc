// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// OomPolicy: the victim choice over a table of trees, kills through the
// charge path with their events, waiting for memory (released by a free,
// timing out), one victim at a time under concurrent chargers, and the
// dropped kill.

#include "umemcg/oom_policy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "external_limit.h"
#include "test_util.h"

namespace umemcg {
namespace {

using testing::TestController;

struct Node {
  std::string path;
  uint64_t usage;      // pages charged to it (leaves)
  uint64_t min = 0;    // memory.min, pages
  int adj = 0;         // oom_score_adj
  bool action = true;  // has a kill action
  bool oom_group = false;
};

struct Case {
  const char* name;
  std::vector<Node> nodes;          // parents first; "d" is the OOM domain
  const char* victim;               // expected, "" for none
  std::vector<std::string> killed;  // with oom.group: every member killed
};

class Tree {
 public:
  Tree(TestController& t, const std::vector<Node>& nodes) : t_(t) {
    groups_["d"] = t.Make("d");
    for (const Node& n : nodes) {
      GroupRef g = t.Make("d/" + n.path);
      EXPECT_TRUE(g->SetMin(Pages(n.min)).ok());
      if (n.oom_group) {
        EXPECT_TRUE(g->SetOomGroup(true).ok());
      }
      groups_[n.path] = g;
    }
    for (const Node& n : nodes) {
      if (n.usage != 0) {
        EXPECT_TRUE(groups_[n.path]
                        ->TryCharge(Pages(n.usage), ChargeFlags::kNone)
                        .ok());
      }
    }
  }
  ~Tree() {
    for (auto& [path, g] : groups_) {
      // Leaves hold their own charge; uncharge what is left.
      (void)path;
      (void)g;
    }
  }
  Group& operator[](const std::string& p) { return *groups_.at(p); }
  std::map<std::string, GroupRef>& groups() { return groups_; }

 private:
  TestController& t_;
  std::map<std::string, GroupRef> groups_;
};

std::vector<Case> Cases() {
  return {
      {"biggest leaf", {{"a", 100}, {"b", 60}}, "a", {"a"}},
      {"protection lowers the score", {{"a", 100, 80}, {"b", 60}}, "b", {"b"}},
      {"-1000 is never chosen", {{"a", 100, 0, -1000}, {"b", 60}}, "b", {"b"}},
      {"+adj scales with domain usage",
       // b: 60 + 500 * 160 / 1000 = 140 > a's 100
       {{"a", 100}, {"b", 60, 0, 500}},
       "b",
       {"b"}},
      {"-adj lowers", {{"a", 100, 0, -500}, {"b", 60}}, "b", {"b"}},
      {"only leaves",
       {{"p", 0}, {"p/x", 30}, {"p/y", 40}, {"z", 50}},
       "z",
       {"z"}},
      {"without an action: skipped",
       {{"a", 100, 0, 0, false}, {"b", 60}},
       "b",
       {"b"}},
      {"empty leaves: none", {{"a", 0}, {"b", 0}}, "", {}},
      {"oom.group sweeps the marked subtree",
       {{"p", 0, 0, 0, true, true},
        {"p/x", 70},
        {"p/y", 20},
        {"p/n", 10, 0, -1000},
        {"z", 50}},
       "p/x",
       {"p/x", "p/y"}},
      {"ties: the larger usage", {{"a", 50, 0}, {"b", 70, 20}}, "b", {"b"}},
      {"protection two levels down",
       // p's effective min is 50, so x's is 100 x 50 / 100 = 50 (the
       // kernel's effective_protection): x scores 100 - 50 = 50 < z's 60.
       // Its parent's effective value must be computed first in the walk.
       {{"p", 0, 50}, {"p/x", 100, 100}, {"z", 60}},
       "z",
       {"z"}},
  };
}

TEST(OomPolicyTest, VictimTable) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    TestController t({.batch = 1});
    Tree tree(t, c.nodes);
    std::vector<std::string> killed;
    auto policy = OomPolicy::Create(*t.ctrl);
    for (const Node& n : c.nodes) {
      Group& g = tree[n.path];
      if (n.action) {
        ASSERT_TRUE(policy
                        ->SetKillAction(g,
                                        [&killed, p = n.path](Group& v) {
                                          killed.push_back(p);
                                          (void)v;
                                          return uint64_t{1};
                                        })
                        .ok());
      }
      ASSERT_TRUE(policy->SetScoreAdj(g, n.adj).ok());
    }
    GroupRef v = policy->SelectVictim(tree["d"]);
    EXPECT_EQ(v ? v->path() : "",
              c.victim[0] ? std::string("d/") + c.victim : std::string());
    // Through the charge path: an OOM at d with d at its max.
    Group& d = tree["d"];
    ASSERT_TRUE(d.SetMax(d.usage()).ok());
    t.ctrl->SetOomHandler(policy->Handler());
    Group* leaf = nullptr;
    for (const Node& n : c.nodes) {
      if (tree[n.path].ChildNames().empty()) leaf = &tree[n.path];
    }
    const ChargeResult r = leaf->TryCharge(Pages(1));
    EXPECT_FALSE(r.ok());  // the actions free nothing
    EXPECT_EQ(killed, c.killed);
    const std::string events = d.MemoryEvents();
    EXPECT_NE(events.find("oom_kill " + std::to_string(c.killed.size())),
              std::string::npos)
        << events;
    t.ctrl->SetOomHandler(nullptr);
    for (const Node& n : c.nodes) {
      if (n.usage != 0) tree[n.path].UnchargeDirect(Pages(n.usage));
    }
  }
}

TEST(OomPolicyTest, ScoreAdjRange) {
  TestController t;
  GroupRef g = t.Make("g");
  auto policy = OomPolicy::Create(*t.ctrl);
  EXPECT_EQ(policy->SetScoreAdj(*g, 1001).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(policy->SetScoreAdj(*g, -1001).code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(policy->SetScoreAdj(*g, -1000).ok());
  EXPECT_EQ(policy->ScoreAdj(*g), -1000);
}

// A domain at its max with two tenants; a's kill action frees a's memory
// (at once, or later from another thread).
struct Domain {
  explicit Domain(TestController& t)
      : d(t.Make("d")), a(t.Make("d/a")), b(t.Make("d/b")) {
    EXPECT_TRUE(d->SetMax(Pages(100)).ok());
    EXPECT_TRUE(a->TryCharge(Pages(70), ChargeFlags::kNone).ok());
    EXPECT_TRUE(b->TryCharge(Pages(30), ChargeFlags::kNone).ok());
    a_held = 70;
  }
  void FreeA() {
    const uint64_t n = a_held.exchange(0);
    a->UnchargeDirect(Pages(n));
  }
  GroupRef d, a, b;
  std::atomic<uint64_t> a_held{0};
};

TEST(OomPolicyTest, KillFreesAndTheChargeSucceeds) {
  TestController t({.batch = 1});
  Domain dom(t);
  auto policy = OomPolicy::Create(*t.ctrl);
  int kills = 0;
  ASSERT_TRUE(policy
                  ->SetKillAction(*dom.a,
                                  [&](Group&) {
                                    ++kills;
                                    dom.FreeA();
                                    return uint64_t{1};
                                  })
                  .ok());
  t.ctrl->SetOomHandler(policy->Handler());
  EXPECT_TRUE(dom.b->TryCharge(Pages(5)).ok());
  EXPECT_EQ(kills, 1);
  EXPECT_NE(dom.a->MemoryEvents().find("oom_kill 1"), std::string::npos);
  t.ctrl->SetOomHandler(nullptr);
  dom.b->UnchargeDirect(Pages(35));
}

TEST(OomPolicyTest, WaitersAreReleasedByAFree) {
  TestController t({.batch = 1});
  Domain dom(t);
  OomPolicyOptions o;
  o.clock = &t.clock;  // never advanced: only the free ends the wait
  o.wait_for_memory = std::chrono::seconds(10);
  auto policy = OomPolicy::Create(*t.ctrl, o);
  std::atomic<bool> cancelled{false};
  ASSERT_TRUE(policy
                  ->SetKillAction(*dom.a,
                                  [&](Group&) {
                                    cancelled = true;  // asynchronous
                                    return uint64_t{1};
                                  })
                  .ok());
  t.ctrl->SetOomHandler(policy->Handler());
  std::thread victim([&] {
    while (!cancelled) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    dom.FreeA();
  });
  EXPECT_TRUE(dom.b->TryCharge(Pages(5)).ok());
  victim.join();
  EXPECT_EQ(policy->stats().kills, 1u);
  EXPECT_EQ(policy->stats().waits_released, 1u);
  t.ctrl->SetOomHandler(nullptr);
  dom.b->UnchargeDirect(Pages(35));
}

TEST(OomPolicyTest, WaitTimesOutAndTheChargeFails) {
  TestController t({.batch = 1});
  Domain dom(t);
  OomPolicyOptions o;
  o.wait_for_memory = std::chrono::milliseconds(30);  // SystemClock
  auto policy = OomPolicy::Create(*t.ctrl, o);
  ASSERT_TRUE(
      policy->SetKillAction(*dom.a, [](Group&) { return uint64_t{1}; }).ok());
  t.ctrl->SetOomHandler(policy->Handler());
  EXPECT_FALSE(dom.b->TryCharge(Pages(5)).ok());
  // The victim is still pending: no second kill, the wait times out again.
  EXPECT_FALSE(dom.b->TryCharge(Pages(5)).ok());
  EXPECT_EQ(policy->stats().kills, 1u);
  EXPECT_GE(policy->stats().waits_timed_out, 2u);
  EXPECT_GE(policy->stats().blocked_by_pending, 1u);
  t.ctrl->SetOomHandler(nullptr);
  dom.FreeA();
  dom.b->UnchargeDirect(Pages(30));
}

TEST(OomPolicyTest, DroppedKillWhenMemoryCameBack) {
  TestController t({.batch = 1});
  Domain dom(t);
  OomPolicyOptions o;
  // Memory comes back between the choice and the kill.
  o.on_victim = [&](Group&, uint64_t) { dom.b->UnchargeDirect(Pages(10)); };
  auto policy = OomPolicy::Create(*t.ctrl, o);
  int kills = 0;
  ASSERT_TRUE(policy
                  ->SetKillAction(*dom.a,
                                  [&](Group&) {
                                    ++kills;
                                    return uint64_t{1};
                                  })
                  .ok());
  t.ctrl->SetOomHandler(policy->Handler());
  EXPECT_TRUE(dom.b->TryCharge(Pages(5)).ok());
  EXPECT_EQ(kills, 0);
  EXPECT_EQ(policy->stats().dropped, 1u);
  EXPECT_NE(dom.d->MemoryEvents().find("oom_kill 0"), std::string::npos);
  t.ctrl->SetOomHandler(nullptr);
  dom.FreeA();
  dom.b->UnchargeDirect(Pages(25));
}

// A limit whose first refusal waits for the test: the batch the counters
// accepted stays charged (at the group and every ancestor) until then, as
// a charge failing at a remote limit holds it.
class HeldRefusal : public internal::ExternalLimit {
 public:
  explicit HeldRefusal(uint64_t admit) : admit_(admit) {}
  bool Admits(uint64_t usage) override { return usage <= admit_; }
  internal::ExternalVerdict Grow(uint64_t, bool, bool) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!entered_) {
      entered_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return released_; });
    }
    return internal::ExternalVerdict::kRefused;
  }
  uint64_t Margin(uint64_t usage) override {
    return usage < admit_ ? admit_ - usage : 0;
  }
  void WaitEntered() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return entered_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  const uint64_t admit_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false;
  bool released_ = false;
};

// A charge in flight when a victim is chosen raises the victim's usage for
// a moment (here: held by a remote limit's refusal; in general a charge
// failing at an ancestor). When it is taken back, no memory came back: the
// victim stays pending and a second OOM does not kill again. Its real
// freeing still ends the wait.
TEST(OomPolicyTest, AChargeInFlightAtTheVictimIsNotItsMemoryComingBack) {
  TestController t({.batch = 1});
  GroupRef d = t.Make("d");
  GroupRef t0 = t.Make("d/t0");
  GroupRef t1 = t.Make("d/t1");
  ASSERT_TRUE(d->SetMax(Pages(64)).ok());
  ASSERT_TRUE(t0->TryCharge(Pages(40), ChargeFlags::kNone).ok());
  ASSERT_TRUE(t1->TryCharge(Pages(20), ChargeFlags::kNone).ok());
  auto policy = OomPolicy::Create(*t.ctrl, {});
  std::atomic<int> kills[2] = {};
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(policy
                    ->SetKillAction(i == 0 ? *t0 : *t1,
                                    [&, i](Group&) {
                                      ++kills[i];
                                      return uint64_t{1};
                                    })
                    .ok());
  }
  t.ctrl->SetOomHandler(policy->Handler());
  HeldRefusal limit(40);
  ASSERT_TRUE(internal::ExternalLimits::Attach(*t0, &limit).ok());
  // t0's 4 pages are in the counters (d full) until the limit refuses.
  std::thread in_flight(
      [&] { EXPECT_FALSE(t0->TryCharge(Pages(4), ChargeFlags::kNone).ok()); });
  limit.WaitEntered();
  EXPECT_EQ(t0->usage().raw(), 44u);
  // d is full: t0 (44 pages) is killed, and does not free at once.
  EXPECT_FALSE(t1->TryCharge(Pages(1)).ok());
  EXPECT_EQ(kills[0].load(), 1);
  limit.Release();
  in_flight.join();
  EXPECT_EQ(t0->usage().raw(), 40u);
  // Over d's max again: t0 is still pending, nothing is killed.
  EXPECT_FALSE(t1->TryCharge(Pages(5)).ok());
  EXPECT_EQ(kills[0].load() + kills[1].load(), 1);
  EXPECT_EQ(policy->stats().blocked_by_pending, 1u);
  // t0 frees one page: its memory is coming back, the next OOM may kill.
  t0->UnchargeDirect(Pages(1));
  EXPECT_FALSE(t1->TryCharge(Pages(6)).ok());
  EXPECT_EQ(kills[0].load() + kills[1].load(), 2);
  ASSERT_TRUE(internal::ExternalLimits::Detach(*t0, &limit).ok());
  t.ctrl->SetOomHandler(nullptr);
  t0->UnchargeDirect(Pages(39));
  t1->UnchargeDirect(Pages(20));
}

// Concurrent chargers over a domain whose victims free their memory
// asynchronously: never two victims outstanding at once.
TEST(OomPolicyStressTest, NoDoubleKillUnderConcurrentChargers) {
  TestController t({.batch = 1}, 4);
  GroupRef d = t.Make("d");
  ASSERT_TRUE(d->SetMax(Pages(64)).ok());
  constexpr int kTenants = 4;
  std::vector<GroupRef> tenants;
  for (int i = 0; i < kTenants; ++i) {
    tenants.push_back(t.Make("d/t" + std::to_string(i)));
  }
  OomPolicyOptions o;
  o.wait_for_memory = std::chrono::nanoseconds(0);  // fail, do not wait
  auto policy = OomPolicy::Create(*t.ctrl, o);
  std::atomic<int> outstanding{0};
  std::atomic<int> max_outstanding{0};
  std::atomic<int> to_free{-1};
  std::atomic<uint64_t> held[kTenants] = {};
  for (int i = 0; i < kTenants; ++i) {
    ASSERT_TRUE(
        policy
            ->SetKillAction(*tenants[i],
                            [&, i](Group&) {
                              const int now = ++outstanding;
                              int m = max_outstanding.load();
                              while (now > m &&
                                     !max_outstanding.compare_exchange_weak(
                                         m, now)) {
                              }
                              to_free = i;  // the reaper frees it
                              return uint64_t{1};
                            })
            .ok());
  }
  t.ctrl->SetOomHandler(policy->Handler());
  std::atomic<bool> stop{false};
  std::thread reaper([&] {
    while (!stop) {
      const int i = to_free.exchange(-1);
      if (i < 0) {
        std::this_thread::yield();
        continue;
      }
      // The victim takes a while to notice its cancellation: OOMs in the
      // meantime must not kill another.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      // No longer outstanding once its memory starts coming back.
      --outstanding;
      const uint64_t n = held[i].exchange(0);
      tenants[i]->UnchargeDirect(Pages(n));
    }
  });
  std::vector<std::thread> chargers;
  for (int i = 0; i < kTenants; ++i) {
    chargers.emplace_back([&, i] {
      for (int k = 0; k < 100; ++k) {
        if (tenants[i]->TryCharge(Pages(1)).ok()) held[i] += 1;
      }
    });
  }
  for (auto& c : chargers) c.join();
  stop = true;
  reaper.join();
  t.ctrl->SetOomHandler(nullptr);
  // Quiescent: at most one victim was ever outstanding, and the books
  // balance.
  EXPECT_LE(max_outstanding.load(), 1);
  EXPECT_GE(policy->stats().kills, 1u);
  uint64_t total = 0;
  for (int i = 0; i < kTenants; ++i) {
    total += held[i];
    tenants[i]->UnchargeDirect(Pages(held[i]));
  }
  (void)total;
  EXPECT_EQ(d->usage().raw(), 0u);
}

}  // namespace
}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Concurrent stress of the charge path. Do not use this test as a
// benchmark: it measures nothing and spends much of its time on slow paths.
//
// kThreads workers, each with its own deterministic seed, run random
// operations on a three-level tree (root -> fixed level-1 groups -> level-2
// -> level-3 groups that the workers create and remove): TryCharge with and
// without kMayReclaim, Uncharge (through the stock), UnchargeDirect,
// Group::SetMax, CreateGroup, RemoveGroup, Lookup, DrainAllStocks and Reap.
// The controller uses kNrCpus fake CPUs and every worker hops between fake
// CPU ids at random, so several threads share a "CPU": the stock try-locks
// fail and the fallbacks (consume miss, direct uncharge) run, and remote
// drains wait for busy shards.
//
// Each worker keeps its own GroupRef handles and the pages it holds per
// group (no shared test state on the charge path). A group removed while a
// worker holds pages of it stays referenced until that worker uncharges
// them.
//
// During the run an observer samples every group's usage. No charge is
// ever forced here (no kNoFail / kHigh, no reclaimers, no OOM handler), so
// for a level-1 group A with its fixed max:
//
//   usage(A) <= max(A) + kThreads * max(batch, kMaxChargePages)
//
// Reason: a successful charge leaves each level at most at its max at the
// instant it was checked; usage above that is only the speculative add of
// in-flight TryCharges (add, then check, then roll back), at most one per
// thread and at most max(batch, n) pages each. Groups below A only hold
// charges that also passed A's check (plus the same in-flight amounts), so
// the same bound holds for them against A's max; the root's bound is the
// sum of the level-1 maxes plus the same slack. Only the level-2/3 maxes
// change during the run (cgroup-v2 writes may set them below usage), which
// is why the bound is always taken against the fixed level-1 max.
//
// After joining: with all stocks drained, every group's usage equals the
// exact sum of the pages the workers hold in its subtree (offline groups
// included), no underflow or leak was reported; after uncharging everything
// all usage is zero; after dropping every handle and Reap(), only the root
// and the online groups remain allocated, and after removing those only
// the root.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "umemcg/umemcg.h"

namespace umemcg {
namespace {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define UMEMCG_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define UMEMCG_TEST_SANITIZED 1
#endif
#endif

#ifdef UMEMCG_TEST_SANITIZED
constexpr int kOpsPerThread = 60000;
#else
constexpr int kOpsPerThread = 500000;
#endif

constexpr int kThreads = 8;
constexpr int kNrCpus = 3;
constexpr int kBatch = 16;
constexpr int kStockSlots = 4;
constexpr int kLevel1Groups = 3;
constexpr uint64_t kLevel1Max = 256;
constexpr uint64_t kMaxChargePages = 40;
// The most a level-1 group's usage may exceed its max (see above).
constexpr uint64_t kSlack =
    kThreads * std::max<uint64_t>(kBatch, kMaxChargePages);
// Per worker: handles kept at most (groups held with no pages get dropped).
constexpr size_t kMaxHeld = 24;
// Per worker: online groups it created at most.
constexpr int kMaxOwned = 4;

// "a<i>". (Appending rather than `"a" + std::to_string(i)`, which trips a
// GCC 12 -Wrestrict false positive at -O2.)
std::string Level1Name(int i) {
  std::string name = "a";
  name += std::to_string(i);
  return name;
}

// What one worker holds of one group.
struct Held {
  GroupRef ref;
  uint64_t live = 0;   // pages charged by this worker, not yet uncharged
  bool owned = false;  // created by this worker and not yet removed
};

// One worker's state; only that worker touches it until it is joined.
struct alignas(64) Worker {
  std::vector<Held> held;
  std::vector<std::string> problems;
  uint64_t charges = 0;
  uint64_t refused = 0;
  uint64_t offline_refused = 0;
  uint64_t created = 0;
  uint64_t removed = 0;
  uint64_t busy = 0;
};

class ChargeStressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ControllerOptions options;
    options.batch = kBatch;
    options.stock_slots = kStockSlots;
    options.cpu_source = CpuSource::kFake;
    options.nr_cpus = kNrCpus;
    options.charge_group_metadata = false;  // exact page counts
    options.error_hook = [this](const ErrorReport& r) {
      (std::string_view(r.what) == "underflow" ? underflow_reports_
       : std::string_view(r.what) == "leak"    ? leak_reports_
                                               : other_reports_)
          .fetch_add(1, std::memory_order_relaxed);
    };
    auto ctrl = Controller::Create(std::move(options));
    ASSERT_TRUE(ctrl.ok()) << ctrl.status().ToString();
    ctrl_ = std::move(ctrl).value();
    for (int i = 0; i < kLevel1Groups; ++i) {
      auto g = ctrl_->CreateGroup(ctrl_->root(), Level1Name(i));
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      ASSERT_TRUE(g.value()->SetMax(Pages(kLevel1Max)).ok());
      level1_.push_back(std::move(g).value());
    }
  }

  void TearDown() override { SetFakeCpu(0); }

  void RunWorker(int tid, Worker& w);
  void RunObserver();
  void Complain(std::vector<std::string>& problems, std::string what) {
    if (problems.size() < 20) problems.push_back(std::move(what));
  }

  // Declared before ctrl_ so they outlive its error hook.
  std::atomic<uint64_t> underflow_reports_{0};
  std::atomic<uint64_t> leak_reports_{0};
  std::atomic<uint64_t> other_reports_{0};
  std::unique_ptr<Controller> ctrl_;
  std::vector<GroupRef> level1_;  // fixed max; never removed during the run
  std::atomic<bool> stop_{false};
  // Observer results (read after it is joined).
  std::vector<std::string> observer_problems_;
  uint64_t samples_ = 0;
  int64_t max_excess_ = INT64_MIN;  // largest usage - level-1 max seen
};

void ChargeStressTest::RunWorker(int tid, Worker& w) {
  std::mt19937_64 rng(0x5eed0000u + static_cast<uint64_t>(tid));
  auto rand = [&rng](uint64_t n) { return rng() % n; };
  SetFakeCpu(tid % kNrCpus);
  // Unique names "t<tid>_<k>" (built by appending; see Level1Name).
  std::string name_prefix = "t";
  name_prefix += std::to_string(tid);
  name_prefix += "_";
  int next_name = 0;

  auto find = [&w](const Group* g) -> Held* {
    for (Held& h : w.held) {
      if (h.ref.get() == g) return &h;
    }
    return nullptr;
  };
  auto hold = [&](GroupRef ref, bool owned) -> Held& {
    if (Held* h = find(ref.get())) return *h;
    w.held.push_back(Held{std::move(ref), 0, owned});
    return w.held.back();
  };
  // A held group, or a level-1 group (always held by the fixture).
  auto pick_group = [&]() -> Group* {
    if (w.held.empty() || rand(4) == 0) {
      return level1_[rand(kLevel1Groups)].get();
    }
    return w.held[rand(w.held.size())].ref.get();
  };
  auto drop_idle = [&](size_t keep) {
    for (size_t i = 0; i < w.held.size() && w.held.size() > keep;) {
      const Held& h = w.held[i];
      if (h.live == 0 && !h.owned && rand(2) == 0) {
        w.held.erase(w.held.begin() + static_cast<ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  };

  for (int op = 0; op < kOpsPerThread; ++op) {
    if (rand(8) == 0) SetFakeCpu(static_cast<int>(rand(kNrCpus + 2)));
    const uint64_t r = rand(100);
    if (r < 45) {
      // ---- Charge ----
      Group* g = pick_group();
      const uint64_t c = rand(100);
      const uint64_t n = c < 80   ? 1 + rand(8)
                         : c < 95 ? 9 + rand(16)
                                  : 25 + rand(kMaxChargePages - 24);
      const ChargeFlags flags =
          rand(2) == 0 ? ChargeFlags::kMayReclaim : ChargeFlags::kNone;
      const ChargeResult res = g->TryCharge(Pages(n), flags);
      ++w.charges;
      if (res.forced) Complain(w.problems, "forced charge in " + g->path());
      if (res.ok()) {
        Held* h = find(g);
        if (h == nullptr) h = &hold(GroupRef(g), false);
        h->live += n;
      } else if (res.code == StatusCode::kResourceExhausted) {
        ++w.refused;
        if (res.limited_by == nullptr || !g->IsDescendantOf(*res.limited_by)) {
          Complain(w.problems, "bad limited_by for " + g->path());
        }
      } else if (res.code == StatusCode::kFailedPrecondition) {
        ++w.offline_refused;
        if (g->online()) Complain(w.problems, "online group refused");
      } else {
        Complain(w.problems,
                 std::string("charge: ") + StatusCodeName(res.code));
      }
    } else if (r < 72) {
      // ---- Uncharge part of what this worker holds ----
      std::vector<size_t> charged;
      for (size_t i = 0; i < w.held.size(); ++i) {
        if (w.held[i].live > 0) charged.push_back(i);
      }
      if (charged.empty()) continue;
      Held& h = w.held[charged[rand(charged.size())]];
      const uint64_t n = rand(4) == 0
                             ? h.live
                             : 1 + rand(std::min<uint64_t>(h.live, 2 * kBatch));
      if (rand(2) == 0) {
        h.ref->Uncharge(Pages(n));
      } else {
        h.ref->UnchargeDirect(Pages(n));
      }
      h.live -= n;
    } else if (r < 77) {
      // ---- SetMax on a group this worker owns (setters serialized) ----
      std::vector<size_t> owned;
      for (size_t i = 0; i < w.held.size(); ++i) {
        if (w.held[i].owned) owned.push_back(i);
      }
      if (owned.empty()) continue;
      Held& h = w.held[owned[rand(owned.size())]];
      const Pages max =
          rand(4) == 0 ? kPageCounterMax : Pages(rand(2 * kLevel1Max));
      const Status s = h.ref->SetMax(max);
      if (!s.ok()) Complain(w.problems, "SetMax: " + s.ToString());
    } else if (r < 82) {
      // ---- Create a level-2 or level-3 group ----
      if (std::count_if(w.held.begin(), w.held.end(),
                        [](const Held& h) { return h.owned; }) >= kMaxOwned) {
        continue;
      }
      Group* parent = level1_[rand(kLevel1Groups)].get();
      if (rand(2) == 0 && !w.held.empty()) {
        Group* g = w.held[rand(w.held.size())].ref.get();
        if (g->depth() == 2) parent = g;
      }
      std::string name = name_prefix;
      name += std::to_string(next_name++);
      auto g = ctrl_->CreateGroup(*parent, name);
      if (g.ok()) {
        ++w.created;
        hold(std::move(g).value(), true);
      } else if (g.status().code() != StatusCode::kFailedPrecondition ||
                 parent->online()) {
        Complain(w.problems, "CreateGroup: " + g.status().ToString());
      }
    } else if (r < 86) {
      // ---- Remove a group this worker created ----
      std::vector<size_t> owned;
      for (size_t i = 0; i < w.held.size(); ++i) {
        if (w.held[i].owned) owned.push_back(i);
      }
      if (owned.empty()) continue;
      Held& h = w.held[owned[rand(owned.size())]];
      const Status s = ctrl_->RemoveGroup(*h.ref);
      if (s.ok()) {
        ++w.removed;
        h.owned = false;
      } else if (s.code() == StatusCode::kBusy) {
        ++w.busy;
      } else {
        Complain(w.problems, "RemoveGroup: " + s.ToString());
      }
    } else if (r < 92) {
      // ---- Find another worker's group ----
      if (w.held.size() >= kMaxHeld) drop_idle(kMaxHeld / 2);
      std::string path = Level1Name(static_cast<int>(rand(kLevel1Groups)));
      for (int depth = 2; depth <= 3; ++depth) {
        auto parent = ctrl_->Lookup(path);
        if (!parent.ok()) break;
        const std::vector<std::string> names = parent.value()->ChildNames();
        if (names.empty()) break;
        path += "/" + names[rand(names.size())];
        if (rand(2) == 0) break;
      }
      auto g = ctrl_->Lookup(path);
      if (g.ok()) {
        hold(std::move(g).value(), false);
      } else if (g.status().code() != StatusCode::kNotFound) {
        Complain(w.problems, "Lookup: " + g.status().ToString());
      }
    } else if (r < 96) {
      drop_idle(0);
    } else if (r < 99) {
      ctrl_->DrainAllStocks(rand(4) == 0 ? ctrl_->root() : *pick_group());
    } else {
      ctrl_->Reap();
    }
  }
}

void ChargeStressTest::RunObserver() {
  auto check = [this](const Group& g, uint64_t limit, uint64_t max) {
    const uint64_t usage = g.usage().raw();
    ++samples_;
    max_excess_ = std::max(
        max_excess_, static_cast<int64_t>(usage) - static_cast<int64_t>(max));
    if (usage > limit && observer_problems_.size() < 20) {
      observer_problems_.push_back(g.path() + ": usage " +
                                   std::to_string(usage) + " > " +
                                   std::to_string(limit));
    }
  };
  while (!stop_.load(std::memory_order_acquire)) {
    check(ctrl_->root(), kLevel1Groups * kLevel1Max + kSlack,
          kLevel1Groups * kLevel1Max);
    for (const GroupRef& a : level1_) {
      check(*a, kLevel1Max + kSlack, kLevel1Max);
      for (const std::string& name : a->ChildNames()) {
        const std::string path = a->path() + "/" + name;
        auto b = ctrl_->Lookup(path);
        if (!b.ok()) continue;  // removed meanwhile
        check(*b.value(), kLevel1Max + kSlack, kLevel1Max);
        for (const std::string& leaf : b.value()->ChildNames()) {
          auto c = ctrl_->Lookup(path + "/" + leaf);
          if (c.ok()) check(*c.value(), kLevel1Max + kSlack, kLevel1Max);
        }
      }
    }
    std::this_thread::yield();
  }
}

// Every group reachable from the root by Lookup, root excluded.
std::vector<GroupRef> OnlineGroups(Controller& ctrl) {
  std::vector<GroupRef> out;
  std::vector<std::string> paths{""};
  while (!paths.empty()) {
    const std::string path = paths.back();
    paths.pop_back();
    auto g = ctrl.Lookup(path);
    if (!g.ok()) continue;
    for (const std::string& name : g.value()->ChildNames()) {
      paths.push_back(path.empty() ? name : path + "/" + name);
    }
    if (!path.empty()) out.push_back(std::move(g).value());
  }
  return out;
}

TEST_F(ChargeStressTest, UsageMatchesLiveChargesAndStaysNearMax) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<Worker> workers(kThreads);
  std::thread observer([this] { RunObserver(); });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t, &workers] { RunWorker(t, workers[t]); });
  }
  for (std::thread& t : threads) t.join();
  stop_.store(true, std::memory_order_release);
  observer.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  Worker total;
  for (Worker& w : workers) {
    for (const std::string& p : w.problems) ADD_FAILURE() << p;
    total.charges += w.charges;
    total.refused += w.refused;
    total.offline_refused += w.offline_refused;
    total.created += w.created;
    total.removed += w.removed;
    total.busy += w.busy;
  }
  for (const std::string& p : observer_problems_) ADD_FAILURE() << p;
  std::printf(
      "%.2f s: %llu charges (%llu refused, %llu offline), %llu groups "
      "created, %llu removed, %llu busy; %llu samples, max excess %lld "
      "(bound %llu)\n",
      seconds, static_cast<unsigned long long>(total.charges),
      static_cast<unsigned long long>(total.refused),
      static_cast<unsigned long long>(total.offline_refused),
      static_cast<unsigned long long>(total.created),
      static_cast<unsigned long long>(total.removed),
      static_cast<unsigned long long>(total.busy),
      static_cast<unsigned long long>(samples_),
      static_cast<long long>(max_excess_),
      static_cast<unsigned long long>(kSlack));
  EXPECT_GT(total.refused, 0u);  // the limits were reached
  EXPECT_GT(total.removed, 0u);
  EXPECT_GT(samples_, 0u);

  // ---- Exact accounting once quiescent ----
  ctrl_->DrainAllStocks(ctrl_->root());
  // Pages held per group (online or not), over all workers.
  std::map<Group*, uint64_t> live;
  for (const GroupRef& a : level1_) live[a.get()] += 0;
  for (const Worker& w : workers) {
    for (const Held& h : w.held) live[h.ref.get()] += h.live;
  }
  uint64_t all = 0;
  for (const auto& [g, pages] : live) all += pages;
  for (const auto& [g, pages] : live) {
    uint64_t want = 0;
    for (const auto& [h, h_pages] : live) {
      if (h->IsDescendantOf(*g)) want += h_pages;
    }
    EXPECT_EQ(g->usage().raw(), want) << g->path();
    EXPECT_EQ(g->StockedPages(), Pages(0)) << g->path();
    EXPECT_EQ(g->memory().underflows(), 0u) << g->path();
  }
  EXPECT_EQ(ctrl_->root().usage().raw(), all);
  EXPECT_EQ(ctrl_->underflows(), 0u);
  EXPECT_EQ(underflow_reports_.load(), 0u);
  EXPECT_EQ(leak_reports_.load(), 0u);
  EXPECT_EQ(other_reports_.load(), 0u);

  // ---- Uncharge everything ----
  for (Worker& w : workers) {
    for (Held& h : w.held) {
      if (h.live == 0) continue;
      if (h.live % 2 == 0) {
        h.ref->Uncharge(Pages(h.live));
      } else {
        h.ref->UnchargeDirect(Pages(h.live));
      }
      h.live = 0;
    }
  }
  ctrl_->DrainAllStocks(ctrl_->root());
  for (const auto& [g, pages] : live) {
    EXPECT_EQ(g->usage(), Pages(0)) << g->path();
  }
  EXPECT_EQ(ctrl_->root().usage(), Pages(0));

  // ---- Group lifetime ----
  live.clear();
  workers.clear();  // drops every worker's handle
  ctrl_->Reap();
  std::vector<GroupRef> online = OnlineGroups(*ctrl_);
  EXPECT_EQ(ctrl_->live_groups(), 1 + static_cast<int64_t>(online.size()));
  // Remove deepest first, so that no removal is refused for children.
  std::sort(online.begin(), online.end(),
            [](const GroupRef& a, const GroupRef& b) {
              return a->depth() > b->depth();
            });
  for (GroupRef& g : online) {
    EXPECT_TRUE(ctrl_->RemoveGroup(*g).ok()) << g->path();
  }
  online.clear();
  level1_.clear();
  ctrl_->Reap();
  EXPECT_EQ(ctrl_->live_groups(), 1);
  EXPECT_EQ(ctrl_->underflows(), 0u);
  EXPECT_EQ(leak_reports_.load(), 0u);
}

}  // namespace
}  // namespace umemcg

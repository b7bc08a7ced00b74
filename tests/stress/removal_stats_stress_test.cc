// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Page statistics while groups are removed under charges (issue 13 item
// 3). A remover thread keeps building chains top/mid/leaf under the root
// and removing them bottom-up, so removals happen at leaf, middle and top
// level; charger threads pick a group of the current chains (any level)
// and charge it with a page statistic (anon or file), racing the removal
// of exactly that group, and later uncharge what they hold (through the
// stock or directly), often after the group was removed. Fake CPUs shared
// by several threads make the try-lock fallbacks run too.
//
// At quiescence, with every stock drained: for every live group and the
// root, each statistic equals the pages the chargers still hold in its
// subtree (a removed group stays in its parent's subtree); after the
// chargers uncharge everything, every statistic and usage is zero.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "umemcg/umemcg.h"

namespace umemcg {
namespace {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kRounds = 1500;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
constexpr int kRounds = 1500;
#else
constexpr int kRounds = 6000;
#endif
#else
constexpr int kRounds = 6000;
#endif

constexpr int kChargers = 4;
constexpr int kNrCpus = 3;
constexpr StatItem kItems[] = {StatItem::kAnon, StatItem::kFile};

struct Held {
  GroupRef group;
  uint64_t pages;
  int item;
};

// Chains the remover publishes; chargers pick from them.
struct Pool {
  std::mutex mu;
  std::vector<GroupRef> groups;  // guarded by mu

  GroupRef Pick(std::mt19937& rng) {
    std::lock_guard<std::mutex> lock(mu);
    if (groups.empty()) return GroupRef();
    return groups[rng() % groups.size()];
  }
};

TEST(RemovalStatsStressTest, StatisticsEqualLiveChargesAtEveryLevel) {
  ControllerOptions options;
  options.cpu_source = CpuSource::kFake;
  options.nr_cpus = kNrCpus;
  options.charge_group_metadata = false;  // exact page counts
  options.stats_flush_period = std::chrono::nanoseconds(0);
  std::atomic<int> errors{0};
  options.error_hook = [&errors](const ErrorReport&) { errors.fetch_add(1); };
  std::unique_ptr<Controller> ctrl = Controller::Create(options).value();
  Controller& c = *ctrl;

  Pool pool;
  std::atomic<bool> stop{false};
  std::vector<std::vector<Held>> held(kChargers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kChargers; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937 rng(static_cast<unsigned>(w) + 1);
      std::vector<Held>& mine = held[static_cast<size_t>(w)];
      while (!stop.load(std::memory_order_relaxed)) {
        SetFakeCpu(static_cast<int>(rng() % kNrCpus));
        if (mine.size() < 48 && rng() % 3 != 0) {
          GroupRef g = pool.Pick(rng);
          if (!g) continue;
          // Over a batch half of the time: the slow path widens the race.
          const uint64_t n = rng() % 2 == 0 ? 1 + rng() % 4 : 65 + rng() % 8;
          const int item = static_cast<int>(rng() % 2);
          if (g->TryCharge(Pages(n), ChargeFlags::kNone, kItems[item]).ok()) {
            mine.push_back({std::move(g), n, item});
          }
        } else if (!mine.empty()) {
          const size_t i = rng() % mine.size();
          Held h = std::move(mine[i]);
          mine[i] = std::move(mine.back());
          mine.pop_back();
          if (rng() % 2 == 0) {
            h.group->Uncharge(Pages(h.pages), kItems[h.item]);
          } else {
            h.group->UnchargeDirect(Pages(h.pages), kItems[h.item]);
          }
        }
      }
    });
  }
  // The remover: chains top/mid/leaf, removed bottom-up.
  {
    std::mt19937 rng(99);
    for (int round = 0; round < kRounds; ++round) {
      SetFakeCpu(static_cast<int>(rng() % kNrCpus));
      const std::string suffix = std::to_string(round % 3);
      GroupRef top = c.CreateGroup(c.root(), "top" + suffix).value();
      GroupRef mid = c.CreateGroup(*top, "mid").value();
      GroupRef leaf = c.CreateGroup(*mid, "leaf").value();
      {
        std::lock_guard<std::mutex> lock(pool.mu);
        pool.groups = {top, mid, leaf};
      }
      for (GroupRef* g : {&leaf, &mid, &top}) {
        std::this_thread::yield();
        ASSERT_TRUE(c.RemoveGroup(**g).ok());
      }
    }
    // Live groups to check at the end too.
    GroupRef top = c.CreateGroup(c.root(), "live").value();
    GroupRef mid = c.CreateGroup(*top, "mid").value();
    GroupRef leaf = c.CreateGroup(*mid, "leaf").value();
    std::lock_guard<std::mutex> lock(pool.mu);
    pool.groups = {top, mid, leaf};
  }
  // Let the chargers use the live chain for a while.
  for (int i = 0; i < 2000; ++i) std::this_thread::yield();
  stop.store(true);
  for (auto& t : threads) t.join();

  // Quiescent: every statistic of every live group and the root equals
  // the pages held in its subtree (removed groups count in their parent).
  c.DrainAllStocks(c.root());
  std::vector<GroupRef> live;
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    live = pool.groups;
  }
  live.emplace_back(&c.root());
  for (const GroupRef& g : live) {
    int64_t expected[2] = {0, 0};
    for (const auto& mine : held) {
      for (const Held& h : mine) {
        if (h.group->IsDescendantOf(*g)) {
          expected[h.item] += static_cast<int64_t>(h.pages);
        }
      }
    }
    for (int item = 0; item < 2; ++item) {
      EXPECT_EQ(g->StatExact(kItems[item]), expected[item])
          << "group '" << g->path() << "' item "
          << c.StatItemName(kItems[item]);
    }
  }
  uint64_t all = 0;
  for (const auto& mine : held) {
    for (const Held& h : mine) all += h.pages;
  }
  EXPECT_EQ(c.root().usage(), Pages(all));

  // Everything back: all zero, at every level.
  for (auto& mine : held) {
    for (Held& h : mine) h.group->Uncharge(Pages(h.pages), kItems[h.item]);
    mine.clear();
  }
  c.DrainAllStocks(c.root());
  for (const GroupRef& g : live) {
    for (StatItem item : kItems) {
      EXPECT_EQ(g->StatExact(item), 0)
          << "group '" << g->path() << "' item " << c.StatItemName(item);
    }
    EXPECT_EQ(g->usage(), Pages(0)) << g->path();
  }
  EXPECT_EQ(errors.load(), 0);
  EXPECT_TRUE(c.CheckInvariants().ok());
  live.clear();
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    pool.groups.clear();
  }
}

}  // namespace
}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The page stock on the real CPU source, with its hit paths committed by
// rseq and by the try-lock (ControllerOptions::stock_rseq), under the
// fixed and the adaptive batch policy.
//
// BalancedAtQuiescence: more threads than CPUs charge and uncharge pages
// of more groups than a stock has slots (evictions), in sizes around the
// batch (hits, misses, overflows), while a drainer empties every stock
// (the locked, fenced path racing the commits) and samples each group's
// stocked pages against nr_cpus x the largest batch it has had. At the end
// every page must balance exactly and CheckInvariants pass.
//
// LimitPressure (the adaptive policy's promise): a group at 95% of its max,
// two threads (one per CPU where there are two) churning pages with and
// without kMayReclaim. The workload is sized so that fixed batch 64 can
// never be refused (real usage + 2 x 2 x 64 stocked + in-flight charges
// stays under max); the adaptive policy must not be refused either, nor
// call the OOM handler, and its stocked pages stay within its bound.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
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
constexpr int kOps = 30000;
#else
constexpr int kOps = 200000;
#endif

struct Param {
  bool rseq;
  BatchPolicy policy;
};

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(info.param.rseq ? "Rseq" : "TryLock") +
         (info.param.policy == BatchPolicy::kAdaptive ? "Adaptive" : "Fixed");
}

std::unique_ptr<Controller> Make(const Param& p, std::atomic<int>* errors,
                                 int stock_slots, OomHandler oom = nullptr) {
  ControllerOptions o;
  o.cpu_source = CpuSource::kAuto;  // rseq where glibc registered it
  o.stock_rseq = p.rseq;
  o.batch_policy = p.policy;
  o.batch = 64;
  o.batch_max = 512;
  o.stock_slots = stock_slots;
  o.charge_group_metadata = false;  // exact page counts
  o.stats_flush_period = std::chrono::nanoseconds(0);
  o.error_hook = [errors](const ErrorReport&) { errors->fetch_add(1); };
  o.oom_handler = std::move(oom);
  auto c = Controller::Create(std::move(o));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

class StockStressTest : public ::testing::TestWithParam<Param> {};

TEST_P(StockStressTest, BalancedAtQuiescence) {
  std::atomic<int> errors{0};
  std::unique_ptr<Controller> ctrl = Make(GetParam(), &errors, 3);
  ASSERT_NE(ctrl, nullptr);
  std::printf("stock_rseq %d\n", ctrl->info().stock_rseq ? 1 : 0);
  std::vector<GroupRef> groups;
  GroupRef top = ctrl->CreateGroup(ctrl->root(), "top").value();
  for (int i = 0; i < 5; ++i) {
    std::string name = "g";
    name += std::to_string(i);
    groups.push_back(ctrl->CreateGroup(*top, name).value());
  }
  const int nr_threads =
      2 * static_cast<int>(std::thread::hardware_concurrency()) + 1;
  std::atomic<bool> stop{false};
  std::atomic<int> over_bound{0};
  std::vector<std::atomic<int>> max_batch(groups.size());
  for (auto& m : max_batch) m.store(64);
  std::vector<std::thread> threads;
  for (int t = 0; t < nr_threads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t) * 7919 + 1);
      std::vector<std::pair<size_t, uint64_t>> live;
      for (int n = 0; n < kOps; ++n) {
        const uint64_t r = rng();
        if (live.empty() || r % 8 < 5) {
          const size_t g = (r >> 8) % groups.size();
          // Mostly small (hits), sometimes around and above a batch.
          const uint64_t pages =
              (r >> 16) % 16 == 0 ? 1 + (r >> 24) % 700 : 1 + (r >> 24) % 8;
          ASSERT_TRUE(groups[g]->TryCharge(Pages(pages)).ok());
          live.emplace_back(g, pages);
          int seen = max_batch[g].load(std::memory_order_relaxed);
          const int b = groups[g]->batch();
          while (b > seen && !max_batch[g].compare_exchange_weak(seen, b)) {
          }
        } else {
          const size_t i = (r >> 12) % live.size();
          const auto [g, pages] = live[i];
          live[i] = live.back();
          live.pop_back();
          if ((r >> 40) % 8 == 0) {
            groups[g]->UnchargeDirect(Pages(pages));
          } else {
            groups[g]->Uncharge(Pages(pages));
          }
        }
        if (live.size() > 200) {
          for (const auto& [g, pages] : live) groups[g]->Uncharge(Pages(pages));
          live.clear();
        }
      }
      for (const auto& [g, pages] : live) groups[g]->Uncharge(Pages(pages));
    });
  }
  std::thread drainer([&] {
    const uint64_t nr_cpus = static_cast<uint64_t>(ctrl->info().nr_cpus);
    while (!stop.load()) {
      for (size_t g = 0; g < groups.size(); ++g) {
        // Unlocked, racing the stocks: bounded by the largest batch the
        // group had (a slot never holds more than the batch it was
        // filled under).
        const uint64_t stocked = groups[g]->StockedPages().raw();
        const int b = std::max(max_batch[g].load(), groups[g]->batch());
        if (stocked > nr_cpus * static_cast<uint64_t>(b)) over_bound++;
      }
      ctrl->DrainAllStocks(*top);
      std::this_thread::yield();
    }
  });
  for (auto& th : threads) th.join();
  stop.store(true);
  drainer.join();
  ctrl->DrainAllStocks(ctrl->root());
  for (const GroupRef& g : groups) EXPECT_EQ(g->usage(), Pages(0)) << g->name();
  EXPECT_EQ(top->usage(), Pages(0));
  EXPECT_EQ(ctrl->root().usage(), Pages(0));
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(over_bound.load(), 0);
  Status s = ctrl->CheckInvariants();
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_P(StockStressTest, LimitPressure) {
  std::atomic<int> errors{0};
  std::atomic<int> oom_calls{0};
  std::unique_ptr<Controller> ctrl =
      Make(GetParam(), &errors, 7, [&oom_calls](const OomContext&) {
        oom_calls.fetch_add(1);
        return OomOutcome{};
      });
  ASSERT_NE(ctrl, nullptr);
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  constexpr uint64_t kMax = 40000;
  constexpr uint64_t kBallast = kMax * 95 / 100;  // 38000
  constexpr uint64_t kHeldMax = 400;              // per thread
  constexpr uint64_t kChargeMax = 16;
  constexpr int kThreads = 2;
  // Fixed batch 64 is never refused: real usage + per-CPU stocks (a slot
  // and a batch in flight) + one speculative batch per thread fit.
  static_assert(kBallast + kThreads * kHeldMax + kThreads * 2 * 64 +
                    kThreads * 64 + kChargeMax <=
                kMax);
  ASSERT_TRUE(g->SetMax(Pages(kMax)).ok());
  ASSERT_TRUE(g->TryCharge(Pages(kBallast)).ok());
  ASSERT_EQ(g->usage(), Pages(kBallast));  // larger than a batch: exact
  // Pinned one per CPU where the machine has two (else they share one).
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<int> refused{0};
  std::atomic<int> over_bound{0};
  std::atomic<bool> stop{false};
  std::atomic<int> max_batch{g->batch()};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(static_cast<unsigned>(t) % cpus, &set);
      (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
      std::mt19937_64 rng(static_cast<uint64_t>(t) + 11);
      std::vector<uint64_t> held;
      uint64_t held_pages = 0;
      for (int n = 0; n < kOps; ++n) {
        const uint64_t r = rng();
        const uint64_t pages = 1 + (r >> 8) % kChargeMax;
        if (r % 2 == 0 && held_pages + pages <= kHeldMax) {
          const ChargeFlags flags =
              (r >> 20) % 4 == 0 ? kChargeDefault : ChargeFlags::kNone;
          if (g->TryCharge(Pages(pages), flags).ok()) {
            held.push_back(pages);
            held_pages += pages;
          } else {
            refused.fetch_add(1);
          }
          int seen = max_batch.load();
          const int b = g->batch();
          while (b > seen && !max_batch.compare_exchange_weak(seen, b)) {
          }
        } else if (!held.empty()) {
          g->Uncharge(Pages(held.back()));
          held_pages -= held.back();
          held.pop_back();
        }
      }
      for (uint64_t p : held) g->Uncharge(Pages(p));
    });
  }
  std::thread sampler([&] {
    const uint64_t nr_cpus = static_cast<uint64_t>(ctrl->info().nr_cpus);
    while (!stop.load()) {
      const uint64_t stocked = g->StockedPages().raw();
      if (stocked > nr_cpus * static_cast<uint64_t>(
                                  std::max(max_batch.load(), g->batch()))) {
        over_bound++;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  for (auto& th : threads) th.join();
  stop.store(true);
  sampler.join();
  std::printf("refused %d, oom calls %d, batch now %d, largest %d\n",
              refused.load(), oom_calls.load(), g->batch(), max_batch.load());
  EXPECT_EQ(refused.load(), 0);
  EXPECT_EQ(oom_calls.load(), 0);
  EXPECT_EQ(over_bound.load(), 0);
  if (GetParam().policy == BatchPolicy::kAdaptive) {
    // Near the limit the batch never grows past the base.
    EXPECT_LE(max_batch.load(), 64);
  }
  ctrl->DrainAllStocks(ctrl->root());
  EXPECT_EQ(g->usage(), Pages(kBallast));
  g->UnchargeDirect(Pages(kBallast));
  EXPECT_EQ(errors.load(), 0);
  Status s = ctrl->CheckInvariants();
  EXPECT_TRUE(s.ok()) << s.ToString();
}

INSTANTIATE_TEST_SUITE_P(Paths, StockStressTest,
                         ::testing::Values(Param{true, BatchPolicy::kFixed},
                                           Param{true, BatchPolicy::kAdaptive},
                                           Param{false, BatchPolicy::kFixed},
                                           Param{false,
                                                 BatchPolicy::kAdaptive}),
                         Name);

}  // namespace
}  // namespace umemcg

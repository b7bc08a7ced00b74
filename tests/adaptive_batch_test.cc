// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// BatchPolicy::kAdaptive: the decision rule (src/adaptive_batch.h) on its
// own, then the policy inside a controller (fake CPUs, manual clock):
// growth under a fast workload far from the limits, shrinking and draining
// as the room narrows, memory.stock, and the promise that it never refuses
// a charge the fixed base batch would fit.

#include "adaptive_batch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "umemcg/umemcg.h"

namespace umemcg {
namespace {

using internal::AdaptiveBatch;
using testing::TestController;

constexpr int64_t kFast = AdaptiveBatch::kFastNs / 10;
constexpr int64_t kSteady = AdaptiveBatch::kFastNs * 10;  // neither
constexpr int64_t kIdle = AdaptiveBatch::kIdleNs * 2;
constexpr uint64_t kHuge = uint64_t{1} << 40;

AdaptiveBatch Policy(int nr_cpus = 4) {
  return AdaptiveBatch{.base = 64, .cap = 1024, .nr_cpus = nr_cpus};
}

TEST(AdaptiveBatchRuleTest, StaysAtTheBaseWithoutAHighRate) {
  const AdaptiveBatch p = Policy();
  EXPECT_EQ(p.Next(64, kHuge, kSteady), 64);
  EXPECT_EQ(p.Next(64, kHuge, kIdle), 64);
}

TEST(AdaptiveBatchRuleTest, DoublesUpToTheCapAtAHighRateFarFromLimits) {
  const AdaptiveBatch p = Policy();
  std::vector<int> seen;
  int b = 64;
  for (int i = 0; i < 10; ++i) {
    b = p.Next(b, kHuge, kFast);
    seen.push_back(b);
  }
  EXPECT_EQ(seen, (std::vector<int>{128, 256, 512, 1024, 1024, 1024, 1024, 1024,
                                    1024, 1024}));
}

TEST(AdaptiveBatchRuleTest, NeverAboveTheBudgetOfTheRoom) {
  // Every output: nr_cpus x batch <= room / kRoomShare, whatever the input.
  for (int nr_cpus : {1, 2, 4, 64}) {
    const AdaptiveBatch p = Policy(nr_cpus);
    for (int b : {0, 1, 3, 32, 64, 100, 128, 512, 1024}) {
      for (uint64_t room : {uint64_t{0}, uint64_t{7}, uint64_t{100},
                            uint64_t{5000}, uint64_t{70000}, kHuge}) {
        for (int64_t t : {kFast, kSteady, kIdle}) {
          const int next = p.Next(b, room, t);
          EXPECT_GE(next, 0);
          EXPECT_LE(next, p.cap);
          EXPECT_LE(
              static_cast<uint64_t>(next) * nr_cpus * AdaptiveBatch::kRoomShare,
              std::max<uint64_t>(
                  room,
                  static_cast<uint64_t>(std::min(b, p.base)) *  // unchanged
                      nr_cpus * AdaptiveBatch::kRoomShare))
              << "b " << b << " room " << room << " t " << t;
          if (next > b || (static_cast<uint64_t>(b) > p.Limit(room))) {
            EXPECT_LE(static_cast<uint64_t>(next), p.Limit(room))
                << "b " << b << " room " << room << " t " << t;
          }
        }
      }
    }
  }
}

TEST(AdaptiveBatchRuleTest, ShrinksToHalfTheLimitAndToZeroAtTheLimit) {
  const AdaptiveBatch p = Policy(2);
  // room 1600 on 2 CPUs: limit 100, so 512 drops to 50.
  EXPECT_EQ(p.Next(512, 1600, kFast), 50);
  EXPECT_EQ(p.Next(64, 1600, kFast), 64);  // within the limit: holds
  EXPECT_EQ(p.Next(64, 800, kFast), 25);   // below the base too
  EXPECT_EQ(p.Next(64, 15, kFast), 0);     // limit 0: no stock at all
  EXPECT_EQ(p.Next(0, 15, kFast), 0);
}

TEST(AdaptiveBatchRuleTest, GrowsBackTowardTheBaseWithoutARateCondition) {
  const AdaptiveBatch p = Policy(2);
  int b = 0;
  std::vector<int> seen;
  for (int i = 0; i < 9; ++i) {
    b = p.Next(b, kHuge, kIdle);
    seen.push_back(b);
  }
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 64, 64}));
}

TEST(AdaptiveBatchRuleTest, IdleGroupsHalveBackToTheBase) {
  const AdaptiveBatch p = Policy();
  EXPECT_EQ(p.Next(1024, kHuge, kIdle), 512);
  EXPECT_EQ(p.Next(128, kHuge, kIdle), 64);
  EXPECT_EQ(p.Next(100, kHuge, kIdle), 64);
}

TEST(AdaptiveBatchRuleTest, ConvergesAndHoldsUnderAFluctuatingRoom) {
  // From any start, a fixed workload converges within a few events, and
  // then a room that moves within a factor of 2 never moves the batch.
  const AdaptiveBatch p = Policy(4);
  for (int start : {0, 1, 64, 1024}) {
    int b = start;
    const uint64_t room = 200000;  // limit 6250: settles at 1024 (cap)
    for (int i = 0; i < 20; ++i) b = p.Next(b, room, kFast);
    const int settled = b;
    std::mt19937_64 rng(start + 1);
    for (int i = 0; i < 1000; ++i) {
      const uint64_t r = room / 2 + 1 + rng() % (room / 2);
      EXPECT_EQ(p.Next(b, r, kFast), settled) << "room " << r;
    }
  }
  // Near a limit: settles within (limit / 4, limit / 2] and holds while
  // the room stays within a factor of two.
  for (int start : {0, 64, 1024}) {
    int b = start;
    const uint64_t room = 5000;  // limit 156
    for (int i = 0; i < 20; ++i) b = p.Next(b, room, kFast);
    EXPECT_GT(b, 39) << start;
    EXPECT_LE(b, 78) << start;
    const int settled = b;
    int held = 0;
    for (uint64_t r = room / 2; r <= room * 2; r += 7) {
      if (p.Limit(r) >= static_cast<uint64_t>(settled) &&
          p.Limit(r) / 2 < 2 * static_cast<uint64_t>(settled)) {
        EXPECT_EQ(p.Next(b, r, kFast), settled) << "room " << r;
        ++held;
      }
    }
    EXPECT_GT(held, 100);
  }
}

TEST(AdaptiveBatchRuleTest, ARateThatFollowsTheBatchDoesNotOscillate) {
  // A steady flow of pages: the interval between batch events grows with
  // the batch. The sequence of batches rises, then stays.
  const AdaptiveBatch p = Policy(2);
  for (int64_t ns_per_page : {1, 10, 100, 1000, 100000}) {
    int b = 64;
    std::vector<int> seen;
    for (int i = 0; i < 40; ++i) {
      b = p.Next(b, kHuge, ns_per_page * b);
      seen.push_back(b);
    }
    EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end())) << ns_per_page;
    EXPECT_EQ(seen[20], seen.back()) << ns_per_page;
  }
}

// ---- Inside a controller ----

ControllerOptions Adaptive(int batch = 64, int batch_max = 1024) {
  ControllerOptions o;
  o.batch = batch;
  o.batch_policy = BatchPolicy::kAdaptive;
  o.batch_max = batch_max;
  o.stats_flush_period = std::chrono::nanoseconds(0);
  return o;
}

// Charges and uncharges `rounds` x `pages` pages on fake CPU 0 with the
// manual clock advancing `step` per charge.
void Churn(TestController& t, Group& g, int rounds, uint64_t pages,
           std::chrono::nanoseconds step) {
  for (int i = 0; i < rounds; ++i) {
    ASSERT_TRUE(g.TryCharge(Pages(pages)).ok());
    t.clock.Advance(step);
  }
  for (int i = 0; i < rounds; ++i) {
    g.Uncharge(Pages(pages));
    t.clock.Advance(step);
  }
}

TEST(AdaptiveBatchTest, OptionsAreValidated) {
  ControllerOptions o = Adaptive(64, 32);
  EXPECT_EQ(Controller::Create(o).status().code(),
            StatusCode::kInvalidArgument);
  o.batch_max = 4097;
  EXPECT_EQ(Controller::Create(o).status().code(),
            StatusCode::kInvalidArgument);
  o.batch_max = 4096;
  auto c = Controller::Create(o);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value()->info().batch_policy, BatchPolicy::kAdaptive);
  EXPECT_EQ(c.value()->info().batch_max, 4096);
  // Fixed: batch_max is ignored and reported as the batch.
  ControllerOptions f;
  f.batch = 4096;
  f.batch_max = 1;
  auto fixed = Controller::Create(f);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed.value()->info().batch_max, 4096);
  f.batch = 4097;
  EXPECT_EQ(Controller::Create(f).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(AdaptiveBatchTest, GrowsUnderAFastWorkloadAndShowsInMemoryStock) {
  TestController t(Adaptive(), 4);
  GroupRef g = t.Make("g");
  EXPECT_EQ(g->batch(), 64);
  Churn(t, *g, 4000, 8, std::chrono::nanoseconds(100));
  EXPECT_EQ(g->batch(), 1024);
  EXPECT_EQ(g->StockSlackBound(), Pages(4 * 1024));
  EXPECT_LE(g->StockedPages(), g->StockSlackBound());
  auto text = g->ReadFile("memory.stock");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text.value(), "stocked " +
                              std::to_string(g->StockedPages().in_bytes()) +
                              "\nbatch 1024\nslack_bound " +
                              std::to_string(4 * 1024 * kPageSize) + "\n");
  // A fixed controller never moves it.
  TestController f({.batch = 64}, 4);
  GroupRef h = f.Make("h");
  Churn(f, *h, 4000, 8, std::chrono::nanoseconds(100));
  EXPECT_EQ(h->batch(), 64);
}

TEST(AdaptiveBatchTest, SlowWorkloadsKeepTheBase) {
  TestController t(Adaptive(), 4);
  GroupRef g = t.Make("g");
  Churn(t, *g, 2000, 8, std::chrono::milliseconds(1));
  EXPECT_EQ(g->batch(), 64);
}

TEST(AdaptiveBatchTest, ANarrowingRoomShrinksTheBatchAndDrainsTheStocks) {
  TestController t(Adaptive(), 4);
  GroupRef parent = t.Make("p");
  GroupRef g = t.Make("p/g");
  // Grow on every CPU, leaving a grown stock on each.
  for (int cpu = 0; cpu < 4; ++cpu) {
    SetFakeCpu(cpu);
    Churn(t, *g, 2000, 8, std::chrono::nanoseconds(100));
    ASSERT_TRUE(g->TryCharge(Pages(1)).ok());
  }
  SetFakeCpu(0);
  ASSERT_EQ(g->batch(), 1024);
  EXPECT_GT(g->StockedPages(), Pages(4 * 64));
  // The parent's max now leaves a room of about 4000 pages: the limit on
  // 4 CPUs is 125, so the next batch event shrinks the batch to at most
  // 62 and returns every slot's pages beyond it.
  const uint64_t usage = parent->usage().raw();
  ASSERT_TRUE(parent->SetMax(Pages(usage + 4000), ChargeFlags::kNone).ok());
  ASSERT_TRUE(g->TryCharge(Pages(2000)).ok());  // a batch event
  EXPECT_LE(g->batch(), 62);
  EXPECT_LE(g->StockedPages(), g->StockSlackBound());
  const uint64_t room = parent->memory().max().raw() - parent->usage().raw();
  EXPECT_LE(g->StockSlackBound().raw() * AdaptiveBatch::kRoomShare, room);
  g->Uncharge(Pages(2000));
  for (int cpu = 0; cpu < 4; ++cpu) {
    SetFakeCpu(cpu);
    g->Uncharge(Pages(1));
  }
  SetFakeCpu(0);
  t.Drain();
  EXPECT_EQ(g->usage(), Pages(0));
  EXPECT_TRUE(t.errors.empty());
}

TEST(AdaptiveBatchTest, NeverRefusesWhatTheBaseBatchWouldFit) {
  // Grown stocks on CPUs 1-3 hold most of the room; a charge without
  // kMayReclaim on CPU 0 that fits once they are back must not fail. The
  // same charge under fixed batch 64 fits (its stocks are small).
  for (BatchPolicy policy : {BatchPolicy::kFixed, BatchPolicy::kAdaptive}) {
    ControllerOptions o = Adaptive();
    o.batch_policy = policy;
    TestController t(o, 4);
    GroupRef g = t.Make("g");
    for (int cpu = 1; cpu < 4; ++cpu) {
      SetFakeCpu(cpu);
      Churn(t, *g, 2000, 8, std::chrono::nanoseconds(100));
      ASSERT_TRUE(g->TryCharge(Pages(1)).ok());
    }
    SetFakeCpu(0);
    // Room for what is in use, a base batch per other CPU and 200 more.
    ASSERT_TRUE(g->SetMax(Pages(g->usage().raw() - g->StockedPages().raw() +
                                3 * 64 + 200),
                          ChargeFlags::kNone)
                    .ok());
    const ChargeResult r = g->TryCharge(Pages(200), ChargeFlags::kNone);
    EXPECT_TRUE(r.ok()) << "policy " << static_cast<int>(policy) << " code "
                        << StatusCodeName(r.code);
    if (r.ok()) g->Uncharge(Pages(200));
    for (int cpu = 1; cpu < 4; ++cpu) {
      SetFakeCpu(cpu);
      g->Uncharge(Pages(1));
    }
    SetFakeCpu(0);
  }
}

TEST(AdaptiveBatchTest, NoRefusalOrOomCallTheBaseBatchWouldNotMake) {
  // One random sequence (two fake CPUs taking turns, charges with and
  // without kMayReclaim, uncharges) near a group's max, applied in
  // lockstep to a fixed batch-64 controller and an adaptive one. After
  // every charge both hold the same pages (a charge only one of them made
  // is given back), so every step compares the two in the same state: the
  // adaptive one must never refuse a charge the fixed one made, nor call
  // the OOM handler when the fixed one did not; its stocked pages stay
  // within its bound, and near the limit its batch drops below 64.
  struct Side {
    std::unique_ptr<TestController> t;
    GroupRef g;
    int oom_calls = 0;
  };
  auto make = [](BatchPolicy policy, Side* side) {
    ControllerOptions o = Adaptive();
    o.batch_policy = policy;
    o.oom_handler = [side](const OomContext&) {
      ++side->oom_calls;
      return OomOutcome{};
    };
    side->t = std::make_unique<TestController>(o, 2);
    side->g = side->t->Make("g");
  };
  Side fixed, adaptive;
  make(BatchPolicy::kFixed, &fixed);
  make(BatchPolicy::kAdaptive, &adaptive);
  constexpr uint64_t kMax = 20000;
  for (Side* side : {&fixed, &adaptive}) {
    ASSERT_TRUE(side->g->SetMax(Pages(kMax)).ok());
    ASSERT_TRUE(side->g->TryCharge(Pages(kMax * 95 / 100)).ok());  // ballast
  }
  std::mt19937_64 rng(42);
  std::vector<uint64_t> held[2];
  int both_refused = 0, only_fixed_refused = 0, only_adaptive_refused = 0;
  int adaptive_extra_oom = 0;
  int min_batch = 64;
  for (int i = 0; i < 100000; ++i) {
    const int cpu = static_cast<int>(rng() % 2);
    const bool charge = rng() % 2 == 0;
    const uint64_t n = 1 + rng() % 16;
    const ChargeFlags flags =
        rng() % 4 == 0 ? kChargeDefault : ChargeFlags::kNone;
    SetFakeCpu(cpu);
    for (Side* side : {&fixed, &adaptive}) {
      side->t->clock.Advance(std::chrono::nanoseconds(50));
    }
    std::vector<uint64_t>& mine = held[cpu];
    if (charge) {
      const int oom_before = fixed.oom_calls;
      const int aoom_before = adaptive.oom_calls;
      const bool f = fixed.g->TryCharge(Pages(n), flags).ok();
      const bool a = adaptive.g->TryCharge(Pages(n), flags).ok();
      if (adaptive.oom_calls - aoom_before > fixed.oom_calls - oom_before) {
        ++adaptive_extra_oom;
      }
      if (f && a) {
        mine.push_back(n);
      } else if (f) {
        ++only_adaptive_refused;
        fixed.g->Uncharge(Pages(n));
      } else if (a) {
        ++only_fixed_refused;
        adaptive.g->Uncharge(Pages(n));
      } else {
        ++both_refused;
      }
    } else if (!mine.empty()) {
      fixed.g->Uncharge(Pages(mine.back()));
      adaptive.g->Uncharge(Pages(mine.back()));
      mine.pop_back();
    }
    ASSERT_LE(adaptive.g->StockedPages(), adaptive.g->StockSlackBound());
    min_batch = std::min(min_batch, adaptive.g->batch());
  }
  std::printf(
      "refused by both %d, only fixed 64 %d, only adaptive %d; oom calls "
      "%d / %d; adaptive batch down to %d\n",
      both_refused, only_fixed_refused, only_adaptive_refused, fixed.oom_calls,
      adaptive.oom_calls, min_batch);
  EXPECT_GT(both_refused + only_fixed_refused, 0)
      << "the sequence must reach the limit";
  EXPECT_EQ(only_adaptive_refused, 0);
  EXPECT_EQ(adaptive_extra_oom, 0);
  EXPECT_LE(adaptive.oom_calls, fixed.oom_calls);
  EXPECT_LT(min_batch, 64) << "near the limit the batch shrinks";
  for (int cpu = 0; cpu < 2; ++cpu) {
    SetFakeCpu(cpu);
    for (uint64_t n : held[cpu]) {
      fixed.g->Uncharge(Pages(n));
      adaptive.g->Uncharge(Pages(n));
    }
  }
  SetFakeCpu(0);
  for (Side* side : {&fixed, &adaptive}) {
    side->g->UnchargeDirect(Pages(kMax * 95 / 100));
    side->t->Drain();
    EXPECT_EQ(side->g->usage(), Pages(0));
    side->g.reset();
  }
}

}  // namespace
}  // namespace umemcg

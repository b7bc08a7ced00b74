// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Differential test: one random single-threaded operation sequence is
// applied to a real Controller (fake CPUs, the test thread hopping between
// them so several stocks fill) and to the naive Model (tests/model), and the
// two must agree exactly.
//
// The model has no stock, so the comparison accounts for it precisely:
//
//   - After every operation: for every group, real usage = model usage +
//     the pages cached in stocks for that group and its descendants
//     (Group::StockedPages), offline groups cache nothing, and each group's
//     stock stays within StockSlackBound(). At "quiescent points" all stocks
//     are drained and real usage must equal the model's.
//   - A charge with kMayReclaim (no reclaimers, no OOM handler): pages held
//     in other CPUs' stocks only cost a drain, so whenever the model says
//     the charge fits, the real charge must succeed, and whenever the real
//     charge fails, it must name the model's refusing level. The one
//     legitimate difference: the model refuses (usage at some level is past
//     max after a forced charge or a lowered max) but this CPU's stock holds
//     enough pages of the group, which are already charged; the real charge
//     then succeeds without changing any usage (checked), and the model is
//     charged unconditionally to stay in step.
//   - A third of the charges drain every stock first; then real and model must
//     agree on everything (ok, forced, limited_by).
//   - A forced charge (kNoFail / kHigh without kMayReclaim) never drains, so
//     without the pre-drain its `forced` / `limited_by` follow the real
//     usages (model usage + stock): forced at the first level where
//     real usage + n > max, unless served from this CPU's stock.
//   - CreateGroup, RemoveGroup and SetMax return the model's codes, and
//     every group's max and online state match. At quiescent points, after
//     Reap(), live_groups() counts exactly the online groups plus the
//     offline ones the test still references and their ancestors.
//
// Every Controller setting that changes the stock is covered: batch 1, 32,
// 64, 512 and 1 or 7 slots per CPU, and the adaptive batch policy.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/model.h"
#include "umemcg/umemcg.h"

namespace umemcg {
namespace {

using model::GroupId;
using model::kNoGroup;
using model::kRoot;
using model::Model;

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define UMEMCG_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define UMEMCG_TEST_SANITIZED 1
#endif
#endif

#ifdef UMEMCG_TEST_SANITIZED
constexpr int kSeeds = 5;
constexpr int kOpsPerSeed = 2000;
#else
constexpr int kSeeds = 10;
constexpr int kOpsPerSeed = 3000;
#endif

constexpr int kNrCpus = 4;
constexpr int kMaxDepth = 3;
constexpr int kMaxOnlineGroups = 24;

struct Variant {
  int batch;
  int stock_slots;
  BatchPolicy batch_policy = BatchPolicy::kFixed;
};

// What a run exercised (so a change that silently skips a path shows up).
struct Stats {
  uint64_t charges = 0;
  uint64_t refused = 0;
  uint64_t forced = 0;
  uint64_t stock_hits = 0;        // served from the stock (usage unchanged)
  uint64_t stock_past_limit = 0;  // ... while the model refused
  uint64_t quiescent = 0;

  void Add(const Stats& o) {
    charges += o.charges;
    refused += o.refused;
    forced += o.forced;
    stock_hits += o.stock_hits;
    stock_past_limit += o.stock_past_limit;
    quiescent += o.quiescent;
  }
};

// One random operation sequence against a Controller and a Model.
class Differential {
 public:
  Differential(Variant variant, uint32_t seed)
      : variant_(variant), tight_(seed % 2 == 1), rng_(seed) {
    ControllerOptions options;
    options.batch = variant.batch;
    options.stock_slots = variant.stock_slots;
    options.batch_policy = variant.batch_policy;
    options.cpu_source = CpuSource::kFake;
    options.nr_cpus = kNrCpus;
    options.charge_group_metadata = false;  // the model counts pages exactly
    options.error_hook = [this](const ErrorReport& r) {
      errors_.push_back(r.what);
    };
    SetFakeCpu(0);
    auto ctrl = Controller::Create(std::move(options));
    EXPECT_TRUE(ctrl.ok()) << ctrl.status().ToString();
    ctrl_ = std::move(ctrl).value();
    tracked_.push_back(Tracked{GroupRef(&ctrl_->root()), kRoot, 0});
  }

  ~Differential() { SetFakeCpu(0); }

  // Runs `ops` random operations, then empties the tree. Stops at the
  // first disagreement.
  void Run(int ops) {
    for (int i = 0; i < ops && !::testing::Test::HasFailure(); ++i) {
      if (Coin(4)) SetFakeCpu(static_cast<int>(Rand(kNrCpus + 2)));
      Step();
      if (!::testing::Test::HasFailure()) CheckConsistency();
      if (::testing::Test::HasFailure()) {
        ADD_FAILURE() << "after op " << i << "; recent ops:\n" << History();
      }
    }
    if (!::testing::Test::HasFailure()) Teardown();
  }

  const Stats& stats() const { return stats_; }

 private:
  // A group the test knows: every online group, and offline groups while
  // they still have live charges (or until dropped at random).
  struct Tracked {
    GroupRef ref;
    GroupId id;
    uint64_t live;  // pages charged to exactly this group, not uncharged
  };

  uint64_t Rand(uint64_t n) { return rng_() % n; }
  bool Coin(uint64_t one_in) { return Rand(one_in) == 0; }

  void Log(std::string line) {
    history_.push_back(std::move(line));
    if (history_.size() > 12) history_.pop_front();
  }
  std::string History() const {
    std::string out;
    for (const std::string& line : history_) out += "  " + line + "\n";
    return out;
  }

  std::string Path(GroupId id) const {
    return id == kRoot ? "<root>" : model_.path(id);
  }

  Tracked* Find(GroupId id) {
    for (Tracked& t : tracked_) {
      if (t.id == id) return &t;
    }
    return nullptr;
  }

  // Any tracked group, the root and offline ones included (rarely).
  Tracked& PickAny() {
    if (tracked_.size() == 1 || Coin(20)) return tracked_[0];
    return tracked_[1 + Rand(tracked_.size() - 1)];
  }

  // Mostly online non-root groups, often the previous target again (so
  // stocks get hit); the root or an offline one 1 in 10.
  Tracked& PickChargeTarget() {
    if (Coin(10)) return PickAny();
    if (Coin(2)) {
      Tracked* last = Find(last_charged_);
      if (last != nullptr && model_.online(last->id)) return *last;
    }
    std::vector<size_t> online;
    for (size_t i = 1; i < tracked_.size(); ++i) {
      if (model_.online(tracked_[i].id)) online.push_back(i);
    }
    if (online.empty()) return PickAny();
    return tracked_[online[Rand(online.size())]];
  }

  uint64_t PickCount() {
    const uint64_t r = Rand(1000);
    if (r < 10) return 0;
    if (r < 15) return kPageCounterMax.raw() + 1;  // kInvalidArgument
    if (r < 700) return 1 + Rand(8);
    if (r < 900) return 1 + Rand(2 * static_cast<uint64_t>(variant_.batch));
    return 1 + Rand(300);
  }

  void Step() {
    const uint64_t r = Rand(100);
    if (r < 8) {
      OpCreate();
    } else if (r < 12) {
      OpRemove();
    } else if (r < 45) {
      OpCharge(/*force=*/false);
    } else if (r < 51) {
      OpCharge(/*force=*/true);
    } else if (r < 66) {
      OpUncharge(/*direct=*/false);
    } else if (r < 76) {
      OpUncharge(/*direct=*/true);
    } else if (r < 86) {
      OpSetMax();
    } else if (r < 89) {
      OpDrop();
    } else if (r < 93) {
      OpDrainSubtree();
    } else {
      OpQuiescent();
    }
  }

  // ---- Operations ----

  void OpCreate() {
    std::vector<size_t> parents;
    int online = 0;
    for (size_t i = 0; i < tracked_.size(); ++i) {
      if (!model_.online(tracked_[i].id)) continue;
      ++online;
      if (model_.depth(tracked_[i].id) < kMaxDepth) parents.push_back(i);
    }
    if (online > kMaxOnlineGroups || parents.empty()) return;
    // Removed parents too, now and then (kFailedPrecondition).
    Tracked& parent =
        Coin(20) ? PickAny() : tracked_[parents[Rand(parents.size())]];
    std::string name = "g" + std::to_string(Rand(4));
    if (Coin(50)) name = Coin(2) ? "" : "a/b";  // kInvalidArgument
    Log("CreateGroup(" + Path(parent.id) + ", \"" + name + "\")");
    if (model_.depth(parent.id) >= kMaxDepth) return;
    StatusOr<GroupRef> real = ctrl_->CreateGroup(*parent.ref, name);
    GroupId id = kNoGroup;
    const StatusCode want = model_.CreateGroup(parent.id, name, &id);
    ASSERT_EQ(real.status().code(), want) << real.status().ToString();
    if (!real.ok()) return;
    GroupRef g = std::move(real).value();
    EXPECT_EQ(g->path(), model_.path(id));
    EXPECT_EQ(g->depth(), model_.depth(id));
    EXPECT_EQ(g->parent(), parent.ref.get());
    tracked_.push_back(Tracked{std::move(g), id, 0});
  }

  void OpRemove() {
    Tracked& t = PickAny();
    Log("RemoveGroup(" + Path(t.id) + ")");
    const Status real = ctrl_->RemoveGroup(*t.ref);
    ASSERT_EQ(real.code(), model_.RemoveGroup(t.id)) << real.ToString();
  }

  void OpCharge(bool force) {
    Tracked& t = PickChargeTarget();
    last_charged_ = t.id;
    const uint64_t n = PickCount();
    const bool predrain = Coin(3);
    ChargeFlags flags = ChargeFlags::kMayReclaim;
    if (force) flags = Coin(2) ? ChargeFlags::kNoFail : ChargeFlags::kHigh;
    Log(std::string(force ? "Force" : "Try") + "Charge(" + Path(t.id) + ", " +
        std::to_string(n) +
        ", flags=" + std::to_string(static_cast<uint32_t>(flags)) +
        ", predrain=" + std::to_string(predrain) +
        ", cpu=" + std::to_string(FakeCpu() % kNrCpus) + ")");
    if (predrain) ctrl_->DrainAllStocks(ctrl_->root());

    // The group and its ancestors, with their real usage before.
    std::vector<Group*> path;
    std::vector<uint64_t> before;
    for (Group* g = t.ref.get(); g != nullptr; g = g->parent()) {
      path.push_back(g);
      before.push_back(g->usage().raw());
    }
    auto usage_unchanged = [&] {
      for (size_t k = 0; k < path.size(); ++k) {
        if (path[k]->usage().raw() != before[k]) return false;
      }
      return true;
    };
    // The real group at model id `level` (an ancestor of t, or t).
    auto real_group = [&](GroupId level) -> Group* {
      if (level == kNoGroup) return nullptr;
      const size_t k = model_.depth(t.id) - model_.depth(level);
      return k < path.size() ? path[k] : nullptr;
    };

    const ChargeResult r = t.ref->TryCharge(Pages(n), flags);
    ++stats_.charges;
    EXPECT_EQ(r.throttle.count(), 0);
    model::ChargeOutcome want = force ? model_.ForceCharge(t.id, Pages(n))
                                      : model_.TryCharge(t.id, Pages(n));
    if (want.code != StatusCode::kOk &&
        want.code != StatusCode::kResourceExhausted) {
      // Bad input or an offline group: nothing happens in either.
      ASSERT_EQ(r.code, want.code);
      EXPECT_TRUE(usage_unchanged());
      return;
    }
    const bool charged_something = n > 0 && t.id != kRoot;
    if (r.ok() && charged_something && usage_unchanged()) ++stats_.stock_hits;

    if (!force) {
      if (want.ok()) {
        // Fits in the model: stock elsewhere may cost a drain, never a
        // failure.
        ASSERT_TRUE(r.ok()) << "real refused a charge the model fits: code "
                            << StatusCodeName(r.code) << " limited_by "
                            << (r.limited_by ? r.limited_by->path() : "-");
        EXPECT_FALSE(r.forced);
        EXPECT_EQ(r.limited_by, nullptr);
      } else if (r.ok()) {
        // Refused by the model, served from this CPU's stock of pages that
        // are already charged: usage must not move.
        EXPECT_FALSE(predrain) << "no stock is left after a full drain";
        EXPECT_TRUE(usage_unchanged())
            << "succeeded past the model's limit " << Path(want.limited_by);
        EXPECT_FALSE(r.forced);
        ++stats_.stock_past_limit;
        model_.ForceCharge(t.id, Pages(n));
      } else {
        ++stats_.refused;
        ASSERT_EQ(r.code, StatusCode::kResourceExhausted);
        EXPECT_EQ(r.limited_by, real_group(want.limited_by))
            << "real: " << (r.limited_by ? r.limited_by->path() : "-")
            << " model: " << Path(want.limited_by);
        return;
      }
    } else {
      ASSERT_TRUE(r.ok()) << StatusCodeName(r.code);
      if (r.forced) ++stats_.forced;
      if (predrain) {
        EXPECT_EQ(r.forced, want.forced);
        EXPECT_EQ(r.limited_by, real_group(want.limited_by));
      } else {
        // No drain on this path: the real usages decide.
        Group* over = nullptr;
        for (size_t k = 0; k < path.size() && over == nullptr; ++k) {
          const uint64_t max = path[k]->memory().max().raw();
          if (before[k] > max || n > max - before[k]) over = path[k];
        }
        if (over == nullptr) {
          EXPECT_FALSE(r.forced);
          EXPECT_EQ(r.limited_by, nullptr);
        } else if (r.forced) {
          EXPECT_EQ(r.limited_by, over);
          for (size_t k = 0; k < path.size(); ++k) {
            EXPECT_EQ(path[k]->usage().raw(), before[k] + n) << k;
          }
        } else {
          EXPECT_EQ(r.limited_by, nullptr);
          EXPECT_TRUE(usage_unchanged()) << "not forced past " << over->path();
        }
      }
    }
    if (charged_something) t.live += n;
  }

  void OpUncharge(bool direct) {
    std::vector<size_t> candidates;
    for (size_t i = 0; i < tracked_.size(); ++i) {
      if (tracked_[i].live > 0) candidates.push_back(i);
    }
    if (candidates.empty() || Coin(50)) {
      // The root: a no-op in both.
      Log("Uncharge(<root>, 5)");
      ctrl_->root().Uncharge(Pages(5));
      ctrl_->root().UnchargeDirect(Pages(5));
      EXPECT_TRUE(model_.Uncharge(kRoot, Pages(5)));
      return;
    }
    Tracked& t = tracked_[candidates[Rand(candidates.size())]];
    const uint64_t n =
        Coin(4) ? t.live : 1 + Rand(std::min<uint64_t>(t.live, 16));
    Log(std::string(direct ? "UnchargeDirect(" : "Uncharge(") + Path(t.id) +
        ", " + std::to_string(n) + ")");
    if (direct) {
      t.ref->UnchargeDirect(Pages(n));
    } else {
      t.ref->Uncharge(Pages(n));
    }
    EXPECT_TRUE(model_.Uncharge(t.id, Pages(n)));
    t.live -= n;
  }

  void OpSetMax() {
    Tracked& t = PickAny();
    const uint64_t usage = model_.usage(t.id).raw();
    uint64_t max;
    const uint64_t r = Rand(20);
    if (r < 3) {
      max = kPageCounterMax.raw();
    } else if (r == 3) {
      max = UINT64_MAX;  // clamped to kPageCounterMax
    } else {
      // Around the usage: below it (v2 writes still succeed) to above it,
      // tightly (many refusals) or loosely (stock fills) by seed.
      const int64_t delta = static_cast<int64_t>(Rand(tight_ ? 97 : 225)) - 24;
      max = static_cast<uint64_t>(
          std::max<int64_t>(0, static_cast<int64_t>(usage) + delta));
    }
    Log("SetMax(" + Path(t.id) + ", " + std::to_string(max) + ")");
    const Status real = t.ref->SetMax(Pages(max));
    ASSERT_EQ(real.code(), model_.SetMax(t.id, Pages(max))) << real.ToString();
  }

  // Releases the test's reference to an offline group without charges.
  void OpDrop() {
    std::vector<size_t> candidates;
    for (size_t i = 1; i < tracked_.size(); ++i) {
      if (!model_.online(tracked_[i].id) && tracked_[i].live == 0) {
        candidates.push_back(i);
      }
    }
    if (candidates.empty()) return;
    const size_t i = candidates[Rand(candidates.size())];
    Log("Drop(" + Path(tracked_[i].id) + ")");
    tracked_.erase(tracked_.begin() + static_cast<ptrdiff_t>(i));
  }

  void OpDrainSubtree() {
    Tracked& t = PickAny();
    Log("DrainAllStocks(" + Path(t.id) + ")");
    ctrl_->DrainAllStocks(*t.ref);
    for (const Tracked& u : tracked_) {
      if (model_.IsDescendantOf(u.id, t.id)) {
        EXPECT_EQ(u.ref->StockedPages(), Pages(0)) << Path(u.id);
      }
    }
  }

  void OpQuiescent() {
    Log("Quiescent");
    ++stats_.quiescent;
    ctrl_->DrainAllStocks(ctrl_->root());
    for (const Tracked& t : tracked_) {
      EXPECT_EQ(t.ref->StockedPages(), Pages(0)) << Path(t.id);
      EXPECT_EQ(t.ref->usage(), model_.usage(t.id)) << Path(t.id);
    }
    ctrl_->Reap();
    EXPECT_EQ(ctrl_->live_groups(), ExpectedLiveGroups());
  }

  // Online groups (all tracked) plus offline tracked ones and their
  // ancestors: each child holds its parent.
  int64_t ExpectedLiveGroups() const {
    std::set<GroupId> live;
    for (const Tracked& t : tracked_) {
      for (GroupId g = t.id; g != kNoGroup; g = model_.parent(g)) {
        if (!live.insert(g).second) break;
      }
    }
    return static_cast<int64_t>(live.size());
  }

  // ---- Invariants ----

  void CheckConsistency() {
    const int n = model_.size();
    std::vector<uint64_t> stocked_below(n, 0);
    std::vector<uint64_t> live_below(n, 0);
    for (const Tracked& t : tracked_) {
      const uint64_t stocked = t.ref->StockedPages().raw();
      EXPECT_LE(stocked, t.ref->StockSlackBound().raw()) << Path(t.id);
      if (!model_.online(t.id)) {
        EXPECT_EQ(stocked, 0u) << Path(t.id);
      }
      for (GroupId g = t.id; g != kNoGroup; g = model_.parent(g)) {
        stocked_below[g] += stocked;
        live_below[g] += t.live;
      }
    }
    for (const Tracked& t : tracked_) {
      const uint64_t want = model_.usage(t.id).raw();
      EXPECT_EQ(want, live_below[t.id]) << "model vs test " << Path(t.id);
      EXPECT_EQ(t.ref->usage().raw(), want + stocked_below[t.id])
          << "real usage - stock vs model " << Path(t.id);
      EXPECT_EQ(t.ref->memory().max(), model_.max(t.id)) << Path(t.id);
      EXPECT_EQ(t.ref->online(), model_.online(t.id)) << Path(t.id);
    }
    EXPECT_EQ(ctrl_->underflows(), 0u);
    EXPECT_EQ(model_.underflows(), 0u);
    EXPECT_TRUE(errors_.empty()) << errors_.front();
  }

  // Uncharges everything, removes every group and checks that the
  // controller is back to the root alone.
  void Teardown() {
    for (Tracked& t : tracked_) {
      if (t.live == 0) continue;
      if (Coin(2)) {
        t.ref->Uncharge(Pages(t.live));
      } else {
        t.ref->UnchargeDirect(Pages(t.live));
      }
      EXPECT_TRUE(model_.Uncharge(t.id, Pages(t.live)));
      t.live = 0;
    }
    ctrl_->DrainAllStocks(ctrl_->root());
    for (const Tracked& t : tracked_) {
      EXPECT_EQ(t.ref->usage(), Pages(0)) << Path(t.id);
      EXPECT_EQ(model_.usage(t.id), Pages(0)) << Path(t.id);
    }
    // Deepest first, so no removal is refused for online children.
    for (int depth = kMaxDepth; depth >= 1; --depth) {
      for (Tracked& t : tracked_) {
        if (model_.depth(t.id) != depth || !model_.online(t.id)) continue;
        ASSERT_TRUE(ctrl_->RemoveGroup(*t.ref).ok()) << Path(t.id);
        ASSERT_EQ(model_.RemoveGroup(t.id), StatusCode::kOk);
      }
    }
    tracked_.resize(1);  // the root
    ctrl_->Reap();
    EXPECT_EQ(ctrl_->live_groups(), 1);
    EXPECT_EQ(ctrl_->root().usage(), Pages(0));
    EXPECT_EQ(ctrl_->underflows(), 0u);
    EXPECT_TRUE(errors_.empty()) << errors_.front();
  }

  const Variant variant_;
  const bool tight_;  // limits close to usage
  std::mt19937 rng_;
  std::vector<std::string> errors_;  // outlives ctrl_ (its error hook)
  std::unique_ptr<Controller> ctrl_;
  Model model_;
  std::vector<Tracked> tracked_;  // [0] is the root; released before ctrl_
  GroupId last_charged_ = kNoGroup;
  std::deque<std::string> history_;
  Stats stats_;
};

class ModelDifferentialTest : public ::testing::TestWithParam<Variant> {};

TEST_P(ModelDifferentialTest, RandomOperationsMatchTheModel) {
  Stats total;
  for (uint32_t seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Differential run(GetParam(), seed);
    run.Run(kOpsPerSeed);
    total.Add(run.stats());
    if (HasFailure()) return;
  }
  std::printf(
      "batch %d%s slots %d: %llu charges, %llu refused, %llu forced, "
      "%llu from stock (%llu past the model's limit), %llu quiescent\n",
      GetParam().batch,
      GetParam().batch_policy == BatchPolicy::kAdaptive ? " adaptive" : "",
      GetParam().stock_slots, static_cast<unsigned long long>(total.charges),
      static_cast<unsigned long long>(total.refused),
      static_cast<unsigned long long>(total.forced),
      static_cast<unsigned long long>(total.stock_hits),
      static_cast<unsigned long long>(total.stock_past_limit),
      static_cast<unsigned long long>(total.quiescent));
  // The sequence must reach every interesting path.
  EXPECT_GT(total.refused, 0u);
  EXPECT_GT(total.forced, 0u);
  EXPECT_GT(total.stock_hits, 0u);
  EXPECT_GT(total.quiescent, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    StockSettings, ModelDifferentialTest,
    ::testing::Values(Variant{64, 7}, Variant{32, 7}, Variant{1, 7},
                      Variant{64, 1}, Variant{32, 1}, Variant{1, 1},
                      Variant{512, 7}, Variant{64, 7, BatchPolicy::kAdaptive},
                      Variant{64, 1, BatchPolicy::kAdaptive}),
    [](const ::testing::TestParamInfo<Variant>& info) {
      return "Batch" + std::to_string(info.param.batch) + "Slots" +
             std::to_string(info.param.stock_slots) +
             (info.param.batch_policy == BatchPolicy::kAdaptive ? "Adaptive"
                                                                : "");
    });

}  // namespace
}  // namespace umemcg

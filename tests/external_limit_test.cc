// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The charge path's hook for limits kept outside the controller
// (src/external_limit.h), with a local stand-in for a cluster lease: a
// refusal behaves like memory.max at the limited group (reclaim first,
// limited_by, max events, OOM), an unreachable owner fails with kAgain and
// no OOM, non-blocking charges never ask to block, forced charges are
// reported, the limit's files appear on the group, and Detach waits for
// threads inside the limit.

#include "external_limit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "umemcg/umemcg.h"

namespace umemcg::internal {
namespace {

class FakeLimit : public ExternalLimit {
 public:
  bool Admits(uint64_t usage) override {
    ++admits;
    return usage <= limit.load();
  }
  ExternalVerdict Grow(uint64_t usage, bool may_block, bool) override {
    ++grows;
    if (may_block) ++blocking_grows;
    last_usage = usage;
    if (!may_block) return ExternalVerdict::kUnavailable;
    if (usage <= cap.load()) {
      limit.store(usage);
      return ExternalVerdict::kGranted;
    }
    return verdict;
  }
  uint64_t Margin(uint64_t usage) override {
    return limit.load() > usage ? limit.load() - usage : 0;
  }
  void OnForced() override { ++forced; }
  std::span<const FileSpec> Files() const override { return kFiles; }
  StatusOr<std::string> ReadFile(std::string_view name) override {
    return std::string(name) + " " + std::to_string(limit.load()) + "\n";
  }
  Status WriteFile(std::string_view, std::string_view text,
                   bool may_block) override {
    if (!may_block) return Status(StatusCode::kAgain, "would block");
    written = std::string(text);
    return Status::Ok();
  }

  static constexpr FileSpec kFiles[] = {{"memory.ext.limit", true, true}};
  std::atomic<uint64_t> limit{0};  // admitted usage
  std::atomic<uint64_t> cap{0};    // what Grow may raise it to
  ExternalVerdict verdict = ExternalVerdict::kRefused;
  std::atomic<int> admits{0}, grows{0}, blocking_grows{0}, forced{0};
  uint64_t last_usage = 0;
  std::string written;
};

class ExternalLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctrl_ = Controller::Create({.batch = 8, .charge_group_metadata = false})
                .value();  // exact page counts
    parent_ = ctrl_->CreateGroup(ctrl_->root(), "p").value();
    child_ = ctrl_->CreateGroup(*parent_, "c").value();
  }
  void TearDown() override {
    if (attached_) {
      ASSERT_TRUE(ExternalLimits::Detach(*parent_, &limit_).ok());
    }
  }
  void Attach() {
    ASSERT_TRUE(ExternalLimits::Attach(*parent_, &limit_).ok());
    attached_ = true;
  }

  std::unique_ptr<Controller> ctrl_;
  GroupRef parent_, child_;
  FakeLimit limit_;
  bool attached_ = false;
};

TEST_F(ExternalLimitTest, ChargesWithinTheLimitNeverGrow) {
  limit_.limit = 100;
  Attach();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(child_->TryCharge(Pages(3)).ok());
  EXPECT_EQ(limit_.grows.load(), 0);
  EXPECT_GT(limit_.admits.load(), 0);  // once per batch, not per charge
  EXPECT_LT(limit_.admits.load(), 20);
  child_->Uncharge(Pages(60));
}

TEST_F(ExternalLimitTest, GrowIsAskedAndAdmits) {
  limit_.limit = 8;
  limit_.cap = 1000;
  Attach();
  ASSERT_TRUE(child_->TryCharge(Pages(50)).ok());
  EXPECT_GE(limit_.blocking_grows.load(), 1);
  EXPECT_GE(limit_.limit.load(), 50u);
  child_->Uncharge(Pages(50));
}

TEST_F(ExternalLimitTest, RefusalBehavesLikeMemoryMax) {
  limit_.limit = 40;
  Attach();
  int oom_calls = 0;
  parent_->SetOomHandler([&](const OomContext& ctx) {
    ++oom_calls;
    EXPECT_EQ(ctx.over_limit, parent_.get());
    return OomOutcome{};
  });
  ASSERT_TRUE(child_->TryCharge(Pages(38)).ok());
  // 5 pages: small enough for OOM handling (not a costly charge).
  ChargeResult r = child_->TryCharge(Pages(5));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.code, StatusCode::kResourceExhausted);
  EXPECT_EQ(r.limited_by, parent_.get());
  // One per retry round, as the kernel counts them.
  EXPECT_GE(parent_->events_local(MemoryEvent::kMax), 1u);
  EXPECT_EQ(child_->events(MemoryEvent::kMax), 0u);
  EXPECT_EQ(oom_calls, 1);
  // At most three blocking asks per charge (batch, n, after reclaim).
  EXPECT_LE(limit_.blocking_grows.load(), 3);
  ctrl_->DrainAllStocks(*parent_);
  EXPECT_EQ(parent_->usage(), Pages(38));  // the refused batch went back
  // Within the limit after the refusal: fine.
  ASSERT_TRUE(child_->TryCharge(Pages(2)).ok());
  child_->Uncharge(Pages(40));
}

TEST_F(ExternalLimitTest, UnavailableIsAgainWithoutOom) {
  limit_.limit = 10;
  limit_.verdict = ExternalVerdict::kUnavailable;
  Attach();
  int oom_calls = 0;
  parent_->SetOomHandler([&](const OomContext&) {
    ++oom_calls;
    return OomOutcome{};
  });
  ChargeResult r = child_->TryCharge(Pages(20));
  EXPECT_EQ(r.code, StatusCode::kAgain);
  EXPECT_EQ(r.limited_by, parent_.get());
  EXPECT_EQ(oom_calls, 0);
}

TEST_F(ExternalLimitTest, NonBlockingChargesNeverAskToBlock) {
  limit_.limit = 10;
  limit_.cap = 1000;
  Attach();
  ChargeResult r = child_->TryCharge(Pages(20), ChargeFlags::kNone);
  EXPECT_EQ(r.code, StatusCode::kAgain);
  EXPECT_GE(limit_.grows.load(), 1);
  EXPECT_EQ(limit_.blocking_grows.load(), 0);
}

// A reclaimer whose pages count against the limit.
class FreeOnDemand : public Reclaimer {
 public:
  explicit FreeOnDemand(Group& g) : g_(g) {}
  Pages Reclaimable() override { return Pages(held); }
  Pages Reclaim(Pages target) override {
    const uint64_t n = std::min(target.raw(), held);
    held -= n;
    g_.UnchargeDirect(Pages(n));
    return Pages(n);
  }
  uint64_t held = 0;

 private:
  Group& g_;
};

TEST_F(ExternalLimitTest, ReclaimComesBeforeFailure) {
  limit_.limit = 100;
  Attach();
  FreeOnDemand r(*child_);
  ASSERT_TRUE(child_->AddReclaimer(&r).ok());
  ASSERT_TRUE(child_->TryCharge(Pages(90)).ok());
  r.held = 90;
  ChargeResult res = child_->TryCharge(Pages(50));
  EXPECT_TRUE(res.ok());
  EXPECT_LE(parent_->usage(), Pages(100));
  EXPECT_EQ(parent_->events_local(MemoryEvent::kMax), 1u);
  ASSERT_TRUE(child_->RemoveReclaimer(&r).ok());
  child_->UnchargeDirect(Pages(50 + r.held));
}

TEST_F(ExternalLimitTest, ForcedChargesAreReported) {
  limit_.limit = 10;
  Attach();
  ChargeResult r = child_->TryCharge(Pages(20), ChargeFlags::kNoFail);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.forced);
  EXPECT_EQ(r.limited_by, parent_.get());
  EXPECT_EQ(limit_.forced.load(), 1);
  child_->Uncharge(Pages(20));
}

TEST_F(ExternalLimitTest, FilesAppearOnTheGroup) {
  limit_.limit = 7;
  EXPECT_EQ(parent_->ReadFile("memory.ext.limit").status().code(),
            StatusCode::kNotFound);
  Attach();
  auto files = parent_->ListFiles();
  EXPECT_NE(std::find(files.begin(), files.end(), "memory.ext.limit"),
            files.end());
  EXPECT_EQ(parent_->ReadFile("memory.ext.limit").value(),
            "memory.ext.limit 7\n");
  ASSERT_TRUE(parent_->WriteFile("memory.ext.limit", "42").ok());
  EXPECT_EQ(limit_.written, "42");
  auto f = MemoryFile::Open(*parent_, "memory.ext.limit").value();
  EXPECT_EQ(f->Write("1", WriteMode::kNonBlocking).code(), StatusCode::kAgain);
  EXPECT_EQ(child_->ReadFile("memory.ext.limit").status().code(),
            StatusCode::kNotFound);
  ASSERT_TRUE(ExternalLimits::Detach(*parent_, &limit_).ok());
  attached_ = false;
  // An open handle of a detached limit's file fails cleanly.
  EXPECT_EQ(f->Read().status().code(), StatusCode::kNotFound);
}

TEST_F(ExternalLimitTest, AttachRules) {
  FakeLimit other;
  EXPECT_EQ(ExternalLimits::Attach(ctrl_->root(), &limit_).code(),
            StatusCode::kInvalidArgument);
  Attach();
  EXPECT_EQ(ExternalLimits::Attach(*parent_, &other).code(), StatusCode::kBusy);
  EXPECT_EQ(ExternalLimits::Detach(*parent_, &other).code(),
            StatusCode::kNotFound);
  EXPECT_TRUE(ExternalLimits::Attached(*parent_));
  EXPECT_FALSE(ExternalLimits::Attached(*child_));
}

TEST_F(ExternalLimitTest, DetachWaitsForChargersAndChargesRaceSafely) {
  limit_.limit = 1u << 30;
  Attach();
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        if (child_->TryCharge(Pages(9)).ok()) child_->Uncharge(Pages(9));
      }
    });
  }
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(ExternalLimits::Detach(*parent_, &limit_).ok());
    ASSERT_TRUE(ExternalLimits::Attach(*parent_, &limit_).ok());
  }
  stop.store(true);
  for (std::thread& t : threads) t.join();
}

}  // namespace
}  // namespace umemcg::internal

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Shared helpers for the unit tests: controllers on a fake CPU source and a
// manual clock, and a reclaimer that owns charged pages.

#ifndef UMEMCG_TESTS_TEST_UTIL_H_
#define UMEMCG_TESTS_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "umemcg/umemcg.h"

namespace umemcg::testing {

inline constexpr Pages MiB(uint64_t n) { return Pages(n * 256); }

// A controller with `nr_cpus` fake CPUs (the test thread starts on CPU 0)
// and a manual clock. Errors are recorded, not fatal. Groups' own
// statistics are charged to their parents only with `group_metadata`
// (ControllerOptions::charge_group_metadata; tests/group_metadata_test.cc).
struct TestController {
  explicit TestController(ControllerOptions options = {}, int nr_cpus = 4,
                          bool group_metadata = false) {
    options.charge_group_metadata = group_metadata;
    options.cpu_source = CpuSource::kFake;
    options.nr_cpus = nr_cpus;
    options.clock = &clock;
    options.error_hook = [this](const ErrorReport& r) {
      errors.push_back(std::string(r.what));
    };
    SetFakeCpu(0);
    auto c = Controller::Create(std::move(options));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    ctrl = std::move(c).value();
  }
  // Creates `path` ("a/b") under the root; parents must exist.
  GroupRef Make(const std::string& path) {
    const size_t slash = path.rfind('/');
    GroupRef parent = slash == std::string::npos
                          ? GroupRef(&ctrl->root())
                          : ctrl->Lookup(path.substr(0, slash)).value();
    auto g = ctrl->CreateGroup(
        *parent, slash == std::string::npos ? path : path.substr(slash + 1));
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    return g.ok() ? g.value() : GroupRef();
  }
  ~TestController() {
    if (ctrl) {
      Status s = ctrl->CheckInvariants();
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
  }
  void Drain() { ctrl->DrainAllStocks(ctrl->root()); }

  ManualClock clock;
  std::vector<std::string> errors;
  std::unique_ptr<Controller> ctrl;
};

// Owns `held` pages charged to a group; frees (uncharges) on request.
class PageReclaimer : public Reclaimer {
 public:
  explicit PageReclaimer(Group* group) : group_(group) {}
  // Charges n pages and holds them. Returns false if the charge failed.
  bool Fill(Pages n, ChargeFlags flags = kChargeDefault) {
    if (!group_->TryCharge(n, flags).ok()) return false;
    held_ += n.raw();
    return true;
  }
  Pages Reclaimable() override { return Pages(held_); }
  Pages Reclaim(Pages target) override {
    ++calls_;
    const uint64_t n = std::min<uint64_t>(held_, target.raw());
    held_ -= n;
    group_->UnchargeDirect(Pages(n));
    asked_ += target.raw();
    return Pages(n);
  }
  uint64_t held() const { return held_; }
  int calls() const { return calls_; }
  uint64_t asked() const { return asked_; }
  void Release() {
    group_->UnchargeDirect(Pages(held_));
    held_ = 0;
  }

 private:
  Group* group_;
  uint64_t held_ = 0;
  uint64_t asked_ = 0;
  int calls_ = 0;
};

}  // namespace umemcg::testing

#endif  // UMEMCG_TESTS_TEST_UTIL_H_

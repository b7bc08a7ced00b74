// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Controller observers: the hook the FUSE mount and the metrics server use
// to hear about memory events and about the controller's destruction.

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "umemcg/umemcg.h"

namespace umemcg {
namespace {

struct Recorder : ControllerObserver {
  void OnMemoryEvent(Group& group, MemoryEvent event) override {
    seen.push_back({group.path(), event});
  }
  void OnControllerDestroy() override {
    destroyed.fetch_add(1);
    groups_at_destroy = controller->live_groups();
    // Still usable here: groups are freed after the observers return.
    root_files_at_destroy = controller->root().ListFiles().size();
  }
  struct Seen {
    std::string path;
    MemoryEvent event;
  };
  std::vector<Seen> seen;
  std::atomic<int> destroyed{0};
  Controller* controller = nullptr;
  int64_t groups_at_destroy = 0;
  size_t root_files_at_destroy = 0;
};

TEST(ControllerObserverTest, HearsEventsUntilRemoved) {
  auto ctrl = Controller::Create({.batch = 1}).value();
  auto rec = std::make_shared<Recorder>();
  ctrl->AddObserver(rec);
  {
    GroupRef a = ctrl->CreateGroup(ctrl->root(), "a").value();
    GroupRef b = ctrl->CreateGroup(*a, "b").value();
    ASSERT_TRUE(a->SetMax(Pages(1), ChargeFlags::kNone).ok());
    // Forced past a's max: one max event, raised on a (the refusing level).
    ASSERT_TRUE(b->TryCharge(Pages(4), kChargeAtomic).forced);
    b->UnchargeDirect(Pages(4));
    ASSERT_EQ(rec->seen.size(), 1u);
    EXPECT_EQ(rec->seen[0].path, "a");
    EXPECT_EQ(rec->seen[0].event, MemoryEvent::kMax);
    ctrl->RemoveObserver(rec.get());
    ASSERT_TRUE(b->TryCharge(Pages(4), kChargeAtomic).forced);
    b->UnchargeDirect(Pages(4));
    EXPECT_EQ(rec->seen.size(), 1u);
  }
  ctrl.reset();
  EXPECT_EQ(rec->destroyed.load(), 0);  // removed: not told
}

TEST(ControllerObserverTest, ToldOfDestructionBeforeGroupsAreFreed) {
  auto ctrl = Controller::Create().value();
  auto first = std::make_shared<Recorder>();
  auto second = std::make_shared<Recorder>();
  first->controller = second->controller = ctrl.get();
  ctrl->AddObserver(first);
  ctrl->AddObserver(second);
  { GroupRef a = ctrl->CreateGroup(ctrl->root(), "a").value(); }
  ctrl.reset();
  for (const auto& r : {first, second}) {
    EXPECT_EQ(r->destroyed.load(), 1);
    EXPECT_EQ(r->groups_at_destroy, 2);  // root and a
    EXPECT_GT(r->root_files_at_destroy, 0u);
  }
}

}  // namespace
}  // namespace umemcg

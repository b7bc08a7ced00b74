// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// A group's own statistics charged to its parent (src/metadata/): shown as
// "percpu" and within "kernel" in the parent's memory.stat, counted against
// the parent's memory.max (CreateGroup: ENOMEM), returned when the group is
// freed (not when it is removed: a dying group keeps it, as the kernel's
// dying memcg keeps its per-CPU data), following the parent's objcg when
// the parent goes first. Children of the root charge nothing.

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "rstat.h"
#include "test_util.h"

namespace umemcg {
namespace {

using testing::TestController;

constexpr int kCpus = 2;

int64_t Percpu(Group& g) { return g.StatExact(StatItem::kPercpu); }

TEST(GroupMetadataTest, ChargedToTheParentAsPercpu) {
  TestController t({.batch = 1}, kCpus, /*group_metadata=*/true);
  const uint64_t bytes = t.ctrl->info().group_metadata_bytes;
  ASSERT_TRUE(t.ctrl->info().charge_group_metadata);
  // The statistics allocation and one block for each of the 2 CPUs: about
  // 1 KB with the built-in items (docs/design.md, Footprint).
  EXPECT_GT(bytes, 700u);
  EXPECT_LT(bytes, 1500u);

  GroupRef p = t.Make("p");  // a child of the root: nothing charged
  EXPECT_EQ(p->usage(), Pages(0));
  EXPECT_EQ(t.ctrl->root().StatExact(StatItem::kPercpu), 0);

  GroupRef c = t.Make("p/c");
  EXPECT_EQ(Percpu(*p), static_cast<int64_t>(bytes));
  EXPECT_EQ(p->StatExact(StatItem::kKernel), 1);  // one page, in "kernel"
  EXPECT_EQ(p->usage(), Pages(1));
  EXPECT_EQ(c->usage(), Pages(0));  // the child itself is not charged
  EXPECT_EQ(Percpu(*c), 0);
  // memory.stat prints it in bytes, and the hierarchy above sees it.
  p->FlushStats();
  const std::string stat = p->ReadFile("memory.stat").value();
  EXPECT_NE(stat.find("\npercpu " + std::to_string(bytes) + "\n"),
            std::string::npos)
      << stat;
  EXPECT_EQ(t.ctrl->root().StatExact(StatItem::kPercpu),
            static_cast<int64_t>(bytes));

  // A grandchild charges the child.
  GroupRef gc = t.Make("p/c/g");
  EXPECT_EQ(Percpu(*c), static_cast<int64_t>(bytes));
  EXPECT_EQ(Percpu(*p), 2 * static_cast<int64_t>(bytes));

  ASSERT_TRUE(t.ctrl->RemoveGroup(*gc).ok());
  ASSERT_TRUE(t.ctrl->RemoveGroup(*c).ok());
  gc.reset();
  c.reset();
  t.ctrl->Reap();
  t.ctrl->Reap();  // c waited for gc
  t.Drain();
  EXPECT_EQ(Percpu(*p), 0);
  EXPECT_EQ(p->StatExact(StatItem::kKernel), 0);
  EXPECT_EQ(p->usage(), Pages(0));
  EXPECT_TRUE(t.errors.empty());
}

TEST(GroupMetadataTest, DyingGroupKeepsItUntilFreed) {
  TestController t({.batch = 1}, kCpus, /*group_metadata=*/true);
  const int64_t bytes =
      static_cast<int64_t>(t.ctrl->info().group_metadata_bytes);
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  ASSERT_TRUE(t.ctrl->RemoveGroup(*c).ok());
  // Still allocated (our reference): still charged, as the kernel's dying
  // memcg keeps its per-CPU data charged until it is freed.
  t.ctrl->Reap();
  EXPECT_EQ(p->nr_dying_descendants(), 1);
  EXPECT_EQ(Percpu(*p), bytes);
  EXPECT_EQ(p->usage(), Pages(1));
  c.reset();
  t.ctrl->Reap();
  EXPECT_EQ(p->nr_dying_descendants(), 0);
  EXPECT_EQ(Percpu(*p), 0);
  t.Drain();
  EXPECT_EQ(p->usage(), Pages(0));
}

// mkdir in a parent at its memory.max: ENOMEM, as in the kernel; what
// fits is charged byte by byte (several groups share a page).
TEST(GroupMetadataTest, CreationPastTheParentsMaxIsEnomem) {
  TestController t({.batch = 1}, kCpus, /*group_metadata=*/true);
  const uint64_t bytes = t.ctrl->info().group_metadata_bytes;
  GroupRef p = t.Make("p");
  ASSERT_TRUE(p->SetMax(Pages(1)).ok());
  std::vector<GroupRef> made;
  StatusOr<GroupRef> next = t.ctrl->CreateGroup(*p, "c0");
  while (next.ok()) {
    made.push_back(std::move(next).value());
    next = t.ctrl->CreateGroup(*p, "c" + std::to_string(made.size()));
  }
  EXPECT_EQ(next.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoOf(next.status().code()), ENOMEM);
  EXPECT_EQ(made.size(), kPageSize / bytes);
  EXPECT_EQ(p->usage(), Pages(1));
  EXPECT_EQ(Percpu(*p), static_cast<int64_t>(made.size() * bytes));
  EXPECT_EQ(p->NumChildren(), made.size());
  EXPECT_GE(p->events(MemoryEvent::kMax), 1u);
  // An existing name is still EEXIST, not ENOMEM.
  EXPECT_EQ(t.ctrl->CreateGroup(*p, "c0").status().code(),
            StatusCode::kAlreadyExists);
  // Room again once one goes.
  ASSERT_TRUE(t.ctrl->RemoveGroup(*made.back()).ok());
  made.pop_back();
  t.ctrl->Reap();
  EXPECT_TRUE(t.ctrl->CreateGroup(*p, "again").ok());
  // The limit of an ancestor counts too.
  GroupRef q = t.Make("q");
  GroupRef qc = t.Make("q/c");
  ASSERT_TRUE(q->SetMax(Pages(2)).ok());  // qc's statistics: 1 page
  ASSERT_TRUE(qc->TryCharge(Pages(1)).ok());
  EXPECT_EQ(t.ctrl->CreateGroup(*qc, "x").status().code(),
            StatusCode::kResourceExhausted);
  qc->Uncharge(Pages(1));
}

// The parent removed before its dying child is freed: the charge went
// through the parent's objcg, which now points at the grandparent, and the
// free uncharges there.
TEST(GroupMetadataTest, FollowsTheParentsObjcg) {
  TestController t({.batch = 1}, kCpus, /*group_metadata=*/true);
  GroupRef a = t.Make("a");
  GroupRef p = t.Make("a/p");
  GroupRef c = t.Make("a/p/c");
  const int64_t bytes =
      static_cast<int64_t>(t.ctrl->info().group_metadata_bytes);
  EXPECT_EQ(Percpu(*a), 2 * bytes);  // p's and c's
  ASSERT_TRUE(t.ctrl->RemoveGroup(*c).ok());
  ASSERT_TRUE(t.ctrl->RemoveGroup(*p).ok());
  p.reset();
  t.ctrl->Reap();
  // p waits for its child; both still charged where they were.
  EXPECT_EQ(Percpu(*a), 2 * bytes);
  c.reset();
  t.ctrl->Reap();
  t.ctrl->Reap();
  EXPECT_EQ(a->nr_dying_descendants(), 0);
  EXPECT_EQ(Percpu(*a), 0);
  t.Drain();
  EXPECT_EQ(a->usage(), Pages(0));
  EXPECT_TRUE(t.errors.empty());
}

TEST(GroupMetadataTest, OnByDefault) {
  EXPECT_TRUE(ControllerOptions{}.charge_group_metadata);
  auto c = Controller::Create({});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE((*c)->info().charge_group_metadata);
  EXPECT_GT((*c)->info().group_metadata_bytes, 0u);
}

TEST(GroupMetadataTest, OffWhenDisabled) {
  TestController t({.batch = 1}, kCpus);
  EXPECT_FALSE(t.ctrl->info().charge_group_metadata);
  EXPECT_EQ(t.ctrl->info().group_metadata_bytes, 0u);
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  EXPECT_EQ(p->usage(), Pages(0));
  EXPECT_EQ(Percpu(*p), 0);
}

// The charge is the footprint formula's statistics terms at every CPU
// (docs/design.md, Footprint): glibc's chunk for the statistics allocation
// plus one chunk per CPU for its block.
size_t Chunk(size_t request) {
  return std::max<size_t>(32, (request + 8 + 15) & ~size_t{15});
}
uint64_t Formula(int nr_cpus, size_t nr_items) {
  return Chunk(internal::GroupStats::AllocationSize(nr_cpus, nr_items)) +
         static_cast<uint64_t>(nr_cpus) *
             Chunk(sizeof(internal::StatCpu) + nr_items * sizeof(int64_t));
}

TEST(GroupMetadataTest, IsTheFootprintsStatisticsAtEveryCpu) {
  for (int cpus : {1, 2, 16, 256}) {
    for (size_t custom : {size_t{0}, size_t{7}}) {
      ControllerOptions o;
      for (size_t i = 0; i < custom; ++i) {
        o.custom_stat_items.push_back(
            {"c" + std::to_string(i), StatUnit::kEvents});
      }
      TestController t(o, cpus, /*group_metadata=*/true);
      EXPECT_EQ(t.ctrl->info().group_metadata_bytes,
                Formula(cpus, kNumBuiltinStatItems + custom))
          << cpus << " CPUs, " << custom << " custom items";
    }
  }
}

}  // namespace
}  // namespace umemcg

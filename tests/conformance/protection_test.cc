// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Conformance with the kernel selftest tree of test_memcg_min/low
// (tools/testing/selftests/cgroup/test_memcontrol.c):
//
//   A       min/low = 50M, max = 200M
//   A/B     min/low = 50M
//   A/B/C   min/low = 75M,  50M of page cache
//   A/B/D   min/low = 25M,  50M of page cache
//   A/B/E   min/low = 0,    50M of page cache
//   A/B/F   min/low = 500M, empty
//
// Effective values are checked against hand-computed ones (the kernel's
// effective_protection in mm/page_counter.c).
// Then reclaim pressure from A (F allocating 148M under A's 200M
// max) must take E's unprotected cache and leave C and D together B's 50M:
// with C and D overcommitted (75M claimed of 50M), each is protected while
// C + D <= 50M, so reclaim of C and D stops exactly at that boundary. For
// the pressure runs F's own protection is 0: the kernel selftest's F (500M)
// allocates in a process that exits before the check, while our F keeps
// its charge and would otherwise legitimately claim B's protection.

#include <gtest/gtest.h>

#include "test_util.h"

namespace umemcg {
namespace {

using testing::MiB;
using testing::PageReclaimer;
using testing::TestController;

struct SelftestTree {
  explicit SelftestTree(bool use_low, bool recursive = false,
                        uint64_t f_protection_mib = 500)
      : t({.recursive_protection = recursive}) {
    a = t.Make("A");
    b = t.Make("A/B");
    c = t.Make("A/B/C");
    d = t.Make("A/B/D");
    e = t.Make("A/B/E");
    f = t.Make("A/B/F");
    auto set = [&](Group& g, uint64_t mib) {
      EXPECT_TRUE((use_low ? g.SetLow(MiB(mib)) : g.SetMin(MiB(mib))).ok());
    };
    set(*a, 50);
    set(*b, 50);
    set(*c, 75);
    set(*d, 25);
    set(*e, 0);
    set(*f, f_protection_mib);
    EXPECT_TRUE(a->SetMax(MiB(200)).ok());
    for (auto [g, r] :
         {std::pair{c.get(), &rc}, {d.get(), &rd}, {e.get(), &re}}) {
      *r = std::make_unique<PageReclaimer>(g);
      EXPECT_TRUE(g->AddReclaimer(r->get()).ok());
      EXPECT_TRUE((*r)->Fill(MiB(50), ChargeFlags::kNone));
    }
  }
  ~SelftestTree() {
    for (auto [g, r] :
         {std::pair{c.get(), &rc}, {d.get(), &rd}, {e.get(), &re}}) {
      EXPECT_TRUE(g->RemoveReclaimer(r->get()).ok());
      (*r)->Release();
    }
  }
  // F charges `mib` more in batch-sized steps (reclaim pressure from A's
  // max) and then all stocks are drained. Returns false if a charge failed.
  bool Pressure(uint64_t mib) {
    for (uint64_t done = 0; done < MiB(mib).raw(); done += 64) {
      if (!f->TryCharge(Pages(64)).ok()) return false;
      f_pages += 64;
    }
    t.Drain();
    return true;
  }
  // Expectations shared by the min and low runs after F took 148M.
  void ExpectCandDKeepBsProtection() {
    EXPECT_LE(a->usage(), MiB(200));
    // E is unprotected: its cache goes (almost) entirely.
    EXPECT_LE(re->held(), MiB(1).raw());
    // C and D together keep at least B's effective protection (50M),
    // minus what the reclaim minimum batch may overshoot.
    EXPECT_GE(rc->held() + rd->held(), MiB(50).raw() - 64);
  }

  // Recompute effective values as a reclaim from A would (A is the
  // target, so its own protection is ignored; B is A's child).
  void Calculate() {
    for (Group* g : {b.get(), c.get(), d.get(), e.get(), f.get()}) {
      PageCounter::CalculateProtection(&a->memory(),
                                       &const_cast<PageCounter&>(g->memory()),
                                       t.ctrl->info().recursive_protection);
    }
  }

  TestController t;
  GroupRef a, b, c, d, e, f;
  std::unique_ptr<PageReclaimer> rc, rd, re;
  uint64_t f_pages = 0;
};

TEST(ProtectionConformanceTest, EffectiveMinMatchesHandComputedValues) {
  SelftestTree tree(/*use_low=*/false);
  tree.Calculate();
  // B is a first-level child of the reclaim root: its declared 50M.
  EXPECT_EQ(tree.b->memory().emin(), MiB(50));
  // siblings protected = min(50,75) + min(50,25) + 0 + 0 = 75M > 50M:
  // overcommitted, split by used protection.
  EXPECT_EQ(tree.c->memory().emin(),
            Pages(MiB(50).raw() * MiB(50).raw() / MiB(75).raw()));
  EXPECT_EQ(tree.d->memory().emin(),
            Pages(MiB(25).raw() * MiB(50).raw() / MiB(75).raw()));
  EXPECT_EQ(tree.e->memory().emin(), Pages(0));
  EXPECT_EQ(tree.f->memory().emin(), Pages(0));  // empty: left stale
  EXPECT_EQ(tree.b->memory().children_min_usage(), MiB(75));
}

TEST(ProtectionConformanceTest, EffectiveLowWithRecursiveProtection) {
  SelftestTree tree(/*use_low=*/true, /*recursive=*/true);
  tree.Calculate();
  EXPECT_EQ(tree.b->memory().elow(), MiB(50));
  // Still overcommitted (75M > 50M): recursion changes nothing here.
  EXPECT_EQ(tree.c->memory().elow(),
            Pages(MiB(50).raw() * MiB(50).raw() / MiB(75).raw()));
  EXPECT_EQ(tree.e->memory().elow(), Pages(0));
}

TEST(ProtectionConformanceTest, MemoryMinSurvivesPressure) {
  SelftestTree tree(/*use_low=*/false, false, /*f_protection_mib=*/0);
  // F allocates 148M under A's 200M max: 150M of cache must shrink.
  ASSERT_TRUE(tree.Pressure(148));
  tree.ExpectCandDKeepBsProtection();
  // C keeps more than D (its protection is larger).
  EXPECT_GT(tree.rc->held(), tree.rd->held());
  EXPECT_EQ(tree.c->events(MemoryEvent::kLow), 0u);
  tree.f->UnchargeDirect(Pages(tree.f_pages));
}

TEST(ProtectionConformanceTest, MemoryLowYieldsOnlyUnderPressureAndCounts) {
  SelftestTree tree(/*use_low=*/true, false, /*f_protection_mib=*/0);
  ASSERT_TRUE(tree.Pressure(148));
  tree.ExpectCandDKeepBsProtection();
  // memory.low was not breached: no low events while E could pay.
  EXPECT_EQ(tree.c->events(MemoryEvent::kLow), 0u);
  EXPECT_EQ(tree.d->events(MemoryEvent::kLow), 0u);
  // Squeezing further must breach low and say so.
  ASSERT_TRUE(tree.Pressure(40));
  EXPECT_GE(
      tree.c->events(MemoryEvent::kLow) + tree.d->events(MemoryEvent::kLow),
      1u);
  tree.f->UnchargeDirect(Pages(tree.f_pages));
}

}  // namespace
}  // namespace umemcg

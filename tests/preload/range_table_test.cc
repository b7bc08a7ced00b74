// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The preload's range table on its own (no preload loaded): whole pieces
// (UMEMCG_MAP_CHARGE=at-mmap) and pieces charged by their resident pages,
// counted with mincore() over real mappings of this process
// (UMEMCG_MAP_CHARGE=resident): recounting, and a split dividing a
// piece's charge without losing or inventing any.

#include "preload/range_table.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <memory>

#include "umemcg/controller.h"

namespace umemcg::preload {
namespace {

constexpr uintptr_t kPage = RangeTable::kPage;

class RangeTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = Controller::Create(ControllerOptions{});
    ASSERT_TRUE(c.ok());
    controller_ = std::move(c).value();
    auto g = controller_->CreateGroup(controller_->root(), "a");
    ASSERT_TRUE(g.ok());
    group_ = std::move(g).value();
  }

  // A real private anonymous mapping of `pages` pages, page by page (no
  // transparent huge pages), none touched.
  uintptr_t Map(uint64_t pages) {
    void* p = mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    (void)madvise(p, pages * kPage, MADV_NOHUGEPAGE);
    return reinterpret_cast<uintptr_t>(p);
  }
  static void Touch(uintptr_t start, uint64_t from, uint64_t to) {
    for (uint64_t i = from; i < to; ++i) {
      reinterpret_cast<volatile char*>(start + i * kPage)[0] = 1;
    }
  }

  // Sums what Remove hands back.
  uint64_t RemoveAll(RangeTable& t, uintptr_t start, uintptr_t end) {
    uint64_t pages = 0;
    t.Remove(start, end, [&](Group&, uint64_t n) { pages += n; });
    return pages;
  }

  // Recount's settle: takes the resident count, remembers the changes.
  uint64_t Recount(RangeTable& t, uintptr_t start, uintptr_t end) {
    uint64_t calls = 0;
    t.Recount(start, end, [&](Group&, uint64_t, uint64_t now) {
      ++calls;
      return now;
    });
    return calls;
  }

  std::unique_ptr<Controller> controller_;
  GroupRef group_;
};

TEST_F(RangeTableTest, CountResidentPagesCountsTouchedPagesOnly) {
  const uintptr_t p = Map(64);
  EXPECT_EQ(CountResidentPages(p, p + 64 * kPage), 0u);
  Touch(p, 0, 10);
  Touch(p, 40, 45);
  EXPECT_EQ(CountResidentPages(p, p + 64 * kPage), 15u);
  EXPECT_EQ(CountResidentPages(p + 40 * kPage, p + 64 * kPage), 5u);
  (void)madvise(reinterpret_cast<void*>(p), 5 * kPage, MADV_DONTNEED);
  EXPECT_EQ(CountResidentPages(p, p + 64 * kPage), 10u);
  // A hole: the unmapped pages count as not resident, the rest still do.
  munmap(reinterpret_cast<void*>(p + 20 * kPage), 20 * kPage);
  EXPECT_EQ(CountResidentPages(p, p + 64 * kPage), 10u);
  munmap(reinterpret_cast<void*>(p), 64 * kPage);
}

TEST_F(RangeTableTest, WholePiecesSplitByPages) {
  RangeTable t;
  const uintptr_t base = uintptr_t{1} << 40;  // never mapped: not counted
  t.Insert(base, base + 16 * kPage, group_);
  EXPECT_EQ(t.charged_pages(), 16u);
  EXPECT_EQ(RemoveAll(t, base + 4 * kPage, base + 8 * kPage), 4u);
  EXPECT_EQ(t.charged_pages(), 12u);
  EXPECT_EQ(RemoveAll(t, base, base + 16 * kPage), 12u);
  EXPECT_EQ(t.charged_pages(), 0u);
}

TEST_F(RangeTableTest, RecountFollowsResidentPages) {
  RangeTable t;
  t.set_resident_counter(CountResidentPages);
  const uintptr_t p = Map(32);
  t.Insert(p, p + 32 * kPage, group_, 0);
  EXPECT_EQ(t.charged_pages(), 0u);
  EXPECT_EQ(Recount(t, p, p + 32 * kPage), 0u);  // nothing changed
  Touch(p, 0, 8);
  EXPECT_EQ(Recount(t, 0, UINTPTR_MAX), 1u);
  EXPECT_EQ(t.charged_pages(), 8u);
  (void)madvise(reinterpret_cast<void*>(p), 4 * kPage, MADV_DONTNEED);
  EXPECT_EQ(Recount(t, p, p + kPage), 1u);  // overlapping: whole piece
  EXPECT_EQ(t.charged_pages(), 4u);
  EXPECT_EQ(RemoveAll(t, p, p + 32 * kPage), 4u);
  munmap(reinterpret_cast<void*>(p), 32 * kPage);
}

TEST_F(RangeTableTest, RecountKeepsWhatSettleCouldCharge) {
  RangeTable t;
  t.set_resident_counter(CountResidentPages);
  const uintptr_t p = Map(16);
  t.Insert(p, p + 16 * kPage, group_, 0);
  Touch(p, 0, 12);
  t.Recount(p, p + 16 * kPage, [](Group&, uint64_t old, uint64_t) {
    return old + 5;  // charged only part of the growth
  });
  EXPECT_EQ(t.charged_pages(), 5u);
  EXPECT_EQ(RemoveAll(t, p, p + 16 * kPage), 5u);
  munmap(reinterpret_cast<void*>(p), 16 * kPage);
}

TEST_F(RangeTableTest, SplitGivesTheHeadItsResidentPages) {
  RangeTable t;
  t.set_resident_counter(CountResidentPages);
  const uintptr_t p = Map(32);
  t.Insert(p, p + 32 * kPage, group_, 0);
  Touch(p, 0, 8);
  Recount(t, 0, UINTPTR_MAX);
  ASSERT_EQ(t.charged_pages(), 8u);
  // The tail holds no resident page: it takes no charge.
  t.Split(p + 16 * kPage);
  EXPECT_EQ(t.Find(p)->charged, 8u);
  EXPECT_EQ(t.Find(p + 16 * kPage)->charged, 0u);
  EXPECT_EQ(RemoveAll(t, p + 16 * kPage, p + 32 * kPage), 0u);
  EXPECT_EQ(RemoveAll(t, p, p + 16 * kPage), 8u);
  munmap(reinterpret_cast<void*>(p), 32 * kPage);
}

TEST_F(RangeTableTest, SplitOfAStaleChargeKeepsTheTotal) {
  RangeTable t;
  t.set_resident_counter(CountResidentPages);
  const uintptr_t p = Map(32);
  t.Insert(p, p + 32 * kPage, group_, 0);
  Touch(p, 24, 32);
  Recount(t, 0, UINTPTR_MAX);
  ASSERT_EQ(t.charged_pages(), 8u);
  // Touched since the count: the head now has 16 resident pages but only
  // 8 were charged; the head takes those 8, the tail none, total 8.
  Touch(p, 0, 16);
  t.Split(p + 16 * kPage);
  EXPECT_EQ(t.Find(p)->charged + t.Find(p + 16 * kPage)->charged, 8u);
  EXPECT_EQ(t.charged_pages(), 8u);
  EXPECT_EQ(RemoveAll(t, p, p + 32 * kPage), 8u);
  munmap(reinterpret_cast<void*>(p), 32 * kPage);
}

TEST_F(RangeTableTest, SplitKeepsEachHalfWithinItsSize) {
  RangeTable t;  // no counter: divided by position
  const uintptr_t base = uintptr_t{1} << 40;
  t.Insert(base, base + 10 * kPage, group_, 7);
  t.Split(base + 2 * kPage);
  EXPECT_EQ(t.Find(base)->charged, 2u);
  EXPECT_EQ(t.Find(base + 2 * kPage)->charged, 5u);
  t.Split(base + 9 * kPage);
  EXPECT_EQ(t.Find(base + 2 * kPage)->charged, 5u);
  EXPECT_EQ(t.Find(base + 9 * kPage)->charged, 0u);
  EXPECT_EQ(t.charged_pages(), 7u);
  EXPECT_EQ(RemoveAll(t, base, base + 10 * kPage), 7u);
}

TEST_F(RangeTableTest, MoveCarriesTheCharge) {
  RangeTable t;
  const uintptr_t base = uintptr_t{1} << 40;
  t.Insert(base, base + 8 * kPage, group_, 3);
  t.Move(base, base + 8 * kPage, 64 * kPage);
  EXPECT_EQ(t.Find(base), nullptr);
  EXPECT_EQ(t.Find(base + 64 * kPage)->charged, 3u);
  EXPECT_EQ(t.charged_pages(), 3u);
  EXPECT_EQ(RemoveAll(t, base + 64 * kPage, base + 72 * kPage), 3u);
}

}  // namespace
}  // namespace umemcg::preload

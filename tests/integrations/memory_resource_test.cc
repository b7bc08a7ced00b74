// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// MemoryResource and Allocator<T>: exact charge/uncharge balance (bytes in
// slab_unreclaimable, pages in usage after draining the stocks), the owner
// recorded with the block (cross-thread frees, frees after the group was
// removed), alignment, and bad_alloc after the full charge path.

#include "umemcg/memory_resource.h"

#include <gtest/gtest.h>

#include <cstring>
#include <list>
#include <map>
#include <memory_resource>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "test_util.h"

namespace umemcg {
namespace {

using testing::TestController;

int64_t Slab(Group& g) { return g.StatExact(StatItem::kSlabUnreclaimable); }

// Live bytes -> pages charged at quiescence (obj_cgroup.h: ceil after a
// drain, the pool holding the rest of the last page).
Pages PagesFor(int64_t bytes) { return Bytes(bytes).ceil_pages(); }

TEST(MemoryResourceTest, ChargesHeaderAndBlockAndUnchargesExactly) {
  TestController t;
  GroupRef g = t.Make("g");
  MemoryResource res(*g);
  EXPECT_EQ(res.objcg(), g->GetObjCgroup().get());
  std::vector<std::pair<void*, size_t>> blocks;
  int64_t expect = 0;
  for (size_t size : {1, 7, 16, 100, 4096, 5000, 70000}) {
    void* p = res.allocate(size);
    EXPECT_EQ(MemoryResource::OwnerOf(p), g->GetObjCgroup().get());
    EXPECT_EQ(MemoryResource::ChargedSizeOf(p), size + 16);
    expect += static_cast<int64_t>(size + 16);
    blocks.push_back({p, size});
  }
  t.Drain();
  EXPECT_EQ(Slab(*g), expect);
  EXPECT_EQ(g->usage(), PagesFor(expect));
  for (auto [p, size] : blocks) res.deallocate(p, size);
  t.Drain();
  EXPECT_EQ(Slab(*g), 0);
  EXPECT_EQ(g->usage(), Pages(0));
  EXPECT_EQ(t.ctrl->root().usage(), Pages(0));
}

TEST(MemoryResourceTest, AnyAlignmentIsRespectedAndCharged) {
  TestController t;
  GroupRef g = t.Make("g");
  MemoryResource res(*g);
  for (size_t align = 1; align <= (size_t{1} << 16); align <<= 1) {
    void* p = res.allocate(24, align);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << align;
    EXPECT_EQ(MemoryResource::ChargedSizeOf(p),
              24 + std::max<size_t>(align, 16));
    std::memset(p, 0xab, 24);
    res.deallocate(p, 24, align);
  }
  t.Drain();
  EXPECT_EQ(Slab(*g), 0);
  EXPECT_EQ(g->usage(), Pages(0));
}

TEST(MemoryResourceTest, ActiveModeChargesTheActiveGroupOrTheFallback) {
  TestController t;
  GroupRef fb = t.Make("fallback");
  GroupRef a = t.Make("a");
  MemoryResource res(kChargeActiveGroup, fb.get());
  MemoryResource none(kChargeActiveGroup, nullptr);
  void* to_fb = res.allocate(100);
  void* to_nothing = none.allocate(100);
  void* to_a;
  void* to_a2;
  {
    ActiveGroupScope s(*a);
    to_a = res.allocate(200);
    to_a2 = none.allocate(300);
  }
  EXPECT_EQ(MemoryResource::OwnerOf(to_fb), fb->GetObjCgroup().get());
  EXPECT_EQ(MemoryResource::OwnerOf(to_nothing), nullptr);
  EXPECT_EQ(MemoryResource::OwnerOf(to_a), a->GetObjCgroup().get());
  EXPECT_EQ(MemoryResource::OwnerOf(to_a2), a->GetObjCgroup().get());
  t.Drain();
  EXPECT_EQ(Slab(*fb), 116);
  EXPECT_EQ(Slab(*a), 216 + 316);
  // Freed outside the scope: still the recorded owner is uncharged.
  res.deallocate(to_a, 200);
  none.deallocate(to_a2, 300);
  res.deallocate(to_fb, 100);
  none.deallocate(to_nothing, 100);
  t.Drain();
  EXPECT_EQ(Slab(*fb), 0);
  EXPECT_EQ(Slab(*a), 0);
  EXPECT_EQ(a->usage(), Pages(0));
  EXPECT_EQ(fb->usage(), Pages(0));
}

TEST(MemoryResourceTest, CrossThreadFreesUnchargeTheOwner) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  MemoryResource res(kChargeActiveGroup, nullptr);
  constexpr int kBlocks = 2000;
  std::vector<void*> from_a(kBlocks), from_b(kBlocks);
  auto alloc = [&](Group& g, std::vector<void*>& out, int cpu) {
    SetFakeCpu(cpu);
    ActiveGroupScope s(g);
    for (int i = 0; i < kBlocks; ++i) out[i] = res.allocate(8 + i % 300);
  };
  std::thread ta(alloc, std::ref(*a), std::ref(from_a), 1);
  std::thread tb(alloc, std::ref(*b), std::ref(from_b), 2);
  ta.join();
  tb.join();
  int64_t bytes = 0;
  for (int i = 0; i < kBlocks; ++i) bytes += 8 + i % 300 + 16;
  t.Drain();
  EXPECT_EQ(Slab(*a), bytes);
  EXPECT_EQ(Slab(*b), bytes);
  // Each thread frees the other's blocks, with no scope active.
  auto release = [&](std::vector<void*>& blocks, int cpu) {
    SetFakeCpu(cpu);
    for (int i = 0; i < kBlocks; ++i) res.deallocate(blocks[i], 8 + i % 300);
  };
  std::thread fa(release, std::ref(from_b), 3);
  std::thread fb(release, std::ref(from_a), 0);
  fa.join();
  fb.join();
  t.Drain();
  EXPECT_EQ(Slab(*a), 0);
  EXPECT_EQ(Slab(*b), 0);
  EXPECT_EQ(a->usage(), Pages(0));
  EXPECT_EQ(b->usage(), Pages(0));
}

TEST(MemoryResourceTest, FreesAfterGroupRemovalLandOnTheParent) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  const int64_t objcgs_before = t.ctrl->live_objcgs();
  std::vector<void*> blocks;
  {
    MemoryResource active(kChargeActiveGroup, nullptr);
    {
      ActiveGroupScope s(*c);
      for (int i = 0; i < 100; ++i) blocks.push_back(active.allocate(1000));
    }
    t.Drain();
    EXPECT_EQ(Slab(*c), 101600);
    EXPECT_EQ(p->usage(), PagesFor(101600));
    Group* raw = c.get();
    c.reset();
    ASSERT_TRUE(t.ctrl->RemoveGroup(*raw).ok());
    t.ctrl->Reap();
    // The blocks pin the (reparented) objcg.
    EXPECT_EQ(t.ctrl->live_objcgs(), objcgs_before);
    std::thread other([&] {
      SetFakeCpu(2);
      for (void* b : blocks) active.deallocate(b, 1000);
    });
    other.join();
  }
  t.Drain();
  t.ctrl->Reap();
  EXPECT_EQ(p->usage(), Pages(0));
  EXPECT_EQ(Slab(*p), 0);
  EXPECT_EQ(t.ctrl->root().usage(), Pages(0));
  EXPECT_EQ(t.ctrl->live_objcgs(), objcgs_before - 1);
  EXPECT_TRUE(t.errors.empty()) << t.errors[0];
}

TEST(MemoryResourceTest, FixedResourceOnARemovedGroupChargesTheParent) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  ASSERT_TRUE(t.ctrl->RemoveGroup(*c).ok());
  MemoryResource res(*c);
  EXPECT_EQ(res.objcg(), p->GetObjCgroup().get());
  void* b = res.allocate(5000);
  t.Drain();
  EXPECT_EQ(p->usage(), Pages(2));
  res.deallocate(b, 5000);
  t.Drain();
  EXPECT_EQ(p->usage(), Pages(0));
}

// Holds blocks of a resource; reclaim frees them (a tiny LRU).
class BlockReclaimer : public Reclaimer {
 public:
  BlockReclaimer(MemoryResource& res, size_t size) : res_(res), size_(size) {}
  ~BlockReclaimer() override {
    for (void* b : blocks_) res_.deallocate(b, size_);
  }
  void Hold(void* b) { blocks_.push_back(b); }
  Pages Reclaimable() override {
    return Bytes(blocks_.size() * (size_ + 16)).floor_pages();
  }
  Pages Reclaim(Pages target) override {
    ++calls_;
    uint64_t freed = 0;
    while (!blocks_.empty() && freed < target.in_bytes()) {
      res_.deallocate(blocks_.back(), size_);
      blocks_.pop_back();
      freed += size_ + 16;
    }
    return Bytes(freed).floor_pages();
  }
  size_t held() const { return blocks_.size(); }
  int calls() const { return calls_; }

 private:
  MemoryResource& res_;
  const size_t size_;
  std::vector<void*> blocks_;
  int calls_ = 0;
};

TEST(MemoryResourceTest, AtTheLimitReclaimRunsFirstThenBadAlloc) {
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetMax(Pages(8)).ok());
  MemoryResource res(*g);
  BlockReclaimer cache(res, 4096 - 16);  // one page per block
  ASSERT_TRUE(g->AddReclaimer(&cache).ok());
  for (int i = 0; i < 6; ++i) cache.Hold(res.allocate(4096 - 16));
  // 6 pages in the cache; 4 more need reclaim of 2: the charge succeeds.
  void* big = res.allocate(4 * 4096 - 16);
  EXPECT_GE(cache.calls(), 1);
  EXPECT_LE(cache.held(), 4u);
  EXPECT_EQ(g->events(MemoryEvent::kMax) > 0, true);
  // 7 more pages cannot fit beside `big` (4): reclaim empties the cache,
  // the stocks are drained, OOM handling finds no handler: bad_alloc.
  const uint64_t oom_before = g->events(MemoryEvent::kOom);
  EXPECT_THROW((void)res.allocate(7 * 4096 - 16), std::bad_alloc);
  EXPECT_EQ(cache.held(), 0u);
  EXPECT_GT(g->events(MemoryEvent::kOom), oom_before);
  res.deallocate(big, 4 * 4096 - 16);
  ASSERT_TRUE(g->RemoveReclaimer(&cache).ok());
  t.Drain();
  // The failed charge left nothing behind.
  EXPECT_EQ(g->usage(), Pages(0));
  EXPECT_EQ(Slab(*g), 0);
}

TEST(MemoryResourceTest, UpstreamFailureUndoesTheCharge) {
  TestController t;
  GroupRef g = t.Make("g");
  MemoryResource res(*g, {.upstream = std::pmr::null_memory_resource()});
  EXPECT_THROW((void)res.allocate(100), std::bad_alloc);
  t.Drain();
  EXPECT_EQ(Slab(*g), 0);
  EXPECT_EQ(g->usage(), Pages(0));
}

TEST(MemoryResourceTest, PmrContainersBalance) {
  TestController t;
  GroupRef g = t.Make("g");
  MemoryResource res(*g, {.item = StatItem::kSlabReclaimable});
  {
    std::pmr::vector<int> v(&res);
    for (int i = 0; i < 10000; ++i) v.push_back(i);
    std::pmr::string s("a string long enough to leave the SSO buffer", &res);
    std::pmr::unordered_map<std::pmr::string, std::pmr::vector<int>> m(&res);
    for (int i = 0; i < 500; ++i) {
      m[std::pmr::string("key-number-" + std::to_string(i), &res)].assign(
          i % 50, i);
    }
    t.Drain();
    EXPECT_GT(g->StatExact(StatItem::kSlabReclaimable), 40000);
    EXPECT_EQ(Slab(*g), 0);  // counted in the item the options chose
    m.erase(m.begin(), m.end());
    v.clear();
    v.shrink_to_fit();
  }
  t.Drain();
  EXPECT_EQ(g->StatExact(StatItem::kSlabReclaimable), 0);
  EXPECT_EQ(g->usage(), Pages(0));
}

TEST(AllocatorTest, StdContainersBalance) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  MemoryResource ra(*a);
  MemoryResource rb(*b);
  {
    std::vector<double, Allocator<double>> v{Allocator<double>(&ra)};
    v.resize(1000);
    std::map<int, int, std::less<int>, Allocator<std::pair<const int, int>>> m{
        Allocator<std::pair<const int, int>>(&ra)};
    for (int i = 0; i < 100; ++i) m[i] = i;
    std::list<int, Allocator<int>> l{Allocator<int>(&rb)};
    for (int i = 0; i < 100; ++i) l.push_back(i);
    using String =
        std::basic_string<char, std::char_traits<char>, Allocator<char>>;
    String s(500, 'x', Allocator<char>(&rb));
    t.Drain();
    EXPECT_GE(Slab(*a), int64_t(8000 + 100 * 48));
    EXPECT_GE(Slab(*b), int64_t(500 + 100 * 40));
    // Move assignment propagates the allocator: memory stays with its owner.
    std::vector<double, Allocator<double>> w{Allocator<double>(&rb)};
    w = std::move(v);
    EXPECT_EQ(w.get_allocator().resource(), &ra);
    EXPECT_TRUE(Allocator<int>(&ra) != Allocator<int>(&rb));
    EXPECT_TRUE(Allocator<int>(&ra) == Allocator<char>(&ra));
  }
  t.Drain();
  EXPECT_EQ(Slab(*a), 0);
  EXPECT_EQ(Slab(*b), 0);
  EXPECT_EQ(a->usage(), Pages(0));
  EXPECT_EQ(b->usage(), Pages(0));
}

TEST(AllocatorTest, DefaultAllocatorChargesTheActiveGroup) {
  TestController t;
  GroupRef a = t.Make("a");
  std::vector<int, Allocator<int>> outside;
  outside.resize(100);  // nothing active: charged to nothing
  EXPECT_EQ(MemoryResource::OwnerOf(outside.data()), nullptr);
  {
    ActiveGroupScope s(*a);
    std::vector<int, Allocator<int>> v;
    v.resize(1000);
    EXPECT_EQ(MemoryResource::OwnerOf(v.data()), a->GetObjCgroup().get());
    t.Drain();
    EXPECT_EQ(Slab(*a), 4016);
  }
  t.Drain();
  EXPECT_EQ(Slab(*a), 0);
  EXPECT_EQ(a->usage(), Pages(0));
}

}  // namespace
}  // namespace umemcg

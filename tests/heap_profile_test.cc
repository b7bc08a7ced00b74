// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The heap profiler's sampling and tables (heap_profile.h): the estimate's
// accuracy, rates, frees, reparenting, subtree merges, fork, concurrent
// allocation with readers (run under TSan too).

#include "umemcg/heap_profile.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory_resource>
#include <random>
#include <thread>
#include <vector>

#include "profile/sample_math.h"
#include "test_util.h"
#include "umemcg/memory_resource.h"
#include "umemcg/umemcg.h"

namespace umemcg {
namespace {

using testing::TestController;

// Upstream handing out distinct addresses from a reserved range: only the
// header page of each block is touched, so a test can "allocate"
// gigabytes. Never frees.
class BumpResource : public std::pmr::memory_resource {
 public:
  explicit BumpResource(size_t reserve) : size_(reserve) {
    base_ = static_cast<char*>(mmap(nullptr, size_, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                                    -1, 0));
    EXPECT_NE(base_, MAP_FAILED);
  }
  ~BumpResource() override { munmap(base_, size_); }

 private:
  void* do_allocate(size_t bytes, size_t align) override {
    used_ = (used_ + align - 1) & ~(align - 1);
    if (used_ + bytes > size_) throw std::bad_alloc();
    void* p = base_ + used_;
    used_ += bytes;
    return p;
  }
  void do_deallocate(void*, size_t, size_t) override {}
  bool do_is_equal(const memory_resource& o) const noexcept override {
    return this == &o;
  }
  char* base_;
  size_t size_;
  size_t used_ = 0;
};

double Sum(const HeapProfileSnapshot& s, double HeapProfileEntry::*field) {
  double total = 0;
  for (const HeapProfileEntry& e : s.entries) total += e.*field;
  return total;
}

uint64_t InuseSamples(const HeapProfileSnapshot& s) {
  uint64_t n = 0;
  for (const HeapProfileEntry& e : s.entries) n += e.inuse_samples;
  return n;
}

struct Block {
  void* p;
  size_t size;
};

// 10,000 random sizes; the estimated totals (alloc and in use) within 5%
// of the truth, at two rates. The seeds are fixed: the result is the same
// on every run.
void CheckEstimate(Bytes rate, size_t max_size, uint64_t seed) {
  TestController t;
  GroupRef g = t.Make("a");
  SetHeapProfileRate(*g, rate);
  BumpResource upstream(size_t{16} << 30);
  MemoryResource res(*g, {.upstream = &upstream});
  SeedHeapProfileThreadForTesting(seed);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> size_of(1, max_size);
  std::vector<Block> blocks;
  double truth = 0;
  for (int i = 0; i < 10000; ++i) {
    const size_t n = size_of(rng);
    blocks.push_back({res.allocate(n, 16), n});
    truth +=
        static_cast<double>(MemoryResource::ChargedSizeOf(blocks.back().p));
  }
  HeapProfileSnapshot s = SnapshotHeapProfile(*g);
  EXPECT_EQ(s.rate, rate);
  ASSERT_FALSE(s.entries.empty());
  EXPECT_NEAR(Sum(s, &HeapProfileEntry::inuse_space), truth, truth * 0.05);
  EXPECT_NEAR(Sum(s, &HeapProfileEntry::alloc_space), truth, truth * 0.05);
  // Counts are noisier than bytes (a 1-byte block sampled stands for
  // thousands): within 10%.
  EXPECT_NEAR(Sum(s, &HeapProfileEntry::inuse_objects), 10000, 10000 * 0.10);
  // Free every other block: the in-use estimate follows, the cumulative
  // one stays.
  double kept = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i % 2 == 0) {
      res.deallocate(blocks[i].p, blocks[i].size, 16);
    } else {
      kept += static_cast<double>(MemoryResource::ChargedSizeOf(blocks[i].p));
    }
  }
  s = SnapshotHeapProfile(*g);
  EXPECT_NEAR(Sum(s, &HeapProfileEntry::inuse_space), kept, kept * 0.08);
  EXPECT_NEAR(Sum(s, &HeapProfileEntry::alloc_space), truth, truth * 0.05);
  for (size_t i = 1; i < blocks.size(); i += 2) {
    res.deallocate(blocks[i].p, blocks[i].size, 16);
  }
  s = SnapshotHeapProfile(*g);
  EXPECT_EQ(InuseSamples(s), 0u);
  EXPECT_EQ(Sum(s, &HeapProfileEntry::inuse_space), 0);
  EXPECT_NEAR(Sum(s, &HeapProfileEntry::alloc_space), truth, truth * 0.05);
}

TEST(HeapProfileTest, EstimateWithinFivePercentSmallBlocks) {
  CheckEstimate(Bytes(4096), 4096, 42);
}

TEST(HeapProfileTest, EstimateWithinFivePercentLargeBlocks) {
  CheckEstimate(Bytes(256 * 1024), 512 * 1024, 7);
}

TEST(HeapProfileTest, DefaultRateAndOff) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("a/b");
  EXPECT_EQ(HeapProfileRate(*b), kDefaultHeapProfileRate);
  SetHeapProfileRate(*t.ctrl, Bytes(1 << 20));
  EXPECT_EQ(HeapProfileRate(*b), Bytes(1 << 20));
  SetHeapProfileRate(*a, Bytes(0));
  EXPECT_EQ(HeapProfileRate(*b), Bytes(0));
  // Off for a's subtree: nothing sampled, however much is allocated.
  MemoryResource res(*b);
  SeedHeapProfileThreadForTesting(1);
  std::vector<void*> blocks;
  for (int i = 0; i < 64; ++i) blocks.push_back(res.allocate(1 << 20, 16));
  EXPECT_TRUE(SnapshotHeapProfile(*b).entries.empty());
  for (void* p : blocks) res.deallocate(p, 1 << 20, 16);
  ClearHeapProfileRate(*a);
  EXPECT_EQ(HeapProfileRate(*b), Bytes(1 << 20));
  SetHeapProfileRate(*t.ctrl, kDefaultHeapProfileRate);
}

// Blocks at least as large as 30 intervals are sampled with probability
// 1 - exp(-30): always, in practice.
constexpr size_t kBig = 64 * 1024;
constexpr Bytes kSmallRate{2048};

TEST(HeapProfileTest, FreeOfSampledBlockRemovesIt) {
  TestController t;
  GroupRef g = t.Make("a");
  SetHeapProfileRate(*g, kSmallRate);
  MemoryResource res(*g);
  SeedHeapProfileThreadForTesting(3);
  const uint64_t before = HeapProfileLiveSamplesForTesting();
  void* p = res.allocate(kBig, 16);
  EXPECT_EQ(HeapProfileLiveSamplesForTesting(), before + 1);
  HeapProfileSnapshot s = SnapshotHeapProfile(*g);
  ASSERT_EQ(s.entries.size(), 1u);
  EXPECT_EQ(s.entries[0].inuse_samples, 1u);
  EXPECT_FALSE(s.entries[0].stack.empty());
  res.deallocate(p, kBig, 16);
  EXPECT_EQ(HeapProfileLiveSamplesForTesting(), before);
  s = SnapshotHeapProfile(*g);
  ASSERT_EQ(s.entries.size(), 1u);
  EXPECT_EQ(s.entries[0].inuse_samples, 0u);
  EXPECT_EQ(s.entries[0].alloc_samples, 1u);
}

TEST(HeapProfileTest, SamplesFollowReparenting) {
  TestController t;
  GroupRef parent = t.Make("p");
  GroupRef child = t.Make("p/c");
  SetHeapProfileRate(*t.ctrl, kSmallRate);
  std::vector<void*> blocks;
  {
    MemoryResource res(*child);
    SeedHeapProfileThreadForTesting(5);
    for (int i = 0; i < 4; ++i) blocks.push_back(res.allocate(kBig, 16));
    EXPECT_EQ(InuseSamples(SnapshotHeapProfile(*child)), 4u);
    EXPECT_EQ(InuseSamples(SnapshotHeapProfile(*parent)), 0u);
    // The subtree merges the child's profile in.
    EXPECT_EQ(InuseSamples(SnapshotHeapProfile(*parent, true)), 4u);
    ASSERT_TRUE(t.ctrl->RemoveGroup(*child).ok());
    // The charge moved to the parent: so did the samples.
    EXPECT_EQ(InuseSamples(SnapshotHeapProfile(*parent)), 4u);
    for (void* p : blocks) res.deallocate(p, kBig, 16);
  }
  EXPECT_EQ(InuseSamples(SnapshotHeapProfile(*parent)), 0u);
  child.reset();
  t.Drain();
  t.ctrl->Reap();
  SetHeapProfileRate(*t.ctrl, kDefaultHeapProfileRate);
}

TEST(HeapProfileTest, ForkChildStartsEmpty) {
  TestController t;
  GroupRef g = t.Make("a");
  SetHeapProfileRate(*g, kSmallRate);
  MemoryResource res(*g);
  SeedHeapProfileThreadForTesting(9);
  void* p = res.allocate(kBig, 16);
  ASSERT_EQ(InuseSamples(SnapshotHeapProfile(*g)), 1u);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code = 0;
    if (!SnapshotHeapProfile(*g).entries.empty()) code |= 1;
    if (HeapProfileLiveSamplesForTesting() != 0) code |= 2;
    res.deallocate(p, kBig, 16);  // sampled in the parent: ignored here
    void* q = res.allocate(kBig, 16);
    if (InuseSamples(SnapshotHeapProfile(*g)) != 1) code |= 4;
    res.deallocate(q, kBig, 16);
    if (InuseSamples(SnapshotHeapProfile(*g)) != 0) code |= 8;
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent's profile is untouched.
  EXPECT_EQ(InuseSamples(SnapshotHeapProfile(*g)), 1u);
  res.deallocate(p, kBig, 16);
}

TEST(HeapProfileTest, NoteHeapAllocationForDirectObjCgroupUsers) {
  TestController t;
  GroupRef g = t.Make("a");
  SetHeapProfileRate(*g, kSmallRate);
  ObjCgroupRef objcg = g->GetObjCgroup();
  SeedHeapProfileThreadForTesting(11);
  std::vector<char> block(kBig);
  ASSERT_TRUE(objcg->Charge(Bytes(kBig)).ok());
  const bool sampled =
      NoteHeapAllocation(objcg.get(), block.data(), Bytes(kBig));
  EXPECT_TRUE(sampled);
  EXPECT_EQ(InuseSamples(SnapshotHeapProfile(*g)), 1u);
  if (sampled) ForgetHeapAllocation(block.data());
  objcg->Uncharge(Bytes(kBig));
  EXPECT_EQ(InuseSamples(SnapshotHeapProfile(*g)), 0u);
}

// Threads allocate and free through one resource while another reads
// profiles; at quiescence every sample is gone and the cumulative count
// is the number sampled.
TEST(HeapProfileTest, ConcurrentAllocationAndReads) {
  TestController t;
  GroupRef g = t.Make("a");
  GroupRef h = t.Make("a/h");
  SetHeapProfileRate(*g, Bytes(4096));
  MemoryResource res_g(*g);
  MemoryResource res_h(*h);
  std::atomic<int> done{0};
  constexpr int kThreads = 3;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      SeedHeapProfileThreadForTesting(100 + i);
      std::mt19937 rng(i);
      std::vector<std::pair<void*, size_t>> live;
      MemoryResource& res = i % 2 == 0 ? res_g : res_h;
      for (int k = 0; k < 20000; ++k) {
        if (live.size() < 64 && rng() % 3 != 0) {
          const size_t n = 1 + rng() % 8192;
          live.emplace_back(res.allocate(n, 16), n);
        } else if (!live.empty()) {
          res.deallocate(live.back().first, live.back().second, 16);
          live.pop_back();
        }
      }
      for (auto [p, n] : live) res.deallocate(p, n, 16);
      done.fetch_add(1);
    });
  }
  uint64_t reads = 0;
  while (done.load() < kThreads) {
    HeapProfileSnapshot s = SnapshotHeapProfile(*g, /*subtree=*/true);
    for (const HeapProfileEntry& e : s.entries) {
      ASSERT_LE(e.inuse_samples, e.alloc_samples);
    }
    ++reads;
  }
  for (std::thread& th : threads) th.join();
  EXPECT_GT(reads, 0u);
  HeapProfileSnapshot s = SnapshotHeapProfile(*g, true);
  EXPECT_EQ(InuseSamples(s), 0u);
  uint64_t alloc = 0;
  for (const HeapProfileEntry& e : s.entries) alloc += e.alloc_samples;
  EXPECT_GT(alloc, 0u);
  EXPECT_TRUE(SnapshotHeapProfile(*h).entries.size() <= s.entries.size());
}

// A removed group's history outlives its objcg: when the objcg is freed
// (its last block gone, the reap), its sites' cumulative values move to the
// sites of the objcg that took its charges, the nearest online ancestor's,
// and stay in that ancestor's profile; nothing stays in use.
TEST(HeapProfileTest, FreedObjCgroupsHistoryStaysWithTheAncestor) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  SetHeapProfileRate(*t.ctrl, kSmallRate);
  {
    MemoryResource res(*c);
    SeedHeapProfileThreadForTesting(13);
    for (int i = 0; i < 3; ++i)
      res.deallocate(res.allocate(kBig, 16), kBig, 16);
  }
  const HeapProfileSnapshot before = SnapshotHeapProfile(*c);
  ASSERT_EQ(before.entries.size(), 1u);
  const uint64_t samples = before.entries[0].alloc_samples;
  ASSERT_GT(samples, 0u);
  const double space = before.entries[0].alloc_space;
  ASSERT_TRUE(t.ctrl->RemoveGroup(*c).ok());
  c.reset();
  t.Drain();
  t.ctrl->Reap();  // frees c's objcg
  const HeapProfileSnapshot after = SnapshotHeapProfile(*p);
  ASSERT_EQ(after.entries.size(), 1u);
  EXPECT_EQ(after.entries[0].alloc_samples, samples);
  EXPECT_DOUBLE_EQ(after.entries[0].alloc_space, space);
  EXPECT_EQ(after.entries[0].inuse_samples, 0u);
  EXPECT_EQ(after.entries[0].stack, before.entries[0].stack);
  // And on up when p goes too: the root's profile keeps it.
  ASSERT_TRUE(t.ctrl->RemoveGroup(*p).ok());
  p.reset();
  t.Drain();
  t.ctrl->Reap();
  const HeapProfileSnapshot root = SnapshotHeapProfile(t.ctrl->root());
  ASSERT_EQ(root.entries.size(), 1u);
  EXPECT_EQ(root.entries[0].alloc_samples, samples);
  SetHeapProfileRate(*t.ctrl, kDefaultHeapProfileRate);
}

// The sampler's libm-free math against glibc's (the preload must not load
// libm): -log(u) for the uniforms DrawCountdown draws, 1 - e^-x for the
// block-size ratios the sampled probability and the thinning use.
// Page samples (SetHeapProfilePageCharges) from two threads charging and
// uncharging pages of two groups while a third reads the profiles; every
// page uncharged: the groups' estimated in-use page bytes end near zero.
TEST(HeapProfileTest, ConcurrentPageChargesAndReads) {
  TestController t;
  GroupRef g[2] = {t.Make("p0"), t.Make("p1")};
  SetHeapProfileRate(*t.ctrl, Bytes(4096));
  SetHeapProfilePageCharges(true);
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) {
      (void)SnapshotHeapProfile(t.ctrl->root(), true);
    }
  });
  auto worker = [&](int id) {
    SetHeapProfilePageCharges(true);  // this thread's gate open at once
    for (int i = 0; i < 4000; ++i) {
      Group& grp = *g[(i + id) % 2];
      ASSERT_TRUE(grp.TryCharge(Pages(4)).ok());
      if (i % 2 == 0) {
        grp.Uncharge(Pages(4));
      } else {
        grp.UnchargeDirect(Pages(4));
      }
    }
  };
  std::thread t1(worker, 0), t2(worker, 1);
  t1.join();
  t2.join();
  stop.store(true);
  reader.join();
  SetHeapProfilePageCharges(false);
  for (auto& grp : g) {
    double inuse = 0;
    uint64_t samples = 0;
    for (const HeapProfileEntry& e : SnapshotHeapProfile(*grp).entries) {
      inuse += e.inuse_space;
      samples += e.alloc_samples;
    }
    EXPECT_GT(samples, 100u);
    // About 62 MiB charged and uncharged per group; what is left is the last
    // few samples' worth.
    EXPECT_LE(inuse, 1.0 * (1 << 20));
  }
  SetHeapProfileRate(*t.ctrl, kDefaultHeapProfileRate);
}

TEST(SampleMathTest, LogAndOneMinusExpNegMatchLibm) {
  auto rel = [](double got, double want) {
    return want == 0 ? std::fabs(got) : std::fabs(got - want) / std::fabs(want);
  };
  double worst_log = 0, worst_exp = 0;
  // Every binade of (0, 1], with 64 mantissas each, and subnormals.
  for (int e = -1074; e <= 0; ++e) {
    for (int j = 0; j < 64; ++j) {
      const double u = std::ldexp(1.0 + j / 64.0, e);
      if (u > 1.0 || u <= 0) continue;
      worst_log = std::max(worst_log, rel(profile::Log(u), std::log(u)));
    }
  }
  EXPECT_EQ(profile::Log(1.0), 0.0);
  // Uniforms as DrawCountdown makes them, including the extremes.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const double u = static_cast<double>((rng() >> 11) + 1) * 0x1.0p-53;
    worst_log = std::max(worst_log, rel(profile::Log(u), std::log(u)));
  }
  EXPECT_LT(worst_log, 1e-14);
  // x from 1e-20 (an 8-byte block at a huge interval) to past underflow.
  for (double x = 1e-20; x < 800; x *= 1.0007) {
    worst_exp =
        std::max(worst_exp, rel(profile::OneMinusExpNeg(x), -std::expm1(-x)));
  }
  EXPECT_LT(worst_exp, 1e-14);
  EXPECT_EQ(profile::OneMinusExpNeg(0.0), 0.0);
  EXPECT_EQ(profile::OneMinusExpNeg(1e6), 1.0);
  RecordProperty("worst_log_rel_error", std::to_string(worst_log));
  RecordProperty("worst_one_minus_exp_neg_rel_error",
                 std::to_string(worst_exp));
}

}  // namespace
}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The heap profiler fed by libumemcg-jemalloc's per-group arenas: two
// tenants allocating from known functions, each group's pprof file read by
// `go tool pprof -top` (Debian golang-go; missing go is a failure); the
// estimate over 10,000 random sizes; frees (and realloc) dropping samples;
// sampled blocks charged to their group (accounted == jemalloc's books);
// samples following a removed group's charge to its parent; concurrent
// allocation and profile reads (run under TSan too).
//
// With UMEMCG_JEMALLOC_ROUTING (unsanitized builds) the tenants call
// malloc; otherwise umemcg::jemalloc::Allocate (see CMakeLists.txt).

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "umemcg/active.h"
#include "umemcg/heap_profile.h"
#include "umemcg/heap_profile_pprof.h"
#include "umemcg/jemalloc.h"
#include "umemcg/umemcg.h"

namespace je = umemcg::jemalloc;

constexpr size_t kBlock = 64 * 1024;

// The allocator entry the tenants call directly (the profiler cuts the
// stack there, so the caller is the flat frame).
#ifdef UMEMCG_JEMALLOC_ROUTING
#define ENTRY_ALLOC(n) std::malloc(n)
#define ENTRY_FREE(p) std::free(p)
#else
#define ENTRY_ALLOC(n) je::Allocate(n)
#define ENTRY_FREE(p) je::Free(p)
#endif

// The allocating functions the profiles must name: exported (the test is
// linked with -rdynamic), never inlined nor cloned (a constant-propagated
// copy would be a local symbol).
extern "C" [[gnu::noinline, gnu::noipa]] void tenant_a_work(void** out,
                                                            size_t n) {
  for (size_t i = 0; i < n; ++i) {
    out[i] = ENTRY_ALLOC(kBlock);
    asm volatile("" : : "r"(out[i]) : "memory");
  }
  asm volatile("" ::: "memory");  // no tail call
}

extern "C" [[gnu::noinline, gnu::noipa]] void tenant_b_work(void** out,
                                                            size_t n) {
  for (size_t i = 0; i < n; ++i) {
    out[i] = ENTRY_ALLOC(kBlock);
    asm volatile("" : : "r"(out[i]) : "memory");
  }
  asm volatile("" ::: "memory");
}

namespace umemcg {
namespace {

[[gnu::noinline]] void* Alloc(size_t n) {
  void* p = ENTRY_ALLOC(n);
  asm volatile("" : : "r"(p) : "memory");
  return p;
}
void Release(void* p) { ENTRY_FREE(p); }

std::string RunShell(const std::string& command) {
  std::string out;
  FILE* f = popen(command.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

// pprof's byte units ("512kB", "29.98MB"; powers of 1024).
double ParseBytes(const std::string& s) {
  size_t end = 0;
  const double v = std::stod(s, &end);
  const std::string unit = s.substr(end);
  if (unit == "B") return v;
  if (unit == "kB") return v * 1024;
  if (unit == "MB") return v * 1024 * 1024;
  if (unit == "GB") return v * 1024 * 1024 * 1024;
  ADD_FAILURE() << "unit " << unit;
  return 0;
}

// The flat inuse_space of `function` in `go tool pprof -top` output, or -1.
double FlatOf(const std::string& top, const std::string& function) {
  size_t pos = 0;
  while (pos < top.size()) {
    size_t eol = top.find('\n', pos);
    if (eol == std::string::npos) eol = top.size();
    const std::string line = top.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.size() < function.size() ||
        line.compare(line.size() - function.size(), function.size(),
                     function) != 0) {
      continue;
    }
    const size_t start = line.find_first_not_of(' ');
    const size_t stop = line.find(' ', start);
    return ParseBytes(line.substr(start, stop - start));
  }
  return -1;
}

struct Totals {
  double inuse_space = 0, alloc_space = 0;
  uint64_t inuse_samples = 0, alloc_samples = 0;
};
Totals Sum(Group& g, bool subtree = false) {
  Totals t;
  for (const HeapProfileEntry& e : SnapshotHeapProfile(g, subtree).entries) {
    t.inuse_space += e.inuse_space;
    t.alloc_space += e.alloc_space;
    t.inuse_samples += e.inuse_samples;
    t.alloc_samples += e.alloc_samples;
  }
  return t;
}

class JemallocProfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctrl_ = Controller::Create({.charge_group_metadata = false}).value();
    je::HeapOptions options;
    options.heap_profile = true;
    const Status st = je::Enable(*ctrl_, options);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  void TearDown() override {
    je::FlushThreadCaches();
    je::Disable();
    ctrl_.reset();
  }
  GroupRef NewGroup(Group& parent, const std::string& name) {
    return ctrl_->CreateGroup(parent, name).value();
  }
  // Accounted == jemalloc's own books (the group's arena and its sampled
  // arena), and the group's anon statistic is exactly that.
  void ExpectExact(Group& g) {
    je::FlushThreadCaches();
    const je::ArenaInfo info = je::Info(g);
    ASSERT_NE(info.arena, 0u);
    EXPECT_EQ(info.charged.raw(), info.active.raw() + info.dirty.raw());
    ctrl_->DrainAllStocks(g);
    EXPECT_EQ(g.StatExact(StatItem::kAnon),
              static_cast<int64_t>(info.charged.raw()));
  }
  std::unique_ptr<Controller> ctrl_;
};

TEST_F(JemallocProfileTest, GoToolPprofNamesEachTenantsFunction) {
  ASSERT_EQ(std::system("go version > /dev/null 2>&1"), 0)
      << "go is required (Debian golang-go: apt-get install golang-go)";
  GroupRef a = NewGroup(ctrl_->root(), "tenant_a");
  GroupRef b = NewGroup(ctrl_->root(), "tenant_b");
  // 8 KiB: a 64 KiB block is sampled with probability 1 - exp(-8), so the
  // estimate cannot stray far from the truth.
  SetHeapProfileRate(*ctrl_, Bytes(8192));
  SeedHeapProfileThreadForTesting(2027);
  const size_t na = (30u << 20) / kBlock, nb = (10u << 20) / kBlock;
  std::vector<void*> blocks_a(na), blocks_b(nb);
  {
    ActiveGroupScope scope(*a);
    tenant_a_work(blocks_a.data(), na);
  }
  {
    ActiveGroupScope scope(*b);
    tenant_b_work(blocks_b.data(), nb);
  }
  const double truth_a = static_cast<double>(na * kBlock);
  const double truth_b = static_cast<double>(nb * kBlock);
  // The sampled blocks are charged to their group like the others.
  ExpectExact(*a);
  ExpectExact(*b);

  char dir[] = "/tmp/umemcg_je_pprof_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file_a = std::string(dir) + "/a.pb.gz";
  const std::string file_b = std::string(dir) + "/b.pb.gz";
  ASSERT_TRUE(WriteHeapProfilePprof(*a, file_a).ok());
  ASSERT_TRUE(WriteHeapProfilePprof(*b, file_b).ok());
  const std::string env =
      std::string("HOME=") + dir + " GOCACHE=" + dir + "/gocache ";
  auto top = [&](const std::string& file) {
    return RunShell(env + "go tool pprof -top -sample_index=inuse_space " +
                    file + " 2>&1");
  };
  const std::string top_a = top(file_a);
  const std::string top_b = top(file_b);
  std::printf("--- go tool pprof -top tenant_a ---\n%s\n", top_a.c_str());
  std::printf("--- go tool pprof -top tenant_b ---\n%s\n", top_b.c_str());
  EXPECT_NEAR(FlatOf(top_a, "tenant_a_work"), truth_a, truth_a * 0.10) << top_a;
  EXPECT_EQ(FlatOf(top_a, "tenant_b_work"), -1) << top_a;
  EXPECT_NEAR(FlatOf(top_b, "tenant_b_work"), truth_b, truth_b * 0.10) << top_b;
  EXPECT_EQ(FlatOf(top_b, "tenant_a_work"), -1) << top_b;

  for (void* p : blocks_a) Release(p);
  for (void* p : blocks_b) Release(p);
  // Freed: tenant A holds nothing any more.
  ASSERT_TRUE(WriteHeapProfilePprof(*a, file_a).ok());
  const std::string after = top(file_a);
  EXPECT_LE(FlatOf(after, "tenant_a_work"), 0) << after;
  EXPECT_EQ(Sum(*a).inuse_samples, 0u);
  EXPECT_EQ(Sum(*b).inuse_samples, 0u);
  std::system(("rm -rf " + std::string(dir)).c_str());
  SetHeapProfileRate(*ctrl_, kDefaultHeapProfileRate);
}

// 10,000 random sizes (1 B .. 8 KiB) at a 2 KiB interval: the estimated
// in-use and cumulative totals within 5% of the truth; after the frees
// nothing is in use and no sample is left.
TEST_F(JemallocProfileTest, EstimateOverRandomSizesAndFreesDropSamples) {
  GroupRef g = NewGroup(ctrl_->root(), "t");
  SetHeapProfileRate(*g, Bytes(2048));
  SeedHeapProfileThreadForTesting(7);
  const uint64_t live_before = HeapProfileLiveSamplesForTesting();
  std::mt19937_64 rng(11);
  std::vector<void*> blocks(10000);
  double truth = 0;
  {
    ActiveGroupScope scope(*g);
    for (void*& p : blocks) {
      const size_t n = 1 + rng() % 8192;
      p = Alloc(n);
      ASSERT_NE(p, nullptr);
      truth += static_cast<double>(n);
    }
  }
  const Totals t = Sum(*g);
  EXPECT_GT(t.inuse_samples, 1000u);
  EXPECT_NEAR(t.inuse_space, truth, truth * 0.05);
  EXPECT_NEAR(t.alloc_space, truth, truth * 0.05);
  ExpectExact(*g);
  // Half freed under another group's scope: each block still finds its
  // owner (and its sample).
  GroupRef other = NewGroup(ctrl_->root(), "other");
  {
    ActiveGroupScope scope(*other);
    for (size_t i = 0; i < blocks.size(); i += 2) Release(blocks[i]);
  }
  for (size_t i = 1; i < blocks.size(); i += 2) Release(blocks[i]);
  const Totals after = Sum(*g);
  EXPECT_EQ(after.inuse_samples, 0u);
  EXPECT_EQ(after.inuse_space, 0);
  EXPECT_EQ(after.alloc_samples, t.alloc_samples);
  EXPECT_EQ(HeapProfileLiveSamplesForTesting(), live_before);
  // Everything freed: after a purge nothing is charged (the sampled
  // arena's pages included).
  je::FlushThreadCaches();
  je::Purge(*g);
  EXPECT_EQ(je::Info(*g).charged.raw(), 0u);
  ctrl_->DrainAllStocks(*g);
  EXPECT_EQ(g->usage().raw(), 0u);
}

#ifdef UMEMCG_JEMALLOC_ROUTING
// realloc, calloc, aligned and sized paths: every sampled block's sample
// leaves with it (realloc moves it: the old sample goes, the new block is
// counted afresh).
TEST_F(JemallocProfileTest, ReallocAlignedAndSizedPathsDropSamples) {
  GroupRef g = NewGroup(ctrl_->root(), "t");
  SetHeapProfileRate(*g, Bytes(1024));
  SeedHeapProfileThreadForTesting(3);
  const uint64_t live_before = HeapProfileLiveSamplesForTesting();
  std::vector<void*> c_blocks, aligned, news;
  // No container grows under the scope (its blocks would be sampled too).
  c_blocks.reserve(1000);
  aligned.reserve(1000);
  news.reserve(1000);
  {
    ActiveGroupScope scope(*g);
    for (int i = 0; i < 500; ++i) {
      void* p = std::malloc(100);
      asm volatile("" : : "r"(p) : "memory");
      for (size_t n : {300, 5000, 20000, 700}) {
        p = std::realloc(p, n);
        ASSERT_NE(p, nullptr);
        asm volatile("" : : "r"(p) : "memory");
      }
      c_blocks.push_back(p);
      c_blocks.push_back(std::calloc(3, 1000));
      aligned.push_back(std::aligned_alloc(4096, 8192));
      void* q = nullptr;
      ASSERT_EQ(posix_memalign(&q, 64, 3000), 0);
      aligned.push_back(q);
      news.push_back(new char[4000]);
      news.push_back(::operator new(6000, std::align_val_t(256)));
    }
  }
  EXPECT_GT(Sum(*g).inuse_samples, 100u);
  ExpectExact(*g);
  for (void* p : c_blocks) std::free(p);
  for (void* p : aligned) std::free(p);
  for (size_t i = 0; i < news.size(); i += 2) {
    delete[] static_cast<char*>(news[i]);
    ::operator delete(news[i + 1], 6000, std::align_val_t(256));
  }
  EXPECT_EQ(Sum(*g).inuse_samples, 0u);
  EXPECT_EQ(HeapProfileLiveSamplesForTesting(), live_before);
}
#endif

// A removed group's live samples follow its charge: the parent's own
// profile shows them; their frees drop them there.
TEST_F(JemallocProfileTest, SamplesFollowTheChargeToTheParent) {
  GroupRef parent = NewGroup(ctrl_->root(), "p");
  GroupRef child = NewGroup(*parent, "c");
  SetHeapProfileRate(*ctrl_, Bytes(4096));
  SeedHeapProfileThreadForTesting(5);
  std::vector<void*> blocks(256);
  {
    ActiveGroupScope scope(*child);
    for (void*& p : blocks) p = Alloc(16384);
  }
  const Totals in_child = Sum(*child);
  EXPECT_GT(in_child.inuse_samples, 200u);
  EXPECT_EQ(Sum(*parent).inuse_samples, 0u);  // its own groups' only
  ASSERT_TRUE(ctrl_->RemoveGroup(*child).ok());
  child.reset();
  ctrl_->Reap();
  const Totals in_parent = Sum(*parent);
  EXPECT_EQ(in_parent.inuse_samples, in_child.inuse_samples);
  EXPECT_DOUBLE_EQ(in_parent.inuse_space, in_child.inuse_space);
  for (void* p : blocks) Release(p);
  EXPECT_EQ(Sum(*parent).inuse_samples, 0u);
  je::Collect();
  ctrl_->DrainAllStocks(*parent);
  EXPECT_EQ(parent->StatExact(StatItem::kAnon), 0);
  SetHeapProfileRate(*ctrl_, kDefaultHeapProfileRate);
}

// Two threads allocate and free in two groups (blocks freed by the other
// thread too) while a third reads the profiles; at the end nothing is in
// use and the books are exact. Meant for TSan.
TEST_F(JemallocProfileTest, ConcurrentAllocationAndProfileReads) {
  GroupRef g[2] = {NewGroup(ctrl_->root(), "g0"),
                   NewGroup(ctrl_->root(), "g1")};
  SetHeapProfileRate(*ctrl_, Bytes(4096));
  const uint64_t live_before = HeapProfileLiveSamplesForTesting();
  std::atomic<bool> stop{false};
  std::atomic<int> done{0};
  constexpr int kRing = 1024;
  std::atomic<void*> ring[kRing] = {};
  auto worker = [&](int id) {
    std::mt19937 rng(id);
    std::vector<void*> mine;
    mine.reserve(256);
    for (int round = 0; round < 4000; ++round) {
      {
        ActiveGroupScope scope(*g[rng() % 2]);
        void* p = Alloc(8 + rng() % 20000);
        ASSERT_NE(p, nullptr);
        // Every other block goes to the ring, freed by whoever takes it.
        if (rng() % 2 == 0) {
          void* old = ring[rng() % kRing].exchange(p);
          if (old != nullptr) Release(old);
        } else {
          mine.push_back(p);
        }
      }
      if (mine.size() > 128) {
        for (void* q : mine) Release(q);
        mine.clear();
      }
    }
    for (void* q : mine) Release(q);
    je::FlushThreadCaches();
    done.fetch_add(1);
  };
  std::thread reader([&] {
    while (!stop.load()) {
      for (auto& grp : g) (void)SnapshotHeapProfile(*grp, false);
      (void)SnapshotHeapProfile(ctrl_->root(), true);
    }
  });
  std::thread t1(worker, 1), t2(worker, 2);
  t1.join();
  t2.join();
  stop.store(true);
  reader.join();
  for (auto& slot : ring) {
    if (void* p = slot.exchange(nullptr)) Release(p);
  }
  for (auto& grp : g) {
    EXPECT_EQ(Sum(*grp).inuse_samples, 0u);
    EXPECT_GT(Sum(*grp).alloc_samples, 0u);
    ExpectExact(*grp);
  }
  EXPECT_EQ(HeapProfileLiveSamplesForTesting(), live_before);
  SetHeapProfileRate(*ctrl_, kDefaultHeapProfileRate);
}

// Sampling off for the group (interval 0): nothing is sampled, and the
// books stay exact.
TEST_F(JemallocProfileTest, IntervalZeroSamplesNothing) {
  GroupRef g = NewGroup(ctrl_->root(), "t");
  SetHeapProfileRate(*g, Bytes(0));
  std::vector<void*> blocks(64);
  {
    ActiveGroupScope scope(*g);
    for (void*& p : blocks) p = Alloc(1 << 20);
  }
  EXPECT_EQ(Sum(*g).alloc_samples, 0u);
  ExpectExact(*g);
  for (void* p : blocks) Release(p);
}

}  // namespace
}  // namespace umemcg

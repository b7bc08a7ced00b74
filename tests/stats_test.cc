// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Statistics: the item table, exactness after a flush, the published error
// bound under concurrency, thresholds, subtree-only flushing, the periodic
// flusher, removal, custom items and bad input.

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rstat.h"
#include "test_util.h"

namespace umemcg::internal {

// Test access to the controller's rstat engine.
class StatsTestPeer {
 public:
  static Rstat& rstat(Controller& c) { return *c.rstat_; }
  static TryLock& shard_lock(Controller& c, int k) {
    return c.rstat_->shards_[k].lock;
  }
  static void SetBeforePassHook(Controller& c, void (*hook)(void*, int),
                                void* arg) {
    c.rstat_->before_pass_hook_ = hook;
    c.rstat_->before_pass_arg_ = arg;
  }
};

}  // namespace umemcg::internal

namespace umemcg {
namespace {

using internal::StatsTestPeer;
using testing::TestController;

ControllerOptions NoFlusher() {
  ControllerOptions o;
  o.stats_flush_period = std::chrono::nanoseconds(0);
  return o;
}

std::map<std::string, int64_t> ParseStat(const std::string& text) {
  std::map<std::string, int64_t> m;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    const std::string line = text.substr(pos, nl - pos);
    const size_t sp = line.find(' ');
    m[line.substr(0, sp)] = std::stoll(line.substr(sp + 1));
    pos = nl + 1;
  }
  return m;
}

// "<prefix><n>" (snprintf: GCC 12 warns falsely on string + to_string).
std::string Name(const char* prefix, int n) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%s%d", prefix, n);
  return buf;
}

std::vector<std::string> Keys(const std::string& text) {
  std::vector<std::string> keys;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    keys.push_back(text.substr(pos, text.find(' ', pos) - pos));
    pos = nl + 1;
  }
  return keys;
}

TEST(StatsTest, MemoryStatKeysInKernelOrderWithDerivedLines) {
  TestController t(NoFlusher());
  GroupRef g = t.Make("a");
  ASSERT_TRUE(g->ModState(StatItem::kAnon, 3));
  ASSERT_TRUE(g->ModState(StatItem::kKernelStack, 16));
  ASSERT_TRUE(g->ModState(StatItem::kSlabReclaimable, 100));
  ASSERT_TRUE(g->ModState(StatItem::kSlabUnreclaimable, 28));
  ASSERT_TRUE(g->CountEvent(StatItem::kPgfault, 5));
  ASSERT_TRUE(g->ModState(StatItem::kFile, -2));  // negative: printed as 0
  g->FlushStats();
  const std::string text = g->MemoryStat();
  const std::vector<std::string> want = {"anon",
                                         "file",
                                         "kernel",
                                         "kernel_stack",
                                         "percpu",
                                         "sock",
                                         "shmem",
                                         "file_mapped",
                                         "file_dirty",
                                         "file_writeback",
                                         "slab_reclaimable",
                                         "slab_unreclaimable",
                                         "slab",
                                         "pgscan",
                                         "pgsteal",
                                         "pgfault",
                                         "pgmajfault",
                                         "pgactivate",
                                         "pgdeactivate",
                                         "stock"};
  EXPECT_EQ(Keys(text), want);
  auto m = ParseStat(text);
  EXPECT_EQ(m["anon"], 3 * 4096);
  EXPECT_EQ(m["kernel_stack"], 16 * 1024);
  EXPECT_EQ(m["slab"], 128);
  EXPECT_EQ(m["pgfault"], 5);
  EXPECT_EQ(m["file"], 0);
  EXPECT_EQ(g->StatFast(StatItem::kFile), -2);
  EXPECT_EQ(text.back(), '\n');
}

TEST(StatsTest, StockLineShowsStockedPages) {
  TestController t(NoFlusher());
  GroupRef g = t.Make("a");
  ASSERT_TRUE(g->TryCharge(Pages(1)).ok());  // the rest of a batch stocked
  auto m = ParseStat(g->MemoryStat());
  EXPECT_EQ(m["stock"], static_cast<int64_t>(g->StockedPages().raw()) * 4096);
  EXPECT_GT(m["stock"], 0);
  g->UnchargeDirect(Pages(1));
  t.Drain();
}

TEST(StatsTest, HierarchicalAndLocalExactAfterQuiescenceAndFlush) {
  TestController t(NoFlusher(), 4);
  std::vector<GroupRef> groups = {t.Make("a"), t.Make("a/b"), t.Make("a/c"),
                                  t.Make("a/b/d"), t.Make("e")};
  // parent index per group (-1 = root)
  const int parent[] = {-1, 0, 0, 1, -1};
  std::vector<int64_t> own(groups.size(), 0);
  std::mt19937 rng(42);
  for (int n = 0; n < 20000; ++n) {
    const size_t gi = rng() % groups.size();
    const int64_t d = static_cast<int64_t>(rng() % 200) - 90;
    SetFakeCpu(static_cast<int>(rng() % 4));
    ASSERT_TRUE(groups[gi]->ModState(StatItem::kAnon, d));
    own[gi] += d;
  }
  SetFakeCpu(0);
  t.ctrl->FlushAllStats();
  std::vector<int64_t> hier = own;
  for (int i = static_cast<int>(groups.size()) - 1; i >= 0; --i) {
    if (parent[i] >= 0) hier[parent[i]] += hier[i];
  }
  int64_t total = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    EXPECT_EQ(groups[i]->StatFast(StatItem::kAnon), hier[i]) << i;
    EXPECT_EQ(groups[i]->StatLocalFast(StatItem::kAnon), own[i]) << i;
    if (parent[i] < 0) total += hier[i];
  }
  EXPECT_EQ(t.ctrl->root().StatFast(StatItem::kAnon), total);
  EXPECT_EQ(groups[0]->StatBound().pending, 0u);
}

TEST(StatsTest, ThresholdReaderFlushesOnlyOverThreshold) {
  TestController t(NoFlusher(), 2);  // threshold 64 x 2 = 128
  GroupRef g = t.Make("a");
  ASSERT_TRUE(g->CountEvent(StatItem::kPgfault, 10));
  EXPECT_EQ(g->Stat(StatItem::kPgfault), 0);  // under threshold: no flush
  StatErrorBound b = g->StatBound();
  EXPECT_FALSE(b.exceeded);
  EXPECT_EQ(b.pending, 10u);
  EXPECT_EQ(b.threshold, 128u);
  EXPECT_EQ(g->StatExact(StatItem::kPgfault), 10);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(g->CountEvent(StatItem::kPgfault));
  EXPECT_TRUE(g->StatBound().exceeded);
  EXPECT_EQ(g->Stat(StatItem::kPgfault), 210);  // over: flushed
  EXPECT_EQ(g->StatBound().pending, 0u);
}

// group.h: a Stat* read lags by at most batch x nr_cpus page-normalised
// updates (plus racing ones). The per-CPU residues count: with 4 CPUs
// and batch 64 (threshold 256), one batch per CPU in the shared count
// (256, not over the threshold) and 63 more per CPU in the residues leave
// 508 unflushed updates, which a read that looks at the shared count alone
// does not flush.
TEST(StatsTest, ThresholdReadLagsAtMostTheThresholdWithResiduesPending) {
  TestController t(NoFlusher(), 4);
  GroupRef g = t.Make("a");
  int64_t truth = 0;
  for (int cpu = 0; cpu < 4; ++cpu) {
    SetFakeCpu(cpu);
    for (int n = 0; n < 64 + 63; ++n) {
      ASSERT_TRUE(g->CountEvent(StatItem::kPgfault));
      ++truth;
    }
  }
  SetFakeCpu(0);
  const StatErrorBound b = g->StatBound();
  EXPECT_EQ(b.threshold, 256u);
  EXPECT_EQ(b.pending, 508u);
  EXPECT_FALSE(b.exceeded);  // the shared count alone is not over
  const int64_t v = g->Stat(StatItem::kPgfault);
  EXPECT_LE(truth - v, static_cast<int64_t>(b.threshold)) << "Stat() " << v;
  EXPECT_EQ(v, 508);
}

// The same promise over random rounds: a burst of events in one group of
// a 3-level tree on one random CPU, then a read of every group; in both
// flush modes. (One item, so a read's lag is all the pending work.)
class StatsLagTest : public ::testing::TestWithParam<StatsFlushMode> {};

TEST_P(StatsLagTest, EveryThresholdReadIsWithinTheThreshold) {
  constexpr int kCpus = 4;
  ControllerOptions o = NoFlusher();
  o.stats_flush_mode = GetParam();
  TestController t(o, kCpus);
  std::vector<GroupRef> g = {t.Make("a"), t.Make("a/b"), t.Make("a/b/c"),
                             t.Make("a/d")};
  const int parent[] = {-1, 0, 1, 0};
  std::vector<int64_t> truth(g.size());  // hierarchical
  const int64_t threshold = static_cast<int64_t>(g[0]->StatBound().threshold);
  std::mt19937 rng(11);
  int64_t worst = 0;
  for (int round = 0; round < 3000; ++round) {
    const size_t gi = rng() % g.size();
    const int burst = 1 + static_cast<int>(rng() % 20);
    SetFakeCpu(static_cast<int>(rng() % kCpus));
    for (int n = 0; n < burst; ++n) {
      const uint64_t d = 1 + rng() % 3;
      ASSERT_TRUE(g[gi]->CountEvent(StatItem::kPgfault, d));
      for (int x = static_cast<int>(gi); x >= 0; x = parent[x]) {
        truth[static_cast<size_t>(x)] += static_cast<int64_t>(d);
      }
    }
    for (size_t r = 0; r < g.size(); ++r) {
      const int64_t lag = truth[r] - g[r]->Stat(StatItem::kPgfault);
      ASSERT_LE(lag, threshold) << "round " << round << ", group " << r;
      worst = std::max(worst, lag);
    }
  }
  SetFakeCpu(0);
  RecordProperty("worst_lag", static_cast<int>(worst));
}

INSTANTIATE_TEST_SUITE_P(Modes, StatsLagTest,
                         ::testing::Values(StatsFlushMode::kPerGroupSubtree,
                                           StatsFlushMode::kGlobalWholeTree));

TEST(StatsTest, ByteUpdatesAreNormalisedToPagesForTheCount) {
  TestController t(NoFlusher(), 2);
  GroupRef g = t.Make("a");
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(g->ModState(StatItem::kSlabUnreclaimable, 1));
  }
  ASSERT_TRUE(g->ModState(StatItem::kSlabUnreclaimable, 8192));
  const StatErrorBound b = g->StatBound();
  EXPECT_EQ(b.pending, 52u);  // 50 sub-page updates + 2 pages
  EXPECT_EQ(b.For(StatUnit::kBytes), 52 * 4096);
  EXPECT_LE(8242 - g->StatFast(StatItem::kSlabUnreclaimable),
            b.For(StatUnit::kBytes));
}

// How the bound checker's controller finds CPUs: fake ids on 2 shards
// (the locked path; writers migrate by changing their id), or the real
// CPUs with the rseq commit on or off (writers migrate by re-pinning).
enum class BoundPath { kFake, kRseq, kRealLocked };

struct BoundParam {
  StatsFlushMode mode;
  BoundPath path;
};

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {0};
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

class StatsBoundTest : public ::testing::TestWithParam<BoundParam> {};

TEST_P(StatsBoundTest, UnflushedReadsStayWithinTheBoundConcurrently) {
  constexpr int kWriters = 3;
  constexpr int kOps = 20000;
  ControllerOptions options = NoFlusher();
  options.stats_flush_mode = GetParam().mode;
  const bool fake = GetParam().path == BoundPath::kFake;
  std::unique_ptr<TestController> fake_ctrl;
  std::unique_ptr<Controller> real_ctrl;
  if (fake) {
    fake_ctrl = std::make_unique<TestController>(options, 2);  // 3 writers
  } else {
    options.cpu_source = CpuSource::kAuto;
    options.stats_rseq = GetParam().path == BoundPath::kRseq;
    real_ctrl = Controller::Create(options).value();
    if (GetParam().path == BoundPath::kRseq && !real_ctrl->info().stats_rseq) {
      GTEST_SKIP() << "statistics rseq commit unavailable here (TSan build, "
                      "no rseq registration or no membarrier RSEQ fence)";
    }
  }
  Controller* ctrl = fake ? fake_ctrl->ctrl.get() : real_ctrl.get();
  const std::vector<int> cpus = AllowedCpus();
  auto make = [&](const char* parent, const char* name) {
    Group& p = parent == nullptr ? ctrl->root() : *ctrl->Lookup(parent).value();
    return ctrl->CreateGroup(p, name).value();
  };
  struct TestView {
    Controller* ctrl;
  } t{ctrl};
  GroupRef a = make(nullptr, "a");
  std::vector<GroupRef> leaves = {make("a", "x"), make("a", "y"),
                                  make(nullptr, "b")};
  // Per writer: updates started and finished (seq_cst).
  std::atomic<int64_t> started[kWriters] = {};
  std::atomic<int64_t> done[kWriters] = {};
  std::atomic<bool> stop{false};
  std::atomic<bool> writer_done[kWriters] = {};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      SetFakeCpu(w % 2);
      std::mt19937 rng(w);
      for (int n = 0; n < kOps; ++n) {
        const int64_t k = 1 + static_cast<int64_t>(rng() % 3);
        started[w].fetch_add(k);
        leaves[w]->CountEvent(StatItem::kPgfault, static_cast<uint64_t>(k));
        done[w].fetch_add(k);
        if (n % 997 == 0) {  // migrate
          SetFakeCpu(static_cast<int>(rng() % 2));
          if (!fake) PinTo(cpus[rng() % cpus.size()]);
        }
        // Pace the writers so that the flushers keep groups under their
        // thresholds part of the time (over it, no bound is published).
        if (n % 16 == 0)
          std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
      writer_done[w].store(true);
    });
  }
  // A flusher racing with everything.
  threads.emplace_back([&] {
    std::mt19937 rng(7);
    while (!stop.load()) {
      leaves[rng() % kWriters]->FlushStats();
      if (rng() % 4 == 0) a->FlushStats();
      if (rng() % 8 == 0) t.ctrl->FlushAllStats();
      std::this_thread::yield();
    }
  });
  // The checker: for `a` (writers 0 and 1) and the root (all writers).
  int64_t checks = 0;
  auto check = [&](Group& g, int nw) {
    int64_t lo = 0;
    for (int w = 0; w < nw; ++w) lo += done[w].load();
    const StatErrorBound b = g.StatBound();
    const int64_t v = g.StatFast(StatItem::kPgfault);
    int64_t hi = 0;
    for (int w = 0; w < nw; ++w) hi += started[w].load();
    EXPECT_LE(v, hi);
    if (!b.exceeded) {
      EXPECT_GE(v, lo - static_cast<int64_t>(b.pending))
          << "pending " << b.pending;
      ++checks;
    }
  };
  std::atomic<int> finished{0};
  while (finished.load() < kWriters) {
    check(*a, 2);
    check(t.ctrl->root(), kWriters);
    int f = 0;
    for (int w = 0; w < kWriters; ++w) f += writer_done[w].load() ? 1 : 0;
    finished.store(f);
  }
  RecordProperty("bounded_checks_while_writing", static_cast<int>(checks));
  // On a loaded machine every read may find the count over its threshold
  // while writing (global mode especially); the racing flusher soon makes
  // a bounded read possible once the writers are done.
  while (checks == 0) {
    check(*a, 2);
    check(t.ctrl->root(), kWriters);
    std::this_thread::yield();
  }
  stop.store(true);
  for (auto& th : threads) th.join();
  EXPECT_GT(checks, 0);
  RecordProperty("bounded_checks", static_cast<int>(checks));
  int64_t total = 0;
  for (int w = 0; w < kWriters; ++w) total += done[w].load();
  EXPECT_EQ(t.ctrl->root().StatExact(StatItem::kPgfault), total);
  EXPECT_EQ(a->StatFast(StatItem::kPgfault), done[0].load() + done[1].load());
}

INSTANTIATE_TEST_SUITE_P(
    Paths, StatsBoundTest,
    ::testing::Values(
        BoundParam{StatsFlushMode::kPerGroupSubtree, BoundPath::kFake},
        BoundParam{StatsFlushMode::kGlobalWholeTree, BoundPath::kFake},
        BoundParam{StatsFlushMode::kPerGroupSubtree, BoundPath::kRseq},
        BoundParam{StatsFlushMode::kGlobalWholeTree, BoundPath::kRseq},
        BoundParam{StatsFlushMode::kPerGroupSubtree, BoundPath::kRealLocked},
        BoundParam{StatsFlushMode::kGlobalWholeTree, BoundPath::kRealLocked}),
    [](const ::testing::TestParamInfo<BoundParam>& p) {
      const char* path = p.param.path == BoundPath::kFake   ? "Fake"
                         : p.param.path == BoundPath::kRseq ? "Rseq"
                                                            : "RealLocked";
      return std::string(path) +
             (p.param.mode == StatsFlushMode::kPerGroupSubtree ? "PerGroup"
                                                               : "Global");
    });

// An update on CPU 0 stops at `a` (over its threshold) before a flush of
// `a` starts, and another after the flush passed CPU 0. The first is
// flushed; the second is not, so it must record its stop again rather than
// rely on the first one's record, which the flush clears.
TEST(StatsTest, StopAfterTheFlushPassedItsCpuIsRecordedAgain) {
  TestController t(NoFlusher(), 2);  // threshold 64 x 2 = 128
  GroupRef a = t.Make("a");
  GroupRef x = t.Make("a/x");
  GroupRef y = t.Make("a/y");
  SetFakeCpu(1);
  ASSERT_TRUE(y->CountEvent(StatItem::kPgfault, 200));  // a over threshold
  SetFakeCpu(0);
  ASSERT_TRUE(x->CountEvent(StatItem::kPgfault, 1));  // stops at a
  StatsTestPeer::SetBeforePassHook(
      *t.ctrl,
      [](void* arg, int shard) {
        if (shard != 1) return;  // after the pass over CPU 0
        SetFakeCpu(0);
        ASSERT_TRUE(
            static_cast<Group*>(arg)->CountEvent(StatItem::kPgfault, 1));
      },
      x.get());
  a->FlushStats();
  StatsTestPeer::SetBeforePassHook(*t.ctrl, nullptr, nullptr);
  const StatErrorBound b = a->StatBound();
  const int64_t v = a->StatFast(StatItem::kPgfault);
  ASSERT_EQ(v, 201);  // the update after the pass is still unflushed
  EXPECT_TRUE(b.exceeded || v + static_cast<int64_t>(b.pending) >= 202)
      << "pending " << b.pending << " exceeded " << b.exceeded;
  EXPECT_EQ(a->StatExact(StatItem::kPgfault), 202);
}

// Two flushes of `a` overlap: an update stops at `a` after the first has
// passed its CPU, and the second starts before the first ends. The first
// must not clear the stop on the second's behalf: until the second has
// passed that CPU, the update is neither flushed nor counted.
TEST(StatsTest, OverlappingFlushesDoNotClearAStopTheyDidNotFlush) {
  TestController t(NoFlusher(), 2);  // threshold 128
  GroupRef a = t.Make("a");
  GroupRef x = t.Make("a/x");
  GroupRef y = t.Make("a/y");
  SetFakeCpu(1);
  ASSERT_TRUE(y->CountEvent(StatItem::kPgfault, 200));  // a over threshold
  struct Ctx {
    Group* a;
    Group* x;
    std::thread::id first;
    std::atomic<int> stage{0};
  } ctx{a.get(), x.get(), std::this_thread::get_id()};
  auto wait_for = [](std::atomic<int>& stage, int v) {
    while (stage.load() < v) std::this_thread::yield();
  };
  StatsTestPeer::SetBeforePassHook(
      *t.ctrl,
      [](void* arg, int shard) {
        auto* c = static_cast<Ctx*>(arg);
        if (std::this_thread::get_id() == c->first) {
          if (shard != 1) return;
          // The first flush passed CPU 0: an update there stops at `a`,
          // then the second flush starts and reaches its first pass.
          SetFakeCpu(0);
          ASSERT_TRUE(c->x->CountEvent(StatItem::kPgfault, 1));
          c->stage.store(1);
          while (c->stage.load() < 2) std::this_thread::yield();
        } else if (shard == 0) {
          c->stage.store(2);
          while (c->stage.load() < 3) std::this_thread::yield();
        }
      },
      &ctx);
  std::thread second([&] {
    wait_for(ctx.stage, 1);
    a->FlushStats();
  });
  a->FlushStats();  // the first flush
  const StatErrorBound b = a->StatBound();
  const int64_t v = a->StatFast(StatItem::kPgfault);
  EXPECT_EQ(v, 200);  // x's update waits for the second flush
  EXPECT_TRUE(b.exceeded || v + static_cast<int64_t>(b.pending) >= 201)
      << "pending " << b.pending << " exceeded " << b.exceeded;
  ctx.stage.store(3);
  second.join();
  StatsTestPeer::SetBeforePassHook(*t.ctrl, nullptr, nullptr);
  const StatErrorBound after = a->StatBound();
  EXPECT_FALSE(after.exceeded);  // the second flush covered the stop
  EXPECT_EQ(a->StatFast(StatItem::kPgfault), 201);
}

TEST(StatsTest, DirectPathWhenTheShardIsBusyIsExactAtOnce) {
  TestController t(NoFlusher(), 2);
  GroupRef g = t.Make("a");
  internal::TryLock& lock = StatsTestPeer::shard_lock(*t.ctrl, 0);
  lock.lock();
  ASSERT_TRUE(g->ModState(StatItem::kAnon, 7));
  lock.unlock();
  EXPECT_EQ(StatsTestPeer::rstat(*t.ctrl).direct_updates(), 1u);
  EXPECT_EQ(g->StatFast(StatItem::kAnon), 7);
  EXPECT_EQ(g->StatLocalFast(StatItem::kAnon), 7);
  EXPECT_EQ(t.ctrl->root().StatFast(StatItem::kAnon), 7);
  ASSERT_TRUE(g->ModState(StatItem::kAnon, 1));
  EXPECT_EQ(g->StatExact(StatItem::kAnon), 8);
}

TEST(StatsTest, SubtreeReadFlushesOnlyTheDirtyPart) {
  constexpr int kCpus = 4;
  TestController t(NoFlusher(), kCpus);
  std::vector<GroupRef> tops;
  std::vector<GroupRef> leaves;
  for (int i = 0; i < 40; ++i) {
    tops.push_back(t.Make(Name("t", i)));
    for (int j = 0; j < 50; ++j) {
      leaves.push_back(t.Make(Name("t", i) + Name("/l", j)));
    }
  }
  ASSERT_EQ(t.ctrl->live_groups(), 1 + 40 + 40 * 50);
  // Updates in three leaves: two under t3 (CPUs 1 and 2), one under t7.
  SetFakeCpu(1);
  ASSERT_TRUE(leaves[3 * 50 + 4]->ModState(StatItem::kAnon, 5));
  SetFakeCpu(2);
  ASSERT_TRUE(leaves[3 * 50 + 9]->ModState(StatItem::kAnon, 6));
  ASSERT_TRUE(leaves[7 * 50 + 1]->ModState(StatItem::kAnon, 7));
  SetFakeCpu(0);
  internal::Rstat& r = StatsTestPeer::rstat(*t.ctrl);
  const uint64_t before = r.flush_callbacks();
  EXPECT_EQ(tops[3]->StatExact(StatItem::kAnon), 11);
  // (t3, CPU 1), (l4, CPU 1), (t3, CPU 2), (l9, CPU 2).
  EXPECT_EQ(r.flush_callbacks() - before, 4u);
  EXPECT_EQ(tops[7]->StatFast(StatItem::kAnon), 0);  // not flushed
  const uint64_t mid = r.flush_callbacks();
  EXPECT_EQ(t.ctrl->root().StatExact(StatItem::kAnon), 18);
  // The root on CPUs 1 and 2 (t3 was unlinked by its own flush; its
  // deltas wait in the root's pending values), t7 and its leaf on CPU 2.
  EXPECT_EQ(r.flush_callbacks() - mid, 4u);
  const uint64_t end = r.flush_callbacks();
  t.ctrl->FlushAllStats();  // nothing dirty: no callbacks
  EXPECT_EQ(r.flush_callbacks(), end);
}

TEST(StatsTest, GlobalModeFlushesTheWholeTreeFromAnyReader) {
  ControllerOptions o = NoFlusher();
  o.stats_flush_mode = StatsFlushMode::kGlobalWholeTree;
  TestController t(o, 2);  // threshold 128 global
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(a->CountEvent(StatItem::kPgfault));
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(b->CountEvent(StatItem::kPgfault));
  EXPECT_TRUE(b->StatBound().exceeded);
  EXPECT_EQ(b->Stat(StatItem::kPgfault), 100);  // flushed from the root
  EXPECT_EQ(a->StatFast(StatItem::kPgfault), 100);
  EXPECT_EQ(t.ctrl->root().StatFast(StatItem::kPgfault), 200);
  EXPECT_EQ(a->StatBound().pending, 0u);
}

TEST(StatsTest, PeriodicFlusherMakesValuesExactWithinOnePeriod) {
  ControllerOptions o;
  o.stats_flush_period = std::chrono::seconds(2);
  TestController t(o, 2);
  GroupRef g = t.Make("a");
  ASSERT_TRUE(g->ModState(StatItem::kAnon, 9));  // far under the threshold
  internal::Rstat& r = StatsTestPeer::rstat(*t.ctrl);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(r.periodic_flushes(), 0u);  // the fake clock has not moved
  EXPECT_EQ(g->StatFast(StatItem::kAnon), 0);
  t.clock.Advance(std::chrono::seconds(2));
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (r.periodic_flushes() == 0 &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(r.periodic_flushes(), 1u);
  EXPECT_EQ(g->StatFast(StatItem::kAnon), 9);
  EXPECT_EQ(t.ctrl->root().StatFast(StatItem::kAnon), 9);
  EXPECT_LT(g->StatBound().since_last_flush, std::chrono::seconds(2));
}

// Real time and a flusher thread, on `nr_cpus` fake CPUs.
ControllerOptions RealFlusher(std::chrono::nanoseconds period, int nr_cpus) {
  ControllerOptions o;
  o.clock = SystemClock();
  o.stats_flush_period = period;
  o.cpu_source = CpuSource::kFake;
  o.nr_cpus = nr_cpus;
  return o;
}

TEST(StatsTest, FlusherThreadStopsWithTheController) {
  for (int i = 0; i < 5; ++i) {
    auto c = Controller::Create(RealFlusher(std::chrono::milliseconds(1), 2));
    ASSERT_TRUE(c.ok());
    GroupRef g = (*c)->CreateGroup((*c)->root(), "a").value();
    ASSERT_TRUE(g->ModState(StatItem::kAnon, 1));
    // Real time here: wait (bounded) for the flusher to run once.
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (g->StatFast(StatItem::kAnon) != 1 &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(g->StatFast(StatItem::kAnon), 1);
    g.reset();
    c->reset();  // joins the flusher
  }
}

// A block the flusher's pool refill constructed, installed by an update on
// one thread, read by a flush on another that holds no shard lock: the
// flush must be ordered after the construction (TSan reported the read of
// the block's link racing with its construction before block() was an
// acquire). First updates of many groups on several shards run the pools
// dry, so the flusher thread refills them; its periodic flush never comes
// (it would order the reader after the refill through the flush lock).
TEST(StatsTest, FlushOfABlockTheFlusherBuiltIsOrderedAfterItsConstruction) {
  auto c = Controller::Create(RealFlusher(std::chrono::hours(1), 4));
  ASSERT_TRUE(c.ok());
  Controller& ctrl = **c;
  constexpr int kGroups = 2000;
  // Made here, before both threads start: their blocks are not, they come
  // from the pools when the writer first updates them there.
  std::vector<GroupRef> groups;
  for (int n = 0; n < kGroups; ++n) {
    groups.push_back(
        ctrl.CreateGroup(ctrl.root(), "g" + std::to_string(n)).value());
  }
  // The hand-over after the blocks are installed is relaxed on purpose:
  // it orders nothing, so only block() can order the reader after the
  // blocks' construction (as for a flush racing an update in real use).
  std::atomic<int> installed{0};
  std::atomic<int> read{0};
  std::atomic<int> mismatches{0};
  std::thread writer([&] {
    for (int n = 0; n < kGroups; ++n) {
      for (int cpu = 0; cpu < 4; ++cpu) {
        SetFakeCpu(cpu);
        ASSERT_TRUE(groups[n]->ModState(StatItem::kAnon, 1));
      }
      SetFakeCpu(0);
      installed.store(n + 1, std::memory_order_relaxed);
      while (read.load(std::memory_order_relaxed) != n + 1) {
        std::this_thread::yield();
      }
    }
  });
  std::thread reader([&] {
    for (int n = 0; n < kGroups; ++n) {
      while (installed.load(std::memory_order_relaxed) != n + 1) {
        std::this_thread::yield();
      }
      Group& g = *groups[n];
      // FlushSubtree: reads each block's link before taking its shard.
      if (g.StatExact(StatItem::kAnon) != 4) mismatches.fetch_add(1);
      (void)g.StatBound();  // the error-bound reader: reads the residues
      read.store(n + 1, std::memory_order_relaxed);
    }
  });
  writer.join();
  reader.join();
  EXPECT_EQ(mismatches.load(), 0);
  ctrl.FlushAllStats();
  for (int n = 0; n < kGroups; ++n) {
    EXPECT_EQ(groups[n]->StatFast(StatItem::kAnon), 4) << n;
  }
  EXPECT_EQ(ctrl.root().StatFast(StatItem::kAnon), 4 * kGroups);
  groups.clear();
  c->reset();
}

TEST(StatsTest, RatelimitedFlushWaitsForALatePeriodicFlusher) {
  ControllerOptions o;
  o.stats_flush_period = std::chrono::hours(1);  // never fires in the test
  TestController t(o, 2);
  GroupRef g = t.Make("a");
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(g->CountEvent(StatItem::kPgfault));
  g->FlushStatsRatelimited();  // the flusher is not late: no flush
  EXPECT_EQ(g->StatFast(StatItem::kPgfault), 0);
  t.clock.Advance(std::chrono::hours(2) + std::chrono::seconds(1));
  g->FlushStatsRatelimited();
  EXPECT_EQ(g->StatFast(StatItem::kPgfault), 200);
}

TEST(StatsTest, RemovalWithPendingPerCpuDeltasLosesNothing) {
  TestController t(NoFlusher(), 4);
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("a/b");
  for (int cpu = 0; cpu < 4; ++cpu) {
    SetFakeCpu(cpu);
    ASSERT_TRUE(b->ModState(StatItem::kShmem, 10 + cpu));
    ASSERT_TRUE(a->ModState(StatItem::kShmem, 1));
  }
  SetFakeCpu(0);
  ASSERT_TRUE(t.ctrl->RemoveGroup(*b).ok());
  EXPECT_FALSE(b->ModState(StatItem::kShmem, 100));  // refused
  EXPECT_EQ(b->StatLocalFast(StatItem::kShmem), 46);
  b.reset();
  t.ctrl->Reap();
  EXPECT_EQ(a->StatExact(StatItem::kShmem), 50);
  EXPECT_EQ(a->StatLocalFast(StatItem::kShmem), 4);
  EXPECT_EQ(t.ctrl->root().StatExact(StatItem::kShmem), 50);
}

TEST(StatsTest, CustomItemsFollowTheBuiltinOnes) {
  ControllerOptions o = NoFlusher();
  o.custom_stat_items = {{"query_cache", StatUnit::kBytes},
                         {"index", StatUnit::kPages},
                         {"lookups", StatUnit::kEvents}};
  TestController t(o);
  EXPECT_EQ(t.ctrl->info().nr_stat_items, kNumBuiltinStatItems + 3);
  const std::optional<StatItem> qc = t.ctrl->FindStatItem("query_cache");
  ASSERT_TRUE(qc.has_value());
  EXPECT_EQ(static_cast<size_t>(*qc), kNumBuiltinStatItems);
  EXPECT_EQ(t.ctrl->FindStatItem("anon"), StatItem::kAnon);
  EXPECT_EQ(t.ctrl->StatItemUnit(*t.ctrl->FindStatItem("index")),
            StatUnit::kPages);
  EXPECT_STREQ(t.ctrl->StatItemName(*qc), "query_cache");
  GroupRef g = t.Make("a");
  ASSERT_TRUE(g->ModState(*qc, 5000));
  ASSERT_TRUE(g->ModState(*t.ctrl->FindStatItem("index"), 2));
  ASSERT_TRUE(g->CountEvent(*t.ctrl->FindStatItem("lookups"), 3));
  g->FlushStats();
  const std::string text = g->MemoryStat();
  std::vector<std::string> keys = Keys(text);
  ASSERT_GE(keys.size(), 4u);
  EXPECT_EQ(keys[keys.size() - 4], "stock");
  EXPECT_EQ(keys[keys.size() - 3], "query_cache");
  EXPECT_EQ(keys.back(), "lookups");
  auto m = ParseStat(text);
  EXPECT_EQ(m["query_cache"], 5000);
  EXPECT_EQ(m["index"], 2 * 4096);
  EXPECT_EQ(m["lookups"], 3);
  EXPECT_EQ(t.ctrl->root().StatExact(*qc), 5000);
}

TEST(StatsTest, BadCustomItemsAreInvalidArgument) {
  auto create = [](std::vector<StatItemSpec> items) {
    ControllerOptions o = NoFlusher();
    o.custom_stat_items = std::move(items);
    return Controller::Create(std::move(o)).status().code();
  };
  EXPECT_EQ(create({{"a"}, {"a"}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(create({{"anon"}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(create({{"slab"}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(create({{"stock"}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(create({{""}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(create({{"Upper"}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(create({{"9lives"}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(create({{"has space"}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(create({{std::string(65, 'x')}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(create({{"ok", static_cast<StatUnit>(9)}}),
            StatusCode::kInvalidArgument);
  std::vector<StatItemSpec> many;
  for (size_t i = 0; i <= kMaxCustomStatItems; ++i) {
    many.push_back({Name("i", static_cast<int>(i))});
  }
  EXPECT_EQ(create(many), StatusCode::kInvalidArgument);
  EXPECT_EQ(create({{"fine_1"}, {"fine_2", StatUnit::kKiB}}), StatusCode::kOk);
  ControllerOptions o;
  o.stats_flush_period = std::chrono::seconds(-1);
  EXPECT_EQ(Controller::Create(o).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(StatsTest, UnknownItemIdsAreRefused) {
  TestController t(NoFlusher());
  GroupRef g = t.Make("a");
  const auto unknown = static_cast<StatItem>(kNumBuiltinStatItems);
  EXPECT_FALSE(g->ModState(unknown, 1));
  EXPECT_EQ(g->StatFast(unknown), 0);
  EXPECT_EQ(t.ctrl->StatItemName(unknown), nullptr);
  EXPECT_FALSE(t.ctrl->FindStatItem("nope").has_value());
}

TEST(StatsTest, MemoryEventsText) {
  TestController t(NoFlusher());
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("a/b");
  ASSERT_TRUE(b->SetMax(Pages(0)).ok());
  // Two max events (before and after the reclaim round), as in EventsTest.
  EXPECT_FALSE(
      b->TryCharge(Pages(1), kChargeDefault | ChargeFlags::kNoRetry).ok());
  EXPECT_EQ(b->MemoryEventsLocal(),
            "low 0\nhigh 0\nmax 2\noom 0\noom_kill 0\noom_group_kill 0\n");
  EXPECT_EQ(a->MemoryEvents(),
            "low 0\nhigh 0\nmax 2\noom 0\noom_kill 0\noom_group_kill 0\n");
  EXPECT_EQ(a->MemoryEventsLocal(),
            "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n");
}

}  // namespace
}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The statistics hit path with restartable sequences (src/rstat.h): which
// path ControllerInfo reports, that hot updates commit without the shard
// lock, exactness under preemption, signals, migrations and concurrent
// fenced flushes, and the per-CPU block pools (first updates when a pool
// ran dry, refills, blocks returned with their group). The rseq cases are
// skipped, with the reason, where the commit is unavailable (TSan builds,
// no rseq registration, no membarrier RSEQ fence, or a CPU layout the
// shards cannot map one to one).

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "port/rseq.h"
#include "rstat.h"
#include "test_util.h"

namespace umemcg::internal {

class StatsTestPeer {
 public:
  static Rstat& rstat(Controller& c) { return *c.rstat_; }
  static GroupStats* stats(Group& g) { return g.stats_; }
  static TryLock& shard_lock(Controller& c, int k) {
    return c.rstat_->shards_[k].lock;
  }
  static void TrimPools(Rstat& r) { r.TrimPools(); }
  // Held, it keeps the flusher thread from running once woken.
  static std::mutex& flusher_mutex(Rstat& r) { return r.flusher_mu_; }
};

}  // namespace umemcg::internal

namespace umemcg {
namespace {

using internal::Rstat;
using internal::StatsTestPeer;
using testing::TestController;

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {0};
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

bool PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

void Unpin(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// A controller on the real CPUs (the rseq source), no periodic flusher.
std::unique_ptr<Controller> RealController(
    bool rseq, StatsFlushMode mode = StatsFlushMode::kPerGroupSubtree) {
  ControllerOptions o;
  o.cpu_source = CpuSource::kAuto;
  o.stats_flush_period = std::chrono::nanoseconds(0);
  o.stats_flush_mode = mode;
  o.stats_rseq = rseq;
  o.charge_group_metadata = false;  // counts updates exactly
  auto c = Controller::Create(std::move(o));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

#define SKIP_WITHOUT_STATS_RSEQ(ctrl)                                       \
  if (!(ctrl)->info().stats_rseq) {                                         \
    GTEST_SKIP() << "statistics rseq commit unavailable here (TSan build, " \
                    "no rseq registration, no membarrier RSEQ fence, or "   \
                    "CPU ids the shards do not map one to one): the "       \
                    "try-lock path is tested instead";                      \
  }

GroupRef Chain(Controller& c, int depth) {
  GroupRef g(&c.root());
  for (int d = 0; d < depth; ++d) {
    char name[8];
    std::snprintf(name, sizeof(name), "l%d", d);
    g = c.CreateGroup(*g, name).value();
  }
  return g;
}

TEST(StatsRseqTest, InfoReportsThePath) {
  auto rseq = RealController(true);
  auto locked = RealController(false);
  ASSERT_TRUE(rseq && locked);
  EXPECT_EQ(rseq->info().stats_rseq, rseq->info().stock_rseq);
  EXPECT_FALSE(locked->info().stats_rseq);
  TestController fake;  // fake CPU ids: never rseq
  EXPECT_FALSE(fake.ctrl->info().stats_rseq);
  EXPECT_TRUE(StatsTestPeer::rstat(*rseq).rseq() == rseq->info().stats_rseq);
}

// Once the leaf's stop is recorded on this CPU, updates are one sequence:
// no shard lock, no direct path, and the per-CPU state holds them.
TEST(StatsRseqTest, HotUpdatesCommitWithoutTheLock) {
  auto ctrl = RealController(true);
  ASSERT_TRUE(ctrl);
  SKIP_WITHOUT_STATS_RSEQ(ctrl);
  const std::vector<int> cpus = AllowedCpus();
  ASSERT_TRUE(PinTo(cpus[0]));
  GroupRef leaf = Chain(*ctrl, 3);
  Rstat& r = StatsTestPeer::rstat(*ctrl);
  // Warm up: link, count past the threshold, then one more update records
  // the stop (under the lock, once per flush pass).
  int64_t total = 0;
  while (!leaf->StatBound().exceeded) {
    ASSERT_TRUE(leaf->ModState(StatItem::kFileMapped, 1));
    ++total;
  }
  ASSERT_TRUE(leaf->ModState(StatItem::kFileMapped, 1));
  ++total;
  const uint64_t locked = r.locked_updates();
  const uint64_t direct = r.direct_updates();
  constexpr int kUpdates = 100000;
  for (int n = 0; n < kUpdates; ++n) {
    ASSERT_TRUE(leaf->ModState(StatItem::kFileMapped, 1));
  }
  EXPECT_EQ(r.locked_updates(), locked);
  EXPECT_EQ(r.direct_updates(), direct);
  internal::StatCpu* b = StatsTestPeer::stats(*leaf)->block(cpus[0]);
  ASSERT_NE(b, nullptr);
  EXPECT_GE(b->state()[static_cast<size_t>(StatItem::kFileMapped)], kUpdates);
  total += kUpdates;
  EXPECT_EQ(leaf->StatExact(StatItem::kFileMapped), total);
  EXPECT_EQ(ctrl->root().StatExact(StatItem::kFileMapped), total);
  Unpin(cpus);
}

// The locked path is what stats_rseq = false takes: every update locks.
// A thread of the parent may be between an rseq add and its count when
// another thread forks; it does not exist in the child, so its add is in a
// linked block with no count anywhere. The child therefore publishes no
// bound (exceeded) until a whole-tree flush has folded every linked
// block; a threshold read of any group (Stat, MemoryStat) does that
// flush.
TEST(StatsRseqTest, ForkChildPublishesNoBoundUntilAWholeTreeFlush) {
  auto ctrl = RealController(true);
  ASSERT_TRUE(ctrl);
  SKIP_WITHOUT_STATS_RSEQ(ctrl);
  GroupRef leaf = Chain(*ctrl, 2);
  leaf->CountEvent(StatItem::kPgfault, 3);
  ctrl->FlushAllStats();
  ASSERT_FALSE(leaf->StatBound().exceeded);
  ASSERT_FALSE(ctrl->root().StatBound().exceeded);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int rc = 0;
    if (!leaf->StatBound().exceeded) rc |= 1;
    if (!ctrl->root().StatBound().exceeded) rc |= 2;
    // A threshold reader flushes: the whole tree, for the fork's stop.
    if (leaf->Stat(StatItem::kPgfault) != 3) rc |= 4;
    if (leaf->StatBound().exceeded) rc |= 8;
    if (ctrl->root().StatBound().exceeded) rc |= 16;
    _exit(rc);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent is unaffected.
  EXPECT_FALSE(leaf->StatBound().exceeded);
}

TEST(StatsRseqTest, StatsRseqFalseTakesTheLockEveryTime) {
  auto ctrl = RealController(false);
  ASSERT_TRUE(ctrl);
  GroupRef leaf = Chain(*ctrl, 3);
  Rstat& r = StatsTestPeer::rstat(*ctrl);
  for (int n = 0; n < 1000; ++n) {
    ASSERT_TRUE(leaf->ModState(StatItem::kAnon, 1));
  }
  // Each update locked or (another thread held the shard) went direct.
  EXPECT_EQ(r.locked_updates() + r.direct_updates(), 1000u);
  EXPECT_EQ(leaf->StatExact(StatItem::kAnon), 1000);
}

// Threads (more than CPUs, unpinned; a migrator moves them around and a
// signaller interrupts them, aborting sequences) update random groups of a
// tree with random deltas while a flusher flushes random subtrees (fencing
// the CPUs it passes) and readers read with and without flushing. At the
// end every hierarchical and local value is exact.
struct StressParam {
  bool rseq;
  StatsFlushMode mode;
};

class StatsRseqStressTest : public ::testing::TestWithParam<StressParam> {};

TEST_P(StatsRseqStressTest, ExactUnderPreemptionMigrationAndFlushes) {
  auto ctrl = RealController(GetParam().rseq, GetParam().mode);
  ASSERT_TRUE(ctrl);
  if (GetParam().rseq) SKIP_WITHOUT_STATS_RSEQ(ctrl);
  RecordProperty("stats_rseq", ctrl->info().stats_rseq ? 1 : 0);
  // root/{a/{b, c/d}, e}
  GroupRef a = ctrl->CreateGroup(ctrl->root(), "a").value();
  GroupRef b = ctrl->CreateGroup(*a, "b").value();
  GroupRef c = ctrl->CreateGroup(*a, "c").value();
  GroupRef d = ctrl->CreateGroup(*c, "d").value();
  GroupRef e = ctrl->CreateGroup(ctrl->root(), "e").value();
  std::vector<Group*> groups = {a.get(), b.get(), c.get(), d.get(), e.get()};
  const int parent[] = {-1, 0, 0, 2, -1};
  const std::vector<int> cpus = AllowedCpus();
  const int nr_threads = 2 * static_cast<int>(cpus.size()) + 1;
  constexpr int kOps = 150000;
  // own[thread][group]: each thread's own updates, summed at the end.
  std::vector<std::vector<int64_t>> own(static_cast<size_t>(nr_threads),
                                        std::vector<int64_t>(groups.size()));
  std::atomic<bool> stop{false};
  std::atomic<int> running{0};
  struct sigaction sa = {};
  sa.sa_handler = [](int) {};
  ASSERT_EQ(sigaction(SIGUSR2, &sa, nullptr), 0);
  std::vector<pthread_t> handles(static_cast<size_t>(nr_threads));
  std::vector<std::thread> threads;
  for (int t = 0; t < nr_threads; ++t) {
    threads.emplace_back([&, t] {
      handles[static_cast<size_t>(t)] = pthread_self();
      running.fetch_add(1);
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int n = 0; n < kOps; ++n) {
        const size_t gi = rng() % groups.size();
        const int64_t delta = static_cast<int64_t>(rng() % 9) - 3;
        ASSERT_TRUE(groups[gi]->ModState(StatItem::kShmem, delta));
        own[static_cast<size_t>(t)][gi] += delta;
        if (n % 4096 == 0) {  // migrate
          PinTo(cpus[rng() % cpus.size()]);
        } else if (n % 4096 == 2048) {
          Unpin(cpus);
        }
      }
      running.fetch_sub(1);
    });
  }
  while (running.load() < nr_threads) std::this_thread::yield();
  std::thread signaller([&] {
    std::mt19937 rng(99);
    while (running.load() > 0) {
      pthread_kill(handles[rng() % handles.size()], SIGUSR2);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  std::thread flusher([&] {
    std::mt19937 rng(7);
    while (!stop.load()) {
      Group* g = groups[rng() % groups.size()];
      switch (rng() % 4) {
        case 0:
          g->FlushStats();
          break;
        case 1:
          (void)g->Stat(StatItem::kShmem);
          break;
        case 2:
          (void)g->StatBound();
          (void)g->StatFast(StatItem::kShmem);
          break;
        default:
          ctrl->FlushAllStats();
      }
    }
  });
  for (auto& th : threads) th.join();
  stop.store(true);
  flusher.join();
  signaller.join();
  std::vector<int64_t> local(groups.size(), 0);
  for (const auto& o : own) {
    for (size_t g = 0; g < groups.size(); ++g) local[g] += o[g];
  }
  std::vector<int64_t> hier = local;
  for (int g = static_cast<int>(groups.size()) - 1; g >= 0; --g) {
    if (parent[g] >= 0) hier[static_cast<size_t>(parent[g])] += hier[g];
  }
  int64_t total = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    EXPECT_EQ(groups[g]->StatExact(StatItem::kShmem), hier[g]) << g;
    EXPECT_EQ(groups[g]->StatLocalFast(StatItem::kShmem), local[g]) << g;
    if (parent[g] < 0) total += hier[g];
  }
  EXPECT_EQ(ctrl->root().StatExact(StatItem::kShmem), total);
  const StatErrorBound bound = ctrl->root().StatBound();
  EXPECT_FALSE(bound.exceeded);
  EXPECT_EQ(bound.pending, 0u);
  Rstat& r = StatsTestPeer::rstat(*ctrl);
  RecordProperty("locked_updates", static_cast<int>(r.locked_updates()));
  RecordProperty("direct_updates", static_cast<int>(r.direct_updates()));
}

INSTANTIATE_TEST_SUITE_P(
    Paths, StatsRseqStressTest,
    ::testing::Values(StressParam{true, StatsFlushMode::kPerGroupSubtree},
                      StressParam{true, StatsFlushMode::kGlobalWholeTree},
                      StressParam{false, StatsFlushMode::kPerGroupSubtree},
                      StressParam{false, StatsFlushMode::kGlobalWholeTree}),
    [](const ::testing::TestParamInfo<StressParam>& p) {
      return std::string(p.param.rseq ? "Rseq" : "Locked") +
             (p.param.mode == StatsFlushMode::kPerGroupSubtree ? "PerGroup"
                                                               : "Global");
    });

// ---- The bound under subtree-only flushes ----

struct SubtreeParam {
  StatsFlushMode mode;
  bool one_cpu;  // writer and flusher pinned to one CPU, else free
};

class StatsSubtreeFlushBoundTest
    : public ::testing::TestWithParam<SubtreeParam> {};

// One writer under a leaf y (root/a/y) and one flusher that flushes only
// y's subtree. A flush of y that lands between a writer's rseq add and
// its count folds the add into a's pending values without counting it at
// a or the root, so the count of every ancestor must take it (else their
// published bound under-states by it). Checked at quiescence after each
// round, for a and the root, while their counts stay under the threshold
// (so a bound is published). On one CPU the flusher sleeps between
// flushes, so each wakeup preempts the writer at a random point.
TEST_P(StatsSubtreeFlushBoundTest, AncestorsBoundHoldsAtQuiescence) {
  ControllerOptions o;
  o.cpu_source = CpuSource::kAuto;
  o.stats_flush_period = std::chrono::nanoseconds(0);
  o.stats_flush_mode = GetParam().mode;
  o.batch = 1024;  // a threshold of 1024 x nr_cpus: long rounds
  o.charge_group_metadata = false;  // counts updates exactly
  auto made = Controller::Create(std::move(o));
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::unique_ptr<Controller> ctrl = std::move(made).value();
  SKIP_WITHOUT_STATS_RSEQ(ctrl);
  const std::vector<int> cpus = AllowedCpus();
  const bool one_cpu = GetParam().one_cpu;
  GroupRef a = ctrl->CreateGroup(ctrl->root(), "a").value();
  GroupRef y = ctrl->CreateGroup(*a, "y").value();
  const uint64_t threshold = StatsTestPeer::rstat(*ctrl).threshold();
  // Half the threshold per round: the ancestors' counts (never lowered by
  // y's flushes) stay under it, over-counts included.
  const int64_t per_round = static_cast<int64_t>(threshold / 2);
  constexpr int kRounds = 100;
  constexpr int kSpin = 100;
  std::atomic<int> spin{0};
  int violations = 0;
  int checked = 0;
  int64_t total = 0;
  std::string first;
  for (int round = 0; round < kRounds; ++round) {
    std::atomic<bool> writing{true};
    std::atomic<bool> flushing{false};
    std::thread flusher([&] {
      if (one_cpu) PinTo(cpus[0]);
      flushing.store(true);
      while (writing.load()) {
        y->FlushStats();
        if (one_cpu) {
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        } else {
          std::this_thread::yield();
        }
      }
    });
    std::thread writer([&] {
      if (one_cpu) PinTo(cpus[0]);
      while (!flushing.load()) std::this_thread::yield();
      for (int64_t n = 0; n < per_round; ++n) {
        y->CountEvent(StatItem::kPgfault, 1);
        // Spread the round over many flushes (each pass of the flusher
        // can land in one update's window).
        // Relaxed: busy work only.
        for (int s = 0; s < kSpin; ++s) {
          spin.fetch_add(1, std::memory_order_relaxed);
        }
      }
      writing.store(false);
    });
    writer.join();
    flusher.join();
    total += per_round;
    bool bad = false;
    for (Group* g : {a.get(), &ctrl->root()}) {
      const StatErrorBound b = g->StatBound();
      if (b.exceeded) continue;
      ++checked;
      const int64_t v = g->StatFast(StatItem::kPgfault);
      if (v + static_cast<int64_t>(b.pending) < total) {
        bad = true;
        if (first.empty()) {
          first = "round " + std::to_string(round) + " " + g->path() +
                  ": aggregate " + std::to_string(v) + " + pending " +
                  std::to_string(b.pending) + " < " + std::to_string(total);
        }
      }
    }
    violations += bad ? 1 : 0;
    // Exact again, and every count back to zero, for the next round.
    ctrl->FlushAllStats();
    ASSERT_EQ(ctrl->root().StatFast(StatItem::kPgfault), total);
  }
  RecordProperty("bounded_checks", checked);
  EXPECT_EQ(violations, 0) << "of " << kRounds << " rounds; first: " << first;
  EXPECT_GT(checked, 0);
  Unpin(cpus);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, StatsSubtreeFlushBoundTest,
    ::testing::Values(SubtreeParam{StatsFlushMode::kPerGroupSubtree, true},
                      SubtreeParam{StatsFlushMode::kPerGroupSubtree, false},
                      SubtreeParam{StatsFlushMode::kGlobalWholeTree, true},
                      SubtreeParam{StatsFlushMode::kGlobalWholeTree, false}),
    [](const ::testing::TestParamInfo<SubtreeParam>& p) {
      return std::string(p.param.mode == StatsFlushMode::kPerGroupSubtree
                             ? "PerGroup"
                             : "Global") +
             (p.param.one_cpu ? "OneCpu" : "Free");
    });

// ---- Per-CPU block pools ----

// A group costs a block on a CPU only once it is updated there.
TEST(StatsPoolTest, BlocksAreTakenOnTheFirstUpdateOnACpu) {
  TestController t(ControllerOptions{.stats_flush_period = {}}, 4);
  GroupRef g = t.Make("a");
  internal::GroupStats* s = StatsTestPeer::stats(*g);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(s->block(k), nullptr) << k;
  SetFakeCpu(2);
  ASSERT_TRUE(g->ModState(StatItem::kAnon, 1));
  SetFakeCpu(0);
  EXPECT_EQ(s->block(0), nullptr);
  EXPECT_NE(s->block(2), nullptr);
  EXPECT_EQ(s->block(1), nullptr);
  // The ancestors were given one on that CPU too (to link the group).
  EXPECT_NE(StatsTestPeer::stats(t.ctrl->root())->block(2), nullptr);
  EXPECT_EQ(g->StatExact(StatItem::kAnon), 1);
}

// More first updates than a pool holds, with no refill in between: the
// rest go to the direct path (exact at once), and the next off-hot-path
// refill (here a reader's flush) keeps more blocks. Freed groups give
// their blocks back.
TEST(StatsPoolTest, DryPoolFallsBackToTheDirectPathAndRefillsLarger) {
  TestController t(ControllerOptions{.stats_flush_period = {}}, 2);
  Rstat& r = StatsTestPeer::rstat(*t.ctrl);
  std::vector<GroupRef> groups;
  constexpr int kGroups = 3000;  // far more than kPoolInitial
  for (int i = 0; i < kGroups; ++i) {
    groups.push_back(t.Make("g" + std::to_string(i)));
  }
  ASSERT_LT(r.pooled_blocks(), kGroups);
  int64_t sum = 0;
  for (int i = 0; i < kGroups; ++i) {
    ASSERT_TRUE(groups[static_cast<size_t>(i)]->ModState(StatItem::kAnon, i));
    sum += i;
  }
  const uint64_t misses = r.pool_misses();
  EXPECT_GT(misses, 0u);
  EXPECT_EQ(r.direct_updates(), misses);
  for (int i = 0; i < kGroups; ++i) {
    EXPECT_EQ(groups[static_cast<size_t>(i)]->StatExact(StatItem::kAnon), i);
  }
  EXPECT_EQ(t.ctrl->root().StatExact(StatItem::kAnon), sum);
  // Those flushes refilled the pool with about as many blocks as were
  // missed: a second wave of first updates (the groups that missed) misses
  // far less.
  EXPECT_GE(r.pooled_blocks(), static_cast<int64_t>(misses));
  for (int i = 0; i < kGroups; ++i) {
    ASSERT_TRUE(groups[static_cast<size_t>(i)]->ModState(StatItem::kAnon, 1));
    if (i % 64 == 63) t.ctrl->FlushAllStats();  // readers refill
  }
  EXPECT_LT(r.pool_misses() - misses, misses / 2);
  EXPECT_EQ(t.ctrl->root().StatExact(StatItem::kAnon), sum + kGroups);
  // Removing the groups returns their blocks to the pool (up to twice its
  // target, the rest to the allocator): every block left is pooled but
  // the root's.
  for (GroupRef& g : groups) ASSERT_TRUE(t.ctrl->RemoveGroup(*g).ok());
  groups.clear();
  t.ctrl->Reap();
  EXPECT_EQ(r.blocks_allocated(), r.pooled_blocks() + 1);
  EXPECT_EQ(t.ctrl->root().StatExact(StatItem::kAnon), sum + kGroups);
  // Idle periods (no pool ran dry) halve the targets and free the blocks
  // beyond twice the target, down to the initial level.
  const int64_t pooled = r.pooled_blocks();
  for (int period = 0; period < 20; ++period) StatsTestPeer::TrimPools(r);
  EXPECT_LT(r.pooled_blocks(), pooled);
  EXPECT_LE(r.pooled_blocks(), 2 * 2 * Rstat::kPoolInitial);  // 2 CPUs
  EXPECT_EQ(r.blocks_allocated(), r.pooled_blocks() + 1);
}

// With a flusher thread, a reader's flush leaves the refill of a dry pool
// to that thread: a refill after a burst of first updates allocates
// thousands of blocks, and the memory.stat read that did it took 20 times
// its usual time (umemcg-bench scale). The thread is held off (its mutex)
// while the reader flushes, so any block allocated then was the
// reader's.
TEST(StatsPoolTest, ReadersLeaveTheRefillToTheFlusherThread) {
  TestController t(
      ControllerOptions{.stats_flush_period = std::chrono::hours(1)}, 2);
  Rstat& r = StatsTestPeer::rstat(*t.ctrl);
  std::vector<GroupRef> groups;
  constexpr int kGroups = 2000;  // far more than kPoolInitial
  for (int i = 0; i < kGroups; ++i) {
    std::string name = "g";  // not "g" + ...: GCC 12's false -Wrestrict
    name += std::to_string(i);
    groups.push_back(t.Make(name));
  }
  uint64_t misses = 0;
  int64_t allocated = 0;
  {
    std::lock_guard<std::mutex> hold(StatsTestPeer::flusher_mutex(r));
    for (GroupRef& g : groups) ASSERT_TRUE(g->ModState(StatItem::kAnon, 1));
    misses = r.pool_misses();
    ASSERT_GT(misses, 0u);  // the pool ran dry
    allocated = r.blocks_allocated();
    t.ctrl->FlushAllStats();  // a reader's flush
    EXPECT_EQ(r.blocks_allocated(), allocated);
    EXPECT_EQ(t.ctrl->root().StatExact(StatItem::kAnon), kGroups);
  }
  // Released, the woken thread refills to the raised target.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (r.pooled_blocks() < static_cast<int64_t>(misses) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(r.pooled_blocks(), static_cast<int64_t>(misses));
  EXPECT_GT(r.blocks_allocated(), allocated);
}

}  // namespace
}  // namespace umemcg

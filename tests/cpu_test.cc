// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "port/cpu.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

#include "port/per_cpu.h"
#include "port/try_lock.h"
#include "umemcg/cpu.h"

namespace umemcg::internal {

class CpuIdSourcePeer {
 public:
  static int Map(const CpuIdSource& s, unsigned id) {
    return id < s.dense_limit_ ? static_cast<int>(id) : s.MapSlow(id);
  }
};

namespace {

TEST(CpuSourceTest, NamesRoundTrip) {
  for (CpuSource s : {CpuSource::kAuto, CpuSource::kRseq, CpuSource::kGetcpu,
                      CpuSource::kFake}) {
    EXPECT_EQ(ParseCpuSource(CpuSourceName(s)), s);
  }
  EXPECT_FALSE(ParseCpuSource("tsc").has_value());
}

TEST(CpuSourceTest, AutoResolvesToRseqWhenRegistered) {
  auto s = CpuIdSource::Create(CpuSource::kAuto, 0);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->source(),
            RseqAvailable() ? CpuSource::kRseq : CpuSource::kGetcpu);
  EXPECT_EQ(s->nr_shards(), static_cast<int>(PossibleCpus().size()));
}

TEST(CpuSourceTest, RseqAgreesWithGetcpu) {
  if (!RseqAvailable()) GTEST_SKIP() << "rseq not registered";
  auto rseq = CpuIdSource::Create(CpuSource::kRseq, 0);
  auto getcpu = CpuIdSource::Create(CpuSource::kGetcpu, 0);
  ASSERT_TRUE(rseq.ok() && getcpu.ok());
  // Pin to one CPU so the two reads cannot straddle a migration.
  cpu_set_t old_set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(old_set), &old_set), 0);
  const int cpu = sched_getcpu();
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  EXPECT_EQ(rseq->CurrentShard(), getcpu->CurrentShard());
  ASSERT_EQ(sched_setaffinity(0, sizeof(old_set), &old_set), 0);
}

TEST(CpuSourceTest, FakeSourceFollowsSetFakeCpuAndWraps) {
  auto s = CpuIdSource::Create(CpuSource::kFake, 4);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->nr_shards(), 4);
  SetFakeCpu(2);
  EXPECT_EQ(s->CurrentShard(), 2);
  SetFakeCpu(9);
  EXPECT_EQ(s->CurrentShard(), 1);
  std::thread other([&] { EXPECT_EQ(s->CurrentShard(), 0); });  // default 0
  other.join();
  SetFakeCpu(0);
}

TEST(CpuSourceTest, ShardIsAlwaysInRange) {
  for (CpuSource src : {CpuSource::kAuto, CpuSource::kGetcpu}) {
    for (int n : {0, 1, 3}) {
      auto s = CpuIdSource::Create(src, n);
      ASSERT_TRUE(s.ok());
      const int shard = s->CurrentShard();
      EXPECT_GE(shard, 0);
      EXPECT_LT(shard, s->nr_shards());
    }
  }
}

TEST(CpuSourceTest, ParsesCpuLists) {
  EXPECT_EQ(ParseCpuList("0-3\n"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(ParseCpuList("0,2-4,7"), (std::vector<int>{0, 2, 3, 4, 7}));
  EXPECT_EQ(ParseCpuList("5"), (std::vector<int>{5}));
  EXPECT_TRUE(ParseCpuList("a-b").empty());
  EXPECT_TRUE(ParseCpuList("3-1").empty());
  EXPECT_TRUE(ParseCpuList("1-2x").empty());
}

TEST(CpuSourceTest, SparseIdsMapDensely) {
  auto s = CpuIdSource::Create(CpuSource::kGetcpu, 0, {0, 2, 3, 4, 7});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->nr_shards(), 5);
  const int expected[] = {0, 1, 1, 2, 3, 1, 2, 4};  // ids 1, 5, 6 wrap
  for (unsigned id = 0; id < 8; ++id) {
    EXPECT_EQ(CpuIdSourcePeer::Map(*s, id), id == 1 || id == 5 || id == 6
                                                ? static_cast<int>(id % 5)
                                                : expected[id])
        << id;
  }
  EXPECT_EQ(CpuIdSourcePeer::Map(*s, 1000), 1000 % 5);
  EXPECT_FALSE(CpuIdSource::Create(CpuSource::kGetcpu, 0, {}).ok());
}

TEST(TryLockTest, TryLockFailsWhileHeld) {
  TryLock lock;
  ASSERT_TRUE(lock.try_lock());
  EXPECT_FALSE(lock.try_lock());
  lock.unlock();
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
}

TEST(TryLockTest, LockWaitsForHolder) {
  TryLock lock;
  int counter = 0;
  std::thread t([&] {
    for (int i = 0; i < 100000; ++i) {
      lock.lock();
      ++counter;
      lock.unlock();
    }
  });
  for (int i = 0; i < 100000; ++i) {
    lock.lock();
    ++counter;
    lock.unlock();
  }
  t.join();
  EXPECT_EQ(counter, 200000);
}

TEST(PerCpuTest, ShardsAreCacheLineAligned) {
  PerCpu<int> shards(3);
  EXPECT_EQ(shards.size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(&shards[i]) % kCacheLineSize, 0u);
  }
  EXPECT_GE(reinterpret_cast<uintptr_t>(&shards[1]) -
                reinterpret_cast<uintptr_t>(&shards[0]),
            kCacheLineSize);
}

}  // namespace
}  // namespace umemcg::internal

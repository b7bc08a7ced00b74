// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The cluster quota in one process, against a real redis-server that each
// test starts: administration, binding, the charge path's lease checks
// (cluster max refusals behave like memory.max), hierarchy, files,
// forced charges, Redis unreachable / paused / restarted with AOF, bad
// input. The multi-process cases are in cluster_process_test.cc.

#include <signal.h>

#include <atomic>
#include <thread>

#include "cluster_test_util.h"
#include "umemcg/files.h"
#include "umemcg/metrics.h"
#include "umemcg/umemcg.h"

namespace umemcg::cluster_test {
namespace {

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { StartRedis({}); }

  void StartRedis(RedisProcessOptions o) {
    auto r = RedisProcess::Start(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    redis_ = std::move(r).value();
  }

  ClusterOptions Options() const {
    ClusterOptions o;
    o.redis_url = redis_->url();
    o.lease_ttl = std::chrono::milliseconds(2000);
    o.command_timeout = std::chrono::milliseconds(500);
    o.connect_timeout = std::chrono::milliseconds(500);
    o.poll_interval = std::chrono::milliseconds(20);
    o.min_chunk = Pages(16);
    o.max_chunk = Pages(1024);
    return o;
  }

  std::unique_ptr<Cluster> Connect() {
    auto c = Cluster::Connect(Options());
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  std::unique_ptr<Controller> NewController() {
    return Controller::Create({}).value();
  }

  std::unique_ptr<RedisProcess> redis_;
};

TEST_F(ClusterTest, SetMaxCreatesTheTreeAndRemoveRefusesBusyGroups) {
  auto cluster = Connect();
  ASSERT_TRUE(cluster);
  ASSERT_TRUE(cluster->SetMax("tenants/a", Pages(500)).ok());
  ASSERT_TRUE(cluster->SetMax("tenants", Pages(1000)).ok());
  auto snap = cluster->Snapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  ASSERT_EQ(snap.value().groups.size(), 2u);
  EXPECT_EQ(snap.value().groups[0].path, "tenants");
  EXPECT_EQ(snap.value().groups[0].max, Pages(1000));
  EXPECT_EQ(snap.value().groups[1].path, "tenants/a");
  EXPECT_EQ(snap.value().groups[1].max, Pages(500));
  EXPECT_EQ(cluster->RemoveGroup("tenants").code(), StatusCode::kBusy);
  EXPECT_EQ(cluster->RemoveGroup("nope").code(), StatusCode::kNotFound);
  EXPECT_EQ(cluster->SetMax("a//b", Pages(1)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cluster->SetMax("a/../b", Pages(1)).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(cluster->RemoveGroup("tenants/a").ok());
  ASSERT_TRUE(cluster->RemoveGroup("tenants").ok());
  EXPECT_TRUE(cluster->Snapshot().value().groups.empty());
  // "max" (kPageCounterMax) means no limit.
  ASSERT_TRUE(cluster->SetMax("u", kPageCounterMax).ok());
  EXPECT_EQ(GroupIn(cluster->Snapshot().value(), "u").max, kPageCounterMax);
}

TEST_F(ClusterTest, BadInputGivesClearErrors) {
  auto cluster = Connect();
  ASSERT_TRUE(cluster);
  auto ctrl = NewController();
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  auto b = cluster->Bind(*g, "unknown");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kNotFound);
  EXPECT_NE(b.status().message().find("unknown cluster group 'unknown'"),
            std::string::npos)
      << b.status().ToString();
  EXPECT_EQ(cluster->Bind(ctrl->root(), "x").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cluster->Bind(*g, "").status().code(),
            StatusCode::kInvalidArgument);

  ClusterOptions o = Options();
  o.redis_url = "redis://127.0.0.1:notaport";
  EXPECT_EQ(Cluster::Connect(o).status().code(), StatusCode::kInvalidArgument);
  o.redis_url = "rediss://127.0.0.1:6380";
  EXPECT_EQ(Cluster::Connect(o).status().code(),
            StatusCode::kFailedPrecondition);
  o = Options();
  o.lease_ttl = std::chrono::milliseconds(10);
  EXPECT_EQ(Cluster::Connect(o).status().code(), StatusCode::kInvalidArgument);
  o = Options();
  o.key_prefix = "a{b";
  EXPECT_EQ(Cluster::Connect(o).status().code(), StatusCode::kInvalidArgument);

  // A script error (corrupt data in Redis) is reported, not hidden.
  ASSERT_TRUE(
      redis_->Command({"HSET", "{umemcg}:g:bad", "max", "banana"}).ok());
  ASSERT_TRUE(redis_->Command({"SADD", "{umemcg}:groups", "bad"}).ok());
  b = cluster->Bind(*g, "bad");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(b.status().message().find("redis script error"), std::string::npos)
      << b.status().ToString();
  EXPECT_NE(b.status().message().find("banana"), std::string::npos);
  EXPECT_EQ(cluster->Snapshot().status().code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(ClusterTest, UnreachableAndAuth) {
  ClusterOptions o = Options();
  const int port = redis_->port();
  redis_->Kill(SIGKILL);
  o.redis_url = "redis://127.0.0.1:" + std::to_string(port);
  auto c = Cluster::Connect(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kAgain);
  EXPECT_NE(c.status().message().find("unreachable"), std::string::npos);

  StartRedis({.password = "s3cret"});
  o.redis_url = "redis://:wrong@127.0.0.1:" + std::to_string(redis_->port());
  c = Cluster::Connect(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kPermissionDenied)
      << c.status().ToString();
  o.redis_url = redis_->url();  // with the right password
  c = Cluster::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c.value()->SetMax("t", Pages(10)).ok());
}

TEST_F(ClusterTest, ChargesComeFromTheLeaseNotFromRedis) {
  auto cluster = Connect();
  ASSERT_TRUE(cluster);
  ASSERT_TRUE(cluster->SetMax("t", Pages(100000)).ok());
  auto ctrl = NewController();
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  auto b = cluster->Bind(*g, "t");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  constexpr int kCharges = 20000;
  std::vector<int> held;
  for (int i = 0; i < kCharges; ++i) {
    ASSERT_TRUE(g->TryCharge(Pages(3)).ok()) << i;
    held.push_back(3);
    if (held.size() > 200) {
      g->Uncharge(Pages(3));
      held.pop_back();
    }
  }
  for (int p : held) g->Uncharge(Pages(p));
  const ClusterLeaseState s = b.value()->state();
  // A handful of grows and renewals, not one per charge.
  EXPECT_LT(s.redis_commands, 100u) << s.redis_commands;
  EXPECT_GE(s.lease, s.usage);
  ASSERT_TRUE(b.value()->Sync().ok());
  const ClusterLeaseState s2 = b.value()->state();
  EXPECT_EQ(GroupIn(cluster->Snapshot().value(), "t").usage, s2.lease);
  ASSERT_TRUE(b.value()->Unbind().ok());
  EXPECT_EQ(GroupIn(cluster->Snapshot().value(), "t").usage, Pages(0));
  EXPECT_TRUE(GroupIn(cluster->Snapshot().value(), "t").leases.empty());
}

// A reclaimer that frees what it holds.
class HeldReclaimer : public Reclaimer {
 public:
  explicit HeldReclaimer(Group& g) : g_(g) {}
  Pages Reclaimable() override { return Pages(held_); }
  Pages Reclaim(Pages target) override {
    ++calls;
    const uint64_t n = std::min(target.raw(), held_);
    held_ -= n;
    g_.UnchargeDirect(Pages(n));
    return Pages(n);
  }
  void Hold(uint64_t n) { held_ += n; }
  int calls = 0;

 private:
  Group& g_;
  uint64_t held_ = 0;
};

TEST_F(ClusterTest, OverTheClusterMaxBehavesLikeMemoryMax) {
  auto cluster = Connect();
  ASSERT_TRUE(cluster);
  ASSERT_TRUE(cluster->SetMax("t", Pages(200)).ok());
  auto ctrl = NewController();
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  HeldReclaimer reclaimer(*g);
  ASSERT_TRUE(g->AddReclaimer(&reclaimer).ok());
  auto b = cluster->Bind(*g, "t");
  ASSERT_TRUE(b.ok());
  // Fill to the cluster max, 10 pages of it reclaimable.
  ASSERT_TRUE(g->TryCharge(Pages(10)).ok());
  reclaimer.Hold(10);
  uint64_t held = 0;
  while (held < 200) {
    ChargeResult r = g->TryCharge(Pages(10));
    if (!r.ok()) break;
    held += 10;
  }
  EXPECT_GE(held, 120u);  // stock and chunking may keep a little unused
  ChargeResult r = g->TryCharge(Pages(100));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code, StatusCode::kResourceExhausted);
  EXPECT_EQ(r.limited_by, g.get());
  EXPECT_GE(g->events_local(MemoryEvent::kMax), 1u);
  EXPECT_GE(g->events(MemoryEvent::kMax), 1u);
  EXPECT_GE(reclaimer.calls, 1);  // local reclaim was tried first
  EXPECT_GE(b.value()->state().refusals, 1u);
  const ClusterGroupInfo info = GroupIn(cluster->Snapshot().value(), "t");
  EXPECT_GE(info.max_events, 1u);
  EXPECT_GE(info.max_events_local, 1u);
  EXPECT_LE(info.usage, Pages(200));  // never over max without force
  // Memory the reclaimer can free makes room without a bigger lease.
  g->Uncharge(Pages(held));
  reclaimer.Reclaim(Pages(10));
  ctrl->DrainAllStocks(*g);
  ASSERT_TRUE(g->TryCharge(Pages(150)).ok());
  reclaimer.Hold(150);
  const int calls_before = reclaimer.calls;
  ASSERT_TRUE(g->TryCharge(Pages(100)).ok());
  EXPECT_GT(reclaimer.calls, calls_before);
  EXPECT_LE(GroupIn(cluster->Snapshot().value(), "t").usage, Pages(200));
  g->Uncharge(Pages(100));
  reclaimer.Hold(0);
  ASSERT_TRUE(g->RemoveReclaimer(&reclaimer).ok());
  ASSERT_TRUE(b.value()->Unbind().ok());
}

// A cache at the cluster max: each charge evicts locally (reclaim) instead
// of a Redis round trip per charge.
TEST_F(ClusterTest, AtTheMaxReclaimComesBeforeAskingRedis) {
  auto cluster = Connect();
  ASSERT_TRUE(cluster);
  ASSERT_TRUE(cluster->SetMax("t", Pages(300)).ok());
  auto ctrl = NewController();
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  HeldReclaimer lru(*g);
  ASSERT_TRUE(g->AddReclaimer(&lru).ok());
  auto b = cluster->Bind(*g, "t");
  ASSERT_TRUE(b.ok());
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(g->TryCharge(Pages(2)).ok()) << i;
    lru.Hold(2);
  }
  const ClusterLeaseState s = b.value()->state();
  EXPECT_GT(lru.calls, 100);  // it ran at the max
  EXPECT_LT(s.redis_commands, 100u) << s.redis_commands;
  EXPECT_LE(GroupIn(cluster->Snapshot().value(), "t").usage, Pages(300));
  lru.Reclaim(Pages(1 << 20));
  ASSERT_TRUE(g->RemoveReclaimer(&lru).ok());
  ASSERT_TRUE(b.value()->Unbind().ok());
}

TEST_F(ClusterTest, HierarchyLimitsCountAtEveryLevel) {
  auto cluster = Connect();
  ASSERT_TRUE(cluster);
  ASSERT_TRUE(cluster->SetMax("p", Pages(100)).ok());
  ASSERT_TRUE(cluster->SetMax("p/a", Pages(80)).ok());
  ASSERT_TRUE(cluster->SetMax("p/b", Pages(80)).ok());
  auto ctrl_a = NewController();
  auto ctrl_b = NewController();
  GroupRef ga = ctrl_a->CreateGroup(ctrl_a->root(), "a").value();
  GroupRef gb = ctrl_b->CreateGroup(ctrl_b->root(), "b").value();
  auto ba = cluster->Bind(*ga, "p/a");
  auto bb = cluster->Bind(*gb, "p/b");
  ASSERT_TRUE(ba.ok() && bb.ok());
  ASSERT_TRUE(ga->TryCharge(Pages(70)).ok());
  // p/b alone has room for 70, but p has only 100 - 70.
  ChargeResult r = gb->TryCharge(Pages(70));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code, StatusCode::kResourceExhausted);
  EXPECT_EQ(r.limited_by, gb.get());
  // a's lease alone may not pass its own max either.
  EXPECT_FALSE(ga->TryCharge(Pages(20)).ok());
  auto snap = cluster->Snapshot().value();
  EXPECT_GE(GroupIn(snap, "p").max_events_local, 1u);  // refused at p
  EXPECT_GE(GroupIn(snap, "p/a").max_events_local, 1u);
  EXPECT_LE(GroupIn(snap, "p").usage, Pages(100));
  EXPECT_EQ(GroupIn(snap, "p").usage,
            GroupIn(snap, "p/a").usage + GroupIn(snap, "p/b").usage);
  // Once a's pages are returned, b gets them (after b's refusal backoff,
  // one poll interval).
  ga->Uncharge(Pages(70));
  ASSERT_TRUE(ba.value()->Unbind().ok());
  ASSERT_TRUE(Eventually([&] { return gb->TryCharge(Pages(70)).ok(); }));
  gb->Uncharge(Pages(70));
  ASSERT_TRUE(bb.value()->Unbind().ok());
  EXPECT_EQ(GroupIn(cluster->Snapshot().value(), "p").usage, Pages(0));
}

TEST_F(ClusterTest, NonBlockingChargesNeverWaitForRedis) {
  auto cluster = Connect();
  ASSERT_TRUE(cluster);
  ASSERT_TRUE(cluster->SetMax("t", Pages(100000)).ok());
  auto ctrl = NewController();
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  auto b = cluster->Bind(*g, "t");
  ASSERT_TRUE(b.ok());
  const uint64_t lease = b.value()->state().lease.raw();
  // Beyond the lease, a charge that may not block fails at once (kAgain:
  // the lease is merely short) and the background thread grows it.
  redis_->Pause();
  ChargeResult r = g->TryCharge(Pages(lease + 500), ChargeFlags::kNone);
  EXPECT_EQ(r.code, StatusCode::kAgain);
  EXPECT_EQ(r.limited_by, g.get());
  redis_->Resume();
  EXPECT_TRUE(Eventually([&] {
    ChargeResult again = g->TryCharge(Pages(lease + 500), ChargeFlags::kNone);
    if (!again.ok()) return false;
    g->Uncharge(Pages(lease + 500));
    return true;
  }));
}

TEST_F(ClusterTest, RedisUnreachableKeepsTheLeaseThenFailsBoundedly) {
  // A fixed chunk (256 pages) and usage held at 400 pages: the lease then
  // settles at most two chunks above usage, so the background thread has
  // no surplus to return and the lease read below stays the lease. (With
  // the usage given back and a growing chunk, the next poll returned the
  // surplus, lowering the local lease first, and a charge "within the
  // lease" read before that poll could be refused: a flaky check.)
  ClusterOptions o = Options();
  o.min_chunk = Pages(256);
  o.max_chunk = Pages(256);
  // No safe capacity: the node freezes at its lease's local expiry
  // (cluster_heal_test checks the safe share).
  o.safe_capacity = Pages(0);
  auto c = Cluster::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::unique_ptr<Cluster> cluster = std::move(c).value();
  ASSERT_TRUE(cluster->SetMax("t", Pages(100000)).ok());
  auto ctrl = NewController();
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  auto b = cluster->Bind(*g, "t");
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(g->TryCharge(Pages(400)).ok());  // grows the lease
  ctrl->DrainAllStocks(*g);
  const ClusterLeaseState before = b.value()->state();
  ASSERT_EQ(before.usage, Pages(400));
  // Bind leased one chunk; the charge asked for its usage plus a chunk.
  ASSERT_GE(before.lease.raw(), 400u + 256u);
  ASSERT_LE(before.lease.raw(), 400u + 2 * 256u);

  // A paused server: a charge within the lease succeeds without asking,
  // even several polls later (a poll's request, if it sends one, waits the
  // command timeout and fails; no poll lowers the lease); the one blocking
  // request beyond the lease waits at most the command timeout, then the
  // charge fails with kAgain (never hangs).
  redis_->Pause();
  std::this_thread::sleep_for(3 * o.poll_interval);
  const uint64_t lease = b.value()->state().lease.raw();
  EXPECT_EQ(lease, before.lease.raw());
  const uint64_t half_room = (lease - 400) / 2;
  ASSERT_TRUE(g->TryCharge(Pages(half_room)).ok());
  ChargeResult r = g->TryCharge(Pages(lease));  // beyond it
  EXPECT_EQ(r.code, StatusCode::kAgain);
  EXPECT_EQ(r.limited_by, g.get());
  g->Uncharge(Pages(half_room));
  redis_->Resume();

  // A dead server: the same, failing fast.
  redis_->Kill(SIGKILL);
  EXPECT_TRUE(Eventually([&] { return !cluster->connected(); }));
  // (The background thread may have returned surplus meanwhile: read the
  // lease now; disconnected, it no longer changes.)
  const ClusterLeaseState now = b.value()->state();
  const uint64_t room = now.lease.raw() - now.usage.raw();
  ChargeResult within = g->TryCharge(Pages(room / 2));
  if (!b.value()->state().expired) {
    EXPECT_TRUE(within.ok()) << room;
  }
  if (within.ok()) g->Uncharge(Pages(room / 2));
  r = g->TryCharge(Pages(now.lease.raw() + 1));
  EXPECT_EQ(r.code, StatusCode::kAgain);
  // After the local expiry no new capacity is granted, even within the
  // old lease.
  EXPECT_TRUE(Eventually([&] { return b.value()->state().expired; }));
  ctrl->DrainAllStocks(*g);
  r = g->TryCharge(Pages(10));
  EXPECT_EQ(r.code, StatusCode::kAgain);
  EXPECT_GE(b.value()->state().unavailable, 1u);
  EXPECT_FALSE(b.value()->Unbind().ok());  // could not return the lease
  g->Uncharge(Pages(400));
}

TEST_F(ClusterTest, RedisRestartWithAofRecoversWithoutDoubleCounting) {
  StartRedis({.aof = true});
  auto cluster = Connect();
  ASSERT_TRUE(cluster);
  ASSERT_TRUE(cluster->SetMax("t", Pages(5000)).ok());
  auto ctrl = NewController();
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  auto b = cluster->Bind(*g, "t");
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(g->TryCharge(Pages(1000)).ok());
  ASSERT_TRUE(b.value()->Sync().ok());
  const Pages before = b.value()->state().lease;

  redis_->Kill(SIGKILL);
  ASSERT_TRUE(redis_->Restart().ok());
  // The node reconnects and renews; Redis holds exactly its lease again.
  EXPECT_TRUE(RedisHoldsTheLease(*cluster, *b.value(), "t"));
  const ClusterGroupInfo info = GroupIn(cluster->Snapshot().value(), "t");
  EXPECT_EQ(info.max, Pages(5000));
  EXPECT_GE(info.usage, Pages(1000));
  EXPECT_LE(info.usage, before + Pages(1024));
  ASSERT_EQ(info.leases.size(), 1u);
  EXPECT_EQ(info.leases[0].node, b.value()->state().lease_owner);
  EXPECT_EQ(info.leases[0].node.rfind(cluster->node_name() + "#", 0), 0u);
  ASSERT_TRUE(g->TryCharge(Pages(2000)).ok());
  g->Uncharge(Pages(3000));
  ASSERT_TRUE(b.value()->Unbind().ok());
  EXPECT_EQ(GroupIn(cluster->Snapshot().value(), "t").usage, Pages(0));
}

TEST_F(ClusterTest, ForcedChargesAreCountedInRedis) {
  auto cluster = Connect();
  ASSERT_TRUE(cluster);
  ASSERT_TRUE(cluster->SetMax("t", Pages(100)).ok());
  auto ctrl = NewController();
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  auto b = cluster->Bind(*g, "t");
  ASSERT_TRUE(b.ok());
  ChargeResult r = g->TryCharge(Pages(300), ChargeFlags::kNoFail);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.forced);
  EXPECT_EQ(r.limited_by, g.get());
  // The background thread reconciles: Redis counts what is really used.
  EXPECT_TRUE(Eventually([&] {
    return GroupIn(cluster->Snapshot().value(), "t").usage >= g->usage();
  }));
  EXPECT_GE(b.value()->state().forced, 1u);
  g->Uncharge(Pages(300));
  ASSERT_TRUE(b.value()->Unbind().ok());
  EXPECT_EQ(GroupIn(cluster->Snapshot().value(), "t").usage, Pages(0));
}

// Redis lost a node's lease (a restart without fsync, an operator's
// mistake) while the cluster filled up: the pages are in use, so the node
// makes Redis count them again, past max, rather than looping on refusals.
TEST_F(ClusterTest, ALeaseRedisLostIsCountedAgain) {
  auto cluster = Connect();
  ASSERT_TRUE(cluster);
  ASSERT_TRUE(cluster->SetMax("t", Pages(1000)).ok());
  auto ctrl = NewController();
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  auto b = cluster->Bind(*g, "t");
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(g->TryCharge(Pages(400)).ok());
  ASSERT_TRUE(b.value()->Sync().ok());
  // Lose it: the node's record and its pages vanish from Redis, in one
  // step on the server (the node's background thread may be returning
  // surplus meanwhile, so a lease read here could already be stale).
  const std::string owner = b.value()->state().lease_owner;
  ASSERT_TRUE(redis_
                  ->Command({"EVAL",
                             "local l = tonumber(redis.call('HGET', KEYS[1], "
                             "ARGV[1]) or '0') "
                             "redis.call('HSET', KEYS[1], ARGV[1], '0') "
                             "redis.call('HINCRBY', KEYS[2], 'usage', -l) "
                             "return l",
                             "2", "{umemcg}:l:t", "{umemcg}:g:t", owner})
                  .ok());
  // Another node takes all the room.
  auto ctrl2 = NewController();
  GroupRef g2 = ctrl2->CreateGroup(ctrl2->root(), "g").value();
  auto b2 = cluster->Bind(*g2, "t");
  ASSERT_TRUE(b2.ok());
  ASSERT_TRUE(g2->TryCharge(Pages(900)).ok());
  // The first node's pages come back into Redis's count.
  EXPECT_TRUE(Eventually([&] {
    auto snap = cluster->Snapshot();
    if (!snap.ok()) return false;
    const ClusterGroupInfo t = GroupIn(snap.value(), "t");
    return LeaseOf(t, owner) >= g->usage().raw() &&
           t.usage.raw() >= g->usage().raw() + g2->usage().raw();
  }));
  EXPECT_GE(b.value()->state().forced, 1u)
      << g->ReadFile("memory.cluster.stat").value() << " usage "
      << g->usage().raw() << " g2 " << g2->usage().raw();
  g->Uncharge(Pages(400));
  g2->Uncharge(Pages(900));
  ASSERT_TRUE(b.value()->Unbind().ok());
  ASSERT_TRUE(b2.value()->Unbind().ok());
  EXPECT_EQ(GroupIn(cluster->Snapshot().value(), "t").usage, Pages(0));
}

TEST_F(ClusterTest, LoweringMaxMakesNodesReturnUnusedLease) {
  auto cluster = Connect();
  ASSERT_TRUE(cluster);
  ASSERT_TRUE(cluster->SetMax("t", Pages(100000)).ok());
  auto ctrl = NewController();
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  auto b = cluster->Bind(*g, "t");
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(g->TryCharge(Pages(500)).ok());
  ASSERT_TRUE(g->TryCharge(Pages(500)).ok());
  g->Uncharge(Pages(500));
  ctrl->DrainAllStocks(*g);
  ASSERT_TRUE(cluster->SetMax("t", Pages(100)).ok());  // below usage
  EXPECT_TRUE(Eventually([&] {
    const ClusterLeaseState s = b.value()->state();
    return s.lease == s.usage &&
           GroupIn(cluster->Snapshot().value(), "t").usage == s.usage;
  }));
  EXPECT_FALSE(g->TryCharge(Pages(10)).ok());
  g->Uncharge(Pages(500));
}

TEST_F(ClusterTest, BoundGroupsHaveClusterFiles) {
  auto cluster = Connect();
  ASSERT_TRUE(cluster);
  ASSERT_TRUE(cluster->SetMax("tenants/a", Pages(1000)).ok());
  auto ctrl = NewController();
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  EXPECT_EQ(g->ReadFile("memory.cluster.max").status().code(),
            StatusCode::kNotFound);
  auto b = cluster->Bind(*g, "tenants/a");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(cluster->Bind(*g, "tenants/a").status().code(), StatusCode::kBusy);
  const std::vector<std::string> files = g->ListFiles();
  for (const char* f :
       {"memory.cluster.group", "memory.cluster.max", "memory.cluster.current",
        "memory.cluster.stat", "memory.cluster.events"}) {
    EXPECT_NE(std::find(files.begin(), files.end(), f), files.end()) << f;
  }
  EXPECT_EQ(g->ReadFile("memory.cluster.group").value(), "tenants/a\n");
  EXPECT_EQ(g->ReadFile("memory.cluster.max").value(),
            std::to_string(1000 * kPageSize) + "\n");
  ASSERT_TRUE(g->TryCharge(Pages(5)).ok());
  const std::string stat = g->ReadFile("memory.cluster.stat").value();
  EXPECT_NE(stat.find("lease_bytes "), std::string::npos) << stat;
  EXPECT_NE(stat.find("connected 1"), std::string::npos) << stat;
  EXPECT_EQ(g->ReadFile("memory.cluster.events").value(), "max 0\n");
  EXPECT_EQ(g->WriteFile("memory.cluster.current", "1").code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(g->WriteFile("memory.cluster.max", "junk").code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(g->WriteFile("memory.cluster.max", "8M").ok());
  EXPECT_EQ(GroupIn(cluster->Snapshot().value(), "tenants/a").max, Pages(2048));
  EXPECT_EQ(g->ReadFile("memory.cluster.max").value(), "8388608\n");
  // /metrics shows the binding (the exposition the server serves).
  const std::string text = FormatPrometheus(CollectMetrics(*ctrl));
  EXPECT_NE(text.find("umemcg_cluster_info{group=\"g\",cluster_group="
                      "\"tenants/a\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("umemcg_cluster_max_bytes{group=\"g\"} 8388608\n"),
            std::string::npos);
  EXPECT_NE(
      text.find("umemcg_cluster_stat_bytes{group=\"g\",item=\"lease_bytes\"}"),
      std::string::npos);
  EXPECT_NE(text.find("umemcg_cluster_stat_events_total{group=\"g\","
                      "item=\"grants\"}"),
            std::string::npos);
  EXPECT_NE(
      text.find("umemcg_cluster_events_total{group=\"g\",event=\"max\"} 0"),
      std::string::npos);
  EXPECT_NE(text.find("umemcg_cluster_current_bytes{group=\"g\"}"),
            std::string::npos);
  g->Uncharge(Pages(5));
  ASSERT_TRUE(b.value()->Unbind().ok());
  EXPECT_EQ(g->ReadFile("memory.cluster.group").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(FormatPrometheus(CollectMetrics(*ctrl)).find("umemcg_cluster"),
            std::string::npos);
}

TEST_F(ClusterTest, ConcurrentThreadsStayUnderTheMax) {
  auto cluster = Connect();
  ASSERT_TRUE(cluster);
  ASSERT_TRUE(cluster->SetMax("t", Pages(2000)).ok());
  auto ctrl = NewController();
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  auto b = cluster->Bind(*g, "t");
  ASSERT_TRUE(b.ok());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> worst{0};
  std::thread sampler([&] {
    while (!stop.load()) {
      auto s = cluster->Snapshot();
      if (s.ok()) {
        const uint64_t u = GroupIn(s.value(), "t").usage.raw();
        if (u > worst.load()) worst.store(u);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      std::vector<uint64_t> held;
      for (int i = 0; i < 20000; ++i) {
        if (g->TryCharge(Pages(3)).ok()) held.push_back(3);
        if (held.size() > 150 || (i % 7 == 0 && !held.empty())) {
          g->Uncharge(Pages(3));
          held.pop_back();
        }
      }
      for (uint64_t p : held) g->Uncharge(Pages(p));
    });
  }
  for (std::thread& t : threads) t.join();
  stop.store(true);
  sampler.join();
  EXPECT_LE(worst.load(), 2000u);
  ctrl->DrainAllStocks(ctrl->root());
  EXPECT_EQ(g->usage(), Pages(0));
  EXPECT_TRUE(RedisHoldsTheLease(*cluster, *b.value(), "t"));
  ASSERT_TRUE(b.value()->Unbind().ok());
  EXPECT_EQ(GroupIn(cluster->Snapshot().value(), "t").usage, Pages(0));
}

}  // namespace
}  // namespace umemcg::cluster_test

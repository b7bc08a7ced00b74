// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The cluster quota across separate node processes (cluster_node) and a
// real redis-server: concurrent charging to exact quiescence with the
// cluster max never exceeded, and a node killed with SIGKILL mid-run whose
// lease comes back after its expiry for the others to use.

#include <atomic>
#include <thread>

#include "cluster_test_util.h"

namespace umemcg::cluster_test {
namespace {

constexpr int kTtlMs = 2000;

class ClusterProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = RedisProcess::Start();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    redis_ = std::move(r).value();
    ClusterOptions o;
    o.redis_url = redis_->url();
    auto c = Cluster::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    admin_ = std::move(c).value();
  }

  std::unique_ptr<Node> StartNode(const std::string& group) {
    auto n = std::make_unique<Node>(CLUSTER_NODE_BINARY, redis_->url(), group,
                                    kTtlMs);
    EXPECT_TRUE(n->ok()) << n->ready();
    return n;
  }

  // Samples the group's usage until stopped; the worst value seen.
  class Sampler {
   public:
    Sampler(Cluster& admin, std::string group)
        : thread_([this, &admin, group] {
            while (!stop_.load()) {
              auto s = admin.Snapshot();
              if (s.ok()) {
                worst_ = std::max(worst_.load(),
                                  GroupIn(s.value(), group).usage.raw());
                ++samples_;
              }
              std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
          }) {}
    uint64_t Stop() {
      stop_.store(true);
      thread_.join();
      return worst_.load();
    }
    int samples() const { return samples_.load(); }

   private:
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> worst_{0};
    std::atomic<int> samples_{0};
    std::thread thread_;
  };

  // True when Redis holds exactly the nodes' leases (per node and summed)
  // and each node's usage is within its lease.
  bool Exact(const std::string& group,
             const std::vector<std::unique_ptr<Node>*>& nodes) {
    auto snap = admin_->Snapshot();
    if (!snap.ok()) return false;
    const ClusterGroupInfo info = GroupIn(snap.value(), group);
    uint64_t sum = 0;
    for (std::unique_ptr<Node>* n : nodes) {
      auto st = (*n)->State();
      if (st["usage"] > st["lease"]) return false;
      if (LeaseOf(info, (*n)->name()) != st["lease"]) return false;
      sum += st["lease"];
    }
    return info.usage.raw() == sum;
  }

  std::unique_ptr<RedisProcess> redis_;
  std::unique_ptr<Cluster> admin_;
};

TEST_F(ClusterProcessTest, NodesChargeConcurrentlyToExactQuiescence) {
  for (const uint64_t max : {100000u, 700u}) {  // roomy, then contended
    SCOPED_TRACE(max);
    ASSERT_TRUE(admin_->SetMax("tenant", Pages(max)).ok());
    std::vector<std::unique_ptr<Node>> nodes;
    for (int i = 0; i < 3; ++i) nodes.push_back(StartNode("tenant"));
    Sampler sampler(*admin_, "tenant");
    for (auto& n : nodes) ASSERT_EQ(n->Ask("start 2 3 64"), "ok");
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    uint64_t ops = 0;
    for (auto& n : nodes) {
      const std::string r = n->Ask("stop");
      ASSERT_EQ(r.rfind("ok ", 0), 0u) << r;
      ops += std::stoull(r.substr(3));
      ASSERT_EQ(n->Ask("drain"), "ok");
    }
    EXPECT_GT(ops, 0u);
    const uint64_t worst = sampler.Stop();
    EXPECT_GT(sampler.samples(), 0);
    EXPECT_LE(worst, max);  // no forced charges: never over max
    std::vector<std::unique_ptr<Node>*> all;
    for (auto& n : nodes) all.push_back(&n);
    for (auto& n : nodes) EXPECT_EQ(n->State()["usage"], 0u);
    EXPECT_TRUE(Eventually([&] { return Exact("tenant", all); }));
    for (auto& n : nodes) ASSERT_EQ(n->Ask("unbind"), "ok");
    const ClusterGroupInfo info = GroupIn(admin_->Snapshot().value(), "tenant");
    EXPECT_EQ(info.usage, Pages(0));
    EXPECT_TRUE(info.leases.empty());
    for (auto& n : nodes) EXPECT_EQ(n->Quit(), 0);
  }
}

TEST_F(ClusterProcessTest, KilledNodesLeaseComesBackAfterExpiry) {
  ASSERT_TRUE(admin_->SetMax("tenant", Pages(1000)).ok());
  auto a = StartNode("tenant");
  auto b = StartNode("tenant");
  auto c = StartNode("tenant");
  ASSERT_EQ(a->Ask("hold 600"), "ok");
  EXPECT_EQ(b->Ask("hold 600"), "fail RESOURCE_EXHAUSTED");
  // Mid-run: b and c charge concurrently while a is killed.
  ASSERT_EQ(b->Ask("start 2 3 16"), "ok");
  ASSERT_EQ(c->Ask("start 2 3 16"), "ok");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string a_name = a->name();
  a->Kill();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(b->Ask("stop").rfind("ok ", 0), 0u);
  ASSERT_EQ(c->Ask("stop").rfind("ok ", 0), 0u);
  ASSERT_EQ(b->Ask("drain"), "ok");
  ASSERT_EQ(c->Ask("drain"), "ok");
  // The dead node's lease is still counted until it expires...
  EXPECT_GE(LeaseOf(GroupIn(admin_->Snapshot().value(), "tenant"), a_name),
            600u);
  // ...then it is collected, and the others can use its pages.
  EXPECT_TRUE(Eventually([&] { return b->Ask("hold 600") == "ok"; }));
  const ClusterGroupInfo info = GroupIn(admin_->Snapshot().value(), "tenant");
  EXPECT_EQ(LeaseOf(info, a_name), 0u);
  EXPECT_GE(info.expired, 1u);
  EXPECT_LE(info.usage, Pages(1000));
  std::vector<std::unique_ptr<Node>*> live = {&b, &c};
  EXPECT_TRUE(Eventually([&] { return Exact("tenant", live); }));
  ASSERT_EQ(b->Ask("release"), "ok");
  ASSERT_EQ(b->Ask("unbind"), "ok");
  ASSERT_EQ(c->Ask("unbind"), "ok");
  EXPECT_EQ(GroupIn(admin_->Snapshot().value(), "tenant").usage, Pages(0));
}

}  // namespace
}  // namespace umemcg::cluster_test

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// umemcg-bench's `cluster` scenario in-process (tiny runs): every variant
// measured, Redis commands counted, exact at quiescence, never over max.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "scenarios.h"

namespace umemcg::bench {
namespace {

TEST(ClusterBenchTest, VariantsFieldsAndExactness) {
  Params p;
  p.seconds = 0.2;
  p.repeat = 1;
  p.processes = 2;
  p.threads = 1;
  auto r = RunScenario("cluster", p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r.value().size(), 4u);
  for (const Result& res : r.value()) {
    SCOPED_TRACE(res.variant);
    EXPECT_GT(res.ops_per_sec, 0);
    EXPECT_EQ(res.field("exact"), 1);
    EXPECT_EQ(res.field("over_max_worst_pages"), 0);
    EXPECT_EQ(res.field("processes"), 2);
    if (res.variant == "per-charge") {
      // An INCRBY per charge and a DECRBY per uncharge.
      EXPECT_GE(res.field("redis_cmds_per_1k_charges"), 1900);
    }
    if (res.variant == "local") {
      EXPECT_EQ(res.field("redis_cmds_per_1k_charges"), 0);
    }
    if (res.variant == "lease") {
      EXPECT_LT(res.field("redis_cmds_per_1k_charges"), 100);
      EXPECT_GT(res.field("vs_per_charge"), 1);
    }
    if (res.variant == "drain") {
      // B reached max - A's usage, which needed A's unused lease: drained
      // on request.
      EXPECT_EQ(res.field("reached"), 1);
      EXPECT_GE(res.field("stranded_pages"), 1024);
      EXPECT_GE(res.field("drains"), 1);
      EXPECT_GE(res.field("drained"), 1);
      EXPECT_GT(res.field("fill_ms"), 0);
    }
  }
  EXPECT_EQ(
      ScenarioVariants("cluster"),
      (std::vector<std::string>{"lease", "per-charge", "local", "drain"}));
}

// vs_local / vs_per_charge: the median of per-round ratios, not the ratio
// of the medians (which pairs numbers from different rounds).
TEST(ClusterBenchTest, RatiosAreMediansOfPerRoundRatios) {
  const std::vector<double> lease = {100, 10, 50};
  const std::vector<double> local = {100, 20, 25};
  // Per round: 1, 0.5, 2 -> median 1. Ratio of medians: 50 / 25 = 2.
  EXPECT_DOUBLE_EQ(PairedRatio(&lease, &local), 1.0);
  EXPECT_TRUE(std::isnan(PairedRatio(&lease, nullptr)));
  const std::vector<double> none;
  EXPECT_TRUE(std::isnan(PairedRatio(&lease, &none)));
}

// cluster-chaos, short form (three faults, one run each, two node
// processes): each recovers without an operator, with no OOM handler call,
// exact at quiescence; no max event except where the cluster was over max
// on purpose (lower-max), which must come back under max by reclaim.
TEST(ClusterBenchTest, ChaosShortForm) {
  Params p;
  p.repeat = 1;
  p.processes = 2;
  p.variants = {"flushall", "kill-node", "lower-max"};
  auto r = RunScenario("cluster-chaos", p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r.value().size(), 3u);
  for (const Result& res : r.value()) {
    SCOPED_TRACE(res.variant);
    EXPECT_EQ(res.field("exact"), 1);
    EXPECT_EQ(res.field("ooms"), 0);
    if (res.variant != "lower-max") EXPECT_EQ(res.field("max_events"), 0);
    EXPECT_GE(res.field("recover_ms"), 0);
    EXPECT_FALSE(std::isnan(res.field("cmds_per_sec_node")));
    EXPECT_FALSE(std::isnan(res.field("over_max_pages")));
    // Targets, with slack for a busy machine (lease TTL 2 s): a lost group
    // within 2 TTLs; a dead node's lease back within a TTL and a
    // heartbeat (the next script after its expiry collects it).
    if (res.variant == "flushall") {
      EXPECT_LE(res.field("recover_ms"), 5000);
    }
    if (res.variant == "kill-node") {
      EXPECT_LE(res.field("recover_ms"), 4000);
    }
    // Over max by a set-max below the usage, and back at or under it by
    // the nodes' reclaim (target 5 poll intervals, 250 ms; 1.5 s for a
    // busy machine; a cluster that stayed over reads 20 s here).
    if (res.variant == "lower-max") {
      EXPECT_GT(res.field("over_max_pages"), 0);
      EXPECT_GT(res.field("reclaimed_pages"), 0);
      EXPECT_LE(res.field("back_under_ms"), 1500);
    }
  }
  EXPECT_EQ(ScenarioVariants("cluster-chaos"), ChaosFaults());
}

// Over max after an AOF-restart outage (cluster-chaos restart-aof-over,
// three node processes, a real redis-server with AOF killed -9 and down
// 3 s): node 0 holds more than its safe share and charges nothing from the
// kill on, the others charge up to their safe capacity while Redis is
// down, and the claims after the restart put Redis about 500 pages over
// max (222 sampled in one run on a busy machine). The nodes must bring it back
// at or under max by reclaiming their caches: target 5 poll intervals (50 ms
// each). Asserted on the nodes' own timeline where it can be: no node's replies
// may show the cluster over max for more than 10 poll intervals (500 ms: room
// for a busy 2-core box, and below the heartbeat, 667 ms, at which an idle node
// hears of it otherwise). The harness samples Redis too (every ~5 ms) for 1.5 s
// after the recovery: a cluster that stayed over would read about that long. No
// OOM handler call (the memory is reclaimable), max events raised (the nodes'
// answer to being over max), exact at quiescence.
TEST(ClusterBenchTest, ChaosOverMaxAfterAnAofRestartComesBackUnderMax) {
  Params p;
  p.repeat = 1;
  p.processes = 3;
  p.variants = {"restart-aof-over"};
  auto r = RunScenario("cluster-chaos", p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r.value().size(), 1u);
  const Result& res = r.value()[0];
  constexpr double kPollMs = 50;
  // The over-max is real (typically 370-610 pages; the harness samples
  // Redis every ~5 ms and the nodes may reclaim most of it between two
  // samples, so only its presence is asserted; the nodes' reclaim and max
  // events below say they answered it).
  EXPECT_GT(res.field("redis_over_pages"), 0);
  EXPECT_LE(res.field("node_over_ms"), 10 * kPollMs);
  // The harness's own samples of Redis (every ~5 ms) agree.
  EXPECT_LE(res.field("back_under_ms"), 10 * kPollMs);
  EXPECT_EQ(res.field("ooms"), 0);
  EXPECT_GT(res.field("max_events"), 0);
  EXPECT_GT(res.field("reclaimed_pages"), 0);
  EXPECT_EQ(res.field("exact"), 1);
  std::printf(
      "restart-aof-over: Redis %.0f pages over max, back under in %.0f ms "
      "(nodes: longest over %.0f ms, last over %.0f ms after the restart)\n",
      res.field("redis_over_pages"), res.field("back_under_ms"),
      res.field("node_over_ms"), res.field("node_last_over_ms"));
}

}  // namespace
}  // namespace umemcg::bench

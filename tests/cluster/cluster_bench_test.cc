// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// umemcg-bench's `cluster` scenario in-process (tiny runs): every variant
// measured, Redis commands counted, exact at quiescence, never over max.

#include <gtest/gtest.h>

#include <cmath>

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
  ASSERT_EQ(r.value().size(), 3u);
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
  }
  EXPECT_EQ(ScenarioVariants("cluster"),
            (std::vector<std::string>{"lease", "per-charge", "local"}));
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

}  // namespace
}  // namespace umemcg::bench

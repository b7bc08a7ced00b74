// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// umemcg-bench: every scenario runs briefly in-process (smoke, not timed),
// ends balanced (the scenario's own check, which the tests also exercise
// on a deliberately unbalanced controller), and its JSON lines parse with
// the required fields. Plus the verdict rules, the plots and the
// stats_update_early_stop knob the naive-walk variant uses.

#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "report.h"
#include "scenarios.h"
#include "umemcg/umemcg.h"

namespace umemcg::bench {
namespace {

// Tiny runs: a fraction of a second per scenario even under TSan.
Params Tiny() {
  Params p;
  p.seconds = 0.02;
  p.repeat = 1;
  p.extra_rounds = 0;  // smoke runs: a starved round is not run again
  p.iterations = 20000;
  p.groups = 120;
  p.pin = false;
  p.depth = 2;
  return p;
}

void ExpectRequiredJson(const Result& r) {
  const std::string line = ToJson(r).dump();
  const nlohmann::json j = nlohmann::json::parse(line);
  for (const char* f : {"scenario", "variant", "batch", "threads", "seconds",
                        "ops", "ops_per_sec", "repeat", "balanced"}) {
    EXPECT_TRUE(j.contains(f)) << f << " missing in " << line;
  }
  EXPECT_EQ(j["scenario"], r.scenario);
  EXPECT_EQ(j["variant"], r.variant);
  EXPECT_TRUE(j["balanced"].get<bool>()) << line;
  EXPECT_GT(j["ops"].get<double>(), 0) << line;
  EXPECT_GT(j["seconds"].get<double>(), 0) << line;
}

std::vector<Result> RunOk(const std::string& name, const Params& p) {
  auto r = RunScenario(name, p);
  EXPECT_TRUE(r.ok()) << name << ": " << r.status().ToString();
  if (!r.ok()) return {};
  EXPECT_FALSE(r.value().empty()) << name;
  for (const Result& res : r.value()) ExpectRequiredJson(res);
  return std::move(r).value();
}

// A sendfile result (one pair) of `variant` at `batch`: `ops` msgs/s.
Result SendfileResult(const std::string& variant, int batch, double ops) {
  return Result{.scenario = "sendfile",
                .variant = variant,
                .batch = batch,
                .threads = 2,
                .ops_per_sec = ops};
}

// The one claim of SeedClaims(rs) whose name starts with `prefix`, with
// the number of claims that did (a test expects 1).
std::pair<Claim, int> ClaimNamed(const std::vector<Result>& rs,
                                 const std::string& prefix) {
  std::pair<Claim, int> out{Claim{}, 0};
  for (const Claim& c : SeedClaims(rs)) {
    if (c.name.rfind(prefix, 0) == 0) {
      out.first = c;
      ++out.second;
    }
  }
  return out;
}

constexpr char kB64VsUnaccounted[] = "sendfile: umemcg batch 64 vs unaccounted";

std::set<std::string> Variants(const std::vector<Result>& rs) {
  std::set<std::string> v;
  for (const Result& r : rs) v.insert(r.variant);
  return v;
}

TEST(UmemcgBenchTest, SendfileVariantsAndFields) {
  Params p = Tiny();
  p.pairs = 1;
  p.batches = {16, 512, kAdaptiveBatch};
  const std::vector<Result> rs = RunOk("sendfile", p);
  EXPECT_EQ(Variants(rs),
            (std::set<std::string>{"umemcg", "unaccounted", "naive",
                                   "per-thread", "per-leaf-quantum"}));
  // unaccounted, b16, b512, adaptive, naive, per-thread, per-leaf-quantum
  EXPECT_EQ(rs.size(), 7u);
  for (const Result& r : rs) {
    EXPECT_EQ(r.threads, 2);
    EXPECT_FALSE(std::isnan(r.field("overhead_vs_unaccounted")));
    EXPECT_GT(r.field("mbps"), 0);
    EXPECT_GT(r.field("on_cpu"), 0) << r.variant;
    EXPECT_LE(r.field("on_cpu"), 1) << r.variant;
    ASSERT_EQ(r.field_samples.at("on_cpu").size(), 1u);
    // 10 KiB messages through sub-page reserves: 2.5 pages per socket.
    EXPECT_NEAR(r.field("pages_per_msg"), 5.0, 0.5);
    if (r.variant == "unaccounted") continue;
    EXPECT_GE(r.field("slack_pages"), 0) << r.variant;
    EXPECT_LE(r.field("slack_pages"), r.field("slack_bound_pages"))
        << r.variant;
    if (r.variant == "umemcg" || r.variant == "naive") {
      EXPECT_FALSE(std::isnan(r.field("rmw_per_op")));
    }
  }
  bool adaptive = false;
  for (const Result& r : rs) {
    if (r.batch != kAdaptiveBatch) continue;
    adaptive = true;
    EXPECT_GE(r.field("batch_end"), 1);
    EXPECT_EQ(ToJson(r)["batch"], "adaptive");
  }
  EXPECT_TRUE(adaptive);
}

TEST(UmemcgBenchTest, MultitenantSlots) {
  Params p = Tiny();
  p.tenants = 4;
  p.softirq_threads = 2;
  const std::vector<Result> rs = RunOk("multitenant", p);
  EXPECT_EQ(Variants(rs),
            (std::set<std::string>{"unaccounted", "slots1", "slots7",
                                   "per-thread", "per-leaf-quantum"}));
  for (const Result& r : rs) {
    if (r.variant == "unaccounted") continue;
    EXPECT_LE(r.field("slack_pages"), r.field("slack_bound_pages"))
        << r.variant;
  }
  p.stock_slots = 3;
  p.variants = {"unaccounted", "slots3"};
  EXPECT_EQ(Variants(RunOk("multitenant", p)),
            (std::set<std::string>{"unaccounted", "slots3"}));
}

TEST(UmemcgBenchTest, PagefaultScenariosEveryStatVariant) {
  Params p = Tiny();
  p.threads = 2;
  for (const char* s :
       {"pagefault1", "pagefault2", "pagefault3", "fallocate"}) {
    const std::vector<Result> rs = RunOk(s, p);
    EXPECT_EQ(Variants(rs), (std::set<std::string>{"unaccounted", "global",
                                                   "pergroup", "naive-walk"}))
        << s;
    for (const Result& r : rs) {
      EXPECT_TRUE(r.threads == 1 || r.threads == 2) << s;
      EXPECT_GT(r.field("per_task_ops"), 0) << s;
      EXPECT_FALSE(std::isnan(r.field("scalability"))) << s;
    }
  }
}

TEST(UmemcgBenchTest, PagefaultThreadModeDepth4) {
  Params p = Tiny();
  p.threads = 2;
  p.depth = 4;
  p.mode = "thread";
  p.variants = {"naive-walk"};
  const std::vector<Result> rs = RunOk("pagefault1", p);
  ASSERT_EQ(rs.size(), 2u);  // 1 and 2 tasks
  for (const Result& r : rs) {
    EXPECT_EQ(r.mode, "thread");
    EXPECT_EQ(r.depth, 4);
  }
}

TEST(UmemcgBenchTest, KmemSingleAndThreads) {
  Params p = Tiny();
  const std::vector<Result> single = RunOk("kmem", p);
  EXPECT_EQ(Variants(single),
            (std::set<std::string>{"unaccounted", "immediate", "cached",
                                   "per-thread", "per-leaf-quantum"}));
  for (const Result& r : single) {
    EXPECT_EQ(r.ops, 20000);
    EXPECT_GT(r.field("ns_per_op"), 0);
    EXPECT_EQ(r.field("object_size"), 64);
    EXPECT_GT(r.field("on_cpu"), 0);
    if (r.variant != "unaccounted") {
      EXPECT_LE(r.field("slack_pages"), r.field("slack_bound_pages"))
          << r.variant;
    }
  }
  p.threads = 2;
  const std::vector<Result> multi = RunOk("kmem", p);
  EXPECT_EQ(Variants(multi),
            (std::set<std::string>{"unaccounted", "percpu", "shared-pool",
                                   "per-thread", "per-leaf-quantum"}));
  for (const Result& r : multi) EXPECT_EQ(r.field("object_size"), 4096);
}

TEST(UmemcgBenchTest, StatreadLatencies) {
  Params p = Tiny();
  p.seconds = 0.05;
  p.threads = 1;
  const std::vector<Result> rs = RunOk("statread", p);
  EXPECT_EQ(Variants(rs),
            (std::set<std::string>{"global+whole-tree", "pergroup+subtree"}));
  for (const Result& r : rs) {
    EXPECT_EQ(r.field("groups"), 120);
    EXPECT_GT(r.field("reads"), 0);
    EXPECT_LE(r.field("p50_us"), r.field("p99_us"));
    EXPECT_LE(r.field("p99_us"), r.field("max_us"));
    EXPECT_FALSE(r.latencies_us.empty());
  }
}

TEST(UmemcgBenchTest, ScaleCreatesReadsAndRemovesEveryGroup) {
  Params p = Tiny();
  p.groups = 300;
  p.fanout = 10;
  p.threads = 2;
  const std::vector<Result> rs = RunOk("scale", p);
  EXPECT_EQ(Variants(rs), (std::set<std::string>{"small", "large"}));
  for (const Result& r : rs) {
    EXPECT_EQ(r.field("groups"), 300);  // small is min(1000, N)
    EXPECT_EQ(r.ops, 300);              // every group removed
    EXPECT_EQ(r.field("live_groups_after"), 1);
    // (The churn fields may be empty in so short a removal.)
    for (const char* f :
         {"create_per_s", "create_cpu_per_s", "create_concurrent_per_s",
          "remove_per_s", "remove_cpu_ns_per_group", "root_stat_p99_ms",
          "leaf_stat_p99_us", "hot_p99_quiet_ns", "bytes_per_group"}) {
      EXPECT_FALSE(std::isnan(r.field(f))) << f;
    }
    EXPECT_GT(r.field("remove_per_s"), 0);
    EXPECT_LE(r.field("root_stat_p50_ms"), r.field("root_stat_p99_ms"));
  }
  // The claims of issue 16 come out of these results.
  int scale_claims = 0;
  for (const Claim& c : SeedClaims(rs)) {
    if (c.name.rfind("scale:", 0) != 0) continue;
    ++scale_claims;
    // A run this small may see no churn sample and no RSS growth.
    if (c.name.find("churning") == std::string::npos &&
        c.name.find("bytes") == std::string::npos) {
      EXPECT_NE(c.verdict, "n/a") << c.name;
    }
  }
  EXPECT_EQ(scale_claims, 7);
}

// Regression: the adaptive batch is kAdaptiveBatch (-1), which the claim
// lookup once took for "any batch": the adaptive claim then reported the
// first umemcg result's ratio (batch 32's).
TEST(UmemcgBenchTest, AdaptiveClaimUsesTheAdaptiveResult) {
  auto sendfile = [](const char* variant, int batch, double ops_per_sec) {
    Result r;
    r.scenario = "sendfile";
    r.variant = variant;
    r.batch = batch;
    r.threads = 2;
    r.depth = 3;
    r.ops_per_sec = ops_per_sec;
    r.ops_per_sec_samples = {ops_per_sec};
    return r;
  };
  const std::vector<Result> rs = {
      sendfile("unaccounted", 0, 100), sendfile("umemcg", 32, 50),
      sendfile("umemcg", 64, 80), sendfile("umemcg", kAdaptiveBatch, 95)};
  int found = 0;
  for (const Claim& c : SeedClaims(rs)) {
    if (c.name.rfind("sendfile: umemcg adaptive batch vs unaccounted", 0) ==
        0) {
      EXPECT_DOUBLE_EQ(c.measured, 0.95);
      ++found;
    } else if (c.name.rfind("sendfile: umemcg batch 64 vs unaccounted", 0) ==
               0) {
      EXPECT_DOUBLE_EQ(c.measured, 0.80);
      ++found;
    } else if (c.name.rfind("sendfile: batch 64 vs 32", 0) == 0) {
      EXPECT_DOUBLE_EQ(c.measured, 80.0 / 50.0);
      ++found;
    }
  }
  EXPECT_EQ(found, 3);
}

TEST(UmemcgBenchTest, UnknownScenarioOrNoConfigurationIsAnError) {
  EXPECT_FALSE(RunScenario("nope", Tiny()).ok());
  Params p = Tiny();
  p.threads = 2;
  p.variants = {"immediate"};  // single-thread only
  EXPECT_FALSE(RunScenario("kmem", p).ok());
}

TEST(UmemcgBenchTest, CheckBalancedCatchesLeftoverCharges) {
  auto c = MakeController({});
  ASSERT_TRUE(c.ok());
  auto chain = MakeChain(*c.value(), 2, Pages(0));
  ASSERT_TRUE(chain.ok());
  Group* leaf = chain.value().back().get();
  ASSERT_TRUE(leaf->TryCharge(Pages(3)).ok());
  leaf->Uncharge(Pages(2));  // one page still charged
  EXPECT_FALSE(CheckBalanced(*c.value(), chain.value()).ok());
  leaf->Uncharge(Pages(1));
  EXPECT_TRUE(CheckBalanced(*c.value(), chain.value()).ok());
}

// A claim whose threshold lies inside its noise estimate (the lowest to
// the highest per-repeat ratio) gets "noise", whichever side its median
// fell on: that is what keeps `all --quick` verdicts from flipping
// between runs.
TEST(UmemcgBenchTest, VerdictIsNoiseWhenTheBandStraddlesTheThreshold) {
  auto claim = [](double kernel, double measured, double target_min,
                  double band_lo, double band_hi) {
    Claim c{"", "", kernel, measured, target_min, NAN};
    c.lo = band_lo;
    c.hi = band_hi;
    return c;
  };
  EXPECT_EQ(Verdict(claim(NAN, 0.87, 0.85, 0.86, 0.89)), "yes");
  EXPECT_EQ(Verdict(claim(NAN, 0.87, 0.85, 0.83, 0.89)), "noise");
  EXPECT_EQ(Verdict(claim(NAN, 0.84, 0.85, 0.83, 0.89)), "noise");
  EXPECT_EQ(Verdict(claim(NAN, 0.82, 0.85, 0.80, 0.84)), "partly");
  // Direction unsettled (partly vs no) is noise too.
  EXPECT_EQ(Verdict(claim(1.63, 1.03, 1.10, 1.02, 1.05)), "partly");
  EXPECT_EQ(Verdict(claim(1.63, 1.03, 1.10, 0.97, 1.05)), "noise");
  // Without a target: the kernel's direction and size.
  EXPECT_EQ(Verdict(claim(0.74, 0.6, NAN, 0.55, 0.66)), "yes");
  EXPECT_EQ(Verdict(claim(0.74, 0.6, NAN, 0.55, 0.9)), "noise");
  // Measure takes the noise estimate from the per-repeat ratios.
  Result a, b;
  a.scenario = b.scenario = "sendfile";
  a.variant = "umemcg";
  a.batch = 64;
  b.variant = "unaccounted";
  a.threads = b.threads = 2;
  a.ops_per_sec = 87;
  b.ops_per_sec = 100;
  a.ops_per_sec_samples = {50, 84, 87, 88, 99};  // ratios 0.5 .. 0.99
  b.ops_per_sec_samples = {100, 100, 100, 100, 100};
  const auto [c, found] = ClaimNamed({a, b}, kB64VsUnaccounted);
  ASSERT_EQ(found, 1);
  EXPECT_DOUBLE_EQ(c.lo, 0.5);
  EXPECT_DOUBLE_EQ(c.hi, 0.99);
  EXPECT_EQ(c.verdict, "noise");
}

// The claim's ratio is the median of the per-repeat ratios and its noise
// verdict comes from the median's confidence interval, not from the
// extremes: one disturbed repeat out of 7 neither moves the ratio nor
// turns the verdict into "noise" (it did when the verdict used min..max,
// which made `all --quick` verdicts differ between runs).
TEST(UmemcgBenchTest, OneOutlierRepeatDoesNotMakeNoise) {
  Result a{.scenario = "sendfile", .variant = "umemcg", .batch = 64};
  Result b{.scenario = "sendfile", .variant = "unaccounted"};
  a.threads = b.threads = 2;
  a.ops_per_sec_samples = {86, 50, 87, 88, 89, 87, 90};
  b.ops_per_sec_samples = {100, 100, 100, 100, 100, 100, 100};
  a.ops_per_sec = 87;
  b.ops_per_sec = 100;
  {
    const auto [c, found] = ClaimNamed({a, b}, kB64VsUnaccounted);
    ASSERT_EQ(found, 1);
    EXPECT_DOUBLE_EQ(c.measured, 0.87);
    EXPECT_DOUBLE_EQ(c.lo, 0.5);
    EXPECT_DOUBLE_EQ(c.hi, 0.9);
    EXPECT_DOUBLE_EQ(c.ci_lo, 0.86);  // 2nd of 7: the 87.5% interval
    EXPECT_DOUBLE_EQ(c.ci_hi, 0.89);  // 6th of 7
    EXPECT_EQ(c.verdict, "yes");
  }
  // The interval decides like the band did: straddling the target is noise.
  Claim c{"", "", NAN, 0.87, 0.85, NAN};
  c.lo = 0.5;
  c.hi = 0.9;
  c.ci_lo = 0.84;
  c.ci_hi = 0.89;
  EXPECT_EQ(Verdict(c), "noise");
  c.ci_lo = 0.86;
  EXPECT_EQ(Verdict(c), "yes");
  // The median of the paired ratios, not the ratio of the sides' medians:
  // with the level moving between rounds the two differ (here 0.9 and
  // 240 / 300 = 0.8).
  a.ops_per_sec_samples = {90, 90, 240, 300, 300};
  b.ops_per_sec_samples = {100, 100, 300, 300, 300};
  a.ops_per_sec = 240;
  b.ops_per_sec = 300;
  const auto [d, found] = ClaimNamed({a, b}, kB64VsUnaccounted);
  ASSERT_EQ(found, 1);
  EXPECT_DOUBLE_EQ(d.measured, 0.9);
  EXPECT_DOUBLE_EQ(d.ci_lo, 0.8);  // 5 rounds: the whole range
  EXPECT_DOUBLE_EQ(d.ci_hi, 1.0);
}

// P(Binomial(n, 1/2) <= j), exactly, for the rank check below.
double BinomialCdfHalf(int n, int j) {
  double sum = 0;
  double term = std::ldexp(1.0, -n);  // C(n, 0) / 2^n
  for (int i = 0; i <= j; ++i) {
    sum += term;
    term = term * (n - i) / (i + 1);
  }
  return sum;
}

TEST(UmemcgBenchTest, MedianCiRankIsTheWidestRankWithTheCoverage) {
  EXPECT_EQ(MedianCiRank(1, 0.8), 1u);
  EXPECT_EQ(MedianCiRank(3, 0.8), 1u);  // even min..max covers only 75%
  EXPECT_EQ(MedianCiRank(5, 0.8), 1u);
  EXPECT_EQ(MedianCiRank(7, 0.8), 2u);
  EXPECT_EQ(MedianCiRank(9, 0.8), 3u);
  EXPECT_EQ(MedianCiRank(11, 0.8), 3u);
  for (int n = 5; n <= 60; ++n) {
    const size_t k = MedianCiRank(static_cast<size_t>(n), 0.8);
    const int ki = static_cast<int>(k);
    EXPECT_GE(1 - 2 * BinomialCdfHalf(n, ki - 1), 0.8) << n;
    EXPECT_LT(1 - 2 * BinomialCdfHalf(n, ki), 0.8) << n;  // k+1 falls short
  }
}

// RunInterleaved replaces a round in which a timed thread was starved of
// CPU (another process took it) and keeps the rounds paired: sample i of
// every configuration comes from the same round.
TEST(UmemcgBenchTest, DisturbedRoundsAreRunAgain) {
  // on_cpu of config "a" per round; "b" reports none (never disturbs).
  const std::vector<double> on_cpu = {1.0, 0.5, 0.95, 0.99, 1.0, 1.0};
  int round_a = 0, round_b = 0;
  std::string order;  // the configurations in the order they ran
  std::vector<Config> configs;
  configs.push_back({"a", 64, 1, 1, "", [&]() -> StatusOr<Sample> {
                       order += 'a';
                       Sample s;
                       s.ops = round_a;
                       s.seconds = 1;
                       s.fields["on_cpu"] = on_cpu.at(round_a++);
                       return s;
                     }});
  configs.push_back({"b", 64, 1, 1, "", [&]() -> StatusOr<Sample> {
                       order += 'b';
                       Sample s;
                       s.ops = 10 + round_b++;
                       s.seconds = 1;
                       return s;
                     }});
  Params p;
  p.repeat = 3;
  auto r = RunInterleaved("t", configs, p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r.value().size(), 2u);
  EXPECT_EQ(round_a, 4);         // round 2 was disturbed: one more round
  EXPECT_EQ(order, "abbaabba");  // odd rounds in reverse
  EXPECT_EQ(r.value()[0].ops_per_sec_samples, (std::vector<double>{0, 2, 3}));
  EXPECT_EQ(r.value()[1].ops_per_sec_samples,
            (std::vector<double>{10, 12, 13}));
  EXPECT_EQ(r.value()[0].field_samples.at("on_cpu"),
            (std::vector<double>{1.0, 0.95, 0.99}));
  EXPECT_EQ(r.value()[0].rounds_discarded, 1);
  EXPECT_EQ(r.value()[1].rounds_discarded, 1);
  EXPECT_EQ(ToJson(r.value()[0])["rounds_discarded"], 1);

  // Always disturbed: repeat + ExtraRounds rounds, the least disturbed kept.
  const std::vector<double> busy = {0.5, 0.7, 0.6, 0.85, 0.4, 0.3};
  int round = 0;
  std::vector<Config> one;
  one.push_back({"a", 64, 1, 1, "", [&]() -> StatusOr<Sample> {
                   Sample s;
                   s.ops = round;
                   s.seconds = 1;
                   s.fields["on_cpu"] = busy.at(round++);
                   return s;
                 }});
  auto q = RunInterleaved("t", one, p);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(round, 3 + ExtraRounds(3));
  EXPECT_EQ(q.value()[0].ops_per_sec_samples,
            (std::vector<double>{1, 2, 3}));  // 0.7, 0.6, 0.85 in run order
  EXPECT_EQ(q.value()[0].rounds_discarded, 2);
  round = 0;
  p.extra_rounds = 0;  // none allowed: the first three, as they came
  auto z = RunInterleaved("t", one, p);
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  EXPECT_EQ(round, 3);
  EXPECT_EQ(z.value()[0].ops_per_sec_samples, (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(z.value()[0].rounds_discarded, 0);
}

// A claim of no effect (the kernel's ratio within 5% of 1, no target) is
// met by a median within 5% of 1 with an interval within 10%; outside it,
// an interval reaching the band is noise, one beyond it an effect.
TEST(UmemcgBenchTest, NoEffectClaimsJudgeTheMedian) {
  auto claim = [](double measured, double ci_lo, double ci_hi) {
    Claim c{"", "", 0.967, measured, NAN, NAN};
    c.ci_lo = ci_lo;
    c.ci_hi = ci_hi;
    return c;
  };
  EXPECT_EQ(Verdict(claim(1.02, 0.96, 1.07)), "yes");  // was noise
  EXPECT_EQ(Verdict(claim(0.98, 0.93, 1.01)), "yes");
  EXPECT_EQ(Verdict(claim(1.02, 0.97, 1.34)), "noise");  // too wide
  EXPECT_EQ(Verdict(claim(1.02, 0.89, 1.03)), "noise");
  EXPECT_EQ(Verdict(claim(1.06, 1.03, 1.09)), "noise");
  EXPECT_EQ(Verdict(claim(1.2, 1.1, 1.3)), "no");        // the other direction
  EXPECT_EQ(Verdict(claim(0.8, 0.75, 0.85)), "partly");  // an effect
  // Claims with an effect or a target keep the interval rule.
  Claim effect{"", "", 0.74, 0.6, NAN, NAN};
  effect.ci_lo = 0.55;
  effect.ci_hi = 0.9;
  EXPECT_EQ(Verdict(effect), "noise");
}

TEST(UmemcgBenchTest, LineRoundTrip) {
  EXPECT_TRUE(std::isnan(LineRoundTripNs(0, 0)));
  EXPECT_TRUE(std::isnan(LineRoundTripNs(-1, 0)));
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "one allowed CPU";
  const double ns = LineRoundTripNs(cpus[0], cpus[1]);
  EXPECT_GT(ns, 0);
  EXPECT_LT(ns, 1e9);  // a stuck partner would never return at all
  EXPECT_NE(MachineLine().find("cache-line round trip"), std::string::npos);
}

TEST(UmemcgBenchTest, Verdicts) {
  // Target met / missed in the right direction / wrong direction.
  EXPECT_EQ(Verdict({"", "", 1.63, 1.2, 1.10, NAN}), "yes");
  EXPECT_EQ(Verdict({"", "", 1.63, 1.05, 1.10, NAN}), "partly");
  EXPECT_EQ(Verdict({"", "", 1.63, 0.9, 1.10, NAN}), "no");
  EXPECT_EQ(Verdict({"", "", 2.39, 3.4, NAN, 2.0}), "partly");
  // No target: size within a factor of two of the kernel's effect.
  EXPECT_EQ(Verdict({"", "", 0.74, 0.6, NAN, NAN}), "yes");
  EXPECT_EQ(Verdict({"", "", 0.74, 0.97, NAN, NAN}), "partly");
  EXPECT_EQ(Verdict({"", "", 0.74, 1.2, NAN, NAN}), "no");
  EXPECT_EQ(Verdict({"", "", 0.993, 1.01, NAN, NAN}), "yes");
  EXPECT_EQ(Verdict({"", "", 0.74, NAN, NAN, NAN}), "n/a");
  // A timed thread starved of CPU: no verdict at all.
  Claim starved{"", "", 1.63, 1.2, 1.10, NAN};
  starved.on_cpu = kMinOnCpu - 0.01;
  EXPECT_EQ(Verdict(starved), "void");
  starved.on_cpu = kMinOnCpu;
  EXPECT_EQ(Verdict(starved), "yes");
}

TEST(UmemcgBenchTest, ClaimsCarryTheNoiseAndTheOnCpuShare) {
  Result b32 = SendfileResult("umemcg", 32, 100);
  b32.ops_per_sec_samples = {100, 90, 110};
  b32.fields["on_cpu"] = 0.95;
  Result b64 = b32;
  b64.batch = 64;
  b64.ops_per_sec = 120;
  b64.ops_per_sec_samples = {120, 117, 99};
  b64.fields["on_cpu"] = 0.7;
  const std::vector<Claim> claims = SeedClaims({b32, b64});
  ASSERT_FALSE(claims.empty());
  EXPECT_DOUBLE_EQ(claims[0].measured, 1.2);
  EXPECT_DOUBLE_EQ(claims[0].lo, 0.9);  // 99 / 110
  EXPECT_DOUBLE_EQ(claims[0].hi, 1.3);  // 117 / 90
  EXPECT_DOUBLE_EQ(claims[0].on_cpu, 0.7);
  EXPECT_EQ(claims[0].verdict, "void");
}

// A variant doing more work than `unaccounted` but running faster shows
// the baseline itself is slow: every ratio against it reads high.
TEST(UmemcgBenchTest, BaselineChecksFlagASlowUnaccountedLoop) {
  Result base = SendfileResult("unaccounted", 0, 100);
  base.ops_per_sec_samples = {100, 100, 100, 100, 100, 100, 100};
  base.fields["on_cpu"] = 0.99;
  Result more = base;
  more.variant = "per-thread";
  // Ratios 1.03..1.15: the interval (2nd..6th of 7) is 1.05..1.13.
  more.ops_per_sec_samples = {110, 103, 113, 105, 115, 109, 111};
  more.ops_per_sec = 110;
  std::vector<Claim> checks = BaselineChecks({base, more});
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].name, "sendfile: per-thread vs unaccounted (ops/s)");
  EXPECT_DOUBLE_EQ(checks[0].measured, 1.10);
  EXPECT_DOUBLE_EQ(checks[0].ci_lo, 1.05);
  EXPECT_EQ(checks[0].verdict, "slow");
  // The interval reaching 1 (two repeats at or below it): "ok".
  more.ops_per_sec_samples = {110, 99, 113, 100, 115, 109, 111};
  checks = BaselineChecks({base, more});
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].verdict, "ok");
  // Starved threads: no verdict.
  more.fields["on_cpu"] = kMinOnCpu / 2;
  EXPECT_EQ(BaselineChecks({base, more})[0].verdict, "void");
  // kmem compares the single-thread loops; a scenario missing either side
  // has no check.
  Result k1 = base;  // no samples: the ratio of the medians
  k1.scenario = "kmem";
  k1.threads = 1;
  k1.ops_per_sec_samples.clear();
  Result k2 = k1;
  k2.threads = 2;
  k2.variant = "per-thread";
  EXPECT_TRUE(BaselineChecks({k1, k2}).empty());
  k2.threads = 1;
  k2.ops_per_sec = 90;
  checks = BaselineChecks({k1, k2});
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_DOUBLE_EQ(checks[0].measured, 0.9);
  EXPECT_EQ(checks[0].verdict, "ok");
}

TEST(UmemcgBenchTest, SeedClaimsFromResults) {
  Result b32 = SendfileResult("umemcg", 32, 100);
  Result b64 = b32;
  b64.batch = 64;
  b64.ops_per_sec = 120;
  const std::vector<Claim> claims = SeedClaims({b32, b64});
  ASSERT_FALSE(claims.empty());
  EXPECT_DOUBLE_EQ(claims[0].measured, 1.2);
  EXPECT_EQ(claims[0].verdict, "yes");
  EXPECT_EQ(claims[1].verdict, "n/a");  // no unaccounted result
}

TEST(UmemcgBenchTest, JsonRoundTripAndScalabilityAcrossFiles) {
  Result one{.scenario = "pagefault1",
             .variant = "pergroup",
             .batch = 64,
             .threads = 1,
             .depth = 4,
             .mode = "process",
             .repeat = 3,
             .seconds = 0.5,
             .ops = 5e5,
             .ops_per_sec = 1e6};
  one.fields["per_task_ops"] = 1e6;
  one.field_samples["per_task_ops"] = {0.9e6, 1e6, NAN};
  one.latencies_us = {1, 2, 3};
  Result four = one;
  four.threads = 4;
  four.ops_per_sec = 3e6;
  four.batch = kAdaptiveBatch;
  const std::string path = ::testing::TempDir() + "umemcg_bench_rt_" +
                           std::to_string(getpid()) + ".json";
  {
    std::ofstream out(path);
    out << ToJson(one).dump() << "\n\n" << ToJson(four).dump() << "\n";
  }
  auto back = ReadJsonLines({path});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back.value().size(), 2u);
  const Result& r = back.value()[0];
  EXPECT_EQ(r.scenario, "pagefault1");
  EXPECT_EQ(r.variant, "pergroup");
  EXPECT_EQ(r.batch, 64);
  EXPECT_EQ(r.depth, 4);
  EXPECT_EQ(r.mode, "process");
  EXPECT_EQ(r.repeat, 3);
  EXPECT_DOUBLE_EQ(r.ops_per_sec, 1e6);
  EXPECT_DOUBLE_EQ(r.field("per_task_ops"), 1e6);
  EXPECT_TRUE(std::isnan(r.field("cpus")));  // machine keys are not fields
  EXPECT_EQ(r.latencies_us.front(), 1);
  EXPECT_EQ(r.latencies_us.back(), 3);
  ASSERT_EQ(r.field_samples.at("per_task_ops").size(), 3u);
  EXPECT_DOUBLE_EQ(r.field_samples.at("per_task_ops")[0], 0.9e6);
  EXPECT_TRUE(std::isnan(r.field_samples.at("per_task_ops")[2]));
  EXPECT_EQ(back.value()[1].batch, kAdaptiveBatch);
  back.value()[1].batch = 64;  // the same configuration at 4 threads
  AddScalability(back.value());
  EXPECT_DOUBLE_EQ(back.value()[1].field("scalability"), 0.75);
  {
    std::ofstream out(path);
    out << "{\"scenario\": \"x\"}\n";  // required keys missing
  }
  EXPECT_FALSE(ReadJsonLines({path}).ok());
  std::filesystem::remove(path);
  EXPECT_FALSE(ReadJsonLines({path}).ok());  // missing file
}

TEST(UmemcgBenchTest, PlotsAreSvg) {
  if (std::system("gnuplot --version >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "gnuplot not installed";
  }
  std::vector<Result> rs;
  for (int t : {1, 2}) {
    rs.push_back({.scenario = "pagefault1",
                  .variant = "pergroup",
                  .batch = 64,
                  .threads = t,
                  .depth = 2,
                  .mode = "process",
                  .ops_per_sec = 1e6 * t});
  }
  for (int b : {32, 64, kAdaptiveBatch}) {  // adaptive: not on the x axis
    Result r{.scenario = "sendfile",
             .variant = "umemcg",
             .batch = b,
             .threads = 2,
             .ops_per_sec = 1e6};
    r.fields["overhead_vs_unaccounted"] = b > 0 ? 64.0 / b / 10 : 0.05;
    rs.push_back(r);
  }
  Result sr{
      .scenario = "statread", .variant = "pergroup+subtree", .threads = 1};
  sr.latencies_us = {1, 2, 3, 50};
  rs.push_back(sr);
  const std::string dir =
      ::testing::TempDir() + "umemcg_bench_plots_" + std::to_string(getpid());
  auto svgs = WritePlots(dir, rs);
  ASSERT_TRUE(svgs.ok()) << svgs.status().ToString();
  EXPECT_EQ(svgs.value().size(), 3u);
  for (const std::string& f : svgs.value()) {
    std::ifstream in(f);
    const std::string text((std::istreambuf_iterator<char>(in)),
                           std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("<svg"), std::string::npos) << f;
  }
  std::filesystem::remove_all(dir);
}

// The knob behind naive-walk: without the early stop every update is
// counted at every ancestor, so the parent's pending count grows past the
// threshold; with it, counting stops at the leaf over its threshold.
TEST(UmemcgBenchTest, StatsUpdateEarlyStopKnob) {
  for (bool early_stop : {true, false}) {
    auto c = Controller::Create({.batch = 4,
                                 .cpu_source = CpuSource::kFake,
                                 .nr_cpus = 1,
                                 .stats_flush_period = std::chrono::seconds(0),
                                 .stats_update_early_stop = early_stop});
    ASSERT_TRUE(c.ok());
    auto chain = MakeChain(*c.value(), 2, Pages(0));
    ASSERT_TRUE(chain.ok());
    Group* parent = chain.value()[0].get();
    Group* leaf = chain.value()[1].get();
    for (int i = 0; i < 200; ++i) leaf->ModState(StatItem::kAnon, 1);
    EXPECT_EQ(c.value()->info().stats_update_early_stop, early_stop);
    const uint64_t pending = parent->StatBound().pending;
    if (early_stop) {
      EXPECT_LT(pending, 50u);
    } else {
      EXPECT_GE(pending, 190u);
    }
    EXPECT_EQ(parent->StatExact(StatItem::kAnon), 200);
  }
}

// Nearest rank: p99 of 100 samples is the 99th, not the maximum (it was,
// with index floor(q n)).
TEST(UmemcgBenchTest, PercentileIsTheNearestRank) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_EQ(Percentile(v, 0.99), 99);
  EXPECT_EQ(Percentile(v, 0.50), 50);
  EXPECT_EQ(Percentile(v, 0.07), 7);
  EXPECT_EQ(Percentile(v, 0.0), 1);
  EXPECT_EQ(Percentile(v, 1.0), 100);
  EXPECT_EQ(Percentile(v, 0.999), 100);
  EXPECT_EQ(Percentile({5.0}, 0.99), 5);
  EXPECT_TRUE(std::isnan(Percentile({}, 0.5)));
}

// Which --batch values each scenario measures (the binary's note on the
// others rests on this).
TEST(UmemcgBenchTest, BatchesMeasuredPerScenario) {
  Params p;
  p.batches = {32, 64, 128};
  EXPECT_EQ(BatchesMeasured("sendfile", p), 3u);
  EXPECT_EQ(BatchesMeasured("kmem", p), 3u);
  EXPECT_EQ(BatchesMeasured("multitenant", p), 1u);
  EXPECT_EQ(BatchesMeasured("pagefault2", p), 1u);
  EXPECT_EQ(BatchesMeasured("fallocate", p), 1u);
  EXPECT_EQ(BatchesMeasured("statread", p), 0u);
  EXPECT_EQ(BatchesMeasured("scale", p), 0u);
  p.threads = 2;
  EXPECT_EQ(BatchesMeasured("kmem", p), 1u);
}

#ifdef UMEMCG_BENCH_BINARY
// Runs the umemcg-bench binary with `args` (redirections included) and
// returns what it wrote to the pipe; *status is pclose's.
std::string RunBench(const std::string& args, int* status) {
  const std::string cmd = std::string(UMEMCG_BENCH_BINARY) + " " + args;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) {
    *status = -1;
    return "";
  }
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), f)) out.append(buf, n);
  *status = pclose(f);
  return out;
}

// Every usage error exits 2, as --help and the man page say; CLI11's own
// codes (105, 106, 109) leaked out before. --help exits 0.
TEST(UmemcgBenchTest, BinaryUsageErrorsExit2) {
  for (const char* args :
       {"nosuchscenario", "", "kmem --no-such-option", "kmem --threads 0",
        "kmem --batch 0", "kmem --variant nosuch", "report"}) {
    int st = 0;
    RunBench(std::string(args) + " >/dev/null 2>&1", &st);
    ASSERT_TRUE(WIFEXITED(st)) << args;
    EXPECT_EQ(WEXITSTATUS(st), 2) << args;
  }
  int st = 0;
  RunBench("--help >/dev/null", &st);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
}

// A --batch list that a scenario measures only the first of is said on
// stderr (it was dropped silently); sendfile measures each, no note.
TEST(UmemcgBenchTest, BinaryNotesIgnoredBatches) {
  auto run = [](const std::string& args) {
    int st = 0;
    const std::string err =
        RunBench(args +
                     " --seconds 0.01 --repeat 1 --extra-rounds 0 --quiet 2>&1 "
                     ">/dev/null",
                 &st);
    EXPECT_EQ(st, 0) << err;
    return err;
  };
  EXPECT_NE(run("multitenant --variant unaccounted --batch 32,64")
                .find("multitenant measures only the first --batch"),
            std::string::npos);
  EXPECT_EQ(run("multitenant --variant unaccounted --batch 32"), "");
  EXPECT_EQ(run("sendfile --variant umemcg --batch 32,64"), "");
}

// The JSON objects of --json output, one per non-empty line.
std::vector<nlohmann::json> JsonLines(const std::string& out) {
  std::vector<nlohmann::json> rows;
  size_t pos = 0;
  while (pos < out.size()) {
    const size_t nl = out.find('\n', pos);
    const std::string line = out.substr(pos, nl - pos);
    pos = nl == std::string::npos ? out.size() : nl + 1;
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

// The binary: --json lines parse and carry the required fields.
TEST(UmemcgBenchTest, BinaryJsonLines) {
  int st = 0;
  const std::string out = RunBench(
      "kmem --iterations 5000 --repeat 1 --json --quiet 2>/dev/null", &st);
  ASSERT_EQ(st, 0) << out;
  const std::vector<nlohmann::json> rows = JsonLines(out);
  for (const nlohmann::json& j : rows) {
    for (const char* k : {"scenario", "variant", "batch", "threads", "seconds",
                          "ops", "ops_per_sec", "repeat", "ns_per_op"}) {
      EXPECT_TRUE(j.contains(k)) << k << " in " << j.dump();
    }
  }
  // unaccounted, immediate, cached, per-thread, per-leaf-quantum
  EXPECT_EQ(rows.size(), 5u);
}

#ifdef UMEMCG_BENCH_HAVE_ALLOC
// alloc: every variant's processes ran (1 thread: 2 tenant counts and the
// RSS row), each with its time or its 14 RSS sizes, and the ratios to the
// unaccounted allocators; the header mode costs RSS at 16 B, the arenas
// not (the reasons for the component).
TEST(UmemcgBenchTest, BinaryAllocEveryVariantSideBySide) {
  int st = 0;
  const std::string out = RunBench(
      "alloc --threads 1 --seconds 0.05 --repeat 1 --extra-rounds 0 --json "
      "--quiet 2>/dev/null",
      &st);
  ASSERT_EQ(st, 0) << out;
  std::map<std::string, nlohmann::json> rows;
  for (const nlohmann::json& j : JsonLines(out)) {
    rows[j["variant"].get<std::string>() + "/" + j["mode"].get<std::string>()] =
        j;
  }
  for (const char* v :
       {"glibc", "header-glibc", "jemalloc", "jemalloc-routed",
        "header-jemalloc", "jemalloc-arenas", "preload", "preload-jemalloc"}) {
    for (const char* m : {"tenants1", "tenants8"}) {
      const std::string key = std::string(v) + "/" + m;
      ASSERT_TRUE(rows.count(key)) << key;
      EXPECT_GT(rows[key]["ns_per_pair"].get<double>(), 0) << key;
      EXPECT_TRUE(rows[key].contains("vs_jemalloc")) << key;
      EXPECT_TRUE(rows[key].contains("vs_glibc")) << key;
    }
    const std::string rss = std::string(v) + "/rss";
    ASSERT_TRUE(rows.count(rss)) << rss;
    for (size_t size = 8; size <= 65536; size *= 2) {
      EXPECT_GT(rows[rss]["rss_" + std::to_string(size)].get<double>(), 0)
          << rss << " " << size;
    }
  }
  EXPECT_GT(rows["header-jemalloc/rss"]["rss_16_vs_jemalloc"].get<double>(),
            1.3);
  EXPECT_LT(rows["jemalloc-arenas/rss"]["rss_16_vs_jemalloc"].get<double>(),
            1.1);
  EXPECT_GT(rows["preload/rss"]["rss_16_vs_glibc"].get<double>(), 1.2);
  // The preload's jemalloc mode: no header, jemalloc's own footprint.
  EXPECT_LT(rows["preload-jemalloc/rss"]["rss_16_vs_jemalloc"].get<double>(),
            1.1);
}
#endif
#endif

}  // namespace
}  // namespace umemcg::bench

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// umemcg-bench: every scenario runs briefly in-process (smoke, not timed),
// ends balanced (the scenario's own check, which the tests also exercise
// on a deliberately unbalanced controller), and its JSON lines parse with
// the required fields. Plus the verdict rules, the plots and the
// stats_update_early_stop knob the naive-walk variant uses.

#include <gtest/gtest.h>
#include <stdio.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
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
  int found = 0;
  for (const Claim& c : SeedClaims({a, b})) {
    if (c.name.rfind("sendfile: umemcg batch 64 vs unaccounted", 0) != 0) {
      continue;
    }
    ++found;
    EXPECT_DOUBLE_EQ(c.lo, 0.5);
    EXPECT_DOUBLE_EQ(c.hi, 0.99);
    EXPECT_EQ(c.verdict, "noise");
  }
  EXPECT_EQ(found, 1);
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
  Result b32{.scenario = "sendfile",
             .variant = "umemcg",
             .batch = 32,
             .threads = 2,
             .ops_per_sec = 100};
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

TEST(UmemcgBenchTest, SeedClaimsFromResults) {
  Result b32{.scenario = "sendfile",
             .variant = "umemcg",
             .batch = 32,
             .threads = 2,
             .ops_per_sec = 100};
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

#ifdef UMEMCG_BENCH_BINARY
// The binary: --json lines parse and carry the required fields.
TEST(UmemcgBenchTest, BinaryJsonLines) {
  const std::string cmd = std::string(UMEMCG_BENCH_BINARY) +
                          " kmem --iterations 5000 --repeat 1 --json --quiet"
                          " 2>/dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), f)) out.append(buf, n);
  ASSERT_EQ(pclose(f), 0) << out;
  size_t lines = 0;
  size_t pos = 0;
  while (pos < out.size()) {
    const size_t nl = out.find('\n', pos);
    const std::string line = out.substr(pos, nl - pos);
    pos = nl == std::string::npos ? out.size() : nl + 1;
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    for (const char* k : {"scenario", "variant", "batch", "threads", "seconds",
                          "ops", "ops_per_sec", "repeat", "ns_per_op"}) {
      EXPECT_TRUE(j.contains(k)) << k << " in " << line;
    }
    ++lines;
  }
  // unaccounted, immediate, cached, per-thread, per-leaf-quantum
  EXPECT_EQ(lines, 5u);
}
#endif

}  // namespace
}  // namespace umemcg::bench

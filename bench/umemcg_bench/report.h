// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// umemcg-bench's output: the machine line, human tables, JSON lines, the
// seed-claim report of `all` (for every seed claim: the kernel's
// published figure and ratio, umemcg's measured ratio here, and a
// one-word verdict), and SVG plots drawn with gnuplot.
//
// Verdicts. "void" when the lower of the two sides' on-CPU shares (each
// the median over the repeats of its least-scheduled timed thread) is
// below kMinOnCpu (the machine was too busy: the ratio then measures the
// scheduler; one disturbed repeat alone does not void a claim).
// With a target from the issue: "yes" when it is met, "partly" when the
// direction is right but the target missed, "no" otherwise.
// Without one: "yes" when the direction matches the kernel's and the
// effect's size (|ln ratio|) is within a factor of two of the kernel's (or
// both are below 0.05, "no effect"),
// "partly" when only the direction matches, "no" otherwise; "n/a" when a
// side was not measured. The claim's ratio is the median of its
// per-repeat ratios (repeat i of both sides ran in the same round), so one
// disturbed repeat moves it little. Then "noise" replaces the verdict when
// either end of that median's confidence interval (ci_lo..ci_hi,
// kCiConfidence, from the ratios' order statistics; lo..hi when there is
// none) would get another one: the run cannot tell which side of the
// threshold the claim is on, and repeating it could flip the verdict.
// Claims of no effect (no target, the kernel's ratio within 5% of 1) are
// the exception: "yes" when the median ratio is within 5% of 1 too and
// the interval within 10% (an interval 3-6% wide on 2 CPUs cannot show
// equivalence within 5%, so it is not asked to; a wider one is "noise");
// "noise" when the median is outside but the interval reaches the band;
// otherwise judged as above.
//
// Thread safety: plain functions; call from one thread.

#ifndef UMEMCG_BENCH_UMEMCG_BENCH_REPORT_H_
#define UMEMCG_BENCH_UMEMCG_BENCH_REPORT_H_

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness.h"

namespace umemcg::bench {

// "machine: 2 CPUs allowed (2 online), <model>, cpu source rseq, Linux
// <release>, cache-line round trip CPU 0 <-> 1: 180 ns" — what every
// report starts with (the round trip: LineRoundTripNs of the first two
// allowed CPUs, measured once per process, absent with one CPU).
std::string MachineLine();
// That round trip in ns (NAN with one allowed CPU); the first call
// measures it.
double LineRoundTripNow();
// "settings: seconds=0.3 repeat=3 ..." for the given parameters.
std::string SettingsLine(const Params& p, bool quick);

// One line per result: identity, median ops/s (min..max over repeats)
// and every scenario field.
void PrintTable(std::FILE* out, const std::vector<Result>& results);

// The JSON object of one result: scenario, variant, batch, threads,
// seconds, ops, ops_per_sec, repeat, rounds_discarded, depth, mode,
// balanced, ops_per_sec_samples, cpus, cpu_source, line_round_trip_ns
// (with two or more CPUs), every scenario field, `samples`
// (each field's value per repeat, in run order), and for results with
// latencies latency_quantiles_us (201 quantiles, 0..100%). `batch` is a
// number, or "adaptive".
nlohmann::json ToJson(const Result& r);

// The inverse of ToJson: identity and medians, every other numeric key as
// a field (cpus dropped), latencies from `latency_quantiles_us`.
// kInvalidArgument when a required key is missing or mistyped.
StatusOr<Result> FromJson(const nlohmann::json& j);
// Reads files of JSON lines (umemcg-bench --json output; blank lines
// skipped), in order.
StatusOr<std::vector<Result>> ReadJsonLines(
    const std::vector<std::string>& files);

// The coverage of a claim's confidence interval for its median ratio.
inline constexpr double kCiConfidence = 0.8;

// The rank k (1-based) of the distribution-free confidence interval
// [x(k), x(n+1-k)] of the median of n sorted values: the largest k whose
// coverage, 1 - 2 P(Binomial(n, 1/2) <= k-1), is at least `confidence`;
// 1 (the whole range) when even that falls short (n < 5 at 0.8). At 0.8:
// n = 5 -> 1, 7 -> 2, 9 -> 3, 11 -> 3, 20 -> 7.
size_t MedianCiRank(size_t n, double confidence);

struct Claim {
  std::string name;    // "sendfile: batch 64 vs 32 (msgs/s)"
  std::string kernel;  // the published figure, with its tag
  double kernel_ratio = NAN;
  double measured = NAN;    // the median per-repeat ratio (see above)
  double target_min = NAN;  // the target, if any
  double target_max = NAN;
  // The noise estimate: the lowest and highest per-repeat ratio (repeat i
  // of both sides ran side by side).
  double lo = NAN;
  double hi = NAN;
  // The median's confidence interval (kCiConfidence; see MedianCiRank).
  double ci_lo = NAN;
  double ci_hi = NAN;
  // The lower of the two sides' median (over the repeats) on-CPU share of
  // their least-scheduled timed thread.
  double on_cpu = NAN;
  std::string verdict;  // yes / partly / no / noise / void / n/a
};

// Builds the claims from the results of `all` (missing results: n/a).
std::vector<Claim> SeedClaims(const std::vector<Result>& results);
void PrintClaims(std::FILE* out, const std::vector<Claim>& claims);

// The one-word verdict for `c` (see the file comment).
std::string Verdict(const Claim& c);

// Baseline checks: in each scenario with both, the `per-thread` variant
// (the same loop as `unaccounted` plus a thread-local add per charge and
// uncharge, and rarely a flush) against `unaccounted`, in ops/s. Doing
// strictly more work, it should run at 1 or below. No target; the verdict
// is "slow" when the median's interval lies above 1 (the unaccounted loop
// itself ran slower than one doing more work, so every ratio against
// unaccounted in that scenario reads high by up to that much), "ok"
// otherwise, and "void" / "n/a" as for claims.
std::vector<Claim> BaselineChecks(const std::vector<Result>& results);
void PrintBaselineChecks(std::FILE* out, const std::vector<Claim>& checks);

// Writes SVG plots of `results` into `dir` (created if needed): throughput
// vs threads per variant (scenarios measured at several thread counts),
// sendfile overhead vs batch, statread read-latency CDF. Also leaves the
// .dat and .gp files there. Returns the SVG paths written; an error when
// the directory cannot be written or gnuplot fails.
StatusOr<std::vector<std::string>> WritePlots(
    const std::string& dir, const std::vector<Result>& results);

}  // namespace umemcg::bench

#endif  // UMEMCG_BENCH_UMEMCG_BENCH_REPORT_H_

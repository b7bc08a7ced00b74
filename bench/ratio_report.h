// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Ratio reports for Google Benchmark programs: a console reporter that also
// collects every per-repetition run, medians computed from them, and a
// table (and JSON) of named ratios with targets and PASS/MISS verdicts.
// Targets are reported, never asserted.
//
// Thread safety: single-threaded use (Google Benchmark calls reporters from
// its main thread).

#ifndef UMEMCG_BENCH_RATIO_REPORT_H_
#define UMEMCG_BENCH_RATIO_REPORT_H_

#include <benchmark/benchmark.h>
#include <sched.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench_util.h"  // IWYU pragma: export (Median, AllowedCpus)

namespace umemcg::bench {

// ---- Result collection ----

struct Sample {
  double ns_per_op = 0;      // real time / iterations of all threads
  double cpu_ns_per_op = 0;  // CPU time of all threads / their iterations
  double items_per_s = 0;
  int threads = 1;

  // The fraction of the wall time the benchmark's threads were on a CPU
  // (1.0: never preempted). Below ~0.9 the machine's other load, not the
  // code, decides the numbers.
  double on_cpu() const { return cpu_ns_per_op / (threads * ns_per_op); }
};

// The console output as usual, plus every per-repetition run collected by
// "<function>[/<args>]/threads:<n>" for the ratio report.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  using ConsoleReporter::ConsoleReporter;

  void ReportRuns(const std::vector<Run>& reports) override;
  // Median over repetitions of "<function>[/<args>]/threads:<n>"; false
  // if the benchmark did not run.
  bool Get(const std::string& key, Sample* out) const;
  size_t Repetitions(const std::string& key) const;

 private:
  static std::string KeyOf(const Run& run);
  static double UnitToNs(benchmark::TimeUnit unit);

  std::map<std::string, std::vector<Sample>> runs_;
  std::map<std::string, Sample> medians_;
};

// ---- The ratio report ----

// Ratios whose benchmarks ran less than this fraction of the wall time
// on a CPU are flagged as dominated by the machine's other load.
inline constexpr double kMinOnCpu = 0.9;

struct Ratio {
  std::string name;
  std::string what;  // how it is computed
  double value = NAN;
  double target = NAN;   // NAN: informational, no target
  bool at_most = false;  // target is an upper bound
  std::string unit = "x";
  // Lowest on-CPU fraction (Sample::on_cpu) of the benchmarks compared.
  double on_cpu = NAN;

  bool noisy() const { return on_cpu < kMinOnCpu; }
  bool has_target() const { return !std::isnan(target); }
  bool measured() const { return !std::isnan(value); }
  bool pass() const {
    return measured() && (at_most ? value <= target : value >= target);
  }
  const char* verdict() const {
    if (!has_target()) return "info";
    if (!measured()) return "n/a";
    return pass() ? "PASS" : "MISS";
  }
};

struct Report {
  int nr_cpus = 0;
  int allowed_cpus = 0;
  std::string cpu_source;
  std::vector<Ratio> ratios;
  std::vector<std::pair<std::string, Sample>> medians;  // (key, median)
  std::vector<size_t> reps;
};

// Prints the ratio table and the medians.
void PrintReport(const Report& r);
// Writes the report as JSON; false if the file cannot be written.
bool WriteJson(const Report& r, const std::string& path);

// ---- The shared main() of a benchmark program ----

// Parses the command line: --json=<path> into *json_path, the program's
// own flags through `own` (true when it consumed the argument), the rest to
// Google Benchmark with the house defaults unless given (5 repetitions,
// 0.2 s minimum time, randomly interleaved repetitions), and initializes
// Google Benchmark. False on arguments nobody recognised.
bool InitBenchmarks(int argc, char** argv, std::string* json_path,
                    const std::function<bool(std::string_view)>& own);
// Console output options for a RatioReporter: tabular unless on a tty.
benchmark::ConsoleReporter::OutputOptions ConsoleFormat();
// Prints the report, and writes it as JSON when json_path is not empty.
void Publish(const Report& r, const std::string& json_path);

// An InitBenchmarks `own` parser for the common "--no_pin" flag: clears
// *pin when it sees it.
std::function<bool(std::string_view)> NoPinFlag(bool* pin);

// Pins the calling thread of a multi-threaded benchmark to the
// (thread_index mod n)-th of `cpus` for its lifetime, so the threads use
// distinct per-CPU shards, and restores the old affinity afterwards. Does
// nothing when !enabled, for one thread, or with fewer than two CPUs.
class ScopedPin {
 public:
  ScopedPin(const benchmark::State& state, const std::vector<int>& cpus,
            bool enabled);

 private:
  ScopedCpuPin pin_;
};

}  // namespace umemcg::bench

#endif  // UMEMCG_BENCH_RATIO_REPORT_H_

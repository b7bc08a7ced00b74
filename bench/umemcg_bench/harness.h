// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// umemcg-bench's harness: the settings of one invocation (Params), one
// measured configuration (Result), running configurations side by side
// (RunInterleaved: every round runs every configuration once, in turn, so
// ratios compare numbers taken under the same machine noise, and a round
// some other process disturbed is run again), timed
// thread teams with a start barrier that measure each thread's share of
// the wall time spent on a CPU, and the balance check every scenario ends
// with (every group's memory.current back to zero, CheckInvariants ok, no
// underflow).
//
// Thread safety: Params and Result are plain values. RunTimed starts and
// joins its own threads; everything else is for the calling thread.

#ifndef UMEMCG_BENCH_UMEMCG_BENCH_HARNESS_H_
#define UMEMCG_BENCH_UMEMCG_BENCH_HARNESS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "umemcg/umemcg.h"

namespace umemcg::bench {

// Params::batches / Result::batch value for BatchPolicy::kAdaptive ("batch
// adaptive" on the command line; starting at 64, up to 1024).
inline constexpr int kAdaptiveBatch = -1;
inline constexpr int kAdaptiveBase = 64;
inline constexpr int kAdaptiveMax = 1024;

// Controller options for a --batch value (a number or kAdaptiveBatch).
ControllerOptions BatchOptions(int batch);
// "64", or "adaptive".
std::string BatchName(int batch);

// The lowest on-CPU share (CPU time / wall time of the timed part) of any
// timed thread below which a result is not trusted: its verdicts print
// "void" (the scenario then measures the scheduler, not the accounting).
inline constexpr double kMinOnCpu = 0.8;

// A round of RunInterleaved (one run of every configuration) in which some
// timed thread of some configuration was on a CPU less than this share of
// the wall time is "disturbed": another process took a CPU during that
// round, so its runs do not measure what the others do. RunInterleaved
// runs up to ExtraRounds(repeat) more rounds (Params::extra_rounds) to
// replace disturbed ones.
inline constexpr double kSteadyOnCpu = 0.9;
inline constexpr int ExtraRounds(int repeat) {
  return repeat / 2 > 2 ? repeat / 2 : 2;
}

// The command line of one scenario run. Zero / empty means "the
// scenario's default" where noted.
struct Params {
  std::vector<std::string> variants;  // empty: the scenario's default set
  int threads = 0;                    // 0: scenario default
  int pairs = 0;                      // sendfile: 0 = 1 pair per 2 CPUs
  std::vector<int> batches;           // empty: the scenario's default set;
                                      // kAdaptiveBatch for the adaptive policy
  int depth = 0;                      // 0: scenario default
  int groups = 10000;                 // statread (scale: see main.cc) groups
  int fanout = 100;                   // scale: leaves per parent
  double seconds = 1.0;               // per timed run
  uint64_t iterations = 1400000;      // kmem single-thread loop
  int repeat = 3;
  int extra_rounds = -1;         // rounds RunInterleaved may add to replace
                                 // disturbed ones; -1: ExtraRounds(repeat)
  uint64_t payload = 10240;      // sendfile/multitenant bytes copied per msg
  int stock_slots = 0;           // multitenant: 0 = both 1 and 7
  int tenants = 8;               // multitenant leaves
  int softirq_threads = 2;       // multitenant charging threads
  std::string mode = "process";  // pagefault: process, thread or both
  bool single_task_baseline = true;  // pagefault: also measure 1 task
  uint64_t object_size = 0;          // kmem: 0 = 64 (1 thread) / 4096 (N)
  bool pin = true;                   // pin threads to distinct allowed CPUs
  bool progress = false;             // progress lines on stderr
  int processes = 0;                 // cluster: node processes (0 = 2)
  uint64_t live_mib = 32;            // alloc: live MiB per RSS child
};

// One measured configuration (medians over the repeats).
struct Result {
  std::string scenario;
  std::string variant;
  int batch = 0;  // ControllerOptions::batch (0: no controller involved;
                  // kAdaptiveBatch: the adaptive policy)
  int threads = 0;
  int depth = 0;
  std::string mode;  // pagefault: "process" or "thread"
  int repeat = 0;
  // Disturbed rounds (kSteadyOnCpu) run and replaced by later ones; their
  // runs are not among the samples.
  int rounds_discarded = 0;
  double seconds = 0;      // median wall time of one run
  double ops = 0;          // median ops of one run
  double ops_per_sec = 0;  // median over the repeats of ops / seconds
  std::vector<double> ops_per_sec_samples;
  // Scenario fields (ns_per_op, rmw_per_op, p99_us, ...): medians, and
  // the repeats' values in run order (repeat i of every configuration of
  // one invocation ran side by side). Every timed result has `on_cpu`,
  // the lowest on-CPU share of its timed threads.
  std::map<std::string, double> fields;
  std::map<std::string, std::vector<double>> field_samples;
  // statread: every read latency of the median-p99 repeat, sorted (CDF).
  std::vector<double> latencies_us;
  bool balanced = false;  // every run ended with balanced accounting

  double field(const std::string& name) const;  // NAN if absent
};

// One run of one configuration.
struct Sample {
  double ops = 0;
  double seconds = 0;
  std::map<std::string, double> fields;
  std::vector<double> latencies_us;  // sorted; the run with median p99 kept
};

// A configuration to measure: identity plus the function that runs it once
// (it returns an error when the run could not be done or did not end
// balanced).
struct Config {
  std::string variant;
  int batch = 0;
  int threads = 0;
  int depth = 0;
  std::string mode;
  std::function<StatusOr<Sample>()> run;
};

// Runs every config p.repeat times, interleaved in rounds (round 1 runs
// each config once, in order, round 2 in reverse order, ...), and returns
// their medians in config order. A round in which any run's `on_cpu` field is
// below kSteadyOnCpu is disturbed: RunInterleaved keeps running rounds until
// p.repeat undisturbed ones are done or p.extra_rounds (-1:
// ExtraRounds(p.repeat)) more than p.repeat have run, and keeps the undisturbed
// rounds (made up, when too few, with the disturbed rounds whose lowest on_cpu
// was highest), in run order, so sample i of every config still comes from the
// same round. Runs without an `on_cpu` field never disturb a round. Progress
// lines go to stderr when p.progress.
StatusOr<std::vector<Result>> RunInterleaved(const std::string& scenario,
                                             std::vector<Config> configs,
                                             const Params& p);

// Adds vs_unaccounted (ops/s over the "unaccounted" result with the same
// threads and mode) and overhead_vs_unaccounted (1 - that) to each result.
void AddOverheads(std::vector<Result>& results);

// Adds scalability = ops/s / (threads x ops/s of the 1-thread result with
// the same scenario, variant, batch, depth and mode) where one exists
// (will-it-scale's, with the single-task run of the same mode as base).
void AddScalability(std::vector<Result>& results);

// ---- Threads ----

// The CPU thread `index` of a team should be pinned to: the index-th
// allowed CPU modulo their number, or -1 when !pin or with one CPU.
int CpuForThread(int index, bool pin);

// Starts `n` threads running body(i, stop), waits until all are ready,
// releases them together, lets them run `seconds`, sets `stop` and joins
// them. Thread i is pinned to CpuForThread(i, pin). Returns the wall time
// from the release to the stop; *on_cpu (if set) receives the lowest share
// of that time any thread from `first_timed` on spent on a CPU (threads
// below it sleep by design, e.g. statread's reader). Bodies check
// `stop` (relaxed) between operations and do their untimed cleanup after
// it is set (a body that ends on its own, e.g. a receiver draining its
// ring, counts its CPU time until it returns).
double RunTimed(int n, bool pin, double seconds,
                const std::function<void(int, const std::atomic<bool>&)>& body,
                double* on_cpu = nullptr, int first_timed = 0);

// CPU time of the calling thread, in seconds.
double ThreadCpuSeconds();

// The loop condition of a RunTimed body that has done `done` operations:
// true until `stop`, and always before the first operation, so every
// thread does at least one whatever the scheduler does (runs stay
// non-empty on a loaded machine or under sanitizers).
inline bool KeepRunning(const std::atomic<bool>& stop, uint64_t done) {
  // Relaxed: `stop` publishes nothing (see RunTimed).
  return done == 0 || !stop.load(std::memory_order_relaxed);
}

// Busy-wait helper for threads waiting on a partner: spins briefly, then
// yields (the partner may share this CPU with other load).
void Backoff(int& spins);

// ---- Controllers and checks ----

// Controller::Create, or an error naming `what`. The groups' own
// statistics are charged to their parents only with `group_metadata`
// (ControllerOptions::charge_group_metadata, on in the library by
// default): a creation-time charge that the timed loops never see, left
// out so that CheckBalanced can ask for memory.current 0 (`scale`
// measures it).
StatusOr<std::unique_ptr<Controller>> MakeController(
    ControllerOptions o, bool group_metadata = false);

// --heap-profile-rate: the heap profiler's sampling interval (bytes; 0:
// off) MakeController sets on every controller it makes; negative (the
// default) leaves the library's default (kDefaultHeapProfileRate, 512 KiB).
// Set once, before any scenario runs.
void SetBenchHeapProfileRate(int64_t bytes);
int64_t BenchHeapProfileRate();

// A chain root -> c1 -> ... -> c<depth> (depth >= 1); min and low of c1
// set to `protect` pages when non-zero. groups[k-1] is at depth k.
StatusOr<std::vector<GroupRef>> MakeChain(Controller& ctrl, int depth,
                                          Pages protect);

// Drains every stock, then checks that every group in `groups` and the
// root read memory.current 0, that CheckInvariants passes and that no
// uncharge underflowed.
Status CheckBalanced(Controller& ctrl, const std::vector<GroupRef>& groups);

// prefix + decimal i ("c3"), without GCC 12's false -Wrestrict warning
// on `"c" + std::to_string(i)`.
std::string Numbered(const char* prefix, int64_t i);

// Percentile q (0..1) of sorted `v` (nearest rank); NAN when empty.
double Percentile(const std::vector<double>& sorted, double q);

// A failed-precondition status with `what`.
Status Failed(const std::string& what);

// Page-aligned buffers for the scenarios' payload copies. Both ends of a
// copy must sit at a fixed distance: glibc copies 4 KiB and more with
// `rep movsb`, whose speed on the AMD EPYC these benchmarks run on depends
// on (destination - source) mod 4096. A 10 KiB copy measured 145-152 ns
// with both ends page-aligned and 2,040 ns with the destination 16 bytes
// past a page boundary; buffers placed by malloc made the payload's cost
// differ up to 13x between the variants and runs of one invocation.
struct FreeDeleter {
  void operator()(char* p) const;
};
using PageBuffer = std::unique_ptr<char, FreeDeleter>;
// `bytes` rounded up to whole pages, every byte set to `fill`.
PageBuffer AllocPages(uint64_t bytes, int fill);

}  // namespace umemcg::bench

#endif  // UMEMCG_BENCH_UMEMCG_BENCH_HARNESS_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "ratio_report.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

namespace umemcg::bench {

void RatioReporter::ReportRuns(const std::vector<Run>& reports) {
  ConsoleReporter::ReportRuns(reports);
  for (const Run& run : reports) {
    if (run.error_occurred || run.iterations <= 0) continue;
    Sample s;
    s.threads = static_cast<int>(run.threads);
    // Threaded runs: real time is the threads' average, CPU time and
    // iterations their sums.
    s.ns_per_op =
        run.real_accumulated_time * 1e9 / static_cast<double>(run.iterations);
    s.cpu_ns_per_op =
        run.cpu_accumulated_time * 1e9 / static_cast<double>(run.iterations);
    if (auto it = run.counters.find("items_per_second");
        it != run.counters.end()) {
      s.items_per_s = it->second.value;
    }
    const std::string key = KeyOf(run);
    if (run.run_type == Run::RT_Iteration) {
      runs_[key].push_back(s);
    } else if (run.aggregate_name == "median" &&
               run.aggregate_unit == benchmark::kTime) {
      // --benchmark_report_aggregates_only: no per-repetition runs.
      // An aggregate's accumulated time is already per iteration.
      s.ns_per_op = run.GetAdjustedRealTime() * UnitToNs(run.time_unit);
      s.cpu_ns_per_op = run.GetAdjustedCPUTime() * UnitToNs(run.time_unit);
      medians_[key] = s;
    }
  }
}

bool RatioReporter::Get(const std::string& key, Sample* out) const {
  if (auto it = runs_.find(key); it != runs_.end() && !it->second.empty()) {
    std::vector<double> ns;
    std::vector<double> cpu;
    std::vector<double> ips;
    for (const Sample& s : it->second) {
      ns.push_back(s.ns_per_op);
      cpu.push_back(s.cpu_ns_per_op);
      ips.push_back(s.items_per_s);
    }
    out->ns_per_op = Median(ns);
    out->cpu_ns_per_op = Median(cpu);
    out->items_per_s = Median(ips);
    out->threads = it->second.front().threads;
    return true;
  }
  if (auto it = medians_.find(key); it != medians_.end()) {
    *out = it->second;
    return true;
  }
  return false;
}

size_t RatioReporter::Repetitions(const std::string& key) const {
  auto it = runs_.find(key);
  return it == runs_.end() ? 0 : it->second.size();
}

std::string RatioReporter::KeyOf(const Run& run) {
  std::string key = run.run_name.function_name;
  if (!run.run_name.args.empty()) key += "/" + run.run_name.args;
  key += "/threads:" + std::to_string(run.threads);
  return key;
}
double RatioReporter::UnitToNs(benchmark::TimeUnit unit) {
  switch (unit) {
    case benchmark::kSecond:
      return 1e9;
    case benchmark::kMillisecond:
      return 1e6;
    case benchmark::kMicrosecond:
      return 1e3;
    default:
      return 1;
  }
}

void PrintReport(const Report& r) {
  std::printf("\n==== ratio report (medians over repetitions) ====\n");
  std::printf("machine: %d CPUs (%d allowed), cpu source: %s\n", r.nr_cpus,
              r.allowed_cpus, r.cpu_source.c_str());
  std::printf("%-32s %10s %10s %7s  %s\n", "ratio", "value", "target", "on-cpu",
              "verdict");
  for (const Ratio& x : r.ratios) {
    char target[32] = "-";
    if (x.has_target()) {
      std::snprintf(target, sizeof(target), "%s %.2f",
                    x.at_most ? "<=" : ">=", x.target);
    }
    char value[32] = "n/a";
    if (x.measured()) {
      std::snprintf(value, sizeof(value), "%.3f%s", x.value,
                    x.unit == "x" ? "" : x.unit.c_str());
    }
    char on_cpu[16] = "-";
    if (!std::isnan(x.on_cpu)) {
      std::snprintf(on_cpu, sizeof(on_cpu), "%.0f%%", 100 * x.on_cpu);
    }
    std::printf("%-32s %10s %10s %7s  %s\n", x.name.c_str(), value, target,
                on_cpu, x.verdict());
    std::printf("    %s\n", x.what.c_str());
    if (x.has_target() && x.noisy()) {
      std::printf(
          "    (!) threads were on a CPU only %.0f%% of the wall time: the "
          "machine's other load dominates this ratio\n",
          100 * x.on_cpu);
    }
  }
  std::printf(
      "\nmedians (ns/item = 1e9 / items/s: per pair, per message):\n"
      "%-38s %4s %10s %10s %12s %10s %7s\n",
      "benchmark", "reps", "real ns/it", "cpu ns/it", "items/s", "ns/item",
      "on-cpu");
  for (size_t i = 0; i < r.medians.size(); ++i) {
    const auto& [key, s] = r.medians[i];
    std::printf("%-38s %4zu %10.2f %10.2f %12.4g %10.2f %6.0f%%\n", key.c_str(),
                r.reps[i], s.ns_per_op, s.cpu_ns_per_op, s.items_per_s,
                1e9 / s.items_per_s, 100 * s.on_cpu());
  }
  std::printf("(targets are reported, not asserted)\n");
  std::fflush(stdout);
}

bool WriteJson(const Report& r, const std::string& path) {
  nlohmann::json j;
  j["machine"] = {{"cpus", r.nr_cpus},
                  {"allowed_cpus", r.allowed_cpus},
                  {"cpu_source", r.cpu_source}};
  auto number = [](double v) {
    return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  };
  j["ratios"] = nlohmann::json::array();
  for (const Ratio& x : r.ratios) {
    j["ratios"].push_back(
        {{"name", x.name},
         {"what", x.what},
         {"value", number(x.value)},
         {"unit", x.unit},
         {"target", number(x.target)},
         {"bound", x.has_target() ? nlohmann::json(x.at_most ? "max" : "min")
                                  : nlohmann::json(nullptr)},
         {"verdict", x.verdict()},
         {"min_on_cpu", number(x.on_cpu)},
         {"noisy", x.noisy()}});
  }
  j["medians"] = nlohmann::json::object();
  for (size_t i = 0; i < r.medians.size(); ++i) {
    const auto& [key, s] = r.medians[i];
    j["medians"][key] = {{"repetitions", r.reps[i]},
                         {"ns_per_op", number(s.ns_per_op)},
                         {"cpu_ns_per_op", number(s.cpu_ns_per_op)},
                         {"on_cpu", number(s.on_cpu())},
                         {"items_per_second", number(s.items_per_s)}};
  }
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  return static_cast<bool>(out);
}

bool InitBenchmarks(int argc, char** argv, std::string* json_path,
                    const std::function<bool(std::string_view)>& own) {
  // argv strings live for the whole program; the defaults are static.
  static char kReps[] = "--benchmark_repetitions=5";
  static char kMinTime[] = "--benchmark_min_time=0.2";
  static char kInterleave[] = "--benchmark_enable_random_interleaving=true";
  // Static: Google Benchmark may keep pointers into the argv it parses.
  static std::vector<char*> args;
  args.assign(1, argv[0]);
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.starts_with("--json=")) {
      *json_path = std::string(a.substr(7));
    } else if (!own(a)) {
      args.push_back(argv[i]);
    }
  }
  auto given = [](std::string_view prefix) {  // args is static
    return std::any_of(args.begin(), args.end(), [prefix](const char* a) {
      return std::string_view(a).starts_with(prefix);
    });
  };
  if (!given("--benchmark_repetitions")) args.push_back(kReps);
  if (!given("--benchmark_min_time")) args.push_back(kMinTime);
  if (!given("--benchmark_enable_random_interleaving")) {
    args.push_back(kInterleave);
  }
  int bench_argc = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&bench_argc, args.data());
  return !benchmark::ReportUnrecognizedArguments(bench_argc, args.data());
}

benchmark::ConsoleReporter::OutputOptions ConsoleFormat() {
  return isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_Defaults
                               : benchmark::ConsoleReporter::OO_Tabular;
}

void Publish(const Report& r, const std::string& json_path) {
  PrintReport(r);
  if (json_path.empty()) return;
  if (WriteJson(r, json_path)) {
    std::printf("ratios written to %s\n", json_path.c_str());
  } else {
    std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
  }
}

std::function<bool(std::string_view)> NoPinFlag(bool* pin) {
  return [pin](std::string_view a) {
    if (a != "--no_pin") return false;
    *pin = false;
    return true;
  };
}

ScopedPin::ScopedPin(const benchmark::State& state,
                     const std::vector<int>& cpus, bool enabled)
    : pin_(enabled && state.threads() >= 2 && cpus.size() >= 2
               ? cpus[static_cast<size_t>(state.thread_index()) % cpus.size()]
               : -1) {}

}  // namespace umemcg::bench

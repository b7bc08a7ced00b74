// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// umemcg-bench: the memcg seeds' experiments as side-by-side ratios
// (scenarios.h lists them; docs/benchmarks.md explains each).
//
//   umemcg-bench SCENARIO [--threads N | --pairs P] [--batch N[,N...]]
//                [--variant NAME[,NAME...]] [--depth D] [--groups G]
//                [--fanout F]
//                [--seconds S] [--iterations N] [--repeat R] [--json]
//                [--plots DIR] [--quick] ...
//   umemcg-bench all --quick --plots out/plots
//   umemcg-bench report --from FILE.json... [--plots DIR]
//                (tables, seed claims and plots of earlier --json output,
//                e.g. bench/scaling-sweep.sh's directory)
//
// Output: a machine line, a settings line and a table per scenario
// (stdout); with --json one JSON object per measured configuration per
// line on stdout and the human report on stderr. Progress on stderr.
// Exit status: 0 on success (targets are reported, never asserted), 1 if
// a scenario failed (including an unbalanced run) or the plots could not
// be written, 2 on usage errors.

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "help.h"
#include "report.h"
#include "scenarios.h"

namespace {

using umemcg::bench::Params;

// True if `scenario` offers `variant`.
bool Offers(const std::string& scenario, const std::string& variant) {
  for (const std::string& k : umemcg::bench::ScenarioVariants(scenario)) {
    if (k == variant) return true;
  }
  return false;
}
using umemcg::bench::Result;

struct Cli {
  std::string scenario;
  Params p;
  bool json = false;
  bool quick = false;
  bool quiet = false;
  bool no_pin = false;
  std::string plots;
  std::vector<std::string> from;     // report: JSON-lines files
  std::vector<std::string> batches;  // --batch: numbers or "adaptive"
  bool groups_given = false;         // --groups on the command line
  bool iterations_given = false;     // --iterations on the command line
  double seconds = 0;  // 0: default (1.0, quick 0.4; statread 2.5 / 2.0)
  int repeat = 0;      // 0: default (3, quick 7)
};

// The run of one scenario inside `all` (or alone), with its defaults.
Params ScenarioParams(const Cli& cli, const std::string& scenario, bool all) {
  Params p = cli.p;
  const bool statread = scenario == "statread";
  if (cli.seconds > 0) {
    p.seconds = cli.seconds;
  } else if (cli.quick) {
    p.seconds = statread ? 2.0 : 0.4;
  } else {
    p.seconds = statread ? 2.5 : 1.0;
  }
  p.repeat = cli.repeat > 0 ? cli.repeat : (cli.quick ? 7 : 3);
  if (all && scenario == "sendfile" && p.batches.empty()) {
    p.batches = {32, 64, 256, umemcg::bench::kAdaptiveBatch};
  }
  if (all && scenario == "kmem" && p.batches.empty()) p.batches = {64, 32};
  // all --quick: the single-thread kmem runs last tens of milliseconds
  // rather than about ten, where one timer tick or host hiccup moved a
  // repeat by 7-10% (the batch 32 / 64 claim's interval reached 1.107).
  if (all && cli.quick && scenario == "kmem" && !cli.iterations_given) {
    p.iterations = 4 * p.iterations;
  }
  // cluster-chaos: one run per fault (each lasts seconds: the faults' own
  // timing, not a throughput measurement) unless --repeat says otherwise.
  if (scenario == "cluster-chaos" && cli.repeat <= 0) p.repeat = 1;
  // alloc: seconds per timed process, MiB per RSS child.
  if (scenario == "alloc") {
    if (cli.seconds <= 0) p.seconds = cli.quick ? 0.2 : 0.5;
    if (cli.repeat <= 0) p.repeat = cli.quick ? 3 : 5;
    p.live_mib = cli.quick ? 8 : 32;
  }
  if (scenario == "scale" && !cli.groups_given) {
    p.groups = cli.quick ? 20000 : 100000;
  }
  return p;
}

// Says on stderr when scenario `s` will not measure every --batch value
// (umemcg::bench::BatchesMeasured).
void NoteUnusedBatches(const std::string& s, const Params& p) {
  const size_t measured = umemcg::bench::BatchesMeasured(s, p);
  if (measured == p.batches.size()) return;
  if (measured == 0) {
    std::fprintf(stderr,
                 "umemcg-bench: %s has no charge batch; --batch "
                 "ignored\n",
                 s.c_str());
  } else {
    std::fprintf(stderr,
                 "umemcg-bench: %s measures only the first --batch "
                 "value; the others are ignored\n",
                 s.c_str());
  }
}

// Prints the plots of `results` into cli.plots (if set); false on errors.
bool Plots(const Cli& cli, const std::vector<Result>& results,
           std::FILE* human) {
  if (cli.plots.empty()) return true;
  auto svgs = umemcg::bench::WritePlots(cli.plots, results);
  if (!svgs.ok()) {
    std::fprintf(stderr, "umemcg-bench: plots: %s\n",
                 svgs.status().ToString().c_str());
    return false;
  }
  std::fprintf(human, "plots (%zu SVG) in %s/:\n", svgs.value().size(),
               cli.plots.c_str());
  for (const std::string& f : svgs.value()) {
    std::fprintf(human, "  %s\n", f.c_str());
  }
  return true;
}

// The baseline checks of `results` under their heading, if any.
void PrintBaselines(std::FILE* out, const std::vector<Result>& results) {
  const auto checks = umemcg::bench::BaselineChecks(results);
  if (checks.empty()) return;
  std::fprintf(out,
               "\nbaseline checks (per-thread does strictly more work than "
               "unaccounted, so it\nshould not run faster; \"slow\": every "
               "ratio against unaccounted in that\nscenario reads high by "
               "up to this much):\n");
  umemcg::bench::PrintBaselineChecks(out, checks);
}

// `report`: tables, seed claims and plots of earlier JSON output.
int Report(const Cli& cli) {
  if (cli.from.empty()) {
    std::fprintf(stderr, "umemcg-bench: report needs --from FILE...\n");
    return 2;
  }
  auto results = umemcg::bench::ReadJsonLines(cli.from);
  if (!results.ok()) {
    std::fprintf(stderr, "umemcg-bench: %s\n",
                 results.status().ToString().c_str());
    return 1;
  }
  // Scalability across files (the sweep measures each thread count apart).
  umemcg::bench::AddScalability(results.value());
  std::printf("report of %zu results from %zu files\n", results.value().size(),
              cli.from.size());
  for (const std::string& s : umemcg::bench::ScenarioNames()) {
    std::vector<Result> part;
    for (const Result& r : results.value()) {
      if (r.scenario == s) part.push_back(r);
    }
    if (part.empty()) continue;
    std::printf("\n");
    umemcg::bench::PrintTable(stdout, part);
  }
  std::printf(
      "\nseed claims (median per-repeat ratios; largest thread counts):\n");
  umemcg::bench::PrintClaims(stdout,
                             umemcg::bench::SeedClaims(results.value()));
  PrintBaselines(stdout, results.value());
  return Plots(cli, results.value(), stdout) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Cli cli;
  CLI::App app{umemcg::bench::kHelpDescription, "umemcg-bench"};
  app.footer(umemcg::bench::kHelpFooter);
  std::vector<std::string> scenarios = umemcg::bench::ScenarioNames();
  scenarios.push_back("all");
  scenarios.push_back("report");
  app.add_option("scenario", cli.scenario, "scenario to run")
      ->required()
      ->check(CLI::IsMember(scenarios));
  app.add_option("--threads", cli.p.threads,
                 "threads (pagefault tasks, kmem threads, statread writers, "
                 "multitenant softirq threads, scale creators, cluster "
                 "threads per process (2); sendfile: pairs = N/2)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--pairs", cli.p.pairs, "sendfile sender/receiver pairs")
      ->check(CLI::Range(1, 512));
  app.add_option("--batch", cli.batches,
                 "charge batch(es), comma separated: 1..4096 pages, or "
                 "'adaptive' (BatchPolicy::kAdaptive from 64 up to 1024); "
                 "sendfile and single-thread kmem measure each, the other "
                 "batched scenarios only the first")
      ->delimiter(',')
      ->check([](const std::string& v) -> std::string {
        if (v == "adaptive") return "";
        try {
          size_t end = 0;
          const int b = std::stoi(v, &end);
          if (end == v.size() && b >= 1 && b <= 4096) return "";
        } catch (const std::exception&) {
        }
        return "--batch takes 1..4096 or 'adaptive', not '" + v + "'";
      });
  app.add_option("--variant", cli.p.variants,
                 "variant(s) to run, comma separated (default: all of the "
                 "scenario's)")
      ->delimiter(',');
  app.add_option("--depth", cli.p.depth, "group depth of the charged leaf")
      ->check(CLI::Range(1, 16));
  CLI::Option* groups_opt =
      app.add_option("--groups", cli.p.groups,
                     "statread groups (default 10000); scale groups "
                     "(default 100000, --quick 20000)")
          ->check(CLI::Range(2, 1000000));
  app.add_option("--fanout", cli.p.fanout, "scale: leaves per parent (100)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--seconds", cli.seconds, "seconds per timed run")
      ->check(CLI::Range(0.001, 3600.0));
  auto* iterations_opt =
      app.add_option("--iterations", cli.p.iterations,
                     "kmem single-thread iterations (1400000; all --quick: "
                     "4 x that)");
  app.add_option("--repeat", cli.repeat,
                 "repeats, medians reported (default 3, --quick 7)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--extra-rounds", cli.p.extra_rounds,
                 "rounds that may be added to replace rounds in which a "
                 "timed thread was on a CPU < 90% of the time (default "
                 "max(2, repeat/2); 0: keep every round)")
      ->check(CLI::Range(0, 1000));
  app.add_option("--payload", cli.p.payload,
                 "bytes copied per message (sendfile, multitenant)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--stock-slots", cli.p.stock_slots,
                 "multitenant: measure only this many stock slots")
      ->check(CLI::Range(1, 16));
  app.add_option("--tenants", cli.p.tenants, "multitenant tenants")
      ->check(CLI::Range(1, 4096));
  app.add_option("--softirq-threads", cli.p.softirq_threads,
                 "multitenant charging threads")
      ->check(CLI::Range(1, 1024));
  app.add_option("--processes", cli.p.processes,
                 "cluster: node processes (each runs --threads threads)")
      ->check(CLI::Range(1, 64));
  app.add_option("--mode", cli.p.mode, "pagefault tasks: process, thread, both")
      ->check(CLI::IsMember({"process", "thread", "both"}));
  app.add_option("--object-size", cli.p.object_size, "kmem object bytes")
      ->check(CLI::Range(8, 1 << 20));
  bool no_single_task = false;
  app.add_flag("--no-single-task", no_single_task,
               "pagefault: measure only --threads N tasks, not also 1 "
               "(no scalability field)");
  int64_t heap_profile_rate = -1;
  app.add_option("--heap-profile-rate", heap_profile_rate,
                 "heap profiler sampling interval in bytes for every "
                 "controller (0: off; default: the library's 512 KiB)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_flag("--json", cli.json, "JSON lines on stdout");
  app.add_option("--plots", cli.plots, "write SVG plots (gnuplot) to DIR");
  app.add_option("--from", cli.from,
                 "report: JSON-lines files written with --json");
  app.add_flag("--quick", cli.quick, "short runs (all: < 5 minutes)");
  app.add_flag("--no-pin", cli.no_pin, "do not pin threads to CPUs");
  app.add_flag("--quiet", cli.quiet, "no progress lines on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every other parse error is a usage
    // error, 2 like the checks below (not CLI11's own 100-odd codes).
    return app.exit(e) == 0 ? 0 : 2;
  }
  cli.groups_given = groups_opt->count() > 0;
  cli.iterations_given = iterations_opt->count() > 0;
  for (const std::string& b : cli.batches) {
    cli.p.batches.push_back(b == "adaptive" ? umemcg::bench::kAdaptiveBatch
                                            : std::stoi(b));
  }
  cli.p.pin = !cli.no_pin;
  cli.p.single_task_baseline = !no_single_task;
  cli.p.progress = !cli.quiet;
  umemcg::bench::SetBenchHeapProfileRate(heap_profile_rate);

  for (const std::string& v : cli.p.variants) {
    bool known = false;
    for (const std::string& s : umemcg::bench::ScenarioNames()) {
      if (cli.scenario == "all" || s == cli.scenario) known |= Offers(s, v);
    }
    if (!known) {
      std::fprintf(stderr, "umemcg-bench: unknown variant '%s' for %s\n",
                   v.c_str(), cli.scenario.c_str());
      return 2;
    }
  }

  if (cli.scenario == "report") return Report(cli);

  const bool all = cli.scenario == "all";
  std::vector<std::string> to_run = {cli.scenario};
  if (all) {
    // Not cluster-chaos: a fault-injection run, not a benchmark of `all`
    // (ask for it by name); nor alloc: allocators compared, not a seed
    // experiment, and a minute of child processes.
    to_run.clear();
    for (const std::string& s : umemcg::bench::ScenarioNames()) {
      if (s != "cluster-chaos" && s != "alloc") to_run.push_back(s);
    }
  }
  // The human report goes to stdout, or to stderr under --json.
  std::FILE* human = cli.json ? stderr : stdout;
  std::string settings = umemcg::bench::SettingsLine(
      ScenarioParams(cli, all ? "" : cli.scenario, all), cli.quick);
  if (all) {
    // The scenarios whose defaults differ from the line's.
    char buf[128];
    std::snprintf(buf, sizeof(buf),
                  " (statread seconds=%g, kmem iterations=%llu)",
                  ScenarioParams(cli, "statread", all).seconds,
                  static_cast<unsigned long long>(
                      ScenarioParams(cli, "kmem", all).iterations));
    settings += buf;
  }
  std::fprintf(human, "%s\n%s\n", umemcg::bench::MachineLine().c_str(),
               settings.c_str());
  const auto start = std::chrono::steady_clock::now();
  std::vector<Result> everything;
  int rc = 0;
  for (const std::string& s : to_run) {
    Params p = ScenarioParams(cli, s, all);
    // Under `all`, --variant filters only the scenarios offering it.
    if (all && !p.variants.empty()) {
      std::vector<std::string> mine;
      for (const std::string& v : p.variants) {
        if (Offers(s, v)) mine.push_back(v);
      }
      if (mine.empty()) continue;
      p.variants = mine;
    }
    if (!cli.batches.empty()) NoteUnusedBatches(s, p);
    std::vector<std::vector<Result>> parts;
    auto r = umemcg::bench::RunScenario(s, p);
    if (r.ok()) parts.push_back(std::move(r).value());
    // kmem in `all`: the single-thread loop, then N threads with 4 KiB.
    if (r.ok() && all && s == "kmem" && cli.p.threads == 0) {
      Params mp = p;
      mp.threads = static_cast<int>(umemcg::bench::AllowedCpus().size());
      mp.batches = {p.batches.empty() ? 64 : p.batches.front()};
      r = umemcg::bench::RunScenario(s, mp);
      if (r.ok()) parts.push_back(std::move(r).value());
    }
    if (!r.ok()) {
      std::fprintf(stderr, "umemcg-bench: %s failed: %s\n", s.c_str(),
                   r.status().ToString().c_str());
      rc = 1;
      continue;
    }
    for (std::vector<Result>& part : parts) {
      std::fprintf(human, "\n");
      umemcg::bench::PrintTable(human, part);
      for (Result& res : part) {
        if (cli.json) {
          std::printf("%s\n", umemcg::bench::ToJson(res).dump().c_str());
        }
        everything.push_back(std::move(res));
      }
    }
    std::fflush(stdout);
  }
  if (all) {
    std::fprintf(human,
                 "\nseed claims (median per-repeat ratios, this machine):\n");
    umemcg::bench::PrintClaims(human, umemcg::bench::SeedClaims(everything));
    PrintBaselines(human, everything);
  }
  std::fprintf(
      human, "\ntotal %.1f s\n",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count());
  if (!Plots(cli, everything, human)) rc = 1;
  return rc;
}

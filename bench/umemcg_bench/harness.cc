// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "harness.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "bench_util.h"
#include "port/try_lock.h"  // internal::CpuRelax
#include "umemcg/heap_profile.h"

namespace umemcg::bench {

double Result::field(const std::string& name) const {
  auto it = fields.find(name);
  return it == fields.end() ? NAN : it->second;
}

ControllerOptions BatchOptions(int batch) {
  ControllerOptions o;
  if (batch == kAdaptiveBatch) {
    o.batch = kAdaptiveBase;
    o.batch_policy = BatchPolicy::kAdaptive;
    o.batch_max = kAdaptiveMax;
  } else {
    o.batch = batch;
  }
  return o;
}

std::string BatchName(int batch) {
  return batch == kAdaptiveBatch ? "adaptive" : std::to_string(batch);
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

void FreeDeleter::operator()(char* p) const { std::free(p); }

PageBuffer AllocPages(uint64_t bytes, int fill) {
  constexpr uint64_t kPage = 4096;
  const uint64_t size =
      std::max<uint64_t>((bytes + kPage - 1) / kPage, 1) * kPage;
  char* p = static_cast<char*>(std::aligned_alloc(kPage, size));
  if (p == nullptr) std::abort();
  std::memset(p, fill, size);
  return PageBuffer(p);
}

Status Failed(const std::string& what) {
  return Status(StatusCode::kFailedPrecondition, what);
}

StatusOr<std::vector<Result>> RunInterleaved(const std::string& scenario,
                                             std::vector<Config> configs,
                                             const Params& p) {
  const int repeat = std::max(1, p.repeat);
  const bool progress = p.progress;
  if (configs.empty()) {
    return Status(StatusCode::kInvalidArgument,
                  scenario +
                      ": no configuration matches these settings "
                      "(variant names, --threads)");
  }
  // rounds[r][c]: config c's run in round r; lowest[r]: the lowest on_cpu
  // of round r's runs (1 when none has one).
  std::vector<std::vector<Sample>> rounds;
  std::vector<double> lowest;
  const int max_rounds =
      repeat + (p.extra_rounds >= 0 ? p.extra_rounds : ExtraRounds(repeat));
  int steady = 0;
  for (int r = 0; r < max_rounds && steady < repeat; ++r) {
    std::vector<Sample>& round = rounds.emplace_back();
    double low = 1;
    // Odd rounds run the configurations in reverse, so a drift within a
    // round (the machine warming up, another tenant's load ramping) favours
    // no position: over two rounds every configuration ran once early and
    // once late.
    round.resize(configs.size());
    for (size_t i = 0; i < configs.size(); ++i) {
      const size_t c = r % 2 == 0 ? i : configs.size() - 1 - i;
      const Config& cfg = configs[c];
      if (progress) {
        std::fprintf(stderr,
                     "umemcg-bench: %s %s batch=%d threads=%d depth=%d%s%s "
                     "(round %d, %d of %d undisturbed so far)\n",
                     scenario.c_str(), cfg.variant.c_str(), cfg.batch,
                     cfg.threads, cfg.depth,
                     cfg.mode.empty() ? "" : " mode=", cfg.mode.c_str(), r + 1,
                     steady, repeat);
      }
      StatusOr<Sample> s = cfg.run();
      if (!s.ok()) {
        return Failed(scenario + " " + cfg.variant + ": " +
                      s.status().ToString());
      }
      auto on_cpu = s.value().fields.find("on_cpu");
      if (on_cpu != s.value().fields.end() && !std::isnan(on_cpu->second)) {
        low = std::min(low, on_cpu->second);
      }
      round[c] = std::move(s).value();
    }
    lowest.push_back(low);
    if (low >= kSteadyOnCpu) ++steady;
  }
  // The rounds kept: every undisturbed one, then the least disturbed.
  std::vector<size_t> order(rounds.size());
  for (size_t r = 0; r < order.size(); ++r) order[r] = r;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const bool sa = lowest[a] >= kSteadyOnCpu;
    const bool sb = lowest[b] >= kSteadyOnCpu;
    if (sa != sb) return sa;
    return !sa && lowest[a] > lowest[b];
  });
  order.resize(std::min(order.size(), static_cast<size_t>(repeat)));
  std::sort(order.begin(), order.end());  // run order
  const int discarded = static_cast<int>(rounds.size() - order.size());
  std::vector<std::vector<Sample>> samples(configs.size());
  for (size_t r : order) {
    for (size_t c = 0; c < configs.size(); ++c) {
      samples[c].push_back(std::move(rounds[r][c]));
    }
  }
  std::vector<Result> out;
  for (size_t c = 0; c < configs.size(); ++c) {
    const Config& cfg = configs[c];
    Result res;
    res.scenario = scenario;
    res.variant = cfg.variant;
    res.batch = cfg.batch;
    res.threads = cfg.threads;
    res.depth = cfg.depth;
    res.mode = cfg.mode;
    res.repeat = repeat;
    res.rounds_discarded = discarded;
    res.balanced = true;  // every run returned OK, which includes the check
    std::vector<double> ops, secs;
    std::map<std::string, std::vector<double>> fields;
    for (const Sample& s : samples[c]) {
      ops.push_back(s.ops);
      secs.push_back(s.seconds);
      res.ops_per_sec_samples.push_back(s.seconds > 0 ? s.ops / s.seconds
                                                      : NAN);
      for (const auto& [k, v] : s.fields) fields[k].push_back(v);
    }
    res.ops = Median(ops);
    res.seconds = Median(secs);
    res.ops_per_sec = Median(res.ops_per_sec_samples);
    for (auto& [k, v] : fields) {
      res.fields[k] = Median(v);
      res.field_samples[k] = std::move(v);
    }
    // Keep the latencies of the run whose p99 is the median one.
    if (!samples[c].empty() && !samples[c][0].latencies_us.empty()) {
      std::vector<std::pair<double, size_t>> by_p99;
      for (size_t i = 0; i < samples[c].size(); ++i) {
        by_p99.emplace_back(Percentile(samples[c][i].latencies_us, 0.99), i);
      }
      std::sort(by_p99.begin(), by_p99.end());
      res.latencies_us =
          std::move(samples[c][by_p99[by_p99.size() / 2].second].latencies_us);
    }
    out.push_back(std::move(res));
  }
  return out;
}

void AddOverheads(std::vector<Result>& results) {
  for (Result& r : results) {
    for (const Result& u : results) {
      if (u.variant == "unaccounted" && u.threads == r.threads &&
          u.mode == r.mode && u.ops_per_sec > 0) {
        r.fields["vs_unaccounted"] = r.ops_per_sec / u.ops_per_sec;
        r.fields["overhead_vs_unaccounted"] = 1 - r.ops_per_sec / u.ops_per_sec;
      }
    }
  }
}

void AddScalability(std::vector<Result>& results) {
  for (Result& r : results) {
    for (const Result& one : results) {
      if (one.threads == 1 && one.scenario == r.scenario &&
          one.variant == r.variant && one.batch == r.batch &&
          one.depth == r.depth && one.mode == r.mode && one.ops_per_sec > 0) {
        r.fields["scalability"] = r.ops_per_sec / (r.threads * one.ops_per_sec);
      }
    }
  }
}

int CpuForThread(int index, bool pin) {
  static const std::vector<int> cpus = AllowedCpus();
  if (!pin || cpus.size() < 2) return -1;
  return cpus[static_cast<size_t>(index) % cpus.size()];
}

double RunTimed(int n, bool pin, double seconds,
                const std::function<void(int, const std::atomic<bool>&)>& body,
                double* on_cpu, int first_timed) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::vector<std::thread> team;
  team.reserve(static_cast<size_t>(n));
  // Per thread: CPU seconds from the release to the end of its body.
  std::vector<double> cpu(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    team.emplace_back([&, i] {
      ScopedCpuPin pin_here(CpuForThread(i, pin));
      ready.fetch_add(1);
      for (int spins = 0; !go.load(std::memory_order_acquire);) {
        Backoff(spins);
      }
      const double t0 = ThreadCpuSeconds();
      body(i, stop);
      cpu[static_cast<size_t>(i)] = ThreadCpuSeconds() - t0;
    });
  }
  while (ready.load() < n) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  std::this_thread::sleep_until(start + std::chrono::duration<double>(seconds));
  // Relaxed: `stop` only ends the loops and publishes no data; the bodies'
  // results are read after join(), which synchronises with them.
  stop.store(true, std::memory_order_relaxed);
  const auto end = std::chrono::steady_clock::now();
  for (std::thread& t : team) t.join();
  const double wall = std::chrono::duration<double>(end - start).count();
  if (on_cpu != nullptr) {
    // A body runs a little past `stop` (its last operation, its drain), so
    // a share can pass 1 slightly: capped.
    double lowest = 1;
    for (size_t i = static_cast<size_t>(std::max(0, first_timed));
         i < cpu.size(); ++i) {
      lowest = std::min(lowest, wall > 0 ? cpu[i] / wall : 0);
    }
    *on_cpu = lowest;
  }
  return wall;
}

void Backoff(int& spins) {
  if (++spins < 256) {
    internal::CpuRelax();
  } else {
    std::this_thread::yield();
  }
}

namespace {
int64_t g_heap_profile_rate = -1;  // set by main before any thread starts
}  // namespace

void SetBenchHeapProfileRate(int64_t bytes) { g_heap_profile_rate = bytes; }
int64_t BenchHeapProfileRate() { return g_heap_profile_rate; }

StatusOr<std::unique_ptr<Controller>> MakeController(ControllerOptions o,
                                                     bool group_metadata) {
  o.charge_group_metadata = group_metadata;
  auto c = Controller::Create(std::move(o));
  if (!c.ok()) return Failed("Controller::Create: " + c.status().ToString());
  if (g_heap_profile_rate >= 0) {
    SetHeapProfileRate(*c.value(),
                       Bytes(static_cast<uint64_t>(g_heap_profile_rate)));
  }
  return std::move(c).value();
}

StatusOr<std::vector<GroupRef>> MakeChain(Controller& ctrl, int depth,
                                          Pages protect) {
  std::vector<GroupRef> chain;
  Group* parent = &ctrl.root();
  for (int k = 1; k <= depth; ++k) {
    auto g = ctrl.CreateGroup(*parent, Numbered("c", k));
    if (!g.ok()) return Failed("CreateGroup: " + g.status().ToString());
    chain.push_back(std::move(g).value());
    parent = chain.back().get();
  }
  if (protect.raw() != 0 && !chain.empty()) {
    if (Status s = chain[0]->SetMin(protect); !s.ok()) return s;
    if (Status s = chain[0]->SetLow(protect); !s.ok()) return s;
  }
  return chain;
}

Status CheckBalanced(Controller& ctrl, const std::vector<GroupRef>& groups) {
  ctrl.DrainAllStocks(ctrl.root());
  for (const GroupRef& g : groups) {
    auto current = g->ReadFile("memory.current");
    if (!current.ok()) return current.status();
    if (current.value() != "0\n") {
      return Failed("group " + g->path() + " memory.current " +
                    current.value() + "after the run");
    }
  }
  if (ctrl.root().usage().raw() != 0) {
    return Failed("root usage " + std::to_string(ctrl.root().usage().raw()) +
                  " pages after the run");
  }
  if (Status s = ctrl.CheckInvariants(); !s.ok()) return s;
  if (ctrl.underflows() != 0) {
    return Failed(std::to_string(ctrl.underflows()) + " uncharge underflows");
  }
  return Status::Ok();
}

std::string Numbered(const char* prefix, int64_t i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return NAN;
  // Nearest rank: the smallest value with at least q of the samples at or
  // below it, rank ceil(q n) (1-based); rank 1 for q = 0. The 1e-9 keeps a
  // product that rounds just above a whole number (0.07 x 100) on it.
  const double rank = std::ceil(q * static_cast<double>(sorted.size()) - 1e-9);
  const size_t i =
      rank <= 1 ? 0
                : std::min(sorted.size() - 1, static_cast<size_t>(rank) - 1);
  return sorted[i];
}

}  // namespace umemcg::bench

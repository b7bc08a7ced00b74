// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "report.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <utility>

namespace umemcg::bench {
namespace {

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

std::string CpuSourceNow() {
  auto c = Controller::Create({.stats_flush_period = std::chrono::seconds(0)});
  return c.ok() ? CpuSourceName(c.value()->info().cpu_source) : "unknown";
}

std::string Fmt(double v) {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

// The result of `scenario`/`variant` matching the given batch, depth and
// threads (-1: any; for threads, the largest measured).
// Any batch, depth or thread count in Find. Not -1: that is
// kAdaptiveBatch, a batch of its own.
constexpr int kAny = std::numeric_limits<int>::min();
static_assert(kAny != kAdaptiveBatch);

const Result* Find(const std::vector<Result>& rs, const std::string& scenario,
                   const std::string& variant, int batch = kAny,
                   int depth = kAny, int threads = kAny) {
  const Result* best = nullptr;
  for (const Result& r : rs) {
    if (r.scenario != scenario || r.variant != variant) continue;
    if (batch != kAny && r.batch != batch) continue;
    if (depth != kAny && r.depth != depth) continue;
    if (threads != kAny && r.threads != threads) continue;
    if (best == nullptr || r.threads > best->threads) best = &r;
  }
  return best;
}

constexpr int kLatencyQuantiles = 200;

double Ops(const Result* r) { return r == nullptr ? NAN : r->ops_per_sec; }
double Field(const Result* r, const char* f) {
  return r == nullptr ? NAN : r->field(f);
}

// A side's value: ops/s (metric "") or a field's median, and per repeat.
double Value(const Result* r, const std::string& metric) {
  return metric.empty() ? Ops(r) : Field(r, metric.c_str());
}
std::vector<double> Samples(const Result* r, const std::string& metric) {
  if (r == nullptr) return {};
  if (metric.empty()) return r->ops_per_sec_samples;
  auto it = r->field_samples.find(metric);
  return it == r->field_samples.end() ? std::vector<double>{} : it->second;
}

// measured = the median of the per-repeat ratios a_i / b_i (repeat i of
// both sides ran in the same round), or a / b of the medians when the
// sides have no paired samples; lo..hi = the lowest and highest ratio;
// ci_lo..ci_hi = the median's confidence interval; on_cpu = the lower of
// the two sides' median on-CPU shares.
void Measure(Claim& c, const Result* a, const Result* b,
             const std::string& metric = "") {
  c.measured = Value(a, metric) / Value(b, metric);
  const std::vector<double> sa = Samples(a, metric);
  const std::vector<double> sb = Samples(b, metric);
  std::vector<double> ratios;
  if (sa.size() == sb.size()) {
    for (size_t i = 0; i < sa.size(); ++i) {
      const double r = sa[i] / sb[i];
      if (!std::isnan(r)) ratios.push_back(r);
    }
  }
  std::sort(ratios.begin(), ratios.end());
  if (!ratios.empty()) {
    c.measured = Median(ratios);
    c.lo = ratios.front();
    c.hi = ratios.back();
    const size_t k = MedianCiRank(ratios.size(), kCiConfidence);
    c.ci_lo = ratios[k - 1];
    c.ci_hi = ratios[ratios.size() - k];
  }
  const double ca = Field(a, "on_cpu");
  const double cb = Field(b, "on_cpu");
  c.on_cpu = std::isnan(ca) ? cb : (std::isnan(cb) ? ca : std::min(ca, cb));
}

}  // namespace

size_t MedianCiRank(size_t n, double confidence) {
  // The interval [x(k), x(n+1-k)] misses the median when at most k-1 of
  // the n values lie below it, or at most k-1 above it: each has
  // probability P(X <= k-1) for X ~ Binomial(n, 1/2).
  const double dn = static_cast<double>(n);
  size_t best = 1;
  double cdf = 0;
  for (size_t k = 1; 2 * k <= n + 1; ++k) {
    const double j = static_cast<double>(k - 1);
    cdf += std::exp(std::lgamma(dn + 1) - std::lgamma(j + 1) -
                    std::lgamma(dn - j + 1) - dn * std::log(2.0));
    if (1 - 2 * cdf < confidence) break;
    best = k;
  }
  return best;
}

double LineRoundTripNow() {
  static const double ns = [] {
    const std::vector<int> cpus = AllowedCpus();
    return cpus.size() < 2 ? NAN : LineRoundTripNs(cpus[0], cpus[1]);
  }();
  return ns;
}

std::string MachineLine() {
  struct utsname u {};
  uname(&u);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  std::string line = "machine: " + std::to_string(AllowedCpus().size()) +
                     " CPUs allowed (" + std::to_string(online) + " online), " +
                     CpuModel() + ", cpu source " + CpuSourceNow() + ", " +
                     u.sysname + " " + u.release;
  const double rtt = LineRoundTripNow();
  if (!std::isnan(rtt)) {
    line += ", cache-line round trip CPU " + std::to_string(AllowedCpus()[0]) +
            " <-> " + std::to_string(AllowedCpus()[1]) + ": " + Fmt(rtt) +
            " ns";
  }
  return line;
}

std::string SettingsLine(const Params& p, bool quick) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "settings: seconds=%g repeat=%d iterations=%llu payload=%llu "
                "pin=%s%s",
                p.seconds, p.repeat,
                static_cast<unsigned long long>(p.iterations),
                static_cast<unsigned long long>(p.payload),
                p.pin ? "yes" : "no", quick ? " quick" : "");
  std::string line = buf;
  if (BenchHeapProfileRate() >= 0) {
    line += " heap_profile_rate=" + std::to_string(BenchHeapProfileRate());
  }
  return line;
}

void PrintTable(std::FILE* out, const std::vector<Result>& results) {
  std::fprintf(out, "%-12s %-18s %8s %4s %5s %-7s %13s %23s  %s\n", "scenario",
               "variant", "batch", "thr", "depth", "mode", "ops/s",
               "(min..max)", "fields");
  for (const Result& r : results) {
    const auto [lo, hi] = std::minmax_element(r.ops_per_sec_samples.begin(),
                                              r.ops_per_sec_samples.end());
    std::string fields;
    for (const auto& [k, v] : r.fields) fields += k + "=" + Fmt(v) + " ";
    if (r.rounds_discarded > 0) {
      fields += "rounds_discarded=" + std::to_string(r.rounds_discarded);
    }
    std::string range;
    if (lo != r.ops_per_sec_samples.end()) {
      range.append("(").append(Fmt(*lo)).append("..").append(Fmt(*hi)) += ")";
    }
    std::fprintf(out, "%-12s %-18s %8s %4d %5d %-7s %13s %23s  %s\n",
                 r.scenario.c_str(), r.variant.c_str(),
                 BatchName(r.batch).c_str(), r.threads, r.depth,
                 r.mode.empty() ? "-" : r.mode.c_str(),
                 Fmt(r.ops_per_sec).c_str(), range.c_str(), fields.c_str());
  }
}

nlohmann::json ToJson(const Result& r) {
  static const std::string cpu_source = CpuSourceNow();
  static const size_t cpus = AllowedCpus().size();
  nlohmann::json j;
  j["scenario"] = r.scenario;
  j["variant"] = r.variant;
  if (r.batch == kAdaptiveBatch) {
    j["batch"] = "adaptive";
  } else {
    j["batch"] = r.batch;
  }
  j["threads"] = r.threads;
  j["depth"] = r.depth;
  j["mode"] = r.mode;
  j["seconds"] = r.seconds;
  j["ops"] = r.ops;
  j["ops_per_sec"] = r.ops_per_sec;
  j["repeat"] = r.repeat;
  j["rounds_discarded"] = r.rounds_discarded;
  j["ops_per_sec_samples"] = r.ops_per_sec_samples;
  j["balanced"] = r.balanced;
  j["cpus"] = cpus;
  j["cpu_source"] = cpu_source;
  if (const double rtt = LineRoundTripNow(); !std::isnan(rtt)) {
    j["line_round_trip_ns"] = rtt;
  }
  for (const auto& [k, v] : r.fields) {
    if (std::isnan(v)) {
      j[k] = nullptr;
    } else {
      j[k] = v;
    }
  }
  nlohmann::json samples = nlohmann::json::object();
  for (const auto& [k, v] : r.field_samples) {
    nlohmann::json list = nlohmann::json::array();
    for (double x : v) {
      if (std::isnan(x)) {
        list.push_back(nullptr);
      } else {
        list.push_back(x);
      }
    }
    samples[k] = list;
  }
  j["samples"] = samples;
  if (!r.latencies_us.empty()) {
    std::vector<double> q;
    for (int i = 0; i <= kLatencyQuantiles; ++i) {
      q.push_back(Percentile(r.latencies_us,
                             static_cast<double>(i) / kLatencyQuantiles));
    }
    j["latency_quantiles_us"] = q;
  }
  return j;
}

StatusOr<Result> FromJson(const nlohmann::json& j) {
  static const std::set<std::string> kIdentity = {"scenario",
                                                  "variant",
                                                  "batch",
                                                  "threads",
                                                  "depth",
                                                  "mode",
                                                  "seconds",
                                                  "ops",
                                                  "ops_per_sec",
                                                  "repeat",
                                                  "balanced",
                                                  "ops_per_sec_samples",
                                                  "cpus",
                                                  "cpu_source",
                                                  "latency_quantiles_us",
                                                  "samples",
                                                  "rounds_discarded"};
  Result r;
  try {
    r.scenario = j.at("scenario").get<std::string>();
    r.variant = j.at("variant").get<std::string>();
    if (j.at("batch").is_string()) {
      if (j.at("batch").get<std::string>() != "adaptive") {
        return Status(StatusCode::kInvalidArgument,
                      "batch must be a number or \"adaptive\"");
      }
      r.batch = kAdaptiveBatch;
    } else {
      r.batch = j.at("batch").get<int>();
    }
    r.threads = j.at("threads").get<int>();
    r.depth = j.value("depth", 0);
    r.mode = j.value("mode", std::string());
    r.seconds = j.at("seconds").get<double>();
    r.ops = j.at("ops").get<double>();
    r.ops_per_sec = j.at("ops_per_sec").get<double>();
    r.repeat = j.at("repeat").get<int>();
    r.rounds_discarded = j.value("rounds_discarded", 0);
    r.balanced = j.value("balanced", false);
    r.ops_per_sec_samples =
        j.value("ops_per_sec_samples", std::vector<double>());
    r.latencies_us = j.value("latency_quantiles_us", std::vector<double>());
    if (j.contains("samples") && j.at("samples").is_object()) {
      for (const auto& [k, v] : j.at("samples").items()) {
        std::vector<double>& out = r.field_samples[k];
        for (const auto& x : v) {
          out.push_back(x.is_number() ? x.get<double>() : NAN);
        }
      }
    }
    for (const auto& [k, v] : j.items()) {
      if (kIdentity.count(k) == 0 && v.is_number()) {
        r.fields[k] = v.get<double>();
      } else if (kIdentity.count(k) == 0 && v.is_null()) {
        r.fields[k] = NAN;
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return Status(StatusCode::kInvalidArgument, e.what());
  }
  return r;
}

StatusOr<std::vector<Result>> ReadJsonLines(
    const std::vector<std::string>& files) {
  std::vector<Result> out;
  for (const std::string& f : files) {
    std::ifstream in(f);
    if (!in) return Status(StatusCode::kNotFound, "cannot read " + f);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded()) {
        return Status(StatusCode::kInvalidArgument,
                      f + ":" + std::to_string(n) + ": not JSON");
      }
      auto r = FromJson(j);
      if (!r.ok()) {
        return Status(StatusCode::kInvalidArgument,
                      f + ":" + std::to_string(n) + ": " +
                          std::string(r.status().message()));
      }
      out.push_back(std::move(r).value());
    }
  }
  return out;
}

// |ln ratio| below this is "no effect" (the kernel threads treat 3-10%
// as noise).
constexpr double kNoEffect = 0.05;

namespace {

// The verdict `c` would get with `measured` as its ratio (yes / partly /
// no / n/a; see report.h).
std::string Judge(const Claim& c, double measured) {
  const bool has_target =
      !std::isnan(c.target_min) || !std::isnan(c.target_max);
  const double m = std::log(measured);
  const double k = std::log(c.kernel_ratio);
  // Direction: the same side of 1 as the kernel's (both within 5% of 1
  // count as "no effect" on both sides); with only a target, the side the
  // target is on.
  bool direction;
  if (!std::isnan(c.kernel_ratio)) {
    direction =
        (std::abs(k) < kNoEffect && std::abs(m) < kNoEffect) || m * k > 0;
  } else if (!std::isnan(c.target_min)) {
    direction = c.target_min >= 1 ? m > 0 : true;
  } else {
    direction = c.target_max <= 1 ? m < 0 : true;
  }
  if (has_target) {
    const bool met = (std::isnan(c.target_min) || measured >= c.target_min) &&
                     (std::isnan(c.target_max) || measured <= c.target_max);
    if (met) return "yes";
    return direction ? "partly" : "no";
  }
  if (std::isnan(c.kernel_ratio)) return "n/a";
  if (!direction) return "no";
  const bool size =
      (std::abs(k) < kNoEffect && std::abs(m) < kNoEffect) ||
      (std::abs(m) >= std::abs(k) / 2 && std::abs(m) <= 2 * std::abs(k));
  return size ? "yes" : "partly";
}

// "n/a" without a ratio, "void" when a timed thread had too little of its
// CPU; nullptr when `c` can be judged.
const char* Unjudged(const Claim& c) {
  if (std::isnan(c.measured) || c.measured <= 0) return "n/a";
  if (!std::isnan(c.on_cpu) && c.on_cpu < kMinOnCpu) return "void";
  return nullptr;
}

// The ends judged: the median's interval, or min..max without one (either
// may be NaN when the run had too few repeats).
std::pair<double, double> JudgedEnds(const Claim& c) {
  const bool ci = !std::isnan(c.ci_lo) && !std::isnan(c.ci_hi);
  return ci ? std::pair{c.ci_lo, c.ci_hi} : std::pair{c.lo, c.hi};
}

}  // namespace

std::string Verdict(const Claim& c) {
  if (const char* u = Unjudged(c)) return u;
  const std::string v = Judge(c, c.measured);
  const auto [lo, hi] = JudgedEnds(c);
  const bool known = !std::isnan(lo) && !std::isnan(hi);
  const bool no_effect_claim = std::isnan(c.target_min) &&
                               std::isnan(c.target_max) &&
                               std::abs(std::log(c.kernel_ratio)) < kNoEffect;
  if (no_effect_claim) {
    // The kernel saw no effect. A median within the band agrees when the
    // interval is within twice the band (this resolution cannot show
    // equivalence within 5%, but an interval wider than 10% cannot tell
    // anything); outside the band, an interval reaching it is noise.
    if (std::abs(std::log(c.measured)) < kNoEffect) {
      const bool narrow = !known || (std::abs(std::log(lo)) < 2 * kNoEffect &&
                                     std::abs(std::log(hi)) < 2 * kNoEffect);
      return narrow ? v : "noise";
    }
    if (known && lo < std::exp(kNoEffect) && hi > std::exp(-kNoEffect)) {
      return "noise";  // the interval reaches the band
    }
  }
  for (const double end : {lo, hi}) {
    if (!std::isnan(end) && end > 0 && Judge(c, end) != v) return "noise";
  }
  return v;
}

std::vector<Claim> SeedClaims(const std::vector<Result>& rs) {
  std::vector<Claim> out;
  // A claim on a / b (ops/s, or a field's median), with its noise.
  auto add = [&](Claim c, const Result* a, const Result* b,
                 const std::string& metric = "") {
    Measure(c, a, b, metric);
    c.verdict = Verdict(c);
    out.push_back(std::move(c));
  };
  const Result* sf64 = Find(rs, "sendfile", "umemcg", 64);
  const Result* sf32 = Find(rs, "sendfile", "umemcg", 32);
  const Result* sfa = Find(rs, "sendfile", "umemcg", kAdaptiveBatch);
  const Result* sfu = Find(rs, "sendfile", "unaccounted");
  const Result* sfn = Find(rs, "sendfile", "naive");
  const Result* sfq = Find(rs, "sendfile", "per-leaf-quantum");
  const Result* sft = Find(rs, "sendfile", "per-thread");
  add({"sendfile: batch 64 vs 32 (msgs/s)",
       "10482.7 -> 17064.7 Mbps, 36 pairs on 72 CPUs [S4]", 17064.7 / 10482.7,
       NAN, 1.10, NAN},
      sf64, sf32);
  add({"sendfile: umemcg batch 64 vs unaccounted (msgs/s)",
       "20120.3 vs 21694.8 Mbps root (all three fixes) [S1]", 20120.3 / 21694.8,
       NAN, 0.85, NAN},
      sf64, sfu);
  add({"sendfile: umemcg adaptive batch vs unaccounted (msgs/s)",
       "none (beyond the kernel: the seed's TODO)", NAN, NAN, 0.90, NAN},
      sfa, sfu);
  // At most half: with every message charging and uncharging each level
  // of the chain, the lines bounce between the two CPUs on every message,
  // and what that costs depends on where the host put the two CPUs (0.11
  // to 0.46 in runs minutes apart on one 2-CPU VM).
  add({"sendfile: naive per-level atomics vs unaccounted (msgs/s)",
       "none (the kernel always had a stock)", NAN, NAN, NAN, 0.5},
      sfn, sfu);
  add({"sendfile: umemcg batch 64 vs per-leaf-quantum (msgs/s)",
       "none (Velox-style pools, peers.h)", NAN, NAN, 1.0, NAN},
      sf64, sfq);
  add({"sendfile: umemcg batch 64 vs per-thread, worst-case slack",
       "none (ClickHouse-style trackers, peers.h)", NAN, NAN, NAN, 1.0},
      sf64, sft, "slack_bound_pages");
  const Result* mt7 = Find(rs, "multitenant", "slots7", 64);
  add({"multitenant: 7 stock slots vs 1 (msgs/s)",
       "10801.5 -> 26476.3 Mbps, 36 clients in 36 cgroups [M1]",
       26476.3 / 10801.5, NAN, 1.3, NAN},
      mt7, Find(rs, "multitenant", "slots1", 64));
  add({"multitenant: 7 stock slots vs per-leaf-quantum (msgs/s)",
       "none (Velox-style pools, peers.h)", NAN, NAN, 1.0, NAN},
      mt7, Find(rs, "multitenant", "per-leaf-quantum"));
  add({"multitenant: 7 stock slots vs per-thread, worst-case slack",
       "none (ClickHouse-style trackers, peers.h)", NAN, NAN, NAN, 1.0},
      mt7, Find(rs, "multitenant", "per-thread"), "slack_bound_pages");
  const Result* kc = Find(rs, "kmem", "cached", 64, kAny, 1);
  const Result* ki = Find(rs, "kmem", "immediate", 64, kAny, 1);
  const Result* ku = Find(rs, "kmem", "unaccounted", kAny, kAny, 1);
  add({"kmem 64 B: cached vs immediate stats (time)",
       "1.4M loop 110 -> 85 ms [K5]", 85.0 / 110.0, NAN, NAN, 0.85},
      kc, ki, "ns_per_op");
  add({"kmem 64 B: cached vs unaccounted (time)",
       "6.801 s vs 2.848 s unaccounted, 1e8 x 64 B [K4]", 6.801 / 2.848, NAN,
       NAN, 1.8},
      kc, ku, "ns_per_op");
  add({"kmem 64 B: batch 32 vs 64, cached (time)",
       "pgbench sendto 3049.2 vs 3071.6 ms [K3]", 3049.221 / 3071.607, NAN, NAN,
       NAN},
      Find(rs, "kmem", "cached", 32, kAny, 1), kc, "ns_per_op");
  add({"kmem 64 B: cached vs per-leaf-quantum (time)",
       "none (Velox-style pools, peers.h)", NAN, NAN, NAN, 1.0},
      kc, Find(rs, "kmem", "per-leaf-quantum", kAny, kAny, 1), "ns_per_op");
  add({"kmem 64 B: cached vs per-thread, worst-case slack",
       "none (ClickHouse-style trackers, peers.h)", NAN, NAN, NAN, 1.0},
      kc, Find(rs, "kmem", "per-thread", kAny, kAny, 1), "slack_bound_pages");
  {
    const Result* pc = Find(rs, "kmem", "percpu");
    const Result* sp = Find(rs, "kmem", "shared-pool");
    // The kernel's 70x is 96 threads contending for one pool; with N
    // threads the contention, and so the ratio, is a fraction of that
    // (2.1 to 8.8 at 2 threads on the 2-CPU hosts measured, moving with
    // the host's cross-CPU cost). The target is the direction with a
    // margin: the stock is at least 1.5 times as fast.
    Claim c{"kmem 4 KiB, N threads: per-CPU stock vs shared pool (ops/s)",
            "6,242 -> 438,838 kops/s, 96 threads [K6]",
            438838.0 / 6242.0,
            NAN,
            1.5,
            NAN};
    if (pc != nullptr && pc->threads > 0) {
      c.name += " at " + std::to_string(pc->threads) + " threads";
    }
    add(c, pc, sp);
  }
  add({"statread 10k groups: p99 global+whole-tree / pergroup+subtree",
       "no ratio published; v6.8 subtree flushing [Y6]", NAN, NAN, 10, NAN},
      Find(rs, "statread", "global+whole-tree"),
      Find(rs, "statread", "pergroup+subtree"), "p99_us");
  add({"pagefault3 vs pagefault1 per-task ops (pergroup, depth 2, 1 task)",
       "1,295,808 vs 270,249 per_process_ops, 256 CPUs [Y5]",
       1295807.782 / 270249.164, NAN, NAN, NAN},
      Find(rs, "pagefault3", "pergroup", kAny, 2, 1),
      Find(rs, "pagefault1", "pergroup", kAny, 2, 1));
  // variant a over b of `scenario` at `depth`, the largest thread count.
  auto pf = [&](Claim c, const char* scenario, const char* a, const char* b,
                int depth) {
    add(std::move(c), Find(rs, scenario, a, kAny, depth, kAny),
        Find(rs, scenario, b, kAny, depth, kAny));
  };
  pf({"pagefault1: pergroup vs global (depth 2, N tasks, ops/s)",
      "per_process 270249 -> 261369, 2 levels [Y5]", 261368.709 / 270249.164,
      NAN, NAN, NAN},
     "pagefault1", "pergroup", "global", 2);
  pf({"pagefault3: pergroup vs global (depth 2, N tasks, ops/s)",
      "per_process 1295808 -> 1275580, 2 levels [Y5]",
      1275579.873 / 1295807.782, NAN, NAN, NAN},
     "pagefault3", "pergroup", "global", 2);
  pf({"pagefault1: naive-walk vs global (depth 4, N tasks, ops/s)",
      "per_process -6.02%, 4 levels (v2, no early stop) [Y1]", 1 - 0.0602, NAN,
      NAN, NAN},
     "pagefault1", "naive-walk", "global", 4);
  pf({"pagefault3: naive-walk vs global (depth 4, N tasks, ops/s)",
      "per_process -3.93%, 4 levels [Y1]", 1 - 0.0393, NAN, NAN, NAN},
     "pagefault3", "naive-walk", "global", 4);
  pf({"fallocate: naive-walk vs global (depth 4, N tasks, ops/s)",
      "fallocate1 per_thread 36509 -> 27079 [Y7]", 27079.0 / 36509.0, NAN, NAN,
      NAN},
     "fallocate", "naive-walk", "global", 4);
  pf({"fallocate: pergroup (early stop) vs global (depth 4, N tasks)",
      "fixed to +3.3% after the follow-ups [Y11]", 1.033, NAN, NAN, NAN},
     "fallocate", "pergroup", "global", 4);
  // Issue 16's targets (no kernel figure: absolute values and ratios).
  auto add_value = [&](Claim c) {
    c.verdict = Verdict(c);
    out.push_back(std::move(c));
  };
  {
    const Result* large = Find(rs, "scale", "large");
    const Result* small = Find(rs, "scale", "small");
    std::string n = "N";
    if (large != nullptr && !std::isnan(large->field("groups"))) {
      n = std::to_string(static_cast<int64_t>(large->field("groups")));
    }
    const char* none = "none (issue 16 target)";
    add_value({"scale: groups created/s, 1 thread, " + n + " groups", none, NAN,
               Field(large, "create_per_s"), 100000, NAN});
    add_value(
        {"scale: groups removed/s, 1 thread, under churn, " + n + " groups",
         none, NAN, Field(large, "remove_per_s"), 100000, NAN});
    // CPU time of the removing thread: the wall clock of a loaded machine
    // would compare the scheduler's share, not the work.
    add_value({"scale: removal CPU time per group, " + n + " vs 1000 groups",
               none, NAN,
               Field(large, "remove_cpu_ns_per_group") /
                   Field(small, "remove_cpu_ns_per_group"),
               NAN, 1.5});
    add_value({"scale: root memory.stat p99 (ms), every group dirty", none, NAN,
               Field(large, "root_stat_p99_ms"), NAN, 50});
    add_value({"scale: random-leaf memory.stat p99 (us)", none, NAN,
               Field(large, "leaf_stat_p99_us"), NAN, 100});
    add_value({"scale: hot-group charge p99, tree churning / quiet", none, NAN,
               Field(large, "hot_p99_churn_vs_quiet"), NAN, 2});
    add_value({"scale: bytes per group (RSS growth)", none, NAN,
               Field(large, "bytes_per_group"), NAN, 2048});
  }
  return out;
}

namespace {

// A claim row's noise (min..max), interval and on-CPU cells ("-" when
// unknown).
struct Cells {
  explicit Cells(const Claim& c)
      : noise(std::isnan(c.lo) ? "-" : Fmt(c.lo) + ".." + Fmt(c.hi)),
        ci(std::isnan(c.ci_lo) ? "-" : Fmt(c.ci_lo) + ".." + Fmt(c.ci_hi)) {
    if (!std::isnan(c.on_cpu)) {
      std::snprintf(on_cpu, sizeof(on_cpu), "%.0f%%", 100 * c.on_cpu);
    }
  }
  std::string noise;
  std::string ci;
  char on_cpu[16] = "-";
};

}  // namespace

std::vector<Claim> BaselineChecks(const std::vector<Result>& rs) {
  std::vector<Claim> out;
  // Single-thread kmem (the claims' loop); the others at any thread count.
  const struct {
    const char* scenario;
    int threads;
  } kScenarios[] = {{"sendfile", kAny}, {"multitenant", kAny}, {"kmem", 1}};
  for (const auto& s : kScenarios) {
    const Result* more =
        Find(rs, s.scenario, "per-thread", kAny, kAny, s.threads);
    const Result* base =
        Find(rs, s.scenario, "unaccounted", kAny, kAny, s.threads);
    if (more == nullptr || base == nullptr) continue;
    Claim c;
    c.name = std::string(s.scenario) + ": per-thread vs unaccounted (ops/s)";
    Measure(c, more, base);
    if (const char* u = Unjudged(c)) {
      c.verdict = u;
    } else {
      const double low = JudgedEnds(c).first;
      c.verdict = !std::isnan(low) && low > 1 ? "slow" : "ok";
    }
    out.push_back(std::move(c));
  }
  return out;
}

void PrintBaselineChecks(std::FILE* out, const std::vector<Claim>& checks) {
  std::fprintf(out, "%-64s %8s %19s %19s %6s  %s\n", "baseline check", "ratio",
               "noise (min..max)", "median's 80% CI", "on-cpu", "verdict");
  for (const Claim& c : checks) {
    const Cells cells(c);
    std::fprintf(out, "%-64s %8s %19s %19s %6s  %s\n", c.name.c_str(),
                 Fmt(c.measured).c_str(), cells.noise.c_str(), cells.ci.c_str(),
                 cells.on_cpu, c.verdict.c_str());
  }
}

void PrintClaims(std::FILE* out, const std::vector<Claim>& claims) {
  std::fprintf(out, "%-64s %8s %8s %19s %19s %6s %10s  %-7s %s\n", "seed claim",
               "kernel", "umemcg", "noise (min..max)", "median's 80% CI",
               "on-cpu", "target", "verdict", "kernel figure");
  for (const Claim& c : claims) {
    std::string target = "-";
    if (!std::isnan(c.target_min)) target = ">= " + Fmt(c.target_min);
    if (!std::isnan(c.target_max)) target = "<= " + Fmt(c.target_max);
    const Cells cells(c);
    std::fprintf(out, "%-64s %8s %8s %19s %19s %6s %10s  %-7s %s\n",
                 c.name.c_str(), Fmt(c.kernel_ratio).c_str(),
                 Fmt(c.measured).c_str(), cells.noise.c_str(), cells.ci.c_str(),
                 cells.on_cpu, target.c_str(), c.verdict.c_str(),
                 c.kernel.c_str());
  }
}

}  // namespace umemcg::bench

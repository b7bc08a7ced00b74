// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// SVG plots with gnuplot (Debian: gnuplot-nox): one .gp script and its .dat
// series per plot, rendered with `gnuplot <script>`.

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "report.h"

namespace umemcg::bench {
namespace {

struct Series {
  std::string title;
  std::vector<std::pair<double, double>> points;  // (x, y), sorted by x
};

Status MakeDir(const std::string& dir) {
  std::string partial;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!partial.empty() && mkdir(partial.c_str(), 0755) != 0 &&
          errno != EEXIST) {
        return Failed("mkdir " + partial + ": " + std::strerror(errno));
      }
    }
    if (i < dir.size()) partial += dir[i];
  }
  return Status::Ok();
}

std::string Fmt(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", x);
  return buf;
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

// Writes name.gp + name-<i>.dat into dir and runs gnuplot on it.
StatusOr<std::string> Plot(const std::string& dir, const std::string& name,
                           const std::string& title, const std::string& xlabel,
                           const std::string& ylabel, bool logx,
                           const std::vector<Series>& series,
                           const std::string& style) {
  // Tics at the measured x values (threads, batches) when few.
  std::set<double> xs;
  for (const Series& s : series) {
    for (const auto& pt : s.points) xs.insert(pt.first);
  }
  std::string xtics;
  if (xs.size() <= 12) {
    for (double x : xs) xtics += (xtics.empty() ? "" : ", ") + Fmt(x);
    xtics = "set xtics (" + xtics + ")\n";
  }
  const std::string svg = dir + "/" + name + ".svg";
  const std::string gp = dir + "/" + name + ".gp";
  std::ofstream script(gp);
  if (!script) return Failed("cannot write " + gp);
  script << "set terminal svg size 900,560 dynamic enhanced background "
            "rgb 'white'\n"
         << "set output " << Quote(svg) << "\n"
         << "set title " << Quote(title) << " noenhanced\n"
         << "set xlabel " << Quote(xlabel) << "\n"
         << "set ylabel " << Quote(ylabel) << "\n"
         << "set key outside right top noenhanced\nset grid\n"
         << "set format y '%.3g'\n"
         << (logx ? "set logscale x\n" : "") << xtics;
  std::string plot = "plot ";
  for (size_t i = 0; i < series.size(); ++i) {
    const std::string dat = dir + "/" + name + "-" + std::to_string(i) + ".dat";
    std::ofstream d(dat);
    if (!d) return Failed("cannot write " + dat);
    for (const auto& [x, y] : series[i].points) d << x << " " << y << "\n";
    plot += (i ? ", " : "") + Quote(dat) + " using 1:2 with " + style +
            " title " + Quote(series[i].title);
  }
  script << plot << "\n";
  script.close();
  const std::string cmd = "gnuplot " + Quote(gp) + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    return Failed("gnuplot failed on " + gp +
                  " (is gnuplot installed? Debian: gnuplot-nox)");
  }
  return svg;
}

std::string SeriesName(const Result& r) {
  std::string s = r.variant;
  if (r.batch > 0 && r.scenario == "sendfile") {
    s += " b" + std::to_string(r.batch);
  } else if (r.batch == kAdaptiveBatch) {
    s += " adaptive";
  }
  if (r.depth > 0 && r.variant != "unaccounted" &&
      (r.scenario.rfind("pagefault", 0) == 0 || r.scenario == "fallocate")) {
    s += " depth " + std::to_string(r.depth);
  }
  if (!r.mode.empty()) s += " " + r.mode;
  return s;
}

}  // namespace

StatusOr<std::vector<std::string>> WritePlots(
    const std::string& dir, const std::vector<Result>& results) {
  if (Status s = MakeDir(dir); !s.ok()) return s;
  std::vector<std::string> written;
  // Throughput vs threads, per scenario with several thread counts.
  std::map<std::string, std::map<std::string, Series>> by_scenario;
  for (const Result& r : results) {
    Series& s = by_scenario[r.scenario][SeriesName(r)];
    s.title = SeriesName(r);
    s.points.emplace_back(r.threads, r.ops_per_sec);
  }
  for (auto& [scenario, series_map] : by_scenario) {
    std::set<double> xs;
    std::vector<Series> series;
    for (auto& [name, s] : series_map) {
      std::sort(s.points.begin(), s.points.end());
      for (const auto& pt : s.points) xs.insert(pt.first);
      series.push_back(s);
    }
    if (xs.size() < 2) continue;
    auto svg = Plot(dir, scenario + "-throughput-vs-threads",
                    scenario + ": throughput vs threads", "threads",
                    "ops/s (median)", false, series, "linespoints");
    if (!svg.ok()) return svg.status();
    written.push_back(svg.value());
  }
  // sendfile: overhead vs batch, per thread count.
  std::map<int, Series> overhead;
  for (const Result& r : results) {
    // The adaptive batch is no point on the batch axis (log scale).
    if (r.scenario != "sendfile" || r.variant != "umemcg" || r.batch <= 0) {
      continue;
    }
    const double o = r.field("overhead_vs_unaccounted");
    if (std::isnan(o)) continue;
    Series& s = overhead[r.threads];
    s.title = std::to_string(r.threads / 2) + " pair(s)";
    s.points.emplace_back(r.batch, 100 * o);
  }
  std::vector<Series> oseries;
  size_t max_points = 0;
  for (auto& [t, s] : overhead) {
    std::sort(s.points.begin(), s.points.end());
    max_points = std::max(max_points, s.points.size());
    oseries.push_back(s);
  }
  if (max_points >= 2) {
    auto svg =
        Plot(dir, "sendfile-overhead-vs-batch",
             "sendfile: accounting overhead vs batch", "batch (pages)",
             "overhead vs unaccounted (%)", true, oseries, "linespoints");
    if (!svg.ok()) return svg.status();
    written.push_back(svg.value());
  }
  // statread: read-latency CDF.
  std::vector<Series> cdf;
  for (const Result& r : results) {
    if (r.scenario != "statread" || r.latencies_us.empty()) continue;
    Series s;
    s.title = r.variant + " (" + std::to_string(r.threads) + " writers)";
    const std::vector<double>& v = r.latencies_us;
    const size_t step = std::max<size_t>(1, v.size() / 4000);
    for (size_t i = 0; i < v.size(); i += step) {
      s.points.emplace_back(v[i], static_cast<double>(i + 1) / v.size());
    }
    s.points.emplace_back(v.back(), 1.0);
    cdf.push_back(std::move(s));
  }
  if (!cdf.empty()) {
    auto svg = Plot(
        dir, "statread-latency-cdf", "statread: memory.stat read latency CDF",
        "latency (us, log)", "fraction of reads", true, cdf, "steps");
    if (!svg.ok()) return svg.status();
    written.push_back(svg.value());
  }
  return written;
}

}  // namespace umemcg::bench

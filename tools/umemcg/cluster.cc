// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "cluster.h"

#include <poll.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <thread>

#include "format.h"
#include "top.h"

namespace umemcg::cli {
namespace {

std::optional<uint64_t> Bytes(Pages p) {
  if (p >= kPageCounterMax) return kUnlimitedBytes;
  return p.in_bytes();
}

std::string Seconds(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1fs",
                static_cast<double>(ms.count()) / 1000);
  return buf;
}

int Depth(const std::string& path) {
  return 1 + static_cast<int>(std::count(path.begin(), path.end(), '/'));
}

volatile sig_atomic_t g_interrupted = 0;
void OnSignal(int) { g_interrupted = 1; }

}  // namespace

std::string RenderClusterTree(const ClusterSnapshot& snapshot, bool raw) {
  // Reuse the tree drawing: a top row for the whole cluster, each group at
  // its depth.
  MetricsSnapshot shape;
  shape.groups.push_back({});
  for (const ClusterGroupInfo& g : snapshot.groups) {
    GroupSample s;
    s.path = g.path;
    s.depth = Depth(g.path);
    shape.groups.push_back(std::move(s));
  }
  const std::vector<std::string> labels = TreeLabels(shape);
  uint64_t total = 0;
  for (const ClusterGroupInfo& g : snapshot.groups) {
    if (Depth(g.path) == 1) total += g.usage.in_bytes();
  }
  Table table({"GROUP", "CURRENT", "MAX", "%MAX", "PEAK", "REFUSED", "EXPIRED",
               "LEASE EXPIRES"});
  table.AddRow(
      {"(cluster)", FormatSize(total, raw), "-", "-", "-", "-", "-", "-"});
  for (size_t i = 0; i < snapshot.groups.size(); ++i) {
    const ClusterGroupInfo& g = snapshot.groups[i];
    table.AddRow({labels[i + 1], FormatSize(Bytes(g.usage), raw),
                  FormatSize(Bytes(g.max), raw),
                  FormatPercent(Bytes(g.usage), Bytes(g.max)),
                  FormatSize(Bytes(g.peak), raw), std::to_string(g.max_events),
                  std::to_string(g.expired), ""});
    const std::string indent(static_cast<size_t>(Depth(g.path)) * 3, ' ');
    for (const ClusterLease& l : g.leases) {
      table.AddRow({indent + "· " + l.node, FormatSize(Bytes(l.pages), raw), "",
                    "", "", "", "", Seconds(l.expires_in)});
    }
  }
  return table.Render();
}

std::string RenderClusterTop(const ClusterSnapshot& before,
                             const ClusterSnapshot& now, bool raw,
                             size_t max_rows) {
  std::map<std::string_view, const ClusterGroupInfo*> previous;
  for (const ClusterGroupInfo& g : before.groups) previous[g.path] = &g;
  std::vector<const ClusterGroupInfo*> rows;
  for (const ClusterGroupInfo& g : now.groups) rows.push_back(&g);
  std::stable_sort(rows.begin(), rows.end(), [](auto* a, auto* b) {
    if (a->usage != b->usage) return a->usage > b->usage;
    return a->path < b->path;
  });
  auto delta = [](uint64_t cur, uint64_t old) {
    return cur >= old ? cur - old : cur;
  };
  Table table({"GROUP", "CURRENT", "MAX", "%MAX", "NODES", "LEASED", "+REFUSED",
               "+EXPIRED"});
  for (const ClusterGroupInfo* g : rows) {
    const auto it = previous.find(g->path);
    const ClusterGroupInfo* old = it == previous.end() ? nullptr : it->second;
    Pages leased;
    for (const ClusterLease& l : g->leases) leased = leased + l.pages;
    table.AddRow({g->path, FormatSize(Bytes(g->usage), raw),
                  FormatSize(Bytes(g->max), raw),
                  FormatPercent(Bytes(g->usage), Bytes(g->max)),
                  std::to_string(g->leases.size()),
                  FormatSize(Bytes(leased), raw),
                  std::to_string(delta(g->max_events_local,
                                       old ? old->max_events_local : 0)),
                  std::to_string(delta(g->expired, old ? old->expired : 0))});
  }
  return table.Render(max_rows);
}

int RunClusterTop(Cluster& cluster, const ClusterTopOptions& options) {
  auto sample = [&cluster]() -> std::optional<ClusterSnapshot> {
    StatusOr<ClusterSnapshot> s = cluster.Snapshot();
    if (s.ok()) return std::move(s).value();
    std::fprintf(stderr, "umemcg cluster top: %s\n",
                 std::string(s.status().message()).c_str());
    return std::nullopt;
  };
  std::optional<ClusterSnapshot> previous = sample();
  if (!previous) return 1;
  if (options.once) {
    std::this_thread::sleep_for(options.delay);
    std::optional<ClusterSnapshot> now = sample();
    if (!now) return 1;
    std::fputs(RenderClusterTop(*previous, *now, options.raw).c_str(), stdout);
    return 0;
  }
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  const bool interactive = !options.batch && isatty(STDOUT_FILENO);
  termios saved{};
  bool raw_tty = false;
  if (interactive && isatty(STDIN_FILENO) &&
      tcgetattr(STDIN_FILENO, &saved) == 0) {
    termios t = saved;
    t.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    t.c_cc[VMIN] = 0;
    t.c_cc[VTIME] = 0;
    raw_tty = tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0;
  }
  int rc = 0;
  for (int i = 0; !g_interrupted; ++i) {
    if (!interactive && options.iterations > 0 && i >= options.iterations) {
      break;
    }
    if (raw_tty) {
      pollfd in{STDIN_FILENO, POLLIN, 0};
      char key = 0;
      if (poll(&in, 1, static_cast<int>(options.delay.count())) > 0 &&
          read(STDIN_FILENO, &key, 1) == 1 && key == 'q') {
        break;
      }
    } else if (!WaitUnlessInterrupted(options.delay, g_interrupted)) {
      break;
    }
    if (g_interrupted) break;
    std::optional<ClusterSnapshot> now = sample();
    if (!now) {
      rc = 1;
      break;
    }
    std::string frame;
    if (interactive) frame = "\x1b[H\x1b[2J";  // home, clear screen
    char title[200];
    std::snprintf(title, sizeof(title),
                  "umemcg cluster top: %zu groups, redis %s, every %.1f s%s\n",
                  now->groups.size(), cluster.redis_address().c_str(),
                  static_cast<double>(options.delay.count()) / 1000,
                  raw_tty ? " (q quits)" : "");
    frame += title;
    frame += RenderClusterTop(*previous, *now, options.raw);
    if (!interactive) frame += "\n";
    std::fputs(frame.c_str(), stdout);
    std::fflush(stdout);
    previous = std::move(now);
  }
  if (raw_tty) tcsetattr(STDIN_FILENO, TCSANOW, &saved);
  return rc;
}

}  // namespace umemcg::cli

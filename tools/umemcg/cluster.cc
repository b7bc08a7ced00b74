// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "cluster.h"

#include <poll.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <optional>
#include <thread>

#include "format.h"
#include "terminal.h"
#include "top.h"
#include "umemcg/files.h"

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

namespace {

// Characters in UTF-8 text (every byte that is not a continuation byte).
size_t Chars(std::string_view s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  }));
}

// The first `n` characters of UTF-8 `s`.
std::string FirstChars(std::string_view s, size_t n) {
  size_t i = 0;
  for (size_t seen = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xc0) != 0x80 && seen++ == n) break;
  }
  return std::string(s.substr(0, i));
}

size_t LongestLine(const std::string& text) {
  size_t longest = 0, start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    longest = std::max(
        longest, Chars(std::string_view(text).substr(start, end - start)));
    start = end + 1;
  }
  return longest;
}

// A table no wider than `width` characters: the first column shortened
// with "…" (down to 12 characters), then columns dropped from the right
// (the first two stay). At most `max_rows` rows: the last shown says how
// many more there are.
std::string RenderFitted(std::vector<std::string> header,
                         std::vector<std::vector<std::string>> rows,
                         size_t width, size_t max_rows) {
  if (max_rows < rows.size()) {
    const size_t shown = max_rows > 0 ? max_rows - 1 : 0;
    const size_t more = rows.size() - shown;
    rows.resize(shown);
    std::vector<std::string> note(header.size());
    note[0] = "… " + std::to_string(more) + " more";
    rows.push_back(std::move(note));
  }
  auto render = [&] {
    Table table(header);
    for (const auto& r : rows) table.AddRow(r);
    return table.Render();
  };
  std::string out = render();
  while (LongestLine(out) > width) {
    size_t col0 = Chars(header[0]);
    for (const auto& r : rows) col0 = std::max(col0, Chars(r[0]));
    const size_t excess = LongestLine(out) - width;
    if (col0 > 12) {
      const size_t keep =
          std::max<size_t>(col0 > excess ? col0 - excess : 0, 12);
      for (auto& r : rows) {
        if (Chars(r[0]) > keep) r[0] = FirstChars(r[0], keep - 1) + "…";
      }
    } else if (header.size() > 2) {
      header.pop_back();
      for (auto& r : rows) r.pop_back();
    } else {
      break;
    }
    out = render();
  }
  return out;
}

}  // namespace

StatusOr<Pages> ParseClusterMax(std::string_view text) {
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  // memory.max takes an empty write as 0; an operator's empty argument is
  // a mistake (a shell variable that was not set), not "no memory".
  if (s.empty()) {
    return Status(StatusCode::kInvalidArgument,
                  "empty size (use a number with an optional K/M/G/T/P/E "
                  "suffix, or \"max\")");
  }
  return ParseMemoryLimit(s);
}

std::string RenderClusterTree(const ClusterSnapshot& snapshot, bool raw,
                              size_t width) {
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
  std::vector<std::vector<std::string>> rows;
  rows.push_back(
      {"(cluster)", FormatSize(total, raw), "-", "-", "-", "-", "-", "-"});
  for (size_t i = 0; i < snapshot.groups.size(); ++i) {
    const ClusterGroupInfo& g = snapshot.groups[i];
    const std::string& label = labels[i + 1];
    rows.push_back(
        {label, FormatSize(Bytes(g.usage), raw), FormatSize(Bytes(g.max), raw),
         FormatPercent(Bytes(g.usage), Bytes(g.max)),
         FormatSize(Bytes(g.peak), raw), std::to_string(g.max_events),
         std::to_string(g.expired), ""});
    if (g.leases.empty()) continue;
    // The lease rows keep the tree's guides: the label's prefix with its
    // own branch continued ("├─ " -> "│  ", "└─ " -> "   "), then a guide
    // down to the group's children if it has any.
    const std::string name(
        std::string_view(g.path).substr(g.path.rfind('/') + 1));
    constexpr std::string_view kBranch = "├─ ";  // same size as "└─ "
    const size_t guides = label.size() - name.size() - kBranch.size();
    std::string prefix = label.substr(0, guides);
    prefix +=
        label.compare(guides, kBranch.size(), kBranch) == 0 ? "│  " : "   ";
    const bool has_children =
        i + 1 < snapshot.groups.size() &&
        Depth(snapshot.groups[i + 1].path) > Depth(g.path);
    prefix += has_children ? "│  " : "   ";
    for (const ClusterLease& l : g.leases) {
      rows.push_back({prefix + "· " + l.node, FormatSize(Bytes(l.pages), raw),
                      "", "", "", "", "", Seconds(l.expires_in)});
    }
  }
  return RenderFitted({"GROUP", "CURRENT", "MAX", "%MAX", "PEAK", "REFUSED",
                       "EXPIRED", "LEASE EXPIRES"},
                      std::move(rows), width, SIZE_MAX);
}

size_t TerminalLines() {
  return ReadTerminalSize({.rows = 24, .cols = SIZE_MAX}).rows;
}

size_t TerminalColumns() {
  return ReadTerminalSize({.rows = 24, .cols = SIZE_MAX}, /*columns_env=*/true)
      .cols;
}

std::string RenderClusterTop(const ClusterSnapshot& before,
                             const ClusterSnapshot& now, bool raw,
                             size_t max_rows, size_t width) {
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
  std::vector<std::vector<std::string>> table;
  for (const ClusterGroupInfo* g : rows) {
    const auto it = previous.find(g->path);
    const ClusterGroupInfo* old = it == previous.end() ? nullptr : it->second;
    Pages leased;
    for (const ClusterLease& l : g->leases) leased = leased + l.pages;
    table.push_back(
        {g->path, FormatSize(Bytes(g->usage), raw),
         FormatSize(Bytes(g->max), raw),
         FormatPercent(Bytes(g->usage), Bytes(g->max)),
         std::to_string(g->leases.size()), FormatSize(Bytes(leased), raw),
         std::to_string(
             delta(g->max_events_local, old ? old->max_events_local : 0)),
         std::to_string(delta(g->expired, old ? old->expired : 0))});
  }
  return RenderFitted({"GROUP", "CURRENT", "MAX", "%MAX", "NODES", "LEASED",
                       "+REFUSED", "+EXPIRED"},
                      std::move(table), width, max_rows);
}

int RunClusterTop(Cluster& cluster, const ClusterTopOptions& options) {
  auto sample = [&cluster]() -> std::optional<ClusterSnapshot> {
    StatusOr<ClusterSnapshot> s = cluster.Snapshot();
    if (s.ok()) return std::move(s).value();
    std::fprintf(stderr, "umemcg cluster top: %s\n",
                 std::string(s.status().message()).c_str());
    return std::nullopt;
  };
  // While refreshing, a lost connection (a Redis restart) is shown and
  // retried at the next refresh; other errors end top.
  auto refresh =
      [&cluster](std::string* error) -> std::optional<ClusterSnapshot> {
    StatusOr<ClusterSnapshot> s = cluster.Snapshot();
    if (s.ok()) return std::move(s).value();
    if (s.status().code() == StatusCode::kAgain) {
      *error = std::string(s.status().message());
    } else {
      std::fprintf(stderr, "umemcg cluster top: %s\n",
                   std::string(s.status().message()).c_str());
    }
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
    std::string error;
    std::optional<ClusterSnapshot> now = refresh(&error);
    if (!now && error.empty()) {
      rc = 1;
      break;
    }
    std::string frame;
    if (interactive) frame = "\x1b[H\x1b[2J";  // home, clear screen
    if (!now) {
      frame += "umemcg cluster top: redis " + cluster.redis_address() +
               " unreachable, reconnecting (" + error + ")\n";
      if (!interactive) frame += "\n";
      std::fputs(frame.c_str(), stdout);
      std::fflush(stdout);
      continue;
    }
    char title[200];
    std::snprintf(title, sizeof(title),
                  "umemcg cluster top: %zu groups, redis %s, every %.1f s%s\n",
                  now->groups.size(), cluster.redis_address().c_str(),
                  static_cast<double>(options.delay.count()) / 1000,
                  raw_tty ? " (q quits)" : "");
    frame += title;
    if (interactive) {
      const size_t lines = TerminalLines();
      frame += RenderClusterTop(*previous, *now, options.raw,
                                lines > 3 ? lines - 3 : 1, TerminalColumns());
    } else {
      frame += RenderClusterTop(*previous, *now, options.raw);
    }
    if (!interactive) frame += "\n";
    std::fputs(frame.c_str(), stdout);
    std::fflush(stdout);
    previous = std::move(now);
  }
  if (raw_tty) tcsetattr(STDIN_FILENO, TCSANOW, &saved);
  return rc;
}

}  // namespace umemcg::cli

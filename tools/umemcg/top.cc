// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "top.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <thread>
#include <vector>

#include "format.h"

namespace umemcg::cli {
namespace {

// The memory.events keys shown, in column order.
constexpr const char* kEventKeys[] = {"low", "high", "max", "oom", "oom_kill"};
constexpr size_t kNumEventKeys = std::size(kEventKeys);

struct Row {
  const GroupSample* group;
  uint64_t delta[kNumEventKeys] = {};
  uint64_t delta_sum = 0;
  double percent = -1;  // -1: no finite max
};

uint64_t EventValue(const GroupSample& g, std::string_view key) {
  for (const auto& [k, v] : g.events) {
    if (k == key) return v;
  }
  return 0;
}

volatile sig_atomic_t g_interrupted = 0;
void OnSignal(int) { g_interrupted = 1; }

// Raw keyboard input while top runs on a terminal; restored on scope exit.
class RawTerminal {
 public:
  RawTerminal() {
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  bool active() const { return active_; }

 private:
  termios saved_{};
  bool active_ = false;
};

size_t TerminalRows() {
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) {
    return ws.ws_row;
  }
  return 24;
}

StatusOr<MetricsSnapshot> Sample(Target& target) {
  return CollectMetrics(*target.reader, target.group,
                        {.stat = false, .cgroup = false});
}

}  // namespace

std::optional<TopOrder> ParseTopOrder(std::string_view name) {
  for (TopOrder o : {TopOrder::kCurrent, TopOrder::kMax, TopOrder::kPercent,
                     TopOrder::kEvents, TopOrder::kName}) {
    if (name == TopOrderName(o)) return o;
  }
  return std::nullopt;
}

const char* TopOrderName(TopOrder order) {
  switch (order) {
    case TopOrder::kCurrent:
      return "current";
    case TopOrder::kMax:
      return "max";
    case TopOrder::kPercent:
      return "percent";
    case TopOrder::kEvents:
      return "events";
    case TopOrder::kName:
      return "name";
  }
  return "?";
}

namespace {

// memory.pressure's some avg10 (percent of the last 10 s a charger of the
// group was stalled), "-" without the file.
std::string FormatPressure10(const GroupSample& g) {
  if (!g.pressure) return "-";
  const uint64_t c = g.pressure->some.avg10;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llu.%02llu",
                static_cast<unsigned long long>(c / 100),
                static_cast<unsigned long long>(c % 100));
  return buf;
}

}  // namespace

std::string RenderTop(const MetricsSnapshot& before, const MetricsSnapshot& now,
                      TopOrder order, bool raw, size_t max_rows) {
  std::map<std::string_view, const GroupSample*> previous;
  for (const GroupSample& g : before.groups) previous[g.path] = &g;
  std::vector<Row> rows;
  rows.reserve(now.groups.size());
  for (const GroupSample& g : now.groups) {
    Row r{&g};
    const auto it = previous.find(g.path);
    for (size_t k = 0; k < kNumEventKeys; ++k) {
      const uint64_t cur = EventValue(g, kEventKeys[k]);
      const uint64_t old =
          it == previous.end() ? 0 : EventValue(*it->second, kEventKeys[k]);
      r.delta[k] = cur >= old ? cur - old : cur;  // a recreated group
      r.delta_sum += r.delta[k];
    }
    if (g.current && g.max && *g.max != kUnlimitedBytes && *g.max > 0) {
      r.percent = static_cast<double>(*g.current) / static_cast<double>(*g.max);
    }
    rows.push_back(r);
  }
  const auto value = [order](const Row& r) -> double {
    switch (order) {
      case TopOrder::kCurrent:
        return static_cast<double>(r.group->current.value_or(0));
      case TopOrder::kMax:
        // Unlimited sorts last, below every finite limit.
        return r.group->max && *r.group->max != kUnlimitedBytes
                   ? static_cast<double>(*r.group->max)
                   : -1;
      case TopOrder::kPercent:
        return r.percent;
      case TopOrder::kEvents:
        return static_cast<double>(r.delta_sum);
      case TopOrder::kName:
        return 0;
    }
    return 0;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
    const double va = value(a), vb = value(b);
    if (va != vb) return va > vb;
    return a.group->path < b.group->path;
  });
  Table table({"GROUP", "CURRENT", "HIGH", "MAX", "%MAX", "SOME10", "+LOW",
               "+HIGH", "+MAX", "+OOM", "+KILL"});
  for (const Row& r : rows) {
    const GroupSample& g = *r.group;
    std::vector<std::string> cells{
        g.path.empty() ? "/" : g.path,   FormatSize(g.current, raw),
        FormatSize(g.high, raw),         FormatSize(g.max, raw),
        FormatPercent(g.current, g.max), FormatPressure10(g)};
    for (const uint64_t d : r.delta) cells.push_back(std::to_string(d));
    table.AddRow(std::move(cells));
  }
  return table.Render(max_rows);
}

namespace {

// A snapshot, or the error reported on stderr.
std::optional<MetricsSnapshot> SampleOrReport(Target& target) {
  StatusOr<MetricsSnapshot> s = Sample(target);
  if (s.ok()) return std::move(s.value());
  std::fprintf(stderr, "umemcg top: %s\n",
               std::string(s.status().message()).c_str());
  return std::nullopt;
}

// The sort order a key selects ('c', 'm', 'p', 'e', 'n').
std::optional<TopOrder> OrderForKey(char key) {
  static constexpr std::pair<char, TopOrder> kKeys[] = {
      {'c', TopOrder::kCurrent},
      {'m', TopOrder::kMax},
      {'p', TopOrder::kPercent},
      {'e', TopOrder::kEvents},
      {'n', TopOrder::kName}};
  for (const auto& [k, order] : kKeys) {
    if (k == key) return order;
  }
  return std::nullopt;
}

// Prints a table per refresh until `iterations` (0: a signal).
int RunBatch(Target& target, const TopOptions& options,
             MetricsSnapshot previous) {
  for (int i = 0; !g_interrupted; ++i) {
    if (options.iterations > 0 && i >= options.iterations) break;
    if (!WaitUnlessInterrupted(options.delay, g_interrupted)) break;
    std::optional<MetricsSnapshot> now = SampleOrReport(target);
    if (!now) return 1;
    std::fputs(
        (RenderTop(previous, *now, options.order, options.raw) + "\n").c_str(),
        stdout);
    std::fflush(stdout);
    previous = std::move(*now);
  }
  return 0;
}

// Redraws the terminal each refresh and answers keys until 'q' or a
// signal.
int RunInteractive(Target& target, const TopOptions& options,
                   MetricsSnapshot previous) {
  RawTerminal terminal;  // restored on every return below
  TopOrder order = options.order;
  while (!g_interrupted) {
    std::optional<MetricsSnapshot> now = SampleOrReport(target);
    if (!now) return 1;
    const size_t rows = TerminalRows();
    char title[160];
    std::snprintf(title, sizeof(title),
                  "umemcg top: %zu groups, every %.1f s, order %s "
                  "(keys c m p e n, q quits)\n",
                  now->groups.size(),
                  static_cast<double>(options.delay.count()) / 1000,
                  TopOrderName(order));
    std::string frame = "\x1b[H\x1b[2J";  // home, clear screen
    frame += title;
    frame +=
        RenderTop(previous, *now, order, options.raw, rows > 3 ? rows - 3 : 1);
    std::fputs(frame.c_str(), stdout);
    std::fflush(stdout);
    previous = std::move(*now);
    // Wait for the next refresh, answering keys meanwhile.
    pollfd in{STDIN_FILENO, POLLIN, 0};
    const int ready = poll(&in, terminal.active() ? 1 : 0,
                           static_cast<int>(options.delay.count()));
    char key = 0;
    if (ready > 0 && (in.revents & POLLIN) != 0 &&
        read(STDIN_FILENO, &key, 1) == 1) {
      if (key == 'q') return 0;
      order = OrderForKey(key).value_or(order);
    }
  }
  return 0;
}

}  // namespace

bool WaitUnlessInterrupted(std::chrono::milliseconds delay,
                           const volatile sig_atomic_t& interrupted) {
  // poll returns on a signal (EINTR; it is never restarted), where
  // sleep_for sleeps on. Slices bound the wait for a signal that arrives
  // between the check and the poll.
  constexpr std::chrono::milliseconds kSlice{100};
  const auto deadline = std::chrono::steady_clock::now() + delay;
  while (!interrupted) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return true;
    (void)poll(nullptr, 0, static_cast<int>(std::min(left, kSlice).count()));
  }
  return false;
}

int RunTop(Target& target, const TopOptions& options) {
  std::optional<MetricsSnapshot> before = SampleOrReport(target);
  if (!before) return 1;
  if (options.once) {
    std::this_thread::sleep_for(options.delay);
    std::optional<MetricsSnapshot> now = SampleOrReport(target);
    if (!now) return 1;
    std::fputs(RenderTop(*before, *now, options.order, options.raw).c_str(),
               stdout);
    return 0;
  }
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  if (!options.batch && isatty(STDOUT_FILENO)) {
    return RunInteractive(target, options, std::move(*before));
  }
  return RunBatch(target, options, std::move(*before));
}

}  // namespace umemcg::cli

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "top.h"

#include <poll.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <thread>
#include <vector>

#include "format.h"
#include "terminal.h"

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

// The columns after GROUP, in order: a header and the cell of a row. A
// column is one row here.
struct Column {
  const char* header;
  std::string (*cell)(const Row& r, bool raw);
};

template <size_t K>
std::string EventDelta(const Row& r, bool) {
  return std::to_string(r.delta[K]);
}

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

constexpr Column kColumns[] = {
    {"CURRENT",
     [](const Row& r, bool raw) { return FormatSize(r.group->current, raw); }},
    {"HIGH",
     [](const Row& r, bool raw) { return FormatSize(r.group->high, raw); }},
    {"MAX",
     [](const Row& r, bool raw) { return FormatSize(r.group->max, raw); }},
    {"%MAX",
     [](const Row& r, bool) {
       return FormatPercent(r.group->current, r.group->max);
     }},
    {"SOME10", [](const Row& r, bool) { return FormatPressure10(*r.group); }},
    {"+LOW", EventDelta<0>},
    {"+HIGH", EventDelta<1>},
    {"+MAX", EventDelta<2>},
    {"+OOM", EventDelta<3>},
    {"+KILL", EventDelta<4>},
};

volatile sig_atomic_t g_interrupted = 0;
void OnSignal(int) { g_interrupted = 1; }
volatile sig_atomic_t g_resized = 0;
void OnResize(int) { g_resized = 1; }

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

// The terminal's size when it does not say.
constexpr TerminalSize kDefaultTerminalSize = {.rows = 24, .cols = 80};

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

std::string RenderTop(const MetricsSnapshot& before, const MetricsSnapshot& now,
                      TopOrder order, bool raw, size_t max_rows, size_t width) {
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
  // Rows that fit; the last line then says how many did not.
  const size_t shown = std::min(rows.size(), max_rows);
  std::vector<std::vector<std::string>> cells(shown);
  std::vector<size_t> col_width(std::size(kColumns));
  for (size_t c = 0; c < std::size(kColumns); ++c) {
    col_width[c] = DisplayWidth(kColumns[c].header);
  }
  for (size_t i = 0; i < shown; ++i) {
    for (size_t c = 0; c < std::size(kColumns); ++c) {
      cells[i].push_back(kColumns[c].cell(rows[i], raw));
      col_width[c] = std::max(col_width[c], DisplayWidth(cells[i].back()));
    }
  }
  // GROUP gets what the other columns (two spaces before each) leave, but
  // at least kMinPathWidth, its longest path or half the width, whichever is
  // least: on a narrow terminal the
  // rightmost columns go first, whole, so that paths stay readable.
  constexpr size_t kMinPathWidth = 24;
  size_t longest = DisplayWidth("GROUP");
  for (size_t i = 0; i < shown; ++i) {
    longest = std::max(longest, DisplayWidth(rows[i].group->path));
  }
  size_t ncols = std::size(kColumns);
  size_t others = 0;
  for (const size_t w : col_width) others += 2 + w;
  size_t path_width = SIZE_MAX;
  if (width != SIZE_MAX) {
    const size_t min_path = std::min(
        {longest, kMinPathWidth, std::max(width / 2, DisplayWidth("GROUP"))});
    while (ncols > 1 && others + min_path > width) {
      --ncols;
      others -= 2 + col_width[ncols];
    }
    path_width = std::max(width > others ? width - others : 0, min_path);
  }
  std::vector<std::string> header{"GROUP"};
  for (size_t c = 0; c < ncols; ++c) header.emplace_back(kColumns[c].header);
  Table table(std::move(header));
  for (size_t i = 0; i < shown; ++i) {
    const std::string& path = rows[i].group->path;
    cells[i].resize(ncols);
    cells[i].insert(cells[i].begin(),
                    ShortenPath(path.empty() ? "/" : path, path_width));
    table.AddRow(std::move(cells[i]));
  }
  std::string out = table.Render();
  if (shown < rows.size()) {
    out += "\u2026 " + std::to_string(rows.size() - shown) + " more\n";
  }
  if (width == SIZE_MAX) return out;
  // Narrower than the columns themselves: every line is cut at the edge.
  std::string fitted;
  size_t pos = 0;
  while (pos < out.size()) {
    const size_t nl = out.find('\n', pos);
    fitted += CutToWidth(std::string_view(out).substr(pos, nl - pos), width);
    fitted += '\n';
    pos = nl + 1;
  }
  return fitted;
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
  // Read at start and again after each SIGWINCH (which also ends the
  // wait below, so the frame is redrawn for the new size at once).
  TerminalSize size = ReadTerminalSize(kDefaultTerminalSize);
  std::optional<MetricsSnapshot> now = SampleOrReport(target);
  if (!now) return 1;
  while (!g_interrupted) {
    if (g_resized) {
      g_resized = 0;
      size = ReadTerminalSize(kDefaultTerminalSize);
    }
    char title[160];
    std::snprintf(title, sizeof(title),
                  "umemcg top: %zu groups, every %.1f s, order %s "
                  "(keys c m p e n, q quits)",
                  now->groups.size(),
                  static_cast<double>(options.delay.count()) / 1000,
                  TopOrderName(order));
    std::string frame = "\x1b[H\x1b[2J";  // home, clear screen
    frame += CutToWidth(title, size.cols);
    frame += '\n';
    // Title, header and the "… N more" line take three rows; the last
    // line ends without a newline, so the screen never scrolls.
    std::string table = RenderTop(previous, *now, order, options.raw,
                                  size.rows > 3 ? size.rows - 3 : 1, size.cols);
    if (!table.empty() && table.back() == '\n') table.pop_back();
    frame += table;
    std::fputs(frame.c_str(), stdout);
    std::fflush(stdout);
    // Wait for the next refresh, answering keys meanwhile; a resize
    // redraws the same sample at once.
    pollfd in{STDIN_FILENO, POLLIN, 0};
    const int ready = poll(&in, terminal.active() ? 1 : 0,
                           static_cast<int>(options.delay.count()));
    char key = 0;
    if (ready > 0 && (in.revents & POLLIN) != 0 &&
        read(STDIN_FILENO, &key, 1) == 1) {
      if (key == 'q') return 0;
      order = OrderForKey(key).value_or(order);
      continue;
    }
    if (ready < 0 && g_resized) continue;
    previous = std::move(*now);
    now = SampleOrReport(target);
    if (!now) return 1;
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
    // No SA_RESTART: the wait for input returns on a resize.
    struct sigaction sa {};
    sa.sa_handler = OnResize;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGWINCH, &sa, nullptr);
    return RunInteractive(target, options, std::move(*before));
  }
  return RunBatch(target, options, std::move(*before));
}

}  // namespace umemcg::cli

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// `umemcg top`: a refreshing table of groups like systemd-cgtop: usage,
// limits, percent of max and the memory events raised since the previous
// refresh, sorted. On a terminal it redraws in place, fitted to the
// terminal's size (read at start and on SIGWINCH: paths shortened in the
// middle, as many rows as fit, then "… N more"), and takes keys (c, m,
// p, e, n: order by current, max, percent, events, name; q quits);
// otherwise, or with --batch, it prints one table per refresh. --once
// prints a single table (events counted over one --delay).
//
// Thread safety: plain functions.

#ifndef UMEMCG_TOOLS_TOP_H_
#define UMEMCG_TOOLS_TOP_H_

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "commands.h"
#include "umemcg/metrics.h"

namespace umemcg::cli {

enum class TopOrder { kCurrent, kMax, kPercent, kEvents, kName };
// "current", "max", "percent", "events", "name".
std::optional<TopOrder> ParseTopOrder(std::string_view name);
const char* TopOrderName(TopOrder order);

struct TopOptions {
  TopOrder order = TopOrder::kCurrent;
  bool raw = false;
  std::chrono::milliseconds delay{1000};
  // Tables to print in batch mode; 0 = until interrupted.
  int iterations = 0;
  bool once = false;
  bool batch = false;  // batch mode even on a terminal
};

// One table of `now`'s groups; the event columns are the increase of each
// memory.events counter since `before` (a group absent from `before`
// counts from zero). Rows sorted by `order` (descending, name ascending for
// ties and for kName); at most `max_rows` rows, then a line "… N more"
// for the rest. With a `width`, no line is wider: group paths are
// shortened in the middle (ShortenPath) to what the other columns leave,
// the rightmost columns are dropped where paths would get fewer than 24
// columns, and lines are cut at `width` if even that does not fit. The
// default (batch mode, logs) keeps full paths and every column.
std::string RenderTop(const MetricsSnapshot& before, const MetricsSnapshot& now,
                      TopOrder order, bool raw, size_t max_rows = SIZE_MAX,
                      size_t width = SIZE_MAX);

// Runs the command on stdout; returns the exit status.
int RunTop(Target& target, const TopOptions& options);

// Waits `delay` between refreshes (also for `umemcg cluster top`); returns
// false early, within 100 ms, once a signal handler sets `interrupted`.
bool WaitUnlessInterrupted(std::chrono::milliseconds delay,
                           const volatile sig_atomic_t& interrupted);

}  // namespace umemcg::cli

#endif  // UMEMCG_TOOLS_TOP_H_

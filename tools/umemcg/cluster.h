// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// `umemcg cluster`: the cluster quota held in Redis (umemcg/cluster.h).
//
//   umemcg cluster [--redis URL] [--prefix P] set-max GROUP SIZE
//   umemcg cluster ... remove GROUP
//   umemcg cluster ... tree              groups, usage, max, each node's
//                                        lease and its expiry
//   umemcg cluster ... top [--once] [-b] [-d S] [-n N]
//                                        refreshing table: usage, max,
//                                        nodes, refusals since the last
//                                        refresh (q quits); fits the
//                                        terminal; a lost connection is
//                                        shown and retried
//
// The URL defaults to $UMEMCG_REDIS, then redis://127.0.0.1:6379/0; a
// redis-sentinel:// URL follows the sentinels' master.
//
// Thread safety: plain functions.

#ifndef UMEMCG_TOOLS_CLUSTER_H_
#define UMEMCG_TOOLS_CLUSTER_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "umemcg/cluster.h"

namespace umemcg::cli {

// A max for `set-max`: a size with an optional K/M/G/T/P/E suffix (the
// kernel's memparse) or "max". Unlike a memory.max write, an empty value is
// refused (kInvalidArgument).
StatusOr<Pages> ParseClusterMax(std::string_view text);

// The groups as a tree with their leases below each group (on the tree's
// guides). Output wider than `width` characters gets its first column
// shortened with "…" (to 12 characters at least), then loses columns from
// the right (GROUP and CURRENT stay).
std::string RenderClusterTree(const ClusterSnapshot& snapshot, bool raw,
                              size_t width = SIZE_MAX);

// $COLUMNS, else the terminal's width, else SIZE_MAX (not a terminal).
size_t TerminalColumns();
// The terminal's height in lines, else 24.
size_t TerminalLines();

// One `top` table: groups sorted by usage (descending, then name), with
// the refusals (max events, local) and expired leases since `before`.
// At most `max_rows` rows (the last then says "… N more") and `width`
// characters (as RenderClusterTree).
std::string RenderClusterTop(const ClusterSnapshot& before,
                             const ClusterSnapshot& now, bool raw,
                             size_t max_rows = SIZE_MAX,
                             size_t width = SIZE_MAX);

struct ClusterTopOptions {
  bool raw = false;
  bool once = false;
  bool batch = false;
  int iterations = 0;  // batch mode: tables to print (0: until a signal)
  std::chrono::milliseconds delay{1000};
};

// Runs `top` on stdout; the exit status.
int RunClusterTop(Cluster& cluster, const ClusterTopOptions& options);

}  // namespace umemcg::cli

#endif  // UMEMCG_TOOLS_CLUSTER_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Text output of the umemcg tool: sizes ("64.0M", or raw bytes), percents
// and left/right aligned tables whose first column may hold a tree drawn
// with box characters.
//
// Thread safety: plain functions and a value type.

#ifndef UMEMCG_TOOLS_FORMAT_H_
#define UMEMCG_TOOLS_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "umemcg/metrics.h"

namespace umemcg::cli {

// "-" when absent, "max" for kUnlimitedBytes; otherwise the byte count
// (raw) or a binary-prefixed size with one decimal ("512B", "4.0K",
// "1.5G").
std::string FormatSize(std::optional<uint64_t> bytes, bool raw);
// current / max in percent with one decimal; "-" without a finite max.
std::string FormatPercent(std::optional<uint64_t> current,
                          std::optional<uint64_t> max);

// Terminal columns `s` takes: its UTF-8 characters (every character is
// taken as one column; the tool prints no wide ones).
size_t DisplayWidth(std::string_view s);
// `path` made to fit `width` columns by shortening it in the middle, as
// systemd-cgtop does: the first component, "…", then as many of the last
// components as fit ("a/…/d/leaf"); else "…/leaf"; else the text with its
// middle replaced by "…". Unchanged when it fits.
std::string ShortenPath(std::string_view path, size_t width);
// The first `width` columns of `line` (whole UTF-8 characters).
std::string CutToWidth(std::string_view line, size_t width);

// Box-drawing prefixes for each group of a pre-order snapshot ("├─ ",
// "│  └─ ", ...), followed by the group's name (the top: its path, "/" for
// the root).
std::vector<std::string> TreeLabels(const MetricsSnapshot& snapshot);

// Columns are padded to their widest cell (counted in characters, not
// bytes); the first is left-aligned, the others right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> header);
  void AddRow(std::vector<std::string> row);
  // Lines end in '\n'; at most `max_rows` rows after the header.
  std::string Render(size_t max_rows = SIZE_MAX) const;

 private:
  std::vector<std::vector<std::string>> rows_;  // [0] is the header
};

}  // namespace umemcg::cli

#endif  // UMEMCG_TOOLS_FORMAT_H_

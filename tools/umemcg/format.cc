// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "format.h"

#include <algorithm>
#include <cstdio>

namespace umemcg::cli {
namespace {

// Characters in UTF-8 text: every byte that is not a continuation byte.
std::string_view LastComponent(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

size_t DisplayWidth(std::string_view s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  }));
}

std::string CutToWidth(std::string_view line, size_t width) {
  size_t cols = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if ((static_cast<unsigned char>(line[i]) & 0xc0) != 0x80) {
      if (cols == width) return std::string(line.substr(0, i));
      ++cols;
    }
  }
  return std::string(line);
}

namespace {

// The last `width` columns of `s` (whole UTF-8 characters).
std::string_view Tail(std::string_view s, size_t width) {
  size_t cols = 0;
  for (size_t i = s.size(); i > 0; --i) {
    if ((static_cast<unsigned char>(s[i - 1]) & 0xc0) != 0x80) {
      if (cols == width) return s.substr(i);
      ++cols;
    }
  }
  return s;
}

constexpr std::string_view kEllipsis = "\u2026";  // one column

}  // namespace

std::string ShortenPath(std::string_view path, size_t width) {
  if (DisplayWidth(path) <= width) return std::string(path);
  if (width == 0) return "";
  const size_t first_end = path.find('/');
  if (first_end != std::string_view::npos) {
    // "first/…" followed by the longest run of last components that fits.
    const std::string head = std::string(path.substr(0, first_end + 1));
    std::string best;
    for (size_t slash = path.rfind('/');
         slash != std::string_view::npos && slash > first_end;
         slash = path.rfind('/', slash - 1)) {
      std::string candidate =
          head + std::string(kEllipsis) + std::string(path.substr(slash));
      if (DisplayWidth(candidate) > width) break;
      best = std::move(candidate);
    }
    if (!best.empty()) return best;
    const std::string_view leaf = path.substr(path.rfind('/'));
    std::string candidate = std::string(kEllipsis) + std::string(leaf);
    if (DisplayWidth(candidate) <= width) return candidate;
  }
  // The middle of the text itself gives way.
  const size_t keep = width - 1;
  const size_t head_cols = (keep + 1) / 2;
  return CutToWidth(path, head_cols) + std::string(kEllipsis) +
         std::string(Tail(path, keep - head_cols));
}

std::string FormatSize(std::optional<uint64_t> bytes, bool raw) {
  if (!bytes) return "-";
  if (*bytes == kUnlimitedBytes) return "max";
  if (raw) return std::to_string(*bytes);
  if (*bytes < 1024) return std::to_string(*bytes) + "B";
  static constexpr char kUnits[] = "KMGTPE";
  double v = static_cast<double>(*bytes) / 1024;
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < sizeof(kUnits) - 1) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%c", v, kUnits[unit]);
  return buf;
}

std::string FormatPercent(std::optional<uint64_t> current,
                          std::optional<uint64_t> max) {
  if (!current || !max || *max == kUnlimitedBytes || *max == 0) return "-";
  char buf[32];
  std::snprintf(
      buf, sizeof(buf), "%.1f",
      100.0 * static_cast<double>(*current) / static_cast<double>(*max));
  return buf;
}

std::vector<std::string> TreeLabels(const MetricsSnapshot& snapshot) {
  const std::vector<GroupSample>& g = snapshot.groups;
  std::vector<std::string> labels;
  labels.reserve(g.size());
  // last[d]: the group open at depth d is its parent's last child.
  std::vector<bool> last;
  for (size_t i = 0; i < g.size(); ++i) {
    const int depth = g[i].depth;
    if (depth == 0) {  // the top: "/" or the group path asked for
      labels.emplace_back(g[i].path.empty() ? "/" : g[i].path);
      continue;
    }
    // Last sibling: no later group at this depth before one shallower.
    bool is_last = true;
    for (size_t j = i + 1; j < g.size() && g[j].depth >= depth; ++j) {
      if (g[j].depth == depth) {
        is_last = false;
        break;
      }
    }
    last.resize(static_cast<size_t>(depth) + 1);
    last[static_cast<size_t>(depth)] = is_last;
    std::string label;
    for (int d = 1; d < depth; ++d) {
      label += last[static_cast<size_t>(d)] ? "   " : "│  ";
    }
    label += is_last ? "└─ " : "├─ ";
    label += LastComponent(g[i].path);
    labels.push_back(std::move(label));
  }
  return labels;
}

Table::Table(std::vector<std::string> header) {
  rows_.push_back(std::move(header));
}

void Table::AddRow(std::vector<std::string> row) {
  rows_.push_back(std::move(row));
}

std::string Table::Render(size_t max_rows) const {
  const size_t nrows = std::min(
      rows_.size(), max_rows == SIZE_MAX ? rows_.size() : max_rows + 1);
  std::vector<size_t> width;
  for (size_t r = 0; r < nrows; ++r) {
    const auto& row = rows_[r];
    if (width.size() < row.size()) width.resize(row.size());
    for (size_t c = 0; c < row.size(); ++c) {
      width[c] = std::max(width[c], DisplayWidth(row[c]));
    }
  }
  std::string out;
  for (size_t r = 0; r < nrows; ++r) {
    const auto& row = rows_[r];
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - DisplayWidth(row[c]), ' ');
      if (c == 0) {
        line += row[c] + pad;
      } else {
        line += "  " + pad + row[c];
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace umemcg::cli

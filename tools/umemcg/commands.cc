// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "commands.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "format.h"

namespace umemcg::cli {
namespace {

// Files holding one size in bytes (or "max"), shown human-readable.
constexpr std::array<std::string_view, 12> kSizeFiles = {
    "memory.current",      "memory.min",           "memory.low",
    "memory.high",         "memory.max",           "memory.peak",
    "memory.swap.current", "memory.swap.high",     "memory.swap.max",
    "memory.swap.peak",    "memory.zswap.current", "memory.zswap.max"};

bool HasDotDot(std::string_view path) {
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    if (path.substr(pos, slash - pos) == "..") return true;
    pos = slash + 1;
  }
  return false;
}

}  // namespace

StatusOr<Target> OpenTarget(std::string_view target, std::string_view root) {
  Target t;
  if (root.empty()) {
    if (target.empty()) {
      return Status(StatusCode::kInvalidArgument, "empty target");
    }
    if (HasDotDot(target)) {
      return Status(StatusCode::kInvalidArgument,
                    "refusing a path with '..': '" + std::string(target) + "'");
    }
    StatusOr<std::unique_ptr<TreeReader>> r = TreeReader::ForDirectory(target);
    if (!r.ok()) return r.status();
    t.reader = std::move(r.value());
    return t;
  }
  std::string_view group = target;
  while (group.size() > 1 && group.back() == '/') group.remove_suffix(1);
  if (group == ".") group = {};
  if (Status s = ValidateGroupPath(group); !s.ok()) return s;
  StatusOr<std::unique_ptr<TreeReader>> r = TreeReader::ForDirectory(root);
  if (!r.ok()) return r.status();
  t.reader = std::move(r.value());
  t.group = std::string(group);
  // Resolve now, so a bad group fails before any command runs.
  StatusOr<std::vector<std::string>> probe = t.reader->Children(t.group);
  if (!probe.ok()) return probe.status();
  return t;
}

std::string RenderTree(const MetricsSnapshot& snapshot, bool raw) {
  Table table({"GROUP", "CURRENT", "HIGH", "MAX"});
  const std::vector<std::string> labels = TreeLabels(snapshot);
  for (size_t i = 0; i < snapshot.groups.size(); ++i) {
    const GroupSample& g = snapshot.groups[i];
    table.AddRow({labels[i], FormatSize(g.current, raw),
                  FormatSize(g.high, raw), FormatSize(g.max, raw)});
  }
  return table.Render();
}

StatusOr<std::string> TreeCommand(Target& target, bool raw) {
  StatusOr<MetricsSnapshot> s = CollectMetrics(
      *target.reader, target.group, {.stat = false, .cgroup = false});
  if (!s.ok()) return s.status();
  return RenderTree(s.value(), raw);
}

StatusOr<std::string> CatCommand(Target& target, std::string_view file,
                                 bool raw) {
  StatusOr<std::string> text = target.reader->Read(target.group, file);
  if (!text.ok() || raw) return text;
  for (const std::string_view size_file : kSizeFiles) {
    if (file != size_file) continue;
    const std::optional<uint64_t> bytes = ParseBytesFile(text.value());
    if (bytes) return FormatSize(bytes, false) + "\n";
  }
  return text;
}

Status SetCommand(Target& target, std::string_view file,
                  std::string_view value) {
  return target.reader->Write(target.group, file, value);
}

StatusOr<std::string> MetricsCommand(Target& target) {
  StatusOr<MetricsSnapshot> s = CollectMetrics(*target.reader, target.group);
  if (!s.ok()) return s.status();
  return FormatPrometheus(s.value());
}

Status ProfileCommand(Target& target, const std::string& out) {
  StatusOr<std::string> bytes =
      target.reader->Read(target.group, "memory.heap_profile");
  if (!bytes.ok()) return bytes.status();
  FILE* f = out == "-" ? stdout : std::fopen(out.c_str(), "wb");
  if (f == nullptr) {
    return Status(StatusCode::kPermissionDenied,
                  "cannot open " + out + ": " + std::strerror(errno));
  }
  const std::string& b = bytes.value();
  const bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size();
  const bool closed = f == stdout ? std::fflush(f) == 0 : std::fclose(f) == 0;
  if (!ok || !closed) {
    return Status(StatusCode::kResourceExhausted, "cannot write " + out);
  }
  return Status::Ok();
}

}  // namespace umemcg::cli

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Snapshot collection (one walk over a TreeReader) and the Prometheus text
// exposition. The collector reads only the files a cgroup-v2 hierarchy and
// a umemcg tree both have, so the same code describes both.

#include <charconv>
#include <cstdio>
#include <string>

#include "umemcg/cpu.h"
#include "umemcg/metrics.h"

namespace umemcg {
namespace {

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' ||
                        s.front() == '\n' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' ||
                        s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::optional<uint64_t> ParseU64(std::string_view s) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) {
    return std::nullopt;
  }
  return v;
}

std::string JoinPath(std::string_view parent, std::string_view child) {
  if (parent.empty()) return std::string(child);
  std::string p(parent);
  p += '/';
  p += child;
  return p;
}

std::optional<uint64_t> ReadBytes(TreeReader& r, const std::string& path,
                                  std::string_view name) {
  StatusOr<std::string> text = r.Read(path, name);
  if (!text.ok()) return std::nullopt;
  return ParseBytesFile(text.value());
}

std::vector<std::pair<std::string, uint64_t>> ReadKeyed(TreeReader& r,
                                                        const std::string& path,
                                                        std::string_view name) {
  StatusOr<std::string> text = r.Read(path, name);
  if (!text.ok()) return {};
  return ParseKeyedFile(text.value());
}

GroupSample ReadSample(TreeReader& r, std::string path, int depth,
                       const CollectOptions& options) {
  GroupSample s;
  s.path = std::move(path);
  s.depth = depth;
  s.current = ReadBytes(r, s.path, "memory.current");
  s.min = ReadBytes(r, s.path, "memory.min");
  s.low = ReadBytes(r, s.path, "memory.low");
  s.high = ReadBytes(r, s.path, "memory.high");
  s.max = ReadBytes(r, s.path, "memory.max");
  s.peak = ReadBytes(r, s.path, "memory.peak");
  s.events = ReadKeyed(r, s.path, "memory.events");
  s.events_local = ReadKeyed(r, s.path, "memory.events.local");
  if (options.stat) s.stat = ReadKeyed(r, s.path, "memory.stat");
  // A group bound to a cluster group (umemcg/cluster.h).
  StatusOr<std::string> cluster = r.Read(s.path, "memory.cluster.group");
  if (cluster.ok()) {
    s.cluster_group = std::string(TrimSpace(cluster.value()));
    s.cluster_max = ReadBytes(r, s.path, "memory.cluster.max");
    s.cluster_current = ReadBytes(r, s.path, "memory.cluster.current");
    s.cluster_stat = ReadKeyed(r, s.path, "memory.cluster.stat");
    s.cluster_events = ReadKeyed(r, s.path, "memory.cluster.events");
  }
  if (StatusOr<std::string> p = r.Read(s.path, "memory.pressure"); p.ok()) {
    s.pressure = ParsePressureFile(p.value());
  }
  if (options.cgroup) {
    s.cgroup_events = ReadKeyed(r, s.path, "cgroup.events");
    s.cgroup_stat = ReadKeyed(r, s.path, "cgroup.stat");
  }
  return s;
}

// ---- Exposition ----

// Label values escape backslash, double quote and newline.
void AppendEscaped(std::string& out, std::string_view v) {
  for (const char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

void AppendHeader(std::string& out, std::string_view name,
                  std::string_view type, std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void AppendGroupLabel(std::string& out, const GroupSample& g) {
  out += "group=\"";
  AppendEscaped(out, g.path.empty() ? std::string_view("/") : g.path);
  out += '"';
}

void AppendValue(std::string& out, uint64_t v) {
  out += ' ';
  out += std::to_string(v);
  out += '\n';
}

// A limit file's "max" is +Inf: every usage is below it.
void AppendBytesValue(std::string& out, uint64_t v) {
  if (v == kUnlimitedBytes) {
    out += " +Inf\n";
  } else {
    AppendValue(out, v);
  }
}

struct BytesFamily {
  const char* name;
  const char* help;
  std::optional<uint64_t> GroupSample::*field;
};

constexpr BytesFamily kBytesFamilies[] = {
    {"umemcg_memory_current_bytes",
     "Memory charged to the group and its descendants (memory.current).",
     &GroupSample::current},
    {"umemcg_memory_min_bytes", "Hard protection (memory.min).",
     &GroupSample::min},
    {"umemcg_memory_low_bytes", "Best-effort protection (memory.low).",
     &GroupSample::low},
    {"umemcg_memory_high_bytes",
     "Throttling limit (memory.high); +Inf when unlimited.",
     &GroupSample::high},
    {"umemcg_memory_max_bytes", "Hard limit (memory.max); +Inf when unlimited.",
     &GroupSample::max},
    {"umemcg_memory_peak_bytes", "Highest memory.current seen (memory.peak).",
     &GroupSample::peak},
    {"umemcg_cluster_max_bytes",
     "Max of the cluster group the group is bound to (memory.cluster.max); "
     "+Inf when unlimited.",
     &GroupSample::cluster_max},
    {"umemcg_cluster_current_bytes",
     "Leases of all nodes on the bound cluster group and below, as of the "
     "last reply from Redis (memory.cluster.current).",
     &GroupSample::cluster_current},
};

// What one item of a keyed file is, which decides its family: Prometheus
// wants one unit per family and counters typed as counters (cAdvisor's
// and node_exporter's conventions).
enum class ItemKind {
  kBytes,   // a size: a ..._bytes gauge
  kCount,   // an event count that only grows: a ..._total counter
  kFlag,    // 0 or 1: a gauge of its own
  kMillis,  // milliseconds: a ..._seconds gauge
  kGauge,   // any other level (descendant counts, populated)
};

bool HasPrefix(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
bool HasSuffix(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// memory.stat: the kernel's (and umemcg's built-in) event items are the
// vm events and the workingset, THP and zswap counts; everything else is
// bytes. A controller's snapshot also names its custom event items.
ItemKind MemoryStatKind(std::string_view key, const MetricsSnapshot& s) {
  for (const std::string& e : s.event_stat_items) {
    if (e == key) return ItemKind::kCount;
  }
  static constexpr std::string_view kEventPrefixes[] = {
      "pg",      "workingset_", "thp_",       "numa_",      "zswpin",
      "zswpout", "zswpwb",      "swpin_zero", "swpout_zero"};
  for (std::string_view p : kEventPrefixes) {
    if (HasPrefix(key, p)) return ItemKind::kCount;
  }
  return ItemKind::kBytes;
}

// memory.cluster.stat (umemcg/cluster.h): sizes end in _bytes, times in
// _ms, two flags; the rest are counts since the binding was made.
ItemKind ClusterStatKind(std::string_view key, const MetricsSnapshot&) {
  if (HasSuffix(key, "_bytes")) return ItemKind::kBytes;
  if (HasSuffix(key, "_ms")) return ItemKind::kMillis;
  if (key == "expired" || key == "connected") return ItemKind::kFlag;
  return ItemKind::kCount;
}

ItemKind AnyKind(std::string_view, const MetricsSnapshot&) {
  return ItemKind::kGauge;
}
ItemKind CountKind(std::string_view, const MetricsSnapshot&) {
  return ItemKind::kCount;
}

// One family: the items of `field` whose kind is `kind`. Adding a family
// is adding a row (docs/metrics.md lists them all).
struct KeyedFamily {
  const char* name;
  const char* type;
  const char* help;
  const char* label;
  std::vector<std::pair<std::string, uint64_t>> GroupSample::*field;
  ItemKind (*classify)(std::string_view key, const MetricsSnapshot& s);
  ItemKind kind;
};

constexpr KeyedFamily kKeyedFamilies[] = {
    {"umemcg_memory_events_total", "counter",
     "Memory events of the group and its descendants (memory.events).", "event",
     &GroupSample::events, CountKind, ItemKind::kCount},
    {"umemcg_memory_events_local_total", "counter",
     "Memory events raised on the group itself (memory.events.local).", "event",
     &GroupSample::events_local, CountKind, ItemKind::kCount},
    {"umemcg_memory_stat_bytes", "gauge",
     "memory.stat size items of the group's subtree, in bytes.", "item",
     &GroupSample::stat, MemoryStatKind, ItemKind::kBytes},
    {"umemcg_memory_stat_events_total", "counter",
     "memory.stat event items of the group's subtree (pgfault, workingset_*, "
     "...).",
     "item", &GroupSample::stat, MemoryStatKind, ItemKind::kCount},
    {"umemcg_cluster_stat_bytes", "gauge",
     "This node's lease on the bound cluster group, in bytes "
     "(memory.cluster.stat: lease, usage, chunk, room).",
     "item", &GroupSample::cluster_stat, ClusterStatKind, ItemKind::kBytes},
    {"umemcg_cluster_stat_seconds", "gauge",
     "Times of this node's lease on the bound cluster group, in seconds "
     "(memory.cluster.stat's _ms items).",
     "item", &GroupSample::cluster_stat, ClusterStatKind, ItemKind::kMillis},
    {"umemcg_cluster_stat_flag", "gauge",
     "Flags of this node's lease on the bound cluster group, 0 or 1 "
     "(memory.cluster.stat: expired, connected).",
     "item", &GroupSample::cluster_stat, ClusterStatKind, ItemKind::kFlag},
    {"umemcg_cluster_stat_events_total", "counter",
     "Counts of this node's lease operations on the bound cluster group "
     "(memory.cluster.stat: grants, refusals, returns, ...).",
     "item", &GroupSample::cluster_stat, ClusterStatKind, ItemKind::kCount},
    {"umemcg_cluster_events_total", "counter",
     "Refusals over the max of the bound cluster group or below, from all "
     "nodes (memory.cluster.events).",
     "event", &GroupSample::cluster_events, CountKind, ItemKind::kCount},
    {"umemcg_cgroup_events", "gauge",
     "cgroup.events of the group (populated: the subtree has memory charged "
     "in umemcg, a live task in the kernel; frozen).",
     "event", &GroupSample::cgroup_events, AnyKind, ItemKind::kGauge},
    {"umemcg_cgroup_stat", "gauge",
     "cgroup.stat of the group (live and dying descendants).", "item",
     &GroupSample::cgroup_stat, AnyKind, ItemKind::kGauge},
};

// memory.pressure: the stall totals as counters (seconds) and the
// averages as gauges (percent), as node_exporter's pressure collector.
void AppendPressure(std::string& out, const MetricsSnapshot& snapshot) {
  struct Total {
    const char* name;
    const char* help;
    PressureLine PressureStats::*line;
  };
  const Total totals[] = {
      {"umemcg_memory_pressure_some_seconds_total",
       "Time at least one thread charging the group was stalled for memory "
       "(memory.pressure some total).",
       &PressureStats::some},
      {"umemcg_memory_pressure_full_seconds_total",
       "Time every recent charger of the group was stalled for memory at "
       "once (memory.pressure full total).",
       &PressureStats::full},
  };
  char buf[64];
  for (const Total& t : totals) {
    bool any = false;
    for (const GroupSample& g : snapshot.groups) {
      if (!g.pressure) continue;
      if (!any) AppendHeader(out, t.name, "counter", t.help);
      any = true;
      const uint64_t us = ((*g.pressure).*t.line).total_us;
      std::snprintf(buf, sizeof buf, " %llu.%06llu\n",
                    static_cast<unsigned long long>(us / 1000000),
                    static_cast<unsigned long long>(us % 1000000));
      out += t.name;
      out += '{';
      AppendGroupLabel(out, g);
      out += '}';
      out += buf;
    }
  }
  bool any = false;
  for (const GroupSample& g : snapshot.groups) {
    if (!g.pressure) continue;
    if (!any) {
      AppendHeader(out, "umemcg_memory_pressure_avg", "gauge",
                   "Share of time stalled for memory, percent, averaged over "
                   "10, 60 and 300 s (memory.pressure avg10/60/300).");
    }
    any = true;
    for (const auto& [state, line] : {std::pair{"some", &g.pressure->some},
                                      std::pair{"full", &g.pressure->full}}) {
      const std::pair<const char*, uint64_t> windows[] = {
          {"10", line->avg10}, {"60", line->avg60}, {"300", line->avg300}};
      for (const auto& [window, centi] : windows) {
        std::snprintf(buf, sizeof buf, " %llu.%02llu\n",
                      static_cast<unsigned long long>(centi / 100),
                      static_cast<unsigned long long>(centi % 100));
        out += "umemcg_memory_pressure_avg{";
        AppendGroupLabel(out, g);
        out += ",state=\"";
        out += state;
        out += "\",window=\"";
        out += window;
        out += "\"}";
        out += buf;
      }
    }
  }
}

// A _ms item's label value drops the unit ("expires_in").
std::string_view LabelValue(std::string_view key, ItemKind kind) {
  if (kind == ItemKind::kMillis && HasSuffix(key, "_ms")) {
    key.remove_suffix(3);
  }
  return key;
}

void AppendMillisAsSeconds(std::string& out, uint64_t ms) {
  out += ' ';
  out += std::to_string(ms / 1000);
  out += '.';
  const std::string frac = std::to_string(ms % 1000);
  out.append(3 - frac.size(), '0');
  out += frac;
  out += '\n';
}

const char* FlushModeName(StatsFlushMode mode) {
  return mode == StatsFlushMode::kPerGroupSubtree ? "per_group_subtree"
                                                  : "global_whole_tree";
}

void AppendControllerInfo(std::string& out, const ControllerInfo& info) {
  AppendHeader(out, "umemcg_controller_info", "gauge",
               "The controller's settings as labels (value 1).");
  out += "umemcg_controller_info{batch=\"" + std::to_string(info.batch) +
         "\",cpus=\"" + std::to_string(info.nr_cpus) + "\",cpu_source=\"" +
         CpuSourceName(info.cpu_source) + "\",stock_slots=\"" +
         std::to_string(info.stock_slots) + "\",obj_stock_slots=\"" +
         std::to_string(info.obj_stock_slots) + "\",stats_flush=\"" +
         FlushModeName(info.stats_flush_mode) + "\"} 1\n";
  AppendHeader(out, "umemcg_controller_batch_pages", "gauge",
               "Pages charged per counter walk and cached per CPU per group.");
  out += "umemcg_controller_batch_pages";
  AppendValue(out, static_cast<uint64_t>(info.batch));
  AppendHeader(out, "umemcg_controller_cpus", "gauge",
               "Per-CPU shards (stocks) of the controller.");
  out += "umemcg_controller_cpus";
  AppendValue(out, static_cast<uint64_t>(info.nr_cpus));
}

}  // namespace

std::optional<uint64_t> ParseBytesFile(std::string_view text) {
  const std::string_view s = TrimSpace(text);
  if (s == "max") return kUnlimitedBytes;
  return ParseU64(s);
}

std::vector<std::pair<std::string, uint64_t>> ParseKeyedFile(
    std::string_view text) {
  std::vector<std::pair<std::string, uint64_t>> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = TrimSpace(text.substr(0, nl));
    text.remove_prefix(std::min(nl + 1, text.size()));
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0) continue;
    const std::optional<uint64_t> v = ParseU64(TrimSpace(line.substr(sp + 1)));
    if (v) out.emplace_back(std::string(line.substr(0, sp)), *v);
  }
  return out;
}

StatusOr<MetricsSnapshot> CollectMetrics(TreeReader& reader,
                                         std::string_view top,
                                         const CollectOptions& options) {
  if (Status s = ValidateGroupPath(top); !s.ok()) return s;
  MetricsSnapshot snapshot;
  struct Pending {
    std::string path;
    int depth;
  };
  std::vector<Pending> stack{{std::string(top), 0}};
  while (!stack.empty() && snapshot.groups.size() < options.max_groups) {
    Pending p = std::move(stack.back());
    stack.pop_back();
    StatusOr<std::vector<std::string>> children = reader.Children(p.path);
    if (!children.ok()) {
      // The top must exist; a group removed during the walk is skipped.
      if (snapshot.groups.empty()) return children.status();
      continue;
    }
    const std::vector<std::string>& names = children.value();
    for (auto it = names.rbegin(); it != names.rend(); ++it) {
      stack.push_back({JoinPath(p.path, *it), p.depth + 1});
    }
    snapshot.groups.push_back(
        ReadSample(reader, std::move(p.path), p.depth, options));
  }
  return snapshot;
}

MetricsSnapshot CollectMetrics(Controller& controller,
                               const CollectOptions& options) {
  std::unique_ptr<TreeReader> reader = TreeReader::ForController(controller);
  // The root always exists, so this cannot fail.
  MetricsSnapshot snapshot = CollectMetrics(*reader, "", options).value();
  snapshot.controller = controller.info();
  // Custom event items cannot be told from their names.
  for (size_t i = kNumBuiltinStatItems; i < controller.info().nr_stat_items;
       ++i) {
    const auto item = static_cast<StatItem>(i);
    if (controller.StatItemUnit(item) == StatUnit::kEvents) {
      snapshot.event_stat_items.emplace_back(controller.StatItemName(item));
    }
  }
  return snapshot;
}

std::string FormatPrometheus(const MetricsSnapshot& snapshot) {
  std::string out;
  out.reserve(256 + snapshot.groups.size() * 2048);
  for (const BytesFamily& f : kBytesFamilies) {
    bool any = false;
    for (const GroupSample& g : snapshot.groups) {
      const std::optional<uint64_t>& v = g.*f.field;
      if (!v) continue;
      if (!any) AppendHeader(out, f.name, "gauge", f.help);
      any = true;
      out += f.name;
      out += '{';
      AppendGroupLabel(out, g);
      out += '}';
      AppendBytesValue(out, *v);
    }
  }
  for (const KeyedFamily& f : kKeyedFamilies) {
    bool any = false;
    for (const GroupSample& g : snapshot.groups) {
      for (const auto& [key, value] : g.*f.field) {
        if (f.classify(key, snapshot) != f.kind) continue;
        if (!any) AppendHeader(out, f.name, f.type, f.help);
        any = true;
        out += f.name;
        out += '{';
        AppendGroupLabel(out, g);
        out += ',';
        out += f.label;
        out += "=\"";
        AppendEscaped(out, LabelValue(key, f.kind));
        out += "\"}";
        if (f.kind == ItemKind::kMillis) {
          AppendMillisAsSeconds(out, value);
        } else {
          AppendValue(out, value);
        }
      }
    }
  }
  bool any_cluster = false;
  for (const GroupSample& g : snapshot.groups) {
    if (!g.cluster_group) continue;
    if (!any_cluster) {
      AppendHeader(out, "umemcg_cluster_info", "gauge",
                   "The cluster group a group is bound to (value 1).");
    }
    any_cluster = true;
    out += "umemcg_cluster_info{";
    AppendGroupLabel(out, g);
    out += ",cluster_group=\"";
    AppendEscaped(out, *g.cluster_group);
    out += "\"} 1\n";
  }
  AppendPressure(out, snapshot);
  if (snapshot.controller) AppendControllerInfo(out, *snapshot.controller);
  return out;
}

}  // namespace umemcg

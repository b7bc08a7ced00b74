// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Metrics: a snapshot of a group tree's memory files and its Prometheus
// text exposition, taken either from a live Controller or from a cgroup-v2
// directory (a umemcg FUSE mount, or a real hierarchy such as
// /sys/fs/cgroup); and ServeMetrics, an HTTP endpoint serving /metrics.
//
// Both sources are read through the files they have in common
// (memory.current, .min, .low, .high, .max, .peak, .events, .events.local,
// .stat, and cgroup.events and cgroup.stat), so one collector and one
// formatter serve the library's server and the `umemcg metrics` command,
// and a mount reads back exactly like the controller behind it.
//
// Exposition (all per group, label group="a/b", "/" for the root):
//   umemcg_memory_{current,min,low,high,max,peak}_bytes   gauges; +Inf for
//                                                         an unlimited limit
//   umemcg_memory_events_total{event="max"}               memory.events
//   umemcg_memory_events_local_total{event="max"}         memory.events.local
//   umemcg_memory_stat_bytes{item="anon"}                 memory.stat sizes
//   umemcg_memory_stat_events_total{item="pgfault"}       memory.stat events
//   umemcg_cluster_info{cluster_group="t"} 1              a group bound to a
//   umemcg_cluster_{max,current}_bytes                    cluster group
//   umemcg_cluster_stat_bytes{item="lease_bytes"}         (umemcg/cluster.h):
//   umemcg_cluster_stat_seconds{item="expires_in"}        memory.cluster.*,
//   umemcg_cluster_stat_flag{item="connected"}            the stat split by
//   umemcg_cluster_stat_events_total{item="grants"}       unit and type
//   umemcg_cluster_events_total{event="max"}
//   umemcg_cgroup_events{event="populated"}               cgroup.events
//   umemcg_cgroup_stat{item="nr_dying_descendants"}       cgroup.stat
//   umemcg_controller_info{batch,cpus,cpu_source,...} 1   controller only
//   umemcg_controller_batch_pages, umemcg_controller_cpus
// Every family, its type and unit: docs/metrics.md.
// A file a group lacks (the root has no memory.current, a kernel group may
// not have the memory controller enabled) gives no sample.
//
// Thread safety: TreeReaders may be used from several threads at once
// (each call opens what it reads); CollectMetrics and FormatPrometheus are
// pure functions of their inputs. A MetricsServer's methods may be called
// from any thread; it serves from its own threads.

#ifndef UMEMCG_METRICS_H_
#define UMEMCG_METRICS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "umemcg/controller.h"
#include "umemcg/export.h"
#include "umemcg/pressure.h"
#include "umemcg/status.h"

namespace umemcg {

// ---- Reading a group tree ----

// Group paths are relative, '/'-separated ("a/b"; "" is the root) and may
// not contain "." or ".." components, empty components or NUL: anything
// else is kInvalidArgument, so no path can leave the tree.
UMEMCG_EXPORT Status ValidateGroupPath(std::string_view path);
// A file name: one non-empty component, not "." or "..".
UMEMCG_EXPORT Status ValidateFileName(std::string_view name);

// Reads (and writes) the memory files of a group tree.
class UMEMCG_EXPORT TreeReader {
 public:
  virtual ~TreeReader() = default;

  // The names of the child groups of `path`, sorted by name. kNotFound if
  // there is no such group.
  virtual StatusOr<std::vector<std::string>> Children(
      std::string_view path) = 0;
  // The text of file `name` of group `path`. Errors keep the errno of the
  // source (the file interface's, or the kernel's for a directory: the
  // message then names it).
  virtual StatusOr<std::string> Read(std::string_view path,
                                     std::string_view name) = 0;
  // Writes `text` to file `name` of group `path` in one write.
  virtual Status Write(std::string_view path, std::string_view name,
                       std::string_view text) = 0;

  // A reader of `controller`'s tree (not owned; must outlive the reader).
  static std::unique_ptr<TreeReader> ForController(Controller& controller);
  // A reader of the cgroup-v2 directory `dir` (followed if a symlink).
  // Below `dir` no symlink is followed: a group path resolves one
  // directory at a time (openat with O_NOFOLLOW). If `dir` is not an
  // openable directory: kNotFound (missing), kInvalidArgument (not a
  // directory) or kPermissionDenied.
  static StatusOr<std::unique_ptr<TreeReader>> ForDirectory(
      std::string_view dir);
};

// ---- Snapshots ----

// "max" in a limit file.
inline constexpr uint64_t kUnlimitedBytes = UINT64_MAX;

// One group's memory files, parsed; a field is empty when the group has no
// such file (or it could not be read).
struct GroupSample {
  std::string path;  // "a/b"; "" for the root
  int depth = 0;     // below the snapshot's top group
  std::optional<uint64_t> current, min, low, high, max, peak;  // bytes
  // "key value" lines in file order.
  std::vector<std::pair<std::string, uint64_t>> events;
  std::vector<std::pair<std::string, uint64_t>> events_local;
  std::vector<std::pair<std::string, uint64_t>> stat;
  // A group bound to a cluster group (umemcg/cluster.h): its
  // memory.cluster.* files.
  std::optional<std::string> cluster_group;
  std::optional<uint64_t> cluster_max, cluster_current;  // bytes
  std::vector<std::pair<std::string, uint64_t>> cluster_stat;
  std::vector<std::pair<std::string, uint64_t>> cluster_events;
  std::vector<std::pair<std::string, uint64_t>> cgroup_events;
  std::vector<std::pair<std::string, uint64_t>> cgroup_stat;
  // memory.pressure (umemcg/pressure.h).
  std::optional<PressureStats> pressure;
};

struct MetricsSnapshot {
  // Pre-order: each group before its children, siblings sorted by name.
  std::vector<GroupSample> groups;
  // Set when taken from a Controller.
  std::optional<ControllerInfo> controller;
  // memory.stat items that count events although their names do not say
  // so (a controller's custom kEvents items); the built-in and kernel
  // ones are known by name.
  std::vector<std::string> event_stat_items;
};

struct CollectOptions {
  // Read memory.stat (the largest file) too.
  bool stat = true;
  // Read cgroup.events and cgroup.stat too.
  bool cgroup = true;
  // Stop after this many groups (a bound for huge hierarchies).
  size_t max_groups = 100000;
};

// Walks `reader`'s tree from `top` ("" = the root) and reads every group.
// Groups that vanish during the walk are skipped. kNotFound / kInvalidArgument
// if `top` itself is missing / not a valid group path.
UMEMCG_EXPORT StatusOr<MetricsSnapshot> CollectMetrics(
    TreeReader& reader, std::string_view top = "",
    const CollectOptions& options = {});
// The whole tree of `controller`, with its settings.
UMEMCG_EXPORT MetricsSnapshot
CollectMetrics(Controller& controller, const CollectOptions& options = {});

// Parses one limit/usage file ("123\n" or "max\n"); nullopt if malformed.
UMEMCG_EXPORT std::optional<uint64_t> ParseBytesFile(std::string_view text);
// Parses a flat keyed file ("key value\n" lines); malformed lines skipped.
UMEMCG_EXPORT std::vector<std::pair<std::string, uint64_t>> ParseKeyedFile(
    std::string_view text);

// The Prometheus text exposition format (version 0.0.4) of `snapshot`.
UMEMCG_EXPORT std::string FormatPrometheus(const MetricsSnapshot& snapshot);

// ---- The HTTP endpoint ----

struct MetricsServerOptions {
  // Threads serving connections (1..64), one request per connection.
  int threads = 2;
  // Each read of a request waits at most read_timeout, each write at most
  // write_timeout, and a connection is closed after request_timeout
  // whatever it does: a slow or stuck client holds a thread at most that
  // long.
  std::chrono::milliseconds read_timeout{5000};
  std::chrono::milliseconds write_timeout{5000};
  std::chrono::milliseconds request_timeout{10000};
  // Accepted connections waiting for a thread; past it the accepting thread
  // serves the next one itself, so accepting slows down instead of queueing
  // without bound.
  size_t max_pending = 64;
};

// Serves GET /metrics on its own threads until stopped, and GET
// /debug/pprof/heap?group=PATH: the group's memory.heap_profile (a gzipped
// pprof heap profile of the subtree, heap_profile.h; 404 when the program
// installed no encoder or there is no such group). Every other path is
// 404, every other method 405 (Allow: GET), a malformed request 400; each
// answer closes the connection.
class UMEMCG_EXPORT MetricsServer {
 public:
  virtual ~MetricsServer() = default;
  // The port bound (the one picked when asked for port 0).
  virtual int port() const = 0;
  // "host:port" as bound ("[::1]:port" for IPv6).
  virtual std::string address() const = 0;
  // Stops accepting, waits for requests in flight (each done within
  // request_timeout), joins the threads. Idempotent; the destructor and
  // the controller's destruction call it.
  virtual void Stop() = 0;
  // Requests answered so far (any status).
  virtual uint64_t requests() const = 0;
};

// Binds `address` ("HOST:PORT", "[V6]:PORT", ":PORT" or "PORT"; no host
// means 127.0.0.1: loopback unless asked otherwise; port 0 picks a free
// one) and starts serving `controller`'s metrics. Returns when the server
// accepts connections. kInvalidArgument for a malformed address,
// kAddressInUse if the address is taken, kPermissionDenied if binding it
// is not allowed, kFailedPrecondition if binding fails otherwise or the
// library was built without cpp-httplib. `controller` must outlive the
// server or be destroyed first (which stops it).
UMEMCG_EXPORT StatusOr<std::unique_ptr<MetricsServer>> ServeMetrics(
    Controller& controller, std::string_view address = "127.0.0.1:0",
    const MetricsServerOptions& options = {});

}  // namespace umemcg

#endif  // UMEMCG_METRICS_H_

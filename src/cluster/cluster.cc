// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Cluster: options, connection, administration scripts, binding.

#include "umemcg/cluster.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <random>

#include "cluster/binding.h"
#include "cluster/cluster_core.h"
#include "cluster/scripts.h"

namespace umemcg {

using cluster_internal::ClusterCore;
using cluster_internal::Reply;

namespace {

Status Invalid(const std::string& what) {
  return Status(StatusCode::kInvalidArgument, what);
}

bool HasControl(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  }
  return false;
}

// A cluster group path: '/'-separated non-empty components, none "." or
// "..", no control characters, at most 512 bytes.
Status ValidateClusterPath(std::string_view path) {
  if (path.empty()) return Invalid("empty cluster group path");
  if (path.size() > 512) return Invalid("cluster group path too long");
  if (HasControl(path)) {
    return Invalid("control character in cluster group path");
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view c = path.substr(start, end - start);
    if (c.empty() || c == "." || c == "..") {
      return Invalid("bad cluster group path '" + std::string(path) + "'");
    }
    start = end + 1;
  }
  return Status::Ok();
}

std::string DefaultNodeName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == 0) {
    std::snprintf(host, sizeof(host), "node");
  }
  std::random_device rd;
  char suffix[16];
  std::snprintf(suffix, sizeof(suffix), "%08x", rd());
  return std::string(host) + ":" + std::to_string(getpid()) + ":" + suffix;
}

Status ValidateOptions(ClusterOptions& o) {
  using std::chrono::milliseconds;
  if (o.key_prefix.empty() || o.key_prefix.size() > 128 ||
      HasControl(o.key_prefix) ||
      o.key_prefix.find_first_of("{}") != std::string::npos) {
    return Invalid(
        "key_prefix must be 1..128 characters without { } or "
        "control characters");
  }
  if (o.node_name.empty()) o.node_name = DefaultNodeName();
  if (o.node_name.size() > 256 || HasControl(o.node_name)) {
    return Invalid(
        "node_name must be at most 256 characters without "
        "control characters");
  }
  if (o.lease_ttl < milliseconds(100) || o.lease_ttl > milliseconds(3600000)) {
    return Invalid("lease_ttl must be 100 ms .. 1 hour");
  }
  if (o.connect_timeout.count() <= 0 || o.command_timeout.count() <= 0) {
    return Invalid("timeouts must be positive");
  }
  if (o.poll_interval.count() <= 0) {
    return Invalid("poll_interval must be positive");
  }
  if (o.backoff_cap < o.poll_interval) {
    return Invalid("backoff_cap must be at least poll_interval");
  }
  const milliseconds margin =
      o.safety_margin.count() > 0 ? o.safety_margin : o.lease_ttl / 5;
  const milliseconds heartbeat =
      o.heartbeat.count() > 0 ? o.heartbeat : o.lease_ttl / 3;
  if (o.safety_margin.count() < 0 || o.heartbeat.count() < 0 ||
      margin >= o.lease_ttl || heartbeat + margin >= o.lease_ttl) {
    return Invalid("heartbeat + safety_margin must be below lease_ttl");
  }
  if (o.min_chunk.raw() == 0 || o.max_chunk < o.min_chunk ||
      o.max_chunk > kPageCounterMax) {
    return Invalid("need 0 < min_chunk <= max_chunk");
  }
  return Status::Ok();
}

// Runs an administration script (may reconnect; waits for the connection
// up to the command timeout).
StatusOr<Reply> Admin(ClusterCore& core, const char* script,
                      const std::vector<std::string>& args) {
  StatusOr<Reply> r =
      core.Run(script, args, /*may_reconnect=*/true,
               core.options().command_timeout + core.options().connect_timeout);
  if (!r.ok()) return r.status();
  if (r.value().is_error()) return cluster_internal::ScriptError(r.value());
  return r;
}

int64_t IntOr0(const Reply& r) {
  return r.type == Reply::Type::kInteger ? r.integer : 0;
}

Pages PagesOf(const Reply& r) {
  const int64_t v = IntOr0(r);
  return Pages(v > 0 ? static_cast<uint64_t>(v) : 0);
}

}  // namespace

StatusOr<std::unique_ptr<Cluster>> Cluster::Connect(ClusterOptions options) {
  Status s = ValidateOptions(options);
  if (!s.ok()) return s;
  std::string url_text = options.redis_url;
  if (url_text.empty()) {
    if (const char* env = std::getenv("UMEMCG_REDIS")) url_text = env;
  }
  StatusOr<cluster_internal::RedisUrl> url =
      cluster_internal::ParseRedisUrl(url_text);
  if (!url.ok()) return url.status();
  auto core =
      std::make_shared<ClusterCore>(std::move(options), std::move(url).value());
  s = core->Start();
  if (!s.ok()) return s;
  return std::unique_ptr<Cluster>(new Cluster(std::move(core)));
}

Cluster::Cluster(std::shared_ptr<ClusterCore> core) : core_(std::move(core)) {}

Cluster::~Cluster() { core_->Stop(); }

Status Cluster::SetMax(std::string_view group, Pages max) {
  Status s = ValidateClusterPath(group);
  if (!s.ok()) return s;
  const uint64_t pages = std::min(max.raw(), kPageCounterMax.raw());
  StatusOr<Reply> r = Admin(*core_, cluster_internal::kSetMaxScript,
                            {std::string(group), std::to_string(pages)});
  if (!r.ok()) return r.status();
  core_->Wake();  // bindings learn the new room at their next request
  return Status::Ok();
}

Status Cluster::RemoveGroup(std::string_view group) {
  Status s = ValidateClusterPath(group);
  if (!s.ok()) return s;
  StatusOr<Reply> r =
      Admin(*core_, cluster_internal::kRemoveScript, {std::string(group)});
  return r.ok() ? Status::Ok() : r.status();
}

StatusOr<ClusterSnapshot> Cluster::Snapshot() {
  StatusOr<Reply> r = Admin(*core_, cluster_internal::kSnapshotScript, {});
  if (!r.ok()) return r.status();
  const Reply& top = r.value();
  const Status malformed(StatusCode::kFailedPrecondition,
                         "redis: malformed snapshot reply");
  if (top.type != Reply::Type::kArray || top.elements.size() != 2 ||
      top.elements[1].type != Reply::Type::kArray) {
    return malformed;
  }
  ClusterSnapshot snap;
  for (const Reply& g : top.elements[1].elements) {
    if (g.type != Reply::Type::kArray || g.elements.size() != 8 ||
        g.elements[0].type != Reply::Type::kString ||
        g.elements[7].type != Reply::Type::kArray) {
      return malformed;
    }
    ClusterGroupInfo info;
    info.path = g.elements[0].str;
    info.max = PagesOf(g.elements[1]);
    info.usage = PagesOf(g.elements[2]);
    info.peak = PagesOf(g.elements[3]);
    info.max_events = static_cast<uint64_t>(IntOr0(g.elements[4]));
    info.max_events_local = static_cast<uint64_t>(IntOr0(g.elements[5]));
    info.expired = static_cast<uint64_t>(IntOr0(g.elements[6]));
    for (const Reply& l : g.elements[7].elements) {
      if (l.type != Reply::Type::kArray || l.elements.size() != 3 ||
          l.elements[0].type != Reply::Type::kString) {
        return malformed;
      }
      info.leases.push_back({l.elements[0].str, PagesOf(l.elements[1]),
                             std::chrono::milliseconds(IntOr0(l.elements[2]))});
    }
    snap.groups.push_back(std::move(info));
  }
  // Pre-order: compare component by component ("a", "a/b", "a-c"; plain
  // string order would put "a-c" between "a" and "a/b").
  std::sort(
      snap.groups.begin(), snap.groups.end(),
      [](const ClusterGroupInfo& a, const ClusterGroupInfo& b) {
        std::string_view x = a.path, y = b.path;
        for (;;) {
          const size_t i = x.find('/'), j = y.find('/');
          const std::string_view cx = x.substr(0, i), cy = y.substr(0, j);
          if (cx != cy) return cx < cy;
          if (i == std::string_view::npos || j == std::string_view::npos) {
            return i == std::string_view::npos && j != std::string_view::npos;
          }
          x.remove_prefix(i + 1);
          y.remove_prefix(j + 1);
        }
      });
  return snap;
}

StatusOr<std::unique_ptr<ClusterBinding>> Cluster::Bind(
    Group& group, std::string_view cluster_group) {
  Status s = ValidateClusterPath(cluster_group);
  if (!s.ok()) return s;
  if (group.is_root()) return Invalid("the root group cannot be bound");
  if (!group.online()) {
    return Status(StatusCode::kFailedPrecondition, "group was removed");
  }
  auto impl = std::make_shared<ClusterBinding::Impl>(
      core_, group, std::string(cluster_group));
  s = impl->Start();
  if (!s.ok()) return s;
  core_->Register(impl);
  return std::unique_ptr<ClusterBinding>(new ClusterBinding(std::move(impl)));
}

const std::string& Cluster::node_name() const {
  return core_->options().node_name;
}

std::string Cluster::redis_address() const {
  std::string out = cluster_internal::RedisUrlForDisplay(core_->url());
  if (core_->url().sentinel()) {
    const std::string at = core_->address();
    out += at.empty() ? " (master unknown)" : " (master " + at + ")";
  }
  return out;
}

bool Cluster::connected() const { return core_->connected(); }

uint64_t Cluster::redis_commands() const { return core_->commands(); }

}  // namespace umemcg

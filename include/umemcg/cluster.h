// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Cluster quota: one memory.max shared by many processes and machines,
// held in Redis and leased to each node like a per-CPU stock one level up
// (libumemcg-cluster, built when hiredis is found; docs/cluster.md).
//
// Redis holds a tree of cluster groups ("tenants", "tenants/a"), each with
// a max, and the leases granted to every node, with page-counter
// semantics: a lease on a group counts at the group and each ancestor and
// is refused where any level's max would be exceeded. Every grant, return
// and renewal is one atomic Lua script, so the sum of live leases never
// exceeds a max, whatever the interleaving of nodes.
//
// A local umemcg Group is bound to a cluster group (Cluster::Bind). Its
// usage must stay within the node's lease: charges come out of the lease
// locally (the charge path compares once per stock batch); when the lease
// runs short the node asks for another chunk (adaptive: larger when the
// group is busy and far from the cluster max, smaller near it) and when
// usage falls well below the lease it returns the surplus. Over the
// cluster max a charge behaves like a local memory.max refusal: reclaim,
// stock draining, a new lease request, OOM handling, then failure with the
// bound group as ChargeResult::limited_by, a `max` event counted locally
// and in the cluster group.
//
//   auto cluster = umemcg::Cluster::Connect({.redis_url =
//                                            "redis://10.0.0.5:6379/0"});
//   (void)cluster.value()->SetMax("tenants/a", umemcg::Pages(16 << 18));
//   auto binding = cluster.value()->Bind(*tenant_a, "tenants/a").value();
//   tenant_a->TryCharge(Pages(3));   // from the lease, no network
//
// Charges that may not block (no kMayReclaim) never do network I/O. Beyond
// the current lease the lease is grown in the background, and the charge
// fails at once (kResourceExhausted after the cluster refused, kAgain while
// the lease is merely short) unless it has kHigh or kNoFail (kChargeAtomic
// is kHigh): those are forced past the lease (ChargeResult::forced) and the
// background thread has the cluster count the usage. Blocking charges wait at
// most the command timeout for Redis, once; while Redis is unreachable they
// fail at once with kAgain, and charges within the current lease keep working
// until it expires locally.
//
// Coordination errors (the cluster group missing, a script error, a lost
// connection, a timeout) are never memory refusals: no max event, no OOM
// handling; the charge gets the unavailable result (kAgain), the error is
// counted by kind and the node backs off (ClusterOptions::backoff_cap). A
// group Redis lost is re-created by the nodes from the configuration they
// cached, and they claim their leases again (learning mode). While Redis
// is unreachable past a lease, a node admits up to its safe capacity.
//
// Crash safety: leases expire on the server (lease_ttl) unless renewed by
// the node's background thread every `heartbeat`; expired leases are
// collected by the next script run, using the server's clock. A node stops
// admitting new usage once its lease expires locally, `safety_margin`
// before the server's expiry. The cluster's usage can then exceed a max
// only by the leases of nodes that were cut off while still using them,
// plus forced charges (docs/cluster.md states the bound).
//
// Thread safety: every method may be called from any thread. A Cluster
// runs one background thread; destroy its bindings before it, and both
// before the Controller of the bound groups.

#ifndef UMEMCG_CLUSTER_H_
#define UMEMCG_CLUSTER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "umemcg/export.h"
#include "umemcg/group.h"
#include "umemcg/status.h"
#include "umemcg/units.h"

namespace umemcg {

class ClusterBinding;
namespace cluster_internal {
class ClusterCore;
}

struct ClusterOptions {
  // redis://[[user]:password@]host[:port][/db] (IPv6 as [addr]:port) or
  // unix://[[user]:password@]/path[?db=N], or
  // redis-sentinel://[[user]:password@]host[:port][,host[:port]...]/NAME[/db]
  // to follow a Sentinel failover: the sentinels (port 26379 by default)
  // are asked for master NAME at every connect, and again after a lost
  // connection, a READONLY answer or a +switch-master announcement; the
  // credentials and db are the master's. Empty: $UMEMCG_REDIS, else
  // redis://127.0.0.1:6379/0. rediss:// is refused (kFailedPrecondition):
  // the packaged client has no TLS.
  std::string redis_url;
  // Prefix of every key; used as a hash tag ("{umemcg}:g:tenants").
  std::string key_prefix = "umemcg";
  // This node's name in the lease tables. Empty: "<hostname>:<pid>:<random>"
  // (a process that restarts is a new node; its old leases expire).
  std::string node_name;
  std::chrono::milliseconds connect_timeout{1000};
  // The longest a charging thread waits for Redis (once per charge).
  std::chrono::milliseconds command_timeout{1000};
  // Lease expiry on the server. 100 ms .. 1 hour.
  std::chrono::milliseconds lease_ttl{10000};
  // Renewal period; 0 = lease_ttl / 3.
  std::chrono::milliseconds heartbeat{0};
  // Local expiry comes this much before the server's; 0 = lease_ttl / 5.
  std::chrono::milliseconds safety_margin{0};
  // How often the background thread looks at usage (prefetch, surplus).
  std::chrono::milliseconds poll_interval{50};
  // Lease chunk bounds: the extra pages asked beyond what a charge needs.
  Pages min_chunk{256};    // 1 MiB
  Pages max_chunk{65536};  // 256 MiB
  // After a coordination error (the group missing, a script error, a lost
  // connection, a timeout) a binding sends at most one request per backoff
  // interval, from whichever thread: it starts at poll_interval, doubles
  // up to this cap (with jitter) and resets on a success.
  std::chrono::milliseconds backoff_cap{1000};
  // Safe capacity (Doorman's safe_capacity): what a node may keep using
  // while Redis cannot be reached and its lease has expired locally.
  // Unset: the cluster group's max divided by the number of nodes Redis
  // last reported on it (with an accurate count the shares sum to at most
  // max). Pages(0): admit nothing new (freeze at the lease's expiry).
  std::optional<Pages> safe_capacity;
};

// One binding's lease on a cluster group.
struct ClusterLease {
  // "<node_name>#<n>": the node, and which of its bindings (a process may
  // bind several groups to one cluster group; each holds its own lease).
  std::string node;
  Pages pages;
  std::chrono::milliseconds expires_in{0};
};

// One cluster group as Redis holds it.
struct ClusterGroupInfo {
  std::string path;  // "tenants/a"
  Pages max;         // kPageCounterMax: no limit
  Pages usage;       // leases of the group and its descendants
  Pages peak;
  uint64_t max_events = 0;           // refusals here or below (hierarchical)
  uint64_t max_events_local = 0;     // refusals at this level
  uint64_t expired = 0;              // leases collected after expiry
  std::vector<ClusterLease> leases;  // direct leases, by node name
};

struct ClusterSnapshot {
  // Pre-order: each group before its descendants, siblings by name.
  std::vector<ClusterGroupInfo> groups;
};

// What a binding knows now (local values exact; cluster values as of the
// last reply from Redis).
struct ClusterLeaseState {
  std::string cluster_group;
  std::string lease_owner;  // this binding's name in the lease tables
  Pages lease;              // pages this node may use
  Pages usage;              // the bound group's local usage
  Pages chunk;              // the current lease chunk
  std::chrono::milliseconds expires_in{0};  // local expiry; 0 when expired
  bool expired = true;
  bool connected = false;
  Pages cluster_usage;
  Pages cluster_max;
  Pages cluster_room;  // min over levels of max - usage (0 when over)
  uint64_t cluster_max_events = 0;
  // What this node may use while Redis is unreachable past its lease
  // (ClusterOptions::safe_capacity; 0 before the first reply).
  Pages safe_capacity;
  // The group was re-created and grants only claims for this long more
  // (the learning window, as of the last reply).
  std::chrono::milliseconds learning_for{0};
  // Counters of this binding.
  uint64_t grants = 0;       // lease grows (full or partial)
  uint64_t refusals = 0;     // the cluster refused a needed grow
  uint64_t returns = 0;      // surplus returned
  uint64_t renewals = 0;     // heartbeat renewals
  uint64_t unavailable = 0;  // a charge beyond the lease could not ask
  // Coordination errors by kind (never memory refusals: no max event, no
  // OOM handling; the charge gets the unavailable result).
  uint64_t errors_missing = 0;     // the cluster group was gone
  uint64_t errors_script = 0;      // a script error (corrupt data, ...)
  uint64_t errors_connection = 0;  // connection lost or refused
  uint64_t errors_timeout = 0;     // no answer within command_timeout
  uint64_t recreated = 0;  // this node re-created the lost group (learning)
  // Drains (drain_all_stock one level up): started by this node before a
  // refusal at the cluster max, and unused lease returned on another
  // node's request.
  uint64_t drains = 0;
  uint64_t drained = 0;
  // The cluster was over its max: reclaims of this node's share of the
  // excess from the bound group, and the pages they freed.
  uint64_t over_max_reclaims = 0;
  Pages over_max_reclaimed;
  uint64_t lease_lost = 0;      // Redis had no lease for us (it expired)
  uint64_t forced = 0;          // usage was counted past the cluster max
  uint64_t redis_commands = 0;  // commands sent for this binding
};

class UMEMCG_EXPORT Cluster {
 public:
  // Connects (bounded by connect_timeout) and starts the background
  // thread. kInvalidArgument for bad options or a malformed URL,
  // kFailedPrecondition for rediss://, kAgain when Redis is unreachable,
  // kPermissionDenied when AUTH fails.
  static StatusOr<std::unique_ptr<Cluster>> Connect(
      ClusterOptions options = {});
  // REQUIRES: every binding of this cluster destroyed.
  ~Cluster();

  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // ---- Administration (one round trip each) ----

  // Sets `group`'s max, creating it and missing ancestors (unlimited).
  // kPageCounterMax (or more) means no limit. Lowering it below the usage
  // is allowed: no new grants until usage falls below it, and nodes return
  // the unused part of their leases at their next heartbeat.
  Status SetMax(std::string_view group, Pages max);
  // Removes `group`. kBusy while it has child groups or leased pages.
  Status RemoveGroup(std::string_view group);
  // Every cluster group with its leases (expired ones collected first).
  StatusOr<ClusterSnapshot> Snapshot();

  // ---- Binding ----

  // Binds `group` (not the root; online) to cluster group `cluster_group`
  // (which must exist): takes a first lease covering the group's current
  // usage (kResourceExhausted if the cluster cannot fit it), then adds the
  // memory.cluster.* files to the group. kNotFound for an unknown cluster
  // group, kBusy if `group` is already bound.
  StatusOr<std::unique_ptr<ClusterBinding>> Bind(
      Group& group, std::string_view cluster_group);

  const std::string& node_name() const;
  // "host:port/db" (no credentials); with a sentinel URL
  // "redis-sentinel://host:port,.../NAME/db (master host:port)", the
  // master it is connected to now.
  std::string redis_address() const;
  bool connected() const;
  // Commands sent to Redis by this client so far (all bindings, renewals,
  // administration).
  uint64_t redis_commands() const;

 private:
  explicit Cluster(std::shared_ptr<cluster_internal::ClusterCore> core);
  std::shared_ptr<cluster_internal::ClusterCore> core_;
};

// A local group bound to a cluster group. Destroying it unbinds.
class UMEMCG_EXPORT ClusterBinding {
 public:
  ~ClusterBinding();
  ClusterBinding(const ClusterBinding&) = delete;
  ClusterBinding& operator=(const ClusterBinding&) = delete;

  // Detaches from the group (its memory.cluster.* files go; charges stop
  // consulting the lease) and returns the whole lease to Redis, including
  // pages still in use locally: they stop counting in the cluster.
  // Idempotent. kAgain if Redis could not be told (the lease then expires
  // on the server).
  Status Unbind();

  // One renewal round trip now; on return Redis holds exactly the lease
  // state() reports (unless another thread changes it meanwhile).
  Status Sync();

  ClusterLeaseState state() const;
  // The bound group; valid until Unbind.
  Group& group() const;
  const std::string& cluster_group() const;

 private:
  friend class Cluster;
  class Impl;
  explicit ClusterBinding(std::shared_ptr<Impl> impl);
  // Shared with the Cluster's background thread while bound.
  std::shared_ptr<Impl> impl_;
};

}  // namespace umemcg

#endif  // UMEMCG_CLUSTER_H_

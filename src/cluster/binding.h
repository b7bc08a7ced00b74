// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ClusterBinding::Impl: the node-level stock. It is the bound group's
// ExternalLimit (src/external_limit.h): the charge path admits usage up to
// `limit_` (the lease) while the lease has not expired locally, and asks
// Grow for more. The background thread (Tick) renews, prefetches, returns
// surplus and reconciles forced usage.
//
// Invariant (Redis never holds less than the node uses, outside forced
// charges and server-side data loss): a grow raises `limit_` only after
// Redis confirmed it; a return lowers `limit_` first, checks that usage
// still fits (a seq_cst store, fence and load against the chargers'
// seq_cst counter increment and seq_cst load of `limit_`: either the
// charger sees the lower limit or the returner sees its pages) and only
// then tells Redis. Lease requests carry the absolute lease wanted and a
// per-binding sequence number, so a retried or duplicated request cannot
// count twice.
//
// Coordination errors (the group missing, a script error, a lost
// connection, a timeout) are never memory refusals: Grow answers
// kUnavailable (no max event, no OOM handling), counts the error by kind
// and backs off (backoff.h: one request per interval for all threads). A
// missing group is re-created by the background thread from the
// configuration the node cached from its last reply (learning mode): the
// first node to do so wins, every node then claims its lease with force,
// and for one lease TTL Redis grants only claims. While Redis is
// unreachable past the local expiry, usage up to the safe capacity is
// admitted (ClusterOptions::safe_capacity).
//
// Thread safety: Admits/Grow/Margin from any charging thread; requests to
// Redis serialized by mu_ (locked with LockWithin: a charging thread waits
// at most the command timeout).

#ifndef UMEMCG_SRC_CLUSTER_BINDING_H_
#define UMEMCG_SRC_CLUSTER_BINDING_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/backoff.h"
#include "cluster/cluster_core.h"
#include "external_limit.h"
#include "umemcg/cluster.h"

namespace umemcg {

class ClusterBinding::Impl final : public internal::ExternalLimit,
                                   public cluster_internal::Tickable {
 public:
  using Clock = cluster_internal::Clock;

  Impl(std::shared_ptr<cluster_internal::ClusterCore> core, Group& group,
       std::string cluster_group);
  ~Impl() override;

  // The first lease (covering current usage), then attaches to the group.
  Status Start();
  Status Unbind();
  Status Sync();
  ClusterLeaseState State() const;
  Group& group() const { return *group_ptr_; }
  const std::string& cluster_group() const { return cluster_group_; }

  // internal::ExternalLimit
  bool Admits(uint64_t usage) override;
  internal::ExternalVerdict Grow(uint64_t usage, bool may_block,
                                 bool reclaimed) override;
  uint64_t Margin(uint64_t usage) override;
  void OnForced() override;
  std::span<const FileSpec> Files() const override;
  StatusOr<std::string> ReadFile(std::string_view name) override;
  Status WriteFile(std::string_view name, std::string_view text,
                   bool may_block) override;

  // cluster_internal::Tickable
  void Tick(Clock::time_point now) override;
  void OnDrain(std::string_view path, std::string_view from) override;

 private:
  // What a lease request returned.
  struct Outcome {
    int status = 0;  // the script's status (scripts.h)
    uint64_t lease = 0;
    std::string limited;  // refused: the first level without room
  };
  // One level of the cluster group's configuration, as last seen.
  struct LevelConfig {
    std::string path;
    uint64_t max = 0;
    int64_t ver = 0;
  };

  // REQUIRES: mu_ held. One lease script round trip; on success updates
  // limit_ (unless stale), the local expiry and the cluster view.
  StatusOr<Outcome> RequestLocked(uint64_t want, uint64_t need, bool force,
                                  bool may_reconnect);
  // REQUIRES: mu_ held. The chunk to ask for beyond `need` at `now`
  // (doubles while grows come within one busy window, capped near the
  // cluster max).
  uint64_t NextChunkLocked(Clock::time_point now);
  // REQUIRES: mu_ held. Lowers the lease to `target` if usage allows;
  // true when Redis was told.
  bool ReturnLocked(uint64_t target);
  // REQUIRES: `lock` holds mu_. A refusal at `level`: start (or join) a
  // drain of the other nodes' unused lease there and wait for it at most 2
  // poll intervals (mu_ released meanwhile), asking again every quarter
  // poll interval. True when a retry made the lease admit `usage`.
  bool DrainAndRetry(std::unique_lock<std::mutex>& lock, uint64_t usage,
                     const std::string& level);
  // REQUIRES: `lock` holds mu_ (released during the reclaim). The cluster
  // is over its max: return the unused lease, then reclaim this node's
  // share of the excess from the bound group (like a lowered memory.max;
  // ExternalLimits::ReclaimExcess), OOM handling at most once per
  // heartbeat, and return what was freed; again on the reply's room while
  // the cluster is still over and the reclaim freed something (at most
  // kEnforcePasses passes).
  // `room_fresh`: the last reply came just now (a drain's return or
  // renewal), so the first step (return the unused lease, or renew) is
  // skipped.
  void EnforceMaxLocked(std::unique_lock<std::mutex>& lock,
                        Clock::time_point now, bool room_fresh);
  // REQUIRES: mu_ held. Renews the lease as it is (force: what is in use
  // counts, past max if need be); true when Redis answered.
  bool RenewLocked();
  // REQUIRES: mu_ held. The group is missing in Redis: re-create it from
  // config_ (first writer wins), then claim the lease with force.
  void RecoverLocked();
  // Counts a failed request by kind and starts or extends the backoff.
  void NoteError(const Status& s, Clock::time_point now);
  bool ExpiredAt(Clock::time_point now) const;
  // Past the local expiry while Redis is unreachable: `usage` within the
  // safe capacity.
  bool SafeAdmits(uint64_t usage);
  bool LearningAt(Clock::time_point now) const {
    return now.time_since_epoch().count() <
           learning_until_.load(std::memory_order_relaxed);
  }
  uint64_t Usage() const { return group_ptr_->usage().raw(); }

  const std::shared_ptr<cluster_internal::ClusterCore> core_;
  Group* const group_ptr_;
  GroupRef group_;  // released by Unbind
  const std::string cluster_group_;
  const std::string owner_;  // this binding's name in the lease tables
  const std::chrono::milliseconds busy_window_;

  // Read by every slow-path charge of the group: the lease (pages) and its
  // local expiry (Clock ticks). seq_cst on limit_ (see the file comment);
  // expiry_ is relaxed: a charge racing with a renewal may see the old
  // expiry, which only refuses earlier.
  alignas(64) std::atomic<uint64_t> limit_{0};
  std::atomic<int64_t> expiry_{0};
  // Set by chargers (forced charge; a non-blocking charge ran short) for
  // the background thread. Relaxed: a hint, re-derived from usage anyway.
  std::atomic<bool> forced_{false};
  std::atomic<bool> short_{false};
  // The cluster refused a needed grow at this time (Clock ticks; 0 never):
  // non-blocking charges then fail as kResourceExhausted, not kAgain.
  std::atomic<int64_t> refused_at_{0};

  // Coordination state, read by chargers. Relaxed: each is a hint that
  // only decides whether to ask Redis now (a stale value asks once more or
  // once less), or, for unreachable_/safe_, admits at most the safe
  // capacity, the documented bound.
  cluster_internal::Backoff backoff_;
  std::atomic<bool> unreachable_{false};    // the last request got no answer
  std::atomic<bool> missing_{false};        // Redis said the group is gone
  std::atomic<uint64_t> safe_{0};           // safe capacity (pages)
  std::atomic<int64_t> learning_until_{0};  // Clock ticks
  // Another node asked for a drain: return the unused lease at the next
  // tick.
  std::atomic<bool> drain_requested_{false};

  // Requests to Redis, and the policy state they update.
  mutable std::mutex mu_;
  bool unbound_ = false;    // guarded by mu_
  uint64_t seq_ = 0;        // guarded by mu_
  uint64_t chunk_;          // guarded by mu_
  bool had_lease_ = false;  // guarded by mu_
  // Redis answered with less than this node had (its lease expired while
  // cut off, or a restart lost a write) and usage was above it: the next
  // tick counts the usage, past max if need be.
  bool reconcile_ = false;  // guarded by mu_
  // While an over-max enforcement reclaims (mu_ released): the local lease
  // never rises above this, whatever a reply says, so that charges do not
  // take what the reclaim frees (memory_max_write sets the limit before it
  // reclaims). UINT64_MAX otherwise. Set under mu_; reset by the
  // enforcing thread with or without it.
  std::atomic<uint64_t> enforce_cap_{UINT64_MAX};
  Clock::time_point last_grow_{};          // guarded by mu_
  Clock::time_point last_decay_{};         // guarded by mu_
  Clock::time_point next_heartbeat_{};     // guarded by mu_
  std::vector<LevelConfig> config_;        // guarded by mu_; leaf first
  int64_t drain_gen_seen_ = -1;            // guarded by mu_; -1: none yet
  Clock::time_point no_prefetch_until_{};  // guarded by mu_ (after a drain)
  Clock::time_point next_oom_{};           // guarded by mu_
  // Held by the background thread's over-max reclaim (with mu_ released);
  // Unbind takes it before mu_, so it waits for that reclaim.
  std::mutex enforce_mu_;

  // The cluster as of the last reply, and counters. Relaxed: each value is
  // independent, for observers.
  std::atomic<uint64_t> chunk_seen_{0};
  std::atomic<int64_t> room_{0};
  std::atomic<uint64_t> cluster_usage_{0};
  std::atomic<uint64_t> cluster_max_{0};
  std::atomic<uint64_t> cluster_events_{0};
  std::atomic<uint64_t> grants_{0}, refusals_{0}, returns_{0}, renewals_{0},
      unavailable_{0}, lost_{0}, forced_grants_{0}, commands_{0},
      errors_missing_{0}, errors_script_{0}, errors_connection_{0},
      errors_timeout_{0}, recreated_{0}, drains_{0}, drained_{0},
      over_max_reclaims_{0}, over_max_reclaimed_{0};
};

}  // namespace umemcg

#endif  // UMEMCG_SRC_CLUSTER_BINDING_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The node-level stock: lease policy and the charge path's hooks.

#include "cluster/binding.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>
#include <thread>

#include "cluster/scripts.h"
#include "umemcg/files.h"

namespace umemcg {

using cluster_internal::Reply;
using internal::ExternalVerdict;

namespace {

// Script statuses (scripts.h).
constexpr int kGranted = 0;
constexpr int kPartial = 1;
constexpr int kRefused = 2;
constexpr int kForced = 3;
constexpr int kStale = 4;
constexpr int kLearning = 5;
// Reclaim passes of one over-max enforcement (EnforceMaxLocked).
constexpr int kEnforcePasses = 4;
// Returns a drain tries while charges move the usage (Tick).
constexpr int kDrainReturnTries = 3;

constexpr std::array<internal::ExternalLimit::FileSpec, 5> kFiles = {{
    {"memory.cluster.group", true, false},
    {"memory.cluster.max", true, true},
    {"memory.cluster.current", true, false},
    {"memory.cluster.stat", true, false},
    {"memory.cluster.events", true, false},
}};

uint64_t AsCount(int64_t v) { return v > 0 ? static_cast<uint64_t>(v) : 0; }

StatusOr<int64_t> IntAt(const Reply& r, size_t i) {
  if (i >= r.elements.size() || r.elements[i].type != Reply::Type::kInteger) {
    return Status(
        StatusCode::kFailedPrecondition,
        "redis: malformed lease reply (element " + std::to_string(i) + ")");
  }
  return r.elements[i].integer;
}

std::string Line(const char* key, uint64_t v) {
  return std::string(key) + " " + std::to_string(v) + "\n";
}

}  // namespace

ClusterBinding::Impl::Impl(std::shared_ptr<cluster_internal::ClusterCore> core,
                           Group& group, std::string cluster_group)
    : core_(std::move(core)),
      group_ptr_(&group),
      group_(&group),
      cluster_group_(std::move(cluster_group)),
      owner_(core_->NewLeaseOwner()),
      busy_window_(
          std::min(core_->heartbeat(), std::chrono::milliseconds(1000))),
      backoff_(core_->options().poll_interval, core_->options().backoff_cap,
               std::hash<std::string>{}(owner_)),
      chunk_(core_->options().min_chunk.raw()) {
  room_.store(static_cast<int64_t>(kPageCounterMax.raw()),
              std::memory_order_relaxed);
}

ClusterBinding::Impl::~Impl() = default;

bool ClusterBinding::Impl::ExpiredAt(Clock::time_point now) const {
  return now.time_since_epoch().count() >=
         expiry_.load(std::memory_order_relaxed);
}

bool ClusterBinding::Impl::Admits(uint64_t usage) {
  // seq_cst: pairs with ReturnLocked (see binding.h).
  if (usage <= limit_.load(std::memory_order_seq_cst) &&
      !ExpiredAt(Clock::now())) {
    return true;
  }
  return SafeAdmits(usage);
}

bool ClusterBinding::Impl::SafeAdmits(uint64_t usage) {
  if (!unreachable_.load(std::memory_order_relaxed) && core_->connected()) {
    return false;
  }
  if (!ExpiredAt(Clock::now())) return false;  // the lease decides
  if (usage > safe_.load(std::memory_order_relaxed)) return false;
  // In use beyond what Redis counts for this node: once Redis answers
  // again, the background thread has it count the usage, with force.
  forced_.store(true, std::memory_order_relaxed);
  return true;
}

uint64_t ClusterBinding::Impl::Margin(uint64_t usage) {
  uint64_t lim = limit_.load(std::memory_order_seq_cst);
  if (ExpiredAt(Clock::now())) {
    lim = unreachable_.load(std::memory_order_relaxed) || !core_->connected()
              ? safe_.load(std::memory_order_relaxed)
              : 0;
  }
  return lim > usage ? lim - usage : 0;
}

void ClusterBinding::Impl::OnForced() {
  forced_.store(true, std::memory_order_relaxed);
  core_->Wake();
}

ExternalVerdict ClusterBinding::Impl::Grow(uint64_t usage, bool may_block,
                                           bool reclaimed) {
  const Clock::time_point now = Clock::now();
  if (!may_block) {
    // No network on this thread: a recent refusal stands; otherwise the
    // background thread grows the lease and the caller may retry.
    const int64_t refused = refused_at_.load(std::memory_order_relaxed);
    if (refused != 0 &&
        now.time_since_epoch().count() - refused <
            Clock::duration(core_->options().poll_interval).count()) {
      return ExternalVerdict::kRefused;
    }
    short_.store(true, std::memory_order_relaxed);
    core_->Wake();
    return ExternalVerdict::kUnavailable;
  }
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (!cluster_internal::LockWithin(lock, core_->options().command_timeout)) {
    unavailable_.fetch_add(1, std::memory_order_relaxed);
    return ExternalVerdict::kUnavailable;
  }
  if (unbound_) return ExternalVerdict::kGranted;
  // Another thread may have grown the lease while this one waited.
  if (Admits(usage)) return ExternalVerdict::kGranted;
  // Not now: no connection; the group is missing (the background thread
  // re-creates it); the learning window after a re-creation (only claims
  // are granted); or backing off after an error. The unavailable result,
  // as in a partition: never a memory refusal.
  if (!core_->connected() || missing_.load(std::memory_order_relaxed) ||
      LearningAt(now) || !backoff_.TryAcquire(now)) {
    unavailable_.fetch_add(1, std::memory_order_relaxed);
    return ExternalVerdict::kUnavailable;
  }
  const uint64_t lease = limit_.load(std::memory_order_relaxed);
  // Near the cluster max (the deficit is more than the room Redis last
  // reported), local reclaim comes first: refuse without asking until this
  // charge has reclaimed. After a refusal, trust it for one poll interval:
  // at most about one refused round trip per poll interval per node while
  // the cluster stays full.
  const int64_t deficit = static_cast<int64_t>(usage - std::min(usage, lease));
  if (deficit > room_.load(std::memory_order_relaxed)) {
    const int64_t refused = refused_at_.load(std::memory_order_relaxed);
    if (!reclaimed ||
        (refused != 0 &&
         now.time_since_epoch().count() - refused <
             Clock::duration(core_->options().poll_interval).count())) {
      return ExternalVerdict::kRefused;
    }
  }
  // Never ask below the current lease here: lowering goes through
  // ReturnLocked only.
  const uint64_t want = std::max(usage + NextChunkLocked(now), lease);
  StatusOr<Outcome> r = RequestLocked(want, usage, /*force=*/false,
                                      /*may_reconnect=*/false);
  if (!r.ok()) {
    // A coordination error (counted and backed off by RequestLocked), not
    // a memory refusal: no max event, no OOM handling.
    unavailable_.fetch_add(1, std::memory_order_relaxed);
    return ExternalVerdict::kUnavailable;
  }
  switch (r.value().status) {
    case kGranted:
    case kPartial:
      grants_.fetch_add(1, std::memory_order_relaxed);
      return Admits(usage) ? ExternalVerdict::kGranted
                           : ExternalVerdict::kRefused;
    case kRefused:
      // Before refusing at the cluster max, the other nodes give back the
      // lease they do not use (drain_all_stock, one level up).
      if (DrainAndRetry(lock, usage, r.value().limited)) {
        grants_.fetch_add(1, std::memory_order_relaxed);
        return ExternalVerdict::kGranted;
      }
      refusals_.fetch_add(1, std::memory_order_relaxed);
      refused_at_.store(now.time_since_epoch().count(),
                        std::memory_order_relaxed);
      return ExternalVerdict::kRefused;
    default:  // kLearning (the window is now known locally), kStale
      unavailable_.fetch_add(1, std::memory_order_relaxed);
      return ExternalVerdict::kUnavailable;
  }
}

bool ClusterBinding::Impl::DrainAndRetry(std::unique_lock<std::mutex>& lock,
                                         uint64_t usage,
                                         const std::string& level) {
  const ClusterOptions& o = core_->options();
  const std::chrono::milliseconds window = 2 * o.poll_interval;
  uint64_t sent = 0;
  StatusOr<Reply> r = core_->Run(
      cluster_internal::kDrainScript,
      {level.empty() ? cluster_group_ : level, owner_,
       std::to_string(window.count()), std::to_string(window.count())},
      /*may_reconnect=*/false, o.command_timeout, &sent);
  commands_.fetch_add(sent, std::memory_order_relaxed);
  if (!r.ok()) {
    NoteError(r.status(), Clock::now());
    return false;
  }
  const Reply& d = r.value();
  if (d.type != Reply::Type::kArray || d.elements.size() != 2 ||
      d.elements[0].type != Reply::Type::kInteger ||
      d.elements[1].type != Reply::Type::kInteger) {
    return false;  // a script error: refuse as without a drain
  }
  if (d.elements[0].integer == 1)
    drains_.fetch_add(1, std::memory_order_relaxed);
  const std::chrono::milliseconds wait =
      std::min(std::chrono::milliseconds(d.elements[1].integer), window);
  if (wait.count() <= 0) return false;  // a drain just ran: refuse now
  // Wait for the other nodes' returns without holding mu_ (each returns at
  // its next tick, within one of its poll intervals), asking again every
  // quarter poll interval: the room is taken as soon as it is there, and the
  // wait never exceeds the window. At most 8 retries per refused charge,
  // and only at the cluster max.
  const Clock::time_point deadline = Clock::now() + wait;
  const Clock::duration step = std::max<Clock::duration>(
      o.poll_interval / 4, std::chrono::milliseconds(1));
  for (;;) {
    lock.unlock();
    std::this_thread::sleep_until(std::min(Clock::now() + step, deadline));
    if (!cluster_internal::LockWithin(lock, o.command_timeout)) return false;
    if (unbound_ || Admits(usage)) return true;
    const uint64_t lease = limit_.load(std::memory_order_relaxed);
    const uint64_t want =
        std::max(usage + NextChunkLocked(Clock::now()), lease);
    StatusOr<Outcome> again = RequestLocked(want, usage, /*force=*/false,
                                            /*may_reconnect=*/false);
    // This node asked for the drain: its own reply's new generation is not
    // a request to give back what it just got.
    drain_requested_.store(false, std::memory_order_relaxed);
    if (!again.ok()) return false;  // counted and backed off: refuse
    if ((again.value().status == kGranted ||
         again.value().status == kPartial) &&
        Admits(usage)) {
      return true;
    }
    if (again.value().status != kRefused || Clock::now() >= deadline) {
      return false;
    }
  }
}

bool ClusterBinding::Impl::RenewLocked() {
  const uint64_t lease = limit_.load(std::memory_order_seq_cst);
  StatusOr<Outcome> r = RequestLocked(lease, std::min(lease, Usage()),
                                      /*force=*/true, false);
  if (r.ok()) renewals_.fetch_add(1, std::memory_order_relaxed);
  return r.ok();
}

void ClusterBinding::Impl::EnforceMaxLocked(std::unique_lock<std::mutex>& lock,
                                            Clock::time_point now,
                                            bool room_fresh) {
  // First what is not in use; without any, a renewal tells whether the
  // cluster is still over (the room is as of the last reply).
  uint64_t usage = Usage();
  uint64_t lease = limit_.load(std::memory_order_seq_cst);
  if (!room_fresh) {
    if (lease > usage) {
      (void)ReturnLocked(usage);
    } else if (!RenewLocked()) {
      return;
    }
  }
  // One enforcement at a time, and Unbind waits for it (the group and its
  // controller must outlive the reclaim); mu_ is released meanwhile, so
  // reclaimers may charge. OOM handling at most once per heartbeat.
  std::unique_lock<std::mutex> e(enforce_mu_, std::defer_lock);
  bool may_oom = false;
  // Like memory_max_write, reclaim until the cluster is back at or under
  // its max, each pass on the room of the last reply: the other nodes
  // reclaim their shares at the same time, so a pass is this node's share
  // of what is still over (a few passes, not one per tick).
  for (int pass = 0; pass < kEnforcePasses; ++pass) {
    const int64_t room = room_.load(std::memory_order_relaxed);
    lease = limit_.load(std::memory_order_seq_cst);
    if (room >= 0 || lease == 0) return;
    // Still over: this node's share of the excess, by its part of the
    // cluster group's usage, is reclaimed like a lowered memory.max.
    const uint64_t over = static_cast<uint64_t>(-room);
    const uint64_t total =
        std::max(cluster_usage_.load(std::memory_order_relaxed), lease);
    const uint64_t share = static_cast<uint64_t>(
        (static_cast<unsigned __int128>(over) * lease + total - 1) / total);
    if (share == 0) return;
    if (!e.owns_lock()) {
      if (!e.try_lock()) return;
      may_oom = now >= next_oom_;
      if (may_oom) next_oom_ = now + core_->heartbeat();
    }
    // The limit first, then the reclaim toward it (memory_max_write): what
    // the reclaim frees must not be charged again meanwhile. Lowered here
    // only; Redis learns the new lease from the request below. A charger
    // either sees the lowered limit or its pages count in the usage read
    // after the reclaim (seq_cst, as in ReturnLocked).
    usage = Usage();
    const uint64_t target = usage > share ? usage - share : 0;
    if (target < lease) {
      enforce_cap_.store(target, std::memory_order_relaxed);
      limit_.store(target, std::memory_order_seq_cst);
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    lock.unlock();
    const uint64_t freed =
        internal::ExternalLimits::ReclaimExcess(*group_ptr_, share, may_oom);
    may_oom = false;  // once per enforcement
    over_max_reclaims_.fetch_add(1, std::memory_order_relaxed);
    over_max_reclaimed_.fetch_add(freed, std::memory_order_relaxed);
    if (!cluster_internal::LockWithin(lock, core_->options().command_timeout)) {
      // Without mu_ the cap must go now (relaxed: replies read it under
      // mu_, which orders it for them): a cap left behind would hold the
      // local lease below what Redis grants.
      enforce_cap_.store(UINT64_MAX, std::memory_order_relaxed);
      return;
    }
    enforce_cap_.store(UINT64_MAX, std::memory_order_relaxed);
    if (unbound_) return;
    // Redis counts what is in use now: the lease comes down to the usage,
    // never above what it was (with no progress, a renewal of it). The
    // reply sets the local lease and is the room of the next pass.
    usage = Usage();
    const uint64_t next = std::min(usage, lease);
    StatusOr<Outcome> r = RequestLocked(next, next, /*force=*/false,
                                        /*may_reconnect=*/false);
    if (!r.ok()) return;  // counted and backed off; the limit stays lowered
    if (next < lease) returns_.fetch_add(1, std::memory_order_relaxed);
    if (freed == 0 || next >= lease) return;
  }
}

void ClusterBinding::Impl::OnDrain(std::string_view path,
                                   std::string_view from) {
  if (from == owner_) return;
  const std::string_view mine = cluster_group_;
  // Our lease counts at `path` when we are bound to it or below it.
  if (mine == path || (mine.size() > path.size() && mine.starts_with(path) &&
                       mine[path.size()] == '/')) {
    drain_requested_.store(true, std::memory_order_relaxed);
  }
}

void ClusterBinding::Impl::NoteError(const Status& s, Clock::time_point now) {
  switch (s.code()) {
    case StatusCode::kNotFound:
      errors_missing_.fetch_add(1, std::memory_order_relaxed);
      if (!missing_.exchange(true, std::memory_order_relaxed)) core_->Wake();
      break;
    case StatusCode::kAgain: {
      // Run's and the connection's kAgain texts: a timeout (or the
      // connection held by a request waiting for one) or a lost connection.
      const std::string_view m = s.message();
      if (m.find("timeout") != std::string_view::npos ||
          m.find("busy") != std::string_view::npos) {
        errors_timeout_.fetch_add(1, std::memory_order_relaxed);
      } else {
        errors_connection_.fetch_add(1, std::memory_order_relaxed);
      }
      unreachable_.store(true, std::memory_order_relaxed);
      break;
    }
    default:
      errors_script_.fetch_add(1, std::memory_order_relaxed);
      break;
  }
  backoff_.OnError(now);
}

uint64_t ClusterBinding::Impl::NextChunkLocked(Clock::time_point now) {
  const uint64_t min_chunk = core_->options().min_chunk.raw();
  const uint64_t max_chunk = core_->options().max_chunk.raw();
  if (last_grow_ != Clock::time_point{} && now - last_grow_ < busy_window_) {
    chunk_ = std::min(chunk_ * 2, max_chunk);  // busy: grow the chunk
  }
  chunk_ = std::max(chunk_, min_chunk);
  last_grow_ = now;
  uint64_t c = chunk_;
  // Near the cluster max, take at most a quarter of what is left, so that
  // the other nodes still find room.
  const int64_t room = room_.load(std::memory_order_relaxed);
  c = std::min<uint64_t>(c, room > 0 ? static_cast<uint64_t>(room) / 4 : 0);
  chunk_seen_.store(c, std::memory_order_relaxed);
  return c;
}

StatusOr<ClusterBinding::Impl::Outcome> ClusterBinding::Impl::RequestLocked(
    uint64_t want, uint64_t need, bool force, bool may_reconnect) {
  const ClusterOptions& o = core_->options();
  ++seq_;
  const Clock::time_point sent_at = Clock::now();
  std::vector<std::string> args = {cluster_group_,
                                   owner_,
                                   std::to_string(seq_),
                                   std::to_string(want),
                                   std::to_string(need),
                                   force ? "1" : "0",
                                   std::to_string(o.lease_ttl.count())};
  uint64_t sent = 0;
  StatusOr<Reply> r = core_->Run(cluster_internal::kLeaseScript, args,
                                 may_reconnect, o.command_timeout, &sent);
  commands_.fetch_add(sent, std::memory_order_relaxed);
  if (!r.ok()) {
    NoteError(r.status(), sent_at);
    return r.status();
  }
  const Reply& reply = r.value();
  Status bad = Status::Ok();
  if (reply.is_error()) {
    bad = cluster_internal::ScriptError(reply);
  } else if (reply.type != Reply::Type::kArray || reply.elements.size() != 13 ||
             reply.elements[11].type != Reply::Type::kArray ||
             reply.elements[11].elements.size() % 3 != 0) {
    bad =
        Status(StatusCode::kFailedPrecondition, "redis: malformed lease reply");
  }
  // v[i] is element i (7, the limiting level's name, is not a number; 11
  // is the configuration).
  int64_t v[13] = {};
  for (size_t i = 0; bad.ok() && i < 13; ++i) {
    if (i == 7 || i == 11) continue;
    StatusOr<int64_t> x = IntAt(reply, i);
    if (x.ok()) {
      v[i] = x.value();
    } else {
      bad = x.status();
    }
  }
  std::vector<LevelConfig> chain;
  for (size_t i = 0; bad.ok() && i < reply.elements[11].elements.size();
       i += 3) {
    const std::vector<Reply>& e = reply.elements[11].elements;
    if (e[i].type != Reply::Type::kString ||
        e[i + 1].type != Reply::Type::kInteger ||
        e[i + 2].type != Reply::Type::kInteger) {
      bad = Status(StatusCode::kFailedPrecondition,
                   "redis: malformed lease reply (configuration)");
      break;
    }
    chain.push_back({e[i].str, AsCount(e[i + 1].integer), e[i + 2].integer});
  }
  if (!bad.ok()) {
    NoteError(bad, sent_at);
    return bad;
  }
  backoff_.OnSuccess();
  unreachable_.store(false, std::memory_order_relaxed);
  missing_.store(false, std::memory_order_relaxed);
  if (!chain.empty()) config_ = std::move(chain);
  learning_until_.store(v[10] > 0 ? (sent_at + std::chrono::milliseconds(v[10]))
                                        .time_since_epoch()
                                        .count()
                                  : 0,
                        std::memory_order_relaxed);
  // Safe capacity: configured, or the max shared by the nodes Redis knows.
  const uint64_t nodes = std::max<uint64_t>(AsCount(v[9]), 1);
  safe_.store(o.safe_capacity.has_value() ? o.safe_capacity->raw()
                                          : AsCount(v[5]) / nodes,
              std::memory_order_relaxed);
  Outcome out;
  out.status = static_cast<int>(v[0]);
  out.lease = AsCount(v[1]);
  if (reply.elements[7].type == Reply::Type::kString) {
    out.limited = reply.elements[7].str;
  }
  // A drain this node's pub/sub subscriber missed: seen here, on the next
  // reply (the generation rises with every drain of a level of the path).
  if (drain_gen_seen_ >= 0 && v[12] > drain_gen_seen_) {
    drain_requested_.store(true, std::memory_order_relaxed);
  }
  drain_gen_seen_ = v[12];
  if (out.status == kLearning && v[8] != 0 && had_lease_) {
    // Re-created by another node while this one held a lease: claim it
    // (RecoverLocked finds the group there and claims with force).
    missing_.store(true, std::memory_order_relaxed);
    core_->Wake();
  }
  if (out.status != kStale && out.status != kLearning) {
    // After Redis confirmed: raise (or, reconciling, set) the lease. The
    // local expiry counts from before the request was sent, so it comes
    // no later than the server's minus the margin.
    const uint64_t before = limit_.load(std::memory_order_seq_cst);
    reconcile_ = out.lease < before && out.lease < Usage();
    limit_.store(
        std::min(out.lease, enforce_cap_.load(std::memory_order_relaxed)),
        std::memory_order_seq_cst);
    expiry_.store((sent_at + o.lease_ttl - core_->safety_margin())
                      .time_since_epoch()
                      .count(),
                  std::memory_order_relaxed);
    if (v[8] != 0 && had_lease_) lost_.fetch_add(1, std::memory_order_relaxed);
    had_lease_ = out.lease > 0;
    if (out.status == kForced) {
      forced_grants_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  room_.store(v[3], std::memory_order_relaxed);
  cluster_usage_.store(AsCount(v[4]), std::memory_order_relaxed);
  cluster_max_.store(AsCount(v[5]), std::memory_order_relaxed);
  cluster_events_.store(AsCount(v[6]), std::memory_order_relaxed);
  next_heartbeat_ = sent_at + core_->heartbeat();
  return out;
}

bool ClusterBinding::Impl::ReturnLocked(uint64_t target) {
  const uint64_t lease = limit_.load(std::memory_order_seq_cst);
  if (target >= lease) return false;
  // Lower first, then check usage (see binding.h): a charger either sees
  // the new limit or this thread sees its pages.
  limit_.store(target, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (Usage() > target) {
    limit_.store(lease, std::memory_order_seq_cst);
    return false;
  }
  StatusOr<Outcome> r = RequestLocked(target, target, /*force=*/false,
                                      /*may_reconnect=*/false);
  // On failure the lease stays lowered here; the next renewal (which asks
  // for the local lease) makes Redis agree.
  if (r.ok()) returns_.fetch_add(1, std::memory_order_relaxed);
  return r.ok();
}

void ClusterBinding::Impl::Tick(Clock::time_point now) {
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (!cluster_internal::LockWithin(lock, core_->options().command_timeout))
    return;
  if (unbound_ || !core_->connected()) return;
  // After an error, one request per backoff interval (shared with the
  // charging threads).
  if (!backoff_.TryAcquire(now)) return;
  if (missing_.load(std::memory_order_relaxed)) {
    RecoverLocked();
    return;
  }
  // Another node is refused at the max, or an operator set the max below
  // the usage: give back what is not in use.
  if (drain_requested_.exchange(false, std::memory_order_relaxed)) {
    // The drain always ends in a reply (its room is what the push is for).
    // A charge of this node that lands between the usage read and the
    // return makes the return back out without asking Redis (the usage is
    // above its target): read the usage again, a few times, then renew.
    // Before, the push was dropped then, and a busy node learnt that a
    // set-max put the cluster over max only at its next request (up to a
    // heartbeat).
    bool returned = false;
    for (int i = 0; i < kDrainReturnTries && !returned; ++i) {
      const uint64_t in_use = Usage();
      if (limit_.load(std::memory_order_seq_cst) <= in_use) break;
      const uint64_t seq = seq_;
      returned = ReturnLocked(in_use);
      if (!returned && seq_ != seq) return;  // asked: counted and backed off
    }
    if (returned) {
      drained_.fetch_add(1, std::memory_order_relaxed);
      // No prefetch for a heartbeat: the room is for the node that asked
      // (a charge of this node that runs short still grows the lease).
      no_prefetch_until_ = now + core_->heartbeat();
    } else if (!RenewLocked()) {  // nothing unused: a fresh room all the same
      return;
    }
    // The reply says whether the cluster is over its max: reclaim now, not
    // at the next tick, on that reply's room.
    if (room_.load(std::memory_order_relaxed) < 0) {
      EnforceMaxLocked(lock, now, /*room_fresh=*/true);
    }
    return;
  }
  const uint64_t min_chunk = core_->options().min_chunk.raw();
  const uint64_t usage = Usage();
  const uint64_t lease = limit_.load(std::memory_order_seq_cst);
  const bool forced = forced_.exchange(false, std::memory_order_relaxed);
  const bool ran_short = short_.exchange(false, std::memory_order_relaxed);
  // Usage the lease does not cover. After a forced charge it is in use, so
  // Redis must count it, past max if need be. Otherwise it may be a charge
  // in flight (counted, then refused and given back): ask only for what
  // fits, so a transient never pushes the cluster over max.
  if (usage > lease) {
    (void)RequestLocked(usage, usage, /*force=*/forced || reconcile_, false);
    return;
  }
  const int64_t room = room_.load(std::memory_order_relaxed);
  // Prefetch below the low-water mark (half a chunk left), or for a
  // non-blocking charge that ran short, while the cluster has room.
  if (room > 0 && !LearningAt(now) &&
      (ran_short ||
       (lease - usage < chunk_ / 2 && now >= no_prefetch_until_))) {
    const uint64_t want = std::max(usage + NextChunkLocked(now), lease);
    if (want > lease) {
      StatusOr<Outcome> r = RequestLocked(want, lease, false, false);
      if (r.ok() && r.value().lease > lease) {
        grants_.fetch_add(1, std::memory_order_relaxed);
      }
      return;
    }
  }
  // Idle: halve the chunk once per busy window after four quiet ones.
  if (now - last_grow_ > 4 * busy_window_ && now - last_decay_ > busy_window_ &&
      chunk_ > min_chunk) {
    chunk_ = std::max(chunk_ / 2, min_chunk);
    last_decay_ = now;
  }
  // Return the surplus: all of the unused lease while the cluster is over
  // its max, else what exceeds one chunk once usage is two chunks below
  // the lease (refill_stock draining above the batch, one level up).
  if (room < 0) {
    EnforceMaxLocked(lock, now, /*room_fresh=*/false);
    return;
  }
  if (lease > usage + 2 * chunk_) {
    ReturnLocked(usage + chunk_);
    return;
  }
  if (now >= next_heartbeat_) (void)RenewLocked();
}

void ClusterBinding::Impl::RecoverLocked() {
  const ClusterOptions& o = core_->options();
  if (config_.empty()) return;  // never answered: nothing to rebuild from
  std::vector<std::string> args = {std::to_string(o.lease_ttl.count())};
  for (const LevelConfig& c : config_) {
    args.push_back(c.path);
    args.push_back(std::to_string(c.max));
    args.push_back(std::to_string(c.ver));
  }
  uint64_t sent = 0;
  StatusOr<Reply> r =
      core_->Run(cluster_internal::kRecreateScript, args,
                 /*may_reconnect=*/false, o.command_timeout, &sent);
  commands_.fetch_add(sent, std::memory_order_relaxed);
  const Clock::time_point now = Clock::now();
  if (!r.ok()) {
    NoteError(r.status(), now);
    return;
  }
  if (r.value().is_error()) {
    NoteError(cluster_internal::ScriptError(r.value()), now);
    return;
  }
  if (r.value().type != Reply::Type::kInteger || r.value().integer < 0) {
    // An operator removed the group: it stays missing for this node.
    NoteError(Status(StatusCode::kNotFound,
                     "cluster group '" + cluster_group_ + "' was removed"),
              now);
    return;
  }
  if (r.value().integer == 1) {
    recreated_.fetch_add(1, std::memory_order_relaxed);
    std::fprintf(stderr,
                 "umemcg-cluster: %s re-created cluster group '%s' (max %llu "
                 "pages) that Redis %s lost; granting only claims for %lld "
                 "ms\n",
                 owner_.c_str(), cluster_group_.c_str(),
                 static_cast<unsigned long long>(config_.front().max),
                 cluster_internal::RedisUrlForDisplay(core_->url()).c_str(),
                 static_cast<long long>(o.lease_ttl.count()));
  }
  missing_.store(false, std::memory_order_relaxed);
  // Claim what this node holds (learning mode): counted again, never
  // twice (absolute values), past max if it must be.
  const uint64_t usage = Usage();
  const uint64_t lease = limit_.load(std::memory_order_seq_cst);
  (void)RequestLocked(std::max(lease, usage), usage, /*force=*/true,
                      /*may_reconnect=*/false);
}

Status ClusterBinding::Impl::Start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t usage = Usage();
    StatusOr<Outcome> r =
        RequestLocked(usage + core_->options().min_chunk.raw(), usage,
                      /*force=*/false, /*may_reconnect=*/true);
    if (!r.ok()) return r.status();
    if (r.value().status == kRefused) {
      (void)RequestLocked(0, 0, false, true);
      return Status(StatusCode::kResourceExhausted,
                    "cluster group '" + cluster_group_ +
                        "' cannot fit the group's current usage");
    }
    grants_.fetch_add(1, std::memory_order_relaxed);
  }
  Status s = internal::ExternalLimits::Attach(*group_ptr_, this);
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    unbound_ = true;
    (void)RequestLocked(0, 0, false, true);
    group_.reset();
    return s;
  }
  return Status::Ok();
}

Status ClusterBinding::Impl::Unbind() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (unbound_) return Status::Ok();
  }
  // Outside mu_: Detach waits for chargers, which may wait for mu_.
  (void)internal::ExternalLimits::Detach(*group_ptr_, this);
  core_->Unregister(this);
  // An over-max reclaim of the background thread finishes first.
  std::lock_guard<std::mutex> enforce(enforce_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  if (unbound_) return Status::Ok();
  unbound_ = true;
  limit_.store(0, std::memory_order_seq_cst);
  StatusOr<Outcome> r = RequestLocked(0, 0, false, /*may_reconnect=*/true);
  group_.reset();
  if (!r.ok()) {
    return Status(r.status().code(),
                  "lease not returned (it expires on the server): " +
                      std::string(r.status().message()));
  }
  return Status::Ok();
}

Status ClusterBinding::Impl::Sync() {
  std::lock_guard<std::mutex> lock(mu_);
  if (unbound_) return Status(StatusCode::kFailedPrecondition, "unbound");
  const uint64_t lease = limit_.load(std::memory_order_seq_cst);
  const uint64_t usage = Usage();
  StatusOr<Outcome> r = RequestLocked(std::max(lease, usage), usage,
                                      /*force=*/true, /*may_reconnect=*/true);
  if (!r.ok()) return r.status();
  renewals_.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

ClusterLeaseState ClusterBinding::Impl::State() const {
  ClusterLeaseState s;
  constexpr auto kR = std::memory_order_relaxed;
  s.cluster_group = cluster_group_;
  s.lease_owner = owner_;
  s.lease = Pages(limit_.load(std::memory_order_seq_cst));
  s.usage = Pages(Usage());
  s.chunk = Pages(chunk_seen_.load(kR));
  const Clock::time_point now = Clock::now();
  s.expired = ExpiredAt(now);
  if (!s.expired) {
    s.expires_in = std::chrono::duration_cast<std::chrono::milliseconds>(
        Clock::duration(expiry_.load(kR)) - now.time_since_epoch());
  }
  s.connected = core_->connected();
  s.cluster_usage = Pages(cluster_usage_.load(kR));
  s.cluster_max = Pages(cluster_max_.load(kR));
  s.cluster_room = Pages(AsCount(room_.load(kR)));
  s.cluster_max_events = cluster_events_.load(kR);
  s.safe_capacity = Pages(safe_.load(kR));
  const int64_t learn =
      learning_until_.load(kR) - now.time_since_epoch().count();
  if (learn > 0) {
    s.learning_for = std::chrono::duration_cast<std::chrono::milliseconds>(
        Clock::duration(learn));
  }
  s.grants = grants_.load(kR);
  s.refusals = refusals_.load(kR);
  s.returns = returns_.load(kR);
  s.renewals = renewals_.load(kR);
  s.unavailable = unavailable_.load(kR);
  s.lease_lost = lost_.load(kR);
  s.forced = forced_grants_.load(kR);
  s.redis_commands = commands_.load(kR);
  s.errors_missing = errors_missing_.load(kR);
  s.errors_script = errors_script_.load(kR);
  s.errors_connection = errors_connection_.load(kR);
  s.errors_timeout = errors_timeout_.load(kR);
  s.recreated = recreated_.load(kR);
  s.drains = drains_.load(kR);
  s.drained = drained_.load(kR);
  s.over_max_reclaims = over_max_reclaims_.load(kR);
  s.over_max_reclaimed = Pages(over_max_reclaimed_.load(kR));
  return s;
}

std::span<const internal::ExternalLimit::FileSpec> ClusterBinding::Impl::Files()
    const {
  return kFiles;
}

StatusOr<std::string> ClusterBinding::Impl::ReadFile(std::string_view name) {
  const ClusterLeaseState s = State();
  if (name == "memory.cluster.group") return cluster_group_ + "\n";
  if (name == "memory.cluster.max") return FormatMemoryLimit(s.cluster_max);
  if (name == "memory.cluster.current") {
    return std::to_string(s.cluster_usage.in_bytes()) + "\n";
  }
  if (name == "memory.cluster.events") {
    return Line("max", s.cluster_max_events);
  }
  if (name == "memory.cluster.stat") {
    std::string out;
    out += Line("lease_bytes", s.lease.in_bytes());
    out += Line("usage_bytes", s.usage.in_bytes());
    out += Line("chunk_bytes", s.chunk.in_bytes());
    out += Line("room_bytes", s.cluster_room.in_bytes());
    out += Line("expires_in_ms", AsCount(s.expires_in.count()));
    out += Line("expired", s.expired ? 1 : 0);
    out += Line("connected", s.connected ? 1 : 0);
    out += Line("grants", s.grants);
    out += Line("refusals", s.refusals);
    out += Line("returns", s.returns);
    out += Line("renewals", s.renewals);
    out += Line("unavailable", s.unavailable);
    out += Line("lease_lost", s.lease_lost);
    out += Line("forced", s.forced);
    out += Line("redis_commands", s.redis_commands);
    out += Line("safe_capacity_bytes", s.safe_capacity.in_bytes());
    out += Line("learning_ms", AsCount(s.learning_for.count()));
    out += Line("errors_missing", s.errors_missing);
    out += Line("errors_script", s.errors_script);
    out += Line("errors_connection", s.errors_connection);
    out += Line("errors_timeout", s.errors_timeout);
    out += Line("recreated", s.recreated);
    out += Line("drains", s.drains);
    out += Line("drained", s.drained);
    out += Line("over_max_reclaims", s.over_max_reclaims);
    out += Line("over_max_reclaimed_bytes", s.over_max_reclaimed.in_bytes());
    return out;
  }
  return Status(StatusCode::kNotFound, "no such file: " + std::string(name));
}

Status ClusterBinding::Impl::WriteFile(std::string_view name,
                                       std::string_view text, bool may_block) {
  if (name != "memory.cluster.max") {
    return Status(StatusCode::kPermissionDenied, "file is read-only");
  }
  if (!may_block) {
    return Status(StatusCode::kAgain, "memory.cluster.max would block");
  }
  StatusOr<Pages> max = ParseMemoryLimit(text);
  if (!max.ok()) return max.status();
  uint64_t sent = 0;
  StatusOr<Reply> r = core_->Run(
      cluster_internal::kSetMaxScript,
      {cluster_group_, std::to_string(max.value().raw())},
      /*may_reconnect=*/true, core_->options().command_timeout, &sent);
  commands_.fetch_add(sent, std::memory_order_relaxed);
  if (!r.ok()) return r.status();
  if (r.value().is_error()) return cluster_internal::ScriptError(r.value());
  cluster_max_.store(max.value().raw(), std::memory_order_relaxed);
  core_->Wake();
  return Status::Ok();
}

// ---- ClusterBinding ----

ClusterBinding::ClusterBinding(std::shared_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

ClusterBinding::~ClusterBinding() { (void)impl_->Unbind(); }

Status ClusterBinding::Unbind() { return impl_->Unbind(); }
Status ClusterBinding::Sync() { return impl_->Sync(); }
ClusterLeaseState ClusterBinding::state() const { return impl_->State(); }
Group& ClusterBinding::group() const { return impl_->group(); }
const std::string& ClusterBinding::cluster_group() const {
  return impl_->cluster_group();
}

}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ClusterCore: what a Cluster and its bindings share: the options, the one
// Redis connection (a mutex locked with LockWithin: no caller waits for it
// longer than the command timeout), the background thread that renews,
// prefetches and returns leases, and the list of live bindings. The
// background thread also holds a second connection subscribed to the drain
// channel ("{prefix}:drain"), read without waiting once per poll, and with
// a redis-sentinel:// URL a third one, to a sentinel, subscribed to
// +switch-master: a failover announced there closes the connections to the
// old master, and the next connect asks the sentinels for the new one (as
// does a lost connection or a READONLY answer).
//
// Thread safety: Run may be called from any thread. The background thread
// calls Binding::Tick; bindings register and unregister under mu_.

#ifndef UMEMCG_SRC_CLUSTER_CLUSTER_CORE_H_
#define UMEMCG_SRC_CLUSTER_CLUSTER_CORE_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cluster/redis_client.h"
#include "umemcg/cluster.h"

namespace umemcg::cluster_internal {

using Clock = std::chrono::steady_clock;

// Locks `lock`'s mutex within `wait` (false when it stayed busy): try_lock
// with short sleeps. Not std::timed_mutex: its try_lock_for calls
// pthread_mutex_clocklock, which ThreadSanitizer does not intercept (it
// then reports the unlock as one of an unlocked mutex). Slow paths only.
inline bool LockWithin(std::unique_lock<std::mutex>& lock,
                       std::chrono::milliseconds wait) {
  const Clock::time_point deadline = Clock::now() + wait;
  std::chrono::microseconds nap(20);
  while (!lock.try_lock()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(1000));
  }
  return true;
}

// The background thread's view of a binding.
class Tickable {
 public:
  virtual ~Tickable() = default;
  // Renew, prefetch, return surplus or reconcile, as due at `now`.
  virtual void Tick(Clock::time_point now) = 0;
  // A node (`from`, a lease owner) asked the nodes holding lease on
  // cluster group `path` or below to return their unused lease now (a
  // drain, published on the drain channel). Called before the next Tick.
  virtual void OnDrain(std::string_view path, std::string_view from) {
    (void)path;
    (void)from;
  }
};

class ClusterCore {
 public:
  ClusterCore(ClusterOptions options, RedisUrl url);
  ~ClusterCore();

  // Connects now (Cluster::Connect) and starts the background thread.
  Status Start();
  // Stops the background thread (idempotent).
  void Stop();

  // Runs `script` with KEYS = {"{prefix}"} and `args`. Waits at most
  // `lock_wait` for the connection. Without `may_reconnect` a broken
  // connection fails at once (kAgain) instead of reconnecting: charging
  // threads never wait for a connect. `*commands` (if set) is increased by
  // the commands this call sent.
  StatusOr<Reply> Run(const char* script, const std::vector<std::string>& args,
                      bool may_reconnect, std::chrono::milliseconds lock_wait,
                      uint64_t* commands = nullptr);

  void Register(std::shared_ptr<Tickable> binding);
  void Unregister(const Tickable* binding);
  // Makes the background thread tick every binding soon.
  void Wake();

  const ClusterOptions& options() const { return options_; }
  const RedisUrl& url() const { return url_; }
  std::chrono::milliseconds heartbeat() const { return heartbeat_; }
  std::chrono::milliseconds safety_margin() const { return margin_; }
  bool connected() const { return connected_.load(std::memory_order_acquire); }
  // The server of the current connection ("host:port"; after a sentinel
  // lookup, the master it named), or "" while disconnected.
  std::string address() const {
    std::lock_guard<std::mutex> lock(addr_mu_);
    return address_;
  }

  // A new binding's owner name in the lease tables: "<node>#<n>", unique
  // per binding, so two bindings of one process on one cluster group hold
  // separate leases.
  std::string NewLeaseOwner() {
    return options_.node_name + "#" +
           std::to_string(
               next_binding_.fetch_add(1, std::memory_order_relaxed));
  }
  uint64_t commands() const {
    return commands_.load(std::memory_order_relaxed);
  }

 private:
  // REQUIRES: conn_mu_ held. Connects if not connected (rate limited
  // unless `force`).
  Status EnsureConnectedLocked(bool force);
  // Background thread: (re)subscribes to the drain channel (at most once
  // per second) and hands the drain messages that arrived to `bindings`.
  void PollDrains(const std::vector<std::shared_ptr<Tickable>>& bindings);
  // Background thread, sentinel URLs: (re)subscribes to +switch-master on
  // a sentinel (at most once per second) and, when it names a new master
  // for ours, drops the connections to the old one.
  void PollSentinel();
  // REQUIRES: conn_mu_ held. Drops the connection.
  void DisconnectLocked();
  void Main();

  const ClusterOptions options_;
  const RedisUrl url_;
  const std::string hash_key_;  // "{prefix}"
  const std::chrono::milliseconds heartbeat_;
  const std::chrono::milliseconds margin_;

  std::mutex conn_mu_;
  std::unique_ptr<RedisConnection> conn_;   // guarded by conn_mu_
  Clock::time_point last_connect_attempt_;  // guarded by conn_mu_
  Status last_connect_error_;               // guarded by conn_mu_
  // Mirrors conn_ != null for lock-free readers (acquire/release: a reader
  // that sees true may use what the connect published, through the mutex).
  std::atomic<bool> connected_{false};
  // Relaxed: a statistic.
  std::atomic<uint64_t> commands_{0};
  mutable std::mutex addr_mu_;
  std::string address_;  // guarded by addr_mu_
  // Relaxed: only uniqueness matters.
  std::atomic<uint64_t> next_binding_{1};

  // The drain channel's subscriber; only the background thread uses it.
  std::unique_ptr<RedisConnection> sub_;
  Clock::time_point last_sub_attempt_;
  // The sentinel subscriber (+switch-master); only the background thread
  // uses it.
  std::unique_ptr<RedisConnection> sentinel_sub_;
  Clock::time_point last_sentinel_attempt_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                                // guarded by mu_
  bool woken_ = false;                               // guarded by mu_
  std::vector<std::shared_ptr<Tickable>> bindings_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace umemcg::cluster_internal

#endif  // UMEMCG_SRC_CLUSTER_CLUSTER_CORE_H_

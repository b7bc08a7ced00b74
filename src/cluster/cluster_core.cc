// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "cluster/cluster_core.h"

#include <algorithm>

#include "port/thread.h"

namespace umemcg::cluster_internal {
namespace {

// The least time between two reconnect attempts of the background thread.
constexpr std::chrono::milliseconds kReconnectBackoff{100};

std::chrono::milliseconds OrDefault(std::chrono::milliseconds v,
                                    std::chrono::milliseconds fallback) {
  return v.count() > 0 ? v : fallback;
}

}  // namespace

ClusterCore::ClusterCore(ClusterOptions options, RedisUrl url)
    : options_(std::move(options)),
      url_(std::move(url)),
      hash_key_("{" + options_.key_prefix + "}"),
      heartbeat_(OrDefault(options_.heartbeat, options_.lease_ttl / 3)),
      margin_(OrDefault(options_.safety_margin, options_.lease_ttl / 5)) {}

ClusterCore::~ClusterCore() { Stop(); }

Status ClusterCore::Start() {
  {
    std::lock_guard<std::mutex> lock(conn_mu_);
    Status s = EnsureConnectedLocked(/*force=*/true);
    if (!s.ok()) return s;
  }
  // Subscribe to the drain channel (and, with sentinels, to their
  // failover announcements) now, before any binding exists (the
  // background thread retries if this fails).
  PollSentinel();
  PollDrains({});
  thread_ = internal::StartThread([this] { Main(); });
  return Status::Ok();
}

void ClusterCore::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ClusterCore::DisconnectLocked() {
  conn_.reset();
  connected_.store(false, std::memory_order_release);
  std::lock_guard<std::mutex> lock(addr_mu_);
  address_.clear();
}

Status ClusterCore::EnsureConnectedLocked(bool force) {
  if (conn_ != nullptr && !conn_->broken()) return Status::Ok();
  if (conn_ != nullptr) DisconnectLocked();
  const Clock::time_point now = Clock::now();
  if (!force && now - last_connect_attempt_ < kReconnectBackoff) {
    return last_connect_error_.ok()
               ? Status(StatusCode::kAgain, "redis: reconnecting")
               : last_connect_error_;
  }
  last_connect_attempt_ = now;
  StatusOr<std::unique_ptr<RedisConnection>> c = RedisConnection::Connect(
      url_, options_.connect_timeout, options_.command_timeout);
  if (!c.ok()) {
    last_connect_error_ = c.status();
    return c.status();
  }
  conn_ = std::move(c).value();
  last_connect_error_ = Status::Ok();
  {
    std::lock_guard<std::mutex> lock(addr_mu_);
    address_ = conn_->address();
  }
  connected_.store(true, std::memory_order_release);
  return Status::Ok();
}

StatusOr<Reply> ClusterCore::Run(const char* script,
                                 const std::vector<std::string>& args,
                                 bool may_reconnect,
                                 std::chrono::milliseconds lock_wait,
                                 uint64_t* commands) {
  std::unique_lock<std::mutex> lock(conn_mu_, std::defer_lock);
  if (!LockWithin(lock, lock_wait)) {
    return Status(StatusCode::kAgain, "redis: the connection stayed busy for " +
                                          std::to_string(lock_wait.count()) +
                                          " ms");
  }
  if (conn_ == nullptr || conn_->broken()) {
    if (!may_reconnect) {
      return Status(StatusCode::kAgain, "redis " + RedisUrlForDisplay(url_) +
                                            " unreachable (reconnecting)");
    }
    Status s = EnsureConnectedLocked(/*force=*/true);
    if (!s.ok()) return s;
  }
  const uint64_t before = conn_->commands();
  StatusOr<Reply> r = conn_->Eval(script, {hash_key_}, args);
  const uint64_t sent = conn_->commands() - before;
  commands_.fetch_add(sent, std::memory_order_relaxed);
  if (commands != nullptr) *commands += sent;
  if (r.ok() && IsReadOnlyError(r.value())) {
    // A replica: the master moved (a failover; the old master came back
    // as a replica of the new one). Reconnect, asking the sentinels again.
    const std::string where = conn_->address();
    DisconnectLocked();
    return Status(StatusCode::kAgain,
                  "redis " + where +
                      " is a read-only replica (the master moved): "
                      "reconnecting");
  }
  if (conn_->broken()) DisconnectLocked();
  return r;
}

void ClusterCore::Register(std::shared_ptr<Tickable> binding) {
  std::lock_guard<std::mutex> lock(mu_);
  bindings_.push_back(std::move(binding));
}

void ClusterCore::Unregister(const Tickable* binding) {
  std::lock_guard<std::mutex> lock(mu_);
  bindings_.erase(
      std::remove_if(bindings_.begin(), bindings_.end(),
                     [binding](const auto& b) { return b.get() == binding; }),
      bindings_.end());
}

void ClusterCore::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

void ClusterCore::PollDrains(
    const std::vector<std::shared_ptr<Tickable>>& bindings) {
  // Subscribed where the commands go: after a failover, to the new master.
  if (sub_ != nullptr && connected() && sub_->address() != address()) {
    sub_.reset();
    last_sub_attempt_ = Clock::time_point{};
  }
  if (sub_ == nullptr || sub_->broken()) {
    sub_.reset();
    const Clock::time_point now = Clock::now();
    if (!connected() || now - last_sub_attempt_ < std::chrono::seconds(1)) {
      return;
    }
    last_sub_attempt_ = now;
    StatusOr<std::unique_ptr<RedisConnection>> c = RedisConnection::Connect(
        url_, options_.connect_timeout, options_.command_timeout);
    if (!c.ok()) return;
    StatusOr<Reply> r = c.value()->Command({"SUBSCRIBE", hash_key_ + ":drain"});
    if (!r.ok() || r.value().is_error()) return;
    sub_ = std::move(c).value();
  }
  StatusOr<std::vector<std::string>> msgs = sub_->PollMessages();
  if (!msgs.ok()) {
    sub_.reset();
    return;
  }
  for (const std::string& m : msgs.value()) {
    // "<path>\n<owner>"
    const size_t nl = m.find('\n');
    if (nl == std::string::npos) continue;
    const std::string_view path(m.data(), nl);
    const std::string_view from(m.data() + nl + 1, m.size() - nl - 1);
    for (const auto& b : bindings) b->OnDrain(path, from);
  }
}

void ClusterCore::PollSentinel() {
  if (!url_.sentinel()) return;
  if (sentinel_sub_ == nullptr || sentinel_sub_->broken()) {
    sentinel_sub_.reset();
    const Clock::time_point now = Clock::now();
    if (now - last_sentinel_attempt_ < std::chrono::seconds(1)) return;
    last_sentinel_attempt_ = now;
    for (const auto& [host, port] : url_.sentinels) {
      RedisUrl s;
      s.host = host;
      s.port = port;
      StatusOr<std::unique_ptr<RedisConnection>> c = RedisConnection::Connect(
          s, options_.connect_timeout, options_.command_timeout);
      if (!c.ok()) continue;
      StatusOr<Reply> r = c.value()->Command({"SUBSCRIBE", "+switch-master"});
      if (!r.ok() || r.value().is_error()) continue;
      sentinel_sub_ = std::move(c).value();
      break;
    }
    if (sentinel_sub_ == nullptr) return;
  }
  StatusOr<std::vector<std::string>> msgs = sentinel_sub_->PollMessages();
  if (!msgs.ok()) {
    sentinel_sub_.reset();
    return;
  }
  for (const std::string& m : msgs.value()) {
    // "<name> <old ip> <old port> <new ip> <new port>"
    std::vector<std::string_view> f;
    size_t start = 0;
    while (start <= m.size()) {
      size_t end = m.find(' ', start);
      if (end == std::string::npos) end = m.size();
      f.emplace_back(m.data() + start, end - start);
      start = end + 1;
    }
    if (f.size() != 5 || f[0] != url_.master_name) continue;
    const std::string ip(f[3]);
    const std::string now_at =
        (ip.find(':') != std::string::npos ? "[" + ip + "]" : ip) + ":" +
        std::string(f[4]);
    std::unique_lock<std::mutex> c(conn_mu_, std::defer_lock);
    if (!LockWithin(c, options_.command_timeout)) continue;
    if (conn_ == nullptr || conn_->address() != now_at) {
      if (conn_ != nullptr) DisconnectLocked();
      // Reconnect now, not after the reconnect backoff.
      (void)EnsureConnectedLocked(/*force=*/true);
    }
    c.unlock();
    sub_.reset();  // PollDrains subscribes again, on the new master
    last_sub_attempt_ = Clock::time_point{};
  }
}

void ClusterCore::Main() {
  const std::chrono::milliseconds poll =
      std::max(options_.poll_interval, std::chrono::milliseconds(1));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, poll, [this] { return stop_ || woken_; });
    if (stop_) break;
    woken_ = false;
    std::vector<std::shared_ptr<Tickable>> bindings = bindings_;
    lock.unlock();
    if (!connected()) {
      std::unique_lock<std::mutex> c(conn_mu_, std::defer_lock);
      if (LockWithin(c, options_.command_timeout)) {
        (void)EnsureConnectedLocked(/*force=*/false);
      }
    }
    PollSentinel();
    PollDrains(bindings);
    const Clock::time_point now = Clock::now();
    for (const auto& b : bindings) b->Tick(now);
    bindings.clear();  // drop the references outside mu_
    lock.lock();
  }
}

}  // namespace umemcg::cluster_internal

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "cluster/cluster_core.h"

#include <algorithm>

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
  // Subscribe to the drain channel now, before any binding exists (the
  // background thread retries if this fails).
  PollDrains({});
  thread_ = std::thread([this] { Main(); });
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

Status ClusterCore::EnsureConnectedLocked(bool force) {
  if (conn_ != nullptr && !conn_->broken()) return Status::Ok();
  if (conn_ != nullptr) {
    conn_.reset();
    connected_.store(false, std::memory_order_release);
  }
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
  if (conn_->broken()) {
    conn_.reset();
    connected_.store(false, std::memory_order_release);
  }
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
    PollDrains(bindings);
    const Clock::time_point now = Clock::now();
    for (const auto& b : bindings) b->Tick(now);
    bindings.clear();  // drop the references outside mu_
    lock.lock();
  }
}

}  // namespace umemcg::cluster_internal

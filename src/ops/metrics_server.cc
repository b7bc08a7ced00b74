// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ServeMetrics: cpp-httplib serving GET /metrics from its own threads.
//
// Bounds. Each connection is served by one of `threads` workers and is
// closed after read_timeout without a complete request (or write_timeout
// without progress writing), so a slow or stuck client holds a worker for
// at most that long. Accepted connections wait in a queue of at most
// max_pending; past it the accepting thread serves the next connection
// itself, which stops accepting until it is done: the kernel's listen
// backlog absorbs the rest. Requests are parsed by httplib (bad request
// lines and oversized header lines are 400); the pre-routing handler
// answers everything that is not GET /metrics before any body is read.
// Not bounded: the number of header lines, so a client that keeps sending
// one line per read timeout holds its worker until it stops (httplib 0.11
// has no whole-request deadline); `threads` bounds how many it can hold,
// and the application's threads are never involved.

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ops/attachment.h"
#include "umemcg/metrics.h"

#ifdef UMEMCG_HAVE_HTTPLIB
#include <httplib.h>
#endif

namespace umemcg {
namespace {

struct HostPort {
  std::string host;
  int port = 0;
};

StatusOr<HostPort> ParseAddress(std::string_view address) {
  auto invalid = [&] {
    return Status(StatusCode::kInvalidArgument,
                  "expected HOST:PORT, [V6]:PORT, :PORT or PORT, got '" +
                      std::string(address) + "'");
  };
  HostPort hp{"127.0.0.1", 0};
  std::string_view port = address;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == std::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return invalid();
    }
    hp.host = std::string(address.substr(1, close - 1));
    port = address.substr(close + 2);
  } else if (const size_t colon = address.rfind(':');
             colon != std::string_view::npos) {
    if (colon > 0) hp.host = std::string(address.substr(0, colon));
    port = address.substr(colon + 1);
  }
  if (port.empty() || port.size() > 5 || hp.host.empty()) return invalid();
  int p = 0;
  for (const char c : port) {
    if (c < '0' || c > '9') return invalid();
    p = p * 10 + (c - '0');
  }
  if (p > 65535) return invalid();
  hp.port = p;
  return hp;
}

#ifdef UMEMCG_HAVE_HTTPLIB

// httplib's task queue, bounded: see the file comment.
class BoundedPool final : public httplib::TaskQueue {
 public:
  BoundedPool(int threads, size_t max_pending) : max_pending_(max_pending) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { Run(); });
  }

  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (jobs_.size() < max_pending_) {
        jobs_.push_back(std::move(fn));
        cv_.notify_one();
        return;
      }
    }
    fn();  // back-pressure: the accepting thread serves this one
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutdown_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

 private:
  void Run() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return shutdown_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // shut down, queue drained
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      fn();
    }
  }

  const size_t max_pending_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  bool shutdown_ = false;                   // guarded by mu_
  std::vector<std::thread> workers_;
};

class Server final : public internal::Attachment {
 public:
  Server(Controller& controller, const MetricsServerOptions& options)
      : Attachment(controller), controller_(controller) {
    const auto seconds = [](std::chrono::milliseconds d, auto set) {
      set(static_cast<time_t>(d.count() / 1000),
          static_cast<time_t>(d.count() % 1000 * 1000));
    };
    seconds(options.read_timeout,
            [&](time_t s, time_t us) { http_.set_read_timeout(s, us); });
    seconds(options.write_timeout,
            [&](time_t s, time_t us) { http_.set_write_timeout(s, us); });
    http_.set_keep_alive_timeout(std::max<time_t>(
        1, static_cast<time_t>(options.read_timeout.count() / 1000)));
    http_.set_keep_alive_max_count(10);
    http_.set_payload_max_length(4096);
    // Not httplib's default SO_REUSEPORT: a second server (or another
    // process) must not be able to bind the same port and take scrapes.
    http_.set_socket_options([](socket_t sock) {
      const int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    const int threads = options.threads;
    const size_t max_pending = options.max_pending;
    http_.new_task_queue = [threads, max_pending] {
      return new BoundedPool(threads, max_pending);
    };
    http_.set_pre_routing_handler([this](const httplib::Request& req,
                                         httplib::Response& res) {
      requests_.fetch_add(1, std::memory_order_relaxed);  // a statistic
      if (req.path != "/metrics") {
        res.status = 404;
        res.set_content("not found: only /metrics is served\n", "text/plain");
        return httplib::Server::HandlerResponse::Handled;
      }
      if (req.method != "GET") {
        res.status = 405;
        res.set_header("Allow", "GET");
        res.set_content("method not allowed: GET only\n", "text/plain");
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    http_.Get("/metrics",
              [this](const httplib::Request&, httplib::Response& res) {
                res.set_content(FormatPrometheus(CollectMetrics(controller_)),
                                "text/plain; version=0.0.4; charset=utf-8");
              });
  }

  Status Start(const HostPort& hp) {
    host_ = hp.host;
    port_ = hp.port == 0
                ? http_.bind_to_any_port(hp.host)
                : (http_.bind_to_port(hp.host, hp.port) ? hp.port : -1);
    if (port_ < 0) {
      return Status(StatusCode::kFailedPrecondition,
                    "cannot bind " + hp.host + ":" + std::to_string(hp.port));
    }
    listener_ = std::thread([this] {
      http_.listen_after_bind();
      std::lock_guard<std::mutex> lock(mu_);
      listener_done_ = true;
      cv_.notify_all();
    });
    // httplib's stop() only works once listen has started: wait for it
    // (or for it to fail).
    std::unique_lock<std::mutex> lock(mu_);
    while (!listener_done_ && !http_.is_running()) {
      cv_.wait_for(lock, std::chrono::milliseconds(1));
    }
    return Status::Ok();
  }

  int port() const { return port_; }
  std::string address() const {
    const bool v6 = host_.find(':') != std::string::npos;
    return (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_);
  }
  uint64_t requests() const {
    return requests_.load(std::memory_order_relaxed);
  }

 protected:
  void DoStop() override {
    if (!listener_.joinable()) return;
    // Closes the listening socket; listen_after_bind then shuts the task
    // queue down, which joins the workers after their connections end.
    http_.stop();
    listener_.join();
  }

 private:
  Controller& controller_;
  httplib::Server http_;
  std::string host_;
  int port_ = -1;
  std::thread listener_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool listener_done_ = false;  // guarded by mu_
  std::atomic<uint64_t> requests_{0};
};

class ServerHandle final : public MetricsServer {
 public:
  explicit ServerHandle(std::shared_ptr<Server> server)
      : server_(std::move(server)) {}
  ~ServerHandle() override { server_->StopAndDetach(); }

  int port() const override { return server_->port(); }
  std::string address() const override { return server_->address(); }
  void Stop() override { server_->Stop(); }
  uint64_t requests() const override { return server_->requests(); }

 private:
  std::shared_ptr<Server> server_;
};

#endif  // UMEMCG_HAVE_HTTPLIB

}  // namespace

StatusOr<std::unique_ptr<MetricsServer>> ServeMetrics(
    Controller& controller, std::string_view address,
    const MetricsServerOptions& options) {
  StatusOr<HostPort> hp = ParseAddress(address);
  if (!hp.ok()) return hp.status();
  if (options.threads < 1 || options.threads > 64 ||
      options.read_timeout.count() <= 0 || options.write_timeout.count() <= 0) {
    return Status(StatusCode::kInvalidArgument,
                  "threads must be 1..64 and timeouts positive");
  }
#ifdef UMEMCG_HAVE_HTTPLIB
  auto server = std::make_shared<Server>(controller, options);
  if (Status s = server->Start(hp.value()); !s.ok()) return s;
  server->Attach(server);
  return std::unique_ptr<MetricsServer>(
      std::make_unique<ServerHandle>(std::move(server)));
#else
  (void)controller;
  return Status(StatusCode::kFailedPrecondition,
                "umemcg was built without cpp-httplib: no metrics server");
#endif
}

}  // namespace umemcg

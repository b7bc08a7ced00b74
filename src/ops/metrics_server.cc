// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ServeMetrics: GET /metrics (and GET /debug/pprof/heap?group=PATH, a
// group's heap profile) over HTTP/1.1, cpp-httplib parsing and routing each
// request, our own threads around it.
//
// Bounds. httplib's own accept loop gives no whole-request deadline (a
// client sending one header line per read timeout would hold a thread for
// ever), so the server runs its own: an accepting thread and `threads`
// workers, one request per connection (answered with Connection: close).
// Each connection is read and written through DeadlineStream: every read
// or write waits at most read_timeout / write_timeout, and the connection
// as a whole at most request_timeout, after which it is closed. Accepted
// connections wait in a queue of at most max_pending; past it the
// accepting thread serves the next one itself, which stops accepting for
// at most request_timeout: the kernel's listen backlog absorbs the rest.
// httplib parses (bad request lines and oversized header lines: 400); the
// pre-routing handler answers everything but GET of those before any body
// is read. Stopping wakes the accepting thread through an eventfd and
// joins the workers, each done within request_timeout.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ops/attachment.h"
#include "port/thread.h"
#include "umemcg/controller.h"
#include "umemcg/group.h"
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

// "127.0.0.1:9100", "[::1]:9100".
std::string FormatHostPort(const HostPort& hp) {
  const bool v6 = hp.host.find(':') != std::string::npos;
  return (v6 ? "[" + hp.host + "]" : hp.host) + ":" + std::to_string(hp.port);
}

#ifdef UMEMCG_HAVE_HTTPLIB

using Clock = std::chrono::steady_clock;

int MillisUntil(Clock::time_point t) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

// A connection's socket for httplib, with per-call timeouts and a deadline
// for the whole connection.
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(int fd, const MetricsServerOptions& o)
      : fd_(fd),
        read_timeout_(static_cast<int>(o.read_timeout.count())),
        write_timeout_(static_cast<int>(o.write_timeout.count())),
        deadline_(Clock::now() + o.request_timeout) {}

  bool is_readable() const override {
    return buffered_ < filled_ || Wait(POLLIN, read_timeout_);
  }
  bool is_writable() const override { return Wait(POLLOUT, write_timeout_); }

  ssize_t read(char* ptr, size_t size) override {
    if (buffered_ == filled_) {
      if (!Wait(POLLIN, read_timeout_)) return -1;
      ssize_t n;
      do {
        n = ::recv(fd_, buf_, sizeof(buf_), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      buffered_ = 0;
      filled_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, filled_ - buffered_);
    std::memcpy(ptr, buf_ + buffered_, n);
    buffered_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!Wait(POLLOUT, write_timeout_)) return -1;
    ssize_t n;
    do {
      n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(::getsockname, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  // Waits for `events` for at most `timeout_ms`, and never past the
  // connection's deadline.
  bool Wait(short events, int timeout_ms) const {
    pollfd p{fd_, events, 0};
    for (;;) {
      const int n = ::poll(&p, 1, std::min(timeout_ms, MillisUntil(deadline_)));
      if (n > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
      if (n == 0 || errno != EINTR) return false;
    }
  }

  template <typename GetName>
  void Address(GetName get, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    ip.clear();
    port = 0;
    if (get(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (addr.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
      ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
      port = ntohs(in->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
      ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
      port = ntohs(in6->sin6_port);
    }
    ip = text;
  }

  const int fd_;
  const int read_timeout_;
  const int write_timeout_;
  const Clock::time_point deadline_;
  char buf_[4096];
  size_t buffered_ = 0;  // next unread byte of buf_
  size_t filled_ = 0;
};

// httplib::Server for its parsing, routing and response writing
// (process_request), fed by our own connections.
class HttpServer final : public httplib::Server {
 public:
  // Serves one request on `fd`, then closes it.
  void Serve(int fd, const MetricsServerOptions& options) {
    DeadlineStream stream(fd, options);
    bool closed = false;
    process_request(stream, /*close_connection=*/true, closed,
                    [](httplib::Request&) {});
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
  }
  // The socket bind_to_port() made (ours to close), or -1.
  int listen_fd() const { return static_cast<int>(svr_sock_.load()); }
  void CloseListener() {
    const socket_t fd = svr_sock_.exchange(INVALID_SOCKET);
    if (fd != INVALID_SOCKET) ::close(fd);
  }
};

// A group's heap profile (see the route in Server).
constexpr const char* kHeapPath = "/debug/pprof/heap";

class Server final : public internal::Attachment {
 public:
  Server(Controller& controller, const MetricsServerOptions& options)
      : Attachment(controller), controller_(controller), options_(options) {
    http_.set_payload_max_length(4096);
    http_.set_pre_routing_handler([this](const httplib::Request& req,
                                         httplib::Response& res) {
      requests_.fetch_add(1, std::memory_order_relaxed);  // a statistic
      if (req.path != "/metrics" && req.path != kHeapPath) {
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
    // A group's heap profile (pprof, gzipped), the path Go's and
    // gperftools' users point their tools at: the group's
    // memory.heap_profile file (heap_profile.h), present once the program
    // installed an encoder (libumemcg-profile's InstallHeapProfileFiles).
    http_.Get(kHeapPath, [this](const httplib::Request& req,
                                httplib::Response& res) {
      std::string path =
          req.has_param("group") ? req.get_param_value("group") : "";
      while (!path.empty() && path.front() == '/') path.erase(0, 1);
      while (!path.empty() && path.back() == '/') path.pop_back();
      StatusOr<GroupRef> g =
          path.empty() ? StatusOr<GroupRef>(GroupRef(&controller_.root()))
                       : controller_.Lookup(path);
      if (!g.ok()) {
        res.status = 404;
        res.set_content("no such group: " + path + "\n", "text/plain");
        return;
      }
      StatusOr<std::string> profile =
          g.value()->ReadFile("memory.heap_profile");
      if (!profile.ok()) {
        res.status = 404;
        res.set_content(
            "no heap profile (the program has not installed an "
            "encoder: InstallHeapProfileFiles)\n",
            "text/plain");
        return;
      }
      res.set_content(std::move(profile.value()), "application/octet-stream");
    });
    // Not httplib's default SO_REUSEPORT: a second server (or another
    // process) must not be able to bind the same port and take scrapes.
    http_.set_socket_options([](socket_t sock) {
      const int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
  }

  ~Server() override {
    if (stop_fd_ >= 0) ::close(stop_fd_);
    http_.CloseListener();
  }

  Status Start(const HostPort& hp) {
    host_ = hp.host;
    errno = 0;
    port_ = hp.port == 0
                ? http_.bind_to_any_port(hp.host)
                : (http_.bind_to_port(hp.host, hp.port) ? hp.port : -1);
    if (port_ < 0 || http_.listen_fd() < 0) {
      // httplib closes the socket it could not bind (close() leaves errno
      // alone when it succeeds): errno is bind()'s or listen()'s.
      const int err = errno;
      const std::string where = "cannot bind " + FormatHostPort(hp);
      if (err == 0) return Status(StatusCode::kFailedPrecondition, where);
      const StatusCode code = err == EADDRINUSE ? StatusCode::kAddressInUse
                              : err == EACCES   ? StatusCode::kPermissionDenied
                                              : StatusCode::kFailedPrecondition;
      return Status(code, where + ": " + std::strerror(err));
    }
    stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (stop_fd_ < 0) {
      return Status(StatusCode::kFailedPrecondition,
                    std::string("eventfd: ") + std::strerror(errno));
    }
    for (int i = 0; i < options_.threads; ++i) {
      workers_.push_back(internal::StartThread([this] { Work(); }));
    }
    acceptor_ = internal::StartThread([this] { Accept(); });
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
    if (!acceptor_.joinable()) return;  // never started
    const uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof(one));
    acceptor_.join();
    http_.CloseListener();  // new connections are refused from here
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : workers_) t.join();  // each within request_timeout
    workers_.clear();
  }

 private:
  void Accept() {
    pollfd fds[2] = {{http_.listen_fd(), POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    for (;;) {
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents != 0) return;  // stopping
      const int fd =
          ::accept4(http_.listen_fd(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;  // ECONNABORTED, EMFILE, ...: try again
      std::unique_lock<std::mutex> lock(mu_);
      if (pending_.size() < options_.max_pending) {
        pending_.push_back(fd);
        lock.unlock();
        cv_.notify_one();
      } else {
        lock.unlock();
        http_.Serve(fd, options_);  // back-pressure: serve it here
      }
    }
  }

  void Work() {
    for (;;) {
      int fd;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
        if (pending_.empty()) return;  // stopping, queue drained
        fd = pending_.front();
        pending_.pop_front();
      }
      http_.Serve(fd, options_);
    }
  }

  Controller& controller_;
  const MetricsServerOptions options_;
  HttpServer http_;  // configured before the threads start; then read-only
  std::string host_;
  int port_ = -1;
  int stop_fd_ = -1;
  std::thread acceptor_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> pending_;  // guarded by mu_: accepted connections
  bool stopping_ = false;    // guarded by mu_
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
      options.read_timeout.count() <= 0 || options.write_timeout.count() <= 0 ||
      options.request_timeout.count() <= 0) {
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

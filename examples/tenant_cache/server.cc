// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "protocol.h"

namespace tenant_cache {

umemcg::StatusOr<std::unique_ptr<Server>> Server::Start(TenantCache& cache,
                                                        uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return umemcg::Status(umemcg::StatusCode::kFailedPrecondition,
                          std::strerror(errno));
  }
  const int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    close(fd);
    return umemcg::Status(umemcg::StatusCode::kFailedPrecondition,
                          std::strerror(err));
  }
  std::unique_ptr<Server> server(new Server(cache, fd, ntohs(addr.sin_port)));
  server->acceptor_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

Server::~Server() { Stop(); }

void Server::Stop() {
  if (stopping_.exchange(true)) return;
  // Wakes accept() (Linux returns EINVAL on a shut-down listener).
  (void)shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  close(listen_fd_);
  std::lock_guard<std::mutex> lock(mu_);
  for (Connection& c : connections_) (void)shutdown(c.fd, SHUT_RDWR);
  for (Connection& c : connections_) {
    c.thread.join();
    close(c.fd);
  }
  connections_.clear();
}

void Server::ReapFinished() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->done.load(std::memory_order_acquire)) {
      it->thread.join();
      close(it->fd);
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void Server::AcceptLoop() {
  while (!stopping_.load(std::memory_order_acquire)) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // shut down (or out of descriptors: stop serving)
    }
    const int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ReapFinished();
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_.load(std::memory_order_acquire)) {
      close(fd);
      return;
    }
    Connection& c = connections_.emplace_back();
    c.fd = fd;
    c.thread = std::thread([this, conn = &c] { Serve(conn); });
  }
}

void Server::Serve(Connection* conn) {
  Session session(cache_);
  std::string in, out;
  char buf[16384];
  for (;;) {
    const ssize_t n = read(conn->fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
    const bool keep = session.Process(in, out);
    size_t sent = 0;
    while (sent < out.size()) {
      const ssize_t w =
          send(conn->fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;
      sent += static_cast<size_t>(w);
    }
    const bool all_sent = sent == out.size();
    out.clear();
    if (!keep || !all_sent) break;
  }
  (void)shutdown(conn->fd, SHUT_RDWR);
  conn->done.store(true, std::memory_order_release);
}

}  // namespace tenant_cache

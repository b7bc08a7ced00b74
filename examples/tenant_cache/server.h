// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Server: serves a TenantCache over TCP on 127.0.0.1 (loopback only), one
// thread per connection, the protocol of protocol.h.
//
// Thread safety: Start/Stop from one owning thread; the connection threads
// share the cache.

#ifndef UMEMCG_EXAMPLES_TENANT_CACHE_SERVER_H_
#define UMEMCG_EXAMPLES_TENANT_CACHE_SERVER_H_

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "tenant_cache.h"
#include "umemcg/status.h"

namespace tenant_cache {

class Server {
 public:
  // Listens on 127.0.0.1:`port` (0: a free port, see port()).
  static umemcg::StatusOr<std::unique_ptr<Server>> Start(TenantCache& cache,
                                                         uint16_t port);
  // Stops accepting, closes every connection and joins every thread.
  ~Server();
  void Stop();

  uint16_t port() const { return port_; }

 private:
  struct Connection {
    int fd = -1;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  Server(TenantCache& cache, int listen_fd, uint16_t port)
      : cache_(cache), listen_fd_(listen_fd), port_(port) {}
  void AcceptLoop();
  void Serve(Connection* conn);
  void ReapFinished();  // joins connections that ended; takes mu_

  TenantCache& cache_;
  const int listen_fd_;
  const uint16_t port_;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mu_;  // guards connections_
  std::list<Connection> connections_;
};

}  // namespace tenant_cache

#endif  // UMEMCG_EXAMPLES_TENANT_CACHE_SERVER_H_

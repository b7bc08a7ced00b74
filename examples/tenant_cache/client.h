// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// LoopbackClient: a minimal blocking client for the tenant cache's text
// protocol (used by tenant_cache_load and the tests).
//
// Thread safety: one client per thread.

#ifndef UMEMCG_EXAMPLES_TENANT_CACHE_CLIENT_H_
#define UMEMCG_EXAMPLES_TENANT_CACHE_CLIENT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace tenant_cache {

class LoopbackClient {
 public:
  // Connects to 127.0.0.1:`port`; ok() says whether it worked.
  explicit LoopbackClient(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (fd_ >= 0 &&
        connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~LoopbackClient() {
    if (fd_ >= 0) close(fd_);
  }
  LoopbackClient(const LoopbackClient&) = delete;
  LoopbackClient& operator=(const LoopbackClient&) = delete;

  bool ok() const { return fd_ >= 0; }

  // Sends `request` and returns the reply up to and including `end` (or
  // what arrived before the connection closed, prefixed "closed: ").
  std::string Call(std::string_view request, std::string_view end = "\r\n") {
    size_t off = 0;
    while (off < request.size()) {
      const ssize_t n = write(fd_, request.data() + off, request.size() - off);
      if (n <= 0) return "closed: write failed";
      off += static_cast<size_t>(n);
    }
    while (buf_.find(end) == std::string::npos) {
      char tmp[65536];
      const ssize_t n = read(fd_, tmp, sizeof(tmp));
      if (n <= 0) return "closed: " + buf_;
      buf_.append(tmp, static_cast<size_t>(n));
    }
    const size_t cut = buf_.find(end) + end.size();
    std::string out = buf_.substr(0, cut);
    buf_.erase(0, cut);
    return out;
  }
  std::string Set(const std::string& key, std::string_view value) {
    std::string req = "set " + key + " 0 0 " + std::to_string(value.size());
    req += "\r\n";
    req += value;
    req += "\r\n";
    return Call(req);
  }
  std::string Get(const std::string& key) {
    return Call("get " + key + "\r\n", "END\r\n");
  }

 private:
  int fd_ = -1;
  std::string buf_;
};

}  // namespace tenant_cache

#endif  // UMEMCG_EXAMPLES_TENANT_CACHE_CLIENT_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// tenant_cache_load: a load generator for tenant_cache. One connection per
// tenant; each sets `--requests` values of `--value-size` bytes over
// `--keys` distinct keys (and gets every other one back), then prints per
// tenant how many sets were stored / refused and how many gets hit, and
// the server's `stats`.
//
//   tenant_cache_load --port=N [--tenants=a,b,c] [--requests=N]
//                     [--value-size=BYTES] [--keys=N]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

struct Result {
  long stored = 0, refused = 0, hits = 0, misses = 0;
};

class Client {
 public:
  explicit Client(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~Client() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  bool Send(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = write(fd_, s.data() + off, s.size() - off);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads until `end` terminates the buffer.
  std::string ReadUntil(std::string_view end) {
    while (buf_.find(end) == std::string::npos) {
      char tmp[65536];
      const ssize_t n = read(fd_, tmp, sizeof(tmp));
      if (n <= 0) break;
      buf_.append(tmp, static_cast<size_t>(n));
    }
    const size_t at = buf_.find(end);
    const size_t cut = at == std::string::npos ? buf_.size() : at + end.size();
    std::string out = buf_.substr(0, cut);
    buf_.erase(0, cut);
    return out;
  }

 private:
  int fd_ = -1;
  std::string buf_;
};

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  long requests = 2000, value_size = 4000, keys = 1000;
  std::string tenants = "a,b,c";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const size_t eq = arg.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string v(arg.substr(eq + 1));
    const std::string_view k = arg.substr(0, eq);
    if (k == "--port") port = std::atoi(v.c_str());
    if (k == "--tenants") tenants = v;
    if (k == "--requests") requests = std::atol(v.c_str());
    if (k == "--value-size") value_size = std::atol(v.c_str());
    if (k == "--keys") keys = std::atol(v.c_str());
  }
  if (port <= 0) {
    std::fprintf(stderr,
                 "usage: tenant_cache_load --port=N [--tenants=a,b] "
                 "[--requests=N] [--value-size=B] [--keys=N]\n");
    return 2;
  }
  std::vector<std::string> names;
  for (size_t s = 0; s <= tenants.size();) {
    const size_t e = std::min(tenants.find(',', s), tenants.size());
    if (e > s) names.push_back(tenants.substr(s, e - s));
    s = e + 1;
  }
  std::vector<Result> results(names.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < names.size(); ++t) {
    threads.emplace_back([&, t] {
      Client c(port);
      if (!c.ok()) return;
      const std::string value(static_cast<size_t>(value_size), 'v');
      for (long i = 0; i < requests; ++i) {
        const std::string key = names[t] + ":k" + std::to_string(i % keys);
        c.Send("set " + key + " 0 0 " + std::to_string(value_size) + "\r\n" +
               value + "\r\n");
        const std::string r = c.ReadUntil("\r\n");
        (r == "STORED\r\n" ? results[t].stored : results[t].refused)++;
        if (i % 2 == 1) {
          const std::string back =
              names[t] + ":k" + std::to_string((i * 7919) % keys);
          c.Send("get " + back + "\r\n");
          const std::string g = c.ReadUntil("END\r\n");
          (g.rfind("VALUE", 0) == 0 ? results[t].hits : results[t].misses)++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < names.size(); ++t) {
    std::printf("%-10s stored %ld refused %ld get hits %ld misses %ld\n",
                names[t].c_str(), results[t].stored, results[t].refused,
                results[t].hits, results[t].misses);
  }
  Client c(port);
  if (c.ok() && c.Send("stats\r\n"))
    std::fputs(c.ReadUntil("END\r\n").c_str(), stdout);
  return 0;
}

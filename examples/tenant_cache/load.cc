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

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "client.h"

namespace {

using tenant_cache::LoopbackClient;

struct Result {
  long stored = 0, refused = 0, hits = 0, misses = 0;
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
  if (port <= 0 || keys <= 0 || value_size < 0 || requests < 0) {
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
      LoopbackClient c(static_cast<uint16_t>(port));
      if (!c.ok()) return;
      const std::string value(static_cast<size_t>(value_size), 'v');
      for (long i = 0; i < requests; ++i) {
        const std::string r =
            c.Set(names[t] + ":k" + std::to_string(i % keys), value);
        (r == "STORED\r\n" ? results[t].stored : results[t].refused)++;
        if (i % 2 == 1) {
          const std::string back =
              names[t] + ":k" + std::to_string((i * 7919) % keys);
          const std::string g = c.Get(back);
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
  LoopbackClient c(static_cast<uint16_t>(port));
  if (c.ok()) std::fputs(c.Call("stats\r\n", "END\r\n").c_str(), stdout);
  return 0;
}

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// libFuzzer target for the cluster quota's Redis URL parser
// (src/cluster/redis_client.h): any bytes parse or fail cleanly; a parsed
// URL is well-formed (a host or an absolute socket path, port 1..65535,
// db >= 0; or sentinels so and a master name) and its display form (no
// credentials) parses back to the same address. Build with the `fuzz` preset
// (clang).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cluster/redis_client.h"

using umemcg::cluster_internal::ParseRedisUrl;
using umemcg::cluster_internal::RedisUrlForDisplay;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto url = ParseRedisUrl(text);
  if (!url.ok()) return 0;
  const auto& u = url.value();
  if (u.db < 0) std::abort();
  if (u.sentinel()) {
    if (u.sentinels.empty()) std::abort();
    for (const auto& [host, port] : u.sentinels) {
      if (host.empty() || port < 1 || port > 65535) std::abort();
    }
    auto again = ParseRedisUrl(RedisUrlForDisplay(u));
    if (!again.ok() || again.value().sentinels != u.sentinels ||
        again.value().master_name != u.master_name ||
        again.value().db != u.db) {
      std::abort();
    }
  } else if (u.unix_socket.empty()) {
    if (u.host.empty() || u.port < 1 || u.port > 65535) std::abort();
    const std::string display = RedisUrlForDisplay(u);
    auto again = ParseRedisUrl("redis://" + display);
    if (!again.ok() || again.value().host != u.host ||
        again.value().port != u.port || again.value().db != u.db) {
      std::abort();
    }
  } else if (u.unix_socket[0] != '/') {
    std::abort();
  }
  return 0;
}

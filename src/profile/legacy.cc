// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// FormatLegacyHeapProfile (heap_profile.h): gperftools' heap profile text.
//
//   heap profile: <inuse n>: <inuse bytes> [<alloc n>: <alloc bytes>] @
//   heap_v2/<rate> <inuse n>: <inuse bytes> [<alloc n>: <alloc bytes>] @ 0x...
//   0x...
//   ...
//
//   MAPPED_LIBRARIES:
//   <the process's /proc/self/maps>
//
// Counts and bytes are the unscaled samples: for heap_v2 the reader scales
// each line by 1 / (1 - exp(-avg / rate)), avg being the line's bytes per
// sample (exact for call sites allocating one size).

#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <string>

#include "umemcg/heap_profile.h"

namespace umemcg {
namespace {

void AppendLine(std::string& out, uint64_t inuse_n, uint64_t inuse_b,
                uint64_t alloc_n, uint64_t alloc_b) {
  char buf[128];
  std::snprintf(buf, sizeof(buf),
                "%" PRIu64 ": %" PRIu64 " [%" PRIu64 ": %" PRIu64 "] @",
                inuse_n, inuse_b, alloc_n, alloc_b);
  out += buf;
}

}  // namespace

std::string FormatLegacyHeapProfile(const HeapProfileSnapshot& snapshot) {
  uint64_t in = 0, ib = 0, an = 0, ab = 0;
  for (const HeapProfileEntry& e : snapshot.entries) {
    in += e.inuse_samples;
    ib += e.inuse_sampled_bytes;
    an += e.alloc_samples;
    ab += e.alloc_sampled_bytes;
  }
  std::string out = "heap profile: ";
  AppendLine(out, in, ib, an, ab);
  // A rate of 0 (off) has no samples; pprof needs a positive one.
  out += " heap_v2/" +
         std::to_string(snapshot.rate.raw() != 0 ? snapshot.rate.raw() : 1) +
         "\n";
  for (const HeapProfileEntry& e : snapshot.entries) {
    AppendLine(out, e.inuse_samples, e.inuse_sampled_bytes, e.alloc_samples,
               e.alloc_sampled_bytes);
    for (uintptr_t pc : e.stack) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), " 0x%" PRIxPTR, pc);
      out += buf;
    }
    out += '\n';
  }
  out += "\nMAPPED_LIBRARIES:\n";
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
      out.append(buf, static_cast<size_t>(n));
    }
    close(fd);
  }
  return out;
}

}  // namespace umemcg

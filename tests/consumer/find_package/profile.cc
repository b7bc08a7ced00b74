// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// A program linked against the installed profile component: a group's
// sampled heap profile comes out as gzipped pprof, and once installed as
// the encoder, memory.heap_profile is one of the group's files.

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "umemcg/heap_profile_pprof.h"
#include "umemcg/memory_resource.h"
#include "umemcg/umemcg.h"

int main() {
  auto ctrl = umemcg::Controller::Create({}).value();
  umemcg::GroupRef g = ctrl->CreateGroup(ctrl->root(), "t").value();
  umemcg::SetHeapProfileRate(*g, umemcg::Bytes(4096));  // every ~4 KiB
  umemcg::MemoryResource res(*g);
  std::vector<void*> held;
  for (int i = 0; i < 256; ++i) held.push_back(res.allocate(16384, 16));
  auto gzipped = [](const std::string& b) {
    return b.size() > 2 && static_cast<unsigned char>(b[0]) == 0x1f &&
           static_cast<unsigned char>(b[1]) == 0x8b;
  };
  const std::string pb = umemcg::HeapProfilePprof(*g);
  const size_t sites = umemcg::SnapshotHeapProfile(*g).entries.size();
  umemcg::InstallHeapProfileFiles();
  const std::vector<std::string> files = g->ListFiles();
  const bool listed = std::find(files.begin(), files.end(),
                                "memory.heap_profile") != files.end();
  auto file = g->ReadFile("memory.heap_profile");
  const bool read = file.ok() && gzipped(file.value());
  for (void* p : held) res.deallocate(p, 16384, 16);
  std::printf("profile consumer: %zu bytes of pprof, %zu call sites, file %s\n",
              pb.size(), sites, listed && read ? "ok" : "missing");
  return gzipped(pb) && sites > 0 && listed && read ? 0 : 1;
}

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// A group's sampled heap profile (heap_profile.h) as a gzipped pprof
// profile.proto, what `go tool pprof` and `google-pprof` read. Part of
// libumemcg-profile (umemcg::profile), which links libprotobuf.
//
//   std::string pb = umemcg::HeapProfilePprof(*tenant);  // gzipped bytes
//   // go tool pprof -top -sample_index=inuse_space file.pb.gz
//
// Sample types, in order: alloc_objects (count), alloc_space (bytes),
// inuse_objects (count), inuse_space (bytes; the default), already scaled
// for Poisson sampling; period_type space/bytes with the group's interval
// as period. Frames are symbolized in the process (dladdr, demangled);
// addresses no symbol covers are left to pprof, which symbolizes them from
// the mapped file (the mappings are written). The allocator's own entry
// points (malloc, operator new, ...) are named in drop_frames.
//
// Thread safety: may be called from any thread, concurrently with
// allocation and with other readers. Allocates; not for signal handlers.

#ifndef UMEMCG_HEAP_PROFILE_PPROF_H_
#define UMEMCG_HEAP_PROFILE_PPROF_H_

#include <string>

#include "umemcg/export.h"
#include "umemcg/heap_profile.h"
#include "umemcg/status.h"

namespace umemcg {

class Group;

// Encodes `snapshot` (its stacks' addresses must belong to this process).
UMEMCG_EXPORT std::string EncodeHeapProfilePprof(
    const HeapProfileSnapshot& snapshot);

// SnapshotHeapProfile(group, subtree), encoded. The subtree's profile is
// the merge of its groups' profiles.
UMEMCG_EXPORT std::string HeapProfilePprof(Group& group, bool subtree = false);

// Writes HeapProfilePprof(group, subtree) to `path` (replaced).
UMEMCG_EXPORT Status WriteHeapProfilePprof(Group& group,
                                           const std::string& path,
                                           bool subtree = false);

// Installs EncodeHeapProfilePprof as the encoder of memory.heap_profile
// (heap_profile.h, SetHeapProfileEncoder): the file then shows in
// Group::ListFiles, the FUSE mount, and everything reading through them
// (`umemcg profile`, ServeMetrics' /debug/pprof/heap).
UMEMCG_EXPORT void InstallHeapProfileFiles();

}  // namespace umemcg

#endif  // UMEMCG_HEAP_PROFILE_PPROF_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Sampled heap profiles per group: which code holds a group's memory.
//
// Sampling. Allocations charged through an objcg by the allocator
// integrations (MemoryResource, the LD_PRELOAD interposer in both heap
// modes, libumemcg-jemalloc's per-group arenas when HeapOptions::heap_profile
// asks, and callers of NoteHeapAllocation below) are sampled by bytes: a
// Poisson process with one point every `rate` bytes on average runs over the
// bytes each thread allocates, and a block is sampled when a point falls in it
// (the geometric sampling of tcmalloc and jemalloc; a block of s bytes is
// sampled with probability 1 - exp(-s / rate)). A sampled block records its
// stack and its owner objcg; its sample is dropped when the block is freed.
// Cumulative counts (every block sampled so far) are kept per call site. The
// owner is the objcg, so samples follow reparenting as charges do: once a group
// is removed its samples show in its nearest online ancestor's profile.
//
// The rate is set per controller (default kDefaultHeapProfileRate, 512 KiB,
// as jemalloc's lg_prof_sample 19) and may be overridden per group (the
// group and its descendants without their own setting). 0 turns sampling
// off. A thread pays one thread-local decrement and a branch per
// allocation; when its countdown expires (once per ~rate bytes) it takes
// the slow path: the group's rate is looked up (a group with a larger rate
// than the process-wide minimum is thinned), the stack captured and the
// sample recorded in a global table under a mutex. Frees of unsampled
// blocks never consult the table: the integrations keep a "sampled" bit in
// the block's header, or (libumemcg-jemalloc and the preload's jemalloc
// mode, which have no header) serve sampled blocks from a second arena of
// the group whose chunks are tagged "sampled".
//
// Stacks are captured with the unwind tables by default (correct through
// code built without frame pointers): libunwind's unw_backtrace when
// libunwind.so.8 can be loaded (dlopen at the first sample), else libgcc's
// _Unwind_Backtrace (much slower); or by walking frame pointers (only for
// programs and libraries built with -fno-omit-frame-pointer; a frame
// without one hides its caller; bounded by the thread's stack).
//
// Fork: the child starts with an empty profile (its samples and counts are
// forgotten; blocks inherited from the parent are not sampled in it).
//
// Reading: SnapshotHeapProfile gives the scaled samples of a group (or its
// subtree); libumemcg-profile (heap_profile_pprof.h) encodes them as a
// gzipped pprof profile.proto.
//
// Thread safety: every function may be called from any thread at any time.
// The hot-path entry points (internal) never allocate with malloc and take
// no lock unless the countdown expired; the slow path takes one mutex and
// may map memory (mmap) for the table. Not async-signal-safe.

#ifndef UMEMCG_HEAP_PROFILE_H_
#define UMEMCG_HEAP_PROFILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "umemcg/export.h"
#include "umemcg/units.h"

namespace umemcg {

class Controller;
class Group;
class ObjCgroup;

inline constexpr Bytes kDefaultHeapProfileRate{512 * 1024};

// Sets the mean sampling interval of every group of `controller` that has
// no per-group setting. 0: off.
UMEMCG_EXPORT void SetHeapProfileRate(Controller& controller, Bytes rate);
// Sets (or, with `inherit`, clears) `group`'s own interval; it applies to
// its descendants without their own setting. 0: off for that subtree.
UMEMCG_EXPORT void SetHeapProfileRate(Group& group, Bytes rate);
UMEMCG_EXPORT void ClearHeapProfileRate(Group& group);
// The interval in force for allocations charged to `group`.
UMEMCG_EXPORT Bytes HeapProfileRate(const Group& group);

enum class StackCapture {
  kUnwindTables,   // unw_backtrace, or _Unwind_Backtrace (default)
  kFramePointers,  // frame-pointer walk, bounded by the thread's stack
};
// Process-wide: how stacks are captured from now on.
UMEMCG_EXPORT void SetHeapProfileStackCapture(StackCapture capture);

// Page charges (Group::TryCharge, Uncharge and UnchargeDirect without a
// StatItem, and the C API's umemcg_try_charge / umemcg_uncharge /
// umemcg_uncharge_direct) feed the profiler only when this is on
// (process-wide; default off; every thread sees a change at its next page
// operation). Off, the page API pays one load of a read-mostly flag and a
// branch; on, each page charge and uncharge counts against the thread's
// countdown like an allocation, and a sampled one costs a sample (about a
// microsecond): at the default 512 KiB interval, once every 128 single-page
// charges. A page charge has no address: its sample joins its group's queue of
// page samples, and an uncharge whose countdown expired releases the oldest of
// them worth its estimated bytes (docs/design.md, Heap profiles per group).
UMEMCG_EXPORT void SetHeapProfilePageCharges(bool on);

// Frames kept per sample (innermost first); deeper stacks are cut.
inline constexpr int kHeapProfileMaxFrames = 64;

// One call site of a profile: its stack and its values, scaled to estimate
// the real objects and bytes (each sample of a block of s bytes sampled at
// interval r counts 1 / (1 - exp(-s / r)) objects and s times that bytes).
struct HeapProfileEntry {
  // Return addresses, innermost first (the allocating function's call
  // into the allocator comes first).
  std::vector<uintptr_t> stack;
  double alloc_objects = 0;
  double alloc_space = 0;
  double inuse_objects = 0;
  double inuse_space = 0;
  // Samples behind the values, and their bytes (unscaled).
  uint64_t alloc_samples = 0;
  uint64_t inuse_samples = 0;
  uint64_t alloc_sampled_bytes = 0;
  uint64_t inuse_sampled_bytes = 0;
};

struct HeapProfileSnapshot {
  // The interval in force for the group read (pprof's period).
  Bytes rate{0};
  std::vector<HeapProfileEntry> entries;
};

// The samples charged to `group` now (after reparenting: those of its
// removed descendants too), or with `subtree` to the group and all its
// descendants. Cumulative values are kept per owner: a removed group's
// history shows in its ancestor's profile.
UMEMCG_EXPORT HeapProfileSnapshot SnapshotHeapProfile(Group& group,
                                                      bool subtree = false);

// The snapshot in gperftools' legacy heap profile text ("heap_v2", the
// unscaled samples; the reader scales them) followed by this process's
// /proc/self/maps, so `go tool pprof` and `google-pprof` symbolize it from
// the mapped files. Needs no protobuf: what the preload writes
// (UMEMCG_PROFILE).
UMEMCG_EXPORT std::string FormatLegacyHeapProfile(
    const HeapProfileSnapshot& snapshot);

// The file format of memory.heap_profile. The files layer (files.h) shows
// that file in every group with the memory controller once an encoder is
// installed: libumemcg-profile's InstallHeapProfileFiles() installs the
// pprof one (heap_profile_pprof.h), so the core needs no protobuf. Reading
// the file encodes SnapshotHeapProfile(group, /*subtree=*/true): like
// memory.current it covers the subtree.
using HeapProfileEncoder = std::string (*)(const HeapProfileSnapshot&);
UMEMCG_EXPORT void SetHeapProfileEncoder(HeapProfileEncoder encoder);
UMEMCG_EXPORT HeapProfileEncoder GetHeapProfileEncoder();

// For callers charging an objcg directly (ObjCgroup::Charge or pages
// through Group::TryCharge with the group's objcg): counts `size` bytes at
// `block` allocated for `owner` against the calling thread's countdown and
// returns true when the block was sampled. Then, and only then, the caller
// must call ForgetHeapAllocation(block) before freeing it (keep a bit).
// REQUIRES: the caller holds a reference to `owner`.
UMEMCG_EXPORT bool NoteHeapAllocation(ObjCgroup* owner, const void* block,
                                      Bytes size);
UMEMCG_EXPORT void ForgetHeapAllocation(const void* block);

// Tests: reseeds the calling thread's sampling (its random generator and
// countdown), so a sequence of allocations is sampled deterministically.
UMEMCG_EXPORT void SeedHeapProfileThreadForTesting(uint64_t seed);
// Tests: live samples in the whole process.
UMEMCG_EXPORT uint64_t HeapProfileLiveSamplesForTesting();

}  // namespace umemcg

#endif  // UMEMCG_HEAP_PROFILE_H_

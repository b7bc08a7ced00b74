// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// libumemcg-jemalloc's inner interface between the heap (heap.cc: arenas,
// extent hooks, the chunk table, thread caches) and the malloc / new
// interposition (routing.cc).
//
// Thread safety: as include/umemcg/jemalloc.h; every function here may be
// called from any thread, from inside jemalloc's extent hooks too (then
// they allocate from jemalloc's automatic arenas, uncharged).

#ifndef UMEMCG_SRC_JEMALLOC_HEAP_H_
#define UMEMCG_SRC_JEMALLOC_HEAP_H_

#include <atomic>
#include <cstddef>

#include "profile/sampler.h"

namespace umemcg::jemalloc::internal {

// mallocx flags for an allocation by the calling thread now: the active
// group's arena and this thread's cache of it, or 0 (automatic arena).
int AllocFlags();
// mallocx / dallocx flags for freeing `p` on the calling thread. A block of
// a sampled arena (see AllocSampled) drops its sample here.
int FreeFlags(void* p);
// HeapOptions::heap_profile of the enabled heap. Stored by Enable before it
// publishes the heap; loaded relaxed on every routed allocation (a plain
// load): a thread that reads a stale value only misses or takes a sample.
extern std::atomic<bool> g_heap_profile;
// The heap profiler's countdown (profile/sampler.h) for an allocation of
// `size` bytes with AllocFlags' `flags`: only allocations routed to a
// group's arena count, when HeapOptions::heap_profile is on. A load, a
// thread-local subtraction and two branches; true: allocate with
// AllocSampled instead of mallocx.
[[gnu::always_inline]] inline bool SampleNow(int flags, size_t size) {
  // MALLOCX_ARENA(a) is (a + 1) << 20; 0 for the automatic arenas.
  return (static_cast<unsigned>(flags) >> 20) != 0 &&
         g_heap_profile.load(std::memory_order_relaxed) &&
         profile::CountdownExpired(size);
}
// mallocx(size, flags) for an allocation whose countdown expired: when the
// profiler samples it, the block comes from the group's sampled arena
// (charged to the group like its arena; its chunks' tag marks them, so
// FreeFlags tells a sampled block from others with the lookup it already
// does) and is recorded with the stack cut at `entry_return` (the return
// address of the allocator's entry point).
[[gnu::noinline]] void* AllocSampled(size_t size, int flags,
                                     const void* entry_return);
// The arena owning `p` (0: not a group's arena).
unsigned ArenaOf(const void* p);
// Sleeps the memory.high penalty the calling thread's last commit hooks
// left (they charge with kNoThrottle; see jemalloc.h), and forgets a
// refusal once the allocation it failed returned. Cheap when neither.
void AfterAlloc(void* result);
// Whether the calling thread's last commit hook refused a charge (read
// before AfterAlloc, which forgets it).
bool Refused();

}  // namespace umemcg::jemalloc::internal

#endif  // UMEMCG_SRC_JEMALLOC_HEAP_H_

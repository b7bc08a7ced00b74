// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The preload's jemalloc mode (UMEMCG_HEAP=jemalloc, docs/preload.md): heap
// blocks come from jemalloc (preloaded behind the preload), without a
// header, from a per-group arena charged page by page by libumemcg-
// jemalloc's extent hooks (src/jemalloc/heap.cc, compiled in). The mode is
// decided by the first call into the allocator, before any block exists,
// so every block of a process is of one kind and free never has to tell
// them apart. Header mode pays one predictable branch on g_heap_mode.
//
// Thread safety: the decision is made by the first allocation call, which
// glibc and the dynamic loader make before any thread exists; every
// function here may then be called from any thread.

#ifndef UMEMCG_SRC_PRELOAD_JEMALLOC_MODE_H_
#define UMEMCG_SRC_PRELOAD_JEMALLOC_MODE_H_

#include <cstddef>
#include <cstdint>

#include "umemcg/controller.h"
#include "umemcg/group.h"

#pragma GCC visibility push(hidden)

namespace umemcg::preload {

enum HeapMode : int { kHeapHeader = 0, kHeapJemalloc = 1, kHeapUndecided = 2 };
// kHeapUndecided until the first allocation call decides (header mode's
// hot paths test `g_heap_mode != kHeapHeader`, once per call).
extern int g_heap_mode;

// Decides the mode from UMEMCG_HEAP (once; cheap afterwards) and returns
// it: jemalloc when asked and libjemalloc.so.2 is loaded, else header (a
// warning says why when jemalloc was asked and cannot be used).
[[gnu::noinline]] int DecideHeapMode();

// The jemalloc mode's allocator. Arguments follow glibc's rules as checked
// by the callers (hooks.cc): `align` is a power of two.
void* JeAllocate(size_t size, size_t align, bool zero);
void JeFree(void* p);
void* JeReallocate(void* p, size_t size);
size_t JeUsableSize(void* p);

// Runtime start-up (runtime.cc): turns the per-group arenas on for
// `controller`; false (with the reason in *why) when jemalloc refuses.
bool EnableJemallocHeap(Controller& controller, const char** why);
// Report figures (bytes) for the exit report.
struct JeHeapFigures {
  int64_t charged;      // pages `group`'s own arena charged now
  int64_t active;       // its jemalloc pactive
  int64_t dirty;        // its jemalloc pdirty (freed, not purged; charged)
  int64_t unaccounted;  // automatic arenas' pactive + pdirty (uncharged)
};
JeHeapFigures GetJeHeapFigures(Group& group);

}  // namespace umemcg::preload

#pragma GCC visibility pop

#endif  // UMEMCG_SRC_PRELOAD_JEMALLOC_MODE_H_

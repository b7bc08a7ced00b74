// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The preload's jemalloc mode (jemalloc_mode.h, docs/preload.md).

#include "preload/jemalloc_mode.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "preload/preload_internal.h"

extern "C" char** __environ;

namespace umemcg::preload {

int g_heap_mode = kHeapUndecided;

namespace {

const char* FindEnv(const char* name) {
  char** env = __environ;
  if (env == nullptr) return nullptr;
  const size_t n = strlen(name);
  for (; *env != nullptr; ++env) {
    if (strncmp(*env, name, n) == 0 && (*env)[n] == '=') return *env + n + 1;
  }
  return nullptr;
}

bool JemallocLoaded();

}  // namespace

int DecideHeapMode() {
  if (g_heap_mode != kHeapUndecided) return g_heap_mode;
  int mode = kHeapHeader;
  const char* v = FindEnv("UMEMCG_HEAP");
  if (v != nullptr && strcmp(v, "jemalloc") == 0) {
    if (JemallocLoaded()) {
      mode = kHeapJemalloc;
    } else {
      Warn(
          "umemcg-preload: UMEMCG_HEAP=jemalloc needs libjemalloc.so.2 "
          "preloaded behind the preload (LD_PRELOAD=\"libumemcg-preload.so "
          "libjemalloc.so.2\") and a preload built with jemalloc's headers: "
          "using the header mode\n");
    }
  } else if (v != nullptr && *v != '\0' && strcmp(v, "header") != 0) {
    Warn(
        "umemcg-preload: UMEMCG_HEAP must be header or jemalloc: using the "
        "header mode\n");
  }
  g_heap_mode = mode;
  return mode;
}

}  // namespace umemcg::preload

#ifndef UMEMCG_PRELOAD_JEMALLOC

// Built without jemalloc's headers: the mode is never chosen.
namespace umemcg::preload {
namespace {
bool JemallocLoaded() { return false; }
}  // namespace
void* JeAllocate(size_t, size_t, bool) { abort(); }
void JeFree(void*) { abort(); }
void* JeReallocate(void*, size_t) { abort(); }
size_t JeUsableSize(void*) { abort(); }
bool EnableJemallocHeap(Controller&, const char** why) {
  *why = "not built";
  return false;
}
JeHeapFigures GetJeHeapFigures(Group&) { return {}; }
}  // namespace umemcg::preload

#else  // UMEMCG_PRELOAD_JEMALLOC

#include <jemalloc/jemalloc.h>

#include "jemalloc/heap.h"
#include "preload/preload_internal.h"
#include "umemcg/jemalloc.h"

// Weak: the preload does not depend on jemalloc (no DT_NEEDED); these are
// bound when libjemalloc.so.2 is loaded with the program (preloaded behind
// the preload), and null otherwise.
#pragma weak mallocx
#pragma weak rallocx
#pragma weak dallocx
#pragma weak sallocx
#pragma weak mallctl

namespace umemcg::preload {
namespace {

using jemalloc::internal::AfterAlloc;
using jemalloc::internal::AllocFlags;
using jemalloc::internal::AllocSampled;
using jemalloc::internal::FreeFlags;
using jemalloc::internal::Refused;
using jemalloc::internal::SampleNow;

constexpr size_t kMaxRequest = SIZE_MAX / 4;  // as heap_block.cc

bool JemallocLoaded() {
  return &mallocx != nullptr && &rallocx != nullptr && &dallocx != nullptr &&
         &sallocx != nullptr && &mallctl != nullptr;
}

inline int AlignFlag(size_t align) {
  return align > 16 ? MALLOCX_ALIGN(align) : 0;
}

void CountFailure() {
  MyShard().charge_failures.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

void* JeAllocate(size_t size, size_t align, bool zero) {
  if (size > kMaxRequest || align > kMaxRequest) {
    errno = ENOMEM;
    return nullptr;
  }
  int* const err = ErrnoPtr();
  const int saved = *err;
  int flags = AllocFlags() | AlignFlag(align);
  if (zero) flags |= MALLOCX_ZERO;
  const size_t n = size == 0 ? 1 : size;
  // The heap profiler (UMEMCG_PROFILE): the stack is cut at the return
  // address into the preload's entry point (malloc, new, ...), as the
  // header mode cuts it.
  void* p = SampleNow(flags, n)
                ? AllocSampled(n, flags, __builtin_return_address(0))
                : mallocx(n, flags);
  if (__builtin_expect(p == nullptr, 0)) {
    if (Refused()) CountFailure();
    AfterAlloc(p);
    *err = ENOMEM;
    return nullptr;
  }
  AfterAlloc(p);
  // glibc leaves errno alone on success; the charge path may not.
  if (__builtin_expect(*err != saved, 0)) *err = saved;
  return p;
}

void JeFree(void* p) {
  if (p == nullptr) return;
  int* const err = ErrnoPtr();
  const int saved = *err;
  dallocx(p, FreeFlags(p));
  if (__builtin_expect(*err != saved, 0)) *err = saved;
}

void* JeReallocate(void* p, size_t size) {
  if (p == nullptr) return JeAllocate(size, 16, false);
  if (size == 0) {  // glibc: realloc(p, 0) frees p and returns NULL
    JeFree(p);
    return nullptr;
  }
  if (size > kMaxRequest) {
    errno = ENOMEM;
    return nullptr;
  }
  int* const err = ErrnoPtr();
  const int saved = *err;
  const int alloc_flags = AllocFlags();
  // MALLOCX_ARENA(a) is (a + 1) << 20; 0 for the automatic arenas. In the
  // same arena (or both uncharged) jemalloc resizes in place or moves
  // within it; otherwise the block moves to the caller's group's arena.
  const unsigned target = static_cast<unsigned>(alloc_flags) >> 20;
  void* q;
  // In place unless the profiler samples the new block (then it moves to
  // the group's sampled arena).
  const bool same =
      jemalloc::internal::ArenaOf(p) + (target != 0 ? 1u : 0u) == target;
  if (same && !SampleNow(alloc_flags, size)) {
    q = rallocx(p, size, alloc_flags);
    if (q == nullptr && Refused()) CountFailure();
    AfterAlloc(q);
  } else if (same) {
    q = AllocSampled(size, alloc_flags, __builtin_return_address(0));
    if (q == nullptr && Refused()) CountFailure();
    AfterAlloc(q);
    if (q != nullptr) {
      const size_t old = sallocx(p, 0);
      memcpy(q, p, old < size ? old : size);
      dallocx(p, FreeFlags(p));
    }
  } else {
    q = JeAllocate(size, 16, false);
    if (q != nullptr) {
      const size_t old = sallocx(p, 0);
      memcpy(q, p, old < size ? old : size);
      dallocx(p, FreeFlags(p));
    }
  }
  if (q == nullptr) {
    *err = ENOMEM;
    return nullptr;
  }
  if (__builtin_expect(*err != saved, 0)) *err = saved;
  return q;
}

size_t JeUsableSize(void* p) { return p == nullptr ? 0 : sallocx(p, 0); }

bool EnableJemallocHeap(Controller& controller, const char** why) {
  jemalloc::HeapOptions options;
  options.flags = g_charge_flags;
  // The preload's rate is 0 unless UMEMCG_PROFILE asks for a profile (the
  // countdown then never expires): the sampler costs a subtraction.
  options.heap_profile = true;
  Status s = jemalloc::Enable(controller, options);
  if (s.ok()) return true;
  static char reason[256];
  const std::string text = s.ToString();
  const size_t n =
      text.size() < sizeof(reason) - 1 ? text.size() : sizeof(reason) - 1;
  memcpy(reason, text.data(), n);
  reason[n] = '\0';
  *why = reason;
  return false;
}

JeHeapFigures GetJeHeapFigures(Group& group) {
  JeHeapFigures f{};
  const jemalloc::ArenaInfo info = jemalloc::Info(group);  // refreshes stats
  f.charged = static_cast<int64_t>(info.charged.raw()) * 4096;
  f.active = static_cast<int64_t>(info.active.raw()) * 4096;
  f.dirty = static_cast<int64_t>(info.dirty.raw()) * 4096;
  // The automatic arenas (and the huge arena after them) hold what was
  // allocated before the runtime was up and inside umemcg.
  unsigned narenas = 0;
  size_t len = sizeof(narenas);
  if (mallctl("opt.narenas", &narenas, &len, nullptr, 0) != 0) return f;
  for (unsigned i = 0; i <= narenas; ++i) {
    for (const char* stat : {"pactive", "pdirty"}) {
      char name[64];
      snprintf(name, sizeof(name), "stats.arenas.%u.%s", i, stat);
      size_t v = 0;
      len = sizeof(v);
      if (mallctl(name, &v, &len, nullptr, 0) == 0) {
        f.unaccounted += static_cast<int64_t>(v) * 4096;
      }
    }
  }
  return f;
}

}  // namespace umemcg::preload

#endif  // UMEMCG_PRELOAD_JEMALLOC

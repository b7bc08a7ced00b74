// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The malloc / operator new interposition of libumemcg-jemalloc (see
// include/umemcg/jemalloc.h, Routing). Debian's jemalloc exports the
// standard names unprefixed; these definitions come first in symbol lookup
// for a program linked against the component (the program's objects, then
// libumemcg-jemalloc, then libjemalloc), and implement each name with
// jemalloc's non-standard API (mallocx, rallocx, dallocx, sdallocx,
// sallocx) and the flags heap.cc computes: the active group's arena and
// the thread's cache of it, or the owner's arena for a free. Never built
// with a sanitizer (its runtime defines these names too).

#include <errno.h>
#include <jemalloc/jemalloc.h>
#include <string.h>

#include <cstddef>
#include <cstdint>
#include <new>

#include "jemalloc/heap.h"

namespace {

using umemcg::jemalloc::internal::AfterAlloc;
using umemcg::jemalloc::internal::AllocFlags;
using umemcg::jemalloc::internal::AllocSampled;
using umemcg::jemalloc::internal::FreeFlags;
using umemcg::jemalloc::internal::SampleNow;

// `entry_return`: the return address of the entry point the program called
// (malloc, operator new, ...), where the heap profiler cuts the stack.
inline void* Alloc(size_t size, int extra, const void* entry_return) {
  const size_t n = size == 0 ? 1 : size;
  const int flags = AllocFlags() | extra;
  void* p = SampleNow(flags, n) ? AllocSampled(n, flags, entry_return)
                                : mallocx(n, flags);
  AfterAlloc(p);
  if (p == nullptr) errno = ENOMEM;
  return p;
}

inline int AlignFlag(size_t alignment) {
  return alignment <= alignof(std::max_align_t) ? 0 : MALLOCX_ALIGN(alignment);
}

bool PowerOfTwo(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

void* NewImpl(size_t size, size_t alignment, const void* entry_return) {
  for (;;) {
    void* p = Alloc(size, AlignFlag(alignment), entry_return);
    if (p != nullptr) return p;
    std::new_handler h = std::get_new_handler();
    if (h == nullptr) throw std::bad_alloc();
    h();
  }
}

void* NewNothrow(size_t size, size_t alignment,
                 const void* entry_return) noexcept {
  try {
    return NewImpl(size, alignment, entry_return);
  } catch (...) {
    return nullptr;
  }
}

inline void Release(void* p) {
  if (p != nullptr) dallocx(p, FreeFlags(p));
}

inline void ReleaseSized(void* p, size_t size, size_t alignment) {
  if (p != nullptr) sdallocx(p, size, FreeFlags(p) | AlignFlag(alignment));
}

}  // namespace

// In an entry point: the program's return address (see Alloc).
#define RA __builtin_return_address(0)

extern "C" {

[[gnu::visibility("default")]] void* malloc(size_t size) {
  return Alloc(size, 0, RA);
}

[[gnu::visibility("default")]] void free(void* p) { Release(p); }

[[gnu::visibility("default")]] void* calloc(size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  return Alloc(total, MALLOCX_ZERO, RA);
}

[[gnu::visibility("default")]] void* realloc(void* p, size_t size) {
  if (p == nullptr) return Alloc(size, 0, RA);
  if (size == 0) {
    Release(p);
    return nullptr;
  }
  const int alloc_flags = AllocFlags();
  // MALLOCX_ARENA(a) is (a + 1) << 20; 0 for the automatic arenas.
  const unsigned target = static_cast<unsigned>(alloc_flags) >> 20;
  // Same arena (or both unaccounted): jemalloc resizes in place or moves
  // within it, unless the heap profiler samples the new block (it then
  // comes from the group's sampled arena). Otherwise the new block comes
  // from the active group's arena and the old one goes back to its
  // owner's (a sampled old block drops its sample in FreeFlags).
  void* q;
  if (umemcg::jemalloc::internal::ArenaOf(p) + (target != 0 ? 1u : 0u) ==
      target) {
    if (!SampleNow(alloc_flags, size)) [[likely]] {
      q = rallocx(p, size, alloc_flags);
      AfterAlloc(q);
      if (q == nullptr) errno = ENOMEM;
      return q;
    }
    q = AllocSampled(size, alloc_flags, RA);
    AfterAlloc(q);
    if (q == nullptr) {
      errno = ENOMEM;
      return nullptr;
    }
  } else {
    q = Alloc(size, 0, RA);
    if (q == nullptr) return nullptr;
  }
  const size_t old = sallocx(p, 0);
  memcpy(q, p, old < size ? old : size);
  dallocx(p, FreeFlags(p));
  return q;
}

[[gnu::visibility("default")]] int posix_memalign(void** out, size_t alignment,
                                                  size_t size) {
  if (!PowerOfTwo(alignment) || alignment % sizeof(void*) != 0) return EINVAL;
  void* p = Alloc(size, MALLOCX_ALIGN(alignment), RA);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

[[gnu::visibility("default")]] void* aligned_alloc(size_t alignment,
                                                   size_t size) {
  if (!PowerOfTwo(alignment)) {
    errno = EINVAL;
    return nullptr;
  }
  return Alloc(size, MALLOCX_ALIGN(alignment), RA);
}

[[gnu::visibility("default")]] void* memalign(size_t alignment, size_t size) {
  if (!PowerOfTwo(alignment)) {
    errno = EINVAL;
    return nullptr;
  }
  return Alloc(size, MALLOCX_ALIGN(alignment), RA);
}

[[gnu::visibility("default")]] void* valloc(size_t size) {
  return Alloc(size, MALLOCX_ALIGN(4096), RA);
}

[[gnu::visibility("default")]] void* pvalloc(size_t size) {
  return Alloc((size + 4095) & ~size_t{4095}, MALLOCX_ALIGN(4096), RA);
}

[[gnu::visibility("default")]] size_t malloc_usable_size(void* p) {
  return p == nullptr ? 0 : sallocx(p, 0);
}

}  // extern "C"

// ---- operator new / delete ----

[[gnu::visibility("default")]] void* operator new(size_t size) {
  return NewImpl(size, 0, RA);
}
[[gnu::visibility("default")]] void* operator new[](size_t size) {
  return NewImpl(size, 0, RA);
}
[[gnu::visibility("default")]] void* operator new(
    size_t size, const std::nothrow_t&) noexcept {
  return NewNothrow(size, 0, RA);
}
[[gnu::visibility("default")]] void* operator new[](
    size_t size, const std::nothrow_t&) noexcept {
  return NewNothrow(size, 0, RA);
}
[[gnu::visibility("default")]] void* operator new(size_t size,
                                                  std::align_val_t al) {
  return NewImpl(size, static_cast<size_t>(al), RA);
}
[[gnu::visibility("default")]] void* operator new[](size_t size,
                                                    std::align_val_t al) {
  return NewImpl(size, static_cast<size_t>(al), RA);
}
[[gnu::visibility("default")]] void* operator new(
    size_t size, std::align_val_t al, const std::nothrow_t&) noexcept {
  return NewNothrow(size, static_cast<size_t>(al), RA);
}
[[gnu::visibility("default")]] void* operator new[](
    size_t size, std::align_val_t al, const std::nothrow_t&) noexcept {
  return NewNothrow(size, static_cast<size_t>(al), RA);
}

[[gnu::visibility("default")]] void operator delete(void* p) noexcept {
  Release(p);
}
[[gnu::visibility("default")]] void operator delete[](void* p) noexcept {
  Release(p);
}
[[gnu::visibility("default")]] void operator delete(
    void* p, const std::nothrow_t&) noexcept {
  Release(p);
}
[[gnu::visibility("default")]] void operator delete[](
    void* p, const std::nothrow_t&) noexcept {
  Release(p);
}
[[gnu::visibility("default")]] void operator delete(void* p,
                                                    size_t size) noexcept {
  ReleaseSized(p, size, 0);
}
[[gnu::visibility("default")]] void operator delete[](void* p,
                                                      size_t size) noexcept {
  ReleaseSized(p, size, 0);
}
[[gnu::visibility("default")]] void operator delete(
    void* p, std::align_val_t al) noexcept {
  Release(p);
  (void)al;
}
[[gnu::visibility("default")]] void operator delete[](
    void* p, std::align_val_t al) noexcept {
  Release(p);
  (void)al;
}
[[gnu::visibility("default")]] void operator delete(
    void* p, size_t size, std::align_val_t al) noexcept {
  ReleaseSized(p, size, static_cast<size_t>(al));
}
[[gnu::visibility("default")]] void operator delete[](
    void* p, size_t size, std::align_val_t al) noexcept {
  ReleaseSized(p, size, static_cast<size_t>(al));
}
[[gnu::visibility("default")]] void operator delete(
    void* p, std::align_val_t al, const std::nothrow_t&) noexcept {
  Release(p);
  (void)al;
}
[[gnu::visibility("default")]] void operator delete[](
    void* p, std::align_val_t al, const std::nothrow_t&) noexcept {
  Release(p);
  (void)al;
}

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The interposed allocation functions of libumemcg-preload.so: the malloc
// family (glibc's "Replacing malloc" set) and every operator new/delete.
// Each applies glibc's rules to its arguments (alignments, overflow,
// errno, usable sizes) and leaves the blocks to the heap block layer
// (heap_block.h: the format, charging, freeing). Also here, their cold
// helpers: operator new's failure paths through the program's own C++
// runtime, and mallopt's and the environment's settings of the mmap
// threshold. docs/preload.md has the design.

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "preload/heap_block.h"
#include "preload/preload_internal.h"

extern "C" {
int __libc_mallopt(int param, int value);
}

namespace umemcg::preload {

// The preload's shared state (preload_internal.h).
// Every thread starts unregistered (threads.cc).
__thread ThreadState tls_state
    __attribute__((tls_model("initial-exec"))) = {nullptr, &g_move_marks[0]};
std::atomic<ObjCgroup*> g_default_objcg{nullptr};
ChargeFlags g_charge_flags = kChargeAtomic | ChargeFlags::kNoThrottle;
bool g_enforce = false;
CounterShard g_counters[kCounterShards];
int g_glibc_version = 0;

namespace {

bool IsPowerOfTwo(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

// glibc's _mid_memalign: alignments up to 16 are malloc; then at least 32,
// above SIZE_MAX / 2 + 1 EINVAL, and a non-power of two is rounded up.
void* MidMemalign(size_t align, size_t size) {
  if (align <= kMallocAlign) return Allocate(size, kMallocAlign, false);
  if (align < kMinChunk) align = kMinChunk;
  if (align > SIZE_MAX / 2 + 1) {
    errno = EINVAL;
    return nullptr;
  }
  if (!IsPowerOfTwo(align)) {
    size_t a = kMallocAlign * 2;
    while (a < align) a <<= 1;
    align = a;
  }
  return Allocate(size, align, false);
}

// ---- operator new: the program's C++ runtime ----
//
// This library carries a private static libstdc++ (it must not load
// libstdc++.so into C programs). The new_handler a program installs, and
// the std::bad_alloc it catches, belong to the program's own libstdc++.so:
// the failure paths below use it (found with dlsym, only after an
// allocation failed) and fall back to the private copy when the process
// has no other C++ runtime.

template <class Fn>
Fn ProgramSymbol(std::atomic<void*>& cache, const char* name) {
  void* f = cache.load(std::memory_order_acquire);
  if (f == nullptr) {
    HookGuard guard;  // dlsym may allocate
    f = dlsym(RTLD_NEXT, name);
    // Not cached while absent: a C++ library may be loaded later.
    if (f != nullptr) cache.store(f, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(f);
}

std::atomic<void*> g_get_new_handler{nullptr};
std::atomic<void*> g_throw_bad_alloc{nullptr};
std::atomic<void*> g_nothrow_new{nullptr};
std::atomic<void*> g_nothrow_new_aligned{nullptr};

std::new_handler ProgramNewHandler() {
  if (auto get = ProgramSymbol<std::new_handler (*)()>(
          g_get_new_handler, "_ZSt15get_new_handlerv")) {
    return get();
  }
  return std::get_new_handler();
}

[[noreturn]] void ThrowBadAlloc() {
  if (auto t = ProgramSymbol<void (*)()>(g_throw_bad_alloc,
                                         "_ZSt17__throw_bad_allocv")) {
    t();  // the program's std::__throw_bad_alloc(): does not return
  }
  throw std::bad_alloc();
}

[[gnu::noinline]] void* NewSlow(size_t size, size_t align) {
  for (;;) {
    if (void* p = Allocate(size, align, false)) return p;
    std::new_handler handler = ProgramNewHandler();
    if (handler == nullptr) ThrowBadAlloc();
    handler();
  }
}

inline void* New(size_t size, size_t align) {
  if (void* p = Allocate(size, align, false)) return p;
  return NewSlow(size, align);
}

// The nothrow forms: after a failure, the program's own nothrow operator
// new runs the handler loop (calling our throwing operator new, which it
// cannot tell from its own) and catches in its own runtime.
[[gnu::noinline]] void* NothrowSlow(size_t size, size_t align) noexcept {
  if (align <= kMallocAlign) {
    if (auto f = ProgramSymbol<void* (*)(size_t, const std::nothrow_t&)>(
            g_nothrow_new, "_ZnwmRKSt9nothrow_t")) {
      return f(size, std::nothrow);
    }
  } else if (auto f = ProgramSymbol<void* (*)(size_t, std::align_val_t,
                                              const std::nothrow_t&)>(
                 g_nothrow_new_aligned, "_ZnwmSt11align_val_tRKSt9nothrow_t")) {
    return f(size, std::align_val_t(align), std::nothrow);
  }
  // No other C++ runtime: no one could have installed a new_handler but
  // through this library's private copy.
  try {
    return NewSlow(size, align);
  } catch (...) {
    return nullptr;
  }
}

inline void* NewNothrow(size_t size, size_t align) noexcept {
  if (void* p = Allocate(size, align, false)) return p;
  return NothrowSlow(size, align);
}

inline size_t NewAlign(std::align_val_t a) {
  return std::max(static_cast<size_t>(a), kMallocAlign);
}

}  // namespace

// mallopt's and the environment's settings of the threshold (runtime.cc
// reads MALLOC_MMAP_THRESHOLD_ / GLIBC_TUNABLES at start-up).
void SetMmapThreshold(size_t bytes) {
  g_mmap_threshold.store(bytes, std::memory_order_relaxed);
  g_dynamic_threshold.store(false, std::memory_order_relaxed);
}
void SetMmapMax(long max) {
  g_mmap_enabled.store(max != 0, std::memory_order_relaxed);
  g_dynamic_threshold.store(false, std::memory_order_relaxed);
}

}  // namespace umemcg::preload

// ---- The C allocation functions (glibc's "Replacing malloc" set) ----

using umemcg::preload::Allocate;
using umemcg::preload::Free;
using umemcg::preload::IsOurs;
using umemcg::preload::kMallocAlign;
using umemcg::preload::MidMemalign;

extern "C" {

void* malloc(size_t size) { return Allocate(size, kMallocAlign, false); }

void free(void* p) { Free(p); }

void* calloc(size_t n, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(n, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return Allocate(bytes, kMallocAlign, true);
}

void* realloc(void* p, size_t size) {
  return umemcg::preload::Reallocate(p, size);
}

void* reallocarray(void* p, size_t n, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(n, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return umemcg::preload::Reallocate(p, bytes);
}

void* memalign(size_t align, size_t size) { return MidMemalign(align, size); }

void* aligned_alloc(size_t align, size_t size) {
  // glibc 2.38 made aligned_alloc refuse what C17 calls unsupported
  // alignments; before, it is memalign under another name.
  if (umemcg::preload::g_glibc_version >= 2038 &&
      !umemcg::preload::IsPowerOfTwo(align)) {
    errno = EINVAL;
    return nullptr;
  }
  return MidMemalign(align, size);
}

int posix_memalign(void** out, size_t align, size_t size) {
  if (align % sizeof(void*) != 0 ||
      !umemcg::preload::IsPowerOfTwo(align / sizeof(void*))) {
    return EINVAL;
  }
  // As glibc: errno is ENOMEM after a failure, untouched after success.
  void* p = MidMemalign(align, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

void* valloc(size_t size) {
  return MidMemalign(umemcg::preload::PageSize(), size);
}

void* pvalloc(size_t size) {
  const size_t page = umemcg::preload::PageSize();
  size_t rounded;
  if (__builtin_add_overflow(size, page - 1, &rounded)) {
    errno = ENOMEM;
    return nullptr;
  }
  // glibc's own rounding (bit 0 survives its mask), kept so that the
  // usable sizes agree.
  rounded &= -(page - 1);
  return MidMemalign(page, rounded);
}

size_t malloc_usable_size(void* p) {
  if (__builtin_expect(
          umemcg::preload::g_heap_mode != umemcg::preload::kHeapHeader, 0)) {
    if (umemcg::preload::DecideHeapMode() == umemcg::preload::kHeapJemalloc) {
      return umemcg::preload::JeUsableSize(p);
    }
  }
  if (p == nullptr) return 0;
  if (IsOurs(p)) {
    void* raw = umemcg::preload::RawOf(p);
    return umemcg::preload::GlibcUsable(raw) -
           static_cast<size_t>(static_cast<char*>(p) - static_cast<char*>(raw));
  }
  // A foreign glibc chunk: what glibc's malloc_usable_size reads.
  return umemcg::preload::GlibcUsable(p);
}

int mallopt(int param, int value) {
  const int r = __libc_mallopt(param, value);
  if (r == 1) {
    if (param == M_MMAP_THRESHOLD && value >= 0) {
      umemcg::preload::SetMmapThreshold(static_cast<size_t>(value));
    } else if (param == M_MMAP_MAX) {
      umemcg::preload::SetMmapMax(value);
    }
  }
  return r;
}

}  // extern "C"

// ---- operator new / delete, every replaceable form ----

using umemcg::preload::New;
using umemcg::preload::NewAlign;
using umemcg::preload::NewNothrow;

void* operator new(size_t size) { return New(size, kMallocAlign); }
void* operator new[](size_t size) { return New(size, kMallocAlign); }
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  return NewNothrow(size, kMallocAlign);
}
void* operator new[](size_t size, const std::nothrow_t&) noexcept {
  return NewNothrow(size, kMallocAlign);
}
void* operator new(size_t size, std::align_val_t a) {
  return New(size, NewAlign(a));
}
void* operator new[](size_t size, std::align_val_t a) {
  return New(size, NewAlign(a));
}
void* operator new(size_t size, std::align_val_t a,
                   const std::nothrow_t&) noexcept {
  return NewNothrow(size, NewAlign(a));
}
void* operator new[](size_t size, std::align_val_t a,
                     const std::nothrow_t&) noexcept {
  return NewNothrow(size, NewAlign(a));
}

void operator delete(void* p) noexcept { Free(p); }
void operator delete[](void* p) noexcept { Free(p); }
void operator delete(void* p, size_t) noexcept { Free(p); }
void operator delete[](void* p, size_t) noexcept { Free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { Free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { Free(p); }
void operator delete(void* p, std::align_val_t) noexcept { Free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { Free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { Free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { Free(p); }
void operator delete(void* p, std::align_val_t,
                     const std::nothrow_t&) noexcept {
  Free(p);
}
void operator delete[](void* p, std::align_val_t,
                       const std::nothrow_t&) noexcept {
  Free(p);
}

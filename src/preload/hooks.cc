// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The interposed allocation functions of libumemcg-preload.so: the malloc
// family and every operator new/delete, on top of glibc's __libc_* entry
// points. Kernel counterpart: the slab hooks (memcg_slab_post_alloc_hook /
// memcg_slab_free_hook) with the owner stored in the object's header
// instead of the slab's obj_exts vector.
//
// Header (32 bytes, right before the pointer returned; see preload.h):
//   total   bytes charged: the request plus the header/alignment offset
//   offset  pointer returned minus the block glibc gave us, with bit 63
//           set for over-aligned blocks (alignment = offset then)
//   owner   ObjCgroup* charged, or 0 (charged to nothing)
//   check   Mix(secret, pointer, owner) | 1; 0 once freed
// Only `owner` and `check` (the 16 bytes right before the pointer) are read
// before a pointer is known to be ours: glibc keeps its own chunk header
// there, so those bytes are readable for any pointer glibc could free.
//
// Why a check word and not an address range: the blocks come from glibc,
// anywhere in the address space, and a side table of our pointers would
// need allocation-free concurrent hashing on every call. The check word
// costs one multiply-xorshift per free. A secret from AT_RANDOM keeps data
// the program stores (or an adversary writes) from forging it by design;
// only an accident of probability 2^-64 per foreign free can.

#include <errno.h>
#include <malloc.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>

#include "preload/preload_internal.h"

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t align, size_t size);
void __libc_free(void* p);
}

namespace umemcg::preload {

__thread ThreadState tls_state
    __attribute__((tls_model("initial-exec"))) = {nullptr, 0};
std::atomic<ObjCgroup*> g_default_objcg{nullptr};
ChargeFlags g_charge_flags = kChargeAtomic | ChargeFlags::kNoThrottle;
CounterShard g_counters[kCounterShards];

namespace {

constexpr size_t kHeaderSize = 32;
constexpr size_t kMallocAlign = 16;  // glibc's malloc alignment on x86-64
// Requests this close to SIZE_MAX fail before any arithmetic overflows.
constexpr size_t kMaxRequest = SIZE_MAX / 4;
constexpr uint64_t kOverAligned = uint64_t{1} << 63;

struct Header {
  uint64_t total;
  uint64_t offset;
  uintptr_t owner;
  uint64_t check;
};
static_assert(sizeof(Header) == kHeaderSize);

// Per-process secret; 0 until first use. Every thread derives the same
// value from AT_RANDOM, so racing first uses agree (relaxed is enough).
std::atomic<uint64_t> g_secret{0};

[[gnu::noinline]] uint64_t InitSecret() {
  uint64_t s = 0x243f6a8885a308d3ull;  // no AT_RANDOM: a fixed odd value
  if (const auto* random =
          reinterpret_cast<const unsigned char*>(getauxval(AT_RANDOM))) {
    std::memcpy(&s, random + 8, sizeof(s));  // glibc uses bytes 0..7
  }
  s |= 1;
  g_secret.store(s, std::memory_order_relaxed);
  return s;
}

inline uint64_t CheckWord(const void* p, uintptr_t owner) {
  uint64_t s = g_secret.load(std::memory_order_relaxed);
  if (__builtin_expect(s == 0, 0)) s = InitSecret();
  // murmur3's fmix64 over secret ^ address ^ owner.
  uint64_t x =
      s ^ reinterpret_cast<uintptr_t>(p) ^ (owner * 0x9e3779b97f4a7c15ull);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x | 1;  // never 0: 0 marks a freed block
}

inline Header* HeaderOf(void* p) { return static_cast<Header*>(p) - 1; }

inline bool IsOurs(void* p) {
  const Header* h = HeaderOf(p);
  return h->check == CheckWord(p, h->owner);
}

// The objcg a new block of this thread is charged to (null: nothing).
inline ObjCgroup* CurrentOwner() {
  const ThreadState& t = tls_state;
  if (t.in_hook != 0) return nullptr;
  if (t.objcg != nullptr) return t.objcg;
  return g_default_objcg.load(std::memory_order_acquire);
}

bool Charge(ObjCgroup* owner, uint64_t bytes) {
  HookGuard guard;
  const ChargeResult r = owner->Charge(Bytes(bytes), g_charge_flags, kHeapItem);
  if (r.ok()) return true;
  MyShard().charge_failures.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void Uncharge(ObjCgroup* owner, uint64_t bytes) {
  HookGuard guard;
  owner->Uncharge(Bytes(bytes), kHeapItem);
}

void CountLive(ObjCgroup* owner, int64_t bytes, int64_t blocks) {
  CounterShard& c = MyShard();
  if (owner != nullptr) {
    c.live_bytes.fetch_add(bytes, std::memory_order_relaxed);
    c.live_blocks.fetch_add(blocks, std::memory_order_relaxed);
  } else {
    c.unaccounted_bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
}

inline uint64_t OffsetOf(const Header* h) { return h->offset & ~kOverAligned; }

inline void* Publish(void* raw, size_t offset, bool over_aligned,
                     uint64_t total, ObjCgroup* owner) {
  void* p = static_cast<char*>(raw) + offset;
  Header* h = HeaderOf(p);
  h->total = total;
  h->offset = offset | (over_aligned ? kOverAligned : 0);
  h->owner = reinterpret_cast<uintptr_t>(owner);
  h->check = CheckWord(p, h->owner);
  CountLive(owner, static_cast<int64_t>(total), 1);
  return p;
}

// `align` is a power of two. Charges before allocating, so a refused
// charge never allocates (the kernel's pre-charge order).
void* AllocateFor(ObjCgroup* owner, size_t size, size_t align, bool zero) {
  if (size > kMaxRequest || align > kMaxRequest) {
    errno = ENOMEM;
    return nullptr;
  }
  const size_t offset =
      align <= kMallocAlign ? kHeaderSize : std::max(align, kHeaderSize);
  const uint64_t total = size + offset;
  if (owner != nullptr && !Charge(owner, total)) {
    errno = ENOMEM;
    return nullptr;
  }
  void* raw;
  if (align <= kMallocAlign) {
    raw = zero ? __libc_calloc(1, total) : __libc_malloc(total);
  } else {
    raw = __libc_memalign(align, total);
    if (raw != nullptr && zero) std::memset(raw, 0, total);
  }
  if (raw == nullptr) {  // glibc's failure, reported unchanged (errno)
    if (owner != nullptr) Uncharge(owner, total);
    return nullptr;
  }
  return Publish(raw, offset, align > kMallocAlign, total, owner);
}

inline void* Allocate(size_t size, size_t align, bool zero) {
  return AllocateFor(CurrentOwner(), size, align, zero);
}

void Free(void* p) {
  if (p == nullptr) return;
  if (!IsOurs(p)) {
    MyShard().foreign_frees.fetch_add(1, std::memory_order_relaxed);
    __libc_free(p);
    return;
  }
  Header* h = HeaderOf(p);
  const uint64_t total = h->total;
  auto* owner = reinterpret_cast<ObjCgroup*>(h->owner);
  void* raw = static_cast<char*>(p) - OffsetOf(h);
  h->check = 0;  // a second free of `p` is not ours any more
  if (owner != nullptr) Uncharge(owner, total);
  CountLive(owner, -static_cast<int64_t>(total), -1);
  __libc_free(raw);
}

void* Reallocate(void* p, size_t size) {
  if (p == nullptr) return Allocate(size, kMallocAlign, false);
  if (size == 0) {  // glibc: realloc(p, 0) frees p and returns NULL
    Free(p);
    return nullptr;
  }
  if (!IsOurs(p)) {
    // Not ours: glibc's (or nobody's) block; it stays unaccounted.
    MyShard().foreign_frees.fetch_add(1, std::memory_order_relaxed);
    return __libc_realloc(p, size);
  }
  if (size > kMaxRequest) {
    errno = ENOMEM;
    return nullptr;
  }
  Header* h = HeaderOf(p);
  const uint64_t old_total = h->total;
  const size_t offset = OffsetOf(h);
  auto* owner = reinterpret_cast<ObjCgroup*>(h->owner);
  if ((h->offset & kOverAligned) != 0) {
    // Over-aligned block (alignment = offset): glibc's realloc would not
    // keep the alignment; move it by hand, to the same owner.
    void* q = AllocateFor(owner, size, offset, false);
    if (q == nullptr) return nullptr;
    std::memcpy(q, p, std::min<uint64_t>(size, old_total - offset));
    Free(p);
    return q;
  }
  // The block keeps its owner (the charge follows the object); only the
  // difference is charged or uncharged. Grow: charge first, so a refused
  // charge leaves the old block untouched (realloc's contract).
  const uint64_t new_total = size + kHeaderSize;
  if (owner != nullptr && new_total > old_total &&
      !Charge(owner, new_total - old_total)) {
    errno = ENOMEM;
    return nullptr;
  }
  const uint64_t check = h->check;
  h->check = 0;  // glibc may move the block: no stale header stays valid
  void* raw = __libc_realloc(static_cast<char*>(p) - kHeaderSize, new_total);
  if (raw == nullptr) {
    h->check = check;  // the old block is intact and still ours
    if (owner != nullptr && new_total > old_total) {
      Uncharge(owner, new_total - old_total);
    }
    return nullptr;
  }
  if (owner != nullptr && new_total < old_total) {
    Uncharge(owner, old_total - new_total);
  }
  CountLive(owner, -static_cast<int64_t>(old_total), -1);
  return Publish(raw, kHeaderSize, false, new_total, owner);
}

bool IsPowerOfTwo(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

size_t RoundUpToPowerOfTwo(size_t x) {
  if (x <= 1) return 1;
  if (x > (SIZE_MAX >> 1) + 1) return 0;
  return size_t{1} << (64 - __builtin_clzll(x - 1));
}

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

[[gnu::noinline]] void* NewSlow(size_t size, size_t align) {
  for (;;) {
    if (void* p = Allocate(size, align, false)) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

inline void* New(size_t size, size_t align) {
  if (void* p = Allocate(size, align, false)) return p;
  return NewSlow(size, align);
}

inline void* NewNothrow(size_t size, size_t align) noexcept {
  try {
    return New(size, align);
  } catch (...) {
    return nullptr;
  }
}

inline size_t NewAlign(std::align_val_t a) {
  return std::max(static_cast<size_t>(a), kMallocAlign);
}

}  // namespace
}  // namespace umemcg::preload

// ---- The C allocation functions (glibc's "Replacing malloc" set) ----

using umemcg::preload::Allocate;
using umemcg::preload::Free;
using umemcg::preload::IsOurs;
using umemcg::preload::kMallocAlign;

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

void* memalign(size_t align, size_t size) {
  // glibc: a non-power-of-two alignment is rounded up; tiny ones are 16.
  if (!umemcg::preload::IsPowerOfTwo(align)) {
    align = umemcg::preload::RoundUpToPowerOfTwo(align);
    if (align == 0) {
      errno = EINVAL;
      return nullptr;
    }
  }
  return Allocate(size, std::max(align, kMallocAlign), false);
}

void* aligned_alloc(size_t align, size_t size) {
  if (!umemcg::preload::IsPowerOfTwo(align)) {  // glibc >= 2.38 rule
    errno = EINVAL;
    return nullptr;
  }
  return Allocate(size, std::max(align, kMallocAlign), false);
}

int posix_memalign(void** out, size_t align, size_t size) {
  if (!umemcg::preload::IsPowerOfTwo(align) || align % sizeof(void*) != 0) {
    return EINVAL;
  }
  const int saved = errno;  // posix_memalign leaves errno alone
  void* p = Allocate(size, std::max(align, kMallocAlign), false);
  if (p == nullptr) {
    const int err = errno;
    errno = saved;
    return err != 0 ? err : ENOMEM;
  }
  errno = saved;
  *out = p;
  return 0;
}

void* valloc(size_t size) {
  return Allocate(size, umemcg::preload::PageSize(), false);
}

void* pvalloc(size_t size) {
  const size_t page = umemcg::preload::PageSize();
  size_t rounded;
  if (__builtin_add_overflow(size, page - 1, &rounded)) {
    errno = ENOMEM;
    return nullptr;
  }
  rounded &= ~(page - 1);
  return Allocate(rounded == 0 ? page : rounded, page, false);
}

size_t malloc_usable_size(void* p) {
  if (p == nullptr) return 0;
  if (IsOurs(p)) {
    const auto* h = static_cast<const umemcg::preload::Header*>(p) - 1;
    // The requested size: the rest of glibc's chunk is not the caller's.
    return h->total - umemcg::preload::OffsetOf(h);
  }
  // A foreign glibc chunk: its size field, as glibc's malloc_usable_size
  // reads it (mchunk_size minus the header word; mmapped chunks, flag 2,
  // have no next-chunk word to borrow).
  const size_t field = static_cast<const size_t*>(p)[-1];
  const size_t chunk = field & ~size_t{7};
  if (chunk == 0) return 0;
  return (field & 2) != 0 ? chunk - 2 * sizeof(size_t) : chunk - sizeof(size_t);
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

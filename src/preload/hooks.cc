// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The interposed allocation functions of libumemcg-preload.so: the malloc
// family and every operator new/delete, on top of glibc's __libc_* entry
// points. Kernel counterpart: the slab hooks (memcg_slab_post_alloc_hook /
// memcg_slab_free_hook) with the owner stored in the object's header
// instead of the slab's obj_exts vector. docs/preload.md has the design.
//
// Header (16 bytes, right before the pointer returned):
//   owner   ObjCgroup* charged, or 0 (charged to nothing); bit 0 set for
//           an over-aligned block, whose offset from glibc's block is then
//           stored in the 8 bytes before the header; bit 1 set when the
//           heap profiler sampled the block (src/profile/sampler.h)
//   check   Mix(secret, pointer, owner) | 1; 0 once freed
// The bytes charged are glibc's chunk size (the heap bytes the block
// takes, glibc's own header and our 16 bytes included), read from glibc's
// chunk header: nothing else needs storing. The kernel likewise charges a
// slab object's full size (obj_full_size), not the size asked for.
//
// Sizes follow glibc's so that malloc_usable_size() is never smaller than
// glibc's for the same request: a block is asked of glibc 16 bytes larger
// than the request (at least glibc's 24-byte minimum), so it lands in the
// next chunk size and the request's whole usable size stays usable; a
// request glibc would serve with mmap (the dynamic threshold is followed,
// see below) is asked as large as glibc's mapping would be, whose usable
// size runs to the end of the mapping.
//
// Why a check word and not an address range: the blocks come from glibc,
// anywhere in the address space, and a side table of our pointers would
// need allocation-free concurrent hashing on every call. The check word
// costs one multiply-xorshift per free. A secret from AT_RANDOM keeps data
// the program stores (or an adversary writes) from forging it by design;
// only an accident of probability 2^-64 per foreign free can. A pointer
// that is not 16-byte aligned is never ours and is handed to glibc
// without reading anything before it.

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "preload/heap_fork.h"
#include "preload/preload_internal.h"
#include "profile/sampler.h"

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t align, size_t size);
void __libc_free(void* p);
int __libc_mallopt(int param, int value);
}

namespace umemcg::preload {

__thread ThreadState tls_state __attribute__((tls_model("initial-exec"))) = {};
std::atomic<ObjCgroup*> g_default_objcg{nullptr};
ChargeFlags g_charge_flags = kChargeAtomic | ChargeFlags::kNoThrottle;
bool g_enforce = false;
CounterShard g_counters[kCounterShards];
int g_glibc_version = 0;

namespace {

constexpr size_t kHeaderSize = 16;
constexpr size_t kMallocAlign = 16;  // glibc's malloc alignment on x86-64
// glibc's chunk geometry (malloc/malloc.c): an 8-byte size field before
// the user pointer with three flag bits, 16-byte granularity, 32-byte
// minimum chunk, and an mmapped chunk (flag 2) that has no next chunk's
// field to lend, so its usable size is 16 bytes short of the chunk.
constexpr size_t kSizeSz = 8;
constexpr size_t kMinChunk = 32;
constexpr size_t kMinRequest = kMinChunk - kSizeSz;  // usable of the minimum
constexpr size_t kChunkMmapped = 2;
// Requests this close to SIZE_MAX fail before any arithmetic overflows
// (glibc refuses anything above PTRDIFF_MAX with ENOMEM as well).
constexpr size_t kMaxRequest = SIZE_MAX / 4;
constexpr uintptr_t kOverAligned = 1;
constexpr uintptr_t kSampled = 2;  // ObjCgroup is 64-byte aligned
// glibc's dynamic mmap threshold: 128 KiB, raised to the size of each
// freed mmapped chunk up to 32 MiB (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit).
constexpr size_t kDefaultMmapThreshold = 128 * 1024;
constexpr size_t kMaxDynamicMmapThreshold = 32 * 1024 * 1024;

struct Header {
  uintptr_t owner;
  uint64_t check;
};
static_assert(sizeof(Header) == kHeaderSize);

// Per-process secret; 0 until first use. Every thread derives the same
// value from AT_RANDOM, so racing first uses agree (relaxed is enough).
std::atomic<uint64_t> g_secret{0};

// What the hooks know of glibc's mmap threshold. Relaxed: a sizing hint
// only (a stale value costs at most a page or 16 usable bytes on one
// block, never correctness).
std::atomic<size_t> g_mmap_threshold{kDefaultMmapThreshold};
std::atomic<bool> g_dynamic_threshold{true};
std::atomic<bool> g_mmap_enabled{true};

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

// The check word a block of ours keeps once freed (even, so never a live
// block's): a second free of it is recognised as one. One multiply: it
// only classifies double frees, it guards nothing.
inline uint64_t FreedMark(const void* p) {
  const uint64_t s = g_secret.load(std::memory_order_relaxed);
  return ((s ^ reinterpret_cast<uintptr_t>(p)) * 0x9e3779b97f4a7c15ull) &
         ~uint64_t{1};
}

// glibc's tcache key (the word it writes 8 bytes into a chunk it keeps in
// its per-thread cache), learned at start-up; 0 when unknown. A block of
// ours that glibc holds there has it in our check word's place.
std::atomic<uint64_t> g_tcache_key{0};

// What glibc's malloc_printerr does: its message on stderr, then abort.
[[noreturn, gnu::noinline]] void InvalidPointer(const char* message) {
  (void)!write(2, message, std::strlen(message));
  abort();
}

inline bool Misaligned(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & (kMallocAlign - 1)) != 0;
}

// A 16-byte aligned pointer whose header is one of ours already freed:
// freed by us and untouched since, or kept in glibc's tcache.
inline bool FreedOurs(void* p) {
  const uint64_t w = HeaderOf(p)->check;
  const uint64_t key = g_tcache_key.load(std::memory_order_relaxed);
  return w == FreedMark(p) || (key != 0 && w == key);
}

inline bool IsOurs(void* p) {
  // Our pointers are 16-byte aligned (an unaligned one is invalid for glibc
  // as well), and for aligned ones the 16 bytes read here are the ones
  // glibc's free() reads (prev_size, size).
  if (Misaligned(p)) return false;
  const Header* h = HeaderOf(p);
  return h->check == CheckWord(p, h->owner);
}

inline ObjCgroup* OwnerOf(const Header* h) {
  return reinterpret_cast<ObjCgroup*>(h->owner & ~(kOverAligned | kSampled));
}

// glibc's block that `p` (ours) lives in.
inline void* RawOf(void* p) {
  const Header* h = HeaderOf(p);
  if ((h->owner & kOverAligned) == 0)
    return static_cast<char*>(p) - kHeaderSize;
  return static_cast<char*>(p) - static_cast<const uint64_t*>(p)[-3];
}

// ---- glibc's chunk header ----

inline size_t ChunkField(const void* mem) {
  return static_cast<const size_t*>(mem)[-1];
}
inline size_t ChunkBytes(const void* mem) {
  return ChunkField(mem) & ~size_t{7};
}
inline bool ChunkMmapped(const void* mem) {
  return (ChunkField(mem) & kChunkMmapped) != 0;
}
// glibc's malloc_usable_size() of an in-use chunk.
inline size_t GlibcUsable(const void* mem) {
  const size_t field = ChunkField(mem);
  const size_t bytes = field & ~size_t{7};
  if (bytes == 0) return 0;
  return (field & kChunkMmapped) != 0 ? bytes - 2 * kSizeSz : bytes - kSizeSz;
}
// glibc's request2size(): the chunk a request of `n` bytes takes.
inline size_t Request2Size(size_t n) {
  return n + kSizeSz + 15 < kMinChunk ? kMinChunk : (n + kSizeSz + 15) & ~15;
}

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// What glibc's free() does to its threshold after freeing an mmapped
// chunk of `bytes`.
inline void NoteMmappedFree(size_t bytes) {
  if (!g_dynamic_threshold.load(std::memory_order_relaxed)) return;
  if (bytes > g_mmap_threshold.load(std::memory_order_relaxed) &&
      bytes <= kMaxDynamicMmapThreshold) {
    g_mmap_threshold.store(bytes, std::memory_order_relaxed);
  }
}

// The size asked of glibc for a request of `n` bytes at its own alignment:
// one header more than the request, and as large as glibc's own mapping
// when glibc would mmap `n`.
inline size_t RawRequest(size_t n) {
  const size_t chunk = Request2Size(n);
  if (__builtin_expect(
          chunk >= g_mmap_threshold.load(std::memory_order_relaxed), 0) &&
      g_mmap_enabled.load(std::memory_order_relaxed)) {
    const size_t page = PageSize();
    return (chunk + kSizeSz + page - 1) & ~(page - 1);
  }
  return std::max(n, kMinRequest) + kHeaderSize;
}

// ---- Charging ----

[[gnu::always_inline]] inline bool Charge(ObjCgroup* owner, uint64_t bytes,
                                          ChargeFlags flags) {
  HookGuard guard;
  const ChargeResult r = owner->Charge(Bytes(bytes), flags, kHeapItem);
  if (r.ok()) return true;
  MyShard().charge_failures.fetch_add(1, std::memory_order_relaxed);
  return false;
}

[[gnu::always_inline]] inline void Uncharge(ObjCgroup* owner, uint64_t bytes) {
  HookGuard guard;
  owner->Uncharge(Bytes(bytes), kHeapItem);
}

// After glibc answered: charges or uncharges the difference between the
// chunk it gave (`actual`) and what was charged before asking (realloc).
inline void Settle(ObjCgroup* owner, uint64_t charged, uint64_t actual) {
  if (__builtin_expect(actual == charged, 1)) return;
  if (actual > charged) {
    (void)Charge(owner, actual - charged, kSettleFlags);
  } else {
    Uncharge(owner, charged - actual);
  }
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

// Books a new block of `bytes` for `owner` (not null): its charge and its
// count in one booking window (heap_fork.h), or deferred while a fork is
// being prepared (then never refused). False when the charge was refused.
[[gnu::always_inline]] inline bool BookBlock(ObjCgroup* owner, uint64_t bytes) {
  HeapBooking window;
  if (__builtin_expect(window.deferred(), 0)) {
    HeapDefer(owner, static_cast<int64_t>(bytes), 1);
    return true;
  }
  if (!Charge(owner, bytes, g_charge_flags)) return false;
  CountLive(owner, static_cast<int64_t>(bytes), 1);
  return true;
}

// Unbooks a freed block, in one window as well.
[[gnu::always_inline]] inline void UnbookBlock(ObjCgroup* owner,
                                               uint64_t bytes) {
  HeapBooking window;
  if (__builtin_expect(window.deferred(), 0)) {
    return HeapDefer(owner, -static_cast<int64_t>(bytes), -1);
  }
  Uncharge(owner, bytes);
  CountLive(owner, -static_cast<int64_t>(bytes), -1);
}

inline void* Publish(void* raw, size_t offset, ObjCgroup* owner) {
  void* p = static_cast<char*>(raw) + offset;
  Header* h = HeaderOf(p);
  h->owner = reinterpret_cast<uintptr_t>(owner) |
             (offset != kHeaderSize ? kOverAligned : 0);
  if (offset != kHeaderSize) static_cast<uint64_t*>(p)[-3] = offset;
  h->check = CheckWord(p, h->owner);
  return p;
}

// The profiler's countdown expired on `p` (published, `bytes` charged to
// `owner`): sampled, the header says so (and its check word is redone).
[[gnu::noinline]] void MaybeSample(void* p, ObjCgroup* owner, uint64_t bytes,
                                   const void* entry_return) {
  HookGuard guard;  // what the profiler allocates is not charged
  if (profile::SampleSlow(owner, p, bytes, entry_return)) {
    Header* h = HeaderOf(p);
    h->owner |= kSampled;
    h->check = CheckWord(p, h->owner);
  }
  if (__builtin_expect(g_profile_requested.load(std::memory_order_relaxed),
                       0) &&
      g_profile_requested.exchange(false, std::memory_order_relaxed)) {
    WriteRequestedProfile();
  }
}

// A sampled block is freed or moved: its sample goes.
[[gnu::noinline]] void ForgetSample(void* p) {
  HookGuard guard;
  profile::Forget(p);
}

// Hands a block glibc just gave back to it, unused (its charge was refused).
[[gnu::noinline]] void GiveBack(void* raw) {
  if (ChunkMmapped(raw)) NoteMmappedFree(ChunkBytes(raw));  // glibc's rule
  __libc_free(raw);
}

// `align` is a power of two. Asks glibc first and charges the chunk it
// gave: only memory the system granted is ever charged, so a request glibc
// refuses (a 32 TiB malloc) raises no peak and counts no event. A charge
// umemcg refuses (UMEMCG_ENFORCE, over memory.max) hands the block back
// unused, and the call fails with ENOMEM.
void* AllocateFor(ObjCgroup* owner, size_t size, size_t align, bool zero) {
  if (size > kMaxRequest || align > kMaxRequest) {
    errno = ENOMEM;
    return nullptr;
  }
  const bool aligned = align > kMallocAlign;
  // Over-aligned: the offset is the alignment (at least 32, room for the
  // header and the offset word), and a minimum chunk more keeps the usable
  // size at least glibc's, which _int_memalign leaves up to that much
  // larger when the trailer is too small to split off.
  const size_t raw_size = aligned
                              ? std::max(size, kMinRequest) + align + kMinChunk
                              : RawRequest(size);
  void* raw;
  if (!aligned) {
    raw = zero ? __libc_calloc(1, raw_size) : __libc_malloc(raw_size);
  } else {
    raw = __libc_memalign(align, raw_size);
  }
  if (raw == nullptr) return nullptr;  // glibc's failure, errno unchanged
  const uint64_t actual = ChunkBytes(raw);
  if (owner == nullptr) {
    CountLive(nullptr, static_cast<int64_t>(actual), 1);
  } else if (!BookBlock(owner, actual)) {
    GiveBack(raw);
    errno = ENOMEM;
    return nullptr;
  }
  if (aligned && zero) std::memset(raw, 0, raw_size);
  void* p = Publish(raw, aligned ? align : kHeaderSize, owner);
  if (owner != nullptr && profile::CountdownExpired(actual)) {
    MaybeSample(p, owner, actual, __builtin_return_address(0));
  }
  return p;
}

inline void* Allocate(size_t size, size_t align, bool zero) {
  return AllocateFor(CurrentOwner(), size, align, zero);
}

// A pointer that is not ours: glibc's (or nobody's, and glibc says so).
// glibc's verdicts stay glibc's: an unaligned pointer is "free(): invalid
// pointer" (glibc would read its flags from our header's bytes, which can
// send it through an arena pointer into a segfault), and a second free of
// one of our blocks is handed to glibc as a second free of its chunk, so
// it reports the double free as it would without us.
[[gnu::noinline]] void FreeForeign(void* p) {
  if (Misaligned(p)) InvalidPointer("free(): invalid pointer\n");
  if (FreedOurs(p)) return __libc_free(static_cast<char*>(p) - kHeaderSize);
  MyShard().foreign_frees.fetch_add(1, std::memory_order_relaxed);
  if (ChunkMmapped(p)) NoteMmappedFree(ChunkBytes(p));
  __libc_free(p);
}

void Free(void* p) {
  if (p == nullptr) return;
  if (!IsOurs(p)) return FreeForeign(p);
  Header* h = HeaderOf(p);
  ObjCgroup* owner = OwnerOf(h);
  void* raw = RawOf(p);
  const uint64_t bytes = ChunkBytes(raw);
  const bool mmapped = ChunkMmapped(raw);
  // A second free of `p` is not ours any more, and is told apart (above).
  // An over-aligned block's offset may not survive glibc's bookkeeping, so
  // its second free goes to glibc as it is.
  if (__builtin_expect((h->owner & kSampled) != 0, 0)) ForgetSample(p);
  h->check = (h->owner & kOverAligned) == 0 ? FreedMark(p) : 0;
  if (owner != nullptr) {
    UnbookBlock(owner, bytes);
  } else {
    CountLive(nullptr, -static_cast<int64_t>(bytes), -1);
  }
  if (__builtin_expect(mmapped, 0)) NoteMmappedFree(bytes);
  __libc_free(raw);
}

void* Reallocate(void* p, size_t size) {
  if (p == nullptr) return Allocate(size, kMallocAlign, false);
  if (size == 0) {  // glibc: realloc(p, 0) frees p and returns NULL
    Free(p);
    return nullptr;
  }
  if (!IsOurs(p)) {
    // Not ours: glibc's (or nobody's) block; it stays unaccounted. glibc's
    // verdicts as in FreeForeign.
    if (Misaligned(p)) InvalidPointer("realloc(): invalid pointer\n");
    if (FreedOurs(p)) {
      return __libc_realloc(static_cast<char*>(p) - kHeaderSize, size);
    }
    MyShard().foreign_frees.fetch_add(1, std::memory_order_relaxed);
    return __libc_realloc(p, size);
  }
  if (size > kMaxRequest) {
    errno = ENOMEM;
    return nullptr;
  }
  Header* h = HeaderOf(p);
  ObjCgroup* owner = OwnerOf(h);
  void* raw = RawOf(p);
  const uint64_t old_bytes = ChunkBytes(raw);
  if ((h->owner & kOverAligned) != 0) {
    // Over-aligned block (alignment = offset): glibc's realloc would not
    // keep the alignment; move it by hand, to the same owner. Everything
    // the caller could use (its usable size) is kept.
    const size_t offset =
        static_cast<size_t>(static_cast<char*>(p) - static_cast<char*>(raw));
    void* q = AllocateFor(owner, size, offset, false);
    if (q == nullptr) return nullptr;
    std::memcpy(q, p, std::min<size_t>(size, GlibcUsable(raw) - offset));
    Free(p);
    return q;
  }
  // The block keeps its owner (the charge follows the object); only the
  // difference is charged or uncharged. A charge that cannot be refused
  // (not enforcing) is made after glibc answered, so a growth glibc
  // refuses raises no peak. A refusable one is made first, so that a
  // refused charge leaves the old block untouched (realloc's contract;
  // glibc may already have freed it once it answered). The booking
  // window (heap_fork.h) spans the charge made first, if any, to the count.
  const size_t raw_size = RawRequest(size);
  const uint64_t predicted = Request2Size(raw_size);
  bool windowed = false;
  bool deferred = false;
  uint64_t pre = 0;
  if (owner != nullptr && g_enforce && predicted > old_bytes) {
    windowed = true;
    deferred = HeapBookBegin();
    if (!deferred) {
      pre = predicted - old_bytes;
      if (!Charge(owner, pre, g_charge_flags)) {
        HeapBookEnd();
        errno = ENOMEM;
        return nullptr;
      }
    }
  }
  // A sampled block's sample goes (if glibc refuses, the block stays
  // unsampled in the profile); the new block counts as a new allocation.
  if (__builtin_expect((h->owner & kSampled) != 0, 0)) ForgetSample(p);
  const uint64_t check = h->check;
  h->check = 0;  // glibc may move the block: no stale header stays valid
  void* fresh = __libc_realloc(raw, raw_size);
  if (fresh == nullptr) {
    h->check = check;  // the old block is intact and still ours
    if (pre > 0) Uncharge(owner, pre);
    if (windowed && !deferred) HeapBookEnd();
    return nullptr;
  }
  const uint64_t new_bytes = ChunkBytes(fresh);
  const int64_t delta =
      static_cast<int64_t>(new_bytes) - static_cast<int64_t>(old_bytes);
  if (owner == nullptr) {
    CountLive(nullptr, delta, 0);
  } else {
    if (!windowed) deferred = HeapBookBegin();
    if (__builtin_expect(deferred, 0)) {
      HeapDefer(owner, delta, 0);
    } else {
      Settle(owner, old_bytes + pre, new_bytes);
      CountLive(owner, delta, 0);
      HeapBookEnd();
    }
  }
  void* q = Publish(fresh, kHeaderSize, owner);
  if (owner != nullptr && profile::CountdownExpired(new_bytes)) {
    MaybeSample(q, owner, new_bytes, __builtin_return_address(0));
  }
  return q;
}

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

void ApplyHeapBooking(ObjCgroup* owner, int64_t bytes, int64_t blocks) {
  if (bytes > 0) {
    (void)Charge(owner, static_cast<uint64_t>(bytes), kSettleFlags);
  } else if (bytes < 0) {
    Uncharge(owner, static_cast<uint64_t>(-bytes));
  }
  CountLive(owner, bytes, blocks);
}

bool ProbeGlibcChunks() {
  // A heap chunk of 100 bytes is 112, not mmapped, with 104 usable.
  void* small = __libc_malloc(100);
  bool ok = small != nullptr && ChunkBytes(small) == Request2Size(100) &&
            !ChunkMmapped(small) && GlibcUsable(small) == 104;
  __libc_free(small);
  // glibc's tcache key: what it writes 8 bytes into a chunk it caches (the
  // chunk is read after its free on purpose, then taken back).
  auto* probe = static_cast<uint64_t*>(__libc_malloc(24));
  if (probe != nullptr) {
    const uint64_t mine = 0x5a5a5a5a5a5a5a5aull;
    probe[1] = mine;
    __libc_free(probe);
    const uint64_t seen = *static_cast<volatile uint64_t*>(probe + 1);
    void* again = __libc_malloc(24);
    if (again == probe && seen != mine && seen != 0) {
      g_tcache_key.store(seen, std::memory_order_relaxed);
    }
    __libc_free(again);
  }
  // When false the runtime does not start, so no block is ever charged.
  return ok;
}

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

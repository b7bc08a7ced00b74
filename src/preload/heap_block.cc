// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The heap block layer of libumemcg-preload.so (format and design in
// heap_block.h): making a block (sizing the request to glibc, charging
// the chunk glibc gave, publishing the header), freeing and moving one,
// telling ours from glibc's, the bookings a fork deferred, and the
// start-up probe of glibc's chunk header. The interposed functions that
// call it are in hooks.cc.

#include "preload/heap_block.h"

#include <errno.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "preload/heap_fork.h"
#include "preload/preload_internal.h"
#include "profile/sampler.h"

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t align, size_t size);
void __libc_free(void* p);
}

namespace umemcg::preload {

namespace {

// Requests this close to SIZE_MAX fail before any arithmetic overflows
// (glibc refuses anything above PTRDIFF_MAX with ENOMEM as well).
constexpr size_t kMaxRequest = SIZE_MAX / 4;
// glibc's dynamic mmap threshold: 128 KiB, raised to the size of each
// freed mmapped chunk up to 32 MiB (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit).
constexpr size_t kDefaultMmapThreshold = 128 * 1024;
constexpr size_t kMaxDynamicMmapThreshold = 32 * 1024 * 1024;

}  // namespace

std::atomic<uint64_t> g_secret{0};
std::atomic<size_t> g_mmap_threshold{kDefaultMmapThreshold};
std::atomic<bool> g_dynamic_threshold{true};
std::atomic<bool> g_mmap_enabled{true};

uint64_t InitSecret() noexcept {
  uint64_t s = 0x243f6a8885a308d3ull;  // no AT_RANDOM: a fixed odd value
  if (const auto* random =
          reinterpret_cast<const unsigned char*>(getauxval(AT_RANDOM))) {
    std::memcpy(&s, random + 8, sizeof(s));  // glibc uses bytes 0..7
  }
  s |= 1;
  g_secret.store(s, std::memory_order_relaxed);
  return s;
}

namespace {

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

// A 16-byte aligned pointer whose header is one of ours already freed:
// freed by us and untouched since, or kept in glibc's tcache.
inline bool FreedOurs(void* p) {
  const uint64_t w = HeaderOf(p)->check;
  const uint64_t key = g_tcache_key.load(std::memory_order_relaxed);
  return w == FreedMark(p) || (key != 0 && w == key);
}

inline ObjCgroup* OwnerOf(const Header* h) {
  return reinterpret_cast<ObjCgroup*>(h->owner & ~(kOverAligned | kSampled));
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

// A refused heap charge: in the resident mode, mappings whose pages were
// released give their charge back first, and the charge is tried again.
[[gnu::noinline, gnu::cold]] bool ChargeRefused(ObjCgroup* owner,
                                                uint64_t bytes,
                                                ChargeFlags flags) {
  if (RecountMappings() && owner->Charge(Bytes(bytes), flags, kHeapItem).ok()) {
    return true;
  }
  // Relaxed: a statistic (CounterShard).
  MyShard().charge_failures.fetch_add(1, std::memory_order_relaxed);
  return false;
}

[[gnu::always_inline]] inline bool Charge(ObjCgroup* owner, uint64_t bytes,
                                          ChargeFlags flags) {
  HookGuard guard;
  const ChargeResult r = owner->Charge(Bytes(bytes), flags, kHeapItem);
  if (r.ok()) return true;
  return ChargeRefused(owner, bytes, flags);
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

}  // namespace

// `align` is a power of two. Asks glibc first and charges the chunk it
// gave: only memory the system granted is ever charged, so a request glibc
// refuses (a 32 TiB malloc) raises no peak and counts no event. A charge
// umemcg refuses (UMEMCG_ENFORCE, over memory.max) hands the block back
// unused, and the call fails with ENOMEM.
void* AllocateOtherMode(size_t size, size_t align, bool zero) {
  if (DecideHeapMode() == kHeapJemalloc) return JeAllocate(size, align, zero);
  return AllocateFor(CurrentOwner(), size, align, zero);
}

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

void Free(void* p) {
  if (__builtin_expect(g_heap_mode != kHeapHeader, 0)) {
    if (DecideHeapMode() == kHeapJemalloc) return JeFree(p);
  }
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
  if (__builtin_expect(g_heap_mode != kHeapHeader, 0)) {
    if (DecideHeapMode() == kHeapJemalloc) return JeReallocate(p, size);
  }
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

}  // namespace umemcg::preload

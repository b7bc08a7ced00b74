// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The heap block layer of libumemcg-preload.so: the blocks its interposed
// allocation functions (hooks.cc) hand out, each a glibc chunk with a
// 16-byte header of ours, charged to its owner for as long as it lives.
// Kernel counterpart: the slab hooks (memcg_slab_post_alloc_hook /
// memcg_slab_free_hook, here AllocateFor / Free) with the owner stored in
// the object's header instead of the slab's obj_exts vector.
// docs/preload.md has the design.
//
// This header holds the block format and the glibc chunk geometry, with
// the helpers that read them, inline because the malloc/free paths run
// them (hooks.cc's malloc_usable_size as well); the sizing state mallopt
// sets; and the layer's entry points (AllocateFor, Free, Reallocate).
// heap_block.cc makes the blocks: sizing, charging and publishing, freeing,
// moving, and the cold paths.
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

#ifndef UMEMCG_SRC_PRELOAD_HEAP_BLOCK_H_
#define UMEMCG_SRC_PRELOAD_HEAP_BLOCK_H_

#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "preload/jemalloc_mode.h"
#include "preload/preload_internal.h"

#pragma GCC visibility push(hidden)

namespace umemcg::preload {

inline constexpr size_t kHeaderSize = 16;
inline constexpr size_t kMallocAlign = 16;  // glibc's malloc alignment (x86-64)
// glibc's chunk geometry (malloc/malloc.c): an 8-byte size field before
// the user pointer with three flag bits, 16-byte granularity, 32-byte
// minimum chunk, and an mmapped chunk (flag 2) that has no next chunk's
// field to lend, so its usable size is 16 bytes short of the chunk.
inline constexpr size_t kSizeSz = 8;
inline constexpr size_t kMinChunk = 32;
// The usable size of the minimum chunk.
inline constexpr size_t kMinRequest = kMinChunk - kSizeSz;
inline constexpr size_t kChunkMmapped = 2;
inline constexpr uintptr_t kOverAligned = 1;
inline constexpr uintptr_t kSampled = 2;  // ObjCgroup is 64-byte aligned

struct Header {
  uintptr_t owner;
  uint64_t check;
};
static_assert(sizeof(Header) == kHeaderSize);

// Per-process secret; 0 until first use. Every thread derives the same
// value from AT_RANDOM, so racing first uses agree (relaxed is enough).
extern std::atomic<uint64_t> g_secret;
// Sets g_secret on first use and returns it.
[[gnu::noinline]] uint64_t InitSecret() noexcept;

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

inline bool Misaligned(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & (kMallocAlign - 1)) != 0;
}

inline bool IsOurs(void* p) {
  // Our pointers are 16-byte aligned (an unaligned one is invalid for glibc
  // as well), and for aligned ones the 16 bytes read here are the ones
  // glibc's free() reads (prev_size, size).
  if (Misaligned(p)) return false;
  const Header* h = HeaderOf(p);
  return h->check == CheckWord(p, h->owner);
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

inline size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// ---- Sizing: glibc's mmap threshold ----

// What the block layer knows of glibc's mmap threshold, set by mallopt()
// and the environment (hooks.cc's SetMmapThreshold / SetMmapMax) and by
// glibc's dynamic rule (heap_block.cc). Relaxed: a sizing hint only (a
// stale value costs at most a page or 16 usable bytes on one block, never
// correctness).
extern std::atomic<size_t> g_mmap_threshold;
extern std::atomic<bool> g_dynamic_threshold;
extern std::atomic<bool> g_mmap_enabled;

// ---- The blocks (heap_block.cc) ----

// A block of `size` usable bytes at `align` (a power of two, at least
// kMallocAlign; zeroed when `zero`) charged to `owner` (null: to nothing).
// Null with errno ENOMEM when the request is too large or umemcg refuses
// the charge, with glibc's errno when glibc refuses the memory.
void* AllocateFor(ObjCgroup* owner, size_t size, size_t align, bool zero);

// A block for the calling thread's owner (CurrentOwner), out of line:
// another heap mode, or none decided yet (jemalloc_mode.h: the first call
// of the process, or every call in jemalloc mode), or the owner's slow
// path (a move waiting, or the thread not registered yet).
[[gnu::noinline]] void* AllocateOtherMode(size_t size, size_t align, bool zero);

// A block for the calling thread's owner. CurrentOwner spelt out so that
// every path ends in a tail call (its slow path goes out of line whole,
// and the common path saves no register).
inline void* Allocate(size_t size, size_t align, bool zero) {
  if (__builtin_expect(g_heap_mode != kHeapHeader, 0)) {
    return AllocateOtherMode(size, align, zero);
  }
  const ThreadState& t = tls_state;
  if (t.in_hook != 0) return AllocateFor(nullptr, size, align, zero);
  if (__builtin_expect(OwnerSlowPath(t), 0)) {
    return AllocateOtherMode(size, align, zero);
  }
  return AllocateFor(SteadyOwner(t), size, align, zero);
}

// free(p): ours is uncharged and handed back to glibc; anything else is
// glibc's to judge (foreign, invalid, or a second free).
void Free(void* p);

// realloc(p, size), glibc's rules: the block keeps its owner.
void* Reallocate(void* p, size_t size);

}  // namespace umemcg::preload

#pragma GCC visibility pop

#endif  // UMEMCG_SRC_PRELOAD_HEAP_BLOCK_H_

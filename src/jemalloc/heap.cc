// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Per-group jemalloc arenas (include/umemcg/jemalloc.h). Pieces:
//   - the extent hooks: map, commit (charge), decommit (uncharge), destroy;
//   - the chunk table: 512 KiB chunk -> arena tag, filled when a hook maps,
//     read by every free to find the owner without a header;
//   - the bindings: group (objcg origin id) -> arena, behind one mutex, and
//     each thread's small cache of them plus its table of explicit thread
//     caches per arena;
//   - lifetime: the observer that marks a removed group's arena dying, and
//     Collect, which destroys dying arenas without active pages;
//   - the fork gate and the memory.stat extension.
//
// Hooks run with jemalloc's locks held (pac grow_mtx at worst); while in
// one, the thread's allocations go to jemalloc's automatic arenas (jemalloc
// also marks it reentrant), so the charge path may allocate (reclaimers,
// OOM handlers) without recursing into the arena.

#include "jemalloc/heap.h"

#include <jemalloc/jemalloc.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "profile/sampler.h"
#include "stat_extension.h"
#include "umemcg/active.h"
#include "umemcg/check.h"
#include "umemcg/jemalloc.h"
#include "umemcg/obj_cgroup.h"
#include "umemcg/pressure.h"

#ifdef UMEMCG_JEMALLOC_IN_PRELOAD
// Compiled into libumemcg-preload.so for its jemalloc mode
// (docs/preload.md): jemalloc is not a dependency of the preload (no
// DT_NEEDED), its functions are weak references, bound when the program
// preloads libjemalloc.so.2 behind the preload and null otherwise (the
// preload then never enables this heap). The group is the preload's
// (its thread's group or "process"), and the heap's internal work runs
// inside the preload's guard too, so the mappings the hooks make are not
// charged again by the preload's mmap hooks.
#pragma weak mallocx
#pragma weak dallocx
#pragma weak mallctl
#pragma weak mallctlbymib
#pragma weak mallctlnametomib
#include "preload/preload_internal.h"
#endif

namespace umemcg::jemalloc {
namespace {

constexpr size_t kPage = 4096;
constexpr unsigned kMaxArenas = 4096;  // MALLOCX_ARENA's index space
constexpr int kChunkShift = 19;        // 512 KiB
constexpr size_t kChunk = size_t{1} << kChunkShift;
constexpr int kLeafBits = 14;
constexpr int kRootBits = 47 - kChunkShift - kLeafBits;  // 14
// In an arena's tag (and so in its chunks' tags): the arena holds only
// blocks the heap profiler sampled, so a free that finds it drops the
// sample (profile::Forget) and others never look the block up.
constexpr uint32_t kSampledTag = uint32_t{1} << 31;
constexpr uint32_t kIncarnationMask = 0x7FFFF;  // bits 12..30 of the tag

// ---- Per-thread state (trivial; constant-initialized) ----

struct BindingCacheEntry {
  const ObjCgroup* objcg;
  uint64_t origin_id;
  unsigned arena;  // 0: unaccounted
};
// Direct-mapped by the objcg's origin id: a thread serving up to 16
// tenants in turn (a scope per request) finds each binding in one compare;
// a miss takes g_mu and the bindings map. (It was 4 entries replaced round
// robin: 8 tenants in turn missed on every switch.)
constexpr int kBindingCache = 16;
static_assert((kBindingCache & (kBindingCache - 1)) == 0);
constexpr uint16_t kNoTcache = 0xFFFF;

struct ThreadState {
  int internal;            // > 0: inside a hook or the heap's slow paths
  bool exited;             // the exit handler ran: no new thread caches
  bool exit_armed;         // the exit handler is registered
  uint64_t generation;     // g_generation last seen
  int32_t throttle_ms;     // memory.high penalty owed (AfterAlloc)
  unsigned refused_arena;  // the last commit this thread's hook refused
  BindingCacheEntry cache[kBindingCache];
  // Explicit tcache per arena: id + 1; 0 none yet; kNoTcache: use none.
#ifdef UMEMCG_JEMALLOC_IN_PRELOAD
  // In the preload, mapped at the thread's first thread cache (header mode
  // never does): its static TLS, in every thread of every process, stays
  // small. Null: no thread cache.
  uint16_t* tcache;
#else
  uint16_t tcache[kMaxArenas];
#endif
};
constinit thread_local ThreadState tls{};

constexpr size_t kTcacheTableBytes = sizeof(uint16_t) * kMaxArenas;

// This thread's tcache entry for arena `ind` (0 when it has none).
inline uint16_t TcacheOf(unsigned ind) {
#ifdef UMEMCG_JEMALLOC_IN_PRELOAD
  return tls.tcache == nullptr ? 0 : tls.tcache[ind];
#else
  return tls.tcache[ind];
#endif
}

struct InternalScope {
#ifdef UMEMCG_JEMALLOC_IN_PRELOAD
  InternalScope() {
    ++tls.internal;
    ++preload::tls_state.in_hook;
  }
  ~InternalScope() {
    --preload::tls_state.in_hook;
    --tls.internal;
  }
#else
  InternalScope() { ++tls.internal; }
  ~InternalScope() { --tls.internal; }
#endif
};

// ---- Arenas ----

struct ArenaState {
  // Tag of the live arena at this index (kSampledTag for a sampled arena |
  // incarnation << 12 | index), 0 when none. Relaxed readers compare it
  // with a chunk's tag; both were written before the block being freed was
  // handed out.
  std::atomic<uint32_t> tag{0};
  // A group's arena: its sampled arena (the heap profiler's sampled blocks
  // of the group, charged to it too), 0 until its first sample. Release
  // store under g_mu once the sampled arena is published; acquire loads.
  std::atomic<unsigned> sampled{0};
  // This is a group's sampled arena (written under g_mu at creation): it
  // is destroyed with its group's arena, never alone.
  bool is_sampled = false;
  std::atomic<bool> dying{false};
  // Pages charged by the hooks and not yet uncharged (settled ones).
  std::atomic<int64_t> charged{0};
  // Charges deferred while a fork was in progress (+ charge, - uncharge).
  std::atomic<int64_t> deferred{0};
  // Threads holding an explicit tcache of this arena.
  std::atomic<int32_t> tcache_users{0};
  // Written under g_mu before the arena is published, read by the hooks.
  ObjCgroup* objcg = nullptr;  // reference held in `objcg_ref`
  ObjCgroupRef objcg_ref;
  // The group the hooks charge. Held until the arena is destroyed, as a
  // kernel page pins its memcg: a removed group stays (offline, dying)
  // while its arena holds pages, and their uncharges reach its online
  // ancestors through the hierarchical counters.
  GroupRef owner;
  uint64_t origin_id = 0;
  uint32_t incarnation = 0;
  struct PurgeReclaimer : Reclaimer {
    unsigned arena = 0;
    Pages Reclaimable() override;
    Pages Reclaim(Pages target) override;
  } reclaimer;
  GroupRef reclaimer_group;  // where `reclaimer` is registered
};
#ifdef UMEMCG_JEMALLOC_IN_PRELOAD
// Mapped by Enable: the preload is loaded into every process, and a static
// array would run 4096 constructors (and touch ~100 pages) at each start.
// Nothing reads it before Enable (no chunk carries a tag before then).
ArenaState* g_arenas = nullptr;
#else
ArenaState g_arenas[kMaxArenas];
#endif

// ---- The chunk table ----

std::atomic<std::atomic<uint32_t>*> g_chunk_root[size_t{1} << kRootBits];

std::atomic<uint32_t>* ChunkSlot(uintptr_t addr, bool create) {
  const uintptr_t chunk = addr >> kChunkShift;
  const uintptr_t hi = chunk >> kLeafBits;
  if (hi >= (uintptr_t{1} << kRootBits)) return nullptr;
  // Acquire: pairs with the release CAS that published the zeroed leaf.
  std::atomic<uint32_t>* leaf =
      g_chunk_root[hi].load(std::memory_order_acquire);
  if (leaf == nullptr) {
    if (!create) return nullptr;
    void* m = mmap(nullptr, sizeof(uint32_t) << kLeafBits,
                   PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    auto* fresh = static_cast<std::atomic<uint32_t>*>(m);
    if (!g_chunk_root[hi].compare_exchange_strong(leaf, fresh,
                                                  std::memory_order_acq_rel)) {
      munmap(m, sizeof(uint32_t) << kLeafBits);  // another thread won
    } else {
      leaf = fresh;
    }
  }
  return &leaf[chunk & ((uintptr_t{1} << kLeafBits) - 1)];
}

bool SetChunks(uintptr_t begin, size_t len, uint32_t tag) {
  for (uintptr_t a = begin; a < begin + len; a += kChunk) {
    std::atomic<uint32_t>* slot = ChunkSlot(a, true);
    if (slot == nullptr) return false;
    // Relaxed: a block from this chunk reaches another thread's free only
    // through synchronization that follows this store.
    slot->store(tag, std::memory_order_relaxed);
  }
  return true;
}

uint32_t ChunkTag(const void* p) {
  std::atomic<uint32_t>* slot =
      ChunkSlot(reinterpret_cast<uintptr_t>(p), false);
  // Relaxed: see SetChunks.
  return slot == nullptr ? 0 : slot->load(std::memory_order_relaxed);
}

// ---- Global state ----

std::mutex g_mu;  // bindings, arena creation and destruction, Enable
Controller* g_controller = nullptr;
HeapOptions g_options;
std::atomic<bool> g_enabled{false};
// Bumped when an arena starts dying: threads drop cached bindings and
// their tcaches of dying arenas on their next operation.
std::atomic<uint64_t> g_generation{1};
std::atomic<int> g_live_arenas{0};
// Arenas marked dying and not yet destroyed. A thread's exit looks for
// arenas to destroy (its thread caches may have been the last users) only
// when there are some: otherwise every exit would refresh jemalloc's
// statistics and scan every arena slot under g_mu. Written under g_mu.
std::atomic<int> g_dying_arenas{0};
// Marks `a` dying (once). g_mu held. The fence pairs with OnThreadExit's:
// either the marker's MaybeDestroy sees the exiting thread's tcache gone,
// or the exiting thread sees the count and destroys the arena itself.
void MarkDying(ArenaState& a) {
  if (!a.dying.exchange(true, std::memory_order_acq_rel)) {
    g_dying_arenas.fetch_add(1, std::memory_order_relaxed);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
struct Binding {
  unsigned arena = 0;  // 0: unaccounted
  bool shared = false;
  Group* group = nullptr;  // the origin group (online while bound)
};
// objcg origin id -> binding. Guarded by g_mu; allocated internally.
std::unordered_map<uint64_t, Binding>* g_bindings = nullptr;
// mibs, resolved once.
size_t g_mib_purge[3], g_mib_destroy[3], g_mib_pactive[4], g_mib_pdirty[4];
size_t g_mib_tcache_create[2], g_mib_tcache_flush[2], g_mib_tcache_destroy[2];
size_t g_mib_epoch[1];

// ---- Fork gate ----

std::atomic<int> g_hooks_charging{0};
std::atomic<bool> g_forking{false};

// ---- Charging from the hooks ----

// Charges `pages` for arena `a`; false when refused.
bool ChargePages(ArenaState& a, unsigned ind, uint64_t pages) {
  // seq_cst pair with PrepareFork: either it sees us counted, or we see
  // it forking.
  g_hooks_charging.fetch_add(1, std::memory_order_seq_cst);
  if (g_forking.load(std::memory_order_seq_cst)) {
    g_hooks_charging.fetch_sub(1, std::memory_order_seq_cst);
    a.deferred.fetch_add(static_cast<int64_t>(pages),
                         std::memory_order_relaxed);
    a.charged.fetch_add(static_cast<int64_t>(pages), std::memory_order_relaxed);
    return true;
  }
  // Settle what a fork deferred.
  const int64_t owed = a.deferred.exchange(0, std::memory_order_relaxed);
  Group* g = a.owner.get();
  // (`charged` already counts deferred pages.)
  if (owed > 0) {
    (void)g->TryCharge(Pages(owed), ChargeFlags::kNoFail, StatItem::kAnon);
  } else if (owed < 0) {
    g->UnchargeDirect(Pages(-owed), StatItem::kAnon);
  }
  const ChargeFlags flags = g_options.flags | ChargeFlags::kNoThrottle;
  // The arena's own dirty pages first: purge them before anything else is
  // reclaimed (a first try without reclaim, then the purge, then the full
  // charge path).
  ChargeResult r =
      g->TryCharge(Pages(pages), ChargeFlags::kNoThrottle, StatItem::kAnon);
  if (!r.ok() && r.code == StatusCode::kResourceExhausted &&
      HasFlag(flags, ChargeFlags::kMayReclaim)) {
    size_t mib[3] = {g_mib_purge[0], ind, g_mib_purge[2]};
    {
      // The purge is this charge's first reclaim: a memory stall of the
      // group (memory.pressure), as the reclaim walk after it is.
      MemoryStallScope stall(*g);
      mallctlbymib(mib, 3, nullptr, nullptr, nullptr, 0);
    }
    r = g->TryCharge(Pages(pages), flags, StatItem::kAnon);
  } else if (!r.ok() && r.code == StatusCode::kResourceExhausted) {
    r = g->TryCharge(Pages(pages), flags, StatItem::kAnon);
  }
  g_hooks_charging.fetch_sub(1, std::memory_order_seq_cst);
  if (!r.ok()) {
    tls.refused_arena = ind;
    return false;
  }
  a.charged.fetch_add(static_cast<int64_t>(pages), std::memory_order_relaxed);
  tls.throttle_ms = std::max<int32_t>(tls.throttle_ms, r.throttle.count());
  return true;
}

void UnchargePages(ArenaState& a, uint64_t pages) {
  // Never below what the hooks charged: the arena's metadata (committed,
  // never charged) is decommitted when jemalloc destroys the arena.
  int64_t c = a.charged.load(std::memory_order_relaxed);
  int64_t take;
  do {
    take = std::min<int64_t>(c, static_cast<int64_t>(pages));
    if (take <= 0) return;
  } while (
      !a.charged.compare_exchange_weak(c, c - take, std::memory_order_relaxed));
  g_hooks_charging.fetch_add(1, std::memory_order_seq_cst);
  if (g_forking.load(std::memory_order_seq_cst)) {
    g_hooks_charging.fetch_sub(1, std::memory_order_seq_cst);
    a.deferred.fetch_sub(take, std::memory_order_relaxed);
    return;
  }
  // Direct, as the kernel uncharges freed user pages (uncharge_batch).
  a.owner->UnchargeDirect(Pages(take), StatItem::kAnon);
  g_hooks_charging.fetch_sub(1, std::memory_order_seq_cst);
}

// Settles deferred charges outside a hook (Info, Collect).
void Settle(ArenaState& a) {
  const int64_t owed = a.deferred.exchange(0, std::memory_order_relaxed);
  if (owed == 0 || a.objcg == nullptr) return;
  Group* g = a.owner.get();
  if (owed > 0) {
    (void)g->TryCharge(Pages(owed), ChargeFlags::kNoFail, StatItem::kAnon);
  } else {
    g->UnchargeDirect(Pages(-owed), StatItem::kAnon);
  }
}

// ---- Extent hooks ----
//
// The arena's memory is our own anonymous mappings, aligned to and sized in
// whole chunks so that each chunk belongs to one arena. "Committed" is
// umemcg's charge: the mapping is readable and writable from the start and
// the kernel backs it on touch; decommit drops the pages (MADV_DONTNEED)
// and uncharges them. jemalloc grows an arena with uncommitted retained
// memory (opt.retain) and commits what it hands out, so the pages charged
// are exactly its active plus dirty pages. An allocation asked committed
// (the arena's metadata, jemalloc's "base") is not charged.

void* HookAlloc(extent_hooks_t*, void* new_addr, size_t size, size_t alignment,
                bool* zero, bool* commit, unsigned arena_ind) {
  InternalScope in;
  if (new_addr != nullptr) return nullptr;  // no in-place growth
  // Asked committed right after this thread's commit was refused: that is
  // jemalloc's fallback for a failed grow (extent_alloc_wrapper), which
  // would hand out uncharged pages. Refuse it too. Otherwise a committed
  // request is the arena's metadata (base), which is not charged.
  if (*commit && tls.refused_arena == arena_ind) return nullptr;
  const size_t len = (size + kChunk - 1) & ~(kChunk - 1);
  const size_t align = std::max(alignment, kChunk);
  const size_t span = len + align;
  void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(m);
  const uintptr_t ret = (base + align - 1) & ~(align - 1);
  if (ret > base) munmap(m, ret - base);
  if (base + span > ret + len) {
    munmap(reinterpret_cast<void*>(ret + len), base + span - (ret + len));
  }
  // The tail [ret + size, ret + len) stays mapped but is never touched, so
  // the chunk is ours alone. jemalloc does not know it, so HookDestroy
  // (which unmaps the extent only) leaves it until exit: address space,
  // no pages.
  const uint32_t tag =
      g_arenas[arena_ind % kMaxArenas].tag.load(std::memory_order_relaxed);
  // Before the arena is published (its metadata) the tag is 0: the chunk
  // then reads as foreign, which is right for metadata.
  if (!SetChunks(ret, len, tag)) {
    munmap(reinterpret_cast<void*>(ret), len);
    return nullptr;
  }
  *zero = true;
  // *commit stays as asked: committed only when jemalloc asks (metadata).
  return reinterpret_cast<void*>(ret);
}

void HookDestroy(extent_hooks_t*, void* addr, size_t size, bool committed,
                 unsigned arena_ind);

bool HookDalloc(extent_hooks_t*, void* addr, size_t size, bool,
                unsigned arena_ind) {
  // While the arena is destroyed (its tag already cleared), jemalloc frees
  // its metadata through dalloc: unmap it. Otherwise opt out: jemalloc
  // decommits (uncharging) and retains the range.
  if (g_arenas[arena_ind % kMaxArenas].tag.load(std::memory_order_relaxed) !=
      0) {
    return true;
  }
  HookDestroy(nullptr, addr, size, false, arena_ind);
  return false;
}

void HookDestroy(extent_hooks_t*, void* addr, size_t size, bool /*committed*/,
                 unsigned /*arena_ind*/) {
  InternalScope in;
  // Nothing to uncharge: metadata ("base") extents are committed but were
  // never charged, and the pac's extents reach here decommitted (we never
  // refuse a decommit).
  const uintptr_t begin = reinterpret_cast<uintptr_t>(addr);
  // Clear only whole chunks inside the range; a partial one is cleared
  // with the extent that covers its start.
  for (uintptr_t c = (begin + kChunk - 1) & ~(kChunk - 1); c < begin + size;
       c += kChunk) {
    if (std::atomic<uint32_t>* slot = ChunkSlot(c, false)) {
      slot->store(0, std::memory_order_relaxed);
    }
  }
  munmap(addr, size);
}

bool HookCommit(extent_hooks_t*, void*, size_t, size_t offset, size_t length,
                unsigned arena_ind) {
  InternalScope in;
  (void)offset;
  ArenaState& a = g_arenas[arena_ind % kMaxArenas];
  if (a.objcg == nullptr) return false;
  return !ChargePages(a, arena_ind, length / kPage);
}

bool HookDecommit(extent_hooks_t*, void* addr, size_t, size_t offset,
                  size_t length, unsigned arena_ind) {
  InternalScope in;
  madvise(static_cast<char*>(addr) + offset, length, MADV_DONTNEED);
  ArenaState& a = g_arenas[arena_ind % kMaxArenas];
  if (a.objcg != nullptr) UnchargePages(a, length / kPage);
  return false;
}

bool HookSplit(extent_hooks_t*, void*, size_t, size_t, size_t, bool, unsigned) {
  return false;  // one mapping or adjacent ones: always splittable
}

bool HookMerge(extent_hooks_t*, void*, size_t, void*, size_t, bool, unsigned) {
  return false;
}

extent_hooks_t g_hooks = {
    HookAlloc,
    HookDalloc,
    HookDestroy,
    HookCommit,
    HookDecommit,
    /*purge_lazy=*/nullptr,  // no MADV_FREE: dirty pages are decommitted
    /*purge_forced=*/nullptr,
    HookSplit,
    HookMerge};

// ---- jemalloc statistics ----

void RefreshStats() {
  uint64_t epoch = 1;
  mallctlbymib(g_mib_epoch, 1, nullptr, nullptr, &epoch, sizeof(epoch));
}

size_t ArenaStat(const size_t* base_mib, unsigned ind) {
  size_t mib[4] = {base_mib[0], base_mib[1], ind, base_mib[3]};
  size_t v = 0, len = sizeof(v);
  if (mallctlbymib(mib, 4, &v, &len, nullptr, 0) != 0) return 0;
  return v;
}

Pages PurgeArena(unsigned ind) {
  ArenaState& a = g_arenas[ind];
  const int64_t before = a.charged.load(std::memory_order_relaxed);
  size_t mib[3] = {g_mib_purge[0], ind, g_mib_purge[2]};
  mallctlbymib(mib, 3, nullptr, nullptr, nullptr, 0);
  const int64_t after = a.charged.load(std::memory_order_relaxed);
  return Pages(before > after ? static_cast<uint64_t>(before - after) : 0);
}

// One reclaimer per group: its arena and its sampled arena.
Pages ArenaState::PurgeReclaimer::Reclaimable() {
  // Charged pages bound the dirty ones (a statistics refresh here would
  // take jemalloc's ctl lock on every reclaim pass).
  int64_t c = g_arenas[arena].charged.load(std::memory_order_relaxed);
  if (unsigned s = g_arenas[arena].sampled.load(std::memory_order_acquire);
      s != 0) {
    c += g_arenas[s].charged.load(std::memory_order_relaxed);
  }
  return Pages(c > 0 ? static_cast<uint64_t>(c) : 0);
}

Pages ArenaState::PurgeReclaimer::Reclaim(Pages) {
  InternalScope in;
  Pages purged = PurgeArena(arena);
  if (unsigned s = g_arenas[arena].sampled.load(std::memory_order_acquire);
      s != 0) {
    purged = Pages(purged.raw() + PurgeArena(s).raw());
  }
  return purged;
}

// ---- Arena creation and destruction (g_mu held) ----

uint32_t TagOf(const ArenaState& a, unsigned ind) {
  return (a.is_sampled ? kSampledTag : 0) | (a.incarnation << 12) | ind;
}

// Creates an arena for `objcg`; 0 when refused (limit or jemalloc). A
// sampled arena (`sampled`) is its group's second one and does not count
// against HeapOptions::max_arenas (LiveArenas counts groups' arenas).
unsigned CreateArena(ObjCgroup* objcg, Group& group, bool sampled = false) {
  if (!sampled &&
      g_live_arenas.load(std::memory_order_relaxed) >=
          static_cast<int>(std::min(g_options.max_arenas, kMaxArenas - 1))) {
    return 0;
  }
  unsigned ind = 0;
  size_t len = sizeof(ind);
  extent_hooks_t* hooks = &g_hooks;
  if (mallctl("arenas.create", &ind, &len, &hooks, sizeof(hooks)) != 0 ||
      ind == 0 || ind >= kMaxArenas) {
    return 0;
  }
  ArenaState& a = g_arenas[ind];
  a.incarnation = (a.incarnation + 1) & kIncarnationMask;
  if (a.incarnation == 0) a.incarnation = 1;
  a.objcg_ref = ObjCgroupRef(objcg);
  a.objcg = objcg;
  a.owner = GroupRef(&group);
  a.origin_id = objcg->origin_id();
  a.charged.store(0, std::memory_order_relaxed);
  a.deferred.store(0, std::memory_order_relaxed);
  a.tcache_users.store(0, std::memory_order_relaxed);
  a.dying.store(false, std::memory_order_relaxed);
  a.sampled.store(0, std::memory_order_relaxed);
  a.is_sampled = sampled;
  a.reclaimer.arena = ind;
  // Release: the hooks and frees that read the tag see the fields above.
  a.tag.store(TagOf(a, ind), std::memory_order_release);
  // A sampled arena is purged by its group's arena's reclaimer.
  if (!sampled && group.AddReclaimer(&a.reclaimer).ok()) {
    a.reclaimer_group = GroupRef(&group);
  }
  if (!sampled) g_live_arenas.fetch_add(1, std::memory_order_relaxed);
  return ind;
}

// Destroys arena `ind` (its dirty pages, then the arena and its retained
// ranges) and drops its references; false when jemalloc refused. g_mu
// held; the arena holds no active page.
bool DestroyArena(unsigned ind) {
  ArenaState& a = g_arenas[ind];
  // Its dirty pages go first (uncharged by the decommit hook), then the
  // arena and its retained ranges.
  PurgeArena(ind);
  Settle(a);
  size_t mib[3] = {g_mib_destroy[0], ind, g_mib_destroy[2]};
  a.tag.store(0, std::memory_order_release);
  if (mallctlbymib(mib, 3, nullptr, nullptr, nullptr, 0) != 0) {
    a.tag.store(TagOf(a, ind), std::memory_order_release);
    return false;
  }
  // Anything still charged (none when jemalloc's books and ours agree)
  // goes back now.
  const int64_t left = a.charged.exchange(0, std::memory_order_relaxed);
  if (left > 0 && a.owner) {
    a.owner->UnchargeDirect(Pages(left), StatItem::kAnon);
  }
  a.owner = GroupRef();
  a.reclaimer_group = GroupRef();  // removed with the group (offline)
  a.objcg = nullptr;
  a.objcg_ref = ObjCgroupRef();
  a.sampled.store(0, std::memory_order_relaxed);
  return true;
}

// Destroys arena `ind` if it is dying, unused by thread caches and holds
// no active page. g_mu held.
bool MaybeDestroy(unsigned ind) {
  ArenaState& a = g_arenas[ind];
  // A sampled arena goes with its group's arena.
  if (a.tag.load(std::memory_order_relaxed) == 0 || a.is_sampled ||
      !a.dying.load(std::memory_order_acquire) ||
      a.tcache_users.load(std::memory_order_acquire) != 0) {
    return false;
  }
  if (ArenaStat(g_mib_pactive, ind) != 0) return false;
  const unsigned s = a.sampled.load(std::memory_order_relaxed);
  if (s != 0) {
    if (ArenaStat(g_mib_pactive, s) != 0 || !DestroyArena(s)) return false;
  }
  if (!DestroyArena(ind)) return false;
  g_live_arenas.fetch_sub(1, std::memory_order_relaxed);
  g_dying_arenas.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

// The binding for `objcg` (g_mu held): its own arena, created on first
// use, or an ancestor's.
Binding Resolve(ObjCgroup* objcg) {
  auto it = g_bindings->find(objcg->origin_id());
  if (it != g_bindings->end() &&
      (it->second.arena == 0 ||
       !g_arenas[it->second.arena].dying.load(std::memory_order_relaxed))) {
    return it->second;
  }
  GroupRef group = objcg->GetGroup();
  Binding b;
  if (group->is_root() || objcg->is_root()) {
    b = Binding{};
  } else if (group->id() != objcg->origin_id()) {
    // The group was removed: its objcg charges an ancestor; allocate from
    // that ancestor's arena.
    ObjCgroupRef up = ObjCgroupFor(*group);
    b = Resolve(up.get());
  } else if (unsigned ind = CreateArena(objcg, *group); ind != 0) {
    b = Binding{ind, false, nullptr};
  } else if (Group* parent = group->parent(); parent != nullptr) {
    ObjCgroupRef up = ObjCgroupFor(*parent);
    b = Resolve(up.get());
    b.shared = true;
  }
  if (group->id() != objcg->origin_id()) return b;  // removed: not stored
  b.group = group.get();
  (*g_bindings)[objcg->origin_id()] = b;
  return b;
}

// ---- Thread caches ----

void DropThreadCaches(bool only_dying) {
#ifdef UMEMCG_JEMALLOC_IN_PRELOAD
  if (tls.tcache == nullptr) return;
#endif
  for (unsigned i = 1; i < kMaxArenas; ++i) {
    const uint16_t t = tls.tcache[i];
    if (t == 0) continue;
    if (only_dying && !g_arenas[i].dying.load(std::memory_order_acquire)) {
      continue;
    }
    if (t != kNoTcache) {
      unsigned id = t - 1u;
      mallctlbymib(g_mib_tcache_destroy, 2, nullptr, nullptr, &id, sizeof(id));
    }
    tls.tcache[i] = 0;
    // Release: our frees into the arena precede a destroyer's check.
    g_arenas[i].tcache_users.fetch_sub(1, std::memory_order_release);
  }
}

void OnThreadExit(void*) {
  InternalScope in;
  tls.exited = true;
  DropThreadCaches(false);
#ifdef UMEMCG_JEMALLOC_IN_PRELOAD
  if (tls.tcache != nullptr) {
    munmap(tls.tcache, kTcacheTableBytes);
    tls.tcache = nullptr;  // later frees find no thread cache
  }
#endif
  // The fence pairs with MarkDying's (see there). Relaxed load: with the
  // fences, an arena marked dying after it sees this thread's caches gone.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (g_dying_arenas.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard lock(g_mu);
  RefreshStats();
  for (unsigned i = 1; i < kMaxArenas; ++i) MaybeDestroy(i);
}

pthread_key_t g_exit_key;

// The tcache flags for arena `ind` on this thread.
int TcacheFlags(unsigned ind) {
  uint16_t t = TcacheOf(ind);
  if (t == 0) {
    if (tls.exited || !g_options.tcache || tls.internal > 0) {
      return MALLOCX_TCACHE_NONE;
    }
    InternalScope in;
#ifdef UMEMCG_JEMALLOC_IN_PRELOAD
    if (tls.tcache == nullptr) {
      void* m = mmap(nullptr, kTcacheTableBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) return MALLOCX_TCACHE_NONE;
      tls.tcache = static_cast<uint16_t*>(m);
    }
#endif
    if (!tls.exit_armed) {
      tls.exit_armed = true;
      pthread_setspecific(g_exit_key, &tls);  // any non-null value
    }
    unsigned id = 0;
    size_t len = sizeof(id);
    if (mallctlbymib(g_mib_tcache_create, 2, &id, &len, nullptr, 0) == 0 &&
        id < kNoTcache - 1) {
      t = static_cast<uint16_t>(id + 1);
    } else {
      t = kNoTcache;  // jemalloc's 4096 explicit tcaches are taken
    }
    tls.tcache[ind] = t;
    g_arenas[ind].tcache_users.fetch_add(1, std::memory_order_relaxed);
  }
  return t == kNoTcache ? MALLOCX_TCACHE_NONE : MALLOCX_TCACHE(t - 1u);
}

// A removal happened since this thread last looked: forget bindings and
// thread caches of dying arenas.
[[gnu::noinline]] void CatchUp(uint64_t gen) {
  InternalScope in;
  for (auto& e : tls.cache) e = BindingCacheEntry{};
  DropThreadCaches(/*only_dying=*/true);
  tls.generation = gen;
}

[[gnu::noinline]] int AllocFlagsSlow(ObjCgroup* oc) {
  Binding b;
  {
    InternalScope in;
    std::lock_guard lock(g_mu);
    if (!g_enabled.load(std::memory_order_relaxed)) return 0;
    b = Resolve(oc);
  }
  tls.cache[oc->origin_id() & (kBindingCache - 1)] =
      BindingCacheEntry{oc, oc->origin_id(), b.arena};
  if (b.arena == 0) return 0;
  return MALLOCX_ARENA(b.arena) | TcacheFlags(b.arena);
}

// ---- Sampled blocks (the heap profiler) ----

// The sampled arena of group arena `ind`, created at its first sample; 0
// when there is none and none can be made (jemalloc's arenas are taken, or
// the arena is dying): the sample is then not taken.
unsigned SampledArenaOf(unsigned ind) {
  ArenaState& a = g_arenas[ind];
  // Acquire: pairs with the release store below (the arena's fields).
  unsigned s = a.sampled.load(std::memory_order_acquire);
  if (s != 0) return s;
  InternalScope in;
  std::lock_guard lock(g_mu);
  if (a.tag.load(std::memory_order_relaxed) == 0 || a.is_sampled ||
      a.dying.load(std::memory_order_relaxed) || a.objcg == nullptr) {
    return 0;
  }
  s = a.sampled.load(std::memory_order_relaxed);
  if (s == 0) {
    s = CreateArena(a.objcg, *a.owner, /*sampled=*/true);
    a.sampled.store(s, std::memory_order_release);
  }
  return s;
}

// A block of a sampled arena is being freed: its sample goes first (before
// the address can be handed out again). No thread cache: see AllocSampled.
[[gnu::noinline]] int FreeSampled(void* p) {
  InternalScope in;
  profile::Forget(p);
  return MALLOCX_TCACHE_NONE;
}

// ---- Observer: removal ----

class RemovalObserver : public ControllerObserver {
 public:
  void OnGroupOffline(Group& group) override {
    InternalScope in;
    std::lock_guard lock(g_mu);
    auto it = g_bindings->find(group.id());
    if (it == g_bindings->end()) return;
    const Binding b = it->second;
    g_bindings->erase(it);
    if (b.arena != 0 && !b.shared) {
      MarkDying(g_arenas[b.arena]);
      g_arenas[b.arena].reclaimer_group = GroupRef();
    }
    // Release: a thread that sees the new generation sees `dying`.
    g_generation.fetch_add(1, std::memory_order_release);
    RefreshStats();
    for (unsigned i = 1; i < kMaxArenas; ++i) MaybeDestroy(i);
  }
};
std::shared_ptr<RemovalObserver> g_observer;

// ---- memory.stat ----

void StatLines(Group& group, std::string* out) {
  if (!g_enabled.load(std::memory_order_acquire) ||
      &group.controller() != g_controller) {
    return;
  }
  InternalScope in;
  uint64_t active = 0, dirty = 0, shared = 0;
  {
    std::lock_guard lock(g_mu);
    RefreshStats();
    for (unsigned i = 1; i < kMaxArenas; ++i) {
      ArenaState& a = g_arenas[i];
      // Orphaned arenas (Disable) have no owner.
      if (a.tag.load(std::memory_order_relaxed) == 0 || !a.owner) continue;
      if (!a.owner->IsDescendantOf(group)) continue;
      active += ArenaStat(g_mib_pactive, i);
      dirty += ArenaStat(g_mib_pdirty, i);
    }
    // Bindings are erased when their group goes offline (under g_mu), so
    // their groups are allocated here.
    for (const auto& [id, b] : *g_bindings) {
      if (b.shared && b.group->IsDescendantOf(group)) ++shared;
    }
  }
  auto line = [&](const char* key, uint64_t v) {
    out->append(key);
    out->push_back(' ');
    out->append(std::to_string(v));
    out->push_back('\n');
  };
  line("active_anon", active * kPage);
  line("inactive_anon", dirty * kPage);
  line("heap_arena_shared", shared);
}

// ---- Fork ----

void PrepareFork() {
  g_forking.store(true, std::memory_order_seq_cst);
  while (g_hooks_charging.load(std::memory_order_seq_cst) != 0) sched_yield();
  g_mu.lock();
}
void ParentAfterFork() {
  g_mu.unlock();
  g_forking.store(false, std::memory_order_seq_cst);
}
void ChildAfterFork() {
  new (&g_mu) std::mutex();
  g_hooks_charging.store(0, std::memory_order_relaxed);
  g_forking.store(false, std::memory_order_seq_cst);
}

bool NameToMib(const char* name, size_t* mib, size_t n) {
  size_t len = n;
  return mallctlnametomib(name, mib, &len) == 0 && len == n;
}

}  // namespace

// ---- Inner interface (heap.h) ----

namespace internal {

constinit std::atomic<bool> g_heap_profile{false};

int AllocFlags() {
  if (tls.internal > 0) return 0;
#ifdef UMEMCG_JEMALLOC_IN_PRELOAD
  // The preload's owner: the thread's group, else "process"; null before
  // the runtime is up and inside umemcg (automatic arenas, uncharged).
  ObjCgroup* oc = preload::CurrentOwner();
#else
  ObjCgroup* oc = ActiveObjCgroup();
#endif
  if (oc == nullptr) return 0;
  // Acquire: pairs with the removal's release bump (see RemovalObserver).
  const uint64_t gen = g_generation.load(std::memory_order_acquire);
  if (tls.generation != gen) [[unlikely]] {
    if (!g_enabled.load(std::memory_order_relaxed)) return 0;
    CatchUp(gen);
  }
  const uint64_t origin = oc->origin_id();
  const BindingCacheEntry& e = tls.cache[origin & (kBindingCache - 1)];
  if (e.objcg == oc && e.origin_id == origin) [[likely]] {
    if (e.arena == 0) return 0;
    const uint16_t t = TcacheOf(e.arena);
    if (t != 0) [[likely]] {
      return MALLOCX_ARENA(e.arena) |
             (t == kNoTcache ? MALLOCX_TCACHE_NONE : MALLOCX_TCACHE(t - 1u));
    }
    return MALLOCX_ARENA(e.arena) | TcacheFlags(e.arena);
  }
  if (!g_enabled.load(std::memory_order_relaxed)) return 0;
  return AllocFlagsSlow(oc);
}

int FreeFlags(void* p) {
  const uint32_t tag = ChunkTag(p);
  if (tag == 0) return 0;
  const unsigned ind = tag & (kMaxArenas - 1);
  ArenaState& a = g_arenas[ind];
  if (a.tag.load(std::memory_order_relaxed) != tag) return 0;
  if ((tag & kSampledTag) != 0) [[unlikely]]
    return FreeSampled(p);
  const uint64_t gen = g_generation.load(std::memory_order_acquire);
  if (tls.generation != gen) [[unlikely]]
    CatchUp(gen);
  if (tls.internal > 0 || a.dying.load(std::memory_order_relaxed)) {
    return MALLOCX_TCACHE_NONE;
  }
  const uint16_t t = TcacheOf(ind);
  if (t != 0 && t != kNoTcache) [[likely]]
    return MALLOCX_TCACHE(t - 1u);
  return TcacheFlags(ind);
}

unsigned ArenaOf(const void* p) {
  const uint32_t tag = ChunkTag(p);
  if (tag == 0) return 0;
  const unsigned ind = tag & (kMaxArenas - 1);
  return g_arenas[ind].tag.load(std::memory_order_relaxed) == tag ? ind : 0;
}

bool Refused() { return tls.refused_arena != 0; }

void* AllocSampled(size_t size, int flags, const void* entry_return) {
  const unsigned ind = (static_cast<unsigned>(flags) >> 20) - 1;
  if (tls.internal > 0 || ind == 0 || ind >= kMaxArenas) {
    return mallocx(size, flags);
  }
#ifdef UMEMCG_JEMALLOC_IN_PRELOAD
  // UMEMCG_PROFILE's SIGUSR2 (the handler only raised the flag): written
  // here, at a sampling decision, as the header mode does.
  if (preload::g_profile_requested.load(std::memory_order_relaxed) &&
      preload::g_profile_requested.exchange(false, std::memory_order_relaxed)) {
    InternalScope in;
    preload::WriteRequestedProfile();
  }
#endif
  // The thread's binding (through which `flags` came) keeps the arena and
  // its objcg alive: its thread cache of the arena, or its group online.
  ArenaState& a = g_arenas[ind];
  ObjCgroup* owner = a.objcg;
  uint64_t rate = 0;
  {
    InternalScope in;  // the profiler's own allocations stay uncharged
    if (owner == nullptr || !profile::SampleDecide(owner, size, &rate)) {
      owner = nullptr;
    }
  }
  const unsigned s = owner == nullptr ? 0 : SampledArenaOf(ind);
  if (s == 0) return mallocx(size, flags);  // unsampled (or no arena for it)
  // Alignment and zeroing as asked; the sampled arena, without a thread
  // cache (its blocks are rare and must not linger in a cache).
  void* p =
      mallocx(size, (flags & 0xFF) | MALLOCX_ARENA(s) | MALLOCX_TCACHE_NONE);
  if (p != nullptr) {
    InternalScope in;
    (void)profile::SampleRecord(owner, p, size, rate, entry_return);
  }
  return p;
}

void AfterAlloc(void* result) {
  if (result == nullptr) tls.refused_arena = 0;
  if (tls.throttle_ms > 0) [[unlikely]] {
    const int32_t ms = tls.throttle_ms;
    tls.throttle_ms = 0;
    if (tls.internal == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
  }
}

}  // namespace internal

// ---- Public API ----

Status Enable(Controller& controller, HeapOptions options) {
  InternalScope in;
  std::lock_guard lock(g_mu);
  if (g_enabled.load(std::memory_order_relaxed) || g_controller != nullptr) {
    return Status(StatusCode::kFailedPrecondition, "already enabled");
  }
  bool retain = false;
  size_t len = sizeof(retain);
  if (mallctl("opt.retain", &retain, &len, nullptr, 0) != 0 || !retain) {
    return Status(StatusCode::kFailedPrecondition,
                  "jemalloc's opt.retain is off (per-group arenas need it)");
  }
  if (!NameToMib("arena.0.purge", g_mib_purge, 3) ||
      !NameToMib("arena.0.destroy", g_mib_destroy, 3) ||
      !NameToMib("stats.arenas.0.pactive", g_mib_pactive, 4) ||
      !NameToMib("stats.arenas.0.pdirty", g_mib_pdirty, 4) ||
      !NameToMib("tcache.create", g_mib_tcache_create, 2) ||
      !NameToMib("tcache.flush", g_mib_tcache_flush, 2) ||
      !NameToMib("tcache.destroy", g_mib_tcache_destroy, 2) ||
      !NameToMib("epoch", g_mib_epoch, 1)) {
    return Status(StatusCode::kFailedPrecondition,
                  "jemalloc lacks a needed mallctl (built without stats?)");
  }
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_key_create(&g_exit_key, &OnThreadExit);
    pthread_atfork(&PrepareFork, &ParentAfterFork, &ChildAfterFork);
  });
#ifdef UMEMCG_JEMALLOC_IN_PRELOAD
  if (g_arenas == nullptr) {
    void* m = mmap(nullptr, sizeof(ArenaState) * kMaxArenas,
                   PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      return Status(StatusCode::kResourceExhausted, "cannot map arena table");
    }
    g_arenas = new (m) ArenaState[kMaxArenas];
  }
#endif
  if (g_bindings == nullptr)
    g_bindings = new std::unordered_map<uint64_t, Binding>();
  g_options = options;
  // Relaxed: see heap.h.
  internal::g_heap_profile.store(options.heap_profile,
                                 std::memory_order_relaxed);
  g_controller = &controller;
  g_observer = std::make_shared<RemovalObserver>();
  controller.AddObserver(g_observer);
  umemcg::internal::SetMemoryStatExtension(&StatLines);
  g_enabled.store(true, std::memory_order_release);
  g_generation.fetch_add(1, std::memory_order_release);
  return Status::Ok();
}

bool Enabled() { return g_enabled.load(std::memory_order_acquire); }

void Disable() {
  InternalScope in;
  std::unique_lock lock(g_mu);
  if (g_controller == nullptr) return;
  g_enabled.store(false, std::memory_order_release);
  g_generation.fetch_add(1, std::memory_order_release);
  umemcg::internal::SetMemoryStatExtension(nullptr);
  for (unsigned i = 1; i < kMaxArenas; ++i) {
    ArenaState& a = g_arenas[i];
    if (a.tag.load(std::memory_order_relaxed) == 0) continue;
    // A sampled arena is destroyed with its group's (not counted dying).
    if (!a.is_sampled) MarkDying(a);
    if (a.reclaimer_group) {
      (void)a.reclaimer_group->RemoveReclaimer(&a.reclaimer);
      a.reclaimer_group = GroupRef();
    }
  }
  g_bindings->clear();
  Controller* c = g_controller;
  g_controller = nullptr;
  auto observer = std::move(g_observer);
  lock.unlock();
  c->RemoveObserver(observer.get());
  DropThreadCaches(false);
  Collect();
  // Arenas that still hold blocks are orphaned: their charges go back now
  // and their hooks charge nothing from here on (the blocks stay valid).
  InternalScope in2;
  std::lock_guard lock2(g_mu);
  for (unsigned i = 1; i < kMaxArenas; ++i) {
    ArenaState& a = g_arenas[i];
    if (a.tag.load(std::memory_order_relaxed) == 0 || a.objcg == nullptr) {
      continue;
    }
    Settle(a);
    const int64_t left = a.charged.exchange(0, std::memory_order_relaxed);
    if (left > 0) a.owner->UnchargeDirect(Pages(left), StatItem::kAnon);
    a.objcg = nullptr;
    a.objcg_ref = ObjCgroupRef();
    a.owner = GroupRef();
  }
}

void* Allocate(size_t size) {
  const size_t n = size == 0 ? 1 : size;
  const int flags = internal::AllocFlags();
  void* p = internal::SampleNow(flags, n)
                ? internal::AllocSampled(n, flags, __builtin_return_address(0))
                : mallocx(n, flags);
  internal::AfterAlloc(p);
  if (p == nullptr) errno = ENOMEM;
  return p;
}

void* AllocateAligned(size_t size, size_t alignment) {
  const size_t n = size == 0 ? 1 : size;
  const int flags = internal::AllocFlags() | MALLOCX_ALIGN(alignment);
  void* p = internal::SampleNow(flags, n)
                ? internal::AllocSampled(n, flags, __builtin_return_address(0))
                : mallocx(n, flags);
  internal::AfterAlloc(p);
  if (p == nullptr) errno = ENOMEM;
  return p;
}

void Free(void* p) {
  if (p != nullptr) dallocx(p, internal::FreeFlags(p));
}

ArenaInfo Info(Group& group) {
  InternalScope in;
  ArenaInfo info;
  std::lock_guard lock(g_mu);
  if (g_bindings == nullptr) return info;
  auto it = g_bindings->find(group.id());
  if (it == g_bindings->end() || it->second.arena == 0) {
    if (it != g_bindings->end()) info.shared = it->second.shared;
    return info;
  }
  const unsigned ind = it->second.arena;
  ArenaState& a = g_arenas[ind];
  Settle(a);
  RefreshStats();
  info.arena = ind;
  info.shared = it->second.shared;
  int64_t c = a.charged.load(std::memory_order_relaxed);
  uint64_t active = ArenaStat(g_mib_pactive, ind);
  uint64_t dirty = ArenaStat(g_mib_pdirty, ind);
  // The group's sampled arena (its profiler-sampled blocks) is its too.
  if (const unsigned s = a.sampled.load(std::memory_order_relaxed); s != 0) {
    Settle(g_arenas[s]);
    c += g_arenas[s].charged.load(std::memory_order_relaxed);
    active += ArenaStat(g_mib_pactive, s);
    dirty += ArenaStat(g_mib_pdirty, s);
  }
  info.charged = Pages(c > 0 ? static_cast<uint64_t>(c) : 0);
  info.active = Pages(active);
  info.dirty = Pages(dirty);
  return info;
}

Pages Purge(Group& group) {
  InternalScope in;
  unsigned ind = 0, sampled = 0;
  {
    std::lock_guard lock(g_mu);
    if (g_bindings == nullptr) return Pages(0);
    auto it = g_bindings->find(group.id());
    if (it == g_bindings->end() || it->second.shared) return Pages(0);
    ind = it->second.arena;
    if (ind != 0)
      sampled = g_arenas[ind].sampled.load(std::memory_order_relaxed);
  }
  if (ind == 0) return Pages(0);
  Pages purged = PurgeArena(ind);
  if (sampled != 0) purged = Pages(purged.raw() + PurgeArena(sampled).raw());
  return purged;
}

void FlushThreadCaches() {
  InternalScope in;
  for (unsigned i = 1; i < kMaxArenas; ++i) {
    const uint16_t t = TcacheOf(i);
    if (t == 0 || t == kNoTcache) continue;
    unsigned id = t - 1u;
    mallctlbymib(g_mib_tcache_flush, 2, nullptr, nullptr, &id, sizeof(id));
  }
}

int Collect() {
  InternalScope in;
  std::lock_guard lock(g_mu);
  if (g_mib_epoch[0] == 0 && g_mib_pactive[0] == 0) return 0;
  RefreshStats();
  int n = 0;
  for (unsigned i = 1; i < kMaxArenas; ++i) n += MaybeDestroy(i) ? 1 : 0;
  return n;
}

int LiveArenas() { return g_live_arenas.load(std::memory_order_relaxed); }

}  // namespace umemcg::jemalloc

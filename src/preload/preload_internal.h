// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// State shared by the preload's allocation hooks (hooks.cc, over the
// heap block layer of heap_block.*), its mapping hooks (mmap_hooks.cc)
// and its runtime (runtime.cc: controller, environment, C API, exit
// report). Everything here is hidden: only the interposed functions and
// the umemcg_preload_* API leave the shared object (exports.map).
//
// Re-entrancy. The hooks run before the runtime exists, inside the
// dynamic loader, during thread exit and inside umemcg itself. They rely
// only on: glibc's __libc_* allocator entry points and raw system calls
// (no dlsym), an initial-exec thread-local (no __tls_get_addr allocation,
// no constructor), zero-initialized globals, and the ThreadState::in_hook
// guard: an allocation or mapping made while the thread is inside umemcg
// (charging, or a runtime call) is charged to nothing, so umemcg never
// re-enters itself. The owner's slow path (OwnerAfterMove: a thread's
// registration or a move, threads.cc) runs marked the same way, once
// the runtime is up; the registry's own thread-local is in this object's
// static TLS block (the library is preloaded), so reaching it allocates
// nothing either.

#ifndef UMEMCG_SRC_PRELOAD_PRELOAD_INTERNAL_H_
#define UMEMCG_SRC_PRELOAD_PRELOAD_INTERNAL_H_

#include <errno.h>
#include <sched.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "threads/thread_registry.h"
#include "umemcg/group.h"
#include "umemcg/obj_cgroup.h"

#pragma GCC visibility push(hidden)

namespace umemcg::preload {

struct HeapSlot;  // heap_fork.h

// Marks of ThreadState::pending besides null and a move (threads.cc).
extern internal::PendingMove g_move_marks[2];
inline internal::PendingMove* const kNotRegistered = &g_move_marks[0];
inline internal::PendingMove* const kExited = &g_move_marks[1];

struct ThreadState {
  // The thread's group: the last of umemcg_preload_set_group() and a move
  // through cgroup.threads / cgroup.procs; null: "process".
  ObjCgroup* objcg;
  // The thread's pending-move word in the thread registry (threads.cc):
  // null, a move another thread published, kNotRegistered (the initial
  // value) or kExited.
  internal::PendingMoveSlot pending;
  int in_hook;     // > 0 while this thread runs umemcg code
  int* errno_ptr;  // this thread's errno (__errno_location), once known
  // Heap bookings and fork (heap_fork.h): how this thread marks its
  // booking windows (kGate*), its slot (non-null exactly in kGateSlot),
  // and its open windows when it has no slot (kGateShared).
  int heap_gate;
  HeapSlot* heap_slot;
  uint32_t heap_busy;
};
extern __thread ThreadState tls_state
    __attribute__((tls_model("initial-exec")));

// This thread's errno, without a call into libc after the first time (the
// address is fixed for the thread's life, and a forked child's only thread
// keeps its parent thread's address).
inline int* ErrnoPtr() {
  ThreadState& t = tls_state;
  if (__builtin_expect(t.errno_ptr == nullptr, 0)) {
    t.errno_ptr = &errno;
  }
  return t.errno_ptr;
}

// Marks the calling thread as inside umemcg for its lifetime, and keeps
// errno as it was: glibc's allocation functions leave errno alone when
// they succeed (and free() always does, since 2.33), while umemcg's slow
// paths may make system calls that set it.
class HookGuard {
 public:
  HookGuard() : errno_(ErrnoPtr()), saved_errno_(*errno_) {
    ++tls_state.in_hook;
  }
  ~HookGuard() {
    --tls_state.in_hook;
    if (__builtin_expect(*errno_ != saved_errno_, 0)) *errno_ = saved_errno_;
  }
  HookGuard(const HookGuard&) = delete;
  HookGuard& operator=(const HookGuard&) = delete;

 private:
  int* const errno_;
  const int saved_errno_;
};

// Set once by the runtime, after g_charge_flags (release store; the hooks'
// acquire load pairs with it). Null until the runtime is up: blocks and
// mappings are then charged to nothing.
extern std::atomic<ObjCgroup*> g_default_objcg;
extern ChargeFlags g_charge_flags;
// UMEMCG_ENFORCE: g_charge_flags may refuse a charge. Otherwise every
// charge is forced, and the hooks charge only after the system granted
// the memory. Set with g_charge_flags.
extern bool g_enforce;
// Charges that settle a difference after the fact (the block or mapping
// already exists): never refused, past memory.max if need be.
inline constexpr ChargeFlags kSettleFlags =
    kChargeAtomic | ChargeFlags::kNoThrottle;
// The statistic heap bytes are counted in (memory.stat).
inline constexpr StatItem kHeapItem = StatItem::kSlabUnreclaimable;
// The statistic charged anonymous mappings are counted in (pages).
inline constexpr StatItem kMapItem = StatItem::kAnon;

// ---- The program's threads (threads.cc) ----

// Creates the key that unregisters threads at their exit (start-up).
void InitThreads();
// Registers the calling thread ("process" as its membership) if it is not
// yet and the runtime is up.
void RegisterThreadIfNew();
// CurrentOwner's slow path: the thread's word was not null (a move waits,
// or the thread is not registered yet, or has left the registry).
[[gnu::noinline]] ObjCgroup* OwnerAfterMove();
// umemcg_preload_set_group: makes `objcg` (null: "process") the thread's
// group and `member` its membership, dropping a move not picked up yet.
void ChooseGroup(Group* member, ObjCgroup* objcg);

// Whether the thread's pending-move word sends its owner through the slow
// path (OwnerAfterMove). Acquire: pairs with a mover's release, so a
// move's references are visible (a plain load on x86). Null in the steady
// state.
inline bool OwnerSlowPath(const ThreadState& t) {
  return t.pending.load(std::memory_order_acquire) != nullptr;
}
// The owner outside umemcg when no slow path is due.
inline ObjCgroup* SteadyOwner(const ThreadState& t) {
  if (t.objcg != nullptr) return t.objcg;
  return g_default_objcg.load(std::memory_order_acquire);
}

// The objcg a new block or mapping of this thread is charged to (null:
// nothing).
inline ObjCgroup* CurrentOwner() {
  const ThreadState& t = tls_state;
  if (t.in_hook != 0) return nullptr;
  if (__builtin_expect(OwnerSlowPath(t), 0)) return OwnerAfterMove();
  return SteadyOwner(t);
}

// Per-CPU counters of what the hooks did. A thread adds to the shard of
// the CPU it runs on (relaxed: independent sums read only by reports; a
// thread migrating mid-update only picks another shard, the sums stay
// exact). Shards are cache-line sized so CPUs never share a line.
struct alignas(64) CounterShard {
  std::atomic<int64_t> live_bytes{0};
  std::atomic<int64_t> live_blocks{0};
  std::atomic<int64_t> unaccounted_bytes{0};
  std::atomic<uint64_t> charge_failures{0};
  std::atomic<uint64_t> foreign_frees{0};
};
inline constexpr int kCounterShards = 64;
extern CounterShard g_counters[kCounterShards];

inline CounterShard& MyShard() {
  // glibc >= 2.35 reads the rseq cpu_id field here (no system call).
  const int cpu = sched_getcpu();
  return g_counters[static_cast<unsigned>(cpu) % kCounterShards];
}

// The preload's warnings (runtime.cc): printf-formatted, to stderr, in
// one write of at most 1023 bytes. Safe inside the first malloc (no stdio
// stream, no allocation); errno is left as it was.
[[gnu::format(printf, 1, 2)]] void Warn(const char* fmt, ...);

// ---- glibc facts, detected at start-up (runtime.cc) ----

// The running glibc's version, major * 1000 + minor (2036 for 2.36); 0
// until detected. Selects version-specific rules (aligned_alloc).
extern int g_glibc_version;
// Checks that glibc's chunk header is where the hooks read it
// (heap_block.cc); on false the runtime does not start (nothing is ever
// charged).
bool ProbeGlibcChunks();

// ---- Anonymous mappings (mmap_hooks.cc) ----

struct MapStats {
  uint64_t charged_bytes;   // bytes of mappings charged now
  uint64_t reserved_bytes;  // tracked, not charged (PROT_NONE, read-only)
  uint64_t ranges;          // table entries
  uint64_t charge_failures;
  uint64_t resident_forced;  // resident growth charged past a refusal
  bool resident_mode;        // UMEMCG_MAP_CHARGE=resident
};
MapStats GetMapStats();
// The same, with the range table's mutex already held by the caller
// (MapTableLockForFork): read together with the anon statistic, the pair
// is exact even while the resident mode's scanner runs.
MapStats GetMapStatsLocked();
// The resident mode: recounts every charged mapping's resident pages now
// (a charge was refused: released pages give their charge back first; a
// reader wants current figures: umemcg_preload_sync, the report). True
// when that lowered the mappings' charge. False at once otherwise.
bool RecountMappings();
// Fork handlers for the range table (runtime.cc registers them).
// UMEMCG_PROFILE with SIGUSR2: the signal only raises a flag; the next
// sampling decision (MaybeSample, every ~interval bytes allocated) writes
// the profile, outside the handler. Set by the handler (relaxed: a flag,
// read with an exchange).
extern std::atomic<bool> g_profile_requested;
void WriteRequestedProfile();

void MapTableLockForFork();
void MapTableUnlockAfterFork();
// In the child, after MapTableUnlockAfterFork: the resident mode's
// scanner thread is started again by the child's first hook call.
void MapForkChild();

}  // namespace umemcg::preload

#pragma GCC visibility pop

#endif  // UMEMCG_SRC_PRELOAD_PRELOAD_INTERNAL_H_

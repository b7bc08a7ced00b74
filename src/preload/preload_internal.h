// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// State shared by the preload's allocation hooks (hooks.cc) and its
// runtime (runtime.cc: controller, environment, C API). Everything here is
// hidden: only the interposed functions and the umemcg_preload_* API leave
// the shared object.
//
// Re-entrancy. The hooks run before the runtime exists, inside the
// dynamic loader, during thread exit and inside umemcg itself. They rely
// only on: glibc's __libc_* allocator entry points (no dlsym), an
// initial-exec thread-local (no __tls_get_addr allocation, no constructor),
// zero-initialized globals, and the ThreadState::in_hook guard: an
// allocation made while the thread is inside umemcg (charging, or a
// runtime call) is charged to nothing, so umemcg never re-enters itself.

#ifndef UMEMCG_SRC_PRELOAD_PRELOAD_INTERNAL_H_
#define UMEMCG_SRC_PRELOAD_PRELOAD_INTERNAL_H_

#include <sched.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "umemcg/group.h"
#include "umemcg/obj_cgroup.h"

#pragma GCC visibility push(hidden)

namespace umemcg::preload {

struct ThreadState {
  ObjCgroup* objcg;  // umemcg_preload_set_group(); null: the default
  int in_hook;       // > 0 while this thread runs umemcg code
};
extern __thread ThreadState tls_state
    __attribute__((tls_model("initial-exec")));

// Marks the calling thread as inside umemcg for its lifetime.
class HookGuard {
 public:
  HookGuard() { ++tls_state.in_hook; }
  ~HookGuard() { --tls_state.in_hook; }
  HookGuard(const HookGuard&) = delete;
  HookGuard& operator=(const HookGuard&) = delete;
};

// Set once by the runtime, after g_charge_flags (release store; the hooks'
// acquire load pairs with it). Null until the runtime is up: blocks are
// then charged to nothing.
extern std::atomic<ObjCgroup*> g_default_objcg;
extern ChargeFlags g_charge_flags;
// The statistic heap bytes are counted in (memory.stat).
inline constexpr StatItem kHeapItem = StatItem::kSlabUnreclaimable;

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

}  // namespace umemcg::preload

#pragma GCC visibility pop

#endif  // UMEMCG_SRC_PRELOAD_PRELOAD_INTERNAL_H_

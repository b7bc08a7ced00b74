// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The seam between the allocator integrations and the heap profiler
// (include/umemcg/heap_profile.h). An integration calls CountdownExpired
// with the bytes it charged to an objcg: one thread-local subtraction and a
// branch. Only when it returns true does it call SampleSlow, which decides
// (thinning for groups sampled less often than the process-wide minimum
// interval), captures the stack and records the block; a true result means
// "sampled", and the integration keeps a bit in the block's header so that
// its free calls Forget (the jemalloc arenas, without a header, decide
// first with SampleDecide, serve the block from a sampled arena whose chunk
// tag is the bit, and record it with SampleRecord). Unsampled frees never
// reach this component.

#ifndef UMEMCG_PROFILE_SAMPLER_H_
#define UMEMCG_PROFILE_SAMPLER_H_

#include <atomic>
#include <cstdint>

#include "umemcg/export.h"

namespace umemcg {
class Controller;
class Group;
class ObjCgroup;
namespace profile {

struct ThreadSampler {
  // Bytes this thread may still allocate before the next sampling point
  // of its Poisson process; below zero: the slow path decides.
  int64_t bytes_until_sample = 0;
  uint64_t rng = 0;  // xorshift state; 0 until the thread's first slow path
  int busy = 0;      // inside the slow path: nested allocations not sampled
};
// Initial-exec: one %fs-relative access on the allocation paths, no
// __tls_get_addr call (the preload's own state is initial-exec too; a
// dlopen'ed copy takes 24 bytes of the static TLS surplus).
// Exported (as SampleDecide, SampleRecord and Forget) for the shared
// libumemcg-jemalloc, whose arenas feed this profiler in libumemcg.so.
UMEMCG_EXPORT extern constinit thread_local ThreadSampler tls_sampler
    __attribute__((tls_model("initial-exec")));

// SetHeapProfilePageCharges's switch, read by the page API's hit paths:
// one relaxed load of a read-mostly line and a branch, no write. Relaxed:
// it publishes nothing else; a thread sees a change at its next page
// operation.
// Hidden: a direct %rip-relative load, no address computed first.
extern std::atomic<bool> g_page_charges __attribute__((visibility("hidden")));
[[gnu::always_inline]] inline bool PageGateClosed() {
  return __builtin_expect(!g_page_charges.load(std::memory_order_relaxed), 1);
}
// After PageGateClosed returned false: whether this page operation's bytes
// expired the thread's countdown (then the caller samples it); false when
// the switch went off meanwhile.
[[gnu::noinline]] bool PageGateSlow(uint64_t size);

// Counts `size` bytes allocated; true when the countdown expired.
[[gnu::always_inline]] inline bool CountdownExpired(uint64_t size) {
  ThreadSampler& t = tls_sampler;
  t.bytes_until_sample -= static_cast<int64_t>(size);
  return __builtin_expect(t.bytes_until_sample < 0, 0);
}

// After CountdownExpired: samples the block or not, draws the next
// countdown. `entry_return` is the return address of the allocator's entry
// point (the allocating code's call into it; __builtin_return_address(0)
// there): frames below it (the allocator's own) are cut from the stack. A
// null one keeps everything but the profiler's frames. REQUIRES: the caller
// holds a reference to `owner` (non-null).
[[gnu::noinline]] bool SampleSlow(ObjCgroup* owner, const void* block,
                                  uint64_t size, const void* entry_return);

// SampleSlow in two steps, for an integration that must know before it
// allocates whether the block is sampled (the jemalloc arenas serve a
// sampled block from a separate arena, which is how its free is told
// apart without a header). SampleDecide, after CountdownExpired, decides
// and draws the next countdown; true: the block is sampled, `*rate` is its
// group's interval, and the caller allocates the block and passes it to
// SampleRecord, which captures the stack and records it (false: out of
// table memory, not recorded). REQUIRES: as SampleSlow.
UMEMCG_EXPORT [[gnu::noinline]] bool SampleDecide(ObjCgroup* owner,
                                                  uint64_t size,
                                                  uint64_t* rate);
UMEMCG_EXPORT [[gnu::noinline]] bool SampleRecord(ObjCgroup* owner,
                                                  const void* block,
                                                  uint64_t size, uint64_t rate,
                                                  const void* entry_return);

// Page samples (Group's page API: TryCharge, Uncharge, UnchargeDirect
// without a StatItem, after CountdownExpired). A page charge has no block:
// SamplePages samples `pages` charged through `objcg`'s group into the
// objcg's queue of page samples; UnsamplePages, for an uncharge, stands
// for the uncharged bytes by the same estimator and releases the queue's
// oldest samples worth that much (see sampler.cc). REQUIRES: the caller
// holds a reference to `objcg`.
void SamplePages(ObjCgroup* objcg, uint64_t pages, const void* entry_return);
void UnsamplePages(ObjCgroup* objcg, uint64_t pages);

// A sampled block is being freed (or moved by realloc): drops its sample.
// A block not in the table (sampled before a fork) is ignored.
UMEMCG_EXPORT [[gnu::noinline]] void Forget(const void* block);

// A group or a controller is being freed: its sampling rates go.
void ForgetGroup(const Group* group);
void ForgetController(const Controller* controller);

// An objcg is being freed (Controller::FreeObjCgroup): its sites go, and
// their cumulative values move to `heir`'s sites of the same stacks (the
// objcg of the group it was reparented to; null: they are dropped), so a
// removed group's history stays in its nearest ancestor's profile.
// REQUIRES: heir stays alive until this returns.
void ForgetObjCgroup(const ObjCgroup* objcg, ObjCgroup* heir);

// Registers the profiler's one mutex with the process's fork handlers
// (port/fork.h), as an innermost participant: taken after every
// controller's locks (a reap holds its reap lock while it drops an objcg's
// sites), released before them. The child starts with an empty profile (its
// rates are kept). Controller::Create calls it first, so the handlers exist
// before any sampling point or rate can take the mutex and a fork child
// never finds it held by a thread of the parent. Idempotent.
void RegisterForFork();

}  // namespace profile
}  // namespace umemcg

#endif  // UMEMCG_PROFILE_SAMPLER_H_

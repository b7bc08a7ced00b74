// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Heap bookings that a fork() never splits. Booking a heap block takes two
// steps, its charge (umemcg's statistic, accounted_bytes) and its count
// (the hooks' live_bytes / live_blocks); freeing it, its uncharge and its
// uncount. A child forked while another thread was between the two steps
// inherited the block half booked and was off by it for life (4 to 23 of
// 200 children of a process with 8 allocating threads). Kernel
// counterpart: none (the kernel's fork copies memcg state under its own
// locks); this is the fork side of the preload's two-step bookkeeping.
//
// How. Each thread marks its booking windows in a word of its own (a slot
// of a static table, found through a thread-local pointer); the fork
// handlers read every slot ever claimed. The fork's prepare handler
// announces the fork (g_heap_fork_gate), makes the announcement and every
// thread's mark visible to each other with one membarrier(2) (so the hot
// path needs no fence), and waits for the windows then open to close. A
// booking that starts while a fork is announced never blocks (a thread
// blocked there could hold a glibc lock that fork itself takes next: the
// NSS or stdio list locks): it defers instead. Its charge and count,
// together, become one atomic 16-byte add to a per-owner entry of the
// deferred table, which every fork's parent and child apply (charged as a
// settled charge, never refused). The child's copy of the table therefore
// holds each deferred booking whole or not at all, and no booking is open
// in it.
//
// Cost on the hot path, per booked block: two reads of a thread-local
// pointer, an increment and a decrement of a word on the thread's own
// cache line and a read of a read-mostly global; no fence, no atomic
// read-modify-write, no shared cache line written
// (bench/results/preload.md has the numbers).
//
// Limits (docs/preload.md). A fork made from a signal handler that
// interrupted its own thread's booking inherits that booking half done.
// Threads beyond 1024 slots at once, and a thread's bookings after its
// pthread key destructors ran (its exit), use one shared counter (atomic
// read-modify-write) instead. Where membarrier is denied, every
// booking adds a fence. Without 16-byte compare-and-swap (not x86-64) a
// booking is never deferred, and children may be inexact as before.

#ifndef UMEMCG_SRC_PRELOAD_HEAP_FORK_H_
#define UMEMCG_SRC_PRELOAD_HEAP_FORK_H_

#include <atomic>
#include <cstdint>

#include "preload/preload_internal.h"

#pragma GCC visibility push(hidden)

namespace umemcg::preload {

// ThreadState::heap_gate.
inline constexpr int kGateNone = 0;    // no slot claimed yet
inline constexpr int kGateSlot = 1;    // marks its windows in heap_slot
inline constexpr int kGateShared = 2;  // no slot: the shared counter

// A thread's window mark, on a cache line of its own. Slots are never
// freed (a fork handler may read one while its thread exits); a thread
// claims one at its first booking and gives it back at its exit.
struct alignas(64) HeapSlot {
  uint32_t busy = 0;               // open windows; written by its thread
  std::atomic<bool> taken{false};  // claimed by a thread
};

// Bit 0: every booking fences (membarrier failed). Bit 1: a fork handler
// waits for open windows. Bits 2+: forks being prepared or run, times 4.
// Written only by fork handlers.
extern std::atomic<uint32_t> g_heap_fork_gate;
inline constexpr uint32_t kGateFenceEach = 1;
inline constexpr uint32_t kGateWaiting = 2;
inline constexpr uint32_t kGateForkOne = 4;

bool HeapBookBeginSlow();
void HeapBookEndSlow();
bool HeapBookAnnounced(uint32_t gate);

// Opens this thread's booking window; true when a fork is announced and
// the booking must be deferred (HeapDefer) instead of made: no window is
// then open (a deferred booking is one atomic step, and the fork handler
// must not wait for a stream of them), and HeapBookEnd is not called.
inline bool HeapBookBegin() {
  // Non-null exactly when heap_gate is kGateSlot (one load for both).
  HeapSlot* slot = tls_state.heap_slot;
  if (__builtin_expect(slot == nullptr, 0)) return HeapBookBeginSlow();
  // Relaxed, and no fence: the fork handler's membarrier orders this
  // store before its read of it, or the gate's store before our load.
  __atomic_store_n(&slot->busy, slot->busy + 1, __ATOMIC_RELAXED);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  // Relaxed: see above.
  const uint32_t gate = g_heap_fork_gate.load(std::memory_order_relaxed);
  if (__builtin_expect(gate != 0, 0)) return HeapBookAnnounced(gate);
  return false;
}

// Closes the window a HeapBookBegin that returned false opened.
inline void HeapBookEnd() {
  HeapSlot* slot = tls_state.heap_slot;
  if (__builtin_expect(slot == nullptr, 0)) return HeapBookEndSlow();
  // Release: the booking's stores are visible to the fork handler that
  // reads the window closed (and so to the child it forks).
  __atomic_store_n(&slot->busy, slot->busy - 1, __ATOMIC_RELEASE);
}

// Books `bytes` and `blocks` (negative: unbooks) for `owner` in the
// deferred table; applied by the fork's handlers (or right here, in a
// window of its own, when the fork ended meanwhile). Call when
// HeapBookBegin said to defer.
void HeapDefer(ObjCgroup* owner, int64_t bytes, int64_t blocks);

// A booking window for the scope; deferred() says whether to defer.
class HeapBooking {
 public:
  HeapBooking() : deferred_(HeapBookBegin()) {}
  ~HeapBooking() {
    if (!deferred_) HeapBookEnd();
  }
  HeapBooking(const HeapBooking&) = delete;
  HeapBooking& operator=(const HeapBooking&) = delete;
  bool deferred() const { return deferred_; }

 private:
  const bool deferred_;
};

// The charge and count a deferred booking stands for (heap_block.cc).
void ApplyHeapBooking(ObjCgroup* owner, int64_t bytes, int64_t blocks);

// Start-up (runtime.cc, before the hooks charge) and the fork handlers.
void InitHeapFork();
void HeapForkPrepare();
void HeapForkParent();
void HeapForkChild();

}  // namespace umemcg::preload

#pragma GCC visibility pop

#endif  // UMEMCG_SRC_PRELOAD_HEAP_FORK_H_

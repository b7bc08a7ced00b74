// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The fork side of heap bookings: the threads' slots, the fork handlers'
// announcement and wait, and the deferred table. heap_fork.h says why.

#include "preload/heap_fork.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

namespace umemcg::preload {

// On a line of its own: read by every booking, written only by fork
// handlers.
alignas(64) std::atomic<uint32_t> g_heap_fork_gate{0};

namespace {

// ---- The slots ----

constexpr int kSlots = 1024;
// constinit: zero pages until used (a dynamic initializer would touch
// 64 KiB in every process at start-up).
constinit HeapSlot g_slots[kSlots];
// One past the highest slot ever claimed: fork handlers read no further
// (relaxed: raised before the claimer's first window, which the fork
// handler's membarrier or the claim's own fence orders).
std::atomic<int> g_slots_used{0};
// Windows of threads without a slot (kGateShared). seq_cst on both sides.
// Its own line: written by those threads, apart from the gate.
alignas(64) std::atomic<int64_t> g_shared_busy{0};
pthread_key_t g_exit_key;
bool g_have_exit_key = false;
// Whether FenceAll may use membarrier: registered at the first fork, not
// at start-up (the registration is paid by forking programs only).
// Relaxed: only fork handlers use it.
enum class Fence : uint8_t { kUnknown, kMembarrier, kDenied };
std::atomic<Fence> g_fence{Fence::kUnknown};

// The thread's key destructor (its exit): its slot is given back; later
// bookings of the thread (glibc frees after key destructors) use the
// shared counter.
void ThreadExit(void*) {
  ThreadState& t = tls_state;
  if (t.heap_gate != kGateSlot) return;
  t.heap_gate = kGateShared;
  // A window left open by a thread cancelled inside one (a cancellation
  // point in a blocking charge) must not hold every later fork up.
  // Release: ordered before the slot's next owner claims it.
  __atomic_store_n(&t.heap_slot->busy, 0, __ATOMIC_RELEASE);
  t.heap_slot->taken.store(false, std::memory_order_release);
  t.heap_slot = nullptr;
}

void Claim(ThreadState& t) {
  HookGuard guard;  // pthread_setspecific may allocate
  t.heap_gate = kGateShared;
  for (int i = 0; i < kSlots; ++i) {
    HeapSlot& slot = g_slots[i];
    // Relaxed first look; acquire on the claim (pairs with ThreadExit).
    if (slot.taken.load(std::memory_order_relaxed)) continue;
    bool expected = false;
    if (slot.taken.compare_exchange_strong(expected, true,
                                           std::memory_order_acquire)) {
      // seq_cst: raised before this thread's first window opens.
      int used = g_slots_used.load(std::memory_order_relaxed);
      while (used <= i && !g_slots_used.compare_exchange_weak(
                              used, i + 1, std::memory_order_seq_cst)) {
      }
      t.heap_slot = &slot;
      t.heap_gate = kGateSlot;
      break;
    }
  }
  // Without the key (or if it cannot be set) the slot is kept for good
  // after the thread ends: harmless, its window stays closed.
  if (t.heap_gate == kGateSlot && g_have_exit_key) {
    (void)pthread_setspecific(g_exit_key, reinterpret_cast<void*>(1));
  }
}

// ---- Fences ----

long Membarrier(int cmd) { return syscall(__NR_membarrier, cmd, 0, 0); }

// A full barrier on every CPU a thread of this process may run on: this
// thread runs there once (whatever ran there was switched out, a full
// barrier). Where even that is denied, a grace period.
void VisitEveryCpu() {
  cpu_set_t original;
  if (sched_getaffinity(0, sizeof(original), &original) == 0) {
    bool all = true;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &original)) continue;
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      if (sched_setaffinity(0, sizeof(one), &one) != 0 && errno != EINVAL) {
        all = false;
      }
    }
    (void)sched_setaffinity(0, sizeof(original), &original);
    if (all) return;
  }
  timespec t{0, 50 * 1000 * 1000};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

// Makes every thread's window mark visible here, and the gate's change
// visible to every booking that starts after (the asymmetric half of
// HeapBookBegin's store-then-load; see heap_fork.h).
void FenceAll() {
  if (g_fence.load(std::memory_order_relaxed) == Fence::kUnknown) {
    const long cmds = Membarrier(MEMBARRIER_CMD_QUERY);
    const bool ok = cmds >= 0 &&
                    (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
                    Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
    g_fence.store(ok ? Fence::kMembarrier : Fence::kDenied,
                  std::memory_order_relaxed);
  }
  if (g_fence.load(std::memory_order_relaxed) == Fence::kMembarrier) {
    bool again = false;
    for (;;) {
      if (Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
      if (errno == EINTR || errno == EAGAIN) continue;
      // EPERM: not registered (a fork child on a kernel whose children do
      // not inherit the registration); registering is idempotent.
      if (errno == EPERM && !again) {
        again = true;
        if (Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0) {
          continue;
        }
      }
      break;
    }
    g_fence.store(Fence::kDenied, std::memory_order_relaxed);
  }
  // Denied (at the first fork, or for good since): from now on every
  // booking fences itself; those that read the gate before this store are
  // fenced by the visits (needed only the first time: after it, both
  // sides fence).
  const uint32_t before =
      g_heap_fork_gate.fetch_or(kGateFenceEach, std::memory_order_seq_cst);
  if ((before & kGateFenceEach) == 0) VisitEveryCpu();
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

bool Announced(uint32_t gate) { return gate >= kGateForkOne; }

// A booking deferred while a fork handler waits for open windows gives
// its CPU away once: a thread preempted inside a window then runs (and
// closes it) sooner than behind every thread that keeps allocating (8
// allocating threads on 2 CPUs: 200 forks took 7.2 s, 3.2 s without
// the wait).
void YieldIfWaited(uint32_t gate) {
  if ((gate & kGateWaiting) != 0) sched_yield();
}

// Waits until every window open in another thread closes; this thread's
// own (a fork from a signal handler inside a booking) is not waited for.
void WaitForWindows() {
  const ThreadState& self = tls_state;
  int round = 0;
  // A window closes within a booking's time unless its thread was
  // preempted inside it: then this thread's CPU is worth more to it than
  // a spin (a short sleep after a few yields).
  auto pause = [&round] {
    if (++round <= 8) {
      sched_yield();
    } else {
      timespec t{0, 20 * 1000};
      nanosleep(&t, nullptr);
    }
  };
  const int used = g_slots_used.load(std::memory_order_relaxed);
  for (int i = 0; i < used; ++i) {
    HeapSlot& slot = g_slots[i];
    if (&slot == self.heap_slot) continue;
    // Acquire: the booking's stores are visible once its window closed.
    while (__atomic_load_n(&slot.busy, __ATOMIC_ACQUIRE) != 0) pause();
  }
  const int64_t own = self.heap_gate == kGateShared ? self.heap_busy : 0;
  while (g_shared_busy.load(std::memory_order_seq_cst) > own) pause();
}

// ---- The deferred table ----
//
// One 16-byte entry per owner (an objcg the preload pins for the
// process's life; at most kMaxAssignedGroups + 1 of them), claimed for
// good: bytes and blocks added with one 16-byte compare-and-swap, so a
// child's copy holds each deferred booking whole or not at all.

#if defined(__x86_64__)
constexpr bool kCanDefer = true;

struct alignas(16) Pair {
  int64_t bytes = 0;
  int64_t blocks = 0;
};

struct Entry {
  std::atomic<ObjCgroup*> owner{nullptr};
  Pair sum;  // only through Cas16 (or plain reads in a fork child)
};
constexpr int kEntries = 512;
constinit Entry g_entries[kEntries];  // zero pages until used

// lock cmpxchg16b: if *p == expected, *p = desired; else expected = *p.
bool Cas16(Pair* p, Pair& expected, Pair desired) {
  bool ok;
  asm volatile("lock cmpxchg16b %1"
               : "=@ccz"(ok), "+m"(*p), "+a"(expected.bytes),
                 "+d"(expected.blocks)
               : "b"(desired.bytes), "c"(desired.blocks)
               : "memory");
  return ok;
}

// A first guess at an entry's sum for the swap, which checks it (a torn
// read only costs a retry).
Pair Peek(const Pair& p) {
  return Pair{__atomic_load_n(&p.bytes, __ATOMIC_RELAXED),
              __atomic_load_n(&p.blocks, __ATOMIC_RELAXED)};
}

Entry* EntryFor(ObjCgroup* owner) {
  const auto h =
      (reinterpret_cast<uintptr_t>(owner) >> 6) * 0x9e3779b97f4a7c15ull;
  for (int n = 0; n < kEntries; ++n) {
    Entry& e = g_entries[((h >> 55) + n) & (kEntries - 1)];
    // Acquire/release: a claimed entry's owner is read before its sum.
    ObjCgroup* cur = e.owner.load(std::memory_order_acquire);
    if (cur == nullptr && e.owner.compare_exchange_strong(
                              cur, owner, std::memory_order_acq_rel)) {
      return &e;
    }
    if (cur == owner) return &e;
  }
  return nullptr;
}

// Takes what the table holds and applies it. Entries are taken whole (a
// compare-and-swap to zero), so a booking added meanwhile is applied by
// whoever takes it next.
void ApplyDeferred() {
  for (Entry& e : g_entries) {
    ObjCgroup* owner = e.owner.load(std::memory_order_acquire);
    if (owner == nullptr) continue;
    Pair seen = Peek(e.sum);
    while (seen.bytes != 0 || seen.blocks != 0) {
      if (Cas16(&e.sum, seen, Pair{0, 0})) {
        ApplyHeapBooking(owner, seen.bytes, seen.blocks);
        break;
      }
    }
  }
}
#else
constexpr bool kCanDefer = false;
void ApplyDeferred() {}
#endif

}  // namespace

// ---- The booking window's slow paths ----

bool HeapBookAnnounced(uint32_t gate) {
  if ((gate & kGateFenceEach) != 0) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    gate = g_heap_fork_gate.load(std::memory_order_relaxed);
  }
  if (!kCanDefer || !Announced(gate)) return false;
  // Deferred: the window closes at once (nothing was booked in it).
  HeapSlot* slot = tls_state.heap_slot;
  __atomic_store_n(&slot->busy, slot->busy - 1, __ATOMIC_RELEASE);
  YieldIfWaited(gate);
  return true;
}

bool HeapBookBeginSlow() {
  ThreadState& t = tls_state;
  if (t.heap_gate == kGateNone) {
    Claim(t);
    if (t.heap_gate == kGateSlot) return HeapBookBegin();
  }
  ++t.heap_busy;  // this thread's own share of the shared counter
  // seq_cst: a full fence between the mark and the gate's load.
  g_shared_busy.fetch_add(1, std::memory_order_seq_cst);
  const uint32_t gate = g_heap_fork_gate.load(std::memory_order_seq_cst);
  if (!kCanDefer || !Announced(gate)) return false;
  HeapBookEndSlow();  // deferred: no window stays open
  YieldIfWaited(gate);
  return true;
}

void HeapBookEndSlow() {
  --tls_state.heap_busy;
  // Release: the booking's stores before the window reads closed.
  g_shared_busy.fetch_sub(1, std::memory_order_release);
}

void HeapDefer(ObjCgroup* owner, int64_t bytes, int64_t blocks) {
#if defined(__x86_64__)
  Entry* e = EntryFor(owner);
  if (e == nullptr) return ApplyHeapBooking(owner, bytes, blocks);  // full
  Pair seen = Peek(e->sum);
  while (
      !Cas16(&e->sum, seen, Pair{seen.bytes + bytes, seen.blocks + blocks})) {
  }
  // The fork ended meanwhile (its parent handler may have applied the
  // table before this booking reached it): apply it now, in a window of
  // its own (a fork announced meanwhile leaves it to that fork's
  // handlers). seq_cst, against the handler's decrement then apply: one
  // of the two applies it.
  if (!Announced(g_heap_fork_gate.load(std::memory_order_seq_cst))) {
    HeapBooking window;
    if (!window.deferred()) ApplyDeferred();
  }
#else
  ApplyHeapBooking(owner, bytes, blocks);
#endif
}

// ---- Start-up and the fork handlers ----

void InitHeapFork() {
  g_have_exit_key = pthread_key_create(&g_exit_key, ThreadExit) == 0;
}

void HeapForkPrepare() {
  g_heap_fork_gate.fetch_add(kGateForkOne, std::memory_order_seq_cst);
  g_heap_fork_gate.fetch_or(kGateWaiting, std::memory_order_seq_cst);
  FenceAll();
  WaitForWindows();
  // Relaxed: a hint only. Another fork's handler waiting meanwhile set
  // it too; it is cleared early then, which only costs that wait time.
  g_heap_fork_gate.fetch_and(~kGateWaiting, std::memory_order_relaxed);
}

void HeapForkParent() {
  g_heap_fork_gate.fetch_sub(kGateForkOne, std::memory_order_seq_cst);
  // Inside a window of its own: a fork another thread announces meanwhile
  // waits until the table's bookings are applied (or, deferred, leaves
  // them to that fork's handlers).
  HeapBooking window;
  if (!window.deferred()) ApplyDeferred();
}

void HeapForkChild() {
  // This thread is the only one: the others' windows and slots are gone,
  // and no fork is being prepared here.
  const ThreadState& self = tls_state;
  const int used = g_slots_used.load(std::memory_order_relaxed);
  for (int i = 0; i < used; ++i) {
    HeapSlot& slot = g_slots[i];
    if (&slot == self.heap_slot) continue;
    if (slot.busy != 0) slot.busy = 0;
    if (slot.taken.load(std::memory_order_relaxed)) {
      slot.taken.store(false, std::memory_order_relaxed);
    }
  }
  g_shared_busy.store(self.heap_gate == kGateShared ? self.heap_busy : 0,
                      std::memory_order_relaxed);
  g_heap_fork_gate.fetch_and(kGateFenceEach, std::memory_order_relaxed);
  ApplyDeferred();
}

}  // namespace umemcg::preload

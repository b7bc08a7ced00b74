// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Restartable sequences (rseq) for per-CPU data without atomic RMW
// (kernel: the per-CPU operations that run with preemption disabled; user
// space gets the same guarantee from rseq(2): a critical section that is
// preempted, migrated or interrupted by a signal before its final store is
// restarted at an abort handler, so that store is the commit).
//
// RseqCompareStore: on CPU `cpu`, if the byte `*lock` is zero, `*owner ==
// expected_owner` and `*word == expected`, store `desired` into `*word`,
// as one uninterruptible step with respect to every other thread on that
// CPU. It costs a store to the thread's rseq area, a few loads and
// compares, and a plain store: no lock prefix. RseqPerCpuAdd and
// RseqEpochAdd: the same shape with a non-locked `add` to memory as the
// commit, guarded by words compared with an epoch (the statistics'
// per-CPU add, kernel: this_cpu_add).
//
// Mutual exclusion with threads on other CPUs is the caller's protocol:
// data touched by the primitive on CPU k may be changed by other code only
// while holding the lock whose byte the primitive checks, and only after
// RseqExclude(k) (or while running on k): that makes sure no critical
// section that saw the lock free is still in flight on k.
//
// Fallback contract (every rseq user inherits it). RseqExclude fences with
// membarrier(2). If a fence fails for good at any time (a seccomp filter
// installed after start-up denies membarrier, a kernel that refuses it),
// RseqExclude neither fails nor aborts. It closes the lock its caller
// holds to rseq commits for good (TryLock::CloseForRseq sets a second bit
// in the very byte every critical section checks for zero), then makes
// sure no section that passed that check before is still in flight on the
// lock's CPU: it runs the calling thread on that CPU once
// (sched_setaffinity; a section cannot survive its CPU running another
// thread, preemption restarts it). From then on every commit guarded by
// that lock fails, its users take their locked paths, and later holders
// need no fence (RseqExclude returns at once for a closed lock). So each
// shard switches to its locked paths for good the first time a remote
// holder cannot fence it; no hot-path instruction is added for this.
// A CPU the thread may not run on (outside the process's cpuset, or
// offline) runs no thread of this process either. If changing the
// affinity is denied too, RseqExclude waits kRseqGraceMs instead: a
// section is a few instructions run without preemption, so only a stall
// the kernel cannot see (a hypervisor descheduling the virtual CPU inside
// those instructions for longer than that) could outlast it (see
// docs/design.md). Controllers created after a fence failed do not use
// rseq commits at all (RseqCommitAvailable() is false).
//
// Any new rseq user inherits this by checking its TryLock's byte for zero
// inside its critical section and fencing through RseqExclude with that
// lock held (TryLockShard / LockShard below).
//
// Available on x86-64 with glibc's rseq registration and membarrier(2)
// RSEQ fences (Linux 5.10+). Never under ThreadSanitizer, which cannot see
// the assembly's accesses (the callers then take their locked paths).
//
// Thread safety: every function is safe from any thread.

#ifndef UMEMCG_SRC_PORT_RSEQ_H_
#define UMEMCG_SRC_PORT_RSEQ_H_

#include <cstddef>
#include <cstdint>

#include "port/cpu.h"
#include "port/try_lock.h"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UMEMCG_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define UMEMCG_TSAN 1
#endif

#if UMEMCG_HAVE_RSEQ && defined(__x86_64__) && !defined(UMEMCG_TSAN)
#define UMEMCG_HAVE_RSEQ_COMMIT 1
#else
#define UMEMCG_HAVE_RSEQ_COMMIT 0
#endif

namespace umemcg::internal {

enum class RseqResult : uint8_t {
  kCommitted,  // the store was done
  kMismatch,   // a compare failed (lock held, owner or word changed)
  kAborted,    // not on `cpu`, or restarted (preempted, migrated, signal)
};

// True when RseqCompareStore and RseqExclude work in this process: built
// for it, rseq registered by glibc for this thread, membarrier's RSEQ
// fence registered (done once, on the first call), and no fence failed
// since (see the fallback contract above).
bool RseqCommitAvailable();

// RseqExclude's wait when the calling thread cannot run on the CPU.
inline constexpr int kRseqGraceMs = 50;
// True once a fence failed for good in this process (tests).
bool RseqFenceFailed();
// Records that a fence failed for good (RseqCommitAvailable() is false
// from then on), for rseq users that fence by other means (port/srcu.h).
void RseqMarkFenceFailed();
// The fence by other means: after this returns, no critical section that
// was in flight on `cpu` when it was called is still in flight, and the
// CPU ran a full barrier (a context switch). Runs the calling thread on
// `cpu` once (sched_setaffinity); a CPU outside the process's cpuset runs
// none of its threads; if changing the affinity is denied, waits
// kRseqGraceMs (see the fallback contract above). Slow: fallback only.
void RseqVisitCpu(uint32_t cpu);

#if UMEMCG_HAVE_RSEQ_COMMIT
// glibc's __rseq_offset, copied into a variable of ours (one load fewer on
// the hit path: no GOT indirection). Each copy of libumemcg in a process
// has its own, set when that copy is loaded (a constructor in rseq.cc), so
// that a copy running sequences on a controller another copy created
// stores into the right area.
extern ptrdiff_t rseq_area_offset __attribute__((visibility("hidden")));
#endif

// The CPU this thread runs on now (rseq cpu_id). REQUIRES: rseq registered.
inline uint32_t RseqCpuId() {
#if UMEMCG_HAVE_RSEQ_COMMIT
  // One %fs-relative load (not thread pointer + add + load). Volatile: the
  // kernel rewrites the field whenever the thread moves (a relaxed atomic
  // load, in effect).
  uint32_t cpu;
  asm volatile("movl %%fs:4(%1), %0" : "=r"(cpu) : "r"(rseq_area_offset));
  static_assert(offsetof(struct rseq, cpu_id) == 4);
  return cpu;
#elif UMEMCG_HAVE_RSEQ
  const auto* area = reinterpret_cast<const struct rseq*>(
      static_cast<const char*>(__builtin_thread_pointer()) + __rseq_offset);
  // Relaxed: the kernel's store is like a signal handler's for this thread.
  return __atomic_load_n(&area->cpu_id, __ATOMIC_RELAXED);
#else
  return 0;
#endif
}

#if UMEMCG_HAVE_RSEQ_COMMIT
// See the file comment. REQUIRES: RseqCommitAvailable().
inline RseqResult RseqCompareStore(uint32_t cpu, const void* lock,
                                   const void* owner,
                                   const void* expected_owner, uint64_t* word,
                                   uint64_t expected, uint64_t desired) {
  auto* area = reinterpret_cast<struct rseq*>(
      static_cast<char*>(__builtin_thread_pointer()) + rseq_area_offset);
  // The descriptor (start, length of the section up to and including the
  // commit, abort handler) lives in a writable data section so that a
  // shared library gets ordinary relocations for it. Every section pushed
  // here carries the '?' flag: it joins the enclosing function's COMDAT
  // group, if any, so that when the linker keeps another translation unit's
  // out-of-line copy of an inline function it drops this copy's descriptor
  // and abort handler with it (without the flag they would point into a
  // discarded section and the link fails). The abort handler is
  // preceded by the signature glibc registered (RSEQ_SIG), embedded in a
  // ud1 instruction as the kernel's selftests do, so it never executes.
  asm goto(
      ".pushsection __rseq_cs, \"aw?\"\n\t"
      ".balign 32\n\t"
      "3:\n\t"
      ".long 0x0, 0x0\n\t"
      ".quad 1f, (2f - 1f), 4f\n\t"
      ".popsection\n\t"
      "leaq 3b(%%rip), %%rax\n\t"
      "movq %%rax, %[rseq_cs]\n\t"
      "1:\n\t"
      "cmpl %[cpu], %[cpu_id]\n\t"
      "jnz %l[aborted]\n\t"
      "cmpb $0, %[lock]\n\t"
      "jnz %l[mismatch]\n\t"
      "cmpq %[expected_owner], %[owner]\n\t"
      "jnz %l[mismatch]\n\t"
      "cmpq %[expected], %[word]\n\t"
      "jnz %l[mismatch]\n\t"
      "movq %[desired], %[word]\n\t"
      "2:\n\t"
      ".pushsection __rseq_failure, \"ax?\"\n\t"
      ".byte 0x0f, 0xb9, 0x3d\n\t"
      ".long 0x53053053\n\t"  // RSEQ_SIG (x86), checked by a static_assert
      "4:\n\t"
      "jmp %l[aborted]\n\t"
      ".popsection\n\t"
      :
      : [rseq_cs] "m"(area->rseq_cs), [cpu_id] "m"(area->cpu_id),
        [cpu] "r"(cpu), [lock] "m"(*static_cast<const uint8_t*>(lock)),
        [owner] "m"(*static_cast<const uint64_t*>(owner)),
        [expected_owner] "r"(reinterpret_cast<uint64_t>(expected_owner)),
        [word] "m"(*word), [expected] "r"(expected), [desired] "r"(desired)
      : "memory", "cc", "rax"
      : aborted, mismatch);
  return RseqResult::kCommitted;
aborted:
  return RseqResult::kAborted;
mismatch:
  return RseqResult::kMismatch;
}
#endif

// The outcome of RseqEpochAdd.
enum class RseqAddResult : uint8_t {
  kAddedFirst,   // added; *first matched the epoch
  kAddedSecond,  // added; *first did not, *second did
  kMismatch,     // the lock was held or neither guard matched
  kAborted,      // not on `cpu`, or restarted (preempted, migrated, signal)
};

#if UMEMCG_HAVE_RSEQ_COMMIT
// The per-CPU add (kernel: this_cpu_add, one non-locked instruction with
// preemption off), for the hot path of a per-CPU statistic. In one
// sequence on the CPU `cpu` this thread runs on: the block
// `p = table[cpu]` (cpu < limit, p non-null), its shard
// `s = *(p + kShard)`; if the lock byte `*(s + kLock)` is zero and the
// guard `*(p + kGuard)` equals the epoch `*(s + kEpoch)`, add `delta` to
// the 64-bit word `index` of the array at `p + kWords` with one `add`
// instruction, which is the commit. The guard and the epoch are words
// that only holders of the shard's lock change (after RseqExclude), so a
// commit means they held at the add. Reading the CPU inside the sequence
// saves comparing it with one read before. False when anything did not
// hold or the sequence was restarted (the caller's slower path decides).
// REQUIRES: RseqCommitAvailable().
template <size_t kShard, size_t kLock, size_t kEpoch, size_t kGuard,
          size_t kWords>
inline bool RseqPerCpuAdd(const void* const* table, uint32_t limit,
                          size_t index, int64_t delta) {
  auto* area = reinterpret_cast<struct rseq*>(
      static_cast<char*>(__builtin_thread_pointer()) + rseq_area_offset);
  asm goto(
      ".pushsection __rseq_cs, \"aw?\"\n\t"
      ".balign 32\n\t"
      "3:\n\t"
      ".long 0x0, 0x0\n\t"
      ".quad 1f, (2f - 1f), 4f\n\t"
      ".popsection\n\t"
      "leaq 3b(%%rip), %%rax\n\t"
      "movq %%rax, %[rseq_cs]\n\t"
      "1:\n\t"
      "movl %[cpu_id], %%eax\n\t"
      "cmpl %[limit], %%eax\n\t"
      "jae %l[failed]\n\t"
      "movq (%[table], %%rax, 8), %%rcx\n\t"
      "testq %%rcx, %%rcx\n\t"
      "jz %l[failed]\n\t"
      "movq %c[shard](%%rcx), %%rax\n\t"
      "cmpb $0, %c[lock](%%rax)\n\t"
      "jnz %l[failed]\n\t"
      "movq %c[epoch](%%rax), %%rax\n\t"
      "cmpq %%rax, %c[guard](%%rcx)\n\t"
      "jnz %l[failed]\n\t"
      "addq %[delta], %c[words](%%rcx, %[index], 8)\n\t"
      "2:\n\t"
      ".pushsection __rseq_failure, \"ax?\"\n\t"
      ".byte 0x0f, 0xb9, 0x3d\n\t"
      ".long 0x53053053\n\t"  // RSEQ_SIG (x86), checked in rseq.cc
      "4:\n\t"
      "jmp %l[failed]\n\t"
      ".popsection\n\t"
      :
      : [rseq_cs] "m"(area->rseq_cs), [cpu_id] "m"(area->cpu_id),
        [limit] "rm"(limit), [table] "r"(table), [index] "r"(index),
        [delta] "r"(delta), [shard] "i"(kShard), [lock] "i"(kLock),
        [epoch] "i"(kEpoch), [guard] "i"(kGuard), [words] "i"(kWords)
      : "memory", "cc", "rax", "rcx"
      : failed);
  return true;
failed:
  return false;
}

// The same add for a block the caller found (`word` in it), with two
// guards: if the byte `*lock` is zero and `*first` or else `*second`
// equals `*epoch`, on CPU `cpu`, add `delta` to `*word`; say which guard
// held.
inline RseqAddResult RseqEpochAdd(uint32_t cpu, const void* lock,
                                  const uint64_t* first, const uint64_t* second,
                                  const uint64_t* epoch, int64_t* word,
                                  int64_t delta) {
  auto* area = reinterpret_cast<struct rseq*>(
      static_cast<char*>(__builtin_thread_pointer()) + rseq_area_offset);
  // %ecx says which guard matched; it is read after the commit (outside
  // the section, so a restart never sees it half-set).
  asm goto(
      ".pushsection __rseq_cs, \"aw?\"\n\t"
      ".balign 32\n\t"
      "3:\n\t"
      ".long 0x0, 0x0\n\t"
      ".quad 1f, (2f - 1f), 4f\n\t"
      ".popsection\n\t"
      "leaq 3b(%%rip), %%rax\n\t"
      "movq %%rax, %[rseq_cs]\n\t"
      "1:\n\t"
      "cmpl %[cpu], %[cpu_id]\n\t"
      "jnz %l[aborted]\n\t"
      "cmpb $0, %[lock]\n\t"
      "jnz %l[mismatch]\n\t"
      "xorl %%ecx, %%ecx\n\t"
      "movq %[epoch], %%rax\n\t"
      "cmpq %%rax, %[first]\n\t"
      "je 5f\n\t"
      "incl %%ecx\n\t"
      "cmpq %%rax, %[second]\n\t"
      "jnz %l[mismatch]\n\t"
      "5:\n\t"
      "addq %[delta], %[word]\n\t"
      "2:\n\t"
      "testl %%ecx, %%ecx\n\t"
      "jnz %l[added_second]\n\t"
      ".pushsection __rseq_failure, \"ax?\"\n\t"
      ".byte 0x0f, 0xb9, 0x3d\n\t"
      ".long 0x53053053\n\t"  // RSEQ_SIG (x86), checked in rseq.cc
      "4:\n\t"
      "jmp %l[aborted]\n\t"
      ".popsection\n\t"
      :
      : [rseq_cs] "m"(area->rseq_cs), [cpu_id] "m"(area->cpu_id),
        [cpu] "r"(cpu), [lock] "m"(*static_cast<const uint8_t*>(lock)),
        [first] "m"(*first), [second] "m"(*second), [epoch] "m"(*epoch),
        [word] "m"(*word), [delta] "r"(delta)
      : "memory", "cc", "rax", "rcx"
      : aborted, mismatch, added_second);
  return RseqAddResult::kAddedFirst;
added_second:
  return RseqAddResult::kAddedSecond;
aborted:
  return RseqAddResult::kAborted;
mismatch:
  return RseqAddResult::kMismatch;
}
#endif

// Waits until no rseq critical section of this process that started
// before the call and checks `held` is still in flight on CPU `cpu`
// (membarrier(2) MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ with
// MEMBARRIER_CMD_FLAG_CPU; the kernel restarts such a section). Costs a
// system call and at most one inter-processor interrupt. A no-op when the
// calling thread runs on `cpu` or `held` is closed to rseq. When the fence
// fails for good, closes `held` instead (see the fallback contract above);
// never fails, never aborts. REQUIRES: the caller holds `held`, the lock
// its sections on `cpu` check; RseqCommitAvailable() was true once.
void RseqExclude(uint32_t cpu, TryLock& held);

// The locked paths of a per-CPU structure whose hits commit through rseq:
// the shard's TryLock, then (when `fenced`) RseqExclude of its CPU, so no
// commit that saw the lock free is still in flight. Shard k is CPU k
// (CpuIdSource::identity()). TryLockShard: -1 when the lock is busy.
template <typename Shards>
int TryLockShard(Shards& shards, int k, bool fenced) {
  if (!shards[k].lock.try_lock()) return -1;
  if (fenced) RseqExclude(static_cast<uint32_t>(k), shards[k].lock);
  return k;
}
template <typename Shards>
void LockShard(Shards& shards, int k, bool fenced) {
  shards[k].lock.lock();
  if (fenced) RseqExclude(static_cast<uint32_t>(k), shards[k].lock);
}

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_PORT_RSEQ_H_

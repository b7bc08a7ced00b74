// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "rseq_floor.h"

#include <unistd.h>

#include <cstddef>

#if __has_include(<sys/rseq.h>) && defined(__x86_64__)
#include <sys/rseq.h>
#define UMEMCG_BENCH_RSEQ_FLOOR 1
#else
#define UMEMCG_BENCH_RSEQ_FLOOR 0
#endif

namespace umemcg::bench {

RseqFloor::RseqFloor() {
  const long cpus = sysconf(_SC_NPROCESSORS_CONF);
  nr_ = cpus > 0 ? static_cast<uint32_t>(cpus) : 1;
  counters_.reset(new FloorCounter[nr_]);
#if UMEMCG_BENCH_RSEQ_FLOOR
  // glibc 2.35+ registers every thread's rseq area unless told not to.
  available_ = __rseq_size > 0;
#endif
}

// The same protocol as the library's sequences (src/port/rseq.h): the
// descriptor in a writable section, the abort handler preceded by glibc's
// x86 RSEQ_SIG inside a ud1.
__attribute__((noinline)) bool RseqFloor::Add(int64_t delta) {
#if UMEMCG_BENCH_RSEQ_FLOOR
  if (!available_) return false;
  asm goto(
      ".pushsection __rseq_cs, \"aw?\"\n\t"
      ".balign 32\n\t"
      "3:\n\t"
      ".long 0x0, 0x0\n\t"
      ".quad 1f, (2f - 1f), 4f\n\t"
      ".popsection\n\t"
      "leaq 3b(%%rip), %%rcx\n\t"
      "movq %%rcx, %%fs:8(%[off])\n\t"  // rseq_cs: the sequence starts
      "1:\n\t"
      "movl %%fs:4(%[off]), %%eax\n\t"  // cpu_id
      "cmpl %[nr], %%eax\n\t"
      "jae %l[fail]\n\t"
      "shlq $6, %%rax\n\t"  // x sizeof(FloorCounter)
      "movq (%[base],%%rax), %%rcx\n\t"
      "addq %[delta], %%rcx\n\t"
      "movq %%rcx, (%[base],%%rax)\n\t"  // the commit
      "2:\n\t"
      ".pushsection __rseq_failure, \"ax?\"\n\t"
      ".byte 0x0f, 0xb9, 0x3d\n\t"
      ".long 0x53053053\n\t"
      "4:\n\t"
      "jmp %l[fail]\n\t"
      ".popsection\n\t"
      :
      : [off] "r"(__rseq_offset), [nr] "r"(nr_), [base] "r"(counters_.get()),
        [delta] "r"(delta)
      : "memory", "cc", "rax", "rcx"
      : fail);
  return true;
fail:
#else
  (void)delta;
#endif
  return false;
}

__attribute__((noinline)) bool RseqFloor::Pair() {
  if (!Add(1)) return false;
  return Add(-1);
}

int64_t RseqFloor::Sum() const {
  int64_t sum = 0;
  for (uint32_t i = 0; i < nr_; ++i) {
    // Relaxed: read at quiescence.
    sum += counters_[i].value.load(std::memory_order_relaxed);
  }
  return sum;
}

}  // namespace umemcg::bench

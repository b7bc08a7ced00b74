// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// CpuIdSource: maps "the CPU the calling thread is on now" to a shard index
// in [0, nr_shards). See include/umemcg/cpu.h for the sources.
//
// Shard mapping: possible CPU ids (from /sys/devices/system/cpu/possible,
// which may be sparse, e.g. "0,2-5") are numbered densely in order. Ids
// below dense_limit_ map to themselves (the common, dense case costs one
// compare); others go through a table; ids beyond the table (a smaller
// nr_cpus setting, or an unexpected id) wrap modulo nr_shards.
//
// Thread safety: immutable after Create(); CurrentShard() is safe from any
// thread.

#ifndef UMEMCG_SRC_PORT_CPU_H_
#define UMEMCG_SRC_PORT_CPU_H_

#include <sched.h>

#include <cstdint>
#include <string>
#include <vector>

#include "umemcg/cpu.h"
#include "umemcg/status.h"

#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#define UMEMCG_HAVE_RSEQ 1
#else
#define UMEMCG_HAVE_RSEQ 0
#endif

namespace umemcg::internal {

// The calling thread's fake CPU id (CpuSource::kFake).
extern constinit thread_local int tls_fake_cpu;

// Possible CPU ids of this machine, ascending. Never empty.
std::vector<int> PossibleCpus();
// Parses a kernel cpulist ("0-3,8,10-11"); empty on malformed input.
std::vector<int> ParseCpuList(const std::string& text);

class CpuIdSource {
 public:
  // `nr_cpus` 0 = one shard per possible CPU. kAuto resolves to kRseq when
  // available. kRseq without rseq: kFailedPrecondition.
  static StatusOr<CpuIdSource> Create(CpuSource requested, int nr_cpus);
  // As Create, with the possible CPU ids given (ascending, non-empty).
  static StatusOr<CpuIdSource> Create(CpuSource requested, int nr_cpus,
                                      const std::vector<int>& possible);
  CpuIdSource() = default;

  CpuSource source() const { return source_; }
  int nr_shards() const { return nr_shards_; }
  // True when shard k is CPU id k and no other CPU id maps to it (a real
  // CPU source, every possible id below nr_shards()): per-CPU code may
  // then treat a shard as one CPU (port/rseq.h).
  bool identity() const { return identity_; }

  // The current CPU's shard. The thread may migrate right after: callers
  // guard the shard with its TryLock, never rely on exclusivity.
  int CurrentShard() const {
    const unsigned id = RawCpuId();
    if (id < dense_limit_) return static_cast<int>(id);
    return MapSlow(id);
  }

 private:
  unsigned RawCpuId() const {
    switch (source_) {
#if UMEMCG_HAVE_RSEQ
      case CpuSource::kRseq: {
        // The kernel rewrites cpu_id whenever the thread is scheduled on a
        // new CPU; from this thread's view that is like a signal handler's
        // store, so a relaxed atomic load is the right access.
        const auto* area = reinterpret_cast<const struct rseq*>(
            static_cast<const char*>(__builtin_thread_pointer()) +
            __rseq_offset);
        return __atomic_load_n(&area->cpu_id, __ATOMIC_RELAXED);
      }
#endif
      case CpuSource::kFake:
        return static_cast<unsigned>(tls_fake_cpu);
      default: {
        const int cpu = sched_getcpu();
        return cpu < 0 ? 0u : static_cast<unsigned>(cpu);
      }
    }
  }
  int MapSlow(unsigned id) const;
  friend class CpuIdSourcePeer;

  CpuSource source_ = CpuSource::kGetcpu;
  int nr_shards_ = 1;
  unsigned dense_limit_ = 1;
  std::vector<int> id_to_shard_;  // index: CPU id; -1 = not possible
  bool identity_ = false;
};

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_PORT_CPU_H_

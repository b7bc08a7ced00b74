// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Where umemcg learns "the CPU this thread runs on", which selects the
// per-CPU shard (stock) a charge uses. Chosen once per Controller
// (ControllerOptions::cpu_source):
//   kRseq   glibc's registered rseq area: the kernel keeps the `cpu_id` field
//           at thread_pointer + __rseq_offset current; reading it is one load.
//   kGetcpu sched_getcpu() (vDSO call) on every lookup.
//   kFake   the id set with SetFakeCpu() for the calling thread (tests and
//           simulations decide which "CPU" each thread is on; default 0).
//   kAuto   kRseq when glibc registered rseq for this process, else kGetcpu.
//
// The id may be stale as soon as it is read (the thread can migrate);
// correctness never depends on it: every shard is guarded by a try-lock.
//
// Thread safety: all functions are safe from any thread. SetFakeCpu affects
// only the calling thread.

#ifndef UMEMCG_CPU_H_
#define UMEMCG_CPU_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "umemcg/export.h"

namespace umemcg {

enum class CpuSource : uint8_t { kAuto, kRseq, kGetcpu, kFake };

// "auto", "rseq", "getcpu", "fake".
UMEMCG_EXPORT const char* CpuSourceName(CpuSource source);
// Inverse of CpuSourceName; nullopt for anything else.
UMEMCG_EXPORT std::optional<CpuSource> ParseCpuSource(std::string_view name);

// True when glibc registered an rseq area for this process (glibc >= 2.35
// and not disabled with GLIBC_TUNABLES=glibc.pthread.rseq=0).
UMEMCG_EXPORT bool RseqAvailable();

// Sets the calling thread's CPU id for controllers using CpuSource::kFake.
// Ids at or above the controller's nr_cpus wrap modulo nr_cpus.
// REQUIRES: cpu >= 0.
UMEMCG_EXPORT void SetFakeCpu(int cpu);
// The calling thread's fake CPU id (0 until set).
UMEMCG_EXPORT int FakeCpu();

}  // namespace umemcg

#endif  // UMEMCG_CPU_H_

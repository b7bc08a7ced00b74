// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Small helpers shared by every benchmark program (the Google Benchmark
// ones and umemcg-bench): medians, the CPUs this process may run on,
// thread pinning, and the cost of moving a cache line between two CPUs. No
// dependency beyond the C++ library and pthreads, so umemcg-bench can be linked
// fully static.
//
// Thread safety: the functions are safe from any thread; pinning affects
// only the calling thread.

#ifndef UMEMCG_BENCH_BENCH_UTIL_H_
#define UMEMCG_BENCH_BENCH_UTIL_H_

#include <sched.h>

#include <vector>

namespace umemcg::bench {

// The median (mean of the middle two for an even count); NAN when empty.
double Median(std::vector<double> v);

// The CPUs this process may run on, ascending.
std::vector<int> AllowedCpus();

// Pins the calling thread to `cpu` for its lifetime, restoring the old
// affinity afterwards. Does nothing when cpu < 0.
class ScopedCpuPin {
 public:
  explicit ScopedCpuPin(int cpu);
  ~ScopedCpuPin();
  // True when the thread now runs only on the CPU asked for.
  bool pinned() const { return active_; }
  ScopedCpuPin(const ScopedCpuPin&) = delete;
  ScopedCpuPin& operator=(const ScopedCpuPin&) = delete;

 private:
  cpu_set_t old_;
  bool active_ = false;
};

// The median time, in nanoseconds, of one round trip of a cache line
// between `cpu_a` and `cpu_b`: two threads pinned there take turns writing
// one shared word, each waiting for the other's write (the cost every
// contended atomic on a shared counter pays). Takes about 20 ms. NAN when
// either CPU cannot be pinned to or they are the same. On a virtual
// machine this changes when the host moves its CPUs, and with it every
// ratio between a variant that shares lines and one that does not.
double LineRoundTripNs(int cpu_a, int cpu_b);

}  // namespace umemcg::bench

#endif  // UMEMCG_BENCH_BENCH_UTIL_H_

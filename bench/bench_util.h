// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Small helpers shared by every benchmark program (the Google Benchmark
// ones and umemcg-bench): medians, the CPUs this process may run on, and
// thread pinning. No dependency beyond the C++ library and pthreads, so
// umemcg-bench can be linked fully static.
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
  ScopedCpuPin(const ScopedCpuPin&) = delete;
  ScopedCpuPin& operator=(const ScopedCpuPin&) = delete;

 private:
  cpu_set_t old_;
  bool active_ = false;
};

}  // namespace umemcg::bench

#endif  // UMEMCG_BENCH_BENCH_UTIL_H_

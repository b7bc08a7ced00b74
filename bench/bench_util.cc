// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "bench_util.h"

#include <pthread.h>

#include <algorithm>
#include <cmath>

namespace umemcg::bench {

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  return cpus;
}

ScopedCpuPin::ScopedCpuPin(int cpu) {
  if (cpu < 0) return;
  if (pthread_getaffinity_np(pthread_self(), sizeof(old_), &old_) != 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  active_ = pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

ScopedCpuPin::~ScopedCpuPin() {
  if (active_) pthread_setaffinity_np(pthread_self(), sizeof(old_), &old_);
}

}  // namespace umemcg::bench

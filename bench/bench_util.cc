// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "bench_util.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <thread>

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

double LineRoundTripNs(int cpu_a, int cpu_b) {
  if (cpu_a < 0 || cpu_b < 0 || cpu_a == cpu_b) return NAN;
  constexpr int kTrips = 2000;
  constexpr int kBatches = 5;
  // The word both threads write, alone in its line.
  struct alignas(64) Line {
    std::atomic<uint64_t> turn{0};
  } line;
  std::atomic<bool> pinned_b{false}, failed{false};
  std::vector<double> per_trip;
  std::thread b([&] {
    ScopedCpuPin pin(cpu_b);
    if (!pin.pinned()) failed.store(true);
    pinned_b.store(true);
    if (failed.load()) return;
    // Answers odd values with the next even one until told to stop (~0).
    for (uint64_t seen = 0;;) {
      uint64_t v;
      // Acquire/release: the turns must be seen in order; the loads spin.
      while ((v = line.turn.load(std::memory_order_acquire)) == seen) {
      }
      if (v == ~uint64_t{0}) return;
      seen = v + 1;
      line.turn.store(seen, std::memory_order_release);
    }
  });
  {
    ScopedCpuPin pin(cpu_a);
    while (!pinned_b.load()) std::this_thread::yield();
    if (!pin.pinned()) {
      failed.store(true);
      line.turn.store(~uint64_t{0}, std::memory_order_release);  // b: stop
    }
    if (!failed.load()) {
      uint64_t next = 1;
      for (int batch = 0; batch < kBatches; ++batch) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < kTrips; ++i, next += 2) {
          line.turn.store(next, std::memory_order_release);
          while (line.turn.load(std::memory_order_acquire) != next + 1) {
          }
        }
        const auto t1 = std::chrono::steady_clock::now();
        per_trip.push_back(
            std::chrono::duration<double, std::nano>(t1 - t0).count() / kTrips);
      }
      line.turn.store(~uint64_t{0}, std::memory_order_release);
    }
  }
  b.join();
  return failed.load() ? NAN : Median(per_trip);
}

}  // namespace umemcg::bench

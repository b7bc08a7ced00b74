// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// umemcg-preload-map-loop: the mapping hooks as a program sees them, to
// run with and without LD_PRELOAD=libumemcg-preload.so (or two builds of
// it, alternately, or UMEMCG_MAP_CHARGE=at-mmap against =resident). Each
// thread keeps a window of 64 live private anonymous mappings of 64 KiB to
// 1 MiB (xorshift sizes) and, per step, unmaps the oldest, maps a new one,
// writes one byte in each of its first 16 pages and gives the first 8
// back with madvise(MADV_DONTNEED). Prints the nanoseconds per step: the
// slowest thread's wall time over its steps, and its CPU time (user and
// system: steadier than wall time on a loaded machine; the resident
// mode's scanner thread is not in it).
//
// Usage: umemcg-preload-map-loop [steps per thread, default 200000]
//        [threads]

#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr size_t kPage = 4096;

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

struct Mapping {
  char* p = nullptr;
  size_t len = 0;
};

double ThreadCpu() {
  rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

void Loop(long steps, unsigned seed, double* seconds, double* cpu) {
  Mapping window[64];
  unsigned x = seed * 2654435761u + 1;
  const double start = Now();
  const double cpu_start = ThreadCpu();
  for (long i = 0; i < steps; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    Mapping& slot = window[i & 63];
    if (slot.p != nullptr) munmap(slot.p, slot.len);
    slot.len = (16 + x % 241) * kPage;
    void* p = mmap(nullptr, slot.len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("mmap");
      std::exit(1);
    }
    slot.p = static_cast<char*>(p);
    for (size_t page = 0; page < 16; ++page) slot.p[page * kPage] = 1;
    madvise(slot.p, 8 * kPage, MADV_DONTNEED);
  }
  *seconds = Now() - start;
  *cpu = ThreadCpu() - cpu_start;
  for (Mapping& m : window) {
    if (m.p != nullptr) munmap(m.p, m.len);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const long steps = argc > 1 ? std::atol(argv[1]) : 200000;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  std::vector<double> seconds(threads), cpu(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back(Loop, steps, static_cast<unsigned>(t + 1), &seconds[t],
                         &cpu[t]);
  }
  double slowest = 0, slowest_cpu = 0;
  for (int t = 0; t < threads; ++t) {
    workers[t].join();
    if (seconds[t] > slowest) slowest = seconds[t];
    if (cpu[t] > slowest_cpu) slowest_cpu = cpu[t];
  }
  std::printf("threads=%d steps=%ld ns_per_step=%.1f cpu_ns_per_step=%.1f\n",
              threads, steps, slowest * 1e9 / static_cast<double>(steps),
              slowest_cpu * 1e9 / static_cast<double>(steps));
  return 0;
}

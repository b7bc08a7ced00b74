// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// umemcg-preload-loop: the malloc/free hot path as a program sees it, to
// run with and without LD_PRELOAD=libumemcg-preload.so (or with two builds
// of it, alternately, to compare a change). Each thread keeps a window of
// 64 live blocks of 16-512 bytes (xorshift sizes) and, per step, frees the
// oldest and allocates a new one; every 8th step reallocates the new block
// to another size. Prints the nanoseconds per malloc+free pair (the
// slowest thread's wall time over its pairs).
//
// Usage: umemcg-preload-loop [pairs per thread, default 8000000] [threads]

#include <pthread.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// Keeps the compiler from pairing a malloc with its free and eliding both.
void* Escape(void* p) {
  asm volatile("" : : "g"(p) : "memory");
  return p;
}

void Loop(long pairs, unsigned seed, double* seconds) {
  void* window[64] = {};
  unsigned x = seed * 2654435761u + 1;
  const double start = Now();
  for (long i = 0; i < pairs; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    void*& slot = window[i & 63];
    free(slot);
    slot = Escape(malloc(16 + x % 497));
    if ((i & 7) == 7) slot = Escape(realloc(slot, 16 + (x >> 9) % 497));
  }
  *seconds = Now() - start;
  for (void* p : window) free(p);
}

}  // namespace

int main(int argc, char** argv) {
  const long pairs = argc > 1 ? std::atol(argv[1]) : 8000000;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  std::vector<double> seconds(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back(Loop, pairs, static_cast<unsigned>(t + 1),
                         &seconds[t]);
  }
  double slowest = 0;
  for (int t = 0; t < threads; ++t) {
    workers[t].join();
    if (seconds[t] > slowest) slowest = seconds[t];
  }
  std::printf("threads=%d pairs=%ld ns_per_pair=%.2f\n", threads, pairs,
              slowest * 1e9 / static_cast<double>(pairs));
  return 0;
}

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// A forking program for libumemcg-preload.so (run by
// preload_fork_test.sh): 8 threads allocate and free (malloc, new,
// realloc, mmap/mremap/munmap) without pause while the main thread forks N
// times (default 300). Each child allocates a little and calls exit(0), so it
// runs the preload's exit path (the report when UMEMCG_REPORT is set)
// with whatever locks the other threads held at the fork. Each child gets
// a 60 s hang guard: one still running then is killed and counted as a
// hang.
//
// Prints "forks=N hangs=H failures=F" and exits 1 when H or F is not 0.
// Usage: preload_fork_stress [forks] [threads]

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

namespace {

std::atomic<bool> g_stop{false};

void Churn(int seed) {
  unsigned x = static_cast<unsigned>(seed) * 2654435761u + 1;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x;
  };
  void* held[64] = {};
  while (!g_stop.load(std::memory_order_relaxed)) {
    for (int i = 0; i < 64; ++i) {
      const unsigned r = next();
      free(held[i]);
      held[i] = malloc(16 + r % 4000);
      if (r % 7 == 0) held[i] = realloc(held[i], 100 + r % 20000);
    }
    char* n = new char[1 + next() % 300];
    delete[] n;
    // Mappings: made, grown or moved, shrunk, unmapped (every child's
    // anon_bytes must equal its mapped_bytes).
    for (int k = 0; k < 4; ++k) {
      const size_t len = (1 + next() % 16) * 4096;
      void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) continue;
      static_cast<char*>(m)[0] = 1;
      size_t now = len;
      if (next() % 2 == 0) {
        void* g = mremap(m, len, 2 * len, MREMAP_MAYMOVE);
        if (g != MAP_FAILED) {
          m = g;
          now = 2 * len;
        }
      }
      if (now > 4096 && next() % 2 == 0) {
        void* s = mremap(m, now, 4096, 0);
        if (s != MAP_FAILED) now = 4096;
      }
      munmap(m, now);
    }
  }
  for (void* p : held) free(p);
}

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  const int forks = argc > 1 ? std::atoi(argv[1]) : 300;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 8;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) workers.emplace_back(Churn, t + 1);
  int hangs = 0;
  int failures = 0;
  for (int i = 0; i < forks; ++i) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      ++failures;
      continue;
    }
    if (pid == 0) {
      void* p = malloc(1000 + i);
      std::memset(p, i, 1000);
      free(p);
      std::exit(0);  // destructors: the preload's exit path
    }
    const double deadline = Now() + 60;
    int status = 0;
    pid_t r;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && Now() < deadline) {
      usleep(1000);
    }
    if (r == 0) {
      std::fprintf(stderr, "child %d (fork %d) hangs: killed\n", pid, i);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ++hangs;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "child %d (fork %d) ended with status %#x\n", pid, i,
                   status);
      ++failures;
    }
  }
  g_stop.store(true);
  for (std::thread& t : workers) t.join();
  std::printf("forks=%d hangs=%d failures=%d\n", forks, hangs, failures);
  return hangs == 0 && failures == 0 ? 0 : 1;
}

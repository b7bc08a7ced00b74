// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// A real C++ program run by preload_jemalloc_test.sh under the preload's
// jemalloc mode (UMEMCG_HEAP=jemalloc). Modes:
//   new MIB    operator new of 1 MiB blocks (touched) until std::bad_alloc;
//              prints "bad_alloc after N MiB" (exit 0) or fails past MIB.
//   api        the malloc family's rules in this mode (overflow, errno,
//              alignment, realloc contents, usable size); exit 0 when all
//              hold, else prints the first that does not.
//   fork N     4 threads allocate and free while the main thread forks N
//              times; each child allocates, frees and exits normally
//              (writing its report); exit 0 when every child exited 0.

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace {

int Fail(const char* what) {
  std::printf("FAIL: %s\n", what);
  return 1;
}

int NewUntilBadAlloc(long max_mib) {
  std::vector<char*> blocks;
  blocks.reserve(static_cast<size_t>(max_mib) + 1);
  try {
    for (long i = 0; i <= max_mib; ++i) {
      char* p = new char[1 << 20];
      std::memset(p, 1, 1 << 20);
      blocks.push_back(p);
    }
  } catch (const std::bad_alloc&) {
    const size_t n = blocks.size();
    for (char* p : blocks) delete[] p;
    std::printf("bad_alloc after %zu MiB\n", n);
    return 0;
  }
  return Fail("no bad_alloc");
}

int Api() {
  errno = 0;
  void* p = calloc(SIZE_MAX / 2, 4);
  if (p != nullptr || errno != ENOMEM) return Fail("calloc overflow");
  errno = 1234;
  p = malloc(100);
  if (p == nullptr || errno != 1234) return Fail("malloc errno");
  if (malloc_usable_size(p) < 100) return Fail("usable size");
  std::memset(p, 7, 100);
  void* q = realloc(p, 100000);
  if (q == nullptr) return Fail("realloc grow");
  for (int i = 0; i < 100; ++i) {
    if (static_cast<unsigned char*>(q)[i] != 7) return Fail("realloc copy");
  }
  if (realloc(q, 0) != nullptr) return Fail("realloc(p, 0)");
  void* a = nullptr;
  if (posix_memalign(&a, 3, 10) != EINVAL) return Fail("posix_memalign 3");
  if (posix_memalign(&a, 4096, 10) != 0 ||
      reinterpret_cast<uintptr_t>(a) % 4096 != 0) {
    return Fail("posix_memalign 4096");
  }
  free(a);
  a = memalign(64, 1000);
  if (a == nullptr || reinterpret_cast<uintptr_t>(a) % 64 != 0) {
    return Fail("memalign");
  }
  free(a);
  a = aligned_alloc(256, 256);
  if (a == nullptr || reinterpret_cast<uintptr_t>(a) % 256 != 0) {
    return Fail("aligned_alloc");
  }
  free(a);
  a = calloc(1000, 1000);
  if (a == nullptr) return Fail("calloc");
  for (int i = 0; i < 1000000; ++i) {
    if (static_cast<char*>(a)[i] != 0) return Fail("calloc zero");
  }
  free(a);
  if (malloc(SIZE_MAX - 4096) != nullptr || errno != ENOMEM) {
    return Fail("huge malloc");
  }
  auto* v = new (std::align_val_t(128)) char[300];
  if (reinterpret_cast<uintptr_t>(v) % 128 != 0) return Fail("aligned new");
  operator delete[](v, std::align_val_t(128));
  std::printf("api ok\n");
  return 0;
}

int Forks(int n) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&stop, t] {
      std::vector<std::string*> keep(64, nullptr);
      unsigned i = t;
      while (!stop.load(std::memory_order_relaxed)) {
        i = i * 1103515245u + 12345u;
        std::string*& s = keep[i % keep.size()];
        delete s;
        s = new std::string((i >> 8) % 70000, 'x');
      }
      for (auto* s : keep) delete s;
    });
  }
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      std::vector<std::string> v;
      for (int j = 0; j < 1000; ++j) v.emplace_back(j * 10, 'y');
      v.clear();
      void* big = malloc(8 << 20);
      std::memset(big, 1, 8 << 20);
      free(big);
      std::exit(0);  // normal exit: the child's report is written
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      ++bad;
    }
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  if (bad != 0) {
    std::printf("FAIL: %d of %d children\n", bad, n);
    return 1;
  }
  std::printf("forks ok %d\n", n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "new" && argc > 2) return NewUntilBadAlloc(std::atol(argv[2]));
  if (mode == "api") return Api();
  if (mode == "fork" && argc > 2) return Forks(std::atoi(argv[2]));
  std::fprintf(stderr, "usage: %s new MIB | api | fork N\n", argv[0]);
  return 2;
}

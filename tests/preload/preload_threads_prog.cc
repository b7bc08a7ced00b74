// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// A preloaded program with two threads, driven through files by
// preload_threads_test.sh: it writes "PID TID_A TID_B" to DIR/tids, then
// for each phase N = 1, 2, ... waits for DIR/goN, has each thread
// allocate BYTES in 1000-byte blocks and map MAP bytes of anonymous memory
// (written to; all kept until exit), settles the
// charges (umemcg_preload_sync) and creates DIR/doneN; DIR/exit ends it.
// When DIR/setN exists, thread A first calls umemcg_preload_set_group
// with its text.
// Every wait is bounded (120 s): a failed test does not leave it behind.
// Usage: preload_threads_prog DIR BYTES MAP

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

extern "C" int umemcg_preload_sync(void) __attribute__((weak));
extern "C" int umemcg_preload_set_group(const char* path) __attribute__((weak));

namespace {

std::string g_dir;

bool Exists(const std::string& name) {
  return access((g_dir + "/" + name).c_str(), F_OK) == 0;
}

// Waits (up to 120 s) for DIR/name.
bool WaitFor(const std::string& name) {
  for (int i = 0; i < 12000; ++i) {
    if (Exists(name)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

void Create(const std::string& name) {
  const std::string tmp = g_dir + "/" + name + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) std::exit(2);
  std::fclose(f);
  if (std::rename(tmp.c_str(), (g_dir + "/" + name).c_str()) != 0) {
    std::exit(2);
  }
}

void WriteText(const std::string& name, const std::string& text) {
  const std::string tmp = g_dir + "/" + name + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) std::exit(2);
  std::fputs(text.c_str(), f);
  std::fclose(f);
  if (std::rename(tmp.c_str(), (g_dir + "/" + name).c_str()) != 0) {
    std::exit(2);
  }
}

pid_t Tid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s DIR BYTES MAP\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  const long bytes = std::atol(argv[2]);
  const size_t map = std::strtoul(argv[3], nullptr, 0);
  constexpr size_t kBlock = 1000;
  std::vector<void*> held[2];
  pid_t tids[2] = {0, 0};
  // Each thread: its TID, then one allocation step per phase, waiting for
  // the main thread between them.
  int step[2] = {0, 0};
  int done[2] = {0, 0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 2; ++k) {
    threads.emplace_back([&, k] {
      __atomic_store_n(&tids[k], Tid(), __ATOMIC_RELEASE);
      for (int phase = 1;; ++phase) {
        int s;
        while ((s = __atomic_load_n(&step[k], __ATOMIC_ACQUIRE)) >= 0 &&
               s < phase) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        if (s < 0) return;
        // DIR/setN (thread A only): umemcg_preload_set_group(its text)
        // before allocating.
        if (k == 0 && umemcg_preload_set_group != nullptr) {
          FILE* f =
              std::fopen((g_dir + "/set" + std::to_string(phase)).c_str(), "r");
          if (f != nullptr) {
            char path[256] = "";
            if (std::fgets(path, sizeof(path), f) == nullptr) path[0] = 0;
            std::fclose(f);
            for (char* c = path; *c != 0; ++c) {
              if (*c == '\n') *c = 0;
            }
            if (umemcg_preload_set_group(path) != 0) std::exit(4);
          }
        }
        for (long n = 0; n < bytes; n += kBlock) {
          void* p = std::malloc(kBlock);
          if (p == nullptr) std::exit(3);
          static_cast<char*>(p)[0] = 1;
          held[k].push_back(p);
        }
        if (map > 0) {
          void* m = mmap(nullptr, map, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
          if (m == MAP_FAILED) std::exit(3);
          static_cast<char*>(m)[0] = 1;
        }
        __atomic_store_n(&done[k], phase, __ATOMIC_RELEASE);
      }
    });
  }
  for (int k = 0; k < 2; ++k) {
    while (__atomic_load_n(&tids[k], __ATOMIC_ACQUIRE) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  // Room for the blocks' pointers now, so the vectors' growth during a
  // phase does not blur what the phase charges.
  for (auto& h : held) h.reserve(static_cast<size_t>(8 * bytes / kBlock));
  WriteText("tids", std::to_string(getpid()) + " " + std::to_string(tids[0]) +
                        " " + std::to_string(tids[1]) + "\n");
  for (int phase = 1;; ++phase) {
    const std::string go = "go" + std::to_string(phase);
    for (int i = 0; i < 12000 && !Exists(go) && !Exists("exit"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!Exists(go)) break;
    for (int k = 0; k < 2; ++k)
      __atomic_store_n(&step[k], phase, __ATOMIC_RELEASE);
    for (int k = 0; k < 2; ++k) {
      while (__atomic_load_n(&done[k], __ATOMIC_ACQUIRE) < phase) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    if (umemcg_preload_sync != nullptr) (void)umemcg_preload_sync();
    Create("done" + std::to_string(phase));
  }
  for (int k = 0; k < 2; ++k) __atomic_store_n(&step[k], -1, __ATOMIC_RELEASE);
  for (auto& t : threads) t.join();
  return WaitFor("exit") ? 0 : 1;
}

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Every allocation entry point on the same inputs, with and without
// libumemcg-preload.so: the test runs this program twice (--table, once
// with LD_PRELOAD and once without) and compares the tables line by line.
// Each line is one call: whether it returned memory, errno afterwards
// (set to a sentinel before), whether the alignment holds, and the usable
// size, which under the preload may be larger than glibc's, never smaller.
// Invalid frees run in a child each: the same signal and the same
// diagnostic from glibc. The rules of the glibc the process runs apply
// (aligned_alloc differs before and after 2.38).

#include <errno.h>
#include <gnu/libc-version.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

constexpr int kSentinel = 1234;

template <class T>
T* Escape(T* p) {
  asm volatile("" : : "g"(p) : "memory");
  return p;
}

// One line: name, result, errno, alignment, usable size.
std::string Line(const std::string& name, void* p, int err, size_t align) {
  char buf[256];
  const bool aligned =
      p == nullptr || align == 0 || reinterpret_cast<uintptr_t>(p) % align == 0;
  std::snprintf(buf, sizeof(buf), "%s ret=%s errno=%d aligned=%d usable=%zu",
                name.c_str(), p != nullptr ? "mem" : "null", err,
                aligned ? 1 : 0, p != nullptr ? malloc_usable_size(p) : 0);
  return buf;
}

std::string Num(size_t n) {
  if (n == SIZE_MAX) return "SIZE_MAX";
  if (n == SIZE_MAX / 2) return "SIZE_MAX/2";
  if (n == SIZE_MAX / 2 + 1) return "SIZE_MAX/2+1";
  if (n == SIZE_MAX / 2 + 2) return "SIZE_MAX/2+2";
  return std::to_string(n);
}

// Runs `body` in a child with stderr captured: "signal=N stderr=TEXT".
std::string InChild(const std::function<void()>& body) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return "pipe failed";
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], 2);
    close(pipefd[0]);
    body();
    _exit(0);
  }
  close(pipefd[1]);
  std::string text;
  char buf[512];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof(buf))) > 0) text.append(buf, n);
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return "signal=" + std::to_string(sig) + " exit=" +
         std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
         " stderr=" + text;
}

int g_handler_calls = 0;
void CountingHandler() {
  if (++g_handler_calls >= 3) std::set_new_handler(nullptr);
}

void PrintTable() {
  std::vector<std::string> out;
  auto call = [&](const std::string& name, size_t align,
                  const std::function<void*()>& f) {
    errno = kSentinel;
    void* p = f();
    const int err = errno;
    out.push_back(Line(name, p, err, align));
    free(p);
  };
  const std::vector<size_t> sizes = {
      0,        1,           8,       9,
      24,       25,          100,     1000,
      4095,     4096,        4097,    65536,
      131072,   200000,      1 << 20, (1 << 20) + 1,
      SIZE_MAX, SIZE_MAX / 2};
  for (size_t n : sizes) {
    call("malloc(" + Num(n) + ")", 16, [n] { return Escape(malloc(n)); });
  }
  const std::vector<std::pair<size_t, size_t>> pairs = {
      {0, 0},      {1, 0},        {0, 1},
      {10, 100},   {SIZE_MAX, 2}, {2, SIZE_MAX / 2 + 1},
      {1 << 20, 1}};
  for (auto [a, b] : pairs) {
    call("calloc(" + Num(a) + "," + Num(b) + ")", 16,
         [a = a, b = b] { return Escape(calloc(a, b)); });
    call("reallocarray(NULL," + Num(a) + "," + Num(b) + ")", 16,
         [a = a, b = b] { return reallocarray(nullptr, a, b); });
  }
  for (size_t n : {size_t{0}, size_t{1}, size_t{100}, size_t{5000},
                   size_t{1} << 20, SIZE_MAX}) {
    call("realloc(NULL," + Num(n) + ")", 16,
         [n] { return realloc(nullptr, n); });
    call("realloc(p100," + Num(n) + ")", 16, [n]() -> void* {
      void* p = malloc(100);
      std::memset(p, 7, 100);
      errno = kSentinel;
      void* q = realloc(p, n);
      const int err = errno;
      // A failed realloc leaves the block; realloc(p, 0) frees it.
      if (q == nullptr && n != 0) free(p);
      errno = err;
      return q;
    });
  }
  const std::vector<size_t> aligns = {0,
                                      1,
                                      2,
                                      8,
                                      16,
                                      24,
                                      32,
                                      48,
                                      64,
                                      96,
                                      4096,
                                      1 << 20,
                                      SIZE_MAX / 2 + 1,
                                      SIZE_MAX / 2 + 2};
  for (size_t a : aligns) {
    for (size_t n :
         {size_t{0}, size_t{10}, size_t{100}, size_t{5000}, SIZE_MAX - 100}) {
      const size_t want = a > 16 && (a & (a - 1)) == 0 ? a : 16;
      const std::string args = "(" + Num(a) + "," + Num(n) + ")";
      call("memalign" + args, want, [a, n] { return Escape(memalign(a, n)); });
      call("aligned_alloc" + args, want,
           [a, n] { return Escape(aligned_alloc(a, n)); });
      errno = kSentinel;
      void* p = nullptr;
      const int rc = posix_memalign(&p, a, n);
      const int err = errno;
      out.push_back(Line("posix_memalign" + args + " rc=" + std::to_string(rc),
                         rc == 0 ? p : nullptr, err, want));
      if (rc == 0) free(p);
    }
  }
  for (size_t n : {size_t{0}, size_t{1}, size_t{4096}, size_t{4097},
                   size_t{100000}, SIZE_MAX - 4096, SIZE_MAX}) {
    call("valloc(" + Num(n) + ")", 4096, [n] { return Escape(valloc(n)); });
    call("pvalloc(" + Num(n) + ")", 4096, [n] { return Escape(pvalloc(n)); });
  }
  {
    errno = kSentinel;
    const size_t u = malloc_usable_size(nullptr);
    out.push_back("malloc_usable_size(NULL) = " + std::to_string(u) +
                  " errno=" + std::to_string(errno));
    void* p = malloc(100);
    errno = kSentinel;
    free(p);
    free(nullptr);
    out.push_back("free errno=" + std::to_string(errno));
  }
  // operator new: failure, the new_handler loop, nothrow.
  {
    std::string r;
    try {
      volatile size_t huge = SIZE_MAX / 2;
      delete[] Escape(new char[huge]);
      r = "no throw";
    } catch (const std::bad_alloc&) {
      r = "bad_alloc";
    }
    out.push_back("new char[SIZE_MAX/2]: " + r);
    g_handler_calls = 0;
    std::set_new_handler(CountingHandler);
    try {
      volatile size_t huge = SIZE_MAX / 2;
      ::operator delete(Escape(::operator new(huge)));
      r = "no throw";
    } catch (const std::bad_alloc&) {
      r = "bad_alloc";
    }
    out.push_back("new with a handler: " + r + " after " +
                  std::to_string(g_handler_calls) + " handler calls");
    g_handler_calls = 0;
    std::set_new_handler(CountingHandler);
    volatile size_t huge = SIZE_MAX / 2;
    void* q = ::operator new(huge, std::nothrow);
    out.push_back(std::string("nothrow new with a handler: ") +
                  (q ? "mem" : "null") + " after " +
                  std::to_string(g_handler_calls) + " handler calls");
    std::set_new_handler(nullptr);
    void* a = ::operator new(huge, std::align_val_t(64), std::nothrow);
    out.push_back(std::string("aligned nothrow new: ") + (a ? "mem" : "null"));
  }
  // Invalid frees: glibc's verdict, through the preload as without it.
  static char static_buf[64];
  out.push_back("free(p+1): " + InChild([] {
                  char* p = static_cast<char*>(malloc(100));
                  free(p + 1);
                }));
  out.push_back("free(p+16) of zeroed memory: " + InChild([] {
                  char* p = static_cast<char*>(calloc(1, 100));
                  free(p + 16);
                }));
  out.push_back("free(p+48) of zeroed memory: " + InChild([] {
                  char* p = static_cast<char*>(calloc(1, 1000));
                  free(p + 48);
                }));
  out.push_back("free(stack): " + InChild([] {
                  alignas(16) char local[64] = {};
                  free(Escape(local + 16));
                }));
  out.push_back("free(static): " + InChild([] { free(static_buf + 16); }));
  out.push_back("double free: " + InChild([] {
                  void* p = malloc(100);
                  free(p);
                  free(p);
                }));
  out.push_back("free after the header was zeroed: " + InChild([] {
                  char* p = static_cast<char*>(malloc(100));
                  std::memset(p - 8, 0, 8);
                  free(p);
                }));
  out.push_back("realloc(p+16): " + InChild([] {
                  char* p = static_cast<char*>(calloc(1, 100));
                  (void)!realloc(p + 16, 1000);
                }));
  for (const std::string& l : out) std::printf("%s\n", l.c_str());
}

// Runs this program with --table, with `preload` as LD_PRELOAD (or none).
std::vector<std::string> RunTable(const char* self,
                                  const std::string& preload) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0) env.push_back(*e);
  }
  if (!preload.empty()) env.push_back("LD_PRELOAD=" + preload);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int pipefd[2];
  EXPECT_EQ(pipe(pipefd), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  posix_spawn_file_actions_addclose(&fa, pipefd[0]);
  char arg0[] = "preload_glibc_test";
  char arg1[] = "--table";
  char* argv[] = {arg0, arg1, nullptr};
  pid_t pid;
  EXPECT_EQ(posix_spawn(&pid, self, &fa, nullptr, argv, envp.data()), 0);
  posix_spawn_file_actions_destroy(&fa);
  close(pipefd[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof(buf))) > 0) text.append(buf, n);
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the table run " << (preload.empty() ? "without" : "with")
      << " the preload ended with status " << status;
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// "usable=N" split off a line.
std::string WithoutUsable(const std::string& line, size_t* usable) {
  const size_t at = line.find(" usable=");
  if (at == std::string::npos) {
    *usable = 0;
    return line;
  }
  *usable = std::stoull(line.substr(at + 8));
  return line.substr(0, at);
}

const char* g_self = nullptr;

TEST(PreloadGlibcTest, EveryEntryPointBehavesAsGlibc) {
  const char* lib = std::getenv("UMEMCG_PRELOAD_LIB");
  ASSERT_NE(lib, nullptr) << "set UMEMCG_PRELOAD_LIB to libumemcg-preload.so";
  std::printf("glibc %s\n", gnu_get_libc_version());
  const std::vector<std::string> glibc = RunTable(g_self, "");
  const std::vector<std::string> ours = RunTable(g_self, lib);
  ASSERT_EQ(glibc.size(), ours.size());
  ASSERT_GT(glibc.size(), 250u);
  int differences = 0;
  for (size_t i = 0; i < glibc.size(); ++i) {
    size_t want_usable = 0;
    size_t got_usable = 0;
    const std::string want = WithoutUsable(glibc[i], &want_usable);
    const std::string got = WithoutUsable(ours[i], &got_usable);
    if (want != got || got_usable < want_usable) {
      ++differences;
      ADD_FAILURE() << "glibc:   " << glibc[i] << "\npreload: " << ours[i];
    }
  }
  EXPECT_EQ(differences, 0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--table") == 0) {
    PrintTable();
    return 0;
  }
  g_self = "/proc/self/exe";
  static std::string self;
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n > 0) {
    self.assign(path, n);
    g_self = self.c_str();
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Helpers for the operator-interface tests: shell commands with their
// output, temporary directories, mount checks and unhurried waiting (the
// tests run under TSan on a loaded 2-CPU machine: waits are for a
// condition, with a generous deadline, never a fixed sleep).

#ifndef UMEMCG_TESTS_OPS_OPS_TEST_UTIL_H_
#define UMEMCG_TESTS_OPS_OPS_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

namespace umemcg::testing {

// Deadline for anything that waits on another thread or process.
inline constexpr std::chrono::seconds kPatience{120};

struct Cmd {
  int status = -1;  // exit status; 128 + signal when killed
  std::string out;  // stdout and stderr, interleaved
};

std::string Quote(const std::string& s);

// Runs `command` with bash (whose messages carry the errno text, as
// "echo: write error: Invalid argument"), capturing its output.
inline Cmd Shell(const std::string& command) {
  Cmd c;
  FILE* p = ::popen(("exec bash -c " + Quote(command) + " 2>&1").c_str(), "r");
  if (p == nullptr) return c;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) c.out.append(buf, n);
  const int st = ::pclose(p);
  c.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return c;
}

// Single-quotes `s` for /bin/sh.
inline std::string Quote(const std::string& s) {
  std::string q = "'";
  for (const char ch : s) {
    if (ch == '\'') {
      q += "'\\''";
    } else {
      q += ch;
    }
  }
  return q + "'";
}

inline std::string ReadText(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteText(const std::filesystem::path& p, const std::string& s) {
  std::ofstream(p) << s;
}

// A fresh directory under TMPDIR (or /tmp), removed at scope exit (only
// its plain contents: a mount on it must be gone by then).
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(base ? base : "/tmp") + "/umemcg-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// True if `path` is a mount point (field 5 of /proc/self/mountinfo).
inline bool IsMountPoint(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, mount_point;
    fields >> id >> parent >> dev >> root >> mount_point;
    if (mount_point == path) return true;
  }
  return false;
}

// Polls `done` every few milliseconds until it holds or kPatience passes.
inline bool WaitFor(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace umemcg::testing

#endif  // UMEMCG_TESTS_OPS_OPS_TEST_UTIL_H_

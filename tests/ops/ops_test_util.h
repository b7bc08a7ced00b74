// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Helpers for the operator-interface tests: shell commands with their
// output, temporary directories, mount checks, signalling a program and
// unhurried waiting (the tests run under TSan on a loaded 2-CPU machine:
// waits are for a condition, with a generous deadline, never a fixed
// sleep).

#ifndef UMEMCG_TESTS_OPS_OPS_TEST_UTIL_H_
#define UMEMCG_TESTS_OPS_OPS_TEST_UTIL_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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

// True if process `pid` has a handler for `sig` (SigCgt in its status).
inline bool CatchesSignal(pid_t pid, int sig) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("SigCgt:", 0) == 0) {
      return ((std::stoull(line.substr(7), nullptr, 16) >> (sig - 1)) & 1) != 0;
    }
  }
  return false;
}

// Starts program `args[0]` with `args` (output to /dev/null), waits until
// it has a handler for `sig`, sends `sig` and returns how long it then
// took to exit; `*status` is its wait status. nullopt if it exited before
// catching the signal, or did not exit within `limit` (it is killed).
inline std::optional<std::chrono::milliseconds> TimeToExitAfterSignal(
    const std::vector<std::string>& args, int sig, std::chrono::seconds limit,
    int* status) {
  std::vector<char*> argv;
  for (const std::string& a : args) {
    argv.push_back(const_cast<char*>(a.c_str()));
  }
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return std::nullopt;
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) {
      ::dup2(null, STDOUT_FILENO);
      ::dup2(null, STDERR_FILENO);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  // The program's own handler: after the exec (before it, the child has
  // this process's handlers).
  const auto execed = [&] {
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
    std::string arg0;
    std::getline(in, arg0, '\0');
    return arg0 == args[0];
  };
  bool exited = false;
  const bool ready = WaitFor([&] {
    exited = ::waitpid(pid, status, WNOHANG) == pid;
    return exited || (execed() && CatchesSignal(pid, sig));
  });
  if (exited) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  if (ready) ::kill(pid, sig);
  while (ready && std::chrono::steady_clock::now() - start < limit) {
    if (::waitpid(pid, status, WNOHANG) == pid) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, status, 0);
  return std::nullopt;
}

}  // namespace umemcg::testing

#endif  // UMEMCG_TESTS_OPS_OPS_TEST_UTIL_H_

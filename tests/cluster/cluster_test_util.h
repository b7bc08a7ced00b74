// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Test helpers for the cluster quota: a real redis-server per test
// (cluster_internal::RedisProcess: free loopback port, temporary
// directory), node processes (tests/cluster/cluster_node.cc) driven over
// pipes with a hang guard on every answer, and polling with a deadline.

#ifndef UMEMCG_TESTS_CLUSTER_CLUSTER_TEST_UTIL_H_
#define UMEMCG_TESTS_CLUSTER_CLUSTER_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cluster/redis_process.h"
#include "umemcg/cluster.h"
#include "umemcg/umemcg.h"

namespace umemcg::cluster_test {

using cluster_internal::RedisProcess;
using cluster_internal::RedisProcessOptions;

// Waits until `ok()` holds, checking every 20 ms; false after `limit` (a
// hang guard: generous, never a timing assertion).
inline bool Eventually(
    const std::function<bool()>& ok,
    std::chrono::milliseconds limit = std::chrono::milliseconds(30000)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return ok();
}

// A cluster_node child process.
class Node {
 public:
  Node(const std::string& binary, const std::string& url,
       const std::string& group, int ttl_ms) {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to_child[0], 0);
      dup2(from_child[1], 1);
      close(to_child[1]);
      close(from_child[0]);
      const std::string a1 = "--redis=" + url, a2 = "--group=" + group,
                        a3 = "--ttl-ms=" + std::to_string(ttl_ms);
      execl(binary.c_str(), binary.c_str(), a1.c_str(), a2.c_str(), a3.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    in_ = to_child[1];
    out_ = from_child[0];
    ready_ = ReadLine();
  }
  ~Node() {
    if (in_ >= 0) close(in_);
    if (out_ >= 0) close(out_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  const std::string& ready() const { return ready_; }
  bool ok() const { return ready_.rfind("ready ", 0) == 0; }
  std::string name() const { return ok() ? ready_.substr(6) : ""; }

  // Sends a command and returns its answer line ("" after 60 s: hang).
  std::string Ask(const std::string& cmd) {
    const std::string line = cmd + "\n";
    if (write(in_, line.data(), line.size()) !=
        static_cast<ssize_t>(line.size())) {
      return "";
    }
    return ReadLine();
  }

  // "lease L usage U ..." as a map.
  std::map<std::string, uint64_t> State(const std::string& cmd = "state") {
    std::istringstream in(Ask(cmd));
    std::map<std::string, uint64_t> m;
    std::string k;
    uint64_t v;
    while (in >> k >> v) m[k] = v;
    return m;
  }

  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  // Closes stdin and waits for a clean exit; the exit status.
  int Quit() {
    Ask("quit");
    close(in_);
    in_ = -1;
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  std::string ReadLine() {
    std::string line;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char c;
      const ssize_t n = read(out_, &c, 1);
      if (n <= 0) return line;
      if (c == '\n') return line;
      line.push_back(c);
    }
    return "";
  }

  pid_t pid_ = -1;
  int in_ = -1;
  int out_ = -1;
  std::string ready_;
};

// The snapshot's group `path` (default-constructed if absent).
// One node in this process: its own controller, group "g" bound to
// `cgroup`, and an OOM handler that counts its calls. Failures to connect
// or bind are test failures; the node then has no cluster or binding.
struct NodeInProcess {
  std::unique_ptr<Controller> ctrl;
  GroupRef g;
  std::unique_ptr<Cluster> cluster;
  std::unique_ptr<ClusterBinding> binding;
  std::shared_ptr<std::atomic<int>> ooms =
      std::make_shared<std::atomic<int>>(0);
};

inline NodeInProcess NewNode(const ClusterOptions& o,
                             const std::string& cgroup) {
  NodeInProcess n;
  n.ctrl = Controller::Create({}).value();
  n.g = n.ctrl->CreateGroup(n.ctrl->root(), "g").value();
  auto ooms = n.ooms;
  n.ctrl->SetOomHandler([ooms](const OomContext&) {
    ooms->fetch_add(1);
    return OomOutcome{};
  });
  auto c = Cluster::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return n;
  n.cluster = std::move(c).value();
  auto b = n.cluster->Bind(*n.g, cgroup);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  if (b.ok()) n.binding = std::move(b).value();
  return n;
}

inline ClusterGroupInfo GroupIn(const ClusterSnapshot& s,
                                const std::string& path) {
  for (const ClusterGroupInfo& g : s.groups) {
    if (g.path == path) return g;
  }
  return {};
}

inline uint64_t LeaseOf(const ClusterGroupInfo& g, const std::string& node) {
  for (const ClusterLease& l : g.leases) {
    if (l.node == node) return l.pages.raw();
  }
  return 0;
}

// True once, after a Sync, Redis's usage of `group` equals the binding's
// lease: Redis holds exactly what the node leased. Polls until then (a
// poll returning surplus lowers the local lease before Redis's count, so
// two single reads may straddle it).
inline bool RedisHoldsTheLease(Cluster& cluster, ClusterBinding& binding,
                               const std::string& group) {
  return Eventually([&] {
    if (!binding.Sync().ok()) return false;
    auto snap = cluster.Snapshot();
    return snap.ok() &&
           GroupIn(snap.value(), group).usage == binding.state().lease;
  });
}

}  // namespace umemcg::cluster_test

#endif  // UMEMCG_TESTS_CLUSTER_CLUSTER_TEST_UTIL_H_

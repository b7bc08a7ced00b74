// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// RedisProcess: a real redis-server child for tests and umemcg-bench: on a
// free loopback port, in a temporary directory (removed at the end), with
// AOF optional, or a replica of another one, or a redis-sentinel
// monitoring one; it can be killed, paused and restarted on the same port
// and directory (so an AOF is replayed). Not part of the library's API
// (linked as umemcg_cluster_testing).
//
// Thread safety: one thread at a time.

#ifndef UMEMCG_SRC_CLUSTER_REDIS_PROCESS_H_
#define UMEMCG_SRC_CLUSTER_REDIS_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cluster/redis_client.h"
#include "umemcg/status.h"

namespace umemcg::cluster_internal {

struct RedisProcessOptions {
  bool aof = false;      // appendonly yes, appendfsync always
  std::string password;  // requirepass (and masterauth for a replica)
  // A replica of the redis-server on this loopback port (0: a master).
  int replica_of = 0;
  // Not a redis-server but a redis-sentinel (Debian package
  // redis-sentinel) monitoring the master on this loopback port as
  // `master_name`, quorum 1, `password` its auth-pass.
  int sentinel_for = 0;
  std::string master_name = "umemcg";
  int down_after_ms = 1000;
  int failover_timeout_ms = 5000;
};

class RedisProcess {
 public:
  // Starts redis-server (or redis-sentinel; from PATH) and waits until it
  // answers PING (at most 20 s). kNotFound if it is not installed.
  static StatusOr<std::unique_ptr<RedisProcess>> Start(
      RedisProcessOptions options = {});
  ~RedisProcess();

  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  // Sends `sig` (SIGKILL, SIGTERM) and reaps the process.
  void Kill(int sig);
  // SIGSTOP / SIGCONT: a server that accepts connections but never answers.
  void Pause();
  void Resume();
  // Starts it again on the same port and directory after Kill.
  Status Restart();
  bool running() const { return pid_ > 0; }

  int port() const { return port_; }
  // redis://[:password@]127.0.0.1:port/0
  std::string url() const;
  const std::string& dir() const { return dir_; }

  // redis-sentinel://127.0.0.1:port/NAME/0 of a sentinel, with the
  // master's password.
  std::string sentinel_url() const;

  // One command on a fresh connection (for test checks and INFO).
  StatusOr<Reply> Command(const std::vector<std::string>& argv);

  // On a master: a write, then WAIT until `n` replicas acknowledged it
  // (at most `timeout`; kAgain when fewer did). A replica's
  // master_link_status:up is not enough to know it receives writes: after
  // a diskless full sync the master sends the write stream only once the
  // replica's first REPLCONF ACK arrived (up to 1 s later), and writes of
  // that second die with the master.
  Status WaitForReplicas(int n, std::chrono::milliseconds timeout);

 private:
  RedisProcess() = default;
  Status Spawn();

  RedisProcessOptions options_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace umemcg::cluster_internal

#endif  // UMEMCG_SRC_CLUSTER_REDIS_PROCESS_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "cluster/redis_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace umemcg::cluster_internal {
namespace {

// A port the kernel just handed out on 127.0.0.1 (free unless someone
// takes it before redis-server binds; Start retries).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

bool HaveBinary(const char* name) {
  const char* path = std::getenv("PATH");
  std::string p = path != nullptr ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    const std::string cand = p.substr(start, end - start) + "/" + name;
    if (access(cand.c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

StatusOr<std::unique_ptr<RedisProcess>> RedisProcess::Start(
    RedisProcessOptions options) {
  const char* binary =
      options.sentinel_for > 0 ? "redis-sentinel" : "redis-server";
  if (!HaveBinary(binary)) {
    return Status(StatusCode::kNotFound,
                  std::string(binary) + " is not installed (Debian package " +
                      binary + "; `make deps` installs it)");
  }
  std::unique_ptr<RedisProcess> r(new RedisProcess());
  r->options_ = std::move(options);
  std::string templ =
      (std::filesystem::temp_directory_path() / "umemcg-redis-XXXXXX").string();
  if (mkdtemp(templ.data()) == nullptr) {
    return Status(StatusCode::kFailedPrecondition, "mkdtemp failed");
  }
  r->dir_ = templ;
  Status last;
  for (int attempt = 0; attempt < 8; ++attempt) {
    r->port_ = FreePort();
    last = r->Spawn();
    if (last.ok()) return r;
  }
  return last;
}

Status RedisProcess::Spawn() {
  const bool sentinel = options_.sentinel_for > 0;
  std::vector<std::string> args;
  if (sentinel) {
    // A sentinel needs a configuration file it may rewrite.
    const std::string conf = dir_ + "/sentinel.conf";
    const std::string& name = options_.master_name;
    std::string text = "port " + std::to_string(port_) +
                       "\nbind 127.0.0.1\ndir " + dir_ + "\nlogfile " + dir_ +
                       "/redis.log\ndaemonize no\n" + "sentinel monitor " +
                       name + " 127.0.0.1 " +
                       std::to_string(options_.sentinel_for) + " 1\n" +
                       "sentinel down-after-milliseconds " + name + " " +
                       std::to_string(options_.down_after_ms) + "\n" +
                       "sentinel failover-timeout " + name + " " +
                       std::to_string(options_.failover_timeout_ms) + "\n";
    if (!options_.password.empty()) {
      text += "sentinel auth-pass " + name + " " + options_.password + "\n";
    }
    FILE* f = std::fopen(conf.c_str(), "w");
    if (f == nullptr) {
      return Status(StatusCode::kFailedPrecondition, "cannot write " + conf);
    }
    std::fputs(text.c_str(), f);
    std::fclose(f);
    args = {"redis-sentinel", conf};
  } else {
    args = {"redis-server", "--port", std::to_string(port_), "--bind",
            "127.0.0.1", "--dir", dir_, "--save", "", "--daemonize", "no",
            "--logfile", dir_ + "/redis.log", "--appendonly",
            options_.aof ? "yes" : "no", "--appendfsync", "always",
            // A replica's first sync at once, not after waiting 5 s for
            // more replicas.
            "--repl-diskless-sync-delay", "0"};
    if (!options_.password.empty()) {
      args.push_back("--requirepass");
      args.push_back(options_.password);
      args.push_back("--masterauth");
      args.push_back(options_.password);
    }
    if (options_.replica_of > 0) {
      args.push_back("--replicaof");
      args.push_back("127.0.0.1");
      args.push_back(std::to_string(options_.replica_of));
    }
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return Status(StatusCode::kFailedPrecondition, "fork failed");
  if (pid == 0) {
    // Dies with the test or benchmark that started it, even if that one
    // crashes before its destructor runs.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      dup2(devnull, 0);
      dup2(devnull, 1);
      dup2(devnull, 2);
    }
    execvp(argv[0], argv.data());
    _exit(127);
  }
  pid_ = pid;
  // Ready when it answers PING (or gone: the port was taken).
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  RedisUrl url;
  url.host = "127.0.0.1";
  url.port = port_;
  if (!sentinel) url.password = options_.password;
  while (std::chrono::steady_clock::now() < deadline) {
    int wstatus = 0;
    if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      pid_ = -1;
      return Status(
          StatusCode::kFailedPrecondition,
          "redis-server exited at start (see " + dir_ + "/redis.log)");
    }
    auto c = RedisConnection::Connect(url, std::chrono::milliseconds(200),
                                      std::chrono::milliseconds(1000));
    if (c.ok()) {
      StatusOr<Reply> pong = c.value()->Command({"PING"});
      if (pong.ok() && pong.value().str == "PONG") return Status::Ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Kill(SIGKILL);
  return Status(StatusCode::kFailedPrecondition,
                "redis-server did not answer PING within 20 s");
}

RedisProcess::~RedisProcess() {
  if (pid_ > 0) Resume();
  Kill(SIGKILL);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void RedisProcess::Kill(int sig) {
  if (pid_ <= 0) return;
  kill(pid_, sig);
  int wstatus = 0;
  while (waitpid(pid_, &wstatus, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

void RedisProcess::Pause() {
  if (pid_ > 0) kill(pid_, SIGSTOP);
}

void RedisProcess::Resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

Status RedisProcess::Restart() {
  if (pid_ > 0) return Status(StatusCode::kBusy, "still running");
  // The port was ours a moment ago; redis-server binds with SO_REUSEADDR.
  Status s;
  for (int attempt = 0; attempt < 50; ++attempt) {
    s = Spawn();
    if (s.ok()) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return s;
}

std::string RedisProcess::url() const {
  std::string auth =
      options_.password.empty() ? "" : ":" + options_.password + "@";
  return "redis://" + auth + "127.0.0.1:" + std::to_string(port_) + "/0";
}

std::string RedisProcess::sentinel_url() const {
  std::string auth =
      options_.password.empty() ? "" : ":" + options_.password + "@";
  return "redis-sentinel://" + auth + "127.0.0.1:" + std::to_string(port_) +
         "/" + options_.master_name + "/0";
}

StatusOr<Reply> RedisProcess::Command(const std::vector<std::string>& argv) {
  RedisUrl url;
  url.host = "127.0.0.1";
  url.port = port_;
  if (options_.sentinel_for == 0) url.password = options_.password;
  auto c = RedisConnection::Connect(url, std::chrono::milliseconds(2000),
                                    std::chrono::milliseconds(5000));
  if (!c.ok()) return c.status();
  return c.value()->Command(argv);
}

Status RedisProcess::WaitForReplicas(int n, std::chrono::milliseconds timeout) {
  RedisUrl url;
  url.host = "127.0.0.1";
  url.port = port_;
  url.password = options_.password;
  auto c = RedisConnection::Connect(url, std::chrono::milliseconds(2000),
                                    timeout + std::chrono::milliseconds(5000));
  if (!c.ok()) return c.status();
  // WAIT counts the replicas that acknowledged this connection's last
  // write, so write one first.
  StatusOr<Reply> w = c.value()->Command({"SET", "umemcg-test:sync", "1"});
  if (!w.ok()) return w.status();
  if (w.value().is_error()) {
    return Status(StatusCode::kFailedPrecondition, w.value().str);
  }
  StatusOr<Reply> r = c.value()->Command(
      {"WAIT", std::to_string(n), std::to_string(timeout.count())});
  if (!r.ok()) return r.status();
  if (r.value().type != Reply::Type::kInteger || r.value().integer < n) {
    return Status(StatusCode::kAgain,
                  "fewer than " + std::to_string(n) +
                      " replicas acknowledged the writes in time");
  }
  return Status::Ok();
}

}  // namespace umemcg::cluster_internal

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The cluster quota's Redis client: URL parsing, and a synchronous
// connection (hiredis) with bounded connect and command timeouts, AUTH and
// SELECT, replies converted to a small value type, and scripts run with
// EVALSHA, falling back to EVAL when the server answers NOSCRIPT (after a
// restart or SCRIPT FLUSH). With a redis-sentinel:// URL, a connect first
// asks the sentinels for the current master (SENTINEL
// get-master-addr-by-name) and checks with ROLE that it is one.
//
// Client library: hiredis from Debian (libhiredis-dev). Bookworm ships
// 0.14.1, which has no TLS (hiredis_ssl came with 1.0): rediss:// URLs are
// refused with a clear error instead of silently connecting in clear text.
//
// Thread safety: ParseRedisUrl is a pure function. A RedisConnection is
// not thread-safe: callers serialize (the Cluster holds a mutex).

#ifndef UMEMCG_SRC_CLUSTER_REDIS_CLIENT_H_
#define UMEMCG_SRC_CLUSTER_REDIS_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "umemcg/status.h"

struct redisContext;

namespace umemcg::cluster_internal {

struct RedisUrl {
  std::string host;         // TCP host (empty with a Unix socket)
  int port = 6379;          // TCP port
  std::string unix_socket;  // unix:///path
  std::string user;         // ACL user ("" = default user)
  std::string password;     // "" = no AUTH
  int db = 0;
  // redis-sentinel://: the sentinels to ask (host, port; in the URL's
  // order) and the name of the master they monitor. host/port above are
  // then unused: the master is looked up at every connect.
  std::vector<std::pair<std::string, int>> sentinels;
  std::string master_name;

  bool sentinel() const { return !master_name.empty(); }
};

// Parses redis://[[user]:password@]host[:port][/db],
// redis://[...@][v6-address]:port, unix://[[user]:password@]/path[?db=N],
// or redis-sentinel://[[user]:password@]host[:port][,host[:port]...]/NAME[/db]
// (sentinels, port 26379 by default; the credentials and db are the
// master's: sentinels are asked without AUTH).
// Percent-escapes (%XX) are decoded in user and password. An empty string
// means redis://127.0.0.1:6379/0. kInvalidArgument names what is wrong;
// rediss:// is kFailedPrecondition (no TLS in this build).
StatusOr<RedisUrl> ParseRedisUrl(std::string_view url);

// "host:port/db", "unix:/path?db=N" or
// "redis-sentinel://host:port,.../NAME/db", without the credentials.
std::string RedisUrlForDisplay(const RedisUrl& url);

// A reply, converted from hiredis's.
struct Reply {
  enum class Type { kNil, kInteger, kString, kStatus, kError, kArray };
  Type type = Type::kNil;
  int64_t integer = 0;
  std::string str;  // string, status or error text
  std::vector<Reply> elements;

  bool is_error() const { return type == Type::kError; }
};

class RedisConnection {
 public:
  // Connects within `connect_timeout`, sets `command_timeout` on the
  // socket, authenticates and selects the database. kAgain when the server
  // cannot be reached, kPermissionDenied when AUTH is refused. A sentinel
  // URL connects to the master the first answering sentinel names, and
  // only if it says it is a master (ROLE): kAgain otherwise (a failover in
  // progress, or the sentinels all unreachable).
  static StatusOr<std::unique_ptr<RedisConnection>> Connect(
      const RedisUrl& url, std::chrono::milliseconds connect_timeout,
      std::chrono::milliseconds command_timeout);
  ~RedisConnection();

  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends one command and waits (at most the command timeout) for its
  // reply. An error reply is a Reply (is_error), not a Status; a Status
  // error (kAgain) means the connection failed and is now broken().
  StatusOr<Reply> Command(const std::vector<std::string>& argv);

  // Runs `script` with KEYS = `keys` and ARGV = `args`: EVALSHA of its
  // SHA1 (learned from SCRIPT LOAD on first use), EVAL on NOSCRIPT.
  StatusOr<Reply> Eval(const char* script, const std::vector<std::string>& keys,
                       const std::vector<std::string>& args);

  // Pub/sub: after a successful Command({"SUBSCRIBE", channel}) the
  // connection only receives. Returns the messages ("message" replies:
  // their payloads) that have arrived, without waiting; kAgain when the
  // connection broke.
  StatusOr<std::vector<std::string>> PollMessages();

  // Marks the connection broken (the caller saw it talk to the wrong
  // server: a READONLY replica after a failover).
  void MarkBroken() { broken_ = true; }
  bool broken() const { return broken_; }
  // The server this connection talks to: "host:port" or the socket path.
  const std::string& address() const { return address_; }
  // Commands sent on this connection (EVALSHA + EVAL fallbacks, ...).
  uint64_t commands() const { return commands_; }

 private:
  RedisConnection() = default;

  // One server, no sentinel lookup.
  static StatusOr<std::unique_ptr<RedisConnection>> ConnectDirect(
      const RedisUrl& url, std::chrono::milliseconds connect_timeout,
      std::chrono::milliseconds command_timeout);

  redisContext* ctx_ = nullptr;
  std::string address_;
  bool broken_ = false;
  uint64_t commands_ = 0;
  // SHA1 per script text pointer (the scripts are static constants).
  std::vector<std::pair<const char*, std::string>> shas_;
};

// Asks the sentinels of `url` (a sentinel URL), in order, for the current
// address of its master: a plain URL to it (same credentials and db).
// kAgain when no sentinel answered, kNotFound when they do not know the
// name.
StatusOr<RedisUrl> ResolveSentinelMaster(
    const RedisUrl& url, std::chrono::milliseconds connect_timeout,
    std::chrono::milliseconds command_timeout);

// True for an error reply saying the server is a read-only replica (a
// command or a script's write: "READONLY You can't write against a read
// only replica"): the master moved.
bool IsReadOnlyError(const Reply& reply);

// Maps a script's error reply to a Status: UMEMCG_NOTFOUND -> kNotFound,
// UMEMCG_BUSY -> kBusy, UMEMCG_INVALID -> kInvalidArgument, anything else
// (UMEMCG_CORRUPT, a Lua error, WRONGTYPE, ...) -> kFailedPrecondition
// "redis script error: ...".
Status ScriptError(const Reply& reply);

}  // namespace umemcg::cluster_internal

#endif  // UMEMCG_SRC_CLUSTER_REDIS_CLIENT_H_

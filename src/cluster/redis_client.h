// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The cluster quota's Redis client: URL parsing, and a synchronous
// connection (hiredis) with bounded connect and command timeouts, AUTH and
// SELECT, replies converted to a small value type, and scripts run with
// EVALSHA, falling back to EVAL when the server answers NOSCRIPT (after a
// restart or SCRIPT FLUSH).
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
};

// Parses redis://[[user]:password@]host[:port][/db],
// redis://[...@][v6-address]:port, or unix://[[user]:password@]/path[?db=N].
// Percent-escapes (%XX) are decoded in user and password. An empty string
// means redis://127.0.0.1:6379/0. kInvalidArgument names what is wrong;
// rediss:// is kFailedPrecondition (no TLS in this build).
StatusOr<RedisUrl> ParseRedisUrl(std::string_view url);

// "host:port/db" or "unix:/path?db=N", without the credentials.
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
  // cannot be reached, kPermissionDenied when AUTH is refused.
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

  bool broken() const { return broken_; }
  // Commands sent on this connection (EVALSHA + EVAL fallbacks, ...).
  uint64_t commands() const { return commands_; }

 private:
  RedisConnection() = default;

  redisContext* ctx_ = nullptr;
  bool broken_ = false;
  uint64_t commands_ = 0;
  // SHA1 per script text pointer (the scripts are static constants).
  std::vector<std::pair<const char*, std::string>> shas_;
};

// Maps a script's error reply to a Status: UMEMCG_NOTFOUND -> kNotFound,
// UMEMCG_BUSY -> kBusy, UMEMCG_INVALID -> kInvalidArgument, anything else
// (UMEMCG_CORRUPT, a Lua error, WRONGTYPE, ...) -> kFailedPrecondition
// "redis script error: ...".
Status ScriptError(const Reply& reply);

}  // namespace umemcg::cluster_internal

#endif  // UMEMCG_SRC_CLUSTER_REDIS_CLIENT_H_

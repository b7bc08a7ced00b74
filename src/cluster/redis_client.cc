// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "cluster/redis_client.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>

namespace umemcg::cluster_internal {
namespace {

Status Invalid(const std::string& what) {
  return Status(StatusCode::kInvalidArgument, "redis URL: " + what);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes; false on a malformed escape.
bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

// A decimal in [lo, hi] making up all of `s`.
bool ParseDecimal(std::string_view s, int lo, int hi, int* out) {
  if (s.empty() || s.size() > 9) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool HasControl(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  }
  return false;
}

// "[user]:password" or "password"-less forms before '@'.
Status ParseUserInfo(std::string_view info, RedisUrl* url) {
  const size_t colon = info.find(':');
  std::string user, password;
  if (colon == std::string_view::npos) {
    // redis://user@host: a user without a password makes no AUTH.
    if (!PercentDecode(info, &user)) return Invalid("bad %-escape in user");
  } else {
    if (!PercentDecode(info.substr(0, colon), &user) ||
        !PercentDecode(info.substr(colon + 1), &password)) {
      return Invalid("bad %-escape in credentials");
    }
  }
  if (HasControl(user) || HasControl(password)) {
    return Invalid("control character in credentials");
  }
  url->user = std::move(user);
  url->password = std::move(password);
  return Status::Ok();
}

constexpr int kSentinelPort = 26379;

std::string HostPortForDisplay(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// host[:port] or [v6-address][:port]; `*port` keeps its default when the
// text has none.
Status ParseHostPort(std::string_view hostport, std::string* host_out,
                     int* port_out) {
  std::string_view host = hostport;
  std::string_view port;
  if (!hostport.empty() && hostport[0] == '[') {
    const size_t close = hostport.find(']');
    if (close == std::string_view::npos) return Invalid("unclosed '['");
    host = hostport.substr(1, close - 1);
    std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return Invalid("expected ':' after ']'");
      port = after.substr(1);
      if (port.empty()) return Invalid("empty port");
    }
  } else {
    const size_t colon = hostport.rfind(':');
    if (colon != std::string_view::npos) {
      host = hostport.substr(0, colon);
      port = hostport.substr(colon + 1);
      if (port.empty()) return Invalid("empty port");
      if (host.find(':') != std::string_view::npos) {
        return Invalid("IPv6 addresses go in brackets: [::1]:6379");
      }
    }
  }
  if (host.empty()) return Invalid("missing host");
  for (char c : host) {
    if (c == '/' || c == '@' || c == '?' || c == '#' || c == ' ' || c == '[' ||
        c == ']' || c == ',') {
      return Invalid("bad character in host '" + std::string(host) + "'");
    }
  }
  if (!port.empty() && !ParseDecimal(port, 1, 65535, port_out)) {
    return Invalid("port must be 1..65535, not '" + std::string(port) + "'");
  }
  *host_out = std::string(host);
  return Status::Ok();
}

}  // namespace

StatusOr<RedisUrl> ParseRedisUrl(std::string_view text) {
  RedisUrl url;
  if (text.empty()) {
    url.host = "127.0.0.1";
    return url;
  }
  if (HasControl(text)) return Invalid("control character");
  const size_t scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos) {
    return Invalid(
        "expected redis://host:port[/db], unix:///path or "
        "redis-sentinel://host:port[,host:port...]/MASTER_NAME");
  }
  const std::string_view scheme = text.substr(0, scheme_end);
  std::string_view rest = text.substr(scheme_end + 3);
  if (scheme == "rediss") {
    return Status(StatusCode::kFailedPrecondition,
                  "rediss:// (TLS) is not supported: this build's Redis "
                  "client, hiredis 0.14 (Debian bookworm's libhiredis), has "
                  "no TLS; use redis:// on a trusted network or a TLS tunnel");
  }
  if (scheme != "redis" && scheme != "unix" && scheme != "redis-sentinel") {
    return Invalid("unknown scheme '" + std::string(scheme) + "'");
  }
  // Credentials: up to the last '@' (a password may contain '@' only
  // escaped, but be lenient).
  const size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    Status s = ParseUserInfo(rest.substr(0, at), &url);
    if (!s.ok()) return s;
    rest = rest.substr(at + 1);
  }
  if (scheme == "unix") {
    const size_t q = rest.find('?');
    std::string_view path = rest.substr(0, q);
    if (path.empty() || path[0] != '/') {
      return Invalid("unix:// needs an absolute socket path");
    }
    url.unix_socket = std::string(path);
    if (q != std::string_view::npos) {
      std::string_view query = rest.substr(q + 1);
      if (!query.starts_with("db=") ||
          !ParseDecimal(query.substr(3), 0, 1 << 20, &url.db)) {
        return Invalid("expected ?db=N after the socket path");
      }
    }
    return url;
  }
  if (scheme == "redis-sentinel") {
    // host[:port][,host[:port]...]/NAME[/db]
    const size_t slash = rest.find('/');
    if (slash == std::string_view::npos) {
      return Invalid(
          "redis-sentinel:// needs /MASTER_NAME after the sentinels");
    }
    std::string_view list = rest.substr(0, slash);
    std::string_view after = rest.substr(slash + 1);
    const size_t slash2 = after.find('/');
    const std::string_view name = after.substr(0, slash2);
    if (name.empty() || name.size() > 128) {
      return Invalid("master name must be 1..128 characters");
    }
    for (char c : name) {
      if (c == ' ' || c == '?' || c == '#' || c == '@' || c == ',') {
        return Invalid("bad character in master name '" + std::string(name) +
                       "'");
      }
    }
    if (slash2 != std::string_view::npos) {
      std::string_view db = after.substr(slash2 + 1);
      if (!db.empty() && !ParseDecimal(db, 0, 1 << 20, &url.db)) {
        return Invalid("database must be a number, not '" + std::string(db) +
                       "'");
      }
    }
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(',', start);
      if (end == std::string_view::npos) end = list.size();
      std::string host;
      int port = kSentinelPort;
      Status s = ParseHostPort(list.substr(start, end - start), &host, &port);
      if (!s.ok()) return s;
      if (url.sentinels.size() >= 16) return Invalid("at most 16 sentinels");
      url.sentinels.emplace_back(std::move(host), port);
      start = end + 1;
    }
    url.master_name = std::string(name);
    return url;
  }
  // host[:port][/db]
  const size_t slash = rest.find('/');
  std::string_view hostport = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && !ParseDecimal(db, 0, 1 << 20, &url.db)) {
      return Invalid("database must be a number, not '" + std::string(db) +
                     "'");
    }
  }
  Status s = ParseHostPort(hostport, &url.host, &url.port);
  if (!s.ok()) return s;
  return url;
}

std::string RedisUrlForDisplay(const RedisUrl& url) {
  if (!url.unix_socket.empty()) {
    return "unix:" + url.unix_socket + "?db=" + std::to_string(url.db);
  }
  if (url.sentinel()) {
    std::string out = "redis-sentinel://";
    for (size_t i = 0; i < url.sentinels.size(); ++i) {
      if (i > 0) out += ",";
      out +=
          HostPortForDisplay(url.sentinels[i].first, url.sentinels[i].second);
    }
    return out + "/" + url.master_name + "/" + std::to_string(url.db);
  }
  return HostPortForDisplay(url.host, url.port) + "/" + std::to_string(url.db);
}

namespace {

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

Reply Convert(const redisReply* r) {
  Reply out;
  switch (r->type) {
    case REDIS_REPLY_INTEGER:
      out.type = Reply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_STRING:
      out.type = Reply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = Reply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = Reply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ARRAY:
      out.type = Reply::Type::kArray;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) {
        out.elements.push_back(Convert(r->element[i]));
      }
      break;
    default:
      out.type = Reply::Type::kNil;
  }
  return out;
}

}  // namespace

StatusOr<RedisUrl> ResolveSentinelMaster(
    const RedisUrl& url, std::chrono::milliseconds connect_timeout,
    std::chrono::milliseconds command_timeout) {
  std::string errors;
  bool unknown = false;
  for (const auto& [host, port] : url.sentinels) {
    RedisUrl s;
    s.host = host;
    s.port = port;
    const std::string where = RedisUrlForDisplay(s);
    StatusOr<std::unique_ptr<RedisConnection>> c =
        RedisConnection::Connect(s, connect_timeout, command_timeout);
    StatusOr<Reply> r =
        c.ok() ? c.value()->Command(
                     {"SENTINEL", "get-master-addr-by-name", url.master_name})
               : StatusOr<Reply>(c.status());
    if (!r.ok()) {
      errors += "; ";
      errors += r.status().message();
      continue;
    }
    const Reply& a = r.value();
    if (a.type == Reply::Type::kNil) {
      unknown = true;
      errors +=
          "; sentinel " + where + " does not know '" + url.master_name + "'";
      continue;
    }
    int master_port = 0;
    if (a.type != Reply::Type::kArray || a.elements.size() != 2 ||
        a.elements[0].type != Reply::Type::kString ||
        a.elements[0].str.empty() ||
        a.elements[1].type != Reply::Type::kString ||
        !ParseDecimal(a.elements[1].str, 1, 65535, &master_port)) {
      errors += "; sentinel " + where + ": unexpected answer" +
                (a.is_error() ? ": " + a.str : "");
      continue;
    }
    RedisUrl m;
    m.host = a.elements[0].str;
    m.port = master_port;
    m.user = url.user;
    m.password = url.password;
    m.db = url.db;
    return m;
  }
  return Status(unknown ? StatusCode::kNotFound : StatusCode::kAgain,
                "redis sentinels of '" + url.master_name +
                    "': no master address" + errors);
}

bool IsReadOnlyError(const Reply& reply) {
  return reply.is_error() &&
         std::string_view(reply.str).find("READONLY") != std::string_view::npos;
}

StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Connect(
    const RedisUrl& url, std::chrono::milliseconds connect_timeout,
    std::chrono::milliseconds command_timeout) {
  if (!url.sentinel())
    return ConnectDirect(url, connect_timeout, command_timeout);
  StatusOr<RedisUrl> master =
      ResolveSentinelMaster(url, connect_timeout, command_timeout);
  if (!master.ok()) {
    return Status(StatusCode::kAgain, std::string(master.status().message()));
  }
  StatusOr<std::unique_ptr<RedisConnection>> c =
      ConnectDirect(master.value(), connect_timeout, command_timeout);
  if (!c.ok()) return c;
  // The sentinels' view may lag behind a failover (or run ahead of the
  // promotion): trust only a server that says it is a master.
  StatusOr<Reply> role = c.value()->Command({"ROLE"});
  if (!role.ok()) return role.status();
  const Reply& r = role.value();
  if (r.type != Reply::Type::kArray || r.elements.empty() ||
      r.elements[0].str != "master") {
    return Status(StatusCode::kAgain,
                  "redis " + c.value()->address() + ", named master of '" +
                      url.master_name +
                      "' by the sentinels, is not a master (failover in "
                      "progress)");
  }
  return c;
}

StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::ConnectDirect(
    const RedisUrl& url, std::chrono::milliseconds connect_timeout,
    std::chrono::milliseconds command_timeout) {
  std::unique_ptr<RedisConnection> conn(new RedisConnection());
  conn->address_ = url.unix_socket.empty()
                       ? HostPortForDisplay(url.host, url.port)
                       : url.unix_socket;
  const timeval ctv = ToTimeval(connect_timeout);
  conn->ctx_ = url.unix_socket.empty()
                   ? redisConnectWithTimeout(url.host.c_str(), url.port, ctv)
                   : redisConnectUnixWithTimeout(url.unix_socket.c_str(), ctv);
  const std::string where = RedisUrlForDisplay(url);
  if (conn->ctx_ == nullptr) {
    return Status(StatusCode::kAgain,
                  "redis " + where + ": cannot allocate a connection");
  }
  if (conn->ctx_->err != 0) {
    return Status(StatusCode::kAgain,
                  "redis " + where + " unreachable: " + conn->ctx_->errstr);
  }
  if (redisSetTimeout(conn->ctx_, ToTimeval(command_timeout)) != REDIS_OK) {
    return Status(StatusCode::kAgain,
                  "redis " + where + ": cannot set timeout");
  }
  if (url.unix_socket.empty()) (void)redisEnableKeepAlive(conn->ctx_);
  if (!url.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!url.user.empty()) auth.push_back(url.user);
    auth.push_back(url.password);
    StatusOr<Reply> r = conn->Command(auth);
    if (!r.ok()) return r.status();
    if (r.value().is_error()) {
      return Status(StatusCode::kPermissionDenied,
                    "redis " + where + ": AUTH refused: " + r.value().str);
    }
  }
  if (url.db != 0) {
    StatusOr<Reply> r = conn->Command({"SELECT", std::to_string(url.db)});
    if (!r.ok()) return r.status();
    if (r.value().is_error()) {
      return Status(StatusCode::kInvalidArgument,
                    "redis " + where + ": SELECT refused: " + r.value().str);
    }
  }
  return conn;
}

StatusOr<std::vector<std::string>> RedisConnection::PollMessages() {
  std::vector<std::string> out;
  if (broken_) return Status(StatusCode::kAgain, "redis connection is broken");
  for (;;) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(ctx_, &raw) != REDIS_OK) {
      broken_ = true;
      return Status(StatusCode::kAgain, "redis: malformed pub/sub data");
    }
    if (raw == nullptr) {
      // Nothing parsed: read what the socket has, without waiting.
      pollfd p{ctx_->fd, POLLIN, 0};
      if (poll(&p, 1, 0) <= 0) return out;
      if (redisBufferRead(ctx_) != REDIS_OK) {
        broken_ = true;
        return Status(StatusCode::kAgain, "redis: pub/sub connection lost");
      }
      if (redisGetReplyFromReader(ctx_, &raw) != REDIS_OK) {
        broken_ = true;
        return Status(StatusCode::kAgain, "redis: malformed pub/sub data");
      }
      if (raw == nullptr) return out;
    }
    auto* r = static_cast<redisReply*>(raw);
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
        r->element[0]->type == REDIS_REPLY_STRING &&
        std::string_view(r->element[0]->str, r->element[0]->len) == "message" &&
        r->element[2]->type == REDIS_REPLY_STRING) {
      out.emplace_back(r->element[2]->str, r->element[2]->len);
    }
    freeReplyObject(r);
  }
}

RedisConnection::~RedisConnection() {
  if (ctx_ != nullptr) redisFree(ctx_);
}

StatusOr<Reply> RedisConnection::Command(const std::vector<std::string>& argv) {
  if (broken_) return Status(StatusCode::kAgain, "redis connection is broken");
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  ptrs.reserve(argv.size());
  lens.reserve(argv.size());
  for (const std::string& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  ++commands_;
  auto* r = static_cast<redisReply*>(redisCommandArgv(
      ctx_, static_cast<int>(argv.size()), ptrs.data(), lens.data()));
  if (r == nullptr) {
    broken_ = true;
    return Status(
        StatusCode::kAgain,
        std::string("redis: ") + (ctx_->err != 0 ? ctx_->errstr : "no reply") +
            (ctx_->err == REDIS_ERR_IO && errno == EAGAIN ? " (command timeout)"
                                                          : ""));
  }
  Reply out = Convert(r);
  freeReplyObject(r);
  return out;
}

StatusOr<Reply> RedisConnection::Eval(const char* script,
                                      const std::vector<std::string>& keys,
                                      const std::vector<std::string>& args) {
  std::string* sha = nullptr;
  for (auto& [text, s] : shas_) {
    if (text == script) sha = &s;
  }
  if (sha == nullptr) {
    StatusOr<Reply> loaded = Command({"SCRIPT", "LOAD", script});
    if (!loaded.ok()) return loaded.status();
    if (loaded.value().type != Reply::Type::kString) {
      return Status(StatusCode::kFailedPrecondition,
                    "redis SCRIPT LOAD failed: " + loaded.value().str);
    }
    shas_.emplace_back(script, loaded.value().str);
    sha = &shas_.back().second;
  }
  std::vector<std::string> argv = {"EVALSHA", *sha,
                                   std::to_string(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  StatusOr<Reply> r = Command(argv);
  if (!r.ok() || !r.value().is_error() ||
      !r.value().str.starts_with("NOSCRIPT")) {
    return r;
  }
  // The server lost its script cache (restart, SCRIPT FLUSH): EVAL caches
  // the script again, so EVALSHA works from the next call on.
  argv[0] = "EVAL";
  argv[1] = script;
  return Command(argv);
}

Status ScriptError(const Reply& reply) {
  std::string_view msg = reply.str;
  // Redis 7 appends where a script raised the error.
  if (const size_t at = msg.find(" script: "); at != std::string_view::npos) {
    msg = msg.substr(0, at);
  }
  auto strip = [&msg](std::string_view code) {
    // "UMEMCG_X msg", possibly after "ERR " or a Lua location prefix.
    const size_t at = msg.find(code);
    if (at == std::string_view::npos) return false;
    msg = msg.substr(at + code.size());
    if (!msg.empty() && msg[0] == ' ') msg.remove_prefix(1);
    return true;
  };
  if (strip("UMEMCG_NOTFOUND")) return Status(StatusCode::kNotFound, msg);
  if (strip("UMEMCG_BUSY")) return Status(StatusCode::kBusy, msg);
  if (strip("UMEMCG_INVALID")) return Status(StatusCode::kInvalidArgument, msg);
  return Status(StatusCode::kFailedPrecondition,
                "redis script error: " + std::string(msg));
}

}  // namespace umemcg::cluster_internal

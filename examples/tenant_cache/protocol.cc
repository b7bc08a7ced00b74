// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "protocol.h"

#include <charconv>
#include <vector>

#include "umemcg/status.h"

namespace tenant_cache {
namespace {

constexpr size_t kMaxLine = 8192;
constexpr size_t kMaxData = size_t{64} << 20;
constexpr size_t kMaxKey = 250;  // memcached's limit

std::vector<std::string_view> Tokens(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

template <class T>
bool ParseNumber(std::string_view s, T* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

void AppendError(const umemcg::Status& s, std::string& out) {
  out += "ERROR ";
  out += umemcg::StatusCodeName(s.code());
  if (!s.message().empty()) {
    out += ' ';
    out += s.message();
  }
  out += "\r\n";
}

}  // namespace

bool SplitKey(std::string_view full, std::string_view* tenant,
              std::string_view* key) {
  if (full.empty() || full.size() > kMaxKey) return false;
  for (char c : full) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return false;
  }
  const size_t colon = full.find(':');
  if (colon == std::string_view::npos) {
    *tenant = "default";
    *key = full;
  } else {
    *tenant = full.substr(0, colon);
    *key = full.substr(colon + 1);
  }
  return !tenant->empty() && !key->empty();
}

bool Session::Process(std::string& in, std::string& out) {
  size_t pos = 0;
  bool keep = true;
  while (keep) {
    if (swallow_line_) {  // the rest of a bad data chunk (memcached does)
      const size_t eol = in.find('\n', pos);
      if (eol == std::string::npos) {
        pos = in.size();
        break;
      }
      pos = eol + 1;
      swallow_line_ = false;
    }
    if (in_set_) {
      if (in.size() - pos < data_bytes_ + 2) break;
      const std::string_view data(in.data() + pos, data_bytes_);
      const bool terminated = in.compare(pos + data_bytes_, 2, "\r\n") == 0;
      in_set_ = false;
      if (!terminated) {
        out += "CLIENT_ERROR bad data chunk\r\n";
        pos += data_bytes_;
        swallow_line_ = true;
        continue;
      }
      pos += data_bytes_ + 2;
      FinishSet(data, out);
      continue;
    }
    const size_t eol = in.find('\n', pos);
    if (eol == std::string::npos) {
      if (in.size() - pos > kMaxLine) {
        out += "CLIENT_ERROR line too long\r\n";
        keep = false;
      }
      break;
    }
    std::string_view line(in.data() + pos, eol - pos);
    pos = eol + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > kMaxLine) {
      out += "CLIENT_ERROR line too long\r\n";
      keep = false;
      break;
    }
    keep = HandleLine(line, out);
  }
  in.erase(0, pos);
  return keep;
}

bool Session::HandleLine(std::string_view line, std::string& out) {
  const size_t sp = line.find(' ');
  const std::string_view cmd = line.substr(0, sp);
  const std::string_view args =
      sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
  if (cmd == "get" || cmd == "gets") {
    HandleGet(args, out);
  } else if (cmd == "set") {
    HandleSet(args, out);
    // A set whose data block could not be sized cannot be resynced.
    if (!in_set_ && data_bytes_ > kMaxData) return false;
  } else if (cmd == "delete") {
    HandleDelete(args, out);
  } else if (cmd == "stats") {
    HandleStats(out);
  } else if (cmd == "admin") {
    HandleAdmin(args, out);
  } else if (cmd == "version") {
    out += "VERSION umemcg-tenant-cache 0.1\r\n";
  } else if (cmd == "quit") {
    return false;
  } else {
    out += "ERROR\r\n";
  }
  return true;
}

void Session::HandleSet(std::string_view args, std::string& out) {
  const auto t = Tokens(args);
  std::string_view tenant, key;
  uint32_t flags = 0;
  int64_t exptime = 0;
  size_t bytes = 0;
  data_bytes_ = 0;
  if (t.size() < 4 || t.size() > 5 || !SplitKey(t[0], &tenant, &key) ||
      !ParseNumber(t[1], &flags) || !ParseNumber(t[2], &exptime) ||
      !ParseNumber(t[3], &bytes) || (t.size() == 5 && t[4] != "noreply")) {
    out += "CLIENT_ERROR bad command line format\r\n";
    return;
  }
  if (bytes > kMaxData) {
    out += "SERVER_ERROR object too large for cache\r\n";
    data_bytes_ = bytes;  // HandleLine closes the session
    return;
  }
  in_set_ = true;
  noreply_ = t.size() == 5;
  data_bytes_ = bytes;
  set_flags_ = flags;
  set_key_.assign(t[0]);
}

void Session::FinishSet(std::string_view data, std::string& out) {
  std::string_view tenant, key;
  (void)SplitKey(set_key_, &tenant, &key);
  const char* reply;
  switch (cache_.Set(tenant, key, data, set_flags_)) {
    case SetResult::kStored:
      reply = "STORED\r\n";
      break;
    case SetResult::kTooLarge:
      reply = "SERVER_ERROR object too large for cache\r\n";
      break;
    case SetResult::kOutOfMemory:
      reply = "SERVER_ERROR out of memory storing object\r\n";
      break;
    case SetResult::kSuspended:
      reply = "SERVER_ERROR tenant suspended under memory pressure\r\n";
      break;
    case SetResult::kNoTenant:
    default:
      reply = "CLIENT_ERROR no such tenant (bad name or too many)\r\n";
      break;
  }
  if (!noreply_) out += reply;
}

void Session::HandleGet(std::string_view args, std::string& out) {
  const auto keys = Tokens(args);
  if (keys.empty()) {
    out += "ERROR\r\n";
    return;
  }
  std::string value;
  for (std::string_view full : keys) {
    std::string_view tenant, key;
    if (!SplitKey(full, &tenant, &key)) {
      out += "CLIENT_ERROR bad key\r\n";
      return;
    }
    uint32_t flags = 0;
    if (cache_.Get(tenant, key, &value, &flags)) {
      out += "VALUE ";
      out += full;
      out += ' ' + std::to_string(flags) + ' ' + std::to_string(value.size()) +
             "\r\n";
      out += value;
      out += "\r\n";
    }
  }
  out += "END\r\n";
}

void Session::HandleDelete(std::string_view args, std::string& out) {
  const auto t = Tokens(args);
  std::string_view tenant, key;
  if (t.empty() || t.size() > 2 || !SplitKey(t[0], &tenant, &key) ||
      (t.size() == 2 && t[1] != "noreply")) {
    out += "CLIENT_ERROR bad command line format\r\n";
    return;
  }
  const bool deleted = cache_.Delete(tenant, key);
  if (t.size() == 1) out += deleted ? "DELETED\r\n" : "NOT_FOUND\r\n";
}

void Session::HandleStats(std::string& out) {
  for (const TenantStats& s : cache_.Stats()) {
    const std::string p = "STAT " + s.name + ".";
    out += p + "items " + std::to_string(s.items) + "\r\n";
    out += p + "evictions " + std::to_string(s.evictions) + "\r\n";
    out += p + "bytes " + std::to_string(s.bytes) + "\r\n";
    out += p + "usage_pages " + std::to_string(s.usage_pages) + "\r\n";
    out += p + "pressure_kills " + std::to_string(s.pressure_kills) + "\r\n";
    out += p + "suspended " + std::to_string(s.suspended ? 1 : 0) + "\r\n";
  }
  out += "END\r\n";
}

void Session::HandleAdmin(std::string_view args, std::string& out) {
  const size_t sp = args.find(' ');
  const std::string_view verb = args.substr(0, sp);
  std::string_view rest =
      sp == std::string_view::npos ? std::string_view() : args.substr(sp + 1);
  auto next = [&rest]() {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    const size_t end = rest.find(' ');
    const std::string_view tok = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view()
                                         : rest.substr(end + 1);
    return tok;
  };
  std::string_view tenant = next();
  if (tenant == "-") tenant = "";
  if (verb == "create" && !tenant.empty() && rest.empty()) {
    const umemcg::Status s = cache_.CreateTenant(tenant);
    s.ok() ? void(out += "OK\r\n") : AppendError(s, out);
    return;
  }
  const std::string_view file = next();
  if (verb == "read" && !file.empty() && rest.empty()) {
    auto text = cache_.ReadFile(tenant, file);
    if (!text.ok()) {
      AppendError(text.status(), out);
      return;
    }
    out += "FILE " + std::to_string(text.value().size()) + "\r\n";
    out += text.value();
    out += "\r\nEND\r\n";
    return;
  }
  if (verb == "write" && !file.empty() && !rest.empty()) {
    const umemcg::Status s = cache_.WriteFile(tenant, file, rest);
    s.ok() ? void(out += "OK\r\n") : AppendError(s, out);
    return;
  }
  out += "CLIENT_ERROR usage: admin read|write|create <tenant|-> ...\r\n";
}

}  // namespace tenant_cache

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Session: the tenant cache's text protocol, a memcached subset plus admin
// commands, independent of sockets. Keys are "<tenant>:<key>" (a key
// without ':' belongs to tenant "default"), so any memcached client works.
//
//   set <key> <flags> <exptime> <bytes> [noreply]\r\n<data>\r\n
//        -> STORED | SERVER_ERROR out of memory storing object
//           | SERVER_ERROR object too large for cache
//           | SERVER_ERROR tenant suspended under memory pressure
//           | CLIENT_ERROR ...
//   get <key>+            -> VALUE <key> <flags> <bytes>\r\n<data>\r\n... END
//   delete <key> [noreply] -> DELETED | NOT_FOUND
//   stats                 -> STAT <tenant>.<field> <n> ... END
//   admin read <tenant|-> <file>          -> FILE <n>\r\n<text>\r\nEND
//   admin write <tenant|-> <file> <text>  -> OK | ERROR <code> <message>
//   admin create <tenant>                 -> OK | ERROR ...
//   version | quit
// "-" names the parent group "tenants". exptime is accepted and ignored
// (items leave by delete or eviction only). A malformed line gets an
// error line and the session goes on; a line over 8 KiB or a data block
// over 64 MiB ends it.
//
// Thread safety: a Session belongs to one connection (one thread); many
// sessions share the TenantCache.

#ifndef UMEMCG_EXAMPLES_TENANT_CACHE_PROTOCOL_H_
#define UMEMCG_EXAMPLES_TENANT_CACHE_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "tenant_cache.h"

namespace tenant_cache {

class Session {
 public:
  explicit Session(TenantCache& cache) : cache_(cache) {}

  // Consumes the complete commands at the front of `in` (leaving a partial
  // one there) and appends their replies to `out`. Returns false when the
  // connection should close (quit, or input too malformed to resync).
  bool Process(std::string& in, std::string& out);

 private:
  bool HandleLine(std::string_view line, std::string& out);
  void HandleSet(std::string_view line, std::string& out);
  void HandleGet(std::string_view args, std::string& out);
  void HandleDelete(std::string_view args, std::string& out);
  void HandleAdmin(std::string_view args, std::string& out);
  void HandleStats(std::string& out);
  void FinishSet(std::string_view data, std::string& out);

  TenantCache& cache_;
  // A set waiting for its data block (data_bytes_ + "\r\n").
  bool in_set_ = false;
  bool swallow_line_ = false;  // skip to the next '\n' (after a bad chunk)
  bool noreply_ = false;
  bool too_large_ = false;
  size_t data_bytes_ = 0;
  uint32_t set_flags_ = 0;
  std::string set_key_;
};

// Splits "<tenant>:<key>"; false if the key is malformed (empty, too long,
// control characters or spaces).
bool SplitKey(std::string_view full, std::string_view* tenant,
              std::string_view* key);

}  // namespace tenant_cache

#endif  // UMEMCG_EXAMPLES_TENANT_CACHE_PROTOCOL_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Value parsing and formatting of the memory files, re-expressing the
// kernel's memparse() / page_counter_memparse() / kstrtoint() rules (see
// files.h). One deliberate difference: where the kernel's simple_strtoull
// silently wraps on overflow, sizes saturate (and so read back as "max").

#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include "files/parse.h"
#include "umemcg/files.h"

namespace umemcg {
namespace internal {

std::string_view StripSpace(std::string_view s) {
  // The kernel's strstrip(): isspace() on both ends.
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
           c == '\r';
  };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

size_t ParseUnsigned(std::string_view s, uint64_t* value, bool* overflow) {
  // Radix as _parse_integer_fixup_radix(): "0x" + hex digit -> 16 (prefix
  // skipped), a leading "0" -> 8, else 10.
  size_t i = 0;
  unsigned base = 10;
  if (s.size() >= 3 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') &&
      std::isxdigit(static_cast<unsigned char>(s[2]))) {
    base = 16;
    i = 2;
  } else if (!s.empty() && s[0] == '0') {
    base = 8;
  }
  uint64_t v = 0;
  *overflow = false;
  for (; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    unsigned d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      break;
    }
    if (d >= base) break;
    if (v > (UINT64_MAX - d) / base) {
      *overflow = true;
      v = UINT64_MAX;
    } else if (!*overflow) {
      v = v * base + d;
    }
  }
  *value = v;
  // Base 8 always consumed its leading '0' and base 16 a hex digit.
  return i;
}

size_t MemParse(std::string_view s, uint64_t* bytes) {
  bool overflow = false;
  uint64_t v = 0;
  // No digits is not the end: like the kernel's, a suffix alone ("K") is
  // consumed and reads as 0.
  size_t n = ParseUnsigned(s, &v, &overflow);
  int shift = 0;
  if (n < s.size()) {
    switch (s[n]) {
      case 'E':
      case 'e':
        shift = 60;
        break;
      case 'P':
      case 'p':
        shift = 50;
        break;
      case 'T':
      case 't':
        shift = 40;
        break;
      case 'G':
      case 'g':
        shift = 30;
        break;
      case 'M':
      case 'm':
        shift = 20;
        break;
      case 'K':
      case 'k':
        shift = 10;
        break;
      default:
        break;
    }
    if (shift != 0) ++n;
  }
  if (shift != 0 && v > (UINT64_MAX >> shift)) overflow = true;
  *bytes = overflow ? UINT64_MAX : v << shift;
  return n;
}

}  // namespace internal

using internal::MemParse;
using internal::StripSpace;

StatusOr<uint64_t> ParseMemorySize(std::string_view text) {
  const std::string_view s = StripSpace(text);
  uint64_t bytes = 0;
  const size_t n = MemParse(s, &bytes);
  if (n == 0 || n != s.size()) {
    return Status(StatusCode::kInvalidArgument,
                  "not a size: '" + std::string(text) + "'");
  }
  return bytes;
}

StatusOr<Pages> ParseMemoryLimit(std::string_view text) {
  const std::string_view s = StripSpace(text);
  if (s == "max") return kPageCounterMax;
  uint64_t bytes = 0;
  const size_t n = MemParse(s, &bytes);
  // The kernel accepts an empty string as 0 (memparse consumes nothing and
  // the end pointer is already at the terminator).
  if (n != s.size()) {
    return Status(StatusCode::kInvalidArgument,
                  "not a size or \"max\": '" + std::string(text) + "'");
  }
  const uint64_t pages = bytes / kPageSize;  // floor, as the kernel does
  return pages >= kPageCounterMax.raw() ? kPageCounterMax : Pages(pages);
}

std::string FormatMemoryLimit(Pages pages) {
  if (pages >= kPageCounterMax) return "max\n";
  return std::to_string(pages.in_bytes()) + "\n";
}

}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Low-level parsing shared by the memory files.

#ifndef UMEMCG_SRC_FILES_PARSE_H_
#define UMEMCG_SRC_FILES_PARSE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace umemcg::internal {

// The kernel's strstrip(): removes isspace() characters at both ends.
std::string_view StripSpace(std::string_view s);

// An unsigned integer with C-style radix (0x -> 16, leading 0 -> 8, else
// 10) at the start of `s`; returns the characters consumed (0 if none).
// Saturates at UINT64_MAX and sets *overflow.
size_t ParseUnsigned(std::string_view s, uint64_t* value, bool* overflow);

// The kernel's memparse(): ParseUnsigned plus at most one K/M/G/T/P/E
// suffix (either case, powers of 1024), consumed even after no digits (a
// bare "K" is 0, as in the kernel). Returns the characters consumed (0 if
// neither a number nor a suffix); *bytes saturates at UINT64_MAX.
size_t MemParse(std::string_view s, uint64_t* bytes);

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_FILES_PARSE_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// A seam for components above the core that add lines to memory.stat
// (libumemcg-jemalloc's active_anon / inactive_anon). One process-wide
// extension; Group::MemoryStat calls it after the built-in and custom
// items, outside every controller lock.
//
// Thread safety: SetMemoryStatExtension may race with readers; a reader
// sees the old or the new function. The function must stay callable for
// the life of the process (a component's static function).

#ifndef UMEMCG_SRC_STAT_EXTENSION_H_
#define UMEMCG_SRC_STAT_EXTENSION_H_

#include <string>

#include "umemcg/export.h"
#include "umemcg/group.h"

namespace umemcg::internal {

// Appends "key value\n" lines for `group` to *out.
using MemoryStatExtension = void (*)(Group& group, std::string* out);

// Installs `fn` (null removes it).
UMEMCG_EXPORT void SetMemoryStatExtension(MemoryStatExtension fn);

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_STAT_EXTENSION_H_

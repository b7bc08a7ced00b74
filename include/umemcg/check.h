// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Assertion macros (cf. tcmalloc TC_CHECK / TC_ASSERT):
//   UMEMCG_CHECK(cond)  always evaluated; aborts with a message when false.
//                       Reserved for memory-safety invariants.
//   UMEMCG_DCHECK(cond) evaluated only when UMEMCG_DCHECK_IS_ON (debug
//                       builds: NDEBUG not defined, or UMEMCG_FORCE_DCHECK);
//                       in release the expression is compiled but not run.
//
// Thread safety: the macros are safe anywhere; failure aborts the process.

#ifndef UMEMCG_CHECK_H_
#define UMEMCG_CHECK_H_

#include "umemcg/export.h"

#if !defined(NDEBUG) || defined(UMEMCG_FORCE_DCHECK)
#define UMEMCG_DCHECK_IS_ON 1
#else
#define UMEMCG_DCHECK_IS_ON 0
#endif

namespace umemcg::internal {
// Prints "umemcg: check failed: <expr> at <file>:<line>" and aborts.
[[noreturn]] UMEMCG_EXPORT void CheckFailed(const char* expr, const char* file,
                                            int line);
}  // namespace umemcg::internal

#define UMEMCG_CHECK(cond)                                        \
  do {                                                            \
    if (__builtin_expect(!(cond), 0))                             \
      ::umemcg::internal::CheckFailed(#cond, __FILE__, __LINE__); \
  } while (0)

#if UMEMCG_DCHECK_IS_ON
#define UMEMCG_DCHECK(cond) UMEMCG_CHECK(cond)
#else
#define UMEMCG_DCHECK(cond)  \
  do {                       \
    if (false) (void)(cond); \
  } while (0)
#endif

#endif  // UMEMCG_CHECK_H_

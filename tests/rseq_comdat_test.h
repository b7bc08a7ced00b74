// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Shared by rseq_comdat_test.cc and rseq_comdat_other.cc: the addresses of
// the inline functions that hold rseq sequences, taken in each translation
// unit so that both emit out-of-line (COMDAT) copies of them.

#ifndef UMEMCG_TESTS_RSEQ_COMDAT_TEST_H_
#define UMEMCG_TESTS_RSEQ_COMDAT_TEST_H_

#include <cstdint>

#include "charge_stock.h"
#include "obj_stock.h"
#include "port/rseq.h"
#include "rstat.h"

namespace umemcg::internal {

struct RseqInlineCopies {
  bool (GroupStats::*stats_update)(size_t, int64_t);
  bool (ChargeStock::*consume_hit)(const Group*, uint64_t);
  bool (ChargeStock::*refill_hit)(const Group*, uint64_t);
  bool (ObjStock::*obj_commit)(ObjCgroup*, uint64_t, bool, StatItem);
#if UMEMCG_HAVE_RSEQ_COMMIT
  RseqResult (*compare_store)(uint32_t, const void*, const void*, const void*,
                              uint64_t*, uint64_t, uint64_t);
#endif
};

#if UMEMCG_HAVE_RSEQ_COMMIT
#define UMEMCG_RSEQ_COMDAT_COMPARE_STORE , &RseqCompareStore
#else
#define UMEMCG_RSEQ_COMDAT_COMPARE_STORE
#endif

#define UMEMCG_RSEQ_INLINE_COPIES                                           \
  RseqInlineCopies {                                                        \
    &GroupStats::Update, &ChargeStock::ConsumeHit, &ChargeStock::RefillHit, \
        &ObjStock::TryCommitUncached UMEMCG_RSEQ_COMDAT_COMPARE_STORE       \
  }

// Defined in rseq_comdat_other.cc.
RseqInlineCopies OtherInlineCopies();

}  // namespace umemcg::internal

#endif  // UMEMCG_TESTS_RSEQ_COMDAT_TEST_H_

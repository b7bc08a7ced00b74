// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The rseq descriptors and abort handlers of inline functions follow their
// function's COMDAT group. Two translation units here both emit
// out-of-line copies of every inline function that holds a sequence
// (GroupStats::Update, the stock hits, the compare-store primitive); the
// linker keeps one copy of each and must drop the other's descriptor with
// it. Without the '?' section flag in the sequences' .pushsection the
// dropped copy's descriptor pointed into a discarded section and this
// binary (like libumemcg.so under clang) failed to link: the test is
// mostly that it builds. At run time the surviving copy is checked to be
// one and the same, and the compare-store primitive is called through it.

#include "rseq_comdat_test.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace umemcg::internal {
namespace {

TEST(RseqComdatTest, OneCopyOfEachInlineSequenceSurvivesTheLink) {
  const RseqInlineCopies here = UMEMCG_RSEQ_INLINE_COPIES;
  const RseqInlineCopies other = OtherInlineCopies();
  EXPECT_TRUE(here.stats_update == other.stats_update);
  EXPECT_TRUE(here.consume_hit == other.consume_hit);
  EXPECT_TRUE(here.refill_hit == other.refill_hit);
  EXPECT_TRUE(here.obj_commit == other.obj_commit);
#if UMEMCG_HAVE_RSEQ_COMMIT
  EXPECT_EQ(here.compare_store, other.compare_store);
#endif
}

#if UMEMCG_HAVE_RSEQ_COMMIT
TEST(RseqComdatTest, TheSurvivingCompareStoreCommits) {
  if (!RseqCommitAvailable()) {
    GTEST_SKIP() << "rseq commit unavailable here (no rseq registration or "
                    "no membarrier RSEQ fence)";
  }
  const RseqInlineCopies copies = OtherInlineCopies();
  const uint8_t lock = 0;
  const uint64_t owner = 7;
  uint64_t word = 1;
  // A migration between the CPU read and the sequence aborts it; retry.
  RseqResult result = RseqResult::kAborted;
  for (int i = 0; i < 100 && result == RseqResult::kAborted; ++i) {
    result =
        copies.compare_store(RseqCpuId(), &lock, &owner,
                             reinterpret_cast<const void*>(owner), &word, 1, 2);
  }
  ASSERT_EQ(result, RseqResult::kCommitted);
  EXPECT_EQ(word, 2u);
  // A mismatched expected value stores nothing.
  result = RseqResult::kAborted;
  for (int i = 0; i < 100 && result == RseqResult::kAborted; ++i) {
    result =
        copies.compare_store(RseqCpuId(), &lock, &owner,
                             reinterpret_cast<const void*>(owner), &word, 1, 3);
  }
  EXPECT_EQ(result, RseqResult::kMismatch);
  EXPECT_EQ(word, 2u);
}
#endif

}  // namespace
}  // namespace umemcg::internal

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The second translation unit of rseq_comdat_test (see there).

#include "rseq_comdat_test.h"

namespace umemcg::internal {

RseqInlineCopies OtherInlineCopies() { return UMEMCG_RSEQ_INLINE_COPIES; }

}  // namespace umemcg::internal

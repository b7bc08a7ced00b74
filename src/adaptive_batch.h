// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// AdaptiveBatch: the decision rule of BatchPolicy::kAdaptive (beyond the
// kernel, whose MEMCG_CHARGE_BATCH is one constant). A pure function, so
// that its properties are tested directly (tests/adaptive_batch_test.cc);
// ControllerImpl::AdaptBatch (charge.cc) feeds it at each batch event of a
// group (a charge that refilled a stock, or a slot that passed its batch)
// and applies the result.
//
// Inputs: the group's current batch b, its room (the least, over the group
// and every ancestor below the root, of min(max, high) - usage; usage
// includes stocked pages) and the smoothed interval between the group's
// batch events.
//
//   limit = room / (kRoomShare x nr_cpus): the largest batch whose
//           worst-case slack, nr_cpus x batch, is within 1/kRoomShare of
//           the room (the budget).
//   shrink  b > limit: b = limit / 2 (0 = no stock at all: every charge
//           and uncharge goes to the counters, exact at the limit).
//   grow    b < base: toward base (doubling from 1) while the step fits
//           in limit / 2; b >= base: doubling up to `cap`, only while
//           batch events come faster than kFastNs apart (the counter walks
//           are then frequent enough to matter) and the step fits in
//           limit / 2.
//   idle    b > base and events slower than kIdleNs apart: halve toward
//           base (an idle group gives its slack back).
//
// Why it converges without oscillating: a step up must land at or below
// limit / 2 and a shrink needs b > limit, so a batch holds anywhere in
// (limit / 4, limit] and the room must halve (or double) before it moves
// again; the rate thresholds are 100x apart, while one doubling of b only
// doubles the interval between a steady workload's batch events.
//
// Why it never refuses a charge that batch = base would not: under this
// policy the charge path drains the refusing level's stocks before it
// fails any charge, reclaiming or not (ControllerImpl::ChargeSlow; with
// kMayReclaim it always does), so a refusal means the charge does not fit
// even with no stocked page in that level's subtree, where the base batch
// would have the same usage plus its own stocks. One exception: a charge
// that cannot reclaim only try-locks each shard for that drain (it must
// not block: it may run in a signal handler that interrupted the shard's
// holder), so a shard busy through a few tries keeps its stocked pages.
//
// A shrink trims the group's stocks with the same try-locks
// (ChargeStock::TrimGroup); a shard it skips stays over the new batch
// until the group's next batch event trims again (Group::trim_pending_).
//
// Thread safety: immutable after construction; Next is a pure function.

#ifndef UMEMCG_SRC_ADAPTIVE_BATCH_H_
#define UMEMCG_SRC_ADAPTIVE_BATCH_H_

#include <algorithm>
#include <cstdint>

namespace umemcg::internal {

struct AdaptiveBatch {
  // Stocks may hold at most 1/kRoomShare of the room.
  static constexpr uint64_t kRoomShare = 8;
  // Batch events closer than this (smoothed) count as a high rate.
  static constexpr int64_t kFastNs = 100'000;
  // Batch events farther apart than this count as idle.
  static constexpr int64_t kIdleNs = 10'000'000;

  int base = 64;  // ControllerOptions::batch
  int cap = 64;   // ControllerOptions::batch_max (>= base)
  int nr_cpus = 1;

  // The largest batch the room allows (see the file comment).
  uint64_t Limit(uint64_t room) const {
    return room / (kRoomShare * static_cast<uint64_t>(nr_cpus));
  }

  // The group's next batch.
  int Next(int b, uint64_t room, int64_t interval_ns) const {
    const uint64_t limit = Limit(room);
    if (static_cast<uint64_t>(b) > limit) {
      return static_cast<int>(limit / 2);
    }
    if (b > base && interval_ns >= kIdleNs) return std::max(base, b / 2);
    int grown = b;
    if (b < base) {
      grown = std::min(base, b == 0 ? 1 : 2 * b);
    } else if (interval_ns < kFastNs) {
      grown = std::min(cap, 2 * b);
    }
    // Whole steps only, and only while the room could halve before the
    // next shrink: the batch then holds in (limit / 4, limit].
    return static_cast<uint64_t>(grown) <= limit / 2 ? grown : b;
  }
};

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_ADAPTIVE_BATCH_H_

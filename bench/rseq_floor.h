// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The floor under any restartable-sequence update on this machine: the
// least an out-of-line per-CPU counter add committed by rseq can cost
// (store the sequence descriptor, read the CPU id inside the sequence,
// check it against the counter count, add). umemcg's rseq hit paths (the
// page stock's Consume/Refill, the statistics' Update) do this and their
// own checks; the benchmarks report them against this floor and the floor
// against an uncontended atomic, so a ratio target can be read against
// what the hardware allows (docs/benchmarks.md, "Floors").
//
// Thread safety: RseqFloorAdd is safe from any thread; each counter is
// only written by the thread running on its CPU (the rseq commit).

#ifndef UMEMCG_BENCH_RSEQ_FLOOR_H_
#define UMEMCG_BENCH_RSEQ_FLOOR_H_

#include <atomic>
#include <cstdint>
#include <memory>

namespace umemcg::bench {

// One counter per CPU, one cache line each.
struct alignas(64) FloorCounter {
  std::atomic<int64_t> value{0};
};
static_assert(sizeof(FloorCounter) == 64);

class RseqFloor {
 public:
  RseqFloor();
  // False when this process cannot run the sequence (not x86-64, or the
  // C library did not register rseq): the benchmarks then skip.
  bool available() const { return available_; }
  // Adds `delta` to this CPU's counter in one restartable sequence; false
  // when the sequence was aborted (preempted, migrated, signalled) or the
  // CPU id is out of range. Out of line, like the library's entry points.
  bool Add(int64_t delta);
  // Add(+1) then Add(-1): the shape of a stock-hit charge/uncharge pair.
  bool Pair();
  // Sum over CPUs (quiescent).
  int64_t Sum() const;

 private:
  bool available_ = false;
  uint32_t nr_ = 0;
  std::unique_ptr<FloorCounter[]> counters_;
};

}  // namespace umemcg::bench

#endif  // UMEMCG_BENCH_RSEQ_FLOOR_H_

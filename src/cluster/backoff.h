// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Backoff: how often a binding may ask Redis after a coordination error
// (the group is missing, a script error, a broken connection, a timeout).
// Without an error every request may go. After one, at most one request
// per interval goes, whichever thread sends it: the interval starts at the
// poll interval, doubles after each further error up to a cap (1 s by
// default), is drawn in [3/4, 1] of its value (jitter, so that the nodes of
// a cluster do not retry in step), and a success resets it.
//
// Thread safety: every method may be called from any thread. Relaxed
// atomics: two threads racing on an error may both double the interval
// (at most one step more) or both take one slot (one request more); both
// are tolerated, the bound per interval stays a small constant.

#ifndef UMEMCG_SRC_CLUSTER_BACKOFF_H_
#define UMEMCG_SRC_CLUSTER_BACKOFF_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace umemcg::cluster_internal {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;

  Backoff(Clock::duration initial, Clock::duration cap, uint64_t seed)
      : initial_(std::max<Clock::duration>(initial, Clock::duration(1))),
        cap_(std::max(cap, initial_)),
        rng_(seed | 1) {}

  // True if a request may be sent at `now`. While backing off, the first
  // caller after the interval takes the slot (the next one waits a new
  // interval); without a pending error every caller may.
  bool TryAcquire(Clock::time_point now) {
    int64_t next = next_.load(std::memory_order_relaxed);
    if (next == 0) return true;
    const int64_t t = now.time_since_epoch().count();
    if (t < next) return false;
    return next_.compare_exchange_strong(next, t + Jittered(interval()),
                                         std::memory_order_relaxed);
  }

  // An error at `now`: the interval starts (or doubles, up to the cap).
  void OnError(Clock::time_point now) {
    const int64_t old = interval_.load(std::memory_order_relaxed);
    const int64_t iv =
        old == 0 ? initial_.count() : std::min<int64_t>(old * 2, cap_.count());
    interval_.store(iv, std::memory_order_relaxed);
    next_.store(
        std::max<int64_t>(now.time_since_epoch().count() + Jittered(iv), 1),
        std::memory_order_relaxed);
  }

  void OnSuccess() {
    if (next_.load(std::memory_order_relaxed) == 0) return;  // no write
    interval_.store(0, std::memory_order_relaxed);
    next_.store(0, std::memory_order_relaxed);
  }

  bool backing_off() const {
    return next_.load(std::memory_order_relaxed) != 0;
  }
  // The current interval (0 without a pending error).
  int64_t interval() const { return interval_.load(std::memory_order_relaxed); }
  Clock::duration initial() const { return initial_; }
  Clock::duration cap() const { return cap_; }

 private:
  // A draw in [3/4 iv, iv] (xorshift; racing draws may repeat a value).
  int64_t Jittered(int64_t iv) {
    uint64_t x = rng_.load(std::memory_order_relaxed);
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng_.store(x, std::memory_order_relaxed);
    const int64_t quarter = iv / 4;
    return iv -
           (quarter > 0
                ? static_cast<int64_t>(x % static_cast<uint64_t>(quarter + 1))
                : 0);
  }

  const Clock::duration initial_;
  const Clock::duration cap_;
  std::atomic<int64_t> next_{0};      // Clock ticks; 0: not backing off
  std::atomic<int64_t> interval_{0};  // Clock ticks; 0: no pending error
  std::atomic<uint64_t> rng_;
};

}  // namespace umemcg::cluster_internal

#endif  // UMEMCG_SRC_CLUSTER_BACKOFF_H_

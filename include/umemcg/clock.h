// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Clock: the time source and sleeper a Controller uses (memory.high
// throttling sleeps; later the stats flusher). Injectable so tests and
// simulations control time (cf. leveldb Env).
//
// Thread safety: implementations must be safe to call from any thread.
// SystemClock() is; ManualClock is (its state is atomic).

#ifndef UMEMCG_CLOCK_H_
#define UMEMCG_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

#include "umemcg/export.h"

namespace umemcg {

class UMEMCG_EXPORT Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time since an arbitrary epoch.
  virtual std::chrono::nanoseconds Now() = 0;
  // Blocks the calling thread for `duration` (a throttled charger).
  virtual void SleepFor(std::chrono::nanoseconds duration) = 0;
};

// steady_clock and std::this_thread::sleep_for. Never null; lives forever.
UMEMCG_EXPORT Clock* SystemClock();

// A clock that only moves when told to: SleepFor advances it instead of
// blocking and records what was slept (for tests of throttling).
class UMEMCG_EXPORT ManualClock final : public Clock {
 public:
  std::chrono::nanoseconds Now() override {
    return std::chrono::nanoseconds(now_ns_.load(std::memory_order_relaxed));
  }
  void SleepFor(std::chrono::nanoseconds duration) override {
    sleeps_.fetch_add(1, std::memory_order_relaxed);
    slept_ns_.fetch_add(duration.count(), std::memory_order_relaxed);
    Advance(duration);
  }
  void Advance(std::chrono::nanoseconds d) {
    now_ns_.fetch_add(d.count(), std::memory_order_relaxed);
  }
  // Number of SleepFor calls and their total duration.
  uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }
  std::chrono::nanoseconds slept() const {
    return std::chrono::nanoseconds(slept_ns_.load(std::memory_order_relaxed));
  }

 private:
  // Relaxed: each field is an independent counter; no other data is
  // published through them.
  std::atomic<int64_t> now_ns_{0};
  std::atomic<uint64_t> sleeps_{0};
  std::atomic<int64_t> slept_ns_{0};
};

}  // namespace umemcg

#endif  // UMEMCG_CLOCK_H_

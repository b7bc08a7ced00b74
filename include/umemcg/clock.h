// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Clock: the time source and sleeper a Controller uses (memory.high
// throttling sleeps, the periodic stats flusher's waits). Injectable so tests
// and simulations control time (cf. leveldb Env).
//
// Thread safety: implementations must be safe to call from any thread.
// SystemClock() is; ManualClock is (its state is atomic).

#ifndef UMEMCG_CLOCK_H_
#define UMEMCG_CLOCK_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

#include "umemcg/export.h"

namespace umemcg {

class UMEMCG_EXPORT Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time since an arbitrary epoch.
  virtual std::chrono::nanoseconds Now() = 0;
  // Blocks the calling thread for `duration` (a throttled charger).
  virtual void SleepFor(std::chrono::nanoseconds duration) = 0;
  // Waits on `cv` (with `lock` held on entry and on return) until `done()`
  // is true or `timeout` of this clock's time has passed. Returns done().
  // Whoever makes done() true notifies `cv`. The default waits on real
  // time (steady_clock); a clock with its own time overrides it.
  virtual bool WaitFor(std::condition_variable& cv,
                       std::unique_lock<std::mutex>& lock,
                       std::chrono::nanoseconds timeout,
                       const std::function<bool()>& done) {
    return cv.wait_for(lock, timeout, done);
  }
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
  // Waits until done() or until Advance has moved this clock `timeout`
  // past the call. Polls Now() every millisecond of real time, so Advance
  // needs no registry of waiters.
  bool WaitFor(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
               std::chrono::nanoseconds timeout,
               const std::function<bool()>& done) override {
    const std::chrono::nanoseconds deadline = Now() + timeout;
    while (!done()) {
      if (Now() >= deadline) return false;
      cv.wait_for(lock, std::chrono::milliseconds(1));
    }
    return true;
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

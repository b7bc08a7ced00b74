// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "umemcg/clock.h"

#include <thread>

namespace umemcg {
namespace {

class SteadyClock final : public Clock {
 public:
  std::chrono::nanoseconds Now() override {
    return std::chrono::steady_clock::now().time_since_epoch();
  }
  void SleepFor(std::chrono::nanoseconds duration) override {
    std::this_thread::sleep_for(duration);
  }
};

}  // namespace

Clock* SystemClock() {
  static SteadyClock* clock = new SteadyClock();  // never destroyed
  return clock;
}

}  // namespace umemcg

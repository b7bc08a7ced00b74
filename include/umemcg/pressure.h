// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Memory pressure per group (kernel: kernel/sched/psi.c, the cgroup-v2
// memory.pressure file). umemcg records the time threads spend stalled in
// a charge: in reclaim (the application's reclaimers included), in
// memory.high throttling sleeps, waiting for a stock drain and in OOM
// handling, and what the application marks with MemoryStallScope (below).
// A stall counts in the charged group and every ancestor.
//
//   some: at least one thread charging the group was stalled;
//   full: every thread that charged the group within the last averaging
//         period (two of them: the current and the previous one) was
//         stalled at once.
//
// docs/design.md ("Memory pressure") maps them to the kernel's task
// states. The averages are the kernel's: fixed-point exponential moving
// averages over 10 s, 60 s and 300 s, advanced every period (2 s and one
// jiffy, HZ = 1000), with the kernel's rounding. Only slow paths write
// pressure state: the stock hit paths are unchanged.
//
// Triggers (kernel: psi_trigger_create, update_triggers): "some|full
// <threshold us> <window us>" arms a trigger that fires when the state's
// stall time grew by at least threshold within any window (500 ms to
// 10 s), at most once per window.
//
// Thread safety: every function may be called from any thread.
// PressureTrigger's callback runs on the thread that noticed the crossing
// (a stalled charger leaving its stall, or the trigger poller) without
// any lock of the library held; the destructor waits for a running
// callback, so a callback must not destroy its own trigger.

#ifndef UMEMCG_PRESSURE_H_
#define UMEMCG_PRESSURE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "umemcg/export.h"
#include "umemcg/status.h"

namespace umemcg {

class Group;

// One line of memory.pressure. The averages are in hundredths of a
// percent, as the file prints them ("12.34" is 1234); total_us is the
// stall time since the group was created, in microseconds.
struct PressureLine {
  uint64_t avg10 = 0;
  uint64_t avg60 = 0;
  uint64_t avg300 = 0;
  uint64_t total_us = 0;
};

struct PressureStats {
  PressureLine some;
  PressureLine full;
};

enum class PressureState { kSome, kFull };

// The group's pressure now (averages brought up to date first).
UMEMCG_EXPORT PressureStats ReadPressure(Group& group);

// The memory.pressure text: "some avg10=A.AA avg60=A.AA avg300=A.AA
// total=N\nfull ...\n".
UMEMCG_EXPORT std::string FormatPressure(const PressureStats& stats);

// Parses memory.pressure text (both lines, in either order; other lines
// ignored); nullopt unless both the some and the full line are well formed.
UMEMCG_EXPORT std::optional<PressureStats> ParsePressureFile(
    std::string_view text);

// A parsed trigger: state, threshold and window.
struct PressureTriggerSpec {
  PressureState state = PressureState::kSome;
  std::chrono::microseconds threshold{0};
  std::chrono::microseconds window{0};
};

// Kernel psi_trigger_create's parsing: "some <threshold_us> <window_us>"
// or "full ...", unsigned 32-bit decimals (no sign; wrapping modulo 2^32),
// anything after them ignored (the kernel's sscanf). kInvalidArgument (EINVAL)
// when malformed, when the window is outside 500000..10000000 us, and when
// threshold is 0 or larger than the window.
UMEMCG_EXPORT StatusOr<PressureTriggerSpec> ParsePressureTrigger(
    std::string_view text);

// Marks the calling thread stalled for memory on behalf of a charge of
// `group` for the scope's lifetime (kernel: psi_memstall_enter /
// psi_memstall_leave): for work an allocator or the application does to
// make room for a charge outside umemcg's reclaim, such as purging an
// allocator's dirty pages before charging again (libumemcg-jemalloc does).
// The stall counts in `group` and every ancestor. Nested in another stall
// of the thread (a reclaim walk, another scope) it counts nothing more.
// May allocate (the group's pressure state, on its first stall); not for
// a signal handler.
class UMEMCG_EXPORT MemoryStallScope {
 public:
  explicit MemoryStallScope(Group& group);
  ~MemoryStallScope();
  MemoryStallScope(const MemoryStallScope&) = delete;
  MemoryStallScope& operator=(const MemoryStallScope&) = delete;

 private:
  Group* saved_charging_;
  Group* stalled_ = nullptr;
};

namespace internal {
struct PsiTrigger;
}

// An armed trigger; destroying it disarms it.
class UMEMCG_EXPORT PressureTrigger {
 public:
  // Arms `spec` on `group`; `on_event` (may be empty) runs at each event.
  // kFailedPrecondition if the group was removed.
  static StatusOr<std::unique_ptr<PressureTrigger>> Arm(
      Group& group, const PressureTriggerSpec& spec,
      std::function<void()> on_event);
  ~PressureTrigger();
  PressureTrigger(const PressureTrigger&) = delete;
  PressureTrigger& operator=(const PressureTrigger&) = delete;

  // True once an event happened since the last call; clears it (what a
  // poll(2) of the kernel's trigger reports as POLLPRI).
  bool TakeEvent();
  // The same without clearing it.
  bool EventPending() const;
  // Events so far.
  uint64_t events() const;

 private:
  explicit PressureTrigger(std::shared_ptr<internal::PsiTrigger> t);
  std::shared_ptr<internal::PsiTrigger> t_;
};

}  // namespace umemcg

#endif  // UMEMCG_PRESSURE_H_

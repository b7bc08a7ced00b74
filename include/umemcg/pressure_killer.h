// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// PressureKiller: kills the thrashing tenant before the limit is hit, the
// way systemd-oomd's ManagedOOMMemoryPressure=kill and oomd's
// kill_by_pressure do for cgroups. It watches groups' memory.pressure
// (umemcg/pressure.h) and, when a watched group's `some` avg10 stays above
// a limit for a duration, calls the kill action (OomPolicy::SetKillAction)
// of one group in the watched subtree:
//
//   - candidates: as OomPolicy's (the leaves of the watched group, itself
//     when it has no child, with charge, a kill action and oom_score_adj
//     above -1000);
//   - the thrashing ones first: a candidate whose own `some` avg10 is
//     above the limit is preferred to any other (the one stalling, not the
//     biggest); a candidate that never stalled reads 0 (its pressure state
//     is not made for the look);
//   - among those, the most usage above effective protection, adjusted by
//     oom_score_adj (OomPolicy's score, the watched group as the domain).
//
//   auto policy = umemcg::OomPolicy::Create(ctrl, {.clock = clock});
//   policy->SetKillAction(*tenant, [&](umemcg::Group&) { Drop(); return 1; });
//   auto killer = umemcg::PressureKiller::Create(*policy);
//   killer->Watch(*tenants, {.avg10_limit = 6000, .duration = 30s});
//
// After a kill in a watched group, its duration starts over, no further
// kill happens there for `post_kill_delay` (the averages lag the relief;
// systemd-oomd waits 15 s), and none while the victim's memory has not
// started coming back (OomPolicy's pending victims: one victim at a time,
// whichever of the OOM handler and the killer chose it). Kills here are
// not OOM kills: memory.events' oom_kill does not count them.
//
// Time is the policy's clock (OomPolicyOptions::clock; pass the
// controller's). With `interval` > 0 a thread reads the watched groups'
// pressure every interval; with 0 there is none and the application calls
// Check (tests drive it with a ManualClock).
//
// Thread safety: all methods may be called from any thread. Kill actions
// and on_kill run on the killer's thread (or Check's caller), one pass at
// a time, with no library lock held; they must not call Check or destroy
// the killer. The policy must outlive the killer.

#ifndef UMEMCG_PRESSURE_KILLER_H_
#define UMEMCG_PRESSURE_KILLER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "umemcg/export.h"
#include "umemcg/group.h"
#include "umemcg/oom_policy.h"
#include "umemcg/pressure.h"
#include "umemcg/status.h"

namespace umemcg {

// A watched group's settings (systemd: ManagedOOMMemoryPressureLimit and
// ManagedOOMMemoryPressureDurationSec, with their defaults).
struct PressureWatch {
  // `some` avg10 above this kills, in hundredths of a percent as
  // PressureLine's (6000: 60.00%); 0..10000, else kOutOfRange.
  uint64_t avg10_limit = 6000;
  // ... when it stayed above at every check for this long (>= 0).
  std::chrono::nanoseconds duration{std::chrono::seconds(30)};
};

// One kill.
struct PressureKill {
  GroupRef watched;
  GroupRef victim;
  PressureStats watched_pressure;  // what crossed the limit
  uint64_t victim_avg10 = 0;       // the victim's own `some` avg10
  uint64_t score = 0;              // OomPolicy's score, in pages
  uint64_t tasks = 0;              // what the kill action returned
};

struct PressureKillerOptions {
  // How often the watched groups' pressure is read (systemd-oomd: 1 s);
  // 0: no thread, Check only.
  std::chrono::nanoseconds interval{std::chrono::seconds(1)};
  // After a kill in a watched group, no other there for this long.
  std::chrono::nanoseconds post_kill_delay{std::chrono::seconds(15)};
  // Told each kill, after its action ran (logging).
  std::function<void(const PressureKill&)> on_kill;
};

class UMEMCG_EXPORT PressureKiller {
 public:
  static std::unique_ptr<PressureKiller> Create(
      OomPolicy& policy, PressureKillerOptions options = {});
  // Stops the thread (waiting for a pass in progress).
  ~PressureKiller();
  PressureKiller(const PressureKiller&) = delete;
  PressureKiller& operator=(const PressureKiller&) = delete;

  // Watches `group` (again: new settings, the duration starts over).
  // kFailedPrecondition if it was removed; kOutOfRange for a bad limit or
  // a negative duration. A removed group is unwatched at the next check.
  Status Watch(Group& group, PressureWatch watch = {});
  // kNotFound if not watched.
  Status Unwatch(Group& group);

  // One pass now: reads every watched group's pressure and kills where
  // due. Returns the kills made.
  std::vector<PressureKill> Check();

  struct Stats {
    uint64_t checks = 0;     // passes
    uint64_t kills = 0;      // kill actions that returned > 0
    uint64_t no_victim = 0;  // due, but no candidate (or its action: 0)
    uint64_t blocked = 0;    // due, but a victim's memory still pending
  };
  Stats stats() const;

  struct Impl;

 private:
  explicit PressureKiller(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace umemcg

#endif  // UMEMCG_PRESSURE_KILLER_H_

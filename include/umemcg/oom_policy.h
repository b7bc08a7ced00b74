// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// OomPolicy: a ready OomHandler that picks one victim group in the
// OOM-ing subtree and calls the kill action the application registered
// for it ("cancel this query", "drop this tenant's cache").
//
//   auto policy = umemcg::OomPolicy::Create(ctrl);
//   policy->SetKillAction(*tenant, [&](umemcg::Group&) { Cancel(); return 1;
//   }); ctrl.SetOomHandler(policy->Handler());
//
// Choice (kernel: select_bad_process, oom_badness, memory.oom.group):
//   - candidates are the leaves (no online child) of the OOM domain with
//     charge (usage > 0) and a kill action;
//   - score = usage above effective protection (max(emin, elow), the
//     kernel's CalculateProtection against the domain), plus
//     oom_score_adj x domain usage / 1000 (oom_badness's adjustment, with
//     the domain's usage standing for totalpages); saturates at 0;
//   - oom_score_adj is per group, -1000..1000 (kernel range); -1000 means
//     never a victim (OOM_SCORE_ADJ_MIN); default 0;
//   - the highest score wins; ties go to the larger usage, then the path;
//   - memory.oom.group: when the victim belongs to a marked subtree
//     (OomContext::KillGroupFor), every candidate-with-an-action in that
//     subtree is killed (oom_adj -1000 ones excepted, as the kernel's
//     mem_cgroup_scan_tasks skips OOM_SCORE_ADJ_MIN tasks).
// Reporting: through OomOutcome (victims with the tasks each action
// reported), so oom_kill and oom_group_kill count as for any handler.
//
// One victim at a time per OOM domain: a victim whose memory has not
// started coming back (less charged to it than at the kill, counting only
// charges that completed: one that fails at an ancestor raises the
// victim's usage for a moment and does not count; within `victim_timeout`
// of the kill) blocks new kills in every domain it is in; the
// charge then fails (or waits, below) instead of killing a second victim. If
// enough memory came back before the kill action ran (the margin under the
// domain's max covers the charge), the kill is dropped and the charge retries.
//
// Waiting (ClickHouse's memory_usage_overcommit_max_wait; default off):
// with `wait_for_memory` > 0, the charging thread, after a kill or while a
// victim is pending, waits up to that long (on the controller's clock) for
// the domain's margin to cover the charge, and retries when it does. Other
// threads charging the domain wait on the controller's OOM lock meanwhile,
// and find the room when they get it.
//
// Thread safety: all methods may be called from any thread. Kill actions
// run on the charging thread, under the controller's OOM lock, with the
// charge forced (they may allocate); they must not wait for other charging
// threads. The policy must outlive the controller's use of its handler.

#ifndef UMEMCG_OOM_POLICY_H_
#define UMEMCG_OOM_POLICY_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "umemcg/clock.h"
#include "umemcg/controller.h"
#include "umemcg/export.h"
#include "umemcg/group.h"
#include "umemcg/status.h"

namespace umemcg {

struct OomPolicyOptions {
  // The clock waits and victim ages are measured on; null: SystemClock().
  // Pass the controller's when it has its own.
  Clock* clock = nullptr;
  // How long a charger waits for a victim's memory (0: never, as without a
  // policy).
  std::chrono::nanoseconds wait_for_memory{0};
  // After this long a victim no longer blocks new kills.
  std::chrono::nanoseconds victim_timeout{std::chrono::seconds(5)};
  // Told each victim chosen, before its action runs (logging). May free
  // memory: the kill is then dropped.
  std::function<void(Group& victim, uint64_t score)> on_victim;
};

class UMEMCG_EXPORT OomPolicy {
 public:
  // Kills the group's work; returns the number of tasks killed (0: none,
  // the group is then not counted as killed).
  using KillAction = std::function<uint64_t(Group&)>;

  static std::unique_ptr<OomPolicy> Create(Controller& controller,
                                           OomPolicyOptions options = {});
  ~OomPolicy();
  OomPolicy(const OomPolicy&) = delete;
  OomPolicy& operator=(const OomPolicy&) = delete;

  // Registers (or, empty, removes) the group's kill action.
  Status SetKillAction(Group& group, KillAction action);
  // oom_score_adj: -1000..1000, else kOutOfRange.
  Status SetScoreAdj(Group& group, int adj);
  int ScoreAdj(const Group& group) const;

  // The handler to install (Controller::SetOomHandler or a group's).
  OomHandler Handler();

  // The victim the policy would choose in `domain` now (null: none), and
  // its score. For tests and tools.
  GroupRef SelectVictim(Group& domain, uint64_t* score = nullptr);

  // Counters: kills made, kills dropped because memory came back, OOMs
  // that found a pending victim, waits that ended with room / timed out.
  struct Stats {
    uint64_t kills = 0;
    uint64_t dropped = 0;
    uint64_t blocked_by_pending = 0;
    uint64_t waits_released = 0;
    uint64_t waits_timed_out = 0;
  };
  Stats stats() const;

  struct Impl;

 private:
  friend class PressureKiller;  // umemcg/pressure_killer.h: shares Impl
  explicit OomPolicy(std::unique_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace umemcg

#endif  // UMEMCG_OOM_POLICY_H_

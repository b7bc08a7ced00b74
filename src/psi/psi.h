// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Pressure stall recording (kernel: kernel/sched/psi.c), private side.
// The charge path marks where stalls happen with three seams:
//
//   PsiChargeScope  ChargeSlow and Group::HandleOverHigh: "this thread is
//                   charging g" (the group a stall is counted in, with its
//                   ancestors). Nested charges (a reclaimer's) replace it
//                   for their duration.
//   PsiStallScope   around a wait: the reclaim walk, a memory.high sleep,
//                   a wait for a stock drain, OOM handling. Only the
//                   outermost stall of a thread counts, and only inside a
//                   charge (the high-work thread and memory.reclaim
//                   writers stall no charger, as the kernel's kworkers
//                   count in the root).
//   PsiNoteCharger  the charge slow path (one stock refill per batch): the
//                   thread is one of the group's chargers, which "full"
//                   needs. A thread-local cache makes it one relaxed load
//                   and a compare per batch; the group's lock is taken once
//                   per thread, group and period.
//
// Per group (GroupPressure, owned by the Group): the number of threads
// stalled now, the chargers seen in the current and previous period, the
// time accumulated in "some" and "full", the averages. All under the
// group's mutex, taken only by the seams above, reads of memory.pressure
// and the trigger poller.
//
// Time is advanced lazily, but exactly as the kernel's periodic worker
// would: before a state change or a read, every period boundary passed
// since the last update is replayed with the state that held until it, so
// the averages equal those of a worker running every period. Idle
// stretches (no stall at the boundary and no new stall time) are decayed
// at once with the kernel's missed-period formula.

#ifndef UMEMCG_SRC_PSI_PSI_H_
#define UMEMCG_SRC_PSI_PSI_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "umemcg/clock.h"
#include "umemcg/group.h"
#include "umemcg/pressure.h"

namespace umemcg::internal {

// Kernel constants (kernel/sched/psi.c, include/linux/sched/loadavg.h).
inline constexpr uint64_t kPsiFShift = 11;  // FSHIFT
inline constexpr uint64_t kPsiFixed1 = uint64_t{1} << kPsiFShift;
inline constexpr uint64_t kPsiExp[3] = {1677, 1981, 2034};  // 10s, 60s, 300s
// PSI_FREQ = 2 * HZ + 1 jiffies, with HZ = 1000 (one jiffy = 1 ms).
inline constexpr int64_t kPsiPeriodNs = 2'001'000'000;
inline constexpr int64_t kPsiWindowMinUs = 500'000;
inline constexpr int64_t kPsiWindowMaxUs = 10'000'000;
inline constexpr int kPsiUpdatesPerWindow = 10;

// Kernel calc_load(): one step of the fixed-point moving average.
uint64_t PsiCalcLoad(uint64_t load, uint64_t exp, uint64_t active);
// Kernel calc_load_n(): n steps at once (fixed_power_int of exp).
uint64_t PsiCalcLoadN(uint64_t load, uint64_t exp, uint64_t active, uint64_t n);
// Kernel calc_avgs(): folds one period's stall `time` (ns) out of
// `period` (ns), after `missed` periods without samples.
void PsiCalcAvgs(uint64_t avg[3], uint64_t missed, uint64_t time,
                 uint64_t period);
// "A.BC" of a fixed-point average, as hundredths (LOAD_INT, LOAD_FRAC).
uint64_t PsiCentiPercent(uint64_t avg);

// A trigger (kernel: struct psi_trigger with its window).
struct PsiTrigger {
  GroupRef group;
  int state = 0;  // 0 some, 1 full
  uint64_t threshold_ns = 0;
  uint64_t window_ns = 0;
  // Guarded by the group's GroupPressure::mu.
  int64_t win_start_time = 0;
  uint64_t win_start_value = 0;
  uint64_t win_prev_growth = 0;
  uint64_t last_total = 0;
  int64_t last_event_time = INT64_MIN / 2;
  bool pending_event = false;
  // The event flag (POLLPRI) and the count; relaxed: independent values.
  std::atomic<bool> event{false};
  std::atomic<uint64_t> events{0};
  // Held while the callback runs; disarmed under it.
  std::mutex fire_mu;
  bool disarmed = false;  // guarded by fire_mu
  std::function<void()> on_event;
};

class GroupPressure {
 public:
  explicit GroupPressure(Clock* clock);

  // Periods passed since creation; read by PsiNoteCharger on the charge
  // slow path. Relaxed: a cache key, a stale value costs one more lock.
  std::atomic<uint64_t> seq{0};
  // Unique in the process (a freed group's address may be reused): the
  // thread-local charger cache's key.
  const uint64_t serial;

  // The rest: psi.cc's, under mu (clock is constant).
  // 16 entries of 8 bytes: the state's size matters (one per group that
  // stalled or was read); with more current chargers `full` reads 0.
  static constexpr int kMaxChargers = 16;
  struct Charger {
    uint32_t tid;  // the low bits of the thread's id: unique for 2^32 threads
    uint32_t seq;  // the period it last charged in (2^32 periods: 272 years)
  };

  std::mutex mu;
  Clock* const clock;
  // Guarded by mu.
  int nr_stalled = 0;
  Charger chargers[kMaxChargers] = {};
  int nr_chargers = 0;
  // The seq at which a charger found the table full of current ones.
  uint64_t overflow_seq = UINT64_MAX;
  bool some = false;
  bool full = false;
  int64_t state_start;
  uint64_t total[2] = {};
  uint64_t avg_total[2] = {};
  uint64_t avg[2][3] = {};
  int64_t avg_next_update;
  int64_t avg_last_update;
  std::vector<std::shared_ptr<PsiTrigger>> triggers;
};

struct PsiThreadState {
  Group* charging = nullptr;
  int stall_depth = 0;
  uint64_t tid = 0;
  struct Entry {
    uint64_t serial;
    uint64_t seq;
  } cache[4] = {};
  unsigned next = 0;
};
extern constinit thread_local PsiThreadState tls_psi;

class Psi {
 public:
  static void Destroy(GroupPressure* raw) { delete Strip(raw); }

  // g's state, or null before its first need (acquire: pairs with
  // Ensure's publication, so the state's fields are seen constructed).
  static GroupPressure* Of(const Group* g) {
    return Strip(g->psi_.load(std::memory_order_acquire));
  }
  // Before a state exists, psi_'s value 1 says that a non-blocking charge
  // of the group was not noted: its chargers are not all known.
  static GroupPressure* Strip(GroupPressure* raw) {
    return reinterpret_cast<GroupPressure*>(reinterpret_cast<uintptr_t>(raw) &
                                            ~uintptr_t{1});
  }
  // A non-blocking charge of a group without a state: mark it (once; a
  // load, then one CAS the first time).
  static void NoteUnknownCharger(Group* g) {
    if (g->psi_.load(std::memory_order_relaxed) != nullptr) return;
    GroupPressure* expected = nullptr;
    // relaxed: only the mark's value matters; Ensure reads it in its CAS.
    g->psi_.compare_exchange_strong(
        expected, reinterpret_cast<GroupPressure*>(uintptr_t{1}),
        std::memory_order_relaxed);
  }
  // g's state, made with its ancestors' first where missing. Allocates:
  // only from a stall, a trigger or ReadPressure (never from a charge
  // that cannot block, nor from a read of the memory.pressure file).
  static GroupPressure& Ensure(Group* g);
  // The process-wide pieces (the fork guard, the fork handler). Their
  // first use allocates inside a function-local static's initialisation,
  // which a charge from inside malloc (an arena's hook, an interposed
  // malloc) could re-enter and hang on: so every group's constructor calls
  // this, and no charge path is ever the first use.
  static void Prepare();
  static uint64_t Seq(const Group* g) {
    return Of(g)->seq.load(std::memory_order_relaxed);
  }
  // Records the thread as a charger of g and its ancestors.
  static void Announce(Group* g);
  static void StallBegin(Group* g);
  static void StallEnd(Group* g);
  static PressureStats Read(Group* g);
  // g's pressure, or nullopt while it has no state (it never stalled, was
  // never read and never had a trigger): unlike Read, makes no state.
  static std::optional<PressureStats> Peek(const Group* g);
  static PressureStats ReadState(GroupPressure& p);
  static Status Arm(const std::shared_ptr<PsiTrigger>& t);
  static void Disarm(const std::shared_ptr<PsiTrigger>& t);
  // Evaluates t's group's triggers now (the poller); fires outside locks.
  static void PollGroup(Group* g);
};

// See the file comment.
// A group without a state (made at its first stall, trigger or
// ReadPressure call, not by a charge: most groups never need one) is only
// marked: its chargers until then are unknown.
inline void PsiNoteCharger(Group* g) {
  const GroupPressure* p = Psi::Of(g);
  if (p == nullptr) return Psi::NoteUnknownCharger(g);
  const uint64_t seq = p->seq.load(std::memory_order_relaxed);
  for (const auto& e : tls_psi.cache) {
    if (e.serial == p->serial && e.seq == seq) return;
  }
  Psi::Announce(g);
}

class PsiChargeScope {
 public:
  explicit PsiChargeScope(Group* g) : saved_(tls_psi.charging) {
    tls_psi.charging = g;
  }
  ~PsiChargeScope() { tls_psi.charging = saved_; }
  PsiChargeScope(const PsiChargeScope&) = delete;
  PsiChargeScope& operator=(const PsiChargeScope&) = delete;

 private:
  Group* const saved_;
};

class PsiStallScope {
 public:
  PsiStallScope() {
    if (tls_psi.stall_depth++ == 0 && tls_psi.charging != nullptr) {
      group_ = tls_psi.charging;
      Psi::StallBegin(group_);
    }
  }
  ~PsiStallScope() {
    --tls_psi.stall_depth;
    if (group_ != nullptr) Psi::StallEnd(group_);
  }
  PsiStallScope(const PsiStallScope&) = delete;
  PsiStallScope& operator=(const PsiStallScope&) = delete;

 private:
  Group* group_ = nullptr;
};

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_PSI_PSI_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Controller: one memory-accounting world. It owns the group tree (rooted
// at root()), the per-CPU charge stocks and every tunable. Applications
// usually make one per process; benchmarks make several with different
// settings side by side.
//
//   auto ctrl = umemcg::Controller::Create({.batch = 64}).value();
//   umemcg::GroupRef t = ctrl->CreateGroup(ctrl->root(), "tenant").value();
//   (void)t->SetMax(umemcg::Pages(25600));             // 100 MiB
//   if (t->TryCharge(umemcg::Pages(3)).ok()) { ...; t->Uncharge(Pages(3)); }
//
// Thread safety: every method is safe from any thread. Tree changes
// (CreateGroup, RemoveGroup) take an exclusive tree lock; lookups and
// reclaim walks take it shared. Destroying the controller requires that no
// other thread uses it and that every GroupRef and ObjCgroupRef of it has been
// released.

#ifndef UMEMCG_CONTROLLER_H_
#define UMEMCG_CONTROLLER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "umemcg/clock.h"
#include "umemcg/cpu.h"
#include "umemcg/export.h"
#include "umemcg/group.h"
#include "umemcg/stats.h"
#include "umemcg/status.h"
#include "umemcg/units.h"

namespace umemcg {

class ObjCgroup;
namespace internal {
class ChargeStock;
class ControllerImpl;
class ObjStock;
class Rstat;
class StatsTestPeer;
}  // namespace internal

// A contract violation reported instead of crashing (release builds).
struct ErrorReport {
  // "underflow": more uncharged than charged (pages = the excess request);
  // "leak": a group was freed with pages still charged (pages = those);
  // "oom_victim": an OomOutcome named a group outside the OOM domain;
  // "objcg_partial_page": an objcg was freed with a central pool that is
  // not whole pages (pages = the whole pages uncharged; the rest stays).
  const char* what = "";
  const Group* group = nullptr;
  Pages pages;
};
using ErrorHook = std::function<void(const ErrorReport&)>;

// Something attached to a controller from outside the accounting core (a
// FUSE mount, a metrics server): told about every memory event, and about
// the controller's destruction so it can stop using the controller first.
class UMEMCG_EXPORT ControllerObserver {
 public:
  virtual ~ControllerObserver() = default;
  // After an event counter of `group` (where the event was raised) and of
  // its ancestors changed; called on the raising thread, which may be
  // charging: must be quick, must not block, allocate or charge.
  virtual void OnMemoryEvent(Group& group, MemoryEvent event) {
    (void)group;
    (void)event;
  }
  // At the start of ~Controller, on the destroying thread, before any
  // group is freed: stop using the controller and release every GroupRef
  // to it before returning.
  virtual void OnControllerDestroy() {}
};

// How each group's batch (pages charged per counter walk, and the most one
// CPU's stock caches for the group) is chosen.
enum class BatchPolicy : uint8_t {
  // Every group uses ControllerOptions::batch (the kernel's constant
  // MEMCG_CHARGE_BATCH).
  kFixed,
  // Per group, starting at `batch` (beyond the kernel): the batch doubles,
  // up to `batch_max`, while the group's stocks refill or drain more often
  // than every 100 us and nr_cpus x the batch stays within 1/8 of the room
  // left under max and high (the group's and every ancestor's); it shrinks
  // as that room narrows (to 0, no stock, at the limit) and halves back
  // toward `batch` when the group goes idle. A shrink drains the group's
  // stocks, so the slack never exceeds nr_cpus x the current batch, and a
  // charge that would fail (with or without kMayReclaim) first drains the
  // refusing level's stocks, so none fails that `batch` would fit.
  // docs/benchmarks.md describes the rule and its guarantees.
  kAdaptive,
};

struct ControllerOptions {
  // Pages charged per counter walk and cached per CPU per group
  // (MEMCG_CHARGE_BATCH). 64 is the kernel's since v6.1; 32 before.
  // 1..4096 (slot counts are uint16; the kernel's uint8 stops at 127).
  // Usage may over-report a group by up to nr_cpus x batch pages.
  int batch = 64;
  // kAdaptive: `batch` is where each group starts and the floor of its
  // growth; `batch_max` (batch..4096) its ceiling.
  BatchPolicy batch_policy = BatchPolicy::kFixed;
  int batch_max = 1024;
  // Groups cached per CPU stock (NR_MEMCG_STOCK, 7 since v6.16). 1..16.
  int stock_slots = 7;
  // Objcgs cached per CPU object stock (NR_OBJ_STOCK, 5 since the E5
  // series; 1 = the older single-slot stock). 1..16.
  int obj_stock_slots = 5;
  // Cache slab and kmem statistic deltas in the object stock (the seed
  // series); false applies every delta at once (before it).
  bool obj_stat_cache = true;
  // Use per-CPU object stocks. false: every object charge goes through the
  // objcg's shared nr_charged_bytes pool (for benchmarks).
  bool obj_stock = true;
  // Commit the stocks' hit paths with restartable sequences where this
  // process supports them (ControllerInfo::stock_rseq). false takes the
  // per-CPU try-lock on every hit (for benchmarks and tests comparing the
  // two).
  bool stock_rseq = true;
  // How the current CPU is found; see cpu.h.
  CpuSource cpu_source = CpuSource::kAuto;
  // Number of per-CPU shards. 0 = this machine's possible CPUs (sparse ids
  // are mapped densely). Otherwise 1..4096; ids beyond wrap around.
  int nr_cpus = 0;
  // Time and sleeping (memory.high throttling). Null = SystemClock(). Not
  // owned; must outlive the controller.
  Clock* clock = nullptr;
  // memory_recursiveprot: distribute unclaimed parental protection.
  bool recursive_protection = false;
  // memory_localevents: hierarchical event counts stay local.
  bool local_events = false;
  // Default OOM handler; without one an OOM charge fails with
  // kResourceExhausted.
  OomHandler oom_handler;
  // Contract violations (underflow, leaks); may be null.
  ErrorHook error_hook;
  // Application stat items, in memory.stat order after the built-in ones;
  // their ids are StatItem(kNumBuiltinStatItems + index). At most
  // kMaxCustomStatItems; names as StatItemSpec says.
  std::vector<StatItemSpec> custom_stat_items;
  // Which flushes stat readers trigger (v6.8+ per-group thresholds with
  // subtree flushes, or the older global threshold with whole-tree ones).
  StatsFlushMode stats_flush_mode = StatsFlushMode::kPerGroupSubtree;
  // The periodic stats flusher's period (kernel FLUSH_TIME, 2 s); timed by
  // `clock`. 0 = no flusher thread. At most one hour.
  std::chrono::nanoseconds stats_flush_period = std::chrono::seconds(2);
  // kPerGroupSubtree: an update stops counting pending updates at the first
  // ancestor already over its flush threshold (true). false walks every
  // level on every update, the naive per-level walk (umemcg-bench's
  // `naive-walk` stat variant); values and bounds stay exact either way.
  bool stats_update_early_stop = true;
};

// The settings in effect, after defaults were resolved.
struct ControllerInfo {
  int batch = 0;
  BatchPolicy batch_policy = BatchPolicy::kFixed;
  int batch_max = 0;  // kFixed: equal to batch
  int stock_slots = 0;
  int obj_stock_slots = 0;
  bool obj_stat_cache = true;
  bool obj_stock = true;
  // The page and object stocks' hit paths commit through restartable
  // sequences (no atomic read-modify-write): ControllerOptions::stock_rseq,
  // rseq CPU source, one shard per CPU, x86-64, membarrier RSEQ fences,
  // not a TSan build. Otherwise they take the shard's try-lock.
  bool stock_rseq = false;
  int nr_cpus = 0;
  CpuSource cpu_source = CpuSource::kAuto;  // never kAuto here
  bool recursive_protection = false;
  bool local_events = false;
  StatsFlushMode stats_flush_mode = StatsFlushMode::kPerGroupSubtree;
  std::chrono::nanoseconds stats_flush_period{0};
  bool stats_update_early_stop = true;
  size_t nr_stat_items = 0;  // built-in + custom
};

class UMEMCG_EXPORT Controller {
 public:
  // Validates `options` (an invalid setting returns kInvalidArgument naming
  // it; kRseq where rseq is unavailable returns kFailedPrecondition).
  static StatusOr<std::unique_ptr<Controller>> Create(
      ControllerOptions options = {});

  // REQUIRES: no thread uses the controller; every GroupRef and
  // ObjCgroupRef released.
  // Drains every stock and frees every group.
  ~Controller();

  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  const ControllerInfo& info() const { return info_; }
  Group& root() { return *root_; }

  // ---- Tree ----

  // Creates `name` under `parent`. kInvalidArgument: empty name or one with
  // '/'; kAlreadyExists: a sibling has that name; kFailedPrecondition:
  // parent offline, or called from inside a reclaimer.
  StatusOr<GroupRef> CreateGroup(Group& parent, std::string_view name);
  // Finds an online group by path ("a/b/c"; "" or "/" is the root).
  // Leading and trailing '/' are ignored. kNotFound if absent.
  StatusOr<GroupRef> Lookup(std::string_view path);
  // Takes `group` offline (see group.h). kBusy while it has online
  // children; kInvalidArgument for the root; kFailedPrecondition if
  // already offline or called from inside a reclaimer.
  Status RemoveGroup(Group& group);

  // ---- Stocks ----

  // Returns to their owners all pages cached in every CPU's stock for
  // `subtree` and its descendants (kernel: drain_all_stock), and drains
  // every object stock slot whose objcg points into the subtree (bytes to
  // the objcg's pool, whole pages uncharged, cached statistics applied).
  // Synchronous:
  // when it returns, no stock holds pages charged before the call for a
  // group of the subtree. Waits briefly for a CPU's stock held by a thread
  // mid-operation (nanoseconds: no stock section blocks).
  void DrainAllStocks(Group& subtree);

  // Validates the structure at a quiescent point (no concurrent charges,
  // uncharges or limit changes): each group's usage covers its online
  // children's, each parent's children_min/low_usage equals the sum of its
  // online children's protected usage, and every stock slot is within one
  // batch and held by a live group. Returns kFailedPrecondition naming the
  // first violation. Walks the whole tree and every CPU's stock.
  Status CheckInvariants();

  // Frees groups whose last reference went since the last tree operation.
  // Tree operations and the destructor call it; call it to free sooner.
  void Reap();

  // ---- Statistics ----

  // The item named `name` (built-in or custom), if any.
  std::optional<StatItem> FindStatItem(std::string_view name) const;
  // The memory.stat key and unit of `item`; null / kEvents if unknown.
  const char* StatItemName(StatItem item) const;
  StatUnit StatItemUnit(StatItem item) const;
  // Flushes every group's statistics now (what the periodic flusher does).
  void FlushAllStats();

  // ---- Policy ----

  void SetOomHandler(OomHandler handler);

  // ---- Observers ----

  // Attaches `observer` (the controller keeps a reference while attached).
  void AddObserver(std::shared_ptr<ControllerObserver> observer);
  // Detaches it. An event raised concurrently may still reach it once (the
  // raising thread holds a reference); OnControllerDestroy never will.
  void RemoveObserver(const ControllerObserver* observer);

  // Uncharges that went below zero, in any group (each also reported to
  // the error hook).
  uint64_t underflows() const {
    return underflows_.load(std::memory_order_relaxed);
  }
  // Groups currently allocated, online or not (root included).
  int64_t live_groups() const {
    return live_groups_.load(std::memory_order_relaxed);
  }
  // ObjCgroups currently allocated (one per group, plus those of removed
  // groups still referenced by objects or stocks, until Reap).
  int64_t live_objcgs() const {
    return live_objcgs_.load(std::memory_order_relaxed);
  }

 private:
  friend class Group;
  friend class GroupRef;
  friend class ObjCgroup;
  friend class internal::ControllerImpl;
  friend class internal::ObjStock;
  friend class internal::StatsTestPeer;

  explicit Controller(ControllerOptions options, ControllerInfo info);

  void Report(const char* what, const Group* group, Pages pages);
  void ReleaseGroup(Group* group);          // last reference dropped
  void ReleaseObjCgroup(ObjCgroup* objcg);  // last reference dropped
  void FreeObjCgroup(ObjCgroup* objcg);     // from Reap
  void CreateObjCgroup(Group* group);
  Group* FindChildLocked(Group& parent, std::string_view name) const;

  ControllerOptions options_;
  ControllerInfo info_;
  Clock* clock_;
  std::unique_ptr<internal::ChargeStock> stock_;
  std::unique_ptr<internal::ObjStock> obj_stock_;
  // Declared after stock_ (whose CPU source it uses): destroyed first.
  std::unique_ptr<internal::Rstat> rstat_;
  std::vector<std::string> stat_names_;  // every item, by id
  std::vector<StatUnit> stat_units_;
  Group* root_ = nullptr;

  // Guards every group's children_ and reclaimers_ lists and online
  // transitions. Shared by lookups and reclaim walks.
  mutable std::shared_mutex tree_mu_;
  // Serializes OOM handling (kernel: oom_lock).
  std::mutex oom_mu_;
  std::atomic<std::shared_ptr<const OomHandler>> oom_handler_;
  // Attached observers, replaced whole (copy on write) under observers_mu_;
  // read by RaiseEvent (a slow path) without the mutex.
  using ObserverList = std::vector<std::shared_ptr<ControllerObserver>>;
  std::mutex observers_mu_;
  std::atomic<std::shared_ptr<const ObserverList>> observers_;

  // Every live objcg, for reparenting (kernel: objcg_list). Taken on group
  // creation and removal and at objcg release only.
  std::mutex objcg_mu_;
  std::vector<ObjCgroup*> objcgs_;  // guarded by objcg_mu_

  std::atomic<Group*> to_free_{nullptr};  // lock-free stack of dead groups
  std::atomic<ObjCgroup*> objcg_to_free_{nullptr};  // ditto, objcgs
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> underflows_{0};
  std::atomic<int64_t> live_groups_{0};
  std::atomic<int64_t> live_objcgs_{0};
};

}  // namespace umemcg

#endif  // UMEMCG_CONTROLLER_H_

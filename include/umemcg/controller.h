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
// reclaim walks take it shared.
//
// Scale. Tree operations cost what the group itself holds, not what the
// tree holds: creation and lookup find children through a hash index by
// (parent, name); removal unlinks the group from its parent's list in
// O(1), reparents only the group's own objcg list and drains only the CPU
// shards whose stocks cache the group; freeing is batched (see Reap).
// Destroying the controller requires that no other thread uses it and that
// every GroupRef and ObjCgroupRef of it has been released. A controller
// runs up to two threads of its own, stopped before the destructor frees
// anything: the statistics flusher (stats_flush_period) and the
// memory.high worker (HighWorkMode::kThread), which calls reclaimers.
//
// fork(): safe at any time from any thread, also from inside a reclaimer,
// the OOM handler or a hook. The child's copy of the controller works
// fully (charges, drains, statistics, tree changes, destruction): no lock
// is left held by a thread the child does not have. It holds the
// accounting as of the fork, including charges that the parent's other
// threads held (the child cannot uncharge those) and any counter walk they
// had half done (so a child's CheckInvariants may report the tree's sums
// off by such a charge). The periodic stats flusher thread and the
// memory.high worker do not survive fork(); the child starts its own
// flusher on its first statistics flush or read. The rules of fork() in a
// multi-threaded program still apply to the application's own locks.
// Details: docs/design.md, Fork.

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
#include <thread>
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
class ControllerForkHandler;
class ChildIndex;
class ControllerImpl;
class ObjStock;
class Psi;
class Rstat;
class Srcu;
class ScaleTestPeer;
class StatsTestPeer;
class StockDrainer;
struct TreeWriteLock;
}  // namespace internal
struct PeakRegistry;

// A contract violation reported instead of crashing (release builds).
struct ErrorReport {
  // "underflow": more uncharged than charged (pages = the excess request);
  // "leak": a group was freed with pages still charged (pages = those);
  // "oom_victim": an OomOutcome named a group outside the OOM domain;
  // "objcg_partial_page": an objcg was freed with a central pool that is
  // not whole pages (pages = the whole pages uncharged; the rest stays).
  const char* what = "";
  // Valid during the hook call. Null only when more distinct groups than
  // fit the queue were reported from one locked section (see ErrorHook):
  // `pages` then sums them.
  const Group* group = nullptr;
  Pages pages;
};
// Called on the thread that found the violation, never under a stock lock
// or another lock of the controller's own: a violation found while one is
// held (a drain returning more than was charged) is reported once the
// lock was released, before the call that found it returns. So the hook
// may drain, read files, set limits or remove groups. Inside a reclaimer
// or OOM handler, that callback's restrictions apply to the hook too.
using ErrorHook = std::function<void(const ErrorReport&)>;

// A removed group whose memory was freed (ControllerObserver::OnGroupFreed).
struct FreedGroup {
  uint64_t id = 0;   // Group::id()
  std::string path;  // Group::path() ("a/b")
  // Pages it still had charged other than through its objcgs, returned to
  // its ancestors and reported to the error hook as a "leak" (normally 0).
  Pages leaked;
};

// Something attached to a controller from outside the accounting core (a
// FUSE mount, a metrics server, a service watching its tenants): told about
// every memory event, about groups going offline and being freed, and
// about the controller's destruction so it can stop using the controller
// first.
class UMEMCG_EXPORT ControllerObserver {
 public:
  virtual ~ControllerObserver() = default;
  // After an event counter of `group` (where the event was raised) and of
  // its ancestors changed; called on the raising thread, which may be
  // charging: must be quick, must not block, allocate or charge, and be
  // async-signal-safe if the application charges from signal handlers.
  virtual void OnMemoryEvent(Group& group, MemoryEvent event) {
    (void)group;
    (void)event;
  }
  // After RemoveGroup took `group` offline (kernel: css offline): it is
  // unlinked, its objcgs point at its parent, its stocks are drained and
  // its usage is what it still has charged (the dying group's memory).
  // Called on the removing thread, outside every controller lock, before
  // RemoveGroup returns; `group` is valid during the call (a GroupRef taken
  // here keeps it allocated, delaying OnGroupFreed).
  virtual void OnGroupOffline(Group& group) { (void)group; }
  // After a removed group's memory was freed: its last reference went and
  // a grace period passed (Controller::Reap). Called on the reaping thread
  // (any tree operation, or Reap), outside every controller lock; may call
  // the controller (a tree operation from here reaps again, so keep it
  // rare). Not called for the groups ~Controller frees.
  virtual void OnGroupFreed(const FreedGroup& group) { (void)group; }
  // At the start of ~Controller, on the destroying thread, before any
  // group is freed: stop using the controller and release every GroupRef
  // to it before returning.
  virtual void OnControllerDestroy() {}
};

// Who reclaims for memory.high after a charge that may not block (no
// ChargeFlags::kMayReclaim: kChargeAtomic, kNone) left a group over its
// high. The kernel schedules memcg->high_work there (high_work_func: one
// batch of reclaim from every level over high, a `high` event per level).
enum class HighWorkMode : uint8_t {
  // A worker thread of the controller runs the queued work at once.
  kThread,
  // The work is queued; the application runs it with
  // Controller::RunHighWork (ControllerOptions::high_work_notify says when
  // the queue becomes non-empty).
  kManual,
  // Nothing is queued: such a group is reclaimed by the next blocking
  // charge that finds it over high or by memory.high writes (the behaviour
  // before high work existed; for programs that must not get a thread).
  kNone,
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
  // 1..4096 (slot counts are 32-bit; the kernel's uint8 stops at 127).
  // A group's own stock slots hold up to nr_cpus x batch pages, and an
  // ancestor's usage also counts its descendants' (Group, Usage
  // over-report).
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
  // Reclaim for memory.high after non-blocking charges (see HighWorkMode).
  // The charging thread's pending overage (the memory.high penalty it owes
  // at its next HandleOverHigh or blocking charge) is recorded either way.
  HighWorkMode high_work = HighWorkMode::kThread;
  // kManual: called on the charging thread when a group is queued on an
  // empty queue. Must be quick: no blocking, no charging, no controller
  // calls (wake an event loop that then calls RunHighWork).
  std::function<void()> high_work_notify;
  // kPerGroupSubtree: an update stops counting pending updates at the first
  // ancestor already over its flush threshold (true). false walks every
  // level on every update, the naive per-level walk (umemcg-bench's
  // `naive-walk` stat variant); values and bounds stay exact either way.
  bool stats_update_early_stop = true;
  // Commit statistic updates (Group::ModState) with restartable sequences
  // where the stocks can (see ControllerInfo::stock_rseq): one non-locked
  // per-CPU add. false takes the per-CPU try-lock on every update (for
  // benchmarks and tests of that path).
  bool stats_rseq = true;
  // Charge each new group's own statistics (its statistics allocation and
  // one per-CPU block for every CPU, the kernel's memcg per-CPU data) to
  // its parent, shown there as "percpu" in memory.stat and within
  // "kernel", and counted against the parent's memory.max: CreateGroup
  // fails with kResourceExhausted (ENOMEM) when they do not fit. Returned
  // when the group is freed. Children of the root are not charged (the
  // kernel never charges the root). ControllerInfo::group_metadata_bytes
  // says how much each group costs its parent. On by default, as the
  // kernel charges a memcg's per-CPU data: a tenant allowed to create
  // subgroups cannot use memory outside its limit that way. Off: nothing
  // is charged for groups (every parent's memory.current and memory.stat
  // then count only what was charged to the groups).
  bool charge_group_metadata = true;
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
  HighWorkMode high_work = HighWorkMode::kThread;
  // Statistic updates commit through restartable sequences (the same
  // conditions as stock_rseq, and ControllerOptions::stats_rseq);
  // otherwise they take the per-CPU try-lock.
  bool stats_rseq = false;
  size_t nr_stat_items = 0;  // built-in + custom
  bool charge_group_metadata = false;
  // Bytes charged to its parent for each group (charge_group_metadata;
  // otherwise 0): glibc's chunks for the group's statistics allocation and
  // for one per-CPU statistics block per CPU (docs/design.md, Footprint).
  uint64_t group_metadata_bytes = 0;
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

  // Creates `name` under `parent`, refusing what cgroupfs refuses.
  // kInvalidArgument: empty, ".", "..", or containing '/' or '\n';
  // kNameTooLong: over kMaxGroupNameBytes; kAlreadyExists: a sibling or one
  // of the parent's control files (ListFiles) has that name;
  // kFailedPrecondition: parent offline, or called from inside a reclaimer;
  // kResourceExhausted (ENOMEM): the new group's statistics, charged to the
  // parent (ControllerOptions::charge_group_metadata), do not fit under
  // the parent's or an ancestor's max after reclaim; kAgain: an external
  // limit on the way could not be asked. May reclaim (that charge).
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
  // Synchronous: when it returns, no stock holds pages charged before the
  // call for a group of the subtree. One drain runs at a time (the
  // kernel's percpu_charge_mutex): a call made while another drain runs
  // waits for the next one, which covers every subtree requested in the
  // meantime (their common ancestor), instead of draining every CPU
  // itself. Waits briefly for a CPU's stock held by a thread mid-operation
  // (nanoseconds: no stock section blocks).
  void DrainAllStocks(Group& subtree);

  // Validates the structure at a quiescent point (no concurrent charges,
  // uncharges or limit changes): each group's usage covers its online
  // children's, each parent's children_min/low_usage equals the sum of its
  // online children's protected usage, each group's nr_descendants counts
  // its online descendants, and every stock slot is within one batch and
  // held by a live group. Returns kFailedPrecondition naming the first
  // violation. Walks the whole tree and every CPU's stock.
  Status CheckInvariants();

  // Frees the objcgs and removed groups whose last reference went. A group
  // is freed once a grace period has passed since its last reference went
  // (kernel: RCU-deferred css freeing): no thread is still inside an object
  // charge or uncharge that may have read it through an objcg just
  // reparented away from it. Grace periods are polled, never waited for: a
  // group that a thread blocked inside such a charge (reclaim, OOM
  // handling, a memory.high sleep) may still reach is freed by a later
  // reap. Calling Reap() is never required: the periodic stats flusher
  // reaps every period, so a group whose last reference went is freed
  // within one period (kernel: css release needs no call either); tree
  // operations and, with no flusher thread, the slow path of charges that
  // may reclaim start a grace period once kReapBatch groups wait or the
  // oldest waited one period (2 s with the flusher off). Reap() always
  // runs one now (its cost: a few loads per CPU and two membarrier(2)
  // calls).
  // Time proportional to the groups and objcgs freed, plus O(nr_cpus) per
  // grace period.
  void Reap();
  static constexpr int kReapBatch = 32;
  // NAME_MAX: the longest group name CreateGroup takes.
  static constexpr size_t kMaxGroupNameBytes = 255;

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

  // ---- memory.high work (see HighWorkMode) ----

  // Runs the queued high work on the calling thread: for each queued group
  // still online, one batch of reclaim from it and every ancestor over its
  // high, each raising a `high` event (kernel: high_work_func ->
  // reclaim_high). Calls reclaimers; returns the groups run. Does nothing
  // (returns 0) from inside a reclaimer or OOM handler. Any mode; with
  // kThread the worker may have taken the work first.
  size_t RunHighWork();
  // Groups queued and not yet taken by RunHighWork or the worker.
  size_t high_work_queued() const {
    return high_work_queued_.load(std::memory_order_relaxed);
  }

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
  // Groups currently allocated, online or not (root included): the online
  // ones plus the removed ones not freed yet (referenced, or waiting for a
  // grace period).
  int64_t live_groups() const {
    return live_groups_.load(std::memory_order_relaxed);
  }
  // ObjCgroups currently allocated (one per online group, plus those of
  // removed groups still referenced by objects or stocks, until Reap).
  int64_t live_objcgs() const {
    return live_objcgs_.load(std::memory_order_relaxed);
  }

 private:
  friend class Group;
  friend class GroupRef;
  friend class ObjCgroup;
  friend class internal::ControllerImpl;
  friend class internal::ObjStock;
  friend class internal::Psi;
  friend class internal::ScaleTestPeer;
  friend class internal::StatsTestPeer;
  friend class internal::StockDrainer;
  friend class internal::ControllerForkHandler;
  friend struct internal::TreeWriteLock;
  friend struct PeakRegistry;

  explicit Controller(ControllerOptions options, ControllerInfo info);

  // A contract violation: counted, then given to the error hook now or,
  // under a lock (internal::DeferReports), once it is released.
  void Report(const char* what, const Group* group, Pages pages);
  void Deliver(const char* what, const Group* group, Pages pages);
  void ReleaseGroup(Group* group);          // last reference dropped
  void ReleaseObjCgroup(ObjCgroup* objcg);  // last reference dropped
  void FreeObjCgroup(ObjCgroup* objcg);     // from Reap
  void CreateObjCgroup(Group* group);
  Group* FindChildLocked(Group& parent, std::string_view name) const;
  // CreateGroup's part under the tree lock: links a new child that keeps
  // `metadata_objcg`'s reference (its metadata charge, may be null).
  GroupRef CreateGroupLocked(Group& parent, std::string_view name,
                             ObjCgroup* metadata_objcg);
  // kForce: Reap(). kPeriodic: the flusher's tick, a grace period for
  // whatever waits. kAuto: a grace period only once kReapBatch groups wait
  // or the oldest waited ReapPeriod(). Except under kForce, a reap already
  // running elsewhere is left to finish.
  enum class ReapMode { kForce, kPeriodic, kAuto };
  void ReapImpl(ReapMode mode);
  // The flusher period, or 2 s without a flusher.
  std::chrono::nanoseconds ReapPeriod() const;
  // Frees `g` (its grace period passed). REQUIRES: reap_mu_.
  void FreeGroup(Group* g, std::vector<FreedGroup>* freed);
  // Calls OnGroupOffline / OnGroupFreed of every observer.
  void NotifyOffline(Group& group);
  void NotifyFreed(const std::vector<FreedGroup>& freed);

  ControllerOptions options_;
  ControllerInfo info_;
  Clock* clock_;
  std::unique_ptr<internal::ChargeStock> stock_;
  std::unique_ptr<internal::ObjStock> obj_stock_;
  // Declared after stock_ (whose CPU source it uses): destroyed first.
  std::unique_ptr<internal::Rstat> rstat_;
  // Read sections around every use of an objcg's group pointer without a
  // group reference (object charge misses, refills); grace periods before
  // freeing a group (see Reap).
  std::unique_ptr<internal::Srcu> srcu_;
  std::vector<std::string> stat_names_;  // every item, by id
  std::vector<StatUnit> stat_units_;
  Group* root_ = nullptr;

  // Guards every group's children list and reclaimers_, the child index
  // and online transitions. Shared by lookups and reclaim walks. Writers
  // also hold tree_fork_mu_ (TreeWriteLock) for their whole section, which
  // the fork handler takes: reclaim walks hold tree_mu_ while reclaimers
  // run, so fork cannot wait for tree_mu_ itself (see
  // ControllerForkHandler).
  mutable std::shared_mutex tree_mu_;
  std::mutex tree_fork_mu_;
  std::unique_ptr<internal::ChildIndex> children_;  // guarded by tree_mu_
  // Serializes OOM handling (kernel: oom_lock).
  std::mutex oom_mu_;
  std::atomic<std::shared_ptr<const OomHandler>> oom_handler_;
  // Attached observers, replaced whole (copy on write) under observers_mu_
  // (which also guards the event callbacks' retired list below); read by
  // the controller's other notifications (offline, freed, destroy).
  using ObserverList = std::vector<std::shared_ptr<ControllerObserver>>;
  std::mutex observers_mu_;
  std::atomic<std::shared_ptr<const ObserverList>> observers_;
  // RaiseEvent's lock-free view (events.cc): the list observers_ holds, a
  // count of RaiseEvent calls in flight, and the lists and group event
  // callbacks replaced while one may still be using them (guarded by
  // observers_mu_; freed once no RaiseEvent is in flight).
  std::atomic<const ObserverList*> event_observers_{nullptr};
  std::atomic<uint64_t> event_readers_{0};
  std::vector<std::shared_ptr<const void>> retired_for_events_;
  // Every group's memory.peak watchers (kernel: peaks_lock).
  std::mutex peaks_mu_;

  // Guards every group's objcg list and every objcg's group pointer
  // changes (kernel: objcg_lock). Taken on group creation and removal, at
  // objcg release and by DrainAllStocks.
  std::mutex objcg_mu_;

  // One DrainAllStocks at a time, and the waiters for the next one.
  std::unique_ptr<internal::StockDrainer> drainer_;
  // Registered with the fork handlers from Create until destruction.
  std::unique_ptr<internal::ControllerForkHandler> fork_handler_;

  // memory.high work (src/high.cc): a lock-free stack of queued groups,
  // each holding a reference; the worker thread (kThread) waits on
  // high_work_seq_.
  std::atomic<Group*> high_work_{nullptr};
  std::atomic<size_t> high_work_queued_{0};
  std::atomic<uint32_t> high_work_seq_{0};
  std::atomic<bool> high_work_stop_{false};
  std::thread high_worker_;
  // Set in a fork child whose parent ran a worker: the next queued work
  // starts the child's own (src/high.cc).
  std::atomic<bool> restart_high_worker_{false};

  std::atomic<Group*> to_free_{nullptr};  // lock-free stack of dead groups
  std::atomic<ObjCgroup*> objcg_to_free_{nullptr};  // ditto, objcgs
  // Serialises reaping. Dead groups popped from to_free_ wait in
  // gp_waiting_ for the next grace period, then in gp_current_ for the one
  // in progress (linked through Group::next_to_free_).
  std::mutex reap_mu_;
  Group* gp_waiting_ = nullptr;  // guarded by reap_mu_
  int nr_gp_waiting_ = 0;        // guarded by reap_mu_
  // When gp_waiting_ last went from empty to not (clock_ time).
  std::chrono::nanoseconds gp_waiting_since_{0};  // guarded by reap_mu_
  // When a kAuto reap next has work (clock_ time, ns), set at the end of
  // each reap: the waiting groups' period end, or one poll interval on
  // while a grace period is in progress; INT64_MAX when nothing waits. The
  // charge slow path (ReapIfDue) reaps only past it or with to_free_ not
  // empty. Relaxed: a hint, see ReapIfDue.
  std::atomic<int64_t> next_auto_reap_ns_{INT64_MAX};
  Group* gp_current_ = nullptr;  // guarded by reap_mu_
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> underflows_{0};
  std::atomic<int64_t> live_groups_{0};
  std::atomic<int64_t> live_objcgs_{0};

  // Work done by tree operations, counted so that tests can prove it does
  // not grow with the tree. Relaxed: counters that publish nothing.
  std::atomic<uint64_t> objcgs_visited_{0};            // reparenting, freeing
  std::atomic<uint64_t> reaps_run_{0};                 // ReapImpl passes
  mutable std::atomic<uint64_t> siblings_visited_{0};  // entries compared
};

}  // namespace umemcg

#endif  // UMEMCG_CONTROLLER_H_

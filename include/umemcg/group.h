// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Group: one node of a Controller's tree (a tenant, user, query, ...), the
// user-space memcg. It owns a hierarchical PageCounter ("memory") with the
// limits ladder min/low/high/max, memory events, reclaimers and an optional
// OOM handler. Charges go through the per-CPU stock of pre-charged pages
// (kernel: try_charge_memcg, consume_stock, refill_stock).
//
// Lifetime. Groups are reference counted. The tree holds a reference while
// the group is online; each GroupRef, each stock slot caching the group and
// each child hold one too. Objects charged through the group's objcg do
// not: removal points the objcg at the parent (obj_cgroup.h).
// Controller::RemoveGroup takes a group offline: it is unlinked from the
// tree, its objcgs are reparented, its protection is released, the stocks
// caching it are drained and later charges fail with kFailedPrecondition,
// while uncharges of memory charged earlier still work (the kernel's
// dying memcg). Its memory is freed after the last reference goes and no
// thread still inside an object charge can read it (a grace period, see
// Controller::Reap). A group freed with pages still charged (other than
// through its objcgs) reports them through the error hook and returns them
// to its ancestors, so an ancestor's usage never keeps a leak of a dead
// child. ControllerObserver is told when a group goes offline and when it
// is freed.
//
// Roots. The root group has no limits or protection; charging it is a free
// no-op success, as the kernel skips the root memcg, but every descendant's
// charge is counted in the root's counter, so root usage = sum of its
// children's.
//
// Usage over-report. Pages held in per-CPU stocks are charged (to the
// group and every ancestor) but unused. A group's own slots hold at most
// nr_cpus x batch() pages (StockedPages() says how much exactly); an
// ancestor's usage() also counts what its descendants' slots hold, at most
// nr_cpus x stock slots x their batch. A charge that may reclaim drains
// every refusing level's subtree before any OOM decision, so stock never
// causes a failure draining would avoid; a charge that may not (no
// kMayReclaim) is refused without draining under BatchPolicy::kFixed, as
// the kernel refuses an atomic charge, and drains first under kAdaptive.
//
// Thread safety: every method may be called from any thread. TryCharge and
// Uncharge never take a blocking lock and never allocate on the stock-hit
// path; with kMayReclaim they may call reclaimers and the OOM handler,
// block on the controller's tree lock (shared) and sleep (memory.high).
// Setters of one kind (SetMax, SetHigh, ...) on one group should be
// serialized by the caller, like writes to one cgroup file.

#ifndef UMEMCG_GROUP_H_
#define UMEMCG_GROUP_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "umemcg/events.h"
#include "umemcg/export.h"
#include "umemcg/page_counter.h"
#include "umemcg/stats.h"
#include "umemcg/status.h"
#include "umemcg/units.h"

namespace umemcg {

class Controller;
class Group;
class ObjCgroup;
class ObjCgroupRef;
namespace internal {
class ChargeStock;
class ChildIndex;
class ControllerImpl;
class ExternalLimit;
class ExternalLimits;
class ObjStock;
class GroupStats;
class GroupPressure;
class Psi;
class ReclaimWalk;
class StatsTestPeer;
}  // namespace internal

// ---- Charge flags (kernel gfp bits that matter to try_charge) ----

enum class ChargeFlags : uint32_t {
  kNone = 0,
  // May block: call reclaimers, drain remote stocks, run the OOM handler
  // and sleep for memory.high (__GFP_DIRECT_RECLAIM). Without it a charge
  // that does not fit fails at once (or is forced, with kHigh/kNoFail).
  kMayReclaim = 1u << 0,
  // Give up after the first reclaim + drain round (__GFP_NORETRY).
  kNoRetry = 1u << 1,
  // Fail instead of invoking OOM handling (__GFP_RETRY_MAYFAIL).
  kRetryMayFail = 1u << 2,
  // Never fail: charge past max when nothing else worked (__GFP_NOFAIL).
  kNoFail = 1u << 3,
  // Charge past max when it would otherwise fail (__GFP_HIGH, GFP_ATOMIC).
  kHigh = 1u << 4,
  // Do not sleep for memory.high: return the penalty in
  // ChargeResult::throttle for the caller to honour (event loops).
  kNoThrottle = 1u << 5,
};
constexpr ChargeFlags operator|(ChargeFlags a, ChargeFlags b) {
  return static_cast<ChargeFlags>(static_cast<uint32_t>(a) |
                                  static_cast<uint32_t>(b));
}
constexpr bool HasFlag(ChargeFlags set, ChargeFlags f) {
  return (static_cast<uint32_t>(set) & static_cast<uint32_t>(f)) != 0;
}
// GFP_KERNEL: may reclaim and throttle.
inline constexpr ChargeFlags kChargeDefault = ChargeFlags::kMayReclaim;
// GFP_ATOMIC: never blocks; forced past max rather than failing.
inline constexpr ChargeFlags kChargeAtomic = ChargeFlags::kHigh;

// ---- Results ----

// The outcome of a charge. Not an error type: running out of room is an
// expected outcome (ok() false, code kResourceExhausted).
struct [[nodiscard]] ChargeResult {
  // kOk; kResourceExhausted (did not fit under limited_by's max, or its
  // external limit: a cluster lease the cluster refused to grow);
  // kAgain (limited_by's external limit could not be grown because its
  // owner is unreachable, e.g. the cluster's Redis: retry later);
  // kFailedPrecondition (the group is offline); kInvalidArgument (more
  // than kPageCounterMax pages).
  StatusCode code = StatusCode::kOk;
  // Charged past a max (kNoFail / kHigh, or from inside a reclaimer).
  bool forced = false;
  // With ChargeFlags::kNoThrottle: the memory.high penalty the caller owes
  // (0 when none; at most 2 s); without it the thread already slept it.
  std::chrono::duration<int32_t, std::milli> throttle{0};
  // The group whose max refused the charge (or was exceeded by a forced
  // one); null otherwise. Valid while the caller holds the charged group.
  Group* limited_by = nullptr;

  bool ok() const { return code == StatusCode::kOk; }
};
// 16 bytes, trivially copyable: returned in two registers.
static_assert(sizeof(ChargeResult) == 16);

// ---- GroupRef ----

// A counted reference to a Group: keeps it (and its ancestors) allocated,
// whether online or not. Copying takes a reference (one atomic increment).
class UMEMCG_EXPORT GroupRef {
 public:
  GroupRef() = default;
  // Takes a new reference to `group` (may be null).
  explicit GroupRef(Group* group);
  GroupRef(const GroupRef& other) : GroupRef(other.group_) {}
  GroupRef(GroupRef&& other) noexcept : group_(other.group_) {
    other.group_ = nullptr;
  }
  GroupRef& operator=(GroupRef other) noexcept {
    std::swap(group_, other.group_);
    return *this;
  }
  ~GroupRef() { reset(); }

  void reset();
  Group* get() const { return group_; }
  Group* operator->() const { return group_; }
  Group& operator*() const { return *group_; }
  explicit operator bool() const { return group_ != nullptr; }

 private:
  friend class ObjCgroup;
  // Owns a reference the caller already holds (taken with Group::TryGet).
  static GroupRef Adopt(Group* group) {
    GroupRef ref;
    ref.group_ = group;
    return ref;
  }

  Group* group_ = nullptr;
};

// ---- Callbacks ----

// The application's reclaim hook for a group (kernel: a shrinker over the
// group's LRU). Called by the charge path, memory.high handling (also on
// the controller's high-work thread, see HighWorkMode) and
// SetMax/SetHigh/Reclaim with the controller's tree lock held shared.
// Implementations free memory and uncharge it from the group, then report
// how much they freed. They must not create or remove groups or change
// reclaimers (those calls fail with kFailedPrecondition from inside a
// callback); charges made from inside are forced, as in the kernel's
// PF_MEMALLOC context.
class UMEMCG_EXPORT Reclaimer {
 public:
  virtual ~Reclaimer() = default;
  // Pages this reclaimer could free now (count_objects).
  virtual Pages Reclaimable() = 0;
  // Free up to `target` pages (uncharging them); return the pages freed.
  virtual Pages Reclaim(Pages target) = 0;
};

// What the OOM handler is told.
struct UMEMCG_EXPORT OomContext {
  // The group whose max the charge could not fit under (the OOM domain).
  Group* over_limit = nullptr;
  // over_limit itself when it has memory.oom.group set, else null.
  Group* kill_group = nullptr;
  // The charge that could not be satisfied.
  Pages nr_pages;
  // The highest ancestor of `victim` up to and including over_limit with
  // memory.oom.group set, or null: the subtree to kill as a unit when the
  // handler picks `victim` (kernel: mem_cgroup_get_oom_group()).
  Group* KillGroupFor(Group& victim) const;
};

// A victim the OOM handler reports: a group whose memory it released and
// how many of its "tasks" it killed for that (kernel: each task killed by
// __oom_kill_process, counted in its memcg's oom_kill). Holds a reference
// to the group, taken when the victim is made: the handler may remove the
// group and drop its own references before returning; the charge path
// still uses it afterwards. Implicit from a Group* (which the handler must
// hold when it makes the victim), so `.killed = group` reads naturally.
class UMEMCG_EXPORT OomVictim {
 public:
  OomVictim() = default;
  OomVictim(Group* group, uint64_t tasks = 1)  // NOLINT: implicit on purpose
      : group_(group), tasks_(group != nullptr ? tasks : 0) {}
  OomVictim(const GroupRef& group, uint64_t tasks = 1)  // NOLINT
      : OomVictim(group.get(), tasks) {}

  Group* group() const { return group_.get(); }
  uint64_t tasks() const { return tasks_; }
  explicit operator bool() const { return group_.get() != nullptr; }

 private:
  GroupRef group_;
  uint64_t tasks_ = 0;
};

// What the OOM handler did.
struct OomOutcome {
  // Memory was released (usage went down); the charge path retries.
  bool progress = false;
  // The victim: the group whose memory was released ("the killed task's
  // memcg") and the tasks killed in it (1 unless said otherwise). Each
  // victim's oom_kill event counts its tasks, locally and hierarchically
  // (memory.events). With progress, every memory.oom.group subtree that a
  // victim belongs to (OomContext::KillGroupFor) gets one oom_group_kill
  // event, however many of its members were reported. A victim must be
  // over_limit or a descendant; otherwise it is ignored and reported to
  // the error hook ("oom_victim").
  OomVictim killed;
  // Further victims, in the same form: every member killed by an
  // memory.oom.group sweep, or several tasks of several groups. A group
  // may appear more than once (the counts add up).
  std::vector<OomVictim> victims;
};
using OomHandler = std::function<OomOutcome(const OomContext&)>;

// Called after an event counter of `group` changed: once with local = true
// on the group the event was raised on (memory.events.local), and with
// local = false on it and each ancestor whose hierarchical count changed
// (memory.events). Called on the charging thread; must be quick and must
// not charge to the group. A charge that cannot block may run in a signal
// handler (docs/architecture.md, Decisions): its callbacks then run there,
// so they must be async-signal-safe if the application charges from one.
using EventCallback =
    std::function<void(Group& group, MemoryEvent event, bool local)>;

// ---- Group ----

class UMEMCG_EXPORT alignas(64) Group {
 public:
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  // ---- Charging ----

  // Charges `n` pages: from this CPU's stock when it holds enough, else a
  // batch of max(batch, n) through the counters (the rest refills the
  // stock), then reclaim, stock draining, retries and OOM handling as
  // `flags` allow (kernel: try_charge_memcg). Zero pages and the root
  // group succeed at once. After a batch charge, usage over memory.high on
  // this group or an ancestor adds to the thread's pending overage; past
  // one batch of it the thread reclaims and is throttled (see kNoThrottle).
  ChargeResult TryCharge(Pages n, ChargeFlags flags = kChargeDefault);

  // Returns `n` pages through this CPU's stock (kernel: refill_stock, the
  // socket/kmem path): cheap, but the pages stay charged in the stock
  // until it passes one batch or is drained. Allowed on offline groups
  // (then direct). Uncharging more than was charged clamps to zero, counts
  // an underflow and calls the error hook (aborts in debug builds).
  void Uncharge(Pages n);

  // Returns `n` pages straight to the counters of this group and its
  // ancestors (kernel: uncharge_batch, the folio path).
  void UnchargeDirect(Pages n);

  // The same, also moving the page statistic `item` (kSock, kAnon, kFile,
  // kShmem, kKernel, ...; the caller's choice, as each kernel charge site
  // updates its own item) by +n on success / -n: one extra per-CPU stat
  // update (Group::ModState). A non-page item is kInvalidArgument and
  // charges nothing.
  ChargeResult TryCharge(Pages n, ChargeFlags flags, StatItem item);
  void Uncharge(Pages n, StatItem item);
  void UnchargeDirect(Pages n, StatItem item);

  // Runs this thread's pending memory.high handling now if it belongs to
  // this group (the kernel does it on return to user space): reclaim, then
  // sleep (or return the penalty with kNoThrottle). Returns the penalty.
  // From inside a reclaimer or OOM handler it does nothing and returns 0;
  // the overage stays pending.
  std::chrono::milliseconds HandleOverHigh(ChargeFlags flags = kChargeDefault);

  // A new reference to the group's objcg, for byte-granular object
  // accounting (see obj_cgroup.h), or an empty one once the group was
  // removed (its objcg then points to the parent and is reachable only
  // through the objects' references). Safe against a concurrent
  // RemoveGroup (takes the tree lock shared). There is no accessor for the
  // bare pointer: a reference taken from it could race with the removal
  // freeing the objcg.
  ObjCgroupRef GetObjCgroup();

  // ---- Limits (cgroup-v2 write semantics; root: kInvalidArgument,
  //      offline: kFailedPrecondition, no memory controller: kNotFound,
  //      as the files layer's ENOENT). A set racing with the parent's
  //      SetSubtreeMemory(false) may return Ok; the group is then left
  //      with no limit and no protection either way. ----

  // memory.max: sets the limit, then drains stocks, reclaims and, failing
  // that, invokes OOM handling until usage fits or nothing makes progress.
  // Succeeds even when usage stays above `max`. Without kMayReclaim in
  // `flags` only the limit is set (the kernel's O_NONBLOCK write).
  Status SetMax(Pages max, ChargeFlags flags = kChargeDefault);
  // memory.high: sets the limit, then drains and reclaims toward it
  // (only sets it without kMayReclaim).
  Status SetHigh(Pages high, ChargeFlags flags = kChargeDefault);
  // memory.min / memory.low: hard and best-effort protection.
  Status SetMin(Pages min);
  Status SetLow(Pages low);
  // memory.oom.group: OOM handling treats the subtree as one unit.
  Status SetOomGroup(bool oom_group);
  // memory.reclaim: reclaims `n` pages from the subtree. kAgain when fewer
  // could be reclaimed.
  Status Reclaim(Pages n);

  // ---- Callbacks ----

  // Registers a reclaimer (not owned; must stay valid until removed).
  // Blocks while a reclaim walk is running.
  Status AddReclaimer(Reclaimer* reclaimer);
  // After it returns, `reclaimer` is not being called and will not be.
  Status RemoveReclaimer(Reclaimer* reclaimer);
  // Overrides the controller's OOM handler for OOMs whose over-limit group
  // is this one or a descendant without its own. Null restores the default.
  void SetOomHandler(OomHandler handler);
  // Replaces the event callback (null removes it).
  void SetEventCallback(EventCallback callback);

  // ---- Statistics (memory.stat; see stats.h) ----
  //
  // Updates are per-CPU adds, seen by readers after a flush of a subtree
  // holding the group. Three kinds of readers, by cost:
  //   *Fast   no flush: may lag by StatBound() (O(1));
  //   Stat*   flush this group's subtree first if its unflushed updates
  //           (StatBound().pending: the shared count and the per-CPU
  //           residues) pass batch x nr_cpus, or an update's count
  //           stopped uncovered (StatBound().exceeded); kGlobalWholeTree:
  //           the whole tree, by the global count. As memory.stat does.
  //           Then lags by at most batch x nr_cpus page-normalised
  //           updates plus the updates racing with the read. (The
  //           kernel's check leaves the per-CPU residues out and can lag
  //           by nr_cpus x (batch - 1) more.) Costs one load per CPU
  //           the group was updated on when the shared count is under
  //           the threshold;
  //   *Exact  always flush this group's subtree first: exact for updates
  //           that completed before the call.
  // Values are in the item's unit (pages, bytes, KiB or events) and may be
  // negative transiently (per-CPU deltas of opposite signs).

  // Adds `delta` (in the item's unit) to `item` of this group: this CPU's
  // counter plus the rstat "updated" mark; no allocation, no blocking lock,
  // and with rseq (ControllerInfo::stats_rseq) no atomic read-modify-write
  // in the common case: one non-locked add committed by a restartable
  // sequence.
  // Refused (no-op, returns false) on a removed group or an unknown item.
  bool ModState(StatItem item, int64_t delta);
  // Counts `n` occurrences of an event item (pgfault, ...).
  bool CountEvent(StatItem item, uint64_t n = 1) {
    return ModState(item, static_cast<int64_t>(n));
  }
  // This group's subtree's value of `item` / its own updates' value.
  int64_t StatFast(StatItem item) const;
  int64_t StatLocalFast(StatItem item) const;
  int64_t Stat(StatItem item);
  int64_t StatLocal(StatItem item);
  int64_t StatExact(StatItem item);
  int64_t StatLocalExact(StatItem item);
  // How far a *Fast read taken now can be off, and the time since the last
  // flush covering this group. Reads one counter per CPU.
  StatErrorBound StatBound() const;
  // Flushes this group's subtree now (per CPU: the flush lock and one pass
  // over the subtree's groups updated on that CPU).
  void FlushStats();
  // Flushes as Stat* does, but only when the periodic flusher is more than
  // one period late (kernel: mem_cgroup_flush_stats_ratelimited): for hot
  // paths that want fresh-enough numbers.
  void FlushStatsRatelimited();
  // memory.stat text ("key value\n", kernel order, bytes where the kernel
  // prints bytes, negative values as 0), after a Stat-style conditional
  // flush. Includes the derived "slab" and "stock" lines and custom items.
  std::string MemoryStat();
  // memory.events / memory.events.local text ("low 0\nhigh 0\n...").
  std::string MemoryEvents() const;
  std::string MemoryEventsLocal() const;
  // memory.stock text (umemcg's own file): "stocked <bytes cached in the
  // stocks now>\nbatch <pages, batch()>\nslack_bound <bytes,
  // StockSlackBound()>\n".
  std::string MemoryStock() const;

  // ---- cgroup-v2 files (see files.h) ----

  // Reads / writes memory file `name` through a one-shot handle.
  StatusOr<std::string> ReadFile(std::string_view name);
  Status WriteFile(std::string_view name, std::string_view text);
  // The memory files this group has (the root has fewer).
  std::vector<std::string> ListFiles() const;

  // ---- Observers ----

  // The hierarchical counter: usage, limits, peaks, failcnt, protection.
  const PageCounter& memory() const { return memory_; }
  Pages usage() const { return memory_.usage(); }
  // Pages cached for this group in all CPUs' stocks now, read without the
  // stocks' locks (a statistic: exact at quiescence; while charges run it
  // may pair a slot's group with a count from just before or after).
  // Bounded by StockSlackBound().
  Pages StockedPages() const;
  // The group's current batch: pages per counter walk, and the most one
  // CPU's stock caches for it (ControllerOptions::batch, or what the
  // adaptive policy set last; 0 = no stock).
  int batch() const { return batch_.load(std::memory_order_relaxed); }
  // nr_cpus x batch(): the most this group's own stock slots can hold now
  // (the adaptive policy trims them when it lowers the batch). Its
  // descendants' slots are not counted, though its usage includes them.
  Pages StockSlackBound() const;

  uint64_t events(MemoryEvent e) const {
    return events_[static_cast<int>(e)].load(std::memory_order_relaxed);
  }
  uint64_t events_local(MemoryEvent e) const {
    return events_local_[static_cast<int>(e)].load(std::memory_order_relaxed);
  }
  bool oom_group() const { return oom_group_.load(std::memory_order_relaxed); }

  const std::string& name() const { return name_; }
  // "a/b/c" from the root ("" for the root).
  std::string path() const;
  Group* parent() const { return parent_; }
  bool is_root() const { return parent_ == nullptr; }
  bool online() const { return online_.load(std::memory_order_acquire); }
  int depth() const { return depth_; }
  // Unique within the controller, never reused; the root is 1.
  uint64_t id() const { return id_; }
  Controller& controller() const { return *controller_; }
  // True if this group is `ancestor` or lies below it.
  bool IsDescendantOf(const Group& ancestor) const;
  // Names of the online children, in creation order (takes the tree lock).
  std::vector<std::string> ChildNames() const;

  // cgroup.subtree_control's "memory" (kernel: cgroup_subtree_control_
  // write). Enabled in every new group whose own group has the controller
  // (umemcg's default; the kernel's is off). Disabling is a no-op when it
  // is off, and kBusy while a child has it on in its own subtree_control;
  // then the children lose the controller: their memory.* files go (files
  // layer) and their limits and protection are reset to the defaults,
  // so they limit and protect nothing, and their events count at the
  // nearest ancestor with the controller. Their charges still go through
  // their counters, which the ancestors count as before (see
  // docs/design.md for how this differs from the kernel). Enabling needs
  // the controller on this group (kNotFound otherwise); children that
  // gain it start with fresh events and peaks. Takes the tree lock.
  Status SetSubtreeMemory(bool enable);
  bool subtree_memory() const {
    return subtree_memory_.load(std::memory_order_acquire);
  }
  // Whether this group has the memory controller: the root always, any
  // other group when its parent's subtree_control enables it.
  bool has_memory_controller() const {
    return parent_ == nullptr || parent_->subtree_memory();
  }
  // How many online children it has (takes the tree lock; O(1)).
  size_t NumChildren() const;

  // ---- cgroup core state (cgroup.stat, cgroup.events) ----

  // Online descendants (kernel: cgroup->nr_descendants).
  int64_t nr_descendants() const {
    return nr_descendants_.load(std::memory_order_relaxed);
  }
  // Removed descendants not yet freed (kernel: nr_dying_descendants): a
  // removed group stays allocated while references to it remain (GroupRefs,
  // stock slots, its objcg's objects, see obj_cgroup.h) and is freed by the
  // next Reap after the last one goes.
  int64_t nr_dying_descendants() const {
    return nr_dying_descendants_.load(std::memory_order_relaxed);
  }
  // cgroup.events "populated": the kernel's says whether a task lives in
  // the subtree; nothing runs inside a umemcg group, what lives in it is
  // charged memory, so here it is usage() > 0 (memory.current: the pages
  // charged to the subtree, those pre-charged in per-CPU stocks included,
  // so a subtree that freed everything reads 1 until its stocks are
  // drained). One relaxed load.
  bool populated() const { return usage().raw() > 0; }

 private:
  friend class Controller;
  friend class GroupRef;
  friend class ObjCgroup;
  friend class internal::ChargeStock;
  friend class internal::ChildIndex;
  friend class internal::ControllerImpl;
  friend class internal::ExternalLimits;
  friend class internal::ObjStock;
  friend class internal::Psi;
  friend class internal::ReclaimWalk;
  friend class internal::StatsTestPeer;  // tests: the per-CPU blocks
  friend struct PeakRegistry;

  Group(Controller* controller, Group* parent, std::string name, uint64_t id);
  ~Group();

  void Get() { refs_.fetch_add(1, std::memory_order_relaxed); }
  // A new reference unless the last one already went (the group is then
  // queued for freeing and must not be revived); kernel: css_tryget.
  // REQUIRES: the group's memory is still valid (a reference, or a read
  // section of the controller's group SRCU, see Controller::Reap).
  bool TryGet() {
    // Acquire: a caller that sees the count at 0 also sees what preceded
    // the last Put (for an objcg's group, the store moving the objcg
    // away), so it can look again. Success needs no ordering (as Get) but
    // is acquire too: GCC warns (-Winvalid-memory-model) in every user's
    // build when the failure order is stronger, and on x86 a
    // compare-exchange is a full barrier either way.
    int64_t r = refs_.load(std::memory_order_acquire);
    do {
      if (r <= 0) return false;
    } while (!refs_.compare_exchange_weak(r, r + 1, std::memory_order_acquire,
                                          std::memory_order_acquire));
    return true;
  }
  void Put();

  // The limits and protection of a group without the memory controller
  // (none), as SetSubtreeMemory(false) leaves them.
  void ResetLimitsWithoutController();
  // After a setter's write: if the controller went meanwhile (a setter
  // that passed its check may write after SetSubtreeMemory(false) reset
  // the limits), resets them again and returns true.
  bool UndoIfControllerLost();

  // TryCharge / Uncharge after the stock's rseq hit missed (charge.cc).
  [[gnu::noinline]] ChargeResult TryChargeMiss(uint64_t n, ChargeFlags flags);
  [[gnu::noinline]] void UnchargeMiss(uint64_t n);
  // The public page API (TryCharge, Uncharge, UnchargeDirect without a
  // StatItem) passes the heap profiler's page gate; these are what it does
  // when the gate is open (page samples on, SetHeapProfilePageCharges, or
  // the gate's periodic check): the countdown, and page samples when it
  // expired (src/profile/sampler.h). `entry_return`: the caller's return
  // address, where the sample's stack is cut.
  [[gnu::noinline]] ChargeResult TryChargeSampled(uint64_t n, ChargeFlags flags,
                                                  const void* entry_return);
  [[gnu::noinline]] void UnchargeSampled(uint64_t n, bool direct);
  // The same without the countdown, for umemcg's own page charges whose
  // memory is sampled elsewhere (the object path's page refills and
  // drains: its bytes are sampled).
  ChargeResult TryChargeUnsampled(Pages n, ChargeFlags flags);
  // GetObjCgroup without waiting for the tree lock (empty if it is held
  // exclusively, or the group was removed): for the page samples.
  ObjCgroupRef TryGetObjCgroup();
  void UnchargeUnsampled(Pages n);
  void UnchargeDirectUnsampled(Pages n);

  // Write-hot counter first (its own cache lines).
  PageCounter memory_;

  // Read-mostly after creation (read by every charge).
  internal::ChargeStock* const stock_;
  Controller* const controller_;
  Group* const parent_;
  const std::string name_;
  const uint64_t id_;
  const int depth_;
  // Per-CPU and aggregated statistics (src/rstat.h); owned.
  internal::GroupStats* const stats_;
  // Pressure stall state (src/psi/psi.h); owned. Made on first need (a
  // stall, a trigger or ReadPressure; reading the memory.pressure file
  // makes none), so a group that never needs one costs a pointer; set
  // once, never cleared (bit 0 alone: chargers unknown).
  std::atomic<internal::GroupPressure*> psi_{nullptr};
  // The objcg this group's own statistics were charged to when it was
  // created (its parent's; src/metadata/group_metadata.h), holding a
  // reference; null when they were not charged. Set before the group is
  // linked, used once by Controller::FreeGroup. (Here: in the padding
  // before refs_'s line, so the group is no larger.)
  ObjCgroup* metadata_objcg_ = nullptr;

  std::atomic<bool> online_{true};
  std::atomic<bool> oom_group_{false};
  // Written under the tree lock (SetSubtreeMemory, CreateGroup).
  std::atomic<bool> subtree_memory_{true};
  // Pages per counter walk and the most one CPU's stock slot may cache for
  // this group: the controller's batch, or (BatchPolicy::kAdaptive) what
  // the adaptive policy set last. Read inside the stock's hit paths;
  // written only by the policy, which trims the group's slots after a
  // shrink (a trim that finds a shard busy stays pending until the next
  // batch event; src/charge_stock.h). Relaxed: an independent value.
  std::atomic<int32_t> batch_;

  // Reference count; see the lifetime note above. On its own cache line:
  // stock slot installs write it, and the read-mostly fields above are
  // read by every charge. Increments are relaxed (a new reference is always
  // made from an existing one); the final decrement is acq_rel so the
  // reaper sees every prior write to the group.
  alignas(64) std::atomic<int64_t> refs_{1};
  // The CPU shards whose page stock (stock_shards_) or object stock kmem
  // cache (kmem_shards_) may hold this group: bit k % 64 for shard k. Set
  // (seq_cst RMW, on the line the install writes anyway for the
  // reference) before the installer checks online_, so that RemoveGroup,
  // which clears online_ before reading them, drains every shard that
  // cached the group and only those. Cleared when the slot lets go of the
  // group if the controller has at most 64 shards (above that a bit
  // stands for several shards and stays set: drains then visit a few
  // shards more, never fewer).
  std::atomic<uint64_t> stock_shards_{0};
  std::atomic<uint64_t> kmem_shards_{0};
  // BatchPolicy::kAdaptive: the time of the group's last batch event (a
  // stock refill by a charge, or a slot passing its batch), in the
  // controller clock's nanoseconds, the smoothed interval between events,
  // and a one-byte try-lock serialising the policy's decisions (a busy
  // policy is skipped; acquire/release). Written once per batch of pages,
  // under that lock; relaxed: heuristics, published to no one else.
  std::atomic<int64_t> batch_event_ns_{0};
  std::atomic<int64_t> batch_interval_ns_{INT64_C(10000000)};
  std::atomic<bool> batch_policy_busy_{false};
  // A shrink's TrimGroup skipped a busy stock shard (a charge from a
  // signal handler that interrupted its thread's stock operation, or a
  // preempted holder): the next batch event of the group trims again.
  // Relaxed: a flag; the trim itself orders through the shard locks.
  std::atomic<bool> trim_pending_{false};

  // Events: written only on slow paths (limits, reclaim, OOM). Relaxed:
  // independent counters that publish no other data.
  std::atomic<uint64_t> events_[kNumMemoryEvents] = {};
  std::atomic<uint64_t> events_local_[kNumMemoryEvents] = {};

  // Callbacks, replaced atomically; read on slow paths only.
  std::atomic<std::shared_ptr<const OomHandler>> oom_handler_;
  // Owned (deleted by ~Group, or retired by SetEventCallback until no
  // RaiseEvent can still use it); a raw pointer so that RaiseEvent reads
  // it with no lock (it runs in charges that must not block, signal
  // handlers included: see events.cc).
  std::atomic<const EventCallback*> event_callback_{nullptr};

  // memory.peak handles that have written (per-handle peaks), guarded by
  // the controller's peaks_mu_ (kernel: peaks_lock). Only file operations
  // touch them.
  std::vector<int64_t*> peak_watchers_;
  // The group's own objcg (holds a reference while online); set at
  // creation, cleared by RemoveGroup (acquire loads pair with the release
  // store at creation).
  std::atomic<ObjCgroup*> objcg_{nullptr};
  // Pages charged through objcgs to this group or a descendant, net of
  // those uncharged there (hierarchical, like usage; applied from the
  // object stocks' kmem caches).
  // Reap subtracts it from a dead group's leftover usage: after
  // reparenting, the parent is uncharged for those pages. Relaxed: read
  // only by Reap, after the last reference went.
  std::atomic<int64_t> objcg_pages_{0};

  // A limit kept outside the controller (a cluster lease), or null; read
  // on the charge slow path only (src/external_limit.h).
  std::atomic<internal::ExternalLimit*> external_limit_{nullptr};

  // Guarded by the controller's tree lock: the online children in
  // creation order, as a doubly linked list (O(1) unlink), their number,
  // and the chain of the controller's child index (by parent and name).
  Group* first_child_ = nullptr;
  Group* last_child_ = nullptr;
  Group* prev_sibling_ = nullptr;
  Group* next_sibling_ = nullptr;
  Group* index_next_ = nullptr;
  size_t nr_children_ = 0;
  std::vector<Reclaimer*> reclaimers_;
  // RemoveGroup counted this group in its ancestors' nr_dying_descendants_
  // (Reap uncounts it when freeing it). Written under the tree lock, read
  // by Reap after the last reference went.
  bool counted_dying_ = false;

  // cgroup.stat counts. Changed under the controller's tree lock
  // (descendants; dying on removal) and by Reap (dying, when a removed
  // descendant is freed); read without it. Relaxed: counters that publish
  // nothing else (the kernel reads them racily too).
  std::atomic<int32_t> nr_descendants_{0};
  std::atomic<int32_t> nr_dying_descendants_{0};

  // The objcgs whose group() is this group: its own while it is online and
  // those inherited from removed descendants (kernel: memcg->objcg_list),
  // linked through the objcgs. Guarded by the controller's objcg_mu_.
  ObjCgroup* objcg_list_ = nullptr;

  // Link in the controller's lock-free list of groups to free, then in its
  // lists of groups waiting for a grace period (guarded by reap_mu_).
  Group* next_to_free_ = nullptr;
  // memory.high work (Controller::RunHighWork): set while the group is on
  // the controller's queue (acq_rel exchange: one queue entry at a time),
  // and its link there.
  std::atomic<bool> high_work_pending_{false};
  Group* next_high_work_ = nullptr;
};

}  // namespace umemcg

#endif  // UMEMCG_GROUP_H_

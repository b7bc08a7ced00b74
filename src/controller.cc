// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Controller: settings, the group tree and group lifetime.
//
// Reparenting (kernel: memcg_reparent_objcgs). Each group lists the
// objcgs that point at it (its own and those inherited from removed
// descendants); RemoveGroup points them at the parent and splices the list
// into the parent's, before the group goes offline: work proportional to
// the group's own list. The dead group's counter keeps the pages charged
// through them (the kernel's stale usage); the parent is uncharged for
// them when the objects go, so Reap must not return them to the ancestors
// again: it subtracts the group's objcg_pages_ from the leftover it treats
// as a leak.

#include "umemcg/controller.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "charge_stock.h"
#include "child_index.h"
#include "controller_impl.h"
#include "metadata/group_metadata.h"
#include "obj_stock.h"
#include "port/fork.h"
#include "port/srcu.h"
#include "profile/sampler.h"
#include "rstat.h"
#include "stock_drainer.h"
#include "umemcg/obj_cgroup.h"

namespace umemcg {

using internal::tls_charge;

namespace {

Status Invalid(const std::string& what) {
  return Status(StatusCode::kInvalidArgument, what);
}

}  // namespace

StatusOr<std::unique_ptr<Controller>> Controller::Create(
    ControllerOptions options) {
  if (options.batch < 1 || options.batch > internal::kMaxBatch) {
    return Invalid("batch must be in 1..4096, got " +
                   std::to_string(options.batch));
  }
  if (options.batch_policy != BatchPolicy::kFixed &&
      options.batch_policy != BatchPolicy::kAdaptive) {
    return Invalid("batch_policy must be kFixed or kAdaptive");
  }
  if (options.batch_policy == BatchPolicy::kAdaptive &&
      (options.batch_max < options.batch ||
       options.batch_max > internal::kMaxBatch)) {
    return Invalid("batch_max must be in batch..4096, got " +
                   std::to_string(options.batch_max));
  }
  if (options.stock_slots < 1 ||
      options.stock_slots > internal::kMaxStockSlots) {
    return Invalid("stock_slots must be in 1..16, got " +
                   std::to_string(options.stock_slots));
  }
  if (options.obj_stock_slots < 1 ||
      options.obj_stock_slots > internal::kMaxObjStockSlots) {
    return Invalid("obj_stock_slots must be in 1..16, got " +
                   std::to_string(options.obj_stock_slots));
  }
  if (options.nr_cpus < 0 || options.nr_cpus > 4096) {
    return Invalid("nr_cpus must be 0 (auto) or 1..4096, got " +
                   std::to_string(options.nr_cpus));
  }
  if (options.stats_flush_period.count() < 0 ||
      options.stats_flush_period > std::chrono::hours(1)) {
    return Invalid("stats_flush_period must be in 0..1h");
  }
  std::vector<std::string> stat_names;
  std::vector<StatUnit> stat_units;
  if (Status s = internal::BuildStatTable(options.custom_stat_items,
                                          &stat_names, &stat_units);
      !s.ok()) {
    return s;
  }
  auto cpu = internal::CpuIdSource::Create(options.cpu_source, options.nr_cpus);
  if (!cpu.ok()) return cpu.status();

  ControllerInfo info;
  info.batch = options.batch;
  info.batch_policy = options.batch_policy;
  info.batch_max = options.batch_policy == BatchPolicy::kAdaptive
                       ? options.batch_max
                       : options.batch;
  info.stock_slots = options.stock_slots;
  info.obj_stock_slots = options.obj_stock_slots;
  info.obj_stat_cache = options.obj_stat_cache;
  info.obj_stock = options.obj_stock;
  info.nr_cpus = cpu->nr_shards();
  info.cpu_source = cpu->source();
  info.recursive_protection = options.recursive_protection;
  info.local_events = options.local_events;
  info.stats_flush_mode = options.stats_flush_mode;
  info.stats_flush_period = options.stats_flush_period;
  info.stats_update_early_stop = options.stats_update_early_stop;
  if (options.high_work != HighWorkMode::kThread &&
      options.high_work != HighWorkMode::kManual &&
      options.high_work != HighWorkMode::kNone) {
    return Invalid("unknown high_work mode");
  }
  info.high_work = options.high_work;
  info.nr_stat_items = stat_names.size();

  // Before anything can take the profiler's mutex (see sampler.h).
  profile::RegisterForFork();
  std::unique_ptr<Controller> ctrl(new Controller(std::move(options), info));
  ctrl->obj_stock_ = std::make_unique<internal::ObjStock>(
      *cpu, info.obj_stock_slots, info.batch, info.obj_stat_cache,
      info.obj_stock, ctrl->options_.stock_rseq);
  ctrl->stock_ = std::make_unique<internal::ChargeStock>(
      std::move(cpu).value(), info.batch, info.stock_slots,
      ctrl->options_.stock_rseq, info.batch_policy == BatchPolicy::kAdaptive,
      info.batch_max);
  ctrl->info_.stock_rseq = ctrl->stock_->rseq();
  internal::Rstat::Options ro;
  ro.batch = info.batch;
  ro.nr_items = stat_names.size();
  ro.units = stat_units;
  ro.mode = info.stats_flush_mode;
  ro.period = info.stats_flush_period;
  ro.clock = ctrl->clock_;
  // Dying groups go by themselves within one period (controller_reap.cc).
  ro.after_periodic_flush = [c = ctrl.get()] {
    c->ReapImpl(ReapMode::kPeriodic);
  };
  ro.rseq = ctrl->options_.stats_rseq;
  ctrl->rstat_ =
      std::make_unique<internal::Rstat>(&ctrl->stock_->cpu(), std::move(ro));
  if (!info.stats_update_early_stop) ctrl->rstat_->DisableEarlyStop();
  ctrl->info_.stats_rseq = ctrl->rstat_->rseq();
  ctrl->info_.charge_group_metadata = ctrl->options_.charge_group_metadata;
  if (ctrl->info_.charge_group_metadata) {
    const int shards = ctrl->rstat_->nr_shards();
    ctrl->info_.group_metadata_bytes = internal::GroupMetadata::Bytes(
        shards,
        internal::GroupStats::AllocationSize(shards, ctrl->rstat_->nr_items()),
        ctrl->rstat_->block_size());
  }
  ctrl->srcu_ = std::make_unique<internal::Srcu>(&ctrl->stock_->cpu(),
                                                 ctrl->stock_->rseq());
  ctrl->obj_stock_->set_srcu(ctrl->srcu_.get());
  ctrl->children_ = std::make_unique<internal::ChildIndex>();
  ctrl->stat_names_ = std::move(stat_names);
  ctrl->stat_units_ = std::move(stat_units);
  ctrl->root_ = new Group(ctrl.get(), nullptr, "", ctrl->next_id_++);
  ctrl->live_groups_.fetch_add(1, std::memory_order_relaxed);
  ctrl->CreateObjCgroup(ctrl->root_);
  ctrl->drainer_ = std::make_unique<internal::StockDrainer>(ctrl.get());
  ctrl->rstat_->StartFlusher(ctrl->root_->stats_);
  internal::ControllerImpl::StartHighWork(ctrl.get());
  // Last: the fork handlers may use everything above from now on.
  ctrl->fork_handler_ =
      std::make_unique<internal::ControllerForkHandler>(ctrl.get());
  internal::RegisterForFork(ctrl->fork_handler_.get());
  return ctrl;
}

Controller::Controller(ControllerOptions options, ControllerInfo info)
    : options_(std::move(options)),
      info_(info),
      clock_(options_.clock != nullptr ? options_.clock : SystemClock()) {
  if (options_.oom_handler) {
    (void)internal::ForkSafeExchange(
        oom_handler_,
        std::make_shared<const OomHandler>(std::move(options_.oom_handler)));
  }
}

Controller::~Controller() {
  // First: no fork may take this controller's locks while it goes away.
  internal::UnregisterForFork(fork_handler_.get());
  profile::ForgetController(this);  // heap profile rates of it and its groups
  // Observers (mounts, servers) stop using the controller first. No
  // charge runs any more, so RaiseEvent's view goes with them.
  event_observers_.store(nullptr, std::memory_order_relaxed);
  if (auto observers = internal::ForkSafeExchange(observers_, nullptr)) {
    for (const auto& o : *observers) o->OnControllerDestroy();
  }
  // No thread is left behind: the high-work worker and the flusher stop
  // before anything is freed (queued work is dropped).
  internal::ControllerImpl::StopHighWork(this);
  rstat_->StopFlusher();
  // Take every group offline bottom-up, then drain and free.
  std::vector<Group*> stack{root_};
  std::vector<Group*> order;
  std::vector<ObjCgroup*> objcgs;
  {
    std::unique_lock<std::shared_mutex> lock(tree_mu_);
    while (!stack.empty()) {
      Group* g = stack.back();
      stack.pop_back();
      order.push_back(g);
      for (Group* c = g->first_child_; c != nullptr; c = c->next_sibling_) {
        stack.push_back(c);
      }
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Group* g = *it;
      g->online_.store(false);
      g->first_child_ = g->last_child_ = nullptr;
      g->prev_sibling_ = g->next_sibling_ = nullptr;
      g->nr_children_ = 0;
      g->reclaimers_.clear();
      if (ObjCgroup* o = g->objcg_.exchange(nullptr)) objcgs.push_back(o);
    }
  }
  obj_stock_->DrainAll(nullptr);
  stock_->DrainAll(nullptr);
  for (ObjCgroup* o : objcgs) o->Put();
  for (auto it = order.rbegin(); it != order.rend(); ++it) (*it)->Put();
  Reap();
  UMEMCG_DCHECK(live_groups_.load() == 0);
  UMEMCG_DCHECK(live_objcgs_.load() == 0);
}

void Controller::AddObserver(std::shared_ptr<ControllerObserver> observer) {
  std::vector<std::shared_ptr<const void>> freed;  // after the unlock
  std::lock_guard<std::mutex> lock(observers_mu_);
  auto list = std::make_shared<ObserverList>();
  if (auto old = internal::ForkSafeLoad(observers_)) *list = *old;
  list->push_back(std::move(observer));
  freed = internal::ControllerImpl::PublishObservers(*this, std::move(list));
}

void Controller::RemoveObserver(const ControllerObserver* observer) {
  std::vector<std::shared_ptr<const void>> freed;  // after the unlock
  std::lock_guard<std::mutex> lock(observers_mu_);
  auto list = std::make_shared<ObserverList>();
  if (auto old = internal::ForkSafeLoad(observers_)) *list = *old;
  std::erase_if(*list, [&](const auto& o) { return o.get() == observer; });
  freed = internal::ControllerImpl::PublishObservers(
      *this, list->empty() ? nullptr : std::move(list));
}

namespace internal {

// The calling thread's deferred error reports (DeferReports).
struct PendingReport {
  Controller* ctrl = nullptr;
  const char* what = nullptr;
  Group* group = nullptr;  // holds a reference; null: several groups, summed
  uint64_t pages = 0;
};
struct ReportQueue {
  int depth = 0;
  int n = 0;
  PendingReport entries[kMaxDeferredReports];
};
constinit thread_local ReportQueue tls_reports;

DeferReports::DeferReports() { ++tls_reports.depth; }

DeferReports::~DeferReports() {
  if (--tls_reports.depth == 0 && tls_reports.n != 0) {
    ControllerImpl::DeliverDeferredReports();
  }
}

void ControllerImpl::DeliverDeferredReports() {
  ReportQueue& q = tls_reports;
  while (q.n != 0) {
    // Copied out first: a hook may raise reports itself (delivered at
    // once, at depth 0) or open scopes that queue and deliver more.
    PendingReport batch[kMaxDeferredReports];
    const int n = q.n;
    for (int i = 0; i < n; ++i) batch[i] = q.entries[i];
    q.n = 0;
    for (int i = 0; i < n; ++i) {
      PendingReport& r = batch[i];
      r.ctrl->Deliver(r.what, r.group, Pages(r.pages));
      // May queue the group for Reap; never frees it here.
      if (r.group != nullptr) r.group->Put();
    }
  }
}

}  // namespace internal

void Controller::Report(const char* what, const Group* group, Pages pages) {
  if (std::string_view(what) == "underflow") {
    underflows_.fetch_add(1, std::memory_order_relaxed);
  }
  internal::ReportQueue& q = internal::tls_reports;
  if (q.depth == 0) return Deliver(what, group, pages);
  // Under a lock: queue (see DeferReports). The caller holds `group`, so a
  // reference can be taken; it keeps the group for the hook.
  auto* g = const_cast<Group*>(group);
  auto same = [&](const internal::PendingReport& r, const Group* rg) {
    return r.ctrl == this && std::string_view(r.what) == what && r.group == rg;
  };
  auto add_to = [&](const Group* rg) {
    for (int i = 0; i < q.n; ++i) {
      if (same(q.entries[i], rg)) {
        q.entries[i].pages += pages.raw();
        return true;
      }
    }
    return false;
  };
  if (add_to(g)) return;
  // Groups take all but the last kDeferredAggregates entries; past that a
  // report joins its (controller, what) sum with no group.
  if (g != nullptr &&
      q.n < internal::kMaxDeferredReports - internal::kDeferredAggregates) {
    g->Get();
    q.entries[q.n++] = {this, what, g, pages.raw()};
    return;
  }
  if (g != nullptr && add_to(nullptr)) return;
  if (q.n < internal::kMaxDeferredReports) {
    q.entries[q.n++] = {this, what, nullptr, pages.raw()};
    return;
  }
  // More distinct (controller, what) sums than there is room for (it takes
  // kDeferredAggregates + 1 controllers or kinds reporting inside one
  // scope): the last sum absorbs the rest rather than lose the pages.
  q.entries[q.n - 1].pages += pages.raw();
}

void Controller::Deliver(const char* what, const Group* group, Pages pages) {
  if (options_.error_hook) {
    ErrorReport report;
    report.what = what;
    report.group = group;
    report.pages = pages;
    options_.error_hook(report);
  }
#if UMEMCG_DCHECK_IS_ON
  if (std::string_view(what) == "underflow") {
    internal::CheckFailed("uncharge exceeds charge (underflow)", __FILE__,
                          __LINE__);
  }
#endif
}

void Controller::CreateObjCgroup(Group* group) {
  auto* objcg = new ObjCgroup(this, group);
  live_objcgs_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(objcg_mu_);
    objcg->list_next_ = group->objcg_list_;
    if (group->objcg_list_ != nullptr) group->objcg_list_->list_prev_ = objcg;
    group->objcg_list_ = objcg;
  }
  group->objcg_.store(objcg, std::memory_order_release);
}

Group* Controller::FindChildLocked(Group& parent, std::string_view name) const {
  uint64_t probes = 0;
  Group* g = children_->Find(&parent, name, &probes);
  siblings_visited_.fetch_add(probes, std::memory_order_relaxed);
  return g;
}

StatusOr<GroupRef> Controller::CreateGroup(Group& parent,
                                           std::string_view name) {
  // The VFS's answers for what a path component cannot be, then
  // cgroup_mkdir's: no newline (it would break /proc/<pid>/cgroup), and
  // kernfs's EEXIST for a name a control file of the parent has.
  if (name.empty() || name.find('/') != std::string_view::npos || name == "." ||
      name == "..") {
    return Invalid("group name must be non-empty, without '/', not . or ..");
  }
  if (name.size() > kMaxGroupNameBytes) {
    return Status(StatusCode::kNameTooLong, "group name longer than 255 bytes");
  }
  if (name.find('\n') != std::string_view::npos) {
    return Invalid("group name contains a newline");
  }
  if (&parent.controller() != this) {
    return Invalid("parent belongs to another controller");
  }
  // ListFiles is the files layer's list for the parent (built in, plus
  // external limits' files); names of other shapes cannot collide.
  if (name.starts_with("memory.") || name.starts_with("cgroup.")) {
    for (const std::string& f : parent.ListFiles()) {
      if (f == name) {
        return Status(StatusCode::kAlreadyExists,
                      "a control file is named " + std::string(name));
      }
    }
  }
  if (tls_charge.in_tree_walk > 0) {
    return Status(StatusCode::kFailedPrecondition, "called from a reclaimer");
  }
  // Kernel: mem_cgroup_css_alloc() charges the new memcg's per-CPU data
  // to the parent (never to the root). Before the tree lock: the charge
  // may reclaim, and reclaimers take it shared.
  ObjCgroup* metadata_objcg = nullptr;
  const uint64_t metadata_bytes = info_.group_metadata_bytes;
  if (metadata_bytes != 0 && !parent.is_root()) {
    // The answers that need no charge first: an existing name is EEXIST,
    // not ENOMEM, in a parent at its limit.
    {
      std::shared_lock<std::shared_mutex> lock(tree_mu_);
      if (!parent.online()) {
        return Status(StatusCode::kFailedPrecondition, "parent was removed");
      }
      if (FindChildLocked(parent, name) != nullptr) {
        return Status(StatusCode::kAlreadyExists,
                      "group exists: " + std::string(name));
      }
    }
    auto charged = internal::GroupMetadata::Charge(parent, metadata_bytes);
    if (!charged.ok()) return charged.status();
    metadata_objcg = charged.value();
  }
  GroupRef ref;
  Status refused;
  {
    internal::TreeWriteLock lock(*this);
    if (!parent.online()) {
      refused = Status(StatusCode::kFailedPrecondition, "parent was removed");
    } else if (FindChildLocked(parent, name) != nullptr) {
      refused = Status(StatusCode::kAlreadyExists,
                       "group exists: " + std::string(name));
    }
    if (refused.ok()) ref = CreateGroupLocked(parent, name, metadata_objcg);
  }
  if (!refused.ok()) {
    // After the unlock: the uncharge may return pages to the counters.
    internal::GroupMetadata::Uncharge(metadata_objcg, metadata_bytes);
    return refused;
  }
  ReapImpl(ReapMode::kAuto);
  return ref;
}

GroupRef Controller::CreateGroupLocked(Group& parent, std::string_view name,
                                       ObjCgroup* metadata_objcg) {
  auto* g = new Group(this, &parent, std::string(name), next_id_++);
  g->metadata_objcg_ = metadata_objcg;
  live_groups_.fetch_add(1, std::memory_order_relaxed);
  // A group without the controller cannot enable it for its children.
  g->subtree_memory_.store(parent.subtree_memory(), std::memory_order_relaxed);
  // The tree's reference (refs_ = 1): last in the parent's list.
  g->prev_sibling_ = parent.last_child_;
  if (parent.last_child_ != nullptr) {
    parent.last_child_->next_sibling_ = g;
  } else {
    parent.first_child_ = g;
  }
  parent.last_child_ = g;
  ++parent.nr_children_;
  children_->Insert(g);
  // Kernel: cgroup_create() counts the new cgroup in every ancestor.
  for (Group* a = &parent; a != nullptr; a = a->parent_) {
    a->nr_descendants_.fetch_add(1, std::memory_order_relaxed);
  }
  CreateObjCgroup(g);
  return GroupRef(g);
}

StatusOr<GroupRef> Controller::Lookup(std::string_view path) {
  std::shared_lock<std::shared_mutex> lock(tree_mu_);
  Group* g = root_;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(pos, end - pos);
    pos = end + 1;
    if (part.empty()) continue;
    g = FindChildLocked(*g, part);
    if (g == nullptr) {
      return Status(StatusCode::kNotFound, "no group " + std::string(path));
    }
  }
  return GroupRef(g);
}

Status Controller::RemoveGroup(Group& group) {
  if (group.is_root()) return Invalid("the root group cannot be removed");
  if (&group.controller() != this) {
    return Invalid("group belongs to another controller");
  }
  if (tls_charge.in_tree_walk > 0) {
    return Status(StatusCode::kFailedPrecondition, "called from a reclaimer");
  }
  ObjCgroup* own_objcg = nullptr;
  {
    internal::TreeWriteLock lock(*this);
    if (!group.online()) {
      return Status(StatusCode::kFailedPrecondition, "group already removed");
    }
    if (group.nr_children_ != 0) {
      return Status(StatusCode::kBusy, "group has children");
    }
    Group* parent = group.parent_;
    // Kernel: mem_cgroup_css_offline() -> memcg_reparent_objcgs(). Point
    // the group's objcgs (its own and those it inherited) at the parent
    // and hand the list over, before the group goes offline, so an objcg
    // never points at an offline group for longer than a racing charge
    // that read it before (ObjCgroup::ChargePages walks up then).
    {
      std::lock_guard<std::mutex> objcg_lock(objcg_mu_);
      ObjCgroup* last = nullptr;
      for (ObjCgroup* o = group.objcg_list_; o != nullptr; o = o->list_next_) {
        objcgs_visited_.fetch_add(1, std::memory_order_relaxed);
        o->group_.store(parent, std::memory_order_release);
        last = o;
      }
      if (last != nullptr) {
        last->list_next_ = parent->objcg_list_;
        if (parent->objcg_list_ != nullptr) {
          parent->objcg_list_->list_prev_ = last;
        }
        parent->objcg_list_ = group.objcg_list_;
        group.objcg_list_ = nullptr;
      }
    }
    own_objcg = group.objcg_.exchange(nullptr, std::memory_order_acq_rel);
    // Order matters: online_ goes false (seq_cst) before the drains read
    // which shards cache the group, so a racing slot install either is
    // seen there or sees the group offline (see ChargeStock::RefillLocked).
    group.online_.store(false, std::memory_order_seq_cst);
    // Unlink: O(1) in the parent's list, O(1) expected in the index.
    if (group.prev_sibling_ != nullptr) {
      group.prev_sibling_->next_sibling_ = group.next_sibling_;
    } else {
      parent->first_child_ = group.next_sibling_;
    }
    if (group.next_sibling_ != nullptr) {
      group.next_sibling_->prev_sibling_ = group.prev_sibling_;
    } else {
      parent->last_child_ = group.prev_sibling_;
    }
    group.prev_sibling_ = group.next_sibling_ = nullptr;
    --parent->nr_children_;
    uint64_t probes = 0;
    children_->Erase(&group, &probes);
    siblings_visited_.fetch_add(probes, std::memory_order_relaxed);
    group.reclaimers_.clear();
    group.memory_.SetMin(Pages(0));
    group.memory_.SetLow(Pages(0));
    // Kernel: cgroup_destroy_locked() moves it from the ancestors' live
    // count to their dying count, until it is freed (Reap).
    group.counted_dying_ = true;
    for (Group* a = group.parent_; a != nullptr; a = a->parent_) {
      a->nr_descendants_.fetch_sub(1, std::memory_order_relaxed);
      a->nr_dying_descendants_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // Only the shards caching the group: its pages in the page stocks, the
  // kmem deltas cached for it in the object stocks. Slots of its objcgs
  // now belong to the parent and stay (as in the kernel).
  stock_->DrainGroup(&group);
  obj_stock_->FlushKmemOf(&group);
  // Kernel: the rstat flush at css offline/free. Folds the group's
  // per-CPU deltas into it and its parent's pending values; later
  // ModState calls are refused (online_ is false).
  rstat_->FlushSubtree(group.stats_);
  if (own_objcg != nullptr) own_objcg->Put();  // the group's reference
  NotifyOffline(group);
  group.Put();  // the tree's reference
  ReapImpl(ReapMode::kAuto);
  return Status::Ok();
}

Status Controller::CheckInvariants() {
  auto fail = [](const Group& g, const std::string& what) {
    return Status(StatusCode::kFailedPrecondition,
                  "group '" + g.path() + "': " + what);
  };
  if (std::string bad = stock_->CheckInvariants(); !bad.empty()) {
    return Status(StatusCode::kFailedPrecondition, "stock " + bad);
  }
  if (std::string bad = obj_stock_->CheckInvariants(); !bad.empty()) {
    return Status(StatusCode::kFailedPrecondition, "object stock " + bad);
  }
  std::shared_lock<std::shared_mutex> lock(tree_mu_);
  std::vector<Group*> stack{root_};
  std::vector<Group*> all;  // every online group, for cgroup.stat below
  while (!stack.empty()) {
    Group* g = stack.back();
    stack.pop_back();
    all.push_back(g);
    uint64_t children_usage = 0;
    uint64_t children_min = 0;
    uint64_t children_low = 0;
    size_t nr_children = 0;
    for (Group* c = g->first_child_; c != nullptr; c = c->next_sibling_) {
      ++nr_children;
      if (c->parent_ != g || !c->online()) return fail(*c, "bad tree link");
      if (c->next_sibling_ == nullptr ? g->last_child_ != c
                                      : c->next_sibling_->prev_sibling_ != c) {
        return fail(*c, "bad sibling link");
      }
      if (c->refs_.load(std::memory_order_relaxed) <= 0) {
        return fail(*c, "online with no reference");
      }
      children_usage += c->memory_.usage().raw();
      children_min += c->memory_.min_usage().raw();
      children_low += c->memory_.low_usage().raw();
      stack.push_back(c);
    }
    if (nr_children != g->nr_children_) {
      return fail(*g, "children count is not the list's length");
    }
    const PageCounter& m = g->memory_;
    if (m.usage().raw() < children_usage) {
      return fail(*g, "usage below the sum of its children's");
    }
    // Offline children were reset to min = low = 0, so they add nothing.
    if (m.children_min_usage().raw() != children_min) {
      return fail(*g, "children_min_usage is not the children's sum");
    }
    if (m.children_low_usage().raw() != children_low) {
      return fail(*g, "children_low_usage is not the children's sum");
    }
    if (g->parent_ != nullptr &&
        (m.min_usage() != std::min(m.usage(), m.min()) ||
         m.low_usage() != std::min(m.usage(), m.low()))) {
      return fail(*g, "protected usage out of date");
    }
  }
  // cgroup.stat: each group's nr_descendants is its online descendants.
  std::unordered_map<const Group*, int64_t> descendants;
  for (const Group* g : all) {
    for (const Group* a = g->parent_; a != nullptr; a = a->parent_) {
      ++descendants[a];
    }
  }
  for (const Group* g : all) {
    if (g->nr_descendants() != descendants[g]) {
      return fail(*g, "nr_descendants is not its online descendants");
    }
    if (g->nr_dying_descendants() < 0) {
      return fail(*g, "negative nr_dying_descendants");
    }
  }
  return Status::Ok();
}

void Controller::DrainAllStocks(Group& subtree) { drainer_->Drain(subtree); }

namespace internal {

void ControllerImpl::DrainStocksNow(Controller& c, Group& subtree) {
  // Objects first: draining them returns pages to the counters directly.
  c.obj_stock_->DrainAll(&subtree);
  {
    // Whole pages that reached a pool without a slot drain (the try-lock
    // fallback, the shared-pool variant) go back too: the objcg lists of
    // the subtree's groups. The tree lock keeps the subtree still; a
    // reclaimer calling this already holds it shared. Reports wait for
    // objcg_mu_'s release.
    std::shared_lock<std::shared_mutex> tree_lock(c.tree_mu_, std::defer_lock);
    if (tls_charge.in_tree_walk == 0) tree_lock.lock();
    DeferReports defer;
    std::lock_guard<std::mutex> lock(c.objcg_mu_);
    std::vector<Group*> stack{&subtree};
    while (!stack.empty()) {
      Group* g = stack.back();
      stack.pop_back();
      for (ObjCgroup* o = g->objcg_list_; o != nullptr; o = o->list_next_) {
        internal::ObjStock::ReturnPoolPages(o);
      }
      for (Group* ch = g->first_child_; ch != nullptr; ch = ch->next_sibling_) {
        stack.push_back(ch);
      }
    }
  }
  c.stock_->DrainAll(&subtree);
}

bool ControllerImpl::TryDrainAllStocks(Controller& c, Group& subtree) {
  return c.drainer_->TryDrain(subtree);
}

uint64_t ControllerImpl::StockDrains(const Controller& c) {
  return c.drainer_->drains();
}

int ControllerImpl::ThreadsInStockDrain(const Controller& c) {
  return c.drainer_->threads_inside();
}

}  // namespace internal

void Controller::SetOomHandler(OomHandler handler) {
  (void)internal::ForkSafeExchange(
      oom_handler_, handler
                        ? std::make_shared<const OomHandler>(std::move(handler))
                        : nullptr);
}

}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Controller: settings, the group tree and group lifetime.
//
// Freeing. A group's last reference can go on a hot path (a stock slot
// evicted during a charge). Freeing there would call free() under a stock
// lock and, with the malloc integration, re-enter the allocator, so Put()
// only pushes the group on a lock-free stack; Reap() frees it later from a
// tree operation. Until then nothing can reach it: it is offline and
// unlinked, and nothing else holds a reference. ObjCgroups are freed the
// same way (their last reference goes when an object or a stock slot lets
// go of them).
//
// Reparenting (kernel: memcg_reparent_objcgs, E1-E4 form). RemoveGroup
// points every objcg that points at the group (its own and those inherited
// from removed children) at the parent, before the group goes offline.
// The dead group's counter keeps the pages charged through them (the
// kernel's stale usage); the parent is uncharged for them when the objects
// go, so Reap must not return them to the ancestors again: it subtracts
// the group's objcg_pages_ from the leftover it treats as a leak.

#include "umemcg/controller.h"

#include <algorithm>
#include <string>

#include "charge_stock.h"
#include "controller_impl.h"
#include "obj_stock.h"
#include "rstat.h"
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
  info.nr_stat_items = stat_names.size();

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
  ctrl->rstat_ =
      std::make_unique<internal::Rstat>(&ctrl->stock_->cpu(), std::move(ro));
  if (!info.stats_update_early_stop) ctrl->rstat_->DisableEarlyStop();
  ctrl->stat_names_ = std::move(stat_names);
  ctrl->stat_units_ = std::move(stat_units);
  ctrl->root_ = new Group(ctrl.get(), nullptr, "", ctrl->next_id_++);
  ctrl->live_groups_.fetch_add(1, std::memory_order_relaxed);
  ctrl->CreateObjCgroup(ctrl->root_);
  ctrl->rstat_->StartFlusher(ctrl->root_->stats_);
  return ctrl;
}

Controller::Controller(ControllerOptions options, ControllerInfo info)
    : options_(std::move(options)),
      info_(info),
      clock_(options_.clock != nullptr ? options_.clock : SystemClock()) {
  if (options_.oom_handler) {
    oom_handler_.store(
        std::make_shared<const OomHandler>(std::move(options_.oom_handler)));
  }
}

Controller::~Controller() {
  // Observers (mounts, servers) stop using the controller first.
  if (auto observers = observers_.exchange(nullptr)) {
    for (const auto& o : *observers) o->OnControllerDestroy();
  }
  // No thread is left behind: the flusher stops before anything is freed.
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
      for (Group* c : g->children_) stack.push_back(c);
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Group* g = *it;
      g->online_.store(false);
      g->children_.clear();
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
  std::lock_guard<std::mutex> lock(observers_mu_);
  auto list = std::make_shared<ObserverList>();
  if (auto old = observers_.load()) *list = *old;
  list->push_back(std::move(observer));
  observers_.store(std::move(list));
}

void Controller::RemoveObserver(const ControllerObserver* observer) {
  std::lock_guard<std::mutex> lock(observers_mu_);
  auto list = std::make_shared<ObserverList>();
  if (auto old = observers_.load()) *list = *old;
  std::erase_if(*list, [&](const auto& o) { return o.get() == observer; });
  observers_.store(list->empty() ? nullptr : std::move(list));
}

void Controller::Report(const char* what, const Group* group, Pages pages) {
  if (std::string_view(what) == "underflow") {
    underflows_.fetch_add(1, std::memory_order_relaxed);
  }
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

void Controller::ReleaseGroup(Group* group) {
  // Treiber push; Reap pops everything at once, so there is no ABA.
  Group* head = to_free_.load(std::memory_order_relaxed);
  do {
    group->next_to_free_ = head;
  } while (!to_free_.compare_exchange_weak(
      head, group, std::memory_order_release, std::memory_order_relaxed));
}

void Controller::CreateObjCgroup(Group* group) {
  auto* objcg = new ObjCgroup(this, group);
  live_objcgs_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(objcg_mu_);
    objcgs_.push_back(objcg);
  }
  group->objcg_.store(objcg, std::memory_order_release);
}

void Controller::ReleaseObjCgroup(ObjCgroup* objcg) {
  // Treiber push, as ReleaseGroup.
  ObjCgroup* head = objcg_to_free_.load(std::memory_order_relaxed);
  do {
    objcg->next_to_free_ = head;
  } while (!objcg_to_free_.compare_exchange_weak(
      head, objcg, std::memory_order_release, std::memory_order_relaxed));
}

void Controller::FreeObjCgroup(ObjCgroup* objcg) {
  // Kernel: obj_cgroup_release(). No stock slot and no object holds bytes
  // of it any more, so the pool is whole pages unless the caller freed
  // bytes it never charged (or leaked some).
  // Relaxed: the acquire exchange of objcg_to_free_ in Reap ordered every
  // write made before the last reference went.
  const uint64_t pool =
      objcg->nr_charged_bytes_.exchange(0, std::memory_order_relaxed);
  Group* g = objcg->group();
  const uint64_t pages = pool >> kPageShift;
  if (pages != 0) {
    internal::ObjStock::ApplyKmem(g, -static_cast<int64_t>(pages));
    internal::ObjStock::UnchargePages(g, pages, /*via_stock=*/false);
  }
  if ((pool & (kPageSize - 1)) != 0) {
    Report("objcg_partial_page", g, Pages(pages));
  }
  {
    std::lock_guard<std::mutex> lock(objcg_mu_);
    objcgs_.erase(std::find(objcgs_.begin(), objcgs_.end(), objcg));
  }
  Group* origin = objcg->origin_;
  delete objcg;
  live_objcgs_.fetch_sub(1, std::memory_order_relaxed);
  origin->Put();  // may queue the group (the loop in Reap sees it)
}

void Controller::Reap() {
  for (;;) {
    ObjCgroup* objcgs =
        objcg_to_free_.exchange(nullptr, std::memory_order_acquire);
    const bool any_objcg = objcgs != nullptr;
    while (objcgs != nullptr) {
      ObjCgroup* o = objcgs;
      objcgs = o->next_to_free_;
      FreeObjCgroup(o);
    }
    Group* list = to_free_.exchange(nullptr, std::memory_order_acquire);
    if (list == nullptr && !any_objcg) return;
    while (list != nullptr) {
      Group* g = list;
      list = g->next_to_free_;
      // Pages still charged with no reference left can never be
      // uncharged: return them to the ancestors and report the leak.
      // Pages charged through objcgs are not leaked: after reparenting
      // the parent was (or will be) uncharged for them (see above).
      const int64_t via_objcg =
          std::max<int64_t>(g->objcg_pages_.load(std::memory_order_relaxed), 0);
      const uint64_t usage = g->memory_.usage().raw();
      const Pages left(usage > static_cast<uint64_t>(via_objcg)
                           ? usage - static_cast<uint64_t>(via_objcg)
                           : 0);
      if (left.raw() > 0) {
        if (g->parent_ != nullptr) g->parent_->memory_.Uncharge(left);
        Report("leak", g, left);
      }
      // Deltas that reached the group's per-CPU counters after its
      // removal flush (an update racing with RemoveGroup) go to the
      // parent now; this also unlinks it from every CPU's updated tree.
      // No update can follow: nobody holds a reference.
      rstat_->FlushSubtree(g->stats_);
      Group* parent = g->parent_;
      delete g;
      live_groups_.fetch_sub(1, std::memory_order_relaxed);
      // May queue the parent (pushed on to_free_; the outer loop sees it).
      if (parent != nullptr) parent->Put();
    }
  }
}

Group* Controller::FindChildLocked(Group& parent, std::string_view name) const {
  for (Group* c : parent.children_) {
    if (c->name_ == name) return c;
  }
  return nullptr;
}

StatusOr<GroupRef> Controller::CreateGroup(Group& parent,
                                           std::string_view name) {
  if (name.empty() || name.find('/') != std::string_view::npos || name == "." ||
      name == "..") {
    return Invalid("group name must be non-empty, without '/', not . or ..");
  }
  if (&parent.controller() != this) {
    return Invalid("parent belongs to another controller");
  }
  if (tls_charge.in_tree_walk > 0) {
    return Status(StatusCode::kFailedPrecondition, "called from a reclaimer");
  }
  GroupRef ref;
  {
    std::unique_lock<std::shared_mutex> lock(tree_mu_);
    if (!parent.online()) {
      return Status(StatusCode::kFailedPrecondition, "parent was removed");
    }
    if (FindChildLocked(parent, name) != nullptr) {
      return Status(StatusCode::kAlreadyExists,
                    "group exists: " + std::string(name));
    }
    auto* g = new Group(this, &parent, std::string(name), next_id_++);
    live_groups_.fetch_add(1, std::memory_order_relaxed);
    parent.children_.push_back(g);  // the tree's reference (refs_ = 1)
    CreateObjCgroup(g);
    ref = GroupRef(g);
  }
  Reap();
  return ref;
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
    std::unique_lock<std::shared_mutex> lock(tree_mu_);
    if (!group.online()) {
      return Status(StatusCode::kFailedPrecondition, "group already removed");
    }
    if (!group.children_.empty()) {
      return Status(StatusCode::kBusy, "group has children");
    }
    // Kernel: mem_cgroup_css_offline(). Reparent the objcgs first, so an
    // objcg never points at an offline group for longer than a racing
    // charge that read it before (ObjCgroup::ChargePages walks up then).
    {
      std::lock_guard<std::mutex> objcg_lock(objcg_mu_);
      for (ObjCgroup* o : objcgs_) {
        // Relaxed: group_ is only stored here, under objcg_mu_ (held).
        if (o->group_.load(std::memory_order_relaxed) == &group) {
          o->group_.store(group.parent_, std::memory_order_release);
        }
      }
    }
    own_objcg = group.objcg_.exchange(nullptr, std::memory_order_acq_rel);
    // Order matters: online_ goes false before the drain, so a racing
    // Refill either is drained below or sees the group offline (see
    // ChargeStock::Refill).
    group.online_.store(false);
    auto& siblings = group.parent_->children_;
    siblings.erase(std::find(siblings.begin(), siblings.end(), &group));
    group.reclaimers_.clear();
    group.memory_.SetMin(Pages(0));
    group.memory_.SetLow(Pages(0));
  }
  stock_->DrainAll(&group);
  // Flushes the kmem caches of the group; slots of its objcgs now belong
  // to the parent and stay (as in the kernel).
  obj_stock_->DrainAll(&group);
  // Kernel: the rstat flush at css offline/free. Folds the group's
  // per-CPU deltas into it and its parent's pending values; later
  // ModState calls are refused (online_ is false).
  rstat_->FlushSubtree(group.stats_);
  if (own_objcg != nullptr) own_objcg->Put();  // the group's reference
  group.Put();                                 // the tree's reference
  Reap();
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
  while (!stack.empty()) {
    Group* g = stack.back();
    stack.pop_back();
    uint64_t children_usage = 0;
    uint64_t children_min = 0;
    uint64_t children_low = 0;
    for (Group* c : g->children_) {
      if (c->parent_ != g || !c->online()) return fail(*c, "bad tree link");
      if (c->refs_.load(std::memory_order_relaxed) <= 0) {
        return fail(*c, "online with no reference");
      }
      children_usage += c->memory_.usage().raw();
      children_min += c->memory_.min_usage().raw();
      children_low += c->memory_.low_usage().raw();
      stack.push_back(c);
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
  return Status::Ok();
}

void Controller::DrainAllStocks(Group& subtree) {
  // Objects first: draining them returns pages to the counters directly.
  obj_stock_->DrainAll(&subtree);
  {
    // Whole pages that reached a pool without a slot drain (the try-lock
    // fallback, the shared-pool variant) go back too.
    std::lock_guard<std::mutex> lock(objcg_mu_);
    for (ObjCgroup* o : objcgs_) {
      if (o->group()->IsDescendantOf(subtree)) {
        internal::ObjStock::ReturnPoolPages(o);
      }
    }
  }
  stock_->DrainAll(&subtree);
}

void Controller::SetOomHandler(OomHandler handler) {
  oom_handler_.store(
      handler ? std::make_shared<const OomHandler>(std::move(handler))
              : nullptr);
}

}  // namespace umemcg

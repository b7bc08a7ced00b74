// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Controller: group and objcg freeing (kernel: css release, the RCU grace
// period, css_free).
//
// A group's last reference can go on a hot path (a stock slot evicted
// during a charge). Freeing there would call free() under a stock lock
// and, with the malloc integration, re-enter the allocator, so Put() only
// pushes the group on a lock-free stack; ReapImpl frees it later. By then
// it is offline and unlinked and nothing holds a reference, but a thread
// inside an object charge may still be using it: it read an objcg's group
// pointer just before RemoveGroup moved that objcg to the parent (objcgs
// hold no group reference, so that a removed group is not pinned by the
// objects charged through it). A group is therefore freed only after a
// grace period of the group SRCU (port/srcu.h) that started after its last
// reference went, and after taking and releasing each object-stock shard
// lock once (the locked stock paths read an objcg's group under that lock
// instead of an SRCU section). ObjCgroups are freed at once (every user of
// one holds a reference).
//
// Who reaps, so that a dying group goes by itself as in the kernel (css
// release queues the free behind an RCU grace period; nobody asks):
//  - the periodic stats flusher, every period (ReapMode::kPeriodic): it
//    starts a grace period for whatever waits, so a group whose last
//    reference went is freed within one period unless a reader blocked
//    inside an object charge holds the grace period up (then the next
//    period's poll frees it);
//  - tree operations (create, remove) and, without a flusher thread, the
//    charge slow path of charges that may reclaim (ReapMode::kAuto): a
//    grace period starts once kReapBatch groups wait or the oldest has
//    waited one flusher period (2 s when the flusher is off);
//  - Reap() (ReapMode::kForce): always, now.
// The charge fast path never reaps: Put() is one push.

#include <algorithm>
#include <vector>

#include "controller_impl.h"
#include "metadata/group_metadata.h"
#include "obj_stock.h"
#include "port/srcu.h"
#include "profile/sampler.h"
#include "rstat.h"
#include "umemcg/controller.h"
#include "umemcg/obj_cgroup.h"

namespace umemcg {

using internal::tls_charge;

void Controller::ReleaseGroup(Group* group) {
  // Treiber push; Reap pops everything at once, so there is no ABA.
  Group* head = to_free_.load(std::memory_order_relaxed);
  do {
    group->next_to_free_ = head;
  } while (!to_free_.compare_exchange_weak(
      head, group, std::memory_order_release, std::memory_order_relaxed));
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
  Group* g;
  ObjCgroup* heir;
  {
    // Under objcg_mu_ its group cannot move while we unlink it (O(1)).
    std::lock_guard<std::mutex> lock(objcg_mu_);
    g = objcg->group();
    // Alive until this Reap ends: objcgs are freed only here, under
    // reap_mu_.
    heir = g->objcg_.load(std::memory_order_acquire);
    objcgs_visited_.fetch_add(1, std::memory_order_relaxed);
    if (objcg->list_prev_ != nullptr) {
      objcg->list_prev_->list_next_ = objcg->list_next_;
    } else {
      g->objcg_list_ = objcg->list_next_;
    }
    if (objcg->list_next_ != nullptr) {
      objcg->list_next_->list_prev_ = objcg->list_prev_;
    }
  }
  // `g` stays allocated: only Reap frees groups, and we run under
  // reap_mu_. It may have gone offline meanwhile; uncharging it then is
  // what any uncharge of a removed group does.
  // Relaxed: the acquire exchange of objcg_to_free_ in Reap ordered every
  // write made before the last reference went.
  const uint64_t pool =
      objcg->nr_charged_bytes_.exchange(0, std::memory_order_relaxed);
  const uint64_t pages = pool >> kPageShift;
  if (pages != 0) {
    internal::ObjStock::ApplyKmem(g, -static_cast<int64_t>(pages));
    internal::ObjStock::UnchargePages(g, pages, /*via_stock=*/false);
  }
  if ((pool & (kPageSize - 1)) != 0) {
    // Now, not deferred: Reap may free `g` right after.
    Deliver("objcg_partial_page", g, Pages(pages));
  }
  // The heap profile's sites of it; their history to the objcg that now
  // takes its charges (g's own; null while g is being removed, whose
  // objcg will be reparented and freed through here in turn).
  profile::ForgetObjCgroup(objcg, heir);
  delete objcg;
  live_objcgs_.fetch_sub(1, std::memory_order_relaxed);
}

void Controller::Reap() { ReapImpl(ReapMode::kForce); }

std::chrono::nanoseconds Controller::ReapPeriod() const {
  return info_.stats_flush_period.count() > 0
             ? std::chrono::nanoseconds(info_.stats_flush_period)
             : std::chrono::nanoseconds(std::chrono::seconds(2));
}

void Controller::ReapImpl(ReapMode mode) {
  if (tls_charge.in_reap > 0) return;  // the outer reap goes on
  const bool force = mode == ReapMode::kForce;
  std::unique_lock<std::mutex> lock(reap_mu_, std::defer_lock);
  if (force) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return;  // the thread reaping now sees what we queued, or the next one
  }
  reaps_run_.fetch_add(1, std::memory_order_relaxed);
  std::vector<FreedGroup> freed;
  {
    internal::DepthScope reaping(tls_charge.in_reap);
    for (;;) {
      ObjCgroup* objcgs =
          objcg_to_free_.exchange(nullptr, std::memory_order_acquire);
      while (objcgs != nullptr) {
        ObjCgroup* o = objcgs;
        objcgs = o->next_to_free_;
        FreeObjCgroup(o);
      }
      for (Group* g = to_free_.exchange(nullptr, std::memory_order_acquire);
           g != nullptr;) {
        Group* next = g->next_to_free_;
        if (gp_waiting_ == nullptr) gp_waiting_since_ = clock_->Now();
        g->next_to_free_ = gp_waiting_;
        gp_waiting_ = g;
        ++nr_gp_waiting_;
        g = next;
      }
      if (!srcu_->grace_period_in_progress()) {
        if (gp_waiting_ == nullptr) break;
        const bool due = force || mode == ReapMode::kPeriodic ||
                         nr_gp_waiting_ >= kReapBatch ||
                         clock_->Now() - gp_waiting_since_ >= ReapPeriod();
        if (!due) break;
        // The waiting groups' last references all went before this point:
        // the grace period starting now covers every reader of them.
        gp_current_ = gp_waiting_;
        gp_waiting_ = nullptr;
        nr_gp_waiting_ = 0;
        srcu_->StartGracePeriod();
      }
      if (!srcu_->PollGracePeriod()) break;  // a reader is inside: later
      obj_stock_->WaitForLockHolders();
      Group* list = gp_current_;
      gp_current_ = nullptr;
      while (list != nullptr) {
        Group* g = list;
        list = g->next_to_free_;
        FreeGroup(g, &freed);
      }
      // Freeing may have queued parents and objcgs: go round again.
    }
    // When a kAuto reap next has something to do. A grace period in
    // progress is polled again after a 64th of the period (each poll may
    // cost a membarrier); waiting groups are due at their period's end
    // (kReapBatch of them would have started one above). Relaxed: a hint
    // for the charge slow path (ReapIfDue); the reap itself reads the
    // lists under reap_mu_.
    int64_t next = INT64_MAX;
    if (gp_current_ != nullptr) {
      next = (clock_->Now() + ReapPeriod() / 64).count();
    } else if (gp_waiting_ != nullptr) {
      next = (gp_waiting_since_ + ReapPeriod()).count();
    }
    next_auto_reap_ns_.store(next, std::memory_order_relaxed);
  }
  lock.unlock();
  if (!freed.empty()) NotifyFreed(freed);
}

namespace internal {

void ControllerImpl::ReapIfDue(Controller& c) {
  // Only without a flusher thread (which reaps every period), and only
  // where a charge may run reclaimers anyway (arbitrary code, so freeing
  // here re-enters nothing that a reclaimer could not). Only when a reap
  // has work: newly dead groups to queue, or the deadline the last reap
  // left (ReapImpl) has passed; otherwise a slow path pays two loads, not
  // a lock, two exchanges and a grace-period poll. Relaxed loads: hints; a
  // stale one leaves the work to the next slow path or tree operation.
  if (c.info_.stats_flush_period.count() > 0 || tls_charge.in_reclaim > 0 ||
      tls_charge.in_tree_walk > 0) {
    return;
  }
  if (c.to_free_.load(std::memory_order_relaxed) == nullptr) {
    const int64_t next = c.next_auto_reap_ns_.load(std::memory_order_relaxed);
    if (next == INT64_MAX || c.clock_->Now().count() < next) return;
  }
  c.ReapImpl(Controller::ReapMode::kAuto);
}

}  // namespace internal

void Controller::FreeGroup(Group* g, std::vector<FreedGroup>* freed) {
  // Pages still charged with no reference left can never be uncharged:
  // return them to the ancestors and report the leak. Pages charged
  // through objcgs are not leaked: after reparenting the parent was (or
  // will be) uncharged for them (see above).
  const int64_t via_objcg =
      std::max<int64_t>(g->objcg_pages_.load(std::memory_order_relaxed), 0);
  const uint64_t usage = g->memory_.usage().raw();
  const Pages left(usage > static_cast<uint64_t>(via_objcg)
                       ? usage - static_cast<uint64_t>(via_objcg)
                       : 0);
  if (left.raw() > 0) {
    if (g->parent_ != nullptr) g->parent_->memory_.Uncharge(left);
    Deliver("leak", g, left);  // now: g is freed below
  }
  // Deltas that reached the group's per-CPU counters after its removal
  // flush (an update racing with RemoveGroup) go to the parent now; this
  // also unlinks it from every CPU's updated tree. No update can follow:
  // nobody holds a reference and the grace period has passed.
  rstat_->FlushSubtree(g->stats_);
  // Kernel: mem_cgroup_free() frees the per-CPU data charged to the parent
  // (now the nearest live ancestor the parent's objcg points to).
  internal::GroupMetadata::Uncharge(g->metadata_objcg_,
                                    info_.group_metadata_bytes);
  g->metadata_objcg_ = nullptr;
  if (internal::ForkSafeLoad(observers_) != nullptr) {
    freed->push_back({g->id_, g->path(), left});
  }
  Group* parent = g->parent_;
  // Kernel: css_release_work_fn() uncounts a dying cgroup when freed.
  if (g->counted_dying_) {
    for (Group* a = parent; a != nullptr; a = a->parent_) {
      a->nr_dying_descendants_.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  profile::ForgetGroup(g);  // its heap profile rate, if it had one
  delete g;
  live_groups_.fetch_sub(1, std::memory_order_relaxed);
  // May queue the parent (pushed on to_free_; ReapImpl's loop sees it).
  if (parent != nullptr) parent->Put();
}

void Controller::NotifyOffline(Group& group) {
  if (auto observers = internal::ForkSafeLoad(observers_)) {
    for (const auto& o : *observers) o->OnGroupOffline(group);
  }
}

void Controller::NotifyFreed(const std::vector<FreedGroup>& freed) {
  if (auto observers = internal::ForkSafeLoad(observers_)) {
    for (const FreedGroup& f : freed) {
      for (const auto& o : *observers) o->OnGroupFreed(f);
    }
  }
}

}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Group: lifetime, events, limit writes with their cgroup-v2 semantics
// (kernel: memory_max_write, memory_high_write, memory_reclaim), and
// observers.

#include "umemcg/group.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "charge_stock.h"
#include "controller_impl.h"
#include "port/fork.h"
#include "psi/psi.h"
#include "rstat.h"
#include "umemcg/controller.h"

namespace umemcg {

using internal::ControllerImpl;
using internal::tls_charge;

// ---- GroupRef ----

GroupRef::GroupRef(Group* group) : group_(group) {
  if (group_ != nullptr) group_->Get();
}

void GroupRef::reset() {
  if (group_ != nullptr) {
    group_->Put();
    group_ = nullptr;
  }
}

// ---- Lifetime ----

Group::Group(Controller* controller, Group* parent, std::string name,
             uint64_t id)
    : memory_(parent != nullptr ? &parent->memory_ : nullptr),
      stock_(controller->stock_.get()),
      controller_(controller),
      parent_(parent),
      name_(std::move(name)),
      id_(id),
      depth_(parent != nullptr ? parent->depth_ + 1 : 0),
      stats_(internal::GroupStats::Create(
          controller->rstat_.get(),
          parent != nullptr ? parent->stats_ : nullptr)),
      // The root is never cached (charging it is a no-op).
      batch_(parent != nullptr ? controller->stock_->batch() : 0) {
  internal::Psi::Prepare();  // never first on a charge path (psi.h)
  if (parent_ != nullptr) parent_->Get();
}

Group::~Group() {
  internal::Psi::Destroy(psi_.load(std::memory_order_relaxed));
  internal::GroupStats::Destroy(stats_);
  // No RaiseEvent can reach this group any more (it needs a reference to
  // the group or a descendant).
  delete event_callback_.load(std::memory_order_relaxed);
}

void Group::Put() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    controller_->ReleaseGroup(this);
  }
}

bool Group::IsDescendantOf(const Group& ancestor) const {
  // Depth check first: most slots in a drain are not in the subtree.
  const Group* g = this;
  while (g != nullptr && g->depth_ > ancestor.depth_) g = g->parent_;
  return g == &ancestor;
}

std::string Group::path() const {
  if (parent_ == nullptr) return "";
  std::string parent_path = parent_->path();
  return parent_path.empty() ? name_ : parent_path + "/" + name_;
}

std::vector<std::string> Group::ChildNames() const {
  std::shared_lock<std::shared_mutex> lock(controller_->tree_mu_);
  std::vector<std::string> names;
  names.reserve(nr_children_);
  for (const Group* c = first_child_; c != nullptr; c = c->next_sibling_) {
    names.push_back(c->name_);
  }
  return names;
}

std::vector<std::pair<GroupRef, bool>> ControllerImpl::SubtreePreorder(
    Group& g) {
  std::shared_lock<std::shared_mutex> lock(g.controller_->tree_mu_);
  std::vector<std::pair<GroupRef, bool>> out;
  if (!g.online()) return out;
  // Iterative: trees may be deep. Siblings pushed in reverse so that they
  // come out in creation order.
  std::vector<Group*> stack = {&g};
  std::vector<Group*> children;
  while (!stack.empty()) {
    Group* x = stack.back();
    stack.pop_back();
    out.emplace_back(GroupRef(x), x->first_child_ == nullptr);
    children.clear();
    for (Group* c = x->first_child_; c != nullptr; c = c->next_sibling_) {
      children.push_back(c);
    }
    stack.insert(stack.end(), children.rbegin(), children.rend());
  }
  return out;
}

size_t Group::NumChildren() const {
  std::shared_lock<std::shared_mutex> lock(controller_->tree_mu_);
  return nr_children_;
}

// ---- Events (RaiseEvent, SetEventCallback: events.cc) ----

void Group::SetOomHandler(OomHandler handler) {
  (void)internal::ForkSafeExchange(
      oom_handler_, handler
                        ? std::make_shared<const OomHandler>(std::move(handler))
                        : nullptr);
}

// ---- Limits ----

namespace {

Status CheckWritable(const Group& g) {
  if (g.is_root()) {
    return Status(StatusCode::kInvalidArgument, "the root group has no limits");
  }
  if (!g.online()) {
    return Status(StatusCode::kFailedPrecondition, "group was removed");
  }
  // Kernel: without the controller the group has no memory.* files to
  // write (the files layer answers ENOENT); the C++ calls answer the same.
  if (!g.has_memory_controller()) {
    return Status(StatusCode::kNotFound,
                  "the memory controller is not enabled for this group");
  }
  return Status::Ok();
}

Status CheckMayReclaim() {
  if (tls_charge.in_reclaim > 0) {
    return Status(StatusCode::kFailedPrecondition,
                  "called from a reclaimer or OOM handler");
  }
  return Status::Ok();
}

}  // namespace

Status Group::SetMax(Pages max, ChargeFlags flags) {
  if (Status s = CheckWritable(*this); !s.ok()) return s;
  max = std::min(max, kPageCounterMax);
  if (!HasFlag(flags, ChargeFlags::kMayReclaim)) {
    memory_.ExchangeMax(max);
    UndoIfControllerLost();
    return Status::Ok();
  }
  if (Status s = CheckMayReclaim(); !s.ok()) return s;
  memory_.ExchangeMax(max);
  if (UndoIfControllerLost()) return Status::Ok();
  // Kernel: memory_max_write(). Drain once, reclaim up to 16 fruitless
  // rounds, then OOM until usage fits or the handler gives up.
  ControllerImpl::ReclaimToLimit(this, max.raw(), /*may_oom=*/true);
  return Status::Ok();
}

Status Group::SetHigh(Pages high, ChargeFlags flags) {
  if (Status s = CheckWritable(*this); !s.ok()) return s;
  high = std::min(high, kPageCounterMax);
  if (!HasFlag(flags, ChargeFlags::kMayReclaim)) {
    memory_.SetHigh(high);
    UndoIfControllerLost();
    return Status::Ok();
  }
  if (Status s = CheckMayReclaim(); !s.ok()) return s;
  memory_.SetHigh(high);
  if (UndoIfControllerLost()) return Status::Ok();
  // Kernel: memory_high_write().
  int retries = internal::kMaxReclaimRetries;
  int rounds = 0;
  bool drained = false;
  while (memory_.usage() > high && ++rounds <= internal::kMaxProgressRounds) {
    if (!drained) {
      controller_->DrainAllStocks(*this);
      drained = true;
      continue;
    }
    const uint64_t excess = (memory_.usage() - high).raw();
    if (ControllerImpl::ReclaimSubtree(this, excess) == 0 && retries-- <= 0) {
      break;
    }
  }
  return Status::Ok();
}

Status Group::SetMin(Pages min) {
  if (Status s = CheckWritable(*this); !s.ok()) return s;
  memory_.SetMin(min);
  UndoIfControllerLost();
  return Status::Ok();
}

Status Group::SetLow(Pages low) {
  if (Status s = CheckWritable(*this); !s.ok()) return s;
  memory_.SetLow(low);
  UndoIfControllerLost();
  return Status::Ok();
}

Status Group::SetOomGroup(bool oom_group) {
  if (Status s = CheckWritable(*this); !s.ok()) return s;
  oom_group_.store(oom_group, std::memory_order_relaxed);
  UndoIfControllerLost();
  return Status::Ok();
}

void Group::ResetLimitsWithoutController() {
  // Raising limits never reclaims.
  memory_.ExchangeMax(kPageCounterMax);
  memory_.SetHigh(kPageCounterMax);
  memory_.SetMin(Pages(0));
  memory_.SetLow(Pages(0));
  oom_group_.store(false, std::memory_order_relaxed);
}

bool Group::UndoIfControllerLost() {
  // Pairs with the fence in SetSubtreeMemory (store-buffering): either
  // this load sees the controller gone, or the disabler's resets come
  // after this setter's write in each value's modification order.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (has_memory_controller()) return false;
  ResetLimitsWithoutController();
  return true;
}

Status Group::SetSubtreeMemory(bool enable) {
  std::vector<GroupRef> lost;  // children that lose the controller
  {
    internal::TreeWriteLock lock(*controller_);
    if (!online()) {
      return Status(StatusCode::kFailedPrecondition, "group was removed");
    }
    if (enable) {
      if (!has_memory_controller()) {
        return Status(StatusCode::kNotFound,
                      "the memory controller is not enabled for this group");
      }
      if (subtree_memory()) return Status::Ok();  // enabled already
      subtree_memory_.store(true, std::memory_order_release);
      // Kernel: each child gets a new memcg, its counts from zero. Here
      // the events and the peaks start again (under the tree lock: no
      // child can be removed meanwhile); the pages the child still holds
      // stay on its counter (docs/design.md says how this differs).
      for (Group* c = first_child_; c != nullptr; c = c->next_sibling_) {
        for (size_t e = 0; e < kNumMemoryEvents; ++e) {
          // Relaxed: independent counters (see events_).
          c->events_[e].store(0, std::memory_order_relaxed);
          c->events_local_[e].store(0, std::memory_order_relaxed);
        }
        c->memory_.ResetWatermark();
      }
      return Status::Ok();
    }
    if (!subtree_memory()) return Status::Ok();  // not enabled: a no-op
    for (Group* c = first_child_; c != nullptr; c = c->next_sibling_) {
      if (c->subtree_memory()) {
        return Status(StatusCode::kBusy,
                      "a child group has the memory controller enabled");
      }
    }
    subtree_memory_.store(false, std::memory_order_release);
    for (Group* c = first_child_; c != nullptr; c = c->next_sibling_) {
      lost.emplace_back(c);
    }
  }
  // Outside the tree lock: the defaults of a group without the
  // controller, so that it limits and protects nothing. A setter racing
  // with this (it passed its check before the store above) undoes its own
  // write (UndoIfControllerLost); the fence pairs with the one there.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (GroupRef& c : lost) c->ResetLimitsWithoutController();
  return Status::Ok();
}

Status Group::Reclaim(Pages n) {
  if (!online()) {
    return Status(StatusCode::kFailedPrecondition, "group was removed");
  }
  if (Status s = CheckMayReclaim(); !s.ok()) return s;
  // Kernel: memory_reclaim() / user_proactive_reclaim(): ask for a quarter
  // of what is left each round, so reclaim spreads over the subtree rather
  // than emptying the first group visited.
  const uint64_t want = n.raw();
  uint64_t reclaimed = 0;
  int retries = internal::kMaxReclaimRetries;
  while (reclaimed < want) {
    const uint64_t batch = (want - reclaimed) / 4;
    const uint64_t got = ControllerImpl::ReclaimSubtree(this, batch);
    if (got == 0 && retries-- <= 0) {
      return Status(StatusCode::kAgain, "could not reclaim enough");
    }
    reclaimed += got;
  }
  return Status::Ok();
}

// ---- Reclaimers ----

Status Group::AddReclaimer(Reclaimer* reclaimer) {
  if (reclaimer == nullptr) {
    return Status(StatusCode::kInvalidArgument, "null reclaimer");
  }
  if (tls_charge.in_tree_walk > 0) {
    return Status(StatusCode::kFailedPrecondition, "called from a reclaimer");
  }
  internal::TreeWriteLock lock(*controller_);
  if (std::find(reclaimers_.begin(), reclaimers_.end(), reclaimer) !=
      reclaimers_.end()) {
    return Status(StatusCode::kAlreadyExists, "reclaimer already registered");
  }
  reclaimers_.push_back(reclaimer);
  return Status::Ok();
}

Status Group::RemoveReclaimer(Reclaimer* reclaimer) {
  if (tls_charge.in_tree_walk > 0) {
    return Status(StatusCode::kFailedPrecondition, "called from a reclaimer");
  }
  // The exclusive lock waits for running walks: afterwards no thread is
  // inside `reclaimer`.
  internal::TreeWriteLock lock(*controller_);
  auto it = std::find(reclaimers_.begin(), reclaimers_.end(), reclaimer);
  if (it == reclaimers_.end()) {
    return Status(StatusCode::kNotFound, "reclaimer not registered");
  }
  reclaimers_.erase(it);
  return Status::Ok();
}

// ---- Observers ----

Pages Group::StockedPages() const { return Pages(stock_->Stocked(this)); }

std::string Group::MemoryStock() const {
  return "stocked " + std::to_string(StockedPages().in_bytes()) + "\nbatch " +
         std::to_string(batch()) + "\nslack_bound " +
         std::to_string(StockSlackBound().in_bytes()) + "\n";
}

Pages Group::StockSlackBound() const {
  return Pages(static_cast<uint64_t>(stock_->nr_shards()) *
               static_cast<uint64_t>(batch()));
}

}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ObjCgroup: the charge and uncharge paths (kernel: obj_cgroup_charge,
// obj_cgroup_uncharge, E5 era: docs/architecture.md, Eras).
// Release and reparenting live in controller.cc with the rest of lifetime.

#include "umemcg/obj_cgroup.h"

#include <shared_mutex>

#include "controller_impl.h"
#include "obj_stock.h"
#include "port/srcu.h"
#include "umemcg/controller.h"

namespace umemcg {

using internal::ObjStock;
using internal::SrcuReadScope;

ObjCgroup::ObjCgroup(Controller* controller, Group* origin)
    : group_(origin),
      origin_id_(origin->id()),
      controller_(controller),
      stock_(controller->obj_stock_.get()),
      is_root_(origin->is_root()),
      stock_shards_(stock_->shards_base()),
      stock_hit_shards_(stock_->hit_shards()),
      stock_slots_(stock_->slots()),
      stock_cache_stats_(stock_->cache_stats()) {}

void ObjCgroup::Put() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    controller_->ReleaseObjCgroup(this);
  }
}

ChargeResult ObjCgroup::ChargePages(uint64_t pages, ChargeFlags flags,
                                    Group** charged) {
  // REQUIRES: a group SRCU read section (the caller's): the group read
  // here is used without a reference, and may be removed meanwhile.
  for (;;) {
    // Nearest live ancestor: a reparent may be in flight (RemoveGroup
    // re-points before it takes the group offline, so this walk is short).
    Group* g = group();
    while (!g->online() && g->parent() != nullptr) g = g->parent();
    *charged = g;
    if (g->is_root()) {
      // Reparented up to the root: charge its counter (no limits), so the
      // later uncharge through the objcg balances it.
      internal::ControllerImpl::Memory(g).Charge(Pages(pages));
      return {};
    }
    // Unsampled: the object path samples the bytes it charges.
    ChargeResult r = g->TryChargeUnsampled(Pages(pages), flags);
    // Offline since the check above: look again (the objcg points higher).
    if (r.code != StatusCode::kFailedPrecondition) return r;
  }
}

ChargeResult ObjCgroup::Charge(Bytes size, ChargeFlags flags, StatItem item) {
  // The rseq stock hit first, with nothing else around it: the common case
  // of an accounted small object (a root objcg never has a stock slot, and
  // the hit never touches limits, so no other check applies to it).
  if (stock_->TryCommitConsume(this, size.raw(), item)) return {};
  return ChargeSlow(size.raw(), flags, item);
}

ChargeResult ObjCgroup::ChargeSlow(uint64_t n, ChargeFlags flags,
                                   StatItem item) {
  if (stock_->TryCommitUncached(this, n, /*consume=*/true, item)) return {};
  if (n == 0 || is_root_) return {};
  if (n > kPageCounterMax.in_bytes()) {
    ChargeResult r;
    r.code = StatusCode::kInvalidArgument;
    return r;
  }
  if (!stock_->enabled()) return ChargeViaPool(n, flags, item);
  if (stock_->Consume(this, n, item)) return {};
  return ChargeMiss(n, flags, item);
}

ChargeResult ObjCgroup::ChargeMiss(uint64_t n, ChargeFlags flags,
                                   StatItem item) {
  // Kernel: obj_cgroup_charge(). The central pool is not used here (two
  // contended atomics for a few bytes), nor are stock bytes used to shave
  // a page.
  const uint64_t pages = (n + kPageSize - 1) >> kPageShift;
  // One read section from reading group() until the kmem delta is cached
  // for (or applied to) the group charged.
  SrcuReadScope section(*controller_->srcu_);
  Group* charged = nullptr;
  ChargeResult r = ChargePages(pages, flags, &charged);
  if (!r.ok()) return r;
  // The remainder stays in the stock (allow_uncharge = false: no page
  // uncharge right after a page charge) and the statistic moves by +n.
  stock_->RefillInSection(this, (pages << kPageShift) - n,
                          /*allow_uncharge=*/false, item,
                          static_cast<int64_t>(n), charged, pages);
  return r;
}

void ObjCgroup::Uncharge(Bytes size, StatItem item) {
  // As Charge: the rseq stock hit first.
  if (stock_->TryCommitUncharge(this, size.raw(), item)) return;
  UnchargeSlow(size.raw(), item);
}

void ObjCgroup::UnchargeSlow(uint64_t n, StatItem item) {
  if (stock_->TryCommitUncached(this, n, /*consume=*/false, item)) return;
  if (n == 0 || is_root_) return;
  if (n > kPageCounterMax.in_bytes()) {
    SrcuReadScope section(*controller_->srcu_);
    controller_->Report("underflow", group(), Bytes(n).ceil_pages());
    return;
  }
  if (!stock_->enabled()) return UnchargeViaPool(n, item);
  stock_->Uncharge(this, n, item);
}

// ---- Shared-pool variant ----
//
// Every object goes through nr_charged_bytes (one cache line shared by all
// CPUs) and statistics are applied at once: the design before per-CPU
// object stocks, kept so a benchmark can measure what the stock buys.

ChargeResult ObjCgroup::ChargeViaPool(uint64_t n, ChargeFlags flags,
                                      StatItem item) {
  SrcuReadScope section(*controller_->srcu_);
  // Relaxed: the pool publishes no other data; the CAS makes each byte
  // taken by one thread only.
  uint64_t cur = nr_charged_bytes_.load(std::memory_order_relaxed);
  while (cur >= n) {
    if (nr_charged_bytes_.compare_exchange_weak(cur, cur - n,
                                                std::memory_order_relaxed)) {
      ObjStock::ApplyStat(group(), item, static_cast<int64_t>(n));
      return {};
    }
  }
  const uint64_t pages = (n + kPageSize - 1) >> kPageShift;
  Group* charged = nullptr;
  ChargeResult r = ChargePages(pages, flags, &charged);
  if (!r.ok()) return r;
  ObjStock::ApplyKmem(charged, static_cast<int64_t>(pages));
  if (const uint64_t rem = (pages << kPageShift) - n; rem != 0) {
    // Relaxed: the pool publishes no other data.
    nr_charged_bytes_.fetch_add(rem, std::memory_order_relaxed);
  }
  ObjStock::ApplyStat(charged, item, static_cast<int64_t>(n));
  return r;
}

void ObjCgroup::UnchargeViaPool(uint64_t n, StatItem item) {
  SrcuReadScope section(*controller_->srcu_);
  // Relaxed: as above.
  uint64_t cur = nr_charged_bytes_.fetch_add(n, std::memory_order_relaxed) + n;
  while (cur > kPageSize) {
    const uint64_t pages = cur >> kPageShift;
    if (nr_charged_bytes_.compare_exchange_weak(
            cur, cur - (pages << kPageShift), std::memory_order_relaxed)) {
      Group* g = group();
      ObjStock::ApplyKmem(g, -static_cast<int64_t>(pages));
      ObjStock::UnchargePages(g, pages, /*via_stock=*/true);
      break;
    }
  }
  ObjStock::ApplyStat(group(), item, -static_cast<int64_t>(n));
}

GroupRef ObjCgroup::GetGroup() {
  // Kernel: get_mem_cgroup_from_objcg(). A group whose last reference went
  // was removed, so this objcg was moved off it first: read again.
  SrcuReadScope section(*controller_->srcu_);
  for (;;) {
    Group* g = group();
    if (g->TryGet()) return GroupRef::Adopt(g);
  }
}

ObjCgroupRef Group::TryGetObjCgroup() {
  // As GetObjCgroup, without waiting: the page API's profiler samples may
  // be taken by a caller that holds the tree lock (a reclaimer's uncharge).
  std::shared_lock<std::shared_mutex> lock(controller_->tree_mu_,
                                           std::try_to_lock);
  if (!lock.owns_lock()) return ObjCgroupRef();
  return ObjCgroupRef(objcg_.load(std::memory_order_acquire));
}

ObjCgroupRef Group::GetObjCgroup() {
  // RemoveGroup clears objcg_ under the exclusive tree lock and drops the
  // group's reference only afterwards: while we hold the lock shared, a
  // non-null objcg_ still has that reference, so taking ours is safe.
  std::shared_lock<std::shared_mutex> lock(controller_->tree_mu_);
  return ObjCgroupRef(objcg_.load(std::memory_order_acquire));
}

}  // namespace umemcg

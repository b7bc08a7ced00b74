// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ObjCgroup: byte-granular accounting of objects (kernel: struct obj_cgroup,
// mm/memcontrol.c obj_cgroup_charge / obj_cgroup_uncharge). Each Group owns
// one, created with it (a reference: Group::GetObjCgroup()). Objects record
// their ObjCgroup (an ObjCgroupRef), not their Group, so when the group is
// removed its objcg is re-pointed to the parent in one step and objects
// freed later uncharge the parent (reparenting; kernel:
// memcg_reparent_objcgs).
//
//   ObjCgroupRef objcg = tenant->GetObjCgroup();  // empty once removed
//   if (objcg->Charge(Bytes(64)).ok()) { ...; objcg->Uncharge(Bytes(64)); }
//
// Bytes are charged from a per-CPU object stock of pre-charged bytes; a miss
// charges whole pages through the current group's charge path (TryCharge:
// the page stock, limits, reclaim, OOM handling and memory.high all apply)
// and keeps the sub-page remainder in the stock. Each charge also moves a
// byte statistic (default slab_unreclaimable) by the object's size, and
// pages charged through objcgs are counted in the "kernel" statistic
// (StatItem::kKernel, the kernel's MEMCG_KMEM).
//
// Usage over-report. Group usage counts whole pages: bytes cached in the
// object stocks and in the objcg's central pool (nr_charged_bytes) are
// charged but unused, below one page per CPU stock slot (64 KiB when
// objects larger than a page are freed) plus one page in the pool. Exact
// after Controller::DrainAllStocks at quiescence: a drain pushes each
// slot's sub-page remainder to the pool and returns the pool's whole pages
// (the kernel keeps them until release), so the objcg's share of its
// group's usage is ceil(live bytes / 4096) pages and the pool holds the
// rest of the last page (0 once every object is freed).
//
// Reparenting. Removing a group points its objcg (and the objcgs it had
// inherited from removed children: the group's objcg list, so the work is
// the group's own, whatever the size of the tree) at the parent.
// Uncharges then land on the parent's counters. Charging through a removed
// group's objcg charges the nearest live ancestor (the objcg now points there),
// as the kernel does after reparenting; the root's counter is then charged
// directly, as it has no limits. The root group's own objcg is never charged:
// Charge and Uncharge are free no-ops on it.
//
// Lifetime. An ObjCgroup is reference counted: its group holds a reference
// until it is removed, and every ObjCgroupRef and object stock slot holds
// one. It holds no reference on any group (kernel: obj_cgroup), so a
// removed group is freed while objects charged through its objcg live on:
// their charges stay on the parent (and the ancestors), and freeing them
// later uncharges the parent. group() always names a group that is not
// yet freed when read, and the charge paths that follow it without a
// reference run inside a read section of the controller's group SRCU, so
// the group a racing removal just left is freed only after they finish
// (see Controller::Reap). When the last reference goes the central pool
// must hold whole pages (otherwise the error hook gets
// "objcg_partial_page"); those pages are uncharged from the group the
// objcg points to.
//
// Thread safety: every method may be called from any thread. Charge and
// Uncharge never allocate and never take a blocking lock on the stock-hit
// path; on a miss Charge behaves as Group::TryCharge with `flags`.

#ifndef UMEMCG_OBJ_CGROUP_H_
#define UMEMCG_OBJ_CGROUP_H_

#include <atomic>
#include <cstdint>
#include <utility>

#include "umemcg/export.h"
#include "umemcg/group.h"
#include "umemcg/stats.h"
#include "umemcg/units.h"

namespace umemcg {

class Controller;
namespace internal {
class ControllerImpl;
class GroupMetadata;
class ObjStock;
struct ObjStockShard;
}  // namespace internal

class UMEMCG_EXPORT alignas(64) ObjCgroup {
 public:
  ObjCgroup(const ObjCgroup&) = delete;
  ObjCgroup& operator=(const ObjCgroup&) = delete;

  // ---- Charging ----

  // Charges `size` bytes and adds `size` to `item` (a byte statistic;
  // kSlabUnreclaimable or kSlabReclaimable are cached per CPU, others are
  // applied at once). Kernel: obj_cgroup_charge() + __account_obj_stock().
  // Zero bytes and the root's objcg succeed at once; sizes beyond
  // kPageCounterMax pages return kInvalidArgument. Other results are those
  // of Group::TryCharge on the group charged.
  // REQUIRES: the caller holds a reference (an ObjCgroupRef, or the online
  // group's own).
  ChargeResult Charge(Bytes size, ChargeFlags flags = kChargeDefault,
                      StatItem item = StatItem::kSlabUnreclaimable);

  // Returns `size` bytes charged earlier and subtracts `size` from `item`.
  // Kernel: obj_cgroup_uncharge(). Uncharging more than was charged is
  // detected in pages, at the group's counter: it clamps there, counts an
  // underflow and calls the error hook ("underflow"); a size beyond
  // kPageCounterMax pages is reported the same way and ignored.
  void Uncharge(Bytes size, StatItem item = StatItem::kSlabUnreclaimable);

  // ---- Observers ----

  // The group charged now: the owner, or after its removal its nearest
  // ancestor alive at that time. For comparison only: the group may be
  // removed and freed at any time after the call unless the caller holds a
  // reference to it (or to a descendant); GetGroup takes one.
  Group* group() const { return group_.load(std::memory_order_acquire); }
  // A reference to the group charged now (kernel:
  // get_mem_cgroup_from_objcg). REQUIRES: the caller holds a reference to
  // the objcg.
  GroupRef GetGroup();
  // The id of the group this objcg was created for (Group::id(); that
  // group may be removed and freed).
  uint64_t origin_id() const { return origin_id_; }
  bool is_root() const { return is_root_; }
  // The central pool: bytes charged (as part of whole pages) to the current
  // group, held by no stock and no object. Kernel: nr_charged_bytes.
  Bytes pooled() const {
    // Relaxed: a snapshot, exact when the objcg is quiescent.
    return Bytes(nr_charged_bytes_.load(std::memory_order_relaxed));
  }

 private:
  friend class Controller;
  friend class ObjCgroupRef;
  friend class internal::ControllerImpl;
  friend class internal::GroupMetadata;  // its pool, for group metadata
  friend class internal::ObjStock;

  ObjCgroup(Controller* controller, Group* origin);
  ~ObjCgroup() = default;

  void Get() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Put();

  // Charge and Uncharge past the rseq stock hit (see Charge): the checks,
  // the locked stock path, a miss. Out of line so that the hit needs no
  // stack frame.
  [[gnu::noinline]] ChargeResult ChargeSlow(uint64_t size, ChargeFlags flags,
                                            StatItem item);
  [[gnu::noinline]] void UnchargeSlow(uint64_t size, StatItem item);
  // Charge after a stock miss: whole pages, the rest to the stock.
  [[gnu::noinline]] ChargeResult ChargeMiss(uint64_t size, ChargeFlags flags,
                                            StatItem item);
  // The shared-pool variant (ControllerOptions::obj_stock = false).
  ChargeResult ChargeViaPool(uint64_t size, ChargeFlags flags, StatItem item);
  void UnchargeViaPool(uint64_t size, StatItem item);
  // Charges `pages` to the current group, or its nearest live ancestor;
  // returns the group charged in *charged. Kernel: obj_cgroup_charge_pages.
  ChargeResult ChargePages(uint64_t pages, ChargeFlags flags, Group** charged);

  // Read by every charge miss; replaced by RemoveGroup under the
  // controller's objcg_mu_ (release store; the acquire load in group()
  // pairs with it). Never null; never a freed group while a reader may
  // still use it (see Lifetime above).
  std::atomic<Group*> group_;
  const uint64_t origin_id_;
  Controller* const controller_;
  internal::ObjStock* const stock_;
  const bool is_root_;
  // The object stock's shards, how many its rseq hit may use (0 without
  // rseq), its slots per shard and whether it caches slab statistics,
  // copied at creation: the hit reads them next to stock_ instead of
  // through it, which leaves it a register short of needing a stack frame.
  internal::ObjStockShard* const stock_shards_;
  const uint32_t stock_hit_shards_;
  const int32_t stock_slots_;
  const bool stock_cache_stats_;  // ControllerOptions::obj_stat_cache

  // Reference count. Its own cache line: ObjCgroupRef copies write it.
  // Increments are relaxed (a reference is made from an existing one); the
  // final decrement is acq_rel so the reaper sees all prior writes.
  alignas(64) std::atomic<int64_t> refs_{1};

  // The central pool. Its own cache line: written when a stock slot is
  // drained or installed, and on every op of the shared-pool variant.
  alignas(64) std::atomic<uint64_t> nr_charged_bytes_{0};

  // Links in group()'s objcg list (Group::objcg_list_), guarded by the
  // controller's objcg_mu_.
  ObjCgroup* list_prev_ = nullptr;
  ObjCgroup* list_next_ = nullptr;

  // Link in the controller's lock-free list of objcgs to free.
  ObjCgroup* next_to_free_ = nullptr;
};

// A counted reference to an ObjCgroup (what an accounted object keeps).
// Copying takes a reference: one atomic increment on a line shared by all
// holders, so keep one per long-lived owner (a table, a connection), not
// one per small object.
class UMEMCG_EXPORT ObjCgroupRef {
 public:
  ObjCgroupRef() = default;
  // Takes a new reference to `objcg` (may be null). REQUIRES: the caller
  // holds one already (a group's objcg: Group::GetObjCgroup()).
  explicit ObjCgroupRef(ObjCgroup* objcg) : objcg_(objcg) {
    if (objcg_ != nullptr) objcg_->Get();
  }
  ObjCgroupRef(const ObjCgroupRef& other) : ObjCgroupRef(other.objcg_) {}
  ObjCgroupRef(ObjCgroupRef&& other) noexcept : objcg_(other.objcg_) {
    other.objcg_ = nullptr;
  }
  ObjCgroupRef& operator=(ObjCgroupRef other) noexcept {
    std::swap(objcg_, other.objcg_);
    return *this;
  }
  ~ObjCgroupRef() { reset(); }

  void reset() {
    if (objcg_ != nullptr) {
      objcg_->Put();
      objcg_ = nullptr;
    }
  }
  ObjCgroup* get() const { return objcg_; }
  ObjCgroup* operator->() const { return objcg_; }
  ObjCgroup& operator*() const { return *objcg_; }
  explicit operator bool() const { return objcg_ != nullptr; }

 private:
  ObjCgroup* objcg_ = nullptr;
};

}  // namespace umemcg

#endif  // UMEMCG_OBJ_CGROUP_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// GroupMetadata: a group's own statistics charged to its parent (kernel:
// mem_cgroup_css_alloc() allocates the new memcg's per-CPU data with
// __GFP_ACCOUNT while the parent is the active memcg, so it is charged to
// the parent through the parent's objcg and counted there as
// MEMCG_PERCPU_B, "percpu" in memory.stat, and within MEMCG_KMEM,
// "kernel").
//
// What is charged: the group's statistics allocation (GroupStats, with its
// per-CPU block table) and one per-CPU statistics block for every CPU
// shard, in glibc chunks (the Footprint formula of docs/design.md with
// T = nr_cpus: the kernel allocates a memcg's per-CPU areas for every
// possible CPU at creation; umemcg takes a CPU's block at the group's first
// update there, and charges all of them up front, so that a tenant's later
// updates cannot grow past its limit). The Group and ObjCgroup objects are
// not charged, as the kernel charges neither struct mem_cgroup nor struct
// obj_cgroup. Children of the root are not charged (the kernel never
// charges the root memcg).
//
// The charge goes through the parent's objcg (so it follows the parent's
// objcg when the parent is removed, as the kernel's does) by its central
// pool, never a per-CPU object stock: the uncharge runs when the group is
// freed, possibly while the controller is being destroyed after its
// stocks were drained for the last time.
//
// Thread safety: Charge and Uncharge may be called from any thread; Charge
// may reclaim (not from inside a reclaimer: CreateGroup refuses that
// first).

#ifndef UMEMCG_SRC_METADATA_GROUP_METADATA_H_
#define UMEMCG_SRC_METADATA_GROUP_METADATA_H_

#include <cstddef>
#include <cstdint>

#include "umemcg/group.h"
#include "umemcg/obj_cgroup.h"
#include "umemcg/status.h"

namespace umemcg::internal {

class GroupMetadata {
 public:
  // Bytes charged per group: glibc's chunk for the statistics allocation
  // (`stats_bytes`) plus `nr_shards` chunks of `block_bytes`.
  static uint64_t Bytes(int nr_shards, size_t stats_bytes, size_t block_bytes);

  // Charges `bytes` to `parent`'s objcg (may reclaim; never OOM handling:
  // an mkdir that does not fit fails). On success returns the objcg with a
  // reference the caller keeps for Uncharge. Errors: kResourceExhausted
  // (ENOMEM: over the parent's or an ancestor's max), kAgain (an external
  // limit's owner is unreachable), kFailedPrecondition (parent removed).
  static StatusOr<ObjCgroup*> Charge(Group& parent, uint64_t bytes);

  // Returns `bytes` charged by Charge to `objcg` (its group now: the parent
  // or, after the parent's removal, its nearest live ancestor) and drops
  // the reference. Null `objcg`: nothing.
  static void Uncharge(ObjCgroup* objcg, uint64_t bytes);
};

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_METADATA_GROUP_METADATA_H_

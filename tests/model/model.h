// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Model: a deliberately naive oracle of umemcg's charge semantics, for
// differential tests. One mutex guards everything; there are no per-CPU
// stocks, no batching, no reclaim, no OOM handling, no protection and no
// events. What it models (include/umemcg/group.h, controller.h,
// page_counter.h; kernel: mm/page_counter.c and try_charge_memcg):
//
//   - a tree of groups: a child is created by name under an online parent
//     (names unique among online siblings); removing a group takes it
//     offline, refused with kBusy while it has online children;
//   - hierarchical usage: a charge adds to the group and every ancestor,
//     the root included; charging the root itself is a free no-op;
//   - TryCharge(g, n) succeeds iff usage + n <= max at every level from g
//     up (usage == max is allowed); otherwise nothing is charged and the
//     refusing group is the level closest to g that would exceed its max;
//   - ForceCharge(g, n): a charge that never fails for lack of room
//     (ChargeFlags::kNoFail / kHigh), reporting the level it went past;
//   - Uncharge clamps at zero per level and counts the underflow;
//   - SetMax has cgroup-v2 memory.max write semantics: it always sets, even
//     below the current usage.
// Charges to offline groups fail with kFailedPrecondition; uncharges of
// memory charged before the removal still work.
//
// Byte accounting (include/umemcg/obj_cgroup.h; kernel: obj_cgroup): each
// group has one objcg, named by the group's id, holding the bytes of its
// live objects. An objcg points at its group; removing a group re-points
// every objcg pointing at it to the parent. Object charges never fail here
// (the model has no object limits: use it with unlimited groups); the root's
// objcg is never charged. At quiescence (every stock drained) a group's
// objcg pages are sum(ceil(live / 4096)) over the objcgs pointing into its
// subtree, its slab statistic the sum of their live bytes.
//
// Groups are named by GroupId: the root is kRoot, ids are never reused, and
// a removed group stays in the model (offline) forever.
//
// The model uses no symbol of the umemcg library, only its header-only
// types (StatusCode, Pages).
//
// Thread safety: every method may be called from any thread; each one is
// atomic with respect to the others (one mutex).

#ifndef UMEMCG_TESTS_MODEL_MODEL_H_
#define UMEMCG_TESTS_MODEL_MODEL_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "umemcg/status.h"
#include "umemcg/units.h"

namespace umemcg::model {

using GroupId = int;
inline constexpr GroupId kRoot = 0;
inline constexpr GroupId kNoGroup = -1;

// The outcome of a model charge (mirrors umemcg::ChargeResult).
struct ChargeOutcome {
  // kOk; kResourceExhausted (did not fit under limited_by's max);
  // kFailedPrecondition (offline group); kInvalidArgument (more than
  // kPageCounterMax pages).
  StatusCode code = StatusCode::kOk;
  // ForceCharge only: the charge went past limited_by's max.
  bool forced = false;
  // The level that refused (or was exceeded by a forced charge).
  GroupId limited_by = kNoGroup;

  bool ok() const { return code == StatusCode::kOk; }
};

class Model {
 public:
  // A model holding only the root (online, usage 0, no limit).
  Model();

  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // ---- Tree ----

  // Creates `name` under `parent` and stores its id in *id. Returns
  // kInvalidArgument for an empty name, one containing '/', "." or "..";
  // kFailedPrecondition if `parent` is offline; kAlreadyExists if an online
  // sibling has that name. REQUIRES: `parent` is a valid id.
  StatusCode CreateGroup(GroupId parent, std::string_view name, GroupId* id);
  // Takes `group` offline. kInvalidArgument for the root;
  // kFailedPrecondition if already offline; kBusy while it has online
  // children.
  StatusCode RemoveGroup(GroupId group);

  // ---- Charging ----

  // Charges `n` pages to `group` and its ancestors if they fit everywhere.
  ChargeOutcome TryCharge(GroupId group, Pages n);
  // Charges `n` pages unconditionally; forced = some level went past max.
  // Same kInvalidArgument / kFailedPrecondition results as TryCharge.
  ChargeOutcome ForceCharge(GroupId group, Pages n);
  // Subtracts `n` from `group` and every ancestor, clamping each level at
  // zero. Returns false (and counts one underflow) if any level would have
  // gone negative. A no-op for the root and for n == 0.
  bool Uncharge(GroupId group, Pages n);

  // ---- Byte accounting ----

  // Charges `size` bytes to objcg `objcg`. kInvalidArgument past
  // kPageCounterMax pages; 0 bytes and the root's objcg: no-op.
  StatusCode ObjCharge(GroupId objcg, Bytes size);
  // Uncharges; clamps at zero and counts an underflow (returns false).
  bool ObjUncharge(GroupId objcg, Bytes size);
  // The group objcg `objcg` points at now.
  GroupId ObjTarget(GroupId objcg) const;
  Bytes ObjLive(GroupId objcg) const;
  // Quiescent objcg pages / slab bytes of `group`'s subtree (see above).
  Pages ObjPages(GroupId group) const;
  Bytes SlabBytes(GroupId group) const;

  // ---- Limits ----

  // Sets max (clamped to kPageCounterMax), whatever the usage.
  // kInvalidArgument for the root; kFailedPrecondition if offline.
  StatusCode SetMax(GroupId group, Pages max);

  // ---- Observers ----

  // The level TryCharge(group, n) would be refused at, or kNoGroup if it
  // would fit. Ignores the root / offline / n == 0 special cases.
  GroupId LimitingLevel(GroupId group, Pages n) const;
  Pages usage(GroupId group) const;
  Pages max(GroupId group) const;
  bool online(GroupId group) const;
  // kNoGroup for the root.
  GroupId parent(GroupId group) const;
  int depth(GroupId group) const;
  std::string name(GroupId group) const;
  // "a/b/c" from the root ("" for the root).
  std::string path(GroupId group) const;
  // Online children in creation order.
  std::vector<GroupId> children(GroupId group) const;
  // True if `group` is `ancestor` or lies below it.
  bool IsDescendantOf(GroupId group, GroupId ancestor) const;
  // Number of groups ever created, root included (ids are 0..size()-1).
  int size() const;
  // Uncharge calls that underflowed at some level.
  uint64_t underflows() const;

 private:
  struct Node {
    GroupId parent = kNoGroup;
    std::string name;
    int depth = 0;
    bool online = true;
    uint64_t usage = 0;
    uint64_t max = kPageCounterMax.raw();
    std::vector<GroupId> children;    // online only
    GroupId objcg_target = kNoGroup;  // this group's objcg points here
    uint64_t objcg_live = 0;          // live bytes charged through it
  };
  bool InSubtreeLocked(GroupId group, GroupId ancestor) const;

  const Node& NodeLocked(GroupId group) const;
  Node& NodeLocked(GroupId group);
  GroupId LimitingLevelLocked(GroupId group, uint64_t n) const;
  // Shared prelude of TryCharge and ForceCharge: true if `out` is final.
  bool ChargePreludeLocked(GroupId group, uint64_t n, ChargeOutcome* out);
  void AddLocked(GroupId group, uint64_t n);

  mutable std::mutex mu_;
  std::vector<Node> nodes_;  // index = GroupId; guarded by mu_
  uint64_t underflows_ = 0;  // guarded by mu_
};

}  // namespace umemcg::model

#endif  // UMEMCG_TESTS_MODEL_MODEL_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The oracle is written for obviousness, not speed: every operation takes
// the one mutex and walks the ancestor chain with plain integers. Nothing
// here may depend on the library under test (tests link the model after
// libumemcg, so it must not need its symbols either).

#include "model/model.h"

#include <cstdio>
#include <cstdlib>

namespace umemcg::model {
namespace {

constexpr uint64_t kCounterMax = kPageCounterMax.raw();

[[noreturn]] void BadId(GroupId group) {
  std::fprintf(stderr, "umemcg::model: invalid group id %d\n", group);
  std::abort();
}

// usage + n > max, without overflow.
bool Exceeds(uint64_t usage, uint64_t n, uint64_t max) {
  return usage > max || n > max - usage;
}

}  // namespace

Model::Model() {
  nodes_.push_back(Node{});
  nodes_[kRoot].objcg_target = kRoot;
}

const Model::Node& Model::NodeLocked(GroupId group) const {
  if (group < 0 || static_cast<size_t>(group) >= nodes_.size()) BadId(group);
  return nodes_[group];
}

Model::Node& Model::NodeLocked(GroupId group) {
  if (group < 0 || static_cast<size_t>(group) >= nodes_.size()) BadId(group);
  return nodes_[group];
}

// ---- Tree ----

StatusCode Model::CreateGroup(GroupId parent, std::string_view name,
                              GroupId* id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (name.empty() || name.find('/') != std::string_view::npos || name == "." ||
      name == "..") {
    return StatusCode::kInvalidArgument;
  }
  const Node& p = NodeLocked(parent);
  if (!p.online) return StatusCode::kFailedPrecondition;
  for (GroupId c : p.children) {
    if (nodes_[c].name == name) return StatusCode::kAlreadyExists;
  }
  Node node;
  node.parent = parent;
  node.name = std::string(name);
  node.depth = p.depth + 1;
  const auto new_id = static_cast<GroupId>(nodes_.size());
  nodes_.push_back(std::move(node));  // invalidates `p`
  nodes_[parent].children.push_back(new_id);
  nodes_[new_id].objcg_target = new_id;
  *id = new_id;
  return StatusCode::kOk;
}

StatusCode Model::RemoveGroup(GroupId group) {
  std::lock_guard<std::mutex> lock(mu_);
  Node& g = NodeLocked(group);
  if (group == kRoot) return StatusCode::kInvalidArgument;
  if (!g.online) return StatusCode::kFailedPrecondition;
  if (!g.children.empty()) return StatusCode::kBusy;
  g.online = false;
  // Reparenting: every objcg pointing here now points at the parent.
  for (Node& n : nodes_) {
    if (n.objcg_target == group) n.objcg_target = g.parent;
  }
  std::vector<GroupId>& siblings = nodes_[g.parent].children;
  for (size_t i = 0; i < siblings.size(); ++i) {
    if (siblings[i] == group) {
      siblings.erase(siblings.begin() + i);
      break;
    }
  }
  return StatusCode::kOk;
}

// ---- Charging ----

GroupId Model::LimitingLevelLocked(GroupId group, uint64_t n) const {
  for (GroupId g = group; g != kNoGroup; g = nodes_[g].parent) {
    if (Exceeds(nodes_[g].usage, n, nodes_[g].max)) return g;
  }
  return kNoGroup;
}

bool Model::ChargePreludeLocked(GroupId group, uint64_t n, ChargeOutcome* out) {
  const Node& g = NodeLocked(group);
  *out = ChargeOutcome();
  if (n > kCounterMax) {
    out->code = StatusCode::kInvalidArgument;
    return true;
  }
  // The root is never charged; zero pages are nothing to charge.
  if (n == 0 || group == kRoot) return true;
  if (!g.online) {
    out->code = StatusCode::kFailedPrecondition;
    return true;
  }
  return false;
}

void Model::AddLocked(GroupId group, uint64_t n) {
  for (GroupId g = group; g != kNoGroup; g = nodes_[g].parent) {
    nodes_[g].usage += n;
  }
}

ChargeOutcome Model::TryCharge(GroupId group, Pages n) {
  std::lock_guard<std::mutex> lock(mu_);
  ChargeOutcome out;
  if (ChargePreludeLocked(group, n.raw(), &out)) return out;
  const GroupId over = LimitingLevelLocked(group, n.raw());
  if (over != kNoGroup) {
    out.code = StatusCode::kResourceExhausted;
    out.limited_by = over;
    return out;
  }
  AddLocked(group, n.raw());
  return out;
}

ChargeOutcome Model::ForceCharge(GroupId group, Pages n) {
  std::lock_guard<std::mutex> lock(mu_);
  ChargeOutcome out;
  if (ChargePreludeLocked(group, n.raw(), &out)) return out;
  const GroupId over = LimitingLevelLocked(group, n.raw());
  if (over != kNoGroup) {
    out.forced = true;
    out.limited_by = over;
  }
  AddLocked(group, n.raw());
  return out;
}

bool Model::Uncharge(GroupId group, Pages n) {
  std::lock_guard<std::mutex> lock(mu_);
  NodeLocked(group);  // validates the id
  if (n.raw() == 0 || group == kRoot) return true;
  bool underflow = false;
  for (GroupId g = group; g != kNoGroup; g = nodes_[g].parent) {
    uint64_t& usage = nodes_[g].usage;
    if (usage < n.raw()) {
      usage = 0;
      underflow = true;
    } else {
      usage -= n.raw();
    }
  }
  if (underflow) ++underflows_;
  return !underflow;
}

// ---- Limits ----

StatusCode Model::SetMax(GroupId group, Pages max) {
  std::lock_guard<std::mutex> lock(mu_);
  Node& g = NodeLocked(group);
  if (group == kRoot) return StatusCode::kInvalidArgument;
  if (!g.online) return StatusCode::kFailedPrecondition;
  g.max = max.raw() < kCounterMax ? max.raw() : kCounterMax;
  return StatusCode::kOk;
}

// ---- Observers ----

GroupId Model::LimitingLevel(GroupId group, Pages n) const {
  std::lock_guard<std::mutex> lock(mu_);
  NodeLocked(group);
  return LimitingLevelLocked(group, n.raw());
}

Pages Model::usage(GroupId group) const {
  std::lock_guard<std::mutex> lock(mu_);
  return Pages(NodeLocked(group).usage);
}

Pages Model::max(GroupId group) const {
  std::lock_guard<std::mutex> lock(mu_);
  return Pages(NodeLocked(group).max);
}

bool Model::online(GroupId group) const {
  std::lock_guard<std::mutex> lock(mu_);
  return NodeLocked(group).online;
}

GroupId Model::parent(GroupId group) const {
  std::lock_guard<std::mutex> lock(mu_);
  return NodeLocked(group).parent;
}

int Model::depth(GroupId group) const {
  std::lock_guard<std::mutex> lock(mu_);
  return NodeLocked(group).depth;
}

std::string Model::name(GroupId group) const {
  std::lock_guard<std::mutex> lock(mu_);
  return NodeLocked(group).name;
}

std::string Model::path(GroupId group) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string path;
  for (GroupId g = group; g != kRoot; g = NodeLocked(g).parent) {
    path = path.empty() ? nodes_[g].name : nodes_[g].name + "/" + path;
  }
  return path;
}

std::vector<GroupId> Model::children(GroupId group) const {
  std::lock_guard<std::mutex> lock(mu_);
  return NodeLocked(group).children;
}

bool Model::IsDescendantOf(GroupId group, GroupId ancestor) const {
  std::lock_guard<std::mutex> lock(mu_);
  NodeLocked(ancestor);
  for (GroupId g = group; g != kNoGroup; g = NodeLocked(g).parent) {
    if (g == ancestor) return true;
  }
  return false;
}

int Model::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(nodes_.size());
}

uint64_t Model::underflows() const {
  std::lock_guard<std::mutex> lock(mu_);
  return underflows_;
}

}  // namespace umemcg::model

namespace umemcg::model {

// ---- Byte accounting ----

bool Model::InSubtreeLocked(GroupId group, GroupId ancestor) const {
  for (GroupId g = group; g != kNoGroup; g = nodes_[g].parent) {
    if (g == ancestor) return true;
  }
  return false;
}

StatusCode Model::ObjCharge(GroupId objcg, Bytes size) {
  std::lock_guard<std::mutex> lock(mu_);
  Node& o = NodeLocked(objcg);
  if (size.raw() > kPageCounterMax.in_bytes()) {
    return StatusCode::kInvalidArgument;
  }
  if (objcg == kRoot) return StatusCode::kOk;
  o.objcg_live += size.raw();
  return StatusCode::kOk;
}

bool Model::ObjUncharge(GroupId objcg, Bytes size) {
  std::lock_guard<std::mutex> lock(mu_);
  Node& o = NodeLocked(objcg);
  if (objcg == kRoot) return true;
  if (o.objcg_live < size.raw()) {
    o.objcg_live = 0;
    ++underflows_;
    return false;
  }
  o.objcg_live -= size.raw();
  return true;
}

GroupId Model::ObjTarget(GroupId objcg) const {
  std::lock_guard<std::mutex> lock(mu_);
  return NodeLocked(objcg).objcg_target;
}

Bytes Model::ObjLive(GroupId objcg) const {
  std::lock_guard<std::mutex> lock(mu_);
  return Bytes(NodeLocked(objcg).objcg_live);
}

Pages Model::ObjPages(GroupId group) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t pages = 0;
  for (const Node& n : nodes_) {
    if (InSubtreeLocked(n.objcg_target, group)) {
      pages += Bytes(n.objcg_live).ceil_pages().raw();
    }
  }
  return Pages(pages);
}

Bytes Model::SlabBytes(GroupId group) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t bytes = 0;
  for (const Node& n : nodes_) {
    if (InSubtreeLocked(n.objcg_target, group)) bytes += n.objcg_live;
  }
  return Bytes(bytes);
}

}  // namespace umemcg::model

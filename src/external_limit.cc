// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// ExternalLimits: attaching limits kept outside the controller (cluster
// leases) to groups, and the charge path's checks against them.

#include "external_limit.h"

#include <algorithm>
#include <thread>

#include "controller_impl.h"
#include "umemcg/controller.h"
#include "umemcg/group.h"

namespace umemcg::internal {

std::atomic<int64_t> ExternalLimits::active_{0};

Status ExternalLimits::Attach(Group& group, ExternalLimit* limit) {
  if (group.is_root()) {
    return Status(StatusCode::kInvalidArgument,
                  "the root group cannot have an external limit");
  }
  if (!group.online()) {
    return Status(StatusCode::kFailedPrecondition, "group was removed");
  }
  ExternalLimit* expected = nullptr;
  // Release: a charger that loads the pointer (acquire) sees the limit
  // fully constructed.
  if (!group.external_limit_.compare_exchange_strong(
          expected, limit, std::memory_order_release,
          std::memory_order_relaxed)) {
    return Status(StatusCode::kBusy,
                  "group '" + group.path() + "' already has an external limit");
  }
  active_.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

Status ExternalLimits::Detach(Group& group, ExternalLimit* limit) {
  ExternalLimit* expected = limit;
  // seq_cst pairs with Enter's increment and re-check: either the entering
  // thread sees the pointer gone, or this thread sees its count.
  if (limit == nullptr || !group.external_limit_.compare_exchange_strong(
                              expected, nullptr, std::memory_order_seq_cst)) {
    return Status(StatusCode::kNotFound, "limit is not attached to the group");
  }
  active_.fetch_sub(1, std::memory_order_relaxed);
  // Threads inside wait at most for one bounded Grow.
  for (int spins = 0; limit->in_flight_.load(std::memory_order_seq_cst) != 0;
       ++spins) {
    if (spins < 64) continue;
    std::this_thread::yield();
  }
  return Status::Ok();
}

bool ExternalLimits::Attached(const Group& group) {
  return group.external_limit_.load(std::memory_order_acquire) != nullptr;
}

ExternalLimit* ExternalLimits::Enter(const Group& g) {
  ExternalLimit* limit = g.external_limit_.load(std::memory_order_acquire);
  if (limit == nullptr) return nullptr;
  limit->in_flight_.fetch_add(1, std::memory_order_seq_cst);
  if (g.external_limit_.load(std::memory_order_seq_cst) != limit) {
    // Detached meanwhile: Detach may already have seen a zero count.
    limit->in_flight_.fetch_sub(1, std::memory_order_release);
    return nullptr;
  }
  return limit;
}

void ExternalLimits::Leave(ExternalLimit* limit) {
  // Release: everything this thread did inside happens before Detach's
  // return (its seq_cst load of zero).
  limit->in_flight_.fetch_sub(1, std::memory_order_release);
}

Group* ExternalLimits::Check(Group* g, bool may_block, bool reclaimed,
                             int* blocking_asks, ExternalVerdict* verdict) {
  for (Group* b = g; b != nullptr && !b->is_root(); b = b->parent()) {
    ExternalLimit* limit = Enter(*b);
    if (limit == nullptr) continue;
    // The usage includes the batch just charged (and racing charges: a
    // conservative reading that can only refuse more, never admit more).
    uint64_t usage = b->usage().raw();
    bool ok = limit->Admits(usage);
    ExternalVerdict v = ExternalVerdict::kGranted;
    if (!ok) {
      if (may_block && *blocking_asks <= 0) {
        // This charge asked enough: the last answer stands.
        v = *verdict == ExternalVerdict::kUnavailable
                ? ExternalVerdict::kUnavailable
                : ExternalVerdict::kRefused;
      } else {
        if (may_block) --*blocking_asks;
        v = limit->Grow(usage, may_block, reclaimed);
      }
      ok = v == ExternalVerdict::kGranted;
    }
    Leave(limit);
    if (!ok) {
      *verdict = v;
      return b;
    }
  }
  return nullptr;
}

uint64_t ExternalLimits::Margin(Group* g) {
  uint64_t margin = g->memory().margin().raw();
  if (!Active()) return margin;
  ExternalLimit* limit = Enter(*g);
  if (limit == nullptr) return margin;
  margin = std::min(margin, limit->Margin(g->usage().raw()));
  Leave(limit);
  return margin;
}

uint64_t ExternalLimits::ReclaimExcess(Group& group, uint64_t excess,
                                       bool may_oom) {
  if (excess == 0 || tls_charge.in_reclaim > 0 || !group.online()) return 0;
  const uint64_t before = group.usage().raw();
  const uint64_t goal = before > excess ? before - excess : 0;
  ControllerImpl::RaiseEvent(&group, MemoryEvent::kMax);
  ControllerImpl::ReclaimToLimit(&group, goal, may_oom);
  const uint64_t after = group.usage().raw();
  return before > after ? before - after : 0;
}

void ExternalLimits::NotifyForced(Group* g) {
  for (Group* b = g; b != nullptr && !b->is_root(); b = b->parent()) {
    ExternalLimit* limit = Enter(*b);
    if (limit == nullptr) continue;
    limit->OnForced();
    Leave(limit);
  }
}

const ExternalLimit::FileSpec* ExternalLimits::FindFile(Group& group,
                                                        std::string_view name) {
  ExternalLimit* limit = Enter(group);
  if (limit == nullptr) return nullptr;
  const ExternalLimit::FileSpec* found = nullptr;
  for (const ExternalLimit::FileSpec& f : limit->Files()) {
    if (name == f.name) found = &f;
  }
  Leave(limit);
  return found;
}

void ExternalLimits::AppendFileNames(const Group& group,
                                     std::vector<std::string>* names) {
  ExternalLimit* limit = Enter(group);
  if (limit == nullptr) return;
  for (const ExternalLimit::FileSpec& f : limit->Files()) {
    names->emplace_back(f.name);
  }
  Leave(limit);
}

StatusOr<std::string> ExternalLimits::ReadFile(Group& group,
                                               std::string_view name) {
  ExternalLimit* limit = Enter(group);
  if (limit == nullptr) {
    return Status(StatusCode::kNotFound,
                  "no such file: " + std::string(name) + " (group not bound)");
  }
  StatusOr<std::string> text = limit->ReadFile(name);
  Leave(limit);
  return text;
}

Status ExternalLimits::WriteFile(Group& group, std::string_view name,
                                 std::string_view text, bool may_block) {
  ExternalLimit* limit = Enter(group);
  if (limit == nullptr) {
    return Status(StatusCode::kNotFound,
                  "no such file: " + std::string(name) + " (group not bound)");
  }
  Status s = limit->WriteFile(name, text, may_block);
  Leave(limit);
  return s;
}

}  // namespace umemcg::internal

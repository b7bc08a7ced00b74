// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// OOM handling (kernel: mem_cgroup_oom, mem_cgroup_out_of_memory). The
// library cannot kill anything: it asks the application's OomHandler, which
// may release a victim group's memory (drop a cache, cancel a query, remove
// a tenant) and reports whether usage went down.

#include <mutex>

#include "controller_impl.h"
#include "external_limit.h"
#include "umemcg/controller.h"
#include "umemcg/group.h"

namespace umemcg {

Group* OomContext::KillGroupFor(Group& victim) const {
  if (over_limit == nullptr || !victim.IsDescendantOf(*over_limit)) {
    return nullptr;
  }
  Group* highest = nullptr;
  for (Group* g = &victim;; g = g->parent()) {
    if (g->oom_group()) highest = g;
    if (g == over_limit) break;
  }
  return highest;
}

namespace internal {

bool ControllerImpl::OutOfMemory(Group* over, uint64_t n) {
  Controller& ctrl = *over->controller_;
  // One OOM at a time per controller (kernel: oom_lock).
  std::lock_guard<std::mutex> lock(ctrl.oom_mu_);
  // Someone freed memory while we waited: no handler needed (the margin
  // includes an external limit's, e.g. a cluster lease).
  if (ExternalLimits::Margin(over) >= n) return true;

  std::shared_ptr<const OomHandler> handler;
  for (Group* g = over; g != nullptr && !handler; g = g->parent_) {
    handler = g->oom_handler_.load();
  }
  if (!handler) handler = ctrl.oom_handler_.load();
  if (!handler || !*handler) return false;

  OomContext ctx;
  ctx.over_limit = over;
  ctx.kill_group = over->oom_group() ? over : nullptr;
  ctx.nr_pages = Pages(n);
  OomOutcome outcome;
  {
    // Charges from the handler are forced, as for the kernel's OOM killer
    // (which runs with the victim's memory reserves).
    DepthScope reclaiming(tls_charge.in_reclaim);
    outcome = (*handler)(ctx);
  }
  if (outcome.killed != nullptr) {
    if (outcome.killed->IsDescendantOf(*over)) {
      RaiseEvent(outcome.killed, MemoryEvent::kOomKill);
      if (outcome.progress) {
        if (Group* kg = ctx.KillGroupFor(*outcome.killed)) {
          RaiseEvent(kg, MemoryEvent::kOomGroupKill);
        }
      }
    } else {
      ctrl.Report("oom_victim", outcome.killed, Pages(0));
    }
  }
  return outcome.progress;
}

bool ControllerImpl::Oom(Group* over, uint64_t n) {
  // No OOM handling for large charges (order > PAGE_ALLOC_COSTLY_ORDER):
  // the caller fails instead.
  if (n > kCostlyPages) return false;
  RaiseEvent(over, MemoryEvent::kOom);
  return OutOfMemory(over, n);
}

}  // namespace internal
}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// OOM handling (kernel: mem_cgroup_oom, mem_cgroup_out_of_memory). The
// library cannot kill anything: it asks the application's OomHandler, which
// may release a victim group's memory (drop a cache, cancel a query, remove
// a tenant) and reports whether usage went down.

#include <algorithm>
#include <mutex>
#include <vector>

#include "controller_impl.h"
#include "external_limit.h"
#include "port/fork.h"
#include "psi/psi.h"
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
  PsiStallScope stall;  // waiting for and in OOM handling: a memory stall
  OomOutcome outcome;
  // Victims outside the OOM domain, reported once oom_mu_ is released.
  std::vector<OomVictim> stray;
  {
    // One OOM at a time per controller (kernel: oom_lock).
    std::lock_guard<std::mutex> lock(ctrl.oom_mu_);
    // The handler runs under it: a fork from the handler keeps it.
    HeldAcrossCallback held(&ctrl.oom_mu_);
    // Someone freed memory while we waited: no handler needed (the margin
    // includes an external limit's, e.g. a cluster lease).
    if (ExternalLimits::Margin(over) >= n) return true;

    std::shared_ptr<const OomHandler> handler;
    for (Group* g = over; g != nullptr && !handler; g = g->parent_) {
      handler = internal::ForkSafeLoad(g->oom_handler_);
    }
    if (!handler) handler = internal::ForkSafeLoad(ctrl.oom_handler_);
    if (!handler || !*handler) return false;

    OomContext ctx;
    ctx.over_limit = over;
    ctx.kill_group = over->oom_group() ? over : nullptr;
    ctx.nr_pages = Pages(n);
    {
      // Charges from the handler are forced, as for the kernel's OOM
      // killer (which runs with the victim's memory reserves).
      DepthScope reclaiming(tls_charge.in_reclaim);
      outcome = (*handler)(ctx);
    }
    // Kernel: __oom_kill_process counts oom_kill once per killed task in
    // the task's memcg (hierarchically); oom_kill_process raises
    // oom_group_kill once on the oom.group subtree it then sweeps. The
    // victims hold their groups: the handler may have removed them and
    // dropped its own references.
    std::vector<Group*> kill_groups;
    auto count = [&](const OomVictim& v) {
      if (!v) return;
      if (!v.group()->IsDescendantOf(*over)) {
        stray.push_back(v);
        return;
      }
      if (v.tasks() == 0) return;
      RaiseEvent(v.group(), MemoryEvent::kOomKill, v.tasks());
      if (Group* kg = ctx.KillGroupFor(*v.group());
          kg != nullptr && std::find(kill_groups.begin(), kill_groups.end(),
                                     kg) == kill_groups.end()) {
        kill_groups.push_back(kg);
      }
    };
    count(outcome.killed);
    for (const OomVictim& v : outcome.victims) count(v);
    if (outcome.progress) {
      for (Group* kg : kill_groups) RaiseEvent(kg, MemoryEvent::kOomGroupKill);
    }
  }
  for (const OomVictim& v : stray)
    ctrl.Report("oom_victim", v.group(), Pages(0));
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

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Reclaim walk (kernel: try_to_free_mem_cgroup_pages -> shrink_node_memcgs
// with mem_cgroup_calculate_protection and apply_proportional_protection).
//
// The target's subtree is visited in pre-order (parents first, so effective
// protection can be computed top-down). For each group:
//   - below effective min (emin >= usage): skipped;
//   - below effective low: skipped in the first pass, noting it; if the
//     first pass reclaimed nothing, a second pass reclaims such groups too
//     and raises their `low` event;
//   - otherwise its reclaimers' reclaimable pages are scaled down by its
//     protection: scan = reclaimable - reclaimable * protection / (usage+1),
//     at least SWAP_CLUSTER_MAX (or all it has).
// The request `n` is split in proportion to each group's scan amount (the
// kernel's "pressure in proportion to usage above protection"); if that
// yields less than n, a second sweep asks each group for the remainder up
// to its scan amount (the kernel's lower scan priorities).
//
// The walk holds the tree lock shared and allocates nothing: the amounts
// are recomputed per sweep instead of stored.

#include <algorithm>
#include <mutex>
#include <shared_mutex>

#include "controller_impl.h"
#include "psi/psi.h"
#include "umemcg/controller.h"
#include "umemcg/group.h"

namespace umemcg::internal {
namespace {

struct Pass {
  Group* target;
  bool low_reclaim;  // second pass: reclaim below-low groups too
  bool recursive;    // memory_recursiveprot
  bool low_skipped = false;
};

// Pre-order visit of `g`'s subtree; stops when `visit` returns false.
// REQUIRES: tree lock held (shared).
template <typename Visit>
bool PreOrder(Group* g, Group* (*first_child)(Group*),
              Group* (*next_sibling)(Group*), Visit& visit) {
  if (!visit(g)) return false;
  for (Group* c = first_child(g); c != nullptr; c = next_sibling(c)) {
    if (!PreOrder(c, first_child, next_sibling, visit)) return false;
  }
  return true;
}

}  // namespace

// Access to private members for the walk.
class ReclaimWalk {
 public:
  static Group* FirstChild(Group* g) { return g->first_child_; }
  static Group* NextSibling(Group* g) { return g->next_sibling_; }

  // The pages `g`'s reclaimers should be asked for in this pass (0 =
  // skip). Computes g's effective protection as a side effect; with
  // `raise_events` raises `low` on below-low groups reclaimed in pass 2.
  static uint64_t ScanAmount(Pass& pass, Group* g, bool raise_events) {
    PageCounter::CalculateProtection(&pass.target->memory_, &g->memory_,
                                     pass.recursive);
    const bool unprotected = g->is_root() || g == pass.target;
    const uint64_t usage = g->memory_.usage().raw();
    const uint64_t emin = g->memory_.emin().raw();
    const uint64_t elow = g->memory_.elow().raw();
    if (!unprotected) {
      if (emin >= usage) return 0;  // below min (also: empty)
      if (elow >= usage) {
        if (!pass.low_reclaim) {
          pass.low_skipped = true;
          return 0;
        }
        if (raise_events) ControllerImpl::RaiseEvent(g, MemoryEvent::kLow);
      }
    }
    if (g->reclaimers_.empty()) return 0;
    uint64_t reclaimable = 0;
    for (Reclaimer* r : g->reclaimers_) reclaimable += r->Reclaimable().raw();
    if (reclaimable == 0 || unprotected) return reclaimable;
    uint64_t protection = emin;
    if (!pass.low_reclaim && elow > emin) {
      protection = elow;
      pass.low_skipped = true;
    }
    if (protection == 0) return reclaimable;
    const uint64_t size = std::max(usage, protection);
    uint64_t scan =
        reclaimable -
        static_cast<uint64_t>(static_cast<unsigned __int128>(reclaimable) *
                              protection / (size + 1));
    return std::min(reclaimable, std::max(scan, kSwapClusterMax));
  }

  // Asks g's reclaimers, in registration order, for `want` pages.
  static uint64_t AskReclaimers(Group* g, uint64_t want) {
    uint64_t got = 0;
    for (Reclaimer* r : g->reclaimers_) {
      if (got >= want) break;
      got += r->Reclaim(Pages(want - got)).raw();
    }
    return got;
  }

  static uint64_t RunPass(Pass& pass, uint64_t n) {
    // Sweep 1: total scan amount (and low events).
    uint64_t total = 0;
    auto sum = [&](Group* g) {
      total += ScanAmount(pass, g, /*raise_events=*/true);
      return true;
    };
    PreOrder(pass.target, &FirstChild, &NextSibling, sum);
    if (total == 0) return 0;

    // Sweep 2: proportional shares.
    uint64_t reclaimed = 0;
    auto proportional = [&](Group* g) {
      const uint64_t scan = ScanAmount(pass, g, false);
      if (scan == 0) return true;
      const auto share = static_cast<uint64_t>(
          (static_cast<unsigned __int128>(n) * scan + total - 1) / total);
      reclaimed += AskReclaimers(g, std::min(scan, share));
      return reclaimed < n;
    };
    if (!PreOrder(pass.target, &FirstChild, &NextSibling, proportional))
      return reclaimed;

    // Sweep 3: whatever is still missing, from anyone who has it.
    auto remainder = [&](Group* g) {
      const uint64_t scan = ScanAmount(pass, g, false);
      if (scan == 0) return true;
      reclaimed += AskReclaimers(g, std::min(scan, n - reclaimed));
      return reclaimed < n;
    };
    PreOrder(pass.target, &FirstChild, &NextSibling, remainder);
    return reclaimed;
  }
};

uint64_t ControllerImpl::ReclaimSubtree(Group* target, uint64_t n) {
  Controller& ctrl = *target->controller_;
  // The kernel reclaims at least SWAP_CLUSTER_MAX pages per call.
  n = std::max(n, kSwapClusterMax);
  PsiStallScope stall;  // a charger's reclaim is a memory stall
  DepthScope reclaiming(tls_charge.in_reclaim);
  std::shared_lock<std::shared_mutex> lock(ctrl.tree_mu_);
  // Reclaimers run under it: a fork from one keeps it in the child.
  HeldAcrossCallback held(&ctrl.tree_mu_);
  DepthScope walking(tls_charge.in_tree_walk);
  Pass pass{target, /*low_reclaim=*/false, ctrl.info().recursive_protection};
  uint64_t reclaimed = ReclaimWalk::RunPass(pass, n);
  // Untapped memory.low reserves: rather than fail, reclaim them too.
  if (reclaimed == 0 && pass.low_skipped) {
    pass.low_reclaim = true;
    pass.low_skipped = false;
    reclaimed = ReclaimWalk::RunPass(pass, n);
  }
  return reclaimed;
}

void ControllerImpl::ReclaimToLimit(Group* g, uint64_t goal, bool may_oom) {
  int reclaim_retries = kMaxReclaimRetries;
  int rounds = 0;
  bool drained = false;
  while (g->usage().raw() > goal && ++rounds <= kMaxProgressRounds) {
    if (!drained) {
      g->controller_->DrainAllStocks(*g);
      drained = true;
      continue;
    }
    if (reclaim_retries > 0) {
      if (ReclaimSubtree(g, g->usage().raw() - goal) == 0) --reclaim_retries;
      continue;
    }
    if (!may_oom) break;
    RaiseEvent(g, MemoryEvent::kOom);
    if (!OutOfMemory(g, 1)) break;
  }
}

}  // namespace umemcg::internal

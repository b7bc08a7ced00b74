// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The charge path (kernel: try_charge_memcg, E4/E5). The fast path is one
// CPU-id read, one try-lock and a scan of at most `slots` pointers in this
// CPU's stock: no shared cache line is written. Everything else is the slow
// path below, which charges a whole batch through the counters so that the
// next batch - n charges on this CPU hit the stock again.

#include <algorithm>

#include "charge_stock.h"
#include "controller_impl.h"
#include "external_limit.h"
#include "umemcg/controller.h"
#include "umemcg/group.h"

namespace umemcg {
namespace internal {

constinit thread_local ThreadChargeState tls_charge;

Group* ControllerImpl::GroupOfCounter(Group* start,
                                      const PageCounter* counter) {
  for (Group* g = start; g != nullptr; g = g->parent_) {
    if (&g->memory_ == counter) return g;
  }
  return nullptr;
}

void ControllerImpl::UnchargeCounters(Group* g, uint64_t n) {
  if (!g->memory_.Uncharge(Pages(n))) {
    g->controller_->Report("underflow", g, Pages(n));
  }
}

ChargeResult ControllerImpl::ChargeSlow(Group* g, uint64_t n,
                                        ChargeFlags flags) {
  Controller& ctrl = *g->controller_;
  ChargeStock& stock = *g->stock_;
  const bool may_reclaim = HasFlag(flags, ChargeFlags::kMayReclaim);
  uint64_t batch = std::max<uint64_t>(static_cast<uint64_t>(stock.batch()), n);
  int retries = kMaxReclaimRetries;
  int progress_rounds = 0;
  // The subtree whose stocks were last drained (kernel: `drained`, a
  // bool). A charge can fail at its own level, fit there once that
  // subtree's stocks are back, and then fail at an ancestor whose usage
  // holds other groups' stock: that ancestor is drained too, so stock never
  // causes a failure that draining would avoid. `over` is always g or an
  // ancestor, so `drained` only moves up: at most one drain per level.
  Group* drained = nullptr;
  bool raised_max = false;
  bool first = true;
  Group* over = nullptr;
  // Why an external limit last refused (in/out for Check), and why `over`
  // refused (kGranted: its counter did). A charge asks a remote limit at
  // most three times: for the batch, for n pages, and once more after
  // reclaim (ExternalLimits::Check; `raised_max` tells it reclaim ran).
  ExternalVerdict external = ExternalVerdict::kGranted;
  ExternalVerdict over_verdict = ExternalVerdict::kGranted;  // for `over`
  int blocking_asks = 3;

  for (;;) {  // kernel label: retry
    if (!first && stock.Consume(g, n)) return {};
    first = false;

    PageCounter* fail = nullptr;
    if (g->memory_.TryCharge(Pages(batch), &fail)) {
      // A group with an external limit (a cluster lease) on the way up must
      // admit the batch too; its refusal is handled as its max's would be.
      if (!ExternalLimits::Active()) break;  // done_restock
      over = ExternalLimits::Check(g, may_reclaim && tls_charge.in_reclaim == 0,
                                   raised_max, &blocking_asks, &external);
      if (over == nullptr) break;  // done_restock
      g->memory_.Uncharge(Pages(batch));
      over_verdict = external;
    } else {
      over = GroupOfCounter(g, fail);
      over_verdict = ExternalVerdict::kGranted;
    }

    // Retry without the surplus: a batch may not fit where n does.
    if (batch > n) {
      batch = n;
      continue;
    }
    // A reclaimer (or OOM handler) charging: force rather than recurse
    // into reclaim (PF_MEMALLOC).
    if (tls_charge.in_reclaim > 0) goto force;
    if (!may_reclaim) goto nomem;

    RaiseEvent(over, MemoryEvent::kMax);
    raised_max = true;
    {
      const uint64_t reclaimed = ReclaimSubtree(over, n);
      if (ExternalLimits::Margin(over) >= n) continue;
      // Pages cached in other CPUs' stocks count against the limit: give
      // back those of the refusing level's subtree (once per level) before
      // trying harder.
      if (drained == nullptr || !over->IsDescendantOf(*drained)) {
        ctrl.DrainAllStocks(*over);
        drained = over;
        continue;
      }
      if (HasFlag(flags, ChargeFlags::kNoRetry)) goto nomem;
      // Small charges retry as long as reclaim makes progress.
      if (reclaimed > 0 && n <= kCostlyPages &&
          ++progress_rounds <= kMaxProgressRounds) {
        continue;
      }
    }
    if (retries-- > 0) continue;
    if (HasFlag(flags, ChargeFlags::kRetryMayFail)) goto nomem;
    // An unreachable limit owner is not an out-of-memory condition.
    if (over_verdict == ExternalVerdict::kUnavailable) goto nomem;
    if (progress_rounds <= kMaxProgressRounds && Oom(over, n)) {
      ++progress_rounds;
      retries = kMaxReclaimRetries;
      continue;
    }
    goto nomem;
  }

  // done_restock:
  if (batch > n) stock.Refill(g, batch - n);
  HighCheck(g, batch);
  if (tls_charge.pages_over_high > static_cast<uint64_t>(stock.batch()) &&
      tls_charge.over_high_group == g && tls_charge.in_reclaim == 0 &&
      may_reclaim) {
    ChargeResult result;
    const std::chrono::milliseconds owed = HandleOverHigh(g, flags);
    if (HasFlag(flags, ChargeFlags::kNoThrottle)) {
      result.throttle = std::chrono::duration<int32_t, std::milli>(
          static_cast<int32_t>(owed.count()));
    }
    return result;
  }
  return {};

nomem:
  if (!HasFlag(flags, ChargeFlags::kNoFail) &&
      !HasFlag(flags, ChargeFlags::kHigh)) {
    ChargeResult result;
    result.code = over_verdict == ExternalVerdict::kUnavailable
                      ? StatusCode::kAgain
                      : StatusCode::kResourceExhausted;
    result.limited_by = over;
    return result;
  }
force:
  if (!raised_max) RaiseEvent(over, MemoryEvent::kMax);
  g->memory_.Charge(Pages(n));
  if (ExternalLimits::Active()) ExternalLimits::NotifyForced(g);
  {
    ChargeResult result;
    result.forced = true;
    result.limited_by = over;
    return result;
  }
}

}  // namespace internal

using internal::ControllerImpl;

ChargeResult Group::TryCharge(Pages n, ChargeFlags flags) {
  const uint64_t nr = n.raw();
  if (nr > kPageCounterMax.raw()) {
    ChargeResult r;
    r.code = StatusCode::kInvalidArgument;
    return r;
  }
  // The kernel never charges the root memcg: nothing to account.
  if (nr == 0 || parent_ == nullptr) return {};
  // Relaxed: a charge racing with RemoveGroup may still succeed; it is then
  // the caller's to uncharge, and Refill keeps no stock for offline groups.
  if (!online_.load(std::memory_order_relaxed)) {
    ChargeResult r;
    r.code = StatusCode::kFailedPrecondition;
    return r;
  }
  if (stock_->Consume(this, nr)) return {};
  return ControllerImpl::ChargeSlow(this, nr, flags);
}

void Group::Uncharge(Pages n) {
  if (n.raw() == 0 || parent_ == nullptr) return;
  stock_->Refill(this, n.raw());
}

void Group::UnchargeDirect(Pages n) {
  if (n.raw() == 0 || parent_ == nullptr) return;
  ControllerImpl::UnchargeCounters(this, n.raw());
}

namespace {

bool IsPageItem(const Group& g, StatItem item) {
  return g.controller().StatItemUnit(item) == StatUnit::kPages &&
         g.controller().StatItemName(item) != nullptr;
}

// Statistics of a removed group were folded into its parent at removal and
// it refuses updates: an uncharge's -n goes to the nearest online ancestor,
// which keeps every hierarchical value right.
void UnaccountStat(Group* g, StatItem item, uint64_t n) {
  if (n == 0 || g->is_root() || !IsPageItem(*g, item)) return;
  while (!g->online() && !g->parent()->is_root()) g = g->parent();
  if (g->online()) g->ModState(item, -static_cast<int64_t>(n));
}

}  // namespace

ChargeResult Group::TryCharge(Pages n, ChargeFlags flags, StatItem item) {
  if (!IsPageItem(*this, item)) {
    ChargeResult r;
    r.code = StatusCode::kInvalidArgument;
    return r;
  }
  ChargeResult r = TryCharge(n, flags);
  // The root's charges are not accounted, and neither are its stats.
  if (r.ok() && n.raw() != 0 && !is_root()) {
    ModState(item, static_cast<int64_t>(n.raw()));
  }
  return r;
}

void Group::Uncharge(Pages n, StatItem item) {
  Uncharge(n);
  UnaccountStat(this, item, n.raw());
}

void Group::UnchargeDirect(Pages n, StatItem item) {
  UnchargeDirect(n);
  UnaccountStat(this, item, n.raw());
}

}  // namespace umemcg

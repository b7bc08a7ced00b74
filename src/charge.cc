// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The charge path (kernel: try_charge_memcg, E4/E5). The fast path is the
// stock's hit (charge_stock.h): one restartable sequence that reads the
// CPU id, scans at most `slots` pointers of this CPU's stock and stores the
// slot's new count, with no stack frame (or, without rseq, the same under
// the shard's try-lock); no shared cache line is written. Everything else
// is the slow path below, which charges a whole batch through the counters
// so that the next batch - n charges on this CPU hit the stock again.
// Charges that move a page statistic with them are in charge_stat.cc.

#include <algorithm>
#include <cstdint>

#include "charge_stock.h"
#include "controller_impl.h"
#include "external_limit.h"
#include "profile/sampler.h"
#include "psi/psi.h"
#include "umemcg/controller.h"
#include "umemcg/group.h"
#include "umemcg/obj_cgroup.h"

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
  g->memory_.Settle(-static_cast<int64_t>(n));
  if (!g->memory_.Uncharge(Pages(n))) {
    g->controller_->Report("underflow", g, Pages(n));
  }
}

ChargeResult ControllerImpl::ChargeSlow(Group* g, uint64_t n,
                                        ChargeFlags flags) {
  Controller& ctrl = *g->controller_;
  ChargeStock& stock = *g->stock_;
  // Pressure: this thread charges g (stalls below count there), and is
  // one of g's chargers (src/psi/psi.h).
  PsiChargeScope psi_charging(g);
  PsiNoteCharger(g);
  const bool may_reclaim = HasFlag(flags, ChargeFlags::kMayReclaim);
  uint64_t batch = std::max<uint64_t>(static_cast<uint64_t>(g->batch()), n);
  int retries = kMaxReclaimRetries;
  int progress_rounds = 0;
  // The subtree whose stocks were last drained (kernel: `drained`, a
  // bool). A charge can fail at its own level, fit there once that
  // subtree's stocks are back, and then fail at an ancestor whose usage
  // holds other groups' stock: that ancestor is drained too, so stock never
  // causes a failure that draining would avoid (for charges that may
  // reclaim, and under kAdaptive for all; see below). `over` is always g or an
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
  auto covered = [&] {
    return drained != nullptr && over->IsDescendantOf(*drained);
  };
  // Without a flusher thread, dying groups are freed from here too
  // (controller_reap.cc); a charge that may reclaim may run anything.
  if (may_reclaim) ReapIfDue(ctrl);

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
      // Given back as a TryCharge that failed would: never settled.
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
    if (!may_reclaim) {
      // The adaptive policy's promise (adaptive_batch.h): no refusal that
      // the base batch would not make. Its stocks may hold more pages than
      // the base batch's, so before refusing, the refusing level's
      // subtree gives its stocked pages back (once per level, as below);
      // a refusal then sees no stock at all in that subtree, except a
      // shard whose lock stayed busy (TryDrainAll: this charge must not
      // block; it may run in a signal handler that interrupted that
      // shard's holder). Forcing charges (kNoFail, kHigh) do not wait for
      // a drain.
      if (stock.adaptive() && !HasFlag(flags, ChargeFlags::kNoFail) &&
          !HasFlag(flags, ChargeFlags::kHigh) &&
          (drained == nullptr || !over->IsDescendantOf(*drained))) {
        (void)stock.TryDrainAll(over);
        drained = over;
        continue;
      }
      goto nomem;
    }

    // An unreachable limit owner (a coordination error) is not a limit
    // hit: no max event, but local reclaim may still make room within it.
    if (over_verdict != ExternalVerdict::kUnavailable) {
      RaiseEvent(over, MemoryEvent::kMax);
    }
    raised_max = true;
    bool give_up = false;
    {
      const uint64_t reclaimed = ReclaimSubtree(over, n);
      if (ExternalLimits::Margin(over) >= n) continue;
      // Pages cached in other CPUs' stocks count against the limit: give
      // back those of the refusing level's subtree (once per level) before
      // trying harder. Kernel: drain_all_stock(), which does nothing while
      // another drain runs (a try-lock); this charger then goes on without
      // draining, and drains (or waits for a drain) only before it would
      // fail or invoke OOM handling, below.
      if (!covered() && TryDrainAllStocks(ctrl, *over)) {
        drained = over;
        continue;
      }
      if (HasFlag(flags, ChargeFlags::kNoRetry)) {
        give_up = true;
      } else if (reclaimed > 0 && n <= kCostlyPages &&
                 ++progress_rounds <= kMaxProgressRounds) {
        // Small charges retry as long as reclaim makes progress.
        continue;
      }
    }
    if (!give_up && retries-- > 0) continue;
    // Past here the charge fails or OOM handling runs: not before a drain
    // of the refusing level that started after this charger wanted one.
    if (!covered()) {
      ctrl.DrainAllStocks(*over);
      drained = over;
      continue;
    }
    if (give_up || HasFlag(flags, ChargeFlags::kRetryMayFail)) goto nomem;
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
  g->memory_.Settle(static_cast<int64_t>(batch));
  if (batch > n) stock.Refill(g, batch - n);
  if (stock.adaptive()) AdaptBatch(g);
  if (Group* over_high = HighCheck(g, batch);
      over_high != nullptr && !may_reclaim) {
    // This charge cannot reclaim: another thread will (kernel: high_work).
    ScheduleHighWork(over_high);
  }
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
  if (!raised_max && over_verdict != ExternalVerdict::kUnavailable) {
    RaiseEvent(over, MemoryEvent::kMax);
  }
  g->memory_.Charge(Pages(n));
  g->memory_.Settle(static_cast<int64_t>(n));
  if (ExternalLimits::Active()) ExternalLimits::NotifyForced(g);
  {
    ChargeResult result;
    result.forced = true;
    result.limited_by = over;
    return result;
  }
}

void ControllerImpl::AdaptBatch(Group* g) {
  ChargeStock& stock = *g->stock_;
  std::atomic<bool>& busy = g->batch_policy_busy_;
  // A try-lock: a decision already being made for this group covers ours.
  if (busy.load(std::memory_order_relaxed) ||
      busy.exchange(true, std::memory_order_acquire)) {
    return;
  }
  // A trim a shrink could not finish (a busy shard, TrimGroup): again now.
  // Relaxed: a flag (see trim_pending_).
  if (g->trim_pending_.load(std::memory_order_relaxed)) {
    g->trim_pending_.store(false, std::memory_order_relaxed);
    if (!stock.TrimGroup(g)) {
      g->trim_pending_.store(true, std::memory_order_relaxed);
    }
  }
  // Offline groups are not cached by any stock: nothing to decide.
  if (g->online_.load(std::memory_order_relaxed)) {
    const int64_t now = g->controller_->clock_->Now().count();
    const int64_t last = g->batch_event_ns_.load(std::memory_order_relaxed);
    g->batch_event_ns_.store(now, std::memory_order_relaxed);
    int64_t interval = g->batch_interval_ns_.load(std::memory_order_relaxed);
    // Smoothed over about four events, so one quick pair of events from
    // two CPUs does not look like a high rate.
    interval += (std::max<int64_t>(0, now - last) - interval) / 4;
    g->batch_interval_ns_.store(interval, std::memory_order_relaxed);
    // The room under the tightest limit of the group and its ancestors.
    uint64_t room = UINT64_MAX;
    for (const Group* l = g; l->parent_ != nullptr; l = l->parent_) {
      const uint64_t usage = l->memory_.usage().raw();
      const uint64_t limit =
          std::min(l->memory_.max().raw(), l->memory_.high().raw());
      room = std::min(room, limit > usage ? limit - usage : 0);
    }
    const int old_batch = g->batch();
    const int next = stock.policy().Next(old_batch, room, interval);
    if (next != old_batch) {
      g->batch_.store(next, std::memory_order_relaxed);
      // Slots may hold up to the old batch: return them, so the slack is
      // within nr_cpus x the new batch (ChargeStock::TrimGroup orders
      // every later hit after the store above). A shard it skipped (busy)
      // is trimmed at the group's next batch event.
      if (next < old_batch && !stock.TrimGroup(g)) {
        g->trim_pending_.store(true, std::memory_order_relaxed);
      }
    }
  }
  busy.store(false, std::memory_order_release);
}

}  // namespace internal

using internal::ControllerImpl;

// The hit first, with no check before it: a group found in a stock slot
// with n pages is online (RemoveGroup drains its slots after taking it
// offline; a hit racing with that is a charge racing with removal) and
// not the root (never cached), and n is then a valid size. Everything
// else is TryChargeMiss, a tail call, so the hit needs no stack frame.
//
// TryCharge and Uncharge start on a 64-byte boundary, so each one's hit
// (about 100 bytes) always sits in the same two fetch lines. Left to the
// linker's 16-byte default, where they land moves with every unrelated
// change to the library, and with it the stock-hit pair's time: the same
// instructions measured up to 13% slower in BM_StockHitPair (mean over a
// sweep of stack positions) after unrelated changes; aligned, they
// measure as before (docs/benchmarks.md, "Code placement").
[[gnu::aligned(64)]] ChargeResult Group::TryCharge(Pages n, ChargeFlags flags) {
  // The heap profiler's page gate (page samples, off by default): one
  // relaxed load of a read-mostly flag and a branch.
  if (!profile::PageGateClosed()) [[unlikely]] {
    return TryChargeSampled(n.raw(), flags, __builtin_return_address(0));
  }
  if (stock_->ConsumeHit(this, n.raw())) return {};
  return TryChargeMiss(n.raw(), flags);
}

ChargeResult Group::TryChargeUnsampled(Pages n, ChargeFlags flags) {
  if (stock_->ConsumeHit(this, n.raw())) return {};
  return TryChargeMiss(n.raw(), flags);
}

ChargeResult Group::TryChargeSampled(uint64_t n, ChargeFlags flags,
                                     const void* entry_return) {
  const bool expired = profile::PageGateSlow(Pages(n).in_bytes());
  const ChargeResult r = TryChargeUnsampled(Pages(n), flags);
  if (expired && r.ok() && n != 0 && parent_ != nullptr) {
    if (ObjCgroupRef objcg = TryGetObjCgroup()) {
      profile::SamplePages(objcg.get(), n, entry_return);
    }
  }
  return r;
}

ChargeResult Group::TryChargeMiss(uint64_t nr, ChargeFlags flags) {
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
  if (stock_->ConsumeMiss(this, nr)) return {};
  return ControllerImpl::ChargeSlow(this, nr, flags);
}

// As TryCharge: the rseq hit first (a cached group is never the root), then
// the rest out of line. Aligned as TryCharge, for the same reason.
[[gnu::aligned(64)]] void Group::Uncharge(Pages n) {
  // The countdown runs over uncharged bytes too: a point in them releases
  // page samples of the group (see profile::UnsamplePages).
  if (!profile::PageGateClosed()) [[unlikely]] {
    return UnchargeSampled(n.raw(), /*direct=*/false);
  }
  if (stock_->RefillHit(this, n.raw())) return;
  UnchargeMiss(n.raw());
}

void Group::UnchargeUnsampled(Pages n) {
  if (stock_->RefillHit(this, n.raw())) return;
  UnchargeMiss(n.raw());
}

void Group::UnchargeSampled(uint64_t n, bool direct) {
  const bool expired = profile::PageGateSlow(Pages(n).in_bytes());
  if (direct) {
    UnchargeDirectUnsampled(Pages(n));
  } else {
    UnchargeUnsampled(Pages(n));
  }
  if (expired && n != 0 && parent_ != nullptr) {
    if (ObjCgroupRef objcg = TryGetObjCgroup()) {
      profile::UnsamplePages(objcg.get(), n);
    }
  }
}

void Group::UnchargeMiss(uint64_t n) {
  if (n == 0 || parent_ == nullptr) return;
  if (stock_->RefillMiss(this, n) && stock_->adaptive()) {
    ControllerImpl::AdaptBatch(this);
  }
}

void Group::UnchargeDirect(Pages n) {
  if (!profile::PageGateClosed()) [[unlikely]] {
    return UnchargeSampled(n.raw(), /*direct=*/true);
  }
  UnchargeDirectUnsampled(n);
}

void Group::UnchargeDirectUnsampled(Pages n) {
  if (n.raw() == 0 || parent_ == nullptr) return;
  ControllerImpl::UnchargeCounters(this, n.raw());
}

}  // namespace umemcg

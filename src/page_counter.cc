// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// PageCounter re-expresses mm/page_counter.c. The charge walk is
// "add, then check": one fetch_add per level and no compare-and-swap loop.
// A large failing charge can push usage over max for an instant and make a
// concurrent small charge fail spuriously; that error is bounded by the
// in-flight charge sizes and accepted, as in the kernel.
//
// Memory ordering: the fetch_add on usage is seq_cst, a full barrier between
// "increment usage" and "read max". It pairs with the exchange in SetMax:
// either the charger sees the new max, or the setter's re-read of usage sees
// the charge and it retries.

#include "umemcg/page_counter.h"

#include <algorithm>

namespace umemcg {
namespace {

constexpr int64_t kMaxRaw = static_cast<int64_t>(kPageCounterMax.raw());

// Kernel: effective_protection(). 128-bit intermediates: the products of
// two page counts can exceed 64 bits near kPageCounterMax.
int64_t EffectiveProtection(int64_t usage, int64_t parent_usage,
                            int64_t setting, int64_t parent_effective,
                            int64_t siblings_protected, bool recursive) {
  const int64_t protected_pages = std::min(usage, setting);
  // Overcommitted at this level: split the parent's effective protection in
  // proportion to each child's protected (used and declared) amount.
  if (siblings_protected > parent_effective) {
    return static_cast<int64_t>(static_cast<__int128>(protected_pages) *
                                parent_effective / siblings_protected);
  }
  int64_t ep = protected_pages;
  if (!recursive) return ep;
  // memory_recursiveprot: hand the unclaimed part of the parent's
  // protection to children in proportion to their unprotected usage.
  if (parent_effective > siblings_protected &&
      parent_usage > siblings_protected && usage > protected_pages) {
    __int128 unclaimed = parent_effective - siblings_protected;
    unclaimed *= usage - protected_pages;
    unclaimed /= parent_usage - siblings_protected;
    ep += static_cast<int64_t>(unclaimed);
  }
  return ep;
}

}  // namespace

PageCounter::PageCounter(PageCounter* parent, bool protection_support)
    : high_(kMaxRaw),
      max_(kMaxRaw),
      parent_(parent),
      protection_support_(protection_support) {}

Pages PageCounter::usage() const {
  // A reader racing with a rollback may see a negative transient only after
  // an underflow clamp race; report 0 then, as the kernel's readers do.
  const int64_t u = usage_.load(kRelaxed);
  return Pages(u > 0 ? static_cast<uint64_t>(u) : 0);
}

Pages PageCounter::margin() const {
  const int64_t u = usage_.load(kRelaxed);
  const int64_t m = max_.load(kRelaxed);
  return Pages(u < m ? static_cast<uint64_t>(m - u) : 0);
}

// Kernel: propagate_protected_usage(). Reads first and exchanges only when
// the protected amount changed: in the common case (min = low = 0) a charge
// writes nothing here, which is what keeps this line clean (the kernel's
// "remove unneeded atomic ops for low/min").
void PageCounter::PropagateProtectedUsage(int64_t usage) {
  if (!protection_support_ || parent_ == nullptr) return;
  const int64_t u = std::max<int64_t>(usage, 0);

  const int64_t min_protected = std::min(u, min_.load(kRelaxed));
  if (min_usage_.load(kRelaxed) != min_protected) {
    // exchange (not store) so two racing propagations each move the
    // parent's sum by exactly the delta they replaced.
    const int64_t old = min_usage_.exchange(min_protected);
    if (const int64_t delta = min_protected - old; delta != 0) {
      parent_->children_min_usage_.fetch_add(delta);
    }
  }
  const int64_t low_protected = std::min(u, low_.load(kRelaxed));
  if (low_usage_.load(kRelaxed) != low_protected) {
    const int64_t old = low_usage_.exchange(low_protected);
    if (const int64_t delta = low_protected - old; delta != 0) {
      parent_->children_low_usage_.fetch_add(delta);
    }
  }
}

// Racy by design, as in the kernel: two chargers can both read an old peak
// and the smaller may win the store. The peak is then slightly low, which is
// acceptable for a statistic; relaxed load/store keep it a defined race.
void PageCounter::UpdateWatermarks(int64_t usage) {
  if (usage > local_watermark_.load(kRelaxed)) {
    local_watermark_.store(usage, kRelaxed);
    if (usage > watermark_.load(kRelaxed)) watermark_.store(usage, kRelaxed);
  }
}

void PageCounter::Charge(Pages n) {
  const auto nr = static_cast<int64_t>(n.raw());
  for (PageCounter* c = this; c != nullptr; c = c->parent_) {
    const int64_t now = c->usage_.fetch_add(nr) + nr;
    c->PropagateProtectedUsage(now);
    c->UpdateWatermarks(now);
  }
}

bool PageCounter::TryCharge(Pages n, PageCounter** limited_by) {
  UMEMCG_DCHECK(n <= kPageCounterMax);
  const auto nr = static_cast<int64_t>(n.raw());
  PageCounter* c = this;
  for (; c != nullptr; c = c->parent_) {
    // seq_cst RMW: full barrier before the max read below (pairs with the
    // exchange in SetMax/ExchangeMax).
    const int64_t now = c->usage_.fetch_add(nr) + nr;
    if (now > c->max_.load(kRelaxed)) {
      c->usage_.fetch_sub(nr);
      // Racy increment (load + store, not RMW): failcnt is a statistic and
      // a lost increment under contention is acceptable; it keeps the
      // failure path from adding a locked RMW.
      c->failcnt_.store(c->failcnt_.load(kRelaxed) + 1, kRelaxed);
      break;
    }
    c->PropagateProtectedUsage(now);
    c->UpdateWatermarks(now);
  }
  if (c == nullptr) return true;
  if (limited_by != nullptr) *limited_by = c;
  for (PageCounter* done = this; done != c; done = done->parent_) {
    done->CancelLevel(nr);
  }
  return false;
}

bool PageCounter::CancelLevel(int64_t n) {
  int64_t now = usage_.fetch_sub(n) - n;
  bool ok = true;
  if (now < 0) {
    // Contract violation (more uncharged than charged): clamp to zero like
    // the kernel. The clamp races with concurrent charges exactly as the
    // kernel's atomic_long_set does; it only runs on an already broken
    // accounting and the caller reports it.
    usage_.store(0);
    underflows_.fetch_add(1, kRelaxed);
    now = 0;
    ok = false;
  }
  PropagateProtectedUsage(now);
  return ok;
}

namespace {

// An uncharge of more than any counter can hold (a caller's bug, e.g. a
// negative count cast to Pages) is cut to kPageCounterMax: it then
// underflows and is reported like any other excess, where the raw value,
// cast to int64_t, could be negative and raise the usage instead.
int64_t UnchargeDelta(Pages n) {
  return static_cast<int64_t>(std::min(n, kPageCounterMax).raw());
}

}  // namespace

bool PageCounter::Cancel(Pages n) { return CancelLevel(UnchargeDelta(n)); }

bool PageCounter::Uncharge(Pages n) {
  const int64_t nr = UnchargeDelta(n);
  bool ok = true;
  for (PageCounter* c = this; c != nullptr; c = c->parent_) {
    ok &= c->CancelLevel(nr);
  }
  return ok;
}

Status PageCounter::SetMax(Pages max) {
  const auto new_max =
      static_cast<int64_t>(std::min(max, kPageCounterMax).raw());
  for (;;) {
    const int64_t usage = usage_.load();
    if (usage > new_max) {
      return Status(StatusCode::kBusy, "usage exceeds the new max");
    }
    // seq_cst exchange pairs with the chargers' fetch_add: a charger that
    // missed the new max is visible to the re-read below.
    const int64_t old = max_.exchange(new_max);
    if (usage_.load() <= usage || new_max >= old) return Status::Ok();
    // Usage grew while lowering the limit: restore and retry.
    max_.store(old);
  }
}

Pages PageCounter::ExchangeMax(Pages max) {
  const auto new_max =
      static_cast<int64_t>(std::min(max, kPageCounterMax).raw());
  return Pages(static_cast<uint64_t>(max_.exchange(new_max)));
}

void PageCounter::SetHigh(Pages high) {
  high_.store(static_cast<int64_t>(std::min(high, kPageCounterMax).raw()),
              kRelaxed);
}

void PageCounter::SetMin(Pages min) {
  min_.store(static_cast<int64_t>(std::min(min, kPageCounterMax).raw()),
             kRelaxed);
  for (PageCounter* c = this; c != nullptr; c = c->parent_) {
    c->PropagateProtectedUsage(c->usage_.load());
  }
}

void PageCounter::SetLow(Pages low) {
  low_.store(static_cast<int64_t>(std::min(low, kPageCounterMax).raw()),
             kRelaxed);
  for (PageCounter* c = this; c != nullptr; c = c->parent_) {
    c->PropagateProtectedUsage(c->usage_.load());
  }
}

void PageCounter::ResetWatermark() {
  const int64_t u = usage_.load(kRelaxed);
  local_watermark_.store(u, kRelaxed);
  watermark_.store(u, kRelaxed);
}

void PageCounter::ResetLocalWatermark() {
  local_watermark_.store(usage_.load(kRelaxed), kRelaxed);
}

void PageCounter::CalculateProtection(const PageCounter* root,
                                      PageCounter* counter, bool recursive) {
  // The reclaim target's own effective values are never consulted (callers
  // special-case it), so they may stay stale.
  if (counter == root) return;
  const int64_t usage = counter->usage_.load(kRelaxed);
  // Zero usage: nothing to protect or reclaim; values stay stale.
  if (usage <= 0) return;
  const PageCounter* parent = counter->parent_;
  if (parent == root) {
    counter->emin_.store(counter->min_.load(kRelaxed), kRelaxed);
    counter->elow_.store(counter->low_.load(kRelaxed), kRelaxed);
    return;
  }
  const int64_t parent_usage = parent->usage_.load(kRelaxed);
  counter->emin_.store(
      EffectiveProtection(usage, parent_usage, counter->min_.load(kRelaxed),
                          parent->emin_.load(kRelaxed),
                          parent->children_min_usage_.load(kRelaxed),
                          recursive),
      kRelaxed);
  counter->elow_.store(
      EffectiveProtection(usage, parent_usage, counter->low_.load(kRelaxed),
                          parent->elow_.load(kRelaxed),
                          parent->children_low_usage_.load(kRelaxed),
                          recursive),
      kRelaxed);
}

}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// memory.high: charges are never refused for it. A successful batch charge
// that leaves the group or an ancestor over high adds the batch to the
// thread's pending overage; past one batch of overage the charging thread
// reclaims from the over-high groups and then sleeps for a penalty that
// grows with the square of the relative overage (kernel:
// mem_cgroup_handle_over_high, calculate_high_delay). The kernel runs the
// handler on return to user space; here it runs synchronously in the charge
// (as the kernel does past one batch) or when the application calls
// Group::HandleOverHigh at a safe point.

#include <algorithm>

#include "controller_impl.h"
#include "umemcg/controller.h"
#include "umemcg/group.h"

namespace umemcg {
namespace internal {

uint64_t CalculateOverage(uint64_t usage, uint64_t high) {
  if (usage <= high) return 0;
  // Avoid division by zero and scale high down by one page so that
  // high = 0 still gives a finite (huge) overage, as the kernel does.
  high = std::max<uint64_t>(high, 1);
  const unsigned __int128 overage =
      (static_cast<unsigned __int128>(usage - high) << kDelayPrecisionShift) /
      high;
  return overage > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(overage);
}

uint64_t HighDelayMs(uint64_t overage, uint64_t nr_pages, uint64_t batch) {
  if (overage == 0) return 0;
  // The kernel computes overage^2 * HZ in 64 bits and wraps for overages
  // beyond ~130x high; 128-bit arithmetic with saturation keeps the result
  // monotonic (and the 2 s clamp meaningful).
  unsigned __int128 penalty = static_cast<unsigned __int128>(overage) * overage;
  if (penalty > (~static_cast<unsigned __int128>(0)) / kHz) return UINT64_MAX;
  penalty *= kHz;
  penalty >>= kDelayPrecisionShift;
  penalty >>= kDelayScalingShift;
  // Scale by how much this thread charged, relative to one batch.
  if (penalty > UINT64_MAX) return UINT64_MAX;
  const unsigned __int128 scaled =
      penalty * nr_pages / std::max<uint64_t>(batch, 1);
  return scaled > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(scaled);
}

void ControllerImpl::HighCheck(Group* g, uint64_t batch) {
  for (Group* m = g; m != nullptr; m = m->parent_) {
    if (m->memory_.usage() > m->memory_.high()) {
      if (tls_charge.over_high_group != g) {
        // A different group than the pending one: the old overage is
        // dropped (the kernel keys it by task, whose memcg rarely changes).
        tls_charge.over_high_group = g;
        tls_charge.pages_over_high = 0;
      }
      tls_charge.pages_over_high += batch;
      return;
    }
  }
}

uint64_t ControllerImpl::MaxOverage(const Group* g) {
  uint64_t max_overage = 0;
  for (const Group* m = g; m != nullptr && m->parent_ != nullptr;
       m = m->parent_) {
    max_overage = std::max(
        max_overage,
        CalculateOverage(m->memory_.usage().raw(), m->memory_.high().raw()));
  }
  return max_overage;
}

namespace {

// Kernel: reclaim_high(). Every level over high, root excluded.
uint64_t ReclaimHigh(Group* g, uint64_t n) {
  uint64_t reclaimed = 0;
  for (Group* m = g; m != nullptr && !m->is_root(); m = m->parent()) {
    if (m->usage() <= m->memory().high()) continue;
    ControllerImpl::RaiseEvent(m, MemoryEvent::kHigh);
    reclaimed += ControllerImpl::ReclaimSubtree(m, n);
  }
  return reclaimed;
}

}  // namespace

std::chrono::milliseconds ControllerImpl::HandleOverHigh(Group* g,
                                                         ChargeFlags flags) {
  const uint64_t nr_pages = tls_charge.pages_over_high;
  tls_charge.pages_over_high = 0;
  tls_charge.over_high_group = nullptr;
  if (nr_pages == 0) return std::chrono::milliseconds(0);

  Controller& ctrl = *g->controller_;
  const auto batch = static_cast<uint64_t>(ctrl.info().batch);
  int retries = kMaxReclaimRetries;
  int progress_rounds = 0;
  bool in_retry = false;
  for (;;) {
    const uint64_t reclaimed =
        ReclaimHigh(g, in_retry ? kSwapClusterMax : nr_pages);
    // memory only: there is no swap counter in user space.
    const uint64_t penalty =
        std::min(HighDelayMs(MaxOverage(g), nr_pages, batch), kMaxHighDelayMs);
    // Under 10 ms owed: not worth a sleep; forgiven.
    if (penalty <= kMinHighDelayMs) return std::chrono::milliseconds(0);
    // While reclaim makes progress, keep reclaiming instead of sleeping.
    if ((reclaimed > 0 && ++progress_rounds <= kMaxProgressRounds) ||
        retries-- > 0) {
      in_retry = true;
      continue;
    }
    const std::chrono::milliseconds owed(penalty);
    if (!HasFlag(flags, ChargeFlags::kNoThrottle)) ctrl.clock_->SleepFor(owed);
    return owed;
  }
}

}  // namespace internal

std::chrono::milliseconds Group::HandleOverHigh(ChargeFlags flags) {
  if (internal::tls_charge.over_high_group != this) {
    return std::chrono::milliseconds(0);
  }
  return internal::ControllerImpl::HandleOverHigh(this, flags);
}

}  // namespace umemcg

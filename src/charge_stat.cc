// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Charges that carry a page statistic (Group::TryCharge / Uncharge /
// UnchargeDirect with a StatItem: the kernel's socket and kmem page
// statistics moved with their charge). One layer above both the charge
// path (charge.cc, charge_stock.h) and the statistics (rstat.h): the stock
// hit, then the statistic's per-CPU update inline, with no call between
// them on the hit (docs/benchmarks.md, sendfile).

#include <cstdint>

#include "charge_stock.h"
#include "controller_impl.h"
#include "rstat.h"
#include "umemcg/controller.h"
#include "umemcg/group.h"

namespace umemcg {
namespace internal {

// A page charge's statistic goes to the charged group or, once that group
// was removed, to its nearest online ancestor (the root included): where
// the removal moved the group's statistics. The charge's +n and the
// uncharge's -n follow the same rule, so a charge completing after its
// group went offline, or an uncharge after removal at any level, leaves
// every hierarchical value balanced (the object path does the same,
// ObjStock::ApplyStat). An update that passes the online check just
// before the removal lands in the group's per-CPU counters and is folded
// into the parent by the next flush covering it. Group::ModState's body,
// inline: `i` is a page item (IsPageItem), so below every group's
// nr_items.
void ControllerImpl::AccountStat(Group* g, size_t i, int64_t delta) {
  for (Group* m = g; m != nullptr; m = m->parent_) {
    if (m->online()) {
      m->stats_->Update(i, delta);
      return;
    }
  }
}

}  // namespace internal

using internal::ControllerImpl;

ChargeResult Group::TryCharge(Pages n, ChargeFlags flags, StatItem item) {
  if (!ControllerImpl::IsPageItem(*this, item)) {
    ChargeResult r;
    r.code = StatusCode::kInvalidArgument;
    return r;
  }
  const auto i = static_cast<size_t>(item);
  // The stock hit inline (a cached group is online and not the root, and
  // charged n > 0 pages or nothing at all); everything else as TryCharge.
  if (stock_->ConsumeHit(this, n.raw())) {
    if (n.raw() != 0) {
      ControllerImpl::AccountStat(this, i, static_cast<int64_t>(n.raw()));
    }
    return {};
  }
  ChargeResult r = TryChargeMiss(n.raw(), flags);
  // The root's charges are not accounted, and neither are its stats.
  if (r.ok() && n.raw() != 0 && !is_root()) {
    ControllerImpl::AccountStat(this, i, static_cast<int64_t>(n.raw()));
  }
  return r;
}

void Group::Uncharge(Pages n, StatItem item) {
  const auto i = static_cast<size_t>(item);
  if (stock_->RefillHit(this, n.raw())) {
    // A cached group: online (or being removed, see AccountStat), not the
    // root.
    if (n.raw() != 0 && ControllerImpl::IsPageItem(*this, item)) {
      ControllerImpl::AccountStat(this, i, -static_cast<int64_t>(n.raw()));
    }
    return;
  }
  UnchargeMiss(n.raw());
  if (n.raw() != 0 && !is_root() && ControllerImpl::IsPageItem(*this, item)) {
    ControllerImpl::AccountStat(this, i, -static_cast<int64_t>(n.raw()));
  }
}

void Group::UnchargeDirect(Pages n, StatItem item) {
  // The StatItem overloads are the integrations' page path (arena hooks,
  // the preload's mmap accounting): not page-sampled.
  UnchargeDirectUnsampled(n);
  if (n.raw() != 0 && !is_root() && ControllerImpl::IsPageItem(*this, item)) {
    ControllerImpl::AccountStat(this, static_cast<size_t>(item),
                                -static_cast<int64_t>(n.raw()));
  }
}

}  // namespace umemcg

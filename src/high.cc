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
//
// High work. A charge that may not block (no kMayReclaim) cannot reclaim,
// and may come from a thread that never reaches a safe point: like the
// kernel for charges that cannot block (schedule_work(&memcg->high_work)
// in try_charge_memcg, high_work_func), it queues the over-high group for
// one batch of reclaim_high on another thread: the controller's worker
// (HighWorkMode::kThread) or the application's (kManual, RunHighWork).
// The thread's pending overage is recorded as before, so the penalty it
// owes is the same; the work only reclaims.

#include <algorithm>
#include <thread>

#include "controller_impl.h"
#include "port/fork.h"
#include "port/thread.h"
#include "psi/psi.h"
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

Group* ControllerImpl::HighCheck(Group* g, uint64_t batch) {
  for (Group* m = g; m != nullptr; m = m->parent_) {
    if (m->memory_.usage() > m->memory_.high()) {
      if (tls_charge.over_high_group != g) {
        // A different group than the pending one: the old overage is
        // dropped (the kernel keys it by task, whose memcg rarely changes).
        tls_charge.over_high_group = g;
        tls_charge.pages_over_high = 0;
      }
      tls_charge.pages_over_high += batch;
      return m;
    }
  }
  return nullptr;
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

size_t ControllerImpl::RunHighWorkList(Controller& ctrl, Group* list) {
  // The stack pops newest first; run in queueing order.
  Group* fifo = nullptr;
  while (list != nullptr) {
    Group* next = list->next_high_work_;
    list->next_high_work_ = fifo;
    fifo = list;
    list = next;
  }
  const auto batch = static_cast<uint64_t>(ctrl.info().batch);
  size_t n = 0;
  while (fifo != nullptr) {
    Group* g = fifo;
    fifo = g->next_high_work_;
    g->next_high_work_ = nullptr;
    // Cleared before the reclaim, as a kernel work item is no longer
    // pending once it runs: a charge over high meanwhile queues it again.
    // Release pairs with the scheduler's acq_rel exchange.
    g->high_work_pending_.store(false, std::memory_order_release);
    if (g->online() && !g->is_root()) (void)ReclaimHigh(g, batch);
    g->Put();  // the queue's reference
    ++n;
  }
  return n;
}

Group* ControllerImpl::PopHighWork(Controller& ctrl) {
  // The whole stack at once: no ABA (nobody pops a single entry).
  Group* list = ctrl.high_work_.exchange(nullptr, std::memory_order_acquire);
  size_t popped = 0;
  for (Group* g = list; g != nullptr; g = g->next_high_work_) ++popped;
  // Relaxed: a statistic (Controller::high_work_queued).
  if (popped != 0) {
    ctrl.high_work_queued_.fetch_sub(popped, std::memory_order_relaxed);
  }
  return list;
}

void ControllerImpl::ScheduleHighWork(Group* g) {
  Controller& ctrl = *g->controller_;
  if (ctrl.info_.high_work == HighWorkMode::kNone) return;
  // Already queued and not yet taken: nothing to do (schedule_work on a
  // pending work item).
  if (g->high_work_pending_.exchange(true, std::memory_order_acq_rel)) return;
  g->Get();  // the queue's reference
  ctrl.high_work_queued_.fetch_add(1, std::memory_order_relaxed);
  // Treiber push, as Controller::ReleaseGroup.
  Group* head = ctrl.high_work_.load(std::memory_order_relaxed);
  do {
    g->next_high_work_ = head;
  } while (!ctrl.high_work_.compare_exchange_weak(
      head, g, std::memory_order_release, std::memory_order_relaxed));
  if (ctrl.info_.high_work == HighWorkMode::kThread) {
    // A fork child starts its worker here, once (the exchange elects one
    // thread; the relaxed load keeps the common case a plain read).
    if (ctrl.restart_high_worker_.load(std::memory_order_relaxed) &&
        ctrl.restart_high_worker_.exchange(false, std::memory_order_acq_rel)) {
      ctrl.high_worker_ = StartThread([c = &ctrl] { HighWorkerMain(c); });
    }
    // Release: the worker's acquire load of the sequence sees the push.
    // notify_one makes a futex call only while the worker waits.
    ctrl.high_work_seq_.fetch_add(1, std::memory_order_release);
    ctrl.high_work_seq_.notify_one();
  } else if (head == nullptr && ctrl.options_.high_work_notify) {
    ctrl.options_.high_work_notify();
  }
}

void ControllerImpl::HighWorkerMain(Controller* ctrl) {
  uint32_t seen = ctrl->high_work_seq_.load(std::memory_order_acquire);
  while (!ctrl->high_work_stop_.load(std::memory_order_acquire)) {
    (void)RunHighWorkList(*ctrl, PopHighWork(*ctrl));
    // A push during the run changed the sequence from `seen`: no wait.
    ctrl->high_work_seq_.wait(seen, std::memory_order_acquire);
    seen = ctrl->high_work_seq_.load(std::memory_order_acquire);
  }
}

void ControllerImpl::StartHighWork(Controller* ctrl) {
  if (ctrl->info_.high_work != HighWorkMode::kThread) return;
  ctrl->high_worker_ = StartThread([ctrl] { HighWorkerMain(ctrl); });
}

void ControllerImpl::HighWorkChildAfterFork(Controller* ctrl) {
  if (!ctrl->high_worker_.joinable()) return;
  // The worker was a thread of the parent: forget it, never join it here.
  // The child starts its own when it next queues work; what the parent had
  // queued is still on the list and runs then. A group the parent's worker
  // had taken but not finished stays marked pending in the child, so it is
  // not queued again there: its over-high charges still reclaim
  // synchronously when they may block.
  ReinitInForkChild(ctrl->high_worker_);
  ctrl->restart_high_worker_.store(true, std::memory_order_relaxed);
}

void ControllerImpl::StopHighWork(Controller* ctrl) {
  if (ctrl->high_worker_.joinable()) {
    ctrl->high_work_stop_.store(true, std::memory_order_release);
    ctrl->high_work_seq_.fetch_add(1, std::memory_order_release);
    ctrl->high_work_seq_.notify_one();
    ctrl->high_worker_.join();
  }
  // What is still queued is dropped with its references.
  Group* list = PopHighWork(*ctrl);
  while (list != nullptr) {
    Group* g = list;
    list = g->next_high_work_;
    g->next_high_work_ = nullptr;
    g->high_work_pending_.store(false, std::memory_order_relaxed);
    g->Put();
  }
}

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
    if (!HasFlag(flags, ChargeFlags::kNoThrottle)) {
      PsiStallScope stall;  // the throttling sleep is a memory stall
      ctrl.clock_->SleepFor(owed);
    }
    return owed;
  }
}

}  // namespace internal

size_t Controller::RunHighWork() {
  // From inside a reclaim walk the reclaim would take the tree lock again.
  if (internal::tls_charge.in_tree_walk > 0 ||
      internal::tls_charge.in_reclaim > 0) {
    return 0;
  }
  using internal::ControllerImpl;
  return ControllerImpl::RunHighWorkList(*this,
                                         ControllerImpl::PopHighWork(*this));
}

std::chrono::milliseconds Group::HandleOverHigh(ChargeFlags flags) {
  // Not from a reclaimer or an OOM handler (as RunHighWork and the charge
  // path): the reclaim would take the tree lock again and re-enter the
  // reclaimers. The overage stays pending for a later call.
  if (internal::tls_charge.over_high_group != this ||
      internal::tls_charge.in_tree_walk > 0 ||
      internal::tls_charge.in_reclaim > 0) {
    return std::chrono::milliseconds(0);
  }
  internal::PsiChargeScope psi_charging(this);
  return internal::ControllerImpl::HandleOverHigh(this, flags);
}

}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// A controller's fork handlers: see ControllerForkHandler in
// controller_impl.h for what is taken before fork and what is reset after.

#include "charge_stock.h"
#include "controller_impl.h"
#include "obj_stock.h"
#include "rstat.h"
#include "stock_drainer.h"
#include "umemcg/controller.h"

namespace umemcg::internal {

void ControllerForkHandler::PrepareFork() {
  Controller& c = *ctrl_;
  c.tree_fork_mu_.lock();
  c.drainer_->PrepareFork();
  // Reap takes objcg_mu_, shard locks and the flush locks under it.
  c.reap_mu_.lock();
  c.objcg_mu_.lock();
  c.observers_mu_.lock();
  c.peaks_mu_.lock();
  for (int k = 0; k < c.obj_stock_->nr_shards(); ++k) {
    c.obj_stock_->ShardLock(k).lock();
  }
  for (int k = 0; k < c.stock_->nr_shards(); ++k) {
    c.stock_->ShardLock(k).lock();
  }
  c.rstat_->PrepareFork();
}

void ControllerForkHandler::Release(bool child) {
  Controller& c = *ctrl_;
  if (child) {
    c.rstat_->ChildAfterFork();
  } else {
    c.rstat_->ParentAfterFork();
  }
  for (int k = c.stock_->nr_shards() - 1; k >= 0; --k) {
    if (child) {
      c.stock_->ShardLock(k).UnlockInForkChild();
    } else {
      c.stock_->ShardLock(k).unlock();
    }
  }
  for (int k = c.obj_stock_->nr_shards() - 1; k >= 0; --k) {
    if (child) {
      c.obj_stock_->ShardLock(k).UnlockInForkChild();
    } else {
      c.obj_stock_->ShardLock(k).unlock();
    }
  }
  c.peaks_mu_.unlock();
  c.observers_mu_.unlock();
  c.objcg_mu_.unlock();
  c.reap_mu_.unlock();
  if (child) {
    c.drainer_->ChildAfterFork();
  } else {
    c.drainer_->ParentAfterFork();
  }
  c.tree_fork_mu_.unlock();
}

void ControllerForkHandler::ParentAfterFork() { Release(/*child=*/false); }

void ControllerForkHandler::ChildAfterFork() {
  Release(/*child=*/true);
  Controller& c = *ctrl_;
  // Held by threads that do not exist here, except the forking thread's
  // own holds (a fork from inside a reclaimer or the OOM handler), which
  // it releases when it returns from there.
  const int shared = HeldAcrossCallback::CountHeldByThisThread(&c.tree_mu_);
  ReinitInForkChild(c.tree_mu_);
  for (int i = 0; i < shared; ++i) c.tree_mu_.lock_shared();
  const bool oom = HeldAcrossCallback::CountHeldByThisThread(&c.oom_mu_) > 0;
  ReinitInForkChild(c.oom_mu_);
  if (oom) c.oom_mu_.lock();
  ControllerImpl::HighWorkChildAfterFork(&c);
}

}  // namespace umemcg::internal

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// StockDrainer: one drain of every CPU's stocks at a time (kernel:
// drain_all_stock, guarded by percpu_charge_mutex with mutex_trylock).
//
// A drain visits every CPU shard of the page and object stocks (a shard
// lock and, with rseq, a membarrier fence each). Under limit pressure every
// refused charger wants one; letting each run its own multiplies that work
// by the number of chargers. As in the kernel only one drain runs:
//
//  - TryDrain (the charge path's first drain): drains now, or returns
//    false at once if a drain is running; the charger goes on (reclaim,
//    retries) without draining, like the kernel's.
//  - Drain (Controller::DrainAllStocks, and the charge path before it
//    gives up or invokes OOM handling): returns once a drain that started
//    after the call has covered the subtree. If none runs it drains
//    itself; otherwise it registers its subtree and waits: the next drain
//    takes every subtree registered so far (their common ancestor), so
//    many waiters cost one more drain, not one each.
//
// Why the charge path keeps its guarantee ("stock never causes a failure
// that draining would avoid"): a charger that skipped the drain because
// another ran may still fail only after Drain, i.e. after a drain that
// started after its decision went over every CPU for its subtree.
//
// Thread safety: all methods are safe from any thread. Drain blocks.

#ifndef UMEMCG_SRC_STOCK_DRAINER_H_
#define UMEMCG_SRC_STOCK_DRAINER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace umemcg {
class Controller;
class Group;
namespace internal {

class StockDrainer {
 public:
  explicit StockDrainer(Controller* ctrl) : ctrl_(ctrl) {}
  StockDrainer(const StockDrainer&) = delete;
  StockDrainer& operator=(const StockDrainer&) = delete;

  // Drains `subtree` now unless a drain is running (then false).
  bool TryDrain(Group& subtree);
  // Returns once a drain that started after the call covered `subtree`.
  void Drain(Group& subtree);

  // Drains run (tests, benchmarks). Relaxed: a counter.
  uint64_t drains() const { return drains_.load(std::memory_order_relaxed); }
  // Threads running a drain or waiting in Drain (tests).
  int threads_inside() const { return inside_.load(std::memory_order_relaxed); }

  // Fork handling (see port/fork.h): mu_ is held only for bookkeeping, so
  // it is taken before fork; in the child, a drain the parent's other
  // threads were running or waiting for is forgotten.
  void PrepareFork() { mu_.lock(); }
  void ParentAfterFork() { mu_.unlock(); }
  void ChildAfterFork();

 private:
  // Runs one drain of `target` plus everything pending. REQUIRES: mu_
  // held via `lock`, no drain running; returns with it held.
  void RunLocked(std::unique_lock<std::mutex>& lock, Group* target);

  Controller* const ctrl_;
  std::mutex mu_;
  std::condition_variable done_;
  bool running_ = false;      // guarded by mu_
  uint64_t started_ = 0;      // drains started; guarded by mu_
  uint64_t finished_ = 0;     // drains finished (in order); guarded by mu_
  Group* pending_ = nullptr;  // what the next drain covers; guarded by mu_
  std::atomic<uint64_t> drains_{0};
  std::atomic<int> inside_{0};
};

}  // namespace internal
}  // namespace umemcg

#endif  // UMEMCG_SRC_STOCK_DRAINER_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "stock_drainer.h"

#include "controller_impl.h"
#include "port/fork.h"
#include "psi/psi.h"
#include "umemcg/controller.h"
#include "umemcg/group.h"

namespace umemcg::internal {

namespace {

// The nearest common ancestor (null stands for "nothing yet"). Both are
// pinned: each requester holds its subtree until its drain finished, and
// a group pins its ancestors.
Group* Merge(Group* a, Group* b) {
  if (a == nullptr) return b;
  if (b == nullptr) return a;
  while (a->depth() > b->depth()) a = a->parent();
  while (b->depth() > a->depth()) b = b->parent();
  while (a != b) {
    a = a->parent();
    b = b->parent();
  }
  return a;
}

// Counts a thread inside TryDrain's drain or Drain.
class Inside {
 public:
  explicit Inside(std::atomic<int>& n) : n_(n) {
    n_.fetch_add(1, std::memory_order_relaxed);  // a test counter
  }
  ~Inside() { n_.fetch_sub(1, std::memory_order_relaxed); }

 private:
  std::atomic<int>& n_;
};

}  // namespace

void StockDrainer::RunLocked(std::unique_lock<std::mutex>& lock,
                             Group* target) {
  target = Merge(pending_, target);
  pending_ = nullptr;
  running_ = true;
  ++started_;
  lock.unlock();
  {
    // Reports found by the drain reach the error hook after it finished
    // (running_ cleared), so a hook may drain again.
    DeferReports defer;
    ControllerImpl::DrainStocksNow(*ctrl_, *target);
    drains_.fetch_add(1, std::memory_order_relaxed);  // a counter
    lock.lock();
    finished_ = started_;
    running_ = false;
    done_.notify_all();
    lock.unlock();
  }
  lock.lock();
}

bool StockDrainer::TryDrain(Group& subtree) {
  std::unique_lock<std::mutex> lock(mu_);
  if (running_) return false;
  Inside inside(inside_);
  RunLocked(lock, &subtree);
  return true;
}

void StockDrainer::Drain(Group& subtree) {
  PsiStallScope stall;  // a charger waiting for a drain is stalled
  Inside inside(inside_);
  std::unique_lock<std::mutex> lock(mu_);
  if (!running_) return RunLocked(lock, &subtree);
  // The running drain may have passed CPUs before our call: wait for the
  // next one, which takes what is pending (our subtree included).
  const uint64_t need = started_ + 1;
  pending_ = Merge(pending_, &subtree);
  while (finished_ < need) {
    if (!running_) {
      RunLocked(lock, nullptr);  // takes pending_
    } else {
      done_.wait(lock);
    }
  }
}

void StockDrainer::ChildAfterFork() {
  // A drain the parent's other threads were running: its thread is gone,
  // and the stock shard locks were taken before fork, so it is between
  // shards; the child's next drain covers what it had left. Waiters were
  // threads of the parent.
  ReinitInForkChild(mu_);
  ReinitInForkChild(done_);
  running_ = false;
  pending_ = nullptr;
  finished_ = started_;
  inside_.store(0, std::memory_order_relaxed);
}

}  // namespace umemcg::internal

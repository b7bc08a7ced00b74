// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// CacheReclaimer: pages a group holds that its reclaim may free, as an
// application's cache would (the cluster tests and umemcg-bench's
// cluster-chaos use it to make a cluster group's memory reclaimable). Not
// part of the library's API (a header of umemcg_cluster_testing).
//
// Thread safety: Fill, Reclaim and Release may run on any threads at once.

#ifndef UMEMCG_SRC_CLUSTER_CACHE_RECLAIMER_H_
#define UMEMCG_SRC_CLUSTER_CACHE_RECLAIMER_H_

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "umemcg/group.h"

namespace umemcg::cluster_internal {

class CacheReclaimer : public Reclaimer {
 public:
  explicit CacheReclaimer(Group& g) : g_(g) {}

  // Charges `n` pages (kChargeDefault) and caches them; false if refused.
  bool Fill(uint64_t n) {
    if (!g_.TryCharge(Pages(n)).ok()) return false;
    cached_.fetch_add(n);
    return true;
  }
  Pages Reclaimable() override { return Pages(cached_.load()); }
  Pages Reclaim(Pages target) override {
    uint64_t have = cached_.load();
    uint64_t n = 0;
    do {
      n = std::min(have, target.raw());
      if (n == 0) return Pages(0);
    } while (!cached_.compare_exchange_weak(have, have - n));
    g_.Uncharge(Pages(n));
    calls_.fetch_add(1, std::memory_order_relaxed);
    reclaimed_.fetch_add(n, std::memory_order_relaxed);
    return Pages(n);
  }
  // Uncharges what is still cached. Remove the reclaimer from its group
  // first.
  void Release() { g_.Uncharge(Pages(cached_.exchange(0))); }

  uint64_t cached() const { return cached_.load(); }
  // Relaxed: statistics read after the fact.
  int calls() const { return calls_.load(std::memory_order_relaxed); }
  uint64_t reclaimed() const {
    return reclaimed_.load(std::memory_order_relaxed);
  }

 private:
  Group& g_;
  std::atomic<uint64_t> cached_{0};
  std::atomic<int> calls_{0};
  std::atomic<uint64_t> reclaimed_{0};
};

}  // namespace umemcg::cluster_internal

#endif  // UMEMCG_SRC_CLUSTER_CACHE_RECLAIMER_H_

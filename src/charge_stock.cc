// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "charge_stock.h"

#include "controller_impl.h"
#include "umemcg/group.h"

namespace umemcg::internal {

ChargeStock::ChargeStock(CpuIdSource cpu, int batch, int slots)
    : cpu_(std::move(cpu)),
      batch_(batch),
      slots_(slots),
      shards_(cpu_.nr_shards()) {}

ChargeStock::~ChargeStock() { DrainAll(nullptr); }

void ChargeStock::DrainSlot(StockShard& s, int i, bool release) {
  Group* g = s.cached[i];
  if (g == nullptr) return;
  if (s.nr_pages[i] != 0) {
    ControllerImpl::UnchargeCounters(g, s.nr_pages[i]);
    s.nr_pages[i] = 0;
  }
  if (release) {
    s.cached[i] = nullptr;
    // May be the last reference: Put only queues the group for freeing,
    // so this never frees memory under the shard lock.
    g->Put();
  }
}

void ChargeStock::UnchargeDirect(Group* group, uint64_t n) {
  ControllerImpl::UnchargeCounters(group, n);
}

void ChargeStock::RefillSlow(StockShard& s, Group* group, uint64_t n) {
  // Read under the lock: RemoveGroup clears online_ before its DrainAll
  // takes this lock, so either that drain sees the pages we add here, or
  // we see the group offline and do not cache it.
  if (!group->online_.load(std::memory_order_relaxed)) {
    s.lock.unlock();
    ControllerImpl::UnchargeCounters(group, n);
    return;
  }
  int empty = -1;
  for (int i = 0; i < slots_; ++i) {
    if (s.cached[i] == group) {
      // Over one batch (the inline path handled the rest): return the
      // slot's pages, keep the slot (see the header).
      s.nr_pages[i] = static_cast<uint8_t>(s.nr_pages[i] + n);  // <= 2*127
      DrainSlot(s, i, false);
      s.lock.unlock();
      return;
    }
    if (s.cached[i] == nullptr && empty < 0) empty = i;
  }
  int i = empty;
  if (i < 0) {
    // Every slot busy: evict round robin (E5; the v6.16 random victim was
    // not re-entrancy safe).
    i = s.drain_idx;
    s.drain_idx = static_cast<uint8_t>((i + 1) % slots_);
    DrainSlot(s, i, true);
  }
  group->Get();
  s.cached[i] = group;
  s.nr_pages[i] = static_cast<uint8_t>(n);
  s.lock.unlock();
}

void ChargeStock::DrainAll(const Group* subtree) {
  for (int cpu = 0; cpu < shards_.size(); ++cpu) {
    StockShard& s = shards_[cpu];
    s.lock.lock();
    for (int i = 0; i < slots_; ++i) {
      if (s.cached[i] != nullptr &&
          (subtree == nullptr || s.cached[i]->IsDescendantOf(*subtree))) {
        DrainSlot(s, i, true);
      }
    }
    s.lock.unlock();
  }
}

std::string ChargeStock::CheckInvariants() const {
  for (int cpu = 0; cpu < shards_.size(); ++cpu) {
    StockShard& s = shards_[cpu];
    s.lock.lock();
    std::string bad;
    for (int i = 0; i < kMaxStockSlots && bad.empty(); ++i) {
      const std::string where =
          "cpu " + std::to_string(cpu) + " slot " + std::to_string(i);
      if (i >= slots_ && (s.cached[i] != nullptr || s.nr_pages[i] != 0)) {
        bad = where + ": used beyond stock_slots";
      } else if (s.nr_pages[i] > batch_) {
        bad = where + ": holds more than one batch";
      } else if (s.cached[i] == nullptr && s.nr_pages[i] != 0) {
        bad = where + ": pages without a group";
      } else if (s.cached[i] != nullptr &&
                 s.cached[i]->refs_.load(std::memory_order_relaxed) <= 0) {
        bad = where + ": caches a group with no reference";
      }
    }
    for (int i = 0; i < slots_ && bad.empty(); ++i) {
      for (int j = i + 1; j < slots_; ++j) {
        if (s.cached[i] != nullptr && s.cached[i] == s.cached[j]) {
          bad = "cpu " + std::to_string(cpu) + ": a group in two slots";
        }
      }
    }
    s.lock.unlock();
    if (!bad.empty()) return bad;
  }
  return "";
}

uint64_t ChargeStock::Stocked(const Group* group) const {
  uint64_t total = 0;
  for (int cpu = 0; cpu < shards_.size(); ++cpu) {
    StockShard& s = shards_[cpu];
    s.lock.lock();
    for (int i = 0; i < slots_; ++i) {
      if (s.cached[i] == group) total += s.nr_pages[i];
    }
    s.lock.unlock();
  }
  return total;
}

}  // namespace umemcg::internal

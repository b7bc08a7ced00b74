// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "charge_stock.h"

#include "controller_impl.h"
#include "umemcg/group.h"

namespace umemcg::internal {

ChargeStock::ChargeStock(CpuIdSource cpu, int batch, int slots)
    : cpu_(std::move(cpu)),
      batch_(batch),
      slots_(slots),
      rseq_(cpu_.source() == CpuSource::kRseq && cpu_.identity() &&
            RseqCommitAvailable()),
      nr_shards_(static_cast<uint32_t>(cpu_.nr_shards())),
      shards_(cpu_.nr_shards()) {
  for (int k = 0; k < shards_.size(); ++k) {
    shards_[k].index = static_cast<uint16_t>(k);
  }
}

ChargeStock::~ChargeStock() { DrainAll(nullptr); }

void ChargeStock::DrainSlot(StockShard& s, int i, bool release) {
  Group* g = s.group(i);
  if (g == nullptr) return;
  if (const uint64_t pages = s.pages(i); pages != 0) {
    ControllerImpl::UnchargeCounters(g, pages);
    s.set_pages(i, 0);
  }
  if (release) {
    s.slot[i].group.store(nullptr, std::memory_order_relaxed);
    if (nr_shards_ <= 64) {
      // Exact: no other shard shares the bit. Relaxed: the shard lock
      // orders it with a later install here; a stale bit only costs a
      // removal one needless visit.
      g->stock_shards_.fetch_and(~(uint64_t{1} << (ShardOf(s) & 63)),
                                 std::memory_order_relaxed);
    }
    // May be the last reference: Put only queues the group for freeing,
    // so this never frees memory under the shard lock.
    g->Put();
  }
}

void ChargeStock::UnchargeDirect(Group* group, uint64_t n) {
  ControllerImpl::UnchargeCounters(group, n);
}

void ChargeStock::RefillSlow(StockShard& s, Group* group, uint64_t n) {
  // A drained slot may find an underflow: reported after the unlock below.
  DeferReports defer;
  // A removed group is not cached (it would pin it). Relaxed: a shortcut;
  // the install below checks again in the order that matters.
  if (!group->online_.load(std::memory_order_relaxed)) {
    s.lock.unlock();
    ControllerImpl::UnchargeCounters(group, n);
    return;
  }
  int empty = -1;
  for (int i = 0; i < slots_; ++i) {
    if (s.group(i) == group) {
      // Over one batch (the inline path handled the rest): return the
      // slot's pages, keep the slot (see the header).
      s.set_pages(i, s.pages(i) + n);  // <= 2 * 127
      DrainSlot(s, i, false);
      s.lock.unlock();
      return;
    }
    if (s.group(i) == nullptr && empty < 0) empty = i;
  }
  // Installing: record the shard in the group first, then check online_
  // again (both seq_cst). RemoveGroup stores online_ = false, then reads
  // the shards (seq_cst): either it sees this shard and drains it after we
  // unlock, or we see the group offline here and do not cache it.
  group->stock_shards_.fetch_or(uint64_t{1} << (ShardOf(s) & 63),
                                std::memory_order_seq_cst);
  if (!group->online_.load(std::memory_order_seq_cst)) {
    s.lock.unlock();
    ControllerImpl::UnchargeCounters(group, n);
    return;
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
  s.slot[i].group.store(group, std::memory_order_relaxed);
  s.set_pages(i, n);
  s.lock.unlock();
}

void ChargeStock::DrainAll(const Group* subtree) {
  for (int cpu = 0; cpu < shards_.size(); ++cpu) {
    // Underflows found below reach the error hook after the unlock.
    DeferReports defer;
    StockShard& s = shards_[cpu];
    LockShard(cpu);
    drained_shards_.fetch_add(1, std::memory_order_relaxed);
    for (int i = 0; i < slots_; ++i) {
      if (s.group(i) != nullptr &&
          (subtree == nullptr || s.group(i)->IsDescendantOf(*subtree))) {
        DrainSlot(s, i, true);
      }
    }
    s.lock.unlock();
  }
}

void ChargeStock::DrainGroup(Group* group) {
  // seq_cst: after RemoveGroup's store of online_ (see RefillSlow).
  const uint64_t mask = group->stock_shards_.load(std::memory_order_seq_cst);
  if (mask == 0) return;
  for (int k = 0; k < shards_.size(); ++k) {
    if ((mask & (uint64_t{1} << (k & 63))) == 0) continue;
    // Underflows found below reach the error hook after the unlock.
    DeferReports defer;
    StockShard& s = shards_[k];
    LockShard(k);  // fenced: slot page counts are rseq-committed
    drained_shards_.fetch_add(1, std::memory_order_relaxed);
    for (int i = 0; i < slots_; ++i) {
      if (s.group(i) == group) DrainSlot(s, i, true);
    }
    s.lock.unlock();
  }
}

std::string ChargeStock::CheckInvariants() const {
  for (int cpu = 0; cpu < shards_.size(); ++cpu) {
    StockShard& s = shards_[cpu];
    LockShard(cpu);
    std::string bad;
    for (int i = 0; i < kMaxStockSlots && bad.empty(); ++i) {
      const std::string where =
          "cpu " + std::to_string(cpu) + " slot " + std::to_string(i);
      if (i >= slots_ && (s.group(i) != nullptr || s.pages(i) != 0)) {
        bad = where + ": used beyond stock_slots";
      } else if (s.pages(i) > static_cast<uint64_t>(batch_)) {
        bad = where + ": holds more than one batch";
      } else if (s.group(i) == nullptr && s.pages(i) != 0) {
        bad = where + ": pages without a group";
      } else if (s.group(i) != nullptr &&
                 s.group(i)->refs_.load(std::memory_order_relaxed) <= 0) {
        bad = where + ": caches a group with no reference";
      }
    }
    for (int i = 0; i < slots_ && bad.empty(); ++i) {
      for (int j = i + 1; j < slots_; ++j) {
        if (s.group(i) != nullptr && s.group(i) == s.group(j)) {
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
  // Unlocked (a statistic: a lock with a fence per shard would cost a
  // system call per CPU per read). Exact at quiescence; while charges run
  // it may pair a slot's group with a count from just before or after.
  uint64_t total = 0;
  for (int cpu = 0; cpu < shards_.size(); ++cpu) {
    const StockShard& s = shards_[cpu];
    for (int i = 0; i < slots_; ++i) {
      if (s.group(i) == group) total += s.pages(i);
    }
  }
  return total;
}

}  // namespace umemcg::internal

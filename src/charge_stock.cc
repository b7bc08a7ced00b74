// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "charge_stock.h"

#include <algorithm>

#include "controller_impl.h"
#include "umemcg/group.h"

namespace umemcg::internal {

namespace {

// The group's current batch (see the header). Relaxed: read under the
// shard's lock, which orders it after the store of a shrink that is
// followed by DrainGroup (see DrainGroup).
uint64_t BatchOf(const Group* g) { return static_cast<uint64_t>(g->batch()); }

}  // namespace

ChargeStock::ChargeStock(CpuIdSource cpu, int batch, int slots, bool rseq,
                         bool adaptive, int batch_max)
    : hit_shards_(rseq && cpu.source() == CpuSource::kRseq && cpu.identity() &&
                          RseqCommitAvailable()
                      ? static_cast<uint32_t>(cpu.nr_shards())
                      : 0),
      rseq_(hit_shards_ != 0),
      nr_shards_(static_cast<uint32_t>(cpu.nr_shards())),
      slots_(slots),
      batch_(batch),
      base_(nullptr),
      adaptive_(adaptive),
      policy_{.base = batch,
              .cap = std::max(batch, batch_max),
              .nr_cpus = cpu.nr_shards()},
      cpu_(std::move(cpu)),
      shards_(cpu_.nr_shards()) {
  base_ = &shards_[0];
  for (int k = 0; k < shards_.size(); ++k) {
    shards_[k].index = static_cast<uint16_t>(k);
  }
}

ChargeStock::~ChargeStock() { DrainAll(nullptr); }

bool ChargeStock::ConsumeLocked(Group* group, uint64_t n) {
  if (n > static_cast<uint64_t>(kMaxBatch)) return false;
  const int k = TryLockCurrent();
  if (k < 0) return false;
  StockShard& s = shards_[k];
  bool ok = false;
  for (int i = 0; i < slots_; ++i) {
    if (s.group(i) != group) continue;
    if (s.pages(i) >= n) {
      s.set_pages(i, s.pages(i) - n);
      ok = true;
    }
    break;  // a group occupies at most one slot per shard
  }
  s.lock.unlock();
  return ok;
}

bool ChargeStock::RefillMiss(Group* group, uint64_t n) {
  if (n > BatchOf(group)) {
    UnchargeDirect(group, n);
    return false;
  }
  const int k = TryLockCurrent();
  if (k < 0) {
    UnchargeDirect(group, n);
    return false;
  }
  StockShard& s = shards_[k];
  // The common case here (the try-lock path's hit): the slot exists and
  // stays within the batch.
  for (int i = 0; i < slots_; ++i) {
    if (s.group(i) != group) continue;
    const uint64_t pages = s.pages(i) + n;
    if (pages > BatchOf(group)) break;
    s.set_pages(i, pages);
    s.lock.unlock();
    return false;
  }
  return RefillLocked(s, group, n);
}

void ChargeStock::DrainSlot(StockShard& s, int i, bool release) {
  Group* g = s.group(i);
  if (g == nullptr) return;
  if (const uint64_t pages = s.pages(i); pages != 0) {
    ControllerImpl::UnchargeCounters(g, pages);
    s.set_pages(i, 0);
  }
  if (release) {
    s.cached[i].store(nullptr, std::memory_order_relaxed);
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

bool ChargeStock::RefillLocked(StockShard& s, Group* group, uint64_t n) {
  // A drained slot may find an underflow: reported after the unlock below.
  DeferReports defer;
  const uint64_t batch = BatchOf(group);
  int empty = -1;
  for (int i = 0; i < slots_; ++i) {
    if (s.group(i) == group) {
      const uint64_t pages = s.pages(i) + n;
      if (pages <= batch) {
        s.set_pages(i, pages);
        s.lock.unlock();
        return false;
      }
      // Over the batch: return the slot's pages, keep the slot (see the
      // header).
      s.set_pages(i, 0);
      s.lock.unlock();
      ControllerImpl::UnchargeCounters(group, pages);
      return true;
    }
    if (s.group(i) == nullptr && empty < 0) empty = i;
  }
  // A removed group is not cached (it would pin it). Relaxed: a shortcut;
  // the install below checks again in the order that matters.
  if (!group->online_.load(std::memory_order_relaxed)) {
    s.lock.unlock();
    ControllerImpl::UnchargeCounters(group, n);
    return false;
  }
  // Installing: record the shard in the group first, then check online_
  // again (both seq_cst). RemoveGroup stores online_ = false, then reads
  // the shards (seq_cst): either it sees this shard and drains it after we
  // unlock, or we see the group offline here and do not cache it. (An
  // installed slot implies the group was online then; RemoveGroup's drain
  // takes back whatever a hit adds to it later.)
  group->stock_shards_.fetch_or(uint64_t{1} << (ShardOf(s) & 63),
                                std::memory_order_seq_cst);
  if (!group->online_.load(std::memory_order_seq_cst)) {
    s.lock.unlock();
    ControllerImpl::UnchargeCounters(group, n);
    return false;
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
  s.cached[i].store(group, std::memory_order_relaxed);
  s.set_pages(i, n);
  s.lock.unlock();
  return false;
}

void ChargeStock::DrainAll(const Group* subtree) {
  DrainSubtree(subtree, /*try_only=*/false);
}

bool ChargeStock::TryDrainAll(const Group* subtree) {
  return DrainSubtree(subtree, /*try_only=*/true);
}

bool ChargeStock::DrainSubtree(const Group* subtree, bool try_only) {
  bool all = true;
  for (int cpu = 0; cpu < shards_.size(); ++cpu) {
    // Underflows found below reach the error hook after the unlock.
    DeferReports defer;
    StockShard& s = shards_[cpu];
    if (!try_only) {
      LockShard(cpu);
    } else if (!TryLockShardBriefly(cpu)) {
      all = false;
      continue;
    }
    drained_shards_.fetch_add(1, std::memory_order_relaxed);
    for (int i = 0; i < slots_; ++i) {
      if (s.group(i) != nullptr &&
          (subtree == nullptr || s.group(i)->IsDescendantOf(*subtree))) {
        DrainSlot(s, i, true);
      }
    }
    s.lock.unlock();
  }
  return all;
}

bool ChargeStock::TryLockShardBriefly(int k) const {
  // As many tries as TryLock's spin before it would sleep: a holder on
  // another CPU (holders never wait for anything) is gone by then.
  for (int attempt = 0; attempt < TryLock::kSpins; ++attempt) {
    if (TryLockShard(shards_, k, rseq_) >= 0) return true;
    CpuRelax();
  }
  return false;
}

void ChargeStock::DrainGroup(Group* group) {
  // seq_cst: after RemoveGroup's store of online_ (see RefillLocked).
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

bool ChargeStock::TrimGroup(const Group* group) {
  // A shrink stores the new batch, then calls this: each shard's lock (and
  // fence) orders every later hit or locked refill after the store, so
  // once a shard is passed its slot stays within the new batch.
  bool all = true;
  for (int cpu = 0; cpu < shards_.size(); ++cpu) {
    // Underflows found below reach the error hook after the unlock.
    DeferReports defer;
    StockShard& s = shards_[cpu];
    if (!TryLockShardBriefly(cpu)) {
      all = false;
      continue;
    }
    for (int i = 0; i < slots_; ++i) {
      if (s.group(i) == group) {
        DrainSlot(s, i, false);
        break;
      }
    }
    s.lock.unlock();
  }
  return all;
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
      } else if (s.group(i) == nullptr && s.pages(i) != 0) {
        bad = where + ": pages without a group";
      } else if (s.group(i) != nullptr && s.pages(i) > BatchOf(s.group(i)) &&
                 !s.group(i)->trim_pending_.load(std::memory_order_relaxed)) {
        bad = where + ": holds more than the group's batch";
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

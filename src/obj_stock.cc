// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The per-CPU object stock (kernel: consume_obj_stock, refill_obj_stock,
// __account_obj_stock; E5 era, docs/architecture.md). The hit
// path (Consume, Uncharge into the installed slot) is one CPU-id read, a
// scan of at most `slots` pointers and one commit of the slot's word (an
// rseq store, or under the try-lock): no shared cache line is written and
// nothing is allocated.

#include "obj_stock.h"

#include <cstdlib>

#include "controller_impl.h"
#include "umemcg/group.h"
#include "umemcg/obj_cgroup.h"

namespace umemcg::internal {

ObjStock::ObjStock(CpuIdSource cpu, int slots, int batch, bool cache_stats,
                   bool enabled, bool rseq)
    : cpu_(std::move(cpu)),
      slots_(slots),
      batch_(batch),
      cache_stats_(cache_stats),
      enabled_(enabled),
      rseq_(enabled && rseq && cpu_.source() == CpuSource::kRseq &&
            cpu_.identity() && RseqCommitAvailable()),
      nr_shards_(static_cast<uint32_t>(cpu_.nr_shards())),
      hit_shards_(rseq_ ? nr_shards_ : 0),
      shards_(cpu_.nr_shards()),
      base_(&shards_[0]) {
  for (int k = 0; k < shards_.size(); ++k) {
    shards_[k].index = static_cast<uint16_t>(k);
  }
}

ObjStock::~ObjStock() { DrainAll(nullptr); }

// ---- Direct application ----

void ObjStock::ApplyKmem(Group* g, int64_t pages) {
  if (pages == 0) return;
  // Hierarchical, like the counters the pages went through, so that
  // usage - objcg_pages_ is what the subtree charged otherwise. Relaxed: a
  // count read only by Reap, after the group's last reference went (the
  // acq_rel decrement orders it).
  for (Group* m = g; m != nullptr; m = m->parent()) {
    m->objcg_pages_.fetch_add(pages, std::memory_order_relaxed);
  }
  ApplyStat(g, StatItem::kKernel, pages);  // MEMCG_KMEM: "kernel"
}

void ObjStock::ApplyStat(Group* g, StatItem item, int64_t delta) {
  if (delta == 0) return;
  // ModState refuses removed groups; their parent's subtree values are the
  // same either way, so hierarchical statistics stay exact.
  for (Group* m = g; m != nullptr; m = m->parent()) {
    if (m->ModState(item, delta)) return;
  }
}

void ObjStock::UnchargePages(Group* g, uint64_t pages, bool via_stock) {
  if (pages == 0) return;
  // The root's counter was charged directly (ChargePages) or by a child's
  // hierarchical charge; Group::Uncharge skips the root.
  if (g->is_root() || !via_stock) {
    ControllerImpl::UnchargeCounters(g, pages);
  } else {
    g->UnchargeUnsampled(Pages(pages));  // its bytes were sampled
  }
}

void ObjStock::ReturnPoolPages(ObjCgroup* objcg) {
  uint64_t cur = objcg->nr_charged_bytes_.load(std::memory_order_relaxed);
  while (cur >= kPageSize) {
    // Relaxed: the pool publishes no other data; the CAS makes each page
    // returned by exactly one thread.
    if (objcg->nr_charged_bytes_.compare_exchange_weak(
            cur, cur & (kPageSize - 1), std::memory_order_relaxed)) {
      Group* g = objcg->group();
      ApplyKmem(g, -static_cast<int64_t>(cur >> kPageShift));
      UnchargePages(g, cur >> kPageShift, /*via_stock=*/false);
      return;
    }
  }
}

// ---- The rseq hit path ----

void ObjStock::ApplyUncachedStat(ObjCgroup* objcg, StatItem item, uint64_t size,
                                 bool consume) {
  // After the commit, outside any lock: the group may be removed meanwhile.
  SrcuReadScope section(*objcg->stock_->srcu_);
  ApplyStat(objcg->group(), item,
            consume ? static_cast<int64_t>(size) : -static_cast<int64_t>(size));
}

// ---- Cached statistics (section 7.6) ----

void ObjStock::FlushSlotStatsLocked(ObjStockShard& s, int i) {
  const uint64_t w = s.slot_word(i);
  if (!SlotWord::has_stats(w)) return;
  Group* g = s.slot(i)->group();
  ApplyStat(g, StatItem::kSlabReclaimable, SlotWord::stat(w, 0));
  ApplyStat(g, StatItem::kSlabUnreclaimable, SlotWord::stat(w, 1));
  s.set_word(i, SlotWord::WithBytes(SlotWord::kEmpty, SlotWord::bytes(w)));
}

void ObjStock::Account(ObjStockShard& s, int slot, StatItem item,
                       int64_t delta) {
  const int which = cache_stats_ ? SlabIndex(item) : -1;
  if (which < 0) return ApplyStat(s.slot(slot)->group(), item, delta);
  const uint64_t w = s.slot_word(slot);
  const int64_t cached = SlotWord::stat(w, which);
  const int64_t d = delta + cached;
  // Kernel rule: keep it while it fits the int16 cache and is within a
  // page, or when the cache was empty (a matching free may cancel it).
  if (std::llabs(d) <= kObjStatCacheMax &&
      (cached == 0 || std::llabs(d) <= static_cast<int64_t>(kPageSize))) {
    s.set_word(slot, SlotWord::WithStat(w, which, d));
  } else {
    s.set_word(slot, SlotWord::WithStat(w, which, 0));
    ApplyStat(s.slot(slot)->group(), item, d);
  }
}

void ObjStock::FlushKmemLocked(ObjStockShard& s) {
  Group* g = s.kmem_group;
  if (g == nullptr) return;
  ApplyKmem(g, s.kmem_pages);
  s.kmem_pages = 0;
  s.kmem_group = nullptr;
  if (nr_shards_ <= 64) {
    // Exact: no other shard shares the bit. Relaxed: the shard lock orders
    // it with the install; a stale set bit only costs a drain a visit.
    g->kmem_shards_.fetch_and(~(uint64_t{1} << s.index),
                              std::memory_order_relaxed);
  }
  // May be the last reference: Put only queues the group for freeing.
  g->Put();
}

void ObjStock::CacheKmemLocked(ObjStockShard& s, Group* g, int64_t pages) {
  if (pages == 0) return;
  // Never cache (and so pin) a removed group: a charge racing RemoveGroup
  // may complete on it. Read under the shard lock, like ChargeStock's
  // RefillLocked: RemoveGroup clears online_ before its DrainAll takes this
  // lock, so either that drain flushes what we cache here, or we see the
  // group offline. Relaxed: the lock orders it.
  if (!cache_stats_ || !g->online_.load(std::memory_order_relaxed)) {
    return ApplyKmem(g, pages);
  }
  if (s.kmem_group != g) {
    FlushKmemLocked(s);
    // `g` was read from an objcg (under this lock or in an SRCU section):
    // its last reference may have gone already (it is then dying and must
    // not be revived), and it may be offline. Record the shard before
    // checking online_ (seq_cst, against RemoveGroup's store then load), so
    // that either its FlushKmemOf visits this shard or we see it offline
    // and apply the delta at once.
    if (!g->TryGet()) return ApplyKmem(g, pages);
    g->kmem_shards_.fetch_or(uint64_t{1} << (s.index & 63),
                             std::memory_order_seq_cst);
    if (!g->online_.load(std::memory_order_seq_cst)) {
      g->Put();  // may be the last: only queues the group
      return ApplyKmem(g, pages);
    }
    s.kmem_group = g;
  }
  s.kmem_pages += pages;
  if (std::llabs(s.kmem_pages) > batch_) {
    ApplyKmem(g, s.kmem_pages);
    s.kmem_pages = 0;
  }
}

// ---- Stock ----

void ObjStock::DrainSlotLocked(ObjStockShard& s, int i) {
  ObjCgroup* objcg = s.slot(i);
  if (objcg == nullptr) return;
  FlushSlotStatsLocked(s, i);
  const uint64_t bytes = SlotWord::bytes(s.slot_word(i));
  if (const uint64_t pages = bytes >> kPageShift; pages != 0) {
    Group* g = objcg->group();
    CacheKmemLocked(s, g, -static_cast<int64_t>(pages));
    // Direct page_counter uncharge, as the newest kernel (not through the
    // page stock, whose lock is not ours to take here).
    UnchargePages(g, pages, /*via_stock=*/false);
  }
  if (const uint64_t rem = bytes & (kPageSize - 1); rem != 0) {
    // Relaxed: the pool publishes no other data.
    objcg->nr_charged_bytes_.fetch_add(rem, std::memory_order_relaxed);
  }
  ReturnPoolPages(objcg);
  s.set_word(i, SlotWord::kEmpty);
  s.cached[i].store(nullptr, std::memory_order_relaxed);
  // May be the last reference: Put only queues the objcg for freeing.
  objcg->Put();
}

void ObjStock::RefillInSection(ObjCgroup* objcg, uint64_t bytes,
                               bool allow_uncharge, StatItem item,
                               int64_t stat_delta, Group* charged,
                               uint64_t kmem_pages) {
  // An evicted slot may find an underflow: reported after the unlock.
  DeferReports defer;
  const int k = TryLockCurrent();
  if (k < 0) {
    // No stock available (section 7.5): whole pages back at once, the
    // sub-page rest to the central pool, statistics applied directly.
    if (kmem_pages != 0) ApplyKmem(charged, static_cast<int64_t>(kmem_pages));
    if (const uint64_t pages = bytes >> kPageShift; pages != 0) {
      Group* g = objcg->group();
      ApplyKmem(g, -static_cast<int64_t>(pages));
      UnchargePages(g, pages, /*via_stock=*/true);
    }
    // Relaxed: the pool publishes no other data.
    objcg->nr_charged_bytes_.fetch_add(bytes & (kPageSize - 1),
                                       std::memory_order_relaxed);
    ApplyStat(objcg->group(), item, stat_delta);
    return;
  }
  ObjStockShard& s = shards_[k];
  if (kmem_pages != 0) {
    CacheKmemLocked(s, charged, static_cast<int64_t>(kmem_pages));
  }
  int slot = -1;
  int empty = -1;
  for (int i = 0; i < slots_; ++i) {
    if (s.slot(i) == objcg) {
      slot = i;
      break;
    }
    if (s.slot(i) == nullptr && empty < 0) empty = i;
  }
  uint64_t cur;
  if (slot >= 0) {
    cur = SlotWord::bytes(s.slot_word(slot));
  } else {
    slot = empty;
    if (slot < 0) {
      slot = s.drain_idx;
      s.drain_idx = static_cast<uint8_t>((slot + 1) % slots_);
      DrainSlotLocked(s, slot);
    }
    objcg->Get();
    s.cached[slot].store(objcg, std::memory_order_relaxed);
    // Adopt the central leftover; test first so that an empty pool costs
    // a shared read, not a cache-line steal (the kernel's conditional xchg).
    // Relaxed: the pool publishes no other data.
    cur = objcg->nr_charged_bytes_.load(std::memory_order_relaxed) != 0
              ? objcg->nr_charged_bytes_.exchange(0, std::memory_order_relaxed)
              : 0;
    allow_uncharge = true;  // always allowed on a slot change
  }
  cur += bytes;
  uint64_t pages = 0;
  if ((allow_uncharge && cur > kPageSize) || cur > kObjSlotMaxBytes) {
    pages = cur >> kPageShift;
    cur &= kPageSize - 1;
  }
  s.set_word(slot, SlotWord::WithBytes(s.slot_word(slot), cur));
  Account(s, slot, item, stat_delta);
  Group* g = nullptr;
  if (pages != 0) {
    g = objcg->group();
    CacheKmemLocked(s, g, -static_cast<int64_t>(pages));
  }
  s.lock.unlock();
  // Outside the lock, through the page stock (its own lock). `g` stays
  // allocated: the caller's group SRCU read section covers it.
  if (pages != 0) UnchargePages(g, pages, /*via_stock=*/true);
}

void ObjStock::DrainAll(const Group* subtree) {
  for (int cpu = 0; cpu < shards_.size(); ++cpu) {
    // Underflows found below reach the error hook after the unlock.
    DeferReports defer;
    ObjStockShard& s = shards_[cpu];
    LockShard(cpu);
    drained_shards_.fetch_add(1, std::memory_order_relaxed);
    for (int i = 0; i < slots_; ++i) {
      if (s.slot(i) != nullptr &&
          (subtree == nullptr ||
           s.slot(i)->group()->IsDescendantOf(*subtree))) {
        DrainSlotLocked(s, i);
      }
    }
    if (s.kmem_group != nullptr &&
        (subtree == nullptr || s.kmem_group->IsDescendantOf(*subtree))) {
      FlushKmemLocked(s);
    }
    s.lock.unlock();
  }
}

void ObjStock::FlushKmemOf(Group* g) {
  // seq_cst: after RemoveGroup's store of online_ (see CacheKmemLocked).
  const uint64_t mask = g->kmem_shards_.load(std::memory_order_seq_cst);
  if (mask == 0) return;
  for (int k = 0; k < shards_.size(); ++k) {
    if ((mask & (uint64_t{1} << (k & 63))) == 0) continue;
    ObjStockShard& s = shards_[k];
    // The kmem cache is never touched by an rseq commit: no fence needed.
    s.lock.lock();
    drained_shards_.fetch_add(1, std::memory_order_relaxed);
    if (s.kmem_group == g) FlushKmemLocked(s);
    s.lock.unlock();
  }
}

void ObjStock::WaitForLockHolders() {
  for (int k = 0; k < shards_.size(); ++k) {
    shards_[k].lock.lock();
    shards_[k].lock.unlock();
  }
}

std::string ObjStock::CheckInvariants() const {
  for (int cpu = 0; cpu < shards_.size(); ++cpu) {
    ObjStockShard& s = shards_[cpu];
    LockShard(cpu);
    std::string bad;
    for (int i = 0; i < kMaxObjStockSlots && bad.empty(); ++i) {
      const std::string where =
          "cpu " + std::to_string(cpu) + " slot " + std::to_string(i);
      const uint64_t w = s.slot_word(i);
      if (i >= slots_ && s.slot(i) != nullptr) {
        bad = where + ": used beyond obj_stock_slots";
      } else if (s.slot(i) == nullptr && w != SlotWord::kEmpty) {
        bad = where + ": bytes or statistics without an objcg";
      } else if (s.slot(i) != nullptr &&
                 s.slot(i)->refs_.load(std::memory_order_relaxed) <= 0) {
        bad = where + ": caches an objcg with no reference";
      } else if (std::llabs(SlotWord::stat(w, 0)) > kObjStatCacheMax ||
                 std::llabs(SlotWord::stat(w, 1)) > kObjStatCacheMax) {
        bad = where + ": cached statistic delta out of range";
      }
    }
    s.lock.unlock();
    if (!bad.empty()) return bad;
  }
  return "";
}

}  // namespace umemcg::internal

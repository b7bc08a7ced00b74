// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Rstat, the update side: group storage, the per-CPU block pools, the
// locked and rseq counting paths, stop records and the direct path (the
// flush side is rstat_flush.cc). The invariants the error bound rests on
// (see rstat.h for the data):
//  1. Every update that reaches a per-CPU state is counted (residue, then
//     updates_) at its group and each ancestor up to the first one over
//     its threshold; that one and the ancestors above it record the stop
//     (stops_), and a reader trusts their counts again only once a flush
//     that started after the stop has finished (StopRecord). An rseq add
//     skips the count only under a stop recorded on its CPU with no flush
//     pass since (stopped_epoch == pass_epoch, checked in the sequence).
//  2. A count is only lowered by the flush of the (group, CPU) that owns
//     it, under the shard lock, after the aggregate holds the flushed
//     deltas (release; readers acquire the counts before the values).
//     So at every instant count(g) >= the page-normalised magnitude of the
//     unflushed updates of g's subtree, unless g has an uncleared stop or is
//     over its threshold.
//  3. Counts (residue, chunked) are only ever added to linked blocks, and
//     a flush pass that unlinks a block resets them: an unlinked block
//     holds no count and no delta. A pass that unlinks (g, k) folds g's
//     delta into g's aggregate and its parent's pending values, and the
//     node holding a delta in its pending values stays linked on the
//     delta's CPU until a pass over it folds them further up (linked
//     nodes' ancestors are linked). So "unlinked" means folded into g,
//     not into its ancestors: a subtree flush of g (a reader's, or the
//     removal flushes) leaves the update pending at the lowest ancestor
//     still linked on k. An update is added before it is counted; a count
//     that finds g unlinked goes to that ancestor and above (CountLocked),
//     and one that finds it still linked over-counts what a pass in
//     between folded (safe), never the reverse.
//  4. Direct-path updates go straight into the aggregates and need no
//     count.

#include "rstat.h"

#include <algorithm>
#include <new>

#include "port/fork.h"
#include "umemcg/check.h"

namespace umemcg::internal {

// ---- GroupStats ----

size_t GroupStats::AllocationSize(int nr_shards, size_t nr_items) {
  return sizeof(GroupStats) + 3 * nr_items * sizeof(int64_t) +
         static_cast<size_t>(nr_shards) * sizeof(void*);
}

GroupStats* GroupStats::Create(Rstat* rstat, GroupStats* parent) {
  // Group creation is off the hot path: top up the pools that asked.
  rstat->MaybeRefillPools();
  const int n = rstat->nr_shards();
  const size_t items = rstat->nr_items();
  void* mem = ::operator new(AllocationSize(n, items));
  return new (mem) GroupStats(rstat, parent, n, items);
}

GroupStats::GroupStats(Rstat* rstat, GroupStats* parent, int nr_shards,
                       size_t nr_items)
    : rstat_(rstat),
      parent_(parent),
      limits_(nr_items |
              (rstat->rseq() ? static_cast<uint64_t>(nr_shards) << 32 : 0)),
      blocks_(reinterpret_cast<std::atomic<StatCpu*>*>(
          reinterpret_cast<int64_t*>(this + 1) + 3 * nr_items)) {
  std::atomic<int64_t>* aggregate = aggregate_array();
  std::atomic<int64_t>* local = local_array();
  int64_t* pend = pending();
  for (size_t i = 0; i < nr_items; ++i) {
    new (&aggregate[i]) std::atomic<int64_t>(0);
    new (&local[i]) std::atomic<int64_t>(0);
    pend[i] = 0;
  }
  for (int k = 0; k < nr_shards; ++k) {
    new (&blocks_[k]) std::atomic<StatCpu*>();
  }
  last_flush_ns_.store(rstat->clock_->Now().count(), std::memory_order_relaxed);
}

void GroupStats::Destroy(GroupStats* g) {
  Rstat* r = g->rstat_;
  for (int k = 0; k < r->nr_shards(); ++k) {
    StatCpu* b = g->block(k);
    if (b == nullptr) continue;
    // Invariant 3: the final flush unlinked it and took its deltas.
    UMEMCG_DCHECK(!b->linked() && b->chunked == 0);
    r->PushBlock(k, b);
  }
  g->~GroupStats();
  ::operator delete(g);
}

// ---- Rstat ----

Rstat::Rstat(const CpuIdSource* cpu, Options options)
    : cpu_(cpu),
      batch_(options.batch),
      nr_items_(options.nr_items),
      units_(std::move(options.units)),
      mode_(options.mode),
      threshold_(static_cast<uint64_t>(options.batch) *
                 static_cast<uint64_t>(cpu->nr_shards())),
      period_(options.period),
      after_periodic_flush_(std::move(options.after_periodic_flush)),
      clock_(options.clock),
      // RseqCommitAvailable() first, whatever the source: it sets the
      // rseq area's offset the sequences use.
      rseq_(RseqCommitAvailable() && options.rseq &&
            cpu->source() == CpuSource::kRseq && cpu->identity()),
      nr_shards_(static_cast<uint32_t>(cpu->nr_shards())),
      // Not rounded to a line: a block starts on its own line (aligned
      // allocation) and the allocator's next chunk starts after its end,
      // so no two blocks share a line.
      block_size_(sizeof(StatCpu) + options.nr_items * sizeof(int64_t)),
      shards_(cpu->nr_shards()),
      pools_(cpu->nr_shards()) {
  flush_list_.reserve(64);
  for (int k = 0; k < pools_.size(); ++k) {
    pools_[k].target.store(kPoolInitial, std::memory_order_relaxed);
  }
  // The first blocks of every CPU (the root's among them) are ready.
  refill_wanted_.store(true, std::memory_order_relaxed);
  MaybeRefillPools();
}

Rstat::~Rstat() {
  StopFlusher();
  for (int k = 0; k < pools_.size(); ++k) {
    StatCpu* b = pools_[k].head.exchange(nullptr, std::memory_order_acquire);
    while (b != nullptr) {
      StatCpu* next = b->updated_next.load(std::memory_order_relaxed);
      DeleteBlock(b);
      b = next;
    }
  }
}

// ---- Pools ----

StatCpu* Rstat::NewBlock() {
  void* mem = ::operator new(block_size_, std::align_val_t(kCacheLineSize));
  auto* b = new (mem) StatCpu();
  std::fill_n(b->state(), nr_items_, int64_t{0});
  // Relaxed: a statistic.
  blocks_allocated_.fetch_add(1, std::memory_order_relaxed);
  return b;
}

void Rstat::DeleteBlock(StatCpu* b) {
  b->~StatCpu();
  ::operator delete(b, std::align_val_t(kCacheLineSize));
  blocks_allocated_.fetch_sub(1, std::memory_order_relaxed);
}

StatCpu* Rstat::PopBlock(int k) {
  StatPool& p = pools_[k];
  // The only popper (shard lock k): `b` stays in the list until our CAS,
  // so reading its link is safe and no ABA is possible. Acquire: pairs
  // with the pusher's release, for the block's contents and link.
  StatCpu* b = p.head.load(std::memory_order_acquire);
  while (b != nullptr &&
         !p.head.compare_exchange_weak(
             b, b->updated_next.load(std::memory_order_relaxed),
             std::memory_order_acquire, std::memory_order_acquire)) {
  }
  // Relaxed: the size and the flags are hints for the refill.
  if (b == nullptr) {
    p.missed.fetch_add(1, std::memory_order_relaxed);
    refill_wanted_.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  if (p.size.fetch_sub(1, std::memory_order_relaxed) - 1 < kPoolLow) {
    refill_wanted_.store(true, std::memory_order_relaxed);
  }
  b->updated_next.store(nullptr, std::memory_order_relaxed);
  return b;
}

void Rstat::PushBlock(int k, StatCpu* b) {
  StatPool& p = pools_[k];
  // Relaxed: a soft cap.
  if (p.size.load(std::memory_order_relaxed) >=
      2 * p.target.load(std::memory_order_relaxed)) {
    return DeleteBlock(b);
  }
  // Back to the state NewBlock makes (the deltas are already zero).
  b->owner = nullptr;
  b->shard = nullptr;
  b->stopped_epoch.store(0, std::memory_order_relaxed);
  b->linked_epoch.store(0, std::memory_order_relaxed);
  b->residue.store(0, std::memory_order_relaxed);
  b->updated_children = b;
  b->chunked = 0;
  StatCpu* head = p.head.load(std::memory_order_relaxed);
  do {
    b->updated_next.store(head, std::memory_order_relaxed);
  } while (!p.head.compare_exchange_weak(head, b, std::memory_order_release,
                                         std::memory_order_relaxed));
  p.size.fetch_add(1, std::memory_order_relaxed);
}

void Rstat::RefillPool(int k) {
  StatPool& p = pools_[k];
  const int64_t want = p.target.load(std::memory_order_relaxed) -
                       p.size.load(std::memory_order_relaxed);
  if (want <= 0) return;
  StatCpu* first = nullptr;
  StatCpu* last = nullptr;
  for (int64_t n = 0; n < want; ++n) {
    StatCpu* b = NewBlock();
    b->updated_next.store(first, std::memory_order_relaxed);
    first = b;
    if (last == nullptr) last = b;
  }
  StatCpu* head = p.head.load(std::memory_order_relaxed);
  do {
    last->updated_next.store(head, std::memory_order_relaxed);
  } while (!p.head.compare_exchange_weak(head, first, std::memory_order_release,
                                         std::memory_order_relaxed));
  p.size.fetch_add(want, std::memory_order_relaxed);
}

void Rstat::MaybeRefillPools() {
  // Relaxed: a hint; the pools' sizes decide.
  if (!refill_wanted_.load(std::memory_order_relaxed) ||
      !refill_wanted_.exchange(false, std::memory_order_relaxed)) {
    return;
  }
  for (int k = 0; k < pools_.size(); ++k) {
    StatPool& p = pools_[k];
    if (const int64_t m = p.missed.exchange(0, std::memory_order_relaxed);
        m > 0) {
      // Demand outran the pool between two refills: keep more from now on.
      const int64_t t = p.target.load(std::memory_order_relaxed);
      p.target.store(std::min(std::max(2 * t, t + m), kPoolMax),
                     std::memory_order_relaxed);
      p.demand.store(true, std::memory_order_relaxed);
    }
    if (p.size.load(std::memory_order_relaxed) < kPoolLow) RefillPool(k);
  }
}

uint64_t Rstat::locked_updates() const {
  uint64_t n = 0;
  for (int k = 0; k < shards_.size(); ++k) {
    n += shards_[k].locked_updates.load(std::memory_order_relaxed);
  }
  return n;
}

void Rstat::TrimPools() {
  for (int k = 0; k < pools_.size(); ++k) {
    StatPool& p = pools_[k];
    // Relaxed: the pool's fields are hints (see StatPool).
    int64_t t = p.target.load(std::memory_order_relaxed);
    if (!p.demand.exchange(false, std::memory_order_relaxed) &&
        t > kPoolInitial) {
      t = std::max(t / 2, kPoolInitial);
      p.target.store(t, std::memory_order_relaxed);
    }
    int64_t surplus = p.size.load(std::memory_order_relaxed) - 2 * t;
    if (surplus <= 0) continue;
    // Popping needs the shard lock (the only popper); skip a busy shard.
    if (TryLockShard(shards_, k, rseq_) < 0) continue;
    StatCpu* list = nullptr;
    for (; surplus > 0; --surplus) {
      // Relaxed: a peek (not a miss when the pool shrank meanwhile).
      if (p.head.load(std::memory_order_relaxed) == nullptr) break;
      StatCpu* b = PopBlock(k);
      if (b == nullptr) break;
      b->updated_next.store(list, std::memory_order_relaxed);
      list = b;
    }
    shards_[k].lock.unlock();
    while (list != nullptr) {  // freed outside the lock
      StatCpu* next = list->updated_next.load(std::memory_order_relaxed);
      DeleteBlock(list);
      list = next;
    }
  }
}

int64_t Rstat::pooled_blocks() const {
  int64_t n = 0;
  for (int k = 0; k < pools_.size(); ++k) {
    n += pools_[k].size.load(std::memory_order_relaxed);
  }
  return n;
}

// ---- Updates ----

bool Rstat::UpdateLocked(GroupStats* g, size_t i, int64_t delta) {
  const int k = cpu_->CurrentShard();
  StatShard& sh = shards_[k];
  // A waiting flusher (same line as the lock) makes writers take the
  // direct path, so it is not starved by writers re-taking the lock.
  // Relaxed: a hint; the lock decides.
  if (sh.flusher_waiting.load(std::memory_order_relaxed) ||
      TryLockShard(shards_, k, rseq_) < 0) {
    UpdateDirect(g, i, delta);
    return true;
  }
  sh.NoteLocked();
  StatCpu* c = g->block(k);
  if (c == nullptr || !c->linked()) {
    if (!Link(g, k)) {  // the pool ran dry
      sh.lock.unlock();
      UpdateDirect(g, i, delta);
      WakeRefiller();
      return true;
    }
    c = g->block(k);
  }
  c->state()[i] += delta;
  const uint64_t epoch = sh.pass_epoch.load(std::memory_order_relaxed);
  c->linked_epoch.store(epoch, std::memory_order_relaxed);
  const uint64_t m = Magnitude(i, delta);
  if (mode_ == StatsFlushMode::kPerGroupSubtree) {
    CountUpdate(g, k, m);
  } else if (CountGlobal(sh, m)) {
    c->stopped_epoch.store(epoch, std::memory_order_relaxed);
  }
  sh.lock.unlock();
  return true;
}

bool Rstat::UpdateSlow(GroupStats* g, size_t i, int64_t delta) {
  // Kernel: memcg_rstat_updated() ignores a zero change (the fast path
  // may have added it: harmless).
  if (delta == 0) return true;
  // Tail calls: no frame on this path.
  if (rseq_) return UpdateRseq(g, i, delta);
  return UpdateLocked(g, i, delta);
}

bool Rstat::UpdateRseq(GroupStats* g, size_t i, int64_t delta) {
#if UMEMCG_HAVE_RSEQ_COMMIT
  // The fast sequence failed: no stop recorded this epoch, no block yet,
  // the lock busy, or a restart. One more sequence with both guards (one
  // retry after a restart), else the lock.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const uint32_t cpu = RseqCpuId();
    if (cpu >= nr_shards_) break;
    StatCpu* c = g->block(static_cast<int>(cpu));
    if (c == nullptr) break;
    StatShard& sh = shards_[static_cast<int>(cpu)];
    const RseqAddResult r =
        RseqEpochAdd(cpu, sh.lock.address(),
                     reinterpret_cast<const uint64_t*>(&c->stopped_epoch),
                     reinterpret_cast<const uint64_t*>(&c->linked_epoch),
                     reinterpret_cast<const uint64_t*>(&sh.pass_epoch),
                     &c->state()[i], delta);
    if (r == RseqAddResult::kAddedFirst) return true;
    if (r == RseqAddResult::kAddedSecond) {
      CountRseq(g, i, delta, cpu);
      return true;
    }
    if (r == RseqAddResult::kMismatch) break;
  }
#endif
  return UpdateLocked(g, i, delta);
}

void Rstat::CountRseq(GroupStats* g, size_t i, int64_t delta, uint32_t cpu) {
#if UMEMCG_HAVE_RSEQ_COMMIT
  const uint64_t m = Magnitude(i, delta);
  const int k = static_cast<int>(cpu);
  StatShard& sh = shards_[k];
  // Each residue store commits only if the shard's pass_epoch still equals
  // the block's linked_epoch, read now: no flush pass since the locked
  // path last saw the block linked, so it is linked and every ancestor's
  // block too (invariant 3). A pass between the add and that read may
  // have folded the add already: then the count is an over-count, which
  // the next flush of the relinked block clears. Any other outcome counts
  // under the lock.
  const uint64_t epoch =
      g->block(k)->linked_epoch.load(std::memory_order_relaxed);
  if (epoch != sh.pass_epoch.load(std::memory_order_relaxed)) {
    return CountLocked(
        g, mode_ == StatsFlushMode::kGlobalWholeTree ? nullptr : g, k, m);
  }
  const void* guard = &sh.pass_epoch;
  const auto expected_epoch = reinterpret_cast<const void*>(epoch);
  // Relaxed reads of the epochs: a stop recorded in the current epoch
  // covers this update whether it was recorded before the add (then no
  // pass came in between: the epoch is the add's) or after it; the
  // flush that clears it passes this CPU after the add.
  if (mode_ == StatsFlushMode::kGlobalWholeTree) {
    if (global_updates_.load(std::memory_order_relaxed) > threshold_) {
      if (sh.global_stopped_epoch.load(std::memory_order_relaxed) ==
          sh.pass_epoch.load(std::memory_order_relaxed)) {
        return;
      }
      return CountLocked(g, nullptr, k, m);
    }
    const uint64_t r = sh.global_residue.load(std::memory_order_relaxed);
    if (r + m < static_cast<uint64_t>(batch_) &&
        RseqCompareStore(cpu, sh.lock.address(), guard, expected_epoch,
                         reinterpret_cast<uint64_t*>(&sh.global_residue), r,
                         r + m) == RseqResult::kCommitted) {
      return;
    }
    return CountLocked(g, nullptr, k, m);
  }
  for (GroupStats* a = g; a != nullptr; a = a->parent_) {
    // Linked, so every ancestor has a block here.
    StatCpu* c = a->block(k);
    if (early_stop_ && OverThreshold(a)) {
      if (c->stopped_epoch.load(std::memory_order_relaxed) ==
          sh.pass_epoch.load(std::memory_order_relaxed)) {
        return;
      }
      return CountLocked(g, a, k, m);
    }
    const uint64_t r = c->residue.load(std::memory_order_relaxed);
    if (r + m >= static_cast<uint64_t>(batch_) ||
        RseqCompareStore(cpu, sh.lock.address(), guard, expected_epoch,
                         reinterpret_cast<uint64_t*>(&c->residue), r,
                         r + m) != RseqResult::kCommitted) {
      // A chunk to move (a shared RMW, under the lock like the kernel's
      // this_cpu_xchg), or the sequence failed.
      return CountLocked(g, a, k, m);
    }
  }
#else
  (void)g, (void)i, (void)delta, (void)cpu;
#endif
}

void Rstat::CountLocked(GroupStats* g, GroupStats* from, int k, uint64_t m) {
  // Fenced when this thread migrated off CPU k since the add.
  if (TryLockShard(shards_, k, rseq_) < 0) return StopUnlocked(from);
  StatShard& sh = shards_[k];
  sh.NoteLocked();
  StatCpu* c = g->block(k);
  const uint64_t epoch = sh.pass_epoch.load(std::memory_order_relaxed);
  if (c->linked()) {
    c->linked_epoch.store(epoch, std::memory_order_relaxed);
    if (from != nullptr) {
      CountUpdate(from, k, m);
    } else if (CountGlobal(sh, m)) {
      c->stopped_epoch.store(epoch, std::memory_order_relaxed);
    }
  } else if (from != nullptr) {
    // A pass unlinked g since the add and folded the update into g's
    // aggregate, but possibly only g's subtree (a subtree flush, or the
    // removal flushes): the update then waits in the pending values of a
    // node still linked here (invariant 3), whose count and its
    // ancestors' never had it. Count from the lowest level at or above
    // `from` still linked here (every level above a linked one is
    // linked); none linked: a whole-tree pass folded it. Over-counts the
    // levels the update already reached, which their next flush clears.
    // The epochs of g's unlinked block stay: a stop or link recorded on
    // it would let later rseq adds skip the lock while it is unlinked.
    GroupStats* a = from;
    while (a != nullptr && !a->block(k)->linked()) a = a->parent_;
    if (a != nullptr) CountUpdate(a, k, m);
  } else {
    // kGlobalWholeTree: the global count is lowered only by whole-tree
    // passes, so the update needs it while the root is linked here (its
    // ancestors' blocks exist: g's first update here linked them).
    GroupStats* root = g;
    while (root->parent_ != nullptr) root = root->parent_;
    if (root->block(k)->linked()) CountGlobal(sh, m);
  }
  sh.lock.unlock();
}

bool Rstat::CountGlobal(StatShard& sh, uint64_t m) {
  // As CountUpdate, for the one global count (pre-v6.8). Relaxed: the
  // threshold test is a heuristic; the residue store below is release and
  // the flusher lowers the count with release, as for the per-group count.
  if (global_updates_.load(std::memory_order_relaxed) > threshold_) {
    // As StopCount.
    const uint64_t epoch = sh.pass_epoch.load(std::memory_order_relaxed);
    if (sh.global_stopped_epoch.load(std::memory_order_relaxed) != epoch) {
      global_stops_.stopped.fetch_add(1, std::memory_order_release);
      sh.global_stopped_epoch.store(epoch, std::memory_order_relaxed);
    }
    return true;
  }
  uint64_t r = sh.global_residue.load(std::memory_order_relaxed) + m;
  if (r >= static_cast<uint64_t>(batch_)) {
    global_updates_.fetch_add(r, std::memory_order_relaxed);
    sh.global_chunked += r;
    r = 0;
  }
  sh.global_residue.store(r, std::memory_order_release);
  return false;
}

void Rstat::StopCount(GroupStats* a, int k) {
  // Why one record per flush pass over shard k is enough: a flush clears
  // a record only up to the value it read when it started, and then
  // passes every shard where the subtree is linked. If this CPU's last
  // record here was included in that value, every update skipped since
  // precedes the flush's pass over shard k (no pass in between: same
  // pass_epoch, read under the shard lock or inside the rseq add), so
  // that flush flushes it. A flush in progress that overlaps another, or
  // that started just before a record, clears only what it read, so it
  // can never cover a stop it does not flush.
  StatCpu* c = a->block(k);
  const uint64_t epoch = shards_[k].pass_epoch.load(std::memory_order_relaxed);
  if (c->stopped_epoch.load(std::memory_order_relaxed) == epoch) return;
  // `a` itself too: a flush of `a` in progress may already have passed this
  // CPU and may lower a's count below the threshold before it finishes, so
  // the count alone would forget this update.
  for (GroupStats* x = a; x != nullptr; x = x->parent_) {
    // One RMW per level per flush pass, not per update. Release: see
    // StopRecord::stopped.
    x->stops_.stopped.fetch_add(1, std::memory_order_release);
  }
  c->stopped_epoch.store(epoch, std::memory_order_relaxed);
}

void Rstat::StopUnlocked(GroupStats* from) {
  // An update already added on a CPU whose lock is busy (a flusher): the
  // stop makes readers of `from` and its ancestors flush until a flush
  // that started after it finishes; that flush passes the CPU after the
  // add, so it folds the update.
  if (from == nullptr) {
    global_stops_.stopped.fetch_add(1, std::memory_order_release);
    return;
  }
  for (GroupStats* x = from; x != nullptr; x = x->parent_) {
    x->stops_.stopped.fetch_add(1, std::memory_order_release);
  }
}

bool Rstat::Link(GroupStats* g, int k) {
  // Blocks first, bottom-up, up to the first linked one (its ancestors are
  // linked, so they have blocks). A block installed before the pool ran
  // dry stays, unlinked and empty.
  for (GroupStats* x = g; x != nullptr; x = x->parent_) {
    StatCpu* c = x->block(k);
    if (c == nullptr) {
      c = PopBlock(k);
      if (c == nullptr) {
        // Relaxed: a statistic.
        pool_misses_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
      c->owner = x;
      c->shard = &shards_[k];
      // Release: a lock-free reader of the pointer sees the block's state.
      x->blocks_[k].store(c, std::memory_order_release);
    } else if (c->linked()) {
      break;
    }
  }
  // Kernel: css_rstat_updated(). Stop at the first node already linked:
  // all its ancestors are linked too.
  for (StatCpu* c = g->block(k); !c->linked();) {
    GroupStats* parent = c->owner->parent_;
    if (parent == nullptr) {
      c->updated_next.store(c, std::memory_order_relaxed);  // root: busy
      break;
    }
    StatCpu* pc = parent->block(k);
    c->updated_next.store(pc->updated_children, std::memory_order_relaxed);
    pc->updated_children = c;
    c = pc;
  }
  return true;
}

void Rstat::WakeRefiller() {
  // Relaxed: a hint (see refill_woken_). No flusher thread (period 0):
  // group creation and reader flushes refill.
  if (!refill_woken_.load(std::memory_order_relaxed) &&
      !refill_woken_.exchange(true, std::memory_order_relaxed)) {
    flusher_cv_.notify_one();
  }
}

void Rstat::UpdateDirect(GroupStats* g, size_t i, int64_t delta) {
  // Relaxed: statistics; exact as soon as the adds land, which is what the
  // direct path promises (it needs no flush and carries no count).
  direct_updates_.fetch_add(1, std::memory_order_relaxed);
  g->local_array()[i].fetch_add(delta, std::memory_order_relaxed);
  for (GroupStats* a = g; a != nullptr; a = a->parent_) {
    a->aggregate_array()[i].fetch_add(delta, std::memory_order_relaxed);
  }
}

}  // namespace umemcg::internal

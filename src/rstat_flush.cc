// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Rstat, the flush side: collecting a CPU's updated subtree, folding the
// per-CPU deltas, the readers' flush decision and error bound, and the
// periodic flusher thread (the update side is rstat.cc, whose header
// comment lists the invariants both sides keep).

#include <algorithm>

#include "port/fork.h"
#include "port/thread.h"
#include "rstat.h"

namespace umemcg::internal {

void Rstat::CollectUpdated(StatCpu* c, std::vector<StatCpu*>* out) {
  // Kernel: css_rstat_updated_list(): post-order, so every child precedes
  // its parent. Recursion depth = tree depth.
  StatCpu* child = c->updated_children;
  c->updated_children = c;
  while (child != c) {
    StatCpu* next = child->updated_next.load(std::memory_order_relaxed);
    child->updated_next.store(nullptr, std::memory_order_relaxed);
    CollectUpdated(child, out);
    child = next;
  }
  out->push_back(c);
}

void Rstat::FlushOne(StatCpu* c) {
  // Kernel: mem_cgroup_css_rstat_flush() for one (memcg, cpu). The shard
  // is ours (locked, its CPU fenced): read and reset each delta.
  GroupStats* g = c->owner;
  GroupStats* p = g->parent_;
  int64_t* state = c->state();
  int64_t* pending = g->pending();
  int64_t* parent_pending = p != nullptr ? p->pending() : nullptr;
  std::atomic<int64_t>* aggregate = g->aggregate_array();
  std::atomic<int64_t>* local = g->local_array();
  for (size_t i = 0; i < nr_items_; ++i) {
    int64_t delta = pending[i];
    pending[i] = 0;
    if (const int64_t v = state[i]; v != 0) {
      state[i] = 0;
      // Relaxed: independent statistics; ordered before the count clear
      // below by its release.
      local[i].fetch_add(v, std::memory_order_relaxed);
      delta += v;
    }
    if (delta != 0) {
      aggregate[i].fetch_add(delta, std::memory_order_relaxed);
      if (parent_pending != nullptr) parent_pending[i] += delta;
    }
  }
  // Invariant 2: lower the counts only after the aggregate holds this CPU's
  // deltas; by exactly what this CPU contributed.
  if (c->chunked != 0) {
    g->updates_.fetch_sub(c->chunked, std::memory_order_release);
    c->chunked = 0;
  }
  c->residue.store(0, std::memory_order_release);
  // Relaxed: a test counter.
  flush_callbacks_.fetch_add(1, std::memory_order_relaxed);
}

void Rstat::FlushSubtree(GroupStats* g) {
  RestartFlusherIfForked();
  // Stops recorded before this point are flushed by the passes below
  // (StopCount). Acquire: pairs with the stop's release, so the block and
  // link the stopped update made are seen below.
  const uint64_t stops_seen = g->stops_.stopped.load(std::memory_order_acquire);
  const uint64_t global_stops_seen =
      global_stops_.stopped.load(std::memory_order_acquire);
  const uint64_t fork_stops_seen =
      fork_stops_.stopped.load(std::memory_order_acquire);
  const bool whole_tree = g->parent_ == nullptr;
  for (int k = 0; k < shards_.size(); ++k) {
    if (before_pass_hook_ != nullptr) before_pass_hook_(before_pass_arg_, k);
    // No block: the subtree never updated on this CPU (an update links the
    // blocks of its group's ancestors), so nothing is linked or counted
    // here (invariant 3), the global count included.
    StatCpu* c = g->block(k);
    if (c == nullptr) continue;
    std::lock_guard<std::mutex> flush_lock(flush_mu_);
    // Unlinked, read under the flush lock: every pass that unlinked it has
    // folded it, and nothing of the subtree is pending here. Skipping the
    // shard spares its lock and fence (a system call when rseq is on).
    if (!c->linked()) continue;
    StatShard& sh = shards_[k];
    // Writers seeing the flag stop taking the lock, so this waits for one
    // writer's few instructions at most.
    // Relaxed: a hint read by writers; the lock provides the ordering.
    sh.flusher_waiting.store(true, std::memory_order_relaxed);
    LockShard(shards_, k, rseq_);
    sh.flusher_waiting.store(false, std::memory_order_relaxed);
    // Later stopped updates on this shard record again (StopCount), and
    // rseq adds guarded by an older epoch fail.
    sh.pass_epoch.store(sh.pass_epoch.load(std::memory_order_relaxed) + 1,
                        std::memory_order_relaxed);
    if (c->linked()) {
      // Unlink g from its parent's list (the rest stays linked).
      StatCpu* const next = c->updated_next.load(std::memory_order_relaxed);
      if (GroupStats* parent = g->parent_; parent != nullptr) {
        StatCpu* pc = parent->block(k);
        if (pc->updated_children == c) {
          pc->updated_children = next;
        } else {
          StatCpu* prev = pc->updated_children;
          while (prev->updated_next.load(std::memory_order_relaxed) != c) {
            prev = prev->updated_next.load(std::memory_order_relaxed);
          }
          prev->updated_next.store(next, std::memory_order_relaxed);
        }
      }
      c->updated_next.store(nullptr, std::memory_order_relaxed);
      flush_list_.clear();
      CollectUpdated(c, &flush_list_);
      for (StatCpu* n : flush_list_) FlushOne(n);
    }
    if (mode_ == StatsFlushMode::kGlobalWholeTree && whole_tree) {
      if (sh.global_chunked != 0) {
        global_updates_.fetch_sub(sh.global_chunked, std::memory_order_release);
        sh.global_chunked = 0;
      }
      sh.global_residue.store(0, std::memory_order_release);
    }
    sh.lock.unlock();
  }
  // Release (in Clear): a reader that sees the stops cleared sees the
  // flushed aggregates.
  g->stops_.Clear(stops_seen);
  if (mode_ == StatsFlushMode::kGlobalWholeTree && whole_tree) {
    global_stops_.Clear(global_stops_seen);
  }
  if (whole_tree) fork_stops_.Clear(fork_stops_seen);
  // Relaxed: a timestamp for the bound report and the rate limit.
  g->last_flush_ns_.store(clock_->Now().count(), std::memory_order_relaxed);
  // Without a flusher thread, a reader's flush (off the hot path) tops up
  // the pools that asked. With one, the thread does (WakeRefiller woke it
  // when a pool ran dry): a refill after a burst of new groups allocates
  // thousands of blocks of fresh memory, and a memory.stat read that did
  // it took 80 ms instead of 4 (20,000 groups, page faults on a VM).
  if (!HasFlusherThread()) MaybeRefillPools();
}

uint64_t Rstat::Pending(const GroupStats* g, bool* exceeded) const {
  uint64_t pending = 0;
  // Residues first (acquire), then the atomic: a residue seen cleared by a
  // flush or moved into the atomic implies the matching atomic/aggregate
  // writes are visible (invariant 2).
  if (mode_ == StatsFlushMode::kGlobalWholeTree) {
    for (int k = 0; k < shards_.size(); ++k) {
      pending += shards_[k].global_residue.load(std::memory_order_acquire);
    }
    const uint64_t global = global_updates_.load(std::memory_order_acquire);
    *exceeded =
        global > threshold_ || !global_stops_.clear() || !fork_stops_.clear();
    return pending + global;
  }
  for (int k = 0; k < shards_.size(); ++k) {
    // A null block holds nothing; one installed after this read holds
    // only updates racing with it.
    if (const StatCpu* c = g->block(k); c != nullptr) {
      pending += c->residue.load(std::memory_order_acquire);
    }
  }
  const uint64_t updates = g->updates();
  *exceeded =
      updates > threshold_ || !g->stops_.clear() || !fork_stops_.clear();
  return pending + updates;
}

bool Rstat::NeedsFlush(const GroupStats* g) const {
  // Relaxed: a trigger; a stale read costs one flush more or one later.
  // The O(1) test first: a hot group is usually over its threshold.
  if (!fork_stops_.clear()) return true;
  if (mode_ == StatsFlushMode::kGlobalWholeTree) {
    if (global_updates_.load(std::memory_order_relaxed) > threshold_ ||
        !global_stops_.clear()) {
      return true;
    }
  } else if (OverThreshold(g) || !g->stops_.clear()) {
    return true;
  }
  // Then the per-CPU residues, which the kernel's memcg_vmstats_needs_flush
  // leaves out: with them the lag stays within the threshold (up to
  // nr_cpus x (batch - 1) more without them; docs/design.md).
  bool exceeded = false;
  return Pending(g, &exceeded) > threshold_ || exceeded;
}

void Rstat::FlushIfNeeded(GroupStats* g) {
  RestartFlusherIfForked();
  if (!NeedsFlush(g)) return;
  // The fork stop is cleared only by a whole-tree flush.
  const bool whole = mode_ == StatsFlushMode::kGlobalWholeTree ||
                     (root_ != nullptr && !fork_stops_.clear());
  FlushSubtree(whole ? root_ : g);
}

void Rstat::FlushRatelimited(GroupStats* g) {
  RestartFlusherIfForked();
  if (root_ == nullptr || period_.count() <= 0) return FlushIfNeeded(g);
  // Relaxed: a timestamp compared with the clock; a stale one delays or
  // advances this best-effort flush by one race.
  const int64_t last = root_->last_flush_ns_.load(std::memory_order_relaxed);
  if (clock_->Now().count() > last + 2 * period_.count()) FlushIfNeeded(g);
}

StatErrorBound Rstat::Bound(const GroupStats* g) const {
  StatErrorBound b;
  b.threshold = threshold_;
  b.pending = Pending(g, &b.exceeded);
  int64_t last = 0;
  for (const GroupStats* a = g; a != nullptr; a = a->parent_) {
    last = std::max(last, a->last_flush_ns_.load(std::memory_order_relaxed));
  }
  b.since_last_flush = std::chrono::nanoseconds(
      std::max<int64_t>(0, clock_->Now().count() - last));
  return b;
}

// ---- Periodic flusher ----

void Rstat::StartFlusher(GroupStats* root) {
  root_ = root;
  if (period_.count() <= 0) return;
  // The first flush is due one period after this call, not after the
  // thread got to run (a manual clock may move in between).
  flusher_ = StartThread(
      [this, first = clock_->Now() + period_] { FlusherMain(first); });
}

void Rstat::StopFlusher() {
  {
    std::lock_guard<std::mutex> lock(flusher_mu_);
    stop_ = true;
  }
  flusher_cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
}

void Rstat::PrepareFork() {
  flush_mu_.lock();
  for (int k = 0; k < shards_.size(); ++k) shards_[k].lock.lock();
}

void Rstat::ParentAfterFork() {
  for (int k = shards_.size() - 1; k >= 0; --k) shards_[k].lock.unlock();
  flush_mu_.unlock();
}

void Rstat::ChildAfterFork() {
  // A thread of the parent between an rseq add and its count (CountRseq)
  // does not exist here: its add is in a linked block, uncounted at every
  // level. Until a whole-tree flush folds every linked block, readers get
  // no bound (and flush). The locked path adds and counts under the shard
  // lock, which the prepare handler took, so only rseq adds can be
  // caught half done.
  if (rseq_) fork_stops_.stopped.fetch_add(1, std::memory_order_release);
  for (int k = shards_.size() - 1; k >= 0; --k) {
    // A flusher's announcement belonged to a thread of the parent.
    shards_[k].flusher_waiting.store(false, std::memory_order_relaxed);
    shards_[k].lock.UnlockInForkChild();
  }
  flush_mu_.unlock();
  // The flusher thread and its synchronization belonged to the parent.
  ReinitInForkChild(flusher_mu_);
  ReinitInForkChild(flusher_cv_);
  if (flusher_.joinable()) {
    // Forget the parent's thread: never join or detach it here.
    ReinitInForkChild(flusher_);
    stop_ = false;
    restart_flusher_.store(true, std::memory_order_relaxed);
  }
}

void Rstat::RestartFlusher() {
  std::lock_guard<std::mutex> lock(flusher_mu_);
  if (!restart_flusher_.load(std::memory_order_relaxed) || stop_) return;
  restart_flusher_.store(false, std::memory_order_relaxed);
  flusher_ = StartThread(
      [this, first = clock_->Now() + period_] { FlusherMain(first); });
}

void Rstat::FlusherMain(std::chrono::nanoseconds next) {
  // Kernel: flush_memcg_stats_dwork(): force-flush from the root every
  // period, so readers rarely find much to flush. In between, refill the
  // pools when an update found one empty (WakeRefiller), without moving
  // the next flush.
  std::unique_lock<std::mutex> lock(flusher_mu_);
  while (!stop_) {
    const std::chrono::nanoseconds wait =
        std::max(next - clock_->Now(), std::chrono::nanoseconds(0));
    if (clock_->WaitFor(flusher_cv_, lock, wait, [this] {
          // Relaxed: see refill_woken_.
          return stop_ || refill_woken_.load(std::memory_order_relaxed);
        })) {
      if (stop_) break;
      refill_woken_.store(false, std::memory_order_relaxed);
      lock.unlock();
      MaybeRefillPools();
      lock.lock();
      if (clock_->Now() < next) continue;
    }
    lock.unlock();
    FlushSubtree(root_);
    MaybeRefillPools();
    TrimPools();
    if (after_periodic_flush_) after_periodic_flush_();
    periodic_flushes_.fetch_add(1, std::memory_order_relaxed);  // test counter
    lock.lock();
    next = clock_->Now() + period_;
  }
}

}  // namespace umemcg::internal

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Rstat: marking, flushing, thresholds, the error bound and the periodic
// flusher. The invariants the error bound rests on (see rstat.h for the
// data):
//  1. Every update made under a shard lock is counted (residue, then
//     updates_) at its group and each ancestor up to the first one over
//     its threshold; that one and the ancestors above it record the stop
//     (stops_), and a reader trusts their counts again only once a flush
//     that started after the stop has finished (StopRecord).
//  2. A count is only lowered by the flush of the (group, CPU) that owns
//     it, under the shard lock, after the aggregate holds the flushed
//     deltas (release; readers acquire the counts before the values).
//     So at every instant count(g) >= the page-normalised magnitude of the
//     unflushed updates of g's subtree, unless g has an uncleared stop or is
//     over its threshold.
//  3. Direct-path updates go straight into the aggregates and need no
//     count.

#include "rstat.h"

#include <algorithm>
#include <new>

#include "port/fork.h"

namespace umemcg::internal {

namespace {

size_t StrideFor(size_t nr_items) {
  const size_t bytes = sizeof(StatCpu) + 2 * nr_items * sizeof(int64_t);
  return (bytes + kCacheLineSize - 1) / kCacheLineSize * kCacheLineSize;
}

}  // namespace

// ---- GroupStats ----

GroupStats::GroupStats(Rstat* rstat, GroupStats* parent)
    : rstat_(rstat),
      parent_(parent),
      stride_(StrideFor(rstat->nr_items())),
      pcpu_(static_cast<char*>(
          ::operator new(stride_* static_cast<size_t>(rstat->nr_shards()),
                         std::align_val_t(kCacheLineSize)))),
      aggregate_(new std::atomic<int64_t>[rstat->nr_items()]()),
      local_(new std::atomic<int64_t>[rstat->nr_items()]()),
      pending_(new int64_t[rstat->nr_items()]()) {
  const size_t n = rstat->nr_items();
  for (int k = 0; k < rstat->nr_shards(); ++k) {
    StatCpu* c = new (pcpu_ + static_cast<size_t>(k) * stride_) StatCpu();
    c->owner = this;
    std::fill_n(c->state(), 2 * n, int64_t{0});
  }
  last_flush_ns_.store(rstat->clock_->Now().count(), std::memory_order_relaxed);
}

GroupStats::~GroupStats() {
  for (int k = 0; k < rstat_->nr_shards(); ++k) cpu(k)->~StatCpu();
  ::operator delete(pcpu_, std::align_val_t(kCacheLineSize));
  delete[] aggregate_;
  delete[] local_;
  delete[] pending_;
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
      clock_(options.clock),
      shards_(cpu->nr_shards()) {
  flush_list_.reserve(64);
}

Rstat::~Rstat() { StopFlusher(); }

void Rstat::CountGlobal(StatShard& sh, uint64_t m) {
  // As CountUpdate, for the one global count (pre-v6.8). Relaxed: the
  // threshold test is a heuristic; the residue store below is release and
  // the flusher lowers the count with release, as for the per-group count.
  if (global_updates_.load(std::memory_order_relaxed) > threshold_) {
    // As StopCount.
    if (sh.global_stopped_epoch != sh.pass_epoch) {
      global_stops_.stopped.fetch_add(1, std::memory_order_relaxed);
      sh.global_stopped_epoch = sh.pass_epoch;
    }
    return;
  }
  uint64_t r = sh.global_residue.load(std::memory_order_relaxed) + m;
  if (r >= static_cast<uint64_t>(batch_)) {
    global_updates_.fetch_add(r, std::memory_order_relaxed);
    sh.global_chunked += r;
    r = 0;
  }
  sh.global_residue.store(r, std::memory_order_release);
}

void Rstat::StopCount(GroupStats* a, int k) {
  // Why one record per flush pass over shard k is enough: a flush clears
  // a record only up to the value it read when it started, and then
  // passes every shard. If this CPU's last record here was included in
  // that value, every update skipped since precedes the flush's pass over
  // shard k (no pass in between: same pass_epoch, both under the shard
  // lock), so that flush flushes it. A flush in progress that overlaps
  // another, or that started just before a record, clears only what it
  // read, so it can never cover a stop it does not flush.
  StatCpu* c = a->cpu(k);
  const uint64_t epoch = shards_[k].pass_epoch;
  if (c->stopped_epoch == epoch) return;
  // `a` itself too: a flush of `a` in progress may already have passed this
  // CPU and may lower a's count below the threshold before it finishes, so
  // the count alone would forget this update.
  for (GroupStats* x = a; x != nullptr; x = x->parent_) {
    // Relaxed: see StopRecord::stopped. One RMW per level per flush pass,
    // not per update.
    x->stops_.stopped.fetch_add(1, std::memory_order_relaxed);
  }
  c->stopped_epoch = epoch;
}

void Rstat::MarkUpdated(StatCpu* c, int k) {
  // Kernel: css_rstat_updated(). Stop at the first node already linked:
  // all its ancestors are linked too.
  for (;;) {
    if (c->updated_next != nullptr) return;
    GroupStats* parent = c->owner->parent_;
    if (parent == nullptr) {
      c->updated_next = c;  // the root marks itself busy
      return;
    }
    StatCpu* pc = parent->cpu(k);
    c->updated_next = pc->updated_children;
    pc->updated_children = c;
    c = pc;
  }
}

void Rstat::UpdateDirect(GroupStats* g, size_t i, int64_t delta, uint64_t) {
  // Relaxed: statistics; exact as soon as the adds land, which is what the
  // direct path promises (it needs no flush and carries no count).
  direct_updates_.fetch_add(1, std::memory_order_relaxed);
  g->local_[i].fetch_add(delta, std::memory_order_relaxed);
  for (GroupStats* a = g; a != nullptr; a = a->parent_) {
    a->aggregate_[i].fetch_add(delta, std::memory_order_relaxed);
  }
}

void Rstat::CollectUpdated(StatCpu* c, std::vector<StatCpu*>* out) {
  // Kernel: css_rstat_updated_list(): post-order, so every child precedes
  // its parent. Recursion depth = tree depth.
  StatCpu* child = c->updated_children;
  c->updated_children = c;
  while (child != c) {
    StatCpu* next = child->updated_next;
    child->updated_next = nullptr;
    CollectUpdated(child, out);
    child = next;
  }
  out->push_back(c);
}

void Rstat::FlushOne(StatCpu* c, int k) {
  // Kernel: mem_cgroup_css_rstat_flush() for one (memcg, cpu).
  (void)k;
  GroupStats* g = c->owner;
  GroupStats* p = g->parent_;
  int64_t* state = c->state();
  int64_t* prev = c->prev(nr_items_);
  for (size_t i = 0; i < nr_items_; ++i) {
    int64_t delta = g->pending_[i];
    g->pending_[i] = 0;
    const int64_t v = state[i];
    if (v != prev[i]) {
      const int64_t cpu_delta = v - prev[i];
      prev[i] = v;
      // Relaxed: independent statistics; ordered before the count clear
      // below by its release.
      g->local_[i].fetch_add(cpu_delta, std::memory_order_relaxed);
      delta += cpu_delta;
    }
    if (delta != 0) {
      g->aggregate_[i].fetch_add(delta, std::memory_order_relaxed);
      if (p != nullptr) p->pending_[i] += delta;
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
  // (StopCount). Acquire: nothing to publish, but keeps the read before
  // the passes.
  const uint64_t stops_seen = g->stops_.stopped.load(std::memory_order_acquire);
  const uint64_t global_stops_seen =
      global_stops_.stopped.load(std::memory_order_acquire);
  const bool whole_tree = g->parent_ == nullptr;
  for (int k = 0; k < shards_.size(); ++k) {
    if (before_pass_hook_ != nullptr) before_pass_hook_(before_pass_arg_, k);
    std::lock_guard<std::mutex> flush_lock(flush_mu_);
    StatShard& sh = shards_[k];
    // Writers seeing the flag stop taking the lock, so this waits for one
    // writer's few instructions at most.
    // Relaxed: a hint read by writers; the lock provides the ordering.
    sh.flusher_waiting.store(true, std::memory_order_relaxed);
    sh.lock.lock();
    sh.flusher_waiting.store(false, std::memory_order_relaxed);
    // Stopped updates on this shard from here on record again (StopCount).
    ++sh.pass_epoch;
    StatCpu* c = g->cpu(k);
    if (c->updated_next != nullptr) {
      // Unlink g from its parent's list (the rest stays linked).
      if (GroupStats* parent = g->parent_; parent != nullptr) {
        StatCpu** link = &parent->cpu(k)->updated_children;
        while (*link != c) link = &(*link)->updated_next;
        *link = c->updated_next;
      }
      c->updated_next = nullptr;
      flush_list_.clear();
      CollectUpdated(c, &flush_list_);
      for (StatCpu* n : flush_list_) FlushOne(n, k);
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
  // Relaxed: a timestamp for the bound report and the rate limit.
  g->last_flush_ns_.store(clock_->Now().count(), std::memory_order_relaxed);
}

bool Rstat::NeedsFlush(const GroupStats* g) const {
  // Relaxed: a trigger; a stale read costs one flush more or one later.
  if (mode_ == StatsFlushMode::kGlobalWholeTree) {
    return global_updates_.load(std::memory_order_relaxed) > threshold_ ||
           !global_stops_.clear();
  }
  return OverThreshold(g) || !g->stops_.clear();
}

void Rstat::FlushIfNeeded(GroupStats* g) {
  RestartFlusherIfForked();
  if (!NeedsFlush(g)) return;
  FlushSubtree(mode_ == StatsFlushMode::kGlobalWholeTree ? root_ : g);
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
  uint64_t pending = 0;
  // Residues first (acquire), then the atomic: a residue seen cleared by a
  // flush or moved into the atomic implies the matching atomic/aggregate
  // writes are visible (invariant 2).
  if (mode_ == StatsFlushMode::kGlobalWholeTree) {
    for (int k = 0; k < shards_.size(); ++k) {
      pending += shards_[k].global_residue.load(std::memory_order_acquire);
    }
    const uint64_t global = global_updates_.load(std::memory_order_acquire);
    pending += global;
    b.exceeded = global > threshold_ || !global_stops_.clear();
  } else {
    auto* mg = const_cast<GroupStats*>(g);
    for (int k = 0; k < shards_.size(); ++k) {
      pending += mg->cpu(k)->residue.load(std::memory_order_acquire);
    }
    const uint64_t updates = g->updates();
    pending += updates;
    b.exceeded = updates > threshold_ || !g->stops_.clear();
  }
  b.pending = pending;
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
  flusher_ = std::thread([this] { FlusherMain(); });
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
  flusher_ = std::thread([this] { FlusherMain(); });
}

void Rstat::FlusherMain() {
  // Kernel: flush_memcg_stats_dwork(): force-flush from the root every
  // period, so readers rarely find much to flush.
  std::unique_lock<std::mutex> lock(flusher_mu_);
  while (!stop_) {
    if (clock_->WaitFor(flusher_cv_, lock, period_, [this] { return stop_; })) {
      break;
    }
    lock.unlock();
    FlushSubtree(root_);
    periodic_flushes_.fetch_add(1, std::memory_order_relaxed);  // test counter
    lock.lock();
  }
}

}  // namespace umemcg::internal

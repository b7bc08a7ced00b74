// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Rstat: lazily flushed per-CPU statistics (kernel: memcg_vmstats*,
// kernel/cgroup/rstat.c, mem_cgroup_flush_stats; docs/design.md,
// Statistics (rstat)).
//
// Per group (GroupStats, allocated with the group):
//   per CPU (StatCpu, own cache lines): state[i] (cumulative updates made on
//     this CPU), prev[i] (state at the last flush), the updated-tree links,
//     `residue` (pending-update count not yet moved to the group's atomic)
//     and `chunked` (what this CPU moved into the atomic since its flush);
//   shared: aggregate[i] (hierarchical), local[i], pending[i] (children's
//     flushed deltas not yet folded here), the atomic pending-update count
//     `updates`, and the last flush time.
//
// Hot-path scheme (documented choice). Each CPU shard has one TryLock
// (StatShard) guarding every group's StatCpu for that shard: state, the
// updated-tree links and the residues. ModState = read the CPU id,
// try-lock the shard, plain adds, unlock. A thread that migrated after
// reading the id is still correct: the lock, not the CPU, gives
// exclusivity. When the try-lock fails (another thread on the shard, or a
// flusher's pass over it) the update goes to the direct path: relaxed
// fetch_adds on the group's local value and on the aggregate of the group
// and every ancestor (like the kernel's NMI path it bypasses the per-CPU
// state; unlike it, it is applied at once rather than folded at the next
// flush, so nothing needs marking and no update can wait for a flush that
// does not come). The direct path is rare; it writes shared lines.
//
// Pending-update bookkeeping (8.4 item 6): each update adds its magnitude
// (|delta|, normalised to pages for byte and KiB items, sub-page updates
// rounded up to 1) to the shard residue of the group and each ancestor,
// stopping at the first one already over its threshold; a residue reaching
// `batch` moves into the group's atomic `updates` (the only shared write,
// once per batch). A group needs a flush when `updates` > batch x nr_cpus.
// A flush of (group, CPU) folds the state, then subtracts exactly what
// that CPU moved into `updates` and clears the residue, so counts never
// go below the unflushed work (see StatErrorBound in stats.h).
//
// Flushing (FlushSubtree): per CPU, under the flush lock and that shard's
// lock, unlink the subtree's updated nodes (children before parents) and
// run the per-(group, CPU) callback on each: the shard lock is held for one
// pass over the dirty part of the subtree, never longer; writers do not
// wait for it (they take the direct path).
//
// Thread safety: Update and the readers are safe from any thread;
// FlushSubtree serialises on flush_mu_.

#ifndef UMEMCG_SRC_RSTAT_H_
#define UMEMCG_SRC_RSTAT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "port/cpu.h"
#include "port/per_cpu.h"
#include "port/try_lock.h"
#include "umemcg/clock.h"
#include "umemcg/stats.h"
#include "umemcg/status.h"

namespace umemcg {
class Group;
namespace internal {

class GroupStats;
class Rstat;

// A count that stopped (an update made while the count was over its
// threshold) and the flushes that covered it: see StopCount.
struct StopRecord {
  // Bumped (once per flush pass over the stopping CPU at most) by updates
  // that did not count here. Relaxed RMW: ordered for the flusher by the
  // shard lock and for readers by the completion of the update.
  std::atomic<uint64_t> stopped{0};
  // The largest `stopped` value that a finished flush read at its start:
  // every stop up to it was flushed. Release by the flusher (after the
  // aggregates), acquire by readers.
  std::atomic<uint64_t> cleared{0};

  bool clear() const {
    const uint64_t s = stopped.load(std::memory_order_acquire);
    return cleared.load(std::memory_order_acquire) >= s;
  }
  // The flusher: raise `cleared` to `seen` (read at the flush's start).
  void Clear(uint64_t seen) {
    uint64_t c = cleared.load(std::memory_order_relaxed);
    while (c < seen &&
           !cleared.compare_exchange_weak(c, seen, std::memory_order_release,
                                          std::memory_order_relaxed)) {
    }
  }
};

// One (group, CPU) record; the item arrays follow it in memory. Fields
// marked "shard" are guarded by that CPU's StatShard lock.
struct alignas(kCacheLineSize) StatCpu {
  // Updated tree (kernel: updated_next / updated_children). shard.
  // updated_next: null = not linked; the root links to itself.
  // updated_children: self-terminated singly linked list of children.
  StatCpu* updated_next = nullptr;
  StatCpu* updated_children = this;
  GroupStats* owner = nullptr;
  // Written under the shard lock; atomic so that the error-bound reader
  // can read it without the lock. Relaxed store by the writer (it is the
  // only writer: the shard lock), release by the flusher's clear (pairs
  // with the reader's acquire: a cleared residue implies the aggregate
  // already holds the flushed deltas).
  std::atomic<uint64_t> residue{0};
  uint64_t chunked = 0;  // shard: moved into owner->updates_ since flush
  // shard: the shard's pass_epoch when an update stopped here last recorded
  // the stop at this group and its ancestors (StopCount).
  uint64_t stopped_epoch = 0;

  int64_t* state() { return reinterpret_cast<int64_t*>(this + 1); }
  // prev follows state; guarded by the flush lock.
  int64_t* prev(size_t n) { return state() + n; }
};

// The per-group part (one per Group, owned by it).
class GroupStats {
 public:
  GroupStats(Rstat* rstat, GroupStats* parent);
  ~GroupStats();
  GroupStats(const GroupStats&) = delete;
  GroupStats& operator=(const GroupStats&) = delete;

  StatCpu* cpu(int shard) {
    return reinterpret_cast<StatCpu*>(pcpu_ + shard * stride_);
  }
  GroupStats* parent() const { return parent_; }
  int64_t aggregate(size_t i) const {
    // Relaxed: an independent statistic; see StatErrorBound for the lag.
    return aggregate_[i].load(std::memory_order_relaxed);
  }
  int64_t local(size_t i) const {
    return local_[i].load(std::memory_order_relaxed);
  }
  uint64_t updates() const {
    // Acquire: pairs with the flusher's release decrement, so a smaller
    // count implies the aggregate already holds what was subtracted.
    return updates_.load(std::memory_order_acquire);
  }

 private:
  friend class Rstat;

  Rstat* const rstat_;
  GroupStats* const parent_;
  const size_t stride_;
  char* const pcpu_;  // nr_cpus x stride_, cache-line aligned

  // Write-hot when flushing; read by readers. On their own lines: the
  // hot path reads updates_ (threshold check) and must not share a line
  // with flush writes to aggregate_/local_.
  alignas(kCacheLineSize) std::atomic<uint64_t> updates_{0};
  // Stops of the count at this group or below it (see StopRecord): while
  // one is not covered by a finished flush of this subtree, readers get no
  // bound and flush.
  StopRecord stops_;
  std::atomic<int64_t> last_flush_ns_{0};

  alignas(kCacheLineSize) std::atomic<int64_t>* const aggregate_;
  std::atomic<int64_t>* const local_;
  int64_t* const pending_;  // guarded by Rstat::flush_mu_
};

// One CPU's stats lock and (kGlobalWholeTree) its global residue.
struct StatShard {
  TryLock lock;
  std::atomic<bool> flusher_waiting{false};
  // Guarded by `lock`: incremented by every flush pass over this shard, so
  // a stopped update knows whether a flush has passed this CPU since it
  // last recorded a stop (StopCount).
  uint64_t pass_epoch = 1;
  uint64_t global_stopped_epoch = 0;        // lock: as StatCpu::stopped_epoch
  std::atomic<uint64_t> global_residue{0};  // like StatCpu::residue
  uint64_t global_chunked = 0;
};

class Rstat {
 public:
  struct Options {
    int batch = 64;
    size_t nr_items = kNumBuiltinStatItems;
    std::vector<StatUnit> units;  // per item
    StatsFlushMode mode = StatsFlushMode::kPerGroupSubtree;
    std::chrono::nanoseconds period{std::chrono::seconds(2)};
    Clock* clock = nullptr;
  };
  Rstat(const CpuIdSource* cpu, Options options);
  ~Rstat();  // stops the flusher
  Rstat(const Rstat&) = delete;
  Rstat& operator=(const Rstat&) = delete;

  size_t nr_items() const { return nr_items_; }
  StatUnit unit(size_t i) const { return units_[i]; }
  uint64_t threshold() const { return threshold_; }
  StatsFlushMode mode() const { return mode_; }
  int nr_shards() const { return shards_.size(); }
  // ControllerOptions::stats_update_early_stop = false: every update counts
  // at every ancestor (the per-level walk without the early stop; for
  // benchmarks). REQUIRES: called before any update.
  void DisableEarlyStop() { early_stop_ = false; }

  // The hot path: adds `delta` to item `i` of `g` on this CPU.
  // REQUIRES: i < nr_items().
  void Update(GroupStats* g, size_t i, int64_t delta) {
    const uint64_t m = Magnitude(i, delta);
    const int k = cpu_->CurrentShard();
    StatShard& sh = shards_[k];
    // A waiting flusher (same line as the lock) makes writers take the
    // direct path, so it is not starved by writers re-taking the lock.
    // Relaxed: a hint; the lock decides.
    if (sh.flusher_waiting.load(std::memory_order_relaxed) ||
        !sh.lock.try_lock()) {
      return UpdateDirect(g, i, delta, m);
    }
    StatCpu* c = g->cpu(k);
    c->state()[i] += delta;
    if (c->updated_next == nullptr) MarkUpdated(c, k);
    if (mode_ == StatsFlushMode::kPerGroupSubtree) {
      CountUpdate(g, k, m);
    } else {
      CountGlobal(sh, m);
    }
    sh.lock.unlock();
  }

  // True if a reader of `g` should flush (its count, or the global count
  // in kGlobalWholeTree mode, passed the threshold).
  bool NeedsFlush(const GroupStats* g) const;
  // Flushes `g`'s subtree (kGlobalWholeTree: the whole tree) if needed.
  void FlushIfNeeded(GroupStats* g);
  // Flushes `g`'s subtree unconditionally. Walks every CPU; per CPU takes
  // the flush lock and the shard lock for one pass over the subtree's
  // dirty groups.
  void FlushSubtree(GroupStats* g);
  // Flushes if the last flush of the root is older than 2 periods
  // (kernel: flush_ratelimited).
  void FlushRatelimited(GroupStats* g);

  StatErrorBound Bound(const GroupStats* g) const;

  // The periodic flusher: flushes `root` every period (0: never). Start
  // once; Stop joins the thread (idempotent).
  void StartFlusher(GroupStats* root);
  void StopFlusher();

  // Fork handling (the controller's, see port/fork.h): the flush mutex and
  // every shard lock are taken before fork and released after it. The
  // child has no flusher thread: its copy of the thread object is
  // forgotten (never joined) and a new flusher starts on the child's first
  // flush or flushing read (FlushSubtree, FlushIfNeeded,
  // FlushRatelimited), not in the handler, so a child that only execs
  // pays nothing.
  void PrepareFork();
  void ParentAfterFork();
  void ChildAfterFork();

  // Counters for tests and benchmarks (relaxed: they publish nothing).
  uint64_t flush_callbacks() const {
    return flush_callbacks_.load(std::memory_order_relaxed);
  }
  uint64_t periodic_flushes() const {
    return periodic_flushes_.load(std::memory_order_relaxed);
  }
  uint64_t direct_updates() const {
    return direct_updates_.load(std::memory_order_relaxed);
  }

 private:
  friend class GroupStats;
  friend class StatsTestPeer;  // tests: shard locks

  uint64_t Magnitude(size_t i, int64_t delta) const {
    const uint64_t a = delta < 0 ? 0 - static_cast<uint64_t>(delta)
                                 : static_cast<uint64_t>(delta);
    switch (units_[i]) {
      case StatUnit::kBytes:
        return (a + 4095) >> 12;
      case StatUnit::kKiB:
        return (a + 3) >> 2;
      default:
        return a;
    }
  }
  bool OverThreshold(const GroupStats* g) const {
    // Relaxed: a heuristic trigger read on the hot path (shared line, read
    // only); the bound reader uses updates() instead.
    return g->updates_.load(std::memory_order_relaxed) > threshold_;
  }
  // REQUIRES: shard k locked.
  void CountUpdate(GroupStats* g, int k, uint64_t m) {
    for (GroupStats* a = g; a != nullptr; a = a->parent_) {
      if (early_stop_ && OverThreshold(a)) {
        StopCount(a, k);
        return;
      }
      StatCpu* c = a->cpu(k);
      // Relaxed load + store: the shard lock makes this thread the only
      // writer; the atomic is for the lock-free bound reader.
      uint64_t r = c->residue.load(std::memory_order_relaxed) + m;
      if (r >= static_cast<uint64_t>(batch_)) {
        a->updates_.fetch_add(r, std::memory_order_relaxed);
        c->chunked += r;
        r = 0;
      }
      // Release: a reader that sees the residue moved to 0 also sees the
      // fetch_add above (it reads residues before updates_).
      c->residue.store(r, std::memory_order_release);
    }
  }
  void CountGlobal(StatShard& sh, uint64_t m);
  // Records that an update on shard k stopped counting at `a` (over its
  // threshold) in `a` and its ancestors, unless this CPU did so since the
  // last flush pass over shard k. REQUIRES: shard k.
  void StopCount(GroupStats* a, int k);
  // Links (c, k) and its ancestors into CPU k's updated tree. REQUIRES:
  // shard k locked. Kernel: css_rstat_updated().
  void MarkUpdated(StatCpu* c, int k);
  void UpdateDirect(GroupStats* g, size_t i, int64_t delta, uint64_t m);

  // Unlinks the updated subtree of (g, k), children first. REQUIRES:
  // shard k locked.
  void CollectUpdated(StatCpu* c, std::vector<StatCpu*>* out);
  // The per-(group, CPU) flush callback. REQUIRES: flush_mu_ and shard k.
  void FlushOne(StatCpu* c, int k);
  void FlusherMain();
  // Starts the child's flusher if ChildAfterFork asked for one.
  void RestartFlusherIfForked() {
    // Relaxed: set in the child's fork handler before any other thread of
    // the child exists; RestartFlusher re-checks under flusher_mu_.
    if (restart_flusher_.load(std::memory_order_relaxed)) RestartFlusher();
  }
  void RestartFlusher();

  const CpuIdSource* const cpu_;
  const int batch_;
  const size_t nr_items_;
  const std::vector<StatUnit> units_;
  const StatsFlushMode mode_;
  const uint64_t threshold_;
  const std::chrono::nanoseconds period_;
  Clock* const clock_;
  bool early_stop_ = true;  // set before any update, then read-only
  mutable PerCpu<StatShard> shards_;

  // Serialises flushers (kernel: the rstat lock). Taken per CPU pass.
  std::mutex flush_mu_;
  std::vector<StatCpu*> flush_list_;  // guarded by flush_mu_

  // Tests only: called by FlushSubtree before each shard pass, outside
  // every lock, so a test can interleave updates deterministically.
  void (*before_pass_hook_)(void* arg, int shard) = nullptr;
  void* before_pass_arg_ = nullptr;

  // kGlobalWholeTree: the global pending count (stats_flush_threshold).
  alignas(kCacheLineSize) std::atomic<uint64_t> global_updates_{0};
  StopRecord global_stops_;  // as GroupStats::stops_, for the global count
  GroupStats* root_ = nullptr;

  std::atomic<uint64_t> flush_callbacks_{0};
  std::atomic<uint64_t> periodic_flushes_{0};
  std::atomic<uint64_t> direct_updates_{0};

  // The periodic flusher thread.
  std::mutex flusher_mu_;
  std::condition_variable flusher_cv_;
  bool stop_ = false;  // guarded by flusher_mu_
  std::thread flusher_;
  // A fork child whose parent ran a flusher: start one (see PrepareFork).
  std::atomic<bool> restart_flusher_{false};
};

// Validates `custom` (kInvalidArgument naming the first bad spec) and fills
// the names and units of every item: the built-in ones, then `custom`.
Status BuildStatTable(const std::vector<StatItemSpec>& custom,
                      std::vector<std::string>* names,
                      std::vector<StatUnit>* units);

}  // namespace internal
}  // namespace umemcg

#endif  // UMEMCG_SRC_RSTAT_H_

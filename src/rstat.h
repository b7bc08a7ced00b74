// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Rstat: lazily flushed per-CPU statistics (kernel: memcg_vmstats*,
// kernel/cgroup/rstat.c, mem_cgroup_flush_stats; docs/design.md,
// Statistics (rstat)).
//
// Per group (GroupStats, one allocation with the group):
//   read-mostly: the parent, and one pointer per CPU to the group's StatCpu
//     block on that CPU, null until the group's first update there (the
//     kernel's per-CPU areas are its largest per-memcg cost; here a CPU that
//     never updated a group costs that group 8 bytes);
//   shared: aggregate[i] (hierarchical), local[i], pending[i] (children's
//     flushed deltas not yet folded here), the atomic pending-update count
//     `updates`, the stop record and the last flush time.
// Per (group, CPU) (StatCpu, own cache lines, taken from a per-CPU pool):
//   state[i] (updates made on this CPU since its last flush; the flush reads
//   and resets it), the updated-tree links, `residue` (pending-update count
//   not yet moved to the group's atomic), `chunked` (what this CPU moved
//   into the atomic since its flush) and two epochs for the rseq path.
//
// Exclusion. Each CPU shard has one TryLock (StatShard) guarding every
// group's StatCpu on that shard: state, links, residues, epochs. Writers
// either hold it or commit through a restartable sequence that checks it
// is free (port/rseq.h); a holder that does not run on the shard's CPU
// fences that CPU first (RseqExclude), so no sequence that saw the lock
// free is still in flight. The flusher therefore has the shard to itself
// while it reads and resets the deltas.
//
// Hot path (rseq; ControllerInfo::stats_rseq): read the CPU id, load the
// group's block for it, and run one sequence that checks the CPU and the
// lock and adds `delta` to state[i] with one non-locked `add`, provided an
// epoch guard holds:
//   - `stopped_epoch == pass_epoch`: an update of this group on this CPU
//     found it over its threshold and recorded the stop since the last
//     flush pass here (StopCount), so this update needs no count: done;
//   - else `linked_epoch == pass_epoch`: the block is on the CPU's updated
//     tree with no flush pass since; the update is then counted per level
//     with one more sequence per level (CountRseq: residue += magnitude,
//     committed by a plain store), stopping at the first level over its
//     threshold whose stop is recorded.
// Anything else (first update on this CPU since a pass, a residue reaching
// one batch, an unrecorded stop, a held lock, a migration) takes the
// locked path: try-lock the shard, link the block (taking blocks from the
// pool), add, count; when the try-lock fails the update goes to the direct
// path: relaxed fetch_adds on the group's local value and the aggregate of
// the group and every ancestor, exact at once (the kernel's NMI path folds
// its atomics at the next flush instead).
//
// Without rseq commits (fake or getcpu CPU source, TSan, not x86-64, no
// membarrier RSEQ fence, a shard count that folds CPUs together, or
// ControllerOptions::stats_rseq = false) every update takes the locked
// path.
//
// Pending-update bookkeeping: each update adds its magnitude (|delta|,
// normalised to pages for byte and KiB items, sub-page updates rounded up
// to 1) to the CPU residue of the group and each ancestor, stopping at the
// first one already over its threshold; a residue reaching `batch` moves
// into the group's atomic `updates` (the only shared write, once per
// batch). A flush of (group, CPU) folds the state, then subtracts exactly
// what that CPU moved into `updates` and clears the residue, so counts
// never go below the unflushed work (see StatErrorBound in stats.h).
// Readers flush when `updates` plus the residues passes batch x nr_cpus.
//
// Blocks: a block is taken from its CPU's pool on the group's first
// (locked) update there, and returned when the group is freed. Pools are
// refilled off the hot path (group creation; the flusher thread, woken
// when a pool runs dry; reader flushes when there is no flusher thread): the
// hot path never allocates (the LD_PRELOAD interposer charges from inside
// malloc). An empty pool sends the update to the direct path and asks for a
// larger refill.
//
// Flushing (FlushSubtree): per CPU where the group has a linked block,
// under the flush lock and that shard's lock (fenced), unlink the subtree's
// updated nodes (children before parents) and fold each.
//
// Thread safety: Update and the readers are safe from any thread;
// FlushSubtree serialises on flush_mu_.

#ifndef UMEMCG_SRC_RSTAT_H_
#define UMEMCG_SRC_RSTAT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "port/cpu.h"
#include "port/per_cpu.h"
#include "port/rseq.h"
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
  // that did not count here. Release: a flusher that reads the bump (with
  // acquire) also sees the updated-tree link the update made before it.
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

struct StatShard;

// One (group, CPU) block; the item array follows it in memory. Every field
// is guarded by that CPU's StatShard lock (see the file comment for the
// rseq sequences, which check the lock). Atomics where something reads
// them without the lock; relaxed accesses, ordered by the lock and the
// rseq protocol unless noted. The first two fields are the rseq fast
// path's (RseqPerCpuAdd reads them by offset).
struct alignas(kCacheLineSize) StatCpu {
  // The shard's pass_epoch when an update of this group on this CPU last
  // recorded a stop here (StopCount; kGlobalWholeTree: the global stop).
  std::atomic<uint64_t> stopped_epoch{0};
  StatShard* shard = nullptr;  // this block's CPU shard (set when taken)
  // The shard's pass_epoch when the locked path last saw this block
  // linked.
  std::atomic<uint64_t> linked_epoch{0};
  // Read without the lock by the error-bound reader. Release by the
  // flusher's clear (pairs with the reader's acquire: a cleared residue
  // implies the aggregate already holds the flushed deltas).
  std::atomic<uint64_t> residue{0};
  GroupStats* owner = nullptr;
  // Updated tree (kernel: updated_next / updated_children). updated_next:
  // null = not linked; the root links to itself. Read without the shard
  // lock (under the flush lock) by FlushSubtree to skip clean CPUs. While
  // the block waits in a pool it links the pool's free list instead.
  // updated_children: self-terminated singly linked list of children.
  std::atomic<StatCpu*> updated_next{nullptr};
  StatCpu* updated_children = this;
  uint64_t chunked = 0;  // moved into owner->updates_ since flush

  int64_t* state() { return reinterpret_cast<int64_t*>(this + 1); }
  bool linked() const {
    return updated_next.load(std::memory_order_relaxed) != nullptr;
  }
};
static_assert(sizeof(StatCpu) == kCacheLineSize);

// The per-group part (one per Group, owned by it). One allocation: this
// object (one cache line), then aggregate[], local[] and pending[]
// (nr_items each), then the block pointers (one per CPU shard). Not
// cache-line aligned, to keep the footprint small (docs/design.md,
// Footprint): the hot path's read-mostly words share the line with the
// shared count, which updates write once per batch below the threshold
// (a hot group sits over it) and flushes once per pass.
class GroupStats {
 public:
  static GroupStats* Create(Rstat* rstat, GroupStats* parent);
  // Returns the blocks to their pools. REQUIRES: unlinked everywhere (a
  // FlushSubtree of the group after its last update).
  static void Destroy(GroupStats* g);
  GroupStats(const GroupStats&) = delete;
  GroupStats& operator=(const GroupStats&) = delete;

  size_t nr_items() const { return static_cast<uint32_t>(limits_); }
  // The hot path: adds `delta` to item `i` of this group on this CPU;
  // true. REQUIRES: i < nr_items().
  inline bool Update(size_t i, int64_t delta);

  // This group's block on shard k; null if it never updated there.
  // Installed once (release, by Link under the shard lock) and then
  // constant. Acquire, pairing with that release: the block may have been
  // constructed by a third thread (the flusher's pool refill), and a
  // reader holding neither the shard lock nor any other order with the
  // installer (a flush deciding whether to take the lock, the error-bound
  // reader, the rseq slow path) must see that construction before the
  // block's fields. On x86-64 it is the same instruction as a relaxed
  // load; the rseq fast path reads the pointer in its own sequence.
  StatCpu* block(int k) const {
    return blocks_[k].load(std::memory_order_acquire);
  }
  GroupStats* parent() const { return parent_; }
  int64_t aggregate(size_t i) const {
    // Relaxed: an independent statistic; see StatErrorBound for the lag.
    return aggregate_array()[i].load(std::memory_order_relaxed);
  }
  int64_t local(size_t i) const {
    return local_array()[i].load(std::memory_order_relaxed);
  }
  uint64_t updates() const {
    // Acquire: pairs with the flusher's release decrement, so a smaller
    // count implies the aggregate already holds what was subtracted.
    return updates_.load(std::memory_order_acquire);
  }

  // Bytes of one GroupStats allocation (see docs/design.md, Footprint).
  static size_t AllocationSize(int nr_shards, size_t nr_items);

 private:
  friend class Rstat;
  GroupStats(Rstat* rstat, GroupStats* parent, int nr_shards, size_t nr_items);
  ~GroupStats() = default;

  std::atomic<int64_t>* aggregate_array() const {
    return reinterpret_cast<std::atomic<int64_t>*>(
        const_cast<GroupStats*>(this) + 1);
  }
  std::atomic<int64_t>* local_array() const {
    return aggregate_array() + nr_items();
  }
  int64_t* pending() const {  // guarded by Rstat::flush_mu_
    return reinterpret_cast<int64_t*>(aggregate_array() + 2 * nr_items());
  }

  // Read-mostly.
  Rstat* const rstat_;
  GroupStats* const parent_;
  // nr_items in the low half; in the high half the number of CPU shards
  // when the hot path commits through rseq, else 0 (so the sequence finds
  // no block).
  const uint64_t limits_;
  std::atomic<StatCpu*>* blocks_;

  // Written by chunk moves and flushes, read by the counting path's
  // threshold check.
  std::atomic<uint64_t> updates_{0};
  // Stops of the count at this group or below it (see StopRecord): while
  // one is not covered by a finished flush of this subtree, readers get no
  // bound and flush.
  StopRecord stops_;
  std::atomic<int64_t> last_flush_ns_{0};
};
static_assert(sizeof(GroupStats) == kCacheLineSize);

// One CPU's stats lock, flush epoch and (kGlobalWholeTree) global residue.
struct StatShard {
  TryLock lock;
  std::atomic<bool> flusher_waiting{false};
  // Guarded by `lock` (read by the rseq add): incremented by every flush
  // pass over this shard, so an update knows whether a flush passed this
  // CPU since a stop was recorded or a block was seen linked.
  std::atomic<uint64_t> pass_epoch{1};
  // lock: as StatCpu::stopped_epoch, for the global count.
  std::atomic<uint64_t> global_stopped_epoch{0};
  std::atomic<uint64_t> global_residue{0};  // like StatCpu::residue
  uint64_t global_chunked = 0;              // lock
  // Updates that took this lock (the locked path and locked counts): a
  // statistic for tests and benchmarks. Written under the lock (relaxed
  // load + store, no RMW), read without it.
  std::atomic<uint64_t> locked_updates{0};

  void NoteLocked() {  // REQUIRES: lock held
    locked_updates.store(locked_updates.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
  }
};

// One CPU's pool of free blocks (a line of its own: refills from other
// threads write it). Pushed lock-free by anyone; popped only by the holder
// of that CPU's shard lock, so a pop never races another pop (no ABA).
struct StatPool {
  std::atomic<StatCpu*> head{nullptr};
  // Blocks in the list (approximate while pushes and pops race).
  std::atomic<int64_t> size{0};
  // The refill level; raised (up to kPoolMax) after the pool ran dry: at
  // least doubled, and by what was missed. Halved (down to kPoolInitial)
  // by each periodic flush that saw no such demand since the last.
  std::atomic<int64_t> target{0};
  std::atomic<int64_t> missed{0};   // pops that found the pool empty
  std::atomic<bool> demand{false};  // raised since the last trim
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
    // Commit the hot path with rseq where the CPU source allows it.
    bool rseq = true;
    // Run by the flusher thread after each periodic flush, outside every
    // Rstat lock (the controller reaps dying groups there).
    std::function<void()> after_periodic_flush;
  };
  // Pool levels per CPU: refilled below kPoolLow, to the pool's target
  // (kPoolInitial, raised after running dry, at most kPoolMax, decaying
  // when idle); blocks beyond 2 x target go back to the allocator.
  static constexpr int64_t kPoolLow = 4;
  static constexpr int64_t kPoolInitial = 8;
  static constexpr int64_t kPoolMax = 1 << 16;

  Rstat(const CpuIdSource* cpu, Options options);
  ~Rstat();  // stops the flusher, frees the pools
  Rstat(const Rstat&) = delete;
  Rstat& operator=(const Rstat&) = delete;

  size_t nr_items() const { return nr_items_; }
  StatUnit unit(size_t i) const { return units_[i]; }
  uint64_t threshold() const { return threshold_; }
  StatsFlushMode mode() const { return mode_; }
  int nr_shards() const { return shards_.size(); }
  // True when the hot path commits through rseq (see the file comment).
  bool rseq() const { return rseq_; }
  // Bytes of one StatCpu block with its items (cache-line aligned).
  size_t block_size() const { return block_size_; }
  // ControllerOptions::stats_update_early_stop = false: every update counts
  // at every ancestor (the per-level walk without the early stop; for
  // benchmarks). REQUIRES: called before any update.
  void DisableEarlyStop() { early_stop_ = false; }

  // The rest of GroupStats::Update when the fast sequence did not commit;
  // true.
  bool UpdateSlow(GroupStats* g, size_t i, int64_t delta);

  // True if a reader of `g` should flush: the pending updates of its
  // subtree (kGlobalWholeTree: of the tree), per-CPU residues included,
  // pass the threshold, or a stop is not yet covered by a flush.
  bool NeedsFlush(const GroupStats* g) const;
  // Flushes `g`'s subtree (kGlobalWholeTree: the whole tree) if needed.
  void FlushIfNeeded(GroupStats* g);
  // Flushes `g`'s subtree unconditionally. Per CPU where `g` has a linked
  // block: takes the flush lock and the shard lock for one pass over the
  // subtree's dirty groups.
  void FlushSubtree(GroupStats* g);
  // Flushes if the last flush of the root is older than 2 periods
  // (kernel: flush_ratelimited).
  void FlushRatelimited(GroupStats* g);

  StatErrorBound Bound(const GroupStats* g) const;

  // The periodic flusher: flushes `root` every period (0: never), and
  // refills the pools when an update found one empty. Start once; Stop
  // joins the thread (idempotent).
  void StartFlusher(GroupStats* root);
  void StopFlusher();

  // Fork handling (the controller's, see port/fork.h): the flush mutex and
  // every shard lock are taken before fork and released after it. The
  // child has no flusher thread: its copy of the thread object is
  // forgotten (never joined) and a new flusher starts on the child's first
  // flush or flushing read (FlushSubtree, FlushIfNeeded,
  // FlushRatelimited), not in the handler, so a child that only execs
  // pays nothing. With rseq commits the child also records a stop of every
  // count (fork_stops_): another thread of the parent may have been
  // between an add and its count.
  void PrepareFork();
  void ParentAfterFork();
  void ChildAfterFork();

  // Refills the CPU pools that asked for it (cheap when none did). Off
  // the hot path only: allocates.
  void MaybeRefillPools();

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
  // Updates (or their counts) that took a shard lock; with rseq commits
  // only the first update of a group on a CPU after a flush pass, chunk
  // moves and unrecorded stops should.
  uint64_t locked_updates() const;
  // Updates sent to the direct path because a pool was empty.
  uint64_t pool_misses() const {
    return pool_misses_.load(std::memory_order_relaxed);
  }
  // Blocks allocated and not freed: in pools or installed in groups.
  int64_t blocks_allocated() const {
    return blocks_allocated_.load(std::memory_order_relaxed);
  }
  // Blocks waiting in the pools.
  int64_t pooled_blocks() const;

 private:
  friend class GroupStats;
  friend class StatsTestPeer;  // tests: shard locks, pools

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
    // only); the stop records, not this read, keep the bound exact.
    return g->updates_.load(std::memory_order_relaxed) > threshold_;
  }

  // The locked path of Update (see the file comment); true.
  bool UpdateLocked(GroupStats* g, size_t i, int64_t delta);
  // The rseq part of UpdateSlow, falling back to UpdateLocked; true.
  bool UpdateRseq(GroupStats* g, size_t i, int64_t delta);
  // After an rseq add with `linked_epoch` as the guard: counts the update
  // per level with rseq stores guarded by `pass_epoch` keeping the value
  // the block's linked_epoch has, else under the lock (CountLocked).
  void CountRseq(GroupStats* g, size_t i, int64_t delta, uint32_t cpu);
  // Counts an update of `g` already added on shard k, from level `from`
  // (null: kGlobalWholeTree's global count) under the shard lock; when the
  // lock is busy records a stop instead. When a pass unlinked g's block
  // meanwhile, counts from the lowest level at or above `from` still
  // linked on k (the global count: if the root is linked on k), where the
  // folded update may still wait (invariant 3 in rstat.cc).
  void CountLocked(GroupStats* g, GroupStats* from, int k, uint64_t m);
  // REQUIRES: shard k locked. Counts from `from` up.
  void CountUpdate(GroupStats* from, int k, uint64_t m) {
    for (GroupStats* a = from; a != nullptr; a = a->parent_) {
      if (early_stop_ && OverThreshold(a)) {
        StopCount(a, k);
        return;
      }
      StatCpu* c = a->block(k);
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
  // REQUIRES: shard of `sh` locked. True when the update stopped with its
  // stop recorded this epoch.
  bool CountGlobal(StatShard& sh, uint64_t m);
  // Records that an update on shard k stopped counting at `a` (over its
  // threshold) in `a` and its ancestors, unless this CPU did so since the
  // last flush pass over shard k. REQUIRES: shard k locked.
  void StopCount(GroupStats* a, int k);
  // The same without the lock (so without the once-per-pass saving).
  void StopUnlocked(GroupStats* from);
  // Installs blocks (from shard k's pool) for `g` and its ancestors where
  // missing and links (g, k) into CPU k's updated tree. False when the
  // pool ran dry (nothing linked). REQUIRES: shard k locked. Kernel:
  // css_rstat_updated().
  bool Link(GroupStats* g, int k);
  void UpdateDirect(GroupStats* g, size_t i, int64_t delta);
  // After a pool ran dry: wakes the flusher thread to refill (once until
  // it has). Not under a shard lock (a futex wake may be a system call).
  void WakeRefiller();
  // A flusher thread runs (or is restarted after a fork): StartFlusher
  // was given the root and the period is positive. Then it, not readers,
  // refills the pools.
  bool HasFlusherThread() const {
    return root_ != nullptr && period_.count() > 0;
  }

  // Pools. PopBlock REQUIRES shard k locked; null when empty.
  StatCpu* PopBlock(int k);
  void PushBlock(int k, StatCpu* b);
  void RefillPool(int k);
  // The periodic flusher: halves the targets of pools that saw no demand
  // since the last call and frees the blocks beyond twice the target.
  void TrimPools();
  StatCpu* NewBlock();
  void DeleteBlock(StatCpu* b);

  // Unlinks the updated subtree of (g, k), children first. REQUIRES:
  // shard k locked.
  void CollectUpdated(StatCpu* c, std::vector<StatCpu*>* out);
  // The per-(group, CPU) flush callback: folds and resets the block's
  // deltas. REQUIRES: flush_mu_ and shard k locked (fenced).
  void FlushOne(StatCpu* c);
  // Updates of g's subtree not yet flushed (residues, then the count).
  // `exceeded`: the count is over the threshold or a stop is uncovered.
  uint64_t Pending(const GroupStats* g, bool* exceeded) const;
  // `next`: when the first flush is due.
  void FlusherMain(std::chrono::nanoseconds next);
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
  const std::function<void()> after_periodic_flush_;
  Clock* const clock_;
  const bool rseq_;
  const uint32_t nr_shards_;
  const size_t block_size_;
  bool early_stop_ = true;  // set before any update, then read-only
  mutable PerCpu<StatShard> shards_;
  PerCpu<StatPool> pools_;
  // Set when a pool fell below kPoolLow (relaxed: a hint; the refill
  // re-reads every pool's size).
  std::atomic<bool> refill_wanted_{false};
  // Set (relaxed, a hint) by an update that found its pool empty, to wake
  // the flusher thread for a refill now rather than at its next period;
  // cleared by the flusher. Set without flusher_mu_, so a wake can be
  // missed: the period bounds the delay.
  std::atomic<bool> refill_woken_{false};

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
  // A stop of every count, recorded in a fork child (ChildAfterFork) and
  // cleared by the first whole-tree flush that started after it.
  StopRecord fork_stops_;
  GroupStats* root_ = nullptr;

  std::atomic<uint64_t> flush_callbacks_{0};
  std::atomic<uint64_t> periodic_flushes_{0};
  std::atomic<uint64_t> direct_updates_{0};
  std::atomic<uint64_t> pool_misses_{0};
  std::atomic<int64_t> blocks_allocated_{0};

  // The periodic flusher thread.
  std::mutex flusher_mu_;
  std::condition_variable flusher_cv_;
  bool stop_ = false;  // guarded by flusher_mu_
  std::thread flusher_;
  // A fork child whose parent ran a flusher: start one (see PrepareFork).
  std::atomic<bool> restart_flusher_{false};
};

inline bool GroupStats::Update(size_t i, int64_t delta) {
#if UMEMCG_HAVE_RSEQ_COMMIT
  // The stop recorded this epoch covers the update: the add is all.
  // Without rseq commits the limit is 0: no sequence (the try-lock path
  // would pay for a failing one).
  const auto limit = static_cast<uint32_t>(limits_ >> 32);
  if (limit != 0 &&
      RseqPerCpuAdd<offsetof(StatCpu, shard), 0,
                    offsetof(StatShard, pass_epoch),
                    offsetof(StatCpu, stopped_epoch), sizeof(StatCpu)>(
          reinterpret_cast<const void* const*>(blocks_), limit, i, delta)) {
    return true;
  }
#endif
  return rstat_->UpdateSlow(this, i, delta);
}

// Validates `custom` (kInvalidArgument naming the first bad spec) and fills
// the names and units of every item: the built-in ones, then `custom`.
Status BuildStatTable(const std::vector<StatItemSpec>& custom,
                      std::vector<std::string>* names,
                      std::vector<StatUnit>* units);

}  // namespace internal
}  // namespace umemcg

#endif  // UMEMCG_SRC_RSTAT_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The accounting designs of other systems, as variants of the sendfile,
// kmem and multitenant scenarios, so their trade-off against umemcg's
// per-CPU stock is measured side by side rather than claimed:
//
//   per-thread        ClickHouse's MemoryTracker: each thread keeps the
//                     bytes it allocated or freed but did not report yet
//                     ("untracked", per thread, for the tracker the thread
//                     is attached to) and adds them to the tracker and each
//                     of its parents (one atomic add per level) only when
//                     they pass +-4 MiB, or when the thread switches to
//                     another tracker. Fast, but every thread may hide up
//                     to 4 MiB in either direction: the worst-case error is
//                     threads x 4 MiB.
//   per-leaf-quantum  Velox's MemoryPool: a leaf pool counts its used bytes
//                     under its mutex and reserves from its parent in 1 MiB
//                     quanta (each ancestor a counter under its own mutex),
//                     releasing whole quanta when the reservation exceeds
//                     the used bytes rounded up by one. Slack per leaf is
//                     under 2 MiB, but every charge and uncharge takes the
//                     leaf's mutex, shared by every thread using the leaf.
//
// Both have the same interface as the scenarios' other accountants
// (socket_model.h): Charge(pages) / Uncharge(pages), and for objects
// ChargeBytes / UnchargeBytes. Neither keeps per-group statistics (umemcg's
// variants also move the `sock` / slab statistics).
//
// Slack. SlackBytes() is |what the design has accounted - what is in use|
// once the caller has freed everything: the stocks' pages for umemcg (the
// scenarios read usage after the run), the untracked bytes of every thread
// here, the leaf reservations for the quantum pools. Settle() then returns
// it, so a run can check that every counter is back to zero.
//
// Thread safety: the accountants are copied into each thread; the shared
// state (trackers, pools, the per-thread slots) is safe from any thread.
// Settle and SlackBytes only at quiescence.

#ifndef UMEMCG_BENCH_UMEMCG_BENCH_PEERS_H_
#define UMEMCG_BENCH_UMEMCG_BENCH_PEERS_H_

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "umemcg/units.h"

namespace umemcg::bench {

// ---- per-thread (ClickHouse MemoryTracker) ----

inline constexpr int64_t kUntrackedLimit = 4 << 20;  // 4 MiB

// A chain of trackers (query -> user -> total in ClickHouse): each an atomic
// byte count on its own cache line.
class TrackerChain {
 public:
  struct alignas(64) Tracker {
    std::atomic<int64_t> bytes{0};
    Tracker* parent = nullptr;
  };
  // `levels` trackers; level 0 is the top. leaf(k) for k leaves below the
  // last shared level (multitenant: one per tenant).
  TrackerChain(int levels, int leaves) {
    for (int i = 0; i < levels; ++i) {
      shared_.push_back(std::make_unique<Tracker>());
      if (i > 0) shared_[i]->parent = shared_[i - 1].get();
    }
    for (int k = 0; k < leaves; ++k) {
      leaves_.push_back(std::make_unique<Tracker>());
      leaves_.back()->parent = shared_.empty() ? nullptr : shared_.back().get();
    }
  }
  Tracker* leaf(int k) { return leaves_[static_cast<size_t>(k)].get(); }
  // True when every tracker reads zero.
  bool Balanced() const {
    for (const auto& t : shared_) {
      if (t->bytes.load() != 0) return false;
    }
    for (const auto& t : leaves_) {
      if (t->bytes.load() != 0) return false;
    }
    return true;
  }

 private:
  std::vector<std::unique_ptr<Tracker>> shared_;
  std::vector<std::unique_ptr<Tracker>> leaves_;
};

// The threads' untracked bytes, one padded slot per thread that used it.
class UntrackedSlots {
 public:
  struct alignas(64) Slot {
    int64_t bytes = 0;
    TrackerChain::Tracker* tracker = nullptr;
  };
  explicit UntrackedSlots(int max_threads)
      : slots_(new Slot[static_cast<size_t>(max_threads)]),
        max_(max_threads),
        id_(NextId()) {}

  // The calling thread's slot (claimed on its first use). Cached per
  // thread by the object's id: a later object at the same address is a
  // different one.
  Slot& Mine() {
    thread_local uint64_t owner = 0;
    thread_local Slot* slot = nullptr;
    if (owner != id_) {
      const int i = next_.fetch_add(1);
      if (i >= max_) std::abort();  // more threads than announced
      owner = id_;
      slot = &slots_[static_cast<size_t>(i)];
    }
    return *slot;
  }
  static void Flush(Slot& s) {
    for (auto* t = s.tracker; t != nullptr; t = t->parent) {
      // Relaxed: independent counters (ClickHouse uses relaxed adds too).
      t->bytes.fetch_add(s.bytes, std::memory_order_relaxed);
    }
    s.bytes = 0;
  }
  void Track(TrackerChain::Tracker* t, int64_t bytes) {
    Slot& s = Mine();
    if (s.tracker != t) {  // attaching to another tracker flushes
      Flush(s);
      s.tracker = t;
    }
    s.bytes += bytes;
    if (s.bytes > kUntrackedLimit || s.bytes < -kUntrackedLimit) Flush(s);
  }
  // Quiescent: the sum of |untracked| over the threads, then flushes all.
  uint64_t SlackBytes() const {
    uint64_t total = 0;
    for (int i = 0; i < next_.load(); ++i) {
      total += static_cast<uint64_t>(std::llabs(slots_[i].bytes));
    }
    return total;
  }
  void Settle() {
    for (int i = 0; i < next_.load(); ++i) Flush(slots_[i]);
  }
  int threads() const { return next_.load(); }

 private:
  static uint64_t NextId() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1);
  }

  std::unique_ptr<Slot[]> slots_;
  const int max_;
  const uint64_t id_;
  std::atomic<int> next_{0};
};

struct PerThreadAccountant {
  UntrackedSlots* slots;
  TrackerChain::Tracker* tracker;
  bool Charge(uint64_t pages) {
    if (pages != 0) ChargeBytes(pages * kPageSize);
    return true;
  }
  void Uncharge(uint64_t pages) {
    if (pages != 0) UnchargeBytes(pages * kPageSize);
  }
  bool ChargeBytes(uint64_t bytes) {
    slots->Track(tracker, static_cast<int64_t>(bytes));
    return true;
  }
  void UnchargeBytes(uint64_t bytes) {
    slots->Track(tracker, -static_cast<int64_t>(bytes));
  }
};

// ---- per-leaf-quantum (Velox MemoryPool) ----

inline constexpr int64_t kQuantum = 1 << 20;  // 1 MiB

class QuantumPools {
 public:
  struct alignas(64) Pool {
    std::mutex mu;
    int64_t used = 0;      // leaf: bytes in use
    int64_t reserved = 0;  // bytes reserved from the parent
    Pool* parent = nullptr;
  };
  // `levels` shared ancestor pools (level 0 the root) and `leaves` leaves.
  QuantumPools(int levels, int leaves) {
    for (int i = 0; i < levels; ++i) {
      shared_.push_back(std::make_unique<Pool>());
      if (i > 0) shared_[i]->parent = shared_[i - 1].get();
    }
    for (int k = 0; k < leaves; ++k) {
      leaves_.push_back(std::make_unique<Pool>());
      leaves_.back()->parent = shared_.empty() ? nullptr : shared_.back().get();
    }
  }
  Pool* leaf(int k) { return leaves_[static_cast<size_t>(k)].get(); }

  static void Charge(Pool* leaf, int64_t bytes) {
    std::lock_guard<std::mutex> lock(leaf->mu);
    leaf->used += bytes;
    if (leaf->used > leaf->reserved) {
      const int64_t grow = RoundUp(leaf->used - leaf->reserved);
      Reserve(leaf->parent, grow);
      leaf->reserved += grow;
    }
  }
  static void Uncharge(Pool* leaf, int64_t bytes) {
    std::lock_guard<std::mutex> lock(leaf->mu);
    leaf->used -= bytes;
    const int64_t keep = RoundUp(leaf->used);
    if (leaf->reserved - keep >= kQuantum) {
      Reserve(leaf->parent, -(leaf->reserved - keep));
      leaf->reserved = keep;
    }
  }
  // Quiescent: reserved - used over the leaves; then releases it all.
  uint64_t SlackBytes() const {
    uint64_t total = 0;
    for (const auto& l : leaves_) {
      total += static_cast<uint64_t>(l->reserved - l->used);
    }
    return total;
  }
  void Settle() {
    for (const auto& l : leaves_) {
      Reserve(l->parent, -l->reserved);
      l->reserved = 0;
    }
  }
  bool Balanced() const {
    for (const auto& p : shared_) {
      if (p->reserved != 0) return false;
    }
    for (const auto& l : leaves_) {
      if (l->reserved != 0 || l->used != 0) return false;
    }
    return true;
  }

 private:
  static int64_t RoundUp(int64_t b) {
    return (b + kQuantum - 1) / kQuantum * kQuantum;
  }
  // Each ancestor's reservation, under its own mutex (the child's held).
  static void Reserve(Pool* p, int64_t bytes) {
    for (; p != nullptr; p = p->parent) {
      std::lock_guard<std::mutex> lock(p->mu);
      p->reserved += bytes;
    }
  }

  std::vector<std::unique_ptr<Pool>> shared_;
  std::vector<std::unique_ptr<Pool>> leaves_;
};

struct QuantumAccountant {
  QuantumPools::Pool* leaf;
  bool Charge(uint64_t pages) {
    if (pages != 0) ChargeBytes(pages * kPageSize);
    return true;
  }
  void Uncharge(uint64_t pages) {
    if (pages != 0) UnchargeBytes(pages * kPageSize);
  }
  bool ChargeBytes(uint64_t bytes) {
    QuantumPools::Charge(leaf, static_cast<int64_t>(bytes));
    return true;
  }
  void UnchargeBytes(uint64_t bytes) {
    QuantumPools::Uncharge(leaf, static_cast<int64_t>(bytes));
  }
};

}  // namespace umemcg::bench

#endif  // UMEMCG_BENCH_UMEMCG_BENCH_PEERS_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// RangeTable: the private anonymous mappings the preload tracks, as
// disjoint page-aligned address ranges, each either owned (charged to the
// group it holds a reference to) or only reserved (PROT_NONE or read-only,
// not charged until made writable). Kernel counterpart: the VM_ACCOUNT
// flag of the process's VMAs (mm/mmap.c, mm/mprotect.c, mm/mremap.c).
//
// An owned piece carries the pages charged for it: all of its pages when
// mappings are charged at mmap (UMEMCG_MAP_CHARGE=at-mmap), or its
// resident pages as last counted (UMEMCG_MAP_CHARGE=resident; the counter
// given to set_resident_counter, mincore()). The table's charged total is
// always the sum of its pieces' charges: splitting a piece divides its
// charge between the halves (by their resident pages when a counter is
// set), so what Remove hands back is exactly what was charged.
//
// Memory. Nodes come from a free list carved out of pages mapped with the
// raw mmap system call, never from malloc (the table is used inside the
// hooks) and never returned: the table's footprint is its peak node count
// times ~100 bytes, in 64 KiB steps.
//
// Thread safety: none of its own. mmap_hooks.cc holds its mutex around
// every call, across the system call it accounts for, so the table and the
// address space change together; the fork handlers take that mutex so a
// child inherits a consistent table.

#ifndef UMEMCG_SRC_PRELOAD_RANGE_TABLE_H_
#define UMEMCG_SRC_PRELOAD_RANGE_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <map>

#include "umemcg/group.h"

#pragma GCC visibility push(hidden)

namespace umemcg::preload {

// An allocator for the table's nodes: fixed-size cells from raw-mmap'd
// slabs. Stateless (one pool per node size, process-wide).
void* PoolAllocate(size_t bytes);
void PoolFree(void* p, size_t bytes);

template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) {}  // NOLINT: rebinding
  T* allocate(size_t n) { return static_cast<T*>(PoolAllocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { PoolFree(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const PoolAllocator<U>&) const {
    return true;
  }
};

// The resident pages of [start, end) (page-aligned), by mincore(); pages
// of any part that is not mapped count as not resident.
uint64_t CountResidentPages(uintptr_t start, uintptr_t end);

class RangeTable {
 public:
  struct Range {
    uintptr_t end;
    GroupRef owner;    // null: reserved, not charged
    uint64_t charged;  // pages charged to owner (0 when reserved)
  };

  // Counts the resident pages of [start, end) (page-aligned).
  using ResidentCounter = uint64_t (*)(uintptr_t start, uintptr_t end);

  // `charged` of Insert: every page of the range.
  static constexpr uint64_t kWhole = ~uint64_t{0};

  // Adds [start, end), which no entry overlaps, owned by `owner` (null:
  // reserved) with `charged` of its pages charged (kWhole: all).
  void Insert(uintptr_t start, uintptr_t end, GroupRef owner,
              uint64_t charged = kWhole);

  // Removes [start, end) from the table, splitting entries that straddle
  // its bounds; calls `charged(Group&, pages)` for each owned piece
  // removed, with the pages charged for it (perhaps 0), before dropping
  // the piece's reference.
  template <class Fn>
  void Remove(uintptr_t start, uintptr_t end, Fn&& charged) {
    SplitAt(start);
    SplitAt(end);
    auto it = map_.lower_bound(start);
    while (it != map_.end() && it->first < end) {
      Count(it->second, it->first, -1);
      if (it->second.owner) charged(*it->second.owner, it->second.charged);
      it = map_.erase(it);
    }
  }

  // Pages of [start, end) tracked and reserved / owned (whatever their
  // pieces' charge).
  uint64_t ReservedPages(uintptr_t start, uintptr_t end) const;
  uint64_t ChargedPages(uintptr_t start, uintptr_t end) const;
  // The first address in (at, end] where reserved pages begin or end
  // (`end` if none): [at, result) is all reserved or all not.
  uintptr_t NextReservedBoundary(uintptr_t at, uintptr_t end) const;
  // Marks every reserved piece of [start, end) owned by `owner`, with all
  // its pages charged (whole) or none (the resident mode).
  void ChargeReserved(uintptr_t start, uintptr_t end, const GroupRef& owner,
                      bool whole = true);

  // The resident mode: recounts every owned piece that overlaps [start,
  // end) (whole pieces) with the counter and calls
  // `settle(Group&, old_pages, resident_pages)`, which charges or
  // uncharges the difference and returns the piece's new charge (the
  // resident count, or what it could charge). Needs a counter.
  template <class Fn>
  void Recount(uintptr_t start, uintptr_t end, Fn&& settle) {
    auto it = map_.upper_bound(start);
    if (it != map_.begin()) --it;
    for (; it != map_.end() && it->first < end; ++it) {
      Range& r = it->second;
      if (!r.owner || r.end <= start) continue;
      const uint64_t now = resident_(it->first, r.end);
      if (now == r.charged) continue;
      const uint64_t set = settle(*r.owner, r.charged, now);
      charged_pages_ += set - r.charged;
      r.charged = set;
    }
  }
  // Sets the counter that divides a partly charged piece when it is split
  // and that Recount uses (null: divided by position, none for Recount).
  void set_resident_counter(ResidentCounter c) { resident_ = c; }

  // Splits the entry holding `addr` so that one starts there (nothing if
  // one does or none holds it). Done before an unmapping system call in
  // the resident mode, so the charge is divided while the pages can still
  // be counted.
  void Split(uintptr_t addr) { SplitAt(addr); }

  // The entry holding the page at `addr`, or null.
  const Range* Find(uintptr_t addr) const;

  // Moves the tracked pieces of [start, end) by `delta` bytes (mremap's
  // move; nothing is tracked at the destination).
  void Move(uintptr_t start, uintptr_t end, intptr_t delta);

  static constexpr uintptr_t kPage = 4096;

  // Pages charged for the owned pieces (the sum of their charges).
  uint64_t charged_pages() const { return charged_pages_; }
  uint64_t reserved_pages() const { return reserved_pages_; }
  uint64_t size() const { return map_.size(); }

 private:
  using Map = std::map<uintptr_t, Range, std::less<uintptr_t>,
                       PoolAllocator<std::pair<const uintptr_t, Range>>>;
  // Splits the entry containing `addr` (if any, and if addr is inside it)
  // so that an entry starts at `addr`.
  void SplitAt(uintptr_t addr);
  uint64_t PagesIn(uintptr_t start, uintptr_t end, bool charged) const;
  void Count(const Range& r, uintptr_t start, int sign);

  Map map_;  // start -> {end, owner, charged}
  ResidentCounter resident_ = nullptr;
  uint64_t charged_pages_ = 0;
  uint64_t reserved_pages_ = 0;
};

}  // namespace umemcg::preload

#pragma GCC visibility pop

#endif  // UMEMCG_SRC_PRELOAD_RANGE_TABLE_H_

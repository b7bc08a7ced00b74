// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// RangeTable: the private anonymous mappings the preload tracks, as
// disjoint page-aligned address ranges, each either charged (to the group
// it holds a reference to) or only reserved (PROT_NONE or read-only, not
// charged until made writable). Kernel counterpart: the VM_ACCOUNT flag of
// the process's VMAs (mm/mmap.c, mm/mprotect.c, mm/mremap.c).
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

class RangeTable {
 public:
  struct Range {
    uintptr_t end;
    GroupRef owner;  // null: reserved, not charged
  };

  // Adds [start, end), which no entry overlaps, charged to `owner` (null:
  // reserved).
  void Insert(uintptr_t start, uintptr_t end, GroupRef owner);

  // Removes [start, end) from the table, splitting entries that straddle
  // its bounds; calls `charged(Group&, pages)` for each charged piece
  // removed, before dropping the piece's reference.
  template <class Fn>
  void Remove(uintptr_t start, uintptr_t end, Fn&& charged) {
    SplitAt(start);
    SplitAt(end);
    auto it = map_.lower_bound(start);
    while (it != map_.end() && it->first < end) {
      Count(it->second, it->first, -1);
      if (it->second.owner) {
        charged(*it->second.owner, (it->second.end - it->first) / kPage);
      }
      it = map_.erase(it);
    }
  }

  // Pages of [start, end) tracked and not charged / charged.
  uint64_t ReservedPages(uintptr_t start, uintptr_t end) const;
  uint64_t ChargedPages(uintptr_t start, uintptr_t end) const;
  // The first address in (at, end] where reserved pages begin or end
  // (`end` if none): [at, result) is all reserved or all not.
  uintptr_t NextReservedBoundary(uintptr_t at, uintptr_t end) const;
  // Marks every reserved piece of [start, end) charged to `owner`.
  void ChargeReserved(uintptr_t start, uintptr_t end, const GroupRef& owner);

  // The entry holding the page at `addr`, or null.
  const Range* Find(uintptr_t addr) const;

  // Moves the tracked pieces of [start, end) by `delta` bytes (mremap's
  // move; nothing is tracked at the destination).
  void Move(uintptr_t start, uintptr_t end, intptr_t delta);

  static constexpr uintptr_t kPage = 4096;

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

  Map map_;  // start -> {end, owner}
  uint64_t charged_pages_ = 0;
  uint64_t reserved_pages_ = 0;
};

}  // namespace umemcg::preload

#pragma GCC visibility pop

#endif  // UMEMCG_SRC_PRELOAD_RANGE_TABLE_H_

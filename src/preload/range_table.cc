// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "preload/range_table.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>

namespace umemcg::preload {
namespace {

// One free list per cell size (the map allocates only its node type, so
// in practice one). Guarded by the table's mutex: every allocation and
// free happens inside a RangeTable call.
constexpr size_t kSlabBytes = 64 * 1024;
constexpr size_t kMaxCells = 4;

struct FreeCell {
  FreeCell* next;
};
struct Pool {
  size_t cell = 0;  // 0: unused
  FreeCell* free = nullptr;
};
Pool g_pools[kMaxCells];

Pool& PoolFor(size_t bytes) {
  for (Pool& p : g_pools) {
    if (p.cell == bytes) return p;
    if (p.cell == 0) {
      p.cell = bytes;
      return p;
    }
  }
  std::abort();  // more node sizes than a std::map has
}

}  // namespace

void* PoolAllocate(size_t bytes) {
  bytes = (bytes + 15) & ~size_t{15};
  Pool& pool = PoolFor(bytes);
  if (pool.free == nullptr) {
    // The raw system call: the mmap hook must not see its own table grow.
    void* slab = reinterpret_cast<void*>(
        syscall(SYS_mmap, nullptr, kSlabBytes, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (slab == MAP_FAILED) std::abort();  // out of address space
    char* base = static_cast<char*>(slab);
    for (size_t off = 0; off + bytes <= kSlabBytes; off += bytes) {
      auto* c = reinterpret_cast<FreeCell*>(base + off);
      c->next = pool.free;
      pool.free = c;
    }
  }
  FreeCell* c = pool.free;
  pool.free = c->next;
  return c;
}

void PoolFree(void* p, size_t bytes) {
  bytes = (bytes + 15) & ~size_t{15};
  Pool& pool = PoolFor(bytes);
  auto* c = static_cast<FreeCell*>(p);
  c->next = pool.free;
  pool.free = c;
}

uint64_t CountResidentPages(uintptr_t start, uintptr_t end) {
  // One byte per page, in chunks of 16 MiB of address space.
  constexpr uintptr_t kChunkPages = 4096;
  unsigned char vec[kChunkPages];
  uint64_t resident = 0;
  for (uintptr_t at = start; at < end;) {
    const uintptr_t n =
        std::min<uintptr_t>((end - at) / RangeTable::kPage, kChunkPages);
    if (syscall(SYS_mincore, at, n * RangeTable::kPage, vec) == 0) {
      for (uintptr_t i = 0; i < n; ++i) resident += vec[i] & 1;
    } else if (n > 1) {
      // Part of the chunk is not mapped (ENOMEM): page by page, so the
      // mapped part still counts.
      for (uintptr_t i = 0; i < n; ++i) {
        if (syscall(SYS_mincore, at + i * RangeTable::kPage, RangeTable::kPage,
                    vec) == 0) {
          resident += vec[0] & 1;
        }
      }
    }
    at += n * RangeTable::kPage;
  }
  return resident;
}

void RangeTable::Count(const Range& r, uintptr_t start, int sign) {
  const uint64_t pages = r.owner ? r.charged : (r.end - start) / kPage;
  uint64_t& counter = r.owner ? charged_pages_ : reserved_pages_;
  counter += sign > 0 ? pages : -pages;
}

void RangeTable::Insert(uintptr_t start, uintptr_t end, GroupRef owner,
                        uint64_t charged) {
  if (start >= end) return;
  const uint64_t pages = (end - start) / kPage;
  charged = !owner ? 0 : std::min(charged, pages);
  auto [it, inserted] =
      map_.emplace(start, Range{end, std::move(owner), charged});
  if (inserted) Count(it->second, start, +1);
}

void RangeTable::SplitAt(uintptr_t addr) {
  auto it = map_.upper_bound(addr);
  if (it == map_.begin()) return;
  --it;
  if (it->first >= addr || it->second.end <= addr) return;
  // [first, addr) stays; [addr, end) becomes its own entry, same owner.
  // The charge is divided: a whole piece's halves are whole; a partly
  // charged piece's head keeps what its resident pages account for (by
  // position without a counter), the tail the rest; neither more than
  // its size. The total stays what was charged.
  Range& r = it->second;
  const uint64_t head_pages = (addr - it->first) / kPage;
  const uint64_t tail_pages = (r.end - addr) / kPage;
  uint64_t head = 0;
  if (r.charged >= head_pages + tail_pages) {
    head = head_pages;
  } else if (r.charged > 0) {
    const uint64_t guess =
        resident_ != nullptr ? resident_(it->first, addr) : head_pages;
    head = std::min({r.charged, head_pages, guess});
    if (r.charged - head > tail_pages) head = r.charged - tail_pages;
  }
  Range tail{r.end, r.owner, r.charged - head};
  r.end = addr;
  r.charged = head;
  map_.emplace_hint(std::next(it), addr, std::move(tail));
}

uint64_t RangeTable::ReservedPages(uintptr_t start, uintptr_t end) const {
  return PagesIn(start, end, /*charged=*/false);
}

uint64_t RangeTable::ChargedPages(uintptr_t start, uintptr_t end) const {
  return PagesIn(start, end, /*charged=*/true);
}

uint64_t RangeTable::PagesIn(uintptr_t start, uintptr_t end,
                             bool charged) const {
  uint64_t pages = 0;
  auto it = map_.upper_bound(start);
  if (it != map_.begin()) --it;
  for (; it != map_.end() && it->first < end; ++it) {
    if (static_cast<bool>(it->second.owner) != charged) continue;
    const uintptr_t lo = std::max(it->first, start);
    const uintptr_t hi = std::min(it->second.end, end);
    if (hi > lo) pages += (hi - lo) / kPage;
  }
  return pages;
}

uintptr_t RangeTable::NextReservedBoundary(uintptr_t at, uintptr_t end) const {
  auto it = map_.upper_bound(at);
  if (it != map_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end > at && !prev->second.owner) {
      return std::min(prev->second.end, end);  // inside a reserved piece
    }
  }
  for (; it != map_.end() && it->first < end; ++it) {
    if (!it->second.owner) return it->first;  // the next one starts
  }
  return end;
}

void RangeTable::ChargeReserved(uintptr_t start, uintptr_t end,
                                const GroupRef& owner, bool whole) {
  SplitAt(start);
  SplitAt(end);
  for (auto it = map_.lower_bound(start); it != map_.end() && it->first < end;
       ++it) {
    if (it->second.owner) continue;
    Count(it->second, it->first, -1);
    it->second.owner = owner;
    it->second.charged = whole ? (it->second.end - it->first) / kPage : 0;
    Count(it->second, it->first, +1);
  }
}

const RangeTable::Range* RangeTable::Find(uintptr_t addr) const {
  auto it = map_.upper_bound(addr);
  if (it == map_.begin()) return nullptr;
  --it;
  return it->second.end > addr ? &it->second : nullptr;
}

void RangeTable::Move(uintptr_t start, uintptr_t end, intptr_t delta) {
  SplitAt(start);
  SplitAt(end);
  // Collected first: the destination may lie above or below the source.
  Map moved;
  auto it = map_.lower_bound(start);
  while (it != map_.end() && it->first < end) {
    Range r{it->second.end + delta, std::move(it->second.owner),
            it->second.charged};
    moved.emplace(it->first + delta, std::move(r));
    it = map_.erase(it);
  }
  map_.merge(moved);
}

}  // namespace umemcg::preload

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The interposed mapping functions of libumemcg-preload.so: mmap (and its
// alias mmap64), munmap, mremap, mprotect, pkey_mprotect, brk and sbrk.
// They charge private anonymous memory the way the kernel commits it under
// vm.overcommit_memory=2 (mm/mmap.c accountable_mapping, mm/mprotect.c
// mprotect_fixup, mm/mremap.c vma_to_resize): a writable private
// anonymous mapping is charged, in pages, when it is made (MAP_NORESERVE
// is ignored, as overcommit_memory=2 ignores it); a PROT_NONE or read-only
// one is a reservation, tracked but charged only once mprotect makes it
// writable; the charge stays until the pages are unmapped (munmap, a
// MAP_FIXED mapping over them, mremap shrinking or moving them), exactly.
// docs/preload.md says why commit rather than residency, and the error.
//
// The resident mode (UMEMCG_MAP_CHARGE=resident) charges the same
// mappings by their resident pages instead, as memcg charges a page when
// it is faulted in: a new writable mapping is charged nothing; a scanner
// thread recounts every owned piece with mincore() each period (and
// charges or uncharges the difference); munmap, mremap and madvise
// recount or uncharge the pieces they touch at once, and a refused heap
// charge recounts everything before it gives up (released pages give
// their charge back). The growth the scanner finds cannot be refused (the
// pages exist): it is charged past memory.max if need be, and under
// UMEMCG_ENFORCE the next mapping (mmap, mprotect to writable, mremap
// growth, sbrk) is refused with ENOMEM while the group is at or over its
// max, as heap charges are by the charge path itself.
//
// Not charged: file-backed and shared mappings (MAP_SHARED, memfd, SysV
// shm), MAP_HUGETLB, and everything mapped without these entry points:
// glibc's own malloc arenas and thread stacks (its internal __mmap; the
// malloc hooks charge the blocks instead), the dynamic loader, and
// syscall(SYS_mmap, ...) made by the program itself.
//
// The real work is the raw system call (glibc's wrappers are thin: the
// kernel makes the same checks), except brk/sbrk, which go through glibc's
// __sbrk so its idea of the break (__curbrk) stays right.
//
// Locking. One mutex guards the range table; an operation that changes
// mappings holds it across its system call, so the table and the address
// space change together (a munmap's range cannot be handed to another
// thread's mmap before its entries are gone). A non-fixed mmap maps first
// and takes the mutex only to charge and insert: the kernel hands out
// address ranges that no entry covers. Every charge or uncharge of a
// mapping is made under the mutex together with the table change it goes
// with, so the fork handlers, which take it, never let a child inherit
// one without the other. The charge path runs under the mutex (it never
// maps through these hooks: a thread inside umemcg passes straight
// through). A signal handler that maps memory while its thread holds the
// mutex would deadlock; mmap is not async-signal-safe.

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <new>

#include "preload/preload_internal.h"
#include "preload/range_table.h"

extern "C" void* __sbrk(intptr_t increment);

namespace umemcg::preload {
namespace {

pthread_mutex_t g_map_mu = PTHREAD_MUTEX_INITIALIZER;
// Constructed by InitMapTable (runtime start-up), never destroyed: the
// hooks run after static destructors too. Null until then: nothing is
// tracked before the runtime is up.
alignas(RangeTable) unsigned char g_table_storage[sizeof(RangeTable)];
std::atomic<RangeTable*> g_table{nullptr};
std::atomic<uint64_t> g_map_charge_failures{0};
// UMEMCG_MAP_CHARGE=resident, and the scanner's period. Set by
// InitMapTable before the table is published (the hooks read them after
// the acquire load of g_table), constant after.
bool g_resident = false;
uint64_t g_scan_period_ms = 100;
// The scanner thread of this process was started (a forked child has
// none: reset by MapForkChild). Relaxed loads: a flag tested before the
// exchange that decides.
std::atomic<bool> g_scanner_started{false};
// Resident growth charged past a refusal (statistic; relaxed).
std::atomic<uint64_t> g_resident_forced{0};

class MapLock {
 public:
  MapLock() { pthread_mutex_lock(&g_map_mu); }
  ~MapLock() { pthread_mutex_unlock(&g_map_mu); }
  MapLock(const MapLock&) = delete;
  MapLock& operator=(const MapLock&) = delete;
};

uintptr_t PageAlign(uintptr_t x) {
  static const uintptr_t page = getauxval(AT_PAGESZ) ?: 4096;
  return (x + page - 1) & ~(page - 1);
}

void StartScanner();

// The table when mappings are tracked, else null (before the runtime is
// up, or on a thread inside umemcg).
RangeTable* Table() {
  if (tls_state.in_hook != 0) return nullptr;
  RangeTable* t = g_table.load(std::memory_order_acquire);
  if (t != nullptr && g_resident) StartScanner();
  return t;
}

// The group a new mapping of this thread is charged to (empty: nothing).
GroupRef OwnerGroup() {
  ObjCgroup* objcg = CurrentOwner();
  if (objcg == nullptr) return GroupRef();
  // The objcg is pinned for the process's life (runtime.cc); its current
  // group (the origin, or its nearest live ancestor after a removal) is
  // valid while it is.
  return GroupRef(objcg->group());
}

bool ChargePages(Group& g, uint64_t pages, ChargeFlags flags) {
  if (pages == 0) return true;
  HookGuard guard;
  if (g.TryCharge(Pages(pages), flags, kMapItem).ok()) return true;
  // Relaxed: a statistic for the report.
  g_map_charge_failures.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void UnchargePages(Group& g, uint64_t pages) {
  if (pages == 0) return;
  HookGuard guard;
  g.UnchargeDirect(Pages(pages), kMapItem);
}

void Untrack(RangeTable& t, uintptr_t start, uintptr_t end) {
  t.Remove(start, end,
           [](Group& g, uint64_t pages) { UnchargePages(g, pages); });
}

// ---- The resident mode ----

// A piece's charge settled against its resident pages (under the mutex):
// growth is charged with the hooks' flags and, if refused, past the limit
// (the pages exist); a fall is uncharged.
uint64_t SettleResident(Group& g, uint64_t old, uint64_t now) {
  if (now < old) {
    UnchargePages(g, old - now);
    return now;
  }
  // Not a refused allocation (charge_failures): the pages exist.
  HookGuard guard;
  const Pages grow(now - old);
  if (!g.TryCharge(grow, g_charge_flags, kMapItem).ok()) {
    // Relaxed: a statistic.
    g_resident_forced.fetch_add(1, std::memory_order_relaxed);
    (void)g.TryCharge(grow, kSettleFlags, kMapItem);
  }
  return now;
}

// Recounts the owned pieces overlapping [start, end) (under the mutex).
void Recount(RangeTable& t, uintptr_t start, uintptr_t end) {
  HookGuard guard;  // mincore's errors leave errno alone
  t.Recount(start, end, SettleResident);
}

// Before an unmapping system call (under the mutex): the pieces are split
// where the call ends while their pages can still be counted.
void SplitFor(RangeTable& t, uintptr_t start, uintptr_t end) {
  if (!g_resident) return;
  HookGuard guard;
  t.Split(start);
  t.Split(end);
}

// Whether `g` and its ancestors are below their max (or nothing is
// enforced): the resident mode admits a new writable mapping only then.
// Recounts everything first when over (released pages give their charge
// back). Under the mutex.
bool Admit(RangeTable& t, Group& g) {
  if (!g_enforce) return true;
  auto over = [&g] {
    for (const Group* p = &g; p != nullptr; p = p->parent()) {
      if (p->usage() >= p->memory().max()) return true;
    }
    return false;
  };
  if (!over()) return true;
  Recount(t, 0, UINTPTR_MAX);
  if (!over()) return true;
  // Relaxed: a statistic for the report.
  g_map_charge_failures.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void* ScannerMain(void*) {
  ++tls_state.in_hook;  // for its life: nothing it does is charged
  const timespec period{static_cast<time_t>(g_scan_period_ms / 1000),
                        static_cast<long>(g_scan_period_ms % 1000) * 1000000};
  for (;;) {
    timespec left = period;
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
    RangeTable* t = g_table.load(std::memory_order_acquire);
    MapLock lock;
    Recount(*t, 0, UINTPTR_MAX);
  }
  return nullptr;
}

// Starts this process's scanner once (the first hook call after the
// runtime is up, or after a fork in the child), with every signal blocked
// so it never takes one of the program's. Not retried if pthread_create
// fails (EAGAIN): the charges then change only with madvise, munmap,
// mremap and refused heap charges.
void StartScanner() {
  if (g_scanner_started.load(std::memory_order_relaxed) ||
      g_scanner_started.exchange(true, std::memory_order_relaxed)) {
    return;
  }
  HookGuard guard;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  (void)pthread_create(&thread, &attr, ScannerMain, nullptr);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

uint64_t PagesOf(uintptr_t bytes) { return bytes / RangeTable::kPage; }

bool AnonPrivate(int flags) {
  return (flags & MAP_ANONYMOUS) != 0 && (flags & MAP_TYPE) == MAP_PRIVATE &&
         (flags & MAP_HUGETLB) == 0;
}

void* RawMmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  return reinterpret_cast<void*>(
      syscall(SYS_mmap, addr, len, prot, flags, fd, off));
}

void* Map(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  RangeTable* t = Table();
  const bool anon = AnonPrivate(flags);
  const bool fixed = (flags & MAP_FIXED) != 0;
  if (t == nullptr || (!anon && !fixed) || len == 0) {
    return RawMmap(addr, len, prot, flags, fd, off);
  }
  GroupRef owner = anon ? OwnerGroup() : GroupRef();
  const bool writable = anon && owner && (prot & PROT_WRITE) != 0;
  const uintptr_t plen = PageAlign(len);
  // Charged now: all its pages, or (resident mode) none yet.
  const uint64_t pages = writable && !g_resident ? PagesOf(plen) : 0;
  const uint64_t whole = g_resident ? 0 : RangeTable::kWhole;
  if (!fixed) {
    // The kernel picks a range no entry covers: map, then charge and
    // insert under the table's mutex (which the fork handlers take: a
    // child never holds the charge without the entry). Only a mapping the
    // kernel made is charged; one whose charge is refused is unmapped.
    void* r = RawMmap(addr, len, prot, flags, fd, off);
    if (r == MAP_FAILED || !owner) return r;
    const auto start = reinterpret_cast<uintptr_t>(r);
    MapLock lock;
    if ((writable && g_resident && !Admit(*t, *owner)) ||
        !ChargePages(*owner, pages, g_charge_flags)) {
      (void)syscall(SYS_munmap, r, len);
      errno = ENOMEM;
      return MAP_FAILED;
    }
    // Entries there are stale (pages unmapped behind our back, by a raw
    // system call): the kernel handed the range out as free.
    Untrack(*t, start, start + plen);
    t->Insert(start, start + plen, writable ? owner : GroupRef(), whole);
    return r;
  }
  // MAP_FIXED replaces whatever [addr, addr + len) held. As the kernel
  // unmaps before it commits, the pages charged there now count against
  // the new charge: only the growth can be refused. Enforcing, that is
  // charged first (a refused charge changes nothing); else the charge,
  // which cannot be refused, follows the kernel's answer.
  const auto start = reinterpret_cast<uintptr_t>(addr);
  MapLock lock;
  if (writable && g_resident && !Admit(*t, *owner)) {
    errno = ENOMEM;
    return MAP_FAILED;
  }
  SplitFor(*t, start, start + plen);
  const bool before = pages > 0 && g_enforce;
  if (before) {
    const uint64_t old = t->ChargedPages(start, start + plen);
    const uint64_t net = pages > old ? pages - old : 0;
    if (!ChargePages(*owner, net, g_charge_flags)) {
      errno = ENOMEM;
      return MAP_FAILED;
    }
    (void)ChargePages(*owner, pages - net, kSettleFlags);
  }
  void* r = RawMmap(addr, len, prot, flags, fd, off);
  if (r == MAP_FAILED) {
    if (before) UnchargePages(*owner, pages);
    return r;
  }
  Untrack(*t, start, start + plen);
  if (pages > 0 && !before) (void)ChargePages(*owner, pages, kSettleFlags);
  if (owner) {
    t->Insert(start, start + plen, writable ? owner : GroupRef(), whole);
  }
  return r;
}

int Unmap(void* addr, size_t len) {
  RangeTable* t = Table();
  if (t == nullptr) return static_cast<int>(syscall(SYS_munmap, addr, len));
  const auto start = reinterpret_cast<uintptr_t>(addr);
  MapLock lock;
  SplitFor(*t, start, start + PageAlign(len));
  const int r = static_cast<int>(syscall(SYS_munmap, addr, len));
  if (r == 0) Untrack(*t, start, start + PageAlign(len));
  return r;
}

// madvise (the resident mode): the pieces it touches are recounted after
// the call (MADV_DONTNEED, MADV_REMOVE: their pages go at once;
// MADV_FREE: when the kernel reclaims them, seen by the scanner; a
// populating advice adds pages). Charged at mmap, nothing changes.
int Advise(void* addr, size_t len, int advice) {
  auto raw = [&] {
    return static_cast<int>(syscall(SYS_madvise, addr, len, advice));
  };
  RangeTable* t = Table();
  if (t == nullptr || !g_resident || len == 0) return raw();
  const auto start = reinterpret_cast<uintptr_t>(addr);
  MapLock lock;
  const int r = raw();
  // Even after a failure: the kernel applies madvise VMA by VMA and may
  // have changed some before it failed.
  Recount(*t, start, start + PageAlign(len));
  return r;
}

// mprotect / pkey_mprotect: making reserved pages writable charges them.
// Taking write away charges nothing back (the kernel keeps VM_ACCOUNT:
// the pages still hold their contents).
//
// The kernel applies mprotect one VMA at a time in address order and stops
// at the first it cannot change (a hole: ENOMEM), leaving those before it
// changed. So that exactly what changed is charged, a range holding
// reserved pages is applied piece by piece, split where reserved pieces of
// the table begin and end (usually one piece, one call), in address order,
// stopping at the first failure as the kernel would: the pieces before it
// changed, the rest did not.
template <class Syscall>
int Protect(void* addr, size_t len, int prot, Syscall&& call) {
  RangeTable* t = Table();
  if (t == nullptr || (prot & PROT_WRITE) == 0) return call(addr, len);
  const auto start = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t end = start + PageAlign(len);
  MapLock lock;
  const uint64_t reserved = t->ReservedPages(start, end);
  GroupRef owner = reserved > 0 ? OwnerGroup() : GroupRef();
  if (!owner) return call(addr, len);
  // Enforcing: charged first (refused, nothing changes). Else charged for
  // what the kernel changed, after. The resident mode charges nothing
  // here (the pages are counted when touched) and only admits.
  const uint64_t charge = g_resident ? 0 : reserved;
  if ((g_resident && !Admit(*t, *owner)) ||
      (g_enforce && !ChargePages(*owner, charge, g_charge_flags))) {
    errno = ENOMEM;
    return -1;
  }
  uintptr_t at = start;
  uint64_t changed = 0;
  int r = 0;
  while (at < end) {
    const uintptr_t next = t->NextReservedBoundary(at, end);
    r = call(reinterpret_cast<void*>(at), next - at);
    if (r != 0) break;
    changed += t->ReservedPages(at, next);
    at = next;
  }
  if (at > start) t->ChargeReserved(start, at, owner, !g_resident);
  if (g_resident) return r;
  // Under HookGuard: errno stays the failed call's.
  if (g_enforce) {
    UnchargePages(*owner, reserved - changed);
  } else {
    (void)ChargePages(*owner, changed, kSettleFlags);
  }
  return r;
}

void* Remap(void* old_addr, size_t old_len, size_t new_len, int flags,
            void* new_addr) {
  auto raw = [&] {
    return reinterpret_cast<void*>(
        syscall(SYS_mremap, old_addr, old_len, new_len, flags, new_addr));
  };
  RangeTable* t = Table();
  // old_len 0 duplicates a shared mapping: never ours.
  if (t == nullptr || old_len == 0) return raw();
  const auto old_start = reinterpret_cast<uintptr_t>(old_addr);
  const uintptr_t old_plen = PageAlign(old_len);
  const uintptr_t new_plen = PageAlign(new_len);
  MapLock lock;
  // The mapping's state is its last page's (one VMA, one state).
  const RangeTable::Range* tail = t->Find(old_start + old_plen - 1);
  const bool charged_tail = tail != nullptr && tail->owner;
  const bool reserved_tail = tail != nullptr && !tail->owner;
  const uint64_t grow = new_plen > old_plen ? PagesOf(new_plen - old_plen) : 0;
  GroupRef owner;
  // Charged for the growth: the pages, or (resident mode) none yet.
  const uint64_t charge = g_resident ? 0 : grow;
  if (charged_tail && grow > 0) {
    owner = OwnerGroup();
    if (!owner) owner = tail->owner;
    // Enforcing: charged first (refused, nothing changes). Else after the
    // kernel grew the mapping (a growth it refuses is never charged).
    if ((g_resident && !Admit(*t, *owner)) ||
        (g_enforce && !ChargePages(*owner, charge, g_charge_flags))) {
      errno = ENOMEM;
      return MAP_FAILED;
    }
  }
  tail = nullptr;  // entries move below
  const uint64_t whole = g_resident ? 0 : RangeTable::kWhole;
  // The pieces are split where the call cuts them (resident mode).
  SplitFor(*t, old_start, old_start + old_plen);
  if (new_plen < old_plen) {
    SplitFor(*t, old_start + new_plen, old_start + old_plen);
  }
  if ((flags & MREMAP_FIXED) != 0) {
    const auto dest = reinterpret_cast<uintptr_t>(new_addr);
    SplitFor(*t, dest, dest + new_plen);
  }
  void* r = raw();
  if (r == MAP_FAILED) {
    if (owner && g_enforce) UnchargePages(*owner, charge);
    return r;
  }
  if (owner && !g_enforce) (void)ChargePages(*owner, charge, kSettleFlags);
  const auto new_start = reinterpret_cast<uintptr_t>(r);
  const uintptr_t kept = std::min(old_plen, new_plen);
  if (new_plen < old_plen)
    Untrack(*t, old_start + new_plen, old_start + old_plen);
  if (new_start != old_start) {
    // The destination's earlier contents (MREMAP_FIXED) are unmapped.
    Untrack(*t, new_start, new_start + new_plen);
    t->Move(
        old_start, old_start + kept,
        static_cast<intptr_t>(new_start) - static_cast<intptr_t>(old_start));
    if ((flags & MREMAP_DONTUNMAP) != 0 && (charged_tail || reserved_tail)) {
      // The source stays mapped, emptied, with its commit (the kernel
      // charges both): charged again to the thread's group.
      GroupRef again = OwnerGroup();
      if (again && charged_tail) {
        // Emptied: resident in none of its pages (resident mode).
        if (!g_resident) {
          (void)ChargePages(*again, PagesOf(kept), kSettleFlags);
        }
        t->Insert(old_start, old_start + kept, again, whole);
      } else {
        t->Insert(old_start, old_start + kept, GroupRef());
      }
    }
  }
  if (grow > 0 && (owner || reserved_tail)) {
    t->Insert(new_start + old_plen, new_start + new_plen, owner, whole);
  }
  return r;
}

// The program's own brk/sbrk (glibc's malloc moves the break through its
// internal __sbrk, not through here): the pages it adds at the break are a
// private anonymous writable mapping, charged; the pages it gives back are
// uncharged, never below what it added itself.
void* Sbrk(intptr_t delta) {
  RangeTable* t = Table();
  if (t == nullptr || delta == 0) return __sbrk(delta);
  MapLock lock;
  if (delta < 0) {
    const auto cur = reinterpret_cast<uintptr_t>(__sbrk(0));
    SplitFor(*t, PageAlign(cur + delta), PageAlign(cur));
    void* r = __sbrk(delta);
    if (r != reinterpret_cast<void*>(-1)) {
      const auto old_brk = reinterpret_cast<uintptr_t>(r);
      Untrack(*t, PageAlign(old_brk + delta), PageAlign(old_brk));
    }
    return r;
  }
  GroupRef owner = OwnerGroup();
  if (!owner) return __sbrk(delta);
  // Enforcing: charged first (refused, the break stays). Else charged
  // after the kernel moved the break (a move it refuses is never charged).
  // The resident mode charges nothing here and only admits.
  const auto cur = reinterpret_cast<uintptr_t>(__sbrk(0));
  const uint64_t pages = g_enforce && !g_resident
                             ? PagesOf(PageAlign(cur + delta) - PageAlign(cur))
                             : 0;
  if ((g_resident && !Admit(*t, *owner)) ||
      !ChargePages(*owner, pages, g_charge_flags)) {
    errno = ENOMEM;
    return reinterpret_cast<void*>(-1);
  }
  void* r = __sbrk(delta);
  if (r == reinterpret_cast<void*>(-1)) {
    UnchargePages(*owner, pages);
    return r;
  }
  // glibc's malloc may have moved the break since __sbrk(0) (it takes no
  // lock of ours): settle on the range actually added (all of it when
  // nothing was charged before).
  const auto old_brk = reinterpret_cast<uintptr_t>(r);
  const uintptr_t lo = PageAlign(old_brk);
  const uintptr_t hi = PageAlign(old_brk + delta);
  const uint64_t actual = g_resident ? 0 : PagesOf(hi - lo);
  if (actual > pages) (void)ChargePages(*owner, actual - pages, kSettleFlags);
  if (actual < pages) UnchargePages(*owner, pages - actual);
  if (hi > lo) {
    Untrack(*t, lo, hi);  // stale entries, as in Map()
    t->Insert(lo, hi, owner, g_resident ? 0 : RangeTable::kWhole);
  }
  return r;
}

}  // namespace

void InitMapTable(bool resident, uint64_t scan_period_ms) {
  MapLock lock;
  if (g_table.load(std::memory_order_relaxed) != nullptr) return;
  g_resident = resident;
  g_scan_period_ms = scan_period_ms > 0 ? scan_period_ms : 1;
  auto* t = new (g_table_storage) RangeTable;
  if (resident) t->set_resident_counter(CountResidentPages);
  g_table.store(t, std::memory_order_release);
}

bool RecountMappings() {
  if (!g_resident) return false;
  RangeTable* t = g_table.load(std::memory_order_acquire);
  if (t == nullptr) return false;
  MapLock lock;
  const uint64_t before = t->charged_pages();
  Recount(*t, 0, UINTPTR_MAX);
  return t->charged_pages() < before;
}

void MapForkChild() {
  // The scanner thread was not copied: the child's first hook call
  // starts its own. Relaxed: the child has one thread.
  g_scanner_started.store(false, std::memory_order_relaxed);
}

MapStats GetMapStats() {
  MapLock lock;
  return GetMapStatsLocked();
}

MapStats GetMapStatsLocked() {
  MapStats s{};
  s.charge_failures = g_map_charge_failures.load(std::memory_order_relaxed);
  s.resident_forced = g_resident_forced.load(std::memory_order_relaxed);
  s.resident_mode = g_resident;
  RangeTable* t = g_table.load(std::memory_order_acquire);
  if (t == nullptr) return s;
  s.charged_bytes = t->charged_pages() * RangeTable::kPage;
  s.reserved_bytes = t->reserved_pages() * RangeTable::kPage;
  s.ranges = t->size();
  return s;
}

void MapTableLockForFork() { pthread_mutex_lock(&g_map_mu); }
void MapTableUnlockAfterFork() { pthread_mutex_unlock(&g_map_mu); }

}  // namespace umemcg::preload

using umemcg::preload::Map;

extern "C" {

void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  return Map(addr, len, prot, flags, fd, off);
}
// glibc's 64-bit-offset name for the same function (one symbol on x86-64).
void* mmap64(void* addr, size_t len, int prot, int flags, int fd, off_t off)
    __attribute__((alias("mmap")));

int munmap(void* addr, size_t len) { return umemcg::preload::Unmap(addr, len); }

int madvise(void* addr, size_t len, int advice) {
  return umemcg::preload::Advise(addr, len, advice);
}

int mprotect(void* addr, size_t len, int prot) {
  return umemcg::preload::Protect(addr, len, prot, [&](void* a, size_t n) {
    return static_cast<int>(syscall(SYS_mprotect, a, n, prot));
  });
}

int pkey_mprotect(void* addr, size_t len, int prot, int pkey) {
  return umemcg::preload::Protect(addr, len, prot, [&](void* a, size_t n) {
    return static_cast<int>(syscall(SYS_pkey_mprotect, a, n, prot, pkey));
  });
}

void* mremap(void* old_addr, size_t old_len, size_t new_len, int flags, ...) {
  void* new_addr = nullptr;
  // As glibc: the fifth argument exists only with MREMAP_FIXED.
  if ((flags & MREMAP_FIXED) != 0) {
    va_list ap;
    va_start(ap, flags);
    new_addr = va_arg(ap, void*);
    va_end(ap);
  }
  return umemcg::preload::Remap(old_addr, old_len, new_len, flags, new_addr);
}

void* sbrk(intptr_t delta) { return umemcg::preload::Sbrk(delta); }

int brk(void* addr) {
  // glibc's brk() sets the break to `addr`: the same as moving it by the
  // difference from the current one.
  const auto cur = reinterpret_cast<intptr_t>(__sbrk(0));
  void* r = umemcg::preload::Sbrk(reinterpret_cast<intptr_t>(addr) - cur);
  return r == reinterpret_cast<void*>(-1) ? -1 : 0;
}

}  // extern "C"

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// libumemcg-jemalloc: per-group heaps without a per-block header. Each
// group that allocates gets its own jemalloc arena (created lazily with
// arenas.create and umemcg's extent hooks); the hooks charge the group,
// through the normal charge path (stocks, reclaim, OOM handling, events,
// statistics: the "anon" item), for every page the arena commits, and
// uncharge every page it decommits (kernel: user memory charged at fault
// and uncharged when the page is freed; see docs/design.md, Per-group
// jemalloc arenas).
//
//   auto ctrl = umemcg::Controller::Create({}).value();
//   UMEMCG_CHECK(umemcg::jemalloc::Enable(*ctrl).ok());
//   {
//     umemcg::ActiveGroupScope scope(*tenant);
//     auto* v = new std::vector<int>(1000);   // tenant's arena, charged
//   }
//   delete v;          // any thread: back to tenant's arena
//
// Routing. A program linked against this component gets malloc, free,
// calloc, realloc, the aligned allocators and the operator new / delete
// family from it (they interpose on jemalloc's, which Debian builds
// unprefixed): inside an ActiveGroupScope, or on a thread with a default
// group (active.h), a block comes from that group's arena through an
// explicit jemalloc thread cache of (thread, arena), so a block handed out
// under group B never comes from pages charged to A; with no active group
// (or the root) it comes from jemalloc's automatic arenas, uncharged. A
// free from any thread finds the owning arena from the block's address
// (a two-level table of 512 KiB chunks filled by the extent hooks; no
// header) and returns the block to that arena's thread cache of the freeing
// thread. Code that calls the functions below (Allocate / Free) gets the
// same without the interposition. Not built under ASan or TSan (their
// runtimes replace malloc themselves).
//
// Limits. A refused charge makes the commit hook fail: malloc returns NULL
// with errno ENOMEM, operator new throws std::bad_alloc, and the refusing
// group counts a max event and failcnt as for any refused charge. Before
// the charge path reclaims for an arena's own commit, the arena's dirty
// pages are purged (the cheapest reclaim); each arena is also registered as
// a Reclaimer of its group (purging) for charges from elsewhere. Slack: a
// group's usage counts whole committed pages, including free blocks in
// partly used slabs and blocks cached in thread caches (at most jemalloc's
// tcache size per (thread, arena)), plus the charge stock (at most
// nr_cpus x batch pages, as for every charge).
//
// memory.stat of a group with arenas in its subtree gains "active_anon"
// (pages in use: jemalloc's pactive) and "inactive_anon" (dirty pages
// freed but not yet purged: pdirty); "anon" counts both (charged pages).
// "heap_arena_shared" counts groups in the subtree that share an
// ancestor's arena (see Lifetime).
//
// Lifetime. A removed group's arena keeps its blocks; their pages stay
// charged through the group's objcg, i.e. to its nearest online ancestor,
// and are uncharged from there (kernel reparenting). New allocations under
// a scope naming the removed group come from the ancestor's arena. The
// arena is destroyed (arena.<i>.destroy) once jemalloc reports no active
// page in it and every thread that cached it has noticed the removal (on
// its next malloc or free, or its exit; Collect() checks). When the arena
// count reaches HeapOptions::max_arenas (at most 4095, jemalloc's limit) or
// arenas.create fails, a group shares its nearest ancestor's arena (charged
// to that ancestor), or with none allocates uncharged; memory.stat's
// heap_arena_shared says so.
//
// Heap profile. With HeapOptions::heap_profile (off by default),
// allocations routed to a group's arena feed the heap profiler
// (heap_profile.h): a sampled block comes from the group's second,
// "sampled" arena (made at its first sample, charged to the group through
// the same hooks, counted in Info, purged and destroyed with the group's
// arena, not counted in LiveArenas or against max_arenas), so a free tells
// it apart by the chunk tag it already reads. Sampled blocks skip the
// thread cache. A group whose sampled arena cannot be created (jemalloc's
// arenas are taken) is not sampled.
//
// Fork. jemalloc's own fork handlers lock its arenas; umemcg's handler
// (registered by Enable, so it runs before the controller's and
// jemalloc's) waits for hooks that are charging and makes hooks that run
// during fork defer their charge, settled at the next hook call, so no
// thread holding a jemalloc lock waits for a controller lock the forking
// thread holds.
//
// Thread safety: every function may be called from any thread. Allocate and
// Free take no lock on the thread-cache path; the first allocation of a
// thread in a group (and after a group's removal) takes a mutex.

#ifndef UMEMCG_JEMALLOC_H_
#define UMEMCG_JEMALLOC_H_

#include <cstddef>
#include <cstdint>

#include "umemcg/controller.h"
#include "umemcg/export.h"
#include "umemcg/group.h"
#include "umemcg/status.h"
#include "umemcg/units.h"

namespace umemcg::jemalloc {

struct HeapOptions {
  // Flags of the charge made for committed pages (kNoThrottle is added:
  // the memory.high penalty is slept after jemalloc returns, outside its
  // locks).
  ChargeFlags flags = kChargeDefault;
  // Most arenas created (jemalloc allows 4095 with index 0 taken; lower
  // values make the sharing fallback testable).
  unsigned max_arenas = 4095;
  // Use explicit thread caches per (thread, arena); false: no thread cache
  // for accounted blocks (every op goes to the arena's bin lock).
  bool tcache = true;
  // Feed the heap profiler (heap_profile.h) at the controller's and groups'
  // sampling rates: a sampled block comes from its group's sampled arena.
  // Off by default: at the default rate (512 KiB) sampling made the
  // mixed-size malloc+free pair of `umemcg-bench alloc` 1.5-2x slower,
  // more than the sampled allocations' own cost accounts for
  // (docs/design.md, "The jemalloc arenas in the heap profiler"). Off:
  // allocations pay one load and a branch for it and nothing is sampled.
  bool heap_profile = false;
};

// Turns per-group arenas on for `controller` (one controller per process).
// REQUIRES: jemalloc's opt.retain (the Linux default); kFailedPrecondition
// otherwise, or when already enabled.
UMEMCG_EXPORT Status Enable(Controller& controller, HeapOptions options = {});
// Whether Enable succeeded (and Disable was not called).
UMEMCG_EXPORT bool Enabled();
// Turns routing off: later allocations are uncharged. Arenas without
// blocks are destroyed; the others are orphaned: their charges are
// returned now and they charge nothing afterwards, while their blocks stay
// valid (free them as usual). Drops every reference to the controller's
// groups, so the controller may be destroyed afterwards. REQUIRES: no
// thread allocates or frees under a group of the controller meanwhile.
UMEMCG_EXPORT void Disable();

// A block of `size` bytes from the active group's arena (uncharged with no
// active group); null with errno ENOMEM when the charge was refused.
UMEMCG_EXPORT void* Allocate(size_t size);
UMEMCG_EXPORT void* AllocateAligned(size_t size, size_t alignment);
// Returns a block from Allocate (or malloc) to its owner's arena.
UMEMCG_EXPORT void Free(void* p);

// What the arena of `group` holds now (after a jemalloc statistics
// refresh). charged: pages its hooks charged and not yet uncharged;
// active / dirty: jemalloc's stats.arenas.<i>.pactive / pdirty.
struct ArenaInfo {
  unsigned arena = 0;   // jemalloc's index (0: none)
  bool shared = false;  // the group uses an ancestor's arena
  Pages charged;
  Pages active;
  Pages dirty;
};
UMEMCG_EXPORT ArenaInfo Info(Group& group);
// Purges the dirty pages of `group`'s arena; returns the pages uncharged.
UMEMCG_EXPORT Pages Purge(Group& group);
// Flushes the calling thread's thread caches (blocks go back to arenas).
UMEMCG_EXPORT void FlushThreadCaches();
// Destroys the arenas of removed groups that hold no active page; returns
// how many. Called on group removal and thread exit as well.
UMEMCG_EXPORT int Collect();
// Arenas alive now (created and not destroyed).
UMEMCG_EXPORT int LiveArenas();

}  // namespace umemcg::jemalloc

#endif  // UMEMCG_JEMALLOC_H_

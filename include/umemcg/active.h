// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The active group: which group the calling thread's allocations are
// charged to (kernel: set_active_memcg() / current->active_memcg, and the
// task's own memcg as the fallback).
//
//   {
//     umemcg::ActiveGroupScope scope(*tenant);   // this request is tenant's
//     std::pmr::vector<int> v(&umemcg::DefaultActiveResource());
//     v.resize(1000);          // charged to tenant (see memory_resource.h)
//   }                          // back to the previous active group
//
// Resolution, innermost first: the innermost live ActiveGroupScope of this
// thread that names a group; else the thread's default group
// (SetThreadDefaultGroup, or a move by another thread: see Moves); else
// none (ActiveGroup() is null and users of it charge nothing or their own
// fallback).
//
// A scope or default names a Group but records that group's objcg: what
// allocations made under it are charged to, and what blocks keep as their
// owner. For a group already removed, the objcg of its nearest ancestor with
// one is used (kernel: get_obj_cgroup_from_memcg walks to the parent);
// when the group is removed while a scope is alive, the recorded objcg has
// been reparented and charges land on the parent, as in the kernel.
//
// Lifetime. A scope and the thread default each hold a GroupRef and an
// ObjCgroupRef, so the group and objcg stay allocated while they name them.
// Clear the default (SetThreadDefaultGroup(nullptr)) on every thread that
// set one before destroying the controller; otherwise the thread's exit
// (or the controller's destructor precondition) finds a reference left.
//
// Moves (cgroup.threads / cgroup.procs, files.h): a thread that set a
// default or called RegisterThread is known by its kernel TID (gettid)
// until it exits. Another thread may then change its default group by
// writing the TID to a group's cgroup.threads (or the PID to cgroup.procs,
// for every known thread); the thread picks the new default up at its
// next ActiveGroup() / ActiveObjCgroup() / ThreadDefaultGroup(). What it
// charged before stays charged where it was, and a live scope still wins
// over the default, as in the kernel (set_active_memcg over the task's
// cgroup). A thread's own SetThreadDefaultGroup wins over a move it has
// not picked up yet.
//
// Thread safety: all state here is per thread, except moves (above). A scope
// must be destroyed on the thread that created it, in reverse order of creation
// (it is an RAII object on the stack; never heap-allocate or move one).
// ActiveGroup() and ActiveObjCgroup() are thread-local loads (the scope or
// default, and one acquire load of the thread's own pending-move slot) and
// never allocate, except when a move is waiting (installing it releases the old
// default's references and frees the move record); the constructors take the
// controller's tree lock shared once (GetObjCgroup).

#ifndef UMEMCG_ACTIVE_H_
#define UMEMCG_ACTIVE_H_

#include "umemcg/export.h"
#include "umemcg/group.h"
#include "umemcg/obj_cgroup.h"

namespace umemcg {

// A new reference to the objcg charges for `group` should use: its own, or
// when it was removed the nearest ancestor's (the root's at worst, whose
// objcg charges nothing). Takes the tree lock shared per level walked.
UMEMCG_EXPORT ObjCgroupRef ObjCgroupFor(Group& group);

class UMEMCG_EXPORT ActiveGroupScope {
 public:
  // Makes `group` this thread's active group until destruction. Null means
  // "the thread's default group" (kernel: set_active_memcg(NULL)): inner
  // code charges the default again, not the enclosing scope's group.
  explicit ActiveGroupScope(Group* group);
  explicit ActiveGroupScope(Group& group) : ActiveGroupScope(&group) {}
  // Restores the enclosing scope (or the default).
  // REQUIRES: same thread as the constructor; innermost live scope.
  ~ActiveGroupScope();

  ActiveGroupScope(const ActiveGroupScope&) = delete;
  ActiveGroupScope& operator=(const ActiveGroupScope&) = delete;

  // The group named (null for a default-restoring scope).
  Group* group() const { return group_.get(); }
  ObjCgroup* objcg() const { return objcg_.get(); }

 private:
  GroupRef group_;
  ObjCgroupRef objcg_;
  ActiveGroupScope* const prev_;  // enclosing scope of this thread or null
};

// The calling thread's active group / its objcg (see resolution above);
// null when none. Valid while the naming scope or default is in place.
UMEMCG_EXPORT Group* ActiveGroup();
UMEMCG_EXPORT ObjCgroup* ActiveObjCgroup();

// Sets the calling thread's default group (null clears it), taking
// references; replaces (and releases) the previous one. Does not change
// what a live scope names. Must not be called from inside a Reclaimer.
UMEMCG_EXPORT void SetThreadDefaultGroup(Group* group);
// The calling thread's default group, or null.
UMEMCG_EXPORT Group* ThreadDefaultGroup();
// Makes the calling thread known by its TID to cgroup.threads and
// cgroup.procs without setting a default (SetThreadDefaultGroup does it
// too); idempotent. It stays known until it exits. A thread without a
// default is listed in the root's cgroup.threads: the root of the
// controller of the last group it had (its default, or a move), or every
// controller's root while it never had one.
UMEMCG_EXPORT void RegisterThread();

}  // namespace umemcg

#endif  // UMEMCG_ACTIVE_H_

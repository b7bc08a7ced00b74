// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The thread registry behind cgroup.threads / cgroup.procs: the threads of
// this process that ran umemcg code and are known by their kernel TID
// (gettid), each with the group it is a member of, and a way for another
// thread to change a thread's default group (kernel: cgroup_attach_task
// moving current->cgroups).
//
// A thread is registered by SetThreadDefaultGroup or RegisterThread
// (active.h) and removed at its exit. Its slot lives in its own
// thread-local storage and is linked into one process-wide list under the
// registry mutex; nothing here allocates on register or unregister.
//
// Moving another thread: the mover, under the mutex, records the new group
// as the thread's membership (what cgroup.threads lists, at once, as in the
// kernel) and publishes a PendingMove holding the references in the
// thread's slot. The thread itself installs it as its default group on its
// next ActiveGroup()/ActiveObjCgroup()/ThreadDefaultGroup() lookup: the hot
// path pays one acquire load of its own pending-move word (taking the move
// is the slow path, only when one is waiting). Allocations already charged stay
// where they were.
//
// Controllers. A thread belongs to the controller of the last group it
// was a member of (its default, or a move); one that never had a group
// (RegisterThread alone) belongs to none yet. A thread without a group is
// listed in the root of the controller it belongs to, or in every
// controller's root while it belongs to none (as a new task is in the root
// of every cgroup hierarchy).
//
// Two copies of this code in one process (the preload and its operations
// module, src/preload/ops_seam.h): each has its own registry, but the
// threads are registered in the preload's. UseThreadRegistryOf makes the
// module's copy answer Move*/IsRegisteredThread/ThreadsIn from the
// preload's registry, through the preload's functions (ThisThreadRegistry).
//
// Fork: the child keeps the forking thread's slot only, under the child's
// TID; the other threads do not exist there (what their slots held is
// leaked, as the rest of their thread-local state is).
//
// Thread safety: every function may be called from any thread; the Self*
// ones act on the calling thread.

#ifndef UMEMCG_SRC_THREADS_THREAD_REGISTRY_H_
#define UMEMCG_SRC_THREADS_THREAD_REGISTRY_H_

#include <sys/types.h>

#include <atomic>
#include <vector>

#include "umemcg/group.h"
#include "umemcg/obj_cgroup.h"
#include "umemcg/status.h"

namespace umemcg::internal {

// References for a move not yet picked up by the moved thread.
struct PendingMove {
  GroupRef group;
  ObjCgroupRef objcg;
};

// A thread's pending-move word lives in its own hot thread-local state
// (active.cc's ActiveState, next to the default group, so a lookup
// computes one thread-local address and loads it): movers exchange a
// PendingMove in (release, under the registry mutex), the thread exchanges
// it out (acquire) when its acquire load saw one.
using PendingMoveSlot = std::atomic<PendingMove*>;

// Registers the calling thread (idempotent), whose pending-move word is
// `pending` (thread-local, alive until SelfUnregister), and records
// `group` (may be null: "no default", listed in the root) as its
// membership, dropping any pending move (the thread's own choice wins).
// Returns the dropped move for the caller to delete outside its critical
// sections, or null.
PendingMove* SelfRegister(PendingMoveSlot* pending, Group* group);
// Whether the calling thread is registered.
bool SelfRegistered();
// Removes the calling thread (at its exit; a no-op when unregistered) and
// returns its pending move, if any, for the caller to delete.
PendingMove* SelfUnregister();

// Moves the registered thread `tid` of this process to `group`:
// kNoSuchProcess when no registered thread has that TID,
// kFailedPrecondition when `group` was removed.
Status MoveThread(pid_t tid, Group& group);
// Moves every registered thread of this process to `group`.
Status MoveProcess(Group& group);
// Whether `tid` is a registered thread of this process.
bool IsRegisteredThread(pid_t tid);

// The TIDs of the registered threads whose membership is `group`
// (registered threads without a group count as the root's of the
// controller they belong to, see Controllers), ascending.
std::vector<pid_t> ThreadsIn(const Group& group);
// The number of registered threads (tests).
size_t RegisteredThreadCount();

// This copy's registry, as functions another copy can call.
struct ThreadRegistryOps {
  Status (*move_thread)(pid_t tid, Group& group);
  Status (*move_process)(Group& group);
  bool (*is_registered_thread)(pid_t tid);
  std::vector<pid_t> (*threads_in)(const Group& group);
};
const ThreadRegistryOps* ThisThreadRegistry();
// From now on MoveThread, MoveProcess, IsRegisteredThread and ThreadsIn of
// this copy call `ops` (another copy's ThisThreadRegistry(), alive for the
// process's life; null: this copy's own again). Call it before any thread
// may use them (the operations module: before mounting).
void UseThreadRegistryOf(const ThreadRegistryOps* ops);

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_THREADS_THREAD_REGISTRY_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The preloaded program's threads in the thread registry
// (src/threads/thread_registry.h, the preload's own copy): every thread
// is registered with the "process" group as its membership, so
// cgroup.threads and cgroup.procs written through the preload's mount
// (UMEMCG_MOUNT; the operations module answers from this registry, see
// UseThreadRegistryOf) list and move it.
//
// The thread's pending-move word is ThreadState::pending, beside its
// group (ThreadState::objcg): CurrentOwner loads it once per allocation
// or mapping, and anything but null sends it here (OwnerAfterMove):
//  - kNotRegistered (the initial value of every thread): the thread is
//    registered when the runtime is up. Threads created after start-up
//    are registered as they start (thread_hooks.cc), the main thread by
//    the runtime, any other thread (one a library constructor started
//    before the runtime) at its first allocation or mapping.
//  - a move published by another thread: its objcg becomes the thread's
//    group; both are pinned for the process's life (blocks point at the
//    objcg and the registry names the group, as for the groups of
//    umemcg_preload_set_group).
//  - kExited: the thread left the registry at its exit (a key destructor);
//    what it allocates afterwards goes to its group as before.
//
// umemcg_preload_set_group and a move: the later one wins (the call drops
// a move not picked up yet and records its group as the membership; a move
// published after it is picked up at the next allocation).

#include <pthread.h>

#include <algorithm>
#include <memory>
#include <mutex>

#include "preload/preload_internal.h"
#include "preload/runtime.h"

namespace umemcg::preload {

internal::PendingMove g_move_marks[2];

namespace {

// The key whose destructor unregisters a thread at its exit (its value
// is set at registration); without it no thread is registered (a slot of
// an exited thread would stay linked).
pthread_key_t g_thread_key;
bool g_have_thread_key = false;

void UnregisterAtExit(void*) {
  HookGuard guard;  // deleting the move frees
  ThreadState& t = tls_state;
  delete internal::SelfUnregister();
  // Relaxed: unlinked, no mover reaches the word; only this thread reads it.
  t.pending.store(kExited, std::memory_order_relaxed);
}

// Registers the calling thread with `member` as its membership.
// REQUIRES: inside umemcg (HookGuard); t.pending == kNotRegistered.
void Register(ThreadState& t, Group* member) {
  if (!g_have_thread_key) {
    // Relaxed: the thread's own word, not linked anywhere.
    t.pending.store(kExited, std::memory_order_relaxed);
    return;
  }
  // Not linked yet: no mover can write the word before SelfRegister.
  t.pending.store(nullptr, std::memory_order_relaxed);
  delete internal::SelfRegister(&t.pending, member);
  (void)pthread_setspecific(g_thread_key, &t);
}

// Pins the move's group and objcg for the process's life (once each).
void Pin(Runtime& rt, const internal::PendingMove& move) {
  std::lock_guard<std::mutex> lock(rt.mu);
  for (const MovedIn& m : rt.moved_in) {
    if (m.group.get() == move.group.get() &&
        m.objcg.get() == move.objcg.get()) {
      return;
    }
  }
  rt.moved_in.push_back({move.group, move.objcg});
}

// Installs the move waiting in the thread's word.
void InstallMove(ThreadState& t) {
  HookGuard guard;
  // Acquire: pairs with the mover's release exchange (the move's contents).
  std::unique_ptr<internal::PendingMove> move(
      t.pending.exchange(nullptr, std::memory_order_acquire));
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (move == nullptr || rt == nullptr) return;
  if (!move->objcg) return;
  Pin(*rt, *move);
  t.objcg = move->objcg.get();
}

}  // namespace

void InitThreads() {
  g_have_thread_key = pthread_key_create(&g_thread_key, UnregisterAtExit) == 0;
}

void RegisterThreadIfNew() {
  ThreadState& t = tls_state;
  // Relaxed: only this thread changes its word from kNotRegistered.
  if (t.pending.load(std::memory_order_relaxed) != kNotRegistered) return;
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr) return;
  HookGuard guard;
  Register(t, rt->process.get());
}

ObjCgroup* OwnerAfterMove() {
  ThreadState& t = tls_state;
  // Acquire: as in CurrentOwner.
  internal::PendingMove* p = t.pending.load(std::memory_order_acquire);
  if (p == kNotRegistered) {
    RegisterThreadIfNew();
  } else if (p != kExited && p != nullptr) {
    InstallMove(t);
  }
  if (t.objcg != nullptr) return t.objcg;
  return g_default_objcg.load(std::memory_order_acquire);
}

void ChooseGroup(Group* member, ObjCgroup* objcg) {
  HookGuard guard;
  ThreadState& t = tls_state;
  // Relaxed: the values that matter here are only written by this thread.
  internal::PendingMove* p = t.pending.load(std::memory_order_relaxed);
  if (p == kNotRegistered) {
    Register(t, member);
  } else if (p != kExited) {
    // Drops a move not picked up yet: this call is the later one.
    delete internal::SelfRegister(&t.pending, member);
  }
  t.objcg = objcg;
}

}  // namespace umemcg::preload

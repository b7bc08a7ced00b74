// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Fork safety: pthread_atfork handlers for umemcg's own locks.
//
// The child of fork() has one thread, a copy of the caller; a lock that
// another thread held at that moment stays held in the child forever, and
// the data it guards may be half updated. Each object owning such locks
// (a Controller, the C API's handle table) registers a ForkParticipant;
// the handlers call them all, in registration order before fork and in
// reverse order after it. A participant chooses per lock:
//
//  - Take it in PrepareFork, release it in ParentAfterFork and
//    ChildAfterFork: the child then sees no critical section half done.
//    Only for locks whose holders never wait for anything unbounded
//    (stock and statistics shard locks, short list mutexes): prepare
//    waits for the current holder, and a holder that waited for the
//    forking thread would deadlock fork() itself.
//  - Reset it in ChildAfterFork (ReinitInForkChild) and re-take it for the
//    forking thread's own holds (HeldAcrossCallback): for locks held while
//    application code runs (the tree lock during a reclaim walk, the OOM
//    lock during the OOM handler). Prepare cannot wait for them: the
//    application code may be blocked on the forking thread, or be the
//    forking thread. What such a lock guards must stay consistent without
//    it in the child: the owner makes sure no thread modifies that data at
//    fork time by some other lock the prepare handler takes.
//
// After every ordinary participant come the innermost ones
// (RegisterInnermostForFork): process-wide leaf locks that are taken while
// a participant's lock is held (the heap profiler's mutex, taken under a
// controller's reap lock), then the shared_ptr stripes below.
//
// The child's handlers run before fork() returns there; like everything in
// a child of a multi-threaded process until exec, they allocate nothing
// and start no thread. Work that needs more (restarting a helper thread,
// freeing what the parent's other threads held) is left for the child's
// next call into umemcg (ForkGeneration tells it that a fork happened).
//
// Thread safety: every function is safe from any thread. Register and
// Unregister wait while a fork is being prepared.

#ifndef UMEMCG_SRC_PORT_FORK_H_
#define UMEMCG_SRC_PORT_FORK_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <type_traits>

namespace umemcg::internal {

void RegisterForFork(class ForkParticipant* participant);
void RegisterInnermostForFork(class ForkParticipant* participant);
void UnregisterForFork(class ForkParticipant* participant);

class ForkParticipant {
 public:
  // Before fork, on the forking thread, in registration order.
  virtual void PrepareFork() = 0;
  // After fork, in the parent / in the child, in reverse order.
  virtual void ParentAfterFork() = 0;
  virtual void ChildAfterFork() = 0;

 protected:
  ~ForkParticipant() = default;

 private:
  friend struct ForkRegistry;
  friend void RegisterForFork(ForkParticipant* participant);
  friend void RegisterInnermostForFork(ForkParticipant* participant);
  friend void UnregisterForFork(ForkParticipant* participant);
  ForkParticipant* prev_ = nullptr;
  ForkParticipant* next_ = nullptr;
  bool innermost_ = false;
};

// Adds / removes a participant (installs the atfork handlers on first use).
// An innermost participant prepares after every ordinary one and finishes
// before them: for a process-wide lock whose holders may hold an ordinary
// participant's lock but wait for none. Unregister before destroying what
// the participant's handlers touch.
void RegisterForFork(ForkParticipant* participant);
void RegisterInnermostForFork(ForkParticipant* participant);
void UnregisterForFork(ForkParticipant* participant);

// The number of fork() children this process descends from (0 in the
// original process; a child's value is its parent's plus one).
uint64_t ForkGeneration();

// std::atomic<std::shared_ptr<T>> (libstdc++) keeps a spin lock in its
// pointer word while a load or store runs: a fork() in the middle of one
// leaves it set in the child, whose next access spins forever. Every access
// to such a slot in umemcg goes through these two functions, under one of
// a few process-wide mutexes (picked by the slot's address) that the fork
// handlers hold across fork, taken after every participant's locks (their
// holders never wait for anything). The old value ForkSafeExchange returns
// is destroyed by the caller, outside the mutex.
std::mutex& SharedPtrStripe(const void* slot);
template <typename T>
std::shared_ptr<T> ForkSafeLoad(const std::atomic<std::shared_ptr<T>>& slot) {
  std::lock_guard<std::mutex> lock(SharedPtrStripe(&slot));
  return slot.load();
}
template <typename T>
std::shared_ptr<T> ForkSafeExchange(
    std::atomic<std::shared_ptr<T>>& slot,
    std::type_identity_t<std::shared_ptr<T>> value) {
  std::lock_guard<std::mutex> lock(SharedPtrStripe(&slot));
  return slot.exchange(std::move(value));
}

// Re-creates `lock` in place in the child, without running the old
// object's destructor (its state belongs to threads that do not exist
// there). REQUIRES: in ChildAfterFork.
template <typename Lock>
void ReinitInForkChild(Lock& lock) {
  new (&lock) Lock();
}

// Records, for the calling thread, that it holds `lock` while it runs
// application code (a reclaimer, the OOM handler), so that a fork from
// that code can give the lock back to the thread in the child. Scoped;
// allocation-free (the records live on the stack).
class HeldAcrossCallback {
 public:
  explicit HeldAcrossCallback(const void* lock);
  ~HeldAcrossCallback();
  HeldAcrossCallback(const HeldAcrossCallback&) = delete;
  HeldAcrossCallback& operator=(const HeldAcrossCallback&) = delete;

  // How many records of the calling thread name `lock`.
  static int CountHeldByThisThread(const void* lock);

 private:
  const void* const lock_;
  HeldAcrossCallback* const prev_;
};

}  // namespace umemcg::internal

#endif  // UMEMCG_SRC_PORT_FORK_H_

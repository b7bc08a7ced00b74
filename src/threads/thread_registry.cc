// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The thread registry (thread_registry.h): an intrusive list of the
// registered threads' thread-local slots under one leaf mutex. Nothing
// here allocates, except PendingMove objects made by movers outside the
// mutex and the vectors ThreadsIn returns.

#include "threads/thread_registry.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>

#include "port/fork.h"
#include "umemcg/active.h"

namespace umemcg::internal {

namespace {

// The calling thread's registry record. Trivial and constant-initialized:
// touching it runs no TLS initializer. Its links and fields are guarded by
// the registry mutex (the thread's own `registered` flag is also read by
// the thread itself, which is the only writer outside fork).
struct ThreadSlot {
  PendingMoveSlot* pending = nullptr;  // in the thread's ActiveState
  ThreadSlot* prev = nullptr;
  ThreadSlot* next = nullptr;
  Group* member = nullptr;  // pinned by the default or the pending move
  // The root of the controller the thread belongs to (thread_registry.h,
  // Controllers), or null: none yet. Only compared, never dereferenced (the
  // controller may be gone; a later one at the same address would list the
  // thread in its root, as a thread that belongs to none is).
  const Group* root = nullptr;
  pid_t tid = 0;
  bool registered = false;
};
constinit thread_local ThreadSlot tls_thread_slot;

const Group* RootOf(const Group& g) {
  const Group* r = &g;
  while (r->parent() != nullptr) r = r->parent();
  return r;
}

pid_t GetTid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// The registry: a leaf lock (nothing else is taken under it, and its
// holders never wait for anything), so the fork handler may take it.
struct Registry {
  std::mutex mu;
  ThreadSlot* head = nullptr;  // guarded by mu
  size_t count = 0;            // guarded by mu
};

Registry& TheRegistry() {
  static Registry* r = new Registry();  // never destroyed: threads exit late
  return *r;
}

void Link(Registry& r, ThreadSlot* s) {
  s->prev = nullptr;
  s->next = r.head;
  if (r.head != nullptr) r.head->prev = s;
  r.head = s;
  s->registered = true;
  ++r.count;
}

void Unlink(Registry& r, ThreadSlot* s) {
  if (s->prev != nullptr) s->prev->next = s->next;
  if (s->next != nullptr) s->next->prev = s->prev;
  if (r.head == s) r.head = s->next;
  s->prev = s->next = nullptr;
  s->registered = false;
  --r.count;
}

ThreadSlot* FindLocked(Registry& r, pid_t tid) {
  for (ThreadSlot* s = r.head; s != nullptr; s = s->next) {
    if (s->tid == tid) return s;
  }
  return nullptr;
}

// Publishes `move` for the slot's thread and records its membership;
// returns the move it replaces (not yet picked up), for the caller to
// delete outside the mutex. REQUIRES: r.mu held.
PendingMove* PublishLocked(ThreadSlot* s, PendingMove* move) {
  s->member = move->group.get();
  s->root = RootOf(*s->member);
  // Release: the thread's acquire load sees the move's contents.
  return s->pending->exchange(move, std::memory_order_acq_rel);
}

// Fork: the child has the forking thread only, with a new TID.
class RegistryFork final : public ForkParticipant {
 public:
  void PrepareFork() override { TheRegistry().mu.lock(); }
  void ParentAfterFork() override { TheRegistry().mu.unlock(); }
  void ChildAfterFork() override {
    Registry& r = TheRegistry();
    // The other threads' slots belong to threads that do not exist here
    // (their pending moves are leaked with the rest of their state).
    r.head = nullptr;
    r.count = 0;
    ThreadSlot& self = tls_thread_slot;
    if (self.registered) {
      Link(r, &self);
      self.tid = GetTid();
    }
    ReinitInForkChild(r.mu);
  }
};

// Another copy's registry (UseThreadRegistryOf), or null. Acquire pairs
// with the release store: the table is complete when seen.
std::atomic<const ThreadRegistryOps*> g_delegate{nullptr};
const ThreadRegistryOps* Delegate() {
  return g_delegate.load(std::memory_order_acquire);
}

void EnsureForkHandler() {
  static RegistryFork* participant = [] {
    auto* p = new RegistryFork();
    RegisterForFork(p);
    return p;
  }();
  (void)participant;
}

}  // namespace

PendingMove* SelfRegister(PendingMoveSlot* pending, Group* group) {
  EnsureForkHandler();
  Registry& r = TheRegistry();
  ThreadSlot& self = tls_thread_slot;
  std::lock_guard<std::mutex> lock(r.mu);
  if (!self.registered) {
    self.tid = GetTid();
    self.pending = pending;
    Link(r, &self);
  }
  self.member = group;
  if (group != nullptr) self.root = RootOf(*group);
  // The thread's own choice wins over a move not picked up yet.
  return self.pending->exchange(nullptr, std::memory_order_acq_rel);
}

PendingMove* SelfUnregister() {
  ThreadSlot& self = tls_thread_slot;
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!self.registered) return nullptr;
  Unlink(r, &self);
  self.member = nullptr;
  self.root = nullptr;
  // No mover can reach the word any more (the slot is unlinked).
  return self.pending->exchange(nullptr, std::memory_order_acq_rel);
}

namespace {

Status MoveThreadHere(pid_t tid, Group& group) {
  if (!group.online()) {
    return Status(StatusCode::kFailedPrecondition, "group was removed");
  }
  auto* move = new PendingMove{GroupRef(&group), ObjCgroupFor(group)};
  PendingMove* old = nullptr;
  {
    Registry& r = TheRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    ThreadSlot* s = FindLocked(r, tid);
    if (s != nullptr) {
      old = PublishLocked(s, move);
      move = nullptr;
    }
  }
  delete old;
  if (move != nullptr) {
    delete move;
    return Status(StatusCode::kNoSuchProcess,
                  "no registered thread " + std::to_string(tid));
  }
  return Status::Ok();
}

Status MoveProcessHere(Group& group) {
  if (!group.online()) {
    return Status(StatusCode::kFailedPrecondition, "group was removed");
  }
  const PendingMove proto{GroupRef(&group), ObjCgroupFor(group)};
  std::vector<PendingMove*> moves;
  std::vector<PendingMove*> old;
  for (;;) {
    size_t n = 0;
    {
      std::lock_guard<std::mutex> lock(TheRegistry().mu);
      n = TheRegistry().count;
    }
    while (moves.size() < n) moves.push_back(new PendingMove(proto));
    old.reserve(moves.size());
    Registry& r = TheRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.count > moves.size()) continue;  // threads registered meanwhile
    for (ThreadSlot* s = r.head; s != nullptr; s = s->next) {
      old.push_back(PublishLocked(s, moves.back()));
      moves.pop_back();
    }
    break;
  }
  for (PendingMove* m : moves) delete m;
  for (PendingMove* m : old) delete m;
  return Status::Ok();
}

bool IsRegisteredThreadHere(pid_t tid) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  return FindLocked(r, tid) != nullptr;
}

std::vector<pid_t> ThreadsInHere(const Group& group) {
  std::vector<pid_t> tids;
  {
    Registry& r = TheRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    tids.reserve(r.count);
    for (ThreadSlot* s = r.head; s != nullptr; s = s->next) {
      if (s->member == &group || (s->member == nullptr && group.is_root() &&
                                  (s->root == nullptr || s->root == &group))) {
        tids.push_back(s->tid);
      }
    }
  }
  std::sort(tids.begin(), tids.end());
  return tids;
}

}  // namespace

Status MoveThread(pid_t tid, Group& group) {
  if (const ThreadRegistryOps* d = Delegate()) {
    return d->move_thread(tid, group);
  }
  return MoveThreadHere(tid, group);
}

Status MoveProcess(Group& group) {
  if (const ThreadRegistryOps* d = Delegate()) return d->move_process(group);
  return MoveProcessHere(group);
}

bool IsRegisteredThread(pid_t tid) {
  if (const ThreadRegistryOps* d = Delegate()) {
    return d->is_registered_thread(tid);
  }
  return IsRegisteredThreadHere(tid);
}

std::vector<pid_t> ThreadsIn(const Group& group) {
  if (const ThreadRegistryOps* d = Delegate()) return d->threads_in(group);
  return ThreadsInHere(group);
}

const ThreadRegistryOps* ThisThreadRegistry() {
  static constexpr ThreadRegistryOps kOps{&MoveThreadHere, &MoveProcessHere,
                                          &IsRegisteredThreadHere,
                                          &ThreadsInHere};
  return &kOps;
}

void UseThreadRegistryOf(const ThreadRegistryOps* ops) {
  g_delegate.store(ops, std::memory_order_release);
}

bool SelfRegistered() { return tls_thread_slot.registered; }

size_t RegisteredThreadCount() {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.count;
}

}  // namespace umemcg::internal

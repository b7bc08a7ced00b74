// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Per-thread active group (kernel: current->active_memcg). The hot read,
// ActiveObjCgroup(), is one load of a trivially constructed thread-local
// struct; the references that keep the named groups alive live in the
// scopes themselves and, for the default, in a second thread-local with a
// destructor (released at thread exit).
//
// Moves by another thread (cgroup.threads, src/threads/thread_registry.h)
// arrive as a pending move in the thread's registry slot: every lookup
// first checks it, one acquire load of the thread's own slot, and only
// when one is waiting installs it as the default (ApplyPendingMove).

#include "umemcg/active.h"

#include <memory>

#include "threads/thread_registry.h"
#include "umemcg/check.h"

namespace umemcg {
namespace {

// Trivial, constant-initialized: reading it never runs a TLS constructor.
struct ActiveState {
  ActiveGroupScope* top = nullptr;     // innermost live scope
  Group* default_group = nullptr;      // owned by tls_default
  ObjCgroup* default_objcg = nullptr;  // ditto
  // A move published by another thread (thread_registry.h), or null. Here,
  // beside the rest, so a lookup computes one thread-local address.
  internal::PendingMoveSlot pending{nullptr};
};
constinit thread_local ActiveState tls_active;

// The references behind ActiveState::default_*; dropped at thread exit.
struct DefaultRefs {
  GroupRef group;
  ObjCgroupRef objcg;
};

// The thread's default references and its registration: at thread exit
// the slot leaves the registry first (no mover reaches it afterwards and
// cgroup.threads stops listing it), then the references are dropped.
struct ThreadDefault {
  DefaultRefs refs;
  ~ThreadDefault() {
    delete internal::SelfUnregister();
    tls_active.default_group = nullptr;
    tls_active.default_objcg = nullptr;
  }
};
thread_local ThreadDefault tls_default;

// Installs `refs` as the thread's default; the old references are
// released when `refs` goes out of scope, after nothing names them.
void InstallDefault(DefaultRefs& refs) {
  tls_active.default_group = refs.group.get();
  tls_active.default_objcg = refs.objcg.get();
  std::swap(tls_default.refs, refs);
}

// Slow path of every lookup: a move published by another thread.
[[gnu::noinline]] void ApplyPendingMove() {
  // Acquire: the move's references were written before its release.
  internal::PendingMove* move =
      tls_active.pending.exchange(nullptr, std::memory_order_acquire);
  if (move == nullptr) return;
  DefaultRefs refs{std::move(move->group), std::move(move->objcg)};
  delete move;
  InstallDefault(refs);
}

// The hot-path check: one load of the thread's own pending-move word.
// Acquire: pairs with the mover's release exchange, so the move's
// references are visible (a plain load on x86).
inline bool HasPendingMove(const ActiveState& s) {
  return s.pending.load(std::memory_order_acquire) != nullptr;
}
inline void CheckPendingMove(const ActiveState& s) {
  if (HasPendingMove(s)) [[unlikely]] {
    ApplyPendingMove();
  }
}

}  // namespace

ObjCgroupRef ObjCgroupFor(Group& group) {
  // The caller's reference on `group` pins every ancestor.
  for (Group* g = &group; g != nullptr; g = g->parent()) {
    ObjCgroupRef ref = g->GetObjCgroup();
    if (ref) return ref;
  }
  return ObjCgroupRef();  // unreachable: the root is never removed
}

ActiveGroupScope::ActiveGroupScope(Group* group)
    : group_(group), prev_(tls_active.top) {
  if (group != nullptr) objcg_ = ObjCgroupFor(*group);
  tls_active.top = this;
}

ActiveGroupScope::~ActiveGroupScope() {
  // A scope destroyed out of order would leave a dangling `top`.
  UMEMCG_CHECK(tls_active.top == this);
  tls_active.top = prev_;
}

namespace {

// The resolution (active.h) of a state with no move waiting.
inline Group* ResolveGroup(const ActiveState& s) {
  if (s.top != nullptr && s.top->group() != nullptr) return s.top->group();
  return s.default_group;
}
inline ObjCgroup* ResolveObjCgroup(const ActiveState& s) {
  if (s.top != nullptr && s.top->objcg() != nullptr) return s.top->objcg();
  return s.default_objcg;
}

// The slow paths: a move waits; install it, then resolve.
[[gnu::noinline]] Group* ActiveGroupAfterMove() {
  ApplyPendingMove();
  return ResolveGroup(tls_active);
}
[[gnu::noinline]] ObjCgroup* ActiveObjCgroupAfterMove() {
  ApplyPendingMove();
  return ResolveObjCgroup(tls_active);
}

}  // namespace

// One thread-local address, one load of the pending-move word (see
// CheckPendingMove), then the resolution as before.
Group* ActiveGroup() {
  const ActiveState& s = tls_active;
  if (HasPendingMove(s)) [[unlikely]] {
    return ActiveGroupAfterMove();
  }
  return ResolveGroup(s);
}

ObjCgroup* ActiveObjCgroup() {
  const ActiveState& s = tls_active;
  if (HasPendingMove(s)) [[unlikely]] {
    return ActiveObjCgroupAfterMove();
  }
  return ResolveObjCgroup(s);
}

void SetThreadDefaultGroup(Group* group) {
  DefaultRefs refs;
  if (group != nullptr) {
    refs.group = GroupRef(group);
    refs.objcg = ObjCgroupFor(*group);
  }
  // Registers the thread (tls_default, touched first, unregisters it at
  // exit) and drops a move not picked up yet: this call wins.
  (void)&tls_default;
  std::unique_ptr<internal::PendingMove> dropped(
      internal::SelfRegister(&tls_active.pending, group));
  InstallDefault(refs);
}

Group* ThreadDefaultGroup() {
  CheckPendingMove(tls_active);
  return tls_active.default_group;
}

void RegisterThread() {
  (void)&tls_default;
  if (internal::SelfRegistered()) return;
  // Registers with the current default as the membership.
  delete internal::SelfRegister(&tls_active.pending, tls_active.default_group);
}

}  // namespace umemcg

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
  Group* default_group = nullptr;      // owned by tls_default_refs
  ObjCgroup* default_objcg = nullptr;  // ditto
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
  internal::PendingMove* move = internal::SelfTakePendingMove();
  if (move == nullptr) return;
  DefaultRefs refs{std::move(move->group), std::move(move->objcg)};
  delete move;
  InstallDefault(refs);
}

// The hot-path check: one acquire load of the thread's own slot.
inline void CheckPendingMove() {
  if (internal::SelfHasPendingMove()) [[unlikely]] {
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

Group* ActiveGroup() {
  CheckPendingMove();
  const ActiveState& s = tls_active;
  if (s.top != nullptr && s.top->group() != nullptr) return s.top->group();
  return s.default_group;
}

ObjCgroup* ActiveObjCgroup() {
  CheckPendingMove();
  const ActiveState& s = tls_active;
  if (s.top != nullptr && s.top->objcg() != nullptr) return s.top->objcg();
  return s.default_objcg;
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
  std::unique_ptr<internal::PendingMove> dropped(internal::SelfRegister(group));
  InstallDefault(refs);
}

Group* ThreadDefaultGroup() {
  CheckPendingMove();
  return tls_active.default_group;
}

void RegisterThread() {
  (void)&tls_default;
  if (internal::tls_thread_slot.registered) return;
  // Registers with the current default as the membership.
  delete internal::SelfRegister(tls_active.default_group);
}

}  // namespace umemcg

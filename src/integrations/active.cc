// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Per-thread active group (kernel: current->active_memcg). The hot read,
// ActiveObjCgroup(), is one load of a trivially constructed thread-local
// struct; the references that keep the named groups alive live in the
// scopes themselves and, for the default, in a second thread-local with a
// destructor (released at thread exit).

#include "umemcg/active.h"

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
thread_local DefaultRefs tls_default_refs;

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
  const ActiveState& s = tls_active;
  if (s.top != nullptr && s.top->group() != nullptr) return s.top->group();
  return s.default_group;
}

ObjCgroup* ActiveObjCgroup() {
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
  tls_active.default_group = refs.group.get();
  tls_active.default_objcg = refs.objcg.get();
  // The old references are released when `refs` goes out of scope, after
  // nothing names them any more.
  std::swap(tls_default_refs, refs);
}

Group* ThreadDefaultGroup() { return tls_active.default_group; }

}  // namespace umemcg

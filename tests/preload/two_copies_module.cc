// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// two_copies_module.so: a second, private copy of libumemcg (linked
// statically, its symbols kept local), as libumemcg-preload-ops.so carries
// one next to libumemcg-preload.so. two_copies_test loads it with dlopen.

#include <cstdio>
#include <utility>

#include "threads/thread_registry.h"
#include "two_copies_work.h"

extern "C" {

__attribute__((visibility("default"))) void two_copies_work(
    umemcg::Controller* ctrl, umemcg::Group* group,
    umemcg::two_copies::WorkResult* out) {
  umemcg::two_copies::Work(*ctrl, *group, out);
}

// A controller created by this copy (never destroyed: the test ends).
__attribute__((visibility("default"))) umemcg::Controller* two_copies_create() {
  auto ctrl = umemcg::Controller::Create({});
  return ctrl.ok() ? std::move(ctrl).value().release() : nullptr;
}

// This copy's cgroup.threads / cgroup.procs answer from `ops`' registry
// (null: this copy's own again), as the preload's operations module does.
__attribute__((visibility("default"))) void two_copies_use_registry(
    const umemcg::internal::ThreadRegistryOps* ops) {
  umemcg::internal::UseThreadRegistryOf(ops);
}

// `group`'s file written / read through this copy's file code.
__attribute__((visibility("default"))) int two_copies_write_file(
    umemcg::Group* group, const char* file, const char* text) {
  return static_cast<int>(group->WriteFile(file, text).code());
}
__attribute__((visibility("default"))) void two_copies_read_file(
    umemcg::Group* group, const char* file, char* buf, size_t len) {
  auto text = group->ReadFile(file);
  std::snprintf(buf, len, "%s", text.ok() ? text.value().c_str() : "");
}

}  // extern "C"

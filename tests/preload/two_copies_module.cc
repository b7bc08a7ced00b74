// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// two_copies_module.so: a second, private copy of libumemcg (linked
// statically, its symbols kept local), as libumemcg-preload-ops.so carries
// one next to libumemcg-preload.so. two_copies_test loads it with dlopen.

#include <utility>

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

}  // extern "C"

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The seam between the preload and the operations module (the FUSE mount
// umemcg::MountFs and the Prometheus endpoint umemcg::ServeMetrics, built
// on another branch). The preload parses UMEMCG_MOUNT / UMEMCG_METRICS and
// calls these two functions if they exist; they are weak, so a build
// without the operations module links and runs (and warns once at start).
//
// To connect the module: add src/preload/ops_glue.cc defining both (with
// C linkage) on top of MountFs / ServeMetrics; CMake compiles that file
// into libumemcg-preload.so when it exists. Each returns 0 or an errno and
// must start its own thread(s) and return promptly; the preload calls them
// from its constructor with the thread marked as inside umemcg, so their
// allocations are charged to nothing.

#ifndef UMEMCG_SRC_PRELOAD_OPS_SEAM_H_
#define UMEMCG_SRC_PRELOAD_OPS_SEAM_H_

#include "umemcg/controller.h"

extern "C" {
// Mounts `controller`'s group tree at directory `dir`.
__attribute__((weak, visibility("hidden"))) int umemcg_preload_ops_mount(
    umemcg::Controller* controller, const char* dir);
// Serves `controller`'s metrics at `address` ("127.0.0.1:9100").
__attribute__((weak, visibility("hidden"))) int umemcg_preload_ops_metrics(
    umemcg::Controller* controller, const char* address);
}

#endif  // UMEMCG_SRC_PRELOAD_OPS_SEAM_H_

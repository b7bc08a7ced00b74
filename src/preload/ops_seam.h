// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The seam between the preload and the operations module (the FUSE mount
// umemcg::MountFs and the Prometheus endpoint umemcg::ServeMetrics). The
// preload parses UMEMCG_MOUNT / UMEMCG_METRICS and calls these two
// functions; ops_glue.cc defines them (C linkage), and the root
// CMakeLists.txt compiles it into libumemcg-preload.so from the operations
// block, together with libumemcg-metrics and, when libfuse3 is found,
// libumemcg-fuse. They stay weak so the preload still links without them.
//
// Each returns 0 or an errno (ENOSYS: that part was built without its
// library) and starts its own thread(s) and returns promptly; the preload
// calls them from its constructor with the thread marked as inside umemcg,
// so what they allocate while starting is charged to nothing. The threads
// they start allocate like any other thread of the program (charged to the
// default group).

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

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The seam between the preload and its operations module,
// libumemcg-preload-ops.so (ops_glue.cc): the FUSE mount (umemcg::MountFs)
// and the Prometheus endpoint (umemcg::ServeMetrics). The preload opens the
// module with dlopen only when UMEMCG_MOUNT or UMEMCG_METRICS is set, so a
// plain preload loads neither libfuse3 nor cpp-httplib (nor libstdc++.so),
// and finds these functions with dlsym.
//
// The module carries its own private copy of libumemcg's code and works on
// the preload's Controller through it: the two copies come from the same
// build (umemcg_preload_ops_abi() returns the build's token, compared by
// the preload before anything else), so every object layout agrees. A
// controller's state lives in the controller; what each copy keeps for
// itself is set when that copy is loaded (the rseq area offset,
// port/rseq.cc) or is per-thread state of umemcg calls the module's
// threads make through their own copy (reclaim and tree-walk depths,
// deferred error reports).
//
// Each start function returns 0 or an errno (ENOSYS: that part was built
// without its library) and writes a NUL-terminated message naming the
// cause into `message` (`len` bytes); it starts its own thread(s) and
// returns promptly. The preload calls them from its constructor with the
// thread marked as inside umemcg, so what they allocate while starting is
// charged to nothing; so is everything the threads they start (and the
// threads those start) allocate, for their whole life (thread_hooks.cc:
// they run umemcg's code, and a charge from inside it could wait for
// itself).

#ifndef UMEMCG_SRC_PRELOAD_OPS_SEAM_H_
#define UMEMCG_SRC_PRELOAD_OPS_SEAM_H_

#include <stddef.h>

#include "threads/thread_registry.h"
#include "umemcg/controller.h"

extern "C" {
// The build token (UMEMCG_PRELOAD_ABI_TOKEN) the module was built with.
typedef const char* (*umemcg_preload_ops_abi_fn)(void);
// Mounts `controller`'s group tree at directory `dir` /
// serves its metrics at `address` ("127.0.0.1:9100").
typedef int (*umemcg_preload_ops_start_fn)(umemcg::Controller* controller,
                                           const char* value, char* message,
                                           size_t len);
// Makes the module's copy answer cgroup.threads / cgroup.procs (list,
// move) from the preload's thread registry (`registry`: the preload's
// ThisThreadRegistry()), where the program's threads are registered.
// Called before the mount is started.
typedef void (*umemcg_preload_ops_threads_fn)(
    const umemcg::internal::ThreadRegistryOps* registry);
}

#define UMEMCG_PRELOAD_OPS_ABI "umemcg_preload_ops_abi"
#define UMEMCG_PRELOAD_OPS_MOUNT "umemcg_preload_ops_mount"
#define UMEMCG_PRELOAD_OPS_METRICS "umemcg_preload_ops_metrics"
#define UMEMCG_PRELOAD_OPS_THREADS "umemcg_preload_ops_threads"
#define UMEMCG_PRELOAD_OPS_LIBRARY "libumemcg-preload-ops.so"

#endif  // UMEMCG_SRC_PRELOAD_OPS_SEAM_H_

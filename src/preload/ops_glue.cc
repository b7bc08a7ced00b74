// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The operations module behind the preload's seam (ops_seam.h):
// UMEMCG_MOUNT mounts the process's group tree with MountFs (libumemcg-fuse,
// when built with libfuse3; ENOSYS otherwise) and UMEMCG_METRICS serves it
// with ServeMetrics (libumemcg-metrics, when built with cpp-httplib;
// ENOSYS otherwise). Both are linked into
// libumemcg-preload.so and stay private to it (exports.map).
//
// Lifetime. The handles are kept for the whole process and never destroyed:
// the controller they serve is never destroyed either (runtime.cc), and at
// exit the program's own destructors still allocate. At a normal exit this
// library's destructor unmounts (libfuse3 is still loaded then: it was
// loaded first, so it is finalized after us); after a crash or a kill,
// fusermount3 does (auto_unmount), though not always at once. The metrics
// socket goes with the process's descriptors. A child made by fork()
// inherits neither thread: its mount and server are the parent's, and its
// exit leaves the mount alone.
//
// Threads. The mount's and the server's threads start outside any HookGuard,
// so what they allocate is charged like any other thread's: to the
// default group ("process"), unless they are assigned elsewhere.
//
// Child processes (and fusermount3, which libfuse starts with this
// environment) do not see UMEMCG_MOUNT / UMEMCG_METRICS: runtime.cc takes
// them out of the environment before calling here.

#include <errno.h>
#include <unistd.h>

#include <memory>
#include <utility>

#include "preload/ops_seam.h"
#include "umemcg/metrics.h"
#include "umemcg/status.h"
#ifdef UMEMCG_PRELOAD_HAVE_FUSE
#include "umemcg/fuse.h"
#endif

#ifdef UMEMCG_PRELOAD_HAVE_FUSE
namespace {

// Written once by the constructor's thread before any other thread of the
// program exists; read by the destructor at exit.
umemcg::FuseMount* g_mount = nullptr;
pid_t g_mount_pid = 0;

__attribute__((destructor)) void UnmountAtExit() {
  if (g_mount != nullptr && getpid() == g_mount_pid) g_mount->Unmount();
}

}  // namespace
#endif

extern "C" {

int umemcg_preload_ops_mount(umemcg::Controller* controller, const char* dir) {
#ifdef UMEMCG_PRELOAD_HAVE_FUSE
  auto mount = umemcg::MountFs(*controller, dir);
  if (!mount.ok()) return umemcg::ErrnoOf(mount.status().code());
  // Kept for the process's lifetime (see Lifetime above).
  g_mount = std::move(mount).value().release();
  g_mount_pid = getpid();
  return 0;
#else
  (void)controller;
  (void)dir;
  return ENOSYS;
#endif
}

int umemcg_preload_ops_metrics(umemcg::Controller* controller,
                               const char* address) {
#ifdef UMEMCG_PRELOAD_HAVE_METRICS
  auto server = umemcg::ServeMetrics(*controller, address);
  if (!server.ok()) return umemcg::ErrnoOf(server.status().code());
  // Kept for the process's lifetime (see Lifetime above).
  (void)std::move(server).value().release();
  return 0;
#else
  (void)controller;
  (void)address;
  return ENOSYS;
#endif
}

}  // extern "C"

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// libumemcg-preload-ops.so, the preload's operations module (see
// ops_seam.h): UMEMCG_MOUNT mounts the process's group tree with MountFs
// (libumemcg-fuse, when built with libfuse3; ENOSYS otherwise) and
// UMEMCG_METRICS serves it with ServeMetrics (libumemcg-metrics, when
// built with cpp-httplib; ENOSYS otherwise). The module exports only the
// functions below (ops_exports.map). Its cgroup.threads and cgroup.procs
// list and move the program's threads, which are registered in the
// preload's copy: umemcg_preload_ops_threads points this copy's registry
// functions at the preload's.
//
// Lifetime. The handles are kept for the whole process and never destroyed:
// the controller they serve is never destroyed either (runtime.cc), and at
// exit the program's own destructors still allocate. At a normal exit this
// module's destructor unmounts; after a crash or a kill, fusermount3 does
// (auto_unmount), though not always at once. The metrics socket goes with
// the process's descriptors. A child made by fork() inherits neither
// thread: its mount and server are the parent's, and its exit leaves the
// mount alone.
//
// Child processes (and fusermount3, which libfuse starts with this
// environment) do not see UMEMCG_MOUNT / UMEMCG_METRICS: runtime.cc takes
// them out of the environment before calling here.

#include <errno.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <utility>

#include "preload/ops_seam.h"
#include "umemcg/metrics.h"
#include "umemcg/status.h"
#ifdef UMEMCG_PRELOAD_HAVE_FUSE
#include "umemcg/fuse.h"
#endif

namespace {

void SetMessage(char* message, size_t len, const std::string& text) {
  if (len > 0) std::snprintf(message, len, "%s", text.c_str());
}

#ifdef UMEMCG_PRELOAD_HAVE_FUSE
// Written once by the preload's constructor before any other thread of the
// program exists; read by the destructor at exit.
umemcg::FuseMount* g_mount = nullptr;
pid_t g_mount_pid = 0;

__attribute__((destructor)) void UnmountAtExit() {
  if (g_mount != nullptr && getpid() == g_mount_pid) g_mount->Unmount();
}
#endif

}  // namespace

extern "C" {

__attribute__((visibility("default"))) const char* umemcg_preload_ops_abi() {
  return UMEMCG_PRELOAD_ABI_TOKEN;
}

__attribute__((visibility("default"))) void umemcg_preload_ops_threads(
    const umemcg::internal::ThreadRegistryOps* registry) {
  umemcg::internal::UseThreadRegistryOf(registry);
}

__attribute__((visibility("default"))) int umemcg_preload_ops_mount(
    umemcg::Controller* controller, const char* dir, char* message,
    size_t len) {
#ifdef UMEMCG_PRELOAD_HAVE_FUSE
  auto mount = umemcg::MountFs(*controller, dir);
  if (!mount.ok()) {
    SetMessage(message, len, std::string(mount.status().message()));
    return umemcg::ErrnoOf(mount.status().code());
  }
  // Kept for the process's lifetime (see Lifetime above).
  g_mount = std::move(mount).value().release();
  g_mount_pid = getpid();
  return 0;
#else
  (void)controller;
  (void)dir;
  SetMessage(message, len, "built without libfuse3 (MountFs)");
  return ENOSYS;
#endif
}

__attribute__((visibility("default"))) int umemcg_preload_ops_metrics(
    umemcg::Controller* controller, const char* address, char* message,
    size_t len) {
#ifdef UMEMCG_PRELOAD_HAVE_METRICS
  auto server = umemcg::ServeMetrics(*controller, address);
  if (!server.ok()) {
    SetMessage(message, len, std::string(server.status().message()));
    return umemcg::ErrnoOf(server.status().code());
  }
  // Kept for the process's lifetime (see Lifetime above).
  (void)std::move(server).value().release();
  return 0;
#else
  (void)controller;
  (void)address;
  SetMessage(message, len, "built without cpp-httplib (ServeMetrics)");
  return ENOSYS;
#endif
}

}  // extern "C"

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The preload runtime's state, shared by its start-up and exit
// (runtime.cc) and the umemcg_preload_* C API (api.cc): the controller,
// the "process" group, the groups threads were assigned to, and where the
// exit report goes. Made once at load and never destroyed (runtime.cc
// says why).
//
// Thread safety: g_runtime is published once (release) and read with
// acquire loads; `assigned` and `moved_in` are guarded by `mu`; the rest is
// constant once published.

#ifndef UMEMCG_SRC_PRELOAD_RUNTIME_H_
#define UMEMCG_SRC_PRELOAD_RUNTIME_H_

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "umemcg/controller.h"
#include "umemcg/obj_cgroup.h"

namespace umemcg::preload {

// Groups umemcg_preload_set_group may assign (each pins its objcg for
// good: blocks point at it).
constexpr size_t kMaxAssignedGroups = 256;
struct Assigned {
  std::string path;
  GroupRef group;
  ObjCgroupRef objcg;  // pins the objcg its blocks point at, for good
};

struct MovedIn {
  GroupRef group;
  ObjCgroupRef objcg;
};

// Where the exit report goes.
struct ReportSink {
  bool to_stderr = false;
  std::string path;  // absolute, when not to_stderr ("": no report)
  // stderr as it was at start-up, duplicated (close-on-exec), and its
  // identity: the report is written only to that same file, even if the
  // program closed fd 2 at exit (coreutils' close_stdout) or reused the
  // descriptor numbers.
  int fd = -1;
  dev_t dev = 0;
  ino_t ino = 0;
};

struct Runtime {
  std::unique_ptr<Controller> controller;
  GroupRef process;
  ObjCgroupRef process_objcg;
  bool enforce = false;
  ReportSink report;
  // UMEMCG_PROFILE: where the heap profile goes at exit (absolute; "%p"
  // is replaced by the pid then).
  std::string profile_path;
  std::mutex mu;  // guards assigned and moved_in
  std::vector<Assigned> assigned;
  // The groups threads were moved to through cgroup.threads /
  // cgroup.procs (threads.cc), each once, with the objcg the move named:
  // pinned for good, as `assigned` (blocks point at the objcg, and the
  // thread registry names the group as the threads' membership).
  std::vector<MovedIn> moved_in;
};

// Set once at load (release; the API's acquire loads pair with it).
extern std::atomic<Runtime*> g_runtime;

}  // namespace umemcg::preload

#endif  // UMEMCG_SRC_PRELOAD_RUNTIME_H_

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Two copies of libumemcg in one process (issue: the preload's operations
// module, which carries its own copy, aborted the program with "free():
// invalid pointer" when a memory.high or memory.max write through the
// mount drained the stocks: its copy's rseq area offset had never been set,
// so its sequences stored their descriptor over glibc's dtv pointer).
// This binary's copy and two_copies_module.so's each charge through the
// rseq stocks, drain and write limits below usage, on a controller the
// other copy created. Also run with libumemcg-preload.so preloaded (a
// program linking libumemcg with the preload loaded: three copies).

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>

#include "port/rseq.h"
#include "two_copies_work.h"
#include "umemcg/active.h"
#include "umemcg/controller.h"
#include "umemcg/group.h"

namespace umemcg::two_copies {
namespace {

#ifndef TWO_COPIES_MODULE
#error "TWO_COPIES_MODULE: the module's path"
#endif

struct Module {
  void* handle = nullptr;
  two_copies_work_fn work = nullptr;
  two_copies_create_fn create = nullptr;
  two_copies_use_registry_fn use_registry = nullptr;
  two_copies_write_file_fn write_file = nullptr;
  two_copies_read_file_fn read_file = nullptr;
};

Module Load() {
  Module m;
  m.handle = dlopen(TWO_COPIES_MODULE, RTLD_NOW | RTLD_LOCAL);
  if (m.handle == nullptr) return m;
  m.work =
      reinterpret_cast<two_copies_work_fn>(dlsym(m.handle, "two_copies_work"));
  m.create = reinterpret_cast<two_copies_create_fn>(
      dlsym(m.handle, "two_copies_create"));
  m.use_registry = reinterpret_cast<two_copies_use_registry_fn>(
      dlsym(m.handle, "two_copies_use_registry"));
  m.write_file = reinterpret_cast<two_copies_write_file_fn>(
      dlsym(m.handle, "two_copies_write_file"));
  m.read_file = reinterpret_cast<two_copies_read_file_fn>(
      dlsym(m.handle, "two_copies_read_file"));
  return m;
}

void Expect(const WorkResult& r, const char* who) {
  EXPECT_STREQ(r.error, "") << who;
#if UMEMCG_HAVE_RSEQ_COMMIT
  EXPECT_EQ(r.copy_offset, r.glibc_offset)
      << who << ": this copy's rseq area offset is not glibc's";
#endif
}

void RunOnThread(const std::function<void()>& f) {
  // A fresh thread too: its TCB and dtv are the ones glibc frees at exit.
  std::thread t(f);
  t.join();
}

TEST(TwoCopiesTest, ModuleCopyWorksOnThisCopysController) {
  Module m = Load();
  ASSERT_NE(m.handle, nullptr) << dlerror();
  ASSERT_NE(m.work, nullptr);
  auto ctrl = Controller::Create({}).value();
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "a").value();
  if (!internal::RseqCommitAvailable()) {
    std::printf("note: rseq commits unavailable here; locked paths only\n");
  }
  WorkResult mine;
  Work(*ctrl, *g, &mine);
  Expect(mine, "this copy");
  WorkResult theirs;
  m.work(ctrl.get(), g.get(), &theirs);
  Expect(theirs, "the module's copy");
  RunOnThread([&] {
    WorkResult t;
    m.work(ctrl.get(), g.get(), &t);
    Expect(t, "the module's copy, on a new thread");
  });
  EXPECT_EQ(mine.rseq_commits, internal::RseqCommitAvailable());
}

TEST(TwoCopiesTest, ThisCopyWorksOnTheModulesController) {
  Module m = Load();
  ASSERT_NE(m.handle, nullptr) << dlerror();
  ASSERT_NE(m.create, nullptr);
  Controller* ctrl = m.create();  // the module's; never destroyed
  ASSERT_NE(ctrl, nullptr);
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "b").value();
  WorkResult theirs;
  m.work(ctrl, g.get(), &theirs);
  Expect(theirs, "the module's copy");
  WorkResult mine;
  Work(*ctrl, *g, &mine);
  Expect(mine, "this copy");
  RunOnThread([&] {
    WorkResult t;
    Work(*ctrl, *g, &t);
    Expect(t, "this copy, on a new thread");
  });
}

// The preload's case: threads registered in one copy, cgroup.threads
// written and read through the other's files (the mount's). The module's
// copy knows none of this copy's threads until it answers from this copy's
// registry (UseThreadRegistryOf).
TEST(TwoCopiesTest, ModuleCopyMovesThisCopysThreadsThroughItsRegistry) {
  Module m = Load();
  ASSERT_NE(m.handle, nullptr) << dlerror();
  ASSERT_NE(m.use_registry, nullptr);
  ASSERT_NE(m.write_file, nullptr);
  ASSERT_NE(m.read_file, nullptr);
  auto ctrl = Controller::Create({}).value();
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "moved").value();
  RunOnThread([&] {
    RegisterThread();
    const std::string tid =
        std::to_string(static_cast<pid_t>(::syscall(SYS_gettid)));
    char listed[256];
    EXPECT_EQ(m.write_file(g.get(), "cgroup.threads", tid.c_str()),
              static_cast<int>(StatusCode::kNoSuchProcess));
    m.use_registry(internal::ThisThreadRegistry());
    EXPECT_EQ(m.write_file(g.get(), "cgroup.threads", tid.c_str()), 0);
    m.read_file(g.get(), "cgroup.threads", listed, sizeof(listed));
    EXPECT_EQ(std::string(listed), tid + "\n");
    EXPECT_EQ(ActiveGroup(), g.get());
    m.use_registry(nullptr);
    SetThreadDefaultGroup(nullptr);
  });
}

}  // namespace
}  // namespace umemcg::two_copies

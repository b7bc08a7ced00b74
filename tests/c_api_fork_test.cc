// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// fork() while another thread is inside a C API call (issue 13 item 1, the
// C API's handle table): that call's handle uses belong to a thread the
// child does not have. The child must still be able to release every
// handle and destroy the controller, which waits for the handles' users.
// Here the other thread sits in the C OOM handler (inside
// umemcg_try_charge), holding its group handle in use and the OOM lock.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <thread>

#include "umemcg/c.h"

namespace {

std::atomic<int> in_handler{0};
std::atomic<bool> let_go{false};

int BlockingOom(void*, umemcg_group_t*, umemcg_group_t*, uint64_t,
                umemcg_group_t**) {
  in_handler.store(1);
  while (!let_go.load()) std::this_thread::yield();
  return 0;
}

// The child: uses the controller, then releases everything.
int ChildMain(umemcg_controller_t* ctrl, umemcg_group_t* root,
              umemcg_group_t* g) {
  umemcg_group_t* h = nullptr;
  if (umemcg_group_create(root, "child", &h) != 0) return 2;
  if (umemcg_try_charge(h, 3, UMEMCG_CHARGE_MAY_RECLAIM, nullptr) != 0) {
    return 3;
  }
  if (umemcg_uncharge(h, 3) != 0) return 4;
  if (umemcg_drain_all(root) != 0) return 5;
  // The OOM lock the other thread held is free here.
  if (umemcg_set_oom_handler(ctrl, nullptr, nullptr) != 0) return 6;
  if (umemcg_try_charge(g, 1, UMEMCG_CHARGE_MAY_RECLAIM, nullptr) != ENOMEM) {
    return 7;
  }
  if (umemcg_group_remove(h) != 0) return 8;
  if (umemcg_group_release(h) != 0) return 9;
  if (umemcg_group_release(g) != 0) return 10;
  if (umemcg_group_release(root) != 0) return 11;
  // Waits for every handle's users: the other thread's are not here.
  if (umemcg_controller_destroy(ctrl) != 0) return 12;
  return 0;
}

TEST(CApiForkTest, ChildReleasesHandlesInUseByAThreadItDoesNotHave) {
  umemcg_options_t o;
  umemcg_options_init(&o);
  o.cpu_source = UMEMCG_CPU_FAKE;
  o.nr_cpus = 2;
  o.stats_flush_period_ms = 0;
  umemcg_controller_t* ctrl = nullptr;
  umemcg_group_t *root = nullptr, *g = nullptr;
  ASSERT_EQ(umemcg_controller_create(&o, &ctrl), 0);
  ASSERT_EQ(umemcg_group_root(ctrl, &root), 0);
  ASSERT_EQ(umemcg_group_create(root, "g", &g), 0);
  ASSERT_EQ(umemcg_write_file(g, "memory.max", "4K"), 0);
  ASSERT_EQ(umemcg_try_charge(g, 1, 0, nullptr), 0);
  ASSERT_EQ(umemcg_set_oom_handler(ctrl, BlockingOom, nullptr), 0);
  std::thread charger([&] {
    EXPECT_EQ(umemcg_try_charge(g, 1, UMEMCG_CHARGE_MAY_RECLAIM, nullptr),
              ENOMEM);
  });
  while (in_handler.load() == 0) std::this_thread::yield();

  std::fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(ChildMain(ctrl, root, g));
  // Hang guard only.
  int status = 0;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  pid_t r = 0;
  while ((r = waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (r == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    ADD_FAILURE() << "the child hung (killed after 60 s)";
  } else {
    ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's check that failed";
  }

  let_go.store(true);
  charger.join();
  EXPECT_EQ(umemcg_uncharge_direct(g, 1), 0);
  EXPECT_EQ(umemcg_group_release(g), 0);
  EXPECT_EQ(umemcg_group_release(root), 0);
  EXPECT_EQ(umemcg_controller_destroy(ctrl), 0);
}

}  // namespace

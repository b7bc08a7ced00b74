// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// A process that sandboxes itself after creating its controller (issue 13
// item 2): a seccomp filter denies membarrier(2) (and, in the second case,
// sched_setaffinity(2) too) while threads on different CPUs charge through
// the rseq hit paths and others drain, which fences remote CPUs. The
// controller must fall back to a correct path, never abort, and balance
// exactly at quiescence. Each case runs in a child process so that the
// filter stays out of the other tests; the parent checks its exit status.

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "port/rseq.h"
#include "umemcg/obj_cgroup.h"
#include "umemcg/umemcg.h"

namespace umemcg {
namespace {

enum Deny { kMembarrier, kMembarrierAndAffinity };

// Exit codes of the child.
constexpr int kOk = 0;
constexpr int kSkipped = 77;

int Fail(int code, const char* what) {
  std::fprintf(stderr, "child: %s\n", what);
  return code;
}

bool InstallFilter(Deny deny) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return false;
  bool ok = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(membarrier),
                             0) == 0;
  if (deny == kMembarrierAndAffinity) {
    ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
                                SCMP_SYS(sched_setaffinity), 0) == 0;
  }
  // Every thread of the process, not only the caller.
  ok = ok && seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1) == 0;
  ok = ok && seccomp_load(ctx) == 0;
  seccomp_release(ctx);
  return ok;
}

void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

int ChildMain(Deny deny) {
  std::vector<int> cpus;
  {
    cpu_set_t set;
    sched_getaffinity(0, sizeof(set), &set);
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  if (cpus.size() < 2) return kSkipped;
  ControllerOptions options;
  options.cpu_source = CpuSource::kAuto;
  options.stats_flush_period = std::chrono::nanoseconds(0);
  std::atomic<int> errors{0};
  options.error_hook = [&errors](const ErrorReport&) { errors.fetch_add(1); };
  auto created = Controller::Create(std::move(options));
  if (!created.ok()) return Fail(2, "create");
  std::unique_ptr<Controller> ctrl = std::move(created).value();
  if (!ctrl->info().stock_rseq) return kSkipped;
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  ObjCgroupRef o = g->GetObjCgroup();
  // Warm both CPUs' stocks before the sandbox goes up.
  std::atomic<bool> stop{false};
  std::atomic<int> phase{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&, w] {
      PinTo(cpus[static_cast<size_t>(w) % cpus.size()]);
      std::mt19937 rng(static_cast<unsigned>(w));
      std::vector<uint64_t> pages, bytes;
      while (!stop.load(std::memory_order_relaxed)) {
        if (phase.load(std::memory_order_relaxed) == 1 && w == 0) {
          // After the sandbox: this thread also moves, so that its locked
          // paths run away from the shard's CPU (fenced).
          PinTo(cpus[rng() % cpus.size()]);
        }
        if (rng() % 2 == 0 && pages.size() < 64) {
          const uint64_t n = 1 + rng() % 3;
          if (g->TryCharge(Pages(n), kChargeDefault, StatItem::kAnon).ok()) {
            pages.push_back(n);
          }
        } else if (!pages.empty()) {
          g->Uncharge(Pages(pages.back()), StatItem::kAnon);
          pages.pop_back();
        }
        if (rng() % 2 == 0 && bytes.size() < 256) {
          const uint64_t n = 16 + rng() % 200;
          if (o->Charge(Bytes(n)).ok()) bytes.push_back(n);
        } else if (!bytes.empty()) {
          o->Uncharge(Bytes(bytes.back()));
          bytes.pop_back();
        }
      }
      for (uint64_t n : pages) g->Uncharge(Pages(n), StatItem::kAnon);
      for (uint64_t n : bytes) o->Uncharge(Bytes(n));
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (!InstallFilter(deny)) {
    stop.store(true);
    for (auto& t : workers) t.join();
    return Fail(3, "seccomp filter not installed");
  }
  phase.store(1);
  // Drains from here fence remote CPUs: membarrier now fails (EPERM).
  for (int i = 0; i < 2000; ++i) {
    ctrl->DrainAllStocks(i % 2 == 0 ? ctrl->root() : *g);
    if (i % 100 == 0) (void)ctrl->CheckInvariants();
  }
  stop.store(true);
  for (auto& t : workers) t.join();
  // The fences did fail and the process switched to its locked paths.
  if (!internal::RseqFenceFailed()) return Fail(12, "no fence failed");
  o.reset();
  ctrl->DrainAllStocks(ctrl->root());
  if (!ctrl->CheckInvariants().ok()) return Fail(4, "invariants");
  if (g->usage() != Pages(0)) return Fail(5, "usage not zero");
  if (ctrl->root().usage() != Pages(0)) return Fail(6, "root usage not zero");
  if (g->StatExact(StatItem::kAnon) != 0) return Fail(7, "anon not zero");
  if (g->StatExact(StatItem::kSlabUnreclaimable) != 0) {
    return Fail(8, "slab not zero");
  }
  if (g->StatExact(StatItem::kKernel) != 0) return Fail(9, "kmem not zero");
  if (errors.load() != 0) return Fail(10, "error reports");
  // Later controllers work too.
  auto second = Controller::Create({});
  if (!second.ok()) return Fail(11, "second controller");
  return kOk;
}

void RunCase(Deny deny) {
  if (!internal::RseqCommitAvailable()) {
    GTEST_SKIP() << "rseq commit unavailable here (TSan build, no rseq or "
                    "no membarrier RSEQ fence): nothing to fall back from";
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(ChildMain(deny));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status))
      << "child killed by signal " << WTERMSIG(status)
      << " (SIGABRT = 6: a failed membarrier aborted the process)";
  if (WEXITSTATUS(status) == kSkipped) {
    GTEST_SKIP() << "fewer than 2 CPUs allowed, or the stocks do not use "
                    "rseq here";
  }
  EXPECT_EQ(WEXITSTATUS(status), kOk);
}

TEST(MembarrierFallbackTest, DeniedAfterCreationFallsBackAndStaysExact) {
  RunCase(kMembarrier);
}

TEST(MembarrierFallbackTest, DeniedWithAffinityChangesFallsBackAndStaysExact) {
  RunCase(kMembarrierAndAffinity);
}

}  // namespace
}  // namespace umemcg

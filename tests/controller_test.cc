// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Controller settings, the group tree, lifetime and misuse.

#include "umemcg/controller.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "controller_impl.h"
#include "test_util.h"

namespace umemcg {
namespace {

using testing::TestController;

TEST(ControllerTest, DefaultsAreTheNewestKernel) {
  auto c = Controller::Create();
  ASSERT_TRUE(c.ok());
  const ControllerInfo& info = c.value()->info();
  EXPECT_EQ(info.batch, 64);
  EXPECT_EQ(info.stock_slots, 7);
  EXPECT_GE(info.nr_cpus, 1);
  EXPECT_NE(info.cpu_source, CpuSource::kAuto);
  EXPECT_EQ(info.cpu_source,
            RseqAvailable() ? CpuSource::kRseq : CpuSource::kGetcpu);
}

TEST(ControllerTest, InvalidSettingsNameTheSetting) {
  struct Case {
    ControllerOptions options;
    const char* name;
  };
  const Case cases[] = {
      {{.batch = 0}, "batch"},
      {{.batch = 4097}, "batch"},
      {{.stock_slots = 0}, "stock_slots"},
      {{.stock_slots = 17}, "stock_slots"},
      {{.nr_cpus = -1}, "nr_cpus"},
      {{.nr_cpus = 5000}, "nr_cpus"},
  };
  for (const Case& c : cases) {
    auto r = Controller::Create(c.options);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.name), std::string_view::npos)
        << r.status().ToString();
  }
  EXPECT_TRUE(Controller::Create({.batch = 127, .stock_slots = 16}).ok());
  // Past the kernel's uint8 slot counts: 128 .. 4096.
  EXPECT_TRUE(Controller::Create({.batch = 128}).ok());
  EXPECT_TRUE(Controller::Create({.batch = 4096, .stock_slots = 16}).ok());
  EXPECT_TRUE(Controller::Create({.batch = 1, .stock_slots = 1}).ok());
}

TEST(ControllerTest, ExplicitSourcesAreReported) {
  auto c = Controller::Create({.cpu_source = CpuSource::kGetcpu, .nr_cpus = 3});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value()->info().cpu_source, CpuSource::kGetcpu);
  EXPECT_EQ(c.value()->info().nr_cpus, 3);
  auto r = Controller::Create({.cpu_source = CpuSource::kRseq});
  EXPECT_EQ(r.ok(), RseqAvailable());
}

TEST(ControllerTest, CreateLookupAndPaths) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("a/b");
  EXPECT_EQ(b->path(), "a/b");
  EXPECT_EQ(b->parent(), a.get());
  EXPECT_EQ(b->depth(), 2);
  EXPECT_TRUE(b->IsDescendantOf(*a));
  EXPECT_TRUE(b->IsDescendantOf(t.ctrl->root()));
  EXPECT_FALSE(a->IsDescendantOf(*b));
  EXPECT_EQ(t.ctrl->Lookup("a/b").value().get(), b.get());
  EXPECT_EQ(t.ctrl->Lookup("/a/b/").value().get(), b.get());
  EXPECT_EQ(t.ctrl->Lookup("").value().get(), &t.ctrl->root());
  EXPECT_EQ(t.ctrl->Lookup("a/x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(t.ctrl->root().ChildNames(), std::vector<std::string>{"a"});
  EXPECT_NE(a->id(), b->id());
  EXPECT_EQ(t.ctrl->root().id(), 1u);
}

TEST(ControllerTest, BadNamesAndDuplicatesAreRefused) {
  TestController t;
  GroupRef a = t.Make("a");
  for (const char* bad : {"", "x/y", ".", ".."}) {
    EXPECT_EQ(t.ctrl->CreateGroup(t.ctrl->root(), bad).status().code(),
              StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(t.ctrl->CreateGroup(t.ctrl->root(), "a").status().code(),
            StatusCode::kAlreadyExists);
  // Same name under another parent is fine.
  EXPECT_TRUE(t.ctrl->CreateGroup(*a, "a").ok());
}

// cgroup_mkdir and the VFS: a newline is EINVAL (it would break
// /proc/<pid>/cgroup), a control file's name EEXIST (kernfs finds the
// file), a name past NAME_MAX ENAMETOOLONG. Nothing is created.
TEST(ControllerTest, NamesTheKernelRefusesAreRefusedWithItsErrno) {
  TestController t;
  GroupRef a = t.Make("a");
  auto errno_of = [&](Group& parent, std::string_view name) {
    return ErrnoOf(t.ctrl->CreateGroup(parent, name).status().code());
  };
  for (const char* bad : {"x\ny", "\n", "x\n"}) {
    EXPECT_EQ(errno_of(*a, bad), EINVAL) << bad;
  }
  for (const std::string& f : a->ListFiles()) {
    EXPECT_EQ(errno_of(*a, f), EEXIST) << f;
  }
  EXPECT_EQ(errno_of(*a, "memory.stat"), EEXIST);
  EXPECT_EQ(errno_of(*a, "cgroup.stat"), EEXIST);
  EXPECT_EQ(errno_of(*a, "cgroup.subtree_control"), EEXIST);
  // Names that look like files but are none are plain names, as in cgroupfs.
  EXPECT_EQ(errno_of(*a, "memory.nonsense"), 0);
  EXPECT_EQ(errno_of(*a, "cgroup"), 0);
  // The root has no memory.max (kernel too): a child may take that name.
  EXPECT_EQ(errno_of(t.ctrl->root(), "memory.max"), 0);
  EXPECT_EQ(errno_of(t.ctrl->root(), "memory.stat"), EEXIST);
  EXPECT_EQ(errno_of(*a, std::string(255, 'n')), 0);
  EXPECT_EQ(errno_of(*a, std::string(256, 'n')), ENAMETOOLONG);
  EXPECT_EQ(errno_of(*a, std::string(100000, 'n')), ENAMETOOLONG);
  EXPECT_EQ(a->nr_descendants(), 3);
}

TEST(ControllerTest, RemoveRefusesRootAndParentsOfLiveChildren) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("a/b");
  EXPECT_EQ(t.ctrl->RemoveGroup(t.ctrl->root()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(t.ctrl->RemoveGroup(*a).code(), StatusCode::kBusy);
  ASSERT_TRUE(t.ctrl->RemoveGroup(*b).ok());
  EXPECT_EQ(t.ctrl->RemoveGroup(*b).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(t.ctrl->RemoveGroup(*a).ok());  // offline children don't count
  EXPECT_EQ(t.ctrl->Lookup("a").status().code(), StatusCode::kNotFound);
  // A name can be reused once the old group is gone from the tree.
  EXPECT_TRUE(t.ctrl->CreateGroup(t.ctrl->root(), "a").ok());
}

TEST(ControllerTest, RemovedGroupRefusesChargesAndLimitsButAcceptsUncharges) {
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->TryCharge(Pages(10)).ok());
  ASSERT_TRUE(t.ctrl->RemoveGroup(*g).ok());
  EXPECT_FALSE(g->online());
  EXPECT_EQ(g->TryCharge(Pages(1)).code, StatusCode::kFailedPrecondition);
  EXPECT_EQ(g->SetMax(Pages(1)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(g->SetHigh(Pages(1)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(g->SetMin(Pages(1)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(g->SetLow(Pages(1)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(g->Reclaim(Pages(1)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(t.ctrl->CreateGroup(*g, "child").status().code(),
            StatusCode::kFailedPrecondition);
  // Removal drained the stock: usage is exactly the live charge.
  EXPECT_EQ(g->usage(), Pages(10));
  EXPECT_EQ(t.ctrl->root().usage(), Pages(10));
  g->Uncharge(Pages(10));
  EXPECT_EQ(t.ctrl->root().usage(), Pages(0));
  EXPECT_TRUE(t.errors.empty());
}

TEST(ControllerTest, RemovalReleasesProtection) {
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetMin(Pages(100)).ok());
  ASSERT_TRUE(g->TryCharge(Pages(50), ChargeFlags::kNone).ok());
  t.Drain();
  EXPECT_EQ(t.ctrl->root().memory().children_min_usage(), Pages(50));
  ASSERT_TRUE(t.ctrl->RemoveGroup(*g).ok());
  EXPECT_EQ(g->memory().min(), Pages(0));
  EXPECT_EQ(t.ctrl->root().memory().children_min_usage(), Pages(0));
  g->UnchargeDirect(Pages(50));
}

TEST(ControllerTest, GroupIsFreedAfterLastReference) {
  TestController t;
  const int64_t base = t.ctrl->live_groups();
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("a/b");
  EXPECT_EQ(t.ctrl->live_groups(), base + 2);
  ASSERT_TRUE(t.ctrl->RemoveGroup(*b).ok());
  ASSERT_TRUE(t.ctrl->RemoveGroup(*a).ok());
  EXPECT_EQ(t.ctrl->live_groups(), base + 2);  // handles still held
  a.reset();
  t.ctrl->Reap();
  EXPECT_EQ(t.ctrl->live_groups(), base + 2);  // b's reference pins a
  b.reset();
  t.ctrl->Reap();
  EXPECT_EQ(t.ctrl->live_groups(), base);
}

TEST(ControllerTest, LeakedChargesAreReturnedToAncestorsAndReported) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  ASSERT_TRUE(c->TryCharge(Pages(7), ChargeFlags::kNone).ok());
  t.Drain();
  ASSERT_TRUE(t.ctrl->RemoveGroup(*c).ok());
  c.reset();  // nobody can uncharge those 7 pages any more
  t.ctrl->Reap();
  EXPECT_EQ(p->usage(), Pages(0));
  EXPECT_EQ(t.ctrl->root().usage(), Pages(0));
  ASSERT_EQ(t.errors.size(), 1u);
  EXPECT_EQ(t.errors[0], "leak");
}

TEST(ControllerTest, UnderflowIsClampedCountedAndReported) {
#if UMEMCG_DCHECK_IS_ON
  GTEST_SKIP() << "debug builds abort on underflow by design";
#endif
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->TryCharge(Pages(2), ChargeFlags::kNone).ok());
  t.Drain();
  g->UnchargeDirect(Pages(5));
  EXPECT_EQ(g->usage(), Pages(0));
  EXPECT_EQ(t.ctrl->root().usage(), Pages(0));
  EXPECT_EQ(t.ctrl->underflows(), 1u);
  ASSERT_EQ(t.errors.size(), 1u);
  EXPECT_EQ(t.errors[0], "underflow");
  // Still consistent afterwards.
  ASSERT_TRUE(g->TryCharge(Pages(3)).ok());
  t.Drain();
  EXPECT_EQ(g->usage(), Pages(3));
  g->Uncharge(Pages(3));
}

// Group::Uncharge's contract (clamp, count, report) holds for a count no
// counter can hold too; it raised the usage before (UINT64_MAX as -1).
TEST(ControllerTest, HugeUnchargeIsAnUnderflow) {
#if UMEMCG_DCHECK_IS_ON
  GTEST_SKIP() << "debug builds abort on underflow by design";
#endif
  TestController t;
  GroupRef g = t.Make("g");
  for (const bool direct : {false, true}) {
    ASSERT_TRUE(g->TryCharge(Pages(2), ChargeFlags::kNone).ok());
    t.Drain();
    if (direct) {
      g->UnchargeDirect(Pages(UINT64_MAX));
    } else {
      g->Uncharge(Pages(UINT64_MAX));
    }
    EXPECT_EQ(g->usage(), Pages(0)) << direct;
    EXPECT_EQ(t.ctrl->root().usage(), Pages(0)) << direct;
  }
  EXPECT_EQ(t.ctrl->underflows(), 2u);
  ASSERT_EQ(t.errors.size(), 2u);
  EXPECT_EQ(t.errors[0], "underflow");
  EXPECT_EQ(t.errors[1], "underflow");
}

// Reports queued under a lock past the queue's group entries: each
// (controller, what) keeps its own sum. Before, one catch-all entry took
// them all, so controller b's underflow went to controller a's hook.
TEST(ControllerTest, DeferredReportsPastTheQueueKeepTheirController) {
#if UMEMCG_DCHECK_IS_ON
  GTEST_SKIP() << "debug builds abort on underflow by design";
#endif
  TestController a;
  TestController b;
  std::vector<GroupRef> groups;
  for (int i = 0; i < internal::kMaxDeferredReports + 2; ++i) {
    std::string name = "g";  // not "g" + ...: GCC 12's -Wrestrict misfires
    name += std::to_string(i);
    groups.push_back(a.Make(name));
  }
  GroupRef other = b.Make("other");
  {
    internal::DeferReports defer;
    for (GroupRef& g : groups) {
      internal::ControllerImpl::UnchargeCounters(g.get(), 1);
    }
    internal::ControllerImpl::UnchargeCounters(other.get(), 1);
    EXPECT_TRUE(a.errors.empty());  // queued, not delivered
  }
  EXPECT_EQ(a.ctrl->underflows(), groups.size());
  EXPECT_EQ(b.ctrl->underflows(), 1u);
  // kMax - kDeferredAggregates with their group, then one sum for the rest.
  EXPECT_EQ(a.errors.size(),
            static_cast<size_t>(internal::kMaxDeferredReports -
                                internal::kDeferredAggregates + 1));
  ASSERT_EQ(b.errors.size(), 1u);
  EXPECT_EQ(b.errors[0], "underflow");
}

TEST(ControllerTest, DestructionFreesGroupsAndStocks) {
  auto c = Controller::Create({.cpu_source = CpuSource::kFake, .nr_cpus = 2});
  ASSERT_TRUE(c.ok());
  auto& ctrl = c.value();
  {
    GroupRef a = ctrl->CreateGroup(ctrl->root(), "a").value();
    GroupRef b = ctrl->CreateGroup(*a, "b").value();
    ASSERT_TRUE(b->TryCharge(Pages(1)).ok());
    b->Uncharge(Pages(1));  // leaves pages in the stock
  }
  ctrl.reset();  // LeakSanitizer checks that everything was freed
}

// The library's own threads take no signals: a process-directed signal
// that the application's threads block stays pending for them, rather than
// running the handler on the stats flusher or the high worker (bash under
// the preload hung in waitpid when its SIGCHLD handler ran on such a
// thread and reaped the children it was waiting for).
std::atomic<pid_t> g_signal_tid{0};
void RecordTid(int) {
  g_signal_tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
}

TEST(ControllerTest, LibraryThreadsTakeNoSignals) {
  ControllerOptions o;
  o.stats_flush_period = std::chrono::milliseconds(50);  // a flusher thread
  o.high_work = HighWorkMode::kThread;                   // a high worker
  auto ctrl = Controller::Create(o).value();
  struct sigaction sa = {}, old = {};
  sa.sa_handler = RecordTid;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &sa, &old), 0);
  sigset_t usr2, prev;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &usr2, &prev), 0);
  g_signal_tid.store(0);
  ASSERT_EQ(kill(getpid(), SIGUSR2), 0);  // to the process, any thread
  usleep(200 * 1000);
  EXPECT_EQ(g_signal_tid.load(), 0) << "the handler ran on a library thread";
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &prev, nullptr), 0);  // delivered
  EXPECT_EQ(g_signal_tid.load(), static_cast<pid_t>(syscall(SYS_gettid)));
  sigaction(SIGUSR2, &old, nullptr);
}

}  // namespace
}  // namespace umemcg

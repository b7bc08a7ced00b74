// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The FUSE mount, mounted for real in a temporary directory and driven with
// shell tools (cat, echo >, mkdir, rmdir, ls, stat) and plain syscalls
// (poll, pread on held descriptors). Skipped, with the reason, only where
// /dev/fuse is missing or mounting is not permitted; UMEMCG_REQUIRE_FUSE=1
// turns that skip into a failure.

#include "umemcg/fuse.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "ops/fuse_fs.h"
#include "ops_test_util.h"
#include "umemcg/active.h"
#include "umemcg/memory_resource.h"
#include "umemcg/metrics.h"
#include "umemcg/umemcg.h"

namespace umemcg::testing {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

// Frees pages it holds when asked; safe to call from the mount's threads.
class CountingReclaimer : public Reclaimer {
 public:
  explicit CountingReclaimer(Group* g) : group_(g) {}
  void Hold(uint64_t n) { held_.fetch_add(n); }
  Pages Reclaimable() override { return Pages(held_.load()); }
  Pages Reclaim(Pages target) override {
    calls_.fetch_add(1);
    uint64_t have = held_.load(), take;
    do {
      take = std::min(have, target.raw());
    } while (!held_.compare_exchange_weak(have, have - take));
    group_->UnchargeDirect(Pages(take));
    return Pages(take);
  }
  int calls() const { return calls_.load(); }

 private:
  Group* group_;
  std::atomic<uint64_t> held_{0};
  std::atomic<int> calls_{0};
};

bool RequireFuse() {
  const char* v = std::getenv("UMEMCG_REQUIRE_FUSE");
  return v != nullptr && std::string(v) == "1";
}

class FuseMountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access("/dev/fuse", R_OK | W_OK) != 0) {
      if (RequireFuse()) FAIL() << "/dev/fuse: " << std::strerror(errno);
      GTEST_SKIP() << "FUSE tests skipped: /dev/fuse is absent or not "
                      "accessible ("
                   << std::strerror(errno) << ")";
    }
    ControllerOptions options;
    options.batch = 1;  // usage is exactly what was charged
    options.charge_group_metadata = false;
    options.cpu_source = CpuSource::kFake;
    options.nr_cpus = 2;
    ctrl_ = Controller::Create(options).value();
    root_ = dir_.path();
    auto m = MountFs(*ctrl_, root_);
    if (!m.ok()) {
      // Only a refused mount skips; any other error is a failure.
      ASSERT_EQ(m.status().code(), StatusCode::kFailedPrecondition)
          << m.status().ToString();
      if (RequireFuse()) FAIL() << m.status().ToString();
      GTEST_SKIP() << "FUSE tests skipped: mounting is not permitted here ("
                   << m.status().ToString() << ")";
    }
    mount_ = std::move(m.value());
    dir_handles_before_ = internal::FuseFs::OpenDirHandles();
    ASSERT_TRUE(IsMountPoint(root_));
    a_ = ctrl_->CreateGroup(ctrl_->root(), "a").value();
    b_ = ctrl_->CreateGroup(*a_, "b").value();
  }

  void TearDown() override {
    a_.reset();
    b_.reset();
    if (mount_) {
      mount_.reset();
      EXPECT_FALSE(IsMountPoint(root_)) << "still mounted after the handle";
      // Every directory the test's commands opened was released: none of
      // the kernel's RELEASEDIRs was dropped at teardown, so libfuse holds
      // no directory handle (it would never free one).
      EXPECT_EQ(internal::FuseFs::OpenDirHandles(), dir_handles_before_);
    }
  }

  // Runs `command` in the mount's root directory.
  Cmd Sh(const std::string& command) {
    return Shell("cd " + Quote(root_) + " && " + command);
  }
  std::string P(const std::string& rel) const { return root_ + "/" + rel; }

  TempDir dir_;
  std::string root_;
  std::unique_ptr<Controller> ctrl_;
  std::unique_ptr<FuseMount> mount_;
  GroupRef a_, b_;
  int64_t dir_handles_before_ = 0;
};

TEST_F(FuseMountTest, ListsGroupsAndFilesWithCgroupfsModes) {
  Cmd c =
      Sh("stat -c '%A %n' a/memory.current a/memory.max a/memory.reclaim "
         "a/memory.events a/cgroup.subtree_control a/cgroup.events "
         "a/cgroup.stat a/cgroup.controllers a/b");
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(c.out,
            "-r--r--r-- a/memory.current\n"
            "-rw-r--r-- a/memory.max\n"
            "--w------- a/memory.reclaim\n"
            "-r--r--r-- a/memory.events\n"
            "-rw-r--r-- a/cgroup.subtree_control\n"
            "-r--r--r-- a/cgroup.events\n"
            "-r--r--r-- a/cgroup.stat\n"
            "-r--r--r-- a/cgroup.controllers\n"
            "drwxr-xr-x a/b\n");
  // The root has the root's files only, like /sys/fs/cgroup.
  c = Sh("ls");
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(c.out,
            "a\ncgroup.controllers\ncgroup.procs\ncgroup.stat\n"
            "cgroup.subtree_control\ncgroup.threads\nmemory.pressure\nmemory."
            "reclaim\nmemory.stat\n"
            "memory.stat_error\nmemory.stock\n");
  c = Sh("ls -l a | grep -c '^-'");
  EXPECT_EQ(c.out, std::to_string(a_->ListFiles().size()) + "\n");
}

TEST_F(FuseMountTest, CatReadsTheFileInterface) {
  ASSERT_TRUE(b_->TryCharge(Pages(10)).ok());
  ASSERT_TRUE(b_->SetHigh(Pages(1000)).ok());
  EXPECT_EQ(Sh("cat a/b/memory.current").out, "40960\n");
  EXPECT_EQ(Sh("cat a/memory.current").out, "40960\n");
  EXPECT_EQ(Sh("cat a/b/memory.high").out, "4096000\n");
  EXPECT_EQ(Sh("cat a/b/memory.max").out, "max\n");
  EXPECT_EQ(Sh("cat a/memory.events").out,
            a_->ReadFile("memory.events").value());
  EXPECT_EQ(Sh("cat a/b/memory.stat").out, b_->ReadFile("memory.stat").value());
  b_->UnchargeDirect(Pages(10));
}

TEST_F(FuseMountTest, EchoWritesAndReturnsTheFileInterfaceErrno) {
  Cmd c = Sh("echo 4G > a/memory.max");
  EXPECT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(a_->memory().max().in_bytes(), 4 * kGiB);
  EXPECT_EQ(Sh("cat a/memory.max").out, "4294967296\n");

  c = Sh("echo junk > a/memory.max");
  EXPECT_NE(c.status, 0);
  EXPECT_NE(c.out.find("Invalid argument"), std::string::npos) << c.out;
  EXPECT_EQ(a_->memory().max().in_bytes(), 4 * kGiB);

  c = Sh("echo 99999999999 > a/memory.oom.group");
  EXPECT_NE(c.out.find("Numerical result out of range"), std::string::npos)
      << c.out;
  c = Sh("echo 1 > a/memory.oom.group");
  EXPECT_EQ(c.status, 0) << c.out;
  EXPECT_TRUE(a_->oom_group());

  // Opening for an access the file lacks: EACCES, as kernfs answers.
  c = Sh("echo 1 > a/memory.current");
  EXPECT_NE(c.out.find("Permission denied"), std::string::npos) << c.out;
  c = Sh("cat a/memory.reclaim");
  EXPECT_NE(c.out.find("Permission denied"), std::string::npos) << c.out;

  // memory.reclaim short of its target: EAGAIN.
  ASSERT_TRUE(a_->TryCharge(Pages(4)).ok());
  c = Sh("echo 1M > a/memory.reclaim");
  EXPECT_NE(c.out.find("Resource temporarily unavailable"), std::string::npos)
      << c.out;
  a_->UnchargeDirect(Pages(4));
}

TEST_F(FuseMountTest, NonBlockingWritesDoNotReclaim) {
  CountingReclaimer cache(a_.get());
  ASSERT_TRUE(a_->AddReclaimer(&cache).ok());
  ASSERT_TRUE(a_->TryCharge(Pages(100)).ok());
  cache.Hold(100);
  const int fd = ::open(P("a/memory.max").c_str(), O_WRONLY | O_NONBLOCK);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::write(fd, "204800", 6), 6);  // 50 pages
  ::close(fd);
  EXPECT_EQ(a_->memory().max(), Pages(50));
  EXPECT_EQ(cache.calls(), 0);
  EXPECT_EQ(a_->usage(), Pages(100));
  // A blocking write reclaims down to the limit.
  ASSERT_EQ(Sh("echo 40K > a/memory.max").status, 0);
  EXPECT_GT(cache.calls(), 0);
  EXPECT_LE(a_->usage(), Pages(10));
  // memory.reclaim with O_NONBLOCK would block: EAGAIN.
  const int rfd = ::open(P("a/memory.reclaim").c_str(), O_WRONLY | O_NONBLOCK);
  ASSERT_GE(rfd, 0);
  EXPECT_EQ(::write(rfd, "4096", 4), -1);
  EXPECT_EQ(errno, EAGAIN);
  ::close(rfd);
  ASSERT_TRUE(a_->RemoveReclaimer(&cache).ok());
  a_->UnchargeDirect(a_->usage());
}

// The names and writes cgroupfs refuses, through the mount: a newline in a
// name is EINVAL (cgroup_mkdir), a control file's name EEXIST, a name past
// NAME_MAX the VFS's ENAMETOOLONG, a write over one page E2BIG (kernfs's
// atomic_write_len).
TEST_F(FuseMountTest, NamesAndWritesTheKernelRefuses) {
  EXPECT_EQ(::mkdir(P("a/x\ny").c_str(), 0755), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_FALSE(ctrl_->Lookup("a/x\ny").ok());
  for (const char* f : {"a/memory.stat", "a/cgroup.stat", "a/memory.peak"}) {
    EXPECT_EQ(::mkdir(P(f).c_str(), 0755), -1) << f;
    EXPECT_EQ(errno, EEXIST) << f;
  }
  EXPECT_EQ(::mkdir(P("a/" + std::string(256, 'n')).c_str(), 0755), -1);
  EXPECT_EQ(errno, ENAMETOOLONG);
  ASSERT_EQ(::mkdir(P("a/" + std::string(255, 'n')).c_str(), 0755), 0)
      << std::strerror(errno);
  EXPECT_EQ(::rmdir(P("a/" + std::string(255, 'n')).c_str()), 0);
  const int fd = ::open(P("a/memory.max").c_str(), O_WRONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  const std::string big(5000, '1');
  EXPECT_EQ(::write(fd, big.data(), big.size()), -1);
  EXPECT_EQ(errno, E2BIG);
  EXPECT_EQ(::write(fd, "8M", 2), 2);
  ::close(fd);
  EXPECT_EQ(a_->memory().max(), Pages(2048));
}

TEST_F(FuseMountTest, MkdirAndRmdirCreateAndRemoveGroups) {
  Cmd c = Sh("mkdir a/q && mkdir a/q/r");
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_TRUE(ctrl_->Lookup("a/q/r").ok());
  EXPECT_NE(Sh("mkdir a/q").out.find("File exists"), std::string::npos);
  EXPECT_NE(Sh("mkdir a/memory.max").out.find("File exists"),
            std::string::npos);
  c = Sh("rmdir a/q");
  EXPECT_NE(c.status, 0);
  EXPECT_NE(c.out.find("Device or resource busy"), std::string::npos) << c.out;
  EXPECT_TRUE(ctrl_->Lookup("a/q").ok());
  ASSERT_EQ(Sh("rmdir a/q/r && rmdir a/q").status, 0);
  EXPECT_FALSE(ctrl_->Lookup("a/q").ok());
  EXPECT_NE(Sh("rmdir a/memory.max").out.find("Not a directory"),
            std::string::npos);
  // What cgroupfs refuses.
  EXPECT_NE(Sh("rm a/memory.max").out.find("Operation not permitted"),
            std::string::npos);
  EXPECT_NE(Sh("touch a/newfile").out.find("Permission denied"),
            std::string::npos);
  EXPECT_NE(Sh("mv a/b a/c").out.find("Operation not permitted"),
            std::string::npos);
  EXPECT_EQ(Sh("touch a/memory.max").status, 0);
}

TEST_F(FuseMountTest, ApiChangesShowAtOnce) {
  GroupRef x = ctrl_->CreateGroup(*a_, "x").value();
  EXPECT_EQ(Sh("test -d a/x").status, 0);
  ASSERT_TRUE(ctrl_->RemoveGroup(*x).ok());
  EXPECT_NE(Sh("test -e a/x").status, 0);
  // The mount relies on the controller never naming a group "." or "..",
  // names the kernel resolves itself.
  EXPECT_FALSE(ctrl_->CreateGroup(*b_, "..").ok());
  EXPECT_FALSE(ctrl_->CreateGroup(*b_, ".").ok());
  EXPECT_EQ(Sh("ls -a a/b | grep -c '^\\.'").out, "2\n");
}

TEST_F(FuseMountTest, ReadOfARemovedGroupFailsWithENODEV) {
  GroupRef x = ctrl_->CreateGroup(*a_, "x").value();
  const int fd = ::open(P("a/x/memory.current").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_TRUE(ctrl_->RemoveGroup(*x).ok());
  char buf[64];
  EXPECT_EQ(::pread(fd, buf, sizeof(buf), 0), -1);
  EXPECT_EQ(errno, ENODEV);
  ::close(fd);
}

// The kernel selftest's reset: write(fd, "reset\n\0", 7) must return 7
// (kernfs passes the bytes on; the value ends at the NUL). EINVAL before.
TEST_F(FuseMountTest, WritesWithATrailingNulTakeEveryByte) {
  ASSERT_TRUE(a_->TryCharge(Pages(10)).ok());
  a_->UnchargeDirect(Pages(6));
  const int fd = ::open(P("a/memory.peak").c_str(), O_RDWR | O_APPEND);
  ASSERT_GE(fd, 0);
  static const char reset_string[] = "reset\n";
  ASSERT_EQ(::write(fd, reset_string, sizeof(reset_string)),
            static_cast<ssize_t>(sizeof(reset_string)));
  char buf[64] = {};
  ASSERT_GT(::pread(fd, buf, sizeof(buf) - 1, 0), 0);
  EXPECT_STREQ(buf, "16384\n");
  ::close(fd);
  const int mfd = ::open(P("a/memory.max").c_str(), O_WRONLY);
  ASSERT_GE(mfd, 0);
  ASSERT_EQ(::write(mfd, "1M\n\0\xff", 5), 5);
  EXPECT_EQ(a_->memory().max(), Pages(256));
  errno = 0;
  EXPECT_EQ(::write(mfd, "1Q\0", 3), -1);
  EXPECT_EQ(errno, EINVAL);
  ::close(mfd);
  a_->UnchargeDirect(Pages(4));
}

TEST_F(FuseMountTest, CgroupCoreFiles) {
  Cmd c =
      Sh("cat cgroup.controllers cgroup.subtree_control a/cgroup.stat "
         "a/b/cgroup.events");
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(c.out,
            "memory\nmemory\nnr_descendants 1\nnr_dying_descendants 0\n"
            "populated 0\nfrozen 0\n");
  EXPECT_EQ(Sh("echo +memory > a/cgroup.subtree_control").status, 0);
  c = Sh("echo -memory > a/cgroup.subtree_control");
  EXPECT_NE(c.status, 0);
  EXPECT_NE(c.out.find("Device or resource busy"), std::string::npos) << c.out;
  c = Sh("echo +cpu > a/cgroup.subtree_control");
  EXPECT_NE(c.out.find("Invalid argument"), std::string::npos) << c.out;
  EXPECT_NE(Sh("test -e cgroup.events").status, 0);  // not on the root
}

// Issue 27: an operator splits a thread-per-tenant server with
// `echo TID > tenantA/cgroup.threads`. The thread allocates in a loop
// through the active-group resource; after the shell's write returns, its
// charges land in tenantA, and what it charged before stays in tenantB.
TEST_F(FuseMountTest, EchoTidToCgroupThreadsMovesTheThreadsFutureCharges) {
  GroupRef tenant_a = ctrl_->CreateGroup(ctrl_->root(), "tenantA").value();
  GroupRef tenant_b = ctrl_->CreateGroup(ctrl_->root(), "tenantB").value();
  MemoryResource mr(kChargeActiveGroup, nullptr);
  constexpr size_t kBlock = kPageSize;
  constexpr size_t kMaxBlocks = 20000;
  std::vector<void*> blocks(kMaxBlocks, nullptr);
  std::atomic<pid_t> tid{0};
  std::atomic<bool> stop{false};
  std::atomic<size_t> allocated{0};
  std::thread worker([&] {
    SetThreadDefaultGroup(tenant_b.get());
    tid = static_cast<pid_t>(::syscall(SYS_gettid));
    for (size_t i = 0; i < kMaxBlocks && !stop.load(); ++i) {
      blocks[i] = mr.allocate(kBlock);
      allocated.store(i + 1, std::memory_order_release);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    SetThreadDefaultGroup(nullptr);
  });
  auto wait_for = [&](size_t n) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (allocated.load(std::memory_order_acquire) < n &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return allocated.load(std::memory_order_acquire) >= n;
  };
  ASSERT_TRUE(wait_for(20));
  const size_t before_echo = allocated.load(std::memory_order_acquire);
  Cmd c =
      Sh("echo " + std::to_string(tid.load()) + " > tenantA/cgroup.threads");
  const size_t at_echo = allocated.load(std::memory_order_acquire);
  EXPECT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(Sh("cat tenantA/cgroup.threads").out,
            std::to_string(tid.load()) + "\n");
  EXPECT_EQ(Sh("cat tenantB/cgroup.threads").out, "");
  EXPECT_EQ(Sh("cat tenantA/cgroup.procs").out,
            std::to_string(::getpid()) + "\n");
  // cgroupfs: a cgroup with tasks cannot be removed.
  c = Sh("rmdir tenantA");
  EXPECT_NE(c.out.find("Device or resource busy"), std::string::npos) << c.out;
  const bool went_on = wait_for(at_echo + 20);
  stop = true;
  worker.join();
  ASSERT_TRUE(went_on);
  const size_t total = allocated.load();
  ObjCgroup* objcg_a = tenant_a->GetObjCgroup().get();
  ObjCgroup* objcg_b = tenant_b->GetObjCgroup().get();
  size_t in_a = 0, in_b = 0;
  uint64_t bytes_a = 0, bytes_b = 0;  // charged, headers included
  for (size_t i = 0; i < total; ++i) {
    ObjCgroup* owner = MemoryResource::OwnerOf(blocks[i]);
    const uint64_t charged = MemoryResource::ChargedSizeOf(blocks[i]);
    if (owner == objcg_a) {
      ++in_a;
      bytes_a += charged;
    } else if (owner == objcg_b) {
      ++in_b;
      bytes_b += charged;
    }
    // Before the write: tenantB; after it returned (and the charge in
    // flight then): tenantA.
    if (i < before_echo) {
      EXPECT_EQ(owner, objcg_b) << i;
    }
    if (i > at_echo) {
      EXPECT_EQ(owner, objcg_a) << i;
    }
  }
  EXPECT_EQ(in_a + in_b, total);
  EXPECT_GE(in_a, 19u);
  EXPECT_GE(in_b, before_echo);
  ctrl_->DrainAllStocks(ctrl_->root());
  // Byte charges are held in whole pages: each group's usage is its
  // blocks' bytes rounded up.
  auto pages_of = [](uint64_t bytes) {
    return (bytes + kPageSize - 1) / kPageSize * kPageSize;
  };
  EXPECT_EQ(Sh("cat tenantA/memory.current").out,
            std::to_string(pages_of(bytes_a)) + "\n");
  EXPECT_EQ(Sh("cat tenantB/memory.current").out,
            std::to_string(pages_of(bytes_b)) + "\n");
  // The thread exited: it is gone from the file, and TIDs it no longer
  // has are ESRCH.
  EXPECT_EQ(Sh("cat tenantA/cgroup.threads").out, "");
  c = Sh("echo " + std::to_string(tid.load()) + " > tenantB/cgroup.threads");
  EXPECT_NE(c.out.find("No such process"), std::string::npos) << c.out;
  for (size_t i = 0; i < total; ++i) mr.deallocate(blocks[i], kBlock);
  ctrl_->DrainAllStocks(ctrl_->root());
  EXPECT_EQ(tenant_a->usage(), Pages(0));
  EXPECT_EQ(tenant_b->usage(), Pages(0));
}

TEST_F(FuseMountTest, MemoryPeakResetsPerOpenFile) {
  ASSERT_TRUE(a_->TryCharge(Pages(10)).ok());
  a_->UnchargeDirect(Pages(10));
  const int fd1 = ::open(P("a/memory.peak").c_str(), O_RDWR);
  const int fd2 = ::open(P("a/memory.peak").c_str(), O_RDONLY);
  ASSERT_GE(fd1, 0);
  ASSERT_GE(fd2, 0);
  char buf[64] = {};
  ASSERT_EQ(::write(fd1, "reset", 5), 5);
  ASSERT_GT(::pread(fd1, buf, sizeof(buf) - 1, 0), 0);
  EXPECT_STREQ(buf, "0\n");
  std::memset(buf, 0, sizeof(buf));
  ASSERT_GT(::pread(fd2, buf, sizeof(buf) - 1, 0), 0);
  EXPECT_STREQ(buf, "40960\n");
  ASSERT_TRUE(a_->TryCharge(Pages(3)).ok());
  a_->UnchargeDirect(Pages(3));
  std::memset(buf, 0, sizeof(buf));
  ASSERT_GT(::pread(fd1, buf, sizeof(buf) - 1, 0), 0);
  EXPECT_STREQ(buf, "12288\n");
  ::close(fd1);
  ::close(fd2);
}

// Raises one max event on `g`: a GFP_ATOMIC-like charge forced past max
// (a failing non-blocking charge raises none, as in the kernel).
void RaiseMaxEvent(Group& g) {
  ASSERT_TRUE(g.SetMax(Pages(1), ChargeFlags::kNone).ok());
  const ChargeResult r = g.TryCharge(Pages(8), kChargeAtomic);
  EXPECT_TRUE(r.ok() && r.forced);
  g.UnchargeDirect(Pages(8));
}

bool InPoll(pid_t tid) {
  const std::string wchan =
      ReadText("/proc/self/task/" + std::to_string(tid) + "/wchan");
  return wchan.find("poll") != std::string::npos;
}

TEST_F(FuseMountTest, PollWakesWhenMemoryEventsChange) {
  const int fd = ::open(P("a/b/memory.events").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  char buf[256];
  ASSERT_GT(::pread(fd, buf, sizeof(buf), 0), 0);
  // Unchanged: only DEFAULT_POLLMASK (POLLIN...), as kernfs: a POLLPRI
  // poller sees nothing.
  pollfd p{fd, POLLPRI, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);

  // A poller blocked before the event is woken by the notification.
  std::atomic<pid_t> tid{0};
  std::atomic<short> revents{0};
  std::thread poller([&] {
    tid.store(static_cast<pid_t>(::syscall(SYS_gettid)));
    pollfd q{fd, POLLPRI, 0};
    if (::poll(&q, 1, static_cast<int>(kPatience.count() * 1000)) == 1) {
      revents.store(q.revents);
    }
  });
  // Let it block if the kernel says where threads wait; the outcome must
  // be the same either way (an earlier event is reported at once).
  WaitFor([&] { return tid.load() != 0; });
  const bool have_wchan = ::access("/proc/self/wchan", R_OK) == 0;
  if (have_wchan) {
    const auto deadline = std::chrono::steady_clock::now() + kPatience;
    while (!InPoll(tid.load()) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  RaiseMaxEvent(*b_);
  poller.join();
  EXPECT_EQ(revents.load() & (POLLPRI | POLLERR), POLLPRI | POLLERR);
  // The parent's hierarchical memory.events changed too.
  const int pfd = ::open(P("a/memory.events").c_str(), O_RDONLY);
  ASSERT_GE(pfd, 0);
  ASSERT_GT(::pread(pfd, buf, sizeof(buf), 0), 0);
  RaiseMaxEvent(*b_);
  pollfd pp{pfd, POLLPRI, 0};
  ASSERT_EQ(::poll(&pp, 1, static_cast<int>(kPatience.count() * 1000)), 1);
  EXPECT_NE(pp.revents & POLLPRI, 0);
  ::close(pfd);

  // Still reported until read again; then quiet.
  p.revents = 0;
  ASSERT_EQ(::poll(&p, 1, 0), 1);
  EXPECT_NE(p.revents & POLLPRI, 0);
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  ASSERT_GT(n, 0);
  buf[n] = 0;
  EXPECT_NE(std::string(buf).find("max 2\n"), std::string::npos) << buf;
  p.revents = 0;
  EXPECT_EQ(::poll(&p, 1, 0), 0);
  ::close(fd);

  // Files without events are never "changed".
  const int cfd = ::open(P("a/b/memory.current").c_str(), O_RDONLY);
  ASSERT_GE(cfd, 0);
  pollfd c{cfd, POLLIN | POLLPRI, 0};
  ASSERT_EQ(::poll(&c, 1, 0), 1);
  EXPECT_EQ(c.revents, POLLIN);
  ::close(cfd);
}

// Blocks in poll(POLLPRI) on `fd` until woken (or kPatience): the
// revents, 0 on timeout.
short PollPri(int fd) {
  pollfd q{fd, POLLPRI, 0};
  if (::poll(&q, 1, static_cast<int>(kPatience.count() * 1000)) != 1) return 0;
  return q.revents;
}

// memory.pressure: a write arms a trigger on the open file; poll wakes
// with POLLPRI when a charger's stall crosses it, once per event.
TEST_F(FuseMountTest, PollWakesWhenAPressureTriggerFires) {
  // A reclaimer that stalls its charger for 200 ms of real time.
  class Sleepy : public Reclaimer {
   public:
    explicit Sleepy(Group* g) : g_(g) {}
    Pages Reclaimable() override { return Pages(held); }
    Pages Reclaim(Pages target) override {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const uint64_t n = std::min<uint64_t>(held, target.raw());
      held -= n;
      g_->UnchargeDirect(Pages(n));
      return Pages(n);
    }
    std::atomic<uint64_t> held{0};

   private:
    Group* g_;
  } sleepy(b_.get());
  ASSERT_TRUE(b_->SetMax(Pages(10)).ok());
  ASSERT_TRUE(b_->TryCharge(Pages(10), ChargeFlags::kNone).ok());
  sleepy.held = 10;
  ASSERT_TRUE(b_->AddReclaimer(&sleepy).ok());

  const int fd = ::open(P("a/b/memory.pressure").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  // No trigger yet: psi_trigger_poll's POLLERR | POLLPRI.
  pollfd p{fd, POLLPRI, 0};
  ASSERT_EQ(::poll(&p, 1, 0), 1);
  EXPECT_EQ(p.revents & (POLLPRI | POLLERR), POLLPRI | POLLERR);
  // Malformed and out-of-range triggers: EINVAL.
  for (const char* bad : {"some", "some 150000 100", "none 1 1000000"}) {
    errno = 0;
    EXPECT_EQ(::pwrite(fd, bad, std::strlen(bad), 0), -1) << bad;
    EXPECT_EQ(errno, EINVAL) << bad;
  }
  const std::string arm = "some 150000 1000000";
  ASSERT_EQ(::pwrite(fd, arm.data(), arm.size(), 0),
            static_cast<ssize_t>(arm.size()));
  errno = 0;
  EXPECT_EQ(::pwrite(fd, arm.data(), arm.size(), 0), -1);
  EXPECT_EQ(errno, EBUSY);
  p.revents = 0;
  EXPECT_EQ(::poll(&p, 1, 0), 0);

  std::atomic<short> revents{0};
  std::thread poller([&] { revents.store(PollPri(fd)); });
  // The poller may or may not be blocked yet: an event before its poll is
  // reported at once, so the outcome is the same.
  std::thread charger([&] { EXPECT_TRUE(b_->TryCharge(Pages(1)).ok()); });
  charger.join();
  poller.join();
  EXPECT_NE(revents.load() & POLLPRI, 0);
  // Taken: quiet until the next event (at most one per window).
  p.revents = 0;
  EXPECT_EQ(::poll(&p, 1, 0), 0);
  char buf[256];
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  ASSERT_GT(n, 0);
  buf[n] = 0;
  EXPECT_EQ(std::string(buf).rfind("some avg10=", 0), 0u) << buf;
  ::close(fd);
  EXPECT_TRUE(b_->RemoveReclaimer(&sleepy).ok());
  b_->UnchargeDirect(Pages(1 + sleepy.held.load()));
}

// cgroup.events wakes poll() when "populated" changes, though a charge
// raises no event: the notifier re-reads polled cgroup.events files.
TEST_F(FuseMountTest, PollWakesWhenCgroupEventsChange) {
  const int fd = ::open(P("a/b/cgroup.events").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  char buf[64] = {};
  ASSERT_GT(::pread(fd, buf, sizeof(buf) - 1, 0), 0);
  EXPECT_STREQ(buf, "populated 0\nfrozen 0\n");
  pollfd p{fd, POLLPRI, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);

  std::atomic<short> revents{0};
  std::atomic<bool> started{false};
  std::thread poller([&] {
    started.store(true);
    revents.store(PollPri(fd));
  });
  WaitFor([&] { return started.load(); });
  ASSERT_TRUE(b_->TryCharge(Pages(1)).ok());  // populated 0 -> 1
  poller.join();
  EXPECT_EQ(revents.load() & (POLLPRI | POLLERR), POLLPRI | POLLERR);
  std::memset(buf, 0, sizeof(buf));
  ASSERT_GT(::pread(fd, buf, sizeof(buf) - 1, 0), 0);
  EXPECT_STREQ(buf, "populated 1\nfrozen 0\n");

  // And back (batch 1: nothing stays in the stock).
  std::thread poller2([&] { revents.store(PollPri(fd)); });
  b_->UnchargeDirect(Pages(1));
  poller2.join();
  EXPECT_NE(revents.load() & POLLPRI, 0);
  std::memset(buf, 0, sizeof(buf));
  ASSERT_GT(::pread(fd, buf, sizeof(buf) - 1, 0), 0);
  EXPECT_STREQ(buf, "populated 0\nfrozen 0\n");
  p.revents = 0;
  EXPECT_EQ(::poll(&p, 1, 0), 0);

  // Removal wakes it too; the read then fails with ENODEV.
  std::thread poller3([&] { revents.store(PollPri(fd)); });
  ASSERT_TRUE(ctrl_->RemoveGroup(*b_).ok());
  poller3.join();
  EXPECT_NE(revents.load() & POLLPRI, 0);
  errno = 0;
  EXPECT_EQ(::pread(fd, buf, sizeof(buf) - 1, 0), -1);
  EXPECT_EQ(errno, ENODEV);
  ::close(fd);
}

TEST_F(FuseMountTest, MountReadsBackLikeTheController) {
  ASSERT_TRUE(b_->TryCharge(Pages(7)).ok());
  ASSERT_TRUE(a_->SetHigh(Pages(300)).ok());
  ASSERT_TRUE(a_->SetLow(Pages(20)).ok());
  ASSERT_TRUE(b_->ModState(StatItem::kAnon, 7));
  RaiseMaxEvent(*b_);
  std::unique_ptr<TreeReader> dir = TreeReader::ForDirectory(root_).value();
  std::unique_ptr<TreeReader> api = TreeReader::ForController(*ctrl_);
  const MetricsSnapshot from_mount = CollectMetrics(*dir).value();
  const MetricsSnapshot from_api = CollectMetrics(*api).value();
  EXPECT_EQ(FormatPrometheus(from_mount), FormatPrometheus(from_api));
  ASSERT_EQ(from_mount.groups.size(), 3u);
  EXPECT_EQ(from_mount.groups[2].path, "a/b");
  EXPECT_EQ(from_mount.groups[2].current, 7 * kPageSize);
  b_->UnchargeDirect(Pages(7));
}

TEST_F(FuseMountTest, CliOnTheLiveMount) {
  const std::string cli = UMEMCG_CLI_PATH;
  ASSERT_TRUE(a_->SetMax(Pages(25600)).ok());   // 100M
  ASSERT_TRUE(b_->TryCharge(Pages(384)).ok());  // 1.5M
  Cmd c = Shell(cli + " tree " + Quote(root_));
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(c.out,
            "GROUP    CURRENT  HIGH     MAX\n"
            "/              -     -       -\n"
            "└─ a        1.5M   max  100.0M\n"
            "   └─ b     1.5M   max     max\n");
  c = Shell(cli + " --bytes cat " + Quote(P("a")) + " memory.max");
  EXPECT_EQ(c.out, "104857600\n");
  c = Shell(cli + " cat " + Quote(P("a")) + " cgroup.events");
  EXPECT_EQ(c.out, "populated 1\nfrozen 0\n");
  c = Shell(cli + " cat " + Quote(root_) + " cgroup.stat");
  EXPECT_EQ(c.out, "nr_descendants 2\nnr_dying_descendants 0\n");
  c = Shell(cli + " set " + Quote(P("a")) +
            " cgroup.subtree_control -- -memory");
  EXPECT_EQ(c.status, 1);
  EXPECT_NE(c.out.find("busy"), std::string::npos) << c.out;
  c = Shell(cli + " set " + Quote(P("a/b")) + " memory.max 1G");
  EXPECT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(b_->memory().max().in_bytes(), kGiB);
  c = Shell(cli + " set " + Quote(P("a/b")) + " memory.max junk");
  EXPECT_EQ(c.status, 1);
  EXPECT_NE(c.out.find("Invalid argument"), std::string::npos) << c.out;
  c = Shell(cli + " top --once --delay 0 " + Quote(root_));
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(
      c.out.substr(0, c.out.find('\n')),
      "GROUP  CURRENT  HIGH     MAX  %MAX  SOME10  +LOW  +HIGH  +MAX  +OOM  "
      "+KILL");
  c = Shell(cli + " metrics " + Quote(root_));
  ASSERT_EQ(c.status, 0) << c.out;
  std::unique_ptr<TreeReader> api = TreeReader::ForController(*ctrl_);
  EXPECT_EQ(c.out, FormatPrometheus(CollectMetrics(*api).value()));
  b_->UnchargeDirect(Pages(384));
}

TEST_F(FuseMountTest, UnmountsWhenTheControllerIsDestroyed) {
  a_.reset();
  b_.reset();
  ctrl_.reset();
  EXPECT_FALSE(IsMountPoint(root_));
  EXPECT_FALSE(mount_->mounted());
  mount_.reset();  // after the controller: only releases
}

TEST_F(FuseMountTest, UnmountWithAFileStillOpenDoesNotWait) {
  const int fd = ::open(P("a/memory.current").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  mount_->Unmount();
  EXPECT_FALSE(mount_->mounted());
  EXPECT_FALSE(IsMountPoint(root_));
  char buf[64];
  EXPECT_EQ(::pread(fd, buf, sizeof(buf), 0), -1);  // the connection is gone
  ::close(fd);
  mount_->Unmount();  // idempotent
}

TEST_F(FuseMountTest, UnmountFromOutsideIsNoticed) {
  Cmd c = Shell("fusermount3 -u " + Quote(root_));
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_TRUE(WaitFor([&] { return !mount_->mounted(); }));
  EXPECT_FALSE(IsMountPoint(root_));
}

// Holds the mount's request thread inside Reclaim until released.
class BlockingReclaimer : public Reclaimer {
 public:
  explicit BlockingReclaimer(Group* g) : group_(g) {}
  Pages Reclaimable() override { return Pages(held_.load()); }
  Pages Reclaim(Pages target) override {
    entered_.store(true);
    entered_.notify_all();
    release_.wait(false);
    const uint64_t take = std::min(held_.exchange(0), target.raw());
    group_->UnchargeDirect(Pages(take));
    return Pages(take);
  }
  void Hold(uint64_t n) { held_.store(n); }
  bool entered() const { return entered_.load(); }
  void Release() {
    release_.store(true);
    release_.notify_all();
  }

 private:
  Group* group_;
  std::atomic<uint64_t> held_{0};
  std::atomic<bool> entered_{false};
  std::atomic<bool> release_{false};
};

// Stopping serves what the kernel queued before the stop: here the
// RELEASEDIR of a directory closed while the only request thread was busy.
// Dropping it leaked libfuse's directory handle (LeakSanitizer: 120 bytes
// from calloc in libfuse3.so.3, in the asan preset on a loaded machine).
TEST_F(FuseMountTest, StopServesTheRequestsAlreadyQueued) {
  TempDir dir2;
  MountOptions one_thread;
  one_thread.threads = 1;
  auto m = MountFs(*ctrl_, dir2.path(), one_thread);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::unique_ptr<FuseMount> mount2 = std::move(m.value());
  const int64_t handles = internal::FuseFs::OpenDirHandles();

  DIR* d = ::opendir((dir2.path() + "/a").c_str());
  ASSERT_NE(d, nullptr) << std::strerror(errno);
  ASSERT_NE(::readdir(d), nullptr);
  EXPECT_EQ(internal::FuseFs::OpenDirHandles(), handles + 1);

  // Occupy the request thread: a blocking memory.max write reclaims.
  BlockingReclaimer reclaimer(b_.get());
  ASSERT_TRUE(b_->AddReclaimer(&reclaimer).ok());
  ASSERT_TRUE(b_->TryCharge(Pages(10)).ok());
  reclaimer.Hold(10);
  std::thread writer([&] {
    const int fd = ::open((dir2.path() + "/a/b/memory.max").c_str(), O_WRONLY);
    if (fd >= 0) {
      (void)!::write(fd, "0", 1);
      ::close(fd);
    }
  });
  // (Failures below are EXPECTs: the threads must be joined either way.)
  EXPECT_TRUE(WaitFor([&] { return reclaimer.entered(); }));
  // Queued (asynchronously) by the close; nobody is free to read it.
  ::closedir(d);
  // Stop while the thread is still busy; it sees the stop once released.
  std::thread stopper([&] { mount2->Unmount(); });
  EXPECT_TRUE(WaitFor([&] { return !mount2->mounted(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  reclaimer.Release();
  stopper.join();
  writer.join();
  EXPECT_EQ(internal::FuseFs::OpenDirHandles(), handles);
  EXPECT_EQ(b_->usage(), Pages(0));
  ASSERT_TRUE(b_->RemoveReclaimer(&reclaimer).ok());
}

TEST_F(FuseMountTest, ShellReadsRaceWithTreeChanges) {
  std::atomic<bool> stop{false};
  std::thread changer([&] {
    static constexpr const char* kNames[] = {"t0", "t1", "t2", "t3"};
    for (int i = 0; !stop.load(); ++i) {
      auto g = ctrl_->CreateGroup(*b_, kNames[i % 4]);
      if (g.ok()) {
        (void)g.value()->TryCharge(Pages(3));
        g.value()->UnchargeDirect(Pages(3));
        (void)ctrl_->RemoveGroup(*g.value());
      }
    }
  });
  // Errors for files of groups removed mid-walk are expected; the point is
  // that nothing hangs or crashes and the mount keeps answering.
  for (int i = 0; i < 20; ++i) {
    (void)Sh("ls -R . >/dev/null; cat a/b/*/memory.current >/dev/null");
  }
  stop.store(true);
  changer.join();
  EXPECT_EQ(Sh("cat a/memory.max").out, "max\n");
}

}  // namespace
}  // namespace umemcg::testing

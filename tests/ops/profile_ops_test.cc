// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// A group's heap profile through the operator interfaces, read by
// `go tool pprof -top` (Debian golang-go; missing go fails): the metrics
// server's /debug/pprof/heap?group=PATH, and the FUSE mount's
// memory.heap_profile copied by `umemcg profile GROUP -o FILE`.

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "ops_test_util.h"
#include "umemcg/fuse.h"
#include "umemcg/heap_profile.h"
#include "umemcg/heap_profile_pprof.h"
#include "umemcg/memory_resource.h"
#include "umemcg/metrics.h"
#include "umemcg/umemcg.h"

constexpr size_t kBlock = 64 * 1024;

// Exported (the test is linked with -rdynamic) and never inlined.
extern "C" [[gnu::noinline]] void ops_tenant_work(umemcg::MemoryResource* res,
                                                  std::vector<void*>* out) {
  for (size_t i = 0; i < (8u << 20) / kBlock; ++i) {
    out->push_back(res->allocate(kBlock, 16));
  }
  asm volatile("" ::: "memory");
}

namespace umemcg::testing {
namespace {

class ProfileOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(Shell("go version").status, 0)
        << "go is required (apt-get install golang-go)";
    InstallHeapProfileFiles();
    ctrl_ = Controller::Create({}).value();
    a_ = ctrl_->CreateGroup(ctrl_->root(), "a").value();
    SetHeapProfileRate(*ctrl_, Bytes(4096));  // every 64 KiB block
    res_ = std::make_unique<MemoryResource>(*a_);
    ops_tenant_work(res_.get(), &blocks_);
  }
  void TearDown() override {
    for (void* p : blocks_) res_->deallocate(p, kBlock, 16);
    res_.reset();
  }

  // `go tool pprof -top` of `file`: the flat inuse_space line of
  // ops_tenant_work, or "" when absent.
  std::string TopLine(const std::string& file) {
    Cmd c = Shell("HOME=" + dir_.path() + " GOCACHE=" + dir_.path() +
                  "/gocache go tool pprof -top -sample_index=inuse_space " +
                  Quote(file));
    EXPECT_EQ(c.status, 0) << c.out;
    size_t at = c.out.find("ops_tenant_work");
    if (at == std::string::npos) return "";
    const size_t bol = c.out.rfind('\n', at);
    return c.out.substr(bol + 1, at - bol - 1);
  }

  TempDir dir_;
  std::unique_ptr<Controller> ctrl_;
  GroupRef a_;
  std::unique_ptr<MemoryResource> res_;
  std::vector<void*> blocks_;
};

TEST_F(ProfileOpsTest, MetricsServerServesDebugPprofHeap) {
  auto server = ServeMetrics(*ctrl_, "127.0.0.1:0", {});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  httplib::Client client("127.0.0.1", server.value()->port());
  auto res = client.Get("/debug/pprof/heap?group=a");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  ASSERT_GE(res->body.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(res->body[0]), 0x1f);  // gzip
  EXPECT_EQ(static_cast<unsigned char>(res->body[1]), 0x8b);
  const std::string file = dir_.path() + "/a.pb.gz";
  WriteText(file, res->body);
  const std::string line = TopLine(file);
  EXPECT_NE(line.find("8MB"), std::string::npos) << line;
  EXPECT_EQ(client.Get("/debug/pprof/heap?group=nope")->status, 404);
  // The root's profile covers its subtree.
  auto root = client.Get("/debug/pprof/heap");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 200);
}

TEST_F(ProfileOpsTest, MountFileAndUmemcgProfile) {
  if (::access("/dev/fuse", R_OK | W_OK) != 0) {
    GTEST_SKIP() << "/dev/fuse: " << std::strerror(errno);
  }
  TempDir mnt;
  auto m = MountFs(*ctrl_, mnt.path());
  if (!m.ok()) GTEST_SKIP() << m.status().ToString();
  const std::string listing = Shell("ls " + Quote(mnt.path() + "/a")).out;
  EXPECT_NE(listing.find("memory.heap_profile"), std::string::npos) << listing;
  const std::string file = dir_.path() + "/mount.pb.gz";
  Cmd c = Shell(std::string(UMEMCG_CLI_PATH) + " profile " +
                Quote(mnt.path() + "/a") + " -o " + Quote(file));
  ASSERT_EQ(c.status, 0) << c.out;
  const std::string line = TopLine(file);
  EXPECT_NE(line.find("8MB"), std::string::npos) << line;
  m.value().reset();
}

}  // namespace
}  // namespace umemcg::testing

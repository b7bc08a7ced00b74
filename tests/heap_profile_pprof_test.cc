// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Heap profiles read by a real client: two tenants allocate from known
// functions (30 MiB from tenant_a_work, 10 MiB from tenant_b_work); each
// group's pprof file, read by `go tool pprof -top` (Debian golang-go),
// names its own function with inuse_space within 10% of the truth and
// never the other tenant's. Missing go is a failure, not a skip.

#include "umemcg/heap_profile_pprof.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "test_util.h"
#include "umemcg/c.h"
#include "umemcg/heap_profile.h"
#include "umemcg/memory_resource.h"
#include "umemcg/umemcg.h"

constexpr size_t kBlock = 64 * 1024;

// The allocating functions the profiles must name: exported (the test is
// linked with -rdynamic) and never inlined.
extern "C" [[gnu::noinline]] void tenant_a_work(umemcg::MemoryResource* res,
                                                std::vector<void*>* out) {
  for (size_t i = 0; i < (30u << 20) / kBlock; ++i) {
    out->push_back(res->allocate(kBlock, 16));
  }
  asm volatile("" ::: "memory");  // no tail call
}

extern "C" [[gnu::noinline]] void tenant_b_work(umemcg::MemoryResource* res,
                                                std::vector<void*>* out) {
  for (size_t i = 0; i < (10u << 20) / kBlock; ++i) {
    out->push_back(res->allocate(kBlock, 16));
  }
  asm volatile("" ::: "memory");
}

// The page path: pages charged through Group::TryCharge from known
// functions (one page per call).
extern "C" [[gnu::noinline, gnu::noipa]] void tenant_a_pages(umemcg::Group* g,
                                                             int pages) {
  for (int i = 0; i < pages; ++i) {
    if (!g->TryCharge(umemcg::Pages(1)).ok()) std::abort();
  }
  asm volatile("" ::: "memory");  // no tail call
}

extern "C" [[gnu::noinline, gnu::noipa]] void tenant_b_pages(umemcg::Group* g,
                                                             int pages) {
  for (int i = 0; i < pages; ++i) {
    if (!g->TryCharge(umemcg::Pages(1)).ok()) std::abort();
  }
  asm volatile("" ::: "memory");
}

namespace umemcg {
namespace {

using testing::TestController;

std::string RunShell(const std::string& command) {
  std::string out;
  FILE* f = popen(command.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

// pprof's byte units ("512kB", "29.98MB"; powers of 1024).
double ParseBytes(const std::string& s) {
  size_t end = 0;
  const double v = std::stod(s, &end);
  const std::string unit = s.substr(end);
  if (unit == "B") return v;
  if (unit == "kB") return v * 1024;
  if (unit == "MB") return v * 1024 * 1024;
  if (unit == "GB") return v * 1024 * 1024 * 1024;
  ADD_FAILURE() << "unit " << unit;
  return 0;
}

// The flat inuse_space of `function` in `go tool pprof -top` output, or -1.
double FlatOf(const std::string& top, const std::string& function) {
  size_t pos = 0;
  while (pos < top.size()) {
    size_t eol = top.find('\n', pos);
    if (eol == std::string::npos) eol = top.size();
    const std::string line = top.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.size() < function.size() ||
        line.compare(line.size() - function.size(), function.size(),
                     function) != 0) {
      continue;
    }
    const size_t start = line.find_first_not_of(' ');
    const size_t stop = line.find(' ', start);
    return ParseBytes(line.substr(start, stop - start));
  }
  return -1;
}

TEST(HeapProfilePprofTest, GoToolPprofNamesEachTenantsFunction) {
  ASSERT_EQ(std::system("go version > /dev/null 2>&1"), 0)
      << "go is required (Debian golang-go: apt-get install golang-go)";
  TestController t;
  GroupRef a = t.Make("tenant_a");
  GroupRef b = t.Make("tenant_b");
  SetHeapProfileRate(*t.ctrl, Bytes(kBlock));
  MemoryResource res_a(*a);
  MemoryResource res_b(*b);
  SeedHeapProfileThreadForTesting(2026);
  std::vector<void*> blocks_a, blocks_b;
  tenant_a_work(&res_a, &blocks_a);
  tenant_b_work(&res_b, &blocks_b);
  const double truth_a = static_cast<double>(blocks_a.size() * (kBlock + 16));
  const double truth_b = static_cast<double>(blocks_b.size() * (kBlock + 16));

  char dir[] = "/tmp/umemcg_pprof_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file_a = std::string(dir) + "/a.pb.gz";
  const std::string file_b = std::string(dir) + "/b.pb.gz";
  const std::string file_root = std::string(dir) + "/root.pb.gz";
  ASSERT_TRUE(WriteHeapProfilePprof(*a, file_a).ok());
  ASSERT_TRUE(WriteHeapProfilePprof(*b, file_b).ok());
  ASSERT_TRUE(
      WriteHeapProfilePprof(t.ctrl->root(), file_root, /*subtree=*/true).ok());
  const std::string env =
      std::string("HOME=") + dir + " GOCACHE=" + dir + "/gocache ";
  auto top = [&](const std::string& file) {
    return RunShell(env + "go tool pprof -top -sample_index=inuse_space " +
                    file + " 2>&1");
  };
  const std::string top_a = top(file_a);
  const std::string top_b = top(file_b);
  const std::string top_root = top(file_root);
  std::printf("--- go tool pprof -top tenant_a ---\n%s\n", top_a.c_str());
  std::printf("--- go tool pprof -top tenant_b ---\n%s\n", top_b.c_str());

  EXPECT_NEAR(FlatOf(top_a, "tenant_a_work"), truth_a, truth_a * 0.10) << top_a;
  EXPECT_EQ(FlatOf(top_a, "tenant_b_work"), -1) << top_a;
  EXPECT_NEAR(FlatOf(top_b, "tenant_b_work"), truth_b, truth_b * 0.10) << top_b;
  EXPECT_EQ(FlatOf(top_b, "tenant_a_work"), -1) << top_b;
  // The root's subtree profile merges both.
  EXPECT_NEAR(FlatOf(top_root, "tenant_a_work"), truth_a, truth_a * 0.10)
      << top_root;
  EXPECT_NEAR(FlatOf(top_root, "tenant_b_work"), truth_b, truth_b * 0.10)
      << top_root;

  // Cumulative sample types are there too.
  const std::string alloc_a = RunShell(
      env + "go tool pprof -top -sample_index=alloc_space " + file_a + " 2>&1");
  EXPECT_NEAR(FlatOf(alloc_a, "tenant_a_work"), truth_a, truth_a * 0.10)
      << alloc_a;

  for (void* p : blocks_a) res_a.deallocate(p, kBlock, 16);
  for (void* p : blocks_b) res_b.deallocate(p, kBlock, 16);
  // Freed: tenant A holds nothing any more.
  ASSERT_TRUE(WriteHeapProfilePprof(*a, file_a).ok());
  const std::string after = top(file_a);
  EXPECT_LE(FlatOf(after, "tenant_a_work"), 0) << after;
  std::system(("rm -rf " + std::string(dir)).c_str());
  SetHeapProfileRate(*t.ctrl, kDefaultHeapProfileRate);
}

double InuseSpace(Group& g) {
  double v = 0;
  for (const HeapProfileEntry& e : SnapshotHeapProfile(g, false).entries) {
    v += e.inuse_space;
  }
  return v;
}

// Page charges (no block address): 30 MiB from tenant_a_pages, 10 MiB from
// tenant_b_pages, one page per TryCharge; each group's profile names its
// own function within 10% and never the other's. Uncharges release page
// samples: half uncharged leaves about half, all uncharged about none.
TEST(HeapProfilePprofTest, PageChargesNameTheirFunctionAndLeaveOnUncharge) {
  ASSERT_EQ(std::system("go version > /dev/null 2>&1"), 0)
      << "go is required (Debian golang-go: apt-get install golang-go)";
  TestController t;
  GroupRef a = t.Make("tenant_a");
  GroupRef b = t.Make("tenant_b");
  // 4 KiB: a page is sampled with probability 1 - exp(-1); over 7,680 and
  // 2,560 pages the estimates' relative errors are about 1% and 2%.
  SetHeapProfileRate(*t.ctrl, Bytes(4096));
  SetHeapProfilePageCharges(true);
  SeedHeapProfileThreadForTesting(2028);
  constexpr int kPagesA = (30 << 20) / 4096, kPagesB = (10 << 20) / 4096;
  tenant_a_pages(a.get(), kPagesA);
  tenant_b_pages(b.get(), kPagesB);
  const double truth_a = 30.0 * (1 << 20), truth_b = 10.0 * (1 << 20);

  char dir[] = "/tmp/umemcg_pages_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file_a = std::string(dir) + "/a.pb.gz";
  const std::string file_b = std::string(dir) + "/b.pb.gz";
  ASSERT_TRUE(WriteHeapProfilePprof(*a, file_a).ok());
  ASSERT_TRUE(WriteHeapProfilePprof(*b, file_b).ok());
  const std::string env =
      std::string("HOME=") + dir + " GOCACHE=" + dir + "/gocache ";
  auto top = [&](const std::string& file) {
    return RunShell(env + "go tool pprof -top -sample_index=inuse_space " +
                    file + " 2>&1");
  };
  const std::string top_a = top(file_a);
  const std::string top_b = top(file_b);
  std::printf("--- pages: go tool pprof -top tenant_a ---\n%s\n",
              top_a.c_str());
  EXPECT_NEAR(FlatOf(top_a, "tenant_a_pages"), truth_a, truth_a * 0.10)
      << top_a;
  EXPECT_EQ(FlatOf(top_a, "tenant_b_pages"), -1) << top_a;
  EXPECT_NEAR(FlatOf(top_b, "tenant_b_pages"), truth_b, truth_b * 0.10)
      << top_b;
  EXPECT_EQ(FlatOf(top_b, "tenant_a_pages"), -1) << top_b;
  std::system(("rm -rf " + std::string(dir)).c_str());

  // Half of A's pages uncharged (through the stock), a page at a time.
  for (int i = 0; i < kPagesA / 2; ++i) a->Uncharge(Pages(1));
  EXPECT_NEAR(InuseSpace(*a), truth_a / 2, truth_a * 0.10);
  // The rest, directly: about nothing is left (within one interval).
  for (int i = kPagesA / 2; i < kPagesA; ++i) a->UnchargeDirect(Pages(1));
  EXPECT_LE(InuseSpace(*a), truth_a * 0.02);
  for (int i = 0; i < kPagesB; ++i) b->Uncharge(Pages(1));
  EXPECT_LE(InuseSpace(*b), truth_b * 0.05);
  // Off again: page charges are not sampled.
  SetHeapProfilePageCharges(false);
  const double left = InuseSpace(*a);
  tenant_a_pages(a.get(), kPagesA);
  EXPECT_EQ(InuseSpace(*a), left);
  for (int i = 0; i < kPagesA; ++i) a->Uncharge(Pages(1));
  SetHeapProfileRate(*t.ctrl, kDefaultHeapProfileRate);
}

// The C API: umemcg_set_heap_profile_rate and umemcg_heap_profile (the
// bytes of the installed encoder, sized like umemcg_read_file).
TEST(HeapProfilePprofTest, CApi) {
  umemcg_controller_t* ctrl = nullptr;
  ASSERT_EQ(umemcg_controller_create(nullptr, &ctrl), 0);
  umemcg_group_t* root = nullptr;
  ASSERT_EQ(umemcg_group_root(ctrl, &root), 0);
  umemcg_group_t* g = nullptr;
  ASSERT_EQ(umemcg_group_create(root, "c", &g), 0);
  EXPECT_EQ(umemcg_set_heap_profile_rate(g, 4096), 0);
  // Page charges through the C API feed the profiler once asked.
  const uint64_t live = HeapProfileLiveSamplesForTesting();
  umemcg_set_heap_profile_page_charges(1);
  SeedHeapProfileThreadForTesting(9);
  ASSERT_EQ(umemcg_try_charge(g, 64, 0, nullptr),
            0);  // 256 KiB, 4 KiB interval
  umemcg_set_heap_profile_page_charges(0);
  EXPECT_GT(HeapProfileLiveSamplesForTesting(), live);
  ASSERT_EQ(umemcg_uncharge_direct(g, 64), 0);
  SetHeapProfileEncoder(nullptr);
  size_t needed = 0;
  EXPECT_EQ(umemcg_heap_profile(g, 0, nullptr, 0, &needed), ENOTSUP);
  InstallHeapProfileFiles();
  ASSERT_EQ(umemcg_heap_profile(g, 1, nullptr, 0, &needed), ERANGE);
  ASSERT_GT(needed, 2u);
  // Each call encodes afresh (its time stamp, its compression): the size
  // may change between calls, so callers retry with the new size.
  std::vector<unsigned char> buf;
  int rc = ERANGE;
  for (int tries = 0; rc == ERANGE && tries < 10; ++tries) {
    buf.resize(needed + 64);
    rc = umemcg_heap_profile(g, 1, buf.data(), buf.size(), &needed);
  }
  ASSERT_EQ(rc, 0);
  ASSERT_LE(needed, buf.size());
  EXPECT_EQ(buf[0], 0x1f);  // gzip
  EXPECT_EQ(buf[1], 0x8b);
  EXPECT_EQ(umemcg_group_release(g), 0);
  EXPECT_EQ(umemcg_heap_profile(g, 0, buf.data(), buf.size(), &needed), EBADF);
  EXPECT_EQ(umemcg_group_release(root), 0);
  EXPECT_EQ(umemcg_controller_destroy(ctrl), 0);
}

}  // namespace
}  // namespace umemcg

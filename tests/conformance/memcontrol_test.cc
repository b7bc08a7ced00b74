// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Conformance with kernel selftests of
// tools/testing/selftests/cgroup/test_memcontrol.c that exercise the file
// interface, ported with their sizes and tolerances ("processes" become
// charges made and then uncharged, as the selftest's child exits):
//   test_memcg_current_peak    memory.current / memory.peak / memory.stat,
//                              per-handle peak resets written as the
//                              selftest does: write(fd, "reset\n\0", 7)
//                              (refused with EINVAL before);
//   test_memcg_subtree_control cgroup.subtree_control "+memory" and
//                              cgroup.controllers (missing before).

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "test_util.h"

namespace umemcg {
namespace {

using testing::MiB;
using testing::TestController;

constexpr int64_t kMiB = 1 << 20;

bool ValuesClose(int64_t a, int64_t b, int64_t err) {
  return std::llabs(a - b) <= (a + b) / 100 * err;
}

int64_t Long(const std::string& text) {
  return std::strtoll(text.c_str(), nullptr, 10);
}
int64_t ReadLong(Group& g, std::string_view file) {
  return Long(g.ReadFile(file).value());
}
int64_t ReadLong(MemoryFile& f) { return Long(f.Read().value()); }
// cg_read_key_long(cg, "memory.stat", "key "): -1 if absent.
int64_t StatKey(Group& g, std::string_view key) {
  const std::string text = g.ReadFile("memory.stat").value();
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string_view line(text.data() + pos, nl - pos);
    if (line.size() > key.size() && line.substr(0, key.size()) == key &&
        line[key.size()] == ' ') {
      return std::strtoll(text.c_str() + pos + key.size() + 1, nullptr, 10);
    }
    pos = nl + 1;
  }
  return -1;
}

// alloc_anon_50M_check / alloc_pagecache_50M_check: charge 50M as `item`,
// check memory.current and the stat (tolerance `err`), then free (exit).
bool Alloc50MCheck(Group& g, StatItem item, const char* key, int err) {
  const int64_t size = 50 * kMiB;
  if (!g.TryCharge(MiB(50), kChargeDefault, item).ok()) return false;
  bool ok = true;
  const int64_t current = ReadLong(g, "memory.current");
  if (current < size) ok = false;
  if (item == StatItem::kAnon && !ValuesClose(size, current, 3)) ok = false;
  const int64_t stat = StatKey(g, key);
  if (stat < 0 || !ValuesClose(stat, current, err)) ok = false;
  g.Uncharge(MiB(50), item);
  return ok;
}

TEST(MemcontrolConformanceTest, CurrentPeak) {
  TestController t;
  GroupRef memcg = t.Make("memcg_test");
  EXPECT_EQ(ReadLong(*memcg, "memory.current"), 0);
  EXPECT_EQ(ReadLong(*memcg, "memory.peak"), 0);
  ASSERT_TRUE(Alloc50MCheck(*memcg, StatItem::kAnon, "anon", 3));
  EXPECT_GE(ReadLong(*memcg, "memory.peak"), 50 * kMiB);

  auto fd = MemoryFile::Open(*memcg, "memory.peak").value();
  ASSERT_TRUE(fd->writable());  // the selftest's S_IWUSR check
  auto fd2 = MemoryFile::Open(*memcg, "memory.peak").value();
  auto fd3 = MemoryFile::Open(*memcg, "memory.peak").value();
  // "any non-empty string resets, but make it clear"
  static const char reset_string[] = "reset\n";
  const std::string_view reset(reset_string, sizeof(reset_string));  // 7
  ASSERT_EQ(reset.size(), 7u);
  ASSERT_TRUE(fd->Write(reset).ok());
  ASSERT_TRUE(fd2->Write(reset).ok());
  ASSERT_TRUE(fd3->Write(reset).ok());
  // A completely independent read is not affected by the handle resets.
  EXPECT_GE(ReadLong(*memcg, "memory.peak"), 50 * kMiB);
  fd2.reset();  // closed in a different order than written
  auto fd4 = MemoryFile::Open(*memcg, "memory.peak").value();
  ASSERT_TRUE(fd4->Write(reset).ok());
  const int64_t peak = ReadLong(*fd);
  EXPECT_LE(peak, 30 * kMiB);
  EXPECT_GE(peak, 0);

  ASSERT_TRUE(Alloc50MCheck(*memcg, StatItem::kFile, "file", 10));
  EXPECT_GE(ReadLong(*memcg, "memory.peak"), 50 * kMiB);
  // Everything is back to normal.
  EXPECT_GE(ReadLong(*fd), 50 * kMiB);
  EXPECT_GE(ReadLong(*fd4), 50 * kMiB);
  fd3.reset();
  fd4.reset();
  fd.reset();
}

TEST(MemcontrolConformanceTest, SubtreeControl) {
  TestController t;
  // Two nested groups with the memory controller enabled.
  GroupRef parent = t.Make("memcg_test_0");
  ASSERT_TRUE(parent->WriteFile("cgroup.subtree_control", "+memory").ok());
  GroupRef child = t.Make("memcg_test_0/memcg_test_1");
  EXPECT_NE(child->ReadFile("cgroup.controllers").value().find("memory"),
            std::string::npos);
  // The selftest's second half, in full: "-memory" on a new parent (a
  // no-op in the kernel, whose new groups start with nothing enabled; here
  // accepted, as no child enables it), and its child has no memory
  // controller: no "memory" in cgroup.controllers, no memory.* files.
  GroupRef parent2 = t.Make("memcg_test_1");
  ASSERT_TRUE(parent2->WriteFile("cgroup.subtree_control", "-memory").ok());
  GroupRef child2 = t.Make("memcg_test_1/memcg_test_1");
  EXPECT_EQ(child2->ReadFile("cgroup.controllers").value().find("memory"),
            std::string::npos);
  EXPECT_EQ(parent2->ReadFile("cgroup.subtree_control").value(), "\n");
  EXPECT_FALSE(child2->ReadFile("memory.current").ok());
}

}  // namespace
}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The cgroup-v2 memory files: the table of files and root rules, defaults,
// parsing (page_counter_memparse, memparse: floor to pages, "max" only
// exact, one suffix letter), formats, errno values and write semantics
// (memory_max_write and friends).

#include "umemcg/files.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <latch>
#include <thread>

#include "test_util.h"
#include "umemcg/active.h"

namespace umemcg {
namespace {

using testing::MiB;
using testing::PageReclaimer;
using testing::TestController;

int ErrnoOfWrite(Group& g, std::string_view file, std::string_view text) {
  return ErrnoOf(g.WriteFile(file, text).code());
}

std::string Read(Group& g, std::string_view file) {
  StatusOr<std::string> r = g.ReadFile(file);
  EXPECT_TRUE(r.ok()) << file << ": " << r.status().ToString();
  return r.ok() ? r.value() : "";
}

TEST(FilesTest, RootHasOnlyTheRootFiles) {
  TestController t;
  GroupRef g = t.Make("g");
  EXPECT_EQ(
      t.ctrl->root().ListFiles(),
      (std::vector<std::string>{"cgroup.controllers", "cgroup.subtree_control",
                                "cgroup.stat", "cgroup.procs", "cgroup.threads",
                                "memory.stat", "memory.reclaim", "memory.stock",
                                "memory.stat_error", "memory.pressure"}));
  EXPECT_EQ(g->ListFiles().size(), 20u);
  // cgroup.events is not on the root (CFTYPE_NOT_ON_ROOT).
  EXPECT_EQ(ErrnoOf(t.ctrl->root().ReadFile("cgroup.events").status().code()),
            ENOENT);
  EXPECT_EQ(ErrnoOf(t.ctrl->root().ReadFile("memory.current").status().code()),
            ENOENT);
  EXPECT_EQ(ErrnoOfWrite(t.ctrl->root(), "memory.max", "1G"), ENOENT);
  EXPECT_EQ(ErrnoOf(g->ReadFile("memory.swap.max").status().code()), ENOENT);
  // The root's files and their defaults.
  // The root is never cached: no batch, no slack.
  EXPECT_EQ(Read(t.ctrl->root(), "memory.stock"),
            "stocked 0\nbatch 0\nslack_bound 0\n");
  EXPECT_EQ(Read(t.ctrl->root(), "memory.stat").rfind("anon 0\nfile 0\n", 0),
            0u);
  EXPECT_EQ(
      Read(t.ctrl->root(), "memory.stat_error").rfind("pending_updates 0\n", 0),
      0u);
  EXPECT_EQ(ErrnoOf(g->ReadFile("cgroup.type").status().code()), ENOENT);
}

TEST(FilesTest, DefaultsOnANewGroup) {
  TestController t;
  GroupRef g = t.Make("g");
  const std::pair<const char*, const char*> expected[] = {
      {"memory.current", "0\n"},
      {"memory.min", "0\n"},
      {"memory.low", "0\n"},
      {"memory.high", "max\n"},
      {"memory.max", "max\n"},
      {"memory.peak", "0\n"},
      {"memory.oom.group", "0\n"},
      // TestController: 4 fake CPUs, batch 64.
      {"memory.stock", "stocked 0\nbatch 64\nslack_bound 1048576\n"},
  };
  for (const auto& [file, text] : expected) EXPECT_EQ(Read(*g, file), text);
  EXPECT_EQ(Read(*g, "memory.events"),
            "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n");
  EXPECT_EQ(Read(*g, "memory.events.local"), Read(*g, "memory.events"));
  const std::string stat = Read(*g, "memory.stat");
  EXPECT_EQ(stat.rfind("anon 0\nfile 0\nkernel 0\n", 0), 0u) << stat;
  EXPECT_NE(stat.find("slab_unreclaimable 0\nslab 0\n"), std::string::npos);
  EXPECT_NE(stat.find("\nstock 0\n"), std::string::npos);
}

struct LimitCase {
  const char* text;
  const char* reads;  // nullptr: must fail with EINVAL
};

TEST(FilesTest, LimitParsingFollowsPageCounterMemparse) {
  const LimitCase cases[] = {
      {"1G", "1073741824\n"},
      {"1g", "1073741824\n"},
      {"  1G\n", "1073741824\n"},
      {"2M", "2097152\n"},
      {"4k", "4096\n"},
      {"1T", "1099511627776\n"},
      {"1P", "1125899906842624\n"},
      {"1E", "1152921504606846976\n"},
      {"8E", "max\n"},     // >= PAGE_COUNTER_MAX pages reads back as max
      {"16E", "max\n"},    // overflows 64 bits: saturates (kernel wraps)
      {"4097", "4096\n"},  // floor to whole pages
      {"4095", "0\n"},
      {"0x1000", "4096\n"},  // C-style hex
      {"0X2000", "8192\n"},
      {"010000", "4096\n"},  // leading 0: octal
      {"0", "0\n"},
      {"\n", "0\n"},  // the kernel parses an empty value as 0
      {"", "max\n"},  // a write of zero bytes is ignored (kernfs)
      {"max", "max\n"},
      {" max\n", "max\n"},
      {"99999999999999999999999", "max\n"},
      {"1GB", nullptr},
      {"1 G", nullptr},
      {"-5", nullptr},
      {"+5", nullptr},
      {"1.5G", nullptr},
      {"MAX", nullptr},
      {"Max", nullptr},
      {"max1", nullptr},
      {"maxx", nullptr},
      {"infinity", nullptr},
      {"08", nullptr},  // not an octal digit
      {"0x", nullptr},
      {"1K2", nullptr},
      {"G", "0\n"},  // a bare suffix is 0: memparse consumes it anyway
      {"k\n", "0\n"},
      {"GG", nullptr},
  };
  TestController t;
  GroupRef g = t.Make("g");
  for (const char* file :
       {"memory.max", "memory.high", "memory.low", "memory.min"}) {
    for (const LimitCase& c : cases) {
      ASSERT_TRUE(g->WriteFile(file, "max").ok());
      Status s = g->WriteFile(file, c.text);
      if (c.reads == nullptr) {
        EXPECT_EQ(ErrnoOf(s.code()), EINVAL) << file << " '" << c.text << "'";
        EXPECT_EQ(Read(*g, file), "max\n") << "unchanged after EINVAL";
      } else {
        EXPECT_TRUE(s.ok()) << file << " '" << c.text << "' " << s.ToString();
        EXPECT_EQ(Read(*g, file), c.reads) << file << " '" << c.text << "'";
      }
    }
  }
}

TEST(FilesTest, ParseHelpersAreExposed) {
  EXPECT_EQ(ParseMemoryLimit("1M").value(), Pages(256));
  EXPECT_EQ(ParseMemoryLimit("max").value(), kPageCounterMax);
  EXPECT_FALSE(ParseMemorySize("max").ok());
  EXPECT_EQ(ParseMemorySize(" 3K ").value(), 3072u);
  // The kernel's memparse consumes a suffix with no digits before it: a
  // bare "K" is 0 (page_counter_memparse then accepts it), where "x" or
  // "KB" is not a size.
  EXPECT_EQ(ParseMemorySize("K").value(), 0u);
  EXPECT_EQ(ParseMemoryLimit("m").value(), Pages(0));
  EXPECT_FALSE(ParseMemorySize("x").ok());
  EXPECT_FALSE(ParseMemoryLimit("KB").ok());
  EXPECT_FALSE(ParseMemorySize("").ok());
  EXPECT_EQ(FormatMemoryLimit(Pages(1)), "4096\n");
  EXPECT_EQ(FormatMemoryLimit(kPageCounterMax), "max\n");
}

TEST(FilesTest, ErrnoForMisuse) {
  TestController t;
  GroupRef g = t.Make("g");
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.current", "0"), EACCES);
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.events", "0"), EACCES);
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.stat", "0"), EACCES);
  EXPECT_EQ(ErrnoOf(g->ReadFile("memory.reclaim").status().code()), EACCES);
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.nonsense", "0"), ENOENT);
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.max", "\xff\xfe"), EINVAL);
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.max", "\xc3"), EINVAL);  // truncated
  // kernfs: atomic_write_len = PAGE_SIZE, so a longer write is E2BIG.
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.max", std::string(5000, '1')), E2BIG);
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.max", std::string(4097, ' ')), E2BIG);
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.max", std::string(4096, 'x')), EINVAL);
  ASSERT_TRUE(t.ctrl->RemoveGroup(*g).ok());
  EXPECT_EQ(ErrnoOf(g->ReadFile("memory.current").status().code()), ENODEV);
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.max", "1G"), ENODEV);
}

TEST(FilesTest, OomGroupTakesZeroOrOne) {
  TestController t;
  GroupRef g = t.Make("g");
  const std::pair<const char*, int> cases[] = {
      {"1", 0},       {"0", 0},       {" 1\n", 0},     {"0x1", 0},
      {"+1", 0},      {"01", 0},      {"2", EINVAL},   {"-1", EINVAL},
      {"\n", EINVAL}, {"on", EINVAL}, {"1 1", EINVAL}, {"99999999999", ERANGE},
      {"", 0},  // zero bytes: ignored
  };
  for (const auto& [text, err] : cases) {
    EXPECT_EQ(ErrnoOfWrite(*g, "memory.oom.group", text), err) << text;
  }
  ASSERT_TRUE(g->WriteFile("memory.oom.group", "1").ok());
  EXPECT_EQ(Read(*g, "memory.oom.group"), "1\n");
  EXPECT_TRUE(g->oom_group());
}

TEST(FilesTest, CurrentAndStockReportBytes) {
  TestController t({.batch = 64});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->TryCharge(Pages(3)).ok());
  EXPECT_EQ(Read(*g, "memory.current"), "262144\n");  // 64 pages charged
  // 61 in the stock; at most 4 CPUs x 64 pages.
  EXPECT_EQ(Read(*g, "memory.stock"),
            "stocked 249856\nbatch 64\nslack_bound 1048576\n");
  t.Drain();
  EXPECT_EQ(Read(*g, "memory.current"), "12288\n");
  g->Uncharge(Pages(3));
}

TEST(FilesTest, PeakResetIsPerHandle) {
  TestController t({.batch = 1});  // no stock surplus in the peaks
  GroupRef g = t.Make("g");
  auto a = MemoryFile::Open(*g, "memory.peak").value();
  auto b = MemoryFile::Open(*g, "memory.peak").value();
  ASSERT_TRUE(g->TryCharge(Pages(10), ChargeFlags::kNone).ok());
  t.Drain();
  g->UnchargeDirect(Pages(6));  // usage 4, peak 10
  EXPECT_EQ(a->Read().value(), "40960\n");
  ASSERT_TRUE(a->Write("reset").ok());
  EXPECT_EQ(a->Read().value(), "16384\n");  // a: peak since its reset
  EXPECT_EQ(b->Read().value(), "40960\n");  // b never wrote: global peak
  ASSERT_TRUE(g->TryCharge(Pages(2), ChargeFlags::kNone).ok());
  g->UnchargeDirect(Pages(2));       // usage back to 4, peak since reset 6
  ASSERT_TRUE(b->Write("\n").ok());  // b resets; a keeps its 6
  EXPECT_EQ(b->Read().value(), "16384\n");
  EXPECT_EQ(a->Read().value(), "24576\n");
  EXPECT_EQ(Read(*g, "memory.peak"), "40960\n");  // fresh handle: global
  a.reset();
  b.reset();
  g->UnchargeDirect(Pages(4));
}

TEST(FilesTest, MaxWriteReclaimsBelowTheLimit) {
  TestController t;
  GroupRef g = t.Make("g");
  PageReclaimer cache(g.get());
  ASSERT_TRUE(g->AddReclaimer(&cache).ok());
  ASSERT_TRUE(cache.Fill(MiB(4)));
  ASSERT_TRUE(g->WriteFile("memory.max", "1M").ok());
  EXPECT_LE(g->usage(), MiB(1));
  EXPECT_EQ(Read(*g, "memory.max"), "1048576\n");
  // memory.max writes raise no max event themselves (kernel); the next
  // charge that hits the limit does.
  EXPECT_EQ(g->events(MemoryEvent::kMax), 0u);
  ASSERT_TRUE(g->WriteFile("memory.max", "0").ok());
  EXPECT_EQ(g->usage(), Pages(0));
  EXPECT_FALSE(
      g->TryCharge(Pages(1), kChargeDefault | ChargeFlags::kRetryMayFail).ok());
  EXPECT_NE(Read(*g, "memory.events").find("max 18\n"), std::string::npos);
  ASSERT_TRUE(g->RemoveReclaimer(&cache).ok());
  cache.Release();
}

TEST(FilesTest, MaxWriteWithNothingToReclaimRunsOom) {
  TestController t;
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->TryCharge(Pages(100), ChargeFlags::kNone).ok());
  int calls = 0;
  t.ctrl->SetOomHandler([&](const OomContext&) {
    ++calls;
    return OomOutcome{};
  });
  ASSERT_TRUE(g->WriteFile("memory.max", "16K").ok());  // succeeds anyway
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(g->usage(), Pages(100));
  EXPECT_NE(Read(*g, "memory.events").find("oom 1\n"), std::string::npos);
  g->UnchargeDirect(Pages(100));
}

TEST(FilesTest, NonBlockingWritesOnlySetTheLimit) {
  TestController t;
  GroupRef g = t.Make("g");
  PageReclaimer cache(g.get());
  ASSERT_TRUE(g->AddReclaimer(&cache).ok());
  ASSERT_TRUE(cache.Fill(Pages(100)));
  auto f = MemoryFile::Open(*g, "memory.high").value();
  ASSERT_TRUE(f->Write("16K", WriteMode::kNonBlocking).ok());
  EXPECT_EQ(cache.held(), 100u);
  EXPECT_EQ(f->Read().value(), "16384\n");
  ASSERT_TRUE(f->Write("16K").ok());  // blocking: reclaims toward high
  EXPECT_LE(g->usage(), Pages(4));
  ASSERT_TRUE(g->RemoveReclaimer(&cache).ok());
  cache.Release();
}

TEST(FilesTest, ReclaimWriteSyntaxAndEagain) {
  TestController t;
  GroupRef g = t.Make("g");
  const std::pair<const char*, int> syntax[] = {
      {"\n", EINVAL},
      {"", 0},  // zero bytes: ignored
      {"max", EINVAL},
      {"1M foo", EINVAL},
      {"1Mfoo", EINVAL},
      {"1M swappiness=201", EINVAL},
      {"1M swappiness=-1", EINVAL},
      {"1M swappiness=x", EINVAL},
      {"1M source=zswap", EINVAL},  // there is no zswap
      {"0", 0},
      {"1M", EAGAIN},  // nothing reclaimable
      {"1M swappiness=60", EAGAIN},
      {"1M  swappiness=max", EAGAIN},
  };
  for (const auto& [text, err] : syntax) {
    EXPECT_EQ(ErrnoOfWrite(*g, "memory.reclaim", text), err) << text;
  }
  PageReclaimer cache(g.get());
  ASSERT_TRUE(g->AddReclaimer(&cache).ok());
  ASSERT_TRUE(cache.Fill(MiB(2)));
  ASSERT_TRUE(g->WriteFile("memory.reclaim", "1M").ok());
  EXPECT_LE(cache.held(), MiB(1).raw());
  // The root has memory.reclaim too.
  EXPECT_TRUE(t.ctrl->root().WriteFile("memory.reclaim", "4K").ok());
  ASSERT_TRUE(g->RemoveReclaimer(&cache).ok());
  cache.Release();
}

TEST(FilesTest, EventsAndStatFormats) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  ASSERT_TRUE(c->WriteFile("memory.max", "0").ok());
  EXPECT_FALSE(
      c->TryCharge(Pages(1), kChargeDefault | ChargeFlags::kNoRetry).ok());
  EXPECT_EQ(Read(*p, "memory.events"),
            "low 0\nhigh 0\nmax 2\noom 0\noom_kill 0\noom_group_kill 0\n");
  EXPECT_EQ(Read(*p, "memory.events.local"),
            "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n");
  ASSERT_TRUE(c->ModState(StatItem::kAnon, 3));
  ASSERT_TRUE(c->ModState(StatItem::kSlabReclaimable, 100));
  ASSERT_TRUE(c->ModState(StatItem::kSlabUnreclaimable, 28));
  ASSERT_TRUE(c->CountEvent(StatItem::kPgfault, 5));
  // Below the flush threshold memory.stat may lag (memory.stat_error says
  // by how much); a flush makes it exact.
  const std::string error = Read(*p, "memory.stat_error");
  // 3 pages + 2 byte updates (a page each) + 5 events.
  EXPECT_EQ(error.rfind("pending_updates 10\nthreshold 256\nexceeded 0\n"
                        "bound_bytes 40960\n",
                        0),
            0u)
      << error;
  p->FlushStats();
  EXPECT_EQ(Read(*p, "memory.stat_error").rfind("pending_updates 0\n", 0), 0u);
  const std::string stat = Read(*p, "memory.stat");
  EXPECT_EQ(stat.rfind("anon 12288\n", 0), 0u) << stat;
  EXPECT_NE(stat.find("slab_reclaimable 100\nslab_unreclaimable 28\nslab "
                      "128\n"),
            std::string::npos)
      << stat;
  EXPECT_NE(stat.find("pgfault 5\n"), std::string::npos);
}

// kernfs appends a NUL to every write and the handlers parse C strings: the
// value ends at the first NUL, whatever follows (the kernel selftest resets
// memory.peak with write(fd, "reset\n\0", 7)). A zero-byte write never
// reaches a handler. Before: any NUL was EINVAL.
TEST(FilesTest, NulEndsTheValue) {
  TestController t({.batch = 1});
  GroupRef g = t.Make("g");
  using namespace std::string_literals;
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.max", "1G\0"s), 0);
  EXPECT_EQ(Read(*g, "memory.max"), "1073741824\n");
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.max", "2G\n\0junk \xff"s), 0);
  EXPECT_EQ(Read(*g, "memory.max"), "2147483648\n");
  // An empty value parses as 0, as "\n" does.
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.high", "\0"s), 0);
  EXPECT_EQ(Read(*g, "memory.high"), "0\n");
  // What precedes the NUL is still checked.
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.max", "1X\0"s), EINVAL);
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.max", "\xff\0"s), EINVAL);
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.oom.group", "1\0 2"s), 0);
  EXPECT_TRUE(g->oom_group());
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.reclaim", "0\0 nonsense"s), 0);
  // The 4096-byte bound is on the whole write, NULs included.
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.max", "1G"s + std::string(4094, '\0')), 0);
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.max", "1G"s + std::string(4095, '\0')),
            E2BIG);

  // The selftest's reset string on per-handle peaks.
  ASSERT_TRUE(g->TryCharge(Pages(10), ChargeFlags::kNone).ok());
  g->UnchargeDirect(Pages(6));  // usage 4, peak 10
  auto peak = MemoryFile::Open(*g, "memory.peak").value();
  static const char kReset[] = "reset\n";  // sizeof: 7, the NUL included
  ASSERT_TRUE(peak->Write(std::string_view(kReset, sizeof(kReset))).ok());
  EXPECT_EQ(peak->Read().value(), "16384\n");
  EXPECT_EQ(Read(*g, "memory.peak"), "40960\n");
  // Zero bytes do not reach the handler: no reset.
  ASSERT_TRUE(g->TryCharge(Pages(2), ChargeFlags::kNone).ok());
  g->UnchargeDirect(Pages(2));
  ASSERT_TRUE(peak->Write("").ok());
  EXPECT_EQ(peak->Read().value(), "24576\n");
  peak.reset();
  g->UnchargeDirect(Pages(4));
}

// The cgroup core files of a memory-only hierarchy (kernel/cgroup/cgroup.c):
// the memory controller is available and enabled in every new group, and
// cgroup.subtree_control follows cgroup_subtree_control_write's rules.
TEST(FilesTest, ControllersAndSubtreeControl) {
  TestController t;
  Group& root = t.ctrl->root();
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  for (Group* g : {&root, p.get(), c.get()}) {
    EXPECT_EQ(Read(*g, "cgroup.controllers"), "memory\n") << g->path();
    EXPECT_EQ(Read(*g, "cgroup.subtree_control"), "memory\n") << g->path();
    EXPECT_EQ(ErrnoOfWrite(*g, "cgroup.controllers", "+memory"), EACCES);
  }
  // Enabling what is enabled: accepted, nothing changes.
  const std::pair<const char*, int> writes[] = {
      {"+memory", 0},
      {"+memory\n", 0},
      {"  +memory  +memory ", 0},
      {"\n", 0},           // no token: nothing to do
      {"memory", EINVAL},  // no +/- prefix
      {"+cpu", EINVAL},    // no such controller here
      {"+memory +cpu", EINVAL},
      {"+Memory", EINVAL},
      {"+memory\t+memory", EINVAL},  // only spaces separate tokens
      {"+", EINVAL},
      {"-memory", EBUSY},          // a child has memory in its subtree_control
      {"+memory -memory", EBUSY},  // the last token wins
      {"-memory +memory", 0},
  };
  for (const auto& [text, err] : writes) {
    EXPECT_EQ(ErrnoOfWrite(*p, "cgroup.subtree_control", text), err) << text;
  }
  EXPECT_EQ(ErrnoOfWrite(root, "cgroup.subtree_control", "-memory"), EBUSY);
  // A leaf: no child enables memory, so the kernel accepts it, and then
  // disabling again is a no-op.
  EXPECT_EQ(ErrnoOfWrite(*c, "cgroup.subtree_control", "-memory"), 0);
  EXPECT_EQ(Read(*c, "cgroup.subtree_control"), "\n");
  EXPECT_EQ(Read(*c, "cgroup.controllers"), "memory\n");  // its own stays
  EXPECT_EQ(ErrnoOfWrite(*c, "cgroup.subtree_control", "-memory"), 0);
  // Now no child of p enables memory: p may disable it.
  EXPECT_EQ(ErrnoOfWrite(*p, "cgroup.subtree_control", "-memory"), 0);
  EXPECT_EQ(Read(*p, "cgroup.subtree_control"), "\n");
  EXPECT_EQ(Read(root, "cgroup.subtree_control"), "memory\n");
  ASSERT_TRUE(t.ctrl->RemoveGroup(*c).ok());
  EXPECT_EQ(ErrnoOfWrite(*c, "cgroup.subtree_control", "+memory"), ENODEV);
}

// Once a group's subtree_control disables memory, its children lose the
// controller: their memory.* files go (ListFiles, Open, handles opened
// before), their limits stop limiting; charges still count at the
// ancestors. "+memory" brings the files back with default limits.
TEST(FilesTest, ChildrenWithoutTheMemoryController) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  ASSERT_TRUE(c->SetMax(Pages(10)).ok());
  ASSERT_TRUE(c->SetLow(Pages(5)).ok());
  ASSERT_TRUE(c->TryCharge(Pages(4)).ok());
  auto max_file = MemoryFile::Open(*c, "memory.max");
  ASSERT_TRUE(max_file.ok());
  EXPECT_EQ(ErrnoOfWrite(*p, "cgroup.subtree_control", "-memory"), EBUSY);
  ASSERT_EQ(ErrnoOfWrite(*c, "cgroup.subtree_control", "-memory"), 0);
  ASSERT_EQ(ErrnoOfWrite(*p, "cgroup.subtree_control", "-memory"), 0);
  EXPECT_FALSE(c->has_memory_controller());
  EXPECT_EQ(Read(*c, "cgroup.controllers"), "\n");
  for (const std::string& f : c->ListFiles()) {
    EXPECT_TRUE(f.starts_with("cgroup.")) << f;
  }
  EXPECT_EQ(ErrnoOf(c->ReadFile("memory.current").status().code()), ENOENT);
  EXPECT_EQ(ErrnoOfWrite(*c, "memory.max", "1G"), ENOENT);
  EXPECT_EQ(ErrnoOf((*max_file)->Read().status().code()), ENODEV);
  // It can no longer enable memory for its own children.
  EXPECT_EQ(ErrnoOfWrite(*c, "cgroup.subtree_control", "+memory"), ENOENT);
  // New children of p have no controller either.
  GroupRef d = t.Make("p/d");
  EXPECT_FALSE(d->has_memory_controller());
  EXPECT_EQ(Read(*d, "cgroup.subtree_control"), "\n");
  // Limits and protection no longer apply; the charge is p's as before.
  EXPECT_EQ(c->memory().max(), kPageCounterMax);
  EXPECT_EQ(c->memory().low(), Pages(0));
  EXPECT_TRUE(c->TryCharge(Pages(20)).ok());
  EXPECT_EQ(p->usage(), c->usage());
  c->Uncharge(Pages(24));
  // "+memory": the files come back, with the default limits.
  ASSERT_EQ(ErrnoOfWrite(*p, "cgroup.subtree_control", "+memory"), 0);
  EXPECT_TRUE(c->has_memory_controller());
  EXPECT_EQ(Read(*c, "memory.max"), "max\n");
  EXPECT_EQ(Read(*c, "memory.low"), "0\n");
  EXPECT_EQ(Read(*c, "cgroup.subtree_control"), "\n");  // its own: off
  EXPECT_EQ(ErrnoOfWrite(*c, "cgroup.subtree_control", "+memory"), 0);
}

// The C++ setters give the files' answer for a group without the
// controller: it has no limits to set.
TEST(FilesTest, SettersRefuseAGroupWithoutTheController) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  ASSERT_TRUE(c->SetSubtreeMemory(false).ok());
  ASSERT_TRUE(p->SetSubtreeMemory(false).ok());
  EXPECT_EQ(c->SetMax(Pages(10)).code(), StatusCode::kNotFound);
  EXPECT_EQ(
      c->SetMax(Pages(10), kChargeDefault | ChargeFlags::kMayReclaim).code(),
      StatusCode::kNotFound);
  EXPECT_EQ(c->SetHigh(Pages(10)).code(), StatusCode::kNotFound);
  EXPECT_EQ(c->SetMin(Pages(10)).code(), StatusCode::kNotFound);
  EXPECT_EQ(c->SetLow(Pages(10)).code(), StatusCode::kNotFound);
  EXPECT_EQ(c->SetOomGroup(true).code(), StatusCode::kNotFound);
  EXPECT_EQ(c->memory().max(), kPageCounterMax);
  EXPECT_EQ(c->memory().high(), kPageCounterMax);
  EXPECT_EQ(c->memory().min(), Pages(0));
  EXPECT_EQ(c->memory().low(), Pages(0));
  EXPECT_FALSE(c->oom_group());
  ASSERT_TRUE(p->SetSubtreeMemory(true).ok());
  EXPECT_TRUE(c->SetMax(Pages(10)).ok());
  EXPECT_EQ(c->memory().max(), Pages(10));
}

// A setter that passed its check races with "-memory" on the parent: once
// both are done, the child has no limit and no protection, whichever
// order their writes landed in.
TEST(FilesTest, ASetterRacingWithMinusMemoryLeavesNoLimit) {
  TestController t;
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  ASSERT_TRUE(c->SetSubtreeMemory(false).ok());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> calls{0};
  std::thread setter([&] {
    for (uint64_t i = 0; !stop.load(); ++i) {
      (void)c->SetMax(Pages(10 + i % 7));
      (void)c->SetHigh(Pages(10 + i % 5));
      (void)c->SetMin(Pages(1 + i % 3));
      (void)c->SetLow(Pages(1 + i % 3));
      (void)c->SetOomGroup(true);
      calls.fetch_add(1);
    }
  });
  int bad = 0;
  for (int round = 0; round < 3000; ++round) {
    ASSERT_TRUE(p->SetSubtreeMemory(false).ok());
    // Two whole rounds of the setter after the disable: the one that was
    // in flight has finished, and later ones were refused.
    const uint64_t seen = calls.load();
    while (calls.load() < seen + 2) std::this_thread::yield();
    if (c->memory().max() != kPageCounterMax ||
        c->memory().high() != kPageCounterMax ||
        c->memory().min() != Pages(0) || c->memory().low() != Pages(0) ||
        c->oom_group()) {
      ++bad;
    }
    ASSERT_TRUE(p->SetSubtreeMemory(true).ok());
  }
  stop.store(true);
  setter.join();
  EXPECT_EQ(bad, 0);
}

// Without the controller a group has no memcg of its own: an OOM kill the
// handler reports there counts at the nearest ancestor that has one, in
// its memory.events.local (the kernel counts it in the task's memcg).
TEST(FilesTest, EventsOfAGroupWithoutTheControllerCountAtTheAncestor) {
  TestController t({.batch = 1});
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  ASSERT_EQ(ErrnoOfWrite(*c, "cgroup.subtree_control", "-memory"), 0);
  ASSERT_EQ(ErrnoOfWrite(*p, "cgroup.subtree_control", "-memory"), 0);
  GroupRef d = t.Make("p/c/d");  // two levels without it
  ASSERT_TRUE(p->SetMax(Pages(10)).ok());
  ASSERT_TRUE(d->TryCharge(Pages(10)).ok());
  int calls = 0;
  t.ctrl->SetOomHandler([&](const OomContext& ctx) {
    OomOutcome o;
    if (calls++ > 0 || ctx.over_limit != p.get()) return o;
    d->UnchargeDirect(Pages(10));
    o.progress = true;
    o.killed = OomVictim(d.get(), 2);
    return o;
  });
  ASSERT_TRUE(d->TryCharge(Pages(1)).ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(p->events_local(MemoryEvent::kOomKill), 2u);
  EXPECT_EQ(p->events(MemoryEvent::kOomKill), 2u);
  EXPECT_EQ(c->events_local(MemoryEvent::kOomKill), 0u);
  EXPECT_EQ(d->events_local(MemoryEvent::kOomKill), 0u);
  EXPECT_NE(Read(*p, "memory.events.local").find("oom_kill 2\n"),
            std::string::npos);
  d->UnchargeDirect(Pages(1));
  t.ctrl->SetOomHandler(nullptr);
}

// "+memory" gives a child a new memcg in the kernel, counting from zero:
// its events and peak start again.
TEST(FilesTest, EnablingMemoryGivesFreshEventsAndPeak) {
  TestController t({.batch = 1});
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  ASSERT_TRUE(c->SetMax(Pages(2)).ok());
  ASSERT_TRUE(c->TryCharge(Pages(2)).ok());
  EXPECT_FALSE(c->TryCharge(Pages(1)).ok());  // max (and oom) events
  EXPECT_GE(c->events(MemoryEvent::kMax), 1u);
  c->UnchargeDirect(Pages(2));
  EXPECT_EQ(Read(*c, "memory.peak"), "8192\n");
  ASSERT_EQ(ErrnoOfWrite(*c, "cgroup.subtree_control", "-memory"), 0);
  ASSERT_EQ(ErrnoOfWrite(*p, "cgroup.subtree_control", "-memory"), 0);
  const uint64_t p_max_events = p->events(MemoryEvent::kMax);
  ASSERT_EQ(ErrnoOfWrite(*p, "cgroup.subtree_control", "+memory"), 0);
  EXPECT_EQ(Read(*c, "memory.events"),
            "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n");
  EXPECT_EQ(Read(*c, "memory.events.local"), Read(*c, "memory.events"));
  EXPECT_EQ(Read(*c, "memory.peak"), "0\n");
  // The parent's own counts are its memcg's: unchanged.
  EXPECT_EQ(p->events(MemoryEvent::kMax), p_max_events);
  // Enabling again what is enabled changes nothing.
  ASSERT_TRUE(c->TryCharge(Pages(1)).ok());
  c->UnchargeDirect(Pages(1));
  ASSERT_EQ(ErrnoOfWrite(*p, "cgroup.subtree_control", "+memory"), 0);
  EXPECT_EQ(Read(*c, "memory.peak"), "4096\n");
}

// cgroup.stat (kernel: cgroup_stat_show) counts live and dying descendants:
// a removed group is dying until it is freed.
TEST(FilesTest, CgroupStatCountsDescendants) {
  TestController t;
  Group& root = t.ctrl->root();
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("a/b");
  GroupRef c = t.Make("a/b/c");
  GroupRef d = t.Make("a/d");
  EXPECT_EQ(Read(root, "cgroup.stat"),
            "nr_descendants 4\nnr_dying_descendants 0\n");
  EXPECT_EQ(Read(*a, "cgroup.stat"),
            "nr_descendants 3\nnr_dying_descendants 0\n");
  EXPECT_EQ(Read(*c, "cgroup.stat"),
            "nr_descendants 0\nnr_dying_descendants 0\n");
  ASSERT_TRUE(t.ctrl->RemoveGroup(*c).ok());  // `c` still holds it
  ASSERT_TRUE(t.ctrl->RemoveGroup(*d).ok());
  EXPECT_EQ(Read(*a, "cgroup.stat"),
            "nr_descendants 1\nnr_dying_descendants 2\n");
  EXPECT_EQ(Read(*b, "cgroup.stat"),
            "nr_descendants 0\nnr_dying_descendants 1\n");
  EXPECT_EQ(root.nr_descendants(), 2);
  EXPECT_EQ(root.nr_dying_descendants(), 2);
  c.reset();
  d.reset();
  t.ctrl->Reap();
  EXPECT_EQ(Read(*a, "cgroup.stat"),
            "nr_descendants 1\nnr_dying_descendants 0\n");
  EXPECT_EQ(Read(root, "cgroup.stat"),
            "nr_descendants 2\nnr_dying_descendants 0\n");
}

// cgroup.events (kernel: cgroup_events_show): "populated" is whether the
// subtree has memory charged (memory.current > 0); nothing is frozen.
TEST(FilesTest, CgroupEventsPopulatedFollowsUsage) {
  TestController t({.batch = 8});
  GroupRef p = t.Make("p");
  GroupRef c = t.Make("p/c");
  EXPECT_EQ(Read(*p, "cgroup.events"), "populated 0\nfrozen 0\n");
  ASSERT_TRUE(c->TryCharge(Pages(1), ChargeFlags::kNone).ok());
  EXPECT_EQ(Read(*c, "cgroup.events"), "populated 1\nfrozen 0\n");
  EXPECT_EQ(Read(*p, "cgroup.events"), "populated 1\nfrozen 0\n");
  c->Uncharge(Pages(1));
  // The batch is still pre-charged in this CPU's stock: memory.current
  // counts it, and so does populated, until the stock gives it back.
  EXPECT_EQ(Read(*p, "cgroup.events"), "populated 1\nfrozen 0\n");
  t.Drain();
  EXPECT_EQ(Read(*c, "cgroup.events"), "populated 0\nfrozen 0\n");
  EXPECT_EQ(Read(*p, "cgroup.events"), "populated 0\nfrozen 0\n");
  EXPECT_EQ(ErrnoOfWrite(*p, "cgroup.events", "0"), EACCES);
}

// cgroup.threads / cgroup.procs (kernel cgroup_threads_show /
// cgroup_procs_show / cgroup_procs_write_start): the known threads of this
// process by TID, the process once by PID; writes move threads.
TEST(FilesTest, CgroupThreadsAndProcsListAndMove) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  std::latch registered(1);
  std::latch release(1);
  std::atomic<pid_t> tid{0};
  std::atomic<Group*> seen{nullptr};
  std::thread worker([&] {
    tid = static_cast<pid_t>(::syscall(SYS_gettid));
    SetThreadDefaultGroup(a.get());
    registered.count_down();
    release.wait();
    seen = ActiveGroup();
    SetThreadDefaultGroup(nullptr);
  });
  registered.wait();
  const std::string tid_line = std::to_string(tid.load()) + "\n";
  const std::string pid_line = std::to_string(::getpid()) + "\n";
  EXPECT_EQ(Read(*a, "cgroup.threads"), tid_line);
  EXPECT_EQ(Read(*a, "cgroup.procs"), pid_line);
  EXPECT_EQ(Read(*b, "cgroup.threads"), "");
  EXPECT_EQ(Read(*b, "cgroup.procs"), "");
  // Kernel strstrip + kstrtoint(, 0): whitespace around, C radix.
  EXPECT_EQ(ErrnoOfWrite(*b, "cgroup.threads", " " + tid_line), 0);
  EXPECT_EQ(Read(*a, "cgroup.threads"), "");
  EXPECT_EQ(Read(*b, "cgroup.threads"), tid_line);
  EXPECT_EQ(Read(*b, "cgroup.procs"), pid_line);
  release.count_down();
  worker.join();
  EXPECT_EQ(seen.load(), b.get());
  // Exited: no longer listed, no longer movable.
  EXPECT_EQ(Read(*b, "cgroup.threads"), "");
  EXPECT_EQ(ErrnoOfWrite(*a, "cgroup.threads", tid_line), ESRCH);
}

TEST(FilesTest, CgroupProcsMovesEveryKnownThreadAndZeroIsTheWriter) {
  TestController t;
  GroupRef a = t.Make("a");
  GroupRef b = t.Make("b");
  const pid_t me = static_cast<pid_t>(::syscall(SYS_gettid));
  // "0" is the writer (kernel: current); it becomes known.
  EXPECT_EQ(ErrnoOfWrite(*a, "cgroup.threads", "0"), 0);
  EXPECT_EQ(ActiveGroup(), a.get());
  EXPECT_EQ(Read(*a, "cgroup.threads"), std::to_string(me) + "\n");
  std::latch registered(1);
  std::latch release(1);
  std::atomic<Group*> seen{nullptr};
  std::thread worker([&] {
    RegisterThread();
    registered.count_down();
    release.wait();
    seen = ActiveGroup();
    SetThreadDefaultGroup(nullptr);
  });
  registered.wait();
  // The PID moves every known thread of the process.
  EXPECT_EQ(ErrnoOfWrite(*b, "cgroup.procs", std::to_string(::getpid())), 0);
  EXPECT_EQ(Read(*a, "cgroup.procs"), "");
  EXPECT_EQ(Read(*b, "cgroup.procs"), std::to_string(::getpid()) + "\n");
  EXPECT_EQ(ActiveGroup(), b.get());
  // A known TID names its process too (kernel: tsk->group_leader).
  EXPECT_EQ(ErrnoOfWrite(*a, "cgroup.procs", std::to_string(me)), 0);
  EXPECT_EQ(ActiveGroup(), a.get());
  release.count_down();
  worker.join();
  EXPECT_EQ(seen.load(), a.get());
  // The root lists what is known and has no default.
  SetThreadDefaultGroup(nullptr);
  const std::string root = Read(t.ctrl->root(), "cgroup.threads");
  EXPECT_NE(root.find(std::to_string(me) + "\n"), std::string::npos);
  EXPECT_EQ(Read(t.ctrl->root(), "cgroup.procs"),
            std::to_string(::getpid()) + "\n");
  EXPECT_EQ(ErrnoOfWrite(t.ctrl->root(), "cgroup.threads", "0"), 0);
  EXPECT_EQ(ActiveGroup(), &t.ctrl->root());
  SetThreadDefaultGroup(nullptr);
}

TEST(FilesTest, CgroupThreadsAndProcsErrnoLikeTheKernel) {
  TestController t;
  GroupRef g = t.Make("g");
  const struct {
    const char* text;
    int err;
  } cases[] = {
      {"abc", EINVAL},
      {"-1", EINVAL},
      {"1x", EINVAL},
      {"1 2", EINVAL},
      {"", 0},
      {" ", EINVAL},
      {"2147483648", EINVAL},  // kstrtoint's ERANGE is EINVAL here
      {"0x", EINVAL},
      {"+", EINVAL},
      {"1", ESRCH},           // init: another process
      {"2147483647", ESRCH},  // no such task
  };
  for (const char* file : {"cgroup.threads", "cgroup.procs"}) {
    for (const auto& c : cases) {
      EXPECT_EQ(ErrnoOfWrite(*g, file, c.text), c.err)
          << file << " '" << c.text << "'";
    }
  }
  EXPECT_EQ(Read(*g, "cgroup.threads"), "");
  ASSERT_TRUE(t.ctrl->RemoveGroup(*g).ok());
  EXPECT_EQ(ErrnoOfWrite(*g, "cgroup.threads", "0"), ENODEV);
  EXPECT_EQ(ErrnoOf(g->ReadFile("cgroup.procs").status().code()), ENODEV);
}

}  // namespace
}  // namespace umemcg

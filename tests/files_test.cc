// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The cgroup-v2 memory files: the table of files and root rules, defaults,
// parsing (memcg-reference 2.9 and pitfall 13), formats, errno values and
// write semantics (9.2).

#include "umemcg/files.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "test_util.h"

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
  EXPECT_EQ(t.ctrl->root().ListFiles(),
            (std::vector<std::string>{"memory.stat", "memory.reclaim",
                                      "memory.stock", "memory.stat_error"}));
  EXPECT_EQ(g->ListFiles().size(), 13u);
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
  EXPECT_EQ(ErrnoOf(g->ReadFile("cgroup.procs").status().code()), ENOENT);
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
      {"", "0\n"},  // the kernel parses an empty write as 0
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
      {"G", nullptr},
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
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.max", std::string("1G\0", 3)), EINVAL);
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.max", "\xff\xfe"), EINVAL);
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.max", "\xc3"), EINVAL);  // truncated
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.max", std::string(5000, '1')), EINVAL);
  ASSERT_TRUE(t.ctrl->RemoveGroup(*g).ok());
  EXPECT_EQ(ErrnoOf(g->ReadFile("memory.current").status().code()), ENODEV);
  EXPECT_EQ(ErrnoOfWrite(*g, "memory.max", "1G"), ENODEV);
}

TEST(FilesTest, OomGroupTakesZeroOrOne) {
  TestController t;
  GroupRef g = t.Make("g");
  const std::pair<const char*, int> cases[] = {
      {"1", 0},     {"0", 0},       {" 1\n", 0},     {"0x1", 0},
      {"+1", 0},    {"01", 0},      {"2", EINVAL},   {"-1", EINVAL},
      {"", EINVAL}, {"on", EINVAL}, {"1 1", EINVAL}, {"99999999999", ERANGE},
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
  g->UnchargeDirect(Pages(2));     // usage back to 4, peak since reset 6
  ASSERT_TRUE(b->Write("").ok());  // b resets; a keeps its 6
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
      {"", EINVAL},
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

}  // namespace
}  // namespace umemcg

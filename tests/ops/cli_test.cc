// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The umemcg tool on a cgroupfs-like fixture of plain files
// (testdata/cgroupfs, copied to a temporary directory), compared with
// golden outputs in testdata/; and its table code on synthetic snapshots.
// Regenerate the golden files after an intended change with
// UMEMCG_UPDATE_GOLDEN=1.

#include <unistd.h>

#include <filesystem>

#include "commands.h"
#include "format.h"
#include "ops_test_util.h"
#include "top.h"

namespace umemcg::testing {
namespace {

namespace fs = std::filesystem;

const std::string kCli = UMEMCG_CLI_PATH;
const fs::path kTestData = UMEMCG_TESTDATA_DIR;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fix_ = dir_.path() + "/cg";
    fs::copy(kTestData / "cgroupfs", fix_, fs::copy_options::recursive);
  }

  Cmd Cli(const std::string& args) { return Shell(kCli + " " + args); }

  // Compares `actual` with testdata/<name> (or rewrites it).
  void ExpectGolden(const std::string& name, const std::string& actual) {
    const fs::path golden = kTestData / name;
    const char* update = std::getenv("UMEMCG_UPDATE_GOLDEN");
    if (update != nullptr && std::string(update) == "1") {
      WriteText(golden, actual);
      return;
    }
    EXPECT_EQ(actual, ReadText(golden)) << "golden file " << golden;
  }

  // Runs the tool with `args`: it must succeed and print testdata/<golden>.
  void ExpectGoldenRun(const std::string& args, const std::string& golden) {
    const Cmd c = Cli(args);
    ASSERT_EQ(c.status, 0) << args << "\n" << c.out;
    ExpectGolden(golden, c.out);
  }

  TempDir dir_;
  std::string fix_;
};

TEST_F(CliTest, TreeGolden) {
  ExpectGoldenRun("tree " + Quote(fix_), "tree.txt");
  ExpectGoldenRun("--bytes tree " + Quote(fix_), "tree_bytes.txt");
  // A subtree, by path and below a root.
  Cmd c = Cli("--root " + Quote(fix_) + " tree web");
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(c.out,
            "GROUP      CURRENT  HIGH   MAX\n"
            "web           1.5G  2.0G  4.0G\n"
            "├─ api        1.5G   max  2.0G\n"
            "└─ static     4.0K   max   max\n");
  EXPECT_EQ(Cli("tree " + Quote(fix_ + "/web")).out,
            "GROUP      CURRENT  HIGH   MAX\n"
            "/             1.5G  2.0G  4.0G\n"
            "├─ api        1.5G   max  2.0G\n"
            "└─ static     4.0K   max   max\n");
}

TEST_F(CliTest, TopOnceGolden) {
  ExpectGoldenRun("top --once --delay 0 " + Quote(fix_), "top_once.txt");
  Cmd c = Cli("top --once --delay 0 --order name " + Quote(fix_));
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(c.out.substr(c.out.find('\n') + 1, 2), "/ ");
  // Batch mode: one table per refresh.
  c = Cli("top --batch -n 2 --delay 0 " + Quote(fix_));
  ASSERT_EQ(c.status, 0) << c.out;
  size_t headers = 0;
  for (size_t p = 0; (p = c.out.find("GROUP", p)) != std::string::npos; ++p) {
    ++headers;
  }
  EXPECT_EQ(headers, 2u);
}

// `umemcg top` on a real terminal: a tmux pane of a fixed size. No line
// of the screen is wider than the pane, long paths are shortened, the rows
// that do not fit are counted on the last line; after the pane is resized
// (SIGWINCH) the same holds for the new size.
TEST_F(CliTest, InteractiveTopFitsATmuxPaneAndFollowsResizes) {
  if (Shell("tmux -V").status != 0) {
    GTEST_SKIP() << "tmux is not installed (make test installs it)";
  }
  // 30 groups with long paths below the fixture's "web".
  for (int i = 0; i < 30; ++i) {
    const fs::path g = fs::path(fix_) / "web" /
                       ("tenant-with-a-long-name-" + std::to_string(i)) /
                       "queries" / ("query-" + std::to_string(i));
    fs::create_directories(g);
    WriteText(g / "memory.current", std::to_string((i + 1) * 4096) + "\n");
    WriteText(g / "memory.max", "max\n");
  }
  const std::string sock = dir_.path() + "/tmux.sock";
  const std::string tmux = "TERM=xterm tmux -S " + Quote(sock) + " ";
  // Shows the pane once the table has been drawn (its "… N more" line).
  auto capture = [&] {
    return Shell(tmux + "capture-pane -p -t top 2>&1").out;
  };
  auto check = [&](size_t cols, size_t rows) {
    std::string screen;
    EXPECT_TRUE(WaitFor([&] {
      screen = capture();
      return screen.find("more") != std::string::npos &&
             screen.find("GROUP") != std::string::npos;
    })) << screen;
    std::istringstream in(screen);
    std::string line;
    size_t lines = 0;
    while (std::getline(in, line)) {
      ++lines;
      EXPECT_LE(cli::DisplayWidth(line), cols) << line;
    }
    EXPECT_LE(lines, rows) << screen;
    EXPECT_NE(screen.find("\u2026/"), std::string::npos) << screen;
    return screen;
  };
  Cmd c = Shell(tmux + "new-session -d -s top -x 60 -y 14 " +
                Quote(kCli + " top -d 100 " + Quote(fix_)));
  ASSERT_EQ(c.status, 0) << c.out;
  check(60, 14);
  c = Shell(tmux + "resize-window -t top -x 38 -y 9");
  EXPECT_EQ(c.status, 0) << c.out;
  // The redraw follows the resize: wait for a frame of the new width.
  std::string screen;
  EXPECT_TRUE(WaitFor([&] {
    screen = capture();
    std::istringstream in(screen);
    std::string line;
    while (std::getline(in, line)) {
      if (cli::DisplayWidth(line) > 38) return false;
    }
    return screen.find("more") != std::string::npos;
  })) << screen;
  check(38, 9);
  Shell(tmux + "send-keys -t top q");
  Shell(tmux + "kill-server");
}

TEST_F(CliTest, BatchTopStopsRightAwayOnSigint) {
  // A signal ends the wait for the next refresh (sleep_for would sleep on
  // for the rest of the minute).
  int status = 0;
  const std::optional<std::chrono::milliseconds> took =
      TimeToExitAfterSignal({kCli, "top", "-b", "-d", "60", fix_}, SIGINT,
                            std::chrono::seconds(20), &status);
  ASSERT_TRUE(took.has_value()) << "no exit within 20 s of SIGINT";
  EXPECT_LT(took->count(), 5000);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(CliTest, MetricsGolden) {
  ExpectGoldenRun("metrics " + Quote(fix_), "metrics.txt");
}

TEST_F(CliTest, CatShowsSizesHumanOrRaw) {
  EXPECT_EQ(Cli("cat " + Quote(fix_ + "/web") + " memory.current").out,
            "1.5G\n");
  EXPECT_EQ(Cli("--bytes cat " + Quote(fix_ + "/web") + " memory.current").out,
            "1610612736\n");
  EXPECT_EQ(Cli("cat " + Quote(fix_ + "/batch") + " memory.max").out, "max\n");
  EXPECT_EQ(Cli("cat " + Quote(fix_ + "/batch") + " memory.current").out,
            "512B\n");
  EXPECT_EQ(Cli("cat " + Quote(fix_ + "/web") + " memory.events").out,
            ReadText(fix_ + "/web/memory.events"));
  Cmd c = Cli("cat " + Quote(fix_ + "/nomem") + " memory.current");
  EXPECT_EQ(c.status, 1);
  EXPECT_NE(c.out.find("No such file or directory"), std::string::npos)
      << c.out;
}

TEST_F(CliTest, SetWritesTheFile) {
  Cmd c = Cli("set " + Quote(fix_ + "/web/api") + " memory.max 8G");
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(ReadText(fix_ + "/web/api/memory.max"), "8G");
  c = Cli("--root " + Quote(fix_) + " set web/api memory.high max");
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(ReadText(fix_ + "/web/api/memory.high"), "max");
  c = Cli("set " + Quote(fix_ + "/nomem") + " memory.max 1G");
  EXPECT_EQ(c.status, 1);
  EXPECT_FALSE(fs::exists(fix_ + "/nomem/memory.max"));  // never created
}

TEST_F(CliTest, RefusesPathTraversal) {
  fs::create_directory_symlink(fix_ + "/web", fix_ + "/link");
  fs::create_symlink(fix_ + "/batch/memory.current", fix_ + "/web/memory.link");
  const std::string q = Quote(fix_);
  struct Case {
    std::string args;
    std::string message;
  };
  const Case cases[] = {
      {"cat " + Quote(fix_ + "/web/../batch") + " memory.current", "'..'"},
      {"cat " + Quote(fix_ + "/..") + " memory.current", "'..'"},
      {"tree " + Quote(fix_ + "/web/.."), "'..'"},
      {"--root " + q + " cat /web memory.current", "relative"},
      {"--root " + q + " cat web/../batch memory.current", "'..'"},
      {"--root " + q + " cat ../cg/web memory.current", "'..'"},
      {"--root " + q + " set .. memory.max 1", "'..'"},
      {"--root " + q + " cat link memory.current", "not a group directory"},
      {"cat " + Quote(fix_ + "/web") + " ../batch/memory.current",
       "not a file name"},
      {"cat " + Quote(fix_ + "/web") + " ..", "not a file name"},
      {"cat " + Quote(fix_ + "/web") + " memory.link", "Too many levels"},
      {"set " + Quote(fix_ + "/web") + " memory.link 1", "Too many levels"},
  };
  for (const Case& c : cases) {
    const Cmd r = Cli(c.args);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n"
                                                        << r.out;
  }
  EXPECT_EQ(ReadText(fix_ + "/batch/memory.current"), "512\n");  // untouched
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Cli("").status, 2);
  EXPECT_EQ(Cli("frobnicate x").status, 2);
  EXPECT_EQ(Cli("cat " + Quote(fix_)).status, 2);
  EXPECT_EQ(Cli("top --order bogus " + Quote(fix_)).status, 2);
  EXPECT_EQ(Cli("--help").status, 0);
  EXPECT_EQ(Cli("tree /nonexistent/dir").status, 1);
}

// ---- The table code ----

GroupSample MakeSample(std::string path, uint64_t current, uint64_t max,
                       uint64_t max_events) {
  GroupSample g;
  g.path = std::move(path);
  g.depth = g.path.empty() ? 0 : 1;
  g.current = current;
  g.max = max;
  g.high = kUnlimitedBytes;
  g.events = {{"low", 0},
              {"high", 0},
              {"max", max_events},
              {"oom", 0},
              {"oom_kill", 0}};
  return g;
}

TEST(CliTableTest, TopShowsEventDeltasSorted) {
  MetricsSnapshot before, now;
  before.groups = {MakeSample("a", 100 << 20, 200 << 20, 5),
                   MakeSample("b", 10 << 20, kUnlimitedBytes, 0)};
  now.groups = {MakeSample("a", 50 << 20, 200 << 20, 9),
                MakeSample("b", 80 << 20, kUnlimitedBytes, 0),
                MakeSample("c", 1 << 20, 2 << 20, 3)};  // new: counts from zero
  now.groups[0].pressure = PressureStats{};
  now.groups[0].pressure->some.avg10 = 1234;  // "12.34"; b, c: no file
  EXPECT_EQ(cli::RenderTop(before, now, cli::TopOrder::kCurrent, false),
            "GROUP  CURRENT  HIGH     MAX  %MAX  SOME10  +LOW  +HIGH  +MAX  "
            "+OOM  +KILL\n"
            "b        80.0M   max     max     -       -     0      0     0     "
            "0      0\n"
            "a        50.0M   max  200.0M  25.0   12.34     0      0     4     "
            "0      0\n"
            "c         1.0M   max    2.0M  50.0       -     0      0     3     "
            "0      0\n");
  const std::string by_events =
      cli::RenderTop(before, now, cli::TopOrder::kEvents, true);
  EXPECT_EQ(by_events.substr(by_events.find('\n') + 1, 2), "a ");
  const std::string by_percent =
      cli::RenderTop(before, now, cli::TopOrder::kPercent, false, 1);
  EXPECT_EQ(by_percent.substr(by_percent.find('\n') + 1, 2), "c ");
  EXPECT_EQ(std::count(by_percent.begin(), by_percent.end(), '\n'), 3);
  EXPECT_TRUE(by_percent.ends_with("\n\u2026 2 more\n")) << by_percent;
  const std::string by_max =
      cli::RenderTop(before, now, cli::TopOrder::kMax, false);
  EXPECT_EQ(by_max.substr(by_max.find('\n') + 1, 2), "a ");
}

// systemd-cgtop's shortening: the middle of a path gives way first.
TEST(CliTableTest, PathsAreShortenedInTheMiddle) {
  EXPECT_EQ(cli::ShortenPath("a/b/c", 5), "a/b/c");
  EXPECT_EQ(cli::ShortenPath("tenants/t1/queries/q42", 17),
            "tenants/\u2026/q42");
  EXPECT_EQ(cli::ShortenPath("tenants/t1/queries/q42", 21),
            "tenants/\u2026/queries/q42");
  EXPECT_EQ(cli::ShortenPath("tenants/t1/queries/q42", 8), "\u2026/q42");
  EXPECT_EQ(cli::ShortenPath("averyveryverylongleafname", 9), "aver\u2026name");
  EXPECT_EQ(cli::ShortenPath("abc", 1), "\u2026");
  EXPECT_EQ(cli::ShortenPath("abc", 0), "");
  for (size_t w = 0; w < 30; ++w) {
    EXPECT_LE(cli::DisplayWidth(cli::ShortenPath("x/yy/zzz/wwww/leaf", w)), w)
        << w;
  }
  EXPECT_EQ(cli::CutToWidth("\u2026abc", 2), "\u2026a");
}

// With a width, no line of the table is wider; without one (batch mode)
// paths stay whole.
TEST(CliTableTest, TopFitsTheWidthItIsGiven) {
  MetricsSnapshot before, now;
  for (int i = 0; i < 12; ++i) {
    now.groups.push_back(MakeSample("tenants/tenant-number-" +
                                        std::to_string(i) + "/queries/q" +
                                        std::to_string(i),
                                    uint64_t(i + 1) << 20, 64 << 20, 0));
  }
  for (size_t width : {20, 40, 79, 80, 120}) {
    const std::string t =
        cli::RenderTop(before, now, cli::TopOrder::kName, false, 5, width);
    std::istringstream in(t);
    std::string line;
    int lines = 0;
    while (std::getline(in, line)) {
      ++lines;
      EXPECT_LE(cli::DisplayWidth(line), width) << width << ": " << line;
    }
    EXPECT_EQ(lines, 1 + 5 + 1) << t;  // header, rows, "… 7 more"
    EXPECT_NE(t.find("\u2026 7 more"), std::string::npos) << t;
  }
  const std::string wide =
      cli::RenderTop(before, now, cli::TopOrder::kName, false, 5, 79);
  EXPECT_NE(wide.find("tenants/\u2026/queries/q0 "), std::string::npos) << wide;
  const std::string batch =
      cli::RenderTop(before, now, cli::TopOrder::kName, false);
  EXPECT_NE(batch.find("tenants/tenant-number-11/queries/q11"),
            std::string::npos);
  EXPECT_EQ(batch.find("\u2026"), std::string::npos);
}

TEST(CliTableTest, SizesAndPercents) {
  EXPECT_EQ(cli::FormatSize(std::nullopt, false), "-");
  EXPECT_EQ(cli::FormatSize(kUnlimitedBytes, true), "max");
  EXPECT_EQ(cli::FormatSize(0, false), "0B");
  EXPECT_EQ(cli::FormatSize(1023, false), "1023B");
  EXPECT_EQ(cli::FormatSize(1024, false), "1.0K");
  EXPECT_EQ(cli::FormatSize(1536ull << 20, false), "1.5G");
  EXPECT_EQ(cli::FormatSize(uint64_t{1} << 62, false), "4.0E");
  EXPECT_EQ(cli::FormatSize(12345, true), "12345");
  EXPECT_EQ(cli::FormatPercent(1, 3), "33.3");
  EXPECT_EQ(cli::FormatPercent(1, kUnlimitedBytes), "-");
  EXPECT_EQ(cli::FormatPercent(std::nullopt, 3), "-");
}

}  // namespace
}  // namespace umemcg::testing

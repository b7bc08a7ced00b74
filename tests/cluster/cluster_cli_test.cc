// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// `umemcg cluster`: the table renderers, and the real binary against a
// real redis-server (set-max, tree, top --once, remove, bad input).

#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <thread>

#include "cluster.h"
#include "cluster_test_util.h"
#include "ops/ops_test_util.h"

namespace umemcg::cluster_test {
namespace {

// Runs a shell command; its stdout+stderr and exit status.
std::pair<std::string, int> Shell(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {"", -1};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

ClusterSnapshot Sample() {
  ClusterSnapshot s;
  ClusterGroupInfo t{"tenants", Pages(16384), Pages(4096), Pages(5000), 3, 1, 0,
                     {}};
  t.leases.push_back({"node-a", Pages(2048), std::chrono::milliseconds(8200)});
  t.leases.push_back({"node-b", Pages(2048), std::chrono::milliseconds(900)});
  s.groups.push_back(t);
  s.groups.push_back(
      {"tenants/a", kPageCounterMax, Pages(0), Pages(0), 2, 2, 1, {}});
  return s;
}

TEST(ClusterCliTest, TreeShowsGroupsAndLeases) {
  const std::string t = cli::RenderClusterTree(Sample(), false);
  EXPECT_NE(t.find("(cluster)"), std::string::npos) << t;
  EXPECT_NE(t.find("└─ tenants"), std::string::npos) << t;
  EXPECT_NE(t.find("· node-a"), std::string::npos) << t;
  EXPECT_NE(t.find("8.2s"), std::string::npos) << t;
  EXPECT_NE(t.find("64.0M"), std::string::npos) << t;  // 16384 pages
  EXPECT_NE(t.find("25.0"), std::string::npos) << t;   // %MAX
  EXPECT_NE(t.find("max"), std::string::npos) << t;    // unlimited a
  const std::string raw = cli::RenderClusterTree(Sample(), true);
  EXPECT_NE(raw.find("16777216"), std::string::npos) << raw;
}

// A three-level tree with leases on every level: the lease rows keep the
// guides of their group's ancestors (before the fix they started with
// blanks where "│" should run), and the output fits a narrow width.
TEST(ClusterCliTest, TreeLeaseRowsKeepTheGuides) {
  ClusterSnapshot s;
  auto group = [](const std::string& path, std::vector<std::string> nodes) {
    ClusterGroupInfo g{path, Pages(1000), Pages(10), Pages(10), 0, 0, 0, {}};
    for (const std::string& n : nodes) {
      g.leases.push_back({n, Pages(5), std::chrono::milliseconds(1000)});
    }
    return g;
  };
  s.groups.push_back(group("t", {"n0"}));
  s.groups.push_back(group("t/a", {"n1"}));
  s.groups.push_back(group("t/a/x", {"n2"}));
  s.groups.push_back(group("t/b", {"n3"}));
  const std::string out = cli::RenderClusterTree(s, true);
  std::vector<std::string> first;
  for (size_t at = 0; at < out.size();) {
    const size_t nl = out.find('\n', at);
    const std::string line = out.substr(at, nl - at);
    first.push_back(
        line.substr(0, line.find("  ", line.find_first_of("abnrtx(GROUP"))));
    at = nl + 1;
  }
  // The first column of every line (the tree), in order.
  const std::vector<std::string> want = {
      "GROUP",   "(cluster)",     "└─ t",       "   │  · n0",
      "   ├─ a", "   │  │  · n1", "   │  └─ x", "   │        · n2",
      "   └─ b", "         · n3"};
  ASSERT_EQ(first.size(), want.size()) << out;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(first[i].rfind(want[i], 0), 0u)
        << "line " << i << ": '" << first[i] << "' wants '" << want[i] << "'\n"
        << out;
  }
  // Fits COLUMNS: the first column is shortened, the numbers stay.
  ClusterSnapshot wide = s;
  wide.groups[2].leases[0].node = std::string(80, 'n');
  const std::string narrow = cli::RenderClusterTree(wide, true, 70);
  for (size_t at = 0; at < narrow.size();) {
    const size_t nl = narrow.find('\n', at);
    const std::string line = narrow.substr(at, nl - at);
    size_t chars = 0;
    for (char c : line) chars += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
    EXPECT_LE(chars, 70u) << narrow;
    at = nl + 1;
  }
  EXPECT_NE(narrow.find("…"), std::string::npos) << narrow;
  EXPECT_NE(narrow.find("4096000"), std::string::npos) << narrow;  // max
}

TEST(ClusterCliTest, SetMaxParsesLikeMemparseAndRefusesEmpty) {
  EXPECT_EQ(cli::ParseClusterMax("").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cli::ParseClusterMax("  ").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cli::ParseClusterMax("4K").value(), Pages(1));
  EXPECT_EQ(cli::ParseClusterMax("32M").value(), Pages(8192));
  EXPECT_EQ(cli::ParseClusterMax("1G").value(), Pages(262144));
  EXPECT_EQ(cli::ParseClusterMax("1T").value(), Pages(uint64_t{1} << 28));
  EXPECT_EQ(cli::ParseClusterMax("max").value(), kPageCounterMax);
  EXPECT_EQ(cli::ParseClusterMax("8192").value(), Pages(2));
  EXPECT_FALSE(cli::ParseClusterMax("12Q").ok());
}

TEST(ClusterCliTest, TopShowsDeltas) {
  ClusterSnapshot before = Sample();
  ClusterSnapshot now = Sample();
  now.groups[0].max_events_local = 5;  // +4 refusals
  now.groups[1].expired = 3;           // +2 expired
  const std::string t = cli::RenderClusterTop(before, now, false);
  EXPECT_NE(t.find("+REFUSED"), std::string::npos) << t;
  // tenants first (larger usage), 2 nodes, 4 new refusals.
  const size_t row = t.find("tenants ");
  ASSERT_NE(row, std::string::npos) << t;
  const std::string line = t.substr(row, t.find('\n', row) - row);
  EXPECT_NE(line.find(" 2 "), std::string::npos) << line;
  EXPECT_NE(line.find(" 4 "), std::string::npos) << line;
  EXPECT_LT(t.find("tenants "), t.find("tenants/a"));
}

TEST(ClusterCliTest, BinaryAgainstRealRedis) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis.ok()) << redis.status().ToString();
  const std::string tool = std::string(UMEMCG_CLI_PATH) +
                           " cluster --redis=" + redis.value()->url() + " ";
  auto [out, rc] = Shell(tool + "set-max tenants/a 32M");
  EXPECT_EQ(rc, 0) << out;
  std::tie(out, rc) = Shell(tool + "tree");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("└─ a"), std::string::npos) << out;
  EXPECT_NE(out.find("32.0M"), std::string::npos) << out;
  std::tie(out, rc) = Shell(tool + "top --once -d 0.05");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("tenants/a"), std::string::npos) << out;
  // An empty value is refused (it used to set the max to 0 B).
  std::tie(out, rc) = Shell(tool + "set-max tenants/a ''");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("empty"), std::string::npos) << out;
  std::tie(out, rc) = Shell(tool + "tree");
  EXPECT_NE(out.find("32.0M"), std::string::npos) << out;  // unchanged
  std::tie(out, rc) = Shell("COLUMNS=40 " + tool + "tree");
  EXPECT_EQ(rc, 0) << out;
  for (size_t at = 0; at < out.size();) {
    const size_t nl = out.find('\n', at);
    const std::string line = out.substr(at, nl - at);
    size_t chars = 0;
    for (char c : line) chars += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
    EXPECT_LE(chars, 40u) << out;
    at = nl + 1;
  }
  std::tie(out, rc) = Shell(tool + "set-max tenants/a junk");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("junk"), std::string::npos) << out;
  std::tie(out, rc) = Shell(tool + "remove tenants");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("child groups"), std::string::npos) << out;
  EXPECT_EQ(out.find("script:"), std::string::npos) << out;  // no Lua noise
  std::tie(out, rc) = Shell(tool + "remove tenants/a");
  EXPECT_EQ(rc, 0) << out;
  std::tie(out, rc) = Shell(std::string(UMEMCG_CLI_PATH) +
                            " cluster --redis=rediss://127.0.0.1:1 tree");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("TLS"), std::string::npos) << out;
}

TEST(ClusterCliTest, TopFitsRowsAndColumns) {
  ClusterSnapshot s;
  for (int i = 0; i < 6; ++i) {
    s.groups.push_back({"tenants/" + std::string(40, 'a' + i),
                        Pages(1000),
                        Pages(10 + i),
                        Pages(10),
                        0,
                        0,
                        0,
                        {}});
  }
  const std::string t = cli::RenderClusterTop(s, s, true, 4, 60);
  EXPECT_NE(t.find("… 3 more"), std::string::npos) << t;
  size_t lines = 0;
  for (size_t at = 0; at < t.size(); ++lines) {
    const size_t nl = t.find('\n', at);
    const std::string line = t.substr(at, nl - at);
    size_t chars = 0;
    for (char c : line) chars += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
    EXPECT_LE(chars, 60u) << t;
    at = nl + 1;
  }
  EXPECT_EQ(lines, 5u) << t;  // header + 3 groups + "… 3 more"
}

// A Redis restart while top runs: it shows that it is reconnecting and
// goes on (it used to exit 1).
TEST(ClusterCliTest, TopSurvivesARedisRestart) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis.ok()) << redis.status().ToString();
  const std::string tool = std::string(UMEMCG_CLI_PATH) +
                           " cluster --redis=" + redis.value()->url() + " ";
  ASSERT_EQ(Shell(tool + "set-max t 1M").second, 0);
  std::pair<std::string, int> result;
  std::thread top([&] { result = Shell(tool + "top -b -d 0.1 -n 30"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  redis.value()->Kill(SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_TRUE(redis.value()->Restart().ok());
  top.join();
  EXPECT_EQ(result.second, 0) << result.first;
  EXPECT_NE(result.first.find("reconnecting"), std::string::npos)
      << result.first;
}

TEST(ClusterCliTest, BatchTopStopsRightAwayOnSigint) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis.ok()) << redis.status().ToString();
  // A signal ends the wait for the next refresh (sleep_for would sleep on
  // for the rest of the minute).
  int status = 0;
  const std::optional<std::chrono::milliseconds> took =
      testing::TimeToExitAfterSignal(
          {UMEMCG_CLI_PATH, "cluster", "--redis=" + redis.value()->url(), "top",
           "-b", "-d", "60"},
          SIGINT, std::chrono::seconds(20), &status);
  ASSERT_TRUE(took.has_value()) << "no exit within 20 s of SIGINT";
  EXPECT_LT(took->count(), 5000);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace umemcg::cluster_test

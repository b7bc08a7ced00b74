// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Snapshots, the Prometheus text format and the /metrics endpoint, scraped
// over loopback by an in-process client (httplib), by curl, and by raw
// sockets sending malformed or slow requests.

#include "umemcg/metrics.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <map>

#include "ops_test_util.h"
#include "umemcg/umemcg.h"

namespace umemcg::testing {
namespace {

// "series value" lines of an exposition, keyed by series ("name{labels}").
std::map<std::string, std::string> ParseExposition(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    out[line.substr(0, sp)] = line.substr(sp + 1);
  }
  return out;
}

// A connected TCP socket to 127.0.0.1:port that gives up reading after
// kPatience.
int ConnectLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{static_cast<time_t>(kPatience.count()), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// Everything the peer sends until it closes (or kPatience passes: then
// `closed` is false).
std::string ReadUntilClosed(int fd, bool* closed = nullptr) {
  std::string s;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) {
    s.append(buf, static_cast<size_t>(n));
  }
  if (closed != nullptr) *closed = n == 0 || errno == ECONNRESET;
  return s;
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ControllerOptions options;
    options.batch = 1;
    options.cpu_source = CpuSource::kFake;
    options.nr_cpus = 2;
    options.charge_group_metadata = false;  // exact page counts
    ctrl_ = Controller::Create(options).value();
    a_ = ctrl_->CreateGroup(ctrl_->root(), "a").value();
    b_ = ctrl_->CreateGroup(*a_, "b").value();
    ASSERT_TRUE(b_->TryCharge(Pages(5)).ok());
    ASSERT_TRUE(a_->SetMax(Pages(1000)).ok());
    ASSERT_TRUE(b_->ModState(StatItem::kAnon, 5));
  }
  void TearDown() override {
    if (b_) b_->UnchargeDirect(Pages(5));
  }

  std::unique_ptr<MetricsServer> Serve(MetricsServerOptions options = {}) {
    auto s = ServeMetrics(*ctrl_, "127.0.0.1:0", options);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s.value()) : nullptr;
  }

  // Checks a scrape of this fixture's tree.
  void ExpectFixtureValues(const std::string& body) {
    const auto m = ParseExposition(body);
    EXPECT_EQ(m.at("umemcg_memory_current_bytes{group=\"a/b\"}"), "20480");
    EXPECT_EQ(m.at("umemcg_memory_current_bytes{group=\"a\"}"), "20480");
    EXPECT_EQ(m.at("umemcg_memory_max_bytes{group=\"a\"}"), "4096000");
    EXPECT_EQ(m.at("umemcg_memory_max_bytes{group=\"a/b\"}"), "+Inf");
    EXPECT_EQ(m.at("umemcg_memory_peak_bytes{group=\"a/b\"}"), "20480");
    EXPECT_EQ(m.at("umemcg_memory_events_total{group=\"a\",event=\"max\"}"),
              "0");
    EXPECT_EQ(m.at("umemcg_memory_stat_bytes{group=\"a/b\",item=\"anon\"}"),
              "20480");
    EXPECT_EQ(m.count("umemcg_memory_current_bytes{group=\"/\"}"), 0u);
    EXPECT_EQ(m.count("umemcg_memory_stat_bytes{group=\"/\",item=\"anon\"}"),
              1u);
    // Event items are counters, never bytes.
    EXPECT_EQ(m.count("umemcg_memory_stat_events_total{group=\"a/b\","
                      "item=\"pgfault\"}"),
              1u);
    EXPECT_EQ(m.count("umemcg_memory_stat_bytes{group=\"a/b\","
                      "item=\"pgfault\"}"),
              0u);
    EXPECT_EQ(m.at("umemcg_controller_batch_pages"), "1");
    EXPECT_EQ(m.at("umemcg_controller_cpus"), "2");
    EXPECT_EQ(m.count("umemcg_controller_info{batch=\"1\",cpus=\"2\","
                      "cpu_source=\"fake\",stock_slots=\"7\","
                      "obj_stock_slots=\"5\",stats_flush=\"per_group_"
                      "subtree\"}"),
              1u)
        << body;
  }

  std::unique_ptr<Controller> ctrl_;
  GroupRef a_, b_;
};

TEST(MetricsParseTest, FilesParse) {
  EXPECT_EQ(ParseBytesFile("max\n"), kUnlimitedBytes);
  EXPECT_EQ(ParseBytesFile("4096\n"), 4096u);
  EXPECT_EQ(ParseBytesFile(" 7 "), 7u);
  EXPECT_EQ(ParseBytesFile("12a\n"), std::nullopt);
  EXPECT_EQ(ParseBytesFile(""), std::nullopt);
  EXPECT_EQ(ParseBytesFile("-1"), std::nullopt);
  const auto kv = ParseKeyedFile("low 0\nhigh 3\nbad\n x 1\nneg -1\nmax 9");
  ASSERT_EQ(kv.size(), 4u);
  EXPECT_EQ(kv[0], (std::pair<std::string, uint64_t>{"low", 0}));
  EXPECT_EQ(kv[1], (std::pair<std::string, uint64_t>{"high", 3}));
  EXPECT_EQ(kv[2], (std::pair<std::string, uint64_t>{"x", 1}));
  EXPECT_EQ(kv[3], (std::pair<std::string, uint64_t>{"max", 9}));
}

TEST(MetricsParseTest, GroupPathsCannotLeaveTheTree) {
  EXPECT_TRUE(ValidateGroupPath("").ok());
  EXPECT_TRUE(ValidateGroupPath("a").ok());
  EXPECT_TRUE(ValidateGroupPath("a/b.c/..d").ok());
  for (const char* bad : {"/a", "/", "..", ".", "a/..", "../a", "a/../b",
                          "a//b", "a/", "a/./b"}) {
    EXPECT_EQ(ValidateGroupPath(bad).code(), StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(ValidateGroupPath(std::string_view("a\0b", 3)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(ValidateFileName("memory.max").ok());
  for (const char* bad : {"", ".", "..", "a/b", "/etc"}) {
    EXPECT_FALSE(ValidateFileName(bad).ok()) << bad;
  }
}

TEST(MetricsParseTest, ForDirectorySaysWhyItCannotOpen) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  WriteText(dir.path() + "/file", "1\n");
  EXPECT_TRUE(TreeReader::ForDirectory(dir.path()).ok());
  // A regular file (ENOTDIR) is an invalid argument, not a failed
  // precondition.
  EXPECT_EQ(TreeReader::ForDirectory(dir.path() + "/file").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TreeReader::ForDirectory(dir.path() + "/file/x").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TreeReader::ForDirectory(dir.path() + "/missing").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(TreeReader::ForDirectory("").status().code(),
            StatusCode::kInvalidArgument);
}

TEST(MetricsFormatTest, TextExpositionGolden) {
  MetricsSnapshot s;
  GroupSample root;
  root.stat = {{"anon", 8192}, {"pgfault", 3}, {"workingset_refault_anon", 1}};
  GroupSample a;
  a.path = "a\"q\\";
  a.depth = 1;
  a.current = 4096;
  a.max = kUnlimitedBytes;
  a.high = 1 << 20;
  a.events = {{"low", 0}, {"max", 2}};
  s.groups = {root, a};
  ControllerInfo info;
  info.batch = 64;
  info.nr_cpus = 2;
  info.cpu_source = CpuSource::kRseq;
  info.stock_slots = 7;
  info.obj_stock_slots = 5;
  s.controller = info;
  EXPECT_EQ(
      FormatPrometheus(s),
      "# HELP umemcg_memory_current_bytes Memory charged to the group and its "
      "descendants (memory.current).\n"
      "# TYPE umemcg_memory_current_bytes gauge\n"
      "umemcg_memory_current_bytes{group=\"a\\\"q\\\\\"} 4096\n"
      "# HELP umemcg_memory_high_bytes Throttling limit (memory.high); +Inf "
      "when unlimited.\n"
      "# TYPE umemcg_memory_high_bytes gauge\n"
      "umemcg_memory_high_bytes{group=\"a\\\"q\\\\\"} 1048576\n"
      "# HELP umemcg_memory_max_bytes Hard limit (memory.max); +Inf when "
      "unlimited.\n"
      "# TYPE umemcg_memory_max_bytes gauge\n"
      "umemcg_memory_max_bytes{group=\"a\\\"q\\\\\"} +Inf\n"
      "# HELP umemcg_memory_events_total Memory events of the group and its "
      "descendants (memory.events).\n"
      "# TYPE umemcg_memory_events_total counter\n"
      "umemcg_memory_events_total{group=\"a\\\"q\\\\\",event=\"low\"} 0\n"
      "umemcg_memory_events_total{group=\"a\\\"q\\\\\",event=\"max\"} 2\n"
      "# HELP umemcg_memory_stat_bytes memory.stat size items of the group's "
      "subtree, in bytes.\n"
      "# TYPE umemcg_memory_stat_bytes gauge\n"
      "umemcg_memory_stat_bytes{group=\"/\",item=\"anon\"} 8192\n"
      "# HELP umemcg_memory_stat_events_total memory.stat event items of the "
      "group's subtree (pgfault, workingset_*, ...).\n"
      "# TYPE umemcg_memory_stat_events_total counter\n"
      "umemcg_memory_stat_events_total{group=\"/\",item=\"pgfault\"} 3\n"
      "umemcg_memory_stat_events_total{group=\"/\",item=\"workingset_"
      "refault_anon\"} 1\n"
      "# HELP umemcg_controller_info The controller's settings as labels "
      "(value 1).\n"
      "# TYPE umemcg_controller_info gauge\n"
      "umemcg_controller_info{batch=\"64\",cpus=\"2\",cpu_source=\"rseq\","
      "stock_slots=\"7\",obj_stock_slots=\"5\",stats_flush=\"per_group_"
      "subtree\"} 1\n"
      "# HELP umemcg_controller_batch_pages Pages charged per counter walk "
      "and cached per CPU per group.\n"
      "# TYPE umemcg_controller_batch_pages gauge\n"
      "umemcg_controller_batch_pages 64\n"
      "# HELP umemcg_controller_cpus Per-CPU shards (stocks) of the "
      "controller.\n"
      "# TYPE umemcg_controller_cpus gauge\n"
      "umemcg_controller_cpus 2\n");
}

TEST_F(MetricsTest, SnapshotOfAController) {
  const MetricsSnapshot s = CollectMetrics(*ctrl_);
  ASSERT_EQ(s.groups.size(), 3u);
  EXPECT_EQ(s.groups[0].path, "");
  EXPECT_EQ(s.groups[1].path, "a");
  EXPECT_EQ(s.groups[2].path, "a/b");
  EXPECT_EQ(s.groups[2].depth, 2);
  EXPECT_FALSE(s.groups[0].current.has_value());  // the root has none
  EXPECT_EQ(s.groups[2].current, 5 * kPageSize);
  EXPECT_EQ(s.groups[1].max, 1000 * kPageSize);
  EXPECT_EQ(s.groups[2].max, kUnlimitedBytes);
  ASSERT_TRUE(s.controller.has_value());
  EXPECT_EQ(s.controller->batch, 1);
  ExpectFixtureValues(FormatPrometheus(s));
  // A subtree, and a missing or invalid top.
  std::unique_ptr<TreeReader> r = TreeReader::ForController(*ctrl_);
  EXPECT_EQ(CollectMetrics(*r, "a/b").value().groups.size(), 1u);
  EXPECT_EQ(CollectMetrics(*r, "nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(CollectMetrics(*r, "a/..").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r->Read("a/../a", "memory.max").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r->Read("a", "../memory.max").status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(MetricsTest, ServesMetricsToAnInProcessClient) {
  auto server = Serve();
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->port(), 0);
  EXPECT_EQ(server->address(), "127.0.0.1:" + std::to_string(server->port()));
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(kPatience);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"),
            "text/plain; version=0.0.4; charset=utf-8");
  ExpectFixtureValues(res->body);
  EXPECT_EQ(client.Get("/")->status, 404);
  EXPECT_EQ(client.Get("/metrics/x")->status, 404);
  auto post = client.Post("/metrics", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->get_header_value("Allow"), "GET");
  EXPECT_EQ(client.Delete("/metrics")->status, 405);
  EXPECT_GE(server->requests(), 5u);
}

TEST_F(MetricsTest, CurlScrapesOverLoopback) {
  if (Shell("curl --version").status != 0) {
    GTEST_SKIP() << "curl is not installed (make test installs it)";
  }
  auto server = Serve();
  ASSERT_NE(server, nullptr);
  const std::string url = "http://" + server->address();
  TempDir dir;
  const std::string body = dir.path() + "/body";
  Cmd c = Shell("curl -sS --max-time 120 -o " + Quote(body) +
                " -w '%{http_code} %{content_type}' " + url + "/metrics");
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(c.out, "200 text/plain; version=0.0.4; charset=utf-8");
  ExpectFixtureValues(ReadText(body));
  c = Shell("curl -s --max-time 120 -o /dev/null -w '%{http_code}' " + url +
            "/nope");
  EXPECT_EQ(c.out, "404");
  c = Shell("curl -s --max-time 120 -i -X POST -d x " + url + "/metrics");
  EXPECT_NE(c.out.find("HTTP/1.1 405"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("Allow: GET"), std::string::npos) << c.out;
  c = Shell("curl -s --max-time 120 -I -o /dev/null -w '%{http_code}' " + url +
            "/metrics");
  EXPECT_EQ(c.out, "405");
}

TEST_F(MetricsTest, MalformedRequestsGet400AndTheServerGoesOn) {
  MetricsServerOptions options;
  options.read_timeout = std::chrono::milliseconds(300);  // closes sooner
  auto server = Serve(options);
  ASSERT_NE(server, nullptr);
  for (const std::string& junk :
       {std::string("NOT A REQUEST\r\n\r\n"), std::string("GET\r\n\r\n"),
        "GET /metrics HTTP/1.1\r\n" + std::string(20000, 'x') + "\r\n\r\n",
        std::string("\x01\x02\x03\r\n\r\n", 7)}) {
    const int fd = ConnectLoopback(server->port());
    ASSERT_GE(fd, 0);
    (void)::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
    const std::string reply = ReadUntilClosed(fd);
    ::close(fd);
    EXPECT_EQ(reply.substr(0, 12), "HTTP/1.1 400") << reply;
  }
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(kPatience);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST_F(MetricsTest, SlowClientsAreCutOffAndDoNotStallOthers) {
  MetricsServerOptions options;
  options.threads = 1;  // the slow clients hold the only worker in turn
  options.max_pending = 2;
  options.read_timeout = std::chrono::milliseconds(300);
  auto server = Serve(options);
  ASSERT_NE(server, nullptr);
  // More stalled connections than threads + queue: the rest are served by
  // the accepting thread, each for at most the read timeout.
  std::vector<int> slow;
  for (int i = 0; i < 5; ++i) {
    const int fd = ConnectLoopback(server->port());
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::send(fd, "GET /metr", 9, MSG_NOSIGNAL), 9);
    slow.push_back(fd);
  }
  httplib::Client client("127.0.0.1", server->port());
  client.set_connection_timeout(kPatience);
  client.set_read_timeout(kPatience);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  // Each stalled connection is closed by the server (EOF, never a hang:
  // the socket itself gives up only after kPatience).
  for (const int fd : slow) {
    bool closed = false;
    (void)ReadUntilClosed(fd, &closed);
    EXPECT_TRUE(closed) << "a stalled connection was never closed";
    ::close(fd);
  }
}

TEST_F(MetricsTest, TricklingClientsAreCutOffAtTheRequestDeadline) {
  MetricsServerOptions options;
  options.threads = 1;
  options.read_timeout = std::chrono::milliseconds(5000);
  options.request_timeout = std::chrono::milliseconds(500);
  auto server = Serve(options);
  ASSERT_NE(server, nullptr);
  const int fd = ConnectLoopback(server->port());
  ASSERT_GE(fd, 0);
  const std::string start = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
  ASSERT_EQ(::send(fd, start.data(), start.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(start.size()));
  // One header line at a time, each well within read_timeout, until the
  // server gives up on the request (pacing only: the deadline decides).
  bool closed = false;
  const auto give_up = std::chrono::steady_clock::now() + kPatience;
  while (!closed && std::chrono::steady_clock::now() < give_up) {
    if (::send(fd, "X-Slow: 1\r\n", 11, MSG_NOSIGNAL) < 0) {
      closed = true;
      break;
    }
    char c;
    const ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
    closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::close(fd);
  EXPECT_TRUE(closed) << "a trickling client kept its connection";
  // The only worker is free again.
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(kPatience);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
}

TEST_F(MetricsTest, AddressesDefaultToLoopback) {
  for (const char* loopback : {":0", "0"}) {
    auto s = ServeMetrics(*ctrl_, loopback);
    ASSERT_TRUE(s.ok()) << loopback << ": " << s.status().ToString();
    EXPECT_EQ(s.value()->address().substr(0, 10), "127.0.0.1:");
  }
  // IPv6 loopback, where the machine has it.
  auto v6 = ServeMetrics(*ctrl_, "[::1]:0");
  if (v6.ok()) {
    EXPECT_EQ(v6.value()->address(),
              "[::1]:" + std::to_string(v6.value()->port()));
  } else {
    EXPECT_EQ(v6.status().code(), StatusCode::kFailedPrecondition);
  }
  auto any = ServeMetrics(*ctrl_, "0.0.0.0:0");  // only when asked for
  ASSERT_TRUE(any.ok()) << any.status().ToString();
  EXPECT_EQ(any.value()->address().substr(0, 8), "0.0.0.0:");
  for (const char* bad : {"127.0.0.1:99999", "host:", "[::1", "abc", "",
                          "1.2.3.4:-1", "[::1]x"}) {
    EXPECT_EQ(ServeMetrics(*ctrl_, bad).status().code(),
              StatusCode::kInvalidArgument)
        << bad;
  }
  MetricsServerOptions zero_threads;
  zero_threads.threads = 0;
  EXPECT_EQ(ServeMetrics(*ctrl_, ":0", zero_threads).status().code(),
            StatusCode::kInvalidArgument);
  // A port in use: EADDRINUSE, with the address in the message.
  auto first = Serve();
  ASSERT_NE(first, nullptr);
  const Status in_use = ServeMetrics(*ctrl_, first->address()).status();
  EXPECT_EQ(in_use.code(), StatusCode::kAddressInUse);
  EXPECT_EQ(ErrnoOf(in_use.code()), EADDRINUSE);
  EXPECT_EQ(std::string(in_use.message()),
            "cannot bind " + first->address() + ": Address already in use");
}

TEST_F(MetricsTest, StopsWhenTheControllerIsDestroyed) {
  auto server = Serve();
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  b_->UnchargeDirect(Pages(5));
  a_.reset();
  b_.reset();
  ctrl_.reset();
  EXPECT_EQ(ConnectLoopback(port), -1);  // nothing listens any more
  server->Stop();                        // harmless afterwards
  server.reset();
}

// The exposition as Prometheus's own linter sees it: `promtool check
// metrics` on a real scrape (over loopback, of a tree with every kind of
// family: limits, events, memory.stat sizes and event items, a custom
// event item, cgroup files), with no warning at all; and every family
// named ..._total is typed counter, every counter named ..._total.
TEST(MetricsPromtoolTest, ARealScrapePassesPromtoolWithNoWarning) {
  if (Shell("promtool --version").status != 0) {
    GTEST_SKIP() << "promtool is not installed (Debian package prometheus; "
                    "make test installs it)";
  }
  ControllerOptions options;
  options.cpu_source = CpuSource::kFake;
  options.nr_cpus = 2;
  options.custom_stat_items = {{"requests_served", StatUnit::kEvents},
                               {"cache_bytes", StatUnit::kBytes}};
  auto ctrl = Controller::Create(options).value();
  GroupRef a = ctrl->CreateGroup(ctrl->root(), "a").value();
  GroupRef b = ctrl->CreateGroup(*a, "b").value();
  ASSERT_TRUE(a->SetMax(Pages(100)).ok());
  ASSERT_TRUE(b->TryCharge(Pages(5), kChargeDefault, StatItem::kAnon).ok());
  ASSERT_FALSE(b->TryCharge(Pages(500), ChargeFlags::kNone).ok());  // events
  ASSERT_TRUE(b->CountEvent(StatItem::kPgfault, 7));
  const auto custom = static_cast<StatItem>(kNumBuiltinStatItems);
  ASSERT_TRUE(b->CountEvent(custom, 2));
  ctrl->root().FlushStats();  // memory.stat is lazy; show the exact values
  auto server = ServeMetrics(*ctrl, "127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  httplib::Client client("http://" + server.value()->address());
  client.set_read_timeout(kPatience);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  const std::string& body = res->body;
  b->Uncharge(Pages(5), StatItem::kAnon);

  TempDir dir;
  const std::string file = dir.path() + "/scrape.prom";
  WriteText(file, body);
  // promtool prints lint problems and exits non-zero on any.
  Cmd c = Shell("promtool check metrics < " + Quote(file) + " 2>&1");
  EXPECT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(c.out, "") << c.out;

  // TYPE lines: _total <=> counter.
  std::istringstream in(body);
  std::string line;
  int counters = 0;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    std::istringstream words(line.substr(7));
    std::string name, type;
    words >> name >> type;
    const bool total =
        name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0;
    EXPECT_EQ(total, type == "counter") << line;
    counters += type == "counter" ? 1 : 0;
  }
  EXPECT_GE(counters, 3);
  const auto m = ParseExposition(body);
  EXPECT_EQ(m.at("umemcg_memory_stat_events_total{group=\"a/b\","
                 "item=\"requests_served\"}"),
            "2");
  EXPECT_EQ(m.count("umemcg_memory_stat_bytes{group=\"a/b\","
                    "item=\"cache_bytes\"}"),
            1u);
  EXPECT_EQ(m.at("umemcg_memory_stat_events_total{group=\"a/b\","
                 "item=\"pgfault\"}"),
            "7");

  // The cluster families (a binding needs Redis: a snapshot with the
  // file's items, in the file's order, stands in for it).
  MetricsSnapshot s;
  GroupSample g;
  g.path = "g";
  g.cluster_group = "tenants/a";
  g.cluster_max = 8 << 20;
  g.cluster_current = 1 << 20;
  g.cluster_stat = {{"lease_bytes", 262144},  {"usage_bytes", 4096},
                    {"chunk_bytes", 262144},  {"room_bytes", 0},
                    {"expires_in_ms", 29500}, {"expired", 0},
                    {"connected", 1},         {"grants", 3},
                    {"refusals", 0},          {"returns", 1},
                    {"renewals", 2},          {"unavailable", 0},
                    {"lease_lost", 0},        {"forced", 0},
                    {"redis_commands", 9}};
  g.cluster_events = {{"max", 0}};
  s.groups = {g};
  const std::string cluster = FormatPrometheus(s);
  WriteText(file, cluster);
  c = Shell("promtool check metrics < " + Quote(file) + " 2>&1");
  EXPECT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(c.out, "") << c.out;
  const auto cm = ParseExposition(cluster);
  EXPECT_EQ(
      cm.at("umemcg_cluster_stat_bytes{group=\"g\",item=\"lease_bytes\"}"),
      "262144");
  EXPECT_EQ(
      cm.at("umemcg_cluster_stat_seconds{group=\"g\",item=\"expires_in\"}"),
      "29.500");
  EXPECT_EQ(cm.at("umemcg_cluster_stat_flag{group=\"g\",item=\"connected\"}"),
            "1");
  EXPECT_EQ(cm.at("umemcg_cluster_stat_events_total{group=\"g\","
                  "item=\"redis_commands\"}"),
            "9");
  EXPECT_EQ(cm.count("umemcg_cluster_stat_bytes{group=\"g\",item=\"grants\"}"),
            0u);
  EXPECT_NE(cluster.find("# TYPE umemcg_cluster_stat_events_total counter\n"),
            std::string::npos);
}

}  // namespace
}  // namespace umemcg::testing

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Memory pressure (kernel: kernel/sched/psi.c): stalls recorded in
// reclaim, memory.high sleeps, OOM handling; some and full; the averages
// and totals against a reference computation of the kernel's formulas;
// memory.pressure's format; triggers.

#include "psi/psi.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "test_util.h"
#include "umemcg/files.h"
#include "umemcg/pressure.h"

namespace umemcg {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using testing::TestController;

constexpr int64_t kP = 2'001'000'000;  // PSI_FREQ with HZ = 1000, in ns

// ---- Reference: the kernel's arithmetic, written out independently ----

struct Interval {
  int64_t start, end;  // ns since the group's creation
};

uint64_t RefLoad(uint64_t load, uint64_t exp, uint64_t active) {
  uint64_t r = load * exp + active * (2048 - exp);
  if (active >= load) r += 2047;
  return r / 2048;
}

uint64_t RefPow(uint64_t x, uint64_t n) {  // fixed_power_int, 11 bits
  uint64_t r = 2048;
  while (n != 0) {
    if (n & 1) r = (r * x + 1024) >> 11;
    n >>= 1;
    if (n != 0) x = (x * x + 1024) >> 11;
  }
  return r;
}

struct RefResult {
  uint64_t avg[3];
  uint64_t total_ns;
};

// The averages a kernel worker running at every period boundary (and
// stopping while idle) computes for a task stalled during `stalls` (sorted,
// disjoint), read at `now`.
RefResult Reference(const std::vector<Interval>& stalls, int64_t now) {
  auto stalled_until = [&](int64_t t) {
    int64_t sum = 0;
    for (const Interval& i : stalls) {
      sum += std::max<int64_t>(0, std::min(i.end, t) - i.start);
    }
    return static_cast<uint64_t>(sum);
  };
  auto stalled_at = [&](int64_t t) {
    for (const Interval& i : stalls) {
      if (i.start < t && t <= i.end) return true;
    }
    return false;
  };
  const uint64_t exps[3] = {1677, 1981, 2034};
  RefResult r{{0, 0, 0}, 0};
  uint64_t avg_total = 0;
  int64_t next = kP;
  while (now >= next) {
    const uint64_t acc = stalled_until(next);
    if (!stalled_at(next) && acc == avg_total) {
      // Idle: the worker stops; the next stall (or the read) finds the
      // missed periods and decays them at once.
      int64_t wake = now;
      for (const Interval& i : stalls) {
        if (i.start >= next) {
          wake = std::min(wake, i.start);
          break;
        }
      }
      const auto missed = static_cast<uint64_t>((wake - next) / kP);
      for (int w = 0; w < 3; ++w) {
        if (missed != 0)
          r.avg[w] = RefLoad(r.avg[w], RefPow(exps[w], missed), 0);
        r.avg[w] = RefLoad(r.avg[w], exps[w], 0);
      }
      next += static_cast<int64_t>(missed + 1) * kP;
      continue;
    }
    const uint64_t sample = std::min<uint64_t>(acc - avg_total, kP);
    avg_total += sample;
    const uint64_t pct = sample * 100 / kP * 2048;
    for (int w = 0; w < 3; ++w) r.avg[w] = RefLoad(r.avg[w], exps[w], pct);
    next += kP;
  }
  r.total_ns = stalled_until(now);
  return r;
}

uint64_t Centi(uint64_t avg) {
  return (avg >> 11) * 100 + (((avg & 2047) * 100) >> 11);
}

void ExpectNear1Pct(uint64_t got, uint64_t want, const char* what) {
  const double tol = std::max(1.0, 0.01 * static_cast<double>(want));
  EXPECT_NEAR(static_cast<double>(got), static_cast<double>(want), tol) << what;
}

void ExpectMatches(const PressureLine& line, const RefResult& ref) {
  ExpectNear1Pct(line.avg10, Centi(ref.avg[0]), "avg10");
  ExpectNear1Pct(line.avg60, Centi(ref.avg[1]), "avg60");
  ExpectNear1Pct(line.avg300, Centi(ref.avg[2]), "avg300");
  EXPECT_EQ(line.total_us, ref.total_ns / 1000);
}

// ---- A reclaimer that stalls for a known time ----

// Holds charged pages; each Reclaim sleeps `stall` on the controller's
// (manual) clock first, or waits for Release() when `gate` is set.
class SleepyReclaimer : public Reclaimer {
 public:
  SleepyReclaimer(Group* g, ManualClock* clock) : g_(g), clock_(clock) {}
  bool Fill(uint64_t n) {
    if (!g_->TryCharge(Pages(n), ChargeFlags::kNone).ok()) return false;
    held_ += n;
    return true;
  }
  Pages Reclaimable() override { return Pages(held_.load()); }
  Pages Reclaim(Pages target) override {
    if (gated_) {
      std::unique_lock<std::mutex> lock(mu_);
      in_ = true;
      cv_.notify_all();
      cv_.wait(lock, [this] { return open_; });
      open_ = false;
      in_ = false;
    } else {
      clock_->SleepFor(stall_);
    }
    const uint64_t n = std::min<uint64_t>(held_, target.raw());
    held_ -= n;
    g_->UnchargeDirect(Pages(n));
    return Pages(n);
  }
  void set_stall(nanoseconds d) { stall_ = d; }
  void set_gated(bool g) { gated_ = g; }
  void WaitInside() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return in_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  Group* g_;
  ManualClock* clock_;
  std::atomic<uint64_t> held_{0};
  nanoseconds stall_{0};
  bool gated_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  bool in_ = false;
  bool open_ = false;
};

// A group at its max whose every 1-page charge reclaims once (the
// reclaimer refilled to the limit after each).
struct Stalling {
  explicit Stalling(TestController& t, const std::string& path = "g")
      : g(t.Make(path)), r(g.get(), &t.clock) {
    // A read makes the group's pressure state before its first charge, so
    // every charger from here on is known (psi.h: made on first need; a
    // non-blocking charge before then holds `full` off for two periods).
    (void)ReadPressure(*g);
    EXPECT_TRUE(g->SetMax(Pages(100)).ok());
    EXPECT_TRUE(g->AddReclaimer(&r).ok());
    EXPECT_TRUE(r.Fill(100));
  }
  ~Stalling() { (void)g->RemoveReclaimer(&r); }
  // One charge that stalls `d` in reclaim; then back to the limit.
  void Stall(nanoseconds d) {
    r.set_stall(d);
    ASSERT_TRUE(g->TryCharge(Pages(1)).ok());
    g->UnchargeDirect(Pages(1));
    const uint64_t room = 100 - g->usage().raw();
    ASSERT_TRUE(r.Fill(room));
  }
  GroupRef g;
  SleepyReclaimer r;
};

ControllerOptions Batch1() {
  ControllerOptions o;
  o.batch = 1;
  return o;
}

// ---- Arithmetic ----

TEST(PsiArithmeticTest, CalcLoadMatchesTheKernelsRounding) {
  using internal::PsiCalcLoad;
  // Rising: rounded up; falling: truncated.
  EXPECT_EQ(PsiCalcLoad(0, 1677, 100 * 2048),
            (100 * 2048 * (2048 - 1677) + 2047) / 2048);
  EXPECT_EQ(PsiCalcLoad(2048, 1677, 0), 2048 * 1677 / 2048);
  EXPECT_EQ(internal::PsiCalcLoadN(1000, 1677, 0, 1),
            PsiCalcLoad(1000, 1677, 0));
  EXPECT_EQ(internal::PsiCalcLoadN(1000, 1677, 0, 0), 1000u);
  EXPECT_EQ(internal::PsiCentiPercent(100 * 2048), 10000u);
  EXPECT_EQ(internal::PsiCentiPercent(2048 + 1024), 150u);
}

TEST(PsiArithmeticTest, SteadyStallConvergesToItsShare) {
  // 25% of every period stalled for 1000 periods: every average -> 25.
  uint64_t avg[3] = {0, 0, 0};
  for (int i = 0; i < 1000; ++i) {
    internal::PsiCalcAvgs(avg, 0, kP / 4 + 1, kP);
  }
  for (uint64_t a : avg) EXPECT_NEAR(internal::PsiCentiPercent(a), 2500, 25);
}

// ---- Recording ----

TEST(PsiTest, NewGroupReadsZeroInTheKernelFormat) {
  TestController t;
  GroupRef g = t.Make("g");
  EXPECT_EQ(g->ReadFile("memory.pressure").value(),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
            "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
  EXPECT_TRUE(t.ctrl->root().ReadFile("memory.pressure").ok());
}

// Reading memory.pressure (a scrape reads it for every group) makes no
// state: a group that never stalled reads zeros and stays as small as it
// was. A stall then makes it.
TEST(PsiTest, ReadingTheFileMakesNoState) {
  TestController t;
  GroupRef g = t.Make("g");
  GroupRef c = t.Make("g/c");
  EXPECT_EQ(c->ReadFile("memory.pressure").value(),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
            "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
  EXPECT_TRUE(g->ReadFile("memory.pressure").ok());
  EXPECT_EQ(internal::Psi::Of(c.get()), nullptr);
  EXPECT_EQ(internal::Psi::Of(g.get()), nullptr);
  {
    MemoryStallScope stall(*c);
    t.clock.Advance(std::chrono::milliseconds(10));
  }
  EXPECT_NE(internal::Psi::Of(c.get()), nullptr);
  EXPECT_NE(internal::Psi::Of(g.get()), nullptr);
  EXPECT_NE(c->ReadFile("memory.pressure")
                .value()
                .find("some avg10=0.00 "
                      "avg60=0.00 avg300="
                      "0.00 total=10000\n"),
            std::string::npos);
}

TEST(PsiTest, ReclaimStallMatchesTheKernelsArithmetic) {
  TestController t(Batch1());
  Stalling s(t);
  // A pattern of stalls of known lengths between idle gaps.
  std::vector<Interval> stalls;
  int64_t now = 0;
  const std::pair<int64_t, int64_t> pattern[] = {
      {300'000'000, 700'123'456},    {1'000'000, 1'500'000'000},
      {2'500'000'000, 250'000'000},  {10'000'000, 3'333'333'333},
      {40'000'000'000, 900'000'000}, {7'000'000, 123'456'789}};
  for (const auto& [gap, stall] : pattern) {
    t.clock.Advance(nanoseconds(gap));
    now += gap;
    s.Stall(nanoseconds(stall));
    stalls.push_back({now, now + stall});
    now += stall;
    // Read midway: reads must not change what the kernel would compute.
    const PressureStats mid = ReadPressure(*s.g);
    const RefResult ref = Reference(stalls, now);
    ExpectMatches(mid.some, ref);
    ExpectMatches(mid.full, ref);  // one charger: full == some
  }
  for (int64_t later : {int64_t{1'000'000'000}, int64_t{30'000'000'000}}) {
    t.clock.Advance(nanoseconds(later));
    now += later;
    const PressureStats p = ReadPressure(*s.g);
    const RefResult ref = Reference(stalls, now);
    ExpectMatches(p.some, ref);
    ExpectMatches(p.full, ref);
  }
}

TEST(PsiTest, AveragesAreExactForASteadyPattern) {
  TestController t(Batch1());
  Stalling s(t);
  std::vector<Interval> stalls;
  int64_t now = 0;
  // 40% stalled, 600 ms per 1.5 s, for 400 s: the 300 s average is near.
  for (int i = 0; i < 267; ++i) {
    t.clock.Advance(nanoseconds(900'000'000));
    now += 900'000'000;
    s.Stall(nanoseconds(600'000'000));
    stalls.push_back({now, now + 600'000'000});
    now += 600'000'000;
  }
  const PressureStats p = ReadPressure(*s.g);
  const RefResult ref = Reference(stalls, now);
  ExpectMatches(p.some, ref);
  EXPECT_NEAR(p.some.avg10, 4000, 250);
  EXPECT_NEAR(p.some.avg60, 4000, 250);
  // The 300 s average is still rising: 40% x (1 - e^(-t/300 s)).
  const double rising =
      4000 * (1 - std::exp(-static_cast<double>(now) / 300e9));
  EXPECT_NEAR(static_cast<double>(p.some.avg300), rising, 0.02 * rising);
  EXPECT_EQ(p.some.total_us, 267u * 600'000);
}

TEST(PsiTest, StallCountsInEveryAncestor) {
  TestController t(Batch1());
  GroupRef parent = t.Make("p");
  Stalling s(t, "p/c");
  s.Stall(milliseconds(250));
  EXPECT_EQ(ReadPressure(*s.g).some.total_us, 250'000u);
  EXPECT_EQ(ReadPressure(*parent).some.total_us, 250'000u);
  EXPECT_EQ(ReadPressure(t.ctrl->root()).some.total_us, 250'000u);
  // A sibling is not stalled.
  GroupRef other = t.Make("p/d");
  EXPECT_EQ(ReadPressure(*other).some.total_us, 0u);
}

TEST(PsiTest, HighThrottleSleepIsAStall) {
  TestController t({.batch = 64});
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetHigh(testing::MiB(100)).ok());
  ASSERT_TRUE(g->TryCharge(testing::MiB(110), ChargeFlags::kNone).ok());
  ASSERT_TRUE(g->TryCharge(Pages(128)).ok());  // throttled
  const auto slept = t.clock.slept();
  ASSERT_GT(slept.count(), 0);
  EXPECT_EQ(ReadPressure(*g).some.total_us,
            static_cast<uint64_t>(slept.count() / 1000));
  g->UnchargeDirect(testing::MiB(110) + Pages(128));
}

TEST(PsiTest, OomHandlingIsAStall) {
  TestController t(Batch1());
  GroupRef g = t.Make("g");
  ASSERT_TRUE(g->SetMax(Pages(10)).ok());
  ASSERT_TRUE(g->TryCharge(Pages(10), ChargeFlags::kNone).ok());
  g->SetOomHandler([&](const OomContext&) {
    t.clock.Advance(milliseconds(70));
    g->UnchargeDirect(Pages(5));
    OomOutcome o;
    o.progress = true;
    return o;
  });
  ASSERT_TRUE(g->TryCharge(Pages(1)).ok());
  EXPECT_EQ(ReadPressure(*g).some.total_us, 70'000u);
  g->UnchargeDirect(Pages(6));
}

TEST(PsiTest, NoChargeNoStall) {
  // memory.reclaim and memory.max writes stall no charger (the kernel
  // counts such a writer in its own cgroup; here nobody is charging).
  TestController t(Batch1());
  Stalling s(t);
  s.r.set_stall(milliseconds(100));
  ASSERT_TRUE(s.g->WriteFile("memory.reclaim", "40960").ok());
  EXPECT_EQ(ReadPressure(*s.g).some.total_us, 0u);
}

TEST(PsiTest, FullNeedsEveryChargerStalled) {
  TestController t(Batch1());
  Stalling s(t);
  s.r.set_gated(true);
  // B charges (slow path: batch 1) and is never stalled.
  ASSERT_TRUE(s.g->SetMax(Pages(101)).ok());
  ASSERT_TRUE(s.g->TryCharge(Pages(1), ChargeFlags::kNone).ok());
  s.g->UnchargeDirect(Pages(1));
  ASSERT_TRUE(s.g->SetMax(Pages(100)).ok());
  // A stalls for 1 s while B is a recent charger: some, not full.
  std::thread a([&] { ASSERT_TRUE(s.g->TryCharge(Pages(1)).ok()); });
  s.r.WaitInside();
  t.clock.Advance(milliseconds(1000));
  s.r.Open();
  a.join();
  PressureStats p = ReadPressure(*s.g);
  EXPECT_EQ(p.some.total_us, 1'000'000u);
  EXPECT_EQ(p.full.total_us, 0u);
  s.g->UnchargeDirect(Pages(1));
  ASSERT_TRUE(s.r.Fill(100 - s.g->usage().raw()));
  // Two periods later B is no longer a charger: A alone stalls -> full.
  t.clock.Advance(milliseconds(6000));
  ReadPressure(*s.g);
  std::thread a2([&] { ASSERT_TRUE(s.g->TryCharge(Pages(1)).ok()); });
  s.r.WaitInside();
  t.clock.Advance(milliseconds(500));
  s.r.Open();
  a2.join();
  p = ReadPressure(*s.g);
  EXPECT_EQ(p.some.total_us, 1'500'000u);
  EXPECT_EQ(p.full.total_us, 500'000u);
  s.g->UnchargeDirect(Pages(1));
}

// The state is made on first need: a thread that only charged without
// blocking before then is not known, so `full` is held off (never over-
// stated) for the period the state was made in and the next.
TEST(PsiTest, ChargersBeforeTheStateHoldFullOff) {
  TestController t(Batch1());
  GroupRef g = t.Make("lazy");
  SleepyReclaimer r(g.get(), &t.clock);
  ASSERT_TRUE(g->SetMax(Pages(100)).ok());
  ASSERT_TRUE(g->AddReclaimer(&r).ok());
  ASSERT_TRUE(r.Fill(100));  // non-blocking charges, no state yet
  r.set_stall(milliseconds(500));
  ASSERT_TRUE(g->TryCharge(Pages(1)).ok());  // stalls 0.5 s
  g->UnchargeDirect(Pages(1));
  PressureStats p = ReadPressure(*g);
  EXPECT_EQ(p.some.total_us, 500'000u);
  EXPECT_EQ(p.full.total_us, 0u);
  // Two periods on, the unknown chargers have aged out.
  t.clock.Advance(milliseconds(4100));
  ASSERT_TRUE(r.Fill(100 - g->usage().raw()));
  ASSERT_TRUE(g->TryCharge(Pages(1)).ok());
  g->UnchargeDirect(Pages(1));
  p = ReadPressure(*g);
  EXPECT_EQ(p.some.total_us, 1'000'000u);
  EXPECT_EQ(p.full.total_us, 500'000u);
  (void)g->RemoveReclaimer(&r);
}

TEST(PsiTest, PressureFileRoundTrips) {
  PressureStats p;
  p.some = {1250, 301, 64, 4811234};
  p.full = {105, 20, 4, 391002};
  const std::string text = FormatPressure(p);
  EXPECT_EQ(text,
            "some avg10=12.50 avg60=3.01 avg300=0.64 total=4811234\n"
            "full avg10=1.05 avg60=0.20 avg300=0.04 total=391002\n");
  auto back = ParsePressureFile(text);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->some.total_us, 4811234u);
  EXPECT_EQ(back->full.avg60, 20u);
  for (const char* bad :
       {"", "some avg10=1.00 avg60=0.00 avg300=0.00 total=1\n",
        "some avg10=1.0 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 "
        "avg60=0.00 avg300=0.00 total=0\n",
        "some avg10=1.00 avg60=0.00 avg300=0.00 total=x\nfull avg10=0.00 "
        "avg60=0.00 avg300=0.00 total=0\n",
        "some avg10=1.00 avg60=0.00 total=1\nfull avg10=0.00 avg60=0.00 "
        "avg300=0.00 total=0\n"}) {
    EXPECT_FALSE(ParsePressureFile(bad).has_value()) << bad;
  }
}

// Forks while another thread keeps stalling and reading: the child's own
// stalls and reads must not find a group's pressure lock held forever.
TEST(PsiTest, ForkChildCanStallAndRead) {
  TestController t(Batch1());
  Stalling s(t);
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop) ReadPressure(*s.g);
  });
  for (int i = 0; i < 20; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::alarm(10);  // a deadlock ends the child with SIGALRM
      const uint64_t before = ReadPressure(*s.g).some.total_us;
      s.r.set_stall(std::chrono::milliseconds(5));
      const bool ok = s.g->TryCharge(Pages(1)).ok();
      const uint64_t after = ReadPressure(*s.g).some.total_us;
      ::_exit(ok && after == before + 5000 ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status))
        << "child killed by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  stop = true;
  busy.join();
}

// ---- Triggers ----

TEST(PsiTriggerTest, ParsingFollowsTheKernel) {
  for (const char* bad :
       {"", "some", "some 1", "foo 1 1000000", "some x 1000000",
        "some 150000 499999", "some 150000 10000001", "some 0 1000000",
        "some 1000001 1000000", "Some 1 1000000"}) {
    EXPECT_EQ(ParsePressureTrigger(bad).status().code(),
              StatusCode::kInvalidArgument)
        << bad;
  }
  auto ok = ParsePressureTrigger("some 150000 1000000");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.value().state, PressureState::kSome);
  EXPECT_EQ(ok.value().threshold.count(), 150000);
  EXPECT_EQ(ok.value().window.count(), 1000000);
  // sscanf: what follows the numbers is ignored.
  EXPECT_TRUE(ParsePressureTrigger("full 500000 10000000 trailing\n").ok());
  EXPECT_TRUE(ParsePressureTrigger("some  150000   500000").ok());
  // The kernel's %u takes no sign (vsscanf stops at '+' and '-').
  for (const char* signed_text :
       {"some +150000 1000000", "some 150000 +1000000", "some -1 1000000",
        "full +500000 1000000"}) {
    EXPECT_EQ(ParsePressureTrigger(signed_text).status().code(),
              StatusCode::kInvalidArgument)
        << signed_text;
  }
  // Whitespace is the kernel's isspace, 0xA0 included; none needed after
  // the word; a value wraps modulo 2^32 as the kernel stores it.
  EXPECT_TRUE(ParsePressureTrigger("some\xa0"
                                   "150000\t1000000")
                  .ok());
  EXPECT_TRUE(ParsePressureTrigger("some150000 1000000").ok());
  auto wrapped = ParsePressureTrigger("some 4295117296 1000000");
  ASSERT_TRUE(wrapped.ok());
  EXPECT_EQ(wrapped.value().threshold.count(), 150000);
  EXPECT_FALSE(ParsePressureTrigger(" some 150000 1000000").ok());
}

TEST(PsiTest, PressureFileParsesEveryValueItPrints) {
  PressureStats s;
  s.some = {UINT64_MAX, UINT64_MAX - 1, 10000, UINT64_MAX};
  s.full = {0, 1, 99, 0};
  const auto parsed = ParsePressureFile(FormatPressure(s));
  ASSERT_TRUE(parsed.has_value()) << FormatPressure(s);
  EXPECT_EQ(parsed->some.avg10, UINT64_MAX);
  EXPECT_EQ(parsed->some.avg60, UINT64_MAX - 1);
  EXPECT_EQ(parsed->full.avg300, 99u);
  // One more than fits is refused.
  EXPECT_FALSE(ParsePressureFile(
                   "some avg10=184467440737095516.16 avg60=0.00 avg300=0.00 "
                   "total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
                   .has_value());
}

TEST(PsiTriggerTest, FileWriteArmsAndErrorsMatchTheKernel) {
  TestController t;
  GroupRef g = t.Make("g");
  auto f = MemoryFile::Open(*g, "memory.pressure").value();
  EXPECT_EQ(f->Write("some 150000 100").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrnoOf(f->Write("bogus").code()), EINVAL);
  EXPECT_TRUE(f->Write("some 150000 1000000").ok());
  EXPECT_EQ(f->Write("some 150000 1000000").code(), StatusCode::kBusy);
  EXPECT_FALSE(f->TakePressureEvent());
}

TEST(PsiTriggerTest, FiresOncePerWindowAndClosingRemoves) {
  TestController t(Batch1());
  Stalling s(t);
  std::atomic<int> calls{0};
  auto armed = PressureTrigger::Arm(
      *s.g, ParsePressureTrigger("some 150000 1000000").value(),
      [&] { calls.fetch_add(1); });
  ASSERT_TRUE(armed.ok());
  std::unique_ptr<PressureTrigger> trig = std::move(armed).value();
  auto f = MemoryFile::Open(*s.g, "memory.pressure").value();
  ASSERT_TRUE(f->Write("some 150000 1000000").ok());

  s.Stall(milliseconds(100));  // below the threshold
  EXPECT_EQ(trig->events(), 0u);
  s.Stall(milliseconds(100));  // 200 ms within the window: crossed
  EXPECT_EQ(trig->events(), 1u);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(trig->TakeEvent());
  EXPECT_FALSE(trig->TakeEvent());
  EXPECT_TRUE(f->TakePressureEvent());
  // Crossed again within the same window: no second event yet.
  s.Stall(milliseconds(200));
  EXPECT_EQ(trig->events(), 1u);
  // Once the window passed, the pending event fires (on the next look).
  t.clock.Advance(milliseconds(1000));
  ReadPressure(*s.g);
  EXPECT_EQ(trig->events(), 2u);
  // Disarmed: no more events.
  trig.reset();
  f.reset();
  t.clock.Advance(milliseconds(1000));
  s.Stall(milliseconds(900));
  EXPECT_EQ(calls.load(), 2);
}

TEST(PsiTriggerTest, PollerFiresDuringALongStall) {
  TestController t(Batch1());
  Stalling s(t);
  s.r.set_gated(true);
  std::atomic<int> calls{0};
  auto trig = PressureTrigger::Arm(
                  *s.g, ParsePressureTrigger("some 150000 1000000").value(),
                  [&] { calls.fetch_add(1); })
                  .value();
  std::thread a([&] { ASSERT_TRUE(s.g->TryCharge(Pages(1)).ok()); });
  s.r.WaitInside();
  t.clock.Advance(milliseconds(300));
  // The charger is still stalled: the poller must notice.
  while (calls.load() == 0) std::this_thread::sleep_for(milliseconds(5));
  EXPECT_EQ(trig->events(), 1u);
  s.r.Open();
  a.join();
  s.g->UnchargeDirect(Pages(1));
}

}  // namespace
}  // namespace umemcg

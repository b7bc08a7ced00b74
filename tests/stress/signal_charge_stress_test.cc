// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Charges that never block are async-signal-safe (docs/architecture.md,
// Decisions): each worker thread has its own SIGALRM timer (timer_create,
// SIGEV_THREAD_ID) firing every 100 us, whose handler charges and
// uncharges pages, counts a statistic and charges and uncharges objcg
// bytes, with kNone and kChargeAtomic, while the thread it interrupted
// does the same (and may be anywhere inside a charge, an uncharge, a
// stock section or an event). The group sits at its max, so charges are
// refused or forced (a `max` event, an event callback and an observer on
// every forced one). Under both batch policies, on the rseq and the
// try-lock stock paths.
//
// A watchdog aborts the process if the workers do not finish (a handler
// waiting for a lock its own thread holds never returns). At quiescence
// every page balances exactly (usage 0 after the stocks are drained), the
// statistic is exact and the stocks' invariants hold.

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "umemcg/umemcg.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

namespace umemcg {
namespace {

constexpr std::chrono::milliseconds kRunFor{400};
// Generous: a sanitized build on a loaded 2-CPU machine, where the run
// itself takes well under a second.
constexpr std::chrono::seconds kWatchdog{60};
constexpr uint64_t kMaxPages = 256;
constexpr int kWorkers = 2;

struct Param {
  bool rseq;
  BatchPolicy policy;
};

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(info.param.rseq ? "Rseq" : "TryLock") +
         (info.param.policy == BatchPolicy::kAdaptive ? "Adaptive" : "Fixed");
}

// What the handler uses: set before the timers start, cleared after they
// are deleted.
struct Shared {
  Group* group = nullptr;
  ObjCgroup* objcg = nullptr;
};
std::atomic<Shared*> g_shared{nullptr};

// Per thread, written by the handler only (the thread reads them once
// its timer is gone and SIGALRM blocked). Lock-free atomics: signal-safe.
struct HandlerCounts {
  std::atomic<uint64_t> runs{0};
  std::atomic<uint64_t> events{0};
  std::atomic<uint64_t> forced{0};
  uint32_t rng = 1;
};
thread_local HandlerCounts* tls_counts = nullptr;

void OnAlarm(int) {
  const int saved_errno = errno;
  Shared* s = g_shared.load(std::memory_order_acquire);
  HandlerCounts* c = tls_counts;
  if (s != nullptr && c != nullptr) {
    c->rng = c->rng * 1103515245u + 12345u;
    const uint32_t r = c->rng >> 8;
    const ChargeFlags flags = (r & 1) != 0 ? kChargeAtomic : ChargeFlags::kNone;
    const uint64_t n = 1 + (r >> 1) % 4;
    const ChargeResult res = s->group->TryCharge(Pages(n), flags);
    if (res.ok()) {
      if (res.forced) c->forced.fetch_add(1, std::memory_order_relaxed);
      s->group->Uncharge(Pages(n));
    }
    if (s->group->CountEvent(StatItem::kPgfault, 1)) {
      c->events.fetch_add(1, std::memory_order_relaxed);
    }
    const uint64_t bytes = 8 + (r >> 4) % 3000;
    if (s->objcg->Charge(Bytes(bytes), flags).ok()) {
      s->objcg->Uncharge(Bytes(bytes));
    }
    c->runs.fetch_add(1, std::memory_order_relaxed);
  }
  errno = saved_errno;
}

class CountingObserver : public ControllerObserver {
 public:
  void OnMemoryEvent(Group&, MemoryEvent event) override {
    if (event == MemoryEvent::kMax) max_.fetch_add(1);
  }
  uint64_t max() const { return max_.load(); }

 private:
  std::atomic<uint64_t> max_{0};
};

class SignalChargeStressTest : public ::testing::TestWithParam<Param> {};

TEST_P(SignalChargeStressTest, HandlersChargeWhileTheirThreadCharges) {
  ControllerOptions o;
  o.cpu_source = CpuSource::kAuto;
  o.stock_rseq = GetParam().rseq;
  o.batch_policy = GetParam().policy;
  o.stats_flush_period = std::chrono::nanoseconds(0);
  o.high_work = HighWorkMode::kNone;
  auto made = Controller::Create(std::move(o));
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::unique_ptr<Controller> ctrl = std::move(made).value();
  if (GetParam().rseq && !ctrl->info().stock_rseq) {
    GTEST_SKIP() << "stock rseq commit unavailable here (TSan build, no "
                    "rseq registration or no membarrier RSEQ fence)";
  }
  GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  ASSERT_TRUE(g->SetMax(Pages(kMaxPages)).ok());
  ObjCgroupRef objcg = g->GetObjCgroup();
  ASSERT_TRUE(objcg);
  std::atomic<uint64_t> callbacks{0};
  g->SetEventCallback([&callbacks](Group&, MemoryEvent event, bool local) {
    if (event == MemoryEvent::kMax && local) callbacks.fetch_add(1);
  });
  auto observer = std::make_shared<CountingObserver>();
  ctrl->AddObserver(observer);
  // At its max: the workers' charges are refused or forced from here on.
  const uint64_t base = kMaxPages - 8;
  ASSERT_TRUE(g->TryCharge(Pages(base), ChargeFlags::kNone).ok());

  Shared shared{g.get(), objcg.get()};
  struct sigaction sa = {};
  sa.sa_handler = OnAlarm;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_sa = {};
  ASSERT_EQ(sigaction(SIGALRM, &sa, &old_sa), 0);
  // Only the workers take SIGALRM (their timers target them).
  sigset_t alarm_set;
  sigemptyset(&alarm_set);
  sigaddset(&alarm_set, SIGALRM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &alarm_set, nullptr), 0);
  g_shared.store(&shared, std::memory_order_release);

  std::atomic<bool> stop{false};
  std::atomic<int> finished{0};
  std::atomic<uint64_t> thread_events{0};
  std::atomic<uint64_t> handler_events{0};
  std::atomic<uint64_t> handler_runs{0};
  std::atomic<uint64_t> forced{0};
  std::atomic<int> timer_failures{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      HandlerCounts counts;
      counts.rng = 77 + static_cast<uint32_t>(w);
      tls_counts = &counts;
      timer_t timer;
      sigevent sev = {};
      sev.sigev_notify = SIGEV_THREAD_ID;
      sev.sigev_signo = SIGALRM;
      sev.sigev_notify_thread_id = static_cast<pid_t>(syscall(SYS_gettid));
      bool armed = timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0;
      if (armed) {
        itimerspec its = {};
        its.it_value.tv_nsec = 100'000;
        its.it_interval.tv_nsec = 100'000;
        armed = timer_settime(timer, 0, &its, nullptr) == 0;
      }
      if (!armed) timer_failures.fetch_add(1);
      pthread_sigmask(SIG_UNBLOCK, &alarm_set, nullptr);
      uint32_t rng = 991 + static_cast<uint32_t>(w);
      uint64_t held = 0;        // pages this thread holds charged
      uint64_t held_bytes = 0;  // objcg bytes
      uint64_t events = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        rng = rng * 1664525u + 1013904223u;
        const uint32_t r = rng >> 8;
        const ChargeFlags flags =
            (r & 1) != 0 ? kChargeAtomic : ChargeFlags::kNone;
        switch ((r >> 1) % 4) {
          case 0:
            if (held < 32) {
              const uint64_t n = 1 + (r >> 3) % 8;
              if (g->TryCharge(Pages(n), flags).ok()) held += n;
            }
            break;
          case 1:
            if (held > 0) {
              const uint64_t n = 1 + (r >> 3) % held;
              g->Uncharge(Pages(n));
              held -= n;
            }
            break;
          case 2:
            if (held_bytes < 64 * 1024) {
              const uint64_t b = 8 + (r >> 3) % 5000;
              if (objcg->Charge(Bytes(b), flags).ok()) held_bytes += b;
            } else {
              objcg->Uncharge(Bytes(held_bytes));
              held_bytes = 0;
            }
            break;
          default:
            if (g->CountEvent(StatItem::kPgfault, 2)) events += 2;
            break;
        }
      }
      // Quiesce the handler first: no timer, SIGALRM blocked (a signal
      // still pending stays so and dies with the thread).
      if (armed) timer_delete(timer);
      pthread_sigmask(SIG_BLOCK, &alarm_set, nullptr);
      tls_counts = nullptr;
      if (held > 0) g->Uncharge(Pages(held));
      if (held_bytes > 0) objcg->Uncharge(Bytes(held_bytes));
      thread_events.fetch_add(events);
      handler_events.fetch_add(counts.events.load());
      handler_runs.fetch_add(counts.runs.load());
      forced.fetch_add(counts.forced.load());
      finished.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(kRunFor);
  stop.store(true);
  // The watchdog: a handler waiting on its own thread never returns.
  const auto deadline = std::chrono::steady_clock::now() + kWatchdog;
  while (finished.load() < kWorkers) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr,
                   "HANG: %d of %d workers still running %lld s after the "
                   "stop (a signal handler's charge waits on its own "
                   "thread)\n",
                   kWorkers - finished.load(), kWorkers,
                   static_cast<long long>(kWatchdog.count()));
      std::abort();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& t : workers) t.join();
  g_shared.store(nullptr, std::memory_order_release);
  pthread_sigmask(SIG_UNBLOCK, &alarm_set, nullptr);
  sigaction(SIGALRM, &old_sa, nullptr);
  ASSERT_EQ(timer_failures.load(), 0);

  RecordProperty("handler_runs", static_cast<int>(handler_runs.load()));
  RecordProperty("forced_in_handlers", static_cast<int>(forced.load()));
  EXPECT_GT(handler_runs.load(), 0u);
  // Exact at quiescence: only the base is charged once the stocks (page
  // and object) are drained.
  g->Uncharge(Pages(base));
  ctrl->DrainAllStocks(ctrl->root());
  EXPECT_EQ(g->usage().raw(), 0u);
  EXPECT_EQ(g->StatExact(StatItem::kPgfault),
            static_cast<int64_t>(thread_events.load() + handler_events.load()));
  EXPECT_TRUE(ctrl->CheckInvariants().ok())
      << ctrl->CheckInvariants().ToString();
  // Forced charges at the max raised events, callbacks and observers ran.
  EXPECT_GT(g->events(MemoryEvent::kMax), 0u);
  EXPECT_GT(callbacks.load(), 0u);
  EXPECT_GT(observer->max(), 0u);
  ctrl->RemoveObserver(observer.get());
  g->SetEventCallback(nullptr);
}

INSTANTIATE_TEST_SUITE_P(Paths, SignalChargeStressTest,
                         ::testing::Values(Param{true, BatchPolicy::kFixed},
                                           Param{true, BatchPolicy::kAdaptive},
                                           Param{false, BatchPolicy::kFixed},
                                           Param{false,
                                                 BatchPolicy::kAdaptive}),
                         Name);

}  // namespace
}  // namespace umemcg

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// umemcg-demo: a small multi-tenant "service" to watch live. It creates a
// few tenants with limits, runs a load in each (a reclaimable cache that
// grows until memory.high / memory.max push back, plus a working set that
// sometimes does not fit: max and oom events), mounts its group tree and
// serves Prometheus metrics, until SIGINT / SIGTERM or --seconds.
//
//   mkdir -p /tmp/umemcg-demo
//   umemcg-demo --mount /tmp/umemcg-demo &
//   umemcg top /tmp/umemcg-demo
//   curl -s 127.0.0.1:9464/metrics | grep '^umemcg_memory_current'
//
// Flags: --mount DIR (no mount without it), --metrics HOST:PORT (default
// 127.0.0.1:9464; "off" for none), --seconds N (0 = until a signal),
// --no-load. Uses only the public API.

#include <signal.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "umemcg/controller.h"
#include "umemcg/metrics.h"
#ifdef UMEMCG_HAVE_FUSE
#include "umemcg/fuse.h"
#endif

namespace {

using umemcg::Pages;

constexpr uint64_t kMiB = 1 << 20;

// A tenant's cache: pages it holds and can drop when asked (the kernel's
// shrinker analog).
class Cache final : public umemcg::Reclaimer {
 public:
  explicit Cache(umemcg::Group& group) : group_(group) {}

  void Add(uint64_t pages) {
    // Relaxed: a count with no data behind it; Take's CAS loop never lets
    // it go below zero.
    pages_.fetch_add(pages, std::memory_order_relaxed);
  }
  // Removes up to `want` pages; returns how many.
  uint64_t Take(uint64_t want) {
    uint64_t have = pages_.load(std::memory_order_relaxed);
    uint64_t take = 0;
    do {
      take = std::min(have, want);
    } while (take > 0 && !pages_.compare_exchange_weak(
                             have, have - take, std::memory_order_relaxed));
    return take;
  }

  Pages Reclaimable() override {
    return Pages(pages_.load(std::memory_order_relaxed));
  }
  Pages Reclaim(Pages target) override {
    const uint64_t freed = Take(target.raw());
    group_.Uncharge(Pages(freed));
    return Pages(freed);
  }

 private:
  umemcg::Group& group_;
  std::atomic<uint64_t> pages_{0};
};

struct TenantSpec {
  const char* path;
  uint64_t max_mib;   // 0: no limit
  uint64_t high_mib;  // 0: no limit
  uint64_t low_mib;
  uint64_t working_set_mib;  // peak of the unreclaimable part
};

constexpr TenantSpec kTenants[] = {
    {"tenant-a", 96, 64, 16, 40},
    {"tenant-a/batch", 24, 0, 0, 20},
    {"tenant-b", 48, 0, 0, 52},  // working set over max: oom events
    {"tenant-c", 0, 128, 32, 24},
};

struct Tenant {
  umemcg::GroupRef group;
  std::unique_ptr<Cache> cache;
  const TenantSpec* spec;
};

std::atomic<bool> g_stop{false};

// One tenant's load: working set moves between a third of its peak and the
// peak (unreclaimable; a charge past max fails: max and oom events); cache
// grows steadily and is reclaimed under high / max.
void RunLoad(Tenant& t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const uint64_t peak = t.spec->working_set_mib * kMiB / umemcg::kPageSize;
  uint64_t working = 0;
  uint64_t target = peak / 3;
  while (!g_stop.load(std::memory_order_relaxed)) {
    if (rng() % 64 == 0) target = peak / 3 + rng() % (peak - peak / 3 + 1);
    const uint64_t chunk = 1 + rng() % 32;
    if (working < target) {
      if (t.group->TryCharge(Pages(chunk)).ok()) working += chunk;
    } else if (working > chunk) {
      t.group->Uncharge(Pages(chunk));
      working -= chunk;
    }
    // The cache: charge and keep; reclaim gives it back under pressure.
    if (t.group->TryCharge(Pages(chunk), umemcg::kChargeDefault).ok()) {
      t.cache->Add(chunk);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  t.group->Uncharge(Pages(working));
  t.group->Uncharge(Pages(t.cache->Take(UINT64_MAX)));
}

bool ParseArgs(int argc, char** argv, std::string* mount, std::string* metrics,
               int* seconds, bool* load) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--mount" && has_value) {
      *mount = argv[++i];
    } else if (a == "--metrics" && has_value) {
      *metrics = argv[++i];
    } else if (a == "--seconds" && has_value) {
      *seconds = std::atoi(argv[++i]);
    } else if (a == "--no-load") {
      *load = false;
    } else {
      std::fprintf(stderr,
                   "usage: umemcg-demo [--mount DIR] [--metrics HOST:PORT|off]"
                   " [--seconds N] [--no-load]\n");
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mount_dir, metrics_address = "127.0.0.1:9464";
  int seconds = 0;
  bool load = true;
  if (!ParseArgs(argc, argv, &mount_dir, &metrics_address, &seconds, &load)) {
    return 2;
  }
  // Signals are taken synchronously by main (sigtimedwait below); every
  // thread started from here on inherits the block.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto ctrl = umemcg::Controller::Create().value();
  std::vector<Tenant> tenants;
  for (const TenantSpec& spec : kTenants) {
    std::string path = spec.path;
    const size_t slash = path.rfind('/');
    umemcg::GroupRef parent =
        ctrl->Lookup(slash == std::string::npos ? "" : path.substr(0, slash))
            .value();
    Tenant t{ctrl->CreateGroup(*parent, path.substr(slash + 1)).value(),
             nullptr, &spec};
    const auto pages = [](uint64_t mib) {
      return Pages(mib * kMiB / umemcg::kPageSize);
    };
    if (spec.max_mib != 0) (void)t.group->SetMax(pages(spec.max_mib));
    if (spec.high_mib != 0) (void)t.group->SetHigh(pages(spec.high_mib));
    if (spec.low_mib != 0) (void)t.group->SetLow(pages(spec.low_mib));
    t.cache = std::make_unique<Cache>(*t.group);
    (void)t.group->AddReclaimer(t.cache.get());
    tenants.push_back(std::move(t));
  }

#ifdef UMEMCG_HAVE_FUSE
  std::unique_ptr<umemcg::FuseMount> mount;
  if (!mount_dir.empty()) {
    auto m = umemcg::MountFs(*ctrl, mount_dir);
    if (!m.ok()) {
      std::fprintf(stderr, "umemcg-demo: mount %s: %s\n", mount_dir.c_str(),
                   m.status().ToString().c_str());
      return 1;
    }
    mount = std::move(m.value());
    std::printf("umemcg-demo: tree mounted at %s\n", mount_dir.c_str());
  }
#else
  if (!mount_dir.empty()) {
    std::fprintf(stderr, "umemcg-demo: built without libfuse3: no --mount\n");
    return 1;
  }
#endif
  std::unique_ptr<umemcg::MetricsServer> server;
  if (metrics_address != "off") {
    auto s = umemcg::ServeMetrics(*ctrl, metrics_address);
    if (!s.ok()) {
      std::fprintf(stderr, "umemcg-demo: metrics %s: %s\n",
                   metrics_address.c_str(), s.status().ToString().c_str());
      return 1;
    }
    server = std::move(s.value());
    std::printf("umemcg-demo: metrics at http://%s/metrics\n",
                server->address().c_str());
  }
  if (!mount_dir.empty()) {
    std::printf("umemcg-demo: try  umemcg top %s\n", mount_dir.c_str());
  }
  std::fflush(stdout);

  std::vector<std::thread> threads;
  if (load) {
    for (size_t i = 0; i < tenants.size(); ++i) {
      threads.emplace_back(RunLoad, std::ref(tenants[i]), 1000 + i);
    }
  }

  // Until a signal, or --seconds.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  for (;;) {
    timespec wait{1, 0};
    if (seconds > 0) {
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::nanoseconds(0)) break;
      const auto ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      wait = {static_cast<time_t>(ns / 1000000000),
              static_cast<long>(ns % 1000000000)};
    }
    const int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig > 0) {
      std::printf("umemcg-demo: %s, shutting down\n", strsignal(sig));
      break;
    }
  }

  g_stop.store(true, std::memory_order_relaxed);  // only a stop flag
  for (std::thread& t : threads) t.join();
  server.reset();
#ifdef UMEMCG_HAVE_FUSE
  mount.reset();  // unmounts
#endif
  for (Tenant& t : tenants) (void)t.group->RemoveReclaimer(t.cache.get());
  tenants.clear();
  std::fflush(stdout);
  return 0;
}

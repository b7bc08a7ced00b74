// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// tenant_cache: a multi-tenant memcached-style cache whose memory is
// accounted and limited per tenant by umemcg. See README.md ("Example:
// a multi-tenant cache") and protocol.h.
//
//   tenant_cache [--port=N] [--total-max=SIZE] [--tenant-max=SIZE]
//                [--tenant-high=SIZE] [--premium=NAME] [--premium-low=SIZE]
//                [--max-tenants=N] [--max-value=BYTES]
//                [--mount=DIR] [--metrics=HOST:PORT]
//                [--pressure-kill=PCT [--pressure-kill-duration=SECONDS]
//                 [--pressure-kill-suspend=SECONDS]]
//                [--redis=URL --cluster-group=NAME [--cluster-max=SIZE]
//                 [--cluster-bind=TENANT]]
//
// --pressure-kill runs the pressure killer (umemcg/pressure_killer.h) on
// the parent "tenants": when its memory.pressure `some` avg10 stays above
// PCT percent for the duration (default 30 s), the tenant stalling (the
// one thrashing, not the biggest) loses its items and its sets are
// refused for the suspension (default 60 s); each kill is printed.
// SIZE uses cgroup syntax (64M, 1G, max). --mount shows the groups as
// files at DIR (umemcg/fuse.h; `umemcg top DIR` watches them), --metrics
// serves Prometheus text at http://HOST:PORT/metrics (umemcg/metrics.h;
// port 0 picks one). --cluster-group binds the parent "tenants" (or, with
// --cluster-bind, one tenant) to a cluster group in Redis (umemcg/
// cluster.h; --redis defaults to $UMEMCG_REDIS): every process bound to it
// shares its max (--cluster-max sets it, creating the group). Runs until
// SIGINT or SIGTERM.

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "server.h"
#include "tenant_cache.h"
#include "umemcg/metrics.h"
#ifdef TENANT_CACHE_HAVE_FUSE
#include "umemcg/fuse.h"
#endif
#ifdef TENANT_CACHE_HAVE_CLUSTER
#include "umemcg/cluster.h"
#include "umemcg/files.h"
#endif

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: tenant_cache [--port=N] [--total-max=SIZE] "
               "[--tenant-max=SIZE] [--tenant-high=SIZE] [--premium=NAME] "
               "[--premium-low=SIZE] [--max-tenants=N] [--max-value=BYTES] "
               "[--mount=DIR] [--metrics=HOST:PORT] [--pressure-kill=PCT "
               "[--pressure-kill-duration=SECONDS] "
               "[--pressure-kill-suspend=SECONDS]] [--redis=URL "
               "--cluster-group=NAME [--cluster-max=SIZE] "
               "[--cluster-bind=TENANT]]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  tenant_cache::CacheOptions options;
  long port = 11311;
  std::string premium, premium_low = "0", mount_dir, metrics_address;
  std::string redis_url, cluster_group, cluster_bind, cluster_max;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const size_t eq = arg.find('=');
    if (arg.substr(0, 2) != "--" || eq == std::string_view::npos) {
      return Usage();
    }
    const std::string_view name = arg.substr(2, eq - 2);
    const std::string value(arg.substr(eq + 1));
    if (name == "port") {
      port = std::strtol(value.c_str(), nullptr, 10);
      if (port < 0 || port > 65535) return Usage();
    } else if (name == "total-max") {
      options.total_max = value;
    } else if (name == "tenant-max") {
      options.tenant_max = value;
    } else if (name == "tenant-high") {
      options.tenant_high = value;
    } else if (name == "premium") {
      premium = value;
    } else if (name == "premium-low") {
      premium_low = value;
    } else if (name == "max-tenants") {
      options.max_tenants = std::atoi(value.c_str());
    } else if (name == "mount") {
      mount_dir = value;
    } else if (name == "metrics") {
      metrics_address = value;
    } else if (name == "redis") {
      redis_url = value;
    } else if (name == "cluster-group") {
      cluster_group = value;
    } else if (name == "cluster-max") {
      cluster_max = value;
    } else if (name == "cluster-bind") {
      cluster_bind = value;
    } else if (name == "pressure-kill") {
      char* end = nullptr;
      const double pct = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || !(pct >= 0 && pct <= 100)) {
        return Usage();
      }
      if (!options.pressure_kill) options.pressure_kill.emplace();
      options.pressure_kill->avg10_limit =
          static_cast<uint64_t>(pct * 100 + 0.5);
    } else if (name == "pressure-kill-duration" ||
               name == "pressure-kill-suspend") {
      char* end = nullptr;
      const double secs = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || !(secs >= 0)) {
        return Usage();
      }
      if (!options.pressure_kill) options.pressure_kill.emplace();
      const auto d = std::chrono::nanoseconds(static_cast<int64_t>(secs * 1e9));
      (name == "pressure-kill-duration" ? options.pressure_kill->duration
                                        : options.pressure_kill->suspend) = d;
    } else if (name == "max-value") {
      options.max_value_bytes = std::strtoull(value.c_str(), nullptr, 10);
    } else {
      return Usage();
    }
  }
  if (options.pressure_kill) {
    options.pressure_kill->on_kill = [](const std::string& tenant,
                                        const umemcg::PressureKill& k) {
      std::printf(
          "tenant_cache: pressure killer: tenant %s killed (tenants some "
          "avg10=%llu.%02llu%%, its own %llu.%02llu%%, score %llu pages)\n",
          tenant.c_str(),
          static_cast<unsigned long long>(k.watched_pressure.some.avg10 / 100),
          static_cast<unsigned long long>(k.watched_pressure.some.avg10 % 100),
          static_cast<unsigned long long>(k.victim_avg10 / 100),
          static_cast<unsigned long long>(k.victim_avg10 % 100),
          static_cast<unsigned long long>(k.score));
      std::fflush(stdout);
    };
  }
  auto cache = tenant_cache::TenantCache::Create(options);
  if (!cache.ok()) {
    std::fprintf(stderr, "tenant_cache: %s\n",
                 cache.status().ToString().c_str());
    return 1;
  }
  if (!premium.empty()) {
    umemcg::Status s = cache.value()->CreateTenant(premium);
    if (s.ok())
      s = cache.value()->WriteFile(premium, "memory.low", premium_low);
    if (!s.ok()) {
      std::fprintf(stderr, "tenant_cache: premium tenant: %s\n",
                   s.ToString().c_str());
      return 1;
    }
  }
  // Block the stop signals before any thread starts; wait for one below.
  // (A shell starts background jobs with SIGINT ignored; an ignored signal
  // is discarded, not queued for sigwait, so restore the default first.)
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  // Started after the mask, so their threads leave the signals to sigwait;
  // declared after `cache`, so they stop before its controller goes.
  std::unique_ptr<umemcg::MetricsServer> metrics;
  if (!metrics_address.empty()) {
    auto served =
        umemcg::ServeMetrics(cache.value()->controller(), metrics_address);
    if (!served.ok()) {
      std::fprintf(stderr, "tenant_cache: --metrics: %s\n",
                   served.status().ToString().c_str());
      return 1;
    }
    metrics = std::move(served).value();
    std::printf("tenant_cache metrics at http://%s/metrics\n",
                metrics->address().c_str());
  }
#ifdef TENANT_CACHE_HAVE_FUSE
  std::unique_ptr<umemcg::FuseMount> mount;
  if (!mount_dir.empty()) {
    auto mounted = umemcg::MountFs(cache.value()->controller(), mount_dir);
    if (!mounted.ok()) {
      std::fprintf(stderr, "tenant_cache: --mount: %s\n",
                   mounted.status().ToString().c_str());
      return 1;
    }
    mount = std::move(mounted).value();
    std::printf("tenant_cache groups mounted at %s\n", mount->path().c_str());
  }
#else
  if (!mount_dir.empty()) {
    std::fprintf(stderr, "tenant_cache: --mount: built without libfuse3\n");
    return 1;
  }
#endif
#ifdef TENANT_CACHE_HAVE_CLUSTER
  // Declared after the mount and before the server: unbound (the lease
  // returned) after the server stops, before the controller goes.
  std::unique_ptr<umemcg::Cluster> cluster;
  std::unique_ptr<umemcg::ClusterBinding> binding;
  if (!cluster_group.empty()) {
    umemcg::Group* group = &cache.value()->parent();
    if (!cluster_bind.empty() && cluster_bind != "-") {
      umemcg::Status s = cache.value()->CreateTenant(cluster_bind);
      group = s.ok() ? cache.value()->TenantGroup(cluster_bind) : nullptr;
      if (group == nullptr) {
        std::fprintf(stderr, "tenant_cache: --cluster-bind: %s\n",
                     s.ToString().c_str());
        return 1;
      }
    }
    auto connected = umemcg::Cluster::Connect({.redis_url = redis_url});
    if (!connected.ok()) {
      std::fprintf(stderr, "tenant_cache: --redis: %s\n",
                   connected.status().ToString().c_str());
      return 1;
    }
    cluster = std::move(connected).value();
    if (!cluster_max.empty()) {
      umemcg::StatusOr<umemcg::Pages> max =
          umemcg::ParseMemoryLimit(cluster_max);
      umemcg::Status s =
          max.ok() ? cluster->SetMax(cluster_group, max.value()) : max.status();
      if (!s.ok()) {
        std::fprintf(stderr, "tenant_cache: --cluster-max: %s\n",
                     s.ToString().c_str());
        return 1;
      }
    }
    auto bound = cluster->Bind(*group, cluster_group);
    if (!bound.ok()) {
      std::fprintf(stderr, "tenant_cache: --cluster-group: %s\n",
                   bound.status().ToString().c_str());
      return 1;
    }
    binding = std::move(bound).value();
    std::printf(
        "tenant_cache: %s bound to cluster group %s at redis %s as "
        "node %s\n",
        group->path().c_str(), cluster_group.c_str(),
        cluster->redis_address().c_str(), cluster->node_name().c_str());
  }
#else
  if (!cluster_group.empty()) {
    std::fprintf(stderr,
                 "tenant_cache: --cluster-group: built without "
                 "hiredis (libumemcg-cluster)\n");
    return 1;
  }
#endif
  auto server =
      tenant_cache::Server::Start(*cache.value(), static_cast<uint16_t>(port));
  if (!server.ok()) {
    std::fprintf(stderr, "tenant_cache: %s\n",
                 server.status().ToString().c_str());
    return 1;
  }
  std::printf("tenant_cache listening on 127.0.0.1:%u\n",
              static_cast<unsigned>(server.value()->port()));
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  server.value()->Stop();
  std::printf("tenant_cache: stopped by signal %d\n", sig);
  return 0;
}

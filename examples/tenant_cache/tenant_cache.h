// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// TenantCache: a multi-tenant in-memory key-value store whose memory is
// accounted and limited per tenant by umemcg (the network server is in
// server.h). One group per tenant under a common parent group; every byte
// a tenant's items take (keys, values, list and index nodes) comes from a
// MemoryResource charged to that tenant's group. Each tenant's LRU is the
// group's Reclaimer: when a charge would go over memory.max (the tenant's
// or the parent's), or usage passes memory.high, umemcg asks the LRU to
// evict, in proportion to usage above each tenant's protection (memory.low
// keeps a premium tenant's items when others cause the pressure).
//
//   auto cache = TenantCache::Create({.total_max = "64M"}).value();
//   (void)cache->Set("a", "k", "v", 0);
//   std::string v; uint32_t flags;
//   bool hit = cache->Get("a", "k", &v, &flags);
//
// With CacheOptions::pressure_kill, the pressure killer (umemcg/
// pressure_killer.h) watches the parent "tenants": when its `some` avg10
// stays above the limit for the duration, the tenant stalling (the one
// thrashing, not the biggest) is killed: every item dropped and its sets
// refused ("SERVER_ERROR tenant suspended") for `suspend`.
//
// Locking. Each tenant has a mutex that guards only the linking and
// unlinking of entries; all allocation (which may charge, reclaim and
// evict from this or any other tenant) happens with no tenant lock held,
// so reclaim of tenant B from tenant A's thread cannot deadlock.
//
// Thread safety: every method may be called from any thread.

#ifndef UMEMCG_EXAMPLES_TENANT_CACHE_TENANT_CACHE_H_
#define UMEMCG_EXAMPLES_TENANT_CACHE_TENANT_CACHE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "umemcg/controller.h"
#include "umemcg/group.h"
#include "umemcg/oom_policy.h"
#include "umemcg/pressure_killer.h"
#include "umemcg/status.h"

namespace tenant_cache {

// The pressure killer's settings (systemd-oomd's defaults: 60% for 30 s).
struct PressureKillOptions {
  uint64_t avg10_limit = 6000;  // hundredths of a percent
  std::chrono::nanoseconds duration{std::chrono::seconds(30)};
  std::chrono::nanoseconds interval{std::chrono::seconds(1)};
  std::chrono::nanoseconds post_kill_delay{std::chrono::seconds(15)};
  // How long a killed tenant's sets are refused.
  std::chrono::nanoseconds suspend{std::chrono::seconds(60)};
  // Told each kill (on the killer's thread).
  std::function<void(const std::string& tenant, const umemcg::PressureKill&)>
      on_kill;
};

struct CacheOptions {
  // memory.max of the parent group "tenants" (all tenants together), in
  // cgroup syntax ("64M", "max").
  std::string total_max = "max";
  // memory.max / memory.high given to each new tenant.
  std::string tenant_max = "max";
  std::string tenant_high = "max";
  // Tenants created on first use, at most this many.
  int max_tenants = 64;
  // The largest value accepted (memcached's item size limit).
  size_t max_value_bytes = 1 << 20;
  // Controller settings (tests use fake CPUs).
  umemcg::ControllerOptions controller;
  // The pressure killer; off when empty.
  std::optional<PressureKillOptions> pressure_kill;
};

// Per-tenant figures (CacheStats / `stats` command).
struct TenantStats {
  std::string name;
  uint64_t items = 0;
  uint64_t evictions = 0;
  int64_t bytes = 0;  // object-accounted bytes (memory.stat slab)
  uint64_t usage_pages = 0;
  uint64_t pressure_kills = 0;  // times the pressure killer chose it
  bool suspended = false;       // its sets are refused now
};

enum class SetResult {
  kStored,
  kTooLarge,
  kOutOfMemory,
  kNoTenant,
  kSuspended
};

class Tenant;

class TenantCache {
 public:
  static umemcg::StatusOr<std::unique_ptr<TenantCache>> Create(
      CacheOptions options);
  ~TenantCache();

  TenantCache(const TenantCache&) = delete;
  TenantCache& operator=(const TenantCache&) = delete;

  // ---- Items ----

  // Stores `value` under `key` for `tenant` (created on first use). Over the
  // tenant's limits the tenant's own LRU is evicted first; kOutOfMemory when
  // even that cannot make room (other tenants are not affected); kSuspended
  // while the pressure killer's suspension of the tenant lasts.
  SetResult Set(std::string_view tenant, std::string_view key,
                std::string_view value, uint32_t flags);
  // Copies the value out; marks the item most recently used.
  bool Get(std::string_view tenant, std::string_view key, std::string* value,
           uint32_t* flags);
  bool Delete(std::string_view tenant, std::string_view key);

  // ---- Tenants and their memory files ----

  // Creates `tenant` (a group under "tenants") if missing. kInvalidArgument
  // for a bad name, kResourceExhausted past max_tenants.
  umemcg::Status CreateTenant(std::string_view tenant);
  // memory.* file access (Group::ReadFile / WriteFile) on a tenant's group
  // or, for tenant "" , on the parent "tenants".
  umemcg::StatusOr<std::string> ReadFile(std::string_view tenant,
                                         std::string_view file);
  umemcg::Status WriteFile(std::string_view tenant, std::string_view file,
                           std::string_view text);
  std::vector<TenantStats> Stats();

  // Kills `tenant` as the pressure killer does (drops every item, suspends
  // its sets); false if there is no such tenant.
  bool KillTenant(std::string_view tenant);
  // The pressure killer, or null when off.
  umemcg::PressureKiller* pressure_killer() { return killer_.get(); }

  umemcg::Controller& controller() { return *controller_; }
  umemcg::Group& parent() { return *parent_; }
  // The tenant's group, or null.
  umemcg::Group* TenantGroup(std::string_view tenant);
  // The custom memory.stat item counting evictions ("cache_evictions").
  umemcg::StatItem eviction_item() const { return eviction_item_; }

 private:
  TenantCache() = default;
  // The tenant, created on first use (null past max_tenants or bad name).
  Tenant* FindOrCreate(std::string_view tenant, bool create);

  CacheOptions options_;
  std::unique_ptr<umemcg::Controller> controller_;
  umemcg::GroupRef parent_;
  umemcg::StatItem eviction_item_{};
  umemcg::Clock* clock_ = nullptr;  // the controller's
  std::shared_mutex tenants_mu_;    // guards tenants_
  std::map<std::string, std::unique_ptr<Tenant>, std::less<>> tenants_;
  // The pressure killer and the policy holding its kill actions; stopped
  // first in the destructor (a kill may be running on its thread).
  std::unique_ptr<umemcg::OomPolicy> policy_;
  std::unique_ptr<umemcg::PressureKiller> killer_;
};

}  // namespace tenant_cache

#endif  // UMEMCG_EXAMPLES_TENANT_CACHE_TENANT_CACHE_H_

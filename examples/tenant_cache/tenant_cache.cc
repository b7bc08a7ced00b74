// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "tenant_cache.h"

#include <atomic>
#include <list>
#include <map>
#include <memory_resource>
#include <mutex>
#include <string>

#include "umemcg/active.h"
#include "umemcg/memory_resource.h"
#include "umemcg/obj_cgroup.h"

namespace tenant_cache {

using umemcg::Group;
using umemcg::GroupRef;
using umemcg::Pages;
using umemcg::Status;
using umemcg::StatusCode;

namespace {

// Tenant names are group names and protocol tokens.
bool ValidTenantName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return name != "." && name != "..";
}

}  // namespace

// One tenant: its group, the resource charging it, and its LRU (the
// group's Reclaimer).
class Tenant final : public umemcg::Reclaimer {
 public:
  Tenant(std::string name, GroupRef group, umemcg::StatItem eviction_item,
         umemcg::Clock* clock)
      : name_(std::move(name)),
        group_(std::move(group)),
        eviction_item_(eviction_item),
        clock_(clock),
        resource_(*group_),
        lru_(&resource_),
        index_(&resource_) {}

  ~Tenant() override {
    // After this no reclaim walk calls us; then the entries are freed
    // (uncharged) before the resource drops its objcg reference.
    (void)group_->RemoveReclaimer(this);
    index_.clear();
    lru_.clear();
  }

  const std::string& name() const { return name_; }
  Group& group() { return *group_; }
  uint64_t items() const { return items_.load(std::memory_order_relaxed); }
  uint64_t evictions() const {
    return evictions_.load(std::memory_order_relaxed);
  }
  uint64_t pressure_kills() const {
    return pressure_kills_.load(std::memory_order_relaxed);
  }
  bool suspended() const {
    return clock_->Now().count() <
           suspended_until_ns_.load(std::memory_order_relaxed);
  }

  // The pressure killer's kill action: every item dropped (uncharged) and
  // sets refused for `suspend`.
  void Kill(std::chrono::nanoseconds suspend) {
    suspended_until_ns_.store((clock_->Now() + suspend).count(),
                              std::memory_order_relaxed);
    pressure_kills_.fetch_add(1, std::memory_order_relaxed);
    Lru gone(&resource_);
    Index gone_index(&resource_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      gone.splice(gone.begin(), lru_);
      gone_index.swap(index_);
      bytes_ = 0;
      items_.store(0, std::memory_order_relaxed);
    }
    // Freed here, outside mu_.
  }

  SetResult Set(std::string_view key, std::string_view value, uint32_t flags) {
    if (suspended()) return SetResult::kSuspended;
    // Everything that allocates (and so may charge, reclaim and evict,
    // from this tenant too) happens before taking mu_.
    Lru fresh(&resource_);
    Index fresh_index(&resource_);
    try {
      fresh.emplace_back(std::pmr::string(key, &resource_),
                         std::pmr::string(value, &resource_), flags);
      fresh_index.emplace(std::string_view(fresh.back().key), fresh.begin());
    } catch (const std::bad_alloc&) {
      return SetResult::kOutOfMemory;
    }
    const int64_t cost = Cost(fresh.back());
    Lru replaced(&resource_);  // freed after mu_ is released
    Index::node_type replaced_node;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = index_.find(key); it != index_.end()) {
        bytes_ -= Cost(*it->second);
        replaced.splice(replaced.begin(), lru_, it->second);
        replaced_node = index_.extract(it);
      } else {
        items_.fetch_add(1, std::memory_order_relaxed);
      }
      lru_.splice(lru_.begin(), fresh);
      // Node handles move between maps sharing a resource: no allocation.
      index_.insert(fresh_index.extract(fresh_index.begin()));
      bytes_ += cost;
    }
    return SetResult::kStored;
  }

  bool Get(std::string_view key, std::string* value, uint32_t* flags) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    lru_.splice(lru_.begin(), lru_, it->second);  // most recently used
    // `value` is the caller's (the default heap, not this tenant's).
    value->assign(it->second->value);
    *flags = it->second->flags;
    return true;
  }

  bool Delete(std::string_view key) {
    Lru gone(&resource_);
    Index::node_type gone_node;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = index_.find(key);
      if (it == index_.end()) return false;
      bytes_ -= Cost(*it->second);
      gone.splice(gone.begin(), lru_, it->second);
      gone_node = index_.extract(it);
      items_.fetch_sub(1, std::memory_order_relaxed);
    }
    return true;
  }

  // ---- Reclaimer (kernel: a shrinker's count_objects / scan_objects) ----

  Pages Reclaimable() override {
    std::lock_guard<std::mutex> lock(mu_);
    return Pages(static_cast<uint64_t>(bytes_) / umemcg::kPageSize);
  }

  // Evicts least recently used items until `target` pages' worth of
  // bytes were freed. Called by umemcg's reclaim walk, possibly from
  // another tenant's thread (which holds no tenant lock: see Set).
  Pages Reclaim(Pages target) override {
    const uint64_t want = target.in_bytes();
    uint64_t freed = 0;
    uint64_t evicted = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (freed < want && !lru_.empty()) {
        const Entry& victim = lru_.back();
        const int64_t cost = Cost(victim);
        index_.erase(std::string_view(victim.key));
        lru_.pop_back();  // frees: uncharges this tenant's objcg
        bytes_ -= cost;
        freed += static_cast<uint64_t>(cost);
        ++evicted;
      }
      items_.fetch_sub(evicted, std::memory_order_relaxed);
    }
    evictions_.fetch_add(evicted, std::memory_order_relaxed);
    const Pages freed_pages((freed + umemcg::kPageSize - 1) /
                            umemcg::kPageSize);
    // Shown in memory.stat: pages scanned / stolen and items evicted.
    (void)group_->CountEvent(umemcg::StatItem::kPgscan, target.raw());
    (void)group_->CountEvent(umemcg::StatItem::kPgsteal, freed_pages.raw());
    (void)group_->CountEvent(eviction_item_, evicted);
    return freed_pages;
  }

 private:
  struct Entry {
    Entry(std::pmr::string k, std::pmr::string v, uint32_t f)
        : key(std::move(k)), value(std::move(v)), flags(f) {}
    std::pmr::string key;
    std::pmr::string value;
    uint32_t flags;
  };
  using Lru = std::pmr::list<Entry>;  // front: most recently used
  using Index = std::pmr::map<std::string_view, Lru::iterator, std::less<>>;

  // Bytes an entry is charged for: its strings' heap buffers and the two
  // nodes, each with MemoryResource's 16-byte header.
  static int64_t Cost(const Entry& e) {
    constexpr int64_t kNodes = 2 * 16 + sizeof(Entry) + 2 * sizeof(void*) +
                               sizeof(std::string_view) + sizeof(void*) + 32;
    auto heap = [](const std::pmr::string& s) -> int64_t {
      return s.capacity() > 15 ? static_cast<int64_t>(s.capacity()) + 1 + 16
                               : 0;
    };
    return kNodes + heap(e.key) + heap(e.value);
  }

  const std::string name_;
  GroupRef group_;
  const umemcg::StatItem eviction_item_;
  umemcg::Clock* const clock_;
  umemcg::MemoryResource resource_;  // after group_: destroyed before it
  std::mutex mu_;                    // guards lru_, index_, bytes_
  Lru lru_;
  Index index_;
  int64_t bytes_ = 0;
  // Relaxed: statistics only.
  std::atomic<uint64_t> items_{0};
  std::atomic<uint64_t> evictions_{0};
  std::atomic<uint64_t> pressure_kills_{0};
  // Relaxed: a set racing a kill may be stored or refused either way.
  std::atomic<int64_t> suspended_until_ns_{INT64_MIN};
};

umemcg::StatusOr<std::unique_ptr<TenantCache>> TenantCache::Create(
    CacheOptions options) {
  std::unique_ptr<TenantCache> cache(new TenantCache());
  options.controller.custom_stat_items.push_back(
      {"cache_evictions", umemcg::StatUnit::kEvents});
  auto controller = umemcg::Controller::Create(options.controller);
  if (!controller.ok()) return controller.status();
  cache->controller_ = std::move(controller).value();
  cache->eviction_item_ =
      cache->controller_->FindStatItem("cache_evictions").value();
  auto parent =
      cache->controller_->CreateGroup(cache->controller_->root(), "tenants");
  if (!parent.ok()) return parent.status();
  cache->parent_ = std::move(parent).value();
  if (Status s = cache->parent_->WriteFile("memory.max", options.total_max);
      !s.ok()) {
    return s;
  }
  cache->clock_ = options.controller.clock != nullptr ? options.controller.clock
                                                      : umemcg::SystemClock();
  if (options.pressure_kill) {
    const PressureKillOptions& pk = *options.pressure_kill;
    umemcg::OomPolicyOptions po;
    po.clock = cache->clock_;
    cache->policy_ = umemcg::OomPolicy::Create(*cache->controller_, po);
    umemcg::PressureKillerOptions ko;
    ko.interval = pk.interval;
    ko.post_kill_delay = pk.post_kill_delay;
    ko.on_kill = [on_kill = pk.on_kill](const umemcg::PressureKill& k) {
      if (!on_kill) return;
      const std::string path = k.victim->path();
      on_kill(path.substr(path.rfind('/') + 1), k);
    };
    cache->killer_ = umemcg::PressureKiller::Create(*cache->policy_, ko);
    if (Status s = cache->killer_->Watch(
            *cache->parent_,
            {.avg10_limit = pk.avg10_limit, .duration = pk.duration});
        !s.ok()) {
      return s;
    }
  }
  cache->options_ = std::move(options);
  return cache;
}

TenantCache::~TenantCache() {
  // No kill may run while tenants go.
  killer_.reset();
  policy_.reset();
  for (auto& [name, tenant] : tenants_) {
    GroupRef group(&tenant->group());
    tenant.reset();
    (void)controller_->RemoveGroup(*group);
  }
  tenants_.clear();
  if (parent_) (void)controller_->RemoveGroup(*parent_);
  parent_.reset();
}

Tenant* TenantCache::FindOrCreate(std::string_view name, bool create) {
  {
    std::shared_lock<std::shared_mutex> lock(tenants_mu_);
    if (auto it = tenants_.find(name); it != tenants_.end()) {
      return it->second.get();
    }
  }
  if (!create || !CreateTenant(name).ok()) return nullptr;
  std::shared_lock<std::shared_mutex> lock(tenants_mu_);
  auto it = tenants_.find(name);
  return it == tenants_.end() ? nullptr : it->second.get();
}

Status TenantCache::CreateTenant(std::string_view name) {
  if (!ValidTenantName(name)) {
    return Status(StatusCode::kInvalidArgument, "bad tenant name");
  }
  std::unique_lock<std::shared_mutex> lock(tenants_mu_);
  if (tenants_.count(name) != 0) return Status::Ok();
  if (static_cast<int>(tenants_.size()) >= options_.max_tenants) {
    return Status(StatusCode::kResourceExhausted, "too many tenants");
  }
  auto group = controller_->CreateGroup(*parent_, name);
  if (!group.ok()) return group.status();
  for (auto [file, value] : {std::pair{"memory.max", &options_.tenant_max},
                             std::pair{"memory.high", &options_.tenant_high}}) {
    if (Status s = group.value()->WriteFile(file, *value); !s.ok()) {
      (void)controller_->RemoveGroup(*group.value());
      return s;
    }
  }
  auto tenant = std::make_unique<Tenant>(std::string(name), group.value(),
                                         eviction_item_, clock_);
  if (Status s = group.value()->AddReclaimer(tenant.get()); !s.ok()) {
    return s;
  }
  if (policy_ != nullptr) {
    // The tenant outlives the action: the killer stops before tenants go.
    (void)policy_->SetKillAction(
        *group.value(),
        [t = tenant.get(), suspend = options_.pressure_kill->suspend](Group&) {
          t->Kill(suspend);
          return uint64_t{1};  // one tenant's work stopped
        });
  }
  tenants_.emplace(std::string(name), std::move(tenant));
  return Status::Ok();
}

SetResult TenantCache::Set(std::string_view tenant, std::string_view key,
                           std::string_view value, uint32_t flags) {
  if (value.size() > options_.max_value_bytes) return SetResult::kTooLarge;
  Tenant* t = FindOrCreate(tenant, /*create=*/true);
  if (t == nullptr) return SetResult::kNoTenant;
  return t->Set(key, value, flags);
}

bool TenantCache::Get(std::string_view tenant, std::string_view key,
                      std::string* value, uint32_t* flags) {
  Tenant* t = FindOrCreate(tenant, /*create=*/false);
  return t != nullptr && t->Get(key, value, flags);
}

bool TenantCache::Delete(std::string_view tenant, std::string_view key) {
  Tenant* t = FindOrCreate(tenant, /*create=*/false);
  return t != nullptr && t->Delete(key);
}

bool TenantCache::KillTenant(std::string_view tenant) {
  Tenant* t = FindOrCreate(tenant, /*create=*/false);
  if (t == nullptr) return false;
  t->Kill(options_.pressure_kill ? options_.pressure_kill->suspend
                                 : PressureKillOptions().suspend);
  return true;
}

Group* TenantCache::TenantGroup(std::string_view tenant) {
  if (tenant.empty()) return parent_.get();
  Tenant* t = FindOrCreate(tenant, /*create=*/false);
  return t == nullptr ? nullptr : &t->group();
}

umemcg::StatusOr<std::string> TenantCache::ReadFile(std::string_view tenant,
                                                    std::string_view file) {
  Group* g = TenantGroup(tenant);
  if (g == nullptr) return Status(StatusCode::kNotFound, "no such tenant");
  return g->ReadFile(file);
}

Status TenantCache::WriteFile(std::string_view tenant, std::string_view file,
                              std::string_view text) {
  Group* g = TenantGroup(tenant);
  if (g == nullptr) return Status(StatusCode::kNotFound, "no such tenant");
  return g->WriteFile(file, text);
}

std::vector<TenantStats> TenantCache::Stats() {
  std::vector<TenantStats> out;
  std::shared_lock<std::shared_mutex> lock(tenants_mu_);
  for (auto& [name, t] : tenants_) {
    TenantStats s;
    s.name = name;
    s.items = t->items();
    s.evictions = t->evictions();
    s.bytes = t->group().Stat(umemcg::StatItem::kSlabUnreclaimable);
    s.usage_pages = t->group().usage().raw();
    s.pressure_kills = t->pressure_kills();
    s.suspended = t->suspended();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tenant_cache

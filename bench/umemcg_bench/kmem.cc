// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// kmem (C, docs/benchmarks.md): the kmem_cache alloc/free loop.
//
// One thread (default): --iterations (1,400,000) x { charge the object's
// bytes to the group's objcg (ObjCgroup::Charge, moving
// slab_unreclaimable), malloc it (glibc: close to a slab alloc in cost),
// record the objcg in it (the slab's per-object vector); uncharge, free },
// 64-byte objects (--object-size). Variants:
//   unaccounted  malloc + free only;
//   immediate    statistic deltas applied per object (obj_stat_cache =
//                false: before the kernel series);
//   cached       deltas cached in the object stock (after it);
//   per-thread, per-leaf-quantum  other systems' designs (peers.h), byte
//                granular, no statistics.
// The accounted variants run at every --batch (default 64); the kernel
// saw no difference between 32 and 64 here ([K3]).
//
// --threads N (or --variant percpu / shared-pool): N pinned threads, 4 KiB
// objects (--object-size), alloc+free pairs for --seconds, one group:
//   percpu       per-CPU object stocks (obj_stock = true);
//   shared-pool  every charge through the objcg's shared byte pool
//                (obj_stock = false: the pre-series contended
//                nr_charged_bytes line, [K6]);
//   unaccounted  malloc + free only;
//   per-thread, per-leaf-quantum  as above.
//
// Fields: ns_per_op (per alloc+free pair and thread), time_vs_unaccounted,
// for cached time_vs_immediate (same batch), on_cpu (the lowest on-CPU
// share of the timed threads), slack_pages (accounted but not in use once
// every object is freed: the group's usage for umemcg, untracked bytes or
// reservations for the peers) and slack_bound_pages.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness.h"
#include "peers.h"
#include "scenarios.h"

namespace umemcg::bench {
namespace {

// Keeps `p` (and the stores through it) alive for the optimizer: without
// it a malloc/free pair may be elided.
inline void Escape(void* p) { asm volatile("" : : "r"(p) : "memory"); }

struct KmemFixture {
  std::unique_ptr<Controller> ctrl;
  std::vector<GroupRef> groups;
  ObjCgroupRef objcg;
};

StatusOr<KmemFixture> MakeFixture(ControllerOptions o) {
  KmemFixture f;
  auto c = MakeController(std::move(o));
  if (!c.ok()) return c.status();
  f.ctrl = std::move(c).value();
  auto chain = MakeChain(*f.ctrl, 1, Pages(0));
  if (!chain.ok()) return chain.status();
  f.groups = std::move(chain).value();
  f.objcg = f.groups[0]->GetObjCgroup();
  return f;
}

// Accounted but not in use once every object was freed: the group's
// usage (page stocks, object stocks' partial pages, the objcg pool), and
// the most it can be (nr_cpus x (batch + the object stock's slots of up to
// 16 pages each)).
void AddSlack(KmemFixture& f, Sample& s) {
  s.fields["slack_pages"] = static_cast<double>(f.groups[0]->usage().raw());
  const ControllerInfo& info = f.ctrl->info();
  s.fields["slack_bound_pages"] =
      static_cast<double>(f.groups[0]->StockSlackBound().raw()) +
      info.nr_cpus * info.obj_stock_slots * 16.0;
}

// The peers' designs on one leaf below two shared levels.
struct Peers {
  explicit Peers(int threads) : slots(threads + 1) {}
  TrackerChain chain{2, 1};
  UntrackedSlots slots;
  QuantumPools pools{2, 1};
  PerThreadAccountant per_thread() { return {&slots, chain.leaf(0)}; }
  QuantumAccountant quantum() { return {pools.leaf(0)}; }
  // Slack of `variant`, then settles and checks the balance.
  Status Finish(const std::string& variant, int threads, Sample& s) {
    if (variant == "per-thread") {
      s.fields["slack_pages"] =
          static_cast<double>(slots.SlackBytes()) / kPageSize;
      s.fields["slack_bound_pages"] =
          static_cast<double>(threads) * kUntrackedLimit / kPageSize;
      slots.Settle();
      if (!chain.Balanced()) return Failed("per-thread trackers not balanced");
    } else {
      s.fields["slack_pages"] =
          static_cast<double>(pools.SlackBytes()) / kPageSize;
      s.fields["slack_bound_pages"] = 2.0 * kQuantum / kPageSize;
      pools.Settle();
      if (!pools.Balanced()) return Failed("quantum pools not balanced");
    }
    return Status::Ok();
  }
};

bool IsPeer(const std::string& v) {
  return v == "per-thread" || v == "per-leaf-quantum";
}

// Releases the objcg and checks the balance (every object was freed).
Status Finish(KmemFixture& f) {
  Status s = CheckBalanced(*f.ctrl, f.groups);
  if (s.ok() && f.objcg->pooled().raw() != 0) {
    s = Failed("objcg pool holds " + std::to_string(f.objcg->pooled().raw()) +
               " bytes after every object was freed");
  }
  if (s.ok() && f.ctrl->root().StatExact(StatItem::kSlabUnreclaimable) != 0) {
    s = Failed("slab_unreclaimable not back to zero");
  }
  f.objcg.reset();
  return s;
}

// One alloc+free pair; false if the charge failed.
inline bool AccountedPair(ObjCgroup* objcg, uint64_t size) {
  if (!objcg->Charge(Bytes(size)).ok()) return false;
  void* p = std::malloc(size);
  *static_cast<ObjCgroup**>(p) = objcg;  // the slab's objcg vector
  Escape(p);
  objcg->Uncharge(Bytes(size));
  std::free(p);
  return true;
}
template <typename Accountant>
inline void PeerPair(Accountant& a, uint64_t size) {
  a.ChargeBytes(size);
  void* p = std::malloc(size);
  *static_cast<void**>(p) = &a;  // the owner, as the slab's vector
  Escape(p);
  a.UnchargeBytes(size);
  std::free(p);
}
inline void UnaccountedPair(uint64_t size) {
  void* p = std::malloc(size);
  *static_cast<void**>(p) = nullptr;
  Escape(p);
  std::free(p);
}

StatusOr<Sample> RunLoop(const std::string& variant, int batch, uint64_t size,
                         uint64_t iterations, bool pin) {
  ScopedCpuPin pin_here(CpuForThread(0, pin));
  KmemFixture f;
  Peers peers(1);
  if (variant != "unaccounted" && !IsPeer(variant)) {
    ControllerOptions o = BatchOptions(batch);
    o.obj_stat_cache = variant == "cached";
    auto fx = MakeFixture(std::move(o));
    if (!fx.ok()) return fx.status();
    f = std::move(fx).value();
  }
  ObjCgroup* objcg = f.objcg.get();
  const double cpu0 = ThreadCpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  bool ok = true;
  if (variant == "per-thread") {
    PerThreadAccountant a = peers.per_thread();
    for (uint64_t i = 0; i < iterations; ++i) PeerPair(a, size);
  } else if (variant == "per-leaf-quantum") {
    QuantumAccountant a = peers.quantum();
    for (uint64_t i = 0; i < iterations; ++i) PeerPair(a, size);
  } else if (objcg == nullptr) {
    for (uint64_t i = 0; i < iterations; ++i) UnaccountedPair(size);
  } else {
    for (uint64_t i = 0; i < iterations; ++i) ok &= AccountedPair(objcg, size);
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  const double cpu = ThreadCpuSeconds() - cpu0;
  if (!ok) return Failed("an object charge failed");
  Sample s;
  if (f.ctrl != nullptr) {
    AddSlack(f, s);
    if (Status st = Finish(f); !st.ok()) return st;
  } else if (IsPeer(variant)) {
    if (Status st = peers.Finish(variant, 1, s); !st.ok()) return st;
  }
  s.ops = static_cast<double>(iterations);
  s.seconds = secs;
  s.fields["on_cpu"] = secs > 0 ? std::min(1.0, cpu / secs) : 0;
  s.fields["ns_per_op"] = secs * 1e9 / static_cast<double>(iterations);
  s.fields["ms_total"] = secs * 1e3;
  return s;
}

StatusOr<Sample> RunThreads(const std::string& variant, int threads,
                            uint64_t size, int batch, const Params& p) {
  KmemFixture f;
  Peers peers(threads);
  if (variant != "unaccounted" && !IsPeer(variant)) {
    ControllerOptions o = BatchOptions(batch);
    o.obj_stock = variant == "percpu";
    auto fx = MakeFixture(std::move(o));
    if (!fx.ok()) return fx.status();
    f = std::move(fx).value();
  }
  ObjCgroup* objcg = f.objcg.get();
  struct alignas(64) Count {
    uint64_t ops = 0;
    bool failed = false;
  };
  std::vector<Count> counts(static_cast<size_t>(threads));
  double on_cpu = 0;
  const double secs = RunTimed(
      threads, p.pin, p.seconds,
      [&](int i, const std::atomic<bool>& stop) {
        Count& c = counts[static_cast<size_t>(i)];
        PerThreadAccountant per_thread = peers.per_thread();
        QuantumAccountant quantum = peers.quantum();
        while (KeepRunning(stop, c.ops)) {
          if (variant == "per-thread") {
            PeerPair(per_thread, size);
          } else if (variant == "per-leaf-quantum") {
            PeerPair(quantum, size);
          } else if (objcg == nullptr) {
            UnaccountedPair(size);
          } else if (!AccountedPair(objcg, size)) {
            c.failed = true;
            return;
          }
          ++c.ops;
        }
      },
      &on_cpu);
  Sample s;
  s.seconds = secs;
  s.fields["on_cpu"] = on_cpu;
  for (const Count& c : counts) {
    if (c.failed) return Failed("an object charge failed");
    s.ops += static_cast<double>(c.ops);
  }
  if (f.ctrl != nullptr) {
    AddSlack(f, s);
    if (Status st = Finish(f); !st.ok()) return st;
  } else if (IsPeer(variant)) {
    if (Status st = peers.Finish(variant, threads, s); !st.ok()) return st;
  }
  s.fields["ns_per_op"] = s.ops > 0 ? secs * 1e9 * threads / s.ops : 0;
  return s;
}

}  // namespace

StatusOr<std::vector<Result>> RunKmem(const Params& p) {
  const bool multi =
      p.threads > 0 || std::any_of(p.variants.begin(), p.variants.end(),
                                   [](const std::string& v) {
                                     return v == "percpu" || v == "shared-pool";
                                   });
  const std::vector<std::string> peer_variants = {"per-thread",
                                                  "per-leaf-quantum"};
  const std::vector<int> batches =
      p.batches.empty() ? std::vector<int>{64} : p.batches;
  std::vector<Config> configs;
  if (!multi) {
    const uint64_t size = p.object_size > 0 ? p.object_size : 64;
    const std::vector<std::string> defaults = {
        "unaccounted", "immediate", "cached", "per-thread", "per-leaf-quantum"};
    if (Wanted(p, "unaccounted", defaults)) {
      configs.push_back({"unaccounted", 0, 1, 1, "", [=] {
                           return RunLoop("unaccounted", 0, size, p.iterations,
                                          p.pin);
                         }});
    }
    for (const std::string& v : peer_variants) {
      if (!Wanted(p, v, defaults)) continue;
      configs.push_back({v, 0, 1, 1, "", [=] {
                           return RunLoop(v, 0, size, p.iterations, p.pin);
                         }});
    }
    for (int b : batches) {
      for (const char* v : {"immediate", "cached"}) {
        if (!Wanted(p, v, defaults)) continue;
        const std::string variant = v;
        configs.push_back(
            {variant, b, 1, 1, "",
             [=] { return RunLoop(variant, b, size, p.iterations, p.pin); }});
      }
    }
  } else {
    const int n =
        p.threads > 0 ? p.threads : static_cast<int>(AllowedCpus().size());
    const uint64_t size = p.object_size > 0 ? p.object_size : 4096;
    const std::vector<std::string> defaults = {"unaccounted", "percpu",
                                               "shared-pool", "per-thread",
                                               "per-leaf-quantum"};
    for (const char* v : {"unaccounted", "percpu", "shared-pool", "per-thread",
                          "per-leaf-quantum"}) {
      if (!Wanted(p, v, defaults)) continue;
      const std::string variant = v;
      const int b =
          variant == "unaccounted" || IsPeer(variant) ? 0 : batches.front();
      configs.push_back({variant, b, n, 1, "",
                         [=] { return RunThreads(variant, n, size, b, p); }});
    }
  }
  auto results = RunInterleaved("kmem", std::move(configs), p);
  if (!results.ok()) return results;
  std::vector<Result>& rs = results.value();
  const uint64_t size = p.object_size > 0 ? p.object_size : (multi ? 4096 : 64);
  for (Result& r : rs) {
    r.fields["object_size"] = static_cast<double>(size);
    for (const Result& o : rs) {
      if (o.threads != r.threads) continue;
      if (o.variant == "unaccounted") {
        r.fields["time_vs_unaccounted"] =
            r.field("ns_per_op") / o.field("ns_per_op");
      }
      if (r.variant == "cached" && o.variant == "immediate" &&
          o.batch == r.batch) {
        r.fields["time_vs_immediate"] =
            r.field("ns_per_op") / o.field("ns_per_op");
      }
    }
  }
  AddOverheads(rs);
  return results;
}

}  // namespace umemcg::bench

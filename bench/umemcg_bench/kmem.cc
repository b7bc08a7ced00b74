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
//   cached       deltas cached in the object stock (after it).
// The accounted variants run at every --batch (default 64); the kernel
// saw no difference between 32 and 64 here ([K3]).
//
// --threads N (or --variant percpu / shared-pool): N pinned threads, 4 KiB
// objects (--object-size), alloc+free pairs for --seconds, one group:
//   percpu       per-CPU object stocks (obj_stock = true);
//   shared-pool  every charge through the objcg's shared byte pool
//                (obj_stock = false: the pre-series contended
//                nr_charged_bytes line, [K6]);
//   unaccounted  malloc + free only.
//
// Fields: ns_per_op (per alloc+free pair and thread), time_vs_unaccounted,
// and for cached time_vs_immediate (same batch).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness.h"
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
  if (variant != "unaccounted") {
    auto fx =
        MakeFixture({.batch = batch, .obj_stat_cache = variant == "cached"});
    if (!fx.ok()) return fx.status();
    f = std::move(fx).value();
  }
  ObjCgroup* objcg = f.objcg.get();
  const auto t0 = std::chrono::steady_clock::now();
  bool ok = true;
  if (objcg == nullptr) {
    for (uint64_t i = 0; i < iterations; ++i) UnaccountedPair(size);
  } else {
    for (uint64_t i = 0; i < iterations; ++i) ok &= AccountedPair(objcg, size);
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  if (!ok) return Failed("an object charge failed");
  if (f.ctrl != nullptr) {
    if (Status s = Finish(f); !s.ok()) return s;
  }
  Sample s;
  s.ops = static_cast<double>(iterations);
  s.seconds = secs;
  s.fields["ns_per_op"] = secs * 1e9 / static_cast<double>(iterations);
  s.fields["ms_total"] = secs * 1e3;
  return s;
}

StatusOr<Sample> RunThreads(const std::string& variant, int threads,
                            uint64_t size, int batch, const Params& p) {
  KmemFixture f;
  if (variant != "unaccounted") {
    auto fx = MakeFixture({.batch = batch, .obj_stock = variant == "percpu"});
    if (!fx.ok()) return fx.status();
    f = std::move(fx).value();
  }
  ObjCgroup* objcg = f.objcg.get();
  struct alignas(64) Count {
    uint64_t ops = 0;
    bool failed = false;
  };
  std::vector<Count> counts(static_cast<size_t>(threads));
  const double secs = RunTimed(threads, p.pin, p.seconds,
                               [&](int i, const std::atomic<bool>& stop) {
                                 Count& c = counts[static_cast<size_t>(i)];
                                 while (KeepRunning(stop, c.ops)) {
                                   if (objcg == nullptr) {
                                     UnaccountedPair(size);
                                   } else if (!AccountedPair(objcg, size)) {
                                     c.failed = true;
                                     return;
                                   }
                                   ++c.ops;
                                 }
                               });
  Sample s;
  s.seconds = secs;
  for (const Count& c : counts) {
    if (c.failed) return Failed("an object charge failed");
    s.ops += static_cast<double>(c.ops);
  }
  if (f.ctrl != nullptr) {
    if (Status st = Finish(f); !st.ok()) return st;
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
  const std::vector<int> batches =
      p.batches.empty() ? std::vector<int>{64} : p.batches;
  std::vector<Config> configs;
  if (!multi) {
    const uint64_t size = p.object_size > 0 ? p.object_size : 64;
    const std::vector<std::string> defaults = {"unaccounted", "immediate",
                                               "cached"};
    if (Wanted(p, "unaccounted", defaults)) {
      configs.push_back({"unaccounted", 0, 1, 1, "", [=] {
                           return RunLoop("unaccounted", 0, size, p.iterations,
                                          p.pin);
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
                                               "shared-pool"};
    for (const char* v : {"unaccounted", "percpu", "shared-pool"}) {
      if (!Wanted(p, v, defaults)) continue;
      const std::string variant = v;
      const int b = variant == "unaccounted" ? 0 : batches.front();
      configs.push_back({variant, b, n, 1, "",
                         [=] { return RunThreads(variant, n, size, b, p); }});
    }
  }
  auto results =
      RunInterleaved("kmem", std::move(configs), p.repeat, p.progress);
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

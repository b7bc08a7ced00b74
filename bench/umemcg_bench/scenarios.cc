// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "scenarios.h"

#include <algorithm>

namespace umemcg::bench {

const std::vector<std::string>& ScenarioNames() {
  static const std::vector<std::string> names = {
      "sendfile",  "multitenant",   "pagefault1", "pagefault2", "pagefault3",
      "fallocate", "kmem",          "statread",   "scale",      "alloc",
#ifdef UMEMCG_BENCH_HAVE_CLUSTER
      "cluster",   "cluster-chaos",
#endif
  };
  return names;
}

std::vector<std::string> ScenarioVariants(const std::string& scenario) {
  if (scenario == "sendfile") {
    return {"umemcg", "unaccounted", "naive", "per-thread", "per-leaf-quantum"};
  }
  if (scenario == "multitenant") {
    std::vector<std::string> v = {"unaccounted", "per-thread",
                                  "per-leaf-quantum"};
    for (int s = 1; s <= 16; ++s) v.push_back(Numbered("slots", s));
    return v;
  }
  if (scenario.rfind("pagefault", 0) == 0 || scenario == "fallocate") {
    return {"unaccounted", "global", "pergroup", "naive-walk"};
  }
  if (scenario == "kmem") {
    return {"unaccounted", "immediate",  "cached",          "percpu",
            "shared-pool", "per-thread", "per-leaf-quantum"};
  }
  if (scenario == "statread") return {"global+whole-tree", "pergroup+subtree"};
  if (scenario == "scale") return {"small", "large"};
  if (scenario == "alloc") {
    return {"glibc",           "header-glibc",    "jemalloc",
            "jemalloc-routed", "header-jemalloc", "jemalloc-arenas",
            "preload",         "preload-jemalloc"};
  }
  if (scenario == "cluster") return {"lease", "per-charge", "local", "drain"};
#ifdef UMEMCG_BENCH_HAVE_CLUSTER
  if (scenario == "cluster-chaos") return ChaosFaults();
#endif
  return {};
}

size_t BatchesMeasured(const std::string& scenario, const Params& p) {
  if (scenario == "sendfile" || (scenario == "kmem" && p.threads == 0)) {
    return p.batches.size();
  }
  const bool batched = scenario == "multitenant" || scenario == "kmem" ||
                       scenario == "fallocate" ||
                       scenario.rfind("pagefault", 0) == 0;
  return batched ? std::min<size_t>(p.batches.size(), 1) : 0;
}

bool Wanted(const Params& p, const std::string& variant,
            const std::vector<std::string>& defaults) {
  const std::vector<std::string>& set =
      p.variants.empty() ? defaults : p.variants;
  return std::find(set.begin(), set.end(), variant) != set.end();
}

StatusOr<std::vector<Result>> RunScenario(const std::string& name,
                                          const Params& p) {
  if (name == "sendfile") return RunSendfile(p);
  if (name == "multitenant") return RunMultitenant(p);
  if (name == "pagefault1" || name == "pagefault2" || name == "pagefault3" ||
      name == "fallocate") {
    return RunPagefault(name, p);
  }
  if (name == "kmem") return RunKmem(p);
  if (name == "statread") return RunStatread(p);
  if (name == "scale") return RunScale(p);
  if (name == "alloc") return RunAlloc(p);
#ifdef UMEMCG_BENCH_HAVE_CLUSTER
  if (name == "cluster") return RunCluster(p);
  if (name == "cluster-chaos") return RunClusterChaos(p);
#endif
  return Status(StatusCode::kInvalidArgument, "unknown scenario " + name);
}

}  // namespace umemcg::bench

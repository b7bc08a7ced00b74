// A consumer of the installed package: the core, the metrics component and
// (WITH_FUSE, WITH_CLUSTER) the fuse and cluster components, through the
// public headers only. Exits 0 when everything behaves; prints what did not
// otherwise.

#include <unistd.h>

#include <cstdio>
#include <string>

#include "umemcg/metrics.h"
#include "umemcg/umemcg.h"
#ifdef WITH_CLUSTER
#include "umemcg/cluster.h"
#endif
#ifdef WITH_FUSE
#include "umemcg/fuse.h"
#endif

namespace {

int failures = 0;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main() {
  auto ctrl = umemcg::Controller::Create({.batch = 64}).value();
  umemcg::GroupRef tenant = ctrl->CreateGroup(ctrl->root(), "tenant").value();
  Check(tenant->SetMax(umemcg::Pages(256)).ok(), "SetMax");
  Check(tenant->TryCharge(umemcg::Pages(3)).ok(), "TryCharge");
  Check(!tenant->TryCharge(umemcg::Pages(1000)).ok(), "over max refused");
  Check(tenant->ReadFile("memory.max").value() == "1048576\n", "memory.max");
  tenant->Uncharge(umemcg::Pages(3));
  ctrl->DrainAllStocks(ctrl->root());
  Check(tenant->usage().raw() == 0, "usage back to 0");

  // Component metrics: the Prometheus text of the controller's tree.
  const std::string text =
      umemcg::FormatPrometheus(umemcg::CollectMetrics(*ctrl));
  Check(text.find("umemcg_memory_max_bytes{group=\"tenant\"} 1048576") !=
            std::string::npos,
        "Prometheus text");

#ifdef WITH_FUSE
  // Component fuse: linked and callable (a missing directory is refused
  // before any mount is tried).
  auto mount = umemcg::MountFs(*ctrl, "/nonexistent/umemcg-consumer");
  Check(!mount.ok(), "MountFs on a missing directory fails");
#endif
#ifdef WITH_CLUSTER
  // Component cluster: linked and callable (rediss:// is refused before
  // any connection is tried).
  auto cluster =
      umemcg::Cluster::Connect({.redis_url = "rediss://127.0.0.1:1/0"});
  Check(cluster.status().code() == umemcg::StatusCode::kFailedPrecondition,
        "Cluster::Connect refuses rediss://");
#endif
#ifdef PRELOAD_PATH
  Check(::access(PRELOAD_PATH, R_OK) == 0, "umemcg::preload names a file");
#endif
  if (failures == 0) std::printf("consumer (find_package): ok\n");
  return failures == 0 ? 0 : 1;
}

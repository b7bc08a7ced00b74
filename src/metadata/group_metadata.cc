// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// A group's own statistics charged to its parent as "percpu" (see
// group_metadata.h).

#include "metadata/group_metadata.h"

#include <algorithm>
#include <string>

namespace umemcg::internal {

namespace {

// glibc's chunk for a request of `n` bytes: n plus the 8-byte header,
// rounded up to 16, at least 32 (request2size), what the footprint formula
// counts.
uint64_t Chunk(size_t n) {
  return std::max<uint64_t>(
      32, (static_cast<uint64_t>(n) + 8 + 15) & ~uint64_t{15});
}

}  // namespace

uint64_t GroupMetadata::Bytes(int nr_shards, size_t stats_bytes,
                              size_t block_bytes) {
  return Chunk(stats_bytes) +
         static_cast<uint64_t>(nr_shards) * Chunk(block_bytes);
}

StatusOr<ObjCgroup*> GroupMetadata::Charge(Group& parent, uint64_t bytes) {
  ObjCgroupRef objcg = parent.GetObjCgroup();
  if (!objcg) {
    return Status(StatusCode::kFailedPrecondition, "parent was removed");
  }
  // Kernel: GFP_KERNEL_ACCOUNT, so reclaim first; a new group is not worth
  // an OOM kill here (kRetryMayFail), mkdir answers ENOMEM instead.
  const ChargeResult r = objcg->ChargeViaPool(
      bytes, kChargeDefault | ChargeFlags::kRetryMayFail, StatItem::kPercpu);
  if (!r.ok()) {
    if (r.code == StatusCode::kAgain) {
      return Status(StatusCode::kAgain,
                    "the parent's external limit is unavailable");
    }
    if (r.code == StatusCode::kResourceExhausted) {
      return Status(
          StatusCode::kResourceExhausted,
          "the new group's statistics do not fit under the "
          "memory.max of '" +
              (r.limited_by != nullptr ? r.limited_by->path() : parent.path()) +
              "'");
    }
    return Status(r.code, "cannot charge the new group's statistics");
  }
  ObjCgroup* o = objcg.get();
  o->Get();  // kept by the group until it is freed
  return o;
}

void GroupMetadata::Uncharge(ObjCgroup* objcg, uint64_t bytes) {
  if (objcg == nullptr) return;
  objcg->UnchargeViaPool(bytes, StatItem::kPercpu);
  objcg->Put();
}

}  // namespace umemcg::internal

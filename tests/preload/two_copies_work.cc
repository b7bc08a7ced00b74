// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "two_copies_work.h"

#include <cstdio>
#include <string>

#include "port/rseq.h"
#include "umemcg/active.h"
#include "umemcg/group.h"
#include "umemcg/obj_cgroup.h"

namespace umemcg::two_copies {
namespace {

void* TcbDtv() {
  return static_cast<void* const*>(__builtin_thread_pointer())[1];
}

}  // namespace

void Work(Controller& ctrl, Group& group, WorkResult* out) {
#if UMEMCG_HAVE_RSEQ_COMMIT
  out->copy_offset = static_cast<long>(internal::rseq_area_offset);
#endif
#if UMEMCG_HAVE_RSEQ
  out->glibc_offset = static_cast<long>(__rseq_offset);
#endif
  void* const dtv = TcbDtv();
  std::string error;
  auto check = [&](bool ok, const char* what) {
    if (!ok && error.empty()) error = what;
  };
  auto check_dtv = [&](const char* step) {
    if (TcbDtv() != dtv && error.empty()) {
      error = std::string("the TCB's dtv changed during: ") + step;
    }
  };
  ctrl.DrainAllStocks(ctrl.root());
  const uint64_t usage0 = group.usage().raw();
  // Pages through the charge stock: the first charge refills this CPU's
  // stock, the rest are rseq hits.
  for (int i = 0; i < 2000; ++i) {
    check(group.TryCharge(Pages(1), kChargeAtomic).ok(), "TryCharge failed");
    group.Uncharge(Pages(1));
  }
  check_dtv("page charges");
  // Bytes through the object stock (its rseq hits).
  ObjCgroupRef objcg = ObjCgroupFor(group);
  for (int i = 0; i < 2000; ++i) {
    check(objcg->Charge(Bytes(64), kChargeAtomic).ok(), "Charge failed");
    objcg->Uncharge(Bytes(64));
  }
  check_dtv("byte charges");
  // Hold some pages so that the limits below are under usage.
  check(group.TryCharge(Pages(256), kChargeAtomic).ok(), "TryCharge 256");
  ctrl.DrainAllStocks(ctrl.root());
  check_dtv("drain");
  check(group.usage().raw() == usage0 + 256, "usage after the drain");
  // Below usage: the drain and reclaim such a write runs, then whatever
  // the write returns (the process must live).
  const std::string below = std::to_string((usage0 + 64) * 4096);
  (void)group.WriteFile("memory.high", below);
  check_dtv("memory.high below usage");
  (void)group.WriteFile("memory.max", below);
  check_dtv("memory.max below usage");
  check(group.WriteFile("memory.max", "max").ok(), "restoring memory.max");
  check(group.WriteFile("memory.high", "max").ok(), "restoring memory.high");
  group.UnchargeDirect(Pages(256));
  ctrl.DrainAllStocks(ctrl.root());
  check_dtv("the final drain");
  check(group.usage().raw() == usage0, "usage after uncharging");
#if UMEMCG_HAVE_RSEQ_COMMIT
  out->rseq_commits = internal::RseqCommitAvailable();
#endif
  std::snprintf(out->error, sizeof(out->error), "%s", error.c_str());
}

}  // namespace umemcg::two_copies

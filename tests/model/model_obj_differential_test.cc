// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Differential test of object (byte) accounting: one random single-threaded
// sequence of object charges and frees, group creations and removals
// (reparenting), CPU hops (fake ids, or re-pinning on the real CPUs with
// the statistics' rseq commit on and off) and drains is applied to a real
// Controller and to the naive Model (tests/model), which must agree:
//
//   - After every operation: every objcg points where the model says, and
//     each charge / free returns the model's code.
//   - At quiescent points (DrainAllStocks on the root): every online
//     group's usage equals the model's objcg pages of its subtree, its
//     slab_unreclaimable and kernel (MEMCG_KMEM) statistics equal the model's
//     bytes and pages, and each objcg's pool holds exactly the rest of its last
//     page.
//   - At the end, after freeing everything and dropping every handle,
//     Reap() leaves only the online groups allocated, all usage is zero
//     and no error was reported.
//
// Groups have no limits (the model has none for objects). Covered settings:
// 1, 5 and 16 object stock slots, cached and immediate statistics, and the
// shared-pool variant.

#include <gtest/gtest.h>
#include <sched.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "model/model.h"
#include "umemcg/umemcg.h"

namespace umemcg {
namespace {

using model::GroupId;
using model::kRoot;
using model::Model;

// Which CPUs the controller sees: 3 fake ones (the locked paths), or the
// real ones, with the statistics' rseq commit on or off (the stocks' rseq
// paths where available either way; the test moves between CPUs by
// pinning itself).
enum class Cpus { kFake, kRealRseq, kRealLocked };

struct Setting {
  int slots;
  bool stat_cache;
  bool stock;
  uint64_t seed;
  Cpus cpus = Cpus::kFake;
  BatchPolicy batch_policy = BatchPolicy::kFixed;
};

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {0};
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

void SetAffinity(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

class ObjDifferentialTest : public ::testing::TestWithParam<Setting> {};

struct Obj {
  GroupId objcg;
  uint64_t size;
};

TEST_P(ObjDifferentialTest, AgreesWithTheModel) {
  const Setting setting = GetParam();
  ControllerOptions opts;
  const std::vector<int> allowed = AllowedCpus();
  if (setting.cpus == Cpus::kFake) {
    opts.cpu_source = CpuSource::kFake;
    opts.nr_cpus = 3;
  } else {
    opts.cpu_source = CpuSource::kAuto;
    opts.stats_rseq = setting.cpus == Cpus::kRealRseq;
  }
  opts.obj_stock_slots = setting.slots;
  opts.obj_stat_cache = setting.stat_cache;
  opts.obj_stock = setting.stock;
  opts.batch_policy = setting.batch_policy;
  opts.charge_group_metadata = false;  // the model counts pages exactly
  std::vector<std::string> errors;
  opts.error_hook = [&](const ErrorReport& r) { errors.push_back(r.what); };
  SetFakeCpu(0);
  auto ctrl = Controller::Create(opts).value();
  Model m;
  std::mt19937_64 rng(setting.seed);

  // Index = model id. Groups and objcg handles are kept until the end.
  std::vector<GroupRef> groups{GroupRef(&ctrl->root())};
  std::vector<ObjCgroupRef> objcgs{ctrl->root().GetObjCgroup()};
  std::vector<Obj> live;

  auto quiescent = [&](int step) {
    ctrl->DrainAllStocks(ctrl->root());
    for (GroupId id = 0; id < m.size(); ++id) {
      SCOPED_TRACE("step " + std::to_string(step) + " group " +
                   std::to_string(id));
      ASSERT_EQ(objcgs[id]->group(), groups[m.ObjTarget(id)].get());
      const uint64_t rest =
          m.ObjLive(id).ceil_pages().in_bytes() - m.ObjLive(id).raw();
      EXPECT_EQ(objcgs[id]->pooled().raw(), id == kRoot ? 0 : rest);
      if (!m.online(id)) continue;
      EXPECT_EQ(groups[id]->usage(), m.ObjPages(id));
      EXPECT_EQ(groups[id]->StatExact(StatItem::kSlabUnreclaimable),
                static_cast<int64_t>(m.SlabBytes(id).raw()));
      EXPECT_EQ(groups[id]->StatExact(StatItem::kKernel),
                static_cast<int64_t>(m.ObjPages(id).raw()));
    }
  };

  constexpr int kSteps = 4000;
  for (int step = 0; step < kSteps; ++step) {
    const int op = static_cast<int>(rng() % 100);
    if (op < 5) {
      // Create a child of a random online group (depth <= 3).
      const auto parent = static_cast<GroupId>(rng() % m.size());
      if (!m.online(parent) || m.depth(parent) >= 3) continue;
      const std::string name = "g" + std::to_string(step);
      GroupId id;
      ASSERT_EQ(m.CreateGroup(parent, name, &id), StatusCode::kOk);
      auto g = ctrl->CreateGroup(*groups[parent], name);
      ASSERT_TRUE(g.ok());
      groups.push_back(g.value());
      objcgs.push_back(groups.back()->GetObjCgroup());
      ASSERT_EQ(static_cast<GroupId>(groups.size()) - 1, id);
    } else if (op < 8) {
      if (m.size() < 2) continue;
      const auto id = static_cast<GroupId>(1 + rng() % (m.size() - 1));
      const StatusCode want = m.RemoveGroup(id);
      ASSERT_EQ(ctrl->RemoveGroup(*groups[id]).code(), want);
    } else if (op < 12) {
      const auto cpu = static_cast<int>(rng() % 4);
      SetFakeCpu(cpu);
      if (setting.cpus != Cpus::kFake) {
        SetAffinity({allowed[static_cast<size_t>(cpu) % allowed.size()]});
      }
    } else if (op < 14) {
      quiescent(step);
    } else if (op < 60 || live.empty()) {
      // Charge through any objcg, removed groups' included.
      const auto id = static_cast<GroupId>(rng() % m.size());
      const uint64_t size =
          rng() % 8 == 0 ? rng() % (3 * 4096 + 1) : 1 + rng() % 512;
      const StatusCode want = m.ObjCharge(id, Bytes(size));
      ASSERT_EQ(objcgs[id]->Charge(Bytes(size)).code, want);
      if (size != 0 && id != kRoot) live.push_back({id, size});
    } else {
      const size_t k = rng() % live.size();
      ASSERT_TRUE(m.ObjUncharge(live[k].objcg, Bytes(live[k].size)));
      objcgs[live[k].objcg]->Uncharge(Bytes(live[k].size));
      live[k] = live.back();
      live.pop_back();
    }
    for (GroupId id = 0; id < m.size(); ++id) {
      ASSERT_EQ(objcgs[id]->group(), groups[m.ObjTarget(id)].get());
    }
  }
  quiescent(kSteps);
  for (const Obj& o : live) {
    ASSERT_TRUE(m.ObjUncharge(o.objcg, Bytes(o.size)));
    objcgs[o.objcg]->Uncharge(Bytes(o.size));
  }
  quiescent(kSteps + 1);
  int online = 0;
  for (GroupId id = 0; id < m.size(); ++id) online += m.online(id) ? 1 : 0;
  objcgs.clear();
  groups.clear();
  ctrl->Reap();
  EXPECT_EQ(ctrl->live_groups(), online);
  EXPECT_EQ(ctrl->live_objcgs(), online);
  EXPECT_EQ(ctrl->root().usage(), Pages(0));
  EXPECT_TRUE(errors.empty()) << errors[0];
  EXPECT_TRUE(ctrl->CheckInvariants().ok());
  SetAffinity(allowed);
}

INSTANTIATE_TEST_SUITE_P(
    Settings, ObjDifferentialTest,
    ::testing::Values(Setting{5, true, true, 1}, Setting{1, true, true, 2},
                      Setting{16, true, true, 3}, Setting{5, false, true, 4},
                      Setting{5, true, false, 5}, Setting{2, true, true, 6},
                      Setting{5, true, true, 7, Cpus::kRealRseq},
                      Setting{5, false, true, 8, Cpus::kRealRseq},
                      Setting{5, true, true, 9, Cpus::kRealLocked},
                      Setting{5, true, true, 10, Cpus::kFake,
                              BatchPolicy::kAdaptive}));

}  // namespace
}  // namespace umemcg

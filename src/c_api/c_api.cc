// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The C API (include/umemcg/c.h): thin wrappers over the C++ API. Every
// handle lives in the generation-checked HandleTable; each call acquires
// the handles it uses for its duration, so releasing a handle (or
// destroying its controller) while another thread uses it is safe. The
// file functions are in files.cc; what both share is in c_api_internal.h.

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>

#include "c_api/c_api_internal.h"
#include "c_api/handles.h"
#include "controller_impl.h"
#include "umemcg/active.h"
#include "umemcg/c.h"
#include "umemcg/controller.h"
#include "umemcg/files.h"
#include "umemcg/obj_cgroup.h"

using umemcg::ChargeFlags;
using umemcg::Controller;
using umemcg::Group;
using umemcg::GroupRef;
using umemcg::Pages;
using umemcg::Status;
using umemcg::StatusCode;
using umemcg::internal::HandlePayload;
using umemcg::internal::HandleTable;
using umemcg::internal::capi::AcquireGroup;
using umemcg::internal::capi::As;
using umemcg::internal::capi::CheckGroupArg;
using umemcg::internal::capi::CopyOut;
using umemcg::internal::capi::Err;
using umemcg::internal::capi::FromHandle;
using umemcg::internal::capi::GroupUse;
using umemcg::internal::capi::kMaxNameBytes;
using umemcg::internal::capi::kMaxTextBytes;
using umemcg::internal::capi::NewGroupHandle;
using umemcg::internal::capi::OwnedPayload;
using umemcg::internal::capi::Register;
using umemcg::internal::capi::Registry;
using umemcg::internal::capi::ToHandle;
using umemcg::internal::capi::ValidString;

namespace {

struct ControllerPayload final : HandlePayload {
  std::unique_ptr<Controller> ctrl;
  std::shared_ptr<Registry> registry = std::make_shared<Registry>();
  ~ControllerPayload() override {
    std::vector<uintptr_t> handles;
    {
      std::lock_guard<std::mutex> lock(registry->mu);
      handles.assign(registry->handles.begin(), registry->handles.end());
    }
    for (uintptr_t h : handles) HandleTable::Global().Release(h);
    // Wait for calls still using those handles (they hold GroupRefs).
    while (registry->live.load(std::memory_order_acquire) > 0) {
      std::this_thread::yield();
    }
    ctrl.reset();
  }
};

struct ObjCgroupPayload final : OwnedPayload {
  ObjCgroupPayload(std::shared_ptr<Registry> r, umemcg::ObjCgroupRef o)
      : OwnedPayload(std::move(r)), objcg(std::move(o)) {}
  ~ObjCgroupPayload() override { objcg.reset(); }
  umemcg::ObjCgroupRef objcg;
};

class CReclaimer final : public umemcg::Reclaimer {
 public:
  CReclaimer(const umemcg_reclaimer_ops_t& ops, void* ctx)
      : ops_(ops), ctx_(ctx) {}
  Pages Reclaimable() override { return Pages(ops_.reclaimable(ctx_)); }
  Pages Reclaim(Pages target) override {
    return Pages(ops_.reclaim(ctx_, target.raw()));
  }

 private:
  umemcg_reclaimer_ops_t ops_;
  void* ctx_;
};

struct ReclaimerPayload final : OwnedPayload {
  ReclaimerPayload(std::shared_ptr<Registry> r, GroupRef g,
                   const umemcg_reclaimer_ops_t& ops, void* ctx)
      : OwnedPayload(std::move(r)), group(std::move(g)), reclaimer(ops, ctx) {}
  ~ReclaimerPayload() override {
    // Waits for running reclaim walks: afterwards ctx is not in use.
    (void)group->RemoveReclaimer(&reclaimer);
  }
  GroupRef group;
  CReclaimer reclaimer;
};

ChargeFlags FlagsOf(uint32_t flags) { return static_cast<ChargeFlags>(flags); }

}  // namespace

// ---- Controller ----

extern "C" void umemcg_options_init(umemcg_options_t* options) {
  if (options == nullptr) return;
  const umemcg::ControllerOptions d;
  options->batch = d.batch;
  options->stock_slots = d.stock_slots;
  options->cpu_source = UMEMCG_CPU_AUTO;
  options->nr_cpus = d.nr_cpus;
  options->recursive_protection = d.recursive_protection ? 1 : 0;
  options->local_events = d.local_events ? 1 : 0;
  options->obj_stock_slots = d.obj_stock_slots;
  options->stats_flush_period_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(
          d.stats_flush_period)
          .count();
  options->high_work = UMEMCG_HIGH_WORK_THREAD;
  options->charge_group_metadata = d.charge_group_metadata ? 1 : 0;
}

extern "C" int umemcg_controller_create(const umemcg_options_t* options,
                                        umemcg_controller_t** out) {
  if (out == nullptr) return EINVAL;
  umemcg_options_t o;
  umemcg_options_init(&o);
  if (options != nullptr) o = *options;
  if (o.cpu_source < UMEMCG_CPU_AUTO || o.cpu_source > UMEMCG_CPU_FAKE) {
    return EINVAL;
  }
  umemcg::ControllerOptions opts;
  opts.batch = o.batch;
  opts.stock_slots = o.stock_slots;
  opts.cpu_source = static_cast<umemcg::CpuSource>(o.cpu_source);
  opts.nr_cpus = o.nr_cpus;
  opts.recursive_protection = o.recursive_protection != 0;
  opts.local_events = o.local_events != 0;
  opts.obj_stock_slots = o.obj_stock_slots;
  opts.charge_group_metadata = o.charge_group_metadata != 0;
  if (o.stats_flush_period_ms < 0 || o.stats_flush_period_ms > 3600000) {
    return EINVAL;
  }
  opts.stats_flush_period = std::chrono::milliseconds(o.stats_flush_period_ms);
  switch (o.high_work) {
    case UMEMCG_HIGH_WORK_THREAD:
      opts.high_work = umemcg::HighWorkMode::kThread;
      break;
    case UMEMCG_HIGH_WORK_MANUAL:
      opts.high_work = umemcg::HighWorkMode::kManual;
      break;
    case UMEMCG_HIGH_WORK_NONE:
      opts.high_work = umemcg::HighWorkMode::kNone;
      break;
    default:
      return EINVAL;
  }
  auto ctrl = Controller::Create(std::move(opts));
  if (!ctrl.ok()) return Err(ctrl.status());
  auto payload = std::make_unique<ControllerPayload>();
  payload->ctrl = std::move(ctrl).value();
  const uintptr_t h = HandleTable::Global().Add(std::move(payload));
  if (h == 0) return ENOMEM;
  *out = FromHandle<umemcg_controller_t>(h);
  return 0;
}

extern "C" int umemcg_controller_destroy(umemcg_controller_t* ctrl) {
  if (ctrl == nullptr) return EINVAL;
  {
    HandleTable::Use use = HandleTable::Global().Acquire(ToHandle(ctrl));
    if (As<ControllerPayload>(use) == nullptr) return EBADF;
  }
  return HandleTable::Global().Release(ToHandle(ctrl)) ? 0 : EBADF;
}

extern "C" int umemcg_run_high_work(umemcg_controller_t* ctrl, size_t* ran) {
  if (ctrl == nullptr) return EINVAL;
  HandleTable::Use use = HandleTable::Global().Acquire(ToHandle(ctrl));
  auto* c = As<ControllerPayload>(use);
  if (c == nullptr) return EBADF;
  const size_t n = c->ctrl->RunHighWork();
  if (ran != nullptr) *ran = n;
  return 0;
}

// ---- Groups ----

extern "C" int umemcg_group_root(umemcg_controller_t* ctrl,
                                 umemcg_group_t** out) {
  if (ctrl == nullptr || out == nullptr) return EINVAL;
  HandleTable::Use use = HandleTable::Global().Acquire(ToHandle(ctrl));
  auto* c = As<ControllerPayload>(use);
  if (c == nullptr) return EBADF;
  const uintptr_t h = NewGroupHandle(c->registry, &c->ctrl->root());
  if (h == 0) return ENOMEM;
  *out = FromHandle<umemcg_group_t>(h);
  return 0;
}

extern "C" int umemcg_group_create(umemcg_group_t* parent, const char* name,
                                   umemcg_group_t** out) {
  if (parent == nullptr || out == nullptr || name == nullptr) return EINVAL;
  // NAME_MAX, as the VFS: longer names are ENAMETOOLONG (CreateGroup
  // says the same; checked here first so a huge string is never copied).
  if (!ValidString(name, kMaxNameBytes)) return ENAMETOOLONG;
  GroupUse p = AcquireGroup(parent);
  if (int e = CheckGroupArg(parent, p)) return e;
  auto g = p.group()->controller().CreateGroup(*p.group(), name);
  if (!g.ok()) return Err(g.status());
  const uintptr_t h = NewGroupHandle(p.payload->registry, g->get());
  if (h == 0) return ENOMEM;
  *out = FromHandle<umemcg_group_t>(h);
  return 0;
}

extern "C" int umemcg_group_lookup(umemcg_controller_t* ctrl, const char* path,
                                   umemcg_group_t** out) {
  if (ctrl == nullptr || out == nullptr || path == nullptr) return EINVAL;
  if (!ValidString(path, kMaxTextBytes)) return EINVAL;
  HandleTable::Use use = HandleTable::Global().Acquire(ToHandle(ctrl));
  auto* c = As<ControllerPayload>(use);
  if (c == nullptr) return EBADF;
  auto g = c->ctrl->Lookup(path);
  if (!g.ok()) return Err(g.status());
  const uintptr_t h = NewGroupHandle(c->registry, g->get());
  if (h == 0) return ENOMEM;
  *out = FromHandle<umemcg_group_t>(h);
  return 0;
}

extern "C" int umemcg_group_remove(umemcg_group_t* group) {
  GroupUse g = AcquireGroup(group);
  if (int e = CheckGroupArg(group, g)) return e;
  return Err(g.group()->controller().RemoveGroup(*g.group()));
}

extern "C" int umemcg_group_release(umemcg_group_t* group) {
  if (group == nullptr) return EINVAL;
  {
    GroupUse g = AcquireGroup(group);
    if (g.payload == nullptr) return EBADF;
  }
  return HandleTable::Global().Release(ToHandle(group)) ? 0 : EBADF;
}

extern "C" int umemcg_group_path(umemcg_group_t* group, char* buf, size_t len,
                                 size_t* needed) {
  GroupUse g = AcquireGroup(group);
  if (int e = CheckGroupArg(group, g)) return e;
  return CopyOut(g.group()->path(), buf, len, needed);
}

// ---- Charging ----

extern "C" int umemcg_try_charge(umemcg_group_t* group, uint64_t nr_pages,
                                 uint32_t flags, umemcg_group_t** refused_by) {
  GroupUse g = AcquireGroup(group);
  if (int e = CheckGroupArg(group, g)) return e;
  if (flags >= (1u << 6)) return EINVAL;
  const umemcg::ChargeResult r =
      g.group()->TryCharge(Pages(nr_pages), FlagsOf(flags));
  if (r.ok()) return 0;
  if (refused_by != nullptr && r.limited_by != nullptr) {
    const uintptr_t h = NewGroupHandle(g.payload->registry, r.limited_by);
    if (h != 0) *refused_by = FromHandle<umemcg_group_t>(h);
  }
  return Err(r.code);
}

extern "C" int umemcg_uncharge(umemcg_group_t* group, uint64_t nr_pages) {
  GroupUse g = AcquireGroup(group);
  if (int e = CheckGroupArg(group, g)) return e;
  if (nr_pages > umemcg::kPageCounterMax.raw()) return EINVAL;
  g.group()->Uncharge(Pages(nr_pages));
  return 0;
}

extern "C" int umemcg_uncharge_direct(umemcg_group_t* group,
                                      uint64_t nr_pages) {
  GroupUse g = AcquireGroup(group);
  if (int e = CheckGroupArg(group, g)) return e;
  if (nr_pages > umemcg::kPageCounterMax.raw()) return EINVAL;
  g.group()->UnchargeDirect(Pages(nr_pages));
  return 0;
}

extern "C" int umemcg_drain_all(umemcg_group_t* subtree) {
  GroupUse g = AcquireGroup(subtree);
  if (int e = CheckGroupArg(subtree, g)) return e;
  g.group()->controller().DrainAllStocks(*g.group());
  return 0;
}

// ---- Object accounting ----

namespace {

struct ObjUse {
  HandleTable::Use use;
  ObjCgroupPayload* payload = nullptr;
};

ObjUse AcquireObjCgroup(umemcg_objcg_t* h) {
  ObjUse o{HandleTable::Global().Acquire(ToHandle(h))};
  o.payload = As<ObjCgroupPayload>(o.use);
  return o;
}

// The byte statistic named `item` (NULL: slab_unreclaimable).
bool ObjStatItem(const char* item, umemcg::StatItem* out) {
  if (item == nullptr) {
    *out = umemcg::StatItem::kSlabUnreclaimable;
    return true;
  }
  if (!ValidString(item, kMaxNameBytes)) return false;
  const auto id = umemcg::ParseBuiltinStat(item);
  if (!id || umemcg::BuiltinStatUnit(*id) != umemcg::StatUnit::kBytes) {
    return false;
  }
  *out = *id;
  return true;
}

}  // namespace

extern "C" int umemcg_objcg_get(umemcg_group_t* group, umemcg_objcg_t** out) {
  GroupUse g = AcquireGroup(group);
  if (int e = CheckGroupArg(group, g)) return e;
  if (out == nullptr) return EINVAL;
  umemcg::ObjCgroupRef ref = g.group()->GetObjCgroup();
  if (!ref) return ENODEV;
  const uintptr_t h = Register(
      g.payload->registry,
      std::make_unique<ObjCgroupPayload>(g.payload->registry, std::move(ref)));
  if (h == 0) return ENOMEM;
  *out = FromHandle<umemcg_objcg_t>(h);
  return 0;
}

extern "C" int umemcg_objcg_put(umemcg_objcg_t* objcg) {
  if (objcg == nullptr) return EINVAL;
  {
    ObjUse o = AcquireObjCgroup(objcg);
    if (o.payload == nullptr) return EBADF;
  }
  return HandleTable::Global().Release(ToHandle(objcg)) ? 0 : EBADF;
}

extern "C" int umemcg_obj_charge(umemcg_objcg_t* objcg, uint64_t bytes,
                                 uint32_t flags, const char* item) {
  if (objcg == nullptr) return EINVAL;
  ObjUse o = AcquireObjCgroup(objcg);
  if (o.payload == nullptr) return EBADF;
  umemcg::StatItem stat;
  if (!ObjStatItem(item, &stat) || flags >= (1u << 6)) return EINVAL;
  const umemcg::ChargeResult r =
      o.payload->objcg->Charge(umemcg::Bytes(bytes), FlagsOf(flags), stat);
  return r.ok() ? 0 : Err(r.code);
}

extern "C" int umemcg_obj_uncharge(umemcg_objcg_t* objcg, uint64_t bytes,
                                   const char* item) {
  if (objcg == nullptr) return EINVAL;
  ObjUse o = AcquireObjCgroup(objcg);
  if (o.payload == nullptr) return EBADF;
  umemcg::StatItem stat;
  if (!ObjStatItem(item, &stat)) return EINVAL;
  if (bytes / umemcg::kPageSize > umemcg::kPageCounterMax.raw()) return EINVAL;
  o.payload->objcg->Uncharge(umemcg::Bytes(bytes), stat);
  return 0;
}

// ---- Statistics ----

extern "C" int umemcg_mod_state(umemcg_group_t* group, const char* item,
                                int64_t delta) {
  GroupUse g = AcquireGroup(group);
  if (int e = CheckGroupArg(group, g)) return e;
  if (!ValidString(item, kMaxNameBytes)) return EINVAL;
  const auto id = umemcg::ParseBuiltinStat(item);
  if (!id) return EINVAL;
  if (!g.group()->online()) return ENODEV;
  return g.group()->ModState(*id, delta) ? 0 : EINVAL;
}

// The C constants follow the C++ enum (both come from stat_items.def).
static_assert(UMEMCG_STAT_ANON == static_cast<int>(umemcg::StatItem::kAnon));
static_assert(UMEMCG_STAT_NR_BUILTIN ==
              static_cast<int>(umemcg::kNumBuiltinStatItems));

extern "C" int umemcg_mod_state_item(umemcg_group_t* group, int item,
                                     int64_t delta) {
  GroupUse g = AcquireGroup(group);
  if (int e = CheckGroupArg(group, g)) return e;
  if (item < 0 || item >= UMEMCG_STAT_NR_BUILTIN) return EINVAL;
  if (!g.group()->online()) return ENODEV;
  return g.group()->ModState(static_cast<umemcg::StatItem>(item), delta)
             ? 0
             : EINVAL;
}

extern "C" int umemcg_count_event(umemcg_group_t* group, const char* item,
                                  uint64_t count) {
  if (count > static_cast<uint64_t>(INT64_MAX)) return EINVAL;
  return umemcg_mod_state(group, item, static_cast<int64_t>(count));
}

extern "C" int umemcg_flush(umemcg_group_t* group) {
  GroupUse g = AcquireGroup(group);
  if (int e = CheckGroupArg(group, g)) return e;
  g.group()->FlushStats();
  return 0;
}

// ---- Callbacks ----

extern "C" int umemcg_reclaimer_add(umemcg_group_t* group,
                                    const umemcg_reclaimer_ops_t* ops,
                                    void* ctx, umemcg_reclaimer_t** out) {
  GroupUse g = AcquireGroup(group);
  if (int e = CheckGroupArg(group, g)) return e;
  if (ops == nullptr || ops->reclaimable == nullptr ||
      ops->reclaim == nullptr || out == nullptr) {
    return EINVAL;
  }
  auto payload = std::make_unique<ReclaimerPayload>(
      g.payload->registry, GroupRef(g.group()), *ops, ctx);
  Status s = g.group()->AddReclaimer(&payload->reclaimer);
  if (!s.ok()) return Err(s);
  // On failure the payload is destroyed, which removes the reclaimer.
  const uintptr_t h = Register(g.payload->registry, std::move(payload));
  if (h == 0) return ENOMEM;
  *out = FromHandle<umemcg_reclaimer_t>(h);
  return 0;
}

extern "C" int umemcg_reclaimer_release(umemcg_reclaimer_t* reclaimer) {
  if (reclaimer == nullptr) return EINVAL;
  {
    HandleTable::Use use = HandleTable::Global().Acquire(ToHandle(reclaimer));
    if (As<ReclaimerPayload>(use) == nullptr) return EBADF;
  }
  // From inside a reclaim walk the removal would wait for itself.
  if (umemcg::internal::tls_charge.in_tree_walk > 0) return EDEADLK;
  return HandleTable::Global().Release(ToHandle(reclaimer)) ? 0 : EBADF;
}

namespace {

// A temporary handle for a callback's duration.
class BorrowedHandle {
 public:
  BorrowedHandle(const std::shared_ptr<Registry>& registry, Group* g)
      : h_(g == nullptr ? 0 : NewGroupHandle(registry, g)) {}
  ~BorrowedHandle() {
    if (h_ != 0) HandleTable::Global().Release(h_);
  }
  umemcg_group_t* get() const { return FromHandle<umemcg_group_t>(h_); }

 private:
  uintptr_t h_;
};

// The outcome of the C OOM handler running on this thread, for
// umemcg_oom_report_kill (null outside a handler).
constinit thread_local umemcg::OomOutcome* tls_c_oom = nullptr;

umemcg::OomHandler MakeOomHandler(std::shared_ptr<Registry> registry,
                                  umemcg_oom_fn fn, void* ctx) {
  return [registry, fn, ctx](const umemcg::OomContext& oc) {
    BorrowedHandle over(registry, oc.over_limit);
    BorrowedHandle kill(registry, oc.kill_group);
    umemcg_group_t* killed = nullptr;
    umemcg::OomOutcome out;
    umemcg::OomOutcome* const outer = tls_c_oom;
    tls_c_oom = &out;
    out.progress =
        fn(ctx, over.get(), kill.get(), oc.nr_pages.raw(), &killed) != 0;
    tls_c_oom = outer;
    if (killed != nullptr) {
      // The victim takes its own group reference while the handle is in
      // use here: the handler may release the handle (and remove the
      // group) right after, or another thread may.
      GroupUse k = AcquireGroup(killed);
      if (k.payload != nullptr) out.killed = umemcg::OomVictim(k.group());
    }
    return out;
  };
}

}  // namespace

extern "C" int umemcg_set_oom_handler(umemcg_controller_t* ctrl,
                                      umemcg_oom_fn fn, void* ctx) {
  if (ctrl == nullptr) return EINVAL;
  HandleTable::Use use = HandleTable::Global().Acquire(ToHandle(ctrl));
  auto* c = As<ControllerPayload>(use);
  if (c == nullptr) return EBADF;
  c->ctrl->SetOomHandler(fn == nullptr ? umemcg::OomHandler()
                                       : MakeOomHandler(c->registry, fn, ctx));
  return 0;
}

extern "C" int umemcg_group_set_oom_handler(umemcg_group_t* group,
                                            umemcg_oom_fn fn, void* ctx) {
  GroupUse g = AcquireGroup(group);
  if (int e = CheckGroupArg(group, g)) return e;
  g.group()->SetOomHandler(fn == nullptr
                               ? umemcg::OomHandler()
                               : MakeOomHandler(g.payload->registry, fn, ctx));
  return 0;
}

extern "C" int umemcg_oom_report_kill(umemcg_group_t* victim, uint64_t tasks) {
  if (victim == nullptr || tasks == 0) return EINVAL;
  if (tls_c_oom == nullptr) return EINVAL;  // not inside an OOM handler
  GroupUse g = AcquireGroup(victim);
  if (int e = CheckGroupArg(victim, g)) return e;
  tls_c_oom->victims.emplace_back(g.group(), tasks);
  return 0;
}

extern "C" int umemcg_set_event_callback(umemcg_group_t* group,
                                         umemcg_event_fn fn, void* ctx) {
  GroupUse g = AcquireGroup(group);
  if (int e = CheckGroupArg(group, g)) return e;
  if (fn == nullptr) {
    g.group()->SetEventCallback(nullptr);
    return 0;
  }
  std::shared_ptr<Registry> registry = g.payload->registry;
  g.group()->SetEventCallback(
      [registry, fn, ctx](Group& grp, umemcg::MemoryEvent e, bool local) {
        BorrowedHandle h(registry, &grp);
        fn(ctx, h.get(), umemcg::MemoryEventName(e), local ? 1 : 0);
      });
  return 0;
}

// ---- Errors ----

extern "C" const char* umemcg_strerror(int err) {
  switch (err) {
    case 0:
      return "success";
    case EINVAL:
      return "invalid argument or syntax";
    case EBADF:
      return "stale or released handle";
    case ENOENT:
      return "no such group or file";
    case EEXIST:
      return "a group or control file with that name exists";
    case ENAMETOOLONG:
      return "group name longer than 255 bytes";
    case E2BIG:
      return "write longer than 4096 bytes";
    case ESRCH:
      return "no such registered thread or process";
    case EBUSY:
      return "group has children (or the memory controller is in use)";
    case ENODEV:
      return "group was removed";
    case ENOMEM:
      return "charge refused: over the memory limit";
    case EAGAIN:
      return "could not reclaim enough, try again";
    case EACCES:
      return "file is read-only (or write-only)";
    case ERANGE:
      return "value out of range, or buffer too small";
    case EDEADLK:
      return "called from inside a callback it would wait for";
    default:
      return "unknown error";
  }
}

extern "C" int umemcg_register_thread(void) {
  umemcg::RegisterThread();
  return 0;
}

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// cluster (issue 17): one tenant's memory.max across P processes, leased
// from a local redis-server (started here: free loopback port, temporary
// directory). Each process runs T threads; each thread charges 3 pages per
// op and keeps its last W = 64 charges (uncharging the oldest), so every
// op is one charge and one uncharge at a steady usage.
//
// Variants (side by side, fresh processes each run):
//   lease       a umemcg group bound to the cluster group (umemcg/
//               cluster.h): charges from the node's lease
//   per-charge  no umemcg: an INCRBY (and DECRBY when over max) round trip
//               per charge and a DECRBY per uncharge, each thread on its
//               own connection: what a naive integration does
//   local       a umemcg group with the same max, no cluster
//   drain       drain before refusal (issue 31): node A charges 6,016
//               pages and goes idle holding a chunk (2,048 pages) of
//               unused lease; node B then charges 64 pages at a time up to
//               max - A's usage (16,384 - 6,016), which it reaches only if
//               A gives its unused lease back when asked. Both nodes run
//               in one child process (two Clusters: two connections, two
//               lease owners, as two processes would be). Fields: fill_ms
//               (B from its first charge to the target), need_to_fill_ms
//               (from B's first charge that needed A's unused lease),
//               stranded_pages (A's unused lease before), drains (B),
//               drained (A), fails (B's refused charges), reached.
//
// Fields: redis_cmds_per_1k_charges (counted client-side: the commands
// each process sent, between the end of a warm-up of a quarter of the run
// and its end), fails (charges refused), over_max_pages (the worst of
// sum(node usage) - max and Redis usage - max, sampled every ~2 ms from
// shared memory and every ~50 ms from Redis, over the whole run),
// bound_pages (the documented bound: sum of the outstanding leases, at the
// worst sample), exact (lease: at quiescence Redis held exactly the sum of
// the nodes' leases, and 0 after they unbound).

#include "umemcg/cluster.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <thread>

#include "cluster/redis_client.h"
#include "cluster/redis_process.h"
#include "cluster/scripts.h"
#include "harness.h"
#include "scenarios.h"

namespace umemcg::bench {
namespace {

using cluster_internal::RedisProcess;
using cluster_internal::Reply;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kPagesPerOp = 3;
constexpr size_t kWindow = 64;
constexpr int kMaxNodes = 64;
constexpr int kMaxThreads = 64;

// Shared between the parent and its node processes (MAP_SHARED).
struct alignas(64) ThreadSlot {
  std::atomic<uint64_t> ops{0};  // published every 256 ops (per-charge: 1)
  std::atomic<uint64_t> fails{0};
  std::atomic<uint64_t> commands{0};  // per-charge: Redis commands sent
};
struct alignas(64) NodeSlot {
  std::atomic<uint64_t> usage{0};  // pages
  std::atomic<uint64_t> lease{0};
  std::atomic<uint64_t> commands{0};
  std::atomic<int> ready{0};  // 1: set up; 2: stopped, quiescent
  std::atomic<int> failed{0};
  ThreadSlot threads[kMaxThreads];
};
struct Shared {
  std::atomic<int> go{0};
  std::atomic<int> stop{0};
  std::atomic<int> unbind{0};
  NodeSlot nodes[kMaxNodes];
};

struct Setup {
  std::string variant;
  std::string url;
  std::string prefix;  // lease: key prefix of this run
  uint64_t max = 0;    // cluster max (pages)
  int processes = 0;
  int threads = 0;
};

// One thread's workload on `charge` / `uncharge` callbacks; `*commands`
// (per-charge) is published with the counts.
template <typename Charge, typename Uncharge>
void Work(Shared& sh, ThreadSlot& slot, const uint64_t* commands,
          uint64_t publish_mask, Charge charge, Uncharge uncharge) {
  std::deque<uint64_t> ring;
  uint64_t ops = 0, fails = 0;
  auto publish = [&] {
    // Relaxed: statistics read by the parent.
    slot.ops.store(ops, std::memory_order_relaxed);
    slot.fails.store(fails, std::memory_order_relaxed);
    slot.commands.store(*commands, std::memory_order_relaxed);
  };
  while (!sh.stop.load(std::memory_order_relaxed)) {
    const bool charged = charge();
    if (charged) {
      ring.push_back(kPagesPerOp);
    } else {
      ++fails;
    }
    // Keep the last kWindow charges; after a refusal give one back.
    if (ring.size() > kWindow || (!charged && !ring.empty())) {
      uncharge();
      ring.pop_front();
    }
    if ((++ops & publish_mask) == 0) publish();
  }
  while (!ring.empty()) {
    uncharge();
    ring.pop_front();
  }
  publish();
}

void WaitFlag(const std::atomic<int>& flag) {
  while (flag.load(std::memory_order_acquire) == 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// A node process; returns its exit status.
int NodeMain(const Setup& s, Shared& sh, int index) {
  NodeSlot& me = sh.nodes[index];
  auto fail = [&me] {
    me.failed.store(1);
    me.ready.store(1, std::memory_order_release);
    return 1;
  };
  if (s.variant == "per-charge") {
    auto url = cluster_internal::ParseRedisUrl(s.url);
    if (!url.ok()) return fail();
    std::vector<std::unique_ptr<cluster_internal::RedisConnection>> conns;
    for (int t = 0; t < s.threads; ++t) {
      auto c = cluster_internal::RedisConnection::Connect(
          url.value(), std::chrono::milliseconds(2000),
          std::chrono::milliseconds(5000));
      if (!c.ok()) return fail();
      conns.push_back(std::move(c).value());
    }
    const std::string key = s.prefix + ":usage";
    const std::string max = std::to_string(s.max);
    me.ready.store(1, std::memory_order_release);
    WaitFlag(sh.go);
    std::vector<std::thread> threads;
    for (int t = 0; t < s.threads; ++t) {
      threads.emplace_back([&, t] {
        cluster_internal::RedisConnection& c = *conns[static_cast<size_t>(t)];
        const std::string n = std::to_string(kPagesPerOp);
        uint64_t sent = 0;
        Work(
            sh, me.threads[t], &sent, /*publish_mask=*/0,
            [&] {
              StatusOr<Reply> r = c.Command({"INCRBY", key, n});
              bool ok = r.ok();
              if (ok && r.value().integer > static_cast<int64_t>(s.max)) {
                (void)c.Command({"DECRBY", key, n});
                ok = false;
              }
              sent = c.commands();
              return ok;
            },
            [&] {
              (void)c.Command({"DECRBY", key, n});
              sent = c.commands();
            });
      });
    }
    for (std::thread& t : threads) t.join();
    me.ready.store(2, std::memory_order_release);
    WaitFlag(sh.unbind);
    return 0;
  }

  auto ctrl = Controller::Create({});
  if (!ctrl.ok()) return fail();
  auto g = ctrl.value()->CreateGroup(ctrl.value()->root(), "tenant");
  if (!g.ok()) return fail();
  Group& group = *g.value();
  std::unique_ptr<Cluster> cluster;
  std::unique_ptr<ClusterBinding> binding;
  if (s.variant == "lease") {
    ClusterOptions o;
    o.redis_url = s.url;
    o.key_prefix = s.prefix;
    auto c = Cluster::Connect(o);
    if (!c.ok()) return fail();
    cluster = std::move(c).value();
    auto b = cluster->Bind(group, "tenant");
    if (!b.ok()) return fail();
    binding = std::move(b).value();
  } else if (!group.SetMax(Pages(s.max)).ok()) {
    return fail();
  }
  auto publish = [&] {
    me.usage.store(group.usage().raw(), std::memory_order_relaxed);
    if (binding) {
      const ClusterLeaseState st = binding->state();
      me.lease.store(st.lease.raw(), std::memory_order_relaxed);
      me.commands.store(st.redis_commands, std::memory_order_relaxed);
    }
  };
  publish();
  me.ready.store(1, std::memory_order_release);
  WaitFlag(sh.go);
  std::vector<std::thread> threads;
  for (int t = 0; t < s.threads; ++t) {
    threads.emplace_back([&, t] {
      const uint64_t none = 0;
      Work(
          sh, me.threads[t], &none, /*publish_mask=*/255,
          [&] { return group.TryCharge(Pages(kPagesPerOp)).ok(); },
          [&] { group.Uncharge(Pages(kPagesPerOp)); });
    });
  }
  while (!sh.stop.load(std::memory_order_relaxed)) {
    publish();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (std::thread& t : threads) t.join();
  ctrl.value()->DrainAllStocks(group);
  if (group.usage() != Pages(0)) me.failed.store(1);  // unbalanced
  if (binding && !binding->Sync().ok()) me.failed.store(1);
  publish();
  me.ready.store(2, std::memory_order_release);
  // Keep publishing until told to unbind (the background thread may still
  // return surplus; the parent waits for agreement).
  while (!sh.unbind.load(std::memory_order_acquire)) {
    publish();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (binding && !binding->Unbind().ok()) return 1;
  binding.reset();
  cluster.reset();
  g.value().reset();
  return 0;
}

uint64_t SumNodes(const Shared& sh, const Setup& s,
                  std::atomic<uint64_t> NodeSlot::*field) {
  uint64_t v = 0;
  for (int i = 0; i < s.processes; ++i) {
    v += (sh.nodes[i].*field).load(std::memory_order_relaxed);
  }
  return v;
}

uint64_t SumThreads(const Shared& sh, const Setup& s,
                    std::atomic<uint64_t> ThreadSlot::*field) {
  uint64_t v = 0;
  for (int i = 0; i < s.processes; ++i) {
    for (int t = 0; t < s.threads; ++t) {
      v += (sh.nodes[i].threads[t].*field).load(std::memory_order_relaxed);
    }
  }
  return v;
}

// Commands sent: per-charge counts per thread, lease per node.
uint64_t Commands(const Shared& sh, const Setup& s) {
  return SumThreads(sh, s, &ThreadSlot::commands) +
         SumNodes(sh, s, &NodeSlot::commands);
}

// Redis usage of the run's counter / cluster group, or nullopt.
std::optional<uint64_t> RedisUsage(RedisProcess& redis, Cluster* admin,
                                   const Setup& s) {
  if (admin != nullptr) {
    auto snap = admin->Snapshot();
    if (!snap.ok()) return std::nullopt;
    for (const ClusterGroupInfo& g : snap.value().groups) {
      if (g.path == "tenant") return g.usage.raw();
    }
    return 0;
  }
  if (s.variant != "per-charge") return 0;
  StatusOr<Reply> r = redis.Command({"GET", s.prefix + ":usage"});
  if (!r.ok()) return std::nullopt;
  if (r.value().type != Reply::Type::kString) return 0;
  return std::strtoull(r.value().str.c_str(), nullptr, 10);
}

StatusOr<Sample> RunOnce(RedisProcess& redis, const Setup& s, double seconds) {
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return Failed("cluster: mmap failed");
  Shared* sh = new (mem) Shared();
  if (s.variant == "lease") {
    // The cluster group, created without a Cluster here: the parent starts
    // no thread before forking its nodes.
    StatusOr<Reply> r =
        redis.Command({"EVAL", cluster_internal::kSetMaxScript, "1",
                       "{" + s.prefix + "}", "tenant", std::to_string(s.max)});
    if (!r.ok() || r.value().is_error()) {
      munmap(mem, sizeof(Shared));
      return Failed("cluster: cannot create the cluster group");
    }
  }
  std::vector<pid_t> pids;
  std::fflush(nullptr);
  for (int i = 0; i < s.processes; ++i) {
    const pid_t pid = fork();
    if (pid == 0) _exit(NodeMain(s, *sh, i));
    if (pid < 0) break;
    pids.push_back(pid);
  }
  Status status;
  auto reap = [&](int sig) {
    for (pid_t pid : pids) {
      if (sig != 0) kill(pid, sig);
      int ws = 0;
      waitpid(pid, &ws, 0);
      if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        if (status.ok()) status = Failed("cluster: a node process failed");
      }
    }
    pids.clear();
  };
  if (static_cast<int>(pids.size()) != s.processes) {
    sh->stop.store(1);
    sh->go.store(1);
    sh->unbind.store(1);
    reap(SIGKILL);
    munmap(mem, sizeof(Shared));
    return Failed("cluster: fork failed");
  }
  // Every node set up (bound, connected).
  const auto setup_deadline = Clock::now() + std::chrono::seconds(60);
  for (int i = 0; i < s.processes; ++i) {
    while (sh->nodes[i].ready.load(std::memory_order_acquire) == 0 &&
           Clock::now() < setup_deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (sh->nodes[i].failed.load() != 0 || sh->nodes[i].ready.load() == 0) {
      status = Failed("cluster: node setup failed (" + s.variant + ")");
    }
  }
  std::unique_ptr<Cluster> admin;
  if (status.ok() && s.variant == "lease") {
    ClusterOptions o;
    o.redis_url = s.url;
    o.key_prefix = s.prefix;
    auto c = Cluster::Connect(o);
    if (c.ok()) admin = std::move(c).value();
  }
  Sample out;
  uint64_t worst_over = 0, bound_at_worst = 0;
  auto sample = [&](bool with_redis) {
    const uint64_t used = SumNodes(*sh, s, &NodeSlot::usage);
    const uint64_t leased = SumNodes(*sh, s, &NodeSlot::lease);
    uint64_t over = used > s.max ? used - s.max : 0;
    if (with_redis) {
      const std::optional<uint64_t> r = RedisUsage(redis, admin.get(), s);
      if (r && *r > s.max) over = std::max(over, *r - s.max);
    }
    if (over >= worst_over) {
      worst_over = over;
      bound_at_worst = leased;
    }
  };
  if (status.ok()) {
    sh->go.store(1, std::memory_order_release);
    const auto start = Clock::now();
    const auto warm = start + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(seconds / 4));
    const auto end = start + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(seconds));
    uint64_t ops0 = 0, cmds0 = 0;
    Clock::time_point t0 = start;
    bool warmed = false;
    int tick = 0;
    while (Clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      sample(++tick % 25 == 0);
      if (!warmed && Clock::now() >= warm) {
        warmed = true;
        t0 = Clock::now();
        ops0 = SumThreads(*sh, s, &ThreadSlot::ops);
        cmds0 = Commands(*sh, s);
      }
    }
    const auto t1 = Clock::now();
    const uint64_t ops1 = SumThreads(*sh, s, &ThreadSlot::ops);
    const uint64_t cmds1 = Commands(*sh, s);
    sh->stop.store(1, std::memory_order_release);
    out.seconds = std::chrono::duration<double>(t1 - t0).count();
    out.ops = static_cast<double>(ops1 - ops0);
    out.fields["redis_cmds_per_1k_charges"] =
        ops1 > ops0 ? 1000.0 * static_cast<double>(cmds1 - cmds0) /
                          static_cast<double>(ops1 - ops0)
                    : 0;
    // Quiescence: every node stopped, uncharged, drained (and synced).
    const auto q_deadline = Clock::now() + std::chrono::seconds(60);
    for (int i = 0; i < s.processes; ++i) {
      while (sh->nodes[i].ready.load(std::memory_order_acquire) != 2 &&
             Clock::now() < q_deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (sh->nodes[i].failed.load() != 0) status = Failed("cluster: sync");
    }
    sample(true);
    out.fields["fails"] =
        static_cast<double>(SumThreads(*sh, s, &ThreadSlot::fails));
    out.fields["over_max_pages"] = static_cast<double>(worst_over);
    out.fields["bound_pages"] = static_cast<double>(bound_at_worst);
    out.fields["processes"] = s.processes;
    out.fields["max_pages"] = static_cast<double>(s.max);
    bool exact = true;
    if (s.variant == "lease") {
      // Redis holds exactly the nodes' leases (they may still be
      // returning surplus: wait for agreement, bounded).
      exact = false;
      const auto deadline = Clock::now() + std::chrono::seconds(20);
      while (!exact && Clock::now() < deadline) {
        const uint64_t leased = SumNodes(*sh, s, &NodeSlot::lease);
        const std::optional<uint64_t> r = RedisUsage(redis, admin.get(), s);
        exact = r && *r == leased && SumNodes(*sh, s, &NodeSlot::usage) == 0;
        if (!exact) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    sh->unbind.store(1, std::memory_order_release);
    reap(0);
    const std::optional<uint64_t> after = RedisUsage(redis, admin.get(), s);
    exact = exact && after && *after == 0;
    out.fields["exact"] = exact ? 1 : 0;
    if (status.ok() && !exact) {
      status = Failed(
          "cluster: Redis did not hold exactly the nodes' leases "
          "at quiescence (" +
          s.variant + ")");
    }
  } else {
    sh->stop.store(1);
    sh->go.store(1);
    sh->unbind.store(1);
    reap(SIGKILL);
  }
  admin.reset();
  munmap(mem, sizeof(Shared));
  if (!status.ok()) return status;
  return out;
}

// The drain variant's results, written by its child process (read by the
// parent after waitpid).
struct DrainOut {
  double fill_ms = 0, need_to_fill_ms = 0, stranded = 0, drains = 0,
         drained = 0, fails = 0, reached = 0, exact = 0, over_max = 0,
         charges = 0;
};

int DrainChild(const std::string& url, const std::string& prefix,
               DrainOut& out) {
  constexpr uint64_t kMax = 16384, kIdleUsage = 6016, kStep = 64;
  ClusterOptions base;
  base.redis_url = url;
  base.key_prefix = prefix;
  auto admin = Cluster::Connect(base);
  if (!admin.ok() || !admin.value()->SetMax("tenant", Pages(kMax)).ok()) {
    return 1;
  }
  ClusterOptions oa = base;
  oa.min_chunk = Pages(2048);  // A keeps up to two chunks of unused lease
  oa.max_chunk = Pages(2048);
  auto ca = Controller::Create({}), cb = Controller::Create({});
  if (!ca.ok() || !cb.ok()) return 1;
  auto ga = ca.value()->CreateGroup(ca.value()->root(), "a");
  auto gb = cb.value()->CreateGroup(cb.value()->root(), "b");
  auto na = Cluster::Connect(oa), nb = Cluster::Connect(base);
  if (!ga.ok() || !gb.ok() || !na.ok() || !nb.ok()) return 1;
  auto ba = na.value()->Bind(*ga.value(), "tenant");
  auto bb = nb.value()->Bind(*gb.value(), "tenant");
  if (!ba.ok() || !bb.ok()) return 1;
  Group& a = *ga.value();
  Group& b = *gb.value();
  if (!a.TryCharge(Pages(kIdleUsage)).ok()) return 1;
  ca.value()->DrainAllStocks(a);
  if (!ba.value()->Sync().ok()) return 1;
  const uint64_t lease_a = ba.value()->state().lease.raw();
  out.stranded = static_cast<double>(lease_a - kIdleUsage);
  const uint64_t target = kMax - kIdleUsage;
  uint64_t held = 0, fails = 0, charges = 0;
  const auto t0 = Clock::now();
  Clock::time_point need_at{};
  while (held < target && Clock::now() - t0 < std::chrono::seconds(10)) {
    if (need_at == Clock::time_point{} && held + kStep > kMax - lease_a) {
      need_at = Clock::now();
    }
    if (b.TryCharge(Pages(kStep)).ok()) {
      held += kStep;
      ++charges;
    } else {
      ++fails;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  const auto t1 = Clock::now();
  out.fill_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  out.need_to_fill_ms =
      need_at == Clock::time_point{}
          ? 0
          : std::chrono::duration<double, std::milli>(t1 - need_at).count();
  out.reached = held == target ? 1 : 0;
  out.fails = static_cast<double>(fails);
  out.charges = static_cast<double>(charges);
  // Never over max; exact at quiescence (Redis holds both leases).
  cb.value()->DrainAllStocks(b);
  bool exact = false;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!exact && Clock::now() < deadline) {
    if (!ba.value()->Sync().ok() || !bb.value()->Sync().ok()) continue;
    auto snap = admin.value()->Snapshot();
    if (!snap.ok()) continue;
    for (const ClusterGroupInfo& g : snap.value().groups) {
      if (g.path != "tenant") continue;
      out.over_max = std::max(
          out.over_max,
          g.usage.raw() > kMax ? static_cast<double>(g.usage.raw() - kMax) : 0);
      exact = g.usage == ba.value()->state().lease + bb.value()->state().lease;
    }
    if (!exact) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  out.drains = static_cast<double>(bb.value()->state().drains);
  out.drained = static_cast<double>(ba.value()->state().drained);
  b.Uncharge(Pages(held));
  a.Uncharge(Pages(kIdleUsage));
  if (!ba.value()->Unbind().ok() || !bb.value()->Unbind().ok()) return 1;
  auto snap = admin.value()->Snapshot();
  bool zero = snap.ok();
  if (snap.ok()) {
    for (const ClusterGroupInfo& g : snap.value().groups) {
      if (g.path == "tenant" && g.usage != Pages(0)) zero = false;
    }
  }
  out.exact = exact && zero ? 1 : 0;
  return 0;
}

StatusOr<Sample> RunDrainOnce(RedisProcess& redis, const std::string& prefix) {
  void* mem = mmap(nullptr, sizeof(DrainOut), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return Failed("cluster drain: mmap failed");
  DrainOut* out = new (mem) DrainOut();
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) _exit(DrainChild(redis.url(), prefix, *out));
  if (pid < 0) {
    munmap(mem, sizeof(DrainOut));
    return Failed("cluster drain: fork failed");
  }
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  const DrainOut o = *out;
  munmap(mem, sizeof(DrainOut));
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
    return Failed("cluster drain: the node process failed");
  }
  if (o.exact != 1) {
    return Failed(
        "cluster drain: Redis did not hold exactly the nodes' leases at "
        "quiescence");
  }
  Sample s;
  s.ops = o.charges;
  s.seconds = o.fill_ms / 1000;
  s.fields["fill_ms"] = o.fill_ms;
  s.fields["need_to_fill_ms"] = o.need_to_fill_ms;
  s.fields["stranded_pages"] = o.stranded;
  s.fields["drains"] = o.drains;
  s.fields["drained"] = o.drained;
  s.fields["fails"] = o.fails;
  s.fields["reached"] = o.reached;
  s.fields["exact"] = o.exact;
  s.fields["over_max_pages"] = o.over_max;
  s.fields["processes"] = 2;
  s.fields["max_pages"] = 16384;
  s.fields["poll_ms"] =
      static_cast<double>(ClusterOptions{}.poll_interval.count());
  return s;
}

}  // namespace

double PairedRatio(const std::vector<double>* a, const std::vector<double>* b) {
  if (a == nullptr || b == nullptr) return NAN;
  std::vector<double> ratios;
  for (size_t i = 0; i < std::min(a->size(), b->size()); ++i) {
    if ((*b)[i] > 0) ratios.push_back((*a)[i] / (*b)[i]);
  }
  return ratios.empty() ? NAN : Median(std::move(ratios));
}

StatusOr<std::vector<Result>> RunCluster(const Params& p) {
  auto redis = RedisProcess::Start();
  if (!redis.ok()) {
    return Failed("cluster: cannot start redis-server: " +
                  redis.status().ToString());
  }
  const int processes = p.processes > 0 ? std::min(p.processes, kMaxNodes) : 2;
  const int threads = p.threads > 0 ? std::min(p.threads, kMaxThreads) : 2;
  // Demand: every thread's window plus a batch of stock per thread; the
  // max leaves 50% headroom so leases (with their chunks) fit.
  const uint64_t demand = static_cast<uint64_t>(processes) *
                          static_cast<uint64_t>(threads) *
                          (kWindow * kPagesPerOp + 64);
  const uint64_t max = demand * 3 / 2;
  std::vector<Config> configs;
  int run = 0;
  // The worst over-max of any repeat, per variant (fields are medians).
  std::map<std::string, double> worst;
  for (const std::string v : {"lease", "per-charge", "local", "drain"}) {
    if (!Wanted(p, v, {"lease", "per-charge", "local", "drain"})) continue;
    Config c;
    c.variant = v;
    c.threads = v == "drain" ? 2 : processes * threads;
    c.mode = "process";
    RedisProcess* r = redis.value().get();
    if (v == "drain") {
      c.run = [r, &run, &worst]() -> StatusOr<Sample> {
        StatusOr<Sample> out = RunDrainOnce(*r, Numbered("bench", ++run));
        if (out.ok()) {
          worst["drain"] =
              std::max(worst["drain"], out.value().fields["over_max_pages"]);
        }
        return out;
      };
      configs.push_back(std::move(c));
      continue;
    }
    c.run = [r, v, processes, threads, max, &p, &run,
             &worst]() -> StatusOr<Sample> {
      Setup s;
      s.variant = v;
      s.url = r->url();
      s.prefix = Numbered("bench", ++run);
      s.max = max;
      s.processes = processes;
      s.threads = threads;
      StatusOr<Sample> out = RunOnce(*r, s, p.seconds);
      if (out.ok()) {
        worst[v] = std::max(worst[v], out.value().fields["over_max_pages"]);
      }
      return out;
    };
    configs.push_back(std::move(c));
  }
  auto results = RunInterleaved("cluster", std::move(configs), p);
  if (!results.ok()) return results;
  // Ratios side by side: lease vs local and vs per-charge, each the median
  // of the per-round ratios (round i of every variant ran side by side,
  // under the same machine noise), as docs/benchmarks.md says.
  const std::vector<double>* lease = nullptr;
  const std::vector<double>* local = nullptr;
  const std::vector<double>* per_charge = nullptr;
  for (const Result& r : results.value()) {
    if (r.variant == "lease") lease = &r.ops_per_sec_samples;
    if (r.variant == "local") local = &r.ops_per_sec_samples;
    if (r.variant == "per-charge") per_charge = &r.ops_per_sec_samples;
  }
  std::map<std::string, double> ratios;
  for (const auto& [name, other] :
       {std::pair{"vs_local", local}, std::pair{"vs_per_charge", per_charge}}) {
    ratios[name] = PairedRatio(lease, other);
  }
  for (Result& r : results.value()) {
    r.fields["over_max_worst_pages"] = worst[r.variant];
    if (r.variant != "lease") continue;
    for (const auto& [name, v] : ratios) r.fields[name] = v;
  }
  return results;
}

}  // namespace umemcg::bench

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// cluster-chaos (issue 31): the cluster quota under the faults operators
// meet. P node processes (--processes, default 3) each bind a group to one
// cluster group on a redis-server the scenario starts on loopback, and
// charge and free (50 pages per charge, cycling 0..600 pages on top of 100
// held, so the lease must grow from Redis several times per cycle). Each
// variant is one fault, injected for real 500 ms into the run:
//
//   flushall       FLUSHALL (the nodes re-create the group: learning mode)
//   restart-empty  redis-server killed (-9) and restarted without
//                  persistence
//   restart-aof    redis-server with AOF killed (-9), down 1 s, restarted
//   sigstop        redis-server stopped (SIGSTOP) for 2 s, then SIGCONT
//   failover       a master, a replica and a redis-sentinel; the master
//                  killed (-9): the nodes follow the sentinel (the
//                  redis-sentinel:// URL) to the promoted replica
//   kill-node      the last node process killed (-9): its lease comes
//                  back at its expiry
//   lower-max      an operator lowers the max (set-max) from P x 2,000 to
//                  P x 300 pages, below the nodes' usage; each node also
//                  holds a cache of 400 pages its Reclaimer can free, and
//                  cycles 0..100 pages (not 600), so the excess is
//                  reclaimable: the nodes must bring the cluster back
//                  under max by themselves (back_under_ms)
//   restart-aof-over
//                  over max after an AOF-restart outage (max P x 1,000
//                  pages, safe capacity 1,000 per node). Node 0 holds 100
//                  pages and a 1,300-page cache its Reclaimer can free and
//                  cycles 0..100 pages (1,400-1,500: above its safe
//                  share); the others hold 100 pages and a 300-page cache
//                  and cycle 0..100 (400-500): together under max. Redis
//                  (AOF) is killed (-9) and stays down 3 s. Node 0 charges
//                  nothing from the kill on (it holds its pages). 2 s into
//                  the outage, past the nodes' local lease expiry (1.6 s),
//                  the others' load rises: each charges up to 1,000 pages
//                  and holds them, admitted as its safe capacity. Then
//                  Redis restarts from its AOF: the group and its max are
//                  there (no learning mode), and so are the pre-outage
//                  leases, but their server expiry (2 s) passed during the
//                  outage: the first script collects them and the nodes'
//                  claims (force: pages in use are counted) put Redis about
//                  500 pages over max (node 0's usage above its share), a
//                  term of the bound in docs/cluster.md. The caches are
//                  reclaimable: the nodes must bring the cluster back at or
//                  under max (back_under_ms). Node 0 stops charging on
//                  purpose: a node that keeps charging reclaims itself
//                  toward its safe capacity, during the outage (a charge
//                  past its lease reclaims locally) and after it (before
//                  Redis answers it again), and Redis is then never over
//                  max after the restart
//
// (The idle node holding lease is `cluster`'s `drain` variant.) The max
// (P x 2,000 pages) is above what the nodes use, so every max event or OOM
// handler call would be caused by the fault (lower-max, restart-aof-over:
// max events are the expected answer to being over max; an OOM call would
// mean reclaim did not free enough; restart-aof-over's over_max_pages also
// counts the nodes' usage over max while Redis is down).
//
// Fields per fault: recover_ms (from the start of the fault until every
// node charges again: holds a lease from a request sent after the fault
// was over (fault_ms: how long injecting it took, e.g. the 2 s stop), out
// of any learning window, with its lease record in Redis; kill-node: until
// the dead node's lease is collected), back_under_ms (lower-max: from the
// set-max until Redis's usage was at or under the new max for good,
// sampled every ~5 ms; restart-aof-over: from the first sample that saw
// Redis over max after the restart until the last one, and redis_over_pages
// the worst Redis usage - max then; node_over_ms: the longest time a node
// saw the cluster over max in its replies (its own timeline)),
// reclaimed_pages (lower-max, restart-aof-over: freed by the nodes'
// reclaimers), over_max_pages (the worst of sum
// of node usage - max and Redis usage - max, sampled every ~5 ms and
// ~50 ms) and over_max_ms (the sampled time spent over), cmds_per_sec_node
// (Redis commands per second per node from the fault to recovery), ooms
// (OOM handler calls), max_events (on the nodes' groups), exact (1: at
// quiescence Redis held exactly the sum of the nodes' leases, and 0 after
// they unbound). Lease TTL 2 s, poll interval 50 ms.

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <optional>
#include <thread>

#include "cluster/cache_reclaimer.h"
#include "cluster/redis_process.h"
#include "cluster/scripts.h"
#include "harness.h"
#include "scenarios.h"
#include "umemcg/cluster.h"
#include "umemcg/umemcg.h"

namespace umemcg::bench {
namespace {

using cluster_internal::RedisProcess;
using cluster_internal::RedisProcessOptions;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kMaxChaosNodes = 16;
constexpr int kTtlMs = 2000;
constexpr uint64_t kHeld = 100, kStep = 50, kCycle = 600;
constexpr uint64_t kPerNodeMax = 2000;
// lower-max: the max per node it sets, the cache each node fills and the
// top of its charge cycle (usage 500..600 pages per node, at most 300 of
// them not reclaimable).
constexpr uint64_t kLoweredPerNodeMax = 300, kCacheFill = 400,
                   kCachedCycle = 100;
// restart-aof-over: the max per node, node 0's cache (above its share),
// the others' cache, and what the others charge up to during the outage
// (their safe capacity); the outage (longer than the lease TTL).
constexpr uint64_t kAofPerNodeMax = 1000, kAofBigCache = 1300,
                   kAofSmallCache = 300;
constexpr int kAofDownMs = 3000, kAofRiseMs = 2000;
constexpr const char* kMasterName = "umemcg";

// What a node process does: charge and free 0..600 pages (kPlain); hold a
// reclaimable cache and cycle 0..100 (kCached, lower-max); restart-aof-over:
// node 0 (kBig) and the others (kSmall, up to kAofPerNodeMax pages while
// the outage lasts).
enum class Role { kPlain, kCached, kBig, kSmall };

// Shared with the node processes (MAP_SHARED); steady_clock is
// CLOCK_MONOTONIC, one clock for every process.
struct alignas(64) ChaosNode {
  std::atomic<int> ready{0};  // 1: bound; 2: stopped and synced
  std::atomic<int> failed{0};
  std::atomic<uint64_t> usage{0}, lease{0}, commands{0}, ooms{0}, max_events{0},
      oks{0}, reclaimed{0};
  // When the request behind the current lease was sent (Clock ticks; 0:
  // expired), and whether its reply said the group is learning.
  std::atomic<int64_t> lease_sent{0};
  std::atomic<int> learning{0};
  // restart-aof-over, the node's own timeline (Clock ticks): the first
  // state since the go that showed the cluster over max, the last one, and
  // the longest stretch of states over max without one at or under.
  std::atomic<int64_t> over_first{0}, over_last{0}, over_longest{0};
  char owner[256] = {};  // the lease owner; set before ready
};
struct ChaosShared {
  std::atomic<int> go{0}, stop{0}, unbind{0};
  // restart-aof-over: 1 Redis killed, 2 the load rises (past the nodes'
  // local lease expiry), 3 Redis restarted.
  std::atomic<int> outage{0};
  ChaosNode nodes[kMaxChaosNodes];
};

int ChaosNodeMain(const std::string& url, ChaosShared& sh, int index,
                  Role role) {
  ChaosNode& me = sh.nodes[index];
  const bool cached = role != Role::kPlain;
  const uint64_t fill = role == Role::kBig     ? kAofBigCache
                        : role == Role::kSmall ? kAofSmallCache
                                               : kCacheFill;
  auto fail = [&me] {
    me.failed.store(1);
    me.ready.store(1, std::memory_order_release);
    return 1;
  };
  auto ctrl = Controller::Create({});
  if (!ctrl.ok()) return fail();
  auto g = ctrl.value()->CreateGroup(ctrl.value()->root(), "g");
  if (!g.ok()) return fail();
  Group& group = *g.value();
  ctrl.value()->SetOomHandler([&me](const OomContext&) {
    me.ooms.fetch_add(1, std::memory_order_relaxed);
    return OomOutcome{};
  });
  ClusterOptions o;
  o.redis_url = url;
  o.lease_ttl = milliseconds(kTtlMs);
  o.command_timeout = milliseconds(500);
  o.connect_timeout = milliseconds(500);
  o.min_chunk = Pages(16);
  o.max_chunk = Pages(64);
  auto c = Cluster::Connect(o);
  if (!c.ok()) return fail();
  auto b = c.value()->Bind(group, "tenant");
  if (!b.ok()) return fail();
  ClusterBinding& binding = *b.value();
  if (!group.TryCharge(Pages(kHeld)).ok()) return fail();
  cluster_internal::CacheReclaimer cache(group);
  if (cached) {
    if (!group.AddReclaimer(&cache).ok()) return fail();
    if (!cache.Fill(fill)) return fail();
  }
  std::snprintf(me.owner, sizeof(me.owner), "%s",
                binding.state().lease_owner.c_str());
  // Relaxed: statistics read by the parent.
  // The local expiry is lease_ttl - safety_margin after the request was
  // sent.
  const auto valid_for = milliseconds(kTtlMs) - milliseconds(kTtlMs) / 5;
  int64_t over_since = 0;  // the start of the current over-max stretch
  auto publish = [&] {
    const ClusterLeaseState st = binding.state();
    if (sh.go.load(std::memory_order_relaxed) != 0) {
      const int64_t t = Clock::now().time_since_epoch().count();
      if (st.cluster_usage > st.cluster_max) {
        if (over_since == 0) over_since = t;
        if (me.over_first.load(std::memory_order_relaxed) == 0) {
          me.over_first.store(t, std::memory_order_relaxed);
        }
        me.over_last.store(t, std::memory_order_relaxed);
        me.over_longest.store(
            std::max(me.over_longest.load(std::memory_order_relaxed),
                     t - over_since),
            std::memory_order_relaxed);
      } else {
        over_since = 0;
      }
    }
    me.lease_sent.store(st.expired ? 0
                                   : (Clock::now() + st.expires_in - valid_for)
                                         .time_since_epoch()
                                         .count(),
                        std::memory_order_relaxed);
    me.learning.store(st.learning_for.count() > 0 ? 1 : 0,
                      std::memory_order_relaxed);
    me.usage.store(group.usage().raw(), std::memory_order_relaxed);
    me.lease.store(st.lease.raw(), std::memory_order_relaxed);
    me.commands.store(st.redis_commands, std::memory_order_relaxed);
    me.max_events.store(group.events(MemoryEvent::kMax),
                        std::memory_order_relaxed);
    me.reclaimed.store(cache.reclaimed(), std::memory_order_relaxed);
  };
  publish();
  me.ready.store(1, std::memory_order_release);
  while (sh.go.load(std::memory_order_acquire) == 0) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  std::atomic<bool> done{false};
  // kSmall while Redis is down: charge up to the safe capacity and hold
  // (retrying a refused charge, never freeing), the load that rises during
  // the outage.
  const uint64_t small_top = kAofPerNodeMax - kHeld - fill;
  std::thread worker([&] {
    uint64_t held = 0;
    while (!done.load(std::memory_order_relaxed)) {
      // Relaxed: a phase flag; seeing it a moment late changes nothing.
      const int outage = sh.outage.load(std::memory_order_relaxed);
      if (role == Role::kBig && outage != 0) {
        std::this_thread::sleep_for(milliseconds(1));  // holds its pages
        continue;
      }
      if (role == Role::kSmall && outage >= 2) {
        if (held >= small_top || !group.TryCharge(Pages(kStep)).ok()) {
          std::this_thread::sleep_for(milliseconds(1));
        } else {
          held += kStep;
          me.oks.fetch_add(1, std::memory_order_relaxed);
        }
        continue;
      }
      if (group.TryCharge(Pages(kStep)).ok()) {
        held += kStep;
        me.oks.fetch_add(1, std::memory_order_relaxed);
      } else {
        std::this_thread::sleep_for(milliseconds(1));
        group.Uncharge(Pages(held));
        held = 0;
      }
      if (held >= (cached ? kCachedCycle : kCycle)) {
        group.Uncharge(Pages(held));
        held = 0;
      }
    }
    group.Uncharge(Pages(held));
  });
  while (sh.stop.load(std::memory_order_acquire) == 0) {
    publish();
    std::this_thread::sleep_for(milliseconds(2));
  }
  done.store(true);
  worker.join();
  ctrl.value()->DrainAllStocks(group);
  // Synced with Redis (it may still be recovering: retry, bounded).
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!binding.Sync().ok() && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  publish();
  me.ready.store(2, std::memory_order_release);
  while (sh.unbind.load(std::memory_order_acquire) == 0) {
    publish();
    std::this_thread::sleep_for(milliseconds(2));
  }
  group.Uncharge(Pages(kHeld));
  if (cached) {
    if (!group.RemoveReclaimer(&cache).ok()) return 1;
    cache.Release();
  }
  ctrl.value()->DrainAllStocks(group);
  if (!binding.Unbind().ok()) return 1;
  b.value().reset();
  c.value().reset();
  return 0;
}

// The Redis servers of one run: a plain one, or a master, a replica and
// a sentinel.
struct Servers {
  std::unique_ptr<RedisProcess> master, replica, sentinel;
  std::string url;
  // The server that holds the data now.
  RedisProcess* current = nullptr;
};

StatusOr<Servers> StartServers(const std::string& fault) {
  Servers s;
  RedisProcessOptions mo;
  mo.aof = fault == "restart-aof" || fault == "restart-aof-over";
  auto m = RedisProcess::Start(mo);
  if (!m.ok()) return m.status();
  s.master = std::move(m).value();
  s.url = s.master->url();
  s.current = s.master.get();
  if (fault != "failover") return s;
  RedisProcessOptions ro;
  ro.replica_of = s.master->port();
  auto r = RedisProcess::Start(ro);
  if (!r.ok()) return r.status();
  s.replica = std::move(r).value();
  auto within = [](const std::function<bool()>& ok) {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline) {
      if (ok()) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  };
  if (!within([&] {
        auto i = s.replica->Command({"INFO", "replication"});
        return i.ok() &&
               i.value().str.find("master_link_status:up") != std::string::npos;
      })) {
    return Failed("cluster-chaos: the replica did not sync");
  }
  // Receiving writes, not only synced (see RedisProcess::WaitForReplicas).
  if (!s.master->WaitForReplicas(1, std::chrono::seconds(10)).ok()) {
    return Failed("cluster-chaos: the replica acknowledged no write");
  }
  RedisProcessOptions so;
  so.sentinel_for = s.master->port();
  so.master_name = kMasterName;
  auto st = RedisProcess::Start(so);
  if (!st.ok()) return st.status();
  s.sentinel = std::move(st).value();
  if (!within([&] {
        auto a = s.sentinel->Command({"SENTINEL", "replicas", kMasterName});
        return a.ok() && !a.value().elements.empty();
      })) {
    return Failed("cluster-chaos: the sentinel did not see the replica");
  }
  s.url = s.sentinel->sentinel_url();
  return s;
}

// Redis usage of "tenant" on the current server (nullopt: no answer).
std::optional<uint64_t> TenantUsage(Servers& s) {
  auto r = s.current->Command({"HGET", "{umemcg}:g:tenant", "usage"});
  if (!r.ok() || r.value().is_error()) return std::nullopt;
  if (r.value().type != cluster_internal::Reply::Type::kString) return 0;
  return std::strtoull(r.value().str.c_str(), nullptr, 10);
}

StatusOr<Sample> RunFault(const std::string& fault, int processes) {
  auto servers = StartServers(fault);
  if (!servers.ok()) {
    return Failed("cluster-chaos: " + servers.status().ToString());
  }
  Servers& sv = servers.value();
  const bool lower = fault == "lower-max";
  const bool aof_over = fault == "restart-aof-over";
  uint64_t max = (aof_over ? kAofPerNodeMax : kPerNodeMax) *
                 static_cast<uint64_t>(processes);
  {
    auto r = sv.master->Command({"EVAL", cluster_internal::kSetMaxScript, "1",
                                 "{umemcg}", "tenant", std::to_string(max)});
    if (!r.ok() || r.value().is_error()) {
      return Failed("cluster-chaos: cannot create the cluster group");
    }
  }
  void* mem = mmap(nullptr, sizeof(ChaosShared), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return Failed("cluster-chaos: mmap failed");
  ChaosShared* sh = new (mem) ChaosShared();
  std::vector<pid_t> pids;
  std::fflush(nullptr);
  for (int i = 0; i < processes; ++i) {
    const pid_t pid = fork();
    const Role role = aof_over ? (i == 0 ? Role::kBig : Role::kSmall)
                      : lower  ? Role::kCached
                               : Role::kPlain;
    if (pid == 0) _exit(ChaosNodeMain(sv.url, *sh, i, role));
    if (pid < 0) break;
    pids.push_back(pid);
  }
  Status status;
  std::vector<bool> alive(pids.size(), true);
  auto reap = [&](int sig) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (!alive[i]) continue;
      if (sig != 0) kill(pids[i], sig);
      int ws = 0;
      while (waitpid(pids[i], &ws, 0) < 0 && errno == EINTR) {
      }
      alive[i] = false;
      if (sig == 0 && (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) && status.ok()) {
        status = Failed("cluster-chaos: a node process failed (" + fault + ")");
      }
    }
  };
  auto cleanup = [&] {
    sh->stop.store(1);
    sh->go.store(1);
    sh->unbind.store(1);
    reap(SIGKILL);
    munmap(mem, sizeof(ChaosShared));
  };
  if (static_cast<int>(pids.size()) != processes) {
    cleanup();
    return Failed("cluster-chaos: fork failed");
  }
  const auto setup_deadline = Clock::now() + std::chrono::seconds(60);
  for (int i = 0; i < processes; ++i) {
    while (sh->nodes[i].ready.load(std::memory_order_acquire) == 0 &&
           Clock::now() < setup_deadline) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    if (sh->nodes[i].failed.load() != 0 || sh->nodes[i].ready.load() == 0) {
      cleanup();
      return Failed("cluster-chaos: node setup failed (" + fault + ")");
    }
  }
  auto sum = [&](std::atomic<uint64_t> ChaosNode::*f, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v += (sh->nodes[i].*f).load();
    return v;
  };
  int live = processes;  // nodes still running (kill-node: one fewer)
  uint64_t worst_over = 0;
  double over_ms = 0;
  Clock::time_point last_sample = Clock::now();
  int tick = 0;
  bool paused = false;  // Redis stopped: do not wait for its answers
  // lower-max, restart-aof-over: the first and the last sample that saw
  // Redis over max (restart-aof-over: after the restart), and the worst.
  Clock::time_point first_redis_over{}, last_redis_over{};
  uint64_t worst_redis_over = 0;
  auto sample = [&] {
    const Clock::time_point now = Clock::now();
    const uint64_t used = sum(&ChaosNode::usage, live);
    uint64_t over = used > max ? used - max : 0;
    if ((lower || aof_over || ++tick % 10 == 0) && !paused) {
      const std::optional<uint64_t> r = TenantUsage(sv);
      if (r && *r > max) {
        over = std::max(over, *r - max);
        worst_redis_over = std::max(worst_redis_over, *r - max);
        if (first_redis_over == Clock::time_point{}) first_redis_over = now;
        last_redis_over = now;
      }
    }
    worst_over = std::max(worst_over, over);
    if (over > 0) {
      over_ms +=
          std::chrono::duration<double, std::milli>(now - last_sample).count();
    }
    last_sample = now;
  };
  auto run_for = [&](milliseconds d) {
    const Clock::time_point end = Clock::now() + d;
    while (Clock::now() < end) {
      std::this_thread::sleep_for(milliseconds(5));
      sample();
    }
  };

  sh->go.store(1, std::memory_order_release);
  run_for(milliseconds(500));
  // Commands of the nodes that live through the fault.
  const int survivors = fault == "kill-node" ? processes - 1 : processes;
  const uint64_t cmds0 = sum(&ChaosNode::commands, survivors);
  const Clock::time_point fault_at = Clock::now();
  // The fault, for real.
  if (fault == "flushall") {
    (void)sv.master->Command({"FLUSHALL"});
  } else if (fault == "restart-empty" || fault == "restart-aof") {
    sv.master->Kill(SIGKILL);
    if (fault == "restart-aof") run_for(milliseconds(1000));
    if (!sv.master->Restart().ok()) status = Failed("cluster-chaos: restart");
  } else if (aof_over) {
    // Before the kill, Redis was never over max (checked below).
    const uint64_t before = worst_redis_over;
    sv.master->Kill(SIGKILL);
    // Relaxed: a phase flag (see the node's worker).
    sh->outage.store(1, std::memory_order_relaxed);
    paused = true;
    run_for(milliseconds(kAofRiseMs));
    sh->outage.store(2, std::memory_order_relaxed);
    run_for(milliseconds(kAofDownMs - kAofRiseMs));
    paused = false;
    if (!sv.master->Restart().ok()) status = Failed("cluster-chaos: restart");
    sh->outage.store(3, std::memory_order_relaxed);
    if (before != 0) {
      status = Failed("cluster-chaos: over max before the outage");
    }
    first_redis_over = last_redis_over = Clock::time_point{};
    worst_redis_over = 0;
  } else if (fault == "sigstop") {
    sv.master->Pause();
    paused = true;
    run_for(milliseconds(2000));
    sv.master->Resume();
    paused = false;
  } else if (fault == "failover") {
    sv.master->Kill(SIGKILL);
    sv.current = sv.replica.get();
  } else if (lower) {
    max = kLoweredPerNodeMax * static_cast<uint64_t>(processes);
    auto r = sv.master->Command({"EVAL", cluster_internal::kSetMaxScript, "1",
                                 "{umemcg}", "tenant", std::to_string(max)});
    if (!r.ok() || r.value().is_error()) {
      status = Failed("cluster-chaos: set-max failed");
    }
  } else if (fault == "kill-node") {
    --live;
    kill(pids.back(), SIGKILL);
    int ws = 0;
    while (waitpid(pids.back(), &ws, 0) < 0 && errno == EINTR) {
    }
    alive.back() = false;
  }
  const Clock::time_point fault_done = Clock::now();
  // Observe until every node charges again (kill-node: the dead node's
  // lease is collected), at most 20 s.
  Clock::time_point recovered{};
  const Clock::time_point observe_end = fault_at + std::chrono::seconds(20);
  while (Clock::now() < observe_end) {
    run_for(milliseconds(50));
    if (fault == "kill-node") {
      // The dead node's lease collected (its record deleted).
      auto r = sv.current->Command(
          {"HEXISTS", "{umemcg}:l:tenant", sh->nodes[live].owner});
      if (r.ok() && r.value().type == cluster_internal::Reply::Type::kInteger &&
          r.value().integer == 0) {
        recovered = Clock::now();
        break;
      }
      continue;
    }
    // Charging again: every node holds a lease from a request sent after
    // the fault was over, out of any learning window, and Redis has its
    // lease record (claimed again after a loss). A refused charge is no
    // sign: a node may cycle through pages already charged (its stock)
    // without asking Redis.
    bool all = true;
    for (int i = 0; i < live && all; ++i) {
      const ChaosNode& n = sh->nodes[i];
      all = n.lease_sent.load() > fault_done.time_since_epoch().count() &&
            n.learning.load() == 0;
      if (all) {
        auto r = sv.current->Command({"HEXISTS", "{umemcg}:l:tenant", n.owner});
        all = r.ok() &&
              r.value().type == cluster_internal::Reply::Type::kInteger &&
              r.value().integer == 1;
      }
    }
    if (all) {
      recovered = Clock::now();
      break;
    }
  }
  const uint64_t cmds1 = sum(&ChaosNode::commands, live);
  const double fault_secs = std::max(
      0.05, std::chrono::duration<double>(
                (recovered == Clock::time_point{} ? Clock::now() : recovered) -
                fault_at)
                .count());
  // restart-aof-over: long enough after the recovery to see the cluster at
  // or under max for good (a heartbeat, 667 ms, more than twice).
  run_for(milliseconds(aof_over ? 1500 : 500));
  sh->stop.store(1, std::memory_order_release);
  const auto q_deadline = Clock::now() + std::chrono::seconds(60);
  for (int i = 0; i < live; ++i) {
    while (sh->nodes[i].ready.load(std::memory_order_acquire) != 2 &&
           Clock::now() < q_deadline) {
      std::this_thread::sleep_for(milliseconds(1));
    }
  }
  // Exact at quiescence: Redis holds the sum of the live nodes' leases.
  bool exact = false;
  const auto e_deadline = Clock::now() + std::chrono::seconds(20);
  while (!exact && Clock::now() < e_deadline) {
    const std::optional<uint64_t> r = TenantUsage(sv);
    exact = r && *r == sum(&ChaosNode::lease, live);
    if (!exact) std::this_thread::sleep_for(milliseconds(10));
  }
  Sample out;
  out.fields["recover_ms"] =
      recovered == Clock::time_point{}
          ? -1
          : std::max(0.0, std::chrono::duration<double, std::milli>(recovered -
                                                                    fault_at)
                              .count());
  out.fields["fault_ms"] =
      std::chrono::duration<double, std::milli>(fault_done - fault_at).count();
  if (lower) {
    out.fields["back_under_ms"] =
        last_redis_over == Clock::time_point{}
            ? 0
            : std::max(0.0, std::chrono::duration<double, std::milli>(
                                last_redis_over - fault_done)
                                .count());
  }
  if (aof_over) {
    out.fields["back_under_ms"] = std::chrono::duration<double, std::milli>(
                                      last_redis_over - first_redis_over)
                                      .count();
    out.fields["redis_over_pages"] = static_cast<double>(worst_redis_over);
    // The nodes' own timeline: the longest stretch a node's replies showed
    // the cluster over max, and from the restart until the last one did.
    int64_t longest = 0, last = 0;
    for (int i = 0; i < processes; ++i) {
      longest = std::max(longest, sh->nodes[i].over_longest.load());
      last = std::max(last, sh->nodes[i].over_last.load());
    }
    out.fields["node_over_ms"] =
        std::chrono::duration<double, std::milli>(Clock::duration(longest))
            .count();
    out.fields["node_last_over_ms"] =
        last == 0 ? 0
                  : std::chrono::duration<double, std::milli>(
                        Clock::duration(last) - fault_done.time_since_epoch())
                        .count();
  }
  if (lower || aof_over) {
    out.fields["reclaimed_pages"] =
        static_cast<double>(sum(&ChaosNode::reclaimed, processes));
  }
  out.fields["over_max_pages"] = static_cast<double>(worst_over);
  out.fields["over_max_ms"] = over_ms;
  out.fields["cmds_per_sec_node"] =
      static_cast<double>(cmds1 >= cmds0 ? cmds1 - cmds0 : 0) / fault_secs /
      live;
  out.fields["ooms"] = static_cast<double>(sum(&ChaosNode::ooms, processes));
  out.fields["max_events"] =
      static_cast<double>(sum(&ChaosNode::max_events, processes));
  out.fields["processes"] = processes;
  out.fields["max_pages"] = static_cast<double>(max);
  out.ops = static_cast<double>(sum(&ChaosNode::oks, processes));
  out.seconds = std::chrono::duration<double>(Clock::now() - fault_at).count();
  sh->unbind.store(1, std::memory_order_release);
  reap(0);
  const std::optional<uint64_t> after = TenantUsage(sv);
  exact = exact && after && *after == 0;
  out.fields["exact"] = exact ? 1 : 0;
  munmap(mem, sizeof(ChaosShared));
  if (!status.ok()) return status;
  if (recovered == Clock::time_point{}) {
    return Failed("cluster-chaos: no recovery within 20 s (" + fault + ")");
  }
  if (!exact) {
    return Failed("cluster-chaos: not exact at quiescence (" + fault + ")");
  }
  return out;
}

}  // namespace

const std::vector<std::string>& ChaosFaults() {
  static const std::vector<std::string> faults = {
      "flushall", "restart-empty", "restart-aof", "sigstop",
      "failover", "kill-node",     "lower-max",   "restart-aof-over"};
  return faults;
}

StatusOr<std::vector<Result>> RunClusterChaos(const Params& p) {
  const int processes =
      p.processes > 0 ? std::clamp(p.processes, 2, kMaxChaosNodes) : 3;
  std::vector<Config> configs;
  for (const std::string& f : ChaosFaults()) {
    if (!Wanted(p, f, ChaosFaults())) continue;
    Config c;
    c.variant = f;
    c.threads = processes;
    c.mode = "process";
    c.run = [f, processes] { return RunFault(f, processes); };
    configs.push_back(std::move(c));
  }
  return RunInterleaved("cluster-chaos", std::move(configs), p);
}

}  // namespace umemcg::bench

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// cluster_node: one node of the cluster tests, a separate process driven
// over stdin/stdout by cluster_process_test. It makes a controller with one
// group "g", binds it to a cluster group and answers one line per command:
//
//   hold N        charge N pages (blocking) and keep them -> "ok" | "fail C"
//   release       uncharge everything held                -> "ok"
//   start T P W   T threads charge P pages per op, keeping the last W
//                 charges each (uncharging the oldest)     -> "ok"
//   stop          stop them; they uncharge what they hold  -> "ok OPS FAILS"
//   drain         DrainAllStocks                           -> "ok"
//   state         -> "lease L usage U expired E lost X refusals R"
//   sync          Sync, then state
//   unbind        -> "ok" | "fail C"
//   quit
//
//   cluster_node --redis=URL --group=CLUSTER_GROUP [--ttl-ms=N]

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "umemcg/cluster.h"
#include "umemcg/umemcg.h"

namespace {

using umemcg::Pages;

std::string Flag(int argc, char** argv, const std::string& name,
                 const std::string& fallback) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind(prefix, 0) == 0) return a.substr(prefix.size());
  }
  return fallback;
}

void Reply(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string url = Flag(argc, argv, "redis", "");
  const std::string cgroup = Flag(argc, argv, "group", "");
  const int ttl = std::atoi(Flag(argc, argv, "ttl-ms", "2000").c_str());
  auto ctrl = umemcg::Controller::Create({}).value();
  umemcg::GroupRef g = ctrl->CreateGroup(ctrl->root(), "g").value();
  umemcg::ClusterOptions o;
  o.redis_url = url;
  o.lease_ttl = std::chrono::milliseconds(ttl);
  o.command_timeout = std::chrono::milliseconds(500);
  o.min_chunk = Pages(16);
  auto cluster = umemcg::Cluster::Connect(o);
  if (!cluster.ok()) {
    Reply("fail " + cluster.status().ToString());
    return 1;
  }
  auto binding = cluster.value()->Bind(*g, cgroup);
  if (!binding.ok()) {
    Reply("fail " + binding.status().ToString());
    return 1;
  }
  Reply("ready " + binding.value()->state().lease_owner);

  uint64_t held = 0;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> ops{0}, fails{0};
  std::vector<std::thread> threads;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    if (cmd == "hold") {
      uint64_t n = 0;
      in >> n;
      umemcg::ChargeResult r = g->TryCharge(Pages(n));
      if (r.ok()) {
        held += n;
        Reply("ok");
      } else {
        Reply(std::string("fail ") + umemcg::StatusCodeName(r.code));
      }
    } else if (cmd == "release") {
      g->Uncharge(Pages(held));
      held = 0;
      Reply("ok");
    } else if (cmd == "start") {
      int t = 1;
      uint64_t pages = 3, window = 64;
      in >> t >> pages >> window;
      stop.store(false);
      for (int i = 0; i < t; ++i) {
        threads.emplace_back([&, pages, window] {
          std::deque<bool> ring;
          uint64_t my_ops = 0, my_fails = 0;
          while (!stop.load(std::memory_order_relaxed)) {
            umemcg::ChargeResult r = g->TryCharge(Pages(pages));
            ++my_ops;
            if (!r.ok()) {
              ++my_fails;
              std::this_thread::yield();
            } else {
              ring.push_back(true);
            }
            if (ring.size() > window || (!r.ok() && !ring.empty())) {
              g->Uncharge(Pages(pages));
              ring.pop_front();
            }
          }
          for (size_t k = 0; k < ring.size(); ++k) g->Uncharge(Pages(pages));
          ops.fetch_add(my_ops);
          fails.fetch_add(my_fails);
        });
      }
      Reply("ok");
    } else if (cmd == "stop") {
      stop.store(true);
      for (std::thread& t : threads) t.join();
      threads.clear();
      Reply("ok " + std::to_string(ops.exchange(0)) + " " +
            std::to_string(fails.exchange(0)));
    } else if (cmd == "drain") {
      ctrl->DrainAllStocks(ctrl->root());
      Reply("ok");
    } else if (cmd == "state" || cmd == "sync") {
      if (cmd == "sync") {
        umemcg::Status s = binding.value()->Sync();
        if (!s.ok()) {
          Reply("fail " + s.ToString());
          continue;
        }
      }
      const umemcg::ClusterLeaseState s = binding.value()->state();
      Reply("lease " + std::to_string(s.lease.raw()) + " usage " +
            std::to_string(s.usage.raw()) + " expired " +
            std::to_string(s.expired ? 1 : 0) + " lost " +
            std::to_string(s.lease_lost) + " refusals " +
            std::to_string(s.refusals));
    } else if (cmd == "unbind") {
      umemcg::Status s = binding.value()->Unbind();
      Reply(s.ok() ? "ok" : "fail " + s.ToString());
    } else if (cmd == "quit") {
      break;
    } else {
      Reply("fail unknown command");
    }
  }
  stop.store(true);
  for (std::thread& t : threads) t.join();
  if (held > 0) g->Uncharge(Pages(held));
  binding.value().reset();
  g.reset();
  return 0;
}

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// multitenant (A2, docs/benchmarks.md; the 2025 multi-memcg stock,
// [M1]): K tenants, each in its own leaf of root -> c1 (min = low) -> c2
// -> tenant<k>. A few "softirq" threads (--softirq-threads, pinned to
// distinct CPUs) do the rx charges of all tenants: tenant k's flow is
// steered to thread k mod S (RSS), and each thread handles its tenants'
// packets interleaved, one packet per tenant per round, so its per-CPU
// stock sees a different group on almost every charge. Every Q = 8 rounds
// the tenants' receivers (modelled as running on the same CPU, one after
// the other, as processes woken by the softirq) read their queued
// messages: copy --payload bytes each and free them (uncharges through
// the stock, `sock` -= pages). With one stock slot the stock flips group
// on nearly every charge (drain: a hierarchical subtract; refill: a
// hierarchical add); with 7 slots the tenants of one thread all fit.
//
// Variants: slots1, slots7 (ControllerOptions::stock_slots; --stock-slots
// N measures slotsN only; --batch N or adaptive), unaccounted, and the
// peers' designs per-thread and per-leaf-quantum (peers.h: a thread
// switching tenant flushes its untracked bytes; one pool per tenant).
// ops = messages delivered. Fields: mbps, tenants, on_cpu, slack_pages
// (accounted but not in use after the run: stocked pages, untracked bytes,
// pool reservations) and slack_bound_pages (the design's worst case).

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "harness.h"
#include "peers.h"
#include "scenarios.h"
#include "socket_model.h"

namespace umemcg::bench {
namespace {

constexpr int kRoundsPerDelivery = 8;  // Q: messages queued per tenant
constexpr uint64_t kProtectPages = 262144;

struct alignas(64) Tenant {
  ChargeSide rx_charge;
  FreeSide rx_free;
};

struct alignas(64) WorkerTotals {
  uint64_t msgs = 0;
  uint64_t checksum = 0;
  bool failed = false;
};

// Accountant: a per-tenant accountant factory (index -> accountant).
template <typename MakeAccountant>
StatusOr<Sample> RunTenants(const Params& p, int tenants, int workers,
                            MakeAccountant make) {
  std::vector<Tenant> state(static_cast<size_t>(tenants));
  std::vector<WorkerTotals> totals(static_cast<size_t>(workers));
  const uint64_t payload = p.payload;
  // Page-aligned slots and destinations (harness.h, AllocPages).
  const uint64_t slot_bytes =
      (std::max<uint64_t>(payload, 1) + 4095) / 4096 * 4096;
  PageBuffer file = AllocPages(slot_bytes * 4, 'y');
  double on_cpu = 0;
  const double secs = RunTimed(
      workers, p.pin, p.seconds,
      [&](int w, const std::atomic<bool>& stop) {
        WorkerTotals& tot = totals[static_cast<size_t>(w)];
        std::vector<int> mine;
        for (int t = w; t < tenants; t += workers) mine.push_back(t);
        std::vector<decltype(make(0))> acct;
        for (int t : mine) acct.push_back(make(t));
        PageBuffer user = AllocPages(slot_bytes, 0);
        while (KeepRunning(stop, tot.msgs)) {
          for (int q = 0; q < kRoundsPerDelivery; ++q) {
            for (size_t i = 0; i < mine.size(); ++i) {
              Tenant& t = state[static_cast<size_t>(mine[i])];
              if (!acct[i].Charge(t.rx_charge.PagesToCharge(kMessageBytes))) {
                tot.failed = true;
              }
            }
          }
          for (size_t i = 0; i < mine.size(); ++i) {
            Tenant& t = state[static_cast<size_t>(mine[i])];
            for (int q = 0; q < kRoundsPerDelivery; ++q) {
              if (payload != 0) {
                std::memcpy(user.get(), file.get() + (q % 4) * slot_bytes,
                            payload);
                tot.checksum += static_cast<unsigned char>(user.get()[q]);
              }
              acct[i].Uncharge(t.rx_free.PagesToUncharge(kMessageBytes));
              ++tot.msgs;
            }
          }
        }
        // Socket close.
        for (size_t i = 0; i < mine.size(); ++i) {
          Tenant& t = state[static_cast<size_t>(mine[i])];
          acct[i].Uncharge(Settle(t.rx_charge, t.rx_free));
        }
      },
      &on_cpu);
  Sample s;
  s.seconds = secs;
  s.fields["on_cpu"] = on_cpu;
  for (const WorkerTotals& t : totals) {
    if (t.failed) return Failed("a socket charge failed");
    s.ops += static_cast<double>(t.msgs);
  }
  s.fields["mbps"] = s.ops * kMessageBytes * 8 / secs / 1e6;
  return s;
}

StatusOr<Sample> RunSlots(const Params& p, int tenants, int workers, int slots,
                          int batch) {
  ControllerOptions options = BatchOptions(batch);
  options.stock_slots = slots;
  auto ctrl = MakeController(std::move(options));
  if (!ctrl.ok()) return ctrl.status();
  auto chain = MakeChain(*ctrl.value(), 2, Pages(kProtectPages));
  if (!chain.ok()) return chain.status();
  std::vector<GroupRef> groups = chain.value();
  std::vector<Group*> leaves;
  for (int t = 0; t < tenants; ++t) {
    auto g = ctrl.value()->CreateGroup(*groups[1], Numbered("tenant", t));
    if (!g.ok()) return g.status();
    leaves.push_back(g.value().get());
    groups.push_back(std::move(g).value());
  }
  auto s = RunTenants(p, tenants, workers, [&](int t) {
    return GroupAccountant{leaves[static_cast<size_t>(t)]};
  });
  if (!s.ok()) return s;
  // Every message was freed: what the tenants still have charged sits in
  // the stocks.
  double slack = 0;
  for (Group* g : leaves) slack += static_cast<double>(g->usage().raw());
  const double nr_cpus = ctrl.value()->info().nr_cpus;
  const double per_cpu = std::min(slots, tenants);
  double batch_now = 0;
  for (Group* g : leaves) batch_now = std::max<double>(batch_now, g->batch());
  if (Status b = CheckBalanced(*ctrl.value(), groups); !b.ok()) return b;
  s.value().fields["slack_pages"] = slack;
  s.value().fields["slack_bound_pages"] = nr_cpus * per_cpu * batch_now;
  return s;
}

StatusOr<Sample> RunPerThread(const Params& p, int tenants, int workers) {
  TrackerChain chain(2, tenants);
  UntrackedSlots slots(workers);
  auto s = RunTenants(p, tenants, workers, [&](int t) {
    return PerThreadAccountant{&slots, chain.leaf(t)};
  });
  if (!s.ok()) return s;
  const double slack = static_cast<double>(slots.SlackBytes()) / kPageSize;
  slots.Settle();
  if (!chain.Balanced()) return Failed("per-thread trackers not balanced");
  s.value().fields["slack_pages"] = slack;
  s.value().fields["slack_bound_pages"] =
      static_cast<double>(workers) * kUntrackedLimit / kPageSize;
  return s;
}

StatusOr<Sample> RunQuantum(const Params& p, int tenants, int workers) {
  QuantumPools pools(2, tenants);
  auto s = RunTenants(p, tenants, workers,
                      [&](int t) { return QuantumAccountant{pools.leaf(t)}; });
  if (!s.ok()) return s;
  const double slack = static_cast<double>(pools.SlackBytes()) / kPageSize;
  pools.Settle();
  if (!pools.Balanced()) return Failed("quantum pools not balanced");
  s.value().fields["slack_pages"] = slack;
  s.value().fields["slack_bound_pages"] =
      static_cast<double>(tenants) * 2 * kQuantum / kPageSize;
  return s;
}

}  // namespace

StatusOr<std::vector<Result>> RunMultitenant(const Params& p) {
  const int tenants = std::max(1, p.tenants);
  const int workers =
      std::max(1, p.threads > 0 ? p.threads : p.softirq_threads);
  const int batch = p.batches.empty() ? 64 : p.batches.front();
  std::vector<int> slot_counts = {1, 7};
  if (p.stock_slots > 0) slot_counts = {p.stock_slots};
  std::vector<std::string> defaults = {"unaccounted", "per-thread",
                                       "per-leaf-quantum"};
  for (int s : slot_counts) defaults.push_back(Numbered("slots", s));
  std::vector<Config> configs;
  if (Wanted(p, "unaccounted", defaults)) {
    configs.push_back({"unaccounted", 0, workers, 3, "", [=] {
                         return RunTenants(p, tenants, workers,
                                           [](int) { return NoAccountant{}; });
                       }});
  }
  for (int s = 1; s <= 16; ++s) {
    const std::string name = Numbered("slots", s);
    if (!Wanted(p, name, defaults)) continue;
    configs.push_back({name, batch, workers, 3, "", [=] {
                         return RunSlots(p, tenants, workers, s, batch);
                       }});
  }
  if (Wanted(p, "per-thread", defaults)) {
    configs.push_back({"per-thread", 0, workers, 3, "",
                       [=] { return RunPerThread(p, tenants, workers); }});
  }
  if (Wanted(p, "per-leaf-quantum", defaults)) {
    configs.push_back({"per-leaf-quantum", 0, workers, 3, "",
                       [=] { return RunQuantum(p, tenants, workers); }});
  }
  auto results = RunInterleaved("multitenant", std::move(configs), p);
  if (!results.ok()) return results;
  for (Result& r : results.value()) r.fields["tenants"] = tenants;
  AddOverheads(results.value());
  return results;
}

}  // namespace umemcg::bench

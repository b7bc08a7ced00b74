// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// sendfile (A1, docs/benchmarks.md): the netperf TCP_SENDFILE analog.
// P pairs of threads (sender S_i, receiver R_i, pinned to distinct CPUs)
// share one leaf of root -> c1 (min = low = 1 GiB) -> c2 -> c3. Per 10 KiB
// message:
//   S_i  tx charge on its socket's forward-alloc reserve (2-3 pages), then
//        the rx charge for the same bytes on R_i's socket (loopback: the
//        softirq runs on the sender's CPU), `sock` += pages each; push the
//        message into the pair's bounded SPSC ring (the socket buffer).
//   R_i  pop; copy --payload bytes (recvmsg's copy to user; the sender is
//        zero-copy); free the rx bytes (uncharge through R_i's stock,
//        `sock` -= pages), then the tx bytes (ACK processing frees the
//        sender's skbs on the receiving CPU).
// Every page is charged on one CPU and uncharged on another, so stocks
// cannot recycle locally: S's stock empties (one hierarchical add per
// batch pages), R's overflows (one hierarchical subtract per batch pages).
//
// Variants: umemcg (the library at each batch, `--batch adaptive` for the
// adaptive policy), unaccounted (the same ring, copies and reserve
// arithmetic, no charges or statistics), naive (an atomic add/sub on every
// level for every charge: a bare PageCounter chain; same statistics as
// umemcg), per-thread and per-leaf-quantum (other systems' designs,
// peers.h: no statistics).
//
// Fields: mbps (payload Mbit/s of 10 KiB messages), pages_per_msg,
// rmw_per_op (hierarchical counter RMWs per message: for umemcg
// levels x pages charged and uncharged / batch, since every batch pages
// cross all levels once on each side; for naive levels x (charge calls +
// uncharge calls) per message),
// overhead_vs_unaccounted (1 - msgs/s / unaccounted msgs/s),
// vs_unaccounted, on_cpu (the lowest on-CPU share of the 2P threads),
// slack_pages (accounted but not in use once every message is freed: the
// stocks for umemcg, untracked bytes or reservations for the peers) and
// slack_bound_pages (the design's worst case: nr_cpus x batch; threads x
// 4 MiB; leaves x 2 MiB), and for adaptive the batch it ended at.

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "harness.h"
#include "peers.h"
#include "scenarios.h"
#include "socket_model.h"

namespace umemcg::bench {
namespace {

constexpr uint64_t kRingMessages = 256;  // socket buffer: 2.5 MiB
constexpr uint64_t kPublishEvery = 16;   // one shared-line write per 16
constexpr uint64_t kFileSlots = 16;      // the "page cache" being sent
constexpr int kDefaultDepth = 3;
constexpr uint64_t kProtectPages = 262144;  // 1 GiB min/low on level 1

struct alignas(64) Channel {
  alignas(64) std::atomic<uint64_t> published{0};  // sender writes
  alignas(64) std::atomic<uint64_t> consumed{0};   // receiver writes
  alignas(64) std::atomic<bool> done{false};       // sender, at the end
};

// Per pair: sender-owned and receiver-owned halves on their own lines.
struct alignas(64) SenderState {
  ChargeSide tx, rx;
  uint64_t sent = 0;
  uint64_t pages = 0;  // charged
  uint64_t calls = 0;  // charges of at least one page
  bool failed = false;
};
struct alignas(64) ReceiverState {
  FreeSide tx, rx;
  uint64_t pages = 0;  // uncharged
  uint64_t calls = 0;
  uint64_t checksum = 0;
  PageBuffer user;  // recvmsg's destination (page-aligned: AllocPages)
};

struct PairTotals {
  uint64_t msgs = 0, pages_charged = 0, pages_uncharged = 0, calls = 0;
  double seconds = 0;
  double on_cpu = 0;
};

// Runs `pairs` sender/receiver pairs for `seconds`; `acct` does the page
// charges (copied per thread). Settles every socket afterwards.
template <typename Accountant>
StatusOr<PairTotals> RunPairs(int pairs, bool pin, double seconds,
                              uint64_t payload, Accountant acct) {
  std::vector<Channel> channels(static_cast<size_t>(pairs));
  std::vector<SenderState> senders(static_cast<size_t>(pairs));
  std::vector<ReceiverState> receivers(static_cast<size_t>(pairs));
  // Every slot of the file and every destination page-aligned (harness.h:
  // the copy's cost must not depend on where malloc put them).
  const uint64_t slot_bytes =
      (std::max<uint64_t>(payload, 1) + 4095) / 4096 * 4096;
  PageBuffer file = AllocPages(slot_bytes * kFileSlots, 'x');
  for (ReceiverState& r : receivers) r.user = AllocPages(slot_bytes, 0);

  auto sender = [&](int pair, const std::atomic<bool>& stop) {
    Channel& ch = channels[static_cast<size_t>(pair)];
    SenderState& s = senders[static_cast<size_t>(pair)];
    Accountant a = acct;
    uint64_t consumed_seen = 0;
    while (KeepRunning(stop, s.sent)) {
      if (s.sent - consumed_seen >= kRingMessages) {
        consumed_seen = ch.consumed.load(std::memory_order_acquire);
        if (s.sent - consumed_seen >= kRingMessages) {
          int spins = 0;
          Backoff(spins);
          continue;
        }
      }
      for (ChargeSide* side : {&s.tx, &s.rx}) {
        const uint64_t n = side->PagesToCharge(kMessageBytes);
        if (!a.Charge(n)) s.failed = true;
        s.pages += n;
        s.calls += n != 0;
      }
      ++s.sent;
      // Release: the receiver uncharges only what was charged before.
      if (s.sent % kPublishEvery == 0) {
        ch.published.store(s.sent, std::memory_order_release);
      }
    }
    ch.published.store(s.sent, std::memory_order_release);
    ch.done.store(true, std::memory_order_release);
  };
  auto receiver = [&](int pair) {
    Channel& ch = channels[static_cast<size_t>(pair)];
    ReceiverState& r = receivers[static_cast<size_t>(pair)];
    Accountant a = acct;
    uint64_t received = 0, available = 0;
    for (int spins = 0;;) {
      if (received == available) {
        available = ch.published.load(std::memory_order_acquire);
        if (received == available) {
          if (ch.done.load(std::memory_order_acquire)) {
            available = ch.published.load(std::memory_order_acquire);
            if (received == available) break;
          } else {
            Backoff(spins);
          }
          continue;
        }
        spins = 0;
      }
      if (payload != 0) {
        std::memcpy(r.user.get(),
                    file.get() + (received % kFileSlots) * slot_bytes, payload);
        r.checksum +=
            static_cast<unsigned char>(r.user.get()[received % payload]);
      }
      for (FreeSide* side : {&r.rx, &r.tx}) {
        const uint64_t n = side->PagesToUncharge(kMessageBytes);
        a.Uncharge(n);
        r.pages += n;
        r.calls += n != 0;
      }
      ++received;
      if (received % kPublishEvery == 0) {
        ch.consumed.store(received, std::memory_order_release);
      }
    }
  };
  PairTotals t;
  t.seconds = RunTimed(
      2 * pairs, pin, seconds,
      [&](int i, const std::atomic<bool>& stop) {
        if (i % 2 == 0) {
          sender(i / 2, stop);
        } else {
          receiver(i / 2);
        }
      },
      &t.on_cpu);
  for (int i = 0; i < pairs; ++i) {
    SenderState& s = senders[static_cast<size_t>(i)];
    ReceiverState& r = receivers[static_cast<size_t>(i)];
    if (s.failed) return Failed("a socket charge failed");
    // Socket close: the reserves' leftover whole pages.
    for (auto [c, f] : {std::pair{&s.tx, &r.tx}, std::pair{&s.rx, &r.rx}}) {
      const uint64_t n = Settle(*c, *f);
      acct.Uncharge(n);
      r.pages += n;
    }
    t.msgs += s.sent;
    t.pages_charged += s.pages;
    t.pages_uncharged += r.pages;
    t.calls += s.calls + r.calls;
  }
  if (t.pages_charged != t.pages_uncharged) {
    return Failed("socket pages charged " + std::to_string(t.pages_charged) +
                  " != uncharged " + std::to_string(t.pages_uncharged));
  }
  return t;
}

Sample ToSample(const PairTotals& t, int levels, int batch, bool naive) {
  Sample s;
  s.ops = static_cast<double>(t.msgs);
  s.seconds = t.seconds;
  s.fields["on_cpu"] = t.on_cpu;
  const double msgs = std::max<double>(1, static_cast<double>(t.msgs));
  s.fields["mbps"] =
      static_cast<double>(t.msgs) * kMessageBytes * 8 / t.seconds / 1e6;
  s.fields["pages_per_msg"] = static_cast<double>(t.pages_charged) / msgs;
  if (batch > 0) {
    s.fields["rmw_per_op"] =
        naive ? levels * static_cast<double>(t.calls) / msgs
              : levels *
                    static_cast<double>(t.pages_charged + t.pages_uncharged) /
                    (batch * msgs);
  } else {
    s.fields["rmw_per_op"] = 0;
  }
  return s;
}

// One run of the library variant at `batch` (or adaptive).
StatusOr<Sample> RunUmemcg(const Params& p, int pairs, int depth, int batch) {
  auto ctrl = MakeController(BatchOptions(batch));
  if (!ctrl.ok()) return ctrl.status();
  auto chain = MakeChain(*ctrl.value(), depth, Pages(kProtectPages));
  if (!chain.ok()) return chain.status();
  Group* leaf = chain.value().back().get();
  auto t = RunPairs(pairs, p.pin, p.seconds, p.payload, GroupAccountant{leaf});
  if (!t.ok()) return t.status();
  // Every message and socket was freed: what the leaf still has charged
  // sits in the stocks.
  const double slack = static_cast<double>(leaf->usage().raw());
  const int batch_now = leaf->batch();
  const double bound = static_cast<double>(leaf->StockSlackBound().raw());
  if (Status s = CheckBalanced(*ctrl.value(), chain.value()); !s.ok()) {
    return s;
  }
  // rmw_per_op with the batch in effect at the end (adaptive: its last).
  Sample s =
      ToSample(t.value(), depth + 1,
               batch == kAdaptiveBatch ? std::max(1, batch_now) : batch, false);
  s.fields["slack_pages"] = slack;
  s.fields["slack_bound_pages"] = bound;
  if (batch == kAdaptiveBatch) s.fields["batch_end"] = batch_now;
  return s;
}

// The peers (peers.h): the same tree as trackers or pools.
StatusOr<Sample> RunPerThread(const Params& p, int pairs, int depth) {
  TrackerChain chain(depth, 1);
  UntrackedSlots slots(2 * pairs + 1);
  auto t = RunPairs(pairs, p.pin, p.seconds, p.payload,
                    PerThreadAccountant{&slots, chain.leaf(0)});
  if (!t.ok()) return t.status();
  const double slack = static_cast<double>(slots.SlackBytes()) / kPageSize;
  slots.Settle();
  if (!chain.Balanced()) return Failed("per-thread trackers not balanced");
  Sample s = ToSample(t.value(), depth + 1, 0, false);
  s.fields.erase("rmw_per_op");
  s.fields["slack_pages"] = slack;
  s.fields["slack_bound_pages"] =
      static_cast<double>(2 * pairs) * kUntrackedLimit / kPageSize;
  return s;
}

StatusOr<Sample> RunQuantum(const Params& p, int pairs, int depth) {
  QuantumPools pools(depth, 1);
  auto t = RunPairs(pairs, p.pin, p.seconds, p.payload,
                    QuantumAccountant{pools.leaf(0)});
  if (!t.ok()) return t.status();
  const double slack = static_cast<double>(pools.SlackBytes()) / kPageSize;
  pools.Settle();
  if (!pools.Balanced()) return Failed("quantum pools not balanced");
  Sample s = ToSample(t.value(), depth + 1, 0, false);
  s.fields.erase("rmw_per_op");
  s.fields["slack_pages"] = slack;
  s.fields["slack_bound_pages"] = 2.0 * kQuantum / kPageSize;
  return s;
}

StatusOr<Sample> RunNaive(const Params& p, int pairs, int depth) {
  auto ctrl = MakeController({});
  if (!ctrl.ok()) return ctrl.status();
  auto chain = MakeChain(*ctrl.value(), depth, Pages(0));
  if (!chain.ok()) return chain.status();
  // The same tree as bare counters: root, c1 (protected), ..., leaf.
  std::vector<std::unique_ptr<PageCounter>> counters;
  counters.push_back(std::make_unique<PageCounter>(nullptr));
  for (int k = 1; k <= depth; ++k) {
    counters.push_back(std::make_unique<PageCounter>(counters.back().get()));
  }
  counters[1]->SetMin(Pages(kProtectPages));
  counters[1]->SetLow(Pages(kProtectPages));
  auto t = RunPairs(
      pairs, p.pin, p.seconds, p.payload,
      NaiveAccountant{counters.back().get(), chain.value().back().get()});
  if (!t.ok()) return t.status();
  for (const auto& c : counters) {
    if (c->usage().raw() != 0 || c->underflows() != 0) {
      return Failed("naive counters not balanced after the run");
    }
  }
  if (Status s = CheckBalanced(*ctrl.value(), chain.value()); !s.ok()) {
    return s;
  }
  Sample s = ToSample(t.value(), depth + 1, 1, true);
  s.fields["slack_pages"] = 0;  // exact: no cache of any kind
  s.fields["slack_bound_pages"] = 0;
  return s;
}

StatusOr<Sample> RunUnaccounted(const Params& p, int pairs) {
  auto t = RunPairs(pairs, p.pin, p.seconds, p.payload, NoAccountant{});
  if (!t.ok()) return t.status();
  return ToSample(t.value(), 0, 0, false);
}

}  // namespace

StatusOr<std::vector<Result>> RunSendfile(const Params& p) {
  const int pairs =
      p.pairs > 0
          ? p.pairs
          : (p.threads > 0
                 ? std::max(1, p.threads / 2)
                 : std::max(1, static_cast<int>(AllowedCpus().size()) / 2));
  const int depth = p.depth > 0 ? p.depth : kDefaultDepth;
  const std::vector<int> batches =
      p.batches.empty() ? std::vector<int>{32, 64} : p.batches;
  const std::vector<std::string> defaults = {"umemcg", "unaccounted", "naive",
                                             "per-thread", "per-leaf-quantum"};
  std::vector<Config> configs;
  if (Wanted(p, "unaccounted", defaults)) {
    configs.push_back({"unaccounted", 0, 2 * pairs, depth, "",
                       [=] { return RunUnaccounted(p, pairs); }});
  }
  if (Wanted(p, "umemcg", defaults)) {
    for (int b : batches) {
      configs.push_back({"umemcg", b, 2 * pairs, depth, "",
                         [=] { return RunUmemcg(p, pairs, depth, b); }});
    }
  }
  if (Wanted(p, "naive", defaults)) {
    configs.push_back({"naive", 1, 2 * pairs, depth, "",
                       [=] { return RunNaive(p, pairs, depth); }});
  }
  if (Wanted(p, "per-thread", defaults)) {
    configs.push_back({"per-thread", 0, 2 * pairs, depth, "",
                       [=] { return RunPerThread(p, pairs, depth); }});
  }
  if (Wanted(p, "per-leaf-quantum", defaults)) {
    configs.push_back({"per-leaf-quantum", 0, 2 * pairs, depth, "",
                       [=] { return RunQuantum(p, pairs, depth); }});
  }
  auto results = RunInterleaved("sendfile", std::move(configs), p);
  if (!results.ok()) return results;
  AddOverheads(results.value());
  return results;
}

}  // namespace umemcg::bench

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The socket-memory model of the sendfile and multitenant scenarios
// (docs/benchmarks.md: sendfile): a per-socket forward-alloc reserve
// (sk_forward_alloc) charged in whole pages when a send or receive needs
// more than it holds (__sk_mem_raise_allocated ->
// mem_cgroup_charge_skmem), and trimmed to below one page on every free
// (sk_mem_reclaim since 4890b686f408, "keep sk->sk_forward_alloc as small
// as possible"): so a 10 KiB message charges and uncharges 2-3 pages.
//
// The reserve is split in two halves, because in the analog the charging
// side (sender / softirq) and the freeing side (receiver / ACK) are
// different threads: ChargeSide holds prepaid bytes not yet used,
// FreeSide freed bytes not yet returned as whole pages. Their sum is a
// multiple of the page size once every message is freed; Settle() returns
// the pages still held then (socket close).
//
// Accountants (what a page charge does in each variant):
//   GroupAccountant  the library: Group::TryCharge / Uncharge through the
//                    per-CPU stock, moving the `sock` statistic.
//   NaiveAccountant  an atomic add/sub on every level for every charge
//                    (bare PageCounter chain, no stock), plus the same
//                    `sock` statistic on the library's group.
//   NoAccountant     nothing (the unaccounted ceiling).
//
// Thread safety: a ChargeSide or FreeSide is used by one thread. The
// accountants are safe from any thread (the library's guarantees).

#ifndef UMEMCG_BENCH_UMEMCG_BENCH_SOCKET_MODEL_H_
#define UMEMCG_BENCH_UMEMCG_BENCH_SOCKET_MODEL_H_

#include <cstdint>

#include "umemcg/umemcg.h"

namespace umemcg::bench {

inline constexpr uint64_t kMessageBytes = 10240;  // netperf -m 10K

struct ChargeSide {
  uint64_t reserve = 0;  // prepaid bytes not used yet (< one page after use)
  // Pages to charge before using `bytes`.
  uint64_t PagesToCharge(uint64_t bytes) {
    uint64_t pages = 0;
    if (reserve < bytes) {
      pages = (bytes - reserve + kPageSize - 1) / kPageSize;
      reserve += pages * kPageSize;
    }
    reserve -= bytes;
    return pages;
  }
};

struct FreeSide {
  uint64_t freed = 0;  // freed bytes not returned yet (< one page after)
  // Pages to uncharge after freeing `bytes`.
  uint64_t PagesToUncharge(uint64_t bytes) {
    freed += bytes;
    const uint64_t pages = freed / kPageSize;
    freed %= kPageSize;
    return pages;
  }
};

// The pages a socket still holds when every message was freed.
inline uint64_t Settle(ChargeSide& c, FreeSide& f) {
  const uint64_t pages = (c.reserve + f.freed) / kPageSize;
  c.reserve = 0;
  f.freed = 0;
  return pages;
}

struct GroupAccountant {
  Group* group;
  bool Charge(uint64_t pages) {
    return pages == 0 ||
           group->TryCharge(Pages(pages), kChargeAtomic, StatItem::kSock).ok();
  }
  void Uncharge(uint64_t pages) {
    if (pages != 0) group->Uncharge(Pages(pages), StatItem::kSock);
  }
};

struct NaiveAccountant {
  PageCounter* counter;
  Group* stats;  // where the sock statistic goes
  bool Charge(uint64_t pages) {
    if (pages == 0) return true;
    if (!counter->TryCharge(Pages(pages), nullptr)) return false;
    stats->ModState(StatItem::kSock, static_cast<int64_t>(pages));
    return true;
  }
  void Uncharge(uint64_t pages) {
    if (pages == 0) return;
    (void)counter->Uncharge(Pages(pages));
    stats->ModState(StatItem::kSock, -static_cast<int64_t>(pages));
  }
};

struct NoAccountant {
  bool Charge(uint64_t) { return true; }
  void Uncharge(uint64_t) {}
};

}  // namespace umemcg::bench

#endif  // UMEMCG_BENCH_UMEMCG_BENCH_SOCKET_MODEL_H_

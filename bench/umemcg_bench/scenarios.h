// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// umemcg-bench's scenarios: user-space analogs of the kernel benchmarks
// behind the memcg patch series (docs/benchmarks.md, Scenarios). Each runs
// its variants side by side (RunInterleaved) and returns one Result per
// measured configuration; every run ends with the balance check (an
// unbalanced run is an error, never a number).
//
//   sendfile     A1, netperf TCP_SENDFILE: sender/receiver pairs, 10 KiB
//                messages, per-socket forward allocation; variants umemcg
//                (at each --batch), unaccounted, naive, and the peers'
//                per-thread and per-leaf-quantum (peers.h).
//   multitenant  A2: K tenants' rx charges by a few "softirq" threads;
//                variants slots1, slots7 (stock slots), unaccounted,
//                per-thread, per-leaf-quantum.
//   pagefault1/2/3, fallocate
//                B, will-it-scale page_fault1/2/3 and fallocate1: stat
//                variants global, pergroup, naive-walk and unaccounted, at
//                depths 2 and 4, 1 and N tasks, process or thread mode.
//   kmem         C, the kmem_cache loop: unaccounted, immediate, cached
//                (64 B, 1 thread, at each --batch); with --threads, 4 KiB
//                objects on N threads: percpu vs shared-pool (the first
//                --batch). Both also run per-thread and per-leaf-quantum.
//   statread     D: memory.stat read latency under writers:
//                global+whole-tree vs pergroup+subtree.
//   scale        issue 16: 100,000 groups created, charged, read, removed
//                under churn; variants small (1,000) and large (N).
//   cluster      issue 17: one cluster max over --processes P x --threads
//                T (3 pages per op) on a local redis-server: lease,
//                per-charge, local, and drain (an idle node's unused
//                lease given back before a refusal; built with
//                libumemcg-cluster only).
//   alloc        issue 27: malloc/free pair time and RSS per live byte of
//                glibc, jemalloc, the header mode over each, the
//                per-group jemalloc arenas and the preload, each variant
//                in a process of its own (alloc.cc).
//   cluster-chaos
//                issue 31: P node processes under one fault per variant
//                (FLUSHALL, restarts, SIGSTOP, a Sentinel failover, a node
//                killed): recovery time, over-max, commands, OOM calls,
//                max events, exactness.
//
// Thread safety: a scenario starts and joins its own threads; call one at
// a time.

#ifndef UMEMCG_BENCH_UMEMCG_BENCH_SCENARIOS_H_
#define UMEMCG_BENCH_UMEMCG_BENCH_SCENARIOS_H_

#include <string>
#include <vector>

#include "harness.h"

namespace umemcg::bench {

StatusOr<std::vector<Result>> RunSendfile(const Params& p);
StatusOr<std::vector<Result>> RunMultitenant(const Params& p);
// `scenario`: "pagefault1", "pagefault2", "pagefault3" or "fallocate".
StatusOr<std::vector<Result>> RunPagefault(const std::string& scenario,
                                           const Params& p);
StatusOr<std::vector<Result>> RunKmem(const Params& p);
StatusOr<std::vector<Result>> RunStatread(const Params& p);
StatusOr<std::vector<Result>> RunScale(const Params& p);
StatusOr<std::vector<Result>> RunAlloc(const Params& p);
#ifdef UMEMCG_BENCH_HAVE_CLUSTER
StatusOr<std::vector<Result>> RunCluster(const Params& p);
// The median of the per-round ratios a[i] / b[i] (round i of both ran side
// by side); NAN without a pair. cluster's vs_local and vs_per_charge.
double PairedRatio(const std::vector<double>* a, const std::vector<double>* b);
StatusOr<std::vector<Result>> RunClusterChaos(const Params& p);
// cluster-chaos's variants: one fault each.
const std::vector<std::string>& ChaosFaults();
#endif

// Runs scenario `name` (any of the above; not "all").
StatusOr<std::vector<Result>> RunScenario(const std::string& name,
                                          const Params& p);

// The scenario names RunScenario accepts, in report order.
const std::vector<std::string>& ScenarioNames();

// The variants `scenario` offers (what --variant accepts).
std::vector<std::string> ScenarioVariants(const std::string& scenario);

// How many of `p.batches` `scenario` measures: all of them (sendfile, the
// single-thread kmem loop), the first (multitenant, pagefault*, fallocate,
// kmem --threads) or none (statread, scale, cluster: no charge batch).
size_t BatchesMeasured(const std::string& scenario, const Params& p);

// True if `variant` is among `p.variants` (or p.variants is empty and
// `variant` is in `defaults`).
bool Wanted(const Params& p, const std::string& variant,
            const std::vector<std::string>& defaults);

}  // namespace umemcg::bench

#endif  // UMEMCG_BENCH_UMEMCG_BENCH_SCENARIOS_H_

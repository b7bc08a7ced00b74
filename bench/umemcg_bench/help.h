// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// umemcg-bench's --help text, written to read like its manual page
// (docs/man/umemcg-bench.1, installed as umemcg-bench(1)): CLI11 prints
// the description, the usage and the options, then the footer with the
// sections a manual page has. docs/benchmarks.md has every detail. Keep the
// three in step; the man_pages_test checks that every option and scenario
// --help lists is in the manual page.

#ifndef UMEMCG_BENCH_UMEMCG_BENCH_HELP_H_
#define UMEMCG_BENCH_UMEMCG_BENCH_HELP_H_

namespace umemcg::bench {

inline constexpr char kHelpDescription[] =
    "umemcg-bench - the kernel memcg patch-series experiments in user "
    "space, measured side by side as ratios";

inline constexpr char kHelpFooter[] = R"(
DESCRIPTION
  Runs user-space analogs of the kernel benchmarks behind the memcg charge
  batching, multi-memcg stock, object accounting and statistics flushing
  series. Every configuration runs --repeat times interleaved with the
  others, a round that another process disturbed is run again, and each
  ratio is the median of the per-round ratios, so both sides see the same
  machine noise. Each run ends with a balance check; a run that fails it
  is an error, never a number. `all` runs every scenario and ends with the
  claim table (the kernel's figure, the ratio measured here, a verdict)
  and baseline checks (per-thread, doing more work than unaccounted,
  should not run faster; "slow" when the median's 80% interval lies
  wholly above 1); `report --from FILE...`
  prints the tables and plots of earlier --json output again.

SCENARIOS
  sendfile      netperf TCP_SENDFILE: sender/receiver pairs, 10 KiB
                messages; umemcg at each --batch, unaccounted, naive,
                per-thread, per-leaf-quantum (the peers' designs)
  multitenant   many tenants' receive charges on a few softirq threads:
                one stock slot against the multi-slot stock (slots1,
                slots7), unaccounted, per-thread, per-leaf-quantum
  pagefault1, pagefault2, pagefault3, fallocate
                will-it-scale analogs: statistics variants global
                (pre-v6.8), pergroup (v6.8+), naive-walk, unaccounted
  kmem          the kmem_cache loop with object accounting: unaccounted,
                immediate, cached, per-thread, per-leaf-quantum
                (--threads N: 4 KiB objects, per-CPU object stock against
                a shared pool)
  statread      memory.stat read latency under concurrent updates
  scale         fleet tree: create, charge, read and remove 100,000
                groups (variants small, large)
  alloc         malloc/free pair time and RSS per live byte: glibc,
                jemalloc, the component's routing with no group
                (jemalloc-routed), the header mode over each
                (header-glibc, header-jemalloc), the per-group jemalloc
                arenas, the preload in header and jemalloc mode
                (preload, preload-jemalloc); each variant in its own process
                (umemcg-alloc-bench next to umemcg-bench); not in `all`
  cluster       cluster quota over a local redis-server (lease,
                per-charge, local, drain; built with libumemcg-cluster)
  cluster-chaos one fault per variant against node processes (flushall,
                restart-empty, restart-aof, sigstop, failover, kill-node,
                lower-max, restart-aof-over)

EXIT STATUS
  0 every scenario ran and balanced (targets are reported, not asserted);
  1 a scenario failed or did not balance, or the plots could not be
  written; 2 bad arguments (unknown scenario, option or variant, a value
  out of range, report without --from).

EXAMPLES
  umemcg-bench all --quick --plots out/plots
  umemcg-bench sendfile --batch 32,64 --pairs 1
  umemcg-bench kmem --threads 2 --json > kmem.json
  umemcg-bench report --from sweep/*.json --plots sweep/plots

SEE ALSO
  umemcg-bench(1) (man umemcg-bench), umemcg(1), docs/benchmarks.md.)";

}  // namespace umemcg::bench

#endif  // UMEMCG_BENCH_UMEMCG_BENCH_HELP_H_

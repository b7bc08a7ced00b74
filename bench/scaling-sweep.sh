#!/usr/bin/env bash
# Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
#
# bench/scaling-sweep.sh OUTDIR
#
# Runs a prebuilt (static) umemcg-bench on a machine with more cores and
# sweeps thread counts for the scaling claims:
#   sendfile     pairs 1..THREADS_MAX/2 at batch 32/64/128/256/512 and
#                adaptive, plus the unaccounted and naive baselines and
#                the peers' per-thread and per-leaf-quantum designs
#                (threads = 2 x pairs);
#   kmem         --threads T (4 KiB objects): percpu, shared-pool,
#                unaccounted, per-thread, per-leaf-quantum;
#   pagefault1, pagefault3, fallocate
#                --threads T at depth 4: global, pergroup, naive-walk,
#                unaccounted (T = 1 is its own point: scalability is
#                total(T) / (T x total(1)));
#   multitenant  16 tenants on 2/4/8 softirq threads, 1 vs 7 stock slots,
#                the peers' designs, and 7 slots with the adaptive batch.
# Writes one JSON-lines file per step (OUTDIR/<step>.json, the format of
# `umemcg-bench --json`), its human report and progress (OUTDIR/<step>.log)
# and OUTDIR/machine.txt (CPU model, counts, kernel, the binary's machine
# line), then OUTDIR/report.txt (`umemcg-bench report` of all of it: tables,
# seed claims at the largest thread counts) and OUTDIR/plots/ (SVGs, when
# gnuplot is installed there).
#
# Duration: each step's cost is estimated as configurations x REPEAT x
# SECONDS_PER_POINT plus SETUP_S; a step that would end past BUDGET_S
# (default 720 s) is skipped and listed in OUTDIR/skipped.txt, and each
# step runs under `timeout` so the whole sweep stays within about BUDGET_S
# + 30 s. With the defaults (SECONDS_PER_POINT=1, REPEAT=3,
# THREADS="1 2 4 8 12 16") the full sweep takes about 10 minutes on 16
# cores; SECONDS_PER_POINT=0.5 halves it.
#
# Environment:
#   UMEMCG_BENCH       the binary (default: build/release-static/bin/
#                      umemcg-bench, else umemcg-bench next to this script,
#                      else on PATH). Build it with `make bench-static`.
#   SECONDS_PER_POINT  seconds per timed run (default 1)
#   REPEAT             repeats per configuration (default 3; medians)
#   THREADS            thread counts (default "1 2 4 8 12 16"; capped to
#                      the CPUs this process may use)
#   BUDGET_S           wall-clock budget in seconds (default 720)
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
out=$1
here=$(cd "$(dirname "$0")" && pwd)
bin=${UMEMCG_BENCH:-}
if [[ -z $bin ]]; then
  for c in "$here/../build/release-static/bin/umemcg-bench" \
           "$here/umemcg-bench" "$(command -v umemcg-bench || true)"; do
    if [[ -n $c && -x $c ]]; then bin=$c; break; fi
  done
fi
if [[ -z $bin || ! -x $bin ]]; then
  echo "$0: no umemcg-bench binary (set UMEMCG_BENCH or run make bench-static)" >&2
  exit 1
fi
sp=${SECONDS_PER_POINT:-1}
repeat=${REPEAT:-3}
budget=${BUDGET_S:-720}
setup_s=${SETUP_S:-2}
cpus=$(nproc)
threads=()
for t in ${THREADS:-1 2 4 8 12 16}; do
  if (( t <= cpus )); then threads+=("$t"); fi
done
tmax=${threads[-1]}
mkdir -p "$out"
: > "$out/skipped.txt"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "uname: $(uname -a)"
  echo "nproc: $cpus"
  grep -m1 'model name' /proc/cpuinfo || true
  if command -v lscpu >/dev/null; then lscpu; fi
  echo "binary: $bin"
  file "$bin" 2>/dev/null || true
  echo "settings: SECONDS_PER_POINT=$sp REPEAT=$repeat THREADS=${threads[*]} BUDGET_S=$budget"
  "$bin" kmem --iterations 1000 --repeat 1 --quiet 2>&1 | head -2
} > "$out/machine.txt"

start=$SECONDS
# run STEP CONFIGS ARGS...: one umemcg-bench invocation measuring CONFIGS
# configurations, skipped when it would not fit in the budget.
run() {
  local step=$1 configs=$2
  shift 2
  local est
  est=$(awk -v c="$configs" -v r="$repeat" -v s="$sp" -v u="$setup_s" \
    'BEGIN { printf "%d", c * r * s + u + 0.999 }')
  local left=$(( budget - (SECONDS - start) ))
  if (( est > left )); then
    echo "$step (estimated ${est}s, ${left}s left): $*" >> "$out/skipped.txt"
    echo "skip $step (estimated ${est}s, ${left}s left)" >&2
    return 0
  fi
  echo "[$(( SECONDS - start ))s] $step (~${est}s)" >&2
  if ! timeout $(( est * 2 + 10 )) "$bin" "$@" --seconds "$sp" \
      --repeat "$repeat" --json --quiet > "$out/$step.json" \
      2> "$out/$step.log"; then
    echo "$step failed or timed out (see $out/$step.log)" >&2
    echo "$step FAILED: $*" >> "$out/skipped.txt"
  fi
}

# 1. sendfile: pairs 1 .. tmax/2; 6 batches (adaptive included), 2
#    baselines and the 2 peers per point.
for t in "${threads[@]}"; do
  p=$(( t / 2 ))
  (( p >= 1 )) || continue
  run "sendfile-p$p" 10 sendfile --pairs "$p" \
    --batch 32,64,128,256,512,adaptive
done
# 2. kmem, N threads, 4 KiB objects.
for t in "${threads[@]}"; do
  run "kmem-t$t" 5 kmem --threads "$t"
done
# 3. page-fault analogs at depth 4, one thread count per invocation.
for s in pagefault1 pagefault3 fallocate; do
  for t in "${threads[@]}"; do
    run "$s-t$t" 4 "$s" --threads "$t" --depth 4 --no-single-task
  done
done
# 4. multitenant: 16 tenants on 2, 4, 8 softirq threads.
for w in 2 4 8; do
  (( w <= tmax )) || continue
  run "multitenant-w$w" 5 multitenant --tenants 16 --softirq-threads "$w"
  run "multitenant-w$w-adaptive" 1 multitenant --tenants 16 \
    --softirq-threads "$w" --variant slots7 --batch adaptive
done

# Tables, seed claims at the largest thread counts and plots (gnuplot, if
# installed) of everything measured.
if ls "$out"/*.json >/dev/null 2>&1; then
  "$bin" report --from "$out"/*.json --plots "$out/plots" > "$out/report.txt" 2>&1 ||
    echo "report: see $out/report.txt (plots need gnuplot)" >&2
fi
echo "done in $(( SECONDS - start )) s; JSON in $out/ (skipped: $(wc -l < "$out/skipped.txt"))" >&2

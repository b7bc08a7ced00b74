#!/bin/bash
# Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
#
# libumemcg-preload.so in forking programs:
#  - preload_fork_stress: 8 threads allocating and mapping while the main
#    thread forks 300 times; every child must exit (0 hangs, each under a
#    60 s guard), once with plain exits and once with every child writing
#    its exit report (UMEMCG_REPORT): 301 reports, each with its own pid,
#    every one with anon == mapped (the children's too) and the parent's
#    with accounted == live;
#  - a shell pipeline (bash, with subshells, sort, awk) and python3 with a
#    multiprocessing pool of 4 workers: the same output as without the
#    preload, every report exact.
# Usage: preload_fork_test.sh <libumemcg-preload.so> <preload_fork_stress>
# Exit: 0 pass, 1 fail.
set -u
LIB=$(readlink -f "$1")
STRESS=$(readlink -f "$2")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

field() { sed -n "s/.* $1=\([0-9-]*\).*/\1/p" <<<"$2"; }

# Every report in $1: accounted == live and anon == mapped; $2 = "all"
# checks every line, "maps" checks anon == mapped on every line (every
# forked child's included: a mapping's charge and its table entry change
# together under the lock the fork handlers take) and accounted == live
# on the last one only (a child that inherited another thread's heap
# block between its charge and its count is off by that block), else only
# the last line.
check_reports() {
  local file=$1 which=$2 line last
  local lines
  if [[ "$which" == all || "$which" == maps ]]; then lines=$(cat "$file"); else lines=$(tail -n 1 "$file"); fi
  last=$(tail -n 1 "$file")
  while read -r line; do
    [[ -z "$line" ]] && continue
    if [[ "$which" != maps || "$line" == "$last" ]]; then
      [[ $(field live_bytes "$line") == $(field accounted_bytes "$line") ]] ||
        fail "accounted != live: $line"
    fi
    [[ $(field mapped_bytes "$line") == $(field anon_bytes "$line") ]] ||
      fail "anon != mapped: $line"
  done <<<"$lines"
}

# ---- The fork stress program ----
for variant in plain report; do
  rm -f "$WORK/reports"
  env_report=()
  [[ $variant == report ]] && env_report=(UMEMCG_REPORT="$WORK/reports")
  # timeout outside the preload (it would report too); env execs the
  # program, so only the program and its children report.
  out=$(timeout 1200 env LD_PRELOAD="$LIB" "${env_report[@]}" "$STRESS" 300 8 2>&1)
  rc=$?
  echo "fork stress ($variant): $(tail -n 1 <<<"$out")"
  [[ $rc == 0 ]] || fail "fork stress ($variant) exited $rc: $(tail -n 5 <<<"$out")"
  if [[ $variant == report ]]; then
    n=$(grep -c "^umemcg-preload: pid=" "$WORK/reports" 2>/dev/null)
    pids=$(sed -n 's/^umemcg-preload: pid=\([0-9]*\) .*/\1/p' "$WORK/reports" |
      sort -u | wc -l)
    echo "fork stress reports: $n lines, $pids pids"
    [[ "$n" == 301 && "$pids" == 301 ]] ||
      fail "expected 301 reports from 301 processes, got $n from $pids"
    check_reports "$WORK/reports" maps
  fi
done

# ---- A shell pipeline ----
PIPE='for i in $(seq 1 300); do echo $((i * 7919 % 1000)); done | sort -n | uniq -c |
  sort -rn | head -n 5; (seq 1 100000 | awk "{ s += \$1 } END { print s }") &
  wait; echo "$(seq 1 1000 | tr "\n" " " | wc -c)"'
want=$(bash -c "$PIPE")
rm -f "$WORK/reports"
got=$(UMEMCG_REPORT="$WORK/reports" LD_PRELOAD="$LIB" timeout 600 bash -c "$PIPE")
rc=$?
[[ $rc == 0 ]] || fail "pipeline exited $rc"
[[ "$got" == "$want" ]] || fail "pipeline printed '$got', want '$want'"
echo "pipeline: $(grep -c "^umemcg-preload:" "$WORK/reports") reports"
check_reports "$WORK/reports" all

# ---- python3 multiprocessing, 4 workers ----
PY=/usr/bin/python3
[[ -x "$PY" ]] || PY=$(command -v python3)
if [[ -n "$PY" ]]; then
  cat >"$WORK/pool.py" <<'PYEOF'
import multiprocessing as mp
def work(n):
    objs = [str(i) * 3 for i in range(2000 + n % 100)]
    return sum(len(o) for o in objs) + len(bytearray(100000 + n))
if __name__ == "__main__":
    with mp.Pool(4) as pool:
        print(sum(pool.map(work, range(400), chunksize=10)))
PYEOF
  want=$(timeout 600 "$PY" "$WORK/pool.py")
  rm -f "$WORK/reports"
  got=$(UMEMCG_REPORT="$WORK/reports" LD_PRELOAD="$LIB" timeout 600 "$PY" "$WORK/pool.py")
  rc=$?
  [[ $rc == 0 ]] || fail "python3 multiprocessing exited $rc"
  [[ "$got" == "$want" ]] || fail "python3 multiprocessing printed '$got', want '$want'"
  echo "python3 multiprocessing: $got, $(grep -c "^umemcg-preload:" "$WORK/reports") reports"
  check_reports "$WORK/reports" last
fi

if ((failures > 0)); then
  echo "$failures failure(s)"
  exit 1
fi
echo PASS

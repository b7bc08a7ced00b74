#!/bin/bash
# Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
#
# libumemcg-preload.so in forking programs:
#  - preload_fork_stress: 8 threads allocating and mapping while the main
#    thread forks 300 times; every child must exit (0 hangs, each under a
#    60 s guard), once with plain exits and twice with every child writing
#    its exit report (UMEMCG_REPORT; once under UMEMCG_ENFORCE, whose
#    realloc charges before it asks glibc): 301 reports, each with its own
#    pid, every one exact (accounted == live, anon == mapped: the
#    children's too, forked while other threads were booking blocks and
#    mappings);
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

# Every report line in $1 (every forked child's included): accounted ==
# live and anon == mapped. A mapping's charge and its table entry change
# together under the lock the fork handlers take; a heap block's charge
# and count are made in a booking window the fork handlers wait for, or
# deferred as one (src/preload/heap_fork.h). Prints how many lines were
# inexact.
check_reports() {
  local file=$1 line bad=0
  while read -r line; do
    [[ -z "$line" ]] && continue
    if [[ $(field live_bytes "$line") != $(field accounted_bytes "$line") ]]; then
      fail "accounted != live: $line"
      bad=$((bad + 1))
    elif [[ $(field mapped_bytes "$line") != $(field anon_bytes "$line") ]]; then
      fail "anon != mapped: $line"
      bad=$((bad + 1))
    fi
  done <"$file"
  echo "$(grep -c . "$file") reports, $bad inexact"
}

# ---- The fork stress program ----
for variant in plain report enforce; do
  rm -f "$WORK/reports"
  env_report=()
  [[ $variant != plain ]] && env_report=(UMEMCG_REPORT="$WORK/reports")
  [[ $variant == enforce ]] && env_report+=(UMEMCG_ENFORCE=1 UMEMCG_MAX=4G)
  # timeout outside the preload (it would report too); env execs the
  # program, so only the program and its children report.
  out=$(timeout 1200 env LD_PRELOAD="$LIB" "${env_report[@]}" "$STRESS" 300 8 2>&1)
  rc=$?
  echo "fork stress ($variant): $(tail -n 1 <<<"$out")"
  [[ $rc == 0 ]] || fail "fork stress ($variant) exited $rc: $(tail -n 5 <<<"$out")"
  if [[ $variant != plain ]]; then
    n=$(grep -c "^umemcg-preload: pid=" "$WORK/reports" 2>/dev/null)
    pids=$(sed -n 's/^umemcg-preload: pid=\([0-9]*\) .*/\1/p' "$WORK/reports" |
      sort -u | wc -l)
    echo "fork stress reports: $n lines, $pids pids"
    [[ "$n" == 301 && "$pids" == 301 ]] ||
      fail "expected 301 reports from 301 processes, got $n from $pids"
    check_reports "$WORK/reports"
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
check_reports "$WORK/reports"

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
  check_reports "$WORK/reports"
fi

if ((failures > 0)); then
  echo "$failures failure(s)"
  exit 1
fi
echo PASS

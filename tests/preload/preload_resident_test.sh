#!/bin/bash
# Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
#
# libumemcg-preload.so's residency mode for mappings
# (UMEMCG_MAP_CHARGE=resident) against the default, on real programs:
#  - resident_prog: a 64 MiB mapping touched step by step; in the resident
#    mode the charge follows the touched pages (within the scanner's
#    period) and falls after MADV_DONTNEED and munmap; under
#    UMEMCG_ENFORCE=1 UMEMCG_MAX=32M growth past the limit is charged and
#    the next mmap and malloc are refused until pages are released (and a
#    refused malloc counts the mappings again, so pages released by a raw
#    system call give their charge back without the scanner); with
#    UMEMCG_MAP_CHARGE=at-mmap the whole mapping is charged from mmap to
#    munmap, as before;
#  - preload_fork_stress (8 threads mapping and allocating, the main
#    thread forking 100 times) with a 5 ms scanner: every report, every
#    child's included, exact (anon == mapped, accounted == live);
#  - python3, if installed: the same output as without the preload, an
#    exact report, and MemoryError at UMEMCG_MAX=64M under UMEMCG_ENFORCE.
# Usage: preload_resident_test.sh <libumemcg-preload.so> <resident_prog>
#        <preload_fork_stress>
# Exit: 0 pass, 1 fail.
set -u
LIB=$(readlink -f "$1")
PROG=$(readlink -f "$2")
STRESS=$(readlink -f "$3")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

field() { sed -n "s/.* $1=\([0-9-]*\).*/\1/p" <<<"$2"; }

# Every report line in $1: accounted == live and anon == mapped.
check_reports() {
  local file=$1 what=$2 line bad=0
  [[ -s "$file" ]] || { fail "$what: no report"; return; }
  while read -r line; do
    [[ -z "$line" ]] && continue
    if [[ $(field live_bytes "$line") != $(field accounted_bytes "$line") ]]; then
      fail "$what: accounted != live: $line"
      bad=$((bad + 1))
    elif [[ $(field mapped_bytes "$line") != $(field anon_bytes "$line") ]]; then
      fail "$what: anon != mapped: $line"
      bad=$((bad + 1))
    fi
  done <"$file"
  echo "$what: $(grep -c . "$file") reports, $bad inexact"
}

# run_prog <mode> <env...>: resident_prog <mode> under the preload.
run_prog() {
  local mode=$1
  shift
  rm -f "$WORK/report"
  timeout 300 env LD_PRELOAD="$LIB" UMEMCG_REPORT="$WORK/report" "$@" \
    "$PROG" "$mode"
  local rc=$?
  [[ $rc == 0 ]] || fail "resident_prog $mode ($*) exited $rc"
  check_reports "$WORK/report" "resident_prog $mode"
}

run_prog resident UMEMCG_MAP_CHARGE=resident UMEMCG_MAP_SCAN_MS=20
run_prog limit UMEMCG_MAP_CHARGE=resident UMEMCG_MAP_SCAN_MS=20 \
  UMEMCG_ENFORCE=1 UMEMCG_MAX=32M
# The charge slow path: the scanner never runs (a day's period).
run_prog slowpath UMEMCG_MAP_CHARGE=resident UMEMCG_MAP_SCAN_MS=86400000 \
  UMEMCG_ENFORCE=1 UMEMCG_MAX=32M
run_prog at-mmap UMEMCG_MAP_CHARGE=at-mmap
# The default: at-mmap (docs/preload.md says why).
run_prog at-mmap

# ---- Fork-exact children with the scanner running ----
rm -f "$WORK/reports"
out=$(timeout 1200 env LD_PRELOAD="$LIB" UMEMCG_MAP_CHARGE=resident \
  UMEMCG_MAP_SCAN_MS=5 UMEMCG_REPORT="$WORK/reports" "$STRESS" 100 8 2>&1)
rc=$?
echo "fork stress (resident): $(tail -n 1 <<<"$out")"
[[ $rc == 0 ]] || fail "fork stress exited $rc: $(tail -n 5 <<<"$out")"
pids=$(sed -n 's/^umemcg-preload: pid=\([0-9]*\) .*/\1/p' "$WORK/reports" |
  sort -u | wc -l)
[[ "$pids" == 101 ]] || fail "expected 101 reports, got $pids"
check_reports "$WORK/reports" "fork stress (resident)"

# ---- python3 ----
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3 2>/dev/null)
if [[ -n "$PY" && -x "$PY" ]]; then
  JOB='d = {i: (str(i) * 3, [i]) for i in range(300000)}; print(len(d))'
  want=$("$PY" -c "$JOB")
  rm -f "$WORK/report"
  got=$(env LD_PRELOAD="$LIB" UMEMCG_MAP_CHARGE=resident \
    UMEMCG_REPORT="$WORK/report" "$PY" -c "$JOB")
  [[ "$got" == "$want" ]] || fail "python3: output '$got' != '$want'"
  check_reports "$WORK/report" "python3 (resident)"
  out=$(env LD_PRELOAD="$LIB" UMEMCG_MAP_CHARGE=resident UMEMCG_ENFORCE=1 \
    UMEMCG_MAX=64M "$PY" -c 'a = [str(i) * 10 for i in range(10**8)]' 2>&1)
  grep -q MemoryError <<<"$out" ||
    fail "python3 at 64M (resident): no MemoryError: $(tail -n 3 <<<"$out")"
  echo "python3 at 64M (resident): $(grep -m1 MemoryError <<<"$out")"
else
  echo "python3 not installed: its part skipped"
fi

if ((failures > 0)); then
  echo "$failures failures"
  exit 1
fi
echo PASS

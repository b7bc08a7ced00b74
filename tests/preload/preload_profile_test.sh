#!/bin/bash
# Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
#
# UMEMCG_PROFILE: an unmodified C program under libumemcg-preload.so writes
# its process group's heap profile at exit (legacy heap text with its
# mapped files); `go tool pprof -top` reads it, symbolizing from the
# program's binary, and attributes ~30 MiB to tenant_a_work and ~10 MiB to
# tenant_b_work (within 10%; at an 8 KiB interval a 64 KiB block is sampled
# with probability 1 - exp(-8), so the estimate cannot stray);
# `google-pprof --text` names both; SIGUSR2 writes one more (heap.PID.1).
# A missing go or google-pprof fails the test.
# With a third argument (libjemalloc.so.2) the same runs in the preload's
# jemalloc mode (UMEMCG_HEAP=jemalloc, jemalloc preloaded behind the
# preload), where sampled blocks live in each group's sampled arena.
# Usage: preload_profile_test.sh <libumemcg-preload.so> <profile_target>
#        [libjemalloc.so.2]
set -u
LIB=$(readlink -f "$1")
PROG=$(readlink -f "$2")
if [[ $# -ge 3 ]]; then
  export UMEMCG_HEAP=jemalloc
  LIB="$LIB $(readlink -f "$3")"
  echo "jemalloc mode: LD_PRELOAD=\"$LIB\""
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
command -v go > /dev/null || { echo "FAIL: go is required (apt-get install golang-go)"; exit 1; }

UMEMCG_PROFILE="$WORK/heap.%p" UMEMCG_PROFILE_RATE=8192 LD_PRELOAD="$LIB" "$PROG"
PROFILE=$(ls "$WORK"/heap.* 2> /dev/null | head -1)
[[ -s "$PROFILE" ]] || { echo "FAIL: no profile written"; exit 1; }
head -1 "$PROFILE"
TOP=$(HOME="$WORK" GOCACHE="$WORK/gocache" go tool pprof -top -sample_index=inuse_space "$PROG" "$PROFILE" 2>&1)
echo "$TOP"
# flat of a function in MB (pprof's units are powers of 1024).
flat_mb() {
  awk -v f="$1" '$NF == f {
    v = $1; u = v; sub(/[0-9.]+/, "", u); sub(/[A-Za-z]+$/, "", v);
    m = (u == "GB") ? 1024 : (u == "MB") ? 1 : (u == "kB") ? 1 / 1024 : 1 / 1048576;
    printf "%.3f\n", v * m; exit }' <<< "$TOP"
}
fail=0
check() {
  local got
  got=$(flat_mb "$1")
  if [[ -z "$got" ]] || ! awk -v g="$got" -v t="$2" 'BEGIN { exit !(g > t * 0.9 && g < t * 1.1) }'; then
    echo "FAIL: $1 holds '${got}' MiB, expected $2 MiB +-10%"
    fail=1
  else
    echo "ok: $1 holds $got MiB (truth $2 MiB)"
  fi
}
check tenant_a_work 30
check tenant_b_work 10

# gperftools' own reader (Debian google-perftools) on the same file.
command -v google-pprof > /dev/null || { echo "FAIL: google-pprof is required (apt-get install google-perftools)"; exit 1; }
TEXT=$(google-pprof --text --inuse_space "$PROG" "$PROFILE" 2>&1)
echo "$TEXT"
for f in tenant_a_work tenant_b_work; do
  grep -qE "[[:space:]]$f\$" <<< "$TEXT" || { echo "FAIL: google-pprof does not name $f"; fail=1; }
done

# SIGUSR2: a profile written at the next sampling decision (heap.PID.1),
# holding tenant A's 30 MiB; the exit one still follows.
rm -f "$WORK"/heap.*
PROFILE_TARGET_SIGNAL=1 UMEMCG_PROFILE="$WORK/heap.%p" UMEMCG_PROFILE_RATE=8192 LD_PRELOAD="$LIB" "$PROG"
SIGNALED=$(ls "$WORK"/heap.*.1 2> /dev/null | head -1)
if [[ ! -s "$SIGNALED" ]]; then
  echo "FAIL: no profile written on SIGUSR2"; fail=1
else
  TOP=$(HOME="$WORK" GOCACHE="$WORK/gocache" go tool pprof -top -sample_index=inuse_space "$PROG" "$SIGNALED" 2>&1)
  echo "$TOP"
  check tenant_a_work 30
fi
exit $fail

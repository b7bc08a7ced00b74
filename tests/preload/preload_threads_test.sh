#!/bin/bash
# Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
#
# cgroup.threads and cgroup.procs written through a preloaded program's
# mount (UMEMCG_MOUNT) move its threads (docs/preload.md): a program with
# two threads A and B, each allocating BYTES per phase in 1000-byte blocks
# and mapping MAP bytes of anonymous memory (preload_threads_prog.cc):
#  - both threads (and the main thread) are listed in process/cgroup.threads;
#  - phase 1, nothing moved: process/memory.current grows by both;
#  - A's TID written to process/moved/cgroup.threads (a new group): it is
#    listed there and no longer in process; in phase 2 moved/memory.current
#    grows by what A allocates (not B's), and process's own share by B's;
#  - the PID written to process/all/cgroup.procs: in phase 3 all/memory.current
#    grows by what both allocate;
#  - umemcg_preload_set_group and a move, the later wins: A sets its group
#    to process/picked (phase 4: picked grows by A's, all by B's, and
#    cgroup.threads lists A in picked), then A's TID is written to
#    process/all/cgroup.threads (phase 5: all grows by both).
# Header mode, or jemalloc mode when libjemalloc.so.2 is given.
# Usage: preload_threads_test.sh <libumemcg-preload.so> <preload_threads_prog>
#        [<libjemalloc.so.2>]
# Exit: 0 pass, 1 fail, 77 skipped (no usable /dev/fuse, or mounting failed).
set -u
LIB=$(readlink -f "$1")
PROG=$(readlink -f "$2")
JE=${3:+$(readlink -f "$3")}
WORK=$(mktemp -d)
MNT="$WORK/mnt"
mkdir "$MNT"
PID=
cleanup() {
  touch "$WORK/exit"
  [[ -n "$PID" ]] && { sleep 0.5; kill "$PID" 2>/dev/null; }
  grep -q " $MNT " /proc/mounts && fusermount3 -u "$MNT" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../ops_shell_lib.sh"
if [[ -n "$MOUNT_SKIP" ]]; then
  echo "SKIPPED: $MOUNT_SKIP"
  exit 77
fi

MiB=$((1024 * 1024))
MAP=$((4 * MiB))
BYTES=$((24 * MiB))
PER=$((BYTES + MAP))  # what one thread charges per phase
if [[ -n "$JE" ]]; then
  echo "mode: jemalloc"
  env LD_PRELOAD="$LIB $JE" UMEMCG_HEAP=jemalloc UMEMCG_MOUNT="$MNT" \
    "$PROG" "$WORK" "$BYTES" "$MAP" >"$WORK/out" 2>"$WORK/err" &
else
  echo "mode: header"
  env LD_PRELOAD="$LIB" UMEMCG_MOUNT="$MNT" \
    "$PROG" "$WORK" "$BYTES" "$MAP" >"$WORK/out" 2>"$WORK/err" &
fi
PID=$!

wait_file() {  # name: up to 120 s, while the program runs
  for _ in $(seq 1200); do
    [[ -e "$WORK/$1" ]] && return 0
    kill -0 "$PID" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
if ! wait_file tids; then
  echo "FAIL: the program did not start: $(cat "$WORK/err")"
  exit 1
fi
if grep -q "UMEMCG_MOUNT=" "$WORK/err"; then
  echo "SKIPPED: mounting failed: $(cat "$WORK/err")"
  exit 77
fi
read -r P A B <"$WORK/tids"
echo "pid $P, thread A $A, thread B $B"
listed() { grep -qx "$2" "$MNT/$1/cgroup.threads"; }
current() { cat "$MNT/$1/memory.current"; }
# Whether $2 is within [$3, $4] percent of PER * $5 (the threads' count).
near() {
  local what=$1 got=$2 lo=$3 hi=$4 n=$5
  echo "$what: $((got / 1024)) KiB (expected ~$((n * PER / 1024)) KiB)"
  ((got * 100 >= lo * n * PER && got * 100 <= hi * n * PER)) ||
    fail "$what: $got bytes, not within ${lo}%..${hi}% of $((n * PER))"
}
phase() {
  touch "$WORK/go$1"
  wait_file "done$1" || fail "phase $1 did not complete: $(cat "$WORK/err")"
}

for t in "$P" "$A" "$B"; do
  listed process "$t" || fail "$t not in process/cgroup.threads: $(cat "$MNT/process/cgroup.threads")"
done

# ---- phase 1: nothing moved ----
p0=$(current process)
phase 1
p1=$(current process)
near "phase 1: process grew" $((p1 - p0)) 90 150 2

# ---- phase 2: A moved to process/moved ----
mkdir "$MNT/process/moved" || fail "mkdir process/moved"
echo "$A" >"$MNT/process/moved/cgroup.threads" ||
  fail "writing $A to process/moved/cgroup.threads"
listed process/moved "$A" || fail "A not listed in process/moved/cgroup.threads"
listed process "$A" && fail "A still listed in process/cgroup.threads"
listed process "$B" || fail "B no longer listed in process/cgroup.threads"
m1=$(current process/moved)
p1=$(current process)
phase 2
m2=$(current process/moved)
p2=$(current process)
near "phase 2: moved grew (A's)" $((m2 - m1)) 90 150 1
near "phase 2: process's own share grew (B's)" $(((p2 - m2) - (p1 - m1))) 90 150 1

# ---- phase 3: the whole process moved to process/all ----
mkdir "$MNT/process/all" || fail "mkdir process/all"
echo "$P" >"$MNT/process/all/cgroup.procs" ||
  fail "writing $P to process/all/cgroup.procs"
for t in "$P" "$A" "$B"; do
  listed process/all "$t" || fail "$t not listed in process/all/cgroup.threads"
done
grep -qx "$P" "$MNT/process/all/cgroup.procs" ||
  fail "process/all/cgroup.procs does not name $P"
a2=$(current process/all)
m2=$(current process/moved)
phase 3
a3=$(current process/all)
m3=$(current process/moved)
near "phase 3: all grew (A's and B's)" $((a3 - a2)) 90 150 2
# Blocks charged before a move stay where they were.
((m3 >= m2)) || fail "process/moved shrank: $m2 -> $m3"

# ---- phase 4: A sets its own group (after the move: it wins) ----
echo picked >"$WORK/set4"
a3=$(current process/all)
phase 4
[[ -d "$MNT/process/picked" ]] || fail "process/picked was not created"
k4=$(current process/picked)
a4=$(current process/all)
near "phase 4: picked grew (A's, set_group)" "$k4" 90 150 1
near "phase 4: all grew (B's)" $((a4 - a3)) 90 150 1
listed process/picked "$A" || fail "A not listed in process/picked/cgroup.threads"
listed process/all "$A" && fail "A still listed in process/all/cgroup.threads"

# ---- phase 5: A moved back after its set_group (the move wins) ----
echo "$A" >"$MNT/process/all/cgroup.threads" ||
  fail "writing $A to process/all/cgroup.threads"
phase 5
k5=$(current process/picked)
a5=$(current process/all)
near "phase 5: all grew (A's and B's)" $((a5 - a4)) 90 150 2
((k5 - k4 < PER / 10)) || fail "phase 5: picked grew by $((k5 - k4))"

touch "$WORK/exit"
wait "$PID"
rc=$?
PID=
((rc == 0)) || fail "the program exited $rc: $(cat "$WORK/err")"
finish

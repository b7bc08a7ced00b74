#!/bin/bash
# Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
#
# libumemcg-preload.so's UMEMCG_METRICS and UMEMCG_MOUNT on a real program
# (python3 holding ~32 MB, having forked a few children): while it runs,
# /metrics (curl) must show the
# "process" group's memory.current and the mount must show the same group as
# files; a limit written through the mount must read back through /metrics;
# the program's children must not see the two variables; after the program
# exits the mount must be gone (auto_unmount).
# Usage: preload_ops_test.sh <libumemcg-preload.so>
# Exit: 0 pass, 1 fail, 77 when the metrics part passed but the mount part
# could not run (no /dev/fuse, mounting refused, built without libfuse3),
# or python3 / curl are missing.
set -u
LIB=$(readlink -f "$1")
WORK=$(mktemp -d)
MNT="$WORK/mnt"
mkdir "$MNT"
PID=
cleanup() {
  [[ -n "$PID" ]] && kill "$PID" 2>/dev/null
  grep -q " $MNT " /proc/mounts && fusermount3 -u "$MNT" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../ops_shell_lib.sh"

# The interpreter itself, not a wrapper script (a pyenv shim would be the
# process that mounts, and then exec python3).
PY=/usr/bin/python3
[[ -x "$PY" ]] || PY=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
if [[ ! -x "$PY" ]] || ! command -v curl >/dev/null; then
  echo "SKIPPED: needs python3 and curl"
  exit 77
fi

# Holds ~32 MB until $WORK/done exists (bounded: 120 s), after writing what
# it sees of the two variables to $WORK/ready.
cat >"$WORK/hold.py" <<'PY'
import os, sys, time
work = sys.argv[1]
held = [bytearray(4096 + i % 4096) for i in range(4000)]
# Children forked while the mount and the server run (their threads use
# the operations module's copy of umemcg; fork handlers must not upset it).
for _ in range(5):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
seen = "%s %s" % (os.environ.get("UMEMCG_MOUNT"),
                  os.environ.get("UMEMCG_METRICS"))
with open(work + "/ready.tmp", "w") as f:
    f.write(seen + "\n")
os.rename(work + "/ready.tmp", work + "/ready")
deadline = time.time() + 120
while not os.path.exists(work + "/done") and time.time() < deadline:
    time.sleep(0.05)
print(len(held))
PY

free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts the program; a port taken between free_port and the bind (the
# preload then warns on stderr) is retried with another one.
for attempt in 1 2 3; do
  PORT=$(free_port)
  rm -f "$WORK/ready" "$WORK/done"
  env_mount=()
  [[ -z "$MOUNT_SKIP" ]] && env_mount=(UMEMCG_MOUNT="$MNT")
  env LD_PRELOAD="$LIB" UMEMCG_METRICS="127.0.0.1:$PORT" "${env_mount[@]}" \
    "$PY" "$WORK/hold.py" "$WORK" >"$WORK/out" 2>"$WORK/err" &
  PID=$!
  for _ in $(seq 600); do
    [[ -e "$WORK/ready" ]] || ! kill -0 "$PID" 2>/dev/null && break
    sleep 0.1
  done
  grep -q "UMEMCG_METRICS=" "$WORK/err" || break
  touch "$WORK/done"
  wait "$PID"
  PID=
  echo "port $PORT: $(cat "$WORK/err")"
done
if [[ ! -e "$WORK/ready" ]]; then
  echo "FAIL: the program did not start: $(cat "$WORK/err")"
  exit 1
fi
cat "$WORK/err"
[[ "$(cat "$WORK/ready")" == "None None" ]] ||
  fail "the program still sees UMEMCG_MOUNT / UMEMCG_METRICS: $(cat "$WORK/ready")"

# ---- metrics ----
metrics=$(curl -s --max-time 30 "http://127.0.0.1:$PORT/metrics")
current=$(sed -n 's/^umemcg_memory_current_bytes{group="process"} \([0-9]*\)$/\1/p' \
  <<<"$metrics")
echo "metrics: process memory.current = ${current:-none}"
if [[ -z "$current" ]]; then
  fail "no umemcg_memory_current_bytes{group=\"process\"} in /metrics"
elif ((current < 16 * 1024 * 1024)); then
  fail "process memory.current $current < 16 MiB while ~32 MB are held"
fi

# ---- mount ----
if [[ -z "$MOUNT_SKIP" ]] && grep -q "UMEMCG_MOUNT=" "$WORK/err"; then
  MOUNT_SKIP="mounting failed: $(grep "UMEMCG_MOUNT=" "$WORK/err")"
fi
if [[ -z "$MOUNT_SKIP" ]]; then
  grep -q " $MNT fuse.umemcg " /proc/mounts || fail "$MNT is not a umemcg mount"
  file_current=$(cat "$MNT/process/memory.current")
  echo "mount: process/memory.current = ${file_current:-none}"
  [[ "$file_current" =~ ^[0-9]+$ ]] && ((file_current >= 16 * 1024 * 1024)) ||
    fail "process/memory.current through the mount: '$file_current'"
  echo 3G >"$MNT/process/memory.high" || fail "writing memory.high"
  high=$(curl -s --max-time 30 "http://127.0.0.1:$PORT/metrics" |
    sed -n 's/^umemcg_memory_high_bytes{group="process"} \([0-9]*\)$/\1/p')
  [[ "$high" == 3221225472 ]] ||
    fail "memory.high written through the mount reads '$high' in /metrics"
fi

touch "$WORK/done"
wait "$PID"
rc=$?
PID=
[[ $rc == 0 && "$(cat "$WORK/out")" == 4000 ]] ||
  fail "the program exited $rc, printed '$(cat "$WORK/out")'"
if [[ -z "$MOUNT_SKIP" ]]; then
  # fusermount3 unmounts once the process is gone; give it up to 30 s.
  for _ in $(seq 300); do
    grep -q " $MNT " /proc/mounts || break
    sleep 0.1
  done
  grep -q " $MNT " /proc/mounts && fail "$MNT still mounted after exit"
fi

# ---- limits below usage, written through the mount ----
# An operator lowering a running program's limits: memory.high and then
# memory.max written below its usage (issue: the operations module's copy
# of umemcg drained the stocks with its rseq area offset unset and the
# program aborted with "free(): invalid pointer"). As documented
# (docs/preload.md): the writes succeed; the program lives; over
# memory.high it is not made to sleep inside malloc (its next allocation
# succeeds, counted as a "high" event); over memory.max under
# UMEMCG_ENFORCE=1 its next allocation is refused (MemoryError), counted as
# a "max" event.
cat >"$WORK/lower.py" <<'PY'
import os, sys
work = sys.argv[1]
# Told of each write through a FIFO: once memory.max is below usage every
# allocation is refused, so the program waits inside read() and then
# allocates only for the attempt (MemoryError is preallocated) and after
# giving its memory back.
fd = os.open(work + "/go", os.O_RDONLY)
held = [bytearray(4 << 20) for i in range(12)]
held += [bytearray(1000) for i in range(4000)]
open(work + "/lower-ready", "w").close()
os.read(fd, 1)
held.append(bytearray(4 << 20))
print("after high: allocated", flush=True)
os.read(fd, 1)
try:
    more = bytearray(8 << 20)
    result = "allocated"
except MemoryError:
    result = "MemoryError"
del held
print("after max: " + result, flush=True)
PY
lower_below() {  # try number
  rm -f "$WORK"/lower-ready "$WORK/go"
  mkfifo "$WORK/go"
  env LD_PRELOAD="$LIB" UMEMCG_MOUNT="$MNT" UMEMCG_ENFORCE=1 \
    "$PY" "$WORK/lower.py" "$WORK" >"$WORK/lower.out" 2>"$WORK/lower.err" &
  PID=$!
  exec 9>"$WORK/go"
  for _ in $(seq 600); do
    [[ -e "$WORK/lower-ready" ]] || ! kill -0 "$PID" 2>/dev/null && break
    sleep 0.1
  done
  local usage
  usage=$(cat "$MNT/process/memory.current" 2>/dev/null)
  if [[ ! "$usage" =~ ^[0-9]+$ ]] || ((usage < 40 * 1024 * 1024)); then
    fail "try $1: memory.current '$usage' before lowering the limits"
  fi
  local half=$((usage / 2))
  echo "$half" >"$MNT/process/memory.high" ||
    fail "try $1: writing memory.high=$half below usage $usage"
  echo >&9
  for _ in $(seq 600); do
    grep -q "after high" "$WORK/lower.out" || ! kill -0 "$PID" 2>/dev/null &&
      break
    sleep 0.1
  done
  echo "$half" >"$MNT/process/memory.max" ||
    fail "try $1: writing memory.max=$half below usage $usage"
  local events
  events=$(cat "$MNT/process/memory.events" 2>/dev/null)
  echo >&9
  exec 9>&-
  wait "$PID"
  local rc=$?
  PID=
  local out
  out=$(cat "$WORK/lower.out")
  [[ $rc == 0 ]] ||
    fail "try $1: the program exited $rc after the limits were lowered: $(cat "$WORK/lower.err")"
  [[ "$out" == $'after high: allocated\nafter max: MemoryError' ]] ||
    fail "try $1: the program printed '$out' (wanted: allocated over high, MemoryError over max)"
  grep -qx "high [1-9][0-9]*" <<<"$events" ||
    fail "try $1: no high event over memory.high: $events"
  [[ -s "$WORK/lower.err" ]] && fail "try $1: stderr: $(cat "$WORK/lower.err")"
}
if [[ -z "$MOUNT_SKIP" ]]; then
  for try in $(seq "${UMEMCG_LOWER_TRIES:-2}"); do
    lower_below "$try"
    for _ in $(seq 300); do
      grep -q " $MNT " /proc/mounts || break
      sleep 0.1
    done
  done
  echo "limits lowered below usage through the mount: ${UMEMCG_LOWER_TRIES:-2} tries"
fi

finish

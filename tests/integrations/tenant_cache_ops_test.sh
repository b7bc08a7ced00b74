#!/bin/bash
# Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
#
# examples/tenant_cache with --metrics (port 0) and --mount: after a set
# for tenant "a", /metrics must show tenants/a's memory.current and
# memory.max, the mount must show the same group as files, a memory.max
# written through the mount must read back in /metrics, and the optional
# `umemcg top DIR --once` must list the tenant. SIGTERM stops it with exit
# 0 and the mount gone.
# Usage: tenant_cache_ops_test.sh <tenant_cache> [<umemcg tool>]
# Exit: 0 pass, 1 fail, 77 when the metrics part passed but the mount part
# could not run (no /dev/fuse, mounting refused, built without libfuse3),
# or curl is missing.
set -u
CACHE=$1
TOOL=${2:-}
WORK=$(mktemp -d)
MNT="$WORK/mnt"
mkdir "$MNT"
PID=
cleanup() {
  [[ -n "$PID" ]] && kill "$PID" 2>/dev/null && wait "$PID"
  grep -q " $MNT " /proc/mounts && fusermount3 -u "$MNT" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../ops_shell_lib.sh"
command -v curl >/dev/null || { echo "SKIPPED: needs curl"; exit 77; }

start() {
  "$CACHE" --port=0 --metrics=127.0.0.1:0 --tenant-max=8M "$@" \
    >"$WORK/out" 2>"$WORK/err" &
  PID=$!
  for _ in $(seq 600); do  # bounded: 60 s
    grep -q "listening" "$WORK/out" || ! kill -0 "$PID" 2>/dev/null && break
    sleep 0.1
  done
}
if [[ -z "$MOUNT_SKIP" ]]; then
  start --mount="$MNT"
  if ! grep -q listening "$WORK/out" && grep -q -- "--mount" "$WORK/err"; then
    MOUNT_SKIP="mounting failed: $(cat "$WORK/err")"
    wait "$PID"
    PID=
  fi
fi
[[ -n "$PID" ]] || start
cat "$WORK/out" "$WORK/err"
PORT=$(sed -n 's/^tenant_cache listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$WORK/out")
METRICS=$(sed -n 's|^tenant_cache metrics at http://\(.*\)/metrics$|\1|p' "$WORK/out")
if [[ -z "$PORT" || -z "$METRICS" ]]; then
  echo "FAIL: tenant_cache did not start"
  exit 1
fi

# One item for tenant a over the memcached text protocol.
exec 3<>"/dev/tcp/127.0.0.1/$PORT"
printf 'set a:k 0 0 5000\r\n%05000d\r\nquit\r\n' 0 >&3
reply=$(timeout 30 cat <&3)
exec 3<&-
[[ "$reply" == STORED* ]] || fail "set a:k answered '$reply'"

metric() {  # metric NAME GROUP: the sample's value from one scrape
  curl -s --max-time 30 "http://$METRICS/metrics" |
    sed -n "s|^$1{group=\"$2\"} \\([0-9]*\\)\$|\\1|p"
}
current=$(metric umemcg_memory_current_bytes tenants/a)
echo "metrics: tenants/a memory.current = ${current:-none}"
[[ -n "$current" ]] && ((current >= 5000)) ||
  fail "tenants/a memory.current in /metrics: '$current'"
[[ "$(metric umemcg_memory_max_bytes tenants/a)" == 8388608 ]] ||
  fail "tenants/a memory.max in /metrics is not 8M"

if [[ -z "$MOUNT_SKIP" ]]; then
  file_current=$(cat "$MNT/tenants/a/memory.current")
  echo "mount: tenants/a/memory.current = ${file_current:-none}"
  [[ "$file_current" =~ ^[0-9]+$ ]] && ((file_current >= 5000)) ||
    fail "tenants/a/memory.current through the mount: '$file_current'"
  echo 4M >"$MNT/tenants/a/memory.max" || fail "writing memory.max"
  [[ "$(metric umemcg_memory_max_bytes tenants/a)" == 4194304 ]] ||
    fail "memory.max written through the mount does not read back as 4M"
  if [[ -n "$TOOL" && -x "$TOOL" ]]; then
    top=$("$TOOL" top "$MNT" --once 2>&1)
    echo "$top"
    grep -q '^tenants/a ' <<<"$top" ||
      fail "umemcg top --once does not list tenant a"
  fi
fi

kill -TERM "$PID"
wait "$PID"
rc=$?
PID=
((rc == 0)) || fail "tenant_cache exited $rc after SIGTERM"
grep -q " $MNT " /proc/mounts && fail "$MNT still mounted after exit"

finish

#!/bin/bash
# Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
#
# The two ways libumemcg-preload.so charges anonymous mappings
# (UMEMCG_MAP_CHARGE=at-mmap and =resident) under small limits: each job
# runs with UMEMCG_ENFORCE=1 and UMEMCG_MAX=32M, 64M and 128M, and the
# table shows how it ended (exit status and the first error line it
# printed: MemoryError, RangeError, an abort) and the peak the preload
# accounted (memory.peak of "process", from the exit report).
#
#   python3 small   ~1M small objects (pymalloc arenas, mmap'd)
#   python3 large   200 bytearrays of 1 MiB (glibc malloc, mmap'd chunks)
#   python3 sparse  a 256 MiB private anonymous mmap.mmap, 16 MiB written
#   node start      node -e 'console.log(1)'
#   node objects    2M small objects and a Map (V8 heap)
#   node buffers    200 Buffer.alloc(1 MiB) (ArrayBuffers, calloc)
#   ruby, numpy     when installed (python3 -c 'import numpy' ...)
# Usage: scripts/preload_map_charge.sh [libumemcg-preload.so]
set -u
LIB=$(readlink -f "${1:-build/release/lib/libumemcg-preload.so}")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)

jobs=()
jobs+=("python3 small|$PY -c 'a = [(i, str(i) * 3, [i]) for i in range(1000000)]; print(len(a))'")
jobs+=("python3 large|$PY -c 'b = [bytearray(1 << 20) for i in range(200)]; print(len(b))'")
jobs+=("python3 sparse|$PY -c 'import mmap; m = mmap.mmap(-1, 256 << 20, flags=mmap.MAP_PRIVATE); m[:16 << 20] = bytes(16 << 20); print(len(m))'")
if command -v node >/dev/null; then
  jobs+=("node start|node -e 'console.log(1)'")
  jobs+=("node objects|node -e 'const a = []; for (let i = 0; i < 2000000; i++) a.push({i, s: \"x\" + i, v: [i, i + 1]}); console.log(a.length)'")
  jobs+=("node buffers|node -e 'const a = []; for (let i = 0; i < 200; i++) a.push(Buffer.alloc(1 << 20)); console.log(a.length)'")
fi
if command -v ruby >/dev/null; then
  jobs+=("ruby objects|ruby -e 'a = (1..1000000).map { |i| [i, i.to_s] }; puts a.size'")
fi
if "$PY" -c 'import numpy' 2>/dev/null; then
  jobs+=("numpy zeros|$PY -c 'import numpy as np; a = np.zeros((4096, 4096)); a[:1024] = 1; print(a.sum())'")
fi

echo "| job | mode | max | exit | first error line | peak accounted (MiB) |"
echo "|---|---|---|---|---|---|"
for entry in "${jobs[@]}"; do
  name=${entry%%|*}
  cmd=${entry#*|}
  for mode in at-mmap resident; do
    for max in 32M 64M 128M; do
      rm -f "$WORK/report"
      out=$(env LD_PRELOAD="$LIB" UMEMCG_REPORT="$WORK/report" \
        UMEMCG_ENFORCE=1 UMEMCG_MAX=$max UMEMCG_MAP_CHARGE=$mode \
        timeout 300 bash -c "$cmd" 2>&1)
      rc=$?
      err=$(grep -m1 -E 'Error|error|Abort|abort|Fatal|fatal|failed|Killed' \
        <<<"$out" | cut -c1-70 | tr '|' '/')
      peak=$(grep "pid=" "$WORK/report" 2>/dev/null |
        sed -n 's/.* peak_pages=\([0-9]*\).*/\1/p' | sort -n | tail -n 1)
      printf '| %s | %s | %s | %s | %s | %s |\n' "$name" "$mode" "$max" \
        "$rc" "${err:--}" "$(( ${peak:-0} * 4096 / 1048576 ))"
    done
  done
done
echo
echo "machine: $(nproc) CPUs; $(uptime)"

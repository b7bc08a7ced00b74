#!/bin/bash
# Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
#
# Overhead of libumemcg-preload.so on real programs: best-of-N wall time
# with and without LD_PRELOAD (accounting on, no limit), and the ratio.
# A measurement, not a test: run it on a quiet machine.
# Usage: scripts/preload_overhead.sh [build/release/lib/libumemcg-preload.so] [N]
set -u
LIB=$(readlink -f "${1:-build/release/lib/libumemcg-preload.so}")
N=${2:-5}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)

best_ms() {  # best wall time of N runs of "$@", in ms
  local best=0 t0 t1 ms
  for ((i = 0; i < N; i++)); do
    t0=$(date +%s%N)
    "$@" >/dev/null 2>&1
    t1=$(date +%s%N)
    ms=$(((t1 - t0) / 1000000))
    ((best == 0 || ms < best)) && best=$ms
  done
  echo "$best"
}

measure() {  # name, command...
  local name=$1
  shift
  local base pre
  base=$(best_ms "$@")
  pre=$(best_ms env LD_PRELOAD="$LIB" "$@")
  awk -v n="$name" -v b="$base" -v p="$pre" \
      'BEGIN { printf "%-28s %8d ms %8d ms   x%.2f\n", n, b, p, (b ? p / b : 0) }'
}

awk 'BEGIN { srand(7); for (i = 0; i < 1000000; i++)
       printf "%08d %s\n", int(rand() * 1e8), substr("abcdefghij", 1 + i % 10) }' \
    >"$WORK/lines"
cat >"$WORK/alloc.py" <<'PYEOF'
import threading
def work(seed):
    blocks = []
    sizes = [600, 4000, 20000, 100000, 1 << 20, 3000, 70000]
    for i in range(1700):
        blocks.append(bytearray(sizes[(i * 7 + seed) % len(sizes)]))
        if len(blocks) > 40:
            blocks.pop(0)
threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for t in threads: t.start()
for t in threads: t.join()
PYEOF
cat >"$WORK/objs.py" <<'PYEOF'
d = {}
for i in range(300000):
    d[str(i) * 3] = [i] * (i % 20)
del d
PYEOF
SQL="CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000)
INSERT INTO t SELECT x, hex(randomblob(16)) FROM c;
CREATE INDEX tb ON t(b); SELECT count(*) FROM t;"

printf "%-28s %11s %11s   %s\n" program "no preload" preload ratio
measure "sort (1M lines)" sort "$WORK/lines"
measure "python3 (200 MB, 4 thr)" "$PY" "$WORK/alloc.py"
measure "python3 (300k dict items)" "$PY" "$WORK/objs.py"
command -v sqlite3 >/dev/null &&
  measure "sqlite3 (300k inserts)" sqlite3 :memory: "$SQL"
measure "ls -laR /usr/include" ls -laR /usr/include

#!/bin/bash
# Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
#
# libumemcg-preload.so under real programs nobody here wrote: ls, sort,
# python3 (threads allocating and freeing ~200 MB in many sizes; and ~200
# MB of small objects with its default allocator, whose arenas are
# mmap'd), sqlite3 (300k inserts into an in-memory database) and xz -T2
# (threads). For each, the exit report (UMEMCG_REPORT) must show the
# object-accounted bytes of "process" equal to the live bytes the
# interposer counted and the anon statistic equal to the mapped bytes, and
# the output must match a run without the preload. The small-object job
# must be accounted within 10% of its anonymous RSS. With UMEMCG_ENFORCE=1
# and a small UMEMCG_MAX, python3 (MemoryError, both allocators) and
# sqlite3 must see allocation failure.
# Usage: preload_programs_test.sh <libumemcg-preload.so>
# Exit: 0 pass, 1 fail, 77 skipped (no program found at all).
set -u
LIB=$(readlink -f "$1")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failures=0
ran=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Runs "$@" under the preload; the report goes to $WORK/report.
preloaded() {
  rm -f "$WORK/report"
  UMEMCG_REPORT="$WORK/report" LD_PRELOAD="$LIB" "$@"
}

# Checks the last report: accounted == live (and == 0 with "zero").
check_report() {
  local name=$1 want_zero=${2:-}
  if [[ ! -s "$WORK/report" ]]; then
    fail "$name: no report written"
    return
  fi
  local line live acc mapped anon
  line=$(tail -n 1 "$WORK/report")
  live=$(sed -n 's/.* live_bytes=\([0-9-]*\).*/\1/p' <<<"$line")
  acc=$(sed -n 's/.* accounted_bytes=\([0-9-]*\).*/\1/p' <<<"$line")
  mapped=$(sed -n 's/.* mapped_bytes=\([0-9-]*\).*/\1/p' <<<"$line")
  anon=$(sed -n 's/.* anon_bytes=\([0-9-]*\).*/\1/p' <<<"$line")
  echo "$name: $line"
  [[ "$live" == "$acc" ]] || fail "$name: accounted $acc != live $live"
  [[ "$mapped" == "$anon" ]] || fail "$name: anon $anon != mapped $mapped"
  if [[ -n "$want_zero" && "$live" != 0 ]]; then
    fail "$name: $live bytes still live"
  fi
}

find_python() {
  for p in /usr/bin/python3 "$(command -v python3 2>/dev/null)"; do
    [[ -x "$p" ]] && { echo "$p"; return; }
  done
}

# ---- ls ----
if command -v ls >/dev/null; then
  ran=$((ran + 1))
  ls -la /usr/bin >"$WORK/ls.want"
  preloaded ls -la /usr/bin >"$WORK/ls.got" || fail "ls exited $?"
  cmp -s "$WORK/ls.want" "$WORK/ls.got" || fail "ls output differs"
  check_report ls
fi

# ---- sort: 400k lines ----
if command -v sort >/dev/null; then
  ran=$((ran + 1))
  awk 'BEGIN { srand(7); for (i = 0; i < 400000; i++)
         printf "%08d %s\n", int(rand() * 1e8), substr("abcdefghij", 1 + i % 10) }' \
      >"$WORK/lines"
  sort "$WORK/lines" >"$WORK/sort.want"
  preloaded sort "$WORK/lines" >"$WORK/sort.got" || fail "sort exited $?"
  cmp -s "$WORK/sort.want" "$WORK/sort.got" || fail "sort output differs"
  check_report sort
  # A tiny budget: GNU sort copes with failed buffer allocations by using
  # smaller buffers; the output must still be right.
  rm -f "$WORK/report"
  UMEMCG_ENFORCE=1 UMEMCG_MAX=4M UMEMCG_REPORT="$WORK/report" \
      LD_PRELOAD="$LIB" sort "$WORK/lines" >"$WORK/sort.small" 2>"$WORK/sort.err"
  rc=$?
  if [[ $rc == 0 ]]; then
    cmp -s "$WORK/sort.want" "$WORK/sort.small" ||
        fail "sort under 4M differs"
  else
    grep -qi "memory" "$WORK/sort.err" || fail "sort under 4M: exit $rc"
  fi
  check_report "sort (4M enforced)"
fi

# ---- python3: threads allocating and freeing ~200 MB in many sizes ----
PY=$(find_python)
if [[ -n "$PY" ]]; then
  ran=$((ran + 1))
  cat >"$WORK/alloc.py" <<'PYEOF'
import threading
def work(seed):
    total, blocks = 0, []
    sizes = [600, 4000, 20000, 100000, 1 << 20, 3000, 70000]
    for i in range(1700):
        n = sizes[(i * 7 + seed) % len(sizes)]
        blocks.append(bytearray(n))
        total += n
        if len(blocks) > 40:
            blocks.pop(0)
    return total
results = [0] * 4
def run(k):
    results[k] = work(k)
threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(sum(results))
PYEOF
  want=$("$PY" "$WORK/alloc.py")
  got=$(preloaded "$PY" "$WORK/alloc.py") || fail "python3 exited $?"
  [[ "$want" == "$got" ]] || fail "python3 printed $got, want $want"
  (( want > 200000000 )) || fail "python3 allocated only $want bytes"
  check_report python3
  # Enforced: a 200 MB bytearray under a 64 MiB max is a MemoryError.
  rm -f "$WORK/report"
  if UMEMCG_ENFORCE=1 UMEMCG_MAX=64M LD_PRELOAD="$LIB" \
      "$PY" -c 'bytearray(200 * 1024 * 1024)' 2>"$WORK/py.err"; then
    fail "python3 grew past UMEMCG_MAX=64M"
  else
    grep -q MemoryError "$WORK/py.err" ||
        fail "python3 failed without MemoryError: $(tail -n 1 "$WORK/py.err")"
  fi
fi

# ---- python3, default allocator: ~200 MB of small objects ----
# pymalloc takes its arenas with mmap: accounted (memory.current, read
# through the preload's C API at the peak) within 10% of the process's
# anonymous RSS (/proc/self/smaps_rollup) at the same moment.
if [[ -n "$PY" ]]; then
  cat >"$WORK/small.py" <<'PYEOF'
import ctypes
def anon():
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Anonymous:"):
                return int(line.split()[1]) * 1024
def accounted():
    lib = ctypes.CDLL(None)
    buf = ctypes.create_string_buffer(64)
    if lib.umemcg_preload_sync() != 0:
        return -1
    if lib.umemcg_preload_read_file(None, b"memory.current", buf, 64, None):
        return -1
    return int(buf.value)
data = [(i, str(i) * 3, [i]) for i in range(750_000)]
print(anon(), accounted(), len(data))
PYEOF
  ran=$((ran + 1))
  preloaded "$PY" "$WORK/small.py" >"$WORK/small.out" ||
      fail "python3 small objects exited $?"
  read -r rss acc n <"$WORK/small.out"
  echo "python3 small objects: anonymous RSS $rss, accounted $acc ($n objects)"
  check_report "python3 small objects"
  if [[ -z "$acc" || "$acc" -lt 0 ]] || ((rss < 150000000)); then
    fail "python3 small objects: rss '$rss' accounted '$acc'"
  elif ((acc * 10 < rss * 9 || acc * 10 > rss * 11)); then
    fail "python3 small objects: accounted $acc is not within 10% of $rss"
  fi
  if UMEMCG_ENFORCE=1 UMEMCG_MAX=64M LD_PRELOAD="$LIB" \
      "$PY" "$WORK/small.py" >/dev/null 2>"$WORK/py.err"; then
    fail "python3 small objects grew past UMEMCG_MAX=64M"
  else
    grep -q MemoryError "$WORK/py.err" ||
        fail "python3 small objects failed without MemoryError: $(tail -n 1 "$WORK/py.err")"
  fi
fi

# ---- sqlite3: 300k inserts in memory ----
if command -v sqlite3 >/dev/null; then
  ran=$((ran + 1))
  SQL="CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000)
INSERT INTO t SELECT x, hex(randomblob(16)) FROM c;
CREATE INDEX tb ON t(b);
SELECT count(*), sum(length(b)) FROM t;"
  want=$(sqlite3 :memory: "$SQL")
  got=$(preloaded sqlite3 :memory: "$SQL") || fail "sqlite3 exited $?"
  [[ "$want" == "$got" ]] || fail "sqlite3 printed $got, want $want"
  check_report sqlite3
  if UMEMCG_ENFORCE=1 UMEMCG_MAX=8M LD_PRELOAD="$LIB" \
      sqlite3 :memory: "$SQL" >/dev/null 2>"$WORK/sq.err"; then
    fail "sqlite3 grew past UMEMCG_MAX=8M"
  else
    grep -qi "memory" "$WORK/sq.err" ||
        fail "sqlite3 failed otherwise: $(tail -n 1 "$WORK/sq.err")"
  fi
fi

# ---- xz -T2: two compressing threads, identical output ----
if command -v xz >/dev/null; then
  ran=$((ran + 1))
  awk 'BEGIN { srand(11); for (i = 0; i < 600000; i++)
         printf "%d %s %d\n", i, substr("lorem ipsum dolor sit amet", 1 + i % 20), int(rand() * 1000) }' \
      >"$WORK/text"
  xz -T2 -6 --block-size=4MiB -c "$WORK/text" >"$WORK/xz.want"
  preloaded xz -T2 -6 --block-size=4MiB -c "$WORK/text" >"$WORK/xz.got" ||
      fail "xz exited $?"
  cmp -s "$WORK/xz.want" "$WORK/xz.got" || fail "xz -T2 output differs"
  check_report "xz -T2"
fi

if (( ran == 0 )); then
  echo "SKIPPED: none of ls, sort, python3, sqlite3, xz found"
  exit 77
fi
if (( failures > 0 )); then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS ($ran programs)"

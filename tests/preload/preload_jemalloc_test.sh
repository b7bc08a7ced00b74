#!/bin/bash
# Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
#
# The preload's jemalloc mode (UMEMCG_HEAP=jemalloc with libjemalloc.so.2
# preloaded behind the preload; docs/preload.md) on real programs:
#  - the mode is on (the report says heap=jemalloc and the heap's arena is
#    charged), off without UMEMCG_HEAP, and falls back to the header mode
#    with a warning when jemalloc is not loaded;
#  - python3 (default allocator, and PYTHONMALLOC=malloc) building large
#    structures: memory.current (after umemcg_preload_sync) within 5% of
#    its RssAnon, and the heap's arena holding most of it where the blocks
#    are malloc's;
#  - a thread moved to a group (umemcg_preload_set_group) allocates from
#    that group's arena: its memory.current grows by the data, frees from
#    another group go back to it, and memory.reclaim purges them;
#  - python3 under UMEMCG_MAX=64M UMEMCG_ENFORCE=1 gets MemoryError below
#    64 MiB of data, and under 256M gets further (the limit decides);
#  - a C++ program's operator new throws std::bad_alloc under 64M (and
#    not before 150 MiB under 256M); the malloc family's rules in the mode;
#  - fork: 100 children forked while 4 threads allocate, every one exits
#    and reports exactly (anon == mapped + the arena's charged pages), the
#    same forks in the header mode with jemalloc loaded (every child
#    exits), and python3's multiprocessing pool.
# Usage: preload_jemalloc_test.sh <libumemcg-preload.so> <preload_jemalloc_prog>
#        <libjemalloc.so.2>
# Exit: 0 pass, 1 fail, 77 skipped (no python3).
set -u
LIB=$(readlink -f "$1")
PROG=$(readlink -f "$2")
JE=$(readlink -f "$3")
PY=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
[[ -x "$PY" ]] || { echo "SKIPPED: no python3"; exit 77; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
field() { sed -n "s/.* $1=\([0-9-]*\).*/\1/p" <<<"$2" | head -n 1; }
# Runs "$@" in jemalloc mode (env execs it: only it reports).
jem() { env LD_PRELOAD="$LIB $JE" UMEMCG_HEAP=jemalloc "$@"; }

cat >"$WORK/rss.py" <<'PY'
import ctypes, sys
lib = ctypes.CDLL(None)
def status(key):
    for l in open('/proc/self/status'):
        if l.startswith(key):
            return int(l.split()[1]) * 1024
def read(name):
    buf = ctypes.create_string_buffer(8192)
    if lib.umemcg_preload_read_file(None, name, buf, 8192, None) != 0:
        sys.exit("read_file failed")
    return buf.value.decode()
kind = sys.argv[1]
if kind == 'big':
    xs = [bytes(1000 + (i % 7)) for i in range(250000)]
else:
    xs = [{'a': i, 'b': str(i)} for i in range(700000)]
if lib.umemcg_preload_sync() != 0:
    sys.exit("sync failed")
current = int(read(b"memory.current"))
stat = dict(l.split() for l in read(b"memory.stat").splitlines())
print(current, status('RssAnon:'), stat.get('active_anon', '0'))
PY

cat >"$WORK/oom.py" <<'PY'
import sys
xs = []
try:
    for i in range(1024):
        xs.append(bytearray(1 << 20))
    print("no MemoryError after 1024 MiB")
except MemoryError:
    n = len(xs)
    del xs
    print("MemoryError after", n, "MiB")
PY

# ---- The mode is on, off, or refused ----
out=$(jem UMEMCG_REPORT=stderr "$PY" -c 'print(len(bytes(10**7)))' 2>&1)
line=$(grep 'umemcg-preload: pid' <<<"$out")
charged=$(field heap_charged_bytes "$line")
echo "mode on: heap_charged_bytes=$charged"
[[ -n "$charged" && $charged -gt 1000000 ]] || fail "jemalloc mode not on: $out"
out=$(env LD_PRELOAD="$LIB $JE" UMEMCG_REPORT=stderr "$PY" -c 'print(1)' 2>&1)
grep -q 'heap=jemalloc' <<<"$out" && fail "jemalloc mode without UMEMCG_HEAP: $out"
grep -q 'live_blocks=[1-9]' <<<"$out" || fail "header mode off: $out"
out=$(env LD_PRELOAD="$LIB" UMEMCG_HEAP=jemalloc UMEMCG_REPORT=stderr "$PY" -c 'print(1)' 2>&1)
grep -q 'needs libjemalloc.so.2' <<<"$out" || fail "no warning without jemalloc: $out"
grep -q 'live_blocks=[1-9]' <<<"$out" || fail "no header-mode fallback: $out"

# ---- Accounted vs RssAnon ----
for variant in big small malloc-small; do
  kind=${variant#malloc-}
  envs=()
  [[ $variant == malloc-* ]] && envs=(PYTHONMALLOC=malloc)
  read -r current rss active < <(jem "${envs[@]}" "$PY" "$WORK/rss.py" "$kind")
  ratio=$(awk -v c="${current:-0}" -v r="${rss:-1}" 'BEGIN { printf "%.3f", c / r }')
  echo "python3 $variant: memory.current=$current RssAnon=$rss ratio=$ratio active_anon=$active"
  awk -v x="$ratio" 'BEGIN { exit !(x >= 0.95 && x <= 1.05) }' ||
    fail "python3 $variant: accounted/RssAnon $ratio outside [0.95, 1.05]"
  # Blocks from malloc: most of the usage is the arena's.
  if [[ $variant != small ]]; then
    awk -v a="${active:-0}" -v c="${current:-1}" 'BEGIN { exit !(a > 0.7 * c) }' ||
      fail "python3 $variant: arena active $active of $current"
  fi
done

# ---- A thread's group gets its own arena ----
cat >"$WORK/group.py" <<'PY'
import ctypes, sys
lib = ctypes.CDLL(None)
def cur(g):
    lib.umemcg_preload_sync()
    buf = ctypes.create_string_buffer(64)
    if lib.umemcg_preload_read_file(g, b"memory.current", buf, 64, None) != 0:
        sys.exit("read_file failed")
    return int(buf.value)
if lib.umemcg_preload_set_group(b"tenant") != 0:
    sys.exit("set_group failed")
t0 = cur(b"tenant")
xs = [bytes(4000) for i in range(20000)]  # 80 MB, from tenant's arena
lib.umemcg_preload_set_group(None)
t1, p1 = cur(b"tenant"), cur(None)
del xs  # freed under "process": back to tenant's arena
# (EAGAIN, as the kernel's, when less than asked was reclaimed.)
lib.umemcg_preload_write_file(b"tenant", b"memory.reclaim", b"1G")
print(t0, t1, p1, cur(b"tenant"))
PY
read -r t0 t1 p1 t2 < <(jem "$PY" "$WORK/group.py")
echo "group tenant: before=$t0 with 80 MB=$t1 (process $p1) freed+reclaimed=$t2"
[[ -n "$t2" && $((t1 - t0)) -ge 80000000 && $t1 -le $p1 && $t2 -lt $((t1 / 4)) ]] ||
  fail "tenant group: $t0 $t1 $p1 $t2"

# ---- Limits: MemoryError, bad_alloc ----
for max in 64 256; do
  out=$(jem UMEMCG_MAX=${max}M UMEMCG_ENFORCE=1 UMEMCG_REPORT=stderr "$PY" "$WORK/oom.py" 2>&1)
  n=$(sed -n 's/^MemoryError after \([0-9]*\) MiB$/\1/p' <<<"$out")
  line=$(grep 'umemcg-preload: pid' <<<"$out")
  echo "python3 UMEMCG_MAX=${max}M: MemoryError after ${n:-?} MiB, peak_pages=$(field peak_pages "$line") charge_failures=$(field charge_failures "$line")"
  lo=$((max * 5 / 8)) # the interpreter's own memory comes first
  [[ -n "$n" && $n -ge $lo && $n -lt $max ]] || fail "python3 ${max}M: $out"
  [[ $(field peak_pages "$line") -le $((max * 256)) ]] || fail "python3 ${max}M: peak past max: $line"
  [[ $(field charge_failures "$line") -ge 1 ]] || fail "python3 ${max}M: no charge failure: $line"
done
for max in 64 256; do
  out=$(jem UMEMCG_MAX=${max}M UMEMCG_ENFORCE=1 "$PROG" new 1024 2>&1)
  n=$(sed -n 's/^bad_alloc after \([0-9]*\) MiB$/\1/p' <<<"$out")
  echo "C++ new UMEMCG_MAX=${max}M: bad_alloc after ${n:-?} MiB"
  [[ -n "$n" && $n -ge $((max * 5 / 8)) && $n -lt $max ]] || fail "C++ ${max}M: $out"
done
out=$(jem "$PROG" api 2>&1) || fail "api: $out"
echo "api: $out"

# ---- fork ----
rm -f "$WORK/reports"
out=$(timeout 600 env LD_PRELOAD="$LIB $JE" UMEMCG_HEAP=jemalloc UMEMCG_REPORT="$WORK/reports" "$PROG" fork 100 2>&1)
rc=$?
echo "fork: $out"
[[ $rc == 0 ]] || fail "fork exited $rc: $out"
bad=0
while read -r line; do
  a=$(field anon_bytes "$line") m=$(field mapped_bytes "$line") h=$(field heap_charged_bytes "$line")
  if [[ -z "$h" || $a != $((m + h)) ]]; then
    fail "fork report inexact: $line"
    bad=$((bad + 1))
  fi
done <"$WORK/reports"
reports=$(grep -c . "$WORK/reports")
echo "fork: $reports reports, $bad inexact"
[[ $reports == 101 ]] || fail "fork: $reports reports, expected 101"
# The header mode with jemalloc loaded behind it (never called): the same
# forks, every child exits (they used to hang now and then on the heap
# profiler's mutex, held at the fork by a thread of the parent).
out=$(timeout 600 env LD_PRELOAD="$LIB $JE" "$PROG" fork 100 2>&1)
rc=$?
echo "fork (header mode, jemalloc loaded): $out"
[[ $rc == 0 ]] || fail "fork (header mode, jemalloc loaded) exited $rc: $out"
out=$(timeout 300 env LD_PRELOAD="$LIB $JE" UMEMCG_HEAP=jemalloc "$PY" -c '
import multiprocessing as mp
def f(x): return sum(range(x * 1000))
if __name__ == "__main__":
    with mp.Pool(4) as p: print(sum(p.map(f, range(200))))' 2>&1)
expect=$("$PY" -c 'print(sum(sum(range(x * 1000)) for x in range(200)))')
echo "python3 multiprocessing: $out"
[[ "$out" == "$expect" ]] || fail "multiprocessing: $out (expected $expect)"

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo PASS

#!/bin/bash
# Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
#
# What libumemcg-preload.so costs in wall time, as ratios measured side by
# side: every job runs alternately without and with LD_PRELOAD (accounting
# on, no limit, no report), and the table gives each side's median wall
# time, the spread (25th-75th percentile), the ratio of the medians, and
# the ratio of the median CPU times (user + system of the job and its
# children, from wait4: what a loaded machine disturbs least).
#
#   start-up   /bin/true, 200 runs each (target: <= 1.5x)
#   processes  git on a small repository (~30 git commands) and make -j2
#              on a tree of 24 small C files (target: <= 1.15x)
#   mmap-heavy python3 (default allocator, ~200 MB of small objects in
#              mmap'd arenas) and node (~450 MB of V8 heap) (target:
#              <= 1.2x)
#   others     sort, python3 threads, sqlite3, ls -laR
#
# A benchmark, not a test: run it on a quiet machine and report `uptime`
# with it (it prints it).
# Usage: scripts/preload_overhead.sh [libumemcg-preload.so] [runs] [before.so]
#   runs: repetitions of the longer jobs (default 7); /bin/true runs 200.
#   before.so: another build of the preload (say, before a change): each
#   job then runs without, with before.so and with the first library in
#   turn, and the table adds before.so's medians and the ratio of the two.
set -u
LIB=$(readlink -f "${1:-build/release/lib/libumemcg-preload.so}")
RUNS=${2:-7}
BEFORE=${3:+$(readlink -f "$3")}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)

# ---- Jobs ----
awk 'BEGIN { srand(7); for (i = 0; i < 1000000; i++)
       printf "%08d %s\n", int(rand() * 1e8), substr("abcdefghij", 1 + i % 10) }' \
  >"$WORK/lines"
cat >"$WORK/threads.py" <<'PYEOF'
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
cat >"$WORK/small.py" <<'PYEOF'
data = [(i, str(i) * 3, [i]) for i in range(750_000)]
d = {str(i): i for i in range(300_000)}
del data, d
PYEOF
cat >"$WORK/node.js" <<'JSEOF'
const a = [];
for (let i = 0; i < 2000000; i++) a.push({i, s: "x" + i, v: [i, i + 1]});
const m = new Map();
for (let i = 0; i < 300000; i++) m.set("k" + i, new Array(10).fill(i));
console.log(a.length + m.size);
JSEOF
SQL="CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000)
INSERT INTO t SELECT x, hex(randomblob(16)) FROM c;
CREATE INDEX tb ON t(b); SELECT count(*) FROM t;"
# A small repository and ~30 git commands over it.
mkdir -p "$WORK/repo"
(
  cd "$WORK/repo" && git init -q && git config user.email b@example.com &&
    git config user.name bench &&
    for i in $(seq 1 60); do seq 1 $((i * 20)) >"f$i.txt"; done &&
    git add . && git commit -qm init
) || echo "git setup failed"
cat >"$WORK/git.sh" <<'SHEOF'
cd "$1" || exit 1
for i in $(seq 1 5); do
  echo "$i" >>f1.txt
  git status --short >/dev/null
  git diff --stat >/dev/null
  git add f1.txt
  git commit -qm "change $i"
  git log --oneline -n 5 >/dev/null
  git rev-parse HEAD >/dev/null
done
git reset -q --hard HEAD~5
SHEOF
# A small C tree for make -j2.
mkdir -p "$WORK/tree"
for i in $(seq 1 24); do
  printf '#include <stdio.h>\nint f%d(int x) { return x * %d + printf(""); }\n' \
    "$i" "$i" >"$WORK/tree/f$i.c"
done
printf 'int main(void) { return 0; }\n' >"$WORK/tree/main.c"
cat >"$WORK/tree/Makefile" <<'MKEOF'
SRCS := $(wildcard *.c)
prog: $(SRCS:.c=.o)
	$(CC) -o $@ $^
%.o: %.c
	$(CC) -O1 -c $< -o $@
clean:
	rm -f *.o prog
MKEOF

# ---- The timing harness: alternating runs, medians, spread ----
"$PY" - "$LIB" "$RUNS" "$WORK" "$SQL" "${BEFORE:-}" <<'PYEOF'
import os, shutil, statistics, subprocess, sys, time
lib, runs, work, sql = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
before = sys.argv[5] if len(sys.argv) > 5 and sys.argv[5] else None
py = sys.executable

def run(cmd, preload, setup=None):
    if setup:
        setup()
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload if isinstance(preload, str) else lib
    t = time.perf_counter()
    # posix_spawn: no fork of this (large) interpreter in the measurement.
    pid = os.posix_spawn(cmd[0], cmd, env, file_actions=[
        (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0)])
    _, status, usage = os.wait4(pid, 0)
    dt = time.perf_counter() - t
    if status != 0:
        print(f"  ({' '.join(cmd)} exited with status {status})")
    return dt, usage.ru_utime + usage.ru_stime

def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))]

def measure(name, cmd, n, setup=None, target=None):
    if not shutil.which(cmd[0]) and not os.path.exists(cmd[0]):
        print(f"| {name} | skipped: {cmd[0]} not found | | | |")
        return
    cmd = [shutil.which(cmd[0]) or cmd[0]] + cmd[1:]
    base, pre, cbase, cpre, old, cold = [], [], [], [], [], []
    run(cmd, False, setup)  # warm the page cache
    for i in range(n):
        w, c = run(cmd, False, setup)
        base.append(w)
        cbase.append(c)
        # The two builds in turn, their order swapped every round.
        sides = [(before, old, cold), (True, pre, cpre)] if before else \
                [(True, pre, cpre)]
        for lib_, walls, cpus in (sides if i % 2 == 0 else sides[::-1]):
            w, c = run(cmd, lib_, setup)
            walls.append(w)
            cpus.append(c)
    mb, mp = statistics.median(base), statistics.median(pre)
    cb, cp = statistics.median(cbase), statistics.median(cpre)
    k = 1e3
    row = (f"| {name} | {mb*k:.2f} ({q(base,.25)*k:.2f}-{q(base,.75)*k:.2f}) ")
    if before:
        mo, co = statistics.median(old), statistics.median(cold)
        row += (f"| {mo*k:.2f} ({q(old,.25)*k:.2f}-{q(old,.75)*k:.2f}) "
                f"| {mo/mb:.2f}x | {co/cb if cb else 0:.2f}x ")
    row += (f"| {mp*k:.2f} ({q(pre,.25)*k:.2f}-{q(pre,.75)*k:.2f}) "
            f"| {mp/mb:.2f}x | {cb*k:.2f} / {cp*k:.2f} = "
            f"{(cp/cb if cb else 0):.2f}x |")
    ratios.append(mp / mb)
    if before:
        row += f" {mp/mo:.3f} |"
        old_ratios.append(mo / mb)
    print(row + f" {target or ''} |")

ratios, old_ratios = [], []
def geomean(xs):
    p = 1.0
    for x in xs:
        p *= x
    return p ** (1.0 / len(xs)) if xs else 0.0

if before:
    print("| job | wall without, ms: median (p25-p75) | wall with before.so "
          "| wall ratio | CPU ratio | wall with the preload | wall ratio "
          "| CPU ms without / with = ratio | after / before (wall) "
          "| target |")
    print("|---|---|---|---|---|---|---|---|---|---|")
else:
    print("| job | wall without, ms: median (p25-p75) | wall with the preload "
          "| wall ratio | CPU ms without / with = ratio | target |")
    print("|---|---|---|---|---|---|")
measure("/bin/true start-up (200 runs)", ["/bin/true"], 200, target="<= 1.5x")
reset = lambda: subprocess.run(["git", "-C", work + "/repo", "reset", "-q",
                                "--hard"], check=False)
measure("git, ~30 commands on a small repo", ["bash", work + "/git.sh",
        work + "/repo"], runs, target="<= 1.15x")
clean = lambda: subprocess.run(["make", "-s", "-C", work + "/tree", "clean"],
                               check=False, stdout=subprocess.DEVNULL)
measure("make -j2, 24 C files", ["make", "-s", "-j2", "-C", work + "/tree"],
        runs, setup=clean, target="<= 1.15x")
measure("python3, 200 MB of small objects", [py, work + "/small.py"], runs,
        target="<= 1.2x")
measure("node, ~450 MB of V8 heap", ["node", work + "/node.js"], runs,
        target="<= 1.2x")
measure("python3, 4 threads, 200 MB in blocks", [py, work + "/threads.py"],
        runs)
measure("sort, 1M lines", ["sort", work + "/lines"], runs)
measure("sqlite3, 300k inserts", ["sqlite3", ":memory:", sql], runs)
measure("ls -laR /usr/include", ["ls", "-laR", "/usr/include"], runs)
print()
print(f"geometric mean of the wall ratios: {geomean(ratios):.3f}"
      + (f" (before.so: {geomean(old_ratios):.3f})" if before else ""))
PYEOF
echo
echo "machine: $(nproc) CPUs; $(uptime)"

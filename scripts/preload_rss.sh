#!/bin/bash
# Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
#
# How close libumemcg-preload.so's accounting comes to what the kernel
# sees: each job runs under the preload with UMEMCG_REPORT, while this
# script samples every process of the job every few milliseconds for its
# anonymous memory (/proc/PID/smaps_rollup "Anonymous": the kernel's
# count of the process's anonymous resident pages, heap, arenas, stacks
# and written private pages included). For the job's largest process the
# table compares the peak sampled with the peak the preload accounted
# (memory.peak of "process": heap blocks and charged mappings, plus at
# most nr_cpus x 64 pages held in the per-CPU stocks). Target: within 10%.
#
#   python3  default allocator (pymalloc arenas are mmap'd): small objects,
#            a dict, bytearrays
#   node     V8: ~2M small objects and a Map (heap reserved, committed with
#            mprotect, released by mapping over)
#   g++      cc1plus compiling a template-heavy translation unit (its GC
#            heap is mmap'd)
# Usage: scripts/preload_rss.sh [libumemcg-preload.so]
# The jemalloc mode: UMEMCG_HEAP=jemalloc UMEMCG_RSS_PRELOAD_AFTER=
# /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 scripts/preload_rss.sh
set -u
LIB=$(readlink -f "${1:-build/release/lib/libumemcg-preload.so}")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)

cat >"$WORK/job.py" <<'PYEOF'
data = [(i, str(i) * 3, [i]) for i in range(1_000_000)]
d = {str(i): bytearray(100 + i % 300) for i in range(200_000)}
print(len(data) + len(d))
PYEOF
cat >"$WORK/job.js" <<'JSEOF'
const a = [];
for (let i = 0; i < 2000000; i++) a.push({i, s: "x" + i, v: [i, i + 1]});
const m = new Map();
for (let i = 0; i < 300000; i++) m.set("k" + i, new Array(10).fill(i));
console.log(a.length + m.size);
JSEOF
cat >"$WORK/job.cc" <<'CCEOF'
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>
template <int N> struct F { static int v() { return F<N - 1>::v() + N; } };
template <> struct F<0> { static int v() { return 0; } };
int main() {
  std::map<std::string, std::vector<int>> m;
  std::regex r("a+b*");
  std::unordered_map<int, std::string> u;
  std::variant<int, std::string, double> v = 1;
  std::cout << F<400>::v() << std::regex_match("aab", r) << m.size()
            << u.size() << v.index();
}
CCEOF

"$PY" - "$LIB" "$WORK" <<'PYEOF'
import os, re, subprocess, sys, time
lib, work = sys.argv[1], sys.argv[2]

def tree(root):
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
            ppid = int(st[st.rfind(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(d))
        except OSError:
            pass
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack += children.get(pid, [])
    return out

def job(name, cmd):
    report = f"{work}/{name}.report"
    after = os.environ.get("UMEMCG_RSS_PRELOAD_AFTER", "")
    env = dict(os.environ, LD_PRELOAD=f"{lib} {after}".strip(),
               UMEMCG_REPORT=report)
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    peak = {}  # pid -> (anonymous bytes, command)
    while p.poll() is None:
        for pid in tree(p.pid):
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    anon = next(int(l.split()[1]) * 1024 for l in f
                                if l.startswith("Anonymous:"))
                with open(f"/proc/{pid}/comm") as f:
                    comm = f.read().strip()
            except (OSError, StopIteration):
                continue
            if anon > peak.get(pid, (0, ""))[0]:
                peak[pid] = (anon, comm)
        time.sleep(0.002)
    reports = {}
    with open(report) as f:
        for line in f:
            m = re.search(r"pid=(\d+) .* peak_pages=(\d+)", line)
            if m:
                reports[int(m.group(1))] = int(m.group(2)) * 4096
    pid, (rss, comm) = max(peak.items(), key=lambda kv: kv[1][0])
    acc = reports.get(pid)
    if acc is None:
        print(f"| {name} | {comm} | {rss/2**20:.1f} | no report | | |")
        return
    ok = abs(acc - rss) <= rss * 0.10
    print(f"| {name} | {comm} | {rss/2**20:.1f} | {acc/2**20:.1f} | "
          f"{acc/rss:.3f} | {'yes' if ok else 'NO'} |")

print("| job | largest process | peak anonymous RSS (MiB) | peak accounted "
      "(MiB) | accounted / RSS | within 10% |")
print("|---|---|---|---|---|---|")
job("python3", ["/usr/bin/python3" if os.path.exists("/usr/bin/python3")
                else sys.executable, f"{work}/job.py"])
job("node", ["node", f"{work}/job.js"])
job("g++", ["g++", "-O2", "-c", f"{work}/job.cc", "-o", f"{work}/job.o"])
PYEOF
echo
echo "machine: $(nproc) CPUs; $(uptime)"

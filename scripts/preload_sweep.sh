#!/bin/bash
# Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
#
# Correctness sweep of libumemcg-preload.so over real programs: each
# command runs without and with the preload (UMEMCG_REPORT set, so every
# process of the command writes its exit report), and the table records
# whether the exit code, stdout and stderr are identical, how many
# processes reported, and whether every report is exact (accounted bytes
# == live bytes, anon == mapped). A last column runs the command once more
# under UMEMCG_ENFORCE=1 UMEMCG_MAX=8M and records how it ended (a clean
# failure is an exit code with a message, not a signal).
#
# Usage: scripts/preload_sweep.sh [libumemcg-preload.so] [table.md]
#   table.md: where to write the table as well (default: only stdout)
# Exit: 1 if any command differed or any report was inexact.
set -u
LIB=$(readlink -f "${1:-build/release/lib/libumemcg-preload.so}")
OUT=${2:-}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)
export LC_ALL=C
# Fixed dates: git's commit ids then depend on the content only.
export GIT_AUTHOR_DATE="2026-01-01T00:00:00Z" GIT_COMMITTER_DATE="2026-01-01T00:00:00Z"
export GIT_AUTHOR_NAME=sweep GIT_AUTHOR_EMAIL=s@example.com
export GIT_COMMITTER_NAME=sweep GIT_COMMITTER_EMAIL=s@example.com

# ---- Inputs ----
awk 'BEGIN { srand(5); for (i = 0; i < 400000; i++)
       printf "%08d %s %d\n", int(rand() * 1e8), substr("alpha beta gamma delta", 1 + i % 12, 5), i }' \
  >"$W/lines"
mkdir -p "$W/tree"
for i in $(seq 1 16); do
  printf '#include <stdio.h>\nint f%d(int x) { return x * %d; }\n' "$i" "$i" >"$W/tree/f$i.c"
done
printf 'int f1(int);\nint main(void) { return f1(3) == 3 ? 0 : 1; }\n' >"$W/tree/main.c"
printf 'prog: $(patsubst %%.c,%%.o,$(wildcard *.c))\n\t$(CC) -o $@ $^\n%%.o: %%.c\n\t$(CC) -O1 -c $< -o $@\n' \
  >"$W/tree/Makefile"
cat >"$W/threads.py" <<'EOF'
import threading, hashlib
out = [None] * 4
def work(k):
    blocks, h = [], hashlib.sha256()
    for i in range(3000):
        b = bytearray((i * 7 + k) % 50000 + 100)
        b[0] = i % 256
        blocks.append(b)
        h.update(b[:1])
        if len(blocks) > 50:
            blocks.pop(0)
    out[k] = h.hexdigest()[:16]
ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
print(" ".join(out))
EOF
cat >"$W/pool.py" <<'EOF'
import multiprocessing as mp
def work(n):
    return sum(len(str(i) * 3) for i in range(3000 + n))
if __name__ == "__main__":
    with mp.Pool(4) as p:
        print(sum(p.map(work, range(200), chunksize=5)))
EOF
cat >"$W/job.js" <<'EOF'
const a = [];
for (let i = 0; i < 500000; i++) a.push({i, s: "x" + i});
const m = new Map(a.map(o => [o.s, o.i]));
console.log(a.length, m.get("x4242"), JSON.stringify(a.slice(0, 3)));
EOF
cat >"$W/job.cc" <<'EOF'
#include <map>
#include <string>
#include <vector>
#include <iostream>
int main() {
  std::map<std::string, std::vector<int>> m;
  for (int i = 0; i < 100; ++i) m[std::to_string(i)].push_back(i);
  std::cout << m.size() << "\n";
}
EOF
"$PY" -c 'import json; print(json.dumps([{"a": i, "b": "v%d" % i} for i in range(50000)]))' >"$W/data.json"
cat >"$W/script.cmake" <<'EOF'
set(acc "")
foreach(i RANGE 1 2000)
  math(EXPR sq "${i} * ${i} % 997")
  string(APPEND acc "${sq},")
endforeach()
string(LENGTH "${acc}" len)
string(SHA256 h "${acc}")
message("${len} ${h}")
EOF

# name|command (run by bash -c in $W)
JOBS=(
  "gzip|gzip -9 -c lines | md5sum"
  "bzip2|bzip2 -c lines | md5sum"
  "xz -T2|xz -T2 -6 --block-size=2MiB -c lines | md5sum"
  "zstd -T2|zstd -q -T2 -c lines | md5sum"
  "sort --parallel=2|sort --parallel=2 -S 8M lines | md5sum"
  "perl|perl -e 'my %h; \$h{\$_} = \$_ x 3 for 1..300000; print scalar(keys %h), qq(\\n)'"
  "mawk|mawk '{ c[\$2]++; s += \$3 } END { for (k in c) print k, c[k]; print s }' lines | sort"
  "git|rm -rf r && git init -q r && cd r && cp ../lines . && git add lines && git commit -qm one && sed -i 1d lines && git commit -qam two && git log --format=%H && git diff HEAD~1 --stat"
  "tar|tar --sort=name --mtime=2026-01-01 --owner=0 --group=0 -cf - tree lines | md5sum"
  "g++|g++ -O1 -c job.cc -o job.o && md5sum job.o"
  "make -j2|make -s -C tree clean >/dev/null 2>&1; rm -f tree/*.o tree/prog; make -s -j2 -C tree && ./tree/prog; echo exit \$?"
  "python3 threads|$PY threads.py"
  "python3 multiprocessing|$PY pool.py"
  "bash pipeline|for i in \$(seq 1 2000); do echo \$((i * 7919 % 1000)); done | sort -n | uniq -c | sort -rn | head -n 5; (seq 1 100000 | mawk '{ s += \$1 } END { print s }') & wait"
  "dash|dash -c 'i=0; while [ \$i -lt 3000 ]; do i=\$((i+1)); done; echo \$i; seq 1 500 | wc -l'"
  "find + du|find /usr/include -name '*.h' | sort | md5sum; du -s --apparent-size /usr/include/c++"
  "jq|jq '[.[] | select(.a % 7 == 0) | .b] | length' data.json"
  "bc|echo 'scale=600; 4*a(1)' | bc -l | md5sum"
  "node|node job.js"
  "sqlite3|sqlite3 :memory: 'CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000) INSERT INTO t SELECT x, hex(x * 7919) FROM c; SELECT count(*), max(b) FROM t;'"
  "cmake -P|cmake -P script.cmake"
  "grep + sed + wc|grep -c alpha lines; sed -n 's/ beta / BETA /p' lines | wc -l"
)

failures=0
rows=()
for job in "${JOBS[@]}"; do
  name=${job%%|*}
  cmd=${job#*|}
  first=${cmd%% *}
  [[ "$first" == "$PY" ]] || first=${first##*/}
  if ! command -v "$first" >/dev/null 2>&1 && [[ "$first" != rm && "$first" != for && "$first" != make ]]; then
    rows+=("| $name | \`$first\` not installed | | | | | |")
    continue
  fi
  (cd "$W" && bash -c "$cmd") >"$W/out.a" 2>"$W/err.a"
  rc_a=$?
  rm -f "$W/reports"
  (cd "$W" && UMEMCG_REPORT="$W/reports" LD_PRELOAD="$LIB" bash -c "$cmd") \
    >"$W/out.b" 2>"$W/err.b"
  rc_b=$?
  same_out=yes; cmp -s "$W/out.a" "$W/out.b" || same_out=no
  same_err=yes; cmp -s "$W/err.a" "$W/err.b" || same_err=no
  n=$(grep -c "^umemcg-preload:" "$W/reports" 2>/dev/null)
  exact=yes
  while read -r line; do
    live=$(sed -n 's/.* live_bytes=\([0-9-]*\).*/\1/p' <<<"$line")
    acc=$(sed -n 's/.* accounted_bytes=\([0-9-]*\).*/\1/p' <<<"$line")
    mapped=$(sed -n 's/.* mapped_bytes=\([0-9-]*\).*/\1/p' <<<"$line")
    anon=$(sed -n 's/.* anon_bytes=\([0-9-]*\).*/\1/p' <<<"$line")
    [[ "$live" == "$acc" && "$mapped" == "$anon" ]] || exact=no
  done <"$W/reports"
  # Under a small enforced limit: how it ends.
  (cd "$W" && UMEMCG_ENFORCE=1 UMEMCG_MAX=8M LD_PRELOAD="$LIB" timeout 300 bash -c "$cmd") \
    >/dev/null 2>"$W/err.c"
  rc_c=$?
  msg=$(grep -v "^umemcg-preload" "$W/err.c" | head -n 1 | cut -c 1-60 | tr '|' '/')
  if ((rc_c > 128)); then
    enforced="signal $((rc_c - 128)) $msg"
  elif ((rc_c == 0)); then
    enforced="exit 0 (fits)"
  else
    enforced="exit $rc_c: $msg"
  fi
  verdict=ok
  if [[ $rc_a != "$rc_b" || $same_out == no || $same_err == no || $exact == no || "$n" == 0 ]]; then
    verdict=DIFFERS
    failures=$((failures + 1))
    echo "---- $name differs: rc $rc_a/$rc_b" >&2
    diff "$W/out.a" "$W/out.b" | head -n 5 >&2
    diff "$W/err.a" "$W/err.b" | head -n 5 >&2
  fi
  rows+=("| $name | $rc_a / $rc_b | $same_out | $same_err | $n | $exact | $enforced | $verdict |")
done

{
  echo "| program | exit without / with | stdout identical | stderr identical | processes reported | every report exact | UMEMCG_ENFORCE=1 UMEMCG_MAX=8M | verdict |"
  echo "|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "$((${#JOBS[@]})) commands, $failures differing; glibc $(ldd --version | head -n 1 | sed 's/.* //'); $(nproc) CPUs; $(uptime | sed 's/.*load/load/')"
} | tee "${OUT:-/dev/null}"
exit $((failures > 0))

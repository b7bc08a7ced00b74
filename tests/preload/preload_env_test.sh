#!/bin/bash
# Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
#
# libumemcg-preload.so's environment and its messages, on real programs:
#  - UMEMCG_MOUNT / UMEMCG_METRICS are acted on by the preloaded process
#    only, whatever it is (bash, dash, python3 with subprocess, under
#    env -i): its children never see them, so they never mount or bind
#    again; a bash -c pipeline with UMEMCG_MOUNT makes exactly one mount
#    and prints no warning;
#  - the exit report reaches stderr even from programs that close it at
#    exit (sort, ls, cat: coreutils' close_stdout), through a descriptor
#    that is close-on-exec (children do not inherit it) and not fd 3;
#    a forked child's report names the child;
#  - a metrics port in use and a missing or non-directory mount point are
#    reported with their cause and the address or path;
#  - a plain preload does not load the operations module (libfuse3,
#    cpp-httplib, libstdc++.so stay out of the process), nor libm.
# Usage: preload_env_test.sh <libumemcg-preload.so>
# Exit: 0 pass, 1 fail, 77 when the mount parts could not run (no
# /dev/fuse); everything else passed then.
set -u
LIB=$(readlink -f "$1")
WORK=$(mktemp -d)
MNT="$WORK/mnt"
mkdir "$MNT"
HOLDER=
cleanup() {
  [[ -n "$HOLDER" ]] && kill "$HOLDER" 2>/dev/null
  grep -q " $MNT " /proc/mounts && fusermount3 -u "$MNT" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../ops_shell_lib.sh"

PY=/usr/bin/python3
[[ -x "$PY" ]] || PY=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
[[ -x "$PY" ]] || { echo "SKIPPED: needs python3"; exit 77; }

free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ---- A plain preload loads nothing but itself ----
maps=$(LD_PRELOAD="$LIB" cat /proc/self/maps)
for lib in libfuse3 libcpp-httplib libstdc++ libumemcg-preload-ops; do
  grep -q "$lib" <<<"$maps" && fail "a plain preload loaded $lib"
done
# Nor libm (cat does not need it): the preload depends on libc alone, and
# loading libm cost every preloaded process 10-13% of /bin/true's start-up.
grep -qE '/libm[.-]' <<<"$maps" && fail "a plain preload loaded libm"

# ---- Children never see UMEMCG_METRICS / UMEMCG_MOUNT ----
# Each parent prints how many of its children's environments still hold
# the variable (must be 0); with a fixed port, a child that did bind again
# would also print "Address already in use".
check_parent() {  # name, command...
  local name=$1
  shift
  local port
  port=$(free_port)
  local out
  out=$(env UMEMCG_METRICS="127.0.0.1:$port" LD_PRELOAD="$LIB" "$@" \
    2>"$WORK/err")
  local rc=$?
  echo "$name: children seeing UMEMCG_METRICS: '$out'; stderr: $(head -c 300 "$WORK/err")"
  [[ $rc == 0 ]] || fail "$name exited $rc"
  [[ "$out" == 0 ]] || fail "$name: children saw UMEMCG_METRICS ($out)"
  [[ -s "$WORK/err" ]] && fail "$name printed warnings: $(head -n 3 "$WORK/err")"
}
check_parent bash bash -c 'env | grep -c "^UMEMCG_METRICS=" ; :' 
check_parent "bash pipeline" bash -c \
  'n=$(env | grep "^UMEMCG" | grep -c METRICS); bash -c "env" | grep -c "^UMEMCG_METRICS=" >/dev/null; echo $n'
check_parent dash dash -c 'env | grep -c "^UMEMCG_METRICS=" ; :'
check_parent "python3 subprocess" "$PY" -c '
import subprocess
out = subprocess.run(["env"], capture_output=True, text=True).stdout
print(out.count("UMEMCG_METRICS="))'
check_parent "env -i" env -i PATH="$PATH" bash -c \
  'env | grep -c "^UMEMCG_METRICS=" ; :'

# ---- Messages that name the cause ----
port=$(free_port)
"$PY" -c '
import socket, sys, time, os
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
open(sys.argv[2], "w").close()
time.sleep(120)' "$port" "$WORK/listening" &
HOLDER=$!
for _ in $(seq 300); do [[ -e "$WORK/listening" ]] && break; sleep 0.1; done
UMEMCG_METRICS="127.0.0.1:$port" LD_PRELOAD="$LIB" /bin/true 2>"$WORK/err"
echo "port in use: $(cat "$WORK/err")"
grep -q "UMEMCG_METRICS=127.0.0.1:$port not served: cannot bind 127.0.0.1:$port: Address already in use" \
  "$WORK/err" || fail "port in use: '$(cat "$WORK/err")'"
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null
HOLDER=
if [[ -z "$MOUNT_SKIP" ]]; then
  UMEMCG_MOUNT="$WORK/nowhere" LD_PRELOAD="$LIB" /bin/true 2>"$WORK/err"
  echo "missing mount point: $(cat "$WORK/err")"
  grep -q "UMEMCG_MOUNT=$WORK/nowhere not mounted: $WORK/nowhere: No such file or directory" \
    "$WORK/err" || fail "missing mount point: '$(cat "$WORK/err")'"
  touch "$WORK/file"
  UMEMCG_MOUNT="$WORK/file" LD_PRELOAD="$LIB" /bin/true 2>"$WORK/err"
  echo "not a directory: $(cat "$WORK/err")"
  grep -q "UMEMCG_MOUNT=$WORK/file not mounted: $WORK/file: not a directory" \
    "$WORK/err" || fail "mount point not a directory: '$(cat "$WORK/err")'"
fi

# ---- A bash pipeline with UMEMCG_MOUNT: one mount, no warnings ----
if [[ -z "$MOUNT_SKIP" ]]; then
  out=$(UMEMCG_MOUNT="$MNT" LD_PRELOAD="$LIB" bash -c \
    "ls /usr/bin | sort | head -n 3 >/dev/null; grep -c ' $MNT ' /proc/mounts;
     cat $MNT/process/memory.current >/dev/null && echo readable" 2>"$WORK/err")
  echo "bash -c pipeline with UMEMCG_MOUNT: $(tr '\n' ' ' <<<"$out")"
  [[ "$out" == $'1\nreadable' ]] ||
    fail "bash pipeline: expected one readable mount, got '$out'"
  [[ -s "$WORK/err" ]] && fail "bash pipeline printed: $(head -n 3 "$WORK/err")"
  for _ in $(seq 300); do
    grep -q " $MNT " /proc/mounts || break
    sleep 0.1
  done
  grep -q " $MNT " /proc/mounts && fail "$MNT still mounted after bash exited"
fi

# ---- The exit report reaches the user ----
printf 'b\na\nc\n' >"$WORK/lines"
for prog in "sort $WORK/lines" "ls $WORK" "cat $WORK/lines"; do
  # shellcheck disable=SC2086
  UMEMCG_REPORT=stderr LD_PRELOAD="$LIB" $prog >/dev/null 2>"$WORK/err"
  n=$(grep -c "^umemcg-preload: pid=[0-9]* live_bytes=" "$WORK/err")
  echo "${prog%% *}: $(head -n 1 "$WORK/err")"
  [[ "$n" == 1 ]] || fail "${prog%% *}: $n report lines on stderr"
done
# To a file, from a program that changes directory before it exits.
(cd "$WORK" && UMEMCG_REPORT=report.txt LD_PRELOAD="$LIB" bash -c 'cd /; ls >/dev/null; :')
[[ $(grep -c "^umemcg-preload: pid=" "$WORK/report.txt" 2>/dev/null) == 2 ]] ||
  fail "UMEMCG_REPORT=report.txt: $(cat "$WORK/report.txt" 2>&1)"
# The duplicate is close-on-exec (a child sees the descriptors it would
# without the preload) and not fd 3.
list_fds='LD_PRELOAD= ls /proc/self/fd | tr "\n" " "; :'
want=$(bash -c "$list_fds" 2>/dev/null)
fds=$(UMEMCG_REPORT=stderr LD_PRELOAD="$LIB" bash -c "$list_fds" 2>/dev/null)
[[ "$fds" == "$want" ]] || fail "a child inherited descriptors: $fds, not $want"
first_open='import os; print(os.open("/dev/null", os.O_RDONLY))'
want=$("$PY" -c "$first_open")
first=$(UMEMCG_REPORT=stderr LD_PRELOAD="$LIB" "$PY" -c "$first_open" 2>/dev/null)
[[ "$first" == "$want" ]] || fail "the first open() returned $first, not $want"
# The duplicate takes no number a script may use (issue: it sat at fd 100,
# so bash's `exec 100>f; echo x >&100` wrote to stderr and left f empty):
# the script's file gets its line, and the preloaded process's own
# descriptors are its usual ones plus one at the top of its soft
# RLIMIT_NOFILE (at most 1023).
rm -f "$WORK/fd100"
UMEMCG_REPORT=stderr LD_PRELOAD="$LIB" bash -c \
  "exec 100>'$WORK/fd100'; echo x >&100; exec 7>'$WORK/fd7'; echo y >&7" \
  2>"$WORK/err"
[[ "$(cat "$WORK/fd100" 2>/dev/null)" == x ]] ||
  fail "exec 100>f; echo x >&100 left f '$(cat "$WORK/fd100" 2>&1)' (stderr: $(cat "$WORK/err"))"
[[ "$(cat "$WORK/fd7" 2>/dev/null)" == y ]] || fail "exec 7>f: f is not 'y'"
grep -q "^umemcg-preload: pid=" "$WORK/err" || fail "no report after exec 100>f"
# The descriptors open on the preloaded bash's stderr file: fd 2 and the
# duplicate, at the top of the soft RLIMIT_NOFILE (at most 1023).
on_stderr='for f in /proc/$$/fd/*; do [[ $(readlink "$f") == "$0" ]] && echo "${f##*/}"; done; :'
top=$(($(ulimit -n) < 1024 ? $(ulimit -n) - 1 : 1023))
got=$(UMEMCG_REPORT=stderr LD_PRELOAD="$LIB" bash -c "$on_stderr" "$WORK/err2" \
  2>"$WORK/err2" | sort -n | tr '\n' ' ')
[[ "$got" == "2 $top " ]] ||
  fail "the preloaded bash has '$got' open on its stderr, not '2 $top '"
echo "descriptors on stderr: $got"
# A forked child (no exec) reports itself, with its own pid.
UMEMCG_REPORT=stderr LD_PRELOAD="$LIB" "$PY" -c '
import os, sys
pid = os.fork()
if pid == 0:
    sys.exit(0)
os.waitpid(pid, 0)
print(pid)' >"$WORK/child" 2>"$WORK/err"
child=$(cat "$WORK/child")
grep -q "^umemcg-preload: pid=$child " "$WORK/err" ||
  fail "no report from the forked child $child: $(cat "$WORK/err")"
[[ $(grep -c "^umemcg-preload: pid=" "$WORK/err") == 2 ]] ||
  fail "expected the parent's and the child's reports: $(cat "$WORK/err")"

finish

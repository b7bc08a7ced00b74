# Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
#
# Shared by the shell tests that run a program with a metrics endpoint and
# a FUSE mount (preload/preload_ops_test.sh,
# integrations/tenant_cache_ops_test.sh). Source it; it sets:
#   failures, fail MESSAGE        count a failure and print it
#   MOUNT_SKIP                    why the mount part cannot run, or empty
#   finish                        exit 1 on failures, 77 when the mount part
#                                 was skipped, else 0 (PASS)

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

MOUNT_SKIP=
if [[ ! -c /dev/fuse ]] || ! : 2>/dev/null <>/dev/fuse; then
  MOUNT_SKIP="/dev/fuse is missing or cannot be opened"
fi

finish() {
  if ((failures > 0)); then
    echo "$failures failure(s)"
    exit 1
  fi
  if [[ -n "$MOUNT_SKIP" ]]; then
    echo "SKIPPED (mount part; metrics passed): $MOUNT_SKIP"
    exit 77
  fi
  echo PASS
  exit 0
}

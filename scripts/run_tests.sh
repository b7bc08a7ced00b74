#!/usr/bin/env bash
# Configures, builds and runs ctest for each preset given; prints one
# summary line "test: N passed, N failed" and fails if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
passed=0
failed=0
status=0
for preset in "$@"; do
  echo "=== preset ${preset}: configure + build"
  if ! cmake --preset "${preset}" >/dev/null || ! cmake --build --preset "${preset}"; then
    echo "=== preset ${preset}: BUILD FAILED"
    status=1
    failed=$((failed + 1))
    continue
  fi
  echo "=== preset ${preset}: ctest"
  log=$(mktemp)
  ctest --preset "${preset}" 2>&1 | tee "${log}"
  rc=${PIPESTATUS[0]}
  line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "${log}" | tail -n 1)
  if [ -n "${line}" ]; then
    f=$(echo "${line}" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/')
    t=$(echo "${line}" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/')
    passed=$((passed + t - f))
    failed=$((failed + f))
  else
    failed=$((failed + 1))
  fi
  rm -f "${log}"
  [ "${rc}" -eq 0 ] || status=1
done
echo "test: ${passed} passed, ${failed} failed"
exit "${status}"

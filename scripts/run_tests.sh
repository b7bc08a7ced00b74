#!/usr/bin/env bash
# Configures, builds and runs ctest for each preset given; the preset
# "fuzz" instead builds the libFuzzer targets (clang) and runs each for
# FUZZ_SECONDS (default 60) over its committed seed corpus. Prints one
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
  if [ "${preset}" = fuzz ]; then
    for fuzzer in build/fuzz/bin/*_fuzz; do
      name=$(basename "${fuzzer}" _fuzz)
      scratch=$(mktemp -d)
      dict=()
      if [ -f "tests/fuzz/dict/${name}.dict" ]; then
        dict=(-dict="tests/fuzz/dict/${name}.dict")
      fi
      echo "=== fuzz ${name}: ${FUZZ_SECONDS:-60} s over tests/fuzz/corpus/${name}"
      if "${fuzzer}" -max_total_time="${FUZZ_SECONDS:-60}" -print_final_stats=1 \
          "${dict[@]}" "${scratch}" "tests/fuzz/corpus/${name}" \
          >"${scratch}.log" 2>&1; then
        tail -n 3 "${scratch}.log"
        passed=$((passed + 1))
      else
        tail -n 40 "${scratch}.log"
        echo "=== fuzz ${name}: FAILED (add the crash input above to tests/fuzz/corpus/${name})"
        failed=$((failed + 1))
        status=1
      fi
      rm -rf "${scratch}" "${scratch}.log"
    done
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

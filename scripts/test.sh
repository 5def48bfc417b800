#!/usr/bin/env bash
# Builds flare and runs the whole test suite three times: a plain build
# (warnings are errors), AddressSanitizer + UndefinedBehaviorSanitizer, and
# ThreadSanitizer, each in its own build directory; then, when clang is
# installed, runs the libFuzzer targets for a bounded time (ctest -L fuzz,
# FLARE_FUZZ_SECONDS each, default 20).
# Usage: scripts/test.sh [plain|asan|tsan|fuzz ...]   (default: all four)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
variants=("$@")
[ ${#variants[@]} -eq 0 ] && variants=(plain asan tsan fuzz)
jobs=$(nproc)
for variant in "${variants[@]}"; do
  if [ "$variant" = fuzz ]; then
    # libFuzzer comes with clang only; the fuzz build compiles the fuzz
    # targets alone (the tests above already cover the rest).
    if ! command -v clang >/dev/null 2>&1; then
      echo "== fuzz: skipped: clang is not installed"
      continue
    fi
    build="build/test-fuzz"
    echo "== fuzz: building in $build"
    CC=clang cmake -S . -B "$build" -DFLARE_FUZZ=ON -DFLARE_BUILD_TESTS=OFF \
          -DFLARE_BUILD_BENCH=OFF -DFLARE_WERROR=ON \
          -DFLARE_FUZZ_SECONDS="${FLARE_FUZZ_SECONDS:-20}" >/dev/null
    cmake --build "$build" -j"$jobs" --target fuzz_rules_parse
    echo "== fuzz: fuzzing"
    ctest --test-dir "$build" -L fuzz --output-on-failure
    continue
  fi
  case "$variant" in
    plain) sanitize="" ; type=RelWithDebInfo ;;
    asan)  sanitize="address,undefined" ; type=Debug ;;
    tsan)  sanitize="thread" ; type=RelWithDebInfo ;;
    *) echo "scripts/test.sh: unknown variant '$variant' (plain, asan, tsan, fuzz)" >&2; exit 2 ;;
  esac
  build="build/test-$variant"
  echo "== $variant: building in $build"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="$type" -DFLARE_SANITIZE="$sanitize" \
        -DFLARE_WERROR=ON >/dev/null
  cmake --build "$build" -j"$jobs"
  echo "== $variant: testing"
  runner=()
  if [ "$variant" = tsan ]; then
    # ThreadSanitizer cannot map its shadow memory under the high ASLR
    # entropy of recent kernels; run the tests without randomisation.
    runner=(setarch "$(uname -m)" -R)
    export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
  fi
  if [ "$variant" = asan ]; then
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  fi
  "${runner[@]}" ctest --test-dir "$build" --output-on-failure -j2 --timeout 300
done
